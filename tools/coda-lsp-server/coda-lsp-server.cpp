//===- coda-lsp-server.cpp - the MLIR language server for coda ------------===//
//
// mlir-lsp-server with the dialects coda-opt knows: diagnostics, hover,
// go-to-definition and completion for coda programs in editors that speak the
// Language Server Protocol.
//
//===----------------------------------------------------------------------===//

#include "coda/Registration/Registration.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-lsp-server/MlirLspServerMain.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  mlir::coda::registerDialects(registry);
  return mlir::failed(mlir::MlirLspServerMain(argc, argv, registry));
}
