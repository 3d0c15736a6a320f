//===- Passes.h - coda dialect transforms -----------------------*- C++ -*-===//

#ifndef CODA_DIALECT_CODA_TRANSFORMS_PASSES_H
#define CODA_DIALECT_CODA_TRANSFORMS_PASSES_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Pass/Pass.h"

namespace mlir::coda {

#define GEN_PASS_DECL
#define GEN_PASS_REGISTRATION
#include "coda/Dialect/Coda/Transforms/Passes.h.inc"

} // namespace mlir::coda

#endif // CODA_DIALECT_CODA_TRANSFORMS_PASSES_H
