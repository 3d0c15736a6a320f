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
//===----------------------------------------------------------------------===//

#ifndef CODA_DIALECT_CODA_UTILS_ROWSTATISTICS_H
#define CODA_DIALECT_CODA_UTILS_ROWSTATISTICS_H

#include "coda/Dialect/Coda/IR/CodaOps.h"
#include "coda/Dialect/Coda/IR/EpilogueDims.h"

#include <optional>

namespace mlir::coda {

class RowStatistics {
public:
  /// The row statistics of `op`'s epilogue (a coda.gemm's or a
  /// coda.tile_epilogue's, whose dims `dims` holds); nullopt when it has no
  /// row reduction, or one that is not a row statistic.
  static std::optional<RowStatistics> get(EpilogueOpInterface op,
                                          const EpilogueDims &dims);

  /// The row reductions, in the region's order.
  ArrayRef<RowReduceOp> getReductions() const { return reductions; }
  /// What the merge runs once the reductions are combined, in the region's
  /// order: the ops computing from their results, and the constants those
  /// read.
  ArrayRef<Operation *> getMergeOps() const { return mergeOps; }
  /// Whether output `i` is computed from a row reduction (by the merge).
  bool isMerged(unsigned i) const { return merged[i]; }

private:
  SmallVector<RowReduceOp> reductions;
  SmallVector<Operation *> mergeOps;
  SmallVector<bool> merged;
};

} // namespace mlir::coda

#endif // CODA_DIALECT_CODA_UTILS_ROWSTATISTICS_H
