//===- Lexer.h - tokens of the epilogue DSL ---------------------*- C++ -*-===//

#ifndef CODA_LIB_FRONTEND_LEXER_H
#define CODA_LIB_FRONTEND_LEXER_H

#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/SMLoc.h"

namespace llvm {
class SourceMgr;
} // namespace llvm

namespace mlir::coda::dsl {

struct Token {
  enum class Kind {
    Eof,
    /// A lexical error, already reported.
    Error,
    Identifier,
    Number,
    KwEpilogue,
    LBrace,
    RBrace,
    LParen,
    RParen,
    LBracket,
    RBracket,
    Comma,
    Semicolon,
    Colon,
    Equal,
    Plus,
    Minus,
    Star,
    Slash,
    Percent,
    Arrow,
  };

  Kind kind;
  llvm::StringRef spelling;
  /// Number: the value, rounded to f32.
  float number = 0;

  bool is(Kind k) const { return kind == k; }
  llvm::SMLoc getLoc() const {
    return llvm::SMLoc::getFromPointer(spelling.data());
  }
  llvm::SMLoc getEndLoc() const {
    return llvm::SMLoc::getFromPointer(spelling.data() + spelling.size());
  }
  llvm::SMRange getRange() const { return {getLoc(), getEndLoc()}; }
};

/// Splits the main buffer of a SourceMgr into tokens, skipping white space and
/// comments (`//` or `#` to the end of the line).
class Lexer {
public:
  explicit Lexer(llvm::SourceMgr &sourceMgr);

  /// The next token. A lexical error is reported through the SourceMgr and
  /// returned as an Error token; the lexer does not go past it.
  Token lex();

private:
  Token makeToken(Token::Kind kind, const char *start) const;
  Token lexIdentifier(const char *start);
  Token lexNumber(const char *start);
  Token lexError(const char *start, const llvm::Twine &message);
  void skipSpaceAndComments();

  llvm::SourceMgr &sourceMgr;
  const char *current, *end;
};

} // namespace mlir::coda::dsl

#endif // CODA_LIB_FRONTEND_LEXER_H
