//===- coda-ir-fuzzer.cpp - structure-aware fuzzing of coda IR ------------===//
//
// Builds a coda program from the fuzzer's bytes, op by op, so that every
// input is a program that verifies (not a parse error): operand types,
// layouts (B's column pairs in halves among them), batching, C and alpha, an
// accumulator [m, n/2], epilogue inputs of every kind, then up to
// 24 epilogue ops (arith and math, activations and their derivatives,
// dropout, row, column and group reductions, partners, coordinates, selects) on
// earlier values, and outputs of every dims the values allow ([m, n/2] and
// [m, n halves] among them). The program
// then runs through each of coda's pipelines on a copy of its own: the
// canonicalizer, coda-derive-backward, the CPU reference lowering, the
// GPU lowering's coda passes (coda-plan-kernels, coda-to-gpu,
// coda-lower-tile-epilogues), the CPU and GPU lowerings again on the
// derived backward programs, and coda-split-rows (its reductions separated)
// on both. A pipeline may refuse a program, but only with
// an error; it must not crash, trip a sanitizer, fail silently or produce IR
// that does not verify. A built program that does not verify is a bug of
// this generator or of the verifier: the fuzzer stops and prints it.
//
// Build it like coda-dsl-fuzzer (docs/testing.md): scripts/setup.sh does,
// in build-fuzz/.
//
//===----------------------------------------------------------------------===//

#include "coda/Dialect/Coda/IR/CodaOps.h"
#include "coda/Dialect/Coda/IR/EpilogueDims.h"
#include "coda/Registration/Registration.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/MathExtras.h"
#include "llvm/Support/raw_ostream.h"

#include <fuzzer/FuzzedDataProvider.h>

#include <cstdlib>

using namespace mlir;
using namespace mlir::coda;

/// See coda-dsl-fuzzer: libMLIR.so is not instrumented.
extern "C" const char *__asan_default_options() {
  return "allow_user_poisoning=0";
}

namespace {

constexpr unsigned kN = DimsAttr::kN, kM = DimsAttr::kM, kB = DimsAttr::kB;

/// Builds one program from the fuzzer's bytes.
class Generator {
public:
  Generator(FuzzedDataProvider &in, MLIRContext &context)
      : in(in), b(&context), loc(b.getUnknownLoc()) {}

  OwningOpRef<ModuleOp> build();

private:
  /// A tensor type over `mask` of `element`, every size dynamic.
  RankedTensorType tensorOver(unsigned mask, Type element) {
    return RankedTensorType::get(
        SmallVector<int64_t>(getDimsRank(mask), ShapedType::kDynamic), element);
  }
  Type pickElementType() {
    Type types[] = {b.getBF16Type(), b.getF16Type(), b.getF32Type()};
    return types[in.ConsumeIntegralInRange<int>(0, 2)];
  }
  /// A size: dynamic, or one of a few static sizes.
  int64_t pickSize(ArrayRef<int64_t> sizes) {
    size_t i = in.ConsumeIntegralInRange<size_t>(0, sizes.size());
    return i == sizes.size() ? ShapedType::kDynamic : sizes[i];
  }
  /// An earlier value of the epilogue.
  Value pick() {
    return values[in.ConsumeIntegralInRange<size_t>(0, values.size() - 1)];
  }
  void addOp(OpBuilder &body, Value seed);

