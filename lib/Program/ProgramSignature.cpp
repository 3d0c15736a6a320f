//===- ProgramSignature.cpp - the interface of a coda program -------------===//

#include "coda/Program/ProgramSignature.h"
#include "coda/Dialect/Coda/IR/CodaOps.h"
#include "coda/Program/HostLaunch.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace mlir::coda;

StringRef mlir::coda::stringifyArgumentRole(ArgumentRole role) {
  switch (role) {
  case ArgumentRole::A:
    return "a";
  case ArgumentRole::B:
    return "b";
  case ArgumentRole::C:
    return "c";
  case ArgumentRole::Alpha:
    return "alpha";
  case ArgumentRole::Beta:
    return "beta";
  case ArgumentRole::Input:
    return "input";
  }
  return "?";
}

StringRef mlir::coda::stringifyOutputSource(OutputSource source) {
  switch (source) {
  case OutputSource::Computed:
    return "computed";
  case OutputSource::Argument:
    return "argument";
  case OutputSource::ColumnSum:
    return "column_sum";
  }
  return "?";
}

/// Sets `output.source` for result `index` of `gemm`: an epilogue input
/// yielded as it is, to an output of its dims and element type, or summed
/// over M by `coda.col_reduce sum`, from an `[m, n]` input to an `[n]`
/// output.
static void findSource(GemmOp gemm, unsigned index, ProgramOutput &output,
                       ArrayRef<ProgramArgument> arguments) {
  Value value = gemm.getYield().getValues()[index];
  OutputSource source = OutputSource::Argument;
  unsigned inputDims = output.dims;
  if (auto reduce = value.getDefiningOp<ColReduceOp>()) {
    if (reduce.getKind() != ReductionKind::Sum || output.dims != DimsAttr::kN)
      return;
    value = reduce.getInput();
    source = OutputSource::ColumnSum;
    inputDims = DimsAttr::kM | DimsAttr::kN;
  }
  auto blockArg = dyn_cast<BlockArgument>(value);
  if (!blockArg || blockArg.getOwner() != &gemm.getEpilogueBlock() ||
      blockArg == gemm.getAccumulator())
    return;
  unsigned argNumber =
      cast<BlockArgument>(gemm.getInputs()[blockArg.getArgNumber() - 1])
          .getArgNumber();
  const ProgramArgument &argument = arguments[argNumber];
  auto type = dyn_cast<RankedTensorType>(argument.type);
  if (!type || argument.dims != inputDims || argument.period)
    return;
  if (source == OutputSource::Argument &&
      type.getElementType() != output.type.getElementType())
    return;
  output.source = source;
  output.sourceArgument = argNumber;
}

/// The operands of `gemm` that a program binds to its arguments, in order
/// (A, B, C, alpha, beta, the epilogue inputs), each with its role and the
/// dims it spans.
static SmallVector<std::tuple<Value, ArgumentRole, unsigned>>
getBoundOperands(GemmOp gemm) {
  SmallVector<std::tuple<Value, ArgumentRole, unsigned>> operands = {
      {gemm.getA(), ArgumentRole::A, 0}, {gemm.getB(), ArgumentRole::B, 0}};
  if (gemm.getC())
    operands.push_back(
        {gemm.getC(), ArgumentRole::C, gemm.getOutputSpaceDims().getMask()});
  if (gemm.getAlpha())
    operands.push_back({gemm.getAlpha(), ArgumentRole::Alpha, 0});
  if (gemm.getBeta())
    operands.push_back({gemm.getBeta(), ArgumentRole::Beta, 0});
  for (auto [i, input] : llvm::enumerate(gemm.getInputs()))
    operands.push_back(
        {input, ArgumentRole::Input, gemm.getInputDimsAt(i).getMask()});
  return operands;
}

