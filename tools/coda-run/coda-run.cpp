//===- coda-run.cpp - run a coda program on .npy data ---------------------===//
//
// coda-run PROGRAM --a A.npy --b B.npy [--layout-a mk|km] [--layout-b
// nk|kn|halves]
//          [--dtype bf16|f16|f32] [--c C.npy] [--alpha X] [--beta X]
//          [--arg NAME=FILE.npy|NUMBER]... [--out NAME=FILE.npy]... [--seed S]
//          [--device cpu|cuda] [--check] [--bench N] [--autotune]
//          [--fast-activations] [--tile-m M] [--tile-n N] [--stages S]
//          [--schedule cooperative|pingpong] [--cluster-m C] [--group-rows G]
// coda-run MODULE.mlir --entry FUNCTION [--arg argI=FILE.npy]...
//          [--out resultI=FILE.npy]... [--device cpu|cuda] [--check]
//
//===----------------------------------------------------------------------===//

#include "Check.h"
#include "EntryRun.h"
#include "coda/Frontend/EpilogueImport.h"
#include "coda/Program/ProgramSignature.h"
#include "coda/Registration/Registration.h"
#include "coda/Runner/Bindings.h"
#include "coda/Runner/CpuRunner.h"
#include "coda/Runtime/Runtime.h"
#ifdef CODA_HAVE_CUDA
#include "HostRun.h"
#endif

#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/WithColor.h"

#include <chrono>

using namespace mlir;
using namespace mlir::coda;
namespace cl = llvm::cl;

