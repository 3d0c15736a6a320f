//===- CpuRunner.cpp - run coda programs on the host CPU ------------------===//

#include "coda/Runner/CpuRunner.h"
#include "coda/Pipelines/Pipelines.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Target/TargetMachine.h"

#include <cstdlib>
#include <cstring>
#include <unistd.h>

using namespace mlir;
using namespace mlir::coda;

/// The symbol a program is compiled under; reserved in C, so no library
/// linked into the JIT defines it.
static constexpr llvm::StringLiteral kEntryName = "__coda_program";

std::optional<ElementType> mlir::coda::getHostElementType(Type type) {
  if (type.isF32())
    return ElementType::F32;
  if (type.isF16())
    return ElementType::F16;
  if (type.isBF16())
    return ElementType::BF16;
  return std::nullopt;
}

CpuExecutable::CpuExecutable(std::unique_ptr<ExecutionEngine> engine,
                             ProgramSignature signature)
    : engine(std::move(engine)), signature(std::move(signature)) {}

CpuExecutable::~CpuExecutable() = default;

llvm::Expected<std::unique_ptr<CpuExecutable>>
CpuExecutable::create(OwningOpRef<ModuleOp> module,
                      ProgramSignature signature) {
  auto error = [](const Twine &message) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
  };
  // Names are interface metadata, already in the signature; LLVM has no use
  // for them. The program is compiled alone, under a name of its own: the JIT
  // links the module against the C library, where a program called `expf`
  // would stand in for the exponential its own code calls.
  isolateProgram(*module, signature.functionName);
  auto func = module->lookupSymbol<func::FuncOp>(signature.functionName);
  if (!func)
    return error("no function named '" + signature.functionName + "'");
  for (unsigned i = 0, e = func.getNumArguments(); i < e; ++i)
    func.removeArgAttr(i, "coda.name");
  for (unsigned i = 0, e = func.getNumResults(); i < e; ++i)
    func.removeResultAttr(i, StringAttr::get(func.getContext(), "coda.name"));
  func.setName(kEntryName);

  PassManager pm(module->getContext());
  buildCpuPipeline(pm);
  if (failed(pm.run(*module)))
    return error("lowering '" + signature.functionName +
                 "' for the CPU failed");

  static const bool nativeTargetReady = [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    return true;
  }();
  (void)nativeTargetReady;

  auto host = llvm::orc::JITTargetMachineBuilder::detectHost();
  if (!host)
    return host.takeError();
  auto machine = host->createTargetMachine();
  if (!machine)
    return machine.takeError();
  // LLVM's -O2 for the host CPU, whose vector width the loop vectorizer needs:
  // the GEMM's sum over K (which may be reassociated) runs vectorized. The
  // options hold a function_ref: the transformer must outlive create().
  std::function<llvm::Error(llvm::Module *)> optimize =
      makeOptimizingTransformer(/*optLevel=*/2, /*sizeLevel=*/0,
                                machine->get());
  ExecutionEngineOptions options;
  options.transformer = optimize;
  auto engine = ExecutionEngine::create(*module, options);
  if (!engine)
    return engine.takeError();
  return std::unique_ptr<CpuExecutable>(
      new CpuExecutable(std::move(*engine), std::move(signature)));
}

namespace {
/// The memref descriptor of a rank-R buffer: allocated and aligned pointers,
/// offset, R sizes, R strides; every field is 8 bytes.
SmallVector<int64_t> makeDescriptor(const HostArray &array) {
  SmallVector<int64_t> descriptor;
  auto pointer = reinterpret_cast<int64_t>(array.data.data());
  descriptor.append({pointer, pointer, 0});
  descriptor.append(array.shape.begin(), array.shape.end());
  int64_t stride = 1;
  SmallVector<int64_t> strides(array.shape.size());
  for (int i = static_cast<int>(array.shape.size()) - 1; i >= 0; --i) {
    strides[i] = stride;
    stride *= array.shape[i];
  }
  descriptor.append(strides.begin(), strides.end());
  return descriptor;
}
} // namespace

