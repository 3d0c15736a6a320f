//===- KernelCache.h - the runtime's on-disk kernel cache -------*- C++ -*-===//
//
// Internal to the GPU runtime. A cache entry is <key>.ptx and <key>.abi (the
// PTX's SHA-256 on the first line, then the ABI dictionary); an entry is used
// only once it is checked to describe the program that asks for it.
//
//===----------------------------------------------------------------------===//

#ifndef CODA_LIB_RUNTIME_KERNELCACHE_H
#define CODA_LIB_RUNTIME_KERNELCACHE_H

#include "RuntimeImpl.h"

#include "coda/Program/ProgramSignature.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/Twine.h"

#include <string>

namespace mlir::coda::runtime {

/// Reads a cached kernel of the program `signature` from `directory` (none
/// when it is empty). An entry that is unreadable, damaged, or not this
/// program's is removed (it would fail every later run too) and reads as
/// absent.
bool readCache(MLIRContext &context, llvm::StringRef directory,
               llvm::StringRef key, const ProgramSignature &signature,
               Kernel &kernel);

/// Writes a kernel to the cache; failures only cost a recompilation later.
void writeCache(MLIRContext &context, llvm::StringRef directory,
                llvm::StringRef key, const Kernel &kernel);

/// Removes a cache entry that cannot be used.
void removeCache(llvm::StringRef directory, llvm::StringRef key);

/// Writes `contents` to a temporary file, then renames it to `path`, so that
/// readers never see half a file; creates the directory; a failure leaves no
/// file.
void writeAtomically(const llvm::Twine &path, llvm::StringRef contents);

} // namespace mlir::coda::runtime

#endif // CODA_LIB_RUNTIME_KERNELCACHE_H
