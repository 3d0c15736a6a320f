//===- CodaOps.cpp - coda operations: syntax, verifiers, folds ------------===//

#include "coda/Dialect/Coda/IR/CodaOps.h"
#include "coda/Dialect/Coda/IR/EpilogueDims.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/PatternMatch.h"

#include <cmath>

using namespace mlir;
using namespace mlir::coda;

#include "coda/Dialect/Coda/IR/CodaInterfaces.cpp.inc"

//===----------------------------------------------------------------------===//
// Enum keywords
//===----------------------------------------------------------------------===//

/// Parses a case of enum `EnumT` as a bare keyword into `attr`, with one
/// error that lists the cases when it is not one (the enum attribute's own
/// parser adds a second, TableGen's "failed to parse" message).
template <typename AttrT, typename EnumT>
static ParseResult
parseEnumKeyword(OpAsmParser &parser, AttrT &attr,
                 std::optional<EnumT> (*symbolize)(StringRef),
                 StringRef (*stringify)(EnumT), uint32_t maxValue,
                 StringRef what) {
  SMLoc loc = parser.getCurrentLocation();
  StringRef keyword;
  if (parser.parseKeyword(&keyword))
    return failure();
  if (std::optional<EnumT> value = symbolize(keyword)) {
    attr = AttrT::get(parser.getContext(), *value);
    return success();
  }
  InFlightDiagnostic diag = parser.emitError(loc)
                            << "unknown " << what << " '" << keyword
                            << "'; expected one of ";
  for (uint32_t i = 0; i <= maxValue; ++i)
    diag << (i ? ", " : "") << stringify(static_cast<EnumT>(i));
  return diag;
}

static ParseResult parseKind(OpAsmParser &parser, ReductionKindAttr &attr) {
  return parseEnumKeyword(parser, attr, symbolizeReductionKind,
                          stringifyReductionKind,
                          getMaxEnumValForReductionKind(), "reduction kind");
}
static ParseResult parseKind(OpAsmParser &parser, ActivationKindAttr &attr) {
  return parseEnumKeyword(parser, attr, symbolizeActivationKind,
                          stringifyActivationKind,
                          getMaxEnumValForActivationKind(), "activation");
}
static ParseResult parseKind(OpAsmParser &parser, OutputDimAttr &attr) {
  return parseEnumKeyword(parser, attr, symbolizeOutputDim, stringifyOutputDim,
                          getMaxEnumValForOutputDim(), "output dim");
}
static void printKind(OpAsmPrinter &printer, Operation *,
                      ReductionKindAttr attr) {
  printer << stringifyReductionKind(attr.getValue());
}
static void printKind(OpAsmPrinter &printer, Operation *,
                      ActivationKindAttr attr) {
  printer << stringifyActivationKind(attr.getValue());
}
static void printKind(OpAsmPrinter &printer, Operation *, OutputDimAttr attr) {
  printer << stringifyOutputDim(attr.getValue());
}

#define GET_OP_CLASSES
#include "coda/Dialect/Coda/IR/CodaOps.cpp.inc"

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

namespace {
/// The static sizes of a GEMM's output space and contraction; unknown sizes are
/// ShapedType::kDynamic.
struct GemmSizes {
  int64_t batch = ShapedType::kDynamic;
  int64_t m = ShapedType::kDynamic;
  int64_t n = ShapedType::kDynamic;
  int64_t kOfA = ShapedType::kDynamic;
  int64_t kOfB = ShapedType::kDynamic;
  int64_t batchOfA = ShapedType::kDynamic;
  int64_t batchOfB = ShapedType::kDynamic;

  /// The size of the output-space dim `bit` (a DimsAttr bit).
  int64_t get(unsigned bit) const {
    return bit == DimsAttr::kB ? batch : bit == DimsAttr::kM ? m : n;
  }
};

/// The output-space dims in order, with the names diagnostics use for them.
constexpr std::tuple<unsigned, const char *, const char *> kOutputDims[] = {
    {DimsAttr::kB, "batch", "the batch size"},
    {DimsAttr::kM, "m", "M"},
    {DimsAttr::kN, "n", "N"}};
} // namespace

static bool conflict(int64_t x, int64_t y) {
  return !ShapedType::isDynamic(x) && !ShapedType::isDynamic(y) && x != y;
}

static int64_t merge(int64_t x, int64_t y) {
  return ShapedType::isDynamic(x) ? y : x;
}

