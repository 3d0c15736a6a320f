//===- EpilogueImport.cpp - the epilogue DSL to a coda program ------------===//
//
// Builds a coda program from a checked epilogue: each node of the program
// becomes one operation of the coda.gemm epilogue region.
//
//===----------------------------------------------------------------------===//

#include "coda/Frontend/EpilogueImport.h"
#include "coda/Dialect/Coda/IR/CodaDialect.h"
#include "coda/Dialect/Coda/IR/CodaOps.h"
#include "coda/Frontend/Diagnostics.h"
#include "coda/Frontend/Sema.h"
#include "coda/Support/SourceFile.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"

using namespace mlir;
using namespace mlir::coda;
using dsl::Node;

static_assert(dsl::kN == DimsAttr::kN && dsl::kM == DimsAttr::kM &&
                  dsl::kHalfN == DimsAttr::kHalfN,
              "the front-end's dims are the dialect's");

namespace {

/// Builds the module of one program.
class ModuleBuilder {
public:
  ModuleBuilder(const dsl::EpilogueProgram &program, llvm::SourceMgr &sourceMgr,
                MLIRContext *context, const EpilogueImportOptions &options)
      : program(program), sourceMgr(sourceMgr), options(options),
        builder(context),
        operandType(options.operandType ? options.operandType
                                        : builder.getBF16Type()) {}

  OwningOpRef<ModuleOp> build();

private:
  Location getLoc(llvm::SMLoc loc);
  /// The argument or result type of a port.
  Type getType(const dsl::ValueType &type);
  DimsAttr getDims(unsigned dims, unsigned period = 0) {
    return DimsAttr::get(builder.getContext(), dims, period);
  }
  Value buildNode(OpBuilder &body, GemmOp gemm, const Node &node,
                  ArrayRef<Value> values);

  const dsl::EpilogueProgram &program;
  llvm::SourceMgr &sourceMgr;
  const EpilogueImportOptions &options;
  OpBuilder builder;
  Type operandType;
};

} // namespace

Location ModuleBuilder::getLoc(llvm::SMLoc loc) {
  unsigned buffer = sourceMgr.getMainFileID();
  auto [line, column] = sourceMgr.getLineAndColumn(loc, buffer);
  return FileLineColLoc::get(
      builder.getContext(),
      sourceMgr.getMemoryBuffer(buffer)->getBufferIdentifier(), line, column);
}

Type ModuleBuilder::getType(const dsl::ValueType &type) {
  if (type.dims == dsl::kScalar)
    return builder.getF32Type();
  Type elementType = operandType;
  if (type.elementType) {
    switch (*type.elementType) {
    case dsl::ElementType::BF16:
      elementType = builder.getBF16Type();
      break;
    case dsl::ElementType::F16:
      elementType = builder.getF16Type();
      break;
    case dsl::ElementType::F32:
      elementType = builder.getF32Type();
      break;
    }
  }
  SmallVector<int64_t> shape(getDims(type.dims).getRank(),
                             ShapedType::kDynamic);
  // N % p: p columns.
  if (type.period)
    shape.back() = type.period;
  return RankedTensorType::get(shape, elementType);
}

