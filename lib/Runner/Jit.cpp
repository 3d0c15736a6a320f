//===- Jit.cpp - compiling lowered modules for the host and calling them --===//

#include "Jit.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h"
#include "llvm/ExecutionEngine/Orc/Mangling.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Target/TargetMachine.h"

#include <cstring>

using namespace mlir;
using namespace mlir::coda;

llvm::Expected<std::unique_ptr<ExecutionEngine>>
jit::compile(ModuleOp module, ArrayRef<std::pair<StringRef, void *>> symbols) {
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
  auto engine = ExecutionEngine::create(module, options);
  if (!engine)
    return engine.takeError();
  if (!symbols.empty())
    (*engine)->registerSymbols([&](llvm::orc::MangleAndInterner interner) {
      llvm::orc::SymbolMap map;
      for (auto [name, address] : symbols)
        map[interner(name)] = {llvm::orc::ExecutorAddr::fromPtr(address),
                               llvm::JITSymbolFlags::Exported};
      return map;
    });
  return std::move(*engine);
}

SmallVector<int64_t> jit::makeDescriptor(const BufferRef &buffer) {
  SmallVector<int64_t> descriptor;
  auto pointer = reinterpret_cast<int64_t>(buffer.data);
  descriptor.append({pointer, pointer, 0});
  descriptor.append(buffer.shape.begin(), buffer.shape.end());
  int64_t stride = 1;
  SmallVector<int64_t> strides(buffer.shape.size());
  for (int i = static_cast<int>(buffer.shape.size()) - 1; i >= 0; --i) {
    strides[i] = stride;
    stride *= buffer.shape[i];
  }
  descriptor.append(strides.begin(), strides.end());
  return descriptor;
}

void jit::copyStrided(int64_t elementSize, ArrayRef<int64_t> sizes,
                      const uint8_t *from, int64_t fromOffset,
                      ArrayRef<int64_t> fromStrides, uint8_t *to,
                      int64_t toOffset, ArrayRef<int64_t> toStrides) {
  int64_t rank = static_cast<int64_t>(sizes.size()), count = 1;
  for (int64_t size : sizes)
    count *= size;
  SmallVector<int64_t> index(rank, 0);
  for (int64_t linear = 0; linear < count; ++linear) {
    int64_t source = fromOffset, target = toOffset;
    for (int64_t d = 0; d < rank; ++d) {
      source += index[d] * fromStrides[d];
      target += index[d] * toStrides[d];
    }
    std::memcpy(to + target * elementSize, from + source * elementSize,
                elementSize);
    for (int64_t d = rank - 1; d >= 0 && ++index[d] == sizes[d]; --d)
      index[d] = 0;
  }
}

void jit::removeNames(ModuleOp module) {
  for (auto func : module.getOps<func::FuncOp>()) {
    for (unsigned i = 0, e = func.getNumArguments(); i < e; ++i)
      func.removeArgAttr(i, "coda.name");
    for (unsigned i = 0, e = func.getNumResults(); i < e; ++i)
      func.removeResultAttr(i, StringAttr::get(func.getContext(), "coda.name"));
  }
}

size_t jit::getResultWords(ArrayRef<int64_t> ranks) {
  size_t words = 0;
  for (int64_t rank : ranks)
    words += 3 + 2 * rank;
  return words;
}

void jit::copyResults(
    const int64_t *field, ArrayRef<int64_t> ranks,
    ArrayRef<unsigned> elementBytes,
    llvm::function_ref<uint8_t *(unsigned, ArrayRef<int64_t>)> target,
    llvm::SetVector<void *> &allocations) {
  for (auto [i, rank, elementSize] : llvm::enumerate(ranks, elementBytes)) {
    auto *allocated = reinterpret_cast<void *>(field[0]);
    auto *aligned = reinterpret_cast<const uint8_t *>(field[1]);
    int64_t offset = field[2];
    ArrayRef<int64_t> sizes(field + 3, rank), strides(field + 3 + rank, rank);
    field += 3 + 2 * rank;

    SmallVector<int64_t> contiguous(rank, 1);
    for (int64_t d = rank - 2; d >= 0; --d)
      contiguous[d] = contiguous[d + 1] * sizes[d + 1];
    copyStrided(elementSize, sizes, aligned, offset, strides, target(i, sizes),
                0, contiguous);
    allocations.insert(allocated);
  }
}
