//===- DeriveBackward.cpp - the coda-derive-backward pass -----------------===//

#include "coda/Dialect/Coda/IR/CodaOps.h"
#include "coda/Dialect/Coda/Transforms/Backward.h"
#include "coda/Dialect/Coda/Transforms/Passes.h"

namespace mlir::coda {
#define GEN_PASS_DEF_CODADERIVEBACKWARD
#include "coda/Dialect/Coda/Transforms/Passes.h.inc"
} // namespace mlir::coda

using namespace mlir;
using namespace mlir::coda;

namespace {
struct CodaDeriveBackward final
    : coda::impl::CodaDeriveBackwardBase<CodaDeriveBackward> {
  using Base::Base;

  void runOnOperation() override {
    AccumulatorSource source;
    if (accumulator == "recompute") {
      source = AccumulatorSource::Recompute;
    } else if (accumulator == "saved") {
      source = AccumulatorSource::Saved;
    } else {
      getOperation().emitError()
          << "coda-derive-backward: unknown accumulator '" << accumulator
          << "'; expected recompute or saved";
      return signalPassFailure();
    }
    NextWeightLayout next;
    if (nextWeight == "kn") {
      next = NextWeightLayout::KN;
    } else if (nextWeight != "nk") {
      getOperation().emitError()
          << "coda-derive-backward: unknown next-weight '" << nextWeight
          << "'; expected kn or nk";
      return signalPassFailure();
    } else if (source != AccumulatorSource::Saved) {
      getOperation().emitError()
          << "coda-derive-backward: next-weight=nk needs accumulator=saved "
             "(only @f_backward_saved reads the next layer's weight)";
      return signalPassFailure();
    } else {
      next = NextWeightLayout::NK;
    }
    // Programs derived by an earlier run are not derived from again.
    SmallVector<func::FuncOp> programs;
    for (auto func : getOperation().getOps<func::FuncOp>())
      if (!func.isExternal() && !func.getOps<GemmOp>().empty() &&
          !func->hasAttr(BackwardNames::kDerivedFrom))
        programs.push_back(func);
    for (func::FuncOp func : programs)
      if (failed(deriveBackward(func, source, next)))
        return signalPassFailure();
  }
};
} // namespace
