//===- Contraction.cpp - match linalg contractions as coda.gemm operands --===//
//
// A contraction is raised when it is exactly what coda.gemm computes: one M,
// one N, one K and at most one batch loop, A and B of one element type whose
// products are summed in f32, batch first in every operand and the output in
// [b, m, n] order. Transposes and broadcasts that feed A or B are looked
// through and become transpose_a/transpose_b or a batch-shared operand.
//
//===----------------------------------------------------------------------===//

#include "Raising.h"

#include "mlir/Dialect/Tensor/IR/Tensor.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/AffineExpr.h"

using namespace mlir;
using namespace mlir::coda;
using namespace mlir::coda::raising;

/// The value `op` yields for each element, if it computes each element of
/// its one result from the element of its one input (and nothing else): all
/// loops parallel, a permutation as the init's map.
static Value getElementwiseYield(linalg::LinalgOp op) {
  if (!op.hasPureTensorSemantics() || op.getNumDpsInputs() != 1 ||
      op.getNumDpsInits() != 1 || !op.isAllParallelLoops() ||
      op.hasIndexSemantics() || op->getNumResults() != 1 ||
      !op.getMatchingIndexingMap(op.getDpsInitOperand(0)).isPermutation())
    return {};
  return op.getBlock()->getTerminator()->getOperand(0);
}

bool raising::isDataMovement(linalg::LinalgOp op) {
  Value yielded = getElementwiseYield(op);
  return yielded && yielded == op.getBlock()->getArgument(0);
}

bool raising::isExactWidening(linalg::LinalgOp op) {
  Value yielded = getElementwiseYield(op);
  auto ext = yielded ? yielded.getDefiningOp<arith::ExtFOp>() : nullptr;
  return ext && ext->getBlock() == op.getBlock() &&
         &op.getBlock()->front() == ext.getOperation() &&
         ext.getIn() == op.getBlock()->getArgument(0) &&
         ext.getType().isF32() &&
         (ext.getIn().getType().isBF16() || ext.getIn().getType().isF16());
}

ResolvedOperand raising::readThrough(linalg::LinalgOp producer, AffineMap map) {
  // The producer writes init[outMap(i)] = f(input[inMap(i)]); reading its
  // result at `map` reads the input at inMap(outMap^-1(map)).
  OpOperand *input = producer.getDpsInputOperand(0);
  AffineMap outMap =
      producer.getMatchingIndexingMap(producer.getDpsInitOperand(0));
  return {input->get(), producer.getMatchingIndexingMap(input)
                            .compose(inversePermutation(outMap))
                            .compose(map)};
}

/// The dims of each group of `reassociation` other than static 1s, when each
/// group has at most one: a reshape that only adds or drops unit dims.
static std::optional<SmallVector<std::optional<int64_t>>>
getUnitReshapeGroups(ArrayRef<ReassociationIndices> reassociation,
                     RankedTensorType expanded) {
  SmallVector<std::optional<int64_t>> kept;
  for (const ReassociationIndices &group : reassociation) {
    std::optional<int64_t> dim;
    for (int64_t d : group) {
      if (expanded.getDimSize(d) == 1)
        continue;
      if (dim)
        return std::nullopt;
      dim = d;
    }
    kept.push_back(dim);
  }
  return kept;
}

std::optional<ResolvedOperand> raising::readThroughUnitReshape(Operation *op,
                                                               AffineMap map) {
  MLIRContext *context = map.getContext();
  AffineExpr zero = getAffineConstantExpr(0, context);
  if (auto collapse = dyn_cast<tensor::CollapseShapeOp>(op)) {
    // Source dim d of group g is read at the result's expr for g, or at 0
    // where it is a unit dim.
    RankedTensorType source = collapse.getSrcType();
    auto groups =
        getUnitReshapeGroups(collapse.getReassociationIndices(), source);
    if (!groups)
      return std::nullopt;
    SmallVector<AffineExpr> exprs(source.getRank(), zero);
    for (auto [g, dim] : llvm::enumerate(*groups))
      if (dim)
        exprs[*dim] = map.getResult(g);
    return ResolvedOperand{collapse.getSrc(),
                           AffineMap::get(map.getNumDims(), 0, exprs, context)};
  }
  if (auto expand = dyn_cast<tensor::ExpandShapeOp>(op)) {
    // Source dim g is read where its group's one non-unit dim is.
    auto groups = getUnitReshapeGroups(expand.getReassociationIndices(),
                                       expand.getResultType());
    if (!groups)
      return std::nullopt;
    SmallVector<AffineExpr> exprs;
    for (std::optional<int64_t> dim : *groups)
      exprs.push_back(dim ? map.getResult(*dim) : zero);
    return ResolvedOperand{expand.getSrc(),
                           AffineMap::get(map.getNumDims(), 0, exprs, context)};
  }
  return std::nullopt;
}

