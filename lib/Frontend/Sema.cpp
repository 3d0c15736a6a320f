//===- Sema.cpp - checks an epilogue and puts it in SSA form --------------===//
//
// Walks the statements in order, binding each assigned name to the node of
// its value. A name that is read but never assigned nor declared becomes an
// operand of type [M, N] in the GEMM operand type. The first error stops the
// analysis.
//
//===----------------------------------------------------------------------===//

#include "coda/Frontend/Sema.h"
#include "coda/Frontend/Builtins.h"
#include "coda/Frontend/Diagnostics.h"
#include "coda/Frontend/Parser.h"

#include "llvm/ADT/APFloat.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/LogicalResult.h"
#include "llvm/Support/MathExtras.h"
#include "llvm/Support/SourceMgr.h"

#include <cmath>

using namespace mlir::coda::dsl;
using namespace mlir::coda::dsl::ast;
using llvm::failure;
using llvm::FailureOr;
using llvm::LogicalResult;
using llvm::SMLoc;
using llvm::SMRange;
using llvm::StringRef;
using llvm::success;
using NodeKind = Node::Kind;

/// The largest |c| for which pow(x, c) is expanded into multiplications.
constexpr float kMaxExpandedExponent = 4;

/// Spells an f32 constant for diagnostics, as briefly as it reads back.
static std::string spellNumber(float value) {
  llvm::SmallString<16> text;
  llvm::APFloat(value).toString(text);
  return text.str().str();
}

/// Spells dims for diagnostics.
static StringRef spellDims(unsigned dims) {
  switch (dims) {
  case kMN:
    return "[M, N]";
  case kM:
    return "[M]";
  case kN:
    return "[N]";
  case kMHalfN:
    return "[M, N/2]";
  default:
    return "a scalar";
  }
}

//===----------------------------------------------------------------------===//
// Analyzer
//===----------------------------------------------------------------------===//

namespace {

class Analyzer {
public:
  Analyzer(const Epilogue &epilogue, llvm::SourceMgr &sourceMgr)
      : epilogue(epilogue), sourceMgr(sourceMgr) {}

  std::optional<EpilogueProgram> run();

private:
  /// What a name stands for.
  struct Binding {
    enum class Kind { Operand, Local, Output };
    Kind kind;
    /// The node of the name's current value; none while an output is
    /// unassigned.
    std::optional<unsigned> node;
    /// Where the name was declared or first assigned.
    SMRange range;
    /// Output: its position among the outputs.
    unsigned output = 0;
    /// Where the current value was assigned.
    SMRange assigned;

    static Binding makeOperand(unsigned node, SMRange range) {
      return {Kind::Operand, node, range, 0, range};
    }
    static Binding makeLocal(unsigned node, SMRange range) {
      return {Kind::Local, node, range, 0, range};
    }
    static Binding makeOutput(unsigned index, SMRange range) {
      return {Kind::Output, std::nullopt, range, index, SMRange()};
    }
  };

  LogicalResult emitError(SMLoc loc, const llvm::Twine &message,
                          SMRange range = {}) {
    printDiagnostic(sourceMgr, loc, llvm::SourceMgr::DK_Error, message,
                    {range});
    return failure();
  }
  void emitNote(SMRange range, const llvm::Twine &message) {
    printDiagnostic(sourceMgr, range.Start, llvm::SourceMgr::DK_Note, message,
                    {range});
  }

  /// Reports `name` if it is reserved: `input`, `seed` or a function; `use`
  /// says what was attempted ("declared", "assigned").
  LogicalResult checkNotReserved(StringRef name, SMRange range, StringRef use);
  LogicalResult checkDeclarable(const Declaration &declaration, bool isOutput);
  LogicalResult declareOperands();
  LogicalResult declareOutputs();
  LogicalResult checkAssignable(const Assignment &assignment);
  LogicalResult analyzeAssignment(const Assignment &assignment);
  LogicalResult checkOutputShape(const Assignment &assignment,
                                 const Binding &output, unsigned value);
  LogicalResult checkAllOutputsAssigned();

