//===- KernelPlan.cpp - the shape of one generated GEMM kernel ------------===//
//
// Chooses the kernel shape of a coda.gemm and checks, with user-facing
// errors, that the GEMM can run that way: the target, the tile options, the
// shared-memory budget, the operand layouts wgmma can read, the 16-byte row
// alignment TMA needs (when sizes are static) and the epilogue reductions
// (row reductions within the tiles of one cluster unless they are row
// statistics, column reductions into f32 outputs).
//
//===----------------------------------------------------------------------===//

#include "KernelPlan.h"

#include "coda/Dialect/Coda/IR/EpilogueDims.h"
#include "coda/Dialect/Coda/Utils/RowStatistics.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"

#include "mlir/IR/BuiltinTypes.h"
#include "llvm/Support/MathExtras.h"

#include <algorithm>

using namespace mlir;
using namespace mlir::coda;

/// The largest group of row blocks in the tile order (the index arithmetic
/// is 32-bit); any group of at least M / tileM row blocks walks the tiles
/// column by column.
static constexpr int64_t kMaxGroupRows = 1024;

/// How diagnostics name operand `index` of `op`.
static std::string describeOperand(GemmOp op, unsigned index) {
  constexpr const char *kSegmentNames[] = {"A", "B", "C", "alpha", "beta"};
  for (unsigned segment = 0; segment < 5; ++segment) {
    auto [start, length] = op.getODSOperandIndexAndLength(segment);
    if (index >= start && index < start + length)
      return kSegmentNames[segment];
  }
  return "epilogue input #" +
         std::to_string(index - op.getODSOperandIndexAndLength(5).first);
}

LogicalResult mlir::coda::checkProgram(GemmOp op, ModuleOp module) {
  auto program = dyn_cast<func::FuncOp>(op->getParentOp());
  if (!program || program->getParentOp() != module)
    return op.emitOpError()
           << "cannot run on the GPU: the GPU lowering runs coda programs, "
              "top-level functions whose body is one coda.gemm";
  Block &body = program.getBody().front();
  for (OpOperand &operand : op->getOpOperands()) {
    auto arg = dyn_cast<BlockArgument>(operand.get());
    if (arg && arg.getOwner() == &body)
      continue;
    Operation *def = operand.get().getDefiningOp();
    return op.emitOpError()
           << "cannot run on the GPU: "
           << describeOperand(op, operand.getOperandNumber())
           << " must be an argument of @" << program.getSymName()
           << ", but it is computed by '"
           << (def ? def->getName().getStringRef() : StringRef("a block"))
           << "'";
  }
  auto ret = dyn_cast<func::ReturnOp>(body.getTerminator());
  if (&body.front() != op.getOperation() || op->getNextNode() != ret ||
      !llvm::equal(ret.getOperands(), op.getResults()))
    return op.emitOpError()
           << "cannot run on the GPU: the body of @" << program.getSymName()
           << " must be this coda.gemm and a return of its results, in "
              "order";
  return success();
}

SmallVector<int64_t> OperandPlan::getBox() const {
  if (halves)
    return {tileK, 2, getBoxExtent() / 2};
  SmallVector<int64_t> box = kMajor
                                 ? SmallVector<int64_t>{tileK, getBoxExtent()}
                                 : SmallVector<int64_t>{getBoxExtent(), tileK};
  if (batched)
    box.push_back(1);
  return box;
}

NVVM::WGMMATypes KernelPlan::getMmaType() const {
  if (elementType.isBF16())
    return NVVM::WGMMATypes::bf16;
  if (elementType.isF16())
    return NVVM::WGMMATypes::f16;
  return NVVM::WGMMATypes::tf32;
}

