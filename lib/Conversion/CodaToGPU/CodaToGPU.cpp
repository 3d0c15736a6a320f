//===- CodaToGPU.cpp - one fused sm_90a kernel per coda program -----------===//
//
// Replaces every coda program (a func.func whose body is one coda.gemm fed by
// its arguments) by a gpu.module holding one kernel gpu.func that computes
// the GEMM and its epilogue, and by a host declaration of the program that
// carries the kernel's launch contract (KernelABI). The kernel body is built
// by Mainloop.cpp (the producer and consumer warpgroups of a persistent
// kernel) and Epilogue.cpp (each tile's epilogue) from the coda.kernel_plan
// of the program's coda.gemm (KernelPlan::get). Under a deterministic plan,
// each column reduction also gets a merge kernel in the module, which
// combines the partial results the warps wrote in a fixed order; under row
// partials, the row statistics get one (MergeKernels.cpp).
//
//===----------------------------------------------------------------------===//

#include "coda/Conversion/Passes.h"
#include "coda/Dialect/Coda/Utils/EpilogueMath.h"
#include "coda/Kernel/KernelABI.h"

#include "KernelBuilder.h"
#include "KernelPlan.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/SymbolTable.h"

namespace mlir::coda {
#define GEN_PASS_DEF_CONVERTCODATOGPU
#include "coda/Conversion/Passes.h.inc"
} // namespace mlir::coda

using namespace mlir;
using namespace mlir::coda;

namespace {

/// The name of the dynamic shared memory array of every kernel.
constexpr StringLiteral kSharedMemoryName = "coda_smem";
/// The name of the shared memory array of the column merge kernels.
constexpr StringLiteral kMergeMemoryName = "coda_merge_smem";

/// Whether `input` of `plan`'s gemm is the dropout seed that seed-in-memory
/// passes by its address: the i64 argument named "seed" (ProgramSignature's
/// seed); other i64 inputs stay values.
static bool isSeedInMemory(const KernelPlan &plan, Value input) {
  auto arg = dyn_cast<BlockArgument>(input);
  auto program = plan.op->getParentOfType<func::FuncOp>();
  if (!plan.seedInMemory || !arg || !program || !input.getType().isInteger(64))
    return false;
  auto name =
      program.getArgAttrOfType<StringAttr>(arg.getArgNumber(), "coda.name");
  return name && name.getValue() == "seed";
}

/// The entry name of the merge kernel of output `i` of `kernel`.
std::string getMergeName(StringRef kernel, unsigned i) {
  return (kernel + "_merge" + Twine(i)).str();
}

/// The entry name of the merge kernel of `kernel`'s row statistics.
std::string getRowMergeName(StringRef kernel) {
  return (kernel + "_row_merge").str();
}

/// Appends the kernel parameters of `plan` to `abi`, in ABI order (A, B, C,
/// alpha, beta, epilogue inputs, outputs, the row reductions' scratch under
/// row partials, then M, N, K and the batch count), and returns their types.
SmallVector<Type> addParams(const KernelPlan &plan, KernelABI &abi) {
  GemmOp op = plan.op;
  MLIRContext *ctx = op.getContext();
  Type genericPtr = LLVM::LLVMPointerType::get(ctx);
  Type globalPtr = LLVM::LLVMPointerType::get(ctx, 1);
  Type f32 = Float32Type::get(ctx);
  SmallVector<Type> types;
  auto add = [&](Type type, KernelParamKind kind, KernelParamRole role,
                 int64_t index, SmallVector<int64_t> box = {}) {
    types.push_back(type);
    abi.params.push_back({kind, role, index, std::move(box), std::nullopt});
  };
  // The program argument an operand is.
  auto arg = [](Value operand) -> int64_t {
    return cast<BlockArgument>(operand).getArgNumber();
  };
  add(genericPtr, KernelParamKind::TensorMap, KernelParamRole::A,
      arg(op.getA()), plan.a.getBox());
  add(genericPtr, KernelParamKind::TensorMap, KernelParamRole::B,
      arg(op.getB()), plan.b.getBox());
  abi.params.back().halves = plan.b.halves;
  if (Value c = op.getC())
    add(globalPtr, KernelParamKind::GlobalPtr, KernelParamRole::C, arg(c));
  if (Value alpha = op.getAlpha())
    add(f32, KernelParamKind::F32, KernelParamRole::Alpha, arg(alpha));
  if (Value beta = op.getBeta())
    add(f32, KernelParamKind::F32, KernelParamRole::Beta, arg(beta));
  for (Value input : op.getInputs()) {
    Type type = input.getType();
    if (isa<RankedTensorType>(type) || isSeedInMemory(plan, input))
      add(globalPtr, KernelParamKind::GlobalPtr, KernelParamRole::Input,
          arg(input));
    else
      add(type, type.isF32() ? KernelParamKind::F32 : KernelParamKind::I64,
          KernelParamRole::Input, arg(input));
  }
  for (auto [result, value] :
       llvm::zip(op.getResults(), op.getYield().getValues())) {
    // Column reductions accumulate into an output the runtime initializes,
    // or write partial results that a merge kernel combines.
    auto reduce = value.getDefiningOp<ColReduceOp>();
    add(globalPtr,
        !reduce              ? KernelParamKind::GlobalPtr
        : plan.deterministic ? KernelParamKind::Partials
                             : KernelParamKind::AtomicPtr,
        KernelParamRole::Output, result.getResultNumber());
    if (reduce && plan.deterministic)
      abi.params.back().merge =
          getMergeName(op->getParentOfType<func::FuncOp>().getSymName(),
                       result.getResultNumber());
    else if (reduce)
      abi.params.back().fill = getReductionIdentity(reduce.getKind());
  }
  // Under row partials, the scratch of each row reduction's partial results.
  if (plan.rowPartials) {
    auto reductions = op.getEpilogueBlock().getOps<RowReduceOp>();
    for (int64_t k = 0, e = std::distance(reductions.begin(), reductions.end());
         k < e; ++k) {
      add(globalPtr, KernelParamKind::RowPartials,
          KernelParamRole::RowReduction, k);
      abi.params.back().merge =
          getRowMergeName(op->getParentOfType<func::FuncOp>().getSymName());
    }
  }
  for (KernelParamRole role : {KernelParamRole::M, KernelParamRole::N,
                               KernelParamRole::K, KernelParamRole::Batch})
    add(IntegerType::get(ctx, 32), KernelParamKind::I32, role, -1);
  return types;
}

} // namespace

