//===- coda-opt.cpp - pass pipelines on coda programs ---------------------===//
//
// mlir-opt for coda: the coda dialect, its passes and pipelines, and the
// upstream dialects and passes its lowerings use. The input is read with a
// bound (coda/Support/SourceFile.h), so that a device or an endless stream
// is refused rather than read until memory runs out.
//
//===----------------------------------------------------------------------===//

#include "coda/Registration/Registration.h"
#include "coda/Support/SourceFile.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/ToolOutputFile.h"

using namespace mlir;

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  DialectRegistry registry;
  coda::registerDialects(registry);
  coda::registerPasses();
  auto [inputFilename, outputFilename] = registerAndParseCLIOptions(
      argc, argv, "coda optimizer driver\n", registry);
  MlirOptMainConfig config = MlirOptMainConfig::createFromCLOptions();
  // Listing dialects or passes reads no input.
  if (config.shouldShowDialects() || config.shouldListPasses())
    return asMainReturnCode(
        MlirOptMain(argc, argv, inputFilename, outputFilename, registry));

  llvm::Expected<std::unique_ptr<llvm::MemoryBuffer>> input =
      coda::readSourceFile(inputFilename);
  if (!input) {
    llvm::errs() << "coda-opt: error: " << llvm::toString(input.takeError())
                 << "\n";
    return 1;
  }
  std::string errorMessage;
  std::unique_ptr<llvm::ToolOutputFile> output =
      openOutputFile(outputFilename, &errorMessage);
  if (!output) {
    llvm::errs() << errorMessage << "\n";
    return 1;
  }
  if (failed(MlirOptMain(output->os(), std::move(*input), registry, config)))
    return 1;
  output->keep();
  return 0;
}