/// Fills in the choices `tile` leaves open for a GEMM whose N is `n`
/// (dynamic or static). The defaults: cooperative 128 x 256 tiles (ping-pong
/// 128 x 128 or 64 x 256), 128 columns for row reductions over a static
/// N <= 128, and for row reductions exchanged across tiles (`rowExchange`:
/// those that are not row statistics) over a dynamic N (a row reduction
/// keeps its row's values live); for those over a static N wider than 256,
/// 128 columns in clusters along N spanning the row (256 columns past the
/// portable cluster size); as many stages as
/// shared memory holds, up to kMaxDefaultStages; tiles walked in groups of
/// 8 row blocks.
static TileConfig chooseTile(TileConfig tile, bool rowReduction,
                             bool rowExchange, int64_t n) {
  constexpr int64_t kMaxDefaultStages = 8;
  // Measured against 4, 16 and 32 on the benchmark's shapes
  // (docs/performance.md): 4 is slower, the others within 1-2%.
  constexpr int64_t kDefaultGroupRows = 8;
  if (!tile.schedule)
    tile.schedule = Schedule::Cooperative;
  bool pingpong = *tile.schedule == Schedule::Pingpong;
  if (!tile.tileM)
    tile.tileM = pingpong ? (tile.tileN == 256 ? 64 : 128) : 128;
  if (!tile.tileN) {
    // The widest tile whose accumulator fits 128 registers per thread.
    int64_t rows = pingpong ? tile.tileM : tile.tileM / 2;
    tile.tileN = rows > 64 ? 128 : 256;
    bool narrow = !ShapedType::isDynamic(n) && n <= 128;
    if ((rowReduction && narrow) ||
        (rowExchange &&
         (ShapedType::isDynamic(n) ||
          (n > 256 && n <= 128 * KernelShape::kPortableClusterSize))))
      tile.tileN = std::min<int64_t>(tile.tileN, 128);
  }
  // Past the widest cluster, build says how wide a row may be.
  if (!tile.clusterN)
    tile.clusterN = rowExchange && !ShapedType::isDynamic(n)
                        ? std::clamp<int64_t>(llvm::divideCeil(n, tile.tileN),
                                              1, KernelShape::kMaxClusterN)
                        : 1;
  if (!tile.epilogueVectorBytes)
    tile.epilogueVectorBytes = 16;
  if (!tile.clusterM)
    tile.clusterM = 1;
  if (!tile.groupRows)
    tile.groupRows = kDefaultGroupRows;
  if (!tile.stages) {
    int64_t stageBytes = (tile.tileM + tile.tileN) * 128 + 16;
    tile.stages = std::clamp<int64_t>(
        KernelPlan::kMaxSharedMemoryBytes / stageBytes, 2, kMaxDefaultStages);
  }
  return tile;
}

