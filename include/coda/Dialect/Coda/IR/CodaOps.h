//===- CodaOps.h - coda operations ------------------------------*- C++ -*-===//

#ifndef CODA_DIALECT_CODA_IR_CODAOPS_H
#define CODA_DIALECT_CODA_IR_CODAOPS_H

#include "coda/Dialect/Coda/IR/CodaAttrs.h"
#include "coda/Dialect/Coda/IR/CodaDialect.h"
#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/ControlFlowInterfaces.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace mlir::coda {
class YieldOp;
} // namespace mlir::coda

#include "coda/Dialect/Coda/IR/CodaInterfaces.h.inc"

#define GET_OP_CLASSES
#include "coda/Dialect/Coda/IR/CodaOps.h.inc"

#endif // CODA_DIALECT_CODA_IR_CODAOPS_H