std::optional<std::string> mlir::coda::getProgramViolation(func::FuncOp func) {
  if (func.isExternal())
    return std::string("it has no body");
  Block &body = func.getBody().front();
  auto gemms = body.getOps<GemmOp>();
  if (std::distance(gemms.begin(), gemms.end()) != 1 ||
      body.getOperations().size() != 2)
    return std::string("its body must be exactly one coda.gemm and a return");
  GemmOp gemm = *gemms.begin();
  auto ret = dyn_cast<func::ReturnOp>(body.getTerminator());
  if (!ret || ret.getOperands() != gemm.getResults())
    return std::string("it must return the coda.gemm results, in order");
  SmallVector<bool> bound(func.getNumArguments(), false);
  for (auto [operand, role, dims] : getBoundOperands(gemm)) {
    auto arg = dyn_cast<BlockArgument>(operand);
    if (!arg || arg.getOwner() != &body)
      return ("coda.gemm operand '" + stringifyArgumentRole(role) +
              "' must be a function argument")
          .str();
    if (bound[arg.getArgNumber()])
      return ("argument #" + Twine(arg.getArgNumber()) +
              " feeds two coda.gemm operands")
          .str();
    bound[arg.getArgNumber()] = true;
  }
  for (auto [i, isBound] : llvm::enumerate(bound))
    if (!isBound)
      return ("argument #" + Twine(i) + " is not used by the coda.gemm").str();
  return std::nullopt;
}

FailureOr<ProgramSignature> ProgramSignature::get(ModuleOp module,
                                                  StringRef name) {
  func::FuncOp func;
  if (!name.empty()) {
    func = module.lookupSymbol<func::FuncOp>(name);
    if (!func)
      return module.emitError() << "no function named '" << name << "'";
  } else {
    for (auto candidate : module.getOps<func::FuncOp>()) {
      if (candidate.isExternal() || candidate.getOps<GemmOp>().empty())
        continue;
      if (func)
        return candidate.emitError()
               << "several functions hold a coda.gemm ('" << func.getName()
               << "', '" << candidate.getName() << "'); name the one to run";
      func = candidate;
    }
    if (!func)
      return module.emitError() << "no function holds a coda.gemm";
  }

  auto notProgram = [&](const Twine &why) {
    return func.emitError()
           << "'" << func.getName() << "' is not a coda program: " << why;
  };
  if (std::optional<std::string> why = getProgramViolation(func))
    return notProgram(*why);
  Block &body = func.getBody().front();
  GemmOp gemm = *body.getOps<GemmOp>().begin();

  ProgramSignature signature;
  signature.functionName = func.getName().str();
  signature.operandType = gemm.getOperandElementType();
  signature.transposeA = gemm.getTransposeA();
  signature.transposeB = gemm.getTransposeB();
  signature.batched = gemm.isBatched();
  signature.halfNAccumulator = gemm.getAccumulatorHalfN();
  signature.bHalves = gemm.getBHalves();

  signature.arguments.resize(func.getNumArguments());
  for (auto [operand, role, dims] : getBoundOperands(gemm)) {
    unsigned number = cast<BlockArgument>(operand).getArgNumber();
    ProgramArgument &entry = signature.arguments[number];
    entry.role = role;
    entry.type = operand.getType();
    entry.dims = dims;
    if (auto attr = func.getArgAttrOfType<StringAttr>(number, "coda.name"))
      entry.name = attr.str();
    else if (role != ArgumentRole::Input)
      entry.name = stringifyArgumentRole(role).str();
    else
      entry.name = "arg" + std::to_string(number);
  }
  for (auto [i, input] : llvm::enumerate(gemm.getInputs()))
    signature.arguments[cast<BlockArgument>(input).getArgNumber()].period =
        gemm.getInputDimsAt(i).getPeriod();

  for (auto [i, result] : llvm::enumerate(gemm.getResults())) {
    ProgramOutput output;
    if (auto attr = func.getResultAttrOfType<StringAttr>(i, "coda.name"))
      output.name = attr.str();
    else
      output.name = "result" + std::to_string(i);
    output.type = cast<RankedTensorType>(result.getType());
    output.dims = gemm.getResultDimsAt(i).getMask();
    findSource(gemm, i, output, signature.arguments);
    signature.outputs.push_back(output);
  }
  // Epilogue inputs and outputs are bound and returned by name (the GEMM's
  // own operands by role: an input may be named like one).
  llvm::StringSet<> inputNames, outputNames;
  for (const ProgramArgument &arg : signature.arguments)
    if (arg.role == ArgumentRole::Input && !inputNames.insert(arg.name).second)
      return notProgram("two epilogue inputs are named '" + arg.name +
                        "'; each needs a coda.name of its own");
  for (const ProgramOutput &output : signature.outputs)
    if (!outputNames.insert(output.name).second)
      return notProgram("two outputs are named '" + output.name +
                        "'; each needs a coda.name of its own");
  return signature;
}

