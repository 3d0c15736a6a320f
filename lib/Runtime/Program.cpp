//===- Program.cpp - compile and load the kernels of a program ------------===//

#include "KernelCache.h"
#include "Launch.h"
#include "RuntimeImpl.h"

#include "coda/Pipelines/Pipelines.h"
#include "coda/Runtime/Version.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/SHA256.h"

#include <optional>

using namespace mlir;
using namespace mlir::coda;
using namespace mlir::coda::runtime;

GpuProgram::GpuProgram(GpuRuntime &runtime, std::string source,
                       std::string sourceName, ProgramSignature signature,
                       GpuCompileOptions options, TileConstraint constraint,
                       bool lightEpilogue)
    : runtime(runtime), source(std::move(source)),
      sourceName(std::move(sourceName)), signature(std::move(signature)),
      options(options), constraint(constraint), lightEpilogue(lightEpilogue),
      loaded(std::make_unique<Loaded>()) {}

GpuProgram::~GpuProgram() = default;

/// Compiles `source` with coda-gpu-pipeline into PTX and the kernel's ABI.
static llvm::Error compile(MLIRContext &context, StringRef source,
                           StringRef sourceName, StringRef function,
                           const GpuPipelineOptions &pipeline, Kernel &kernel) {
  DiagnosticCollector diagnostics(context);
  OwningOpRef<ModuleOp> module =
      parseSourceString<ModuleOp>(source, &context, sourceName);
  if (!module)
    return error("cannot parse the program:\n" + diagnostics.text);
  isolateProgram(*module, function);
  PassManager pm(&context);
  buildGpuPipeline(pm, pipeline);
  if (failed(pm.run(*module)))
    return error("compiling '" + function + "' for the GPU failed:\n" +
                 diagnostics.text);

  std::optional<KernelABI> abi;
  module->walk([&](func::FuncOp func) {
    if (auto attr = func->getAttrOfType<DictionaryAttr>(KernelABI::kAttrName))
      abi = KernelABI::fromAttr(attr);
  });
  if (!abi)
    return error("compiling '" + function +
                 "' for the GPU produced no kernel description");
  auto binary = module->lookupSymbol<gpu::BinaryOp>(abi->module);
  if (!binary)
    return error("compiling '" + function + "' produced no gpu.binary '" +
                 abi->module + "'");
  for (Attribute attr : binary.getObjects()) {
    auto object = cast<gpu::ObjectAttr>(attr);
    if (object.getFormat() == gpu::CompilationTarget::Assembly)
      kernel.ptx = object.getObject().str();
  }
  if (kernel.ptx.empty())
    return error("compiling '" + function + "' produced no PTX");
  kernel.abi = std::move(*abi);
  return llvm::Error::success();
}

/// Loads a compiled kernel into the runtime's context and counts the clusters
/// of it that run at once on its device (one block per SM without clusters);
/// on failure unloads what it loaded.
static llvm::Error load(const CudaDriver &driver, CUcontext context,
                        int multiprocessors, StringRef function,
                        Kernel &kernel) {
  ContextScope scope(driver, context);
  std::string what = ("loading the kernel of '" + function + "'").str();
  if (auto e = driver.check(driver.cuModuleLoadDataEx(&kernel.module,
                                                      kernel.ptx.c_str(), 0,
                                                      nullptr, nullptr),
                            "cuModuleLoadDataEx", what))
    return e;
  llvm::Error error =
      driver.check(driver.cuModuleGetFunction(&kernel.function, kernel.module,
                                              kernel.abi.kernel.c_str()),
                   "cuModuleGetFunction", what);
  for (const KernelParam &param : kernel.abi.params)
    if (!error && !param.merge.empty())
      error = driver.check(
          driver.cuModuleGetFunction(&kernel.merges[param.merge], kernel.module,
                                     param.merge.c_str()),
          "cuModuleGetFunction", what);
  if (!error && kernel.abi.sharedMemoryBytes > 48 * 1024)
    error = driver.check(driver.cuFuncSetAttribute(
                             kernel.function,
                             CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                             static_cast<int>(kernel.abi.sharedMemoryBytes)),
                         "cuFuncSetAttribute", what);
  int64_t clusterSize = kernel.abi.getClusterSize();
  if (!error && clusterSize > KernelShape::kPortableClusterSize)
    error = driver.check(
        driver.cuFuncSetAttribute(
            kernel.function,
            CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1),
        "cuFuncSetAttribute", what);
  if (!error && clusterSize > 1) {
    CUlaunchAttribute attribute;
    CUlaunchConfig config = getLaunchConfig(kernel, /*grid=*/clusterSize,
                                            /*stream=*/nullptr, attribute);
    int clusters = 0;
    error = driver.check(driver.cuOccupancyMaxActiveClusters(
                             &clusters, kernel.function, &config),
                         "cuOccupancyMaxActiveClusters", what);
    if (!error && clusters < 1)
      error = llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          "%s: the device cannot run a cluster of %d blocks of this kernel",
          what.c_str(), static_cast<int>(clusterSize));
    kernel.activeClusters = clusters;
  } else {
    kernel.activeClusters = multiprocessors;
  }
  if (error) {
    driver.cuModuleUnload(kernel.module);
    kernel.module = nullptr;
  }
  return error;
}

