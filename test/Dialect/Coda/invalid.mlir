// RUN: coda-opt %s -split-input-file -verify-diagnostics

func.func @a_type(%a: tensor<4x8xi8>, %b: tensor<8x4xi8>) -> tensor<4x4xf32> {
  // expected-error @+1 {{operand A has element type 'i8'; expected bf16, f16 or f32}}
  %0 = coda.gemm %a, %b : tensor<4x8xi8>, tensor<8x4xi8> -> (tensor<4x4xf32> [m, n]) {
  ^bb0(%acc: f32):
    coda.yield %acc : f32
  }
  return %0 : tensor<4x4xf32>
}

// -----

func.func @ab_mismatch(%a: tensor<4x8xbf16>, %b: tensor<8x4xf16>) -> tensor<4x4xf32> {
  // expected-error @+1 {{operands A and B must have the same element type, got 'bf16' and 'f16'}}
  %0 = coda.gemm %a, %b : tensor<4x8xbf16>, tensor<8x4xf16> -> (tensor<4x4xf32> [m, n]) {
  ^bb0(%acc: f32):
    coda.yield %acc : f32
  }
  return %0 : tensor<4x4xf32>
}

// -----

func.func @a_rank(%a: tensor<8xbf16>, %b: tensor<8x4xbf16>) -> tensor<4x4xf32> {
  // expected-error @+1 {{operand A must have rank 2 ([M, K], or [K, M] with transpose_a) or rank 3 (batched), got rank 1}}
  %0 = coda.gemm %a, %b : tensor<8xbf16>, tensor<8x4xbf16> -> (tensor<4x4xf32> [m, n]) {
  ^bb0(%acc: f32):
    coda.yield %acc : f32
  }
  return %0 : tensor<4x4xf32>
}

// -----

func.func @b_rank(%a: tensor<4x8xbf16>, %b: tensor<1x2x8x4xbf16>) -> tensor<4x4xf32> {
  // expected-error @+1 {{operand B must have rank 2 ([K, N], or [N, K] with transpose_b) or rank 3 (batched), got rank 4}}
  %0 = coda.gemm %a, %b : tensor<4x8xbf16>, tensor<1x2x8x4xbf16> -> (tensor<4x4xf32> [m, n]) {
  ^bb0(%acc: f32):
    coda.yield %acc : f32
  }
  return %0 : tensor<4x4xf32>
}

// -----

func.func @k_mismatch(%a: tensor<4x8xbf16>, %b: tensor<4x8xbf16>) -> tensor<4x8xf32> {
  // expected-error @+1 {{contraction size mismatch: op(A) has K = 8 but op(B) has K = 4}}
  %0 = coda.gemm %a, %b : tensor<4x8xbf16>, tensor<4x8xbf16> -> (tensor<4x8xf32> [m, n]) {
  ^bb0(%acc: f32):
    coda.yield %acc : f32
  }
  return %0 : tensor<4x8xf32>
}

// -----

func.func @batch_mismatch(%a: tensor<2x4x8xbf16>, %b: tensor<3x8x4xbf16>) -> tensor<2x4x4xf32> {
  // expected-error @+1 {{batch size mismatch: A has 2 batches but B has 3}}
  %0 = coda.gemm %a, %b : tensor<2x4x8xbf16>, tensor<3x8x4xbf16> -> (tensor<2x4x4xf32> [b, m, n]) {
  ^bb0(%acc: f32):
    coda.yield %acc : f32
  }
  return %0 : tensor<2x4x4xf32>
}

// -----

func.func @c_rank(%a: tensor<4x8xbf16>, %b: tensor<8x4xbf16>, %c: tensor<4xbf16>) -> tensor<4x4xf32> {
  // expected-error @+1 {{C must span the output space [m, n], got 'tensor<4xbf16>'}}
  %0 = coda.gemm %a, %b c(%c : tensor<4xbf16>) : tensor<4x8xbf16>, tensor<8x4xbf16> -> (tensor<4x4xf32> [m, n]) {
  ^bb0(%acc: f32):
    coda.yield %acc : f32
  }
  return %0 : tensor<4x4xf32>
}

// -----

func.func @c_type(%a: tensor<4x8xbf16>, %b: tensor<8x4xbf16>, %c: tensor<4x4xi32>) -> tensor<4x4xf32> {
  // expected-error @+1 {{C has element type 'i32'; expected f32, bf16 or f16}}
  %0 = coda.gemm %a, %b c(%c : tensor<4x4xi32>) : tensor<4x8xbf16>, tensor<8x4xbf16> -> (tensor<4x4xf32> [m, n]) {
  ^bb0(%acc: f32):
    coda.yield %acc : f32
  }
  return %0 : tensor<4x4xf32>
}

// -----

func.func @c_size(%a: tensor<4x8xbf16>, %b: tensor<8x4xbf16>, %c: tensor<5x4xbf16>) -> tensor<4x4xf32> {
  // expected-error @+1 {{C ('tensor<5x4xbf16>') has size 5 along m, but the GEMM has M = 4}}
  %0 = coda.gemm %a, %b c(%c : tensor<5x4xbf16>) : tensor<4x8xbf16>, tensor<8x4xbf16> -> (tensor<4x4xf32> [m, n]) {
  ^bb0(%acc: f32):
    coda.yield %acc : f32
  }
  return %0 : tensor<4x4xf32>
}

// -----

func.func @beta_without_c(%a: tensor<4x8xbf16>, %b: tensor<8x4xbf16>, %beta: f32) -> tensor<4x4xf32> {
  // expected-error @+1 {{'beta' scales C, but there is no C operand}}
  %0 = coda.gemm %a, %b beta(%beta) : tensor<4x8xbf16>, tensor<8x4xbf16> -> (tensor<4x4xf32> [m, n]) {
  ^bb0(%acc: f32):
    coda.yield %acc : f32
  }
  return %0 : tensor<4x4xf32>
}

// -----

