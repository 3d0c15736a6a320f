//===- GpuPipeline.cpp - coda programs to fused sm_90a kernels ------------===//

#include "coda/Conversion/Passes.h"
#include "coda/Kernel/KernelShape.h"
#include "coda/Pipelines/Pipelines.h"

#include "mlir/Conversion/GPUToNVVM/GPUToNVVMPass.h"
#include "mlir/Conversion/NVVMToLLVM/NVVMToLLVM.h"
#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Target/LLVM/NVVM/Utils.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

/// The CUDA toolkit that gives libdevice (tanh, erf, exp, ...) and ptxas: the
/// pipeline option, else the one the environment names (CUDA_ROOT, CUDA_HOME,
/// CUDA_PATH), else the one coda was built with. Without one, kernels that
/// call libdevice keep unresolved `__nv_*` functions that ptxas and the
/// driver reject.
static std::string getCudaToolkit(const coda::GpuPipelineOptions &options) {
  if (!options.toolkit.empty())
    return options.toolkit;
  if (StringRef fromEnvironment = NVVM::getCUDAToolkitPath();
      !fromEnvironment.empty())
    return fromEnvironment.str();
#ifdef CODA_DEFAULT_CUDA_TOOLKIT
  return CODA_DEFAULT_CUDA_TOOLKIT;
#else
  return "";
#endif
}

void mlir::coda::buildGpuPipeline(OpPassManager &pm,
                                  const GpuPipelineOptions &options) {
  CodaPlanKernelsOptions kernels;
  kernels.chip = options.chip;
  if (std::optional<KernelShape> shape = KernelShape::fromOptions(options))
    shape->setOptions(kernels);
  else
    kernels.schedule = options.schedule; // which coda-to-gpu reports
  kernels.epilogueVectorBytes = options.epilogueVectorBytes;
  kernels.fastActivations = options.fastActivations;
  kernels.seedInMemory = options.seedInMemory;
  kernels.deterministic = options.deterministic;
  pm.addPass(createCodaPlanKernels(kernels));
  pm.addPass(createConvertCodaToGPU());
  pm.addPass(createCodaLowerTileEpilogues());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());

  GpuNVVMAttachTargetOptions target;
  target.chip = options.chip;
  target.features = options.features;
  target.optLevel = 3;
  pm.addPass(createGpuNVVMAttachTarget(target));

  OpPassManager &device = pm.nest<gpu::GPUModuleOp>();
  // x^n for a constant integer n (math.fpowi, which frontends emit for
  // pow(x, 2)) becomes multiplications, as on the CPU; libdevice's powi
  // takes an i32 exponent, and an i64 one left a call nothing resolves.
  device.addPass(math::createMathExpandOpsPass({{"fpowi"}}));
  device.addPass(createSCFToControlFlowPass());
  device.addPass(createConvertGpuOpsToNVVMOps());
  pm.addPass(createCodaGridConstantTensorMaps());
  OpPassManager &lowered = pm.nest<gpu::GPUModuleOp>();
  lowered.addPass(createConvertNVVMToLLVMPass());
  lowered.addPass(createCanonicalizerPass());
  lowered.addPass(createCSEPass());
  pm.addPass(createReconcileUnrealizedCastsPass());

  GpuModuleToBinaryPassOptions binary;
  binary.compilationTarget = options.format;
  binary.toolkitPath = getCudaToolkit(options);
  pm.addPass(createGpuModuleToBinaryPass(binary));
}
