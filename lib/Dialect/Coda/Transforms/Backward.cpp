//===- Backward.cpp - backward programs derived from a forward one --------===//
//
// Builds the programs Backward.h describes. The epilogue gradient clones the
// forward epilogue (its values are needed by the derivatives), seeds the
// adjoint of every `[m, n]` output (a row loss's `[m]` outputs: each row's
// total) with its gradient, and sweeps the ops in reverse through the table
// of Adjoints.cpp; what no output needs is erased.
//
//===----------------------------------------------------------------------===//

#include "coda/Dialect/Coda/Transforms/Backward.h"
#include "Adjoints.h"

#include "coda/Dialect/Coda/IR/CodaOps.h"
#include "coda/Dialect/Coda/IR/EpilogueDims.h"
#include "coda/Dialect/Coda/Utils/RowStatistics.h"
#include "coda/Program/ProgramSignature.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/StringSet.h"

using namespace mlir;
using namespace mlir::coda;

namespace {

constexpr unsigned kSpace = DimsAttr::kM | DimsAttr::kN;

/// An argument or result of a derived program: its type and `coda.name`
/// (none when empty: A, B and alpha are known by their role).
struct Slot {
  Type type;
  std::string name;
};

/// The forward program and the facts every derived program needs.
struct Forward {
  func::FuncOp func;
  GemmOp gemm;
  ProgramSignature signature;
  /// The forward's A and B, and their types.
  RankedTensorType aType, bType;
  /// The operand element type.
  Type elementType;
  /// M and N as static sizes (or dynamic).
  int64_t m, n;
  /// The derived program created last: the next goes after it.
  func::FuncOp last;

  /// A `[M, N]` tensor of `type`.
  RankedTensorType spaceType(Type type) const {
    return RankedTensorType::get({m, n}, type);
  }
  /// The name of epilogue input `input` (an operand of `gemm`).
  StringRef inputName(Value input) const {
    return signature.arguments[cast<BlockArgument>(input).getArgNumber()].name;
  }
};

/// One epilogue value of a derived program and the dims it spans.
struct Yielded {
  Value value;
  unsigned dims;
};

/// Fails, naming the clash, when two of a derived program's arguments (or
/// two of its results) would have the same name: a forward input named
/// `acc` gives a second `grad_acc`, an input `grad_y` beside an output `y`
/// a second `grad_y`.
LogicalResult checkUniqueNames(Forward &forward, StringRef program,
                               ArrayRef<Slot> slots, StringRef what) {
  llvm::StringSet<> seen;
  for (const Slot &slot : slots)
    if (!slot.name.empty() && !seen.insert(slot.name).second)
      return forward.func.emitError()
             << "cannot derive '@" << forward.func.getName() << "_" << program
             << "': two of its " << what << " would be named '" << slot.name
             << "'; rename the forward's input or output that it comes from "
                "(the derived names are grad_<input>, grad_<output>, "
             << BackwardNames::kGradAcc << ", " << BackwardNames::kSavedAcc
             << ", " << BackwardNames::kSavedRow << "<i>, "
             << BackwardNames::kSplitAcc << ", " << BackwardNames::kSplitRounded
             << " and " << BackwardNames::kSplitRow << "<i>)";
  return success();
}

/// Creates the function `name` after the last derived program whose body is
/// the coda.gemm `build` creates from the function's arguments, returned in
/// order.
func::FuncOp
createProgram(Forward &forward, StringRef name, ArrayRef<Slot> arguments,
              ArrayRef<Slot> results,
              function_ref<GemmOp(OpBuilder &, ValueRange)> build) {
  func::FuncOp after = forward.last;
  OpBuilder b(after->getContext());
  b.setInsertionPointAfter(after);
  SmallVector<Type> argTypes, resultTypes;
  for (const Slot &slot : arguments)
    argTypes.push_back(slot.type);
  for (const Slot &slot : results)
    resultTypes.push_back(slot.type);
  auto func = func::FuncOp::create(b, after.getLoc(), name,
                                   b.getFunctionType(argTypes, resultTypes));
  func->setAttr(BackwardNames::kDerivedFrom,
                FlatSymbolRefAttr::get(forward.func));
  for (auto [i, slot] : llvm::enumerate(arguments))
    if (!slot.name.empty())
      func.setArgAttr(i, "coda.name", b.getStringAttr(slot.name));
  for (auto [i, slot] : llvm::enumerate(results))
    func.setResultAttr(i, "coda.name", b.getStringAttr(slot.name));
  Block *entry = func.addEntryBlock();
  b.setInsertionPointToStart(entry);
  GemmOp gemm = build(b, entry->getArguments());
  func::ReturnOp::create(b, after.getLoc(), gemm.getResults());
  forward.last = func;
  return func;
}

/// Ends `gemm`'s epilogue with `values` and erases the ops no output needs.
void finishEpilogue(GemmOp gemm, ArrayRef<Value> values) {
  Block &block = gemm.getEpilogueBlock();
  OpBuilder b = OpBuilder::atBlockEnd(&block);
  YieldOp::create(b, gemm.getLoc(), values);
  SmallVector<Operation *> ops;
  for (Operation &op : block.without_terminator())
    ops.push_back(&op);
  for (Operation *op : llvm::reverse(ops))
    if (isOpTriviallyDead(op))
      op->erase();
}

/// The adjoint of one value: per element, and, for a value uniform along the
/// row, the row's total (the gradient of an `[m]` output: already summed over
/// the row, so that no row reduction adds it up again).
struct Adjoint {
  Value element;
  Value row;
};

/// A gradient to seed: the forward value, its gradient, and whether that is a
/// row's total (an `[m]` output's) rather than one per element.
struct Seed {
  Value value;
  Value gradient;
  bool row;
};

/// `g` at the row's first column, 0 elsewhere: a row's total as one
/// element's adjoint, for the reductions that share it among the row's
/// elements unevenly or by their count (a mean, a maximum).
Value atFirstColumn(OpBuilder &b, Location loc, Value g) {
  Value column = CoordOp::create(b, loc, g.getType(), OutputDim::N);
  Value zero = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(0.0));
  Value first =
      arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, column, zero);
  return arith::SelectOp::create(b, loc, first, g, zero);
}

