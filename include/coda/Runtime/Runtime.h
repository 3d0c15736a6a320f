//===- Runtime.h - compile and launch coda programs on a GPU ----*- C++ -*-===//
//
// The C++ API of coda's GPU runtime, on the CUDA Driver API:
//
//   auto runtime = GpuRuntime::create(/*device=*/0);
//   auto program = (*runtime)->loadProgram(mlirText);
//   (*program)->launch(arguments, outputs, stream);   // compiles on first use
//
// Programs are compiled when first launched, through coda-gpu-pipeline in this
// process, and cached in memory and on disk (keyed by the program text, the
// compile options, the GPU architecture and the compiler version). Kernels run
// on device memory and a CUDA stream that the caller owns; nothing is
// allocated or synchronized behind the caller's back. Every failure is an
// llvm::Error naming the program, the CUDA call and the driver's message.
//
//===----------------------------------------------------------------------===//

#ifndef CODA_RUNTIME_RUNTIME_H
#define CODA_RUNTIME_RUNTIME_H

#include "coda/Kernel/KernelShape.h"
#include "coda/Program/ProgramGraph.h"
#include "coda/Program/ProgramSignature.h"

#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/Error.h"

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

namespace mlir::coda {

struct GpuPipelineOptions;

namespace runtime {
struct CudaDriver;
struct Kernel;
} // namespace runtime

/// A tensor in device memory: a CUdeviceptr to dense row-major data.
struct DeviceTensor {
  uint64_t pointer = 0;
  SmallVector<int64_t, 3> shape;
};

/// The value bound to one program argument: `tensor` for tensor arguments,
/// `f32` or `i64` for scalars.
struct DeviceValue {
  DeviceTensor tensor;
  float f32 = 0.0f;
  int64_t i64 = 0;
};

/// How a program is compiled for the GPU.
struct GpuCompileOptions {
  /// The kernel shape (coda-to-gpu's options); what it leaves open, the tile
  /// rule (or autotuning) chooses per problem, else the compiler.
  KernelShape shape;
  /// Whether GELU(tanh), SiLU and sigmoid run on the tanh.approx.f32
  /// instruction (coda-to-gpu's fast-activations).
  bool fastActivations = false;
  /// Whether column reductions are merged in a fixed order instead of with
  /// f32 atomics: bit-identical from run to run (coda-plan-kernels'
  /// deterministic).
  bool deterministic = false;
  /// Whether the first launch of each problem shape times the candidate
  /// kernel shapes (getTuningCandidates) on its arguments and keeps the
  /// fastest, if it beats the tile-width rule's choice by kTuningMargin; the
  /// choice is cached with the kernels. Excludes pinning the shape.
  bool autotune = false;
};

/// The shape of a cooperative kernel of 128-row tiles `tileN` columns wide,
/// spelled as the tile rule and autotuning spell it, so that they share
/// kernels: 256 columns, the compiler's default, as the empty shape.
KernelShape getCooperativeShape(int64_t tileN);

/// The kernel shapes autotuning times for a problem whose tile rule chose
/// `ruleShape`: that one first (the baseline), then those it is not of
/// cooperative 128 x 256, 128 x 192, 128 x 128, 128 x 64 and 256 x 128 and
/// ping-pong 128 x 128 and 128 x 192, then `ruleShape` in clusters of two and
/// `ruleShape` in groups of 16 row blocks, where those differ from it.
SmallVector<KernelShape> getTuningCandidates(const KernelShape &ruleShape);

/// The tile width (output columns: 256, 192, 128 or 64) for a cooperative
/// kernel of 128-row tiles that computes `problem` on `multiprocessors` SMs:
/// the one whose waves of persistent blocks take least time, a tile of 192,
/// 128 and 64 columns counted as doing 0.85, 0.77 and 0.51 times the work
/// per column of a 256-column one (as measured). GPT-2's N = 768 makes 4
/// tiles of 192 per row block instead of 3 of 256, e.g.; a weight gradient
/// of 768 x 768 over K = 8192 runs in 64-column tiles (72 of them rather
/// than 24).
int64_t chooseTileN(const ProblemShape &problem, int multiprocessors);

/// What a program's epilogue asks of its kernel's tile.
enum class TileConstraint {
  None,
  /// Row reductions: a row must fit the tiles of one cluster along N, which
  /// chooseRowClusterShape sizes for each problem.
  RowCluster,
  /// A partner 8 columns away or more, or groups of 128 columns or more
  /// (coda.group_reduce), read from the same tile: the tile width stays the
  /// compiler's choice.
  CompilerTile,
};

/// The kernel shape of a program with row reductions for rows `n` columns
/// wide: `pinned`, and unless it pins cluster-n, a cluster along N that
/// spans the row: of 128-column tiles (unless the tile width is pinned) up
/// to 8 of them (N <= 1024, the portable cluster size), else of 256-column
/// tiles, up to 16 (N <= 4096). Rows of up to 128 columns keep the
/// compiler's choice (one tile, no cluster).
KernelShape chooseRowClusterShape(KernelShape pinned, int64_t n);

/// The tile rule's kernel shape for `problem`: the chooseTileN width, and
/// for K of at least 4096 clusters of two blocks walking the tiles in groups
/// of 16 row blocks, where there are two row blocks or more and the clusters
/// take no more waves than single blocks (the compiler's defaults
/// otherwise). A light epilogue (`lightEpilogue`: see
/// GpuProgram::lightEpilogue) at K <= 1024 over N a multiple of 192, in at
/// least 4 tiles per SM, gets ping-pong 128 x 192 tiles instead, each
/// consumer's epilogue beside the other's main loop (GPT-2's fc1 with bias
/// and GELU 11% faster, its saving program 9%; docs/performance.md).
KernelShape chooseRuleShape(const ProblemShape &problem, int multiprocessors,
                            bool lightEpilogue);

/// What happened when a program was prepared for its first launch.
struct GpuCompileStats {
  /// Seconds spent compiling (0 when the kernel came from a cache).
  double compileSeconds = 0.0;
  /// Seconds spent loading the module into the driver.
  double loadSeconds = 0.0;
  /// Whether the kernel came from the on-disk cache.
  bool fromDiskCache = false;
  /// The cache key.
  std::string key;
  /// The kernel's output tile (rows x columns), schedule, blocks per cluster
  /// and row blocks per group of its tile order (KernelABI::getShape: its
  /// stages are 0).
  KernelShape shape;
  /// With autotuning: each candidate's median time in milliseconds, in
  /// candidate order, when this launch tuned (empty when the choice was
  /// known, see tuningFromDiskCache).
  SmallVector<std::pair<std::string, double>> tuningMs;
  /// Whether the problem prepared or launched last runs as the program's row
  /// split (rows wider than a cluster of tiles holds): the fields above then
  /// describe the split's first kernel, its GEMM writing the row statistics.
  bool rowSplit = false;
  /// Whether the autotuned choice came from the on-disk cache.
  bool tuningFromDiskCache = false;
};

class GpuRuntime;

/// A program loaded into a runtime.
class GpuProgram {
public:
  ~GpuProgram();