bool raising::isUnitReshape(Operation *op) {
  if (auto collapse = dyn_cast<tensor::CollapseShapeOp>(op))
    return getUnitReshapeGroups(collapse.getReassociationIndices(),
                                collapse.getSrcType())
        .has_value();
  if (auto expand = dyn_cast<tensor::ExpandShapeOp>(op))
    return getUnitReshapeGroups(expand.getReassociationIndices(),
                                expand.getResultType())
        .has_value();
  return false;
}

ResolvedOperand raising::resolveOperand(Value value, AffineMap map) {
  ResolvedOperand read{value, map};
  while (Operation *producer = read.source.getDefiningOp()) {
    auto linalgOp = dyn_cast<linalg::LinalgOp>(producer);
    if (linalgOp && isDataMovement(linalgOp)) {
      read = readThrough(linalgOp, read.map);
      continue;
    }
    std::optional<ResolvedOperand> reshaped =
        readThroughUnitReshape(producer, read.map);
    if (!reshaped)
      break;
    read = *reshaped;
  }
  return read;
}

namespace {
/// The role of a contraction loop, for reading operand maps.
enum class Role { Batch, M, N, K };
} // namespace

/// The role of each loop of a contraction whose A and B are read at `aMap`
/// and `bMap` and whose result is written at `outMap`: K when A and B read it
/// and the result does not, M (N) when the result and A (B) do, a batch when
/// all three do. A loop that comes first in the result and in the only operand
/// that reads it is the batch of a GEMM whose other operand is shared by every
/// batch. Fails with `why` set when a loop has no role.
static FailureOr<SmallVector<Role>>
loopRoles(AffineMap aMap, AffineMap bMap, AffineMap outMap, std::string &why) {
  auto readsFirst = [](AffineMap map, unsigned loop) {
    return map.getNumResults() != 0 &&
           map.getResult(0) == getAffineDimExpr(loop, map.getContext());
  };
  SmallVector<Role> roles;
  for (unsigned loop = 0, e = outMap.getNumDims(); loop < e; ++loop) {
    bool inA = aMap.isFunctionOfDim(loop), inB = bMap.isFunctionOfDim(loop),
         inOut = outMap.isFunctionOfDim(loop);
    if (inOut && !inA && !inB) {
      why = "neither A nor B reads loop " + std::to_string(loop) +
            " of the result: an operand is broadcast along it";
      return failure();
    }
    if (inA && inB)
      roles.push_back(inOut ? Role::Batch : Role::K);
    else if (inOut && inA)
      roles.push_back(readsFirst(aMap, loop) && readsFirst(outMap, loop) &&
                              aMap.getNumResults() == 3
                          ? Role::Batch
                          : Role::M);
    else if (inOut && inB)
      roles.push_back(readsFirst(bMap, loop) && readsFirst(outMap, loop) &&
                              bMap.getNumResults() == 3
                          ? Role::Batch
                          : Role::N);
    else
      roles.push_back(Role::K);
  }
  auto count = [&](Role role) { return llvm::count(roles, role); };
  if (count(Role::M) != 1 || count(Role::N) != 1 || count(Role::K) != 1 ||
      count(Role::Batch) > 1) {
    why = "coda.gemm needs exactly one M, one N and one K loop and at most "
          "one batch loop";
    return failure();
  }
  return roles;
}

/// The roles of the results of `map`, or std::nullopt when a result is not a
/// plain loop.
static std::optional<SmallVector<Role>> rolesOf(AffineMap map,
                                                ArrayRef<Role> loopRoles) {
  SmallVector<Role> roles;
  for (AffineExpr expr : map.getResults()) {
    auto dim = dyn_cast<AffineDimExpr>(expr);
    if (!dim)
      return std::nullopt;
    roles.push_back(loopRoles[dim.getPosition()]);
  }
  return roles;
}

/// Reads an operand whose rows and columns take roles `rows` and `cols`
/// (untransposed) in `roles`, batch first. Sets `transposed` and `batched`.
static bool matchOperandRoles(ArrayRef<Role> roles, Role rows, Role cols,
                              bool &transposed, bool &batched) {
  batched = !roles.empty() && roles.front() == Role::Batch;
  ArrayRef<Role> matrix = roles.drop_front(batched ? 1 : 0);
  if (matrix.size() != 2)
    return false;
  transposed = matrix[0] == cols && matrix[1] == rows;
  return transposed || (matrix[0] == rows && matrix[1] == cols);
}

