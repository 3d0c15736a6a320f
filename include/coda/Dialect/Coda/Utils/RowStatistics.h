//===- RowStatistics.h - row reductions merged after the GEMM ---*- C++ -*-===//
//
// A row reduction whose result no element of its row needs is a row
// statistic: an RMSNorm's mean of squares and the rstd computed from it, a
// row's maximum or log-sum of its sum. An epilogue's row reductions are row
// statistics when everything computed from their results varies along
// neither n nor n/2, is computed by scalar arith and math ops from row
// reductions, constants and inputs that do not vary along n, and reaches
// only outputs. The GPU lowering then computes them without anything
// exchanged between the tiles of a row: each tile writes its partial result
// of every row reduction, and a merge kernel after the GEMM combines each
// row's partial results in tile order and computes the outputs that depend
// on them, for rows of any width.
//
// A row reduction may also be centered on an earlier one of the same values
// x (its shift): a variance, mean((x - mean(x))^2) (or its sum), or a sum of
// exponentials, sum(exp(x - max(x))). Each tile then centers its own values
// on its own shift (the tile's mean or maximum) and the merge combines the
// tiles' pairs as one would the whole row's: Chan's merge of counts, means
// and sums of squared deviations (no E[x^2] - E[x]^2 cancellation), and the
// rescaled sums of a softmax's running maximum.
//
//===----------------------------------------------------------------------===//

#ifndef CODA_DIALECT_CODA_UTILS_ROWSTATISTICS_H
#define CODA_DIALECT_CODA_UTILS_ROWSTATISTICS_H

#include "coda/Dialect/Coda/IR/CodaOps.h"
#include "coda/Dialect/Coda/IR/EpilogueDims.h"

#include <optional>

namespace mlir::coda {

class RowStatistics {
public:
  /// How a centered reduction's values are computed from x minus the shift.
  enum class Centering { None, Square, Exp };

  /// The row statistics of `op`'s epilogue (a coda.gemm's or a
  /// coda.tile_epilogue's, whose dims `dims` holds); nullopt when it has no
  /// row reduction, or one that is not a row statistic.
  static std::optional<RowStatistics> get(EpilogueOpInterface op,
                                          const EpilogueDims &dims);

  /// The row reductions, in the region's order.
  ArrayRef<RowReduceOp> getReductions() const { return reductions; }
  /// How reduction `k` is centered on its shift (Centering::None: it is not).
  Centering getCentering(unsigned k) const { return centerings[k]; }
  /// The reduction that reduction `k` is centered on; -1 when none.
  int64_t getShift(unsigned k) const { return shifts[k]; }
  /// The reduction centered on reduction `k`; -1 when none.
  int64_t getCenteredOn(unsigned k) const {
    auto it = llvm::find(shifts, static_cast<int64_t>(k));
    return it == shifts.end() ? -1 : it - shifts.begin();
  }
  /// What the merge runs once the reductions are combined, in the region's
  /// order: the ops computing from their results, and the constants those
  /// read.
  ArrayRef<Operation *> getMergeOps() const { return mergeOps; }
  /// Whether output `i` is computed from a row reduction (by the merge).
  bool isMerged(unsigned i) const { return merged[i]; }

private:
  SmallVector<RowReduceOp> reductions;
  SmallVector<Centering> centerings;
  SmallVector<int64_t> shifts;
  SmallVector<Operation *> mergeOps;
  SmallVector<bool> merged;
};

} // namespace mlir::coda

#endif // CODA_DIALECT_CODA_UTILS_ROWSTATISTICS_H
