//===- Runtime.cpp - open a GPU, load programs into it --------------------===//

#include "RuntimeImpl.h"

#include "coda/Dialect/Coda/IR/CodaOps.h"
#include "coda/Dialect/Coda/IR/EpilogueDims.h"
#include "coda/Dialect/Coda/Transforms/Backward.h"
#include "coda/Dialect/Coda/Utils/RowStatistics.h"
#include "coda/Frontend/EpilogueImport.h"
#include "coda/Registration/Registration.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/SourceMgr.h"

#include <optional>

using namespace mlir;
using namespace mlir::coda;
using namespace mlir::coda::runtime;

GpuRuntime::Impl::~Impl() {
  if (!context)
    return;
  {
    ContextScope scope(*driver, context);
    for (auto &entry : kernels)
      if (entry.second->module)
        driver->cuModuleUnload(entry.second->module);
  }
  driver->cuDevicePrimaryCtxRelease(device);
}

GpuRuntime::GpuRuntime() : impl(std::make_unique<Impl>()) {}
GpuRuntime::~GpuRuntime() = default;

static std::string defaultCacheDirectory() {
  if (std::optional<std::string> dir =
          llvm::sys::Process::GetEnv("CODA_CACHE_DIR"))
    return *dir;
  llvm::SmallString<256> path;
  if (std::optional<std::string> xdg =
          llvm::sys::Process::GetEnv("XDG_CACHE_HOME")) {
    path = *xdg;
  } else if (std::optional<std::string> home =
                 llvm::sys::Process::GetEnv("HOME")) {
    path = *home;
    llvm::sys::path::append(path, ".cache");
  } else {
    return "";
  }
  llvm::sys::path::append(path, "coda");
  return std::string(path);
}

llvm::Expected<std::unique_ptr<GpuRuntime>> GpuRuntime::create(int device) {
  llvm::Expected<const CudaDriver &> driver = CudaDriver::get();
  if (!driver)
    return driver.takeError();
  std::unique_ptr<GpuRuntime> runtime(new GpuRuntime());
  Impl &impl = *runtime->impl;
  impl.driver = &*driver;
  int count = 0;
  if (auto e = driver->check(driver->cuDeviceGetCount(&count),
                             "cuDeviceGetCount", "looking for GPUs"))
    return std::move(e);
  if (device < 0 || device >= count)
    return error("there is no CUDA device " + Twine(device) + " (found " +
                 Twine(count) + ")");
  std::string opening = ("opening device " + Twine(device)).str();
  if (auto e = driver->check(driver->cuDeviceGet(&impl.device, device),
                             "cuDeviceGet", opening))
    return std::move(e);
  if (auto e = driver->check(
          driver->cuDevicePrimaryCtxRetain(&impl.context, impl.device),
          "cuDevicePrimaryCtxRetain", opening))
    return std::move(e);

  int major = 0, minor = 0;
  std::pair<int *, CUdevice_attribute> attributes[] = {
      {&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR},
      {&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR},
      {&impl.multiprocessors, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT}};
  for (auto [value, attribute] : attributes)
    if (auto e = driver->check(
            driver->cuDeviceGetAttribute(value, attribute, impl.device),
            "cuDeviceGetAttribute", opening))
      return std::move(e);
  char name[256] = {0};
  if (auto e = driver->check(
          driver->cuDeviceGetName(name, sizeof(name), impl.device),
          "cuDeviceGetName", opening))
    return std::move(e);
  runtime->computeCapability = major * 10 + minor;
  runtime->description = std::string(name) + " (sm_" +
                         std::to_string(runtime->computeCapability) + ")";
  if (runtime->computeCapability != 90)
    return error("coda's GPU kernels need a Hopper GPU (sm_90); device " +
                 Twine(device) + " is " + runtime->description);
  runtime->cacheDirectory = defaultCacheDirectory();

  registerDialects(impl.registry);
  impl.mlir = std::make_unique<MLIRContext>(impl.registry);
  impl.mlir->printOpOnDiagnostic(false);
  impl.mlir->loadAllAvailableDialects();
  return std::move(runtime);
}