Value ModuleBuilder::buildNode(OpBuilder &body, GemmOp gemm, const Node &node,
                               ArrayRef<Value> values) {
  Location loc = getLoc(node.loc);
  Type f32 = body.getF32Type();
  auto operand = [&](unsigned i) { return values[node.operands[i]]; };
  switch (node.kind) {
  case Node::Kind::Accumulator:
    return gemm.getAccumulator();
  case Node::Kind::Input:
    return gemm.getInputArg(node.index);
  case Node::Kind::Constant:
    return arith::ConstantOp::create(body, loc,
                                     body.getF32FloatAttr(node.constant));
  case Node::Kind::Negate:
    return arith::NegFOp::create(body, loc, operand(0));
  case Node::Kind::Add:
    return arith::AddFOp::create(body, loc, operand(0), operand(1));
  case Node::Kind::Sub:
    return arith::SubFOp::create(body, loc, operand(0), operand(1));
  case Node::Kind::Mul:
    return arith::MulFOp::create(body, loc, operand(0), operand(1));
  case Node::Kind::Div:
    return arith::DivFOp::create(body, loc, operand(0), operand(1));
  case Node::Kind::Minimum:
    return arith::MinimumFOp::create(body, loc, operand(0), operand(1));
  case Node::Kind::Maximum:
    return arith::MaximumFOp::create(body, loc, operand(0), operand(1));
  case Node::Kind::Pow:
    return math::PowFOp::create(body, loc, operand(0), operand(1));
  case Node::Kind::Exp:
    return math::ExpOp::create(body, loc, operand(0));
  case Node::Kind::Log:
    return math::LogOp::create(body, loc, operand(0));
  case Node::Kind::Sqrt:
    return math::SqrtOp::create(body, loc, operand(0));
  case Node::Kind::Rsqrt:
    return math::RsqrtOp::create(body, loc, operand(0));
  case Node::Kind::Tanh:
    return math::TanhOp::create(body, loc, operand(0));
  case Node::Kind::Abs:
    return math::AbsFOp::create(body, loc, operand(0));
  case Node::Kind::Sin:
    return math::SinOp::create(body, loc, operand(0));
  case Node::Kind::Cos:
    return math::CosOp::create(body, loc, operand(0));
  case Node::Kind::Detach:
    return DetachOp::create(body, loc, f32, operand(0));
  case Node::Kind::Round: {
    Type narrow = *node.rounding == dsl::ElementType::BF16
                      ? Type(body.getBF16Type())
                      : Type(body.getF16Type());
    return RoundOp::create(body, loc, f32, operand(0), TypeAttr::get(narrow));
  }
  case Node::Kind::Activation:
    return ActivationOp::create(body, loc, f32, *node.activation, operand(0));
  case Node::Kind::Dropout: {
    // The seed is the last epilogue input.
    Value seed = gemm.getInputArg(gemm.getInputs().size() - 1);
    return DropoutOp::create(body, loc, f32, operand(0), seed,
                             llvm::APFloat(node.constant), node.index);
  }
  case Node::Kind::RowReduce:
    return RowReduceOp::create(body, loc, f32, *node.reduction, operand(0));
  case Node::Kind::ColReduce:
    return ColReduceOp::create(body, loc, f32, *node.reduction, operand(0));
  case Node::Kind::GroupReduce:
    return GroupReduceOp::create(body, loc, f32, *node.reduction, operand(0),
                                 node.index);
  case Node::Kind::Partner:
    return PartnerOp::create(body, loc, f32, operand(0), node.index);
  case Node::Kind::Row:
    return CoordOp::create(body, loc, f32, OutputDim::M);
  case Node::Kind::Column:
    return CoordOp::create(body, loc, f32, OutputDim::N);
  }
  llvm_unreachable("unknown node kind");
}