FailureOr<KernelPlan> KernelPlan::build(GemmOp op, const TileConfig &config,
                                        StringRef chip) {
  if (chip != "sm_90a")
    return op.emitOpError()
           << "cannot run on chip '" << chip
           << "': the GPU lowering emits wgmma and TMA instructions, which "
              "need chip sm_90a";
  Type elementType = op.getOperandElementType();
  bool rowReduction = llvm::any_of(op.getEpilogueBlock(), [](Operation &inner) {
    return isa<RowReduceOp>(inner);
  });
  // Row statistics need no exchange unless a cluster along N is pinned.
  bool statistics =
      rowReduction && RowStatistics::get(op, EpilogueDims(op)).has_value();
  auto bType = cast<RankedTensorType>(op.getB().getType());
  int64_t n = bType.getDimSize(bType.getRank() - (op.getTransposeB() ? 2 : 1));
  TileConfig tile =
      chooseTile(config, rowReduction, rowReduction && !statistics, n);
  bool pingpong = *tile.schedule == Schedule::Pingpong;
  if (!llvm::is_contained({64, 128, 192, 256}, tile.tileN))
    return op.emitOpError()
           << "tile-n must be 64, 128, 192 or 256, got " << tile.tileN;
  if (pingpong && tile.tileM != 64 && tile.tileM != 128)
    return op.emitOpError() << "tile-m must be 64 or 128 with the ping-pong "
                               "schedule (each consumer warpgroup computes "
                               "whole tiles), got "
                            << tile.tileM;
  if (!pingpong && tile.tileM != 128 && tile.tileM != 256)
    return op.emitOpError()
           << "tile-m must be 128 or 256 with the cooperative schedule (two "
              "consumer warpgroups share a tile), got "
           << tile.tileM;
  // An epilogue op that reads other columns of its tile (`what` it does)
  // needs tile-n to be a multiple of `multiple` (0: any).
  auto checkColumns = [&](Operation *inner, int64_t multiple,
                          const Twine &what) -> LogicalResult {
    if (!multiple || tile.tileN % multiple == 0)
      return success();
    return inner->emitOpError()
           << what
           << ", which the GPU lowering reads from the same tile: tile-n must "
              "be a multiple of "
           << multiple << ", got " << tile.tileN
           << (multiple > 256 ? " (the widest tile is 256 columns)" : "");
  };
  for (auto partner : op.getEpilogueBlock().getOps<PartnerOp>())
    if (failed(checkColumns(
            partner, getPartnerTileMultiple(partner.getDistance()),
            "pairs columns " + Twine(partner.getDistance()) + " apart")))
      return failure();
  for (auto reduce : op.getEpilogueBlock().getOps<GroupReduceOp>())
    if (failed(checkColumns(reduce, reduce.getWidth(),
                            "reduces over groups of " +
                                Twine(reduce.getWidth()) + " columns")))
      return failure();
  for (unsigned i = 0, e = op.getNumResults(); i < e; ++i)
    if (op.getResultDimsAt(i).isHalves() && !op.getAccumulatorHalfN())
      return op.emitOpError()
             << "cannot run on the GPU: output #" << i
             << " spans [m, n halves], which the GPU lowering writes beside "
                "an accumulator [m, n/2] only (a gated activation's "
                "gradient); the CPU reference runs it";
  if (op.getAccumulatorHalfN())
    for (Operation &inner : op.getEpilogueBlock().without_terminator()) {
      auto partner = dyn_cast<PartnerOp>(inner);
      if (!isa<DropoutOp, RowReduceOp, ColReduceOp, GroupReduceOp>(inner) &&
          !(partner && partner.getDistance() != 1))
        continue;
      return inner.emitOpError()
             << "cannot run on the GPU beside an accumulator [m, n/2]: its "
                "epilogue spreads each column of the product over two "
                "columns of the output, where the GPU lowering runs "
                "elementwise ops and partner(x, 1) only (no dropout, "
                "reductions or wider partners); the CPU reference runs it";
    }
  int64_t consumerRows = pingpong ? tile.tileM : tile.tileM / 2;
  // Cooperative consumers keep room for the epilogue's values; under
  // ping-pong a consumer's epilogue runs beside the other's main loop, and
  // 128 x 192 tiles (192 registers) keep light epilogues off the tensor
  // cores' time (docs/performance.md).
  int64_t maxAccumulators =
      pingpong ? kMaxPingpongAccumulators : kMaxAccumulators;
  int64_t accumulators = consumerRows / 64 * tile.tileN / 2;
  if (accumulators > maxAccumulators)
    return op.emitOpError()
           << "a " << tile.tileM << " x " << tile.tileN << " tile gives each "
           << "consumer warpgroup " << consumerRows << " x " << tile.tileN
           << " accumulators, " << accumulators
           << " registers per thread; at most " << maxAccumulators
           << " fit under the " << (pingpong ? "ping-pong" : "cooperative")
           << " schedule (use a smaller tile-m or tile-n)";
  if (tile.stages < 2)
    return op.emitOpError()
           << "stages must be at least 2 (one slot is refilled while the "
              "next is read), got "
           << tile.stages;
  if (tile.epilogueVectorBytes != 4 && tile.epilogueVectorBytes != 16)
    return op.emitOpError() << "epilogue-vector-bytes must be 4 or 16, got "
                            << tile.epilogueVectorBytes;
  if (tile.clusterM != 1 && tile.clusterM != 2)
    return op.emitOpError()
           << "cluster-m must be 1 or 2, got " << tile.clusterM;
  if (tile.clusterN < 1 || tile.clusterN > KernelShape::kMaxClusterN)
    return op.emitOpError()
           << "cluster-n must be between 1 and " << KernelShape::kMaxClusterN
           << ", got " << tile.clusterN;
  if (tile.clusterN > 1) {
    if (!rowReduction)
      return op.emitOpError()
             << "cluster-n = " << tile.clusterN
             << " spans a row with a cluster of blocks for row reductions, "
                "but this epilogue has none; use cluster-n = 1";
    if (tile.clusterM != 1)
      return op.emitOpError() << "cluster-n = " << tile.clusterN
                              << " and cluster-m = " << tile.clusterM
                              << " cannot be combined: a cluster spans either "
                                 "a row or a column of tiles";
    if (pingpong)
      return op.emitOpError()
             << "cluster-n = " << tile.clusterN
             << " needs the cooperative schedule: both consumer warpgroups "
                "take part in each row exchange of a tile";
  }
  if (tile.groupRows < 1 || tile.groupRows > kMaxGroupRows ||
      tile.groupRows % tile.clusterM)
    return op.emitOpError()
           << "group-rows must be a multiple of cluster-m (" << tile.clusterM
           << ") between 1 and " << kMaxGroupRows << ", got " << tile.groupRows;

  KernelPlan plan;
  plan.op = op;
  plan.chip = chip.str();
  plan.tile = tile;
  plan.consumerRows = consumerRows;
  plan.epilogueVectorBytes = tile.epilogueVectorBytes;
  plan.elementType = elementType;
  int64_t elementBytes = elementType.getIntOrFloatBitWidth() / 8;
  plan.tileK = 128 / elementBytes;
  plan.mmaK = 32 / elementBytes;
  auto rank = [](Value v) {
    return cast<RankedTensorType>(v.getType()).getRank();
  };
  plan.a = {/*kMajor=*/!op.getTransposeA(),
            rank(op.getA()) == 3,
            /*halves=*/false,
            tile.tileM,
            plan.tileK,
            elementBytes};
  plan.b = {/*kMajor=*/op.getTransposeB(),
            rank(op.getB()) == 3,
            /*halves=*/op.getBHalves(),
            tile.tileN,
            plan.tileK,
            elementBytes,
            /*multicast=*/tile.clusterM};

  if (plan.elementType.isF32() && (!plan.a.kMajor || !plan.b.kMajor))
    return op.emitOpError()
           << "cannot run on the GPU: f32 operands are multiplied as tf32 by "
              "wgmma, which reads them only with K contiguous; store A as "
              "[M, K] (no transpose_a) and B as [N, K] (transpose_b)";

  // A bias added to an accumulator that nothing else reads, when the sum is
  // only stored, starts the accumulators instead; its buffers may cost a
  // stage of those the default fitted. (Before a longer epilogue it was
  // slower: on fc1, bias + GELU + dropout + residual took 3 µs more,
  // docs/performance.md.)
  BlockArgument acc = op.getAccumulator();
  auto onlyStored = [](Operation *add) {
    return llvm::all_of(add->getUsers(),
                        [](Operation *user) { return isa<YieldOp>(user); });
  };
  // Cooperative kernels of one fragment per consumer only: under ping-pong,
  // or with two fragments, ptxas serializes the wgmmas that start from it.
  if (!op.getC() && !op.getAlpha() && !op.getAccumulatorHalfN() &&
      acc.hasOneUse() && !plan.isPingpong() && plan.getFragments() == 1)
    if (auto add = dyn_cast<arith::AddFOp>(*acc.user_begin());
        add && onlyStored(add)) {
      Value other = add.getLhs() == acc ? add.getRhs() : add.getLhs();
      auto arg = dyn_cast<BlockArgument>(other);
      EpilogueDims dims(op);
      if (arg && arg != acc && arg.getOwner() == &op.getEpilogueBlock() &&
          isa<RankedTensorType>(
              op.getInputs()[arg.getArgNumber() - 1].getType()) &&
          (dims.getMask(arg) & DimsAttr::kN) &&
          !(dims.getMask(arg) & DimsAttr::kM) &&
          !op.getInputDimsAt(arg.getArgNumber() - 1).isPeriodic()) {
        plan.biasAdd = add;
        plan.biasInput = arg.getArgNumber() - 1;
      }
    }
  while (!config.stages && plan.tile.stages > 2 &&
         plan.getSharedMemoryBytes() > kMaxSharedMemoryBytes)
    --plan.tile.stages;

  // A pinned count is bounded before the total, which it could overflow.
  if (plan.tile.stages > kMaxSharedMemoryBytes / plan.getStageBytes() ||
      plan.getSharedMemoryBytes() > kMaxSharedMemoryBytes)
    return op.emitOpError()
           << plan.tile.stages << " stages of " << plan.getStageBytes()
           << " bytes, with their mbarriers, bias buffers and row exchange, "
              "need more than the "
           << kMaxSharedMemoryBytes
           << " bytes of shared memory sm_90a gives a block; use fewer "
              "stages or a smaller tile";

  plan.hasRowReduction = rowReduction;
  plan.readsAccumulator = !op.getAccumulator().use_empty();
  plan.chunkedLoads =
      !op.getAccumulatorHalfN() &&
      (!plan.readsAccumulator ||
       llvm::none_of(op.getEpilogueBlock().without_terminator(),
                     [](Operation &inner) {
                       return isa<DropoutOp, RowReduceOp, ColReduceOp>(inner);
                     }));
  // Rows of one tile need no merge.
  plan.rowPartials = statistics && tile.clusterN == 1 &&
                     (ShapedType::isDynamic(n) || n > tile.tileN);
  for (auto [i, value] : llvm::enumerate(op.getYield().getValues())) {
    auto reduce = value.getDefiningOp<ColReduceOp>();
    Type type =
        cast<RankedTensorType>(op.getResult(i).getType()).getElementType();
    if (reduce && !type.isF32())
      return reduce.emitOpError()
             << "is accumulated across row blocks in f32: output #" << i
             << " must be f32, not " << type;
  }
  int64_t widest = 256 * KernelShape::kMaxClusterN;
  if (plan.getMaxN() && !ShapedType::isDynamic(n) && n > plan.getMaxN())
    return op.emitOpError()
           << "cannot fuse a row reduction on the GPU: a whole row must fit "
              "the tiles of one cluster along N, but N = "
           << n << " is more than tile-n x cluster-n = " << tile.tileN << " x "
           << tile.clusterN << "; tile-n can be up to 256 and cluster-n up to "
           << KernelShape::kMaxClusterN << ", rows of up to " << widest
           << " columns (row statistics, whose results no element of the row "
              "needs, are merged after the GEMM for rows of any width unless "
              "cluster-n is pinned)";
  return plan;
}

