//===- Parser.cpp - parses the epilogue DSL -------------------------------===//
//
// A recursive-descent parser for the grammar of docs/dsl.md. It stops at the
// first error, which it reports with the location of the offending token.
//
//===----------------------------------------------------------------------===//

#include "coda/Frontend/Parser.h"
#include "Lexer.h"
#include "coda/Frontend/Diagnostics.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/LogicalResult.h"
#include "llvm/Support/MathExtras.h"
#include "llvm/Support/SourceMgr.h"

using namespace mlir::coda::dsl;
using namespace mlir::coda::dsl::ast;
using llvm::failure;
using llvm::LogicalResult;
using llvm::SMLoc;
using llvm::SMRange;
using llvm::StringRef;
using llvm::success;
using Kind = Token::Kind;

namespace {

class Parser {
public:
  explicit Parser(llvm::SourceMgr &sourceMgr)
      : sourceMgr(sourceMgr), lexer(sourceMgr), token(lexer.lex()) {}

  std::unique_ptr<Epilogue> parseProgram();

private:
  void consume() {
    previousEnd = token.getEndLoc();
    token = lexer.lex();
  }

  /// Reports an error at `loc` unless the current token is a lexical error,
  /// which the lexer has reported already.
  LogicalResult emitError(SMLoc loc, const llvm::Twine &message,
                          SMRange range = {});
  /// Reports an error at the current token.
  LogicalResult emitErrorHere(const llvm::Twine &message) {
    return emitError(token.getLoc(), message, token.getRange());
  }
  /// Reports an error just after the previous token: for something missing.
  LogicalResult emitErrorAfterPrevious(const llvm::Twine &message) {
    return emitError(previousEnd, message);
  }
  /// Adds a note to the error just reported (if it was).
  void emitNote(SMLoc loc, const llvm::Twine &message, SMRange range = {}) {
    if (!token.is(Kind::Error))
      printDiagnostic(sourceMgr, loc, llvm::SourceMgr::DK_Note, message,
                      {range});
  }

  /// Consumes a token of kind `kind`, or reports `message` just after the
  /// previous token.
  LogicalResult expect(Kind kind, const llvm::Twine &message) {
    if (!token.is(kind))
      return emitErrorAfterPrevious(message);
    consume();
    return success();
  }

  LogicalResult parseHeader(Epilogue &epilogue);
  LogicalResult parseDeclarations(std::vector<Declaration> &declarations,
                                  StringRef what);
  LogicalResult parseDeclaration(Declaration &declaration);
  LogicalResult parseType(ValueType &type);
  LogicalResult parseAssignment(Assignment &assignment);

  std::unique_ptr<Expr> parseExpression();
  /// Parses a left-associative chain of `+` and `-`, or of `*` and `/`.
  std::unique_ptr<Expr> parseBinary(bool multiplicative);
  std::unique_ptr<Expr> parseUnary();
  std::unique_ptr<Expr> parsePrimary();
  std::unique_ptr<Expr> parseCall(const Token &name);

  /// Makes a node with `operands` and checks its depth.
  std::unique_ptr<Expr> makeExpr(Expr::Kind kind, SMLoc loc, SMRange range,
                                 std::vector<std::unique_ptr<Expr>> operands);

  /// Counts the parser's own nesting (parentheses, calls, unary minus), which
  /// need not show in the depth of the tree it builds.
  struct NestingScope {
    explicit NestingScope(unsigned &nesting) : nesting(++nesting) {}
    ~NestingScope() { --nesting; }
    unsigned &nesting;
  };
  LogicalResult checkDepth(unsigned depth, SMLoc loc);

  llvm::SourceMgr &sourceMgr;
  Lexer lexer;
  Token token;
  SMLoc previousEnd;
  unsigned nesting = 0;
};

} // namespace

LogicalResult Parser::emitError(SMLoc loc, const llvm::Twine &message,
                                SMRange range) {
  if (!token.is(Kind::Error))
    printDiagnostic(sourceMgr, loc, llvm::SourceMgr::DK_Error, message,
                    {range});
  return failure();
}

LogicalResult Parser::checkDepth(unsigned depth, SMLoc loc) {
  if (depth <= kMaxExpressionDepth)
    return success();
  return emitError(loc, "expression nested too deeply (more than " +
                            llvm::Twine(kMaxExpressionDepth) +
                            " levels); split it into several statements");
}

