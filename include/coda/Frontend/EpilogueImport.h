//===- EpilogueImport.h - the epilogue DSL to a coda program ----*- C++ -*-===//
//
// Turns epilogue DSL source (docs/dsl.md) into a coda program: a func.func
// whose body is one coda.gemm fed by its arguments.
//
//===----------------------------------------------------------------------===//

#ifndef CODA_FRONTEND_EPILOGUEIMPORT_H
#define CODA_FRONTEND_EPILOGUEIMPORT_H

#include "coda/Frontend/Program.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/Support/Error.h"

namespace llvm {
class SourceMgr;
} // namespace llvm

namespace mlir::coda {

/// How the GEMM around an imported epilogue is set up.
struct EpilogueImportOptions {
  /// The element type of A and B (and C): bf16 (when null), f16 or f32.
  Type operandType;
  /// A is stored [K, M] (`--layout-a km`) instead of [M, K].
  bool transposeA = false;
  /// B is stored [N, K] (`--layout-b nk`, the default) instead of [K, N].
  bool transposeB = true;
  /// B is stored [N, K] with op(B)'s column pairs in its two halves
  /// (`--layout-b halves`: coda.gemm's b_halves).
  bool bHalves = false;
  /// The GEMM adds beta * C: a C argument (of the operand type) and a beta
  /// argument follow A and B.
  bool withC = false;
  /// The GEMM scales A * B by a runtime alpha argument.
  bool withAlpha = false;
};

/// Sets up `options` from the spellings coda's tools use: `dtype` bf16, f16
/// or f32; `layoutA` mk or km; `layoutB` nk, kn or halves. Fails with a message
/// that names the bad value and the legal ones.
llvm::Error setImportOptions(MLIRContext *context, StringRef dtype,
                             StringRef layoutA, StringRef layoutB,
                             EpilogueImportOptions &options);

/// Builds the program of a checked epilogue: a module holding one func.func
/// named after the epilogue, with arguments A, B, [C], [alpha], [beta], the
/// epilogue's operands in order, then `seed: i64` if the epilogue uses
/// dropout; and one result per output. Operands, the seed and the results
/// carry their names in `coda.name` attributes; every tensor is dynamically
/// shaped. Locations point into `sourceMgr`. The module is not verified.
OwningOpRef<ModuleOp> buildEpilogueModule(const dsl::EpilogueProgram &program,
                                          llvm::SourceMgr &sourceMgr,
                                          MLIRContext *context,
                                          const EpilogueImportOptions &options);

/// Parses the main buffer of `sourceMgr` as an epilogue and builds its
/// program, verified. Errors are reported through `sourceMgr` as
/// `file:line:col: error: ...` with a caret line, and null is returned.
OwningOpRef<ModuleOp> importEpilogue(llvm::SourceMgr &sourceMgr,
                                     MLIRContext *context,
                                     const EpilogueImportOptions &options);

/// Reads the program in the file at `path`: an epilogue (a `.coda` file, or
/// one whose first word is EPILOGUE), imported with `options`, or coda IR.
/// Errors are reported through `sourceMgr` (which holds the file afterwards)
/// and null is returned.
OwningOpRef<ModuleOp> loadProgramFile(StringRef path,
                                      llvm::SourceMgr &sourceMgr,
                                      MLIRContext *context,
                                      const EpilogueImportOptions &options);

} // namespace mlir::coda

#endif // CODA_FRONTEND_EPILOGUEIMPORT_H
