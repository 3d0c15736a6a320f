// Parses and verifies a coda program with the installed dialect, and prints
// what the verifier says about it.
#include "coda/Dialect/Coda/IR/CodaOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <cstdio>

int main(int argc, char **argv) {
  mlir::MLIRContext context;
  context.loadDialect<mlir::coda::CodaDialect, mlir::func::FuncDialect>();
  auto module = mlir::parseSourceFile<mlir::ModuleOp>(argv[1], &context);
  if (!module)
    return 1;
  int gemms = 0;
  module->walk([&](mlir::coda::GemmOp) { ++gemms; });
  std::printf("verified %d coda.gemm op(s)\n", gemms);
  return 0;
}
