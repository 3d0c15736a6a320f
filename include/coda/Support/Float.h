//===- Float.h - conversions between f32 and 16-bit floats ------*- C++ -*-===//
//
// Round-to-nearest-even conversions between f32 and the 16-bit float formats
// coda computes with (bf16, f16), on the host. They define how host data is
// rounded to a GEMM's operand type, so every tool rounds the same way.
//
//===----------------------------------------------------------------------===//

#ifndef CODA_SUPPORT_FLOAT_H
#define CODA_SUPPORT_FLOAT_H

#include <cstdint>

namespace mlir::coda {

/// Rounds `value` to bf16 (round to nearest even; NaN stays a quiet NaN).
uint16_t floatToBF16(float value);
/// Widens a bf16 bit pattern to f32 (exact).
float bf16ToFloat(uint16_t bits);
/// Rounds `value` to IEEE binary16 (round to nearest even, with subnormals;
/// values beyond the f16 range become infinities).
uint16_t floatToF16(float value);
/// Widens an IEEE binary16 bit pattern to f32 (exact).
float f16ToFloat(uint16_t bits);

} // namespace mlir::coda

#endif // CODA_SUPPORT_FLOAT_H
