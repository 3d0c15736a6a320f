//===- coda-opt.cpp - pass pipelines on coda programs ---------------------===//
//
// mlir-opt for coda: the coda dialect, its passes and pipelines, and the
// upstream dialects and passes its lowerings use.
//
//===----------------------------------------------------------------------===//

#include "coda/Registration/Registration.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  mlir::coda::registerDialects(registry);
  mlir::coda::registerPasses();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "coda optimizer driver\n", registry));
}