  /// Analyzes `expr`; `target` is the assignment whose whole value it is, if
  /// any (a column sum may only be that).
  FailureOr<unsigned> analyzeExpr(const Expr &expr,
                                  const Assignment *target = nullptr);
  FailureOr<unsigned> analyzeName(const Expr &expr);
  FailureOr<unsigned> analyzeCall(const Expr &expr, const Assignment *target);
  FailureOr<unsigned> analyzeColSum(const Expr &expr, unsigned argument,
                                    const Assignment *target);
  /// The value of constant node `value`, or an error `message` at `expr`.
  FailureOr<float> getConstant(unsigned value, const Expr &expr,
                               const llvm::Twine &message);
  unsigned expandPow(unsigned base, float exponent, SMLoc loc);

  /// Appends a node (folding arithmetic on constants) and returns its index.
  unsigned addNode(Node node);
  unsigned addNode(NodeKind kind, SMLoc loc,
                   llvm::ArrayRef<unsigned> operands = {}) {
    Node node;
    node.kind = kind;
    node.loc = loc;
    node.operands.assign(operands.begin(), operands.end());
    return addNode(std::move(node));
  }
  /// Adds epilogue input `name` and returns the node of its value.
  unsigned addInput(StringRef name, SMLoc loc, ValueType type) {
    Node node;
    node.kind = NodeKind::Input;
    node.loc = loc;
    node.index = program.inputs.size();
    program.inputs.push_back({name.str(), loc, type});
    return addNode(std::move(node));
  }
  unsigned addConstant(float value, SMLoc loc) {
    Node node;
    node.kind = NodeKind::Constant;
    node.loc = loc;
    node.constant = value;
    return addNode(std::move(node));
  }
  /// Drops the nodes no output depends on.
  void removeDeadNodes();

  const Epilogue &epilogue;
  llvm::SourceMgr &sourceMgr;
  EpilogueProgram program;
  llvm::StringMap<Binding> bindings;
  /// Where each name that the body assigns is first assigned.
  llvm::StringMap<SMRange> firstAssignments;
  unsigned accumulator = 0;
};

} // namespace

unsigned Analyzer::addNode(Node node) {
  auto isConstant = [&](unsigned i) {
    return program.nodes[i].kind == NodeKind::Constant;
  };
  if (!node.operands.empty() && llvm::all_of(node.operands, isConstant)) {
    // Folding in f32 gives what the f32 arithmetic would compute.
    auto operand = [&](unsigned i) {
      return program.nodes[node.operands[i]].constant;
    };
    std::optional<float> folded;
    switch (node.kind) {
    case NodeKind::Negate:
      folded = -operand(0);
      break;
    case NodeKind::Add:
      folded = operand(0) + operand(1);
      break;
    case NodeKind::Sub:
      folded = operand(0) - operand(1);
      break;
    case NodeKind::Mul:
      folded = operand(0) * operand(1);
      break;
    case NodeKind::Div:
      folded = operand(0) / operand(1);
      break;
    default:
      break;
    }
    if (folded) {
      node.kind = NodeKind::Constant;
      node.constant = *folded;
      node.operands.clear();
    }
  }

  switch (node.kind) {
  case NodeKind::Accumulator:
  case NodeKind::Dropout:
    node.dims = kMN;
    break;
  case NodeKind::Input:
    node.dims = program.inputs[node.index].type.dims;
    break;
  case NodeKind::RowReduce:
    node.dims = program.nodes[node.operands[0]].dims & ~kN;
    break;
  case NodeKind::ColReduce:
    node.dims = program.nodes[node.operands[0]].dims & ~kM;
    break;
  case NodeKind::Partner:
  case NodeKind::GroupReduce:
    node.dims = program.nodes[node.operands[0]].dims | kN;
    break;
  case NodeKind::Row:
    node.dims = kM;
    break;
  case NodeKind::Column:
    node.dims = kN;
    break;
  default:
    node.dims = kScalar;
    for (unsigned operand : node.operands)
      node.dims |= program.nodes[operand].dims;
    break;
  }
  program.nodes.push_back(std::move(node));
  return program.nodes.size() - 1;
}

//===----------------------------------------------------------------------===//
// Declarations
//===----------------------------------------------------------------------===//

