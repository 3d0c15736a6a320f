//===- Sema.h - checks an epilogue and puts it in SSA form ------*- C++ -*-===//

#ifndef CODA_FRONTEND_SEMA_H
#define CODA_FRONTEND_SEMA_H

#include "coda/Frontend/Program.h"

#include <optional>

namespace llvm {
class SourceMgr;
} // namespace llvm

namespace mlir::coda::dsl {

/// Resolves the names of `epilogue`, checks its calls, types and shapes, and
/// returns it as a program. On an error, reports it through `sourceMgr`, whose
/// main buffer `epilogue` was parsed from, and returns nothing.
std::optional<EpilogueProgram> analyzeEpilogue(const ast::Epilogue &epilogue,
                                               llvm::SourceMgr &sourceMgr);

/// Parses and analyzes the main buffer of `sourceMgr`.
std::optional<EpilogueProgram> checkEpilogue(llvm::SourceMgr &sourceMgr);

} // namespace mlir::coda::dsl

#endif // CODA_FRONTEND_SEMA_H
