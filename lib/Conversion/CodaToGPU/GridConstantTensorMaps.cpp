//===- GridConstantTensorMaps.cpp - pass tensor maps by value -------------===//
//
// A gpu.func cannot declare a CUtensorMap parameter that the NVVM lowering
// keeps by value, so coda-to-gpu gives the kernel a pointer parameter for each
// tensor map; once the kernel is an llvm.func (after convert-gpu-to-nvvm),
// this pass turns those parameters into 128-byte, 64-byte aligned byval
// grid constants. PTX then declares `.param .align 64 .b8 p[128]`, the
// runtime passes the CUtensorMap itself, and the TMA instructions read it
// through the parameter's generic address, as the ABI (KernelABI.h) says.
//
//===----------------------------------------------------------------------===//

#include "coda/Conversion/Passes.h"
#include "coda/Kernel/KernelABI.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"

namespace mlir::coda {
#define GEN_PASS_DEF_CODAGRIDCONSTANTTENSORMAPS
#include "coda/Conversion/Passes.h.inc"
} // namespace mlir::coda

using namespace mlir;
using namespace mlir::coda;

namespace {

/// The size and alignment of a CUtensorMap.
constexpr int64_t kTensorMapBytes = 128, kTensorMapAlign = 64;

struct CodaGridConstantTensorMaps final
    : coda::impl::CodaGridConstantTensorMapsBase<CodaGridConstantTensorMaps> {
  void runOnOperation() override {
    Builder b(&getContext());
    auto byval =
        TypeAttr::get(LLVM::LLVMArrayType::get(b.getI8Type(), kTensorMapBytes));
    WalkResult result = getOperation().walk([&](gpu::GPUModuleOp module) {
      auto attr = module->getAttrOfType<DictionaryAttr>(KernelABI::kAttrName);
      if (!attr)
        return WalkResult::advance();
      std::optional<KernelABI> abi = KernelABI::fromAttr(attr);
      if (!abi) {
        module.emitError() << "has a malformed '" << KernelABI::kAttrName
                           << "' attribute";
        return WalkResult::interrupt();
      }
      // The kernel, and the merge kernel of its row statistics, which
      // takes the same parameters.
      SmallVector<StringRef, 2> names = {abi->kernel};
      for (const KernelParam &param : abi->params)
        if (param.kind == KernelParamKind::RowPartials &&
            !llvm::is_contained(names, param.merge))
          names.push_back(param.merge);
      for (StringRef name : names) {
        auto kernel = module.lookupSymbol<LLVM::LLVMFuncOp>(name);
        if (!kernel || kernel.getNumArguments() != abi->params.size()) {
          module.emitError()
              << "has no llvm.func kernel '" << name << "' with "
              << abi->params.size()
              << " parameters: run this pass after convert-gpu-to-nvvm";
          return WalkResult::interrupt();
        }
        for (auto [i, param] : llvm::enumerate(abi->params)) {
          if (param.kind != KernelParamKind::TensorMap)
            continue;
          kernel.setArgAttr(i, LLVM::LLVMDialect::getByValAttrName(), byval);
          kernel.setArgAttr(i, NVVM::NVVMDialect::getGridConstantAttrName(),
                            b.getUnitAttr());
          kernel.setArgAttr(i, LLVM::LLVMDialect::getAlignAttrName(),
                            b.getI64IntegerAttr(kTensorMapAlign));
        }
      }
      return WalkResult::advance();
    });
    if (result.wasInterrupted())
      signalPassFailure();
  }
};

} // namespace
