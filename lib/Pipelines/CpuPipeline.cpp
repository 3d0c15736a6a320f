//===- CpuPipeline.cpp - coda programs to LLVM for the host CPU -----------===//

#include "coda/Conversion/Passes.h"
#include "coda/Pipelines/Pipelines.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Arith/Transforms/Passes.h"
#include "mlir/Dialect/Bufferization/Pipelines/Passes.h"
#include "mlir/Dialect/Bufferization/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/Transforms/Passes.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

void mlir::coda::buildCpuPipeline(OpPassManager &pm, bool widenToF64) {
  // Reference semantics on tensors, then elementwise fusion so that the
  // epilogue runs as few loop nests as possible.
  pm.addPass(coda::createConvertCodaToLinalg({widenToF64}));
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  pm.addPass(createLinalgElementwiseOpFusionPass());
  pm.addPass(createCanonicalizerPass());

  // Tensors to buffers; results stay results (callers read and free them).
  bufferization::OneShotBufferizePassOptions bufferize;
  bufferize.bufferizeFunctionBoundaries = true;
  bufferize.functionBoundaryTypeConversion =
      bufferization::LayoutMapOption::IdentityLayoutMap;
  pm.addPass(bufferization::createOneShotBufferizePass(bufferize));
  bufferization::buildBufferDeallocationPipeline(pm);
  // An output that copies an argument returns a clone of it.
  pm.addPass(createConvertBufferizationToMemRefPass());

  // Loops, then LLVM. libm has no rsqrt and no x^n for integer n
  // (math.fpowi, which frontends emit for pow(x, 2)): they become 1 / sqrt
  // and multiplications. bf16 arithmetic and math (in host code around
  // programs; a program's epilogue computes in f32) run in f32, rounded after
  // each op, and bf16 conversions are expanded to integer arithmetic (round
  // to nearest even) since the host may lack them; math ops LLVM has
  // intrinsics for become intrinsics, the others (tanh, erf) calls to libm.
  pm.addNestedPass<func::FuncOp>(createConvertLinalgToLoopsPass());
  pm.addPass(createSCFToControlFlowPass());
  pm.addPass(math::createMathExpandOpsPass({{"fpowi", "rsqrt"}}));
  pm.addPass(math::createMathExtendToSupportedTypes());
  arith::ArithEmulateUnsupportedFloatsOptions emulate;
  emulate.sourceTypeStrs = {"bf16"};
  pm.addPass(arith::createArithEmulateUnsupportedFloats(emulate));
  arith::ArithExpandOpsPassOptions expand;
  expand.includeBf16 = true;
  pm.addPass(arith::createArithExpandOpsPass(expand));
  pm.addPass(memref::createExpandStridedMetadataPass());
  pm.addPass(createLowerAffinePass());
  pm.addNestedPass<func::FuncOp>(LLVM::createLLVMRequestCWrappersPass());
  pm.addPass(createConvertMathToLLVMPass());
  pm.addPass(createConvertMathToLibmPass());
  // Buffers from aligned_alloc rather than malloc aligned by integer
  // arithmetic, which hides from LLVM that they alias no argument: the GEMM's
  // sum then stays in a register and vectorizes.
  FinalizeMemRefToLLVMConversionPassOptions memrefs;
  memrefs.useAlignedAlloc = true;
  pm.addPass(createFinalizeMemRefToLLVMConversionPass(memrefs));
  pm.addPass(createConvertToLLVMPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
}