static GemmSizes computeSizes(GemmOp op) {
  GemmSizes sizes;
  auto a = cast<RankedTensorType>(op.getA().getType());
  auto b = cast<RankedTensorType>(op.getB().getType());
  int64_t ra = a.getRank(), rb = b.getRank();
  int64_t aRows = a.getDimSize(ra - 2), aCols = a.getDimSize(ra - 1);
  int64_t bRows = b.getDimSize(rb - 2), bCols = b.getDimSize(rb - 1);
  sizes.m = op.getTransposeA() ? aCols : aRows;
  sizes.kOfA = op.getTransposeA() ? aRows : aCols;
  sizes.kOfB = op.getTransposeB() ? bCols : bRows;
  sizes.n = op.getTransposeB() ? bRows : bCols;
  // The product fills the even columns of an output space twice as wide.
  if (op.getAccumulatorHalfN() && !ShapedType::isDynamic(sizes.n))
    sizes.n *= 2;
  if (ra == 3)
    sizes.batchOfA = a.getDimSize(0);
  if (rb == 3)
    sizes.batchOfB = b.getDimSize(0);
  sizes.batch = merge(sizes.batchOfA, sizes.batchOfB);
  return sizes;
}

static bool isSupportedOperandType(Type type) {
  return type.isBF16() || type.isF16() || type.isF32();
}

/// Checks that a tensor spanning `mask` agrees with the GEMM's static sizes.
static LogicalResult verifySizes(GemmOp op, RankedTensorType type,
                                 unsigned mask, const GemmSizes &sizes,
                                 const Twine &what, unsigned period = 0) {
  unsigned index = 0;
  for (auto [bit, name, sizeName] : kOutputDims) {
    if (!(mask & bit))
      continue;
    int64_t size = type.getDimSize(index++);
    int64_t expected = sizes.get(bit);
    if (bit == DimsAttr::kN && period) {
      // n mod p: p columns, whatever N is.
      if (conflict(size, period))
        return op.emitOpError()
               << what << " (" << type << ") spans n mod " << period
               << " but has size " << size << " along it; expected " << period;
      continue;
    }
    if (bit == DimsAttr::kN && (mask & DimsAttr::kHalves) &&
        !ShapedType::isDynamic(expected) && expected % 2)
      return op.emitOpError()
             << what
             << " spans n halves, but the GEMM has an odd N = " << expected
             << "; n halves needs an even N";
    if (bit == DimsAttr::kN && (mask & DimsAttr::kHalfN) &&
        !ShapedType::isDynamic(expected)) {
      if (expected % 2)
        return op.emitOpError()
               << what << " spans n/2, the even columns, but the GEMM has an "
               << "odd N = " << expected << "; n/2 needs an even N";
      if (conflict(size, expected / 2))
        return op.emitOpError() << what << " (" << type << ") has size " << size
                                << " along n/2, but the GEMM has N / 2"
                                << " = " << expected / 2;
      continue;
    }
    if (conflict(size, expected))
      return op.emitOpError()
             << what << " (" << type << ") has size " << size << " along "
             << name << ", but the GEMM has " << sizeName << " = " << expected;
  }
  return success();
}

//===----------------------------------------------------------------------===//
// GemmOp
//===----------------------------------------------------------------------===//

void GemmOp::build(OpBuilder &builder, OperationState &state,
                   TypeRange resultTypes, ArrayRef<DimsAttr> resultDims,
                   Value a, Value b, bool transposeA, bool transposeB, Value c,
                   Value alpha, Value beta, ValueRange inputs,
                   ArrayRef<DimsAttr> inputDims) {
  SmallVector<Attribute> inputDimAttrs(inputDims.begin(), inputDims.end());
  SmallVector<Attribute> resultDimAttrs(resultDims.begin(), resultDims.end());
  build(builder, state, resultTypes, a, b, c, alpha, beta, inputs,
        transposeA ? builder.getUnitAttr() : UnitAttr(),
        transposeB ? builder.getUnitAttr() : UnitAttr(),
        /*b_halves=*/UnitAttr(), /*accumulator_half_n=*/UnitAttr(),
        builder.getArrayAttr(inputDimAttrs),
        builder.getArrayAttr(resultDimAttrs));
  SmallVector<Type> argTypes{builder.getF32Type()};
  for (Value input : inputs)
    argTypes.push_back(isa<ShapedType>(input.getType()) ? builder.getF32Type()
                                                        : input.getType());
  SmallVector<Location> argLocs(argTypes.size(), state.location);
  OpBuilder::InsertionGuard guard(builder);
  builder.createBlock(state.regions.front().get(), {}, argTypes, argLocs);
}