FailureOr<KernelPlan> KernelPlan::get(GemmOp op) {
  auto attr = op->getAttrOfType<KernelPlanAttr>(kAttrName);
  if (!attr)
    return op.emitOpError()
           << "has no " << kAttrName
           << ": run coda-plan-kernels first, which chooses its kernel";
  TileConfig tile;
  tile.tileM = attr.getTileM();
  tile.tileN = attr.getTileN();
  tile.stages = attr.getStages();
  tile.schedule = attr.getSchedule();
  tile.clusterM = attr.getClusterM();
  tile.clusterN = attr.getClusterN();
  tile.groupRows = attr.getGroupRows();
  tile.epilogueVectorBytes = attr.getEpilogueVectorBytes();
  FailureOr<KernelPlan> plan = build(op, tile, attr.getChip());
  if (failed(plan))
    return failure();
  // A bias may start the accumulators only where build found one; a plan
  // may leave it in the epilogue.
  int64_t biasInput = attr.getBiasInput();
  if (biasInput != -1 && biasInput != plan->biasInput)
    return op.emitOpError()
           << "cannot start the accumulators at epilogue input #" << biasInput
           << " (" << kAttrName
           << " bias_input): that needs a tensor along [n] added to the "
              "accumulator, which nothing else reads, the sum only stored, "
              "in a cooperative kernel of one fragment per consumer without "
              "C or alpha"
           << (plan->biasInput == -1
                   ? std::string(" (this GEMM has none)")
                   : " (this GEMM's is input #" +
                         std::to_string(plan->biasInput) + ")");
  if (biasInput == -1) {
    plan->biasAdd = nullptr;
    plan->biasInput = -1;
  }
  plan->chunkedLoads = attr.getChunkedLoads();
  plan->fastActivations = attr.getFastActivations();
  plan->seedInMemory = attr.getSeedInMemory();
  plan->deterministic = attr.getDeterministic();
  return plan;
}

KernelPlanAttr KernelPlan::getAttr() const {
  return KernelPlanAttr::get(op->getContext(), chip, tile.tileM, tile.tileN,
                             tile.stages, *tile.schedule, tile.clusterM,
                             tile.groupRows, epilogueVectorBytes, biasInput,
                             tile.clusterN, chunkedLoads, fastActivations,
                             seedInMemory, deterministic);
}
