// RUN: coda-opt %s --coda-derive-backward -split-input-file -verify-diagnostics
// Two errors come only under other options, so FileCheck reads them (under
// -verify-diagnostics every split would have to fail the same way): a saved
// accumulator with no [m, n] output (@no_space_output, which recompute
// differentiates), and an unknown accumulator.
// RUN: not coda-opt %s --coda-derive-backward=accumulator=saved -split-input-file 2>&1 | FileCheck %s --check-prefix=SAVED
// RUN: not coda-opt %s --coda-derive-backward=accumulator=fused 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// RUN: not coda-opt %s --coda-derive-backward=next-weight=nk 2>&1 | FileCheck %s --check-prefix=NEXT
// RUN: not coda-opt %s --coda-derive-backward="accumulator=saved next-weight=mn" 2>&1 | FileCheck %s --check-prefix=NEXT-MN

// UNKNOWN: error: coda-derive-backward: unknown accumulator 'fused'; expected recompute or saved
// NEXT: error: coda-derive-backward: next-weight=nk needs accumulator=saved (only @f_backward_saved reads the next layer's weight)
// NEXT-MN: error: coda-derive-backward: unknown next-weight 'mn'; expected kn or nk

func.func @batched(%a: tensor<4x?x64xbf16>, %b: tensor<64x256xbf16>) -> tensor<4x?x256xbf16> {
  // expected-error @+1 {{'coda.gemm' op cannot be differentiated: batched GEMMs are not supported; fold the batch into M}}
  %0 = coda.gemm %a, %b : tensor<4x?x64xbf16>, tensor<64x256xbf16> -> (tensor<4x?x256xbf16> [b, m, n]) {
  ^bb0(%acc: f32):
    coda.yield %acc : f32
  }
  return %0 : tensor<4x?x256xbf16>
}

// -----

func.func @c_operand(%a: tensor<?x64xbf16>, %b: tensor<64x256xbf16>, %c: tensor<?x256xf32>) -> tensor<?x256xbf16> {
  // expected-error @+1 {{'coda.gemm' op cannot be differentiated: the C operand is not supported; add it in the epilogue as an [m, n] input}}
  %0 = coda.gemm %a, %b c(%c : tensor<?x256xf32>) : tensor<?x64xbf16>, tensor<64x256xbf16> -> (tensor<?x256xbf16> [m, n]) {
  ^bb0(%acc: f32):
    coda.yield %acc : f32
  }
  return %0 : tensor<?x256xbf16>
}

// -----

func.func @atan(%a: tensor<?x64xbf16>, %b: tensor<64x256xbf16>) -> tensor<?x256xbf16> {
  %0 = coda.gemm %a, %b : tensor<?x64xbf16>, tensor<64x256xbf16> -> (tensor<?x256xbf16> [m, n]) {
  ^bb0(%acc: f32):
    // expected-error @+1 {{'math.atan' op has no derivative: the backward of an epilogue can be derived through arith.addf, arith.subf, arith.mulf, arith.divf, arith.negf, arith.maximumf, arith.minimumf, arith.select, math.exp, math.log, math.sqrt, math.rsqrt, math.tanh, math.absf, math.powf, math.sin, math.cos, coda.activation, coda.dropout, coda.row_reduce, coda.group_reduce, coda.partner, coda.coord, coda.detach and coda.round}}
    %1 = math.atan %acc : f32
    coda.yield %1 : f32
  }
  return %0 : tensor<?x256xbf16>
}

// -----

// An op without a derivative is refused only where a gradient flows through
// it: here remf is past the differentiable arith.addf.
func.func @remf(%a: tensor<?x64xbf16>, %b: tensor<64x256xbf16>, %bias: tensor<256xf32>) -> tensor<?x256xbf16> {
  %0 = coda.gemm %a, %b ins(%bias : tensor<256xf32> [n]) : tensor<?x64xbf16>, tensor<64x256xbf16> -> (tensor<?x256xbf16> [m, n]) {
  ^bb0(%acc: f32, %x: f32):
    %two = arith.constant 2.0 : f32
    // expected-error @+1 {{'arith.remf' op has no derivative}}
    %1 = arith.remf %acc, %two : f32
    %2 = arith.addf %1, %x : f32
    coda.yield %2 : f32
  }
  return %0 : tensor<?x256xbf16>
}

// -----

// The pass takes programs as ProgramSignature describes them.
// expected-error @+1 {{'not_a_program' is not a coda program: its body must be exactly one coda.gemm and a return}}
func.func @not_a_program(%a: tensor<?x64xbf16>, %b: tensor<64x256xbf16>) -> tensor<?x256xbf16> {
  %zero = arith.constant 0.0 : f32
  %0 = coda.gemm %a, %b : tensor<?x64xbf16>, tensor<64x256xbf16> -> (tensor<?x256xbf16> [m, n]) {
  ^bb0(%acc: f32):
    coda.yield %acc : f32
  }
  return %0 : tensor<?x256xbf16>
}

