//===- coda-run.cpp - run a coda program on .npy data ---------------------===//
//
// coda-run PROGRAM --a A.npy --b B.npy [--c C.npy] [--alpha X] [--beta X]
//          [--arg NAME=FILE.npy|NUMBER]... [--out NAME=FILE.npy]... [--seed S]
//          [--device cpu]
//
//===----------------------------------------------------------------------===//

#include "coda/Program/ProgramSignature.h"
#include "coda/Registration/Registration.h"
#include "coda/Runner/Bindings.h"
#include "coda/Runner/CpuRunner.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/WithColor.h"

#include <chrono>

using namespace mlir;
using namespace mlir::coda;
namespace cl = llvm::cl;

namespace {
cl::OptionCategory category("coda-run options");
cl::opt<std::string> programPath(cl::Positional, cl::Required,
                                 cl::desc("<program .mlir>"), cl::cat(category));
cl::opt<std::string> aPath("a", cl::desc("A as a .npy file"),
                           cl::value_desc("file"), cl::cat(category));
cl::opt<std::string> bPath("b", cl::desc("B as a .npy file"),
                           cl::value_desc("file"), cl::cat(category));
cl::opt<std::string> cPath("c", cl::desc("C as a .npy file"),
                           cl::value_desc("file"), cl::cat(category));
cl::opt<float> alpha("alpha", cl::desc("GEMM alpha (default 1)"),
                     cl::cat(category));
cl::opt<float> beta("beta", cl::desc("GEMM beta (default 1 when C is given)"),
                    cl::cat(category));
cl::opt<uint64_t> seed("seed",
                       cl::desc("dropout seed, a 64-bit value (default 0)"),
                      cl::cat(category));
cl::list<std::string> args("arg",
                           cl::desc("an epilogue input: NAME=FILE.npy or, "
                                    "for a scalar, NAME=NUMBER"),
                           cl::value_desc("name=value"), cl::cat(category));
cl::list<std::string> outs("out", cl::desc("write output NAME to FILE.npy"),
                           cl::value_desc("name=file"), cl::cat(category));
cl::opt<std::string> functionName(
    "function",
    cl::desc("the program function, when several functions hold a coda.gemm"),
    cl::cat(category));
cl::opt<std::string> device("device", cl::desc("where to run: cpu"),
                            cl::init("cpu"), cl::cat(category));

int fail(const Twine &message) {
  llvm::WithColor::error(llvm::errs(), "coda-run") << message << "\n";
  return 1;
}

int fail(llvm::Error error) {
  std::string message = llvm::toString(std::move(error));
  return fail(message);
}

double secondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                       start)
      .count();
}
} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  cl::HideUnrelatedOptions(category);
  cl::ParseCommandLineOptions(argc, argv, "Run a coda program on .npy data\n");

  if (device != "cpu")
    return fail("unknown --device '" + device + "'; expected cpu");

  DialectRegistry registry;
  registerDialects(registry);
  MLIRContext context(registry);
  context.printOpOnDiagnostic(false);
  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler handler(sourceMgr, &context);
  OwningOpRef<ModuleOp> module =
      parseSourceFile<ModuleOp>(programPath, sourceMgr, &context);
  if (!module)
    return 1;
  FailureOr<ProgramSignature> signature =
      ProgramSignature::get(*module, functionName);
  if (failed(signature))
    return 1;

  RunRequest request;
  request.a = aPath;
  request.b = bPath;
  request.c = cPath;
  if (alpha.getNumOccurrences())
    request.alpha = alpha;
  if (beta.getNumOccurrences())
    request.beta = beta;
  if (seed.getNumOccurrences())
    request.seed = static_cast<int64_t>(seed.getValue());
  for (StringRef arg : args) {
    auto [name, value] = arg.split('=');
    if (value.empty())
      return fail("--arg '" + arg + "' must be NAME=VALUE");
    request.inputs.emplace_back(name.str(), value.str());
  }
  SmallVector<std::pair<std::string, std::string>> outputFiles;
  for (StringRef out : outs) {
    auto [name, file] = out.split('=');
    if (file.empty())
      return fail("--out '" + out + "' must be NAME=FILE.npy");
    bool known = llvm::any_of(signature->outputs, [&](const ProgramOutput &o) {
      return o.name == name;
    });
    if (!known) {
      std::string names;
      for (const ProgramOutput &o : signature->outputs)
        names += (names.empty() ? "" : ", ") + o.name;
      return fail("the program has no output named '" + name +
                  "'; its outputs are: " + names);
    }
    outputFiles.emplace_back(name.str(), file.str());
  }

  llvm::Expected<BoundArguments> bound = bindArguments(*signature, request);
  if (!bound)
    return fail(bound.takeError());

  auto start = std::chrono::steady_clock::now();
  llvm::Expected<std::unique_ptr<CpuExecutable>> executable =
      CpuExecutable::create(std::move(module), *signature);
  if (!executable)
    return fail(executable.takeError());
  double compileSeconds = secondsSince(start);

  start = std::chrono::steady_clock::now();
  llvm::Expected<std::vector<HostArray>> outputs =
      (*executable)->run(bound->values);
  if (!outputs)
    return fail(outputs.takeError());
  double runSeconds = secondsSince(start);

  const ProblemShape &p = bound->problem;
  llvm::outs() << "coda-run: " << signature->functionName << " on " << device
               << ": ";
  if (signature->batched)
    llvm::outs() << "batch " << p.batch << ", ";
  llvm::outs() << "M " << p.m << ", N " << p.n << ", K " << p.k << ", "
               << signature->operandType << " (A "
               << (signature->transposeA ? "km" : "mk") << ", B "
               << (signature->transposeB ? "nk" : "kn") << ")\n";
  for (const std::string &note : bound->notes)
    llvm::outs() << "  note: " << note << "\n";
  llvm::outs() << llvm::format("  compile %.3f s, run %.3f s\n",
                               compileSeconds, runSeconds);
  for (auto [output, array] : llvm::zip(signature->outputs, *outputs)) {
    llvm::outs() << "  " << output.name << " " << array.getShapeString()
                 << " " << getElementTypeName(array.elementType);
    for (const auto &[name, file] : outputFiles) {
      if (name != output.name)
        continue;
      if (llvm::Error error =
              writeNpy(file, array.convertTo(ElementType::F32)))
        return fail(std::move(error));
      llvm::outs() << " -> " << file;
    }
    llvm::outs() << "\n";
  }
  return 0;
}
