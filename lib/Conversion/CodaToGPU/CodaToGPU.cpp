//===- CodaToGPU.cpp - one fused sm_90a kernel per coda program -----------===//
//
// Replaces every coda program (a func.func whose body is one coda.gemm fed by
// its arguments) by a gpu.module holding one kernel gpu.func that computes
// the GEMM and its epilogue, and by a host declaration of the program that
// carries the kernel's launch contract (KernelABI). The kernel body is built
// by the main loop (Mainloop.cpp) and the epilogue (Epilogue.cpp) from the
// plan KernelPlan.cpp chooses.
//
//===----------------------------------------------------------------------===//

#include "coda/Conversion/CodaToGPU/KernelABI.h"
#include "coda/Conversion/Passes.h"

#include "KernelBuilder.h"
#include "KernelPlan.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/SymbolTable.h"

#include <limits>

namespace mlir::coda {
#define GEN_PASS_DEF_CONVERTCODATOGPU
#include "coda/Conversion/Passes.h.inc"
} // namespace mlir::coda

using namespace mlir;
using namespace mlir::coda;

namespace {

/// The name of the dynamic shared memory array of every kernel.
constexpr StringLiteral kSharedMemoryName = "coda_smem";

/// How diagnostics name operand `index` of `op`.
std::string describeOperand(GemmOp op, unsigned index) {
  constexpr const char *kSegmentNames[] = {"A", "B", "C", "alpha", "beta"};
  for (unsigned segment = 0; segment < 5; ++segment) {
    auto [start, length] = op.getODSOperandIndexAndLength(segment);
    if (index >= start && index < start + length)
      return kSegmentNames[segment];
  }
  return "epilogue input #" +
         std::to_string(index - op.getODSOperandIndexAndLength(5).first);
}

/// Checks that `op` is the whole body of a coda program: every operand is an
/// argument of the function, whose body is the op and a return of its
/// results.
LogicalResult checkProgram(GemmOp op) {
  auto program = dyn_cast<func::FuncOp>(op->getParentOp());
  if (!program || !isa_and_nonnull<ModuleOp>(program->getParentOp()))
    return op.emitOpError()
           << "cannot run on the GPU: coda-to-gpu lowers coda programs, "
              "top-level functions whose body is one coda.gemm";
  Block &body = program.getBody().front();
  for (OpOperand &operand : op->getOpOperands()) {
    auto arg = dyn_cast<BlockArgument>(operand.get());
    if (arg && arg.getOwner() == &body)
      continue;
    Operation *def = operand.get().getDefiningOp();
    return op.emitOpError()
           << "cannot run on the GPU: "
           << describeOperand(op, operand.getOperandNumber())
           << " must be an argument of @" << program.getSymName()
           << ", but it is computed by '"
           << (def ? def->getName().getStringRef() : StringRef("a block"))
           << "'";
  }
  auto ret = dyn_cast<func::ReturnOp>(body.getTerminator());
  if (&body.front() != op.getOperation() || op->getNextNode() != ret ||
      !llvm::equal(ret.getOperands(), op.getResults()))
    return op.emitOpError()
           << "cannot run on the GPU: the body of @" << program.getSymName()
           << " must be this coda.gemm and a return of its results, in "
              "order";
  return success();
}

/// Builds the kernel of `plan` next to `program` and turns the program into a
/// host declaration; both carry the kernel's ABI.
void buildKernel(func::FuncOp program, const KernelPlan &plan,
                 SymbolTable &symbols) {
  GemmOp op = plan.op;
  Location loc = op.getLoc();
  MLIRContext *ctx = op.getContext();
  OpBuilder b(ctx);
  b.setInsertionPointAfter(program);
  auto module = gpu::GPUModuleOp::create(
      b, loc, (program.getSymName() + "_kernels").str());
  symbols.insert(module);

  // Parameters, in ABI order: A, B, C, alpha, beta, epilogue inputs, outputs,
  // then M, N, K and the batch count.
  auto genericPtr = LLVM::LLVMPointerType::get(ctx);
  auto globalPtr = LLVM::LLVMPointerType::get(ctx, 1);
  SmallVector<Type> types;
  KernelABI abi;
  auto addParam = [&](Type type, KernelParamKind kind, KernelParamRole role,
                      int64_t index, SmallVector<int64_t> box = {}) {
    types.push_back(type);
    abi.params.push_back({kind, role, index, std::move(box), std::nullopt});
    return types.size() - 1;
  };
  auto argIndex = [](Value v) {
    return static_cast<int64_t>(cast<BlockArgument>(v).getArgNumber());
  };
  size_t aParam =
      addParam(genericPtr, KernelParamKind::TensorMap, KernelParamRole::A,
               argIndex(op.getA()), plan.a.getBox());
  size_t bParam =
      addParam(genericPtr, KernelParamKind::TensorMap, KernelParamRole::B,
               argIndex(op.getB()), plan.b.getBox());
  std::optional<size_t> cParam, alphaParam, betaParam;
  if (Value c = op.getC())
    cParam = addParam(globalPtr, KernelParamKind::GlobalPtr, KernelParamRole::C,
                      argIndex(c));
  if (Value alpha = op.getAlpha())
    alphaParam = addParam(b.getF32Type(), KernelParamKind::F32,
                          KernelParamRole::Alpha, argIndex(alpha));
  if (Value beta = op.getBeta())
    betaParam = addParam(b.getF32Type(), KernelParamKind::F32,
                         KernelParamRole::Beta, argIndex(beta));
  SmallVector<size_t> inputParams, outputParams;
  for (Value input : op.getInputs()) {
    Type type = input.getType();
    auto [paramType, kind] =
        isa<RankedTensorType>(type)
            ? std::make_pair(Type(globalPtr), KernelParamKind::GlobalPtr)
        : type.isF32() ? std::make_pair(type, KernelParamKind::F32)
                       : std::make_pair(type, KernelParamKind::I64);
    inputParams.push_back(
        addParam(paramType, kind, KernelParamRole::Input, argIndex(input)));
  }
  for (auto [result, value] :
       llvm::zip(op.getResults(), op.getYield().getValues())) {
    // Column reductions accumulate into an output the runtime initializes.
    auto reduce = value.getDefiningOp<ColReduceOp>();
    outputParams.push_back(addParam(
        globalPtr,
        reduce ? KernelParamKind::AtomicPtr : KernelParamKind::GlobalPtr,
        KernelParamRole::Output, result.getResultNumber()));
    if (reduce)
      abi.params.back().fill = reduce.getKind() == ReductionKind::Max
                                   ? -std::numeric_limits<double>::infinity()
                                   : 0.0;
  }
  size_t sizeParams = types.size();
  for (KernelParamRole role : {KernelParamRole::M, KernelParamRole::N,
                               KernelParamRole::K, KernelParamRole::Batch})
    addParam(b.getI32Type(), KernelParamKind::I32, role, -1);

  // The kernel.
  b.setInsertionPointToStart(module.getBody());
  auto sharedMemory = LLVM::GlobalOp::create(
      b, loc, LLVM::LLVMArrayType::get(b.getI8Type(), 0),
      /*isConstant=*/false, LLVM::Linkage::External, kSharedMemoryName,
      Attribute(), /*alignment=*/1024, /*addrSpace=*/3);
  auto kernel = gpu::GPUFuncOp::create(b, loc, program.getSymName(),
                                       b.getFunctionType(types, {}));
  kernel->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), b.getUnitAttr());
  int32_t threads = KernelPlan::kThreads;
  kernel.setKnownBlockSizeAttr(b.getDenseI32ArrayAttr({threads, 1, 1}));

  Block &entry = kernel.front();
  b.setInsertionPointToStart(&entry);
  KernelBuilder kb(loc, b);
  auto param = [&](size_t i) -> Value { return entry.getArgument(i); };
  auto toI32 = [&](Value index) -> Value {
    return arith::IndexCastUIOp::create(kb, kb.getI32Type(), index);
  };
  KernelValues values;
  values.threadId = toI32(gpu::ThreadIdOp::create(kb, gpu::Dimension::x));
  values.blockX = toI32(gpu::BlockIdOp::create(kb, gpu::Dimension::x));
  values.blockY = toI32(gpu::BlockIdOp::create(kb, gpu::Dimension::y));
  values.blockZ = toI32(gpu::BlockIdOp::create(kb, gpu::Dimension::z));
  values.lane = kb.remu(values.threadId, kb.i32(32));
  values.warp = kb.remu(kb.divu(values.threadId, kb.i32(32)), kb.i32(4));
  values.warpgroup = kb.divu(values.threadId, kb.i32(128));
  values.rowBase = kb.mul(values.blockY, kb.i32(KernelPlan::kTileM));
  values.colBase = kb.mul(values.blockX, kb.i32(plan.tile.tileN));
  values.m = param(sizeParams);
  values.n = param(sizeParams + 1);
  values.k = param(sizeParams + 2);
  values.batchCount = param(sizeParams + 3);
  values.sharedMemory = LLVM::AddressOfOp::create(kb, sharedMemory);
  values.tensorMapA = param(aParam);
  values.tensorMapB = param(bParam);
  if (cParam)
    values.c = param(*cParam);
  if (alphaParam)
    values.alpha = param(*alphaParam);
  if (betaParam)
    values.beta = param(*betaParam);
  for (size_t i : inputParams)
    values.inputs.push_back(param(i));
  for (size_t i : outputParams)
    values.outputs.push_back(param(i));

  // A fused row reduction needs the whole row in this block's tile; the
  // runtime checks N against max_n, and the kernel traps rather than
  // compute a wrong answer if it was launched anyway.
  if (plan.hasRowReduction)
    kb.ifThen(
        kb.cmp(arith::CmpIPredicate::ugt, values.n, kb.i32(plan.tile.tileN)),
        [&] { LLVM::Trap::create(kb); });

  Value accumulator = buildMainloop(b, loc, plan, values);
  buildEpilogue(b, loc, plan, values, accumulator);
  gpu::ReturnOp::create(kb);

  abi.module = module.getName().str();
  abi.kernel = program.getSymName().str();
  abi.blockDims = {threads, 1, 1};
  abi.tileM = KernelPlan::kTileM;
  abi.tileN = plan.tile.tileN;
  abi.tileK = plan.tileK;
  abi.sharedMemoryBytes = plan.getSharedMemoryBytes();
  abi.maxN = plan.hasRowReduction ? plan.tile.tileN : 0;
  DictionaryAttr abiAttr = abi.toAttr(ctx);
  module->setAttr(KernelABI::kAttrName, abiAttr);

  program.eraseBody();
  program.setPrivate();
  program->setAttr(KernelABI::kAttrName, abiAttr);
}

struct ConvertCodaToGPU final
    : coda::impl::ConvertCodaToGPUBase<ConvertCodaToGPU> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    TileConfig tile{tileN, stages};
    // Check every program first, so that a failure leaves the module as it
    // was.
    SmallVector<KernelPlan> plans;
    bool legal = true;
    module.walk([&](GemmOp op) {
      FailureOr<KernelPlan> plan = failure();
      if (succeeded(checkProgram(op)))
        plan = KernelPlan::build(op, tile, chip);
      if (failed(plan))
        legal = false;
      else
        plans.push_back(*plan);
    });
    if (!legal)
      return signalPassFailure();
    if (plans.empty())
      return;
    SymbolTable symbols(module);
    for (const KernelPlan &plan : plans)
      buildKernel(cast<func::FuncOp>(plan.op->getParentOp()), plan, symbols);
    module->setAttr(gpu::GPUDialect::getContainerModuleAttrName(),
                    UnitAttr::get(&getContext()));
  }
};

} // namespace