//===----------------------------------------------------------------------===//
// Program structure
//===----------------------------------------------------------------------===//

std::unique_ptr<Epilogue> Parser::parseProgram() {
  auto epilogue = std::make_unique<Epilogue>();
  if (!token.is(Kind::KwEpilogue)) {
    (void)emitErrorHere("expected 'EPILOGUE' at the start of the program");
    return nullptr;
  }
  epilogue->keywordRange = token.getRange();
  consume();
  if (token.is(Kind::Identifier) && failed(parseHeader(*epilogue)))
    return nullptr;

  if (!token.is(Kind::LBrace)) {
    (void)emitErrorHere(epilogue->name.empty()
                            ? "expected '{' or the epilogue's name after "
                              "'EPILOGUE'"
                            : "expected '{' to begin the epilogue's body");
    return nullptr;
  }
  SMRange openBrace = token.getRange();
  consume();
  while (!token.is(Kind::RBrace)) {
    if (token.is(Kind::Eof)) {
      (void)emitErrorAfterPrevious("expected '}' at the end of the epilogue");
      emitNote(openBrace.Start, "to match this '{'", openBrace);
      return nullptr;
    }
    if (failed(parseAssignment(epilogue->body.emplace_back())))
      return nullptr;
  }
  epilogue->endRange = token.getRange();
  consume();
  if (!token.is(Kind::Eof)) {
    (void)emitErrorHere("unexpected '" + token.spelling +
                        "' after the end of the epilogue; a file holds one "
                        "epilogue");
    return nullptr;
  }
  return epilogue;
}

LogicalResult Parser::parseHeader(Epilogue &epilogue) {
  epilogue.name = token.spelling.str();
  epilogue.nameRange = token.getRange();
  consume();
  if (token.is(Kind::LParen) &&
      failed(parseDeclarations(epilogue.operands, "operand")))
    return failure();
  if (token.is(Kind::Arrow)) {
    epilogue.arrowRange = token.getRange();
    consume();
    if (!token.is(Kind::LParen))
      return emitErrorHere(
          "expected '(' after '->' to begin the list of outputs");
    if (failed(parseDeclarations(epilogue.outputs.emplace(), "output")))
      return failure();
  }
  return success();
}

LogicalResult Parser::parseDeclarations(std::vector<Declaration> &declarations,
                                        StringRef what) {
  SMRange openParen = token.getRange();
  consume();
  if (token.is(Kind::RParen)) {
    consume();
    return success();
  }
  do {
    if (failed(parseDeclaration(declarations.emplace_back())))
      return failure();
  } while (token.is(Kind::Comma) && (consume(), true));
  if (!token.is(Kind::RParen)) {
    (void)emitErrorHere("expected ',' or ')' after the " + what +
                        " declaration");
    emitNote(openParen.Start, "to match this '('", openParen);
    return failure();
  }
  consume();
  return success();
}

LogicalResult Parser::parseDeclaration(Declaration &declaration) {
  if (!token.is(Kind::Identifier))
    return emitErrorHere("expected a name to declare (`name: dtype[dims]`)");
  declaration.name = token.spelling.str();
  declaration.nameRange = token.getRange();
  consume();
  if (!token.is(Kind::Colon))
    return emitErrorAfterPrevious("expected ':' and a type after '" +
                                  declaration.name + "'");
  consume();
  SMLoc typeStart = token.getLoc();
  if (failed(parseType(declaration.type)))
    return failure();
  declaration.typeRange = {typeStart, previousEnd};
  return success();
}