OwningOpRef<ModuleOp> ModuleBuilder::build() {
  MLIRContext *context = builder.getContext();
  context->loadDialect<CodaDialect, arith::ArithDialect, func::FuncDialect,
                       math::MathDialect>();
  Location loc = getLoc(program.loc);
  OwningOpRef<ModuleOp> module = ModuleOp::create(loc);
  builder.setInsertionPointToEnd(module->getBody());

  // Arguments: A, B, [C], [alpha], [beta], the operands, [seed].
  Type f32 = builder.getF32Type();
  Type matrix = RankedTensorType::get(
      {ShapedType::kDynamic, ShapedType::kDynamic}, operandType);
  SmallVector<Type> argTypes = {matrix, matrix};
  if (options.withC)
    argTypes.push_back(matrix);
  if (options.withAlpha)
    argTypes.push_back(f32);
  if (options.withC)
    argTypes.push_back(f32);
  unsigned firstInput = argTypes.size();
  SmallVector<DimsAttr> inputDims;
  for (const dsl::Port &input : program.inputs) {
    argTypes.push_back(getType(input.type));
    inputDims.push_back(getDims(input.type.dims, input.type.period));
  }
  if (program.numDropouts) {
    argTypes.push_back(builder.getI64Type());
    inputDims.push_back(getDims(dsl::kScalar));
  }
  SmallVector<Type> resultTypes;
  SmallVector<DimsAttr> resultDims;
  for (const dsl::Port &output : program.outputs) {
    resultTypes.push_back(getType(output.type));
    resultDims.push_back(getDims(output.type.dims));
  }

  auto func =
      func::FuncOp::create(builder, loc, program.name,
                           builder.getFunctionType(argTypes, resultTypes));
  StringAttr nameAttr = builder.getStringAttr("coda.name");
  for (auto [i, input] : llvm::enumerate(program.inputs))
    func.setArgAttr(firstInput + i, nameAttr,
                    builder.getStringAttr(input.name));
  if (program.numDropouts)
    func.setArgAttr(argTypes.size() - 1, nameAttr,
                    builder.getStringAttr("seed"));
  for (auto [i, output] : llvm::enumerate(program.outputs))
    func.setResultAttr(i, nameAttr, builder.getStringAttr(output.name));

  Block *entry = func.addEntryBlock();
  for (auto [i, input] : llvm::enumerate(program.inputs))
    entry->getArgument(firstInput + i).setLoc(getLoc(input.loc));
  builder.setInsertionPointToStart(entry);
  auto arg = [&](unsigned i) { return entry->getArgument(i); };
  unsigned next = 2;
  Value c = options.withC ? arg(next++) : Value();
  Value alpha = options.withAlpha ? arg(next++) : Value();
  Value beta = options.withC ? arg(next++) : Value();
  auto gemm =
      GemmOp::create(builder, loc, resultTypes, resultDims, arg(0), arg(1),
                     options.transposeA, options.transposeB, c, alpha, beta,
                     entry->getArguments().drop_front(firstInput), inputDims);
  gemm.setBHalves(options.bHalves);

  gemm.getAccumulator().setLoc(loc);
  for (auto [i, input] : llvm::enumerate(program.inputs))
    gemm.getInputArg(i).setLoc(getLoc(input.loc));
  OpBuilder body = OpBuilder::atBlockBegin(&gemm.getEpilogueBlock());
  SmallVector<Value> values;
  for (const Node &node : program.nodes)
    values.push_back(buildNode(body, gemm, node, values));
  SmallVector<Value> yielded;
  for (unsigned value : program.outputValues)
    yielded.push_back(values[value]);
  YieldOp::create(body, getLoc(program.endLoc), yielded);
  func::ReturnOp::create(builder, getLoc(program.endLoc), gemm.getResults());
  return module;
}

OwningOpRef<ModuleOp> mlir::coda::buildEpilogueModule(
    const dsl::EpilogueProgram &program, llvm::SourceMgr &sourceMgr,
    MLIRContext *context, const EpilogueImportOptions &options) {
  return ModuleBuilder(program, sourceMgr, context, options).build();
}

