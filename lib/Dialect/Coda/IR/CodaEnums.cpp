//===- CodaEnums.cpp - the string forms of coda's enums -------------------===//

#include "coda/Dialect/Coda/IR/CodaEnums.h"

#include "llvm/ADT/StringSwitch.h"

using namespace mlir;
using namespace mlir::coda;

#include "coda/Dialect/Coda/IR/CodaEnums.cpp.inc"
