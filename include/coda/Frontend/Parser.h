//===- Parser.h - parses the epilogue DSL -----------------------*- C++ -*-===//

#ifndef CODA_FRONTEND_PARSER_H
#define CODA_FRONTEND_PARSER_H

#include "coda/Frontend/AST.h"

namespace llvm {
class SourceMgr;
} // namespace llvm

namespace mlir::coda::dsl {

/// The deepest an expression may nest (parentheses, calls, operators).
constexpr unsigned kMaxExpressionDepth = 256;

/// Parses the main buffer of `sourceMgr` as one epilogue. On a lexical or
/// syntax error, reports it through `sourceMgr` (`file:line:col: error: ...`
/// with a caret line) and returns null.
std::unique_ptr<ast::Epilogue> parseEpilogue(llvm::SourceMgr &sourceMgr);

} // namespace mlir::coda::dsl

#endif // CODA_FRONTEND_PARSER_H