  FuzzedDataProvider &in;
  OpBuilder b;
  Location loc;
  SmallVector<Value> values;
  unsigned space = 0;
};

OwningOpRef<ModuleOp> Generator::build() {
  OwningOpRef<ModuleOp> module = ModuleOp::create(loc);
  Type element = pickElementType();
  bool batched = in.ConsumeIntegralInRange<int>(0, 7) == 0;
  bool transposeA = in.ConsumeBool(), transposeB = in.ConsumeBool();
  int64_t m = pickSize({1, 8, 100, 128, 300});
  int64_t n = pickSize({8, 64, 96, 128, 256, 1000, 3});
  int64_t k = pickSize({16, 64, 72, 4096});
  auto matrix = [&](int64_t rows, int64_t cols, bool transposed) {
    SmallVector<int64_t> shape;
    if (batched)
      shape.push_back(4);
    shape.append(transposed ? SmallVector<int64_t>{cols, rows}
                            : SmallVector<int64_t>{rows, cols});
    return RankedTensorType::get(shape, element);
  };
  space = kM | kN | (batched ? kB : 0);
  bool withC = in.ConsumeIntegralInRange<int>(0, 3) == 0;
  bool withAlpha = in.ConsumeIntegralInRange<int>(0, 3) == 0;
  bool withDropout = in.ConsumeBool();
  // Sometimes a gated activation's pair layouts (unbatched, N even): B
  // stored [N, K] with op(B)'s column pairs in its two halves (b_halves),
  // or an accumulator [m, n/2] (without C), whose op(B) is N / 2 wide.
  bool pairable = !batched && (ShapedType::isDynamic(n) || n % 2 == 0);
  int pairs = pairable ? in.ConsumeIntegralInRange<int>(0, 5) : 0;
  bool bHalves = pairs == 1 && transposeB;
  bool accumulatorHalfN = pairs == 2 && !withC;
  Type aType = matrix(m, k, transposeA);
  Type bType = matrix(
      k, accumulatorHalfN && !ShapedType::isDynamic(n) ? n / 2 : n, transposeB);

  SmallVector<Type> argTypes{aType, bType};
  if (withC)
    argTypes.push_back(tensorOver(space, pickElementType()));
  if (withAlpha)
    argTypes.push_back(b.getF32Type());
  if (withC)
    argTypes.push_back(b.getF32Type());
  SmallVector<unsigned> inputMasks, inputPeriods;
  unsigned numInputs = in.ConsumeIntegralInRange<unsigned>(0, 3);
  unsigned inputMaskChoices[] = {space, kN, kM, 0, kN | (space & kB)};
  for (unsigned i = 0; i < numInputs; ++i) {
    unsigned mask = inputMaskChoices[in.ConsumeIntegralInRange<int>(0, 4)];
    // Sometimes p columns read at n mod p.
    unsigned period = 0;
    if ((mask & kN) && !accumulatorHalfN && in.ConsumeBool())
      period = 1u << in.ConsumeIntegralInRange<unsigned>(0, 7);
    inputMasks.push_back(mask);
    inputPeriods.push_back(period);
    RankedTensorType type = tensorOver(mask, pickElementType());
    if (period) {
      SmallVector<int64_t> shape(type.getShape());
      shape.back() = period;
      type = RankedTensorType::get(shape, type.getElementType());
    }
    argTypes.push_back(mask ? Type(type) : b.getF32Type());
  }
  if (withDropout) {
    inputMasks.push_back(0);
    inputPeriods.push_back(0);
    argTypes.push_back(b.getI64Type());
  }

  // Outputs are chosen after the epilogue; the function's type is set then.
  b.setInsertionPointToEnd(module->getBody());
  auto func = func::FuncOp::create(b, loc, "program",
                                   b.getFunctionType(argTypes, TypeRange{}));
  Block *entry = func.addEntryBlock();
  b.setInsertionPointToEnd(entry);
  unsigned next = 2;
  Value c = withC ? entry->getArgument(next++) : Value();
  Value alpha = withAlpha ? entry->getArgument(next++) : Value();
  Value beta = withC ? entry->getArgument(next++) : Value();
  SmallVector<Value> inputs;
  SmallVector<DimsAttr> inputDims;
  for (auto [mask, period] : llvm::zip_equal(inputMasks, inputPeriods)) {
    inputs.push_back(entry->getArgument(next++));
    inputDims.push_back(DimsAttr::get(b.getContext(), mask, period));
  }

  // The epilogue, in a block of its own until the outputs are known.
  auto scratch = std::make_unique<Block>();
  Value acc = scratch->addArgument(b.getF32Type(), loc);
  for (Value input : inputs)
    scratch->addArgument(isa<ShapedType>(input.getType()) ? b.getF32Type()
                                                          : input.getType(),
                         loc);
  OpBuilder body(b.getContext());
  body.setInsertionPointToEnd(scratch.get());
  values.push_back(acc);
  for (BlockArgument arg : scratch->getArguments().drop_front())
    if (arg.getType().isF32())
      values.push_back(arg);
  Value seed = withDropout ? scratch->getArguments().back() : Value();
  unsigned numOps = in.ConsumeIntegralInRange<unsigned>(0, 24);
  for (unsigned i = 0; i < numOps && in.remaining_bytes(); ++i)
    addOp(body, seed);

  // Each value's dims, as the dialect computes them (its analysis runs on
  // the finished op; here the same rule op by op).
  llvm::DenseMap<Value, unsigned> masks;
  masks[acc] = space;
  for (auto [i, arg] : llvm::enumerate(scratch->getArguments().drop_front()))
    masks[arg] = inputMasks[i];
  for (Operation &op : *scratch) {
    SmallVector<unsigned> operandMasks;
    for (Value operand : op.getOperands())
      operandMasks.push_back(masks.lookup(operand));
    for (Value result : op.getResults())
      masks[result] = EpilogueDims::getResultMask(&op, operandMasks, space);
  }

  SmallVector<Value> yielded;
  SmallVector<Type> resultTypes;
  SmallVector<DimsAttr> resultDims;
  unsigned numOutputs = in.ConsumeIntegralInRange<unsigned>(1, 3);
  for (unsigned i = 0; i < numOutputs; ++i) {
    Value value = pick();
    unsigned mask = masks.lookup(value);
    unsigned dims = space;
    switch (in.ConsumeIntegralInRange<int>(0, 5)) {
    case 1: // a row statistic: [m] (and b)
      if (!(mask & kN))
        dims = space & ~kN;
      break;
    case 2: // uniform along m: [n] (and b)
      if (!(mask & kM))
        dims = space & ~kM;
      break;
    case 3: // the even columns
      if ((ShapedType::isDynamic(n) || n % 2 == 0) && !accumulatorHalfN)
        dims = space | DimsAttr::kHalfN;
      break;
    case 5: // the column pairs stored in halves
      if (pairable)
        dims = space | DimsAttr::kHalves;
      break;
    case 4: // a column reduction, [n] (and b)
      value = ColReduceOp::create(
          body, loc, b.getF32Type(),
          ReductionKindAttr::get(
              b.getContext(),
              static_cast<ReductionKind>(in.ConsumeIntegralInRange<uint32_t>(
                  0, getMaxEnumValForReductionKind()))),
          value);
      dims = space & ~kM;
      break;
    default:
      break;
    }
    yielded.push_back(value);
    resultTypes.push_back(tensorOver(dims, pickElementType()));
    resultDims.push_back(DimsAttr::get(b.getContext(), dims));
  }
  YieldOp::create(body, loc, yielded);

  auto gemm =
      GemmOp::create(b, loc, resultTypes, resultDims, entry->getArgument(0),
                     entry->getArgument(1), transposeA, transposeB, c, alpha,
                     beta, inputs, inputDims);
  gemm.setBHalves(bHalves);
  gemm.setAccumulatorHalfN(accumulatorHalfN);
  Block &block = gemm.getEpilogueBlock();
  for (auto [from, to] :
       llvm::zip(scratch->getArguments(), block.getArguments()))
    from.replaceAllUsesWith(to);
  block.getOperations().splice(block.end(), scratch->getOperations());
  func::ReturnOp::create(b, loc, gemm.getResults());
  func.setType(b.getFunctionType(argTypes, resultTypes));
  return module;
}

void Generator::addOp(OpBuilder &body, Value seed) {
  auto constant = [&](float lo, float hi) {
    return arith::ConstantOp::create(
        body, loc,
        body.getF32FloatAttr(in.ConsumeFloatingPointInRange(lo, hi)));
  };
  Value result;
  switch (in.ConsumeIntegralInRange<int>(0, 15)) {
  case 0:
    result = arith::AddFOp::create(body, loc, pick(), pick());
    break;
  case 1:
    result = arith::SubFOp::create(body, loc, pick(), pick());
    break;
  case 2:
    result = arith::MulFOp::create(body, loc, pick(), pick());
    break;
  case 3:
    result = arith::DivFOp::create(body, loc, pick(), pick());
    break;
  case 4:
    result = arith::MaximumFOp::create(body, loc, pick(), pick());
    break;
  case 5:
    result = constant(-4.0f, 4.0f);
    break;
  case 6: {
    Value x = pick();
    switch (in.ConsumeIntegralInRange<int>(0, 10)) {
    case 0:
      result = math::ExpOp::create(body, loc, x);
      break;
    case 1:
      result = math::TanhOp::create(body, loc, x);
      break;
    case 2:
      result = math::SqrtOp::create(body, loc, x);
      break;
    case 3:
      result = math::RsqrtOp::create(body, loc, x);
      break;
    case 4:
      result = math::LogOp::create(body, loc, x);
      break;
    case 5:
      result = math::AbsFOp::create(body, loc, x);
      break;
    case 6:
      result = math::SinOp::create(body, loc, x);
      break;
    case 7:
      result = math::CosOp::create(body, loc, x);
      break;
    case 8:
      result = DetachOp::create(body, loc, body.getF32Type(), x);
      break;
    case 9:
      result = RoundOp::create(body, loc, body.getF32Type(), x,
                               TypeAttr::get(in.ConsumeBool()
                                                 ? Type(body.getBF16Type())
                                                 : Type(body.getF16Type())));
      break;
    default:
      result = arith::NegFOp::create(body, loc, x);
      break;
    }
    break;
  }
  case 7:
  case 8: {
    auto kind = static_cast<ActivationKind>(in.ConsumeIntegralInRange<uint32_t>(
        0, getMaxEnumValForActivationKind()));
    auto attr = ActivationKindAttr::get(body.getContext(), kind);
    result =
        in.ConsumeBool()
            ? ActivationOp::create(body, loc, body.getF32Type(), attr, pick())
                  .getResult()
            : ActivationDerivativeOp::create(body, loc, body.getF32Type(), attr,
                                             pick())
                  .getResult();
    break;
  }
  case 9:
    if (seed) {
      float ps[] = {0.0f, 0.1f, 0.5f, 1.0f};
      result = DropoutOp::create(
          body, loc, body.getF32Type(), pick(), seed,
          llvm::APFloat(ps[in.ConsumeIntegralInRange<int>(0, 3)]),
          in.ConsumeIntegralInRange<uint32_t>(0, 3));
    }
    break;
  case 10: {
    auto kind = ReductionKindAttr::get(
        body.getContext(),
        static_cast<ReductionKind>(in.ConsumeIntegralInRange<uint32_t>(
            0, getMaxEnumValForReductionKind())));
    result =
        in.ConsumeBool()
            ? RowReduceOp::create(body, loc, body.getF32Type(), kind, pick())
                  .getResult()
            : GroupReduceOp::create(
                  body, loc, body.getF32Type(), kind, pick(),
                  body.getI64IntegerAttr(int64_t{1}
                                         << in.ConsumeIntegralInRange(0, 8)))
                  .getResult();
    break;
  }
  case 11:
    result = PartnerOp::create(body, loc, body.getF32Type(), pick(),
                               int64_t{1} << in.ConsumeIntegralInRange(0, 8));
    break;
  case 12:
    result = CoordOp::create(
        body, loc, body.getF32Type(),
        static_cast<OutputDim>(in.ConsumeIntegralInRange<uint32_t>(
            0, getMaxEnumValForOutputDim())));
    break;
  case 13: {
    Value condition = arith::CmpFOp::create(
        body, loc, arith::CmpFPredicate::OLT, pick(), pick());
    result = arith::SelectOp::create(body, loc, condition, pick(), pick());
    break;
  }
  case 14:
    result = math::PowFOp::create(body, loc, pick(), constant(-3.0f, 3.0f));
    break;
  default:
    result = arith::MinimumFOp::create(body, loc, pick(), pick());
    break;
  }
  if (result)
    values.push_back(result);
}

/// How many programs each pipeline ran and refused, printed after every
/// power of 2 of inputs (libFuzzer leaves without running exit handlers).
llvm::StringMap<std::pair<uint64_t, uint64_t>> &getCounts() {
  static llvm::StringMap<std::pair<uint64_t, uint64_t>> counts;
  return counts;
}

void printCounts(uint64_t inputs) {
  llvm::errs() << "coda-ir-fuzzer: after " << inputs << " programs:\n";
  for (const auto &entry : getCounts())
    llvm::errs() << "  " << entry.first() << ": " << entry.second.first
                 << " programs, " << entry.second.second
                 << " refused with an error\n";
}

/// Runs `pipeline` on a copy of `module`; returns the result, or null when
/// the pipeline refused it (with an error, as it must).
OwningOpRef<ModuleOp> runPipeline(ModuleOp module, StringRef pipeline) {
  std::pair<uint64_t, uint64_t> &count = getCounts()[pipeline];
  ++count.first;
  MLIRContext *context = module.getContext();
  OwningOpRef<ModuleOp> copy = module.clone();
  bool reported = false;
  ScopedDiagnosticHandler handler(context, [&](Diagnostic &diagnostic) {
    reported |= diagnostic.getSeverity() == DiagnosticSeverity::Error;
    llvm::raw_null_ostream os;
    os << diagnostic;
    return success();
  });
  PassManager pm(context);
  if (failed(parsePassPipeline(pipeline, pm))) {
    llvm::errs() << "coda-ir-fuzzer: cannot build the pipeline " << pipeline
                 << "\n";
    std::abort();
  }
  if (succeeded(pm.run(*copy)))
    return copy;
  ++count.second;
  if (!reported) {
    llvm::errs() << "coda-ir-fuzzer: " << pipeline
                 << " failed without an error on:\n";
    module.print(llvm::errs());
    std::abort();
  }
  return nullptr;
}

/// The pipelines every program goes through; a derived backward module goes
/// through the lowerings again, and both through the row split.
constexpr const char *kCanonicalize = "canonicalize,cse";
constexpr const char *kDerive = "coda-derive-backward";
constexpr const char *kSplit = "coda-split-rows";
constexpr const char *kLowerings[] = {
    "coda-cpu-pipeline",
    "coda-plan-kernels,coda-to-gpu,coda-lower-tile-epilogues"};

} // namespace

