//===- HostLaunch.h - how host code launches a program ----------*- C++ -*-===//
//
// The contract between coda-launch-programs, which rewrites every program of
// a module into a launch through the host runtime, and the runner that binds
// those launches (include/coda/Runner/HostFunction.h). A launch passes the
// program's index (its place among the module's programs, getPrograms) and a
// buffer of 64-bit words: kWordsPerValue words for each argument, then for
// each output; programs are numbered in the order of the module
// (getPrograms, ProgramSignature.h). A tensor's words are its aligned address,
// its rank and its sizes (row-major, contiguous); a scalar's first word holds
// its bits (an f32 in the low 32). kShapesFunction writes the outputs' ranks
// and sizes; kLaunchFunction runs the program once their addresses are stored.
//
//===----------------------------------------------------------------------===//

#ifndef CODA_PROGRAM_HOSTLAUNCH_H
#define CODA_PROGRAM_HOSTLAUNCH_H

#include "llvm/ADT/StringRef.h"

#include <cstdint>

namespace mlir::coda::host_launch {

/// Words per argument or output: address (or bits), rank, three sizes.
constexpr int64_t kWordsPerValue = 5;
/// The word of a value that holds its rank, and the first of its sizes.
constexpr int64_t kRankWord = 1;
constexpr int64_t kFirstSizeWord = 2;
/// The external functions a launch calls, with the C interface
/// (`_mlir_ciface_<name>(int64_t index, StridedMemRefType<int64_t, 1> *)`).
constexpr llvm::StringLiteral kShapesFunction = "coda_host_shapes";
constexpr llvm::StringLiteral kLaunchFunction = "coda_host_launch";

} // namespace mlir::coda::host_launch

#endif // CODA_PROGRAM_HOSTLAUNCH_H