bool GemmOp::isBatched() {
  return cast<RankedTensorType>(getA().getType()).getRank() == 3 ||
         cast<RankedTensorType>(getB().getType()).getRank() == 3;
}

DimsAttr GemmOp::getOutputSpaceDims() {
  return DimsAttr::get(getContext(), DimsAttr::kM | DimsAttr::kN |
                                         (isBatched() ? DimsAttr::kB : 0));
}

YieldOp GemmOp::getYield() {
  return cast<YieldOp>(getEpilogueBlock().getTerminator());
}

ParseResult GemmOp::parse(OpAsmParser &parser, OperationState &result) {
  Builder &builder = parser.getBuilder();
  OpAsmParser::UnresolvedOperand a, b, c, alpha, beta;
  bool hasC = false, hasAlpha = false, hasBeta = false;
  Type cType;
  if (parser.parseOperand(a) || parser.parseComma() || parser.parseOperand(b))
    return failure();
  if (succeeded(parser.parseOptionalKeyword("transpose_a")))
    result.addAttribute(getTransposeAAttrName(result.name),
                        builder.getUnitAttr());
  if (succeeded(parser.parseOptionalKeyword("transpose_b")))
    result.addAttribute(getTransposeBAttrName(result.name),
                        builder.getUnitAttr());
  if (succeeded(parser.parseOptionalKeyword("b_halves")))
    result.addAttribute(getBHalvesAttrName(result.name), builder.getUnitAttr());
  if (succeeded(parser.parseOptionalKeyword("accumulator"))) {
    SMLoc loc = parser.getCurrentLocation();
    unsigned mask, period;
    if (parseDimsList(parser, mask, period))
      return failure();
    if (mask != (DimsAttr::kM | DimsAttr::kN | DimsAttr::kHalfN) || period)
      return parser.emitError(loc)
             << "the accumulator may only be declared [m, n/2] (the product "
                "at the even columns), got "
             << stringifyDims(mask);
    result.addAttribute(getAccumulatorHalfNAttrName(result.name),
                        builder.getUnitAttr());
  }
  if (succeeded(parser.parseOptionalKeyword("c"))) {
    hasC = true;
    if (parser.parseLParen() || parser.parseOperand(c) ||
        parser.parseColonType(cType) || parser.parseRParen())
      return failure();
  }
  if (succeeded(parser.parseOptionalKeyword("alpha"))) {
    hasAlpha = true;
    if (parser.parseLParen() || parser.parseOperand(alpha) ||
        parser.parseRParen())
      return failure();
  }
  if (succeeded(parser.parseOptionalKeyword("beta"))) {
    hasBeta = true;
    if (parser.parseLParen() || parser.parseOperand(beta) ||
        parser.parseRParen())
      return failure();
  }

  // ins(%x : type [dims], %s : f32, ...)
  SmallVector<OpAsmParser::UnresolvedOperand> inputs;
  SmallVector<Type> inputTypes;
  SmallVector<Attribute> inputDims;
  if (succeeded(parser.parseOptionalKeyword("ins"))) {
    auto parseInput = [&]() -> ParseResult {
      Type type;
      if (parser.parseOperand(inputs.emplace_back()) ||
          parser.parseColonType(type))
        return failure();
      inputTypes.push_back(type);
      unsigned mask = 0, period = 0;
      if (isa<ShapedType>(type) && parseDimsList(parser, mask, period))
        return failure();
      inputDims.push_back(DimsAttr::get(builder.getContext(), mask, period));
      return success();
    };
    if (parser.parseCommaSeparatedList(OpAsmParser::Delimiter::Paren,
                                       parseInput))
      return failure();
  }

  // : typeA, typeB -> (type [dims], ...)
  Type aType, bType;
  SmallVector<Attribute> resultDims;
  auto parseResult = [&]() -> ParseResult {
    unsigned mask, period;
    if (parser.parseType(result.types.emplace_back()) ||
        parseDimsList(parser, mask, period))
      return failure();
    resultDims.push_back(DimsAttr::get(builder.getContext(), mask, period));
    return success();
  };
  if (parser.parseColonType(aType) || parser.parseComma() ||
      parser.parseType(bType) || parser.parseArrow() ||
      parser.parseCommaSeparatedList(OpAsmParser::Delimiter::Paren,
                                     parseResult))
    return failure();
  if (parser.parseOptionalAttrDictWithKeyword(result.attributes))
    return failure();

  Type f32 = builder.getF32Type();
  if (parser.resolveOperand(a, aType, result.operands) ||
      parser.resolveOperand(b, bType, result.operands) ||
      (hasC && parser.resolveOperand(c, cType, result.operands)) ||
      (hasAlpha && parser.resolveOperand(alpha, f32, result.operands)) ||
      (hasBeta && parser.resolveOperand(beta, f32, result.operands)) ||
      parser.resolveOperands(inputs, inputTypes, parser.getNameLoc(),
                             result.operands))
    return failure();
  result.addAttribute(getInputDimsAttrName(result.name),
                      builder.getArrayAttr(inputDims));
  result.addAttribute(getResultDimsAttrName(result.name),
                      builder.getArrayAttr(resultDims));
  result.addAttribute(
      getOperandSegmentSizesAttrName(result.name),
      builder.getDenseI32ArrayAttr({1, 1, hasC, hasAlpha, hasBeta,
                                    static_cast<int32_t>(inputs.size())}));

  Region *epilogue = result.addRegion();
  return parser.parseRegion(*epilogue, /*arguments=*/{});
}

