//===- LinalgToCoda.h - raise linalg contractions to coda.gemm --*- C++ -*-===//

#ifndef CODA_CONVERSION_LINALGTOCODA_LINALGTOCODA_H
#define CODA_CONVERSION_LINALGTOCODA_LINALGTOCODA_H

#include "coda/Dialect/Coda/IR/CodaOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/IR/PatternMatch.h"

namespace mlir::coda {

/// What raising linalg into coda may change.
struct RaiseLinalgOptions {
  /// Also fuse elementwise ops that compute in bf16 or f16, and contractions
  /// that accumulate in bf16 or f16: the epilogue computes them in f32 and
  /// rounds once, when the output is written, so results may differ from the
  /// linalg program in the low bits of the narrow type.
  bool lowPrecisionEpilogue = false;
  /// Emit a remark on each contraction that is not raised and on each
  /// consumer that is left outside the epilogue, saying why.
  bool explain = false;
  /// Fold a normalization before a product (RMSNorm, LayerNorm) into it:
  /// the product reads the tensor before the normalization, the weights are
  /// scaled along K and the rest applies in the epilogue.
  bool foldNormalizations = true;
};

/// Rewrites `contraction`, a matmul-like linalg op on tensors, and the chain
/// of its consumers that can run on the accumulator into one coda.gemm placed
/// where the contraction was. Intermediate values that are also used by code
/// left in linalg become extra outputs. Fails when the contraction cannot be
/// raised; the IR is then semantically unchanged.
FailureOr<GemmOp> raiseContraction(RewriterBase &rewriter,
                                   linalg::LinalgOp contraction,
                                   const RaiseLinalgOptions &options);

} // namespace mlir::coda

#endif // CODA_CONVERSION_LINALGTOCODA_LINALGTOCODA_H
