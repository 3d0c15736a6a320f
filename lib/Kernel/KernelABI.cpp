//===- KernelABI.cpp - the launch contract of coda's GPU kernels ----------===//

#include "coda/Kernel/KernelABI.h"

#include "mlir/IR/Builders.h"
#include "llvm/Support/MathExtras.h"

#include <algorithm>

using namespace mlir;
using namespace mlir::coda;

namespace {
constexpr KernelParamKind kKinds[] = {
    KernelParamKind::TensorMap,   KernelParamKind::GlobalPtr,
    KernelParamKind::AtomicPtr,   KernelParamKind::Partials,
    KernelParamKind::RowPartials, KernelParamKind::F32,
    KernelParamKind::I64,         KernelParamKind::I32};
constexpr KernelParamRole kRoles[] = {
    KernelParamRole::A,      KernelParamRole::B,
    KernelParamRole::C,      KernelParamRole::Alpha,
    KernelParamRole::Beta,   KernelParamRole::Input,
    KernelParamRole::Output, KernelParamRole::RowReduction,
    KernelParamRole::M,      KernelParamRole::N,
    KernelParamRole::K,      KernelParamRole::Batch};

/// The enumerator of `all` whose spelling is `name`.
template <typename Enum, size_t N>
std::optional<Enum> parseEnum(const Enum (&all)[N], StringRef name,
                              StringRef (*stringify)(Enum)) {
  for (Enum e : all)
    if (stringify(e) == name)
      return e;
  return std::nullopt;
}
} // namespace

StringRef mlir::coda::stringifyKernelParamKind(KernelParamKind kind) {
  switch (kind) {
  case KernelParamKind::TensorMap:
    return "tensor_map";
  case KernelParamKind::GlobalPtr:
    return "global_ptr";
  case KernelParamKind::AtomicPtr:
    return "atomic_ptr";
  case KernelParamKind::Partials:
    return "partials";
  case KernelParamKind::RowPartials:
    return "row_partials";
  case KernelParamKind::F32:
    return "f32";
  case KernelParamKind::I64:
    return "i64";
  case KernelParamKind::I32:
    return "i32";
  }
  llvm_unreachable("unknown kernel parameter kind");
}

StringRef mlir::coda::stringifyKernelParamRole(KernelParamRole role) {
  switch (role) {
  case KernelParamRole::A:
    return "a";
  case KernelParamRole::B:
    return "b";
  case KernelParamRole::C:
    return "c";
  case KernelParamRole::Alpha:
    return "alpha";
  case KernelParamRole::Beta:
    return "beta";
  case KernelParamRole::Input:
    return "input";
  case KernelParamRole::Output:
    return "output";
  case KernelParamRole::RowReduction:
    return "row_reduction";
  case KernelParamRole::M:
    return "m";
  case KernelParamRole::N:
    return "n";
  case KernelParamRole::K:
    return "k";
  case KernelParamRole::Batch:
    return "batch";
  }
  llvm_unreachable("unknown kernel parameter role");
}

int64_t KernelABI::getNumTiles(int64_t m, int64_t n, int64_t batch) const {
  return llvm::divideCeilSigned(n, tileN) * llvm::divideCeilSigned(m, tileM) *
         batch;
}

int64_t KernelABI::getPartialRows(int64_t m, int64_t batch) const {
  int64_t warpsPerTile = schedule == Schedule::Pingpong ? 4 : 8;
  return llvm::divideCeilSigned(m, tileM) * warpsPerTile * batch;
}

int64_t KernelABI::getRowPartialCount(int64_t m, int64_t n,
                                      int64_t batch) const {
  return llvm::divideCeilSigned(n, tileN) * m * batch;
}

int64_t KernelABI::getNumUnits(int64_t m, int64_t n, int64_t batch) const {
  int64_t unitCols = clusterN > 1 ? 1 : llvm::divideCeilSigned(n, tileN);
  return unitCols *
         llvm::divideCeilSigned(llvm::divideCeilSigned(m, tileM), clusterM) *
         batch;
}

std::array<int64_t, 3> KernelABI::getGridDims(int64_t m, int64_t n,
                                              int64_t batch,
                                              int64_t clusters) const {
  int64_t units = getNumUnits(m, n, batch);
  return {std::max<int64_t>(1, std::min(units, clusters)) * getClusterSize(), 1,
          1};
}

KernelShape KernelABI::getShape() const {
  KernelShape shape;
  shape.tileM = tileM;
  shape.tileN = tileN;
  shape.schedule = schedule;
  shape.clusterM = clusterM;
  shape.clusterN = clusterN;
  shape.groupRows = groupRows;
  return shape;
}