/// Clones the forward epilogue into the block `b` builds in, with the
/// forward's accumulator and inputs mapped by `mapping`, and derives the
/// adjoints of the accumulator and of the inputs from `seeds`. The ops of
/// `saved` (a forward row reduction and the argument that holds its value,
/// saved by the forward) are cloned for their derivative only: the ops after
/// them read the saved value. Returns the adjoint of the accumulator, then of
/// each input (null for none).
FailureOr<SmallVector<Adjoint>>
buildEpilogueGradient(OpBuilder &b, GemmOp forward, IRMapping &mapping,
                      ArrayRef<Seed> seeds,
                      const DenseMap<Operation *, Value> &saved) {
  SmallVector<Operation *> cloned;
  // A cloned op whose value is read from a saved argument: its adjoint
  // accumulates on that argument, whose users read it.
  DenseMap<Operation *, Value> valueOf;
  for (Operation &op : forward.getEpilogueBlock().without_terminator()) {
    cloned.push_back(b.clone(op, mapping));
    if (Value value = saved.lookup(&op)) {
      mapping.map(op.getResult(0), value);
      valueOf[cloned.back()] = value;
    }
  }

  DenseMap<Value, Value> adjoints, rowAdjoints;
  auto accumulate = [&](DenseMap<Value, Value> &map, Value value,
                        Value contribution) {
    if (!contribution || !isa<FloatType>(value.getType()))
      return;
    Value &slot = map[value];
    slot = slot ? arith::AddFOp::create(b, value.getLoc(), slot, contribution)
                      .getResult()
                : contribution;
  };
  for (const Seed &seed : seeds)
    accumulate(seed.row ? rowAdjoints : adjoints, mapping.lookup(seed.value),
               seed.gradient);
  auto propagate = [&](DenseMap<Value, Value> &map, Operation *op,
                       Value adjoint) -> LogicalResult {
    FailureOr<SmallVector<Value>> contributions = buildAdjoint(b, op, adjoint);
    if (failed(contributions))
      return failure();
    for (auto [operand, contribution] :
         llvm::zip(op->getOperands(), *contributions))
      accumulate(map, operand, contribution);
    return success();
  };
  for (Operation *op : llvm::reverse(cloned)) {
    if (op->getNumResults() != 1 || op->getNumOperands() == 0)
      continue;
    Value value = valueOf.lookup(op);
    Value key = value ? value : op->getResult(0);
    Value adjoint = adjoints.lookup(key);
    // A row's total passes through the ops on row values as it is; a row
    // sum hands it to each element of the row.
    if (Value total = rowAdjoints.lookup(key)) {
      auto reduce = dyn_cast<RowReduceOp>(op);
      if (!reduce) {
        if (failed(propagate(rowAdjoints, op, total)))
          return failure();
      } else if (reduce.getKind() == ReductionKind::Sum) {
        accumulate(adjoints, reduce.getInput(), total);
      } else {
        Value first = atFirstColumn(b, op->getLoc(), total);
        adjoint = adjoint
                      ? arith::AddFOp::create(b, op->getLoc(), adjoint, first)
                            .getResult()
                      : first;
      }
    }
    if (adjoint && failed(propagate(adjoints, op, adjoint)))
      return failure();
  }

  auto adjointOf = [&](Value forwardValue) {
    Value value = mapping.lookup(forwardValue);
    return Adjoint{adjoints.lookup(value), rowAdjoints.lookup(value)};
  };
  SmallVector<Adjoint> result{adjointOf(forward.getAccumulator())};
  for (unsigned i = 0, e = forward.getInputs().size(); i < e; ++i)
    result.push_back(adjointOf(forward.getInputArg(i)));
  return result;
}

/// The value an input's gradient output takes from the input's adjoint at
/// each element: summed over the dims the input does not span, plus the
/// row's total (which only reaches inputs uniform along the row).
Value reduceToInput(OpBuilder &b, Location loc, Adjoint adjoint,
                    unsigned dims) {
  Value value = adjoint.element;
  if (value && !(dims & DimsAttr::kN))
    value = RowReduceOp::create(
        b, loc, value.getType(),
        ReductionKindAttr::get(b.getContext(), ReductionKind::Sum), value);
  if (value && !(dims & DimsAttr::kM))
    value = ColReduceOp::create(
        b, loc, value.getType(),
        ReductionKindAttr::get(b.getContext(), ReductionKind::Sum), value);
  if (adjoint.row)
    value = value
                ? arith::AddFOp::create(b, loc, value, adjoint.row).getResult()
                : adjoint.row;
  if (!value)
    return arith::ConstantOp::create(b, loc, b.getF32FloatAttr(0.0));
  return value;
}

FailureOr<Forward> analyze(func::FuncOp func,
                           StringRef refusal = "cannot be differentiated") {
  auto module = func->getParentOfType<ModuleOp>();
  FailureOr<ProgramSignature> signature =
      ProgramSignature::get(module, func.getName());
  if (failed(signature))
    return failure();
  GemmOp gemm = *func.getOps<GemmOp>().begin();
  auto notDifferentiable = [&](const Twine &why) {
    return gemm.emitOpError() << refusal << ": " << why;
  };
  if (gemm.isBatched())
    return notDifferentiable("batched GEMMs are not supported; fold the batch "
                             "into M");
  if (gemm.getC())
    return notDifferentiable("the C operand is not supported; add it in the "
                             "epilogue as an [m, n] input");
  if (gemm.getAccumulatorHalfN())
    return notDifferentiable("an accumulator [m, n/2] is itself a gradient's; "
                             "differentiate the forward program");
  for (Attribute dims : gemm.getResultDims())
    if (cast<DimsAttr>(dims).isHalves())
      return notDifferentiable("an output stored in halves ([m, n halves]) is "
                               "itself a gradient's; differentiate the "
                               "forward program");
  Forward forward{func, gemm, *signature};
  forward.aType = cast<RankedTensorType>(gemm.getA().getType());
  forward.bType = cast<RankedTensorType>(gemm.getB().getType());
  forward.elementType = gemm.getOperandElementType();
  forward.m = forward.aType.getDimSize(gemm.getTransposeA() ? 1 : 0);
  forward.n = forward.bType.getDimSize(gemm.getTransposeB() ? 0 : 1);
  forward.last = func;
  return forward;
}

/// Whether every output of the program spans `[m]` or `[n]`: a loss over
/// rows (a cross-entropy's log-sum-exp and picked logit), whose `[m]`
/// outputs take gradients. Beside an `[m, n]` output, `[m]` and `[n]`
/// outputs are the statistics and gradients a training step reads and take
/// none.
bool isRowLoss(const ProgramSignature &signature) {
  return llvm::none_of(signature.outputs, [](const ProgramOutput &output) {
    return (output.dims & ~DimsAttr::kHalfN) == kSpace;
  });
}

/// The outputs whose gradients the backward takes: the `[m, n]` and
/// `[m, n/2]` ones, or a row loss's `[m]` ones.
SmallVector<unsigned> differentiableOutputs(Forward &forward) {
  bool rowLoss = isRowLoss(forward.signature);
  SmallVector<unsigned> outputs;
  for (auto [i, output] : llvm::enumerate(forward.signature.outputs))
    if ((output.dims & ~DimsAttr::kHalfN) == kSpace ||
        (rowLoss && output.dims == DimsAttr::kM))
      outputs.push_back(i);
  return outputs;
}

/// The first output of `outputs` that spans `[m, n/2]`, or null.
const ProgramOutput *findHalfOutput(Forward &forward,
                                    ArrayRef<unsigned> outputs) {
  for (unsigned output : outputs)
    if (forward.signature.outputs[output].dims & DimsAttr::kHalfN)
      return &forward.signature.outputs[output];
  return nullptr;
}

/// The epilogue inputs of the forward: their slots and dims.
void appendInputs(Forward &forward, SmallVector<Slot> &slots,
                  SmallVector<DimsAttr> &dims) {
  for (auto [i, input] : llvm::enumerate(forward.gemm.getInputs())) {
    slots.push_back({input.getType(), forward.inputName(input).str()});
    dims.push_back(forward.gemm.getInputDimsAt(i));
  }
}

