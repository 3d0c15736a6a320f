//===- CodaAttrs.h - coda attributes and enums ------------------*- C++ -*-===//

#ifndef CODA_DIALECT_CODA_IR_CODAATTRS_H
#define CODA_DIALECT_CODA_IR_CODAATTRS_H

#include "mlir/IR/Attributes.h"
#include "mlir/IR/BuiltinAttributes.h"

#include <string>

#include "coda/Dialect/Coda/IR/CodaEnums.h"
#include "coda/Kernel/KernelShape.h"

namespace mlir {
class AsmParser;
namespace coda {
/// Parses `true` or `false` (a KernelPlanAttr flag).
FailureOr<bool> parseFlag(AsmParser &parser);
/// Parses a schedule's name (`cooperative`, `pingpong`).
FailureOr<Schedule> parseSchedule(AsmParser &parser);
} // namespace coda
} // namespace mlir

#define GET_ATTRDEF_CLASSES
#include "coda/Dialect/Coda/IR/CodaAttrs.h.inc"

namespace mlir {
class AsmParser;
class AsmPrinter;
namespace coda {

/// Parses a dims list such as `[b, m, n]`, `[n]`, `[m, n mod 64]` or `[]`
/// into a DimsAttr mask and period (0 unless `n mod p`).
ParseResult parseDimsList(AsmParser &parser, unsigned &mask, unsigned &period);

/// Spells a DimsAttr mask (and period) as a dims list such as `[m, n]`,
/// `[m, n/2]` or `[n mod 64]`.
std::string stringifyDims(unsigned mask, unsigned period = 0);

/// Spells `dims` as stringifyDims(mask, period) does.
std::string stringifyDims(DimsAttr dims);

/// The number of dims a DimsAttr mask spans: the rank of a tensor with them.
unsigned getDimsRank(unsigned mask);

/// The DimsAttr bit of output-space dim `dim`.
unsigned getDimsBit(OutputDim dim);

} // namespace coda
} // namespace mlir

#endif // CODA_DIALECT_CODA_IR_CODAATTRS_H
