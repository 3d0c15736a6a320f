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

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/AffineExpr.h"

using namespace mlir;
using namespace mlir::coda;
using namespace mlir::coda::raising;

bool raising::isDataMovement(linalg::LinalgOp op) {
  if (!op.hasPureTensorSemantics() || op.getNumDpsInputs() != 1 ||
      op.getNumDpsInits() != 1 || !op.isAllParallelLoops() ||
      op.hasIndexSemantics() || op->getNumResults() != 1)
    return false;
  if (!op.getMatchingIndexingMap(op.getDpsInitOperand(0)).isPermutation())
    return false;
  Block *body = op.getBlock();
  Operation *terminator = body->getTerminator();
  return &body->front() == terminator && terminator->getNumOperands() == 1 &&
         terminator->getOperand(0) == body->getArgument(0);
}

ResolvedOperand raising::resolveOperand(Value value, AffineMap map) {
  while (auto producer = value.getDefiningOp<linalg::LinalgOp>()) {
    if (!isDataMovement(producer))
      break;
    // The producer writes init[outMap(i)] = input[inMap(i)]; reading its
    // result at `map` reads the input at inMap(outMap^-1(map)).
    OpOperand *input = producer.getDpsInputOperand(0);
    AffineMap outMap =
        producer.getMatchingIndexingMap(producer.getDpsInitOperand(0));
    map = producer.getMatchingIndexingMap(input)
              .compose(inversePermutation(outMap))
              .compose(map);
    value = input->get();
  }
  return {value, map};
}

namespace {
/// The role of a contraction loop, for reading operand maps.
enum class Role { Batch, M, N, K };
} // namespace

/// The roles of the results of `map`, or std::nullopt when a result is not a
/// plain loop.
static std::optional<SmallVector<Role>>
rolesOf(AffineMap map, const linalg::ContractionDimensions &dims) {
  SmallVector<Role> roles;
  for (AffineExpr expr : map.getResults()) {
    auto dim = dyn_cast<AffineDimExpr>(expr);
    if (!dim)
      return std::nullopt;
    unsigned pos = dim.getPosition();
    if (llvm::is_contained(dims.batch, pos))
      roles.push_back(Role::Batch);
    else if (llvm::is_contained(dims.m, pos))
      roles.push_back(Role::M);
    else if (llvm::is_contained(dims.n, pos))
      roles.push_back(Role::N);
    else
      roles.push_back(Role::K);
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
  FailureOr<linalg::ContractionDimensions> dims =
      linalg::inferContractionDims(op);
  if (failed(dims) || dims->m.size() != 1 || dims->n.size() != 1 ||
      dims->k.size() != 1 || dims->batch.size() > 1)
    return fail("coda.gemm needs exactly one M, one N and one K loop and at "
                "most one batch loop");
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
  auto aRoles = rolesOf(a.map, *dims), bRoles = rolesOf(b.map, *dims);
  auto outRoles =
      rolesOf(op.getMatchingIndexingMap(op.getDpsInitOperand(0)), *dims);
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
  if (!dims->batch.empty() && !aBatched && !bBatched)
    return fail("neither A nor B has the batch dimension");

  gemm.a = a.source;
  gemm.b = b.source;
  gemm.space =
      DimsAttr::kM | DimsAttr::kN | (dims->batch.empty() ? 0 : DimsAttr::kB);
  gemm.loops.assign(op.getNumLoops(), std::nullopt);
  gemm.loops[dims->m.front()] = DimsAttr::kM;
  gemm.loops[dims->n.front()] = DimsAttr::kN;
  if (!dims->batch.empty())
    gemm.loops[dims->batch.front()] = DimsAttr::kB;
  return gemm;
}
