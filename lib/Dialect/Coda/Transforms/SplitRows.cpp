//===- SplitRows.cpp - the coda-split-rows pass ---------------------------===//
//
// Makes each program whose rows are exchanged across tiles a program graph
// of its row split (deriveRowSplit): its row statistics, then their
// application.
//
//===----------------------------------------------------------------------===//

#include "coda/Dialect/Coda/IR/CodaOps.h"
#include "coda/Dialect/Coda/IR/EpilogueDims.h"
#include "coda/Dialect/Coda/Transforms/Backward.h"
#include "coda/Dialect/Coda/Transforms/Passes.h"
#include "coda/Dialect/Coda/Utils/RowStatistics.h"
#include "coda/Program/ProgramSignature.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace mlir::coda {
#define GEN_PASS_DEF_CODASPLITROWS
#include "coda/Dialect/Coda/Transforms/Passes.h.inc"
} // namespace mlir::coda

using namespace mlir;
using namespace mlir::coda;

namespace {

/// Whether `program`'s row reductions reach elements of the row: they are
/// not row statistics.
bool exchangesRows(func::FuncOp program) {
  GemmOp gemm = *program.getOps<GemmOp>().begin();
  return !gemm.getEpilogueBlock().getOps<RowReduceOp>().empty() &&
         !RowStatistics::get(gemm, EpilogueDims(gemm));
}

struct CodaSplitRows final : coda::impl::CodaSplitRowsBase<CodaSplitRows> {
  void runOnOperation() override {
    SmallVector<func::FuncOp> programs;
    for (func::FuncOp program : getPrograms(getOperation()))
      if (exchangesRows(program))
        programs.push_back(program);
    auto signatureOf = [&](func::FuncOp func) {
      return *ProgramSignature::get(getOperation(), func.getName());
    };
    for (func::FuncOp program : programs) {
      ProgramSignature forward = signatureOf(program);
      FailureOr<RowSplitPrograms> split = deriveRowSplit(program);
      if (failed(split))
        return signalPassFailure();
      // @f calls the two: the statistics on its own arguments, then their
      // application on A, B, its epilogue inputs and what the first wrote.
      // An output the statistics write (a rounded h, named as the output)
      // comes from them, the others from the application.
      Block &body = program.getBody().front();
      GemmOp gemm = *body.getOps<GemmOp>().begin();
      OpBuilder b(gemm);
      auto statistics = func::CallOp::create(
          b, gemm.getLoc(), split->statistics, program.getArguments());
      SmallVector<Value> operands{gemm.getA(), gemm.getB()};
      llvm::append_range(operands, gemm.getInputs());
      llvm::append_range(operands, statistics.getResults());
      auto apply =
          func::CallOp::create(b, gemm.getLoc(), split->apply, operands);
      ProgramSignature written = signatureOf(split->statistics);
      ProgramSignature applied = signatureOf(split->apply);
      for (auto [i, output] : llvm::enumerate(forward.outputs)) {
        int fromStatistics = written.findOutput(output.name);
        Value value = fromStatistics >= 0
                          ? statistics.getResult(fromStatistics)
                          : apply.getResult(applied.findOutput(output.name));
        gemm.getResult(i).replaceAllUsesWith(value);
      }
      gemm.erase();
    }
  }
};

} // namespace