/// The outputs of an epilogue gradient: grad_acc, then one per tensor input.
void appendGradientResults(Forward &forward, SmallVector<Slot> &slots,
                           SmallVector<DimsAttr> &dims) {
  MLIRContext *context = forward.func.getContext();
  Type f32 = Float32Type::get(context);
  // Stored as op(B) is (b_halves: its pairs apart), which the operand
  // gradients then read with B (and write B's gradient) as stored.
  slots.push_back(
      {forward.spaceType(forward.elementType), BackwardNames::kGradAcc});
  dims.push_back(DimsAttr::get(
      context, kSpace | (forward.gemm.getBHalves() ? DimsAttr::kHalves : 0u)));
  for (auto [i, input] : llvm::enumerate(forward.gemm.getInputs())) {
    auto type = dyn_cast<RankedTensorType>(input.getType());
    // An input that spans n mod p takes no gradient (fillEpilogueGradient
    // refuses one that would need it).
    if (!type || forward.gemm.getInputDimsAt(i).isPeriodic())
      continue;
    unsigned mask = forward.gemm.getInputDimsAt(i).getMask();
    slots.push_back(
        {mask == kSpace ? type : RankedTensorType::get(type.getShape(), f32),
         ("grad_" + forward.inputName(input)).str()});
    dims.push_back(DimsAttr::get(context, mask));
  }
}

/// Builds the epilogue gradient in `gemm`, whose block holds the forward's
/// inputs first (from argument `firstInput`), then `saved acc` and the saved
/// row statistics or not, then the gradients of the outputs `seeds` names
/// (the `[m, n]` ones, or a row loss's `[m]` ones), in order. `saved`: the
/// forward's row reductions whose values the block holds.
LogicalResult fillEpilogueGradient(Forward &forward, GemmOp gemm,
                                   Value accumulator, unsigned firstInput,
                                   ArrayRef<std::pair<unsigned, Value>> seeds,
                                   const DenseMap<Operation *, Value> &saved) {
  Block &block = gemm.getEpilogueBlock();
  OpBuilder b = OpBuilder::atBlockEnd(&block);
  IRMapping mapping;
  mapping.map(forward.gemm.getAccumulator(), accumulator);
  unsigned numInputs = forward.gemm.getInputs().size();
  for (unsigned i = 0; i < numInputs; ++i)
    mapping.map(forward.gemm.getInputArg(i), block.getArgument(firstInput + i));
  SmallVector<Seed> seedValues;
  for (auto [output, gradient] : seeds)
    seedValues.push_back(
        {forward.gemm.getYield().getValues()[output], gradient,
         forward.signature.outputs[output].dims == DimsAttr::kM});
  FailureOr<SmallVector<Adjoint>> adjoints =
      buildEpilogueGradient(b, forward.gemm, mapping, seedValues, saved);
  if (failed(adjoints))
    return failure();
  SmallVector<Value> yielded{
      (*adjoints)[0].element
          ? (*adjoints)[0].element
          : arith::ConstantOp::create(b, gemm.getLoc(), b.getF32FloatAttr(0.0))
                .getResult()};
  for (auto [i, input] : llvm::enumerate(forward.gemm.getInputs())) {
    if (!isa<RankedTensorType>(input.getType()))
      continue;
    DimsAttr dims = forward.gemm.getInputDimsAt(i);
    const Adjoint &adjoint = (*adjoints)[i + 1];
    if (!dims.isPeriodic()) {
      yielded.push_back(
          reduceToInput(b, gemm.getLoc(), adjoint, dims.getMask()));
      continue;
    }
    if (adjoint.element || adjoint.row)
      return forward.gemm.emitError()
             << "cannot derive the gradient of epilogue input '"
             << forward.inputName(input) << "', which spans "
             << stringifyDims(dims)
             << " (its columns repeat along the row): detach it where it is "
                "read (detach(...)), or declare it spanning n";
  }
  finishEpilogue(gemm, yielded);
  return success();
}

std::string derivedName(Forward &forward, StringRef suffix) {
  return getDerivedName(forward.func, suffix);
}

/// The forward's row reductions whose values the outputs `outputs` depend
/// on, in block order: their epilogue gradient reads them.
SmallVector<Operation *> neededRowReductions(Forward &forward,
                                             ArrayRef<unsigned> outputs) {
  llvm::SmallPtrSet<Operation *, 16> reached;
  SmallVector<Operation *> worklist;
  auto visit = [&](Value value) {
    if (Operation *def = value.getDefiningOp())
      if (reached.insert(def).second)
        worklist.push_back(def);
  };
  for (unsigned output : outputs)
    visit(forward.gemm.getYield().getValues()[output]);
  while (!worklist.empty())
    for (Value operand : worklist.pop_back_val()->getOperands())
      visit(operand);
  SmallVector<Operation *> reductions;
  for (Operation &op : forward.gemm.getEpilogueBlock().without_terminator())
    if (isa<RowReduceOp>(op) && reached.contains(&op))
      reductions.push_back(&op);
  return reductions;
}

/// The `[m]` f32 slots `<prefix><i>` (`saved_row<i>`, or `split_row<i>` in a
/// row split) of the row reductions `reductions`.
SmallVector<Slot>
getSavedRowSlots(Forward &forward, ArrayRef<Operation *> reductions,
                 StringRef prefix = BackwardNames::kSavedRow) {
  SmallVector<Slot> slots;
  for (unsigned i = 0, e = reductions.size(); i < e; ++i)
    slots.push_back(
        {RankedTensorType::get({forward.m},
                               Float32Type::get(forward.func.getContext())),
         (prefix + Twine(i)).str()});
  return slots;
}

/// What a row split's statistics save of the `[m, n]` space: the rounded
/// value `rounded` when there is one (findSavedRounding), written as the
/// forward's output `roundedOutput` when that output writes it as it is;
/// else the accumulator in f32.
struct SplitSaved {
  RoundOp rounded;
  std::optional<unsigned> roundedOutput;
};

/// The slot of what a row split saves (`split`): `split_acc` (f32), or the
/// rounded value in its type, `split_rounded` or the output's name.
Slot getSplitSavedSlot(Forward &forward, SplitSaved split) {
  if (!split.rounded)
    return {forward.spaceType(Float32Type::get(forward.func.getContext())),
            BackwardNames::kSplitAcc};
  return {forward.spaceType(split.rounded.getTo()),
          split.roundedOutput
              ? forward.signature.outputs[*split.roundedOutput].name
              : std::string(BackwardNames::kSplitRounded)};
}

