//===- OutlinePrograms.cpp - the coda-outline-programs pass ---------------===//
//
// Moves every coda.gemm that is not a coda program (ProgramSignature.h) into
// a function of its own that is one, and calls it from where the GEMM was.
//
//===----------------------------------------------------------------------===//

#include "coda/Dialect/Coda/IR/CodaOps.h"
#include "coda/Dialect/Coda/Transforms/Passes.h"
#include "coda/Program/ProgramSignature.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/SymbolTable.h"

namespace mlir::coda {
#define GEN_PASS_DEF_CODAOUTLINEPROGRAMS
#include "coda/Dialect/Coda/Transforms/Passes.h.inc"
} // namespace mlir::coda

using namespace mlir;
using namespace mlir::coda;

namespace {

/// Whether epilogue input `input` seeds a coda.dropout.
bool seedsDropout(GemmOp gemm, unsigned input) {
  Value arg = gemm.getBody()->getArgument(1 + input);
  return llvm::any_of(arg.getUsers(), [&](Operation *user) {
    auto dropout = dyn_cast<DropoutOp>(user);
    return dropout && dropout.getSeed() == arg;
  });
}

/// The program `gemm` becomes, placed after `after` (its function, or the
/// program outlined from it before).
func::FuncOp outline(GemmOp gemm, Operation *after, SymbolTable &symbols) {
  auto parent = gemm->getParentOfType<func::FuncOp>();
  OpBuilder b(after);
  b.setInsertionPointAfter(after);
  auto type =
      b.getFunctionType(gemm->getOperandTypes(), gemm->getResultTypes());
  auto program = func::FuncOp::create(
      b, gemm.getLoc(), (parent.getSymName() + "_gemm").str(), type);
  symbols.insert(program, b.getInsertionPoint());

  unsigned firstInput = gemm->getNumOperands() - gemm.getInputs().size();
  for (unsigned i = 0, e = gemm.getInputs().size(); i < e; ++i)
    program.setArgAttr(firstInput + i, "coda.name",
                       b.getStringAttr(seedsDropout(gemm, i)
                                           ? std::string("seed")
                                           : "input" + std::to_string(i)));
  for (unsigned i = 0, e = gemm->getNumResults(); i < e; ++i)
    program.setResultAttr(i, "coda.name",
                          b.getStringAttr(e == 1
                                              ? std::string("output")
                                              : "output" + std::to_string(i)));

  Block *body = program.addEntryBlock();
  b.setInsertionPointToStart(body);
  // An argument for each operand, also where one value feeds two of them
  // (a program binds each argument to one operand).
  Operation *copy = b.clone(*gemm);
  for (auto [i, arg] : llvm::enumerate(body->getArguments()))
    copy->setOperand(i, arg);
  func::ReturnOp::create(b, gemm.getLoc(), copy->getResults());
  return program;
}

/// Remarks on each op of `function` (which calls programs) that computes a
/// tensor outside them; views, shapes, empty tensors and calls are not
/// computations, and loops are reported by what they hold.
void reportOutside(func::FuncOp function) {
  function.walk([](Operation *op) {
    bool computes =
        op->getNumRegions() == 0 &&
        llvm::any_of(op->getResultTypes(), llvm::IsaPred<TensorType>);
    if (computes &&
        !isa<tensor::EmptyOp, tensor::CastOp, tensor::CollapseShapeOp,
             tensor::ExpandShapeOp, arith::ConstantOp, func::CallOp>(op))
      op->emitRemark() << "left outside the coda programs: compiled with the "
                          "rest of the function, not fused into a GEMM";
  });
}

struct CodaOutlinePrograms final
    : coda::impl::CodaOutlineProgramsBase<CodaOutlinePrograms> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<GemmOp> gemms;
    module.walk([&](GemmOp gemm) {
      auto func = dyn_cast<func::FuncOp>(gemm->getParentOp());
      if (!func || getProgramViolation(func))
        gemms.push_back(gemm);
    });
    SymbolTable symbols(module);
    DenseMap<Operation *, Operation *> last;
    for (GemmOp gemm : gemms) {
      if (!gemm->getParentOfType<func::FuncOp>() ||
          gemm->getParentOfType<ModuleOp>() != module) {
        gemm.emitOpError("cannot be outlined: it is not in a function of the "
                         "module the pass runs on");
        return signalPassFailure();
      }
      Operation *parent = gemm->getParentOfType<func::FuncOp>();
      Operation *&after = last[parent];
      func::FuncOp program = outline(gemm, after ? after : parent, symbols);
      after = program;
      OpBuilder b(gemm);
      auto call =
          func::CallOp::create(b, gemm.getLoc(), program, gemm->getOperands());
      gemm->replaceAllUsesWith(call.getResults());
      gemm.erase();
    }
    if (report)
      for (auto [function, program] : last)
        reportOutside(cast<func::FuncOp>(function));
  }
};

} // namespace
