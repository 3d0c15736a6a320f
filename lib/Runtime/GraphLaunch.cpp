//===- GraphLaunch.cpp - load and launch program graphs -------------------===//

#include "RuntimeImpl.h"

#include "coda/Dialect/Coda/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/AsmState.h"
#include "mlir/Pass/PassManager.h"

#include <atomic>
#include <set>
#include <thread>
#include <tuple>

using namespace mlir;
using namespace mlir::coda;
using namespace mlir::coda::runtime;

GpuProgramGraph::GpuProgramGraph(
    ProgramGraph graph, std::vector<std::unique_ptr<GpuProgram>> programs)
    : graph(std::move(graph)), programs(std::move(programs)) {}

GpuProgramGraph::~GpuProgramGraph() = default;

llvm::Expected<std::unique_ptr<GpuProgramGraph>> GpuRuntime::loadProgramGraph(
    llvm::StringRef mlirSource, llvm::StringRef function,
    GpuCompileOptions options, llvm::StringRef sourceName) {
  std::string outlined;
  std::optional<ProgramGraph> graph;
  {
    std::lock_guard<std::mutex> lock(impl->mutex);
    DiagnosticCollector diagnostics(*impl->mlir);
    llvm::Expected<OwningOpRef<ModuleOp>> parsed =
        parseModule(mlirSource, sourceName, *impl->mlir, diagnostics);
    if (!parsed)
      return parsed.takeError();
    OwningOpRef<ModuleOp> &module = *parsed;
    PassManager outline(impl->mlir.get());
    outline.addPass(createCodaOutlinePrograms());
    if (failed(outline.run(*module)))
      return error(diagnostics.text);
    FailureOr<ProgramGraph> described = ProgramGraph::get(*module, function);
    if (failed(described))
      return error(diagnostics.text);
    graph = std::move(*described);
    // Each program is compiled from this text, as loadProgram compiles one;
    // locations keep pointing into the source.
    llvm::raw_string_ostream text(outlined);
    module->print(text, OpPrintingFlags().enableDebugInfo());
  }
  std::vector<std::unique_ptr<GpuProgram>> programs(graph->programs.size());
  for (const GraphCall &call : graph->calls) {
    std::unique_ptr<GpuProgram> &program = programs[call.program];
    if (program)
      continue;
    auto loaded =
        loadProgram(outlined, graph->programs[call.program].functionName,
                    options, sourceName);
    if (!loaded)
      return loaded.takeError();
    program = std::move(*loaded);
  }
  return std::unique_ptr<GpuProgramGraph>(
      new GpuProgramGraph(std::move(*graph), std::move(programs)));
}

llvm::Expected<GraphPlan>
GpuProgramGraph::plan(ArrayRef<DeviceValue> arguments) const {
  // Scalars have no shape: ProgramGraph::plan reads only the tensors'.
  SmallVector<SmallVector<int64_t>> shapes;
  for (auto [type, value] : llvm::zip(graph.argumentTypes, arguments))
    shapes.emplace_back(isa<RankedTensorType>(type)
                            ? ArrayRef<int64_t>(value.tensor.shape)
                            : ArrayRef<int64_t>());
  shapes.resize(arguments.size());
  return graph.plan(shapes);
}

llvm::Error GpuProgramGraph::prepare(ArrayRef<DeviceValue> arguments) {
  llvm::Expected<GraphPlan> planned = plan(arguments);
  if (!planned)
    return planned.takeError();
  // Each program's kernel for each of its problems once, on at most as many
  // threads as the host has cores.
  std::vector<std::pair<unsigned, unsigned>> jobs; // (call, program)
  std::set<std::tuple<unsigned, int64_t, int64_t, int64_t, int64_t>> seen;
  for (auto [i, call] : llvm::enumerate(graph.calls)) {
    const ProblemShape &p = planned->problems[i];
    if (seen.insert({call.program, p.batch, p.m, p.n, p.k}).second)
      jobs.emplace_back(i, call.program);
  }
  std::vector<std::string> errors(jobs.size());
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t j; (j = next++) < jobs.size();) {
      auto [call, program] = jobs[j];
      if (llvm::Error e = programs[program]->prepare(planned->problems[call]))
        errors[j] =
            graph.describeCall(call) + ": " + llvm::toString(std::move(e));
    }
  };
  size_t count = std::min<size_t>(
      jobs.size(), std::max(1u, std::thread::hardware_concurrency()));
  std::vector<std::thread> threads;
  for (size_t t = 1; t < count; ++t)
    threads.emplace_back(work);
  work();
  for (std::thread &thread : threads)
    thread.join();
  std::string message;
  for (const std::string &e : errors)
    if (!e.empty())
      message += (message.empty() ? "" : "\n") + e;
  return message.empty() ? llvm::Error::success() : error(message);
}

llvm::Error GpuProgramGraph::launch(ArrayRef<DeviceValue> arguments,
                                    ArrayRef<DeviceTensor> results,
                                    uint64_t workspace, uint64_t workspaceBytes,
                                    void *stream) {
  const std::string &name = graph.functionName;
  if (arguments.size() != graph.argumentTypes.size())
    return error("'" + name + "' takes " + Twine(graph.argumentTypes.size()) +
                 " arguments, got " + Twine(arguments.size()));
  if (results.size() != graph.results.size())
    return error("'" + name + "' returns " + Twine(graph.results.size()) +
                 " results, got " + Twine(results.size()) + " to write");
  llvm::Expected<GraphPlan> planned = plan(arguments);
  if (!planned)
    return planned.takeError();
  for (auto [i, result] : llvm::enumerate(results))
    if (ArrayRef<int64_t>(result.shape) !=
        ArrayRef<int64_t>(planned->resultShapes[i]))
      return error("result #" + Twine(i) + " of '" + name + "' has shape " +
                   spellShape(result.shape) + ", but the arguments make it " +
                   spellShape(planned->resultShapes[i]));
  if (workspaceBytes < static_cast<uint64_t>(planned->workspaceBytes))
    return error("'" + name + "' needs a workspace of " +
                 Twine(planned->workspaceBytes) + " bytes for these shapes, " +
                 "got " + Twine(workspaceBytes));
  if (planned->workspaceBytes &&
      (!workspace || workspace % ProgramGraph::kWorkspaceAlignment))
    return error("the workspace of '" + name + "' must be a device address " +
                 "aligned to " + Twine(ProgramGraph::kWorkspaceAlignment) +
                 " bytes, got " + Twine(workspace));

  auto tensorOf = [&](unsigned call, unsigned output) {
    const GraphPlace &place = planned->places[call][output];
    DeviceTensor tensor = place.result >= 0
                              ? results[place.result]
                              : DeviceTensor{workspace + place.offset, {}};
    tensor.shape.assign(planned->outputShapes[call][output].begin(),
                        planned->outputShapes[call][output].end());
    return tensor;
  };
  for (auto [i, call] : llvm::enumerate(graph.calls)) {
    SmallVector<DeviceValue> values;
    for (const GraphValue &value : call.arguments)
      values.push_back(
          value.kind == GraphValue::Kind::Argument
              ? arguments[value.index]
              : DeviceValue{tensorOf(value.index, value.output), 0.0f, 0});
    SmallVector<DeviceTensor> outputs;
    for (unsigned o = 0; o < planned->outputShapes[i].size(); ++o)
      outputs.push_back(tensorOf(i, o));
    if (llvm::Error e = programs[call.program]->launch(values, outputs, stream))
      return error(graph.describeCall(i) + ": " + llvm::toString(std::move(e)));
  }
  return llvm::Error::success();
}
