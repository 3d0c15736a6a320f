//===- CodaAttrs.cpp - coda attributes and enums --------------------------===//

#include "coda/Dialect/Coda/IR/CodaAttrs.h"
#include "coda/Dialect/Coda/IR/CodaDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace mlir::coda;

#define GET_ATTRDEF_CLASSES
#include "coda/Dialect/Coda/IR/CodaAttrs.cpp.inc"

void CodaDialect::registerAttributes() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "coda/Dialect/Coda/IR/CodaAttrs.cpp.inc"
      >();
}

FailureOr<bool> mlir::coda::parseFlag(AsmParser &parser) {
  SMLoc loc = parser.getCurrentLocation();
  StringRef word;
  if (parser.parseKeyword(&word))
    return failure();
  if (word == "true" || word == "false")
    return word == "true";
  return parser.emitError(loc)
         << "expected true or false, got '" << word << "'";
}

FailureOr<Schedule> mlir::coda::parseSchedule(AsmParser &parser) {
  SMLoc loc = parser.getCurrentLocation();
  StringRef word;
  if (parser.parseKeyword(&word))
    return failure();
  if (std::optional<Schedule> schedule = parseScheduleName(word))
    return *schedule;
  return parser.emitError(loc)
         << "expected a schedule, 'cooperative' or 'pingpong', got '" << word
         << "'";
}

namespace {
/// The dims in print order, with their mask bits.
constexpr std::pair<const char *, unsigned> kDimNames[] = {
    {"b", DimsAttr::kB}, {"m", DimsAttr::kM}, {"n", DimsAttr::kN}};
} // namespace

ParseResult mlir::coda::parseDimsList(AsmParser &parser, unsigned &mask,
                                      unsigned &period) {
  mask = 0;
  period = 0;
  unsigned next = 0; // index into kDimNames of the first dim still allowed
  return parser.parseCommaSeparatedList(
      AsmParser::Delimiter::Square, [&]() -> ParseResult {
        SMLoc loc = parser.getCurrentLocation();
        StringRef name;
        if (parser.parseKeyword(&name))
          return failure();
        for (unsigned i = next; i < std::size(kDimNames); ++i) {
          if (name != kDimNames[i].first)
            continue;
          mask |= kDimNames[i].second;
          next = i + 1;
          if (kDimNames[i].second != DimsAttr::kN)
            return success();
          if (succeeded(parser.parseOptionalKeyword("mod"))) {
            // n mod p: p columns, repeated along the row.
            SMLoc periodLoc = parser.getCurrentLocation();
            int64_t value;
            if (parser.parseInteger(value))
              return failure();
            if (value <= 0 || !llvm::isPowerOf2_64(value) || value > (1 << 30))
              return parser.emitError(periodLoc)
                     << "expected a power of 2 after 'n mod', got " << value;
            period = static_cast<unsigned>(value);
            return success();
          }
          if (succeeded(parser.parseOptionalKeyword("halves"))) {
            // n halves: column 2j at j, 2j + 1 at N / 2 + j.
            mask |= DimsAttr::kHalves;
            return success();
          }
          if (failed(parser.parseOptionalSlash()))
            return success();
          // n/2: the even columns, compacted.
          SMLoc halfLoc = parser.getCurrentLocation();
          int64_t divisor;
          if (parser.parseInteger(divisor))
            return failure();
          if (divisor != 2)
            return parser.emitError(halfLoc)
                   << "expected 'n/2', got 'n/" << divisor << "'";
          mask |= DimsAttr::kHalfN;
          return success();
        }
        return parser.emitError(loc)
               << "expected dims to be a subset of [b, m, n] (or n/2, n "
                  "halves, n mod p) in that order, got '"
               << name << "'";
      });
}

std::string mlir::coda::stringifyDims(unsigned mask, unsigned period) {
  std::string text = "[";
  for (auto [name, bit] : kDimNames) {
    if (!(mask & bit))
      continue;
    if (text.size() > 1)
      text += ", ";
    text += name;
    if (bit == DimsAttr::kN && (mask & DimsAttr::kHalfN))
      text += "/2";
    if (bit == DimsAttr::kN && (mask & DimsAttr::kHalves))
      text += " halves";
    if (bit == DimsAttr::kN && period)
      text += " mod " + std::to_string(period);
  }
  return text + "]";
}

std::string mlir::coda::stringifyDims(DimsAttr dims) {
  return stringifyDims(dims.getMask(), dims.getPeriod());
}

unsigned mlir::coda::getDimsRank(unsigned mask) {
  return llvm::popcount(mask & (DimsAttr::kB | DimsAttr::kM | DimsAttr::kN));
}

unsigned mlir::coda::getDimsBit(OutputDim dim) {
  switch (dim) {
  case OutputDim::B:
    return DimsAttr::kB;
  case OutputDim::M:
    return DimsAttr::kM;
  case OutputDim::N:
    return DimsAttr::kN;
  }
  llvm_unreachable("unknown output dim");
}

unsigned DimsAttr::getRank() const { return getDimsRank(getMask()); }

Attribute DimsAttr::parse(AsmParser &parser, Type) {
  unsigned mask, period;
  if (parser.parseLess() || parseDimsList(parser, mask, period) ||
      parser.parseGreater())
    return {};
  return DimsAttr::get(parser.getContext(), mask, period);
}

void DimsAttr::print(AsmPrinter &printer) const {
  printer << "<" << stringifyDims(*this) << ">";
}
