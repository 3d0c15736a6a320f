//===- SourceFile.h - read a program's source, bounded ----------*- C++ -*-===//
//
// Every tool reads a program (coda IR or the epilogue DSL) whole into memory.
// A file, a pipe or a device that holds more than any program would (an
// endless /dev/zero, a multi-gigabyte file given by mistake) is refused with
// an error instead of being read until memory runs out.
//
//===----------------------------------------------------------------------===//

#ifndef CODA_SUPPORT_SOURCEFILE_H
#define CODA_SUPPORT_SOURCEFILE_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/MemoryBuffer.h"

#include <cstdint>
#include <memory>

namespace mlir::coda {

/// The most bytes a program's source may hold: far above any real program
/// (the largest test input is under 100 KiB), far below what a tool can hold.
constexpr uint64_t kMaxSourceBytes = uint64_t(64) << 20;

/// Reads the source at `path` ("-" for standard input) whole: a regular file
/// larger than `limit` bytes is refused before it is read, and anything else
/// (a pipe, a device) is read until it ends or passes `limit`.
llvm::Expected<std::unique_ptr<llvm::MemoryBuffer>>
readSourceFile(llvm::StringRef path, uint64_t limit = kMaxSourceBytes);

} // namespace mlir::coda

#endif // CODA_SUPPORT_SOURCEFILE_H