OwningOpRef<ModuleOp>
mlir::coda::importEpilogue(llvm::SourceMgr &sourceMgr, MLIRContext *context,
                           const EpilogueImportOptions &options) {
  Type operandType = options.operandType;
  if (operandType && !operandType.isBF16() && !operandType.isF16() &&
      !operandType.isF32()) {
    std::string spelling;
    llvm::raw_string_ostream(spelling) << operandType;
    sourceMgr.PrintMessage(llvm::SMLoc(), llvm::SourceMgr::DK_Error,
                           "the GEMM operand type must be bf16, f16 or f32, "
                           "not " +
                               spelling);
    return nullptr;
  }
  std::optional<dsl::EpilogueProgram> program = dsl::checkEpilogue(sourceMgr);
  if (!program)
    return nullptr;
  OwningOpRef<ModuleOp> module =
      buildEpilogueModule(*program, sourceMgr, context, options);

  // A program that passed the checks must verify; report a failure at the
  // source location of the offending operation.
  ScopedDiagnosticHandler handler(context, [&](Diagnostic &diagnostic) {
    llvm::SMLoc loc;
    if (auto fileLoc = dyn_cast<FileLineColLoc>(diagnostic.getLocation()))
      loc = sourceMgr.FindLocForLineAndColumn(
          sourceMgr.getMainFileID(), fileLoc.getLine(), fileLoc.getColumn());
    bool isError = diagnostic.getSeverity() == DiagnosticSeverity::Error;
    dsl::printDiagnostic(
        sourceMgr, loc,
        isError ? llvm::SourceMgr::DK_Error : llvm::SourceMgr::DK_Note,
        (isError ? "internal error: the front-end built a program that does "
                   "not verify: "
                 : "") +
            diagnostic.str());
    return success();
  });
  if (failed(verify(*module)))
    return nullptr;
  return module;
}

llvm::Error mlir::coda::setImportOptions(MLIRContext *context, StringRef dtype,
                                         StringRef layoutA, StringRef layoutB,
                                         EpilogueImportOptions &options) {
  auto error = [](const Twine &message) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
  };
  Builder builder(context);
  if (dtype == "bf16")
    options.operandType = builder.getBF16Type();
  else if (dtype == "f16")
    options.operandType = builder.getF16Type();
  else if (dtype == "f32")
    options.operandType = builder.getF32Type();
  else
    return error("unknown operand type '" + dtype +
                 "'; expected bf16, f16 or f32");
  if (layoutA != "mk" && layoutA != "km")
    return error("unknown layout of A '" + layoutA + "'; expected mk or km");
  if (layoutB != "nk" && layoutB != "kn" && layoutB != "halves")
    return error("unknown layout of B '" + layoutB +
                 "'; expected nk, kn or halves");
  options.transposeA = layoutA == "km";
  options.transposeB = layoutB != "kn";
  options.bHalves = layoutB == "halves";
  return llvm::Error::success();
}

/// Whether `text`, past blank lines and comment lines (`//`, or `#` and a
/// space, which no MLIR line starts with), starts with the EPILOGUE keyword.
static bool startsWithEpilogue(StringRef text) {
  while (true) {
    text = text.ltrim();
    if (text.starts_with("//") || text.starts_with("# ") ||
        text.starts_with("#\n")) {
      text = text.drop_until([](char c) { return c == '\n'; });
      continue;
    }
    return text.starts_with("EPILOGUE") &&
           (text.size() == 8 || (!llvm::isAlnum(text[8]) && text[8] != '_'));
  }
}

OwningOpRef<ModuleOp>
mlir::coda::loadProgramFile(StringRef path, llvm::SourceMgr &sourceMgr,
                            MLIRContext *context,
                            const EpilogueImportOptions &options) {
  llvm::Expected<std::unique_ptr<llvm::MemoryBuffer>> file =
      readSourceFile(path);
  if (!file) {
    emitError(UnknownLoc::get(context)) << llvm::toString(file.takeError());
    return nullptr;
  }
  StringRef text = (*file)->getBuffer();
  sourceMgr.AddNewSourceBuffer(std::move(*file), llvm::SMLoc());
  if (path.ends_with(".coda") || startsWithEpilogue(text))
    return importEpilogue(sourceMgr, context, options);
  OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(sourceMgr, context);
  if (!module && !path.ends_with(".mlir"))
    emitError(FileLineColLoc::get(context, path, 1, 1))
        << "'" << path
        << "' was read as coda IR (MLIR), since it is not named .coda and "
           "does not start with EPILOGUE; a program is an epilogue (a .coda "
           "file, or one that starts with EPILOGUE) or a module of coda IR";
  return module;
}