  const ProgramSignature &getSignature() const { return signature; }

  /// Compiles the program (or fetches it from a cache) and loads it, if that
  /// has not happened yet: for the kernel shape of the compile options, or
  /// the one launches of `problem` (as launch() infers it from the argument
  /// shapes; with `seedInMemory`, launches given the dropout seed's address)
  /// use without autotuning. Threads may prepare and launch programs at
  /// once: different kernels compile in parallel, each kernel once.
  llvm::Error prepare();
  llvm::Error prepare(const ProblemShape &problem, bool seedInMemory = false);
  /// Whether launches choose their kernel shape by timing the candidates.
  bool isAutotuned() const {
    return options.autotune && constraint == TileConstraint::None;
  }
  /// What preparing the kernel prepared last took (a copy: launches on other
  /// threads may prepare another).
  GpuCompileStats getCompileStats() const;

  /// Launches the program on `stream` (a CUstream; null is the default
  /// stream): `arguments` in the signature's order, `outputs` in result
  /// order, all on the runtime's device. Checks every shape and alignment,
  /// and that no output overlaps another or an input (checkOutputMemory),
  /// first; does nothing when M or N is 0. Unless the compile options pin the
  /// kernel shape, each problem gets the tile rule's shape (chooseRuleShape),
  /// or with autotune the fastest candidate shape,
  /// timed at the problem's first launch on its arguments (after `stream`
  /// has caught up, into scratch outputs, on the default stream; that launch
  /// returns once the timing is done); each shape is compiled once, at its
  /// first launch. A non-zero `seedAddress` is the device address of the
  /// dropout seed's 8 bytes (its argument's `i64` is then ignored), which the
  /// kernel reads as it starts, so that a CUDA graph that captured the launch
  /// replays with the seed held there then; such launches use a kernel
  /// compiled for that, once, beside the other.
  llvm::Error launch(ArrayRef<DeviceValue> arguments,
                     ArrayRef<DeviceTensor> outputs, void *stream,
                     uint64_t seedAddress = 0);