/// `@f_saving`: the forward, then its accumulator in the operand type
/// (`withAccumulator`) and the values of the row reductions `rowReductions`.
/// With `split`, `@f_row_statistics`: without the forward's outputs, what
/// the split saves (getSplitSavedSlot) and the row reductions, under the
/// names of a row split (`split_row<i>`: a derived program may take
/// `saved_*` inputs of its own).
FailureOr<func::FuncOp>
buildSavingProgram(Forward &forward, ArrayRef<Operation *> rowReductions,
                   bool withAccumulator,
                   std::optional<SplitSaved> split = std::nullopt) {
  StringRef suffix =
      split ? BackwardNames::kRowStatistics : BackwardNames::kSaving;
  GemmOp fwd = forward.gemm;
  MLIRContext *context = forward.func.getContext();
  SmallVector<Slot> args;
  for (auto [i, arg] : llvm::enumerate(forward.signature.arguments))
    args.push_back({arg.type, forward.func.getArgAttr(i, "coda.name")
                                  ? arg.name
                                  : std::string()});
  SmallVector<Slot> results;
  SmallVector<DimsAttr> resultDims;
  for (auto [i, output] : llvm::enumerate(forward.signature.outputs)) {
    if (split)
      break;
    results.push_back({output.type, output.name});
    resultDims.push_back(fwd.getResultDimsAt(i));
  }
  if (split || withAccumulator) {
    results.push_back(split ? getSplitSavedSlot(forward, *split)
                            : Slot{forward.spaceType(forward.elementType),
                                   BackwardNames::kSavedAcc});
    resultDims.push_back(DimsAttr::get(context, kSpace));
  }
  for (const Slot &slot : getSavedRowSlots(forward, rowReductions,
                                           split ? BackwardNames::kSplitRow
                                                 : BackwardNames::kSavedRow)) {
    results.push_back(slot);
    resultDims.push_back(DimsAttr::get(context, DimsAttr::kM));
  }
  // A row split's results and the forward's outputs are bound by name.
  SmallVector<Slot> named(results);
  for (auto [i, output] : llvm::enumerate(forward.signature.outputs))
    if (split && i != split->roundedOutput)
      named.push_back({output.type, output.name});
  if (failed(checkUniqueNames(forward, suffix, named, "results")))
    return failure();
  GemmOp savingGemm;
  func::FuncOp saving = createProgram(
      forward, derivedName(forward, suffix), args, results,
      [&](OpBuilder &b, ValueRange values) {
        IRMapping operands;
        operands.map(forward.func.getArguments(), values);
        SmallVector<Type> types;
        for (const Slot &slot : results)
          types.push_back(slot.type);
        SmallVector<DimsAttr> inputDims;
        for (unsigned i = 0, e = fwd.getInputs().size(); i < e; ++i)
          inputDims.push_back(fwd.getInputDimsAt(i));
        SmallVector<Value> inputs;
        for (Value input : fwd.getInputs())
          inputs.push_back(operands.lookup(input));
        auto lookup = [&](Value v) { return v ? operands.lookup(v) : v; };
        savingGemm = GemmOp::create(
            b, fwd.getLoc(), types, resultDims, lookup(fwd.getA()),
            lookup(fwd.getB()), fwd.getTransposeA(), fwd.getTransposeB(),
            Value(), lookup(fwd.getAlpha()), Value(), inputs, inputDims);
        savingGemm.setBHalves(fwd.getBHalves());
        return savingGemm;
      });
  Block &block = savingGemm.getEpilogueBlock();
  OpBuilder b = OpBuilder::atBlockEnd(&block);
  IRMapping mapping;
  mapping.map(fwd.getEpilogueBlock().getArguments(), block.getArguments());
  for (Operation &op : fwd.getEpilogueBlock().without_terminator())
    b.clone(op, mapping);
  SmallVector<Value> values;
  for (Value v : fwd.getYield().getValues())
    if (!split)
      values.push_back(mapping.lookup(v));
  if (split && split->rounded)
    values.push_back(mapping.lookup(split->rounded.getResult()));
  else if (split || withAccumulator)
    values.push_back(savingGemm.getAccumulator());
  for (Operation *reduction : rowReductions)
    values.push_back(mapping.lookup(reduction->getResult(0)));
  finishEpilogue(savingGemm, values);
  return saving;
}

/// Of the row reductions `reductions`, whose saved values are `gemm`'s
/// epilogue arguments from `first` on, those that its epilogue reads.
SmallVector<Operation *> getReadReductions(GemmOp gemm, unsigned first,
                                           ArrayRef<Operation *> reductions) {
  SmallVector<Operation *> read;
  for (auto [i, reduction] : llvm::enumerate(reductions))
    if (!gemm.getEpilogueBlock().getArgument(first + i).use_empty())
      read.push_back(reduction);
  return read;
}

