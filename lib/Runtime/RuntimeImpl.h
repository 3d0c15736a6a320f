//===- RuntimeImpl.h - the runtime's internal state -------------*- C++ -*-===//
//
// Internal to the GPU runtime: the state behind GpuRuntime and GpuProgram,
// shared by the files that compile (Program.cpp), cache (KernelCache.cpp),
// autotune (Autotune.cpp) and launch (Launch.cpp) kernels, and the helpers
// they all use.
//
//===----------------------------------------------------------------------===//

#ifndef CODA_LIB_RUNTIME_RUNTIMEIMPL_H
#define CODA_LIB_RUNTIME_RUNTIMEIMPL_H

#include "CudaDriver.h"
#include "coda/Kernel/KernelABI.h"
#include "coda/Runtime/Runtime.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/Location.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/Parser/Parser.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>

namespace mlir::coda {
namespace runtime {

/// An llvm::Error with `message`.
inline llvm::Error error(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

inline double secondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
      .count();
}

/// The compiler's chip for a GPU of compute capability `computeCapability`
/// (90: sm_90a).
inline std::string getChip(int computeCapability) {
  return "sm_" + std::to_string(computeCapability) + "a";
}

/// A kernel compiled and loaded into the driver, shared by every program with
/// the same cache key.
struct Kernel {
  std::string ptx;
  KernelABI abi;
  CUmodule module = nullptr;
  CUfunction function = nullptr;
  /// The merge kernels of the ABI's Partials parameters, by entry name.
  llvm::StringMap<CUfunction> merges;
  /// How many clusters of the kernel (of abi.getClusterSize() blocks) the
  /// device runs at once: the persistent grid, in clusters.
  int64_t activeClusters = 0;
};

/// Makes a runtime's context current for a scope and gives the caller's back
/// after it: the runtime drives its own device without changing which one
/// the calling thread (PyTorch, say) works on.
class ContextScope {
public:
  ContextScope(const CudaDriver &driver, CUcontext context) : driver(driver) {
    if (driver.cuCtxGetCurrent(&previous) == CUDA_SUCCESS &&
        previous != context)
      switched = driver.cuCtxSetCurrent(context) == CUDA_SUCCESS;
  }
  ~ContextScope() {
    if (switched)
      driver.cuCtxSetCurrent(previous);
  }
  ContextScope(const ContextScope &) = delete;
  ContextScope &operator=(const ContextScope &) = delete;

private:
  const CudaDriver &driver;
  CUcontext previous = nullptr;
  bool switched = false;
};

/// Collects diagnostics as text, for compile errors.
class DiagnosticCollector {
public:
  explicit DiagnosticCollector(MLIRContext &context)
      : handler(context.getDiagEngine().registerHandler([this](Diagnostic &d) {
          llvm::raw_string_ostream os(text);
          print(os, d.getLocation());
          os << (d.getSeverity() == DiagnosticSeverity::Error ? "error: " : "")
             << d << "\n";
          for (Diagnostic &note : d.getNotes()) {
            print(os, note.getLocation());
            os << "note: " << note << "\n";
          }
          return success();
        })),
        context(context) {}
  ~DiagnosticCollector() { context.getDiagEngine().eraseHandler(handler); }
  std::string text;

  /// Prints `location` as "file:line:col: " when it has one.
  static void print(llvm::raw_ostream &os, Location location) {
    if (auto file = dyn_cast<FileLineColLoc>(location))
      os << file.getFilename().getValue() << ":" << file.getLine() << ":"
         << file.getColumn() << ": ";
  }

private:
  DiagnosticEngine::HandlerID handler;
  MLIRContext &context;
};

/// Parses `source`, coda IR named `sourceName` in diagnostics, into
/// `context`, or an error holding `diagnostics` (which collects the
/// context's).
inline llvm::Expected<OwningOpRef<ModuleOp>>
parseModule(StringRef source, StringRef sourceName, MLIRContext &context,
            const DiagnosticCollector &diagnostics) {
  // Parsed from a copy: the parser reads one byte past the end of its
  // buffer, and a caller's buffer need not end in a NUL.
  std::string text = source.str();
  OwningOpRef<ModuleOp> module =
      parseSourceString<ModuleOp>(text, &context, sourceName);
  if (!module)
    return error("cannot parse the program:\n" + diagnostics.text);
  return module;
}

} // namespace runtime

struct GpuRuntime::Impl {
  const runtime::CudaDriver *driver = nullptr;
  CUdevice device = 0;
  /// The device's SM count: the persistent kernels' grid size.
  int multiprocessors = 1;
  CUcontext context = nullptr;
  /// coda's dialects: each kernel compiles in an MLIRContext of its own made
  /// from them, outside `mutex`, so that threads compile kernels at once.
  DialectRegistry registry;
  /// Where programs are loaded (parsed, derived), under `mutex`.
  std::unique_ptr<MLIRContext> mlir;
  std::mutex mutex;
  llvm::StringMap<std::shared_ptr<runtime::Kernel>> kernels;
  /// The cache keys of the kernels being compiled, and the condition that one
  /// of them is done: a thread that needs a kernel another one compiles waits
  /// for it rather than compiling it again.
  llvm::StringSet<> compiling;
  std::condition_variable compiled;

  ~Impl();
};

struct GpuProgram::Loaded {
  /// The kernels prepared so far and what preparing each took, by the shape
  /// part of their key.
  llvm::StringMap<std::shared_ptr<runtime::Kernel>> byShape;
  llvm::StringMap<GpuCompileStats> statsByShape;
  /// The shape part of the key of the kernel prepared last (which the
  /// program's stats and PTX describe).
  std::string lastShapeKey;
  /// The autotuned kernel shapes, by problem (getProblemKey), and the lock
  /// that makes concurrent first launches of a problem tune it once.
  llvm::StringMap<KernelShape> tuned;
  std::mutex tuning;
  /// Held while the row split's programs are loaded.
  std::mutex rowSplit;
};

} // namespace mlir::coda

#endif // CODA_LIB_RUNTIME_RUNTIMEIMPL_H
