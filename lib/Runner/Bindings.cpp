//===- Bindings.cpp - bind user data to a program's arguments -------------===//

#include "coda/Runner/Bindings.h"
#include "coda/Dialect/Coda/IR/CodaAttrs.h"

#include "llvm/ADT/APFloat.h"
#include "llvm/ADT/StringExtras.h"

using namespace mlir;
using namespace mlir::coda;

static llvm::Error error(const Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

/// The type of an argument as users write it in the DSL: "bf16[M, N]", "f32".
static std::string describe(const ProgramArgument &arg) {
  std::string text;
  llvm::raw_string_ostream os(text);
  auto tensor = dyn_cast<RankedTensorType>(arg.type);
  os << (tensor ? tensor.getElementType() : arg.type);
  if (tensor && (arg.role == ArgumentRole::A || arg.role == ArgumentRole::B))
    os << " matrix";
  else if (tensor)
    os << llvm::StringRef(stringifyDims(arg.dims)).upper();
  // `[N % p]` as the DSL spells `n mod p`.
  if (tensor && arg.period) {
    text.pop_back();
    os << " % " << arg.period << "]";
  }
  return text;
}

/// `value` (read from `text`) as the f32 an argument named `name` holds, if
/// it has one.
static llvm::Expected<float> toF32(StringRef name, StringRef text,
                                   double value) {
  llvm::APFloat f32(value);
  bool lost;
  if (f32.convert(llvm::APFloat::IEEEsingle(),
                  llvm::APFloat::rmNearestTiesToEven, &lost) &
      llvm::APFloat::opOverflow)
    return error("'" + name + "' = " + text +
                 " is out of the range of f32 (at most 3.40282347e38 in "
                 "magnitude)");
  return f32.convertToFloat();
}

/// Reads a scalar from a number or a 0-d / 1-element .npy file.
static llvm::Expected<float> readScalar(StringRef name, StringRef text) {
  double number;
  if (!text.getAsDouble(number))
    return toF32(name, text, number);
  llvm::Expected<HostArray> array = readNpy(text);
  if (!array)
    return llvm::joinErrors(
        error("'" + name + "' is a scalar: give a number or a 0-d .npy file"),
        array.takeError());
  if (array->getNumElements() != 1)
    return error("'" + name + "' is a scalar, but " + text + " has shape " +
                 array->getShapeString());
  return array->getAsFloat(0);
}

llvm::Expected<BoundArguments>
mlir::coda::bindArguments(const ProgramSignature &signature,
                          const RunRequest &request) {
  BoundArguments bound;
  bound.values.resize(signature.arguments.size());
  SmallVector<SmallVector<int64_t>> shapes(signature.arguments.size());

  // Which user value each argument takes.
  SmallVector<std::optional<std::string>> sources(signature.arguments.size());
  for (const auto &[name, value] : request.inputs) {
    int index = signature.findInput(name);
    if (index < 0) {
      std::string known;
      for (const ProgramArgument &arg : signature.arguments)
        if (arg.role == ArgumentRole::Input)
          known += (known.empty() ? "" : ", ") + arg.name;
      return error("the program has no epilogue input named '" + name +
                   "'; its inputs are: " + (known.empty() ? "none" : known));
    }
    if (sources[index])
      return error("--arg " + name + " was given twice");
    sources[index] = value;
  }
  auto setRole = [&](ArgumentRole role, const std::string &value,
                     StringRef flag) -> llvm::Error {
    int index = signature.findRole(role);
    if (value.empty())
      return llvm::Error::success();
    if (index < 0)
      return error(flag + " was given, but the program has no " +
                   flag.drop_front(2) + " operand");
    sources[index] = value;
    return llvm::Error::success();
  };
  if (auto e = setRole(ArgumentRole::A, request.a, "--a"))
    return std::move(e);
  if (auto e = setRole(ArgumentRole::B, request.b, "--b"))
    return std::move(e);
  if (auto e = setRole(ArgumentRole::C, request.c, "--c"))
    return std::move(e);
  if (request.alpha && signature.findRole(ArgumentRole::Alpha) < 0)
    return error("--alpha was given, but the program has no alpha operand");
  if (request.beta && signature.findRole(ArgumentRole::Beta) < 0)
    return error("--beta was given, but the program has no beta operand "
                 "(beta scales C: pass --c with it)");

  for (auto [i, arg] : llvm::enumerate(signature.arguments)) {
    ArgumentValue &value = bound.values[i];
    if (auto tensor = dyn_cast<RankedTensorType>(arg.type)) {
      if (!sources[i]) {
        std::string how = arg.role == ArgumentRole::Input
                              ? "--arg " + arg.name + "=FILE.npy"
                              : "--" + arg.name + " FILE.npy";
        return error("missing '" + arg.name + "' (" + describe(arg) +
                     "): pass " + how);
      }
      double number;
      if (!StringRef(*sources[i]).getAsDouble(number))
        return error("'" + arg.name + "' is a tensor (" + describe(arg) +
                     "), not a scalar: pass a .npy file, not " + *sources[i]);
      llvm::Expected<HostArray> array = readNpy(*sources[i]);
      if (!array)
        return array.takeError();
      value.array =
          array->convertTo(*getHostElementType(tensor.getElementType()));
      shapes[i].assign(value.array.shape.begin(), value.array.shape.end());
      continue;
    }
    // Scalars: the GEMM's alpha and beta, the seed, or epilogue inputs.
    if (arg.role == ArgumentRole::Alpha || arg.role == ArgumentRole::Beta) {
      const std::optional<std::string> &given =
          arg.role == ArgumentRole::Alpha ? request.alpha : request.beta;
      value.f32 = 1.0f;
      if (!given)
        continue;
      double number;
      if (StringRef(*given).getAsDouble(number))
        return error("--" + arg.name + " must be a number, got '" + *given +
                     "'");
      llvm::Expected<float> f32 = toF32(arg.name, *given, number);
      if (!f32)
        return f32.takeError();
      value.f32 = *f32;
      continue;
    }
    if (arg.type.isInteger(64)) {
      if (arg.name == "seed" && sources[i] && request.seed)
        return error("the seed was given twice: --seed and --arg seed");
      if (arg.name == "seed" && !sources[i]) {
        value.i64 = request.seed.value_or(0);
        if (!request.seed)
          bound.notes.push_back("dropout seed 0 (pass --seed to change it)");
        continue;
      }
      int64_t integer;
      if (!sources[i] || StringRef(*sources[i]).getAsInteger(0, integer))
        return error("'" + arg.name + "' is an i64 scalar: pass --arg " +
                     arg.name + "=INTEGER");
      value.i64 = integer;
      continue;
    }
    if (!sources[i])
      return error("missing '" + arg.name + "' (" + describe(arg) +
                   "): pass --arg " + arg.name + "=NUMBER");
    llvm::Expected<float> scalar = readScalar(arg.name, *sources[i]);
    if (!scalar)
      return scalar.takeError();
    value.f32 = *scalar;
  }

  if (request.seed && signature.findInput("seed") < 0)
    bound.notes.push_back("the program has no dropout: --seed is unused");

  llvm::Expected<ProblemShape> problem = signature.inferProblemShape(shapes);
  if (!problem)
    return problem.takeError();
  bound.problem = *problem;
  return std::move(bound);
}