/// `@f_backward`, on the forward GEMM recomputed; for a row loss whose
/// gradient reads the forward's row reductions, also `@f_saving`, the
/// forward that writes their values (`saved_row<i>`), which the backward
/// reads instead of reducing its rows again (of `reductions` when given,
/// else of those its outputs depend on, then of those the gradient turns out
/// to read). Returns the saving program (or null) and the backward.
/// `fromSaved`: `@f_backward_from_saved` instead, on the accumulator and row
/// reductions `@f_saving` saves (`saved_acc`, `saved_row<i>`: inputs, as
/// every output's gradient), so that it reads no accumulator of its own and
/// its kernel runs no product; no saving program is built.
FailureOr<std::pair<func::FuncOp, func::FuncOp>> buildRecomputeBackward(
    Forward &forward,
    std::optional<SmallVector<Operation *>> reductions = std::nullopt,
    bool fromSaved = false) {
  GemmOp fwd = forward.gemm;
  func::FuncOp previous = forward.last;
  MLIRContext *context = forward.func.getContext();
  StringRef name =
      fromSaved ? BackwardNames::kBackwardFromSaved : BackwardNames::kBackward;
  // Alpha is in the saved accumulator already.
  bool alpha = fwd.getAlpha() && !fromSaved;
  SmallVector<Slot> args{{forward.aType, ""}, {forward.bType, ""}};
  if (alpha)
    args.push_back({fwd.getAlpha().getType(), ""});
  unsigned firstInputArg = args.size();
  SmallVector<Slot> inputSlots;
  SmallVector<DimsAttr> inputDims;
  appendInputs(forward, inputSlots, inputDims);
  SmallVector<unsigned> outputs = differentiableOutputs(forward);
  if (const ProgramOutput *half = findHalfOutput(forward, outputs))
    return fwd.emitOpError()
           << "cannot be differentiated "
           << (fromSaved ? "from its saved accumulator"
                         : "with the GEMM recomputed")
           << ": output '" << half->name
           << "' spans [m, n/2] (the even columns), whose gradient arrives "
              "N / 2 wide; derive with a saved accumulator "
              "(accumulator=saved), whose backward runs on the next layer's "
              "dgrad GEMM with an accumulator [m, n/2]";
  if (fromSaved && isRowLoss(forward.signature))
    return fwd.emitOpError()
           << "cannot be differentiated from its saved accumulator: a loss "
              "over rows (only [m] and [n] outputs) recomputes its GEMM "
              "(backward)";
  SmallVector<Operation *> rowReductions;
  if (reductions)
    rowReductions = *reductions;
  else if (fromSaved || isRowLoss(forward.signature))
    rowReductions = neededRowReductions(forward, outputs);
  if (fromSaved) {
    inputSlots.push_back(
        {forward.spaceType(forward.elementType), BackwardNames::kSavedAcc});
    inputDims.push_back(DimsAttr::get(context, kSpace));
  }
  for (const Slot &slot : getSavedRowSlots(forward, rowReductions)) {
    inputSlots.push_back(slot);
    inputDims.push_back(DimsAttr::get(context, DimsAttr::kM));
  }
  for (unsigned output : outputs) {
    const ProgramOutput &info = forward.signature.outputs[output];
    inputSlots.push_back({info.type, "grad_" + info.name});
    inputDims.push_back(DimsAttr::get(context, info.dims));
  }
  args.append(inputSlots);
  SmallVector<Slot> results;
  SmallVector<DimsAttr> resultDims;
  appendGradientResults(forward, results, resultDims);

  if (failed(checkUniqueNames(forward, name, args, "arguments")) ||
      failed(checkUniqueNames(forward, name, results, "results")))
    return failure();
  func::FuncOp saving;
  if (!fromSaved && !rowReductions.empty()) {
    FailureOr<func::FuncOp> built =
        buildSavingProgram(forward, rowReductions, /*withAccumulator=*/false);
    if (failed(built))
      return failure();
    saving = *built;
  }
  GemmOp gemm;
  func::FuncOp func =
      createProgram(forward, derivedName(forward, name), args, results,
                    [&](OpBuilder &b, ValueRange values) {
                      SmallVector<Type> types;
                      for (const Slot &slot : results)
                        types.push_back(slot.type);
                      gemm = GemmOp::create(
                          b, fwd.getLoc(), types, resultDims, values[0],
                          values[1], fwd.getTransposeA(), fwd.getTransposeB(),
                          Value(), alpha ? values[2] : Value(), Value(),
                          values.drop_front(firstInputArg), inputDims);
                      gemm.setBHalves(fwd.getBHalves());
                      return gemm;
                    });
  Block &block = gemm.getEpilogueBlock();
  unsigned firstSaved = 1 + fwd.getInputs().size();
  Value accumulator = gemm.getAccumulator();
  if (fromSaved)
    accumulator = block.getArgument(firstSaved++);
  DenseMap<Operation *, Value> saved;
  for (auto [i, reduction] : llvm::enumerate(rowReductions))
    saved[reduction] = block.getArgument(firstSaved + i);
  unsigned firstGrad = firstSaved + rowReductions.size();
  SmallVector<std::pair<unsigned, Value>> seeds;
  for (auto [i, output] : llvm::enumerate(outputs))
    seeds.push_back({output, block.getArgument(firstGrad + i)});
  if (failed(
          fillEpilogueGradient(forward, gemm, accumulator, 1, seeds, saved))) {
    func.erase();
    if (saving)
      saving.erase();
    return failure();
  }
  // Saved only what the gradient reads (a sum's value, say, it does not);
  // from the saving program, what it saves.
  SmallVector<Operation *> read =
      getReadReductions(gemm, firstSaved, rowReductions);
  if (fromSaved || read.size() == rowReductions.size())
    return std::make_pair(saving, func);
  func.erase();
  if (saving)
    saving.erase();
  forward.last = previous;
  return buildRecomputeBackward(forward, read);
}

FailureOr<std::pair<func::FuncOp, func::FuncOp>>
buildSavedBackward(Forward &forward, NextWeightLayout next) {
  GemmOp fwd = forward.gemm;
  MLIRContext *context = forward.func.getContext();
  SmallVector<unsigned> outputs = differentiableOutputs(forward);
  if (isRowLoss(forward.signature))
    return fwd.emitOpError()
           << "cannot be differentiated with a saved accumulator: it has no "
              "[m, n] output whose gradient a GEMM could produce; a loss over "
              "rows (only [m] and [n] outputs) recomputes its GEMM "
              "(accumulator=recompute)";
  // The gradient of an [m, n/2] output is the GEMM's, N / 2 wide, at the
  // even columns of an accumulator [m, n/2]; that of every other output an
  // [m, n] input.
  auto half = llvm::find_if(outputs, [&](unsigned output) {
    return forward.signature.outputs[output].dims & DimsAttr::kHalfN;
  });
  bool halfN = half != outputs.end();
  if (halfN) {
    // Its GEMM's accumulator spans [m, n/2]: the columns of an input that
    // spans n mod p would not be the output's.
    for (auto [i, input] : llvm::enumerate(fwd.getInputs()))
      if (fwd.getInputDimsAt(i).isPeriodic())
        return fwd.emitOpError()
               << "cannot be differentiated with a saved accumulator: output '"
               << forward.signature.outputs[*half].name
               << "' spans [m, n/2], whose gradient's GEMM has an accumulator "
                  "[m, n/2], and epilogue input '"
               << forward.inputName(input) << "' spans "
               << stringifyDims(fwd.getInputDimsAt(i))
               << ", which such a GEMM does not take; declare it spanning n";
    std::rotate(outputs.begin(), half, half + 1);
    if (const ProgramOutput *second =
            findHalfOutput(forward, ArrayRef(outputs).drop_front()))
      return fwd.emitOpError()
             << "cannot be differentiated: outputs '"
             << forward.signature.outputs[outputs.front()].name << "' and '"
             << second->name
             << "' both span [m, n/2]; the backward's GEMM gives the gradient "
                "of one of them";
  }

  SmallVector<Operation *> rowReductions =
      neededRowReductions(forward, outputs);
  FailureOr<func::FuncOp> saving =
      buildSavingProgram(forward, rowReductions, /*withAccumulator=*/true);
  if (failed(saving))
    return failure();
  SmallVector<Slot> savedRows = getSavedRowSlots(forward, rowReductions);

  // @f_backward_saved: on the accumulator of A [M, K] * B [K, N] (B stored
  // [N, K] for @f_backward_saved_nk), the gradient of the first [m, n]
  // output.
  bool nk = next == NextWeightLayout::NK;
  StringRef name =
      nk ? BackwardNames::kBackwardSavedNK : BackwardNames::kBackwardSaved;
  int64_t dynamic = ShapedType::kDynamic;
  int64_t n = forward.n;
  if (halfN && !ShapedType::isDynamic(n))
    n /= 2;
  SmallVector<int64_t> bShape{dynamic, n};
  if (nk)
    std::swap(bShape[0], bShape[1]);
  SmallVector<Slot> bwdArgs{
      {RankedTensorType::get({forward.m, dynamic}, forward.elementType), ""},
      {RankedTensorType::get(bShape, forward.elementType), ""}};
  SmallVector<Slot> inputSlots;
  SmallVector<DimsAttr> inputDims;
  appendInputs(forward, inputSlots, inputDims);
  inputSlots.push_back(
      {forward.spaceType(forward.elementType), BackwardNames::kSavedAcc});
  inputDims.push_back(DimsAttr::get(context, kSpace));
  for (const Slot &slot : savedRows) {
    inputSlots.push_back(slot);
    inputDims.push_back(DimsAttr::get(context, DimsAttr::kM));
  }
  for (unsigned output : ArrayRef(outputs).drop_front()) {
    const ProgramOutput &info = forward.signature.outputs[output];
    inputSlots.push_back({info.type, "grad_" + info.name});
    inputDims.push_back(DimsAttr::get(context, kSpace));
  }
  bwdArgs.append(inputSlots);
  SmallVector<Slot> bwdResults;
  SmallVector<DimsAttr> bwdResultDims;
  appendGradientResults(forward, bwdResults, bwdResultDims);
  if (failed(checkUniqueNames(forward, name, bwdArgs, "arguments")) ||
      failed(checkUniqueNames(forward, name, bwdResults, "results"))) {
    saving->erase();
    return failure();
  }
  GemmOp gemm;
  func::FuncOp backward = createProgram(
      forward, derivedName(forward, name), bwdArgs, bwdResults,
      [&](OpBuilder &b, ValueRange values) {
        SmallVector<Type> types;
        for (const Slot &slot : bwdResults)
          types.push_back(slot.type);
        gemm = GemmOp::create(b, fwd.getLoc(), types, bwdResultDims, values[0],
                              values[1], false, nk, Value(), Value(), Value(),
                              values.drop_front(2), inputDims);
        gemm.setAccumulatorHalfN(halfN);
        return gemm;
      });
  Block &block = gemm.getEpilogueBlock();
  unsigned numInputs = fwd.getInputs().size();
  Value savedAcc = block.getArgument(1 + numInputs);
  DenseMap<Operation *, Value> saved;
  for (auto [i, reduction] : llvm::enumerate(rowReductions))
    saved[reduction] = block.getArgument(2 + numInputs + i);
  unsigned firstGrad = 2 + numInputs + rowReductions.size();
  // The gradient of an output arrives in the output's type, as the other
  // outputs' (grad_<output> inputs) and PyTorch's: the accumulator rounded
  // to a 16-bit output's type.
  Value gradOutput = gemm.getAccumulator();
  Type outputType =
      forward.signature.outputs[outputs.front()].type.getElementType();
  if (isa<BFloat16Type, Float16Type>(outputType)) {
    OpBuilder b = OpBuilder::atBlockBegin(&block);
    gradOutput = RoundOp::create(b, fwd.getLoc(), gradOutput.getType(),
                                 gradOutput, TypeAttr::get(outputType));
  }
  SmallVector<std::pair<unsigned, Value>> seeds{{outputs.front(), gradOutput}};
  for (auto [i, output] : llvm::enumerate(ArrayRef(outputs).drop_front()))
    seeds.push_back({output, block.getArgument(firstGrad + i)});
  if (failed(fillEpilogueGradient(forward, gemm, savedAcc, 1, seeds, saved))) {
    backward.erase();
    saving->erase();
    return failure();
  }
  return std::make_pair(*saving, backward);
}