func.func @input_dims_count(%a: tensor<4x8xbf16>, %b: tensor<8x4xbf16>, %s: f32) -> tensor<4x4xf32> {
  // expected-error @+1 {{has 1 epilogue inputs but 0 input_dims}}
  %0 = "coda.gemm"(%a, %b, %s) <{input_dims = [], result_dims = [#coda.dims<[m, n]>], operandSegmentSizes = array<i32: 1, 1, 0, 0, 0, 1>}> ({
  ^bb0(%acc: f32, %x: f32):
    coda.yield %acc : f32
  }) : (tensor<4x8xbf16>, tensor<8x4xbf16>, f32) -> tensor<4x4xf32>
  return %0 : tensor<4x4xf32>
}

// -----

func.func @scalar_type(%a: tensor<4x8xbf16>, %b: tensor<8x4xbf16>, %s: i32) -> tensor<4x4xf32> {
  // expected-error @+1 {{epilogue input #0 has type 'i32'; a scalar input must be f32 (or i64 for a dropout seed)}}
  %0 = coda.gemm %a, %b ins(%s : i32) : tensor<4x8xbf16>, tensor<8x4xbf16> -> (tensor<4x4xf32> [m, n]) {
  ^bb0(%acc: f32, %x: i32):
    coda.yield %acc : f32
  }
  return %0 : tensor<4x4xf32>
}

// -----

func.func @scalar_dims(%a: tensor<4x8xbf16>, %b: tensor<8x4xbf16>, %s: f32) -> tensor<4x4xf32> {
  // expected-error @+1 {{scalar epilogue input #0 must span [], not [n]}}
  %0 = "coda.gemm"(%a, %b, %s) <{input_dims = [#coda.dims<[n]>], result_dims = [#coda.dims<[m, n]>], operandSegmentSizes = array<i32: 1, 1, 0, 0, 0, 1>}> ({
  ^bb0(%acc: f32, %x: f32):
    coda.yield %acc : f32
  }) : (tensor<4x8xbf16>, tensor<8x4xbf16>, f32) -> tensor<4x4xf32>
  return %0 : tensor<4x4xf32>
}

// -----

func.func @rank0_input(%a: tensor<4x8xbf16>, %b: tensor<8x4xbf16>, %s: tensor<f32>) -> tensor<4x4xf32> {
  // expected-error @+1 {{epilogue input #0 is a rank-0 tensor; pass a scalar f32 value instead}}
  %0 = coda.gemm %a, %b ins(%s : tensor<f32> []) : tensor<4x8xbf16>, tensor<8x4xbf16> -> (tensor<4x4xf32> [m, n]) {
  ^bb0(%acc: f32, %x: f32):
    coda.yield %acc : f32
  }
  return %0 : tensor<4x4xf32>
}

// -----

func.func @input_type(%a: tensor<4x8xbf16>, %b: tensor<8x4xbf16>, %v: tensor<4xi32>) -> tensor<4x4xf32> {
  // expected-error @+1 {{epilogue input #0 has element type 'i32'; expected f32, bf16 or f16}}
  %0 = coda.gemm %a, %b ins(%v : tensor<4xi32> [n]) : tensor<4x8xbf16>, tensor<8x4xbf16> -> (tensor<4x4xf32> [m, n]) {
  ^bb0(%acc: f32, %x: f32):
    coda.yield %acc : f32
  }
  return %0 : tensor<4x4xf32>
}

// -----

func.func @input_rank(%a: tensor<4x8xbf16>, %b: tensor<8x4xbf16>, %v: tensor<4xf32>) -> tensor<4x4xf32> {
  // expected-error @+1 {{epilogue input #0 spans [m, n] but has rank 1}}
  %0 = coda.gemm %a, %b ins(%v : tensor<4xf32> [m, n]) : tensor<4x8xbf16>, tensor<8x4xbf16> -> (tensor<4x4xf32> [m, n]) {
  ^bb0(%acc: f32, %x: f32):
    coda.yield %acc : f32
  }
  return %0 : tensor<4x4xf32>
}

// -----

func.func @input_batch(%a: tensor<4x8xbf16>, %b: tensor<8x4xbf16>, %v: tensor<2x4xf32>) -> tensor<4x4xf32> {
  // expected-error @+1 {{epilogue input #0 spans b, but the GEMM is not batched}}
  %0 = coda.gemm %a, %b ins(%v : tensor<2x4xf32> [b, n]) : tensor<4x8xbf16>, tensor<8x4xbf16> -> (tensor<4x4xf32> [m, n]) {
  ^bb0(%acc: f32, %x: f32):
    coda.yield %acc : f32
  }
  return %0 : tensor<4x4xf32>
}

// -----

func.func @input_size(%a: tensor<4x8xbf16>, %b: tensor<8x4xbf16>, %v: tensor<5xf32>) -> tensor<4x4xf32> {
  // expected-error @+1 {{epilogue input #0 ('tensor<5xf32>') has size 5 along n, but the GEMM has N = 4}}
  %0 = coda.gemm %a, %b ins(%v : tensor<5xf32> [n]) : tensor<4x8xbf16>, tensor<8x4xbf16> -> (tensor<4x4xf32> [m, n]) {
  ^bb0(%acc: f32, %x: f32):
    coda.yield %acc : f32
  }
  return %0 : tensor<4x4xf32>
}

// -----

func.func @result_dims_count(%a: tensor<4x8xbf16>, %b: tensor<8x4xbf16>) -> tensor<4x4xf32> {
  // expected-error @+1 {{has 1 outputs but 2 result_dims}}
  %0 = "coda.gemm"(%a, %b) <{input_dims = [], result_dims = [#coda.dims<[m, n]>, #coda.dims<[n]>], operandSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0>}> ({
  ^bb0(%acc: f32):
    coda.yield %acc : f32
  }) : (tensor<4x8xbf16>, tensor<8x4xbf16>) -> tensor<4x4xf32>
  return %0 : tensor<4x4xf32>
}

// -----

func.func @no_results(%a: tensor<4x8xbf16>, %b: tensor<8x4xbf16>) {
  // expected-error @+1 {{must have at least one output}}
  "coda.gemm"(%a, %b) <{input_dims = [], result_dims = [], operandSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0>}> ({
  ^bb0(%acc: f32):
    coda.yield
  }) : (tensor<4x8xbf16>, tensor<8x4xbf16>) -> ()
  return
}

