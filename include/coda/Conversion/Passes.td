//===- Passes.td - coda conversion passes ------------------*- tablegen -*-===//

#ifndef CODA_CONVERSION_PASSES_TD
#define CODA_CONVERSION_PASSES_TD

include "mlir/Pass/PassBase.td"

def ConvertCodaToLinalg : Pass<"coda-to-linalg"> {
  let summary = "Lower coda.gemm to linalg on tensors (the reference semantics)";
  let description = [{
    Rewrites every `coda.gemm` into `linalg.generic` ops on tensors: one
    contraction for `op(A) * op(B)`, then one elementwise or reduction op per
    epilogue op, each over exactly the dims its value varies along (a bias add
    over `[n]` stays a vector op; a row reduction reduces over `n`). Dropout
    expands to the Philox-4x32-10 arithmetic of its definition, activations to
    their `arith`/`math` formulas. Nothing is fused or approximated: this is
    the reference every other lowering is checked against.
    `linalg-fuse-elementwise-ops` afterwards merges the elementwise ops.
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::linalg::LinalgDialect",
    "::mlir::math::MathDialect",
    "::mlir::tensor::TensorDialect"
  ];
}

#endif // CODA_CONVERSION_PASSES_TD