/// The dialects every input's context loads, registered once.
static DialectRegistry &getRegistry() {
  static DialectRegistry registry;
  return registry;
}

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  registerPasses();
  registerDialects(getRegistry());
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  MLIRContext context(getRegistry(), MLIRContext::Threading::DISABLED);
  context.loadAllAvailableDialects();
  FuzzedDataProvider in(data, size);
  OwningOpRef<ModuleOp> module = Generator(in, context).build();
  {
    ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diagnostic) {
      llvm::errs() << diagnostic << "\n";
      return success();
    });
    if (failed(verify(*module))) {
      llvm::errs() << "coda-ir-fuzzer: the generated program does not "
                      "verify:\n";
      module->print(llvm::errs(), OpPrintingFlags().printGenericOpForm());
      std::abort();
    }
  }
  // CODA_IR_FUZZER_PRINT=1 shows each program (to read a corpus).
  if (std::getenv("CODA_IR_FUZZER_PRINT"))
    module->print(llvm::errs());
  runPipeline(*module, kCanonicalize);
  OwningOpRef<ModuleOp> derived = runPipeline(*module, kDerive);
  for (const char *lowering : kLowerings) {
    runPipeline(*module, lowering);
    if (derived)
      runPipeline(*derived, lowering);
  }
  runPipeline(*module, kSplit);
  if (derived)
    runPipeline(*derived, kSplit);
  static uint64_t inputs = 0;
  if (llvm::isPowerOf2_64(++inputs))
    printCounts(inputs);
  return 0;
}
