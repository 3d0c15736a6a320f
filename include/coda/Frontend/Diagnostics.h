//===- Diagnostics.h - the DSL's diagnostics --------------------*- C++ -*-===//
//
// How the lexer, the parser and semantic analysis report: through the
// SourceMgr (its handler, if any), as `file:line:col: error: message` with
// the source line and a caret, but without a source line over
// kMaxShownLineLength characters, which would repeat a whole generated file
// (a 100,000-digit number, say) in every message about it.
//
//===----------------------------------------------------------------------===//

#ifndef CODA_FRONTEND_DIAGNOSTICS_H
#define CODA_FRONTEND_DIAGNOSTICS_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/SourceMgr.h"

namespace mlir::coda::dsl {

/// The longest source line a diagnostic shows.
constexpr size_t kMaxShownLineLength = 256;

/// Reports `message` of `kind` at `loc` through `sourceMgr`, underlining
/// `ranges`; a longer source line than kMaxShownLineLength is left out and
/// the message says so.
void printDiagnostic(const llvm::SourceMgr &sourceMgr, llvm::SMLoc loc,
                     llvm::SourceMgr::DiagKind kind, const llvm::Twine &message,
                     llvm::ArrayRef<llvm::SMRange> ranges = {});

} // namespace mlir::coda::dsl

#endif // CODA_FRONTEND_DIAGNOSTICS_H
