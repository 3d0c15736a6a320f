//===- CodaEnums.h - coda's enums, without MLIR's IR -----------*- C++ -*-===//
//
// The dialect's enums (ActivationKind, ReductionKind) with their string forms
// (stringifyActivationKind, symbolizeReductionKind, ...), generated from
// CodaAttrs.td. The CodaEnums library defines them on LLVMSupport alone, so
// that code without MLIR's IR (the DSL front-end) names the same kinds.
//
//===----------------------------------------------------------------------===//

#ifndef CODA_DIALECT_CODA_IR_CODAENUMS_H
#define CODA_DIALECT_CODA_IR_CODAENUMS_H

#include "mlir/Support/LLVM.h"
#include "llvm/ADT/DenseMapInfo.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <optional>
#include <string>

#include "coda/Dialect/Coda/IR/CodaEnums.h.inc"

#endif // CODA_DIALECT_CODA_IR_CODAENUMS_H