/// An operand of a GEMM: a tensor and whether the GEMM reads its transpose.
struct View {
  Value value;
  bool transposed;
};

/// The program `name` computing alpha * op(X) op(Y), its arguments `grad_acc`
/// and the forward operand `other` (in the order the GEMM reads them).
func::FuncOp buildOperandGradient(Forward &forward, StringRef name,
                                  bool gradAccFirst, bool transposeFirst,
                                  bool transposeSecond, RankedTensorType other,
                                  StringRef otherName, RankedTensorType result,
                                  StringRef resultName) {
  GemmOp fwd = forward.gemm;
  MLIRContext *context = forward.func.getContext();
  Slot gradAcc{forward.spaceType(forward.elementType), BackwardNames::kGradAcc};
  Slot otherSlot{other, otherName.str()};
  SmallVector<Slot> args{gradAccFirst ? gradAcc : otherSlot,
                         gradAccFirst ? otherSlot : gradAcc};
  if (fwd.getAlpha())
    args.push_back({fwd.getAlpha().getType(), ""});
  SmallVector<Slot> results{{result, resultName.str()}};
  return createProgram(
      forward, derivedName(forward, name), args, results,
      [&](OpBuilder &b, ValueRange values) {
        auto gemm = GemmOp::create(
            b, fwd.getLoc(), TypeRange{result},
            {DimsAttr::get(context, kSpace)}, values[0], values[1],
            transposeFirst, transposeSecond, Value(),
            fwd.getAlpha() ? values[2] : Value(), Value(), ValueRange(), {});
        OpBuilder body = OpBuilder::atBlockEnd(&gemm.getEpilogueBlock());
        YieldOp::create(body, fwd.getLoc(), ValueRange{gemm.getAccumulator()});
        return gemm;
      });
}

/// Fails, saying so, when the module already holds `@f_<suffix>`.
LogicalResult checkNotDerived(func::FuncOp func, StringRef suffix) {
  std::string name = getDerivedName(func, suffix);
  if (SymbolTable::lookupNearestSymbolFrom(
          func, StringAttr::get(func.getContext(), name)))
    return func.emitError()
           << "cannot derive '@" << name << "' from '@" << func.getName()
           << "': the module already has a symbol of that name (derive "
              "each program once)";
  return success();
}

/// Checks that `func` is a forward program whose derived programs `suffixes`
/// are not in its module yet, and analyzes it.
FailureOr<Forward> prepare(func::FuncOp func, ArrayRef<StringRef> suffixes) {
  if (func->hasAttr(BackwardNames::kDerivedFrom))
    return func.emitError()
           << "'@" << func.getName()
           << "' is itself a derived program: derive from its forward "
           << func->getAttr(BackwardNames::kDerivedFrom);
  for (StringRef suffix : suffixes)
    if (failed(checkNotDerived(func, suffix)))
      return failure();
  return analyze(func);
}

/// Builds `@f_grad_a` and `@f_grad_b`, which need nothing of the epilogue.
void buildOperandGradients(Forward &forward, BackwardPrograms &programs) {
  // op(A) = tA ? A^T : A, op(B) = tB ? B^T : B, acc = op(A) op(B):
  //   grad op(A) = grad_acc op(B)^T and grad op(B) = op(A)^T grad_acc,
  // computed in the layout A and B are stored in (the transpose of a
  // product is the product of the transposes, reversed).
  bool tA = forward.gemm.getTransposeA(), tB = forward.gemm.getTransposeB();
  programs.gradA = buildOperandGradient(
      forward, BackwardNames::kGradA, /*gradAccFirst=*/!tA,
      /*transposeFirst=*/tA ? tB : false, /*transposeSecond=*/tA ? true : !tB,
      forward.bType, "b", forward.aType, BackwardNames::kGradA);
  // Both in their operand's type (a parameter's gradient in the parameter's
  // dtype, as PyTorch's autograd gives it), rounded once from the f32
  // accumulator.
  programs.gradB = buildOperandGradient(
      forward, BackwardNames::kGradB, /*gradAccFirst=*/tB,
      /*transposeFirst=*/tB ? true : !tA, /*transposeSecond=*/tB ? tA : false,
      forward.aType, "a", forward.bType, BackwardNames::kGradB);
}