void GemmOp::print(OpAsmPrinter &p) {
  p << " " << getA() << ", " << getB();
  if (getTransposeA())
    p << " transpose_a";
  if (getTransposeB())
    p << " transpose_b";
  if (getBHalves())
    p << " b_halves";
  if (getAccumulatorHalfN())
    p << " accumulator [m, n/2]";
  if (Value c = getC())
    p << " c(" << c << " : " << c.getType() << ")";
  if (Value alpha = getAlpha())
    p << " alpha(" << alpha << ")";
  if (Value beta = getBeta())
    p << " beta(" << beta << ")";
  if (!getInputs().empty()) {
    p << " ins(";
    for (auto [i, input] : llvm::enumerate(getInputs())) {
      if (i)
        p << ", ";
      p << input << " : " << input.getType();
      if (isa<ShapedType>(input.getType()))
        p << " " << stringifyDims(getInputDimsAt(i));
    }
    p << ")";
  }
  p << " : " << getA().getType() << ", " << getB().getType() << " -> (";
  for (auto [i, type] : llvm::enumerate(getResultTypes())) {
    if (i)
      p << ", ";
    p << type << " " << stringifyDims(getResultDimsAt(i));
  }
  p << ")";
  p.printOptionalAttrDictWithKeyword(
      (*this)->getAttrs(), {getOperandSegmentSizesAttrName(),
                            getTransposeAAttrName(), getTransposeBAttrName(),
                            getBHalvesAttrName(), getAccumulatorHalfNAttrName(),
                            getInputDimsAttrName(), getResultDimsAttrName()});
  p << " ";
  p.printRegion(getEpilogue(), /*printEntryBlockArgs=*/true);
}

