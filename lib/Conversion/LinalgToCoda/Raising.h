//===- Raising.h - shared pieces of the linalg to coda raising --*- C++ -*-===//
//
// The raising sees every tensor dimension and every loop of a structured op as
// running along one dimension of the GEMM output space, named by its #coda.dims
// bit (DimsAttr::kB, kM or kN), or as a unit dimension of size 1 (kUnit).
//
//===----------------------------------------------------------------------===//

#ifndef CODA_LIB_CONVERSION_LINALGTOCODA_RAISING_H
#define CODA_LIB_CONVERSION_LINALGTOCODA_RAISING_H

#include "coda/Conversion/LinalgToCoda/LinalgToCoda.h"
#include "coda/Dialect/Coda/IR/CodaOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/IR/PatternMatch.h"
#include "llvm/Support/raw_ostream.h"

#include <optional>
#include <string>

namespace mlir::coda::raising {

/// `value` as the IR printer spells it, for diagnostics.
template <typename T> std::string print(const T &value) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << value;
  return text;
}

/// The axis of a dimension of size 1, which runs along no output-space dim.
constexpr unsigned kUnit = 0;

/// The output-space axis of each loop of a structured op; std::nullopt for a
/// loop that is not one (the contraction's K).
using LoopAxes = SmallVector<std::optional<unsigned>>;

/// Whether `op` only moves data: one input, one init, all loops parallel, a
/// permutation as the init's map and a body that yields the input element
/// (linalg.transpose, linalg.broadcast, linalg.copy, linalg.fill and their
/// generic spellings).
bool isDataMovement(linalg::LinalgOp op);

/// Whether `op` widens bf16 or f16 elements to f32 and does nothing else,
/// which is exactly what coda.gemm does to a narrow epilogue input.
bool isExactWidening(linalg::LinalgOp op);

/// A tensor (or scalar) read by a structured op, after looking through the
/// data movement that produced it: the op reads `source` at `map` of its loops.
struct ResolvedOperand {
  Value source;
  AffineMap map;
};

/// What reading the result of `producer`, a data-movement or widening op, at
/// `map` reads of its input.
ResolvedOperand readThrough(linalg::LinalgOp producer, AffineMap map);

/// What reading the result of `op` at `map` reads of its source when `op` is
/// a tensor.collapse_shape or tensor.expand_shape that only drops or adds
/// dims of static size 1 (torch-mlir's and StableHLO's keepdim reductions);
/// std::nullopt for any other op.
std::optional<ResolvedOperand> readThroughUnitReshape(Operation *op,
                                                      AffineMap map);

/// Whether `op` is a reshape readThroughUnitReshape reads through.
bool isUnitReshape(Operation *op);

/// Follows `value`, read at `map`, back through data-movement producers and
/// unit-dim reshapes.
ResolvedOperand resolveOperand(Value value, AffineMap map);

/// How a contraction maps onto the operands of coda.gemm.
struct GemmOperands {
  Value a, b;
  bool transposeA = false, transposeB = false;
  /// The axis of each loop of the contraction (K is std::nullopt).
  LoopAxes loops;
  /// The DimsAttr mask of the output space.
  unsigned space = 0;
};

/// Matches `op` as a contraction that coda.gemm computes exactly (or, with
/// `lowPrecision`, one that accumulates in bf16/f16). On failure, `why` says
/// what does not fit.
FailureOr<GemmOperands> matchContraction(linalg::LinalgOp op, bool lowPrecision,
                                         std::string &why);

/// Replaces arith/math formulas of one value in `epilogue` that compute an
/// activation function by coda.activation, and erases what becomes dead.
void raiseActivations(RewriterBase &rewriter, Block &epilogue);

/// Makes each raised coda.gemm under `root` whose epilogue reads, as an
/// [m, n] input, the plain product of the same A by another B (a gated MLP's
/// gate and up projections) one GEMM over the two B interleaved, the other
/// product read as `coda.partner(acc, 1)` and the outputs written at the
/// even columns (GatedPairs.cpp); with `options.explain`, says why where it
/// does not.
void pairGatedProducts(RewriterBase &rewriter, Operation *root,
                       const RaiseLinalgOptions &options);

/// Whether `tensor` is filled with zeros (a linalg.fill of 0.0 or a zero
/// splat constant), as a product's init that adds nothing.
bool isZeroFilled(Value tensor);

/// Erases each op of `ops` that nothing reads, then, in turn, each op they
/// read that nothing reads any more.
void eraseDeadOps(RewriterBase &rewriter, ArrayRef<Operation *> ops);

/// Rewrites each contraction under `root` whose A is computed from a tensor
/// x by elementwise ops affine in x with row and column coefficients (a
/// normalization: RMSNorm, LayerNorm) into a contraction of x by B scaled
/// along K and an elementwise op that applies the row and column terms, for
/// the raising to fuse; A is then no longer computed. Only where every
/// reader of A is such a contraction and the work on B does not exceed the
/// operand's traffic (NormFolding.cpp); with `options.explain`, says why
/// where it does not.
void foldNormalizations(RewriterBase &rewriter, Operation *root,
                        const RaiseLinalgOptions &options);

/// Replaces each linalg.generic under `root` that computes a single element
/// from constants (JAX's `N - ddof` and its `N - ddof > 0` guard in a
/// variance) by a constant, and each tensor.extract of it by the scalar, so
/// that an epilogue reads them as constants, not as inputs
/// (ConstantScalars.cpp). Returns the constants it made.
SmallVector<Operation *> foldConstantScalars(RewriterBase &rewriter,
                                             Operation *root);

} // namespace mlir::coda::raising

#endif // CODA_LIB_CONVERSION_LINALGTOCODA_RAISING_H