/// The ops of `gemm`'s epilogue that its outputs need, in order, when the
/// values `given` are given rather than computed.
SmallVector<Operation *> getNeededOps(GemmOp gemm,
                                      const llvm::DenseSet<Value> &given) {
  llvm::DenseSet<Value> needed(gemm.getYield().getValues().begin(),
                               gemm.getYield().getValues().end());
  SmallVector<Operation *> ops;
  for (Operation &op :
       llvm::reverse(gemm.getEpilogueBlock().without_terminator())) {
    if (llvm::none_of(op.getResults(), [&](Value result) {
          return needed.contains(result) && !given.contains(result);
        }))
      continue;
    ops.push_back(&op);
    needed.insert(op.operand_begin(), op.operand_end());
  }
  std::reverse(ops.begin(), ops.end());
  return ops;
}

/// The values a row split's application is given rather than computes: every
/// row reduction's, and the rounded value `rounded` when it is saved.
llvm::DenseSet<Value> getSplitGiven(GemmOp gemm, RoundOp rounded) {
  llvm::DenseSet<Value> given;
  for (auto reduction : gemm.getEpilogueBlock().getOps<RowReduceOp>())
    given.insert(reduction.getResult());
  if (rounded)
    given.insert(rounded.getResult());
  return given;
}

/// The rounded value of `gemm`'s epilogue that a row split saves instead of
/// the accumulator: the first coda.round that depends on no row reduction
/// and from which, with the row reductions given, the outputs need nothing
/// else of the accumulator; else null.
RoundOp findSavedRounding(GemmOp gemm) {
  llvm::DenseSet<Value> afterReduction;
  for (Operation &op : gemm.getEpilogueBlock().without_terminator())
    if (isa<RowReduceOp>(op) ||
        llvm::any_of(op.getOperands(), [&](Value operand) {
          return afterReduction.contains(operand);
        }))
      afterReduction.insert(op.getResult(0));
  for (auto round : gemm.getEpilogueBlock().getOps<RoundOp>()) {
    if (afterReduction.contains(round.getResult()))
      continue;
    Value acc = gemm.getAccumulator();
    bool readsAcc = llvm::is_contained(gemm.getYield().getValues(), acc);
    for (Operation *op : getNeededOps(gemm, getSplitGiven(gemm, round)))
      readsAcc |= llvm::is_contained(op->getOperands(), acc);
    if (!readsAcc)
      return round;
  }
  return {};
}

/// `@f_row_apply`: the forward's epilogue on its saved accumulator (or the
/// rounded value `rounded`) and row reductions (`split_acc` or
/// `split_rounded`, `split_row<i>`: `@f_row_statistics`'s outputs), writing
/// the forward's outputs but `roundedOutput`, which the statistics wrote
/// (and which the application reads by that output's name). It reads no
/// accumulator of its own: its kernel runs no product.
FailureOr<func::FuncOp>
buildRowApply(Forward &forward, ArrayRef<Operation *> rowReductions,
              const DenseMap<Operation *, unsigned> &savedIndex,
              SplitSaved split) {
  GemmOp fwd = forward.gemm;
  MLIRContext *context = forward.func.getContext();
  RoundOp rounded = split.rounded;
  std::optional<unsigned> roundedOutput = split.roundedOutput;
  SmallVector<Slot> args{{forward.aType, ""}, {forward.bType, ""}};
  SmallVector<DimsAttr> inputDims;
  appendInputs(forward, args, inputDims);
  args.push_back(getSplitSavedSlot(forward, split));
  inputDims.push_back(DimsAttr::get(context, kSpace));
  for (const Slot &slot :
       getSavedRowSlots(forward, rowReductions, BackwardNames::kSplitRow)) {
    args.push_back(slot);
    inputDims.push_back(DimsAttr::get(context, DimsAttr::kM));
  }
  SmallVector<Slot> results;
  SmallVector<DimsAttr> resultDims;
  for (auto [i, output] : llvm::enumerate(forward.signature.outputs)) {
    if (i == roundedOutput)
      continue;
    results.push_back({output.type, output.name});
    resultDims.push_back(fwd.getResultDimsAt(i));
  }
  if (failed(checkUniqueNames(forward, BackwardNames::kRowApply, args,
                              "arguments")))
    return failure();
  GemmOp gemm;
  func::FuncOp apply = createProgram(
      forward, derivedName(forward, BackwardNames::kRowApply), args, results,
      [&](OpBuilder &b, ValueRange values) {
        SmallVector<Type> types;
        for (const Slot &slot : results)
          types.push_back(slot.type);
        gemm = GemmOp::create(b, fwd.getLoc(), types, resultDims, values[0],
                              values[1], fwd.getTransposeA(),
                              fwd.getTransposeB(), Value(), Value(), Value(),
                              values.drop_front(2), inputDims);
        gemm.setBHalves(fwd.getBHalves());
        return gemm;
      });
  // Block arguments: the unread accumulator, the forward's inputs, the saved
  // accumulator (or rounded value), the saved row reductions.
  Block &block = gemm.getEpilogueBlock();
  unsigned numInputs = fwd.getInputs().size();
  IRMapping mapping;
  mapping.map(rounded ? Value(rounded.getResult())
                      : Value(fwd.getAccumulator()),
              block.getArgument(1 + numInputs));
  for (unsigned i = 0; i < numInputs; ++i)
    mapping.map(fwd.getEpilogueBlock().getArgument(1 + i),
                block.getArgument(1 + i));
  for (auto [reduction, i] : savedIndex)
    mapping.map(reduction->getResult(0), block.getArgument(2 + numInputs + i));
  OpBuilder b = OpBuilder::atBlockEnd(&block);
  for (Operation *op : getNeededOps(fwd, getSplitGiven(fwd, rounded)))
    b.clone(*op, mapping);
  SmallVector<Value> values;
  for (auto [i, v] : llvm::enumerate(fwd.getYield().getValues()))
    if (i != roundedOutput)
      values.push_back(mapping.lookup(v));
  finishEpilogue(gemm, values);
  return apply;
}

/// The output of `forward` that writes the rounded value `rounded` as it is
/// (in its type, over [m, n]), which the row statistics then write in its
/// place; nullopt when none does.
std::optional<unsigned> findRoundedOutput(Forward &forward, RoundOp rounded) {
  GemmOp fwd = forward.gemm;
  for (auto [i, v] : llvm::enumerate(fwd.getYield().getValues()))
    if (v == rounded.getResult() &&
        forward.signature.outputs[i].type.getElementType() == rounded.getTo() &&
        fwd.getResultDimsAt(i).getMask() == kSpace)
      return i;
  return std::nullopt;
}

} // namespace