LogicalResult GemmOp::verify() {
  auto aType = cast<RankedTensorType>(getA().getType());
  auto bType = cast<RankedTensorType>(getB().getType());
  Type elementType = aType.getElementType();
  if (!isSupportedOperandType(elementType))
    return emitOpError() << "operand A has element type " << elementType
                         << "; expected bf16, f16 or f32";
  if (bType.getElementType() != elementType)
    return emitOpError() << "operands A and B must have the same element type, "
                            "got "
                         << elementType << " and " << bType.getElementType();
  if (aType.getRank() != 2 && aType.getRank() != 3)
    return emitOpError() << "operand A must have rank 2 ([M, K], or [K, M] "
                            "with transpose_a) or rank 3 (batched), got rank "
                         << aType.getRank();
  if (bType.getRank() != 2 && bType.getRank() != 3)
    return emitOpError() << "operand B must have rank 2 ([K, N], or [N, K] "
                            "with transpose_b) or rank 3 (batched), got rank "
                         << bType.getRank();

  GemmSizes sizes = computeSizes(*this);
  if (conflict(sizes.kOfA, sizes.kOfB))
    return emitOpError() << "contraction size mismatch: op(A) has K = "
                         << sizes.kOfA << " but op(B) has K = " << sizes.kOfB;
  if (conflict(sizes.batchOfA, sizes.batchOfB))
    return emitOpError() << "batch size mismatch: A has " << sizes.batchOfA
                         << " batches but B has " << sizes.batchOfB;

  bool batched = isBatched();
  unsigned space = getOutputSpaceDims().getMask();
  if (getBHalves()) {
    auto refuse = [&](const Twine &what) {
      return emitOpError() << "has b_halves (op(B)'s column pairs stored as "
                              "B's two halves) "
                           << what;
    };
    if (!getTransposeB())
      return refuse("without transpose_b: the halves are halves of B's rows, "
                    "B stored [N, K]");
    if (batched)
      return refuse("and a batched operand, which it does not support");
    if (getAccumulatorHalfN())
      return refuse("and an accumulator [m, n/2], whose op(B) has no pairs");
    if (!ShapedType::isDynamic(sizes.n) && sizes.n % 2)
      return refuse("but N = " + Twine(sizes.n) + " is odd; it must be even");
  }
  if (getAccumulatorHalfN()) {
    auto refuse = [&](const Twine &what) {
      return emitOpError() << "has an accumulator [m, n/2] (the product at "
                              "the even columns) and "
                           << what << ", which it does not support";
    };
    if (batched)
      return refuse("a batched operand");
    if (getC())
      return refuse("a C operand");
    for (unsigned i = 0, e = getNumResults(); i < e; ++i)
      if (getResultDimsAt(i).isHalfN())
        return refuse("output #" + Twine(i) + " spanning [m, n/2]");
  }
  if (Value c = getC()) {
    auto cType = cast<RankedTensorType>(c.getType());
    if (cType.getRank() != llvm::popcount(space))
      return emitOpError() << "C must span the output space "
                           << stringifyDims(space) << ", got " << cType;
    if (!isSupportedOperandType(cType.getElementType()))
      return emitOpError() << "C has element type " << cType.getElementType()
                           << "; expected f32, bf16 or f16";
    if (failed(verifySizes(*this, cType, space, sizes, "C")))
      return failure();
  } else if (getBeta()) {
    return emitOpError() << "'beta' scales C, but there is no C operand";
  }

  if (getInputDims().size() != getInputs().size())
    return emitOpError() << "has " << getInputs().size()
                         << " epilogue inputs but " << getInputDims().size()
                         << " input_dims";
  for (auto [i, input] : llvm::enumerate(getInputs())) {
    unsigned mask = getInputDimsAt(i).getMask();
    unsigned period = getInputDimsAt(i).getPeriod();
    std::string what = "epilogue input #" + std::to_string(i);
    auto tensorType = dyn_cast<RankedTensorType>(input.getType());
    if (!tensorType) {
      Type type = input.getType();
      if (!type.isF32() && !type.isSignlessInteger(64))
        return emitOpError() << what << " has type " << type
                             << "; a scalar input must be f32 (or i64 for a "
                                "dropout seed)";
      if (mask != 0 || period != 0)
        return emitOpError() << "scalar " << what << " must span [], not "
                             << stringifyDims(mask, period);
      continue;
    }
    if (tensorType.getRank() == 0)
      return emitOpError() << what
                           << " is a rank-0 tensor; pass a scalar f32 value "
                              "instead";
    if (!isSupportedOperandType(tensorType.getElementType()))
      return emitOpError() << what << " has element type "
                           << tensorType.getElementType()
                           << "; expected f32, bf16 or f16";
    if (mask & (DimsAttr::kHalfN | DimsAttr::kHalves))
      return emitOpError() << what << " spans " << stringifyDims(mask)
                           << "; only an output may span n/2 or n halves (an "
                              "input spans n, every column in order)";
    if (period && !(mask & DimsAttr::kN))
      return emitOpError() << what << " has a period of " << period
                           << " columns but does not span n";
    if (period && !llvm::isPowerOf2_32(period))
      return emitOpError() << what << " spans n mod " << period
                           << "; the period must be a power of 2";
    if (period && getAccumulatorHalfN())
      return emitOpError() << what << " spans " << stringifyDims(mask, period)
                           << "; an accumulator [m, n/2] takes no input that "
                              "spans n mod p";
    if (static_cast<int64_t>(getDimsRank(mask)) != tensorType.getRank())
      return emitOpError() << what << " spans " << stringifyDims(mask, period)
                           << " but has rank " << tensorType.getRank();
    if ((mask & DimsAttr::kB) && !batched)
      return emitOpError() << what << " spans b, but the GEMM is not batched";
    if (failed(verifySizes(*this, tensorType, mask, sizes, what, period)))
      return failure();
  }

  if (getResultDims().size() != getNumResults())
    return emitOpError() << "has " << getNumResults() << " outputs but "
                         << getResultDims().size() << " result_dims";
  if (getNumResults() == 0)
    return emitOpError() << "must have at least one output";
  for (auto [i, result] : llvm::enumerate(getResults())) {
    auto type = cast<RankedTensorType>(result.getType());
    unsigned mask = getResultDimsAt(i).getMask();
    std::string what = "output #" + std::to_string(i);
    if (!isSupportedOperandType(type.getElementType()))
      return emitOpError() << what << " has element type "
                           << type.getElementType()
                           << "; expected f32, bf16 or f16";
    if (unsigned period = getResultDimsAt(i).getPeriod())
      return emitOpError() << what << " spans " << stringifyDims(mask, period)
                           << "; only an input may span n mod p (an output "
                              "spans n, n/2 or neither)";
    if (!(mask & (DimsAttr::kM | DimsAttr::kN)))
      return emitOpError() << what << " spans " << stringifyDims(mask)
                           << "; an output must span m, n or both";
    if ((mask & DimsAttr::kHalfN) &&
        (!(mask & DimsAttr::kN) || !(mask & DimsAttr::kM)))
      return emitOpError() << what << " spans " << stringifyDims(mask)
                           << "; an output spanning n/2 must also span m "
                              "([m, n/2])";
    if ((mask & DimsAttr::kHalves) &&
        mask != (DimsAttr::kM | DimsAttr::kN | DimsAttr::kHalves))
      return emitOpError() << what << " spans " << stringifyDims(mask)
                           << "; an output stored in halves spans [m, n "
                              "halves] (unbatched, neither n/2 nor only n)";
    if (static_cast<int64_t>(getDimsRank(mask)) != type.getRank())
      return emitOpError() << what << " spans " << stringifyDims(mask)
                           << " but has rank " << type.getRank();
    if (batched && !(mask & DimsAttr::kB))
      return emitOpError() << what << " of a batched GEMM must span b";
    if (!batched && (mask & DimsAttr::kB))
      return emitOpError() << what << " spans b, but the GEMM is not batched";
    if (failed(verifySizes(*this, type, mask, sizes, what)))
      return failure();
  }
  return success();
}

