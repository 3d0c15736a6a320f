//===- ProgramGraph.cpp - a function of several coda programs -------------===//

#include "coda/Program/ProgramGraph.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace mlir::coda;

namespace {

llvm::Error makeError(const Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

/// Places values in the workspace as the calls make them: a value takes the
/// lowest offset where it fits beside the values still to be read, those
/// whose last reader is the current call or a later one.
class WorkspaceAllocator {
public:
  int64_t allocate(int64_t bytes, unsigned lastReader, unsigned call) {
    llvm::erase_if(live,
                   [&](const Block &block) { return block.lastReader < call; });
    llvm::sort(live, [](const Block &x, const Block &y) {
      return x.offset < y.offset;
    });
    int64_t offset = 0;
    for (const Block &block : live) {
      if (offset + bytes <= block.offset)
        break;
      offset = std::max(offset, block.offset + block.bytes);
    }
    live.push_back({offset, bytes, lastReader});
    end = std::max(end, offset + bytes);
    return offset;
  }
  int64_t getEnd() const { return end; }

private:
  struct Block {
    int64_t offset, bytes;
    unsigned lastReader;
  };
  SmallVector<Block> live;
  int64_t end = 0;
};

} // namespace

std::optional<std::string> mlir::coda::getGraphViolation(ModuleOp module,
                                                         func::FuncOp func) {
  if (func.isExternal())
    return std::string("it has no body");
  if (!getProgramViolation(func))
    return std::nullopt;
  SmallVector<func::FuncOp> programs = getPrograms(module);
  Block &body = func.getBody().front();
  for (Operation &op : body.without_terminator()) {
    auto call = dyn_cast<func::CallOp>(op);
    auto callee =
        call ? module.lookupSymbol<func::FuncOp>(call.getCallee()) : nullptr;
    std::string location;
    if (auto file = dyn_cast<FileLineColLoc>(op.getLoc()))
      location = (file.getFilename().getValue() + ":" + Twine(file.getLine()) +
                  ":" + Twine(file.getColumn()))
                     .str();
    else
      llvm::raw_string_ostream(location) << op.getLoc();
    if (!call)
      return "'" + op.getName().getStringRef().str() + "' at " + location +
             " is not a call of a coda program";
    if (!llvm::is_contained(programs, callee))
      return "'" + call.getCallee().str() + "', called at " + location +
             ", is not a coda program";
  }
  auto ret = dyn_cast<func::ReturnOp>(body.getTerminator());
  if (!ret)
    return std::string("its body does not end in a return");
  llvm::SmallPtrSet<Value, 4> returned;
  for (auto [i, value] : llvm::enumerate(ret.getOperands())) {
    if (isa<BlockArgument>(value))
      return "result #" + std::to_string(i) + " is an argument";
    if (!returned.insert(value).second)
      return "result #" + std::to_string(i) +
             " returns a value returned before";
  }
  return std::nullopt;
}

/// The function a graph of `module` is read from when none is named: its
/// only function with a body that is not a program, else its only program.
static FailureOr<func::FuncOp> findGraphFunction(ModuleOp module) {
  SmallVector<func::FuncOp> programs = getPrograms(module), others;
  for (auto func : module.getOps<func::FuncOp>())
    if (!func.isExternal() && !llvm::is_contained(programs, func))
      others.push_back(func);
  SmallVector<func::FuncOp> &candidates = others.empty() ? programs : others;
  if (candidates.size() == 1)
    return candidates.front();
  if (candidates.empty())
    return module.emitError() << "the module has no function with a body";
  std::string names;
  for (func::FuncOp func : candidates)
    names += (names.empty() ? "'" : ", '") + func.getName().str() + "'";
  return module.emitError() << "the module has several functions (" << names
                            << "); name the one to run";
}

FailureOr<ProgramGraph> ProgramGraph::get(ModuleOp module, StringRef name) {
  func::FuncOp func;
  if (name.empty()) {
    FailureOr<func::FuncOp> found = findGraphFunction(module);
    if (failed(found))
      return failure();
    func = *found;
    name = func.getName();
  } else if (!(func = module.lookupSymbol<func::FuncOp>(name))) {
    return module.emitError() << "no function named '" << name << "'";
  }
  if (std::optional<std::string> why = getGraphViolation(module, func))
    return func.emitError() << "'" << name
                            << "' is not a program graph (a function whose "
                               "body is calls of coda programs): "
                            << *why;
  ProgramGraph graph;
  graph.functionName = name.str();
  llvm::append_range(graph.argumentTypes, func.getArgumentTypes());
  for (Type type : func.getResultTypes())
    graph.resultTypes.push_back(cast<RankedTensorType>(type));
  SmallVector<func::FuncOp> programs = getPrograms(module);
  for (func::FuncOp program : programs) {
    FailureOr<ProgramSignature> signature =
        ProgramSignature::get(module, program.getName());
    if (failed(signature))
      return failure();
    graph.programs.push_back(std::move(*signature));
  }

  Block &body = func.getBody().front();
  if (!getProgramViolation(func)) {
    // A program: one call of itself.
    GraphCall self;
    self.program = llvm::find(programs, func) - programs.begin();
    for (BlockArgument arg : body.getArguments())
      self.arguments.push_back(
          {GraphValue::Kind::Argument, arg.getArgNumber(), 0});
    graph.calls.push_back(std::move(self));
    for (unsigned i = 0; i < func.getNumResults(); ++i)
      graph.results.push_back({GraphValue::Kind::CallOutput, 0, i});
    return graph;
  }
  DenseMap<Value, GraphValue> values;
  for (BlockArgument arg : body.getArguments())
    values[arg] = {GraphValue::Kind::Argument, arg.getArgNumber(), 0};
  for (auto op : body.getOps<func::CallOp>()) {
    GraphCall call;
    call.program =
        llvm::find(programs,
                   module.lookupSymbol<func::FuncOp>(op.getCallee())) -
        programs.begin();
    for (Value operand : op.getOperands())
      call.arguments.push_back(values.lookup(operand));
    for (OpResult result : op.getResults())
      values[result] = {GraphValue::Kind::CallOutput,
                        static_cast<unsigned>(graph.calls.size()),
                        result.getResultNumber()};
    graph.calls.push_back(std::move(call));
  }
  for (Value value : body.getTerminator()->getOperands())
    graph.results.push_back(values.lookup(value));
  return graph;
}

llvm::Expected<GraphPlan>
ProgramGraph::plan(ArrayRef<SmallVector<int64_t>> shapes) const {
  if (shapes.size() != argumentTypes.size())
    return makeError("'" + functionName + "' takes " +
                     Twine(argumentTypes.size()) + " arguments, got " +
                     Twine(shapes.size()));
  for (auto [i, type] : llvm::enumerate(argumentTypes)) {
    auto tensor = dyn_cast<RankedTensorType>(type);
    if (!tensor)
      continue;
    if (llvm::any_of(shapes[i], [](int64_t size) { return size < 0; }))
      return makeError("argument #" + Twine(i) + " of '" + functionName +
                       "' has a negative size: " + spellShape(shapes[i]));
    bool fits = static_cast<int64_t>(shapes[i].size()) == tensor.getRank();
    for (auto [size, declared] : llvm::zip(shapes[i], tensor.getShape()))
      fits &= ShapedType::isDynamic(declared) || size == declared;
    if (!fits)
      return makeError("argument #" + Twine(i) + " of '" + functionName +
                       "' has shape " + spellShape(shapes[i]) +
                       ", but the function takes " +
                       spellShape(tensor.getShape()));
  }

  // Each call's last reader, and where the function returns its outputs.
  SmallVector<SmallVector<unsigned>> lastReader(calls.size());
  SmallVector<SmallVector<int>> resultOf(calls.size());
  for (auto [i, call] : llvm::enumerate(calls)) {
    size_t numOutputs = programs[call.program].outputs.size();
    lastReader[i].assign(numOutputs, i);
    resultOf[i].assign(numOutputs, -1);
    for (const GraphValue &value : call.arguments)
      if (value.kind == GraphValue::Kind::CallOutput)
        lastReader[value.index][value.output] = i;
  }
  for (auto [r, value] : llvm::enumerate(results))
    resultOf[value.index][value.output] = r;

  GraphPlan plan;
  plan.resultShapes.resize(results.size());
  WorkspaceAllocator workspace;
  for (auto [i, call] : llvm::enumerate(calls)) {
    const ProgramSignature &program = programs[call.program];
    SmallVector<SmallVector<int64_t>> argumentShapes;
    for (const GraphValue &value : call.arguments)
      argumentShapes.push_back(
          value.kind == GraphValue::Kind::Argument
              ? shapes[value.index]
              : plan.outputShapes[value.index][value.output]);
    llvm::Expected<ProblemShape> problem =
        program.inferProblemShape(argumentShapes);
    if (!problem)
      return makeError(describeCall(i) + ": " +
                       llvm::toString(problem.takeError()));
    plan.problems.push_back(*problem);
    auto &outputShapes = plan.outputShapes.emplace_back();
    auto &places = plan.places.emplace_back();
    for (auto [o, output] : llvm::enumerate(program.outputs)) {
      SmallVector<int64_t> shape = program.getOutputShape(o, *problem);
      GraphPlace place;
      place.result = resultOf[i][o];
      if (place.result >= 0) {
        plan.resultShapes[place.result] = shape;
      } else {
        int64_t bytes =
            llvm::divideCeil(output.type.getElementTypeBitWidth(), 8);
        for (int64_t size : shape)
          bytes *= size;
        bytes = llvm::alignTo(bytes, kWorkspaceAlignment);
        place.offset = workspace.allocate(bytes, lastReader[i][o], i);
      }
      outputShapes.push_back(std::move(shape));
      places.push_back(place);
    }
  }
  plan.workspaceBytes = workspace.getEnd();
  return plan;
}

std::string ProgramGraph::describeCall(unsigned call) const {
  return "the call of '" + programs[calls[call].program].functionName + "' (#" +
         std::to_string(call) + ") in '" + functionName + "'";
}

llvm::json::Object ProgramGraph::describe() const {
  auto describeValue = [](const GraphValue &value) {
    if (value.kind == GraphValue::Kind::Argument)
      return llvm::json::Array{"argument", value.index};
    return llvm::json::Array{"call", value.index, value.output};
  };
  llvm::json::Array callArray, resultArray;
  for (const GraphCall &call : calls) {
    llvm::json::Array arguments;
    for (const GraphValue &value : call.arguments)
      arguments.push_back(describeValue(value));
    callArray.push_back(
        llvm::json::Object{{"program", programs[call.program].functionName},
                           {"arguments", std::move(arguments)}});
  }
  for (const GraphValue &value : results)
    resultArray.push_back(describeValue(value));
  return llvm::json::Object{{"function", functionName},
                            {"calls", std::move(callArray)},
                            {"results", std::move(resultArray)}};
}
