//===- CodaToLinalg.h - coda to linalg reference lowering -------*- C++ -*-===//

#ifndef CODA_CONVERSION_CODATOLINALG_CODATOLINALG_H
#define CODA_CONVERSION_CODATOLINALG_CODATOLINALG_H

#include "mlir/IR/PatternMatch.h"

namespace mlir::coda {

/// Adds the patterns that rewrite coda.gemm into linalg ops on tensors.
void populateCodaToLinalgConversionPatterns(RewritePatternSet &patterns);

} // namespace mlir::coda

#endif // CODA_CONVERSION_CODATOLINALG_CODATOLINALG_H