llvm::Expected<std::unique_ptr<GpuProgram>>
GpuRuntime::loadProgram(llvm::StringRef mlirSource, llvm::StringRef function,
                        GpuCompileOptions options, llvm::StringRef sourceName,
                        llvm::StringRef derive) {
  if (options.autotune && options.shape.isPinned())
    return error("autotune chooses the kernel shape itself: it cannot be "
                 "combined with tile_m, tile_n, stages, schedule, cluster_m or "
                 "group_rows");
  std::lock_guard<std::mutex> lock(impl->mutex);
  DiagnosticCollector diagnostics(*impl->mlir);
  std::string source = mlirSource.str();
  llvm::Expected<OwningOpRef<ModuleOp>> parsed =
      parseModule(source, sourceName, *impl->mlir, diagnostics);
  if (!parsed)
    return parsed.takeError();
  OwningOpRef<ModuleOp> module = std::move(*parsed);
  std::string derivedName;
  if (!derive.empty()) {
    FailureOr<std::string> derived = deriveProgram(*module, function, derive);
    if (failed(derived))
      return error(diagnostics.text);
    derivedName = *derived;
    function = derivedName;
    source.clear();
    llvm::raw_string_ostream text(source);
    module->print(text, OpPrintingFlags().enableDebugInfo());
  }
  FailureOr<ProgramSignature> signature =
      ProgramSignature::get(*module, function);
  if (failed(signature))
    return error(diagnostics.text);
  // Row reductions (a row must fit the tiles of a cluster, unless they are
  // row statistics, merged after the GEMM) and partners across 8 columns or
  // more (both columns in one tile) constrain the tile.
  TileConstraint constraint = TileConstraint::None;
  constexpr unsigned kMN = DimsAttr::kM | DimsAttr::kN;
  bool light =
      !signature->batched && !signature->halfNAccumulator &&
      llvm::none_of(signature->arguments, [&](const auto &arg) {
        return arg.role == ArgumentRole::C ||
               (arg.role == ArgumentRole::Input && (arg.dims & kMN) == kMN);
      });
  module->lookupSymbol<func::FuncOp>(signature->functionName)
      ->walk([&](Operation *op) {
        if (isa<DropoutOp, RowReduceOp, ColReduceOp, GroupReduceOp, PartnerOp>(
                op))
          light = false;
        if (auto gemm = dyn_cast<GemmOp>(op);
            gemm &&
            llvm::any_of(
                gemm.getEpilogueBlock(),
                [](Operation &inner) { return isa<RowReduceOp>(inner); }) &&
            !RowStatistics::get(gemm, EpilogueDims(gemm)))
          constraint = TileConstraint::RowCluster;
        if (auto partner = dyn_cast<PartnerOp>(op);
            partner && constraint == TileConstraint::None &&
            getPartnerTileMultiple(partner.getDistance()) != 0)
          constraint = TileConstraint::CompilerTile;
        // Groups of 128 columns or more do not divide every tile width of
        // the rule (192).
        if (auto reduce = dyn_cast<GroupReduceOp>(op);
            reduce && constraint == TileConstraint::None &&
            reduce.getWidth() >= 128)
          constraint = TileConstraint::CompilerTile;
      });
  return std::unique_ptr<GpuProgram>(
      new GpuProgram(*this, std::move(source), sourceName.str(),
                     std::move(*signature), options, constraint, light));
}

llvm::Expected<std::unique_ptr<GpuProgram>>
GpuRuntime::loadEpilogue(llvm::StringRef dslSource, llvm::StringRef dtype,
                         llvm::StringRef layoutA, llvm::StringRef layoutB,
                         bool withC, bool withAlpha, GpuCompileOptions options,
                         llvm::StringRef sourceName, llvm::StringRef derive) {
  std::string source;
  {
    std::lock_guard<std::mutex> lock(impl->mutex);
    EpilogueImportOptions import;
    if (auto e =
            setImportOptions(impl->mlir.get(), dtype, layoutA, layoutB, import))
      return std::move(e);
    import.withC = withC;
    import.withAlpha = withAlpha;
    llvm::SourceMgr sourceMgr;
    sourceMgr.AddNewSourceBuffer(
        llvm::MemoryBuffer::getMemBufferCopy(dslSource, sourceName),
        llvm::SMLoc());
    std::string diagnostics;
    llvm::raw_string_ostream os(diagnostics);
    sourceMgr.setDiagHandler(
        [](const llvm::SMDiagnostic &d, void *stream) {
          d.print(nullptr, *static_cast<llvm::raw_ostream *>(stream));
        },
        &os);
    SourceMgrDiagnosticHandler handler(sourceMgr, impl->mlir.get(), os);
    OwningOpRef<ModuleOp> module =
        importEpilogue(sourceMgr, impl->mlir.get(), import);
    if (!module)
      return error(diagnostics);
    // Compiled from text; locations keep pointing into the epilogue.
    llvm::raw_string_ostream text(source);
    module->print(text, OpPrintingFlags().enableDebugInfo());
  }
  return loadProgram(source, "", options, sourceName, derive);
}

llvm::Error GpuRuntime::synchronize() {
  ContextScope scope(*impl->driver, impl->context);
  return impl->driver->check(impl->driver->cuCtxSynchronize(),
                             "cuCtxSynchronize", "waiting for the GPU");
}