// -----

func.func @result_type(%a: tensor<4x8xbf16>, %b: tensor<8x4xbf16>) -> tensor<4x4xi8> {
  // expected-error @+1 {{output #0 has element type 'i8'; expected f32, bf16 or f16}}
  %0 = coda.gemm %a, %b : tensor<4x8xbf16>, tensor<8x4xbf16> -> (tensor<4x4xi8> [m, n]) {
  ^bb0(%acc: f32):
    coda.yield %acc : f32
  }
  return %0 : tensor<4x4xi8>
}

// -----

func.func @result_scalar(%a: tensor<4x8xbf16>, %b: tensor<8x4xbf16>) -> tensor<f32> {
  // expected-error @+1 {{output #0 spans []; an output must span m, n or both}}
  %0 = coda.gemm %a, %b : tensor<4x8xbf16>, tensor<8x4xbf16> -> (tensor<f32> []) {
  ^bb0(%acc: f32):
    coda.yield %acc : f32
  }
  return %0 : tensor<f32>
}

// -----

func.func @result_rank(%a: tensor<4x8xbf16>, %b: tensor<8x4xbf16>) -> tensor<4x4xf32> {
  // expected-error @+1 {{output #0 spans [m] but has rank 2}}
  %0 = coda.gemm %a, %b : tensor<4x8xbf16>, tensor<8x4xbf16> -> (tensor<4x4xf32> [m]) {
  ^bb0(%acc: f32):
    %r = coda.row_reduce sum %acc
    coda.yield %r : f32
  }
  return %0 : tensor<4x4xf32>
}

// -----

func.func @batched_result(%a: tensor<2x4x8xbf16>, %b: tensor<8x4xbf16>) -> tensor<4x4xf32> {
  // expected-error @+1 {{output #0 of a batched GEMM must span b}}
  %0 = coda.gemm %a, %b : tensor<2x4x8xbf16>, tensor<8x4xbf16> -> (tensor<4x4xf32> [m, n]) {
  ^bb0(%acc: f32):
    coda.yield %acc : f32
  }
  return %0 : tensor<4x4xf32>
}

// -----

func.func @unbatched_result(%a: tensor<4x8xbf16>, %b: tensor<8x4xbf16>) -> tensor<2x4x4xf32> {
  // expected-error @+1 {{output #0 spans b, but the GEMM is not batched}}
  %0 = coda.gemm %a, %b : tensor<4x8xbf16>, tensor<8x4xbf16> -> (tensor<2x4x4xf32> [b, m, n]) {
  ^bb0(%acc: f32):
    coda.yield %acc : f32
  }
  return %0 : tensor<2x4x4xf32>
}

// -----

func.func @result_size(%a: tensor<4x8xbf16>, %b: tensor<8x4xbf16>) -> tensor<4x6xf32> {
  // expected-error @+1 {{output #0 ('tensor<4x6xf32>') has size 6 along n, but the GEMM has N = 4}}
  %0 = coda.gemm %a, %b : tensor<4x8xbf16>, tensor<8x4xbf16> -> (tensor<4x6xf32> [m, n]) {
  ^bb0(%acc: f32):
    coda.yield %acc : f32
  }
  return %0 : tensor<4x6xf32>
}

// -----

func.func @block_args(%a: tensor<4x8xbf16>, %b: tensor<8x4xbf16>, %s: f32) -> tensor<4x4xf32> {
  // expected-error @+1 {{epilogue must have 2 arguments (the accumulator, then one per epilogue input), got 1}}
  %0 = coda.gemm %a, %b ins(%s : f32) : tensor<4x8xbf16>, tensor<8x4xbf16> -> (tensor<4x4xf32> [m, n]) {
  ^bb0(%acc: f32):
    coda.yield %acc : f32
  }
  return %0 : tensor<4x4xf32>
}

// -----

func.func @acc_type(%a: tensor<4x8xbf16>, %b: tensor<8x4xbf16>) -> tensor<4x4xf32> {
  // expected-error @+1 {{epilogue argument #0 (the accumulator) must be f32, got 'bf16'}}
  %0 = coda.gemm %a, %b : tensor<4x8xbf16>, tensor<8x4xbf16> -> (tensor<4x4xf32> [m, n]) {
  ^bb0(%acc: bf16):
    %x = arith.extf %acc : bf16 to f32
    coda.yield %x : f32
  }
  return %0 : tensor<4x4xf32>
}

// -----

func.func @arg_type(%a: tensor<4x8xbf16>, %b: tensor<8x4xbf16>, %v: tensor<4xbf16>) -> tensor<4x4xf32> {
  // expected-error @+1 {{epilogue argument #1 must be 'f32' for epilogue input #0 of type 'tensor<4xbf16>', got 'bf16'}}
  %0 = coda.gemm %a, %b ins(%v : tensor<4xbf16> [n]) : tensor<4x8xbf16>, tensor<8x4xbf16> -> (tensor<4x4xf32> [m, n]) {
  ^bb0(%acc: f32, %x: bf16):
    coda.yield %acc : f32
  }
  return %0 : tensor<4x4xf32>
}

// -----

func.func @not_fusible(%a: tensor<4x8xbf16>, %b: tensor<8x4xbf16>) -> tensor<4x4xf32> {
  %0 = coda.gemm %a, %b : tensor<4x8xbf16>, tensor<8x4xbf16> -> (tensor<4x4xf32> [m, n]) {
  ^bb0(%acc: f32):
    // expected-error @+1 {{'tensor.from_elements' op cannot be fused into a GEMM epilogue: an epilogue may only contain scalar arith, math and coda ops}}
    %t = tensor.from_elements %acc : tensor<1xf32>
    coda.yield %acc : f32
  }
  return %0 : tensor<4x4xf32>
}

// -----