LogicalResult Analyzer::checkNotReserved(StringRef name, SMRange range,
                                         StringRef use) {
  StringRef reason = name == "input"       ? "is the GEMM result"
                     : name == "seed"      ? "is reserved for the dropout seed"
                     : lookupBuiltin(name) ? "is a function"
                                           : "";
  if (reason.empty())
    return success();
  return emitError(range.Start,
                   "'" + name + "' " + reason + " and cannot be " + use, range);
}

LogicalResult Analyzer::checkDeclarable(const Declaration &declaration,
                                        bool isOutput) {
  StringRef name = declaration.name;
  SMRange range = declaration.nameRange;
  if (failed(checkNotReserved(name, range, "declared")))
    return failure();
  if (name == "output" && !isOutput)
    return emitError(range.Start,
                     "'output' is the main result and cannot be an operand; "
                     "declare it among the outputs after '->'",
                     range);
  auto it = bindings.find(name);
  if (it != bindings.end()) {
    (void)emitError(range.Start, "redefinition of '" + name + "'", range);
    emitNote(it->second.range, "'" + name + "' is first declared here");
    return failure();
  }
  if (!isOutput && declaration.type.dims == kScalar &&
      declaration.type.elementType != ElementType::F32)
    return emitError(declaration.typeRange.Start,
                     "scalar operand '" + name +
                         "' must be f32 (a tensor operand may also be bf16 "
                         "or f16)",
                     declaration.typeRange);
  if (!isOutput && (declaration.type.dims & kHalfN))
    return emitError(declaration.typeRange.Start,
                     "operand '" + name +
                         "' cannot be [M, N/2]: only an output takes the even "
                         "columns; an operand spans [M, N], [M] or [N]",
                     declaration.typeRange);
  if (isOutput && declaration.type.period)
    return emitError(declaration.typeRange.Start,
                     "output '" + name + "' cannot span N % " +
                         std::to_string(declaration.type.period) +
                         ": only an operand repeats along the row; an output "
                         "spans [M, N], [M], [N] or [M, N/2]",
                     declaration.typeRange);
  if (isOutput && declaration.type.dims == kScalar)
    return emitError(declaration.typeRange.Start,
                     "output '" + name +
                         "' cannot be a scalar: declare it [M, N], [M] or [N]",
                     declaration.typeRange);
  return success();
}

LogicalResult Analyzer::declareOperands() {
  for (const Declaration &declaration : epilogue.operands) {
    if (failed(checkDeclarable(declaration, /*isOutput=*/false)))
      return failure();
    unsigned node = addInput(declaration.name, declaration.nameRange.Start,
                             declaration.type);
    bindings[declaration.name] =
        Binding::makeOperand(node, declaration.nameRange);
  }
  return success();
}

