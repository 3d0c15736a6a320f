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

def ConvertLinalgToCoda : Pass<"coda-raise-linalg"> {
  let summary = "Raise linalg matmuls and their epilogue consumers into coda.gemm";
  let description = [{
    Finds contractions on tensors (`linalg.matmul`, with or without
    transposing `indexing_maps`, `linalg.batch_matmul`, a `linalg.generic`
    that is a matmul, operands fed through `linalg.transpose` or broadcasts)
    and rewrites each, together with the consumers that can run on its
    accumulator, into one `coda.gemm`: elementwise ops (`linalg.generic`,
    `linalg.elementwise`, `linalg.add`, ...) with operands broadcast along M
    or N, row reductions whose results feed back (LayerNorm, softmax) and
    column reductions into an `[n]` output. Activation formulas are raised to
    `coda.activation`; a final cast to bf16 or f16 becomes the output element
    type. Consumers that cannot join the epilogue are left exactly as they
    were; an intermediate they read becomes an extra output.
    docs/raising.md lists what is recognised and why the rest is not.
  }];
  let options = [
    Option<"lowPrecisionEpilogue", "low-precision-epilogue", "bool", "false",
           "Also fuse ops that compute (or contractions that accumulate) in "
           "bf16/f16; the epilogue computes them in f32 and rounds once">,
    Option<"explain", "explain", "bool", "false",
           "Emit a remark on each contraction or consumer left in linalg, "
           "saying why">
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::coda::CodaDialect",
    "::mlir::tensor::TensorDialect"
  ];
}

#endif // CODA_CONVERSION_PASSES_TD