func.func @non_f32_math(%a: tensor<4x8xbf16>, %b: tensor<8x4xbf16>) -> tensor<4x4xf32> {
  %0 = coda.gemm %a, %b : tensor<4x8xbf16>, tensor<8x4xbf16> -> (tensor<4x4xf32> [m, n]) {
  ^bb0(%acc: f32):
    // expected-error @+1 {{'arith.truncf' op computes on 'f16', but epilogue math is scalar f32 (and integers for seeds): convert inputs to f32}}
    %h = arith.truncf %acc : f32 to f16
    coda.yield %acc : f32
  }
  return %0 : tensor<4x4xf32>
}

// -----

func.func @foreign_terminator(%a: tensor<4x8xbf16>, %b: tensor<8x4xbf16>) -> tensor<4x4xf32> {
  %0 = coda.gemm %a, %b : tensor<4x8xbf16>, tensor<8x4xbf16> -> (tensor<4x4xf32> [m, n]) {
  ^bb0(%acc: f32):
    // expected-error @+1 {{'ub.unreachable' op cannot end a GEMM epilogue: an epilogue ends with 'coda.yield'}}
    ub.unreachable
  }
  return %0 : tensor<4x4xf32>
}

// -----

func.func @yield_count(%a: tensor<4x8xbf16>, %b: tensor<8x4xbf16>) -> tensor<4x4xf32> {
  %0 = coda.gemm %a, %b : tensor<4x8xbf16>, tensor<8x4xbf16> -> (tensor<4x4xf32> [m, n]) {
  ^bb0(%acc: f32):
    // expected-error @+1 {{'coda.yield' op yields 2 values, but the coda.gemm has 1 outputs}}
    coda.yield %acc, %acc : f32, f32
  }
  return %0 : tensor<4x4xf32>
}

// -----

func.func @varying_seed(%a: tensor<4x8xbf16>, %b: tensor<8x4xbf16>) -> tensor<4x4xf32> {
  %0 = coda.gemm %a, %b : tensor<4x8xbf16>, tensor<8x4xbf16> -> (tensor<4x4xf32> [m, n]) {
  ^bb0(%acc: f32):
    %s = arith.fptosi %acc : f32 to i64
    // expected-error @+1 {{'coda.dropout' op seed varies along [m, n]; the seed must be the same for every element: pass it as a scalar i64 input}}
    %d = coda.dropout %acc, %s {p = 0.5 : f32}
    coda.yield %d : f32
  }
  return %0 : tensor<4x4xf32>
}

// -----

func.func @col_reduce_to_tile(%a: tensor<4x8xbf16>, %b: tensor<8x4xbf16>) -> tensor<4x4xf32> {
  %0 = coda.gemm %a, %b : tensor<4x8xbf16>, tensor<8x4xbf16> -> (tensor<4x4xf32> [m, n]) {
  ^bb0(%acc: f32):
    %s = coda.col_reduce sum %acc
    // expected-error @+1 {{'coda.yield' op yields a column reduction to output #0, which spans [m, n]; a column reduction has one value per column: declare the output [n]}}
    coda.yield %s : f32
  }
  return %0 : tensor<4x4xf32>
}

// -----

func.func @varies_too_much(%a: tensor<4x8xbf16>, %b: tensor<8x4xbf16>) -> tensor<4xf32> {
  %0 = coda.gemm %a, %b : tensor<4x8xbf16>, tensor<8x4xbf16> -> (tensor<4xf32> [m]) {
  ^bb0(%acc: f32):
    // expected-error @+1 {{'coda.yield' op yields to output #0, which spans [m], a value that varies along [n]; reduce it first (coda.row_reduce over n, coda.col_reduce over m) or declare the output [m, n]}}
    coda.yield %acc : f32
  }
  return %0 : tensor<4xf32>
}

// -----

func.func @dropout_p(%a: tensor<4x8xbf16>, %b: tensor<8x4xbf16>, %seed: i64) -> tensor<4x4xf32> {
  %0 = coda.gemm %a, %b ins(%seed : i64) : tensor<4x8xbf16>, tensor<8x4xbf16> -> (tensor<4x4xf32> [m, n]) {
  ^bb0(%acc: f32, %s: i64):
    // expected-error @+1 {{dropout probability must be in [0, 1], got 1.5}}
    %d = coda.dropout %acc, %s {p = 1.5 : f32}
    coda.yield %d : f32
  }
  return %0 : tensor<4x4xf32>
}

// -----

func.func @dropout_stream(%a: tensor<4x8xbf16>, %b: tensor<8x4xbf16>, %seed: i64) -> tensor<4x4xf32> {
  %0 = coda.gemm %a, %b ins(%seed : i64) : tensor<4x8xbf16>, tensor<8x4xbf16> -> (tensor<4x4xf32> [m, n]) {
  ^bb0(%acc: f32, %s: i64):
    // expected-error @+1 {{dropout stream must be non-negative, got -1}}
    %d = coda.dropout %acc, %s {p = 0.5 : f32, stream = -1 : i32}
    coda.yield %d : f32
  }
  return %0 : tensor<4x4xf32>
}

// -----

func.func @col_reduce_use(%a: tensor<4x8xbf16>, %b: tensor<8x4xbf16>) -> tensor<4xf32> {
  %0 = coda.gemm %a, %b : tensor<4x8xbf16>, tensor<8x4xbf16> -> (tensor<4xf32> [n]) {
  ^bb0(%acc: f32):
    // expected-error @+1 {{'coda.col_reduce' op result is used by 'arith.mulf', but a column reduction is complete only after every row has been computed: it can only be yielded to an output}}
    %s = coda.col_reduce sum %acc
    %t = arith.mulf %s, %s : f32
    coda.yield %t : f32
  }
  return %0 : tensor<4xf32>
}

// -----

func.func @outside(%x: f32) -> f32 {
  // expected-error @+1 {{'coda.activation' op expects parent op to be one of 'coda.gemm, coda.tile_epilogue'}}
  %0 = coda.activation relu %x
  return %0 : f32
}

// -----

func.func @dims_order(%a: tensor<4x8xbf16>, %b: tensor<8x4xbf16>) -> tensor<4x4xf32> {
  // expected-error @+1 {{expected dims to be a subset of [b, m, n] (or n/2, n halves, n mod p) in that order, got 'm'}}
  %0 = coda.gemm %a, %b : tensor<4x8xbf16>, tensor<8x4xbf16> -> (tensor<4x4xf32> [n, m]) {
  ^bb0(%acc: f32):
    coda.yield %acc : f32
  }
  return %0 : tensor<4x4xf32>
}

