//===- Passes.h - coda conversion passes ------------------------*- C++ -*-===//

#ifndef CODA_CONVERSION_PASSES_H
#define CODA_CONVERSION_PASSES_H

#include "coda/Conversion/CodaToLinalg/CodaToLinalg.h"
#include "coda/Conversion/LinalgToCoda/LinalgToCoda.h"
#include "mlir/Pass/Pass.h"

namespace mlir::coda {

#define GEN_PASS_DECL
#define GEN_PASS_REGISTRATION
#include "coda/Conversion/Passes.h.inc"

} // namespace mlir::coda

#endif // CODA_CONVERSION_PASSES_H
