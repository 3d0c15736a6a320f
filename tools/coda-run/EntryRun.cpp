//===- EntryRun.cpp - run a host function that launches programs ----------===//

#include "EntryRun.h"
#include "Check.h"
#ifdef CODA_HAVE_CUDA
#include "HostRun.h"
#endif

#include "coda/Runner/HostFunction.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/WithColor.h"

#include <chrono>

using namespace mlir;
using namespace mlir::coda;

namespace {

/// The index I of `name`, spelled `<prefix>I` with I < `count`, or an
/// error naming what `flag` takes.
llvm::Expected<unsigned> parseIndex(StringRef name, StringRef prefix,
                                    size_t count, StringRef flag,
                                    StringRef noun) {
  unsigned index;
  StringRef digits = name;
  if (digits.consume_front(prefix) && !digits.getAsInteger(10, index) &&
      index < count)
    return index;
  std::string legal =
      count == 0
          ? std::string("it has none")
          : llvm::formatv("they are {0}0 to {0}{1}", prefix, count - 1).str();
  return llvm::createStringError(
      llvm::formatv("--{0}: the host function has no {1} named '{2}'; {3}",
                    flag, noun, name, legal)
          .str());
}

} // namespace

int mlir::coda::runEntry(ModuleOp module, const EntryRequest &request) {
  auto start = std::chrono::steady_clock::now();
  llvm::Expected<std::unique_ptr<HostFunction>> host =
      HostFunction::create(module, request.entry);
  if (!host)
    return fail(host.takeError());
  double compileSeconds = secondsSince(start);

  ArrayRef<HostTensorType> types = (*host)->getArgumentTypes();
  std::vector<HostArray> args(types.size());
  std::vector<bool> given(types.size(), false);
  for (const auto &[name, file] : request.arguments) {
    llvm::Expected<unsigned> index =
        parseIndex(name, "arg", types.size(), "arg", "argument");
    if (!index)
      return fail(index.takeError());
    if (given[*index])
      return fail("--arg " + name + " is given twice");
    llvm::Expected<HostArray> array = readNpy(file);
    if (!array)
      return fail(array.takeError());
    args[*index] = array->convertTo(types[*index].elementType);
    given[*index] = true;
  }
  for (auto [i, isGiven] : llvm::enumerate(given))
    if (!isGiven)
      return fail(llvm::formatv("argument #{0} of '{1}' ({2}) is not given: "
                                "--arg arg{0}=FILE.npy",
                                i, request.entry, types[i].spelling)
                      .str());
  ArrayRef<HostTensorType> resultTypes = (*host)->getResultTypes();
  std::vector<std::pair<unsigned, std::string>> outputFiles;
  for (const auto &[name, file] : request.outputs) {
    llvm::Expected<unsigned> index =
        parseIndex(name, "result", resultTypes.size(), "out", "result");
    if (!index)
      return fail(index.takeError());
    outputFiles.emplace_back(*index, file);
  }

  ArrayRef<ProgramSignature> programs = (*host)->getPrograms();
  CpuProgramLauncher reference((*host)->getProgramModule(), programs);
  std::vector<HostArray> results, referenceResults;
  // The run's time (programs compiled at their first launch included), not
  // the reference run of --check.
  double runSeconds = 0;
  start = std::chrono::steady_clock::now();
  if (request.device == "cpu") {
    llvm::Expected<std::vector<HostArray>> run = (*host)->run(args, reference);
    if (!run)
      return fail(run.takeError());
    results = std::move(*run);
    runSeconds = secondsSince(start);
  } else {
#ifdef CODA_HAVE_CUDA
    auto runtime = createDeviceRuntime();
    if (!runtime)
      return fail(runtime.takeError());
    GpuProgramLauncher launcher(**runtime, (*host)->getProgramModule(),
                                programs, request.gpuOptions,
                                request.programPath);
    llvm::Expected<std::vector<HostArray>> run =
        (*host)->getGraph()
            ? runGraphOnDevice(**runtime, **host, args, request.gpuOptions,
                               request.programPath)
            : (*host)->run(args, launcher);
    if (!run)
      return fail(run.takeError());
    results = std::move(*run);
    runSeconds = secondsSince(start);
    if (request.check) {
      llvm::Expected<std::vector<HostArray>> checked =
          (*host)->run(args, reference);
      if (!checked)
        return fail(checked.takeError());
      referenceResults = std::move(*checked);
    }
#else
    return failWithoutCuda();
#endif
  }

  llvm::outs() << "coda-run: " << request.entry << " on " << request.device;
  auto names = [](auto &&range) { return llvm::join(range, ", "); };
  if (const ProgramGraph *graph = (*host)->getGraph()) {
    SmallVector<SmallVector<int64_t>> shapes;
    for (const HostArray &arg : args)
      shapes.emplace_back(arg.shape.begin(), arg.shape.end());
    // The run planned it already: it cannot fail now.
    GraphPlan plan = cantFail(graph->plan(shapes));
    llvm::outs() << ": a program graph calling "
                 << names(llvm::map_range(
                        graph->calls,
                        [&](const GraphCall &call) {
                          return graph->programs[call.program].functionName;
                        }))
                 << " (no host code; " << plan.workspaceBytes
                 << " bytes of workspace between the calls)\n";
  } else if (programs.empty())
    llvm::outs() << ": host code (it calls no coda program)\n";
  else
    llvm::outs() << ": host code launching "
                 << names(llvm::map_range(programs,
                                          [](const ProgramSignature &p) {
                                            return p.functionName;
                                          }))
                 << "\n";
  llvm::outs() << llvm::formatv(
      "  compile host code {0:f3} s, run {1:f3} s (programs compiled at their "
      "first launch)\n",
      compileSeconds, runSeconds);
  bool tf32 = llvm::any_of(programs, [](const ProgramSignature &p) {
    return p.operandType.isF32();
  });
  std::vector<ResultReport> reports;
  for (auto [i, array] : llvm::enumerate(results)) {
    ResultReport &report = reports.emplace_back();
    report.name = "result" + std::to_string(i);
    report.array = &array;
    report.reference =
        referenceResults.empty() ? nullptr : &referenceResults[i];
    report.tf32 = tf32;
    for (const auto &[index, file] : outputFiles)
      if (index == i)
        report.files.push_back(file);
  }
  if (llvm::Error error = reportResults(reports))
    return fail(std::move(error));
  return 0;
}