std::string GpuProgram::getProgramKey() const {
  llvm::SHA256 hash;
  std::string chip = getChip(runtime.computeCapability);
  StringRef activations = options.fastActivations ? "fast" : "exact";
  StringRef reductions = options.deterministic ? "ordered" : "atomic";
  for (StringRef part :
       {StringRef(kCodaCompilerVersion), StringRef(chip), StringRef(source),
        StringRef(signature.functionName), activations, reductions})
    hash.update(part), hash.update(StringRef("\0", 1));
  return llvm::toHex(hash.final(), /*LowerCase=*/true).substr(0, 32);
}

ProblemShape GpuProgram::getTiledProblem(const ProblemShape &problem) const {
  // The kernel is tiled over the product's columns, which an accumulator
  // [m, n/2] spreads over twice as many output columns.
  ProblemShape tiled = problem;
  if (signature.halfNAccumulator)
    tiled.n /= 2;
  return tiled;
}

KernelShape GpuProgram::chooseShape(const ProblemShape &problem) const {
  // The tile rule chooses the shape unless the tile, the schedule or a
  // cluster along N (row statistics exchanged, not merged) is pinned; pinned
  // stages, cluster size along M and tile order carry over to its choice.
  const KernelShape &pinned = options.shape;
  if (constraint == TileConstraint::RowCluster)
    return chooseRowClusterShape(pinned, problem.n);
  if (pinned.tileM || pinned.tileN || pinned.schedule || pinned.clusterN ||
      constraint == TileConstraint::CompilerTile)
    return pinned;
  KernelShape shape =
      chooseRuleShape(problem, runtime.impl->multiprocessors, lightEpilogue);
  shape.stages = pinned.stages;
  // A pinned cluster size or tile order replaces both of the rule's, which
  // might not go together with it (the group is a multiple of the cluster).
  if (pinned.clusterM || pinned.groupRows) {
    shape.clusterM = pinned.clusterM;
    shape.groupRows = pinned.groupRows;
  }
  return shape;
}

GpuCompileStats GpuProgram::getCompileStats() const {
  std::lock_guard<std::mutex> lock(runtime.impl->mutex);
  return stats;
}

llvm::Error GpuProgram::prepare() {
  return prepareShape(options.shape).takeError();
}

llvm::Error GpuProgram::prepare(const ProblemShape &problem,
                                bool seedInMemory) {
  ProblemShape tiled = getTiledProblem(problem);
  KernelShape shape = chooseShape(tiled);
  seedInMemory = seedInMemory && signature.findSeed() >= 0;
  llvm::Expected<bool> split = usesRowSplit(tiled, shape);
  if (!split)
    return split.takeError();
  if (!*split)
    return prepareShape(shape, seedInMemory).takeError();
  llvm::Error error =
      llvm::joinErrors(rowStatistics->prepare(tiled, seedInMemory),
                       rowApply->prepare(tiled, seedInMemory));
  if (!error)
    noteRowSplit();
  return error;
}

