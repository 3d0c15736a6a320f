//===- EpilogueMath.h - arith/math expansions of epilogue ops ---*- C++ -*-===//
//
// The scalar arithmetic that defines coda's activations, reductions and
// dropout. Every lowering (the CPU reference through linalg, the GPU kernels)
// builds these ops through the functions here, and the raising from linalg
// recognises them by the same definitions, so all targets compute the same
// function.
//
//===----------------------------------------------------------------------===//

#ifndef CODA_DIALECT_CODA_UTILS_EPILOGUEMATH_H
#define CODA_DIALECT_CODA_UTILS_EPILOGUEMATH_H

#include "coda/Dialect/Coda/IR/CodaAttrs.h"
#include "mlir/Dialect/LLVMIR/LLVMAttrs.h"
#include "mlir/IR/Builders.h"

#include <array>
#include <functional>

namespace mlir::coda {

/// The primitives the activations are made of besides plain arithmetic: an
/// exponential, a division and optionally a fast tanh. A target may build
/// faster equivalents (the GPU's ex2.approx and div.approx, each within 2
/// ulp); exact() builds math.exp2 and arith.divf. Other math ops in a
/// formula (math.erf for gelu_erf) are the same on every target.
struct ActivationPrimitives {
  /// 2^t.
  std::function<Value(OpBuilder &, Location, Value t)> exp2;
  /// p / q.
  std::function<Value(OpBuilder &, Location, Value p, Value q)> divide;
  /// tanh(t) as one approximate instruction, if wanted: GELU(tanh), SiLU
  /// and sigmoid are then built on it (one tanh instead of an exponential and
  /// a division, at the tanh's accuracy).
  std::function<Value(OpBuilder &, Location, Value t)> fastTanh;
  /// Whether erf (GELU(erf) and its derivative) is the rational
  /// approximation 7.1.26 of Abramowitz and Stegun on exp2 and divide
  /// (absolute error 1.5e-7 in exact arithmetic, 4.7e-7 in f32; on the GPU
  /// one division, one exponential and 7 multiply-adds: with libdevice's erff
  /// GPT-2's fc1 + GELU(erf) took 1.44x its time with GELU(tanh)), rather
  /// than math.erf.
  bool rationalErf = false;

  static ActivationPrimitives exact();
};

/// Builds the formula of activation `kind` on the value `x` (f32; f64 in
/// the CPU reference's widened programs).
Value buildActivation(
    OpBuilder &b, Location loc, ActivationKind kind, Value x,
    const ActivationPrimitives &primitives = ActivationPrimitives::exact());

/// Builds the derivative of activation `kind` at `x`, d kind(x) / dx, from
/// the same primitives as buildActivation (relu's is 0 at x = 0).
Value buildActivationDerivative(
    OpBuilder &b, Location loc, ActivationKind kind, Value x,
    const ActivationPrimitives &primitives = ActivationPrimitives::exact());

/// Builds coda.round: `x` rounded to `narrow` (bf16 or f16, to nearest even)
/// and extended back to x's type (f32; f64 in the widened programs, which
/// round to f32 first).
Value buildRounding(OpBuilder &b, Location loc, Value x, Type narrow);

//===----------------------------------------------------------------------===//
// Reductions (coda.row_reduce, coda.col_reduce)
//===----------------------------------------------------------------------===//
//
// A reduction of `kind` combines the elements along the reduced dim, starting
// from its identity, with buildReductionCombine; a mean then divides the
// combination by the number of elements. Each target builds its own loops,
// shuffles or atomics around these pieces.

/// The value that leaves a reduction of `kind` unchanged: 0 for sum and mean,
/// -inf for max. It pads lanes out of bounds and initializes column outputs.
double getReductionIdentity(ReductionKind kind);

/// Builds the combination of two partial values of a reduction of `kind`:
/// arith.addf for sum and mean, arith.maximumf for max.
Value buildReductionCombine(OpBuilder &b, Location loc, ReductionKind kind,
                            Value x, Value y);

/// Whether `op` is the combination buildReductionCombine builds for `kind`.
bool isReductionCombine(ReductionKind kind, Operation *op);

/// The atomicrmw operation that combines a block's partial value of a
/// reduction of `kind` into memory: fadd for sum and mean (each part already
/// divided by the count), fmax for max.
LLVM::AtomicBinOp getReductionAtomicOp(ReductionKind kind);

/// Whether a reduction of `kind` divides the combination of its elements by
/// their number (mean).
bool reductionDividesByCount(ReductionKind kind);

/// Whether a reduction of `kind` of a value that is uniform along the reduced
/// dim is that value times the number of elements (sum). Otherwise it is the
/// value itself (max, mean).
bool reductionScalesUniformValue(ReductionKind kind);

//===----------------------------------------------------------------------===//
// Dropout
//===----------------------------------------------------------------------===//

/// Builds Philox-4x32-10 on a counter of four i32 values and a key of two i32
/// values, returning its four i32 output words.
std::array<Value, 4> buildPhilox4x32(OpBuilder &b, Location loc,
                                     std::array<Value, 4> counter,
                                     std::array<Value, 2> key);

/// The Philox key of a dropout seed (i64): its low and high 32-bit halves.
std::array<Value, 2> buildDropoutKey(OpBuilder &b, Location loc, Value seed);

/// Builds the four Philox output words that decide dropout for the group of
/// 8 elements of row (`batch`, `row`) that column `col` belongs to (i32
/// values), as coda.dropout defines them: every column of one group gives the
/// same words.
std::array<Value, 4> buildDropoutWords(OpBuilder &b, Location loc, Value seed,
                                       int32_t stream, Value batch, Value row,
                                       Value col);

/// Picks the 16 random bits (an i32 in [0, 65536)) of column `col` out of the
/// words of its group. Only bits 0, 3 and 4 of `col` matter: a caller that
/// knows them statically may pass them as a constant.
Value buildDropoutSlice(OpBuilder &b, Location loc, std::array<Value, 4> words,
                        Value col);

/// Builds the 16 random bits (an i32 in [0, 65536)) that decide dropout for
/// the element at (`batch`, `row`, `col`) (i32 values), as coda.dropout
/// defines them.
Value buildDropoutBits(OpBuilder &b, Location loc, Value seed, int32_t stream,
                       Value batch, Value row, Value col);

/// Builds inverted dropout of the float value `x` given its 16 random bits:
/// `bits >= threshold ? x * 65536 / (65536 - threshold) : 0`.
Value buildDropoutApply(OpBuilder &b, Location loc, Value x, Value bits,
                        uint32_t threshold);

/// Builds buildDropoutApply(x) + `y` as `bits >= threshold ? x * scale + y :
/// y` (the same but for a -0 y where x is dropped, which gives -0 rather
/// than +0), whose product and sum can contract into one fma.
Value buildDropoutApplyAdd(OpBuilder &b, Location loc, Value x, Value bits,
                           uint32_t threshold, Value y);

} // namespace mlir::coda

#endif // CODA_DIALECT_CODA_UTILS_EPILOGUEMATH_H