/// Whether `body` is `yield(out + ext(a) * ext(b))` (in either order, the
/// extensions optional) on the block arguments (a, b, out).
static bool isMultiplyAccumulate(Block &body) {
  auto yield = cast<linalg::YieldOp>(body.getTerminator());
  if (yield.getNumOperands() != 1)
    return false;
  auto add = yield.getOperand(0).getDefiningOp<arith::AddFOp>();
  if (!add || add->getBlock() != &body)
    return false;
  Value out = body.getArgument(2);
  Value product = add.getLhs() == out   ? add.getRhs()
                  : add.getRhs() == out ? add.getLhs()
                                        : Value();
  auto mul = product ? product.getDefiningOp<arith::MulFOp>() : nullptr;
  if (!mul || mul->getBlock() != &body)
    return false;
  unsigned extensions = 0;
  auto strip = [&](Value v) {
    if (auto ext = v.getDefiningOp<arith::ExtFOp>();
        ext && ext->getBlock() == &body) {
      ++extensions;
      return ext.getIn();
    }
    return v;
  };
  Value lhs = strip(mul.getLhs()), rhs = strip(mul.getRhs());
  Value a = body.getArgument(0), b = body.getArgument(1);
  bool operandsMatch = (lhs == a && rhs == b) || (lhs == b && rhs == a);
  // Nothing else may be computed: ext(s), mulf, addf and the yield.
  return operandsMatch && body.getOperations().size() == 3 + extensions;
}

static bool isGemmElementType(Type type) {
  return type.isBF16() || type.isF16() || type.isF32();
}

FailureOr<GemmOperands> raising::matchContraction(linalg::LinalgOp op,
                                                  bool lowPrecision,
                                                  std::string &why) {
  auto fail = [&](const Twine &message) {
    why = message.str();
    return failure();
  };
  if (!op.hasPureTensorSemantics())
    return fail("works on buffers; contractions on tensors are raised");
  if (op.getNumDpsInputs() != 2 || op.getNumDpsInits() != 1 ||
      !isMultiplyAccumulate(*op.getBlock()))
    return fail("the body is not 'out + a * b' in floating point (with "
                "optional extf of a and b)");

  OpOperand *lhs = op.getDpsInputOperand(0), *rhs = op.getDpsInputOperand(1);
  Type elementType = getElementTypeOrSelf(lhs->get().getType());
  Type accType = getElementTypeOrSelf(op.getDpsInitOperand(0)->get().getType());
  if (getElementTypeOrSelf(rhs->get().getType()) != elementType ||
      !isGemmElementType(elementType))
    return fail("coda.gemm multiplies two bf16, f16 or f32 matrices of one "
                "element type");
  if (!accType.isF32() && !(lowPrecision && accType == elementType))
    return fail("accumulates in " + print(accType) +
                "; coda.gemm accumulates in f32 (low-precision-epilogue=true "
                "lets bf16 or f16 operands accumulate in their own type)");

  ResolvedOperand a =
      resolveOperand(lhs->get(), op.getMatchingIndexingMap(lhs));
  ResolvedOperand b =
      resolveOperand(rhs->get(), op.getMatchingIndexingMap(rhs));
  AffineMap outMap = op.getMatchingIndexingMap(op.getDpsInitOperand(0));
  FailureOr<SmallVector<Role>> roles = loopRoles(a.map, b.map, outMap, why);
  if (failed(roles))
    return failure();
  for (auto [role, iterator] : llvm::zip(*roles, op.getIteratorTypesArray()))
    if ((role == Role::K) != (iterator == utils::IteratorType::reduction))
      return fail("coda.gemm reduces over K only");
  auto aRoles = rolesOf(a.map, *roles), bRoles = rolesOf(b.map, *roles);
  auto outRoles = rolesOf(outMap, *roles);
  GemmOperands gemm;
  bool aBatched = false, bBatched = false, outTransposed = false,
       outBatched = false;
  if (!aRoles ||
      !matchOperandRoles(*aRoles, Role::M, Role::K, gemm.transposeA, aBatched))
    return fail("A is not read as [M, K] or [K, M], batch first");
  if (!bRoles ||
      !matchOperandRoles(*bRoles, Role::K, Role::N, gemm.transposeB, bBatched))
    return fail("B is not read as [K, N] or [N, K], batch first");
  if (!outRoles ||
      !matchOperandRoles(*outRoles, Role::M, Role::N, outTransposed,
                         outBatched) ||
      outTransposed)
    return fail("the result is not written as [M, N], batch first");

  gemm.a = a.source;
  gemm.b = b.source;
  gemm.space = DimsAttr::kM | DimsAttr::kN | (outBatched ? DimsAttr::kB : 0);
  gemm.loops.assign(op.getNumLoops(), std::nullopt);
  for (auto [loop, role] : llvm::enumerate(*roles)) {
    if (role == Role::M)
      gemm.loops[loop] = DimsAttr::kM;
    else if (role == Role::N)
      gemm.loops[loop] = DimsAttr::kN;
    else if (role == Role::Batch)
      gemm.loops[loop] = DimsAttr::kB;
  }
  return gemm;
}