/// Whether `type` may flow through epilogue arithmetic.
static bool isEpilogueScalarType(Type type) {
  return type.isF32() || type.isSignlessInteger();
}

/// Verifies the epilogue of `op` (a coda.gemm or coda.tile_epilogue): its
/// arguments, ops and yield, and the dims of what it yields.
static LogicalResult verifyEpilogue(EpilogueOpInterface op) {
  Block &block = op.getEpilogueBlock();
  unsigned expectedArgs = op.getNumEpilogueInputs() + 1;
  if (block.getNumArguments() != expectedArgs)
    return op->emitOpError() << "epilogue must have " << expectedArgs
                             << " arguments (the accumulator, then one per "
                                "epilogue input), got "
                             << block.getNumArguments();
  Type f32 = Float32Type::get(op->getContext());
  if (op.getAccumulator().getType() != f32)
    return op->emitOpError()
           << "epilogue argument #0 (the accumulator) must be "
              "f32, got "
           << op.getAccumulator().getType();
  for (unsigned i = 0, e = op.getNumEpilogueInputs(); i < e; ++i) {
    Type type = op.getEpilogueInputType(i);
    Type expected = isa<ShapedType>(type) ? f32 : type;
    if (op.getInputArg(i).getType() != expected)
      return op->emitOpError()
             << "epilogue argument #" << i + 1 << " must be " << expected
             << " for epilogue input #" << i << " of type " << type << ", got "
             << op.getInputArg(i).getType();
  }

  // The block's last op is a terminator (the generic verifier checks that),
  // but not necessarily ours.
  if (!isa<YieldOp>(block.back()))
    return block.back().emitOpError()
           << "cannot end a GEMM epilogue: an epilogue ends with 'coda.yield'";

  for (Operation &inner : block.without_terminator()) {
    if (!isa<arith::ArithDialect, math::MathDialect, CodaDialect>(
            inner.getDialect()))
      return inner.emitOpError()
             << "cannot be fused into a GEMM epilogue: an epilogue may only "
                "contain scalar arith, math and coda ops";
    for (Type type :
         llvm::concat<Type>(inner.getOperandTypes(), inner.getResultTypes())) {
      if (!isEpilogueScalarType(type))
        return inner.emitOpError()
               << "computes on " << type
               << ", but epilogue math is scalar f32 (and integers for "
                  "seeds): convert inputs to f32";
    }
  }

  auto yield = cast<YieldOp>(block.getTerminator());
  if (yield.getValues().size() != op.getNumEpilogueOutputs())
    return yield.emitOpError()
           << "yields " << yield.getValues().size() << " values, but the "
           << op->getName() << " has " << op.getNumEpilogueOutputs()
           << " outputs";

  EpilogueDims dims(op);
  for (auto dropout : block.getOps<DropoutOp>())
    if (dims.getMask(dropout.getSeed()) != 0)
      return dropout.emitOpError()
             << "seed varies along "
             << stringifyDims(dims.getMask(dropout.getSeed()))
             << "; the seed must be the same for every element: pass it as a "
                "scalar i64 input";
  for (auto [i, value] : llvm::enumerate(yield.getValues())) {
    unsigned outMask = op.getResultDimsAt(i).getMask();
    if (value.getDefiningOp<ColReduceOp>() && (outMask & DimsAttr::kM))
      return yield.emitOpError()
             << "yields a column reduction to output #" << i << ", which spans "
             << stringifyDims(outMask)
             << "; a column reduction has one value per column: declare the "
                "output "
             << stringifyDims(outMask & ~DimsAttr::kM);
    unsigned extra = dims.getMask(value) & ~outMask;
    if (extra)
      return yield.emitOpError()
             << "yields to output #" << i << ", which spans "
             << stringifyDims(outMask) << ", a value that varies along "
             << stringifyDims(extra)
             << "; reduce it first (coda.row_reduce over n, coda.col_reduce "
                "over m) or declare the output "
             << stringifyDims(outMask | extra);
  }
  return success();
}

