//===- coda-translate.cpp - translations into coda programs ---------------===//
//
// `coda-translate --import-epilogue prog.coda` prints the coda program of an
// epilogue written in the DSL (docs/dsl.md). The options set up the GEMM
// around it as coda-run does. `coda-translate --list-epilogue-builtins`
// prints the DSL's built-in functions (test/Frontend/builtins.test compares
// them with docs/dsl.md and the fuzzer's dictionary).
//
// A small main rather than mlir-translate's: its --split-input-file keeps the
// file's line numbers in diagnostics (mlir-translate renumbers each part),
// which lets the error tests check every location with [[@LINE]].
//
//===----------------------------------------------------------------------===//

#include "coda/Frontend/Builtins.h"
#include "coda/Frontend/EpilogueImport.h"
#include "coda/Support/SourceFile.h"

#include "mlir/IR/AsmState.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"

using namespace mlir;
namespace cl = llvm::cl;

static cl::opt<bool>
    importEpilogueFlag("import-epilogue",
                       cl::desc("Translate an epilogue written in the coda "
                                "DSL into a coda program"));
static cl::opt<bool> listEpilogueBuiltins(
    "list-epilogue-builtins", cl::Hidden,
    cl::desc("Print the functions the epilogue DSL knows, one a line: name, "
             "family, signature"));
static cl::opt<std::string>
    inputFilename(cl::Positional, cl::desc("<input file>"), cl::init("-"));
static cl::opt<std::string> outputFilename("o", cl::desc("Output filename"),
                                           cl::value_desc("filename"),
                                           cl::init("-"));
static cl::opt<std::string>
    operandType("dtype",
                cl::desc("Element type of the GEMM operands A and B (and C): "
                         "bf16 (default), f16 or f32"),
                cl::init("bf16"));
static cl::opt<std::string>
    layoutA("layout-a", cl::desc("Layout of A: mk ([M, K], default) or km"),
            cl::init("mk"));
static cl::opt<std::string>
    layoutB("layout-b",
            cl::desc("Layout of B: nk ([N, K], default), kn, or halves "
                     "([N, K], op(B)'s column pairs in its two halves)"),
            cl::init("nk"));
static cl::opt<bool> withC("with-c",
                           cl::desc("The GEMM adds beta * C (C and beta "
                                    "arguments)"));
static cl::opt<bool> withAlpha("with-alpha",
                               cl::desc("The GEMM scales A * B by a runtime "
                                        "alpha argument"));
static cl::opt<bool> splitInputFile(
    "split-input-file",
    cl::desc("Translate each part of the input between '// -----' lines on "
             "its own; diagnostics keep the lines and columns of the file"));

/// The parts of `text` between lines that start with `// -----`, each as a
/// copy of `text` with everything outside the part blanked out, so that
/// locations in a part are locations in the file.
static SmallVector<std::string> splitInput(StringRef text) {
  SmallVector<std::pair<size_t, size_t>> parts;
  size_t begin = 0;
  for (size_t pos = 0; pos < text.size();) {
    size_t end = std::min(text.find('\n', pos), text.size());
    if (text.substr(pos, end - pos).starts_with("// -----")) {
      parts.push_back({begin, pos});
      begin = end;
    }
    pos = end + 1;
  }
  parts.push_back({begin, text.size()});

  SmallVector<std::string> copies;
  for (auto [partBegin, partEnd] : parts) {
    std::string copy = text.str();
    for (size_t i = 0; i < copy.size(); ++i)
      if ((i < partBegin || i >= partEnd) && copy[i] != '\n')
        copy[i] = ' ';
    copies.push_back(std::move(copy));
  }
  return copies;
}

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  registerAsmPrinterCLOptions();
  registerMLIRContextCLOptions();
  cl::ParseCommandLineOptions(argc, argv, "coda translation tool\n");

  if (listEpilogueBuiltins) {
    coda::dsl::printBuiltins(llvm::outs());
    return 0;
  }
  if (!importEpilogueFlag) {
    llvm::errs() << "coda-translate: no translation requested; pass "
                    "--import-epilogue\n";
    return 1;
  }

  llvm::Expected<std::unique_ptr<llvm::MemoryBuffer>> read =
      coda::readSourceFile(inputFilename);
  if (!read) {
    llvm::errs() << "coda-translate: error: "
                 << llvm::toString(read.takeError()) << "\n";
    return 1;
  }
  std::unique_ptr<llvm::MemoryBuffer> input = std::move(*read);
  std::string errorMessage;
  std::unique_ptr<llvm::ToolOutputFile> output =
      openOutputFile(outputFilename, &errorMessage);
  if (!output) {
    llvm::errs() << errorMessage << "\n";
    return 1;
  }

  MLIRContext context;
  coda::EpilogueImportOptions options;
  if (llvm::Error error = coda::setImportOptions(&context, operandType, layoutA,
                                                 layoutB, options)) {
    llvm::errs() << "coda-translate: error: "
                 << llvm::toString(std::move(error)) << "\n";
    return 1;
  }
  options.withC = withC;
  options.withAlpha = withAlpha;

  SmallVector<std::string> parts;
  if (splitInputFile)
    parts = splitInput(input->getBuffer());
  else
    parts.push_back(input->getBuffer().str());

  bool failed = false;
  for (auto [i, part] : llvm::enumerate(parts)) {
    llvm::SourceMgr sourceMgr;
    sourceMgr.AddNewSourceBuffer(llvm::MemoryBuffer::getMemBufferCopy(
                                     part, input->getBufferIdentifier()),
                                 llvm::SMLoc());
    OwningOpRef<ModuleOp> module =
        coda::importEpilogue(sourceMgr, &context, options);
    if (i)
      output->os() << "// -----\n";
    if (!module) {
      failed = true;
      continue;
    }
    module->print(output->os());
  }
  if (failed)
    return 1;
  output->keep();
  return 0;
}