void GpuProgram::noteRowSplit() {
  GpuCompileStats split = rowStatistics->getCompileStats();
  split.rowSplit = true;
  std::lock_guard<std::mutex> lock(runtime.impl->mutex);
  stats = std::move(split);
  // The next kernel of the program's own takes its stats again.
  loaded->lastShapeKey.clear();
}

llvm::Expected<std::shared_ptr<Kernel>>
GpuProgram::buildKernel(StringRef key, const GpuPipelineOptions &pipeline,
                        GpuCompileStats &stats) const {
  // An MLIRContext of its own: other threads compile in theirs.
  GpuRuntime::Impl &impl = *runtime.impl;
  StringRef cacheDirectory = runtime.cacheDirectory;
  MLIRContext context(impl.registry, MLIRContext::Threading::DISABLED);
  context.printOpOnDiagnostic(false);
  auto kernel = std::make_shared<Kernel>();
  std::chrono::steady_clock::time_point start;
  if (readCache(context, cacheDirectory, key, signature, *kernel)) {
    start = std::chrono::steady_clock::now();
    if (llvm::Error e = load(*impl.driver, impl.context, impl.multiprocessors,
                             signature.functionName, *kernel)) {
      // Not loadable here (written by another driver, say): compiled anew.
      llvm::consumeError(std::move(e));
      removeCache(cacheDirectory, key);
      *kernel = Kernel();
    } else {
      stats.fromDiskCache = true;
    }
  }
  if (!stats.fromDiskCache) {
    start = std::chrono::steady_clock::now();
    if (auto e = compile(context, source, sourceName, signature.functionName,
                         pipeline, *kernel))
      return std::move(e);
    stats.compileSeconds = secondsSince(start);
    start = std::chrono::steady_clock::now();
    if (auto e = load(*impl.driver, impl.context, impl.multiprocessors,
                      signature.functionName, *kernel))
      return std::move(e);
    // Cached only once it has loaded.
    writeCache(context, cacheDirectory, key, *kernel);
  }
  stats.loadSeconds = secondsSince(start);
  return kernel;
}

llvm::Expected<std::shared_ptr<Kernel>>
GpuProgram::prepareShape(const KernelShape &shape, bool seedInMemory) {
  GpuRuntime::Impl &impl = *runtime.impl;
  std::unique_lock<std::mutex> lock(impl.mutex);
  std::string shapeKey = shape.getKey();
  if (seedInMemory)
    shapeKey += "/seed-in-memory";
  if (std::shared_ptr<Kernel> known = loaded->byShape.lookup(shapeKey)) {
    if (shapeKey != loaded->lastShapeKey) {
      stats = loaded->statsByShape.lookup(shapeKey);
      loaded->lastShapeKey = shapeKey;
    }
    return known;
  }

  GpuPipelineOptions pipeline;
  pipeline.chip = getChip(runtime.computeCapability);
  shape.setOptions(pipeline);
  pipeline.fastActivations = options.fastActivations;
  pipeline.deterministic = options.deterministic;
  pipeline.seedInMemory = seedInMemory;

  // The key covers everything the kernel depends on.
  GpuCompileStats fresh;
  llvm::SHA256 hash;
  hash.update(getProgramKey());
  hash.update(shapeKey);
  fresh.key = llvm::toHex(hash.final(), /*LowerCase=*/true).substr(0, 32);

  // Compiled outside the lock, once: a thread that needs a kernel another
  // one is compiling waits for it (and compiles it itself if that failed).
  impl.compiled.wait(lock, [&] { return !impl.compiling.contains(fresh.key); });
  std::shared_ptr<Kernel> kernel = impl.kernels.lookup(fresh.key);
  if (!kernel) {
    impl.compiling.insert(fresh.key);
    lock.unlock();
    llvm::Expected<std::shared_ptr<Kernel>> built =
        buildKernel(fresh.key, pipeline, fresh);
    lock.lock();
    impl.compiling.erase(fresh.key);
    impl.compiled.notify_all();
    if (!built)
      return built.takeError();
    impl.kernels[fresh.key] = kernel = std::move(*built);
  }
  fresh.shape = kernel->abi.getShape();
  stats = std::move(fresh);
  loaded->byShape[shapeKey] = kernel;
  loaded->statsByShape[shapeKey] = stats;
  loaded->lastShapeKey = shapeKey;
  return kernel;
}