LogicalResult Analyzer::declareOutputs() {
  if (!epilogue.outputs) {
    // Without declared outputs, the one output is `output`, an [M, N] tensor
    // of the GEMM operand type.
    program.outputs.push_back(
        {"output", epilogue.keywordRange.Start, ValueType{}});
    bindings["output"] = Binding::makeOutput(0, epilogue.keywordRange);
    return success();
  }
  if (epilogue.outputs->empty())
    return emitError(epilogue.arrowRange.Start,
                     "an epilogue needs at least one output",
                     epilogue.arrowRange);
  for (const Declaration &declaration : *epilogue.outputs) {
    if (failed(checkDeclarable(declaration, /*isOutput=*/true)))
      return failure();
    bindings[declaration.name] =
        Binding::makeOutput(program.outputs.size(), declaration.nameRange);
    program.outputs.push_back(
        {declaration.name, declaration.nameRange.Start, declaration.type});
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Statements
//===----------------------------------------------------------------------===//

LogicalResult Analyzer::checkAssignable(const Assignment &assignment) {
  StringRef name = assignment.name;
  SMRange range = assignment.nameRange;
  if (failed(checkNotReserved(name, range, "assigned")))
    return failure();
  auto it = bindings.find(name);
  if (it != bindings.end() && it->second.kind == Binding::Kind::Operand) {
    (void)emitError(range.Start,
                    "cannot assign to operand '" + name +
                        "': operands are read-only; assign the new value to "
                        "another name",
                    range);
    emitNote(it->second.range, "'" + name + "' is declared here");
    return failure();
  }
  if (name == "output" && it == bindings.end()) {
    std::string outputs;
    for (const Port &output : program.outputs)
      outputs += (outputs.empty() ? "'" : ", '") + output.name + "'";
    (void)emitError(range.Start,
                    "'output' is not an output of this epilogue, whose "
                    "outputs are " +
                        outputs +
                        "; declare it after '->' (e.g. `output: bf16[M, N]`)",
                    range);
    emitNote(epilogue.arrowRange, "the outputs are declared here");
    return failure();
  }
  return success();
}

LogicalResult Analyzer::analyzeAssignment(const Assignment &assignment) {
  if (failed(checkAssignable(assignment)))
    return failure();
  FailureOr<unsigned> value = analyzeExpr(*assignment.value, &assignment);
  if (failed(value))
    return failure();
  auto it = bindings.find(assignment.name);
  if (it == bindings.end()) {
    bindings[assignment.name] =
        Binding::makeLocal(*value, assignment.nameRange);
    return success();
  }
  if (it->second.kind == Binding::Kind::Output &&
      failed(checkOutputShape(assignment, it->second, *value)))
    return failure();
  it->second.node = *value;
  it->second.assigned = assignment.nameRange;
  return success();
}

LogicalResult Analyzer::checkOutputShape(const Assignment &assignment,
                                         const Binding &output,
                                         unsigned value) {
  unsigned declared = program.outputs[output.output].type.dims;
  unsigned extra = program.nodes[value].dims & ~declared;
  if (!extra)
    return success();
  const Expr &expr = *assignment.value;
  StringRef name = assignment.name;
  bool alongM = extra & kM;
  (void)emitError(
      expr.range.Start,
      "cannot assign to '" + name + "', declared " + spellDims(declared) +
          ", a value that varies along " +
          (alongM ? "M (rows)" : "N (columns)") + "; reduce it " +
          (alongM ? "over the rows with col_sum(...)"
                  : "over the columns with row_sum, row_max or row_mean") +
          ", or declare '" + name + "' " + spellDims(declared | extra),
      expr.range);
  emitNote(output.range, "'" + name + "' is declared here");
  return failure();
}

LogicalResult Analyzer::checkAllOutputsAssigned() {
  for (auto [i, output] : llvm::enumerate(program.outputs)) {
    const Binding &binding = bindings.find(output.name)->second;
    if (binding.node) {
      program.outputValues.push_back(*binding.node);
      continue;
    }
    if (!epilogue.outputs)
      return emitError(epilogue.endRange.Start,
                       "'output' is never assigned; the epilogue must compute "
                       "its result (e.g. `output = input;`)",
                       epilogue.endRange);
    return emitError(binding.range.Start,
                     "output '" + output.name +
                         "' is declared but never assigned",
                     binding.range);
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Expressions
//===----------------------------------------------------------------------===//

FailureOr<unsigned> Analyzer::analyzeExpr(const Expr &expr,
                                          const Assignment *target) {
  switch (expr.kind) {
  case Expr::Kind::Number:
    return addConstant(expr.number, expr.loc);
  case Expr::Kind::Name:
    return analyzeName(expr);
  case Expr::Kind::Call:
    return analyzeCall(expr, target);
  case Expr::Kind::Negate:
  case Expr::Kind::Add:
  case Expr::Kind::Sub:
  case Expr::Kind::Mul:
  case Expr::Kind::Div: {
    llvm::SmallVector<unsigned, 2> operands;
    for (const auto &operand : expr.operands) {
      FailureOr<unsigned> value = analyzeExpr(*operand);
      if (failed(value))
        return failure();
      operands.push_back(*value);
    }
    NodeKind kind = expr.kind == Expr::Kind::Negate ? NodeKind::Negate
                    : expr.kind == Expr::Kind::Add  ? NodeKind::Add
                    : expr.kind == Expr::Kind::Sub  ? NodeKind::Sub
                    : expr.kind == Expr::Kind::Mul  ? NodeKind::Mul
                                                    : NodeKind::Div;
    return addNode(kind, expr.loc, operands);
  }
  }
  llvm_unreachable("unknown expression kind");
}

FailureOr<unsigned> Analyzer::analyzeName(const Expr &expr) {
  StringRef name = expr.name;
  if (name == "input")
    return accumulator;
  if (name == "seed")
    return emitError(expr.loc,
                     "'seed' cannot be read: it is the dropout seed, which "
                     "only dropout(...) uses",
                     expr.range);
  if (const Builtin *builtin = lookupBuiltin(name))
    return emitError(expr.loc,
                     "'" + name + "' is a function; call it as " +
                         builtin->signature,
                     expr.range);

  auto it = bindings.find(name);
  if (it != bindings.end() && it->second.node) {
    unsigned node = *it->second.node;
    if (program.nodes[node].kind != NodeKind::ColReduce)
      return node;
    (void)emitError(expr.loc,
                    "'" + name +
                        "' holds a column sum, which cannot be read: it is "
                        "complete only once every row is computed, so it can "
                        "only be written to an output",
                    expr.range);
    emitNote(it->second.assigned, "the column sum is assigned here");
    return failure();
  }

  if (name == "output" && it == bindings.end())
    return emitError(expr.loc,
                     "'output' is not an output of this epilogue and never an "
                     "operand; the GEMM's result is 'input'",
                     expr.range);
  auto assigned = firstAssignments.find(name);
  if (it != bindings.end() || assigned != firstAssignments.end()) {
    (void)emitError(expr.loc, "'" + name + "' is read before it is assigned",
                    expr.range);
    if (assigned != firstAssignments.end())
      emitNote(assigned->second, "'" + name + "' is first assigned here");
    return failure();
  }

  // An undeclared name that is never assigned is an [M, N] operand of the
  // GEMM operand type.
  unsigned node = addInput(name, expr.loc, ValueType{});
  bindings[name] = Binding::makeOperand(node, expr.range);
  return node;
}

FailureOr<float> Analyzer::getConstant(unsigned value, const Expr &expr,
                                       const llvm::Twine &message) {
  if (program.nodes[value].kind == NodeKind::Constant)
    return program.nodes[value].constant;
  return emitError(expr.range.Start, message, expr.range);
}

FailureOr<unsigned> Analyzer::analyzeCall(const Expr &expr,
                                          const Assignment *target) {
  const Builtin *builtin = lookupBuiltin(expr.name);
  if (!builtin) {
    std::string known;
    for (const Builtin &candidate : getBuiltins())
      known += (known.empty() ? "" : ", ") + candidate.name;
    return emitError(
        expr.loc,
        "unknown function '" + expr.name + "'; the functions are " + known,
        {expr.loc,
         SMLoc::getFromPointer(expr.loc.getPointer() + expr.name.size())});
  }
  if (expr.operands.size() != builtin->arity)
    return emitError(
        expr.loc,
        "'" + builtin->name + "' takes " + llvm::Twine(builtin->arity) +
            (builtin->arity == 1 ? " argument" : " arguments") + " (" +
            builtin->signature + "), but " + llvm::Twine(expr.operands.size()) +
            (expr.operands.size() == 1 ? " was" : " were") + " given",
        expr.range);

  // Streams are numbered in the order the calls appear in the source, so the
  // stream is taken before the arguments are analyzed.
  unsigned stream = program.numDropouts;
  if (builtin->lowering == Lowering::Dropout)
    ++program.numDropouts;

  llvm::SmallVector<unsigned, 3> arguments;
  for (const auto &operand : expr.operands) {
    FailureOr<unsigned> value = analyzeExpr(*operand);
    if (failed(value))
      return failure();
    arguments.push_back(*value);
  }

  switch (builtin->lowering) {
  case Lowering::Direct: {
    Node node;
    node.kind = builtin->kind;
    node.loc = expr.loc;
    node.operands.assign(arguments.begin(), arguments.end());
    node.activation = builtin->activation;
    node.reduction = builtin->reduction;
    node.rounding = builtin->rounding;
    return addNode(std::move(node));
  }
  case Lowering::Clamp: {
    if (program.nodes[arguments[1]].kind == NodeKind::Constant &&
        program.nodes[arguments[2]].kind == NodeKind::Constant) {
      float lo = program.nodes[arguments[1]].constant;
      float hi = program.nodes[arguments[2]].constant;
      if (std::isnan(lo) || std::isnan(hi))
        return emitError(expr.loc,
                         "clamp's bounds must be numbers with lower <= "
                         "upper, got " +
                             spellNumber(lo) + " and " + spellNumber(hi),
                         expr.range);
      if (lo > hi)
        return emitError(expr.loc,
                         "clamp's lower bound " + spellNumber(lo) +
                             " is greater than its upper bound " +
                             spellNumber(hi),
                         expr.range);
    }
    unsigned lower =
        addNode(NodeKind::Maximum, expr.loc, {arguments[0], arguments[1]});
    return addNode(NodeKind::Minimum, expr.loc, {lower, arguments[2]});
  }
  case Lowering::Pow: {
    FailureOr<float> exponent =
        getConstant(arguments[1], *expr.operands[1],
                    "the exponent of pow must be a constant (a number or "
                    "arithmetic on numbers)");
    if (failed(exponent))
      return failure();
    if (std::fabs(*exponent) <= kMaxExpandedExponent &&
        *exponent == std::trunc(*exponent))
      return expandPow(arguments[0], *exponent, expr.loc);
    return addNode(NodeKind::Pow, expr.loc, arguments);
  }
  case Lowering::Dropout: {
    FailureOr<float> p =
        getConstant(arguments[1], *expr.operands[1],
                    "the dropout probability must be a constant (a number or "
                    "arithmetic on numbers)");
    if (failed(p))
      return failure();
    if (!(*p >= 0 && *p <= 1))
      return emitError(expr.operands[1]->range.Start,
                       "the dropout probability must be in [0, 1], got " +
                           spellNumber(*p),
                       expr.operands[1]->range);
    Node node;
    node.kind = NodeKind::Dropout;
    node.loc = expr.loc;
    node.operands = {arguments[0]};
    node.constant = *p;
    node.index = stream;
    return addNode(std::move(node));
  }
  case Lowering::ColSum:
    return analyzeColSum(expr, arguments[0], target);
  case Lowering::Partner:
  case Lowering::Group: {
    // A constant power of 2: partner's distance, a group's width.
    bool partner = builtin->lowering == Lowering::Partner;
    std::string what =
        partner ? "the distance of partner" : "the width of " + builtin->name;
    FailureOr<float> power = getConstant(
        arguments[1], *expr.operands[1],
        what + " must be a constant (a number or arithmetic on numbers)");
    if (failed(power))
      return failure();
    if (!(*power >= 1 && *power <= (1u << 30) && *power == std::trunc(*power) &&
          llvm::isPowerOf2_32(static_cast<uint32_t>(*power))))
      return emitError(expr.operands[1]->range.Start,
                       what + " must be a power of 2 (" +
                           (partner ? "1 pairs columns 2j and 2j + 1"
                                    : "the columns of a head, say 64 or 128") +
                           "), got " + spellNumber(*power),
                       expr.operands[1]->range);
    Node node;
    node.kind = partner ? NodeKind::Partner : NodeKind::GroupReduce;
    node.loc = expr.loc;
    node.operands = {arguments[0]};
    node.reduction = builtin->reduction;
    node.index = static_cast<unsigned>(*power);
    return addNode(std::move(node));
  }
  }
  llvm_unreachable("unknown lowering");
}

unsigned Analyzer::expandPow(unsigned base, float exponent, SMLoc loc) {
  // x^0 = 1 (for every x, as in C's powf); x^2 = x * x and x^-1 = 1 / x are
  // correctly rounded; x^3 = (x * x) * x and x^4 = (x * x) * (x * x).
  unsigned n = static_cast<unsigned>(std::fabs(exponent));
  if (n == 0)
    return addConstant(1.0f, loc);
  unsigned power = base;
  if (n >= 2) {
    unsigned square = addNode(NodeKind::Mul, loc, {base, base});
    power = n == 2   ? square
            : n == 3 ? addNode(NodeKind::Mul, loc, {square, base})
                     : addNode(NodeKind::Mul, loc, {square, square});
  }
  if (exponent > 0)
    return power;
  return addNode(NodeKind::Div, loc, {addConstant(1.0f, loc), power});
}

FailureOr<unsigned> Analyzer::analyzeColSum(const Expr &expr, unsigned argument,
                                            const Assignment *target) {
  SMRange callee(expr.loc, SMLoc::getFromPointer(expr.loc.getPointer() +
                                                 expr.name.size()));
  if (!target)
    return emitError(expr.loc,
                     "col_sum(...) must be the whole value assigned to an "
                     "output declared [N]: a column sum is complete only once "
                     "every row is computed, so nothing can be computed from "
                     "it",
                     callee);
  auto it = bindings.find(target->name);
  if (it == bindings.end() || it->second.kind != Binding::Kind::Output)
    return emitError(expr.loc,
                     "col_sum(...) can only be assigned to an output declared "
                     "[N]; '" +
                         target->name + "' is not an output",
                     callee);
  unsigned declared = program.outputs[it->second.output].type.dims;
  if (declared != kN) {
    (void)emitError(expr.loc,
                    "col_sum(...) can only be assigned to an output declared "
                    "[N]; '" +
                        target->name + "' is declared " + spellDims(declared),
                    callee);
    emitNote(it->second.range, "'" + target->name + "' is declared here");
    return failure();
  }
  Node node;
  node.kind = NodeKind::ColReduce;
  node.loc = expr.loc;
  node.operands = {argument};
  node.reduction = lookupBuiltin(expr.name)->reduction;
  return addNode(std::move(node));
}

//===----------------------------------------------------------------------===//
// Driver
//===----------------------------------------------------------------------===//

void Analyzer::removeDeadNodes() {
  std::vector<bool> live(program.nodes.size());
  for (unsigned value : program.outputValues)
    live[value] = true;
  for (unsigned i = program.nodes.size(); i-- > 0;)
    if (live[i])
      for (unsigned operand : program.nodes[i].operands)
        live[operand] = true;
  std::vector<unsigned> renumbered(program.nodes.size());
  std::vector<Node> kept;
  for (auto [i, node] : llvm::enumerate(program.nodes)) {
    if (!live[i])
      continue;
    for (unsigned &operand : node.operands)
      operand = renumbered[operand];
    renumbered[i] = kept.size();
    kept.push_back(std::move(node));
  }
  program.nodes = std::move(kept);
  for (unsigned &value : program.outputValues)
    value = renumbered[value];
}

std::optional<EpilogueProgram> Analyzer::run() {
  program.name = epilogue.name.empty() ? "epilogue" : epilogue.name;
  program.loc = epilogue.keywordRange.Start;
  program.endLoc = epilogue.endRange.Start;
  accumulator = addNode(NodeKind::Accumulator, program.loc);
  for (const Assignment &assignment : epilogue.body)
    firstAssignments.try_emplace(assignment.name, assignment.nameRange);

  if (failed(declareOperands()) || failed(declareOutputs()))
    return std::nullopt;
  for (const Assignment &assignment : epilogue.body)
    if (failed(analyzeAssignment(assignment)))
      return std::nullopt;
  if (failed(checkAllOutputsAssigned()))
    return std::nullopt;
  removeDeadNodes();
  return std::move(program);
}

std::optional<EpilogueProgram>
mlir::coda::dsl::analyzeEpilogue(const Epilogue &epilogue,
                                 llvm::SourceMgr &sourceMgr) {
  return Analyzer(epilogue, sourceMgr).run();
}

std::optional<EpilogueProgram>
mlir::coda::dsl::checkEpilogue(llvm::SourceMgr &sourceMgr) {
  std::unique_ptr<Epilogue> epilogue = parseEpilogue(sourceMgr);
  if (!epilogue)
    return std::nullopt;
  return analyzeEpilogue(*epilogue, sourceMgr);
}