DictionaryAttr KernelABI::toAttr(MLIRContext *context) const {
  Builder b(context);
  SmallVector<Attribute> paramAttrs;
  for (const KernelParam &param : params) {
    SmallVector<NamedAttribute> fields{
        b.getNamedAttr("kind",
                       b.getStringAttr(stringifyKernelParamKind(param.kind))),
        b.getNamedAttr("role",
                       b.getStringAttr(stringifyKernelParamRole(param.role))),
        b.getNamedAttr("index", b.getI64IntegerAttr(param.index))};
    if (!param.box.empty())
      fields.push_back(
          b.getNamedAttr("box", b.getDenseI64ArrayAttr(param.box)));
    if (param.halves)
      fields.push_back(b.getNamedAttr("halves", b.getUnitAttr()));
    if (param.fill)
      fields.push_back(b.getNamedAttr("fill", b.getF64FloatAttr(*param.fill)));
    if (!param.merge.empty())
      fields.push_back(b.getNamedAttr("merge", b.getStringAttr(param.merge)));
    paramAttrs.push_back(b.getDictionaryAttr(fields));
  }
  SmallVector<NamedAttribute> fields = {
      b.getNamedAttr("module", b.getStringAttr(module)),
      b.getNamedAttr("kernel", b.getStringAttr(kernel)),
      b.getNamedAttr("block", b.getDenseI64ArrayAttr(blockDims)),
      b.getNamedAttr("tile", b.getDenseI64ArrayAttr({tileM, tileN, tileK})),
      b.getNamedAttr("shared_memory_bytes",
                     b.getI64IntegerAttr(sharedMemoryBytes)),
      b.getNamedAttr("max_n", b.getI64IntegerAttr(maxN)),
      b.getNamedAttr("cluster_m", b.getI64IntegerAttr(clusterM)),
      b.getNamedAttr("group_rows", b.getI64IntegerAttr(groupRows)),
      b.getNamedAttr("params", b.getArrayAttr(paramAttrs)),
      b.getNamedAttr("schedule", b.getStringAttr(getScheduleName(schedule))),
  };
  // Absent: 1.
  if (clusterN > 1)
    fields.push_back(
        b.getNamedAttr("cluster_n", b.getI64IntegerAttr(clusterN)));
  return b.getDictionaryAttr(fields);
}

std::optional<KernelABI> KernelABI::fromAttr(DictionaryAttr attr) {
  if (!attr)
    return std::nullopt;
  auto module = attr.getAs<StringAttr>("module");
  auto kernel = attr.getAs<StringAttr>("kernel");
  auto block = attr.getAs<DenseI64ArrayAttr>("block");
  auto tile = attr.getAs<DenseI64ArrayAttr>("tile");
  auto smem = attr.getAs<IntegerAttr>("shared_memory_bytes");
  auto maxN = attr.getAs<IntegerAttr>("max_n");
  auto clusterM = attr.getAs<IntegerAttr>("cluster_m");
  auto clusterN = attr.getAs<IntegerAttr>("cluster_n");
  auto groupRows = attr.getAs<IntegerAttr>("group_rows");
  auto params = attr.getAs<ArrayAttr>("params");
  auto schedule = attr.getAs<StringAttr>("schedule");
  if (!module || !kernel || !block || block.size() != 3 || !tile ||
      tile.size() != 3 || !smem || !maxN || !clusterM ||
      clusterM.getInt() < 1 || (clusterN && clusterN.getInt() < 1) ||
      !groupRows || groupRows.getInt() < 1 || !params || !schedule ||
      !parseScheduleName(schedule.getValue()))
    return std::nullopt;
  KernelABI abi;
  abi.module = module.str();
  abi.kernel = kernel.str();
  llvm::copy(block.asArrayRef(), abi.blockDims.begin());
  abi.tileM = tile[0];
  abi.tileN = tile[1];
  abi.tileK = tile[2];
  abi.sharedMemoryBytes = smem.getInt();
  abi.maxN = maxN.getInt();
  abi.clusterM = clusterM.getInt();
  abi.clusterN = clusterN ? clusterN.getInt() : 1;
  abi.groupRows = groupRows.getInt();
  abi.schedule = *parseScheduleName(schedule.getValue());
  for (Attribute paramAttr : params) {
    auto dict = dyn_cast<DictionaryAttr>(paramAttr);
    if (!dict)
      return std::nullopt;
    auto kindName = dict.getAs<StringAttr>("kind");
    auto roleName = dict.getAs<StringAttr>("role");
    auto index = dict.getAs<IntegerAttr>("index");
    if (!kindName || !roleName || !index)
      return std::nullopt;
    std::optional<KernelParamKind> kind =
        parseEnum(kKinds, kindName.getValue(), stringifyKernelParamKind);
    std::optional<KernelParamRole> role =
        parseEnum(kRoles, roleName.getValue(), stringifyKernelParamRole);
    if (!kind || !role)
      return std::nullopt;
    KernelParam param{*kind, *role, index.getInt(), {}, std::nullopt};
    if (auto box = dict.getAs<DenseI64ArrayAttr>("box"))
      param.box.assign(box.asArrayRef().begin(), box.asArrayRef().end());
    if (auto fill = dict.getAs<FloatAttr>("fill"))
      param.fill = fill.getValueAsDouble();
    param.halves = dict.contains("halves");
    if (auto merge = dict.getAs<StringAttr>("merge"))
      param.merge = merge.str();
    if ((*kind == KernelParamKind::TensorMap) == param.box.empty() ||
        (param.halves &&
         (*role != KernelParamRole::B || param.box.size() != 3)) ||
        (*kind == KernelParamKind::AtomicPtr) != param.fill.has_value() ||
        (*kind == KernelParamKind::Partials ||
         *kind == KernelParamKind::RowPartials) == param.merge.empty() ||
        (*kind == KernelParamKind::RowPartials) !=
            (*role == KernelParamRole::RowReduction))
      return std::nullopt;
    abi.params.push_back(std::move(param));
  }
  return abi;
}