void mlir::coda::isolateProgram(ModuleOp module, StringRef functionName) {
  for (auto func : llvm::make_early_inc_range(module.getOps<func::FuncOp>()))
    if (func.getName() != functionName)
      func.erase();
}

int ProgramSignature::findRole(ArgumentRole role) const {
  for (auto [i, arg] : llvm::enumerate(arguments))
    if (arg.role == role)
      return i;
  return -1;
}

int ProgramSignature::findInput(StringRef name) const {
  for (auto [i, arg] : llvm::enumerate(arguments))
    if (arg.role == ArgumentRole::Input && arg.name == name)
      return i;
  return -1;
}

int ProgramSignature::findOutput(StringRef name) const {
  for (auto [i, output] : llvm::enumerate(outputs))
    if (output.name == name)
      return i;
  return -1;
}

int ProgramSignature::findSeed() const {
  int seed = findInput("seed");
  return seed >= 0 && arguments[seed].type.isInteger(64) ? seed : -1;
}

/// The sizes of a tensor spanning `dims` (n mod `period` if not 0) for
/// `problem`, in b, m, n order.
static SmallVector<int64_t> shapeFor(unsigned dims, const ProblemShape &problem,
                                     unsigned period = 0) {
  SmallVector<int64_t> shape;
  if (dims & DimsAttr::kB)
    shape.push_back(problem.batch);
  if (dims & DimsAttr::kM)
    shape.push_back(problem.m);
  if (dims & DimsAttr::kN)
    shape.push_back(period                      ? period
                    : (dims & DimsAttr::kHalfN) ? problem.n / 2
                                                : problem.n);
  return shape;
}

std::string mlir::coda::spellShape(ArrayRef<int64_t> shape) {
  std::string text = "[";
  for (auto [i, d] : llvm::enumerate(shape))
    text += (i ? ", " : "") +
            (ShapedType::isDynamic(d) ? std::string("?") : std::to_string(d));
  return text + "]";
}