// -----

// Only a column sum: recompute differentiates it (no gradient reaches the
// accumulator); a saved accumulator has no [m, n] output whose gradient the
// backward's GEMM could produce.
// SAVED: derive-backward-invalid.mlir:[[@LINE+2]]:{{[0-9]+}}: error: 'coda.gemm' op cannot be differentiated with a saved accumulator: it has no [m, n] output whose gradient a GEMM could produce
func.func @no_space_output(%a: tensor<?x64xbf16>, %b: tensor<64x256xbf16>) -> tensor<256xf32> {
  %0 = coda.gemm %a, %b : tensor<?x64xbf16>, tensor<64x256xbf16> -> (tensor<256xf32> [n]) {
  ^bb0(%acc: f32):
    %s = coda.col_reduce sum %acc
    coda.yield %s : f32
  }
  return %0 : tensor<256xf32>
}

// -----

// Derived names must not clash: an input named acc would give a second
// grad_acc result.
// expected-error @+1 {{cannot derive '@input_acc_backward': two of its results would be named 'grad_acc'; rename the forward's input or output that it comes from (the derived names are grad_<input>, grad_<output>, grad_acc, saved_acc, saved_row<i>, split_acc, split_rounded and split_row<i>)}}
func.func @input_acc(%a: tensor<?x64xbf16>, %b: tensor<64x256xbf16>, %bias: tensor<256xf32> {coda.name = "acc"}) -> (tensor<?x256xbf16> {coda.name = "output"}) {
  %0 = coda.gemm %a, %b ins(%bias : tensor<256xf32> [n]) : tensor<?x64xbf16>, tensor<64x256xbf16> -> (tensor<?x256xbf16> [m, n]) {
  ^bb0(%acc: f32, %x: f32):
    %1 = arith.addf %acc, %x : f32
    coda.yield %1 : f32
  }
  return %0 : tensor<?x256xbf16>
}

// -----

// An input named grad_output beside the output `output` would give a second
// grad_output argument.
// expected-error @+1 {{cannot derive '@input_grad_output_backward': two of its arguments would be named 'grad_output'}}
func.func @input_grad_output(%a: tensor<?x64xbf16>, %b: tensor<64x256xbf16>, %r: tensor<?x256xf32> {coda.name = "grad_output"}) -> (tensor<?x256xbf16> {coda.name = "output"}) {
  %0 = coda.gemm %a, %b ins(%r : tensor<?x256xf32> [m, n]) : tensor<?x64xbf16>, tensor<64x256xbf16> -> (tensor<?x256xbf16> [m, n]) {
  ^bb0(%acc: f32, %x: f32):
    %1 = arith.mulf %acc, %x : f32
    coda.yield %1 : f32
  }
  return %0 : tensor<?x256xbf16>
}

// -----

// A derived program's name already taken (the pass ran before, or a
// function has that name): an error, not a redefinition.
// expected-error @+1 {{cannot derive '@taken_grad_a' from '@taken': the module already has a symbol of that name (derive each program once)}}
func.func @taken(%a: tensor<?x64xbf16>, %b: tensor<64x256xbf16>) -> tensor<?x256xbf16> {
  %0 = coda.gemm %a, %b : tensor<?x64xbf16>, tensor<64x256xbf16> -> (tensor<?x256xbf16> [m, n]) {
  ^bb0(%acc: f32):
    coda.yield %acc : f32
  }
  return %0 : tensor<?x256xbf16>
}
func.func private @taken_grad_a()

// -----

// The gradient of an output of the even columns arrives N / 2 wide: it is
// the accumulator of the next layer's dgrad GEMM (accumulator=saved), not an
// input of the recomputed GEMM.
func.func @swiglu(%a: tensor<?x64xbf16>, %b: tensor<256x64xbf16>)
    -> (tensor<?x128xbf16> {coda.name = "output"}) {
  // expected-error @+1 {{'coda.gemm' op cannot be differentiated with the GEMM recomputed: output 'output' spans [m, n/2] (the even columns), whose gradient arrives N / 2 wide; derive with a saved accumulator (accumulator=saved), whose backward runs on the next layer's dgrad GEMM with an accumulator [m, n/2]}}
  %0 = coda.gemm %a, %b transpose_b : tensor<?x64xbf16>, tensor<256x64xbf16> -> (tensor<?x128xbf16> [m, n/2]) {
  ^bb0(%acc: f32):
    %up = coda.partner %acc xor 1
    %g = coda.activation silu %acc
    %1 = arith.mulf %g, %up : f32
    coda.yield %1 : f32
  }
  return %0 : tensor<?x128xbf16>
}

// -----

