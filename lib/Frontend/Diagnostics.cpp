//===- Diagnostics.cpp - the DSL's diagnostics ----------------------------===//

#include "coda/Frontend/Diagnostics.h"

#include "llvm/Support/raw_ostream.h"

using namespace mlir::coda::dsl;

void mlir::coda::dsl::printDiagnostic(const llvm::SourceMgr &sourceMgr,
                                      llvm::SMLoc loc,
                                      llvm::SourceMgr::DiagKind kind,
                                      const llvm::Twine &message,
                                      llvm::ArrayRef<llvm::SMRange> ranges) {
  llvm::SMDiagnostic diagnostic =
      sourceMgr.GetMessage(loc, kind, message, ranges);
  // Without a line and column, SMDiagnostic shows no source line: the
  // position goes into the name it prints first.
  if (diagnostic.getLineContents().size() > kMaxShownLineLength)
    diagnostic = llvm::SMDiagnostic(
        sourceMgr, loc,
        (diagnostic.getFilename() + ":" + llvm::Twine(diagnostic.getLineNo()) +
         ":" + llvm::Twine(diagnostic.getColumnNo() + 1))
            .str(),
        /*Line=*/-1, /*Col=*/-1, kind,
        (diagnostic.getMessage() + " (line " +
         llvm::Twine(diagnostic.getLineNo()) + " is " +
         llvm::Twine(diagnostic.getLineContents().size()) +
         " characters long; not shown)")
            .str(),
        /*LineStr=*/"", /*Ranges=*/{});
  sourceMgr.PrintMessage(llvm::errs(), diagnostic);
}
