//===- CodaToLinalg.h - coda to linalg reference lowering -------*- C++ -*-===//

#ifndef CODA_CONVERSION_CODATOLINALG_CODATOLINALG_H
#define CODA_CONVERSION_CODATOLINALG_CODATOLINALG_H

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/DialectConversion.h"

namespace mlir::coda {

/// The types of the reference lowering: unchanged, or, `widenToF64`, every
/// float type (and tensor of floats) widened to f64, so that the reference
/// computes a program's function in double precision (for gradient checks).
TypeConverter getCodaToLinalgTypeConverter(bool widenToF64);

/// Adds the patterns that rewrite coda.gemm into linalg ops on tensors,
/// computing in the type `converter` gives f32 (f32 or f64).
void populateCodaToLinalgConversionPatterns(const TypeConverter &converter,
                                            RewritePatternSet &patterns);

} // namespace mlir::coda

#endif // CODA_CONVERSION_CODATOLINALG_CODATOLINALG_H