// A program with an accumulator [m, n/2] is a gradient's.
func.func @half_accumulator(%a: tensor<?x64xbf16>, %b: tensor<64x128xbf16>)
    -> (tensor<?x256xbf16> {coda.name = "output"}) {
  // expected-error @+1 {{'coda.gemm' op cannot be differentiated: an accumulator [m, n/2] is itself a gradient's; differentiate the forward program}}
  %0 = coda.gemm %a, %b accumulator [m, n/2] : tensor<?x64xbf16>, tensor<64x128xbf16> -> (tensor<?x256xbf16> [m, n]) {
  ^bb0(%acc: f32):
    coda.yield %acc : f32
  }
  return %0 : tensor<?x256xbf16>
}

// -----

// An output stored in halves is a gradient's too.
func.func @halves_output(%a: tensor<?x64xbf16>, %b: tensor<64x128xbf16>)
    -> (tensor<?x128xbf16> {coda.name = "output"}) {
  // expected-error @+1 {{'coda.gemm' op cannot be differentiated: an output stored in halves ([m, n halves]) is itself a gradient's; differentiate the forward program}}
  %0 = coda.gemm %a, %b : tensor<?x64xbf16>, tensor<64x128xbf16> -> (tensor<?x128xbf16> [m, n halves]) {
  ^bb0(%acc: f32):
    coda.yield %acc : f32
  }
  return %0 : tensor<?x128xbf16>
}

// -----

// Two gated outputs: the backward's GEMM gives the gradient of one.
func.func @two_gated(%a: tensor<?x64xbf16>, %b: tensor<256x64xbf16>)
    -> (tensor<?x128xbf16> {coda.name = "gated"}, tensor<?x128xbf16> {coda.name = "other"}) {
  // expected-error @+2 {{'coda.gemm' op cannot be differentiated with the GEMM recomputed: output 'gated' spans [m, n/2]}}
  // SAVED: derive-backward-invalid.mlir:[[@LINE+1]]:{{[0-9]+}}: error: 'coda.gemm' op cannot be differentiated: outputs 'gated' and 'other' both span [m, n/2]; the backward's GEMM gives the gradient of one of them
  %0:2 = coda.gemm %a, %b transpose_b : tensor<?x64xbf16>, tensor<256x64xbf16> -> (tensor<?x128xbf16> [m, n/2], tensor<?x128xbf16> [m, n/2]) {
  ^bb0(%acc: f32):
    %up = coda.partner %acc xor 1
    %1 = arith.mulf %acc, %up : f32
    coda.yield %1, %acc : f32, f32
  }
  return %0#0, %0#1 : tensor<?x128xbf16>, tensor<?x128xbf16>
}

// -----

func.func @periodic_gradient(%x: tensor<?x64xbf16>, %w: tensor<64x256xbf16>, %freq: tensor<64xf32> {coda.name = "freq"}) -> tensor<?x256xbf16> {
  // expected-error @+1 {{cannot derive the gradient of epilogue input 'freq', which spans [n mod 64] (its columns repeat along the row): detach it where it is read (detach(...)), or declare it spanning n}}
  %0 = coda.gemm %x, %w ins(%freq : tensor<64xf32> [n mod 64]) : tensor<?x64xbf16>, tensor<64x256xbf16> -> (tensor<?x256xbf16> [m, n]) {
  ^bb0(%acc: f32, %f: f32):
    %1 = arith.mulf %acc, %f : f32
    coda.yield %1 : f32
  }
  return %0 : tensor<?x256xbf16>
}

// -----

// A gated output's saved backward runs on an accumulator [m, n/2], which
// takes no input that spans n mod p.
func.func @gated_periodic(%a: tensor<?x64xbf16>, %b: tensor<256x64xbf16>, %s: tensor<64xf32> {coda.name = "scale"})
    -> (tensor<?x128xbf16> {coda.name = "gated"}) {
  // expected-error @+2 {{'coda.gemm' op cannot be differentiated with the GEMM recomputed: output 'gated' spans [m, n/2]}}
  // SAVED: derive-backward-invalid.mlir:[[@LINE+1]]:{{[0-9]+}}: error: 'coda.gemm' op cannot be differentiated with a saved accumulator: output 'gated' spans [m, n/2], whose gradient's GEMM has an accumulator [m, n/2], and epilogue input 'scale' spans [n mod 64], which such a GEMM does not take; declare it spanning n
  %0 = coda.gemm %a, %b transpose_b ins(%s : tensor<64xf32> [n mod 64]) : tensor<?x64xbf16>, tensor<256x64xbf16> -> (tensor<?x128xbf16> [m, n/2]) {
  ^bb0(%acc: f32, %x: f32):
    %1 = coda.detach %x
    %2 = arith.mulf %acc, %1 : f32
    %up = coda.partner %2 xor 1
    %3 = arith.mulf %2, %up : f32
    coda.yield %3 : f32
  }
  return %0 : tensor<?x128xbf16>
}
