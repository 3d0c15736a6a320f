//===- Inference.cpp - a program's inference form -------------------------===//
//
// `@f_inference` is `@f` with every coda.dropout the identity, as
// nn.Dropout is in evaluation mode. It keeps the forward's arguments (the
// seed, now unread, included) so that a caller binds both programs alike.
//
//===----------------------------------------------------------------------===//

#include "coda/Dialect/Coda/IR/CodaOps.h"
#include "coda/Dialect/Coda/Transforms/Backward.h"

#include "mlir/IR/SymbolTable.h"

using namespace mlir;
using namespace mlir::coda;

func::FuncOp mlir::coda::deriveInference(func::FuncOp forward) {
  OpBuilder b(forward);
  b.setInsertionPointAfter(forward);
  auto inference = cast<func::FuncOp>(b.clone(*forward));
  inference.setSymName(getDerivedName(forward, BackwardNames::kInference));
  inference->setAttr(BackwardNames::kDerivedFrom,
                     FlatSymbolRefAttr::get(forward));
  SmallVector<DropoutOp> dropouts;
  inference.walk([&](DropoutOp op) { dropouts.push_back(op); });
  for (DropoutOp op : dropouts) {
    op.getResult().replaceAllUsesWith(op.getInput());
    op.erase();
  }
  return inference;
}