LogicalResult Parser::parseType(ValueType &type) {
  std::optional<ElementType> elementType;
  if (token.is(Kind::Identifier))
    elementType = llvm::StringSwitch<std::optional<ElementType>>(token.spelling)
                      .Case("bf16", ElementType::BF16)
                      .Case("f16", ElementType::F16)
                      .Case("f32", ElementType::F32)
                      .Default(std::nullopt);
  if (!elementType)
    return emitErrorHere(token.is(Kind::Identifier)
                             ? ("unknown element type '" + token.spelling +
                                "'; expected bf16, f16 or f32")
                                   .str()
                             : "expected an element type: bf16, f16 or f32");
  type.elementType = elementType;
  consume();
  type.dims = kScalar;
  if (!token.is(Kind::LBracket))
    return success();
  SMLoc open = token.getLoc();
  consume();
  std::vector<unsigned> dims;
  while (!token.is(Kind::RBracket)) {
    if (!dims.empty() && failed(expect(Kind::Comma, "expected ',' or ']' "
                                                    "after a dimension")))
      return failure();
    unsigned dim = kScalar;
    if (token.is(Kind::Identifier))
      dim = llvm::StringSwitch<unsigned>(token.spelling)
                .Case("M", kM)
                .Case("N", kN)
                .Default(kScalar);
    if (!dim)
      return emitErrorHere(
          token.is(Kind::Identifier)
              ? ("unknown dimension '" + token.spelling +
                 "'; the dimensions are M (rows) and N (columns)")
                    .str()
              : "expected a dimension: M (rows) or N (columns)");
    consume();
    if (dim == kN && token.is(Kind::Slash)) {
      // N/2: the even columns of an output.
      consume();
      if (!token.is(Kind::Number) || token.spelling != "2")
        return emitErrorHere("expected 2 after 'N/': an output of the even "
                             "columns is [M, N/2]");
      consume();
      dim = kN | kHalfN;
    } else if (dim == kN && token.is(Kind::Percent)) {
      // N % p: p columns, read at column n mod p.
      consume();
      // Written as an integer: digits only.
      double value =
          token.is(Kind::Number) &&
                  llvm::all_of(token.spelling,
                               [](char c) { return llvm::isDigit(c); })
              ? token.number
              : 0;
      if (!token.is(Kind::Number) || value < 1 || value > (1 << 30) ||
          value != static_cast<double>(static_cast<unsigned>(value)) ||
          !llvm::isPowerOf2_32(static_cast<unsigned>(value)))
        return emitErrorHere("expected a power of 2 after 'N %': an operand "
                             "of p columns read at column n mod p is [N % p] "
                             "or [M, N % p]");
      type.period = static_cast<unsigned>(value);
      consume();
    }
    dims.push_back(dim);
  }
  consume();
  bool valid = dims.empty() || (dims.size() == 1 && !(dims[0] & kHalfN)) ||
               (dims.size() == 2 && dims[0] == kM && (dims[1] & kN));
  if (!valid)
    return emitError(open,
                     "dimensions must be [M, N], [M] or [N] (or [M, N/2] for "
                     "an output, [N % p] or [M, N % p] for an operand), or "
                     "left out for a scalar",
                     {open, previousEnd});
  for (unsigned dim : dims)
    type.dims |= dim;
  return success();
}

LogicalResult Parser::parseAssignment(Assignment &assignment) {
  if (!token.is(Kind::Identifier))
    return emitErrorHere(
        "expected a name to assign to; a statement is `name = expression;`");
  assignment.name = token.spelling.str();
  assignment.nameRange = token.getRange();
  consume();
  if (!token.is(Kind::Equal))
    return emitErrorHere("expected '=' after '" + assignment.name +
                         "'; a statement is `name = expression;`");
  consume();
  assignment.value = parseExpression();
  if (!assignment.value)
    return failure();
  return expect(Kind::Semicolon, "expected ';' after the assignment to '" +
                                     assignment.name + "'");
}

//===----------------------------------------------------------------------===//
// Expressions
//===----------------------------------------------------------------------===//

std::unique_ptr<Expr>
Parser::makeExpr(Expr::Kind kind, SMLoc loc, SMRange range,
                 std::vector<std::unique_ptr<Expr>> operands) {
  auto expr = std::make_unique<Expr>();
  expr->kind = kind;
  expr->loc = loc;
  expr->range = range;
  for (const auto &operand : operands)
    expr->depth = std::max(expr->depth, operand->depth + 1);
  expr->operands = std::move(operands);
  if (failed(checkDepth(expr->depth, loc)))
    return nullptr;
  return expr;
}

std::unique_ptr<Expr> Parser::parseExpression() {
  NestingScope scope(nesting);
  if (failed(checkDepth(nesting, token.getLoc())))
    return nullptr;
  return parseBinary(/*multiplicative=*/false);
}

