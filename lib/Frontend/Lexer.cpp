//===- Lexer.cpp - tokens of the epilogue DSL -----------------------------===//

#include "Lexer.h"

#include "coda/Frontend/Diagnostics.h"

#include "llvm/ADT/APFloat.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/SourceMgr.h"

using namespace mlir::coda::dsl;
using llvm::SMLoc;
using llvm::StringRef;
using Kind = Token::Kind;

static bool isIdentifierStart(char c) { return llvm::isAlpha(c) || c == '_'; }
static bool isIdentifierChar(char c) { return llvm::isAlnum(c) || c == '_'; }

Lexer::Lexer(llvm::SourceMgr &sourceMgr) : sourceMgr(sourceMgr) {
  StringRef buffer =
      sourceMgr.getMemoryBuffer(sourceMgr.getMainFileID())->getBuffer();
  current = buffer.begin();
  end = buffer.end();
}

Token Lexer::makeToken(Kind kind, const char *start) const {
  return Token{kind, StringRef(start, current - start)};
}

Token Lexer::lexError(const char *start, const llvm::Twine &message) {
  printDiagnostic(
      sourceMgr, SMLoc::getFromPointer(start), llvm::SourceMgr::DK_Error,
      message,
      {{SMLoc::getFromPointer(start), SMLoc::getFromPointer(current)}});
  Token token = makeToken(Kind::Error, start);
  current = end;
  return token;
}

void Lexer::skipSpaceAndComments() {
  while (current != end) {
    char c = *current;
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' ||
        c == '\f') {
      ++current;
    } else if (c == '#' ||
               (c == '/' && current + 1 != end && current[1] == '/')) {
      while (current != end && *current != '\n')
        ++current;
    } else {
      return;
    }
  }
}

Token Lexer::lex() {
  skipSpaceAndComments();
  const char *start = current;
  if (current == end)
    return makeToken(Kind::Eof, start);
  char c = *current++;
  if (isIdentifierStart(c))
    return lexIdentifier(start);
  if (llvm::isDigit(c) ||
      (c == '.' && current != end && llvm::isDigit(*current)))
    return lexNumber(start);
  switch (c) {
  case '{':
    return makeToken(Kind::LBrace, start);
  case '}':
    return makeToken(Kind::RBrace, start);
  case '(':
    return makeToken(Kind::LParen, start);
  case ')':
    return makeToken(Kind::RParen, start);
  case '[':
    return makeToken(Kind::LBracket, start);
  case ']':
    return makeToken(Kind::RBracket, start);
  case ',':
    return makeToken(Kind::Comma, start);
  case ';':
    return makeToken(Kind::Semicolon, start);
  case ':':
    return makeToken(Kind::Colon, start);
  case '=':
    return makeToken(Kind::Equal, start);
  case '+':
    return makeToken(Kind::Plus, start);
  case '*':
    return makeToken(Kind::Star, start);
  case '/':
    return makeToken(Kind::Slash, start);
  case '%':
    return makeToken(Kind::Percent, start);
  case '-':
    if (current != end && *current == '>') {
      ++current;
      return makeToken(Kind::Arrow, start);
    }
    return makeToken(Kind::Minus, start);
  default:
    break;
  }
  if (llvm::isPrint(c))
    return lexError(start,
                    "unexpected character '" + StringRef(start, 1) + "'");
  return lexError(start, "unexpected byte 0x" +
                             llvm::toHex(StringRef(start, 1)) +
                             "; the DSL is written in ASCII");
}

Token Lexer::lexIdentifier(const char *start) {
  while (current != end && isIdentifierChar(*current))
    ++current;
  Token token = makeToken(Kind::Identifier, start);
  if (token.spelling == "EPILOGUE")
    token.kind = Kind::KwEpilogue;
  return token;
}

Token Lexer::lexNumber(const char *start) {
  // digits [. digits] [(e|E) [+|-] digits], or . digits [...]
  current = start;
  auto skipDigits = [&] {
    while (current != end && llvm::isDigit(*current))
      ++current;
  };
  skipDigits();
  if (current != end && *current == '.') {
    ++current;
    skipDigits();
  }
  if (current != end && (*current == 'e' || *current == 'E')) {
    ++current;
    if (current != end && (*current == '+' || *current == '-'))
      ++current;
    if (current == end || !llvm::isDigit(*current))
      return lexError(start, "malformed number '" +
                                 StringRef(start, current - start) +
                                 "': expected digits after the exponent");
    skipDigits();
  }
  if (current != end && (isIdentifierChar(*current) || *current == '.')) {
    StringRef number(start, current - start);
    ++current;
    return lexError(start, "unexpected '" + StringRef(current - 1, 1) +
                               "' after the number '" + number + "'");
  }
  Token token = makeToken(Kind::Number, start);
  // A number is quoted in full up to 32 characters, then cut.
  std::string quoted =
      token.spelling.size() <= 32
          ? token.spelling.str()
          : (token.spelling.take_front(24) + "... (" +
             llvm::Twine(token.spelling.size()) + " characters)")
                .str();
  llvm::APFloat value(llvm::APFloat::IEEEsingle());
  llvm::Expected<llvm::APFloat::opStatus> status = value.convertFromString(
      token.spelling, llvm::APFloat::rmNearestTiesToEven);
  if (!status) {
    llvm::consumeError(status.takeError());
    return lexError(start, "malformed number '" + quoted + "'");
  }
  if (*status & llvm::APFloat::opOverflow)
    return lexError(start, "number '" + quoted +
                               "' is out of the range of f32 (at most "
                               "3.40282347e38)");
  if ((*status & llvm::APFloat::opUnderflow) && value.isZero())
    return lexError(start, "number '" + quoted +
                               "' is below the smallest f32 (1.40129846e-45) "
                               "and would be 0; write 0 for zero");
  token.number = value.convertToFloat();
  return token;
}