  /// Times the kernel with CUDA events on the default stream: `warmup`
  /// launches, then `iterations` timed ones, each after a write of a 256 MiB
  /// buffer that evicts the inputs from L2. Returns the median in
  /// milliseconds.
  llvm::Expected<double> benchmark(ArrayRef<DeviceValue> arguments,
                                   ArrayRef<DeviceTensor> outputs, int warmup,
                                   int iterations);

private:
  friend class GpuRuntime;
  struct Loaded;
  GpuProgram(GpuRuntime &runtime, std::string source, std::string sourceName,
             ProgramSignature signature, GpuCompileOptions options,
             TileConstraint constraint, bool lightEpilogue);
  /// The kernel shape launches of `problem` use, without autotuning: the
  /// tile rule's shape (with the pinned stages, and the pinned cluster size
  /// and tile order instead of the rule's) unless the tile or the schedule
  /// is pinned.
  KernelShape chooseShape(const ProblemShape &problem) const;
  /// `problem` as its kernel is tiled: over the product's columns (half the
  /// output's N for an accumulator [m, n/2]).
  ProblemShape getTiledProblem(const ProblemShape &problem) const;
  /// The autotuned kernel shape of `problem`: known, from the disk cache, or
  /// timed now on `arguments`, once `stream` has caught up.
  llvm::Expected<KernelShape> tuneShape(const ProblemShape &problem,
                                        ArrayRef<DeviceValue> arguments,
                                        ArrayRef<DeviceTensor> outputs,
                                        void *stream, uint64_t seedAddress);
  /// Whether the program's row reductions run as its row split: for rows
  /// wider than the cluster of tiles of `shape` (chooseShape's) holds, and,
  /// unless the kernel shape is pinned, for rows that need a cluster of
  /// more than one tile (the split's two kernels take less time than a
  /// cluster's exchanges); those fall back to the exchange when the program
  /// cannot be split. Loads the split.
  llvm::Expected<bool> usesRowSplit(const ProblemShape &problem,
                                    const KernelShape &shape);
  /// Loads the row split's programs, once; a refusal is kept and given again.
  llvm::Error loadRowSplit(const ProblemShape &problem);
  /// Takes the row split's first kernel's stats as the program's.
  void noteRowSplit();
  /// Launches the row split of the program (deriveRowSplit: its GEMM
  /// writing its accumulator and row reductions into scratch from the
  /// stream-ordered allocator, then its epilogue on them, no product), for a
  /// problem whose rows are wider than its cluster of tiles holds.
  llvm::Error launchRowSplit(const ProblemShape &problem,
                             ArrayRef<DeviceValue> arguments,
                             ArrayRef<DeviceTensor> outputs, void *stream,
                             uint64_t seedAddress);
  /// Refuses outputs that overlap each other, A or B, or an input other
  /// than exactly (an output written in place over an epilogue input or C
  /// of its own bytes): the kernels read their inputs as memory no output
  /// writes.
  llvm::Error checkOutputMemory(ArrayRef<DeviceValue> arguments,
                                ArrayRef<DeviceTensor> outputs);
  /// Launches the kernel of `shape` (launch() has checked the arguments).
  llvm::Error launchShape(const KernelShape &shape, const ProblemShape &problem,
                          ArrayRef<DeviceValue> arguments,
                          ArrayRef<DeviceTensor> outputs, void *stream,
                          uint64_t seedAddress);
  /// The median time of each of `launches` in milliseconds, over
  /// `iterations` rounds that time each once in turn (so that clock changes
  /// reach them alike), on the default stream, each call after a 256 MiB
  /// write that evicts L2; each is first called `warmup` times untimed.
  llvm::Expected<SmallVector<double>>
  timeLaunches(ArrayRef<std::function<llvm::Error()>> launches, int warmup,
               int iterations);
  /// The cache key of the program, before the kernel shape: the compiler
  /// version, the chip, the source, the function and the activations option.
  std::string getProgramKey() const;
  /// Compiles (or fetches) and loads the kernel of `shape`, once; with
  /// `seedInMemory`, the variant that reads the dropout seed from its address.
  llvm::Expected<std::shared_ptr<runtime::Kernel>>
  prepareShape(const KernelShape &shape, bool seedInMemory = false);
  /// The kernel of cache key `key`, compiled with `pipeline` or read from
  /// the disk cache, and loaded; says which in `stats`. Runs outside the
  /// runtime's lock, on any number of threads at once.
  llvm::Expected<std::shared_ptr<runtime::Kernel>>
  buildKernel(StringRef key, const GpuPipelineOptions &pipeline,
              GpuCompileStats &stats) const;