// -----

!acc = !llvm.struct<(f32, f32)>
#plan = #coda.kernel_plan<chip = "sm_90a", tile_m = 128, tile_n = 64, stages = 4, schedule = cooperative, cluster_m = 1, group_rows = 8, epilogue_vector_bytes = 16>
func.func @tile_epilogue_types(%acc: !acc, %i: i32, %p: !llvm.ptr<1>) {
  // expected-error @+1 {{'coda.tile_epilogue' op has 1 inputs but 0 input_types}}
  coda.tile_epilogue %acc at(%i, %i, %i) of(%i, %i, %i) ins(%p : !llvm.ptr<1>) outs(%p : !llvm.ptr<1>) attributes {input_dims = [#coda.dims<[n]>], input_types = [], output_types = [tensor<?x64xf32>], plan = #plan, result_dims = [#coda.dims<[m, n]>]} : !acc {
  ^bb0(%a: f32, %b: f32):
    coda.yield %a : f32
  }
  return
}

// -----

!acc = !llvm.struct<(f32, f32)>
#plan = #coda.kernel_plan<chip = "sm_90a", tile_m = 128, tile_n = 64, stages = 4, schedule = cooperative, cluster_m = 1, group_rows = 8, epilogue_vector_bytes = 16>
func.func @tile_epilogue_c(%acc: !acc, %i: i32, %p: !llvm.ptr<1>) {
  // expected-error @+1 {{'coda.tile_epilogue' op must have c_type exactly when it has c}}
  coda.tile_epilogue %acc at(%i, %i, %i) of(%i, %i, %i) c(%p : !llvm.ptr<1>) outs(%p : !llvm.ptr<1>) attributes {input_dims = [], input_types = [], output_types = [tensor<?x64xf32>], plan = #plan, result_dims = [#coda.dims<[m, n]>]} : !acc {
  ^bb0(%a: f32):
    coda.yield %a : f32
  }
  return
}

// -----

!acc = !llvm.struct<(f32, f32)>
#plan = #coda.kernel_plan<chip = "sm_90a", tile_m = 256, tile_n = 64, stages = 4, schedule = cooperative, cluster_m = 1, group_rows = 8, epilogue_vector_bytes = 16>
func.func @tile_epilogue_fragments(%acc: !acc, %i: i32, %p: !llvm.ptr<1>) {
  // expected-error @+1 {{'coda.tile_epilogue' op has 1 accumulator fragments, but its plan gives each consumer 128 rows of a tile, 2 fragments of 64}}
  coda.tile_epilogue %acc at(%i, %i, %i) of(%i, %i, %i) outs(%p : !llvm.ptr<1>) attributes {input_dims = [], input_types = [], output_types = [tensor<?x64xf32>], plan = #plan, result_dims = [#coda.dims<[m, n]>]} : !acc {
  ^bb0(%a: f32):
    coda.yield %a : f32
  }
  return
}

// -----

!acc = !llvm.struct<(f32, f32)>
#plan = #coda.kernel_plan<chip = "sm_90a", tile_m = 128, tile_n = 64, stages = 4, schedule = cooperative, cluster_m = 1, group_rows = 8, epilogue_vector_bytes = 16, cluster_n = 4>
func.func @tile_epilogue_no_exchange(%acc: !acc, %i: i32, %p: !llvm.ptr<1>) {
  // expected-error @+1 {{'coda.tile_epilogue' op must have an exchange buffer and a tile ordinal exactly when its plan has cluster_n > 1 (its cluster_n is 4)}}
  coda.tile_epilogue %acc at(%i, %i, %i) of(%i, %i, %i) outs(%p : !llvm.ptr<1>) attributes {input_dims = [], input_types = [], output_types = [tensor<?x64xf32>], plan = #plan, result_dims = [#coda.dims<[m, n]>]} : !acc {
  ^bb0(%a: f32):
    coda.yield %a : f32
  }
  return
}

// -----

!acc = !llvm.struct<(f32, f32)>
#plan = #coda.kernel_plan<chip = "sm_90a", tile_m = 128, tile_n = 64, stages = 4, schedule = cooperative, cluster_m = 1, group_rows = 8, epilogue_vector_bytes = 16>
func.func @tile_epilogue_exchange(%acc: !acc, %i: i32, %p: !llvm.ptr<1>, %s: !llvm.ptr<3>) {
  // expected-error @+1 {{'coda.tile_epilogue' op must have an exchange buffer and a tile ordinal exactly when its plan has cluster_n > 1 (its cluster_n is 1)}}
  coda.tile_epilogue %acc at(%i, %i, %i) of(%i, %i, %i) outs(%p : !llvm.ptr<1>) exchange(%s : !llvm.ptr<3>, %i) attributes {input_dims = [], input_types = [], output_types = [tensor<?x64xf32>], plan = #plan, result_dims = [#coda.dims<[m, n]>]} : !acc {
  ^bb0(%a: f32):
    coda.yield %a : f32
  }
  return
}

// -----

!acc = !llvm.struct<(f32, f32)>
#plan = #coda.kernel_plan<chip = "sm_90a", tile_m = 128, tile_n = 64, stages = 4, schedule = cooperative, cluster_m = 1, group_rows = 8, epilogue_vector_bytes = 16>
func.func @tile_epilogue_row_partials(%acc: !acc, %i: i32, %p: !llvm.ptr<1>) {
  // expected-error @+1 {{'coda.tile_epilogue' op has 2 row_partials, but they must be one per row reduction of the epilogue (1 here) under a plan without a cluster along N (its cluster_n is 1)}}
  coda.tile_epilogue %acc at(%i, %i, %i) of(%i, %i, %i) outs(%p : !llvm.ptr<1>) row_partials(%p, %p : !llvm.ptr<1>, !llvm.ptr<1>) attributes {input_dims = [], input_types = [], output_types = [tensor<?xf32>], plan = #plan, result_dims = [#coda.dims<[m]>]} : !acc {
  ^bb0(%a: f32):
    %r = coda.row_reduce sum %a
    coda.yield %r : f32
  }
  return
}

// -----

!acc = !llvm.struct<(f32, f32)>
#plan = #coda.kernel_plan<chip = "sm_90a", tile_m = 128, tile_n = 64, stages = 4, schedule = cooperative, cluster_m = 1, group_rows = 8, epilogue_vector_bytes = 16>
func.func @tile_epilogue_region(%acc: !acc, %i: i32, %p: !llvm.ptr<1>) {
  coda.tile_epilogue %acc at(%i, %i, %i) of(%i, %i, %i) outs(%p : !llvm.ptr<1>) attributes {input_dims = [], input_types = [], output_types = [tensor<?x64xf32>], plan = #plan, result_dims = [#coda.dims<[m, n]>]} : !acc {
  ^bb0(%a: f32):
    // expected-error @+1 {{'coda.yield' op yields 2 values, but the coda.tile_epilogue has 1 outputs}}
    coda.yield %a, %a : f32, f32
  }
  return
}

// -----

func.func @partner_distance(%a: tensor<8x16xbf16>, %b: tensor<16x32xbf16>) -> tensor<8x32xf32> {
  %0 = coda.gemm %a, %b : tensor<8x16xbf16>, tensor<16x32xbf16> -> (tensor<8x32xf32> [m, n]) {
  ^bb0(%acc: f32):
    // expected-error @+1 {{'coda.partner' op distance must be a power of 2 (1 pairs columns 2j and 2j + 1), got 3}}
    %1 = coda.partner %acc xor 3
    coda.yield %1 : f32
  }
  return %0 : tensor<8x32xf32>
}

// -----

func.func @group_width(%a: tensor<8x16xbf16>, %b: tensor<16x32xbf16>) -> tensor<8x32xf32> {
  %0 = coda.gemm %a, %b : tensor<8x16xbf16>, tensor<16x32xbf16> -> (tensor<8x32xf32> [m, n]) {
  ^bb0(%acc: f32):
    // expected-error @+1 {{'coda.group_reduce' op width must be a power of 2 (the columns of a head, say 64 or 128), got 96}}
    %1 = coda.group_reduce sum %acc width 96
    coda.yield %1 : f32
  }
  return %0 : tensor<8x32xf32>
}

// -----

func.func @half_input(%a: tensor<8x16xbf16>, %b: tensor<16x32xbf16>, %g: tensor<8x16xf32>) -> tensor<8x32xf32> {
  // expected-error @+1 {{'coda.gemm' op epilogue input #0 spans [m, n/2]; only an output may span n/2 or n halves (an input spans n, every column in order)}}
  %0 = coda.gemm %a, %b ins(%g : tensor<8x16xf32> [m, n/2]) : tensor<8x16xbf16>, tensor<16x32xbf16> -> (tensor<8x32xf32> [m, n]) {
  ^bb0(%acc: f32, %x: f32):
    coda.yield %acc : f32
  }
  return %0 : tensor<8x32xf32>
}

// -----

func.func @period_not_power_of_2(%a: tensor<8x16xbf16>, %b: tensor<16x32xbf16>, %f: tensor<48xf32>) -> tensor<8x32xf32> {
  // expected-error @+1 {{expected a power of 2 after 'n mod', got 48}}
  %0 = coda.gemm %a, %b ins(%f : tensor<48xf32> [n mod 48]) : tensor<8x16xbf16>, tensor<16x32xbf16> -> (tensor<8x32xf32> [m, n]) {
  ^bb0(%acc: f32, %x: f32):
    coda.yield %acc : f32
  }
  return %0 : tensor<8x32xf32>
}

// -----

func.func @period_size(%a: tensor<8x16xbf16>, %b: tensor<16x32xbf16>, %f: tensor<8x32xf32>) -> tensor<8x32xf32> {
  // expected-error @+1 {{'coda.gemm' op epilogue input #0 ('tensor<8x32xf32>') spans n mod 64 but has size 32 along it; expected 64}}
  %0 = coda.gemm %a, %b ins(%f : tensor<8x32xf32> [m, n mod 64]) : tensor<8x16xbf16>, tensor<16x32xbf16> -> (tensor<8x32xf32> [m, n]) {
  ^bb0(%acc: f32, %x: f32):
    coda.yield %acc : f32
  }
  return %0 : tensor<8x32xf32>
}

// -----

func.func @period_output(%a: tensor<8x16xbf16>, %b: tensor<16x32xbf16>) -> tensor<8x64xf32> {
  // expected-error @+1 {{'coda.gemm' op output #0 spans [m, n mod 64]; only an input may span n mod p (an output spans n, n/2 or neither)}}
  %0 = coda.gemm %a, %b : tensor<8x16xbf16>, tensor<16x32xbf16> -> (tensor<8x64xf32> [m, n mod 64]) {
  ^bb0(%acc: f32):
    coda.yield %acc : f32
  }
  return %0 : tensor<8x64xf32>
}

// -----

func.func @period_half_accumulator(%a: tensor<8x16xbf16>, %b: tensor<16x16xbf16>, %f: tensor<64xf32>) -> tensor<8x32xf32> {
  // expected-error @+1 {{'coda.gemm' op epilogue input #0 spans [n mod 64]; an accumulator [m, n/2] takes no input that spans n mod p}}
  %0 = coda.gemm %a, %b transpose_b accumulator [m, n/2] ins(%f : tensor<64xf32> [n mod 64]) : tensor<8x16xbf16>, tensor<16x16xbf16> -> (tensor<8x32xf32> [m, n]) {
  ^bb0(%acc: f32, %x: f32):
    coda.yield %acc : f32
  }
  return %0 : tensor<8x32xf32>
}

// -----

func.func @half_without_m(%a: tensor<8x16xbf16>, %b: tensor<16x32xbf16>) -> tensor<16xf32> {
  // expected-error @+1 {{'coda.gemm' op output #0 spans [n/2]; an output spanning n/2 must also span m ([m, n/2])}}
  %0 = coda.gemm %a, %b : tensor<8x16xbf16>, tensor<16x32xbf16> -> (tensor<16xf32> [n/2]) {
  ^bb0(%acc: f32):
    %1 = coda.col_reduce sum %acc
    coda.yield %1 : f32
  }
  return %0 : tensor<16xf32>
}

// -----

func.func @half_odd_n(%a: tensor<8x16xbf16>, %b: tensor<16x33xbf16>) -> tensor<8x16xf32> {
  // expected-error @+1 {{'coda.gemm' op output #0 spans n/2, the even columns, but the GEMM has an odd N = 33; n/2 needs an even N}}
  %0 = coda.gemm %a, %b : tensor<8x16xbf16>, tensor<16x33xbf16> -> (tensor<8x16xf32> [m, n/2]) {
  ^bb0(%acc: f32):
    coda.yield %acc : f32
  }
  return %0 : tensor<8x16xf32>
}

// -----

func.func @half_size(%a: tensor<8x16xbf16>, %b: tensor<16x32xbf16>) -> tensor<8x32xf32> {
  // expected-error @+1 {{'coda.gemm' op output #0 ('tensor<8x32xf32>') has size 32 along n/2, but the GEMM has N / 2 = 16}}
  %0 = coda.gemm %a, %b : tensor<8x16xbf16>, tensor<16x32xbf16> -> (tensor<8x32xf32> [m, n/2]) {
  ^bb0(%acc: f32):
    coda.yield %acc : f32
  }
  return %0 : tensor<8x32xf32>
}

// -----

func.func @half_parse(%a: tensor<8x16xbf16>, %b: tensor<16x32xbf16>) -> tensor<8x32xf32> {
  // expected-error @+1 {{expected 'n/2', got 'n/3'}}
  %0 = coda.gemm %a, %b : tensor<8x16xbf16>, tensor<16x32xbf16> -> (tensor<8x32xf32> [m, n/3]) {
  ^bb0(%acc: f32):
    coda.yield %acc : f32
  }
  return %0 : tensor<8x32xf32>
}

// -----

// An unknown kind gets one error that lists the kinds.
func.func @unknown_reduction(%a: tensor<8x16xbf16>, %b: tensor<16x32xbf16>) -> tensor<8x32xf32> {
  %0 = coda.gemm %a, %b : tensor<8x16xbf16>, tensor<16x32xbf16> -> (tensor<8x32xf32> [m, n]) {
  ^bb0(%acc: f32):
    // expected-error @+1 {{unknown reduction kind 'median'; expected one of sum, max, mean}}
    %1 = coda.row_reduce median %acc
    coda.yield %1 : f32
  }
  return %0 : tensor<8x32xf32>
}

// -----

func.func @unknown_activation(%a: tensor<8x16xbf16>, %b: tensor<16x32xbf16>) -> tensor<8x32xf32> {
  %0 = coda.gemm %a, %b : tensor<8x16xbf16>, tensor<16x32xbf16> -> (tensor<8x32xf32> [m, n]) {
  ^bb0(%acc: f32):
    // expected-error @+1 {{unknown activation 'swish'; expected one of gelu_tanh, gelu_erf, relu, silu, sigmoid}}
    %1 = coda.activation swish %acc
    coda.yield %1 : f32
  }
  return %0 : tensor<8x32xf32>
}

// -----

func.func @unknown_coord(%a: tensor<8x16xbf16>, %b: tensor<16x32xbf16>) -> tensor<8x32xf32> {
  %0 = coda.gemm %a, %b : tensor<8x16xbf16>, tensor<16x32xbf16> -> (tensor<8x32xf32> [m, n]) {
  ^bb0(%acc: f32):
    // expected-error @+1 {{unknown output dim 'k'; expected one of b, m, n}}
    %1 = coda.coord k
    coda.yield %1 : f32
  }
  return %0 : tensor<8x32xf32>
}

// -----

func.func @accumulator_dims(%a: tensor<8x16xbf16>, %b: tensor<16x16xbf16>) -> tensor<8x32xf32> {
  // expected-error @+1 {{the accumulator may only be declared [m, n/2] (the product at the even columns), got [m, n]}}
  %0 = coda.gemm %a, %b accumulator [m, n] : tensor<8x16xbf16>, tensor<16x16xbf16> -> (tensor<8x32xf32> [m, n]) {
  ^bb0(%acc: f32):
    coda.yield %acc : f32
  }
  return %0 : tensor<8x32xf32>
}

// -----

func.func @accumulator_half_n_size(%a: tensor<8x16xbf16>, %b: tensor<16x16xbf16>) -> tensor<8x16xf32> {
  // expected-error @+1 {{'coda.gemm' op output #0 ('tensor<8x16xf32>') has size 16 along n, but the GEMM has N = 32}}
  %0 = coda.gemm %a, %b accumulator [m, n/2] : tensor<8x16xbf16>, tensor<16x16xbf16> -> (tensor<8x16xf32> [m, n]) {
  ^bb0(%acc: f32):
    coda.yield %acc : f32
  }
  return %0 : tensor<8x16xf32>
}

// -----

func.func @accumulator_half_n_batched(%a: tensor<2x8x16xbf16>, %b: tensor<16x16xbf16>) -> tensor<2x8x32xf32> {
  // expected-error @+1 {{'coda.gemm' op has an accumulator [m, n/2] (the product at the even columns) and a batched operand, which it does not support}}
  %0 = coda.gemm %a, %b accumulator [m, n/2] : tensor<2x8x16xbf16>, tensor<16x16xbf16> -> (tensor<2x8x32xf32> [b, m, n]) {
  ^bb0(%acc: f32):
    coda.yield %acc : f32
  }
  return %0 : tensor<2x8x32xf32>
}

// -----

func.func @accumulator_half_n_c(%a: tensor<8x16xbf16>, %b: tensor<16x16xbf16>, %c: tensor<8x32xf32>) -> tensor<8x32xf32> {
  // expected-error @+1 {{'coda.gemm' op has an accumulator [m, n/2] (the product at the even columns) and a C operand, which it does not support}}
  %0 = coda.gemm %a, %b accumulator [m, n/2] c(%c : tensor<8x32xf32>) : tensor<8x16xbf16>, tensor<16x16xbf16> -> (tensor<8x32xf32> [m, n]) {
  ^bb0(%acc: f32):
    coda.yield %acc : f32
  }
  return %0 : tensor<8x32xf32>
}

// -----

func.func @accumulator_half_n_output(%a: tensor<8x16xbf16>, %b: tensor<16x16xbf16>) -> tensor<8x16xf32> {
  // expected-error @+1 {{'coda.gemm' op has an accumulator [m, n/2] (the product at the even columns) and output #0 spanning [m, n/2], which it does not support}}
  %0 = coda.gemm %a, %b accumulator [m, n/2] : tensor<8x16xbf16>, tensor<16x16xbf16> -> (tensor<8x16xf32> [m, n/2]) {
  ^bb0(%acc: f32):
    coda.yield %acc : f32
  }
  return %0 : tensor<8x16xf32>
}

// -----

func.func @round_to_f32(%a: tensor<8x16xbf16>, %b: tensor<16x32xbf16>) -> tensor<8x32xf32> {
  %0 = coda.gemm %a, %b : tensor<8x16xbf16>, tensor<16x32xbf16> -> (tensor<8x32xf32> [m, n]) {
  ^bb0(%acc: f32):
    // expected-error @+1 {{'coda.round' op attribute 'to' failed to satisfy constraint: type attribute of bfloat16 type or 16-bit float}}
    %r = coda.round %acc to f32
    coda.yield %r : f32
  }
  return %0 : tensor<8x32xf32>
}

// -----

func.func @halves_without_transpose_b(%a: tensor<8x16xbf16>, %b: tensor<16x32xbf16>) -> tensor<8x32xf32> {
  // expected-error @+1 {{'coda.gemm' op has b_halves (op(B)'s column pairs stored as B's two halves) without transpose_b: the halves are halves of B's rows, B stored [N, K]}}
  %0 = coda.gemm %a, %b b_halves : tensor<8x16xbf16>, tensor<16x32xbf16> -> (tensor<8x32xf32> [m, n]) {
  ^bb0(%acc: f32):
    coda.yield %acc : f32
  }
  return %0 : tensor<8x32xf32>
}

// -----

func.func @halves_batched(%a: tensor<2x8x16xbf16>, %b: tensor<32x16xbf16>) -> tensor<2x8x32xf32> {
  // expected-error @+1 {{'coda.gemm' op has b_halves (op(B)'s column pairs stored as B's two halves) and a batched operand, which it does not support}}
  %0 = coda.gemm %a, %b transpose_b b_halves : tensor<2x8x16xbf16>, tensor<32x16xbf16> -> (tensor<2x8x32xf32> [b, m, n]) {
  ^bb0(%acc: f32):
    coda.yield %acc : f32
  }
  return %0 : tensor<2x8x32xf32>
}

// -----

func.func @halves_of_half_accumulator(%a: tensor<8x16xbf16>, %b: tensor<16x16xbf16>) -> tensor<8x32xf32> {
  // expected-error @+1 {{'coda.gemm' op has b_halves (op(B)'s column pairs stored as B's two halves) and an accumulator [m, n/2], whose op(B) has no pairs}}
  %0 = coda.gemm %a, %b transpose_b b_halves accumulator [m, n/2] : tensor<8x16xbf16>, tensor<16x16xbf16> -> (tensor<8x32xf32> [m, n]) {
  ^bb0(%acc: f32):
    coda.yield %acc : f32
  }
  return %0 : tensor<8x32xf32>
}

// -----

func.func @halves_odd_n(%a: tensor<8x16xbf16>, %b: tensor<33x16xbf16>) -> tensor<8x33xf32> {
  // expected-error @+1 {{'coda.gemm' op has b_halves (op(B)'s column pairs stored as B's two halves) but N = 33 is odd; it must be even}}
  %0 = coda.gemm %a, %b transpose_b b_halves : tensor<8x16xbf16>, tensor<33x16xbf16> -> (tensor<8x33xf32> [m, n]) {
  ^bb0(%acc: f32):
    coda.yield %acc : f32
  }
  return %0 : tensor<8x33xf32>
}

// -----

func.func @halves_input(%a: tensor<8x16xbf16>, %b: tensor<16x32xbf16>, %g: tensor<8x32xf32>) -> tensor<8x32xf32> {
  // expected-error @+1 {{'coda.gemm' op epilogue input #0 spans [m, n halves]; only an output may span n/2 or n halves (an input spans n, every column in order)}}
  %0 = coda.gemm %a, %b ins(%g : tensor<8x32xf32> [m, n halves]) : tensor<8x16xbf16>, tensor<16x32xbf16> -> (tensor<8x32xf32> [m, n]) {
  ^bb0(%acc: f32, %x: f32):
    coda.yield %acc : f32
  }
  return %0 : tensor<8x32xf32>
}

// -----

func.func @halves_vector_output(%a: tensor<8x16xbf16>, %b: tensor<16x32xbf16>) -> tensor<32xf32> {
  // expected-error @+1 {{'coda.gemm' op output #0 spans [n halves]; an output stored in halves spans [m, n halves] (unbatched, neither n/2 nor only n)}}
  %0 = coda.gemm %a, %b : tensor<8x16xbf16>, tensor<16x32xbf16> -> (tensor<32xf32> [n halves]) {
  ^bb0(%acc: f32):
    %1 = coda.col_reduce sum %acc
    coda.yield %1 : f32
  }
  return %0 : tensor<32xf32>
}

// -----

func.func @halves_output_odd_n(%a: tensor<8x16xbf16>, %b: tensor<16x33xbf16>) -> tensor<8x33xf32> {
  // expected-error @+1 {{'coda.gemm' op output #0 spans n halves, but the GEMM has an odd N = 33; n halves needs an even N}}
  %0 = coda.gemm %a, %b : tensor<8x16xbf16>, tensor<16x33xbf16> -> (tensor<8x33xf32> [m, n halves]) {
  ^bb0(%acc: f32):
    coda.yield %acc : f32
  }
  return %0 : tensor<8x33xf32>
}