void mlir::coda::bindKernelParams(Block &entry, const KernelABI &abi,
                                  KernelValues &values) {
  for (auto [param, arg] : llvm::zip(abi.params, entry.getArguments())) {
    switch (param.role) {
    case KernelParamRole::A:
      values.tensorMapA = arg;
      break;
    case KernelParamRole::B:
      values.tensorMapB = arg;
      break;
    case KernelParamRole::C:
      values.c = arg;
      break;
    case KernelParamRole::Alpha:
      values.alpha = arg;
      break;
    case KernelParamRole::Beta:
      values.beta = arg;
      break;
    case KernelParamRole::Input:
      values.inputs.push_back(arg);
      break;
    case KernelParamRole::Output:
      values.outputs.push_back(arg);
      break;
    case KernelParamRole::RowReduction:
      values.rowPartials.push_back(arg);
      break;
    case KernelParamRole::M:
      values.m = arg;
      break;
    case KernelParamRole::N:
      values.n = arg;
      break;
    case KernelParamRole::K:
      values.k = arg;
      break;
    case KernelParamRole::Batch:
      values.batchCount = arg;
      break;
    }
  }
}

namespace {

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
  KernelABI abi;
  SmallVector<Type> types = addParams(plan, abi);

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
  // One block per SM: ptxas caps the registers at entry, which setmaxnreg
  // then moves from the producer to the consumers.
  kernel->setAttr(NVVM::NVVMDialect::getMinctasmAttrName(),
                  b.getI32IntegerAttr(1));