llvm::Expected<std::vector<HostArray>>
CpuExecutable::run(ArrayRef<ArgumentValue> args) const {
  // The compiled program allocates its outputs and an f32 accumulator and
  // does not survive a failed allocation: refuse what this machine cannot
  // hold.
  SmallVector<SmallVector<int64_t>> shapes;
  for (const ArgumentValue &value : args)
    shapes.emplace_back(value.array.shape.begin(), value.array.shape.end());
  llvm::Expected<ProblemShape> problem = signature.inferProblemShape(shapes);
  if (!problem)
    return problem.takeError();
  double bytes = 4.0 * problem->batch * problem->m * problem->n;
  for (auto [i, output] : llvm::enumerate(signature.outputs)) {
    double elements = 1;
    for (int64_t size : signature.getOutputShape(i, *problem))
      elements *= size;
    bytes += elements * output.type.getElementTypeBitWidth() / 8;
  }
  double memory = static_cast<double>(sysconf(_SC_PHYS_PAGES)) *
                  static_cast<double>(sysconf(_SC_PAGE_SIZE));
  if (memory > 0 && bytes > memory)
    return llvm::createStringError(
        llvm::formatv("'{0}' on the CPU: M = {1}, N = {2} need {3:f1} GiB for "
                      "the outputs and the accumulator, more than this "
                      "machine's {4:f1} GiB of memory",
                      signature.functionName, problem->m, problem->n,
                      bytes / (1 << 30), memory / (1 << 30))
            .str());

  // The C interface takes a pointer to the results, then a pointer to each
  // memref argument's descriptor and each scalar by value.
  size_t resultWords = 0;
  for (const ProgramOutput &output : signature.outputs)
    resultWords += 3 + 2 * output.type.getRank();
  SmallVector<int64_t> results(resultWords, 0);
  void *resultPointer = results.data();

  SmallVector<SmallVector<int64_t>> descriptors;
  SmallVector<void *> descriptorPointers;
  descriptors.reserve(args.size());
  descriptorPointers.reserve(args.size());
  SmallVector<void *> packed{&resultPointer};
  for (auto [arg, value] : llvm::zip(signature.arguments, args)) {
    if (isa<RankedTensorType>(arg.type)) {
      descriptors.push_back(makeDescriptor(value.array));
      descriptorPointers.push_back(descriptors.back().data());
      packed.push_back(&descriptorPointers.back());
    } else if (arg.type.isF32()) {
      packed.push_back(const_cast<float *>(&value.f32));
    } else {
      packed.push_back(const_cast<int64_t *>(&value.i64));
    }
  }
  if (llvm::Error error = engine->invokePacked(
          (Twine("_mlir_ciface_") + kEntryName).str(), packed))
    return std::move(error);

  // Copy each result out of its (possibly strided) buffer, then free the
  // buffers the program allocated. Results may share a buffer (two outputs
  // with one value) or be an argument's.
  std::vector<HostArray> outputs;
  llvm::SetVector<void *> allocations;
  const int64_t *field = results.data();
  for (const ProgramOutput &output : signature.outputs) {
    int64_t rank = output.type.getRank();
    auto *allocated = reinterpret_cast<void *>(field[0]);
    auto *aligned = reinterpret_cast<const uint8_t *>(field[1]);
    int64_t offset = field[2];
    ArrayRef<int64_t> sizes(field + 3, rank), strides(field + 3 + rank, rank);
    field += 3 + 2 * rank;

    HostArray array(*getHostElementType(output.type.getElementType()), sizes);
    unsigned elementSize = getElementSize(array.elementType);
    SmallVector<int64_t> index(rank, 0);
    for (int64_t linear = 0, e = array.getNumElements(); linear < e;
         ++linear) {
      int64_t source = offset;
      for (int64_t d = 0; d < rank; ++d)
        source += index[d] * strides[d];
      std::memcpy(array.data.data() + linear * elementSize,
                  aligned + source * elementSize, elementSize);
      for (int64_t d = rank - 1; d >= 0 && ++index[d] == sizes[d]; --d)
        index[d] = 0;
    }
    outputs.push_back(std::move(array));
    allocations.insert(allocated);
  }
  for (const ArgumentValue &value : args)
    allocations.remove(const_cast<uint8_t *>(value.array.data.data()));
  for (void *allocated : allocations)
    std::free(allocated);
  return outputs;
}