  GpuRuntime &runtime;
  std::string source;
  std::string sourceName;
  ProgramSignature signature;
  GpuCompileOptions options;
  /// What the epilogue asks of the tile; autotuning leaves such programs
  /// alone.
  TileConstraint constraint;
  /// Whether the epilogue reads no tensor spanning m and n (no C, no
  /// residual) and has no dropout, reductions or partners, over a
  /// non-batched accumulator [m, n]: what runs beside another consumer's
  /// main loop without slowing it (chooseRuleShape).
  bool lightEpilogue;
  GpuCompileStats stats;
  std::unique_ptr<Loaded> loaded;
  /// The row split's two programs, loaded at the first launch that needs
  /// them (Loaded::rowSplit guards them).
  std::unique_ptr<GpuProgram> rowStatistics, rowApply;
  /// Why the program cannot be split (deriveRowSplit's error), once
  /// loadRowSplit found out; and whether it did, read without the lock by
  /// launches that then use the cluster exchange.
  std::string rowSplitRefusal;
  std::atomic<bool> rowSplitRefused{false};
};

/// A program graph (coda/Program/ProgramGraph.h: a function that calls coda
/// programs and nothing else, such as a chain of GEMMs passing tensors
/// along) loaded into a runtime: one call launches every program in turn on
/// one stream, the values between them in a workspace the caller gives.
class GpuProgramGraph {
public:
  ~GpuProgramGraph();

  const ProgramGraph &getGraph() const { return graph; }

  /// The calls' problems, the results' shapes and the workspace's size for
  /// `arguments` (ProgramGraph::plan on their shapes; their pointers and
  /// scalars are not read).
  llvm::Expected<GraphPlan> plan(ArrayRef<DeviceValue> arguments) const;

  /// Prepares the kernel of every call for arguments of the shapes of
  /// `arguments` (GpuProgram::prepare), each kernel once, on a pool of
  /// threads.
  llvm::Error prepare(ArrayRef<DeviceValue> arguments);

  /// Launches every call in turn on `stream`: `arguments` in the function's
  /// order, `results` in its result order, the values between calls at their
  /// offsets in `workspace` (a device address aligned to
  /// ProgramGraph::kWorkspaceAlignment, of `workspaceBytes` bytes, at least
  /// the plan's). Checks every shape and the workspace before launching
  /// anything; a call that fails its own checks after that (a null pointer,
  /// K = 0) stops the calls after it, those before it queued. An error names
  /// the call.
  llvm::Error launch(ArrayRef<DeviceValue> arguments,
                     ArrayRef<DeviceTensor> results, uint64_t workspace,
                     uint64_t workspaceBytes, void *stream);

private:
  friend class GpuRuntime;
  GpuProgramGraph(ProgramGraph graph,
                  std::vector<std::unique_ptr<GpuProgram>> programs);

  ProgramGraph graph;
  /// Per program of the graph, loaded, or null when no call runs it.
  std::vector<std::unique_ptr<GpuProgram>> programs;
};

/// Device memory owned by the caller of the runtime (tools, tests).
class DeviceBuffer {
public:
  /// Allocates `bytes` on the runtime's device.
  static llvm::Expected<DeviceBuffer> allocate(GpuRuntime &runtime,
                                               size_t bytes);
  DeviceBuffer(DeviceBuffer &&other);
  DeviceBuffer &operator=(DeviceBuffer &&other) = delete;
  ~DeviceBuffer();