  Block &entry = kernel.front();
  b.setInsertionPointToStart(&entry);
  KernelBuilder kb(loc, b);
  KernelValues values;
  bindKernelParams(entry, abi, values);
  // The seed given by its address: every thread reads its 8 bytes once.
  for (auto [input, value] : llvm::zip(op.getInputs(), values.inputs))
    if (isSeedInMemory(plan, input))
      value = LLVM::LoadOp::create(kb, kb.getI64Type(), value);
  values.threadId = kb.index32(gpu::ThreadIdOp::create(kb, gpu::Dimension::x));
  values.lane = kb.remu(values.threadId, kb.i32(32));
  values.warp = kb.remu(kb.divu(values.threadId, kb.i32(32)), kb.i32(4));
  values.warpgroup = kb.divu(values.threadId, kb.i32(128));
  values.sharedMemory = LLVM::AddressOfOp::create(kb, sharedMemory);

  // A row reduction exchanged across tiles needs the whole row in the tiles
  // of one cluster; the runtime checks N against max_n, and the kernel traps
  // rather than compute a wrong answer if it was launched anyway.
  if (plan.getMaxN())
    kb.ifThen(
        kb.cmp(arith::CmpIPredicate::ugt, values.n, kb.i32(plan.getMaxN())),
        [&] { LLVM::Trap::create(kb); });

  buildPersistentKernel(b, loc, plan, values);
  gpu::ReturnOp::create(kb);

  // The merge kernels of a deterministic plan's column reductions.
  b.setInsertionPointAfter(kernel);
  LLVM::GlobalOp mergeMemory;
  for (auto [i, value] : llvm::enumerate(op.getYield().getValues())) {
    auto reduce = value.getDefiningOp<ColReduceOp>();
    if (!reduce || !plan.deterministic)
      continue;
    if (!mergeMemory) {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointAfter(sharedMemory);
      mergeMemory = LLVM::GlobalOp::create(
          b, loc,
          LLVM::LLVMArrayType::get(b.getF32Type(), KernelABI::kMergeThreads),
          /*isConstant=*/false, LLVM::Linkage::Internal, kMergeMemoryName,
          Attribute(), /*alignment=*/4, /*addrSpace=*/3);
    }
    buildColumnMergeKernel(b, loc, getMergeName(program.getSymName(), i),
                           reduce.getKind(), mergeMemory);
  }
  // The merge kernel of row statistics, on the kernel's own parameters.
  if (plan.rowPartials)
    buildRowMergeKernel(b, loc, plan, abi, kernel.getFunctionType(),
                        getRowMergeName(program.getSymName()));

  abi.module = module.getName().str();
  abi.kernel = program.getSymName().str();
  abi.blockDims = {threads, 1, 1};
  abi.tileM = plan.tile.tileM;
  abi.tileN = plan.tile.tileN;
  abi.tileK = plan.tileK;
  abi.sharedMemoryBytes = plan.getSharedMemoryBytes();
  abi.maxN = plan.getMaxN();
  abi.clusterM = plan.tile.clusterM;
  abi.clusterN = plan.tile.clusterN;
  abi.groupRows = plan.tile.groupRows;
  abi.schedule = *plan.tile.schedule;
  DictionaryAttr abiAttr = abi.toAttr(ctx);
  module->setAttr(KernelABI::kAttrName, abiAttr);

  program.eraseBody();
  program.setPrivate();
  program->setAttr(KernelABI::kAttrName, abiAttr);
}

struct ConvertCodaToGPU final
    : coda::impl::ConvertCodaToGPUBase<ConvertCodaToGPU> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    // Check every program first, so that a failure leaves the module as it
    // was.
    SmallVector<KernelPlan> plans;
    bool legal = true;
    module.walk([&](GemmOp op) {
      FailureOr<KernelPlan> plan = failure();
      if (succeeded(checkProgram(op, module)))
        plan = KernelPlan::get(op);
      if (failed(plan)) {
        legal = false;
        return;
      }
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
