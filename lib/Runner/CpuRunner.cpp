//===- CpuRunner.cpp - run coda programs on the host CPU ------------------===//

#include "coda/Runner/CpuRunner.h"
#include "Jit.h"
#include "coda/Pipelines/Pipelines.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <cstdlib>
#include <cstring>
#include <unistd.h>

using namespace mlir;
using namespace mlir::coda;

/// The symbol a program is compiled under; reserved in C, so no library
/// linked into the JIT defines it.
static constexpr llvm::StringLiteral kEntryName = "__coda_program";

CpuExecutable::CpuExecutable(std::unique_ptr<ExecutionEngine> engine,
                             ProgramSignature signature, bool widenToF64)
    : engine(std::move(engine)), signature(std::move(signature)),
      widenedToF64(widenToF64) {}

CpuExecutable::~CpuExecutable() = default;

llvm::Expected<std::unique_ptr<CpuExecutable>>
CpuExecutable::create(OwningOpRef<ModuleOp> module, ProgramSignature signature,
                      bool widenToF64) {
  auto error = [](const Twine &message) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
  };
  // Names are interface metadata, already in the signature. The program is
  // compiled alone, under a name of its own: the JIT links the module
  // against the C library, where a program called `expf` would stand in for
  // the exponential its own code calls.
  isolateProgram(*module, signature.functionName);
  jit::removeNames(*module);
  auto func = module->lookupSymbol<func::FuncOp>(signature.functionName);
  if (!func)
    return error("no function named '" + signature.functionName + "'");
  func.setName(kEntryName);

  PassManager pm(module->getContext());
  buildCpuPipeline(pm, widenToF64);
  if (failed(pm.run(*module)))
    return error("lowering '" + signature.functionName +
                 "' for the CPU failed");

  auto engine = jit::compile(*module);
  if (!engine)
    return engine.takeError();
  return std::unique_ptr<CpuExecutable>(
      new CpuExecutable(std::move(*engine), std::move(signature), widenToF64));
}

llvm::Expected<std::vector<HostArray>>
CpuExecutable::run(ArrayRef<ArgumentValue> args) const {
  assert(!widenedToF64 && "a widened program runs on f64 buffers (runInto)");
  SmallVector<ArgumentRef> refs;
  for (const ArgumentValue &value : args) {
    ArgumentRef ref;
    ref.buffer.data = const_cast<uint8_t *>(value.array.data.data());
    ref.buffer.shape.assign(value.array.shape.begin(), value.array.shape.end());
    ref.number = value.f32;
    ref.i64 = value.i64;
    refs.push_back(std::move(ref));
  }
  SmallVector<SmallVector<int64_t>> shapes;
  for (const ArgumentRef &ref : refs)
    shapes.push_back(ref.buffer.shape);
  llvm::Expected<ProblemShape> problem = signature.inferProblemShape(shapes);
  if (!problem)
    return problem.takeError();
  // Refused before the outputs are allocated here.
  if (llvm::Error error = checkFits(*problem))
    return std::move(error);
  std::vector<HostArray> outputs;
  SmallVector<BufferRef> buffers;
  for (auto [i, output] : llvm::enumerate(signature.outputs))
    outputs.emplace_back(*getHostElementType(output.type.getElementType()),
                         signature.getOutputShape(i, *problem));
  for (HostArray &array : outputs)
    buffers.push_back(
        BufferRef{array.data.data(), SmallVector<int64_t>(array.shape.begin(),
                                                          array.shape.end())});
  if (llvm::Error error = runInto(refs, buffers))
    return std::move(error);
  return outputs;
}

unsigned CpuExecutable::getElementBytes(Type type) const {
  return widenedToF64 && isa<FloatType>(type)
             ? 8
             : type.getIntOrFloatBitWidth() / 8;
}

llvm::Error CpuExecutable::checkFits(const ProblemShape &problem) const {
  // The compiled program allocates its outputs and an accumulator and does
  // not survive a failed allocation: refuse what this machine cannot hold.
  double bytes =
      (widenedToF64 ? 8.0 : 4.0) * problem.batch * problem.m * problem.n;
  for (auto [i, output] : llvm::enumerate(signature.outputs)) {
    double elements = 1;
    for (int64_t size : signature.getOutputShape(i, problem))
      elements *= size;
    bytes += elements * getElementBytes(output.type.getElementType());
  }
  double memory = static_cast<double>(sysconf(_SC_PHYS_PAGES)) *
                  static_cast<double>(sysconf(_SC_PAGE_SIZE));
  if (memory > 0 && bytes > memory)
    return llvm::createStringError(
        llvm::formatv("'{0}' on the CPU: M = {1}, N = {2} need {3:f1} GiB for "
                      "the outputs and the accumulator, more than this "
                      "machine's {4:f1} GiB of memory",
                      signature.functionName, problem.m, problem.n,
                      bytes / (1 << 30), memory / (1 << 30))
            .str());
  return llvm::Error::success();
}