LogicalResult GemmOp::verifyRegions() { return verifyEpilogue(*this); }

//===----------------------------------------------------------------------===//
// TileEpilogueOp
//===----------------------------------------------------------------------===//

YieldOp TileEpilogueOp::getYield() {
  return cast<YieldOp>(getEpilogueBlock().getTerminator());
}

LogicalResult TileEpilogueOp::verify() {
  auto count = [&](StringRef what, size_t operands, StringRef attrName,
                   size_t attrSize) -> LogicalResult {
    if (operands == attrSize)
      return success();
    return emitOpError() << "has " << operands << " " << what << " but "
                         << attrSize << " " << attrName;
  };
  if (failed(count("inputs", getInputs().size(), "input_types",
                   getInputTypes().size())) ||
      failed(count("inputs", getInputs().size(), "input_dims",
                   getInputDims().size())) ||
      failed(count("outputs", getOutputs().size(), "output_types",
                   getOutputTypes().size())) ||
      failed(count("outputs", getOutputs().size(), "result_dims",
                   getResultDims().size())))
    return failure();
  if (static_cast<bool>(getC()) != static_cast<bool>(getCType()))
    return emitOpError() << "must have c_type exactly when it has c";
  int64_t rows = getPlan().getConsumerRows();
  if (static_cast<int64_t>(getAccumulators().size()) != rows / 64)
    return emitOpError() << "has " << getAccumulators().size()
                         << " accumulator fragments, but its plan gives each "
                            "consumer "
                         << rows << " rows of a tile, " << rows / 64
                         << " fragments of 64";
  bool exchanges = getPlan().getClusterN() > 1;
  if (static_cast<bool>(getExchange()) != exchanges ||
      static_cast<bool>(getOrdinal()) != exchanges)
    return emitOpError() << "must have an exchange buffer and a tile ordinal "
                            "exactly when its plan has cluster_n > 1 (its "
                            "cluster_n is "
                         << getPlan().getClusterN() << ")";
  return success();
}