std::unique_ptr<Expr> Parser::parseBinary(bool multiplicative) {
  auto parseOperand = [&] {
    return multiplicative ? parseUnary() : parseBinary(/*multiplicative=*/true);
  };
  auto getOperator = [&]() -> std::optional<Expr::Kind> {
    switch (token.kind) {
    case Kind::Plus:
      return multiplicative ? std::nullopt : std::optional(Expr::Kind::Add);
    case Kind::Minus:
      return multiplicative ? std::nullopt : std::optional(Expr::Kind::Sub);
    case Kind::Star:
      return multiplicative ? std::optional(Expr::Kind::Mul) : std::nullopt;
    case Kind::Slash:
      return multiplicative ? std::optional(Expr::Kind::Div) : std::nullopt;
    default:
      return std::nullopt;
    }
  };
  std::unique_ptr<Expr> lhs = parseOperand();
  while (lhs) {
    std::optional<Expr::Kind> kind = getOperator();
    if (!kind)
      break;
    SMLoc loc = token.getLoc();
    consume();
    std::unique_ptr<Expr> rhs = parseOperand();
    if (!rhs)
      return nullptr;
    SMRange range(lhs->range.Start, rhs->range.End);
    std::vector<std::unique_ptr<Expr>> operands;
    operands.push_back(std::move(lhs));
    operands.push_back(std::move(rhs));
    lhs = makeExpr(*kind, loc, range, std::move(operands));
  }
  return lhs;
}

std::unique_ptr<Expr> Parser::parseUnary() {
  if (!token.is(Kind::Minus))
    return parsePrimary();
  NestingScope scope(nesting);
  SMLoc loc = token.getLoc();
  if (failed(checkDepth(nesting, loc)))
    return nullptr;
  consume();
  std::unique_ptr<Expr> operand = parseUnary();
  if (!operand)
    return nullptr;
  SMRange range(loc, operand->range.End);
  std::vector<std::unique_ptr<Expr>> operands;
  operands.push_back(std::move(operand));
  return makeExpr(Expr::Kind::Negate, loc, range, std::move(operands));
}

std::unique_ptr<Expr> Parser::parsePrimary() {
  Token first = token;
  switch (token.kind) {
  case Kind::Number: {
    consume();
    auto expr =
        makeExpr(Expr::Kind::Number, first.getLoc(), first.getRange(), {});
    expr->number = first.number;
    return expr;
  }
  case Kind::Identifier: {
    consume();
    if (token.is(Kind::LParen))
      return parseCall(first);
    auto expr =
        makeExpr(Expr::Kind::Name, first.getLoc(), first.getRange(), {});
    expr->name = first.spelling.str();
    return expr;
  }
  case Kind::LParen: {
    consume();
    std::unique_ptr<Expr> expr = parseExpression();
    if (!expr)
      return nullptr;
    if (!token.is(Kind::RParen)) {
      (void)emitErrorHere("expected ')'");
      emitNote(first.getLoc(), "to match this '('", first.getRange());
      return nullptr;
    }
    expr->range = {first.getLoc(), token.getEndLoc()};
    consume();
    return expr;
  }
  default:
    (void)emitErrorHere("expected an expression: a number, a name, a call "
                        "such as gelu(x), '(' or '-'");
    return nullptr;
  }
}

std::unique_ptr<Expr> Parser::parseCall(const Token &name) {
  // The function's name has been consumed; the token is '('.
  SMRange openParen = token.getRange();
  consume();
  std::vector<std::unique_ptr<Expr>> arguments;
  if (!token.is(Kind::RParen)) {
    do {
      std::unique_ptr<Expr> argument = parseExpression();
      if (!argument)
        return nullptr;
      arguments.push_back(std::move(argument));
    } while (token.is(Kind::Comma) && (consume(), true));
    if (!token.is(Kind::RParen)) {
      (void)emitErrorHere("expected ',' or ')' after a function argument");
      emitNote(openParen.Start, "to match this '('", openParen);
      return nullptr;
    }
  }
  SMRange range(name.getLoc(), token.getEndLoc());
  consume();
  auto expr =
      makeExpr(Expr::Kind::Call, name.getLoc(), range, std::move(arguments));
  if (expr)
    expr->name = name.spelling.str();
  return expr;
}

std::unique_ptr<Epilogue>
mlir::coda::dsl::parseEpilogue(llvm::SourceMgr &sourceMgr) {
  return Parser(sourceMgr).parseProgram();
}
