//===- LowerTileEpilogues.cpp - epilogues on accumulator registers --------===//
//
// The last stage of the kernel: replaces every coda.tile_epilogue that
// coda-to-gpu left in a kernel by the code that runs its epilogue on the
// accumulator registers the thread holds and writes each output element
// once (lowerTileEpilogue, with the patterns of each op family), then lets the
// kernel's float arithmetic contract products into fmas, as nvcc does by
// default.
//
//===----------------------------------------------------------------------===//

#include "coda/Conversion/Passes.h"

#include "EpilogueLowering.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

namespace mlir::coda {
#define GEN_PASS_DEF_CODALOWERTILEEPILOGUES
#include "coda/Conversion/Passes.h.inc"
} // namespace mlir::coda

using namespace mlir;
using namespace mlir::coda;

namespace {

/// The float arithmetic of `kernel` may contract a product feeding a sum into
/// one fma (nvcc's --fmad=true). Conversions keep their flags: a rounding
/// (coda.round's truncf, then extf) marked contract would fold away.
void contractFloatArithmetic(gpu::GPUFuncOp kernel) {
  MLIRContext *context = kernel.getContext();
  kernel.walk([&](arith::ArithFastMathInterface op) {
    if (isa<arith::TruncFOp, arith::ExtFOp>(op))
      return;
    auto flags = op.getFastMathFlagsAttr();
    arith::FastMathFlags contracted =
        (flags ? flags.getValue() : arith::FastMathFlags::none) |
        arith::FastMathFlags::contract;
    op->setAttr(op.getFastMathAttrName(),
                arith::FastMathFlagsAttr::get(context, contracted));
  });
}

struct CodaLowerTileEpilogues final
    : coda::impl::CodaLowerTileEpiloguesBase<CodaLowerTileEpilogues> {
  void runOnOperation() override {
    SmallVector<TileEpilogueOp> epilogues;
    getOperation().walk([&](TileEpilogueOp op) { epilogues.push_back(op); });
    // Tried in order: dropout's sum before any sum, the elementwise patterns
    // (which clone any arith and math op) last.
    EpiloguePatterns patterns;
    populateDropoutPatterns(patterns);
    populateReductionPatterns(patterns);
    populatePositionPatterns(patterns);
    populateElementwisePatterns(patterns);
    SetVector<gpu::GPUFuncOp> kernels;
    IRRewriter rewriter(&getContext());
    for (TileEpilogueOp op : epilogues) {
      if (auto kernel = op->getParentOfType<gpu::GPUFuncOp>())
        kernels.insert(kernel);
      else {
        op.emitOpError() << "must be inside a gpu.func: it runs on the "
                            "registers of a kernel's threads";
        return signalPassFailure();
      }
      if (failed(lowerTileEpilogue(rewriter, op, patterns)))
        return signalPassFailure();
    }
    for (gpu::GPUFuncOp kernel : kernels)
      contractFloatArithmetic(kernel);
  }
};

} // namespace