llvm::Error CpuExecutable::runInto(ArrayRef<ArgumentRef> args,
                                   ArrayRef<BufferRef> outputs) const {
  auto error = [](const Twine &message) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
  };
  if (args.size() != signature.arguments.size() ||
      outputs.size() != signature.outputs.size())
    return error(
        llvm::formatv("'{0}' takes {1} arguments and {2} outputs, "
                      "got {3} and {4}",
                      signature.functionName, signature.arguments.size(),
                      signature.outputs.size(), args.size(), outputs.size())
            .str());
  SmallVector<SmallVector<int64_t>> shapes;
  for (const ArgumentRef &value : args)
    shapes.push_back(value.buffer.shape);
  llvm::Expected<ProblemShape> problem = signature.inferProblemShape(shapes);
  if (!problem)
    return problem.takeError();
  for (auto [i, output] : llvm::enumerate(signature.outputs)) {
    SmallVector<int64_t> shape = signature.getOutputShape(i, *problem);
    auto spell = [](ArrayRef<int64_t> sizes) {
      return "[" +
             llvm::join(
                 llvm::map_range(
                     sizes, [](int64_t size) { return std::to_string(size); }),
                 ", ") +
             "]";
    };
    if (ArrayRef<int64_t>(shape) != ArrayRef<int64_t>(outputs[i].shape))
      return error("output '" + output.name + "' must have shape " +
                   spell(shape) + ", got " + spell(outputs[i].shape));
  }
  if (llvm::Error error = checkFits(*problem))
    return error;

  // The C interface takes a pointer to the results, then a pointer to each
  // memref argument's descriptor and each scalar by value.
  SmallVector<int64_t> ranks;
  SmallVector<unsigned> elementBytes;
  for (const ProgramOutput &output : signature.outputs) {
    ranks.push_back(output.type.getRank());
    elementBytes.push_back(getElementBytes(output.type.getElementType()));
  }
  SmallVector<int64_t> results(jit::getResultWords(ranks), 0);
  void *resultPointer = results.data();

  SmallVector<SmallVector<int64_t>> descriptors;
  SmallVector<void *> descriptorPointers;
  SmallVector<float> floats(args.size());
  SmallVector<double> doubles(args.size());
  descriptors.reserve(args.size());
  descriptorPointers.reserve(args.size());
  SmallVector<void *> packed{&resultPointer};
  for (auto [i, arg, value] : llvm::enumerate(signature.arguments, args)) {
    if (isa<RankedTensorType>(arg.type)) {
      descriptors.push_back(jit::makeDescriptor(value.buffer));
      descriptorPointers.push_back(descriptors.back().data());
      packed.push_back(&descriptorPointers.back());
    } else if (arg.type.isF32() && widenedToF64) {
      doubles[i] = value.number;
      packed.push_back(&doubles[i]);
    } else if (arg.type.isF32()) {
      floats[i] = static_cast<float>(value.number);
      packed.push_back(&floats[i]);
    } else {
      packed.push_back(const_cast<int64_t *>(&value.i64));
    }
  }
  if (llvm::Error error = engine->invokePacked(
          (Twine("_mlir_ciface_") + kEntryName).str(), packed))
    return error;

  // Copy each result out of its (possibly strided) buffer, then free the
  // buffers the program allocated. Results may share a buffer (two outputs
  // with one value) or be an argument's.
  llvm::SetVector<void *> allocations;
  jit::copyResults(
      results.data(), ranks, elementBytes,
      [&](unsigned i, ArrayRef<int64_t>) {
        return static_cast<uint8_t *>(outputs[i].data);
      },
      allocations);
  for (const ArgumentRef &value : args)
    allocations.remove(value.buffer.data);
  for (void *allocated : allocations)
    std::free(allocated);
  return llvm::Error::success();
}