llvm::Expected<ProblemShape> ProgramSignature::inferProblemShape(
    ArrayRef<SmallVector<int64_t>> shapes) const {
  auto error = [](const Twine &message) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
  };
  // Every tensor's rank and static sizes must match its type.
  for (auto [i, arg] : llvm::enumerate(arguments)) {
    auto type = dyn_cast<RankedTensorType>(arg.type);
    if (!type)
      continue;
    ArrayRef<int64_t> shape = shapes[i];
    if (static_cast<int64_t>(shape.size()) != type.getRank())
      return error("'" + arg.name + "' has shape " + spellShape(shape) +
                   ", but the program expects a rank-" + Twine(type.getRank()) +
                   " tensor (" + Twine(spellShape(type.getShape())) + ")");
    for (auto [d, expected] : llvm::enumerate(type.getShape()))
      if (!ShapedType::isDynamic(expected) && expected != shape[d])
        return error("'" + arg.name + "' has shape " + spellShape(shape) +
                     ", but the program fixes dim " + Twine(d) + " to " +
                     Twine(expected));
  }

  auto matrix = [&](ArgumentRole role, bool transposed, int64_t &rows,
                    int64_t &cols, int64_t &batch) {
    ArrayRef<int64_t> shape = shapes[findRole(role)];
    batch = shape.size() == 3 ? shape[0] : -1;
    rows = shape[shape.size() - 2];
    cols = shape[shape.size() - 1];
    if (transposed)
      std::swap(rows, cols);
  };
  ProblemShape problem;
  int64_t kOfB, batchOfA, batchOfB;
  matrix(ArgumentRole::A, transposeA, problem.m, problem.k, batchOfA);
  matrix(ArgumentRole::B, transposeB, kOfB, problem.n, batchOfB);
  if (halfNAccumulator)
    problem.n *= 2;
  if (problem.k != kOfB)
    return error("'a' has K = " + Twine(problem.k) + " but 'b' has K = " +
                 Twine(kOfB) + " (layouts: a " + (transposeA ? "km" : "mk") +
                 ", b " + (transposeB ? "nk" : "kn") + ")");
  if (batchOfA >= 0 && batchOfB >= 0 && batchOfA != batchOfB)
    return error("'a' has " + Twine(batchOfA) + " batches but 'b' has " +
                 Twine(batchOfB));
  problem.batch = batchOfA >= 0 ? batchOfA : batchOfB >= 0 ? batchOfB : 1;

  for (auto [i, arg] : llvm::enumerate(arguments)) {
    if (!isa<RankedTensorType>(arg.type) || arg.role == ArgumentRole::A ||
        arg.role == ArgumentRole::B)
      continue;
    SmallVector<int64_t> expected = shapeFor(arg.dims, problem, arg.period);
    if (ArrayRef<int64_t>(shapes[i]) != ArrayRef<int64_t>(expected))
      return error(
          "'" + arg.name + "' has shape " + spellShape(shapes[i]) +
          ", but for M = " + Twine(problem.m) + ", N = " + Twine(problem.n) +
          " it must be " + spellShape(expected) + " (M is from 'a' " +
          spellShape(shapes[findRole(ArgumentRole::A)]) +
          (transposeA ? ", stored [K, M]" : ", stored [M, K]") +
          "; N from 'b' " + spellShape(shapes[findRole(ArgumentRole::B)]) +
          (transposeB ? ", stored [N, K]" : ", stored [K, N]") +
          (halfNAccumulator ? ", twice its columns: the accumulator spans "
                              "[m, n/2])"
                            : ")"));
  }
  // Sizes whose output space cannot even be counted in bytes are refused
  // here, before anything is allocated for them.
  int64_t elements, bytes;
  if (llvm::MulOverflow(problem.batch, problem.m, elements) ||
      llvm::MulOverflow(elements, problem.n, elements) ||
      llvm::MulOverflow(elements, int64_t(8), bytes))
    return error("M = " + Twine(problem.m) + ", N = " + Twine(problem.n) +
                 (batched ? ", batch " + Twine(problem.batch) : Twine()) +
                 " give an output space too large to address (above 2^63 "
                 "bytes)");
  if (bHalves && problem.n % 2)
    return error("B holds op(B)'s column pairs in its two halves (layout "
                 "halves), which needs an even N; N = " +
                 Twine(problem.n));
  for (auto [i, output] : llvm::enumerate(outputs)) {
    if ((output.dims & DimsAttr::kHalves) && problem.n % 2)
      return error("output '" + output.name +
                   "' spans [m, n halves], its column pairs stored apart, "
                   "which needs an even N; N = " +
                   Twine(problem.n));
    if ((output.dims & DimsAttr::kHalfN) && problem.n % 2)
      return error("output '" + output.name +
                   "' spans [m, n/2], the even "
                   "columns, which needs an even N; N = " +
                   Twine(problem.n));
    SmallVector<int64_t> shape = getOutputShape(i, problem);
    for (auto [d, expected] : llvm::enumerate(output.type.getShape()))
      if (!ShapedType::isDynamic(expected) && expected != shape[d])
        return error("output '" + output.name + "' would have shape " +
                     spellShape(shape) + ", but the program fixes dim " +
                     Twine(d) + " to " + Twine(expected));
  }
  return problem;
}

SmallVector<int64_t>
ProgramSignature::getOutputShape(unsigned index,
                                 const ProblemShape &problem) const {
  return shapeFor(outputs[index].dims, problem);
}

SmallVector<func::FuncOp> mlir::coda::getPrograms(ModuleOp module) {
  SmallVector<func::FuncOp> programs;
  for (auto func : module.getOps<func::FuncOp>())
    if (!func.isExternal() && !func.getOps<GemmOp>().empty() &&
        !getProgramViolation(func))
      programs.push_back(func);
  return programs;
}