namespace {
cl::OptionCategory category("coda-run options");
cl::opt<std::string> programPath(cl::Positional, cl::Required,
                                 cl::desc("<program: .coda epilogue or .mlir>"),
                                 cl::cat(category));
cl::opt<std::string> dtype("dtype",
                           cl::desc("a .coda program's operand type: bf16 "
                                    "(default), f16 or f32 (run as tf32)"),
                           cl::cat(category));
cl::opt<std::string> layoutA("layout-a",
                             cl::desc("a .coda program's layout of A: mk "
                                      "([M, K], default) or km"),
                             cl::cat(category));
cl::opt<std::string> layoutB("layout-b",
                             cl::desc("a .coda program's layout of B: nk "
                                      "([N, K], default), kn or halves ([N, "
                                      "K], op(B)'s column pairs in its two "
                                      "halves)"),
                             cl::cat(category));
cl::opt<std::string> aPath("a", cl::desc("A as a .npy file"),
                           cl::value_desc("file"), cl::cat(category));
cl::opt<std::string> bPath("b", cl::desc("B as a .npy file"),
                           cl::value_desc("file"), cl::cat(category));
cl::opt<std::string> cPath("c", cl::desc("C as a .npy file"),
                           cl::value_desc("file"), cl::cat(category));
cl::opt<std::string> alpha("alpha", cl::desc("GEMM alpha (default 1)"),
                           cl::value_desc("number"), cl::cat(category));
cl::opt<std::string> beta("beta",
                          cl::desc("GEMM beta (default 1 when C is given)"),
                          cl::value_desc("number"), cl::cat(category));
cl::opt<std::string> seed("seed",
                          cl::desc("dropout seed, an unsigned 64-bit integer "
                                   "(default 0)"),
                          cl::value_desc("integer"), cl::cat(category));
cl::list<std::string> args("arg",
                           cl::desc("an epilogue input: NAME=FILE.npy or, "
                                    "for a scalar, NAME=NUMBER"),
                           cl::value_desc("name=value"), cl::cat(category));
cl::list<std::string> outs("out", cl::desc("write output NAME to FILE.npy"),
                           cl::value_desc("name=file"), cl::cat(category));
cl::opt<std::string> functionName(
    "function",
    cl::desc("the program function, when several functions hold a coda.gemm"),
    cl::cat(category));
cl::opt<std::string>
    entry("entry",
          cl::desc("run this function of a .mlir module as host code that "
                   "launches the coda programs it calls (arguments --arg "
                   "argI=FILE.npy, results --out resultI=FILE.npy)"),
          cl::cat(category));
cl::opt<std::string> device("device",
                            cl::desc("where to run: cpu (the reference "
                                     "lowering) or cuda (the fused kernel)"),
                            cl::init("cpu"), cl::cat(category));
cl::opt<bool> check("check",
                    cl::desc("with --device cuda: also run the CPU reference "
                             "and compare each output (relative norm)"),
                    cl::cat(category));
cl::opt<bool> autotune(
    "autotune",
    cl::desc("with --device cuda: time the candidate kernel shapes on the "
             "inputs and run the fastest (the choice is cached with the "
             "kernels)"),
    cl::cat(category));
cl::opt<bool> fastActivations(
    "fast-activations",
    cl::desc("with --device cuda: GELU(tanh), SiLU and sigmoid on the "
             "tanh.approx.f32 instruction (faster; tanh within 2^-11 "
             "relative error)"),
    cl::cat(category));
cl::opt<bool> deterministic(
    "deterministic",
    cl::desc("with --device cuda: column reductions merged in a fixed order "
             "instead of with f32 atomics (bit-identical from run to run)"),
    cl::cat(category));
/// The kernel-shape options, named as coda-to-gpu's (which
/// KernelShape::fromOptions reads).
struct KernelShapeOptions {
  cl::opt<int64_t> tileM{"tile-m",
                         cl::desc("with --device cuda: output rows per tile "
                                  "(pins the kernel shape; see docs/gpu.md)"),
                         cl::init(0), cl::cat(category)};
  cl::opt<int64_t> tileN{
      "tile-n", cl::desc("with --device cuda: output columns per tile"),
      cl::init(0), cl::cat(category)};
  cl::opt<int64_t> stages{"stages",
                          cl::desc("with --device cuda: shared-memory stages"),
                          cl::init(0), cl::cat(category)};
  cl::opt<std::string> schedule{
      "schedule", cl::desc("with --device cuda: cooperative or pingpong"),
      cl::init(""), cl::cat(category)};
  cl::opt<int64_t> clusterM{"cluster-m",
                            cl::desc("with --device cuda: blocks per cluster "
                                     "along M (1 or 2)"),
                            cl::init(0), cl::cat(category)};
  cl::opt<int64_t> clusterN{
      "cluster-n",
      cl::desc("with --device cuda: blocks per cluster along N, whose row "
               "reductions combine across their tiles (1 to 16)"),
      cl::init(0), cl::cat(category)};
  cl::opt<int64_t> groupRows{
      "group-rows",
      cl::desc("with --device cuda: row blocks per group of the tile order"),
      cl::init(0), cl::cat(category)};
} shapeOptions;
cl::opt<int> bench("bench",
                   cl::desc("with --device cuda: time N launches with CUDA "
                            "events after 5 warm-up ones, report the median"),
                   cl::init(0), cl::cat(category));

bool isEpilogueFile(StringRef path) { return path.ends_with(".coda"); }

/// coda-run --entry: the host function `entry` of `module`.
int runEntry(ModuleOp module, StringRef path,
             const GpuCompileOptions &options) {
  EntryRequest request;
  request.entry = entry;
  request.programPath = path.str();
  request.device = device;
  request.check = check;
  request.gpuOptions = options;
  for (StringRef arg : args) {
    auto [name, file] = arg.split('=');
    if (file.empty())
      return fail("--arg '" + arg + "' must be argI=FILE.npy");
    request.arguments.emplace_back(name.str(), file.str());
  }
  for (StringRef out : outs) {
    auto [name, file] = out.split('=');
    if (file.empty())
      return fail("--out '" + out + "' must be resultI=FILE.npy");
    request.outputs.emplace_back(name.str(), file.str());
  }
  return mlir::coda::runEntry(module, request);
}
} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  cl::HideUnrelatedOptions(category);
  cl::ParseCommandLineOptions(argc, argv, "Run a coda program on .npy data\n");

  if (device != "cpu" && device != "cuda")
    return fail("unknown --device '" + device + "'; expected cpu or cuda");
  // What the GPU runtime is asked for (used with --device cuda only).
  GpuCompileOptions gpuOptions;
  gpuOptions.autotune = autotune;
  gpuOptions.fastActivations = fastActivations;
  gpuOptions.deterministic = deterministic;
  std::optional<KernelShape> shape = KernelShape::fromOptions(shapeOptions);
  if (!shape)
    return fail("--" + KernelShape::getScheduleError(shapeOptions.schedule));
  gpuOptions.shape = *shape;
  if ((check || bench || autotune || fastActivations || deterministic ||
       gpuOptions.shape.isPinned()) &&
      device != "cuda")
    return fail("--check, --bench, --autotune, --fast-activations, "
                "--deterministic and the "
                "kernel-shape options need --device cuda");

  if (!entry.empty() &&
      (isEpilogueFile(programPath) || !aPath.empty() || !bPath.empty() ||
       !cPath.empty() || alpha.getNumOccurrences() ||
       beta.getNumOccurrences() || seed.getNumOccurrences() ||
       !functionName.empty() || bench))
    return fail(
        "--entry runs a function of a .mlir module on its own "
        "arguments (--arg argI=FILE.npy); it takes no epilogue file, "
        "--a, --b, --c, --alpha, --beta, --seed, --function or --bench");

  DialectRegistry registry;
  registerDialects(registry);
  MLIRContext context(registry);
  context.printOpOnDiagnostic(false);
  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler handler(sourceMgr, &context);
  bool isEpilogue = isEpilogueFile(programPath);
  EpilogueImportOptions importOptions;
  if (llvm::Error error = setImportOptions(
          &context, dtype.empty() ? StringRef("bf16") : StringRef(dtype),
          layoutA.empty() ? StringRef("mk") : StringRef(layoutA),
          layoutB.empty() ? StringRef("nk") : StringRef(layoutB),
          importOptions))
    return fail(std::move(error));
  importOptions.withC = !cPath.empty();
  importOptions.withAlpha = alpha.getNumOccurrences() > 0;
  OwningOpRef<ModuleOp> module =
      loadProgramFile(programPath, sourceMgr, &context, importOptions);
  if (!module)
    return 1;
  if (!entry.empty())
    return runEntry(*module, programPath, gpuOptions);
  FailureOr<ProgramSignature> signature =
      ProgramSignature::get(*module, functionName);
  if (failed(signature))
    return 1;
  // A .mlir program fixes its operand type and layouts: the flags that set
  // them up for an epilogue must agree.
  if (!isEpilogue) {
    std::string actual;
    llvm::raw_string_ostream(actual) << signature->operandType;
    if (!dtype.empty() && dtype != actual)
      return fail("--dtype " + dtype +
                  " does not match the program, whose "
                  "operands are " +
                  actual);
    if (!layoutA.empty() && (layoutA == "km") != signature->transposeA)
      return fail("--layout-a " + layoutA + " does not match the program");
    if (!layoutB.empty() && layoutB != signature->getLayoutB())
      return fail("--layout-b " + layoutB + " does not match the program");
  }

  RunRequest request;
  request.a = aPath;
  request.b = bPath;
  request.c = cPath;
  if (alpha.getNumOccurrences())
    request.alpha = alpha;
  if (beta.getNumOccurrences())
    request.beta = beta;
  if (seed.getNumOccurrences()) {
    uint64_t value;
    if (StringRef(seed).getAsInteger(0, value))
      return fail("--seed '" + seed +
                  "' is not an unsigned 64-bit integer (0 to "
                  "18446744073709551615, decimal or 0x hexadecimal)");
    request.seed = static_cast<int64_t>(value);
  }
  for (StringRef arg : args) {
    auto [name, value] = arg.split('=');
    if (value.empty())
      return fail("--arg '" + arg + "' must be NAME=VALUE");
    request.inputs.emplace_back(name.str(), value.str());
  }
  SmallVector<std::pair<std::string, std::string>> outputFiles;
  for (StringRef out : outs) {
    auto [name, file] = out.split('=');
    if (file.empty())
      return fail("--out '" + out + "' must be NAME=FILE.npy");
    if (signature->findOutput(name) < 0) {
      std::string names;
      for (const ProgramOutput &o : signature->outputs)
        names += (names.empty() ? "" : ", ") + o.name;
      return fail("the program has no output named '" + name +
                  "'; its outputs are: " + names);
    }
    outputFiles.emplace_back(name.str(), file.str());
  }

  llvm::Expected<BoundArguments> bound = bindArguments(*signature, request);
  if (!bound)
    return fail(bound.takeError());

  // The CPU reference runs for --device cpu and for --check.
  std::vector<HostArray> reference;
  double compileSeconds = 0, runSeconds = 0;
  std::string timing;
  auto runReference = [&]() -> llvm::Error {
    auto start = std::chrono::steady_clock::now();
    llvm::Expected<std::unique_ptr<CpuExecutable>> executable =
        CpuExecutable::create(std::move(module), *signature);
    if (!executable)
      return executable.takeError();
    compileSeconds = secondsSince(start);
    start = std::chrono::steady_clock::now();
    llvm::Expected<std::vector<HostArray>> outputs =
        (*executable)->run(bound->values);
    if (!outputs)
      return outputs.takeError();
    runSeconds = secondsSince(start);
    reference = std::move(*outputs);
    return llvm::Error::success();
  };

  std::vector<HostArray> results;
  if (device == "cpu") {
    if (llvm::Error error = runReference())
      return fail(std::move(error));
    results = reference;
    timing = llvm::formatv("compile {0:f3} s, run {1:f3} s", compileSeconds,
                           runSeconds);
  } else {
#ifdef CODA_HAVE_CUDA
    auto runtime = createDeviceRuntime();
    if (!runtime)
      return fail(runtime.takeError());
    // The runtime compiles from text; locations keep pointing into the file.
    std::string source;
    llvm::raw_string_ostream os(source);
    module->print(os, OpPrintingFlags().enableDebugInfo());
    auto program = (*runtime)->loadProgram(source, signature->functionName,
                                           gpuOptions, programPath);
    if (!program)
      return fail(program.takeError());
    // Autotuning compiles at the first launch, which it times.
    if (!autotune)
      if (llvm::Error error = (*program)->prepare(bound->problem))
        return fail(std::move(error));
    auto start = std::chrono::steady_clock::now();
    llvm::Expected<HostRunResult> run =
        runOnHost(**runtime, **program, bound->values, bound->problem, bench);
    if (!run)
      return fail(run.takeError());
    runSeconds = secondsSince(start);
    GpuCompileStats stats = (*program)->getCompileStats();
    timing = llvm::formatv(
        "{0}: {1}x{2}{8} tiles{6}, groups of {7} row blocks, {3}, load {4:f3} "
        "s, run {5:f3} s",
        (*runtime)->getDeviceDescription(), stats.shape.tileM,
        stats.shape.tileN,
        stats.fromDiskCache
            ? std::string("kernel from the disk cache")
            : llvm::formatv("compile {0:f3} s", stats.compileSeconds).str(),
        stats.loadSeconds, runSeconds,
        stats.shape.clusterM * stats.shape.clusterN > 1
            ? llvm::formatv(" in clusters of {0}",
                            stats.shape.clusterM * stats.shape.clusterN)
                  .str()
            : std::string(),
        stats.shape.groupRows,
        stats.shape.schedule == Schedule::Pingpong ? " ping-pong" : "");
    if (stats.rowSplit)
      timing += "\n  rows wider than a cluster of tiles holds: the row split "
                "(the GEMM writing its accumulator and row statistics, as "
                "above, then its epilogue on them, no product)";
    if (stats.tuningFromDiskCache)
      timing += "\n  autotuned shape from the disk cache";
    for (const auto &[shape, ms] : stats.tuningMs)
      timing += llvm::formatv("\n  autotune: {0} {1:f4} ms", shape, ms);
    if (run->medianMs)
      timing += llvm::formatv("\n  kernel {0:f4} ms (median of {1}, L2 "
                              "flushed)",
                              *run->medianMs, bench.getValue());
    results = std::move(run->outputs);
    if (check)
      if (llvm::Error error = runReference())
        return fail(std::move(error));
#else
    return failWithoutCuda();
#endif
  }

  const ProblemShape &p = bound->problem;
  llvm::outs() << "coda-run: " << signature->functionName << " on " << device
               << ": ";
  if (signature->batched)
    llvm::outs() << "batch " << p.batch << ", ";
  llvm::outs() << "M " << p.m << ", N " << p.n << ", K " << p.k << ", "
               << signature->operandType << " (A "
               << (signature->transposeA ? "km" : "mk") << ", B "
               << signature->getLayoutB() << ")\n";
  for (const std::string &note : bound->notes)
    llvm::outs() << "  note: " << note << "\n";
  llvm::outs() << "  " << timing << "\n";
  std::vector<ResultReport> reports;
  for (auto [i, output, array] : llvm::enumerate(signature->outputs, results)) {
    ResultReport &report = reports.emplace_back();
    report.name = output.name;
    report.array = &array;
    report.reference = check ? &reference[i] : nullptr;
    report.tf32 = signature->operandType.isF32();
    for (const auto &[name, file] : outputFiles)
      if (name == output.name)
        report.files.push_back(file);
  }
  if (llvm::Error error = reportResults(reports))
    return fail(std::move(error));
  return 0;
}
