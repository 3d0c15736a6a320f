//===- HostFunction.cpp - host code that launches coda programs -----------===//

#include "coda/Runner/HostFunction.h"
#include "Jit.h"

#include "coda/Dialect/Coda/Transforms/Passes.h"
#include "coda/Pipelines/Pipelines.h"
#include "coda/Program/HostLaunch.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/ExecutionEngine/CRunnerUtils.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"

#include <cstdlib>
#include <cstring>

using namespace mlir;
using namespace mlir::coda;
using namespace mlir::coda::host_launch;

namespace {

/// The symbol the host function is compiled under; reserved in C, so no
/// library linked into the JIT defines it.
constexpr llvm::StringLiteral kHostEntryName = "__coda_host_function";

llvm::Error makeError(const Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

/// The run in progress on this thread: what the launches of its host code
/// call into, and the first error one of them met (the host code cannot
/// stop; a failed launch skips the launches after it).
struct ActiveRun {
  ArrayRef<ProgramSignature> programs;
  ProgramLauncher &launcher;
  std::string error;
};
thread_local ActiveRun *activeRun = nullptr;

using Packed = StridedMemRefType<int64_t, 1>;

/// The words of value `slot` of a launch's packed buffer.
int64_t *getValue(Packed *packed, int64_t slot) {
  return packed->data + packed->offset + slot * kWordsPerValue;
}

/// Records `message` as the run's error unless an earlier launch failed.
void recordError(const Twine &message) {
  if (activeRun->error.empty())
    activeRun->error = message.str();
}

/// The program of launch `index`, or nullptr (recording why) when the module
/// has no such program.
const ProgramSignature *findProgram(int64_t index) {
  ArrayRef<ProgramSignature> programs = activeRun->programs;
  if (index >= 0 && index < static_cast<int64_t>(programs.size()))
    return &programs[index];
  recordError("the host code launches program " + Twine(index) +
              ", but the module has " + Twine(programs.size()));
  return nullptr;
}

/// The sizes of the tensor in `words`, or an error when its rank is not
/// between 0 and 3.
llvm::Expected<SmallVector<int64_t>> getSizes(const int64_t *words) {
  int64_t rank = words[kRankWord];
  if (rank < 0 || rank > 3)
    return makeError("a launched tensor has rank " + Twine(rank));
  return SmallVector<int64_t>(words + kFirstSizeWord,
                              words + kFirstSizeWord + rank);
}

/// kShapesFunction: writes the rank and sizes of each output of program
/// `index` on the arguments in `packed`, or zeros when they do not fit it.
/// The sizes come from the signature alone: they are written after a failed
/// launch too, so that the host code allocates what its types say.
void hostShapes(int64_t index, Packed *packed) {
  const ProgramSignature *program = findProgram(index);
  if (!program) {
    std::memset(packed->data + packed->offset, 0,
                packed->sizes[0] * sizeof(int64_t));
    return;
  }
  size_t numArguments = program->arguments.size();
  auto fail = [&](const Twine &message) {
    recordError("'" + program->functionName + "': " + message);
    for (size_t i = 0; i < program->outputs.size(); ++i)
      std::memset(getValue(packed, numArguments + i), 0,
                  kWordsPerValue * sizeof(int64_t));
  };
  SmallVector<SmallVector<int64_t>> shapes(numArguments);
  for (auto [i, arg] : llvm::enumerate(program->arguments)) {
    if (!isa<RankedTensorType>(arg.type))
      continue;
    llvm::Expected<SmallVector<int64_t>> sizes = getSizes(getValue(packed, i));
    if (!sizes)
      return fail(llvm::toString(sizes.takeError()));
    shapes[i] = std::move(*sizes);
  }
  llvm::Expected<ProblemShape> problem = program->inferProblemShape(shapes);
  if (!problem)
    return fail(llvm::toString(problem.takeError()));
  for (auto [i, output] : llvm::enumerate(program->outputs)) {
    SmallVector<int64_t> shape = program->getOutputShape(i, *problem);
    for (auto [size, declared] : llvm::zip(shape, output.type.getShape()))
      if (!ShapedType::isDynamic(declared) && size != declared)
        return fail("output '" + output.name + "' would have the shape " +
                    spellShape(shape) + ", but the program declares " +
                    spellShape(output.type.getShape()));
    int64_t *words = getValue(packed, numArguments + i);
    words[kRankWord] = static_cast<int64_t>(shape.size());
    llvm::copy(shape, words + kFirstSizeWord);
  }
}

/// kLaunchFunction: runs program `index` on the arguments and outputs in
/// `packed`.
void hostLaunch(int64_t index, Packed *packed) {
  if (!activeRun->error.empty())
    return;
  const ProgramSignature *program = findProgram(index);
  if (!program)
    return;
  size_t numArguments = program->arguments.size();
  SmallVector<ArgumentRef> args(numArguments);
  for (auto [i, arg] : llvm::enumerate(program->arguments)) {
    const int64_t *words = getValue(packed, i);
    if (isa<RankedTensorType>(arg.type)) {
      args[i].buffer.data = reinterpret_cast<void *>(words[0]);
      args[i].buffer.shape = cantFail(getSizes(words));
    } else if (arg.type.isF32()) {
      auto bits = static_cast<uint32_t>(words[0]);
      float value;
      std::memcpy(&value, &bits, sizeof(value));
      args[i].number = value;
    } else {
      args[i].i64 = words[0];
    }
  }
  SmallVector<BufferRef> outputs(program->outputs.size());
  for (auto [i, output] : llvm::enumerate(outputs)) {
    const int64_t *words = getValue(packed, numArguments + i);
    output.data = reinterpret_cast<void *>(words[0]);
    output.shape = cantFail(getSizes(words));
  }
  if (llvm::Error error = activeRun->launcher.launch(index, args, outputs))
    recordError(llvm::toString(std::move(error)));
}

/// `memrefCopy`, which the lowering of a memref.copy between buffers of
/// different layouts calls (MLIR's C runner utilities define it; the host
/// code is linked against no library but the C library): copies the
/// elements of `source` to `target`, strided either way.
void copyMemRef(int64_t elementSize, ::UnrankedMemRefType<char> *source,
                ::UnrankedMemRefType<char> *target) {
  ::DynamicMemRefType<char> from(*source), to(*target);
  jit::copyStrided(elementSize, ArrayRef<int64_t>(from.sizes, from.rank),
                   reinterpret_cast<const uint8_t *>(from.data), from.offset,
                   ArrayRef<int64_t>(from.strides, from.rank),
                   reinterpret_cast<uint8_t *>(to.data), to.offset,
                   ArrayRef<int64_t>(to.strides, to.rank));
}

/// Renames `program` (to <name>_program, or a name like it where that is
/// taken) and puts in its place a function of its name and type that calls
/// it.
void wrapProgram(func::FuncOp program) {
  auto module = program->getParentOfType<ModuleOp>();
  SymbolTable symbols(module);
  std::string name = program.getName().str();
  std::string fresh = name + "_program";
  LogicalResult renamed =
      symbols.lookup(fresh)
          ? LogicalResult(symbols.renameToUnique(program, {&symbols}))
          : symbols.rename(program, fresh);
  if (failed(renamed))
    llvm_unreachable("a program without uses is always renamed");
  OpBuilder b(program);
  auto wrapper = func::FuncOp::create(b, program.getLoc(), name,
                                      program.getFunctionType());
  symbols.insert(wrapper);
  b.setInsertionPointToStart(wrapper.addEntryBlock());
  auto call = func::CallOp::create(b, program.getLoc(), program,
                                   wrapper.getArguments());
  func::ReturnOp::create(b, program.getLoc(), call.getResults());
}

/// The type of an argument or result `what` of the host function, or an
/// error saying what is supported.
llvm::Expected<HostTensorType> getHostTensorType(Type type, const Twine &what) {
  std::string spelling;
  llvm::raw_string_ostream(spelling) << type;
  auto tensor = dyn_cast<RankedTensorType>(type);
  std::optional<ElementType> element =
      tensor ? getHostElementType(tensor.getElementType()) : std::nullopt;
  if (!element)
    return makeError(what + " is " + spelling +
                     "; a host function takes and returns ranked tensors "
                     "of f32, f16 or bf16");
  return HostTensorType{*element, SmallVector<int64_t>(tensor.getShape()),
                        spelling};
}

} // namespace

ProgramLauncher::~ProgramLauncher() = default;

CpuProgramLauncher::CpuProgramLauncher(ModuleOp module,
                                       ArrayRef<ProgramSignature> programs)
    : module(module), programs(programs.begin(), programs.end()) {}

CpuProgramLauncher::~CpuProgramLauncher() = default;

llvm::Error CpuProgramLauncher::launch(unsigned index,
                                       ArrayRef<ArgumentRef> args,
                                       ArrayRef<BufferRef> outputs) {
  std::unique_ptr<CpuExecutable> &executable = executables[index];
  if (!executable) {
    llvm::Expected<std::unique_ptr<CpuExecutable>> created =
        CpuExecutable::create(OwningOpRef<ModuleOp>(module.clone()),
                              programs[index]);
    if (!created)
      return created.takeError();
    executable = std::move(*created);
  }
  return executable->runInto(args, outputs);
}

HostFunction::~HostFunction() = default;

llvm::Expected<std::unique_ptr<HostFunction>>
HostFunction::create(ModuleOp module, StringRef name) {
  auto func = module.lookupSymbol<func::FuncOp>(name);
  if (!func || func.isExternal())
    return makeError("the module has no function named '" + name +
                     "' with a body");
  std::unique_ptr<HostFunction> host(new HostFunction());
  host->name = name.str();
  auto readTypes = [&](TypeRange types, StringRef what,
                       std::vector<HostTensorType> &into) -> llvm::Error {
    for (auto [i, type] : llvm::enumerate(types)) {
      auto hostType = getHostTensorType(type, what + " #" + Twine(i) + " of '" +
                                                  name + "'");
      if (!hostType)
        return hostType.takeError();
      into.push_back(std::move(*hostType));
    }
    return llvm::Error::success();
  };
  if (llvm::Error error =
          readTypes(func.getArgumentTypes(), "argument", host->argumentTypes))
    return std::move(error);
  if (llvm::Error error =
          readTypes(func.getResultTypes(), "result", host->resultTypes))
    return std::move(error);

  // Each GEMM outside a program becomes one. Only what the function calls
  // is compiled (and launched): the module's other functions may call what
  // the JIT cannot resolve. A function that is a program itself (an
  // exported function raised whole) is launched from a host function of its
  // name that calls it.
  OwningOpRef<ModuleOp> lowered(module.clone());
  PassManager outline(module.getContext());
  outline.addPass(createCodaOutlinePrograms());
  if (failed(outline.run(*lowered)))
    return makeError("outlining the coda.gemm ops of '" + name + "' failed");
  auto entry = lowered->lookupSymbol<func::FuncOp>(name);
  if (llvm::is_contained(mlir::coda::getPrograms(*lowered), entry))
    wrapProgram(entry);
  for (auto other : lowered->getOps<func::FuncOp>()) {
    if (other.getName() == name)
      other.setPublic();
    else if (!other.isExternal())
      other.setPrivate();
  }
  PassManager prune(module.getContext());
  prune.addPass(createSymbolDCEPass());
  if (failed(prune.run(*lowered)))
    return makeError("pruning the module around '" + name + "' failed");
  for (func::FuncOp program : mlir::coda::getPrograms(*lowered)) {
    FailureOr<ProgramSignature> signature =
        ProgramSignature::get(*lowered, program.getName());
    if (failed(signature))
      return makeError("reading the signature of '" + program.getName() +
                       "' failed");
    host->programs.push_back(std::move(*signature));
  }
  host->programModule = OwningOpRef<ModuleOp>(lowered->clone());
  // A graph runs its programs in turn, with no host code to compile.
  std::optional<std::string> notGraph = mlir::coda::getGraphViolation(
      *lowered, lowered->lookupSymbol<func::FuncOp>(name));
  if (!notGraph) {
    FailureOr<ProgramGraph> graph = ProgramGraph::get(*lowered, name);
    if (failed(graph))
      return makeError("describing the program graph '" + name + "' failed");
    host->graph = std::move(*graph);
    return std::move(host);
  }
  host->graphViolation = *notGraph;
  jit::removeNames(*lowered);
  PassManager launches(module.getContext());
  launches.addPass(createCodaLaunchPrograms());
  if (failed(launches.run(*lowered)))
    return makeError("compiling the host code of '" + name + "' failed");
  // The function is compiled under a name of its own: the JIT links the
  // module against the C library, where a function called `expf` would stand
  // in for the exponential the host code calls.
  if (failed(SymbolTable(*lowered).rename(
          lowered->lookupSymbol<func::FuncOp>(name), kHostEntryName)))
    return makeError("renaming '" + name + "' failed");
  PassManager pm(module.getContext());
  buildCpuPipeline(pm);
  if (failed(pm.run(*lowered)))
    return makeError("compiling the host code of '" + name + "' failed");
  std::string shapesSymbol = ("_mlir_ciface_" + kShapesFunction).str();
  std::string launchSymbol = ("_mlir_ciface_" + kLaunchFunction).str();
  llvm::Expected<std::unique_ptr<ExecutionEngine>> engine = jit::compile(
      *lowered, {{shapesSymbol, reinterpret_cast<void *>(&hostShapes)},
                 {launchSymbol, reinterpret_cast<void *>(&hostLaunch)},
                 {"memrefCopy", reinterpret_cast<void *>(&copyMemRef)}});
  if (!engine)
    return engine.takeError();
  host->engine = std::move(*engine);
  return std::move(host);
}

llvm::Error HostFunction::checkArguments(ArrayRef<HostArray> args) const {
  if (args.size() != argumentTypes.size())
    return makeError("'" + name + "' takes " + Twine(argumentTypes.size()) +
                     " arguments, got " + Twine(args.size()));
  for (auto [i, arg, type] : llvm::enumerate(args, argumentTypes)) {
    bool fits = arg.elementType == type.elementType &&
                arg.shape.size() == type.shape.size();
    for (auto [size, declared] : llvm::zip(arg.shape, type.shape))
      fits &= ShapedType::isDynamic(declared) || size == declared;
    if (!fits)
      return makeError("argument #" + Twine(i) + " of '" + name + "' is " +
                       type.spelling + ", got " + arg.getShapeString() + " " +
                       getElementTypeName(arg.elementType));
  }
  return llvm::Error::success();
}

llvm::Expected<std::vector<HostArray>>
HostFunction::run(ArrayRef<HostArray> args, ProgramLauncher &launcher) const {
  if (llvm::Error error = checkArguments(args))
    return std::move(error);
  return graph ? runGraph(args, launcher) : runHostCode(args, launcher);
}

llvm::Expected<std::vector<HostArray>>
HostFunction::runGraph(ArrayRef<HostArray> args,
                       ProgramLauncher &launcher) const {
  SmallVector<SmallVector<int64_t>> shapes;
  for (const HostArray &arg : args)
    shapes.emplace_back(arg.shape.begin(), arg.shape.end());
  llvm::Expected<GraphPlan> plan = graph->plan(shapes);
  if (!plan)
    return plan.takeError();
  std::vector<HostArray> results;
  for (auto [type, shape] : llvm::zip(resultTypes, plan->resultShapes))
    results.emplace_back(type.elementType, shape);
  std::vector<uint8_t> workspace(plan->workspaceBytes);
  auto bufferOf = [&](unsigned call, unsigned output) {
    const GraphPlace &place = plan->places[call][output];
    void *data = place.result >= 0 ? results[place.result].data.data()
                                   : workspace.data() + place.offset;
    return BufferRef{data, plan->outputShapes[call][output]};
  };
  for (auto [i, call] : llvm::enumerate(graph->calls)) {
    SmallVector<ArgumentRef> callArgs;
    for (const GraphValue &value : call.arguments) {
      ArgumentRef &ref = callArgs.emplace_back();
      if (value.kind == GraphValue::Kind::CallOutput) {
        ref.buffer = bufferOf(value.index, value.output);
        continue;
      }
      const HostArray &arg = args[value.index];
      ref.buffer = {const_cast<uint8_t *>(arg.data.data()),
                    SmallVector<int64_t>(arg.shape.begin(), arg.shape.end())};
    }
    SmallVector<BufferRef> outputs;
    for (unsigned o = 0; o < plan->outputShapes[i].size(); ++o)
      outputs.push_back(bufferOf(i, o));
    if (llvm::Error error = launcher.launch(call.program, callArgs, outputs))
      return std::move(error);
  }
  return std::move(results);
}

llvm::Expected<std::vector<HostArray>>
HostFunction::runHostCode(ArrayRef<HostArray> args,
                          ProgramLauncher &launcher) const {
  SmallVector<SmallVector<int64_t>> descriptors;
  SmallVector<void *> descriptorPointers;
  descriptors.reserve(args.size());
  descriptorPointers.reserve(args.size());
  for (const HostArray &arg : args) {
    descriptors.push_back(jit::makeDescriptor(
        BufferRef{const_cast<uint8_t *>(arg.data.data()),
                  SmallVector<int64_t>(arg.shape.begin(), arg.shape.end())}));
    descriptorPointers.push_back(descriptors.back().data());
  }

  SmallVector<int64_t> ranks;
  SmallVector<unsigned> elementBytes;
  for (const HostTensorType &type : resultTypes) {
    ranks.push_back(static_cast<int64_t>(type.shape.size()));
    elementBytes.push_back(getElementSize(type.elementType));
  }
  // The C interface takes a pointer to the results first, when there are
  // any.
  SmallVector<int64_t> fields(jit::getResultWords(ranks), 0);
  void *resultPointer = fields.data();
  SmallVector<void *> packed;
  if (!ranks.empty())
    packed.push_back(&resultPointer);
  for (void *&pointer : descriptorPointers)
    packed.push_back(&pointer);

  ActiveRun active{programs, launcher, {}};
  ActiveRun *outer = activeRun;
  activeRun = &active;
  llvm::Error invoked =
      engine->invokePacked(("_mlir_ciface_" + kHostEntryName).str(), packed);
  activeRun = outer;
  if (invoked)
    return std::move(invoked);

  std::vector<HostArray> results;
  llvm::SetVector<void *> allocations;
  jit::copyResults(
      fields.data(), ranks, elementBytes,
      [&](unsigned i, ArrayRef<int64_t> sizes) {
        results.emplace_back(resultTypes[i].elementType, sizes);
        return results.back().data.data();
      },
      allocations);
  for (const HostArray &arg : args)
    allocations.remove(const_cast<uint8_t *>(arg.data.data()));
  for (void *allocated : allocations)
    std::free(allocated);
  if (!active.error.empty())
    return makeError(active.error);
  return std::move(results);
}