LogicalResult TileEpilogueOp::verifyRegions() {
  if (failed(verifyEpilogue(*this)))
    return failure();
  auto reductions = getEpilogueBlock().getOps<RowReduceOp>();
  int64_t count = std::distance(reductions.begin(), reductions.end());
  if (!getRowPartials().empty() &&
      (static_cast<int64_t>(getRowPartials().size()) != count ||
       getPlan().getClusterN() != 1))
    return emitOpError() << "has " << getRowPartials().size()
                         << " row_partials, but they must be one per row "
                            "reduction of the epilogue ("
                         << count
                         << " here) under a plan without a cluster along N "
                            "(its cluster_n is "
                         << getPlan().getClusterN() << ")";
  return success();
}

namespace {
/// Removes epilogue inputs the epilogue never reads.
struct EraseUnusedInputs final : OpRewritePattern<GemmOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(GemmOp op,
                                PatternRewriter &rewriter) const override {
    llvm::BitVector unusedArgs(op.getEpilogueBlock().getNumArguments());
    SmallVector<Attribute> keptDims;
    for (unsigned i = 0, e = op.getInputs().size(); i < e; ++i) {
      if (op.getInputArg(i).use_empty())
        unusedArgs.set(i + 1);
      else
        keptDims.push_back(op.getInputDimsAt(i));
    }
    if (unusedArgs.none())
      return failure();
    rewriter.modifyOpInPlace(op, [&] {
      for (int i = op.getInputs().size() - 1; i >= 0; --i)
        if (unusedArgs.test(i + 1))
          op.getInputsMutable().erase(i);
      op.setInputDimsAttr(rewriter.getArrayAttr(keptDims));
      op.getEpilogueBlock().eraseArguments(unusedArgs);
    });
    return success();
  }
};

/// Drops an alpha that is the constant 1.
struct EraseUnitAlpha final : OpRewritePattern<GemmOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(GemmOp op,
                                PatternRewriter &rewriter) const override {
    Value alpha = op.getAlpha();
    if (!alpha || !matchPattern(alpha, m_OneFloat()))
      return failure();
    rewriter.modifyOpInPlace(op, [&] { op.getAlphaMutable().clear(); });
    return success();
  }
};
} // namespace

void GemmOp::getCanonicalizationPatterns(RewritePatternSet &results,
                                         MLIRContext *context) {
  results.add<EraseUnusedInputs, EraseUnitAlpha>(context);
}

//===----------------------------------------------------------------------===//
// DropoutOp
//===----------------------------------------------------------------------===//

LogicalResult DropoutOp::verify() {
  float p = getP().convertToFloat();
  if (!(p >= 0.0f && p <= 1.0f))
    return emitOpError() << "dropout probability must be in [0, 1], got " << p;
  if (getStreamAttr().getInt() < 0)
    return emitOpError() << "dropout stream must be non-negative, got "
                         << getStreamAttr().getInt();
  return success();
}

uint32_t DropoutOp::getThreshold() {
  return static_cast<uint32_t>(
      std::lround(static_cast<double>(getP().convertToFloat()) * 65536.0));
}

OpFoldResult DropoutOp::fold(FoldAdaptor) {
  if (getThreshold() == 0)
    return getInput();
  return {};
}

//===----------------------------------------------------------------------===//
// PartnerOp
//===----------------------------------------------------------------------===//

LogicalResult PartnerOp::verify() {
  int64_t distance = getDistance();
  if (distance <= 0 || !llvm::isPowerOf2_64(distance))
    return emitOpError() << "distance must be a power of 2 (1 pairs columns "
                            "2j and 2j + 1), got "
                         << distance;
  return success();
}

//===----------------------------------------------------------------------===//
// GroupReduceOp
//===----------------------------------------------------------------------===//

LogicalResult GroupReduceOp::verify() {
  int64_t width = getWidth();
  if (width <= 0 || !llvm::isPowerOf2_64(width))
    return emitOpError() << "width must be a power of 2 (the columns of a "
                            "head, say 64 or 128), got "
                         << width;
  return success();
}

//===----------------------------------------------------------------------===//
// ColReduceOp
//===----------------------------------------------------------------------===//

LogicalResult ColReduceOp::verify() {
  for (Operation *user : getResult().getUsers())
    if (!isa<YieldOp>(user))
      return emitOpError()
             << "result is used by '" << user->getName()
             << "', but a column reduction is complete only after every row "
                "has been computed: it can only be yielded to an output";
  return success();
}