FailureOr<RowSplitPrograms> mlir::coda::deriveRowSplit(func::FuncOp forward) {
  FailureOr<Forward> analyzed =
      analyze(forward, "cannot be split into its row statistics and their "
                       "application");
  if (failed(analyzed))
    return failure();
  GemmOp gemm = analyzed->gemm;
  auto refuse = [&](const Twine &why) {
    return gemm.emitOpError()
           << "cannot be split into its row statistics and their application: "
           << why;
  };
  separateRowReductions(gemm);
  // Each row reduction is saved once: one that repeats an earlier one (the
  // same kind over the same value, as a softmax's sum and a log-sum-exp's)
  // reads the earlier one's.
  SmallVector<Operation *> reductions;
  DenseMap<Operation *, unsigned> savedIndex;
  for (auto op : gemm.getEpilogueBlock().getOps<RowReduceOp>()) {
    auto same = llvm::find_if(reductions, [&](Operation *earlier) {
      auto other = cast<RowReduceOp>(earlier);
      return other.getKind() == op.getKind() &&
             other.getInput() == op.getInput();
    });
    savedIndex[op] = same - reductions.begin();
    if (same == reductions.end())
      reductions.push_back(op);
  }
  if (reductions.empty())
    return refuse("its epilogue reduces no row");
  if (RowStatistics::get(gemm, EpilogueDims(gemm)))
    return refuse("its row reductions are row statistics already, merged "
                  "after the GEMM at any width");
  SplitSaved split{findSavedRounding(gemm), std::nullopt};
  if (split.rounded)
    split.roundedOutput = findRoundedOutput(*analyzed, split.rounded);
  FailureOr<func::FuncOp> statistics = buildSavingProgram(
      *analyzed, reductions, /*withAccumulator=*/true, split);
  if (failed(statistics))
    return failure();
  GemmOp statisticsGemm = *statistics->getOps<GemmOp>().begin();
  if (!RowStatistics::get(statisticsGemm, EpilogueDims(statisticsGemm))) {
    statistics->erase();
    return refuse("a row reduction reads another in a way no merge of "
                  "per-tile results computes (only a variance centered on a "
                  "mean and a sum of exponentials shifted by a maximum are)");
  }
  FailureOr<func::FuncOp> apply =
      buildRowApply(*analyzed, reductions, savedIndex, split);
  if (failed(apply)) {
    statistics->erase();
    return failure();
  }
  return RowSplitPrograms{*statistics, *apply};
}

std::string mlir::coda::getDerivedName(func::FuncOp forward, StringRef suffix) {
  return (forward.getName() + "_" + suffix).str();
}

FailureOr<BackwardPrograms> mlir::coda::deriveBackward(func::FuncOp func,
                                                       AccumulatorSource source,
                                                       NextWeightLayout next) {
  SmallVector<StringRef> suffixes{BackwardNames::kGradA, BackwardNames::kGradB};
  if (source == AccumulatorSource::Recompute)
    suffixes.push_back(BackwardNames::kBackward);
  else
    suffixes.append({BackwardNames::kSaving,
                     next == NextWeightLayout::NK
                         ? BackwardNames::kBackwardSavedNK
                         : BackwardNames::kBackwardSaved,
                     BackwardNames::kBackwardFromSaved});
  FailureOr<Forward> analyzed = prepare(func, suffixes);
  if (failed(analyzed))
    return failure();
  Forward &forward = *analyzed;
  // A row loss's recomputed backward may come with a saving program.
  if (source == AccumulatorSource::Recompute && isRowLoss(forward.signature) &&
      failed(checkNotDerived(func, BackwardNames::kSaving)))
    return failure();
  BackwardPrograms programs;
  if (source == AccumulatorSource::Recompute) {
    auto recomputed = buildRecomputeBackward(forward);
    if (failed(recomputed))
      return failure();
    std::tie(programs.saving, programs.backward) = *recomputed;
  } else {
    auto saved = buildSavedBackward(forward, next);
    if (failed(saved))
      return failure();
    std::tie(programs.saving, programs.backward) = *saved;
    // Its epilogue gradient on the saved accumulator alone, where every
    // output's gradient is an input (none spans [m, n/2]).
    if (!findHalfOutput(forward, differentiableOutputs(forward))) {
      auto fromSaved = buildRecomputeBackward(forward, std::nullopt,
                                              /*fromSaved=*/true);
      if (failed(fromSaved))
        return failure();
      programs.fromSaved = fromSaved->second;
    }
  }
  buildOperandGradients(forward, programs);
  return programs;
}

FailureOr<std::string> mlir::coda::deriveProgram(ModuleOp module,
                                                 StringRef function,
                                                 StringRef derived) {
  FailureOr<ProgramSignature> signature =
      ProgramSignature::get(module, function);
  if (failed(signature))
    return failure();
  auto forward = module.lookupSymbol<func::FuncOp>(signature->functionName);
  if (derived == BackwardNames::kInference)
    return deriveInference(forward).getName().str();
  if (derived == BackwardNames::kRowStatistics ||
      derived == BackwardNames::kRowApply) {
    FailureOr<RowSplitPrograms> split = deriveRowSplit(forward);
    if (failed(split))
      return failure();
    (derived == BackwardNames::kRowApply ? split->statistics : split->apply)
        .erase();
    return getDerivedName(forward, derived);
  }
  bool nk = derived == BackwardNames::kBackwardSavedNK;
  bool fromSaved = derived == BackwardNames::kBackwardFromSaved;
  bool saved = derived == BackwardNames::kSaving ||
               derived == BackwardNames::kBackwardSaved || nk;
  if (!saved && !fromSaved && derived != BackwardNames::kBackward &&
      derived != BackwardNames::kGradA && derived != BackwardNames::kGradB)
    return forward.emitError() << "unknown derived program '" << derived
                               << "'; expected backward, saving, "
                                  "backward_saved, backward_saved_nk, "
                                  "backward_from_saved, grad_a, grad_b, "
                                  "inference, row_statistics or row_apply";
  if (fromSaved) {
    FailureOr<Forward> analyzed = prepare(forward, {derived});
    if (failed(analyzed))
      return failure();
    auto built = buildRecomputeBackward(*analyzed, std::nullopt,
                                        /*fromSaved=*/true);
    if (failed(built))
      return failure();
    return built->second.getName().str();
  }
  // A row loss's saving program is its recomputed backward's.
  if (derived == BackwardNames::kSaving && isRowLoss(*signature))
    saved = false;
  std::string chosen = getDerivedName(forward, derived);
  // The operand gradients need nothing of the epilogue (which the epilogue
  // gradient may not support).
  if (derived == BackwardNames::kGradA || derived == BackwardNames::kGradB) {
    FailureOr<Forward> analyzed = prepare(forward, {derived});
    if (failed(analyzed))
      return failure();
    BackwardPrograms programs;
    buildOperandGradients(*analyzed, programs);
    (derived == BackwardNames::kGradA ? programs.gradB : programs.gradA)
        .erase();
    return chosen;
  }
  FailureOr<BackwardPrograms> programs = deriveBackward(
      forward, saved ? AccumulatorSource::Saved : AccumulatorSource::Recompute,
      nk ? NextWeightLayout::NK : NextWeightLayout::KN);
  if (failed(programs))
    return failure();
  for (func::FuncOp func :
       {programs->saving, programs->backward, programs->fromSaved,
        programs->gradA, programs->gradB})
    if (func && func.getName() != chosen)
      func.erase();
  if (derived == BackwardNames::kSaving && !programs->saving)
    return forward.emitError()
           << "'@" << forward.getName()
           << "' has no saving program: its backward recomputes the GEMM and "
              "reads no row statistics of the forward; run the forward itself";
  return chosen;
}
