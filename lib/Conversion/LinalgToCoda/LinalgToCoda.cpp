//===- LinalgToCoda.cpp - the coda-raise-linalg pass ----------------------===//

#include "coda/Conversion/LinalgToCoda/LinalgToCoda.h"
#include "Raising.h"
#include "coda/Conversion/Passes.h"
#include "coda/Dialect/Coda/IR/CodaDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

namespace mlir::coda {
#define GEN_PASS_DEF_CONVERTLINALGTOCODA
#include "coda/Conversion/Passes.h.inc"
} // namespace mlir::coda

using namespace mlir;
using namespace mlir::coda;

namespace {
struct ConvertLinalgToCoda final
    : coda::impl::ConvertLinalgToCodaBase<ConvertLinalgToCoda> {
  using Base::Base;

  void runOnOperation() override {
    RaiseLinalgOptions options;
    options.lowPrecisionEpilogue = lowPrecisionEpilogue;
    options.explain = explain;
    options.foldNormalizations = foldNorms;
    IRRewriter rewriter(&getContext());
    SmallVector<Operation *> constants =
        raising::foldConstantScalars(rewriter, getOperation());
    if (options.foldNormalizations)
      raising::foldNormalizations(rewriter, getOperation(), options);
    // Raising a contraction erases only it, its consumers and data movement,
    // never another contraction, so the list stays valid.
    SmallVector<linalg::LinalgOp> contractions;
    getOperation()->walk([&](linalg::LinalgOp op) {
      if (linalg::isaContractionOpInterface(op))
        contractions.push_back(op);
    });
    for (linalg::LinalgOp op : contractions)
      (void)raiseContraction(rewriter, op, options);
    raising::pairGatedProducts(rewriter, getOperation(), options);
    // The epilogues read the folded scalars as constants of their own; the
    // folded constants nothing reads any more go (the walk visits only live
    // ops: the raising may have erased some of them).
    llvm::SmallPtrSet<Operation *, 8> folded(constants.begin(),
                                             constants.end());
    getOperation()->walk([&](arith::ConstantOp op) {
      if (folded.contains(op) && op->use_empty())
        rewriter.eraseOp(op);
    });
  }
};
} // namespace
