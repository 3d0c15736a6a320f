//===- Jit.h - compiling lowered modules for the host and calling them ----===//
//
// What CpuExecutable (a program) and HostFunction (host code that launches
// programs) share: the JIT of a module already lowered to the LLVM dialect,
// and the memref descriptors of the C interface (`_mlir_ciface_<name>`: a
// pointer to the results, then a pointer to each memref argument's
// descriptor and each scalar by value).
//
//===----------------------------------------------------------------------===//

#ifndef CODA_LIB_RUNNER_JIT_H
#define CODA_LIB_RUNNER_JIT_H

#include "coda/Runner/CpuRunner.h"

#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "llvm/ADT/SetVector.h"

namespace mlir::coda::jit {

/// JIT-compiles `module` (in the LLVM dialect) at -O2 for the host CPU,
/// with `symbols` (name -> address) bound for its external functions.
llvm::Expected<std::unique_ptr<ExecutionEngine>>
compile(ModuleOp module, ArrayRef<std::pair<StringRef, void *>> symbols = {});

/// The descriptor of a contiguous row-major buffer: allocated and aligned
/// pointers, offset, sizes, strides; every field is 8 bytes.
SmallVector<int64_t> makeDescriptor(const BufferRef &buffer);

/// Reads the memref results a C-interface call wrote at `fields`, in order:
/// result i, of rank `ranks[i]` and elements of `elementBytes[i]` bytes, is
/// copied (from any strides) into the contiguous buffer `target(i, sizes)`
/// returns. The buffers the results were allocated in are added to
/// `allocations`, for the caller to free once no result is read from them.
void copyResults(
    const int64_t *fields, ArrayRef<int64_t> ranks,
    ArrayRef<unsigned> elementBytes,
    llvm::function_ref<uint8_t *(unsigned, ArrayRef<int64_t>)> target,
    llvm::SetVector<void *> &allocations);

/// Copies the elements of an array of `sizes` (`elementSize` bytes each)
/// from `from` to `to`, each at an element offset with element strides.
void copyStrided(int64_t elementSize, ArrayRef<int64_t> sizes,
                 const uint8_t *from, int64_t fromOffset,
                 ArrayRef<int64_t> fromStrides, uint8_t *to, int64_t toOffset,
                 ArrayRef<int64_t> toStrides);

/// Removes the `coda.name` of every function's arguments and results:
/// interface metadata, of no use to LLVM (which warns of it).
void removeNames(ModuleOp module);

/// The 8-byte words the results of `ranks` take in a C-interface call.
size_t getResultWords(ArrayRef<int64_t> ranks);

} // namespace mlir::coda::jit

#endif // CODA_LIB_RUNNER_JIT_H
