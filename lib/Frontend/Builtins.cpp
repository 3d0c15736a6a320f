//===- Builtins.cpp - the DSL's built-in functions ------------------------===//

#include "coda/Frontend/Builtins.h"

#include "llvm/ADT/Twine.h"
#include "llvm/Support/raw_ostream.h"

#include <vector>

using namespace mlir::coda;
using namespace mlir::coda::dsl;
using Family = Builtin::Family;
using NodeKind = Node::Kind;

/// The DSL's name of an activation: the dialect's, but `gelu` for gelu_tanh.
static std::string getActivationName(ActivationKind kind) {
  if (kind == ActivationKind::GeluTanh)
    return "gelu";
  return stringifyActivationKind(kind).str();
}

static Builtin makeBuiltin(llvm::StringRef name, llvm::StringRef parameters,
                           unsigned arity, Family family, Lowering lowering,
                           NodeKind kind) {
  Builtin builtin;
  builtin.name = name.str();
  builtin.signature = (llvm::Twine(name) + "(" + parameters + ")").str();
  builtin.arity = arity;
  builtin.family = family;
  builtin.lowering = lowering;
  builtin.kind = kind;
  return builtin;
}

static std::vector<Builtin> buildTable() {
  std::vector<Builtin> table;
  for (uint32_t i = 0; i <= getMaxEnumValForActivationKind(); ++i) {
    auto kind = static_cast<ActivationKind>(i);
    table.push_back(makeBuiltin(getActivationName(kind), "x", 1,
                                Family::Activation, Lowering::Direct,
                                NodeKind::Activation));
    table.back().activation = kind;
  }
  auto elementwise = [&](llvm::StringRef name, llvm::StringRef parameters,
                         unsigned arity, Lowering lowering, NodeKind kind) {
    table.push_back(makeBuiltin(name, parameters, arity, Family::Elementwise,
                                lowering, kind));
  };
  elementwise("tanh", "x", 1, Lowering::Direct, NodeKind::Tanh);
  elementwise("exp", "x", 1, Lowering::Direct, NodeKind::Exp);
  elementwise("log", "x", 1, Lowering::Direct, NodeKind::Log);
  elementwise("sqrt", "x", 1, Lowering::Direct, NodeKind::Sqrt);
  elementwise("rsqrt", "x", 1, Lowering::Direct, NodeKind::Rsqrt);
  elementwise("abs", "x", 1, Lowering::Direct, NodeKind::Abs);
  elementwise("sin", "x", 1, Lowering::Direct, NodeKind::Sin);
  elementwise("cos", "x", 1, Lowering::Direct, NodeKind::Cos);
  elementwise("min", "a, b", 2, Lowering::Direct, NodeKind::Minimum);
  elementwise("max", "a, b", 2, Lowering::Direct, NodeKind::Maximum);
  elementwise("clamp", "x, lo, hi", 3, Lowering::Clamp, NodeKind::Maximum);
  elementwise("pow", "x, c", 2, Lowering::Pow, NodeKind::Pow);
  elementwise("dropout", "x, p", 2, Lowering::Dropout, NodeKind::Dropout);
  elementwise("detach", "x", 1, Lowering::Direct, NodeKind::Detach);
  for (auto [name, type] : {std::pair("bf16", ElementType::BF16),
                            std::pair("f16", ElementType::F16)}) {
    elementwise(name, "x", 1, Lowering::Direct, NodeKind::Round);
    table.back().rounding = type;
  }
  // One `<prefix><kind>` per ReductionKind.
  auto reductions = [&](llvm::StringRef prefix, llvm::StringRef parameters,
                        unsigned arity, Lowering lowering, NodeKind nodeKind) {
    for (uint32_t i = 0; i <= getMaxEnumValForReductionKind(); ++i) {
      auto kind = static_cast<ReductionKind>(i);
      table.push_back(makeBuiltin(
          prefix.str() + stringifyReductionKind(kind).str(), parameters, arity,
          Family::Reduction, lowering, nodeKind));
      table.back().reduction = kind;
    }
  };
  reductions("row_", "x", 1, Lowering::Direct, NodeKind::RowReduce);
  // The only column reduction: a column's sum is what a bias gradient needs.
  table.push_back(makeBuiltin("col_sum", "x", 1, Family::Reduction,
                              Lowering::ColSum, NodeKind::ColReduce));
  table.back().reduction = ReductionKind::Sum;
  reductions("group_", "x, w", 2, Lowering::Group, NodeKind::GroupReduce);
  auto position = [&](llvm::StringRef name, llvm::StringRef parameters,
                      unsigned arity, Lowering lowering, NodeKind kind) {
    table.push_back(
        makeBuiltin(name, parameters, arity, Family::Position, lowering, kind));
  };
  position("partner", "x, d", 2, Lowering::Partner, NodeKind::Partner);
  position("row", "", 0, Lowering::Direct, NodeKind::Row);
  position("col", "", 0, Lowering::Direct, NodeKind::Column);
  return table;
}

llvm::ArrayRef<Builtin> mlir::coda::dsl::getBuiltins() {
  static const std::vector<Builtin> table = buildTable();
  return table;
}

const Builtin *mlir::coda::dsl::lookupBuiltin(llvm::StringRef name) {
  for (const Builtin &builtin : getBuiltins())
    if (builtin.name == name)
      return &builtin;
  return nullptr;
}

static llvm::StringRef spellFamily(Family family) {
  switch (family) {
  case Family::Activation:
    return "activation";
  case Family::Elementwise:
    return "elementwise";
  case Family::Reduction:
    return "reduction";
  case Family::Position:
    return "position";
  }
  llvm_unreachable("unknown builtin family");
}

void mlir::coda::dsl::printBuiltins(llvm::raw_ostream &os) {
  for (const Builtin &builtin : getBuiltins())
    os << builtin.name << '\t' << spellFamily(builtin.family) << '\t'
       << builtin.signature << '\n';
}
