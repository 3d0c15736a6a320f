//===- PlanKernels.cpp - choose the kernel of every coda program ----------===//
//
// The first stage of the GPU lowering: gives the coda.gemm of every coda
// program the coda.kernel_plan that coda-to-gpu builds its kernel from
// (KernelPlan::build chooses and checks it).
//
//===----------------------------------------------------------------------===//

#include "coda/Conversion/Passes.h"

#include "KernelPlan.h"

namespace mlir::coda {
#define GEN_PASS_DEF_CODAPLANKERNELS
#include "coda/Conversion/Passes.h.inc"
} // namespace mlir::coda

using namespace mlir;
using namespace mlir::coda;

namespace {

struct CodaPlanKernels final
    : coda::impl::CodaPlanKernelsBase<CodaPlanKernels> {
  using Base::Base;
  // The kernel-shape options, public for KernelShape::fromOptions.
  using Base::clusterM, Base::clusterN, Base::groupRows, Base::schedule,
      Base::stages, Base::tileM, Base::tileN;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    std::optional<KernelShape> shape = KernelShape::fromOptions(*this);
    if (!shape) {
      module.emitError() << "coda-plan-kernels: "
                         << KernelShape::getScheduleError(schedule);
      return signalPassFailure();
    }
    TileConfig tile;
    static_cast<KernelShape &>(tile) = *shape;
    tile.epilogueVectorBytes = epilogueVectorBytes;
    // Plan every program first, so that a failure leaves the module as it
    // was.
    SmallVector<std::pair<GemmOp, KernelPlanAttr>> planned;
    bool legal = true;
    module.walk([&](GemmOp op) {
      FailureOr<KernelPlan> plan = failure();
      if (succeeded(checkProgram(op, module)))
        plan = KernelPlan::build(op, tile, chip);
      if (failed(plan)) {
        legal = false;
        return;
      }
      plan->fastActivations = fastActivations;
      plan->seedInMemory = seedInMemory;
      plan->deterministic = deterministic;
      planned.push_back({op, plan->getAttr()});
    });
    if (!legal)
      return signalPassFailure();
    for (auto [op, attr] : planned)
      op->setAttr(KernelPlan::kAttrName, attr);
  }
};

} // namespace