  uint64_t get() const { return pointer; }
  size_t size() const { return bytes; }
  llvm::Error upload(const void *data);
  llvm::Error download(void *data) const;
  /// Sets every byte to `value` (0xFF poisons floats with NaN).
  llvm::Error fill(uint8_t value);

private:
  DeviceBuffer(GpuRuntime &runtime, uint64_t pointer, size_t bytes)
      : runtime(&runtime), pointer(pointer), bytes(bytes) {}
  /// Makes `call` (a driver call on the buffer, a CUresult) in the
  /// runtime's context, unless the buffer is empty; its failure is reported
  /// as `name` failing at `what`.
  llvm::Error run(llvm::function_ref<int(const runtime::CudaDriver &)> call,
                  const char *name, const char *what) const;
  GpuRuntime *runtime;
  uint64_t pointer;
  size_t bytes;
};

/// A CUDA device with coda's compiler and caches.
class GpuRuntime {
public:
  /// Opens `device`: its primary context (the one CUDA runtime users such as
  /// PyTorch share), which each call that works on the device makes current
  /// for its duration, giving the calling thread's own back afterwards.
  static llvm::Expected<std::unique_ptr<GpuRuntime>> create(int device = 0);
  ~GpuRuntime();

  /// Parses and verifies a program written in coda IR; `function` names it
  /// when the module holds several; diagnostics name `sourceName:line:col`.
  /// A non-empty `derive` loads instead the program derived from it
  /// (deriveProgram in coda/Dialect/Coda/Transforms/Backward.h: "backward",
  /// "saving", "backward_saved", "backward_saved_nk", "backward_from_saved",
  /// "grad_a", "grad_b").
  llvm::Expected<std::unique_ptr<GpuProgram>>
  loadProgram(llvm::StringRef mlirSource, llvm::StringRef function = "",
              GpuCompileOptions options = {},
              llvm::StringRef sourceName = "program",
              llvm::StringRef derive = "");

  /// Parses a module of coda IR, makes each coda.gemm outside a program a
  /// program (coda-outline-programs), and loads `function` (with no name,
  /// as ProgramGraph::get chooses) as a program graph, each of its
  /// programs loaded with `options`.
  llvm::Expected<std::unique_ptr<GpuProgramGraph>>
  loadProgramGraph(llvm::StringRef mlirSource, llvm::StringRef function = "",
                   GpuCompileOptions options = {},
                   llvm::StringRef sourceName = "program");

  /// Waits for all work on the device.
  llvm::Error synchronize();

  /// Parses an epilogue written in the DSL (docs/dsl.md) into a program whose
  /// GEMM has operands of `dtype` (bf16, f16, f32), A stored as `layoutA`
  /// (mk, km) and B as `layoutB` (nk, kn), with C and beta arguments when
  /// `withC`, an alpha argument when `withAlpha`.
  llvm::Expected<std::unique_ptr<GpuProgram>>
  loadEpilogue(llvm::StringRef dslSource, llvm::StringRef dtype = "bf16",
               llvm::StringRef layoutA = "mk", llvm::StringRef layoutB = "nk",
               bool withC = false, bool withAlpha = false,
               GpuCompileOptions options = {},
               llvm::StringRef sourceName = "epilogue",
               llvm::StringRef derive = "");

  /// "NVIDIA H200 (sm_90)".
  const std::string &getDeviceDescription() const { return description; }
  /// The compute capability as 10 * major + minor (90 for Hopper).
  int getComputeCapability() const { return computeCapability; }

  /// The folder of the on-disk cache: $CODA_CACHE_DIR, else
  /// $XDG_CACHE_HOME/coda, else ~/.cache/coda; empty disables it.
  const std::string &getCacheDirectory() const { return cacheDirectory; }

private:
  friend class GpuProgram;
  friend class DeviceBuffer;
  struct Impl;
  GpuRuntime();

  std::unique_ptr<Impl> impl;
  std::string description;
  int computeCapability = 0;
  std::string cacheDirectory;
};

} // namespace mlir::coda

#endif // CODA_RUNTIME_RUNTIME_H
