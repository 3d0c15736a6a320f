// End to end with bf16 operands: run as written, raised (exact fusion only)
// and raised with low-precision-epilogue=true, and compare the printed
// results. Exact raising may only move a result across a bf16 rounding
// boundary (one bf16 ulp, 2^-8 relative). The low-precision raising computes
// in f32 what linalg rounds to bf16 after every op, so it may differ by a few
// bf16 ulps, far less than a wrong bias, activation or layout would.
//
// REQUIRES: mlir-runner
// RUN: cat %s %S/Inputs/e2e-driver.mlir | coda-opt --coda-raise-linalg | FileCheck %s --check-prefix=EXACT
// RUN: cat %s %S/Inputs/e2e-driver.mlir | coda-opt --coda-raise-linalg="low-precision-epilogue=true" | FileCheck %s --check-prefix=NARROW
// RUN: cat %s %S/Inputs/e2e-driver.mlir | coda-opt --coda-cpu-pipeline \
// RUN:   | %mlir_runner -e main -entry-point-result=void -shared-libs=%mlir_runner_utils > %t.linalg
// RUN: cat %s %S/Inputs/e2e-driver.mlir | coda-opt --coda-raise-linalg --coda-cpu-pipeline \
// RUN:   | %mlir_runner -e main -entry-point-result=void -shared-libs=%mlir_runner_utils > %t.exact
// RUN: cat %s %S/Inputs/e2e-driver.mlir | coda-opt --coda-raise-linalg="low-precision-epilogue=true" --coda-cpu-pipeline \
// RUN:   | %mlir_runner -e main -entry-point-result=void -shared-libs=%mlir_runner_utils > %t.narrow
// RUN: %python %testlib/compare_memref_prints.py %t.linalg %t.exact --rtol 8e-3 --atol 1e-6
// RUN: %python %testlib/compare_memref_prints.py %t.linalg %t.narrow --rtol 3e-2 --atol 1.6e-2

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d1)>

// nn.Linear in bf16 with f32 accumulation, bias and GELU in f32, the result
// rounded to bf16: fully raised either way.
// EXACT-LABEL: func.func @linear_gelu_bf16
// EXACT-NOT:     linalg.
// EXACT:         coda.gemm {{.*}} -> (tensor<6x12xbf16> [m, n])
// EXACT:         coda.activation gelu_erf
// EXACT-NOT:     linalg.
// NARROW-LABEL: func.func @linear_gelu_bf16
// NARROW-NOT:    linalg.
func.func @linear_gelu_bf16(%x: tensor<6x8xbf16>, %w: tensor<12x8xbf16>, %bias: tensor<12xf32>) -> tensor<6x12xbf16> {
  %zero = arith.constant 0.000000e+00 : f32
  %e0 = tensor.empty() : tensor<8x12xbf16>
  %wt = linalg.transpose ins(%w : tensor<12x8xbf16>) outs(%e0 : tensor<8x12xbf16>) permutation = [1, 0]
  %e = tensor.empty() : tensor<6x12xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%e : tensor<6x12xf32>) -> tensor<6x12xf32>
  %mm = linalg.matmul ins(%x, %wt : tensor<6x8xbf16>, tensor<8x12xbf16>) outs(%acc : tensor<6x12xf32>) -> tensor<6x12xf32>
  %eb = tensor.empty() : tensor<6x12xbf16>
  %y = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%mm, %bias : tensor<6x12xf32>, tensor<12xf32>) outs(%eb : tensor<6x12xbf16>) {
  ^bb0(%in: f32, %b: f32, %out: bf16):
    %s = arith.addf %in, %b : f32
    %zero0 = arith.constant 0.000000e+00 : f32
    %two = arith.constant 2.000000e+00 : f32
    %c = arith.subf %s, %zero0 : f32
    %sqrt2 = math.sqrt %two : f32
    %d = arith.divf %c, %sqrt2 : f32
    %erf = math.erf %d : f32
    %one = arith.constant 1.000000e+00 : f32
    %p = arith.addf %one, %erf : f32
    %half = arith.constant 5.000000e-01 : f32
    %cdf = arith.mulf %half, %p : f32
    %g = arith.mulf %s, %cdf : f32
    %t = arith.truncf %g : f32 to bf16
    linalg.yield %t : bf16
  } -> tensor<6x12xbf16>
  return %y : tensor<6x12xbf16>
}

// A bf16 model as torch-mlir lowers it: the bias add and the tanh GELU (with
// torch-mlir's constant) compute in bf16. Exact raising fuses the bias add
// (the product rounded, coda.round, then added in f32 and rounded as the
// output is written: what the bf16 add gives) and stops at the GELU, whose
// tanh and power in bf16 f32 does not give exactly; low-precision raising
// fuses everything.
// EXACT-LABEL: func.func @bf16_chain
// EXACT:         %[[G:.*]] = coda.gemm {{.*}} ins(%{{.*}} : tensor<12xbf16> [n]) {{.*}} -> (tensor<6x12xbf16> [m, n])
// EXACT:           coda.round %{{.*}} to bf16
// EXACT:         linalg.generic
// EXACT-SAME:      ins(%[[G]]
// EXACT:           math.tanh %{{.*}} : bf16
// NARROW-LABEL: func.func @bf16_chain
// NARROW-NOT:    linalg.
// NARROW:        coda.gemm {{.*}} -> (tensor<6x12xbf16> [m, n])
// NARROW-NOT:    linalg.
func.func @bf16_chain(%x: tensor<6x8xbf16>, %w: tensor<8x12xbf16>, %bias: tensor<12xbf16>) -> tensor<6x12xbf16> {
  %zero = arith.constant 0.000000e+00 : f32
  %e = tensor.empty() : tensor<6x12xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%e : tensor<6x12xf32>) -> tensor<6x12xf32>
  %mm = linalg.matmul ins(%x, %w : tensor<6x8xbf16>, tensor<8x12xbf16>) outs(%acc : tensor<6x12xf32>) -> tensor<6x12xf32>
  %eb = tensor.empty() : tensor<6x12xbf16>
  %t = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%mm : tensor<6x12xf32>) outs(%eb : tensor<6x12xbf16>) {
  ^bb0(%in: f32, %o: bf16):
    %r = arith.truncf %in : f32 to bf16
    linalg.yield %r : bf16
  } -> tensor<6x12xbf16>
  %b = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%t, %bias : tensor<6x12xbf16>, tensor<12xbf16>) outs(%eb : tensor<6x12xbf16>) {
  ^bb0(%in: bf16, %v: bf16, %o: bf16):
    %r = arith.addf %in, %v : bf16
    linalg.yield %r : bf16
  } -> tensor<6x12xbf16>
  %g = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%b : tensor<6x12xbf16>) outs(%eb : tensor<6x12xbf16>) {
  ^bb0(%in: bf16, %o: bf16):
    %three = arith.constant 3 : i64
    %c = arith.constant 4.467770e-02 : bf16
    %k = arith.constant 7.968750e-01 : bf16
    %one = arith.constant 1.000000e+00 : bf16
    %half = arith.constant 5.000000e-01 : bf16
    %x3 = math.fpowi %in, %three : bf16, i64
    %t0 = arith.mulf %x3, %c : bf16
    %t1 = arith.addf %in, %t0 : bf16
    %t2 = arith.mulf %k, %t1 : bf16
    %t3 = math.tanh %t2 : bf16
    %t4 = arith.addf %one, %t3 : bf16
    %t5 = arith.mulf %half, %t4 : bf16
    %r = arith.mulf %in, %t5 : bf16
    linalg.yield %r : bf16
  } -> tensor<6x12xbf16>
  return %g : tensor<6x12xbf16>
}

// EXACT-LABEL: func.func @main
// NARROW-LABEL: func.func @main
func.func @main() {
  %c3 = arith.constant 3 : index
  %c5 = arith.constant 5 : index
  %c6 = arith.constant 6 : index
  %c7 = arith.constant 7 : index
  %c8 = arith.constant 8 : index
  %c11 = arith.constant 11 : index
  %c12 = arith.constant 12 : index
  %x = call @matrix_bf16(%c6, %c8, %c3, %c5) : (index, index, index, index) -> tensor<?x?xbf16>
  %xs = tensor.cast %x : tensor<?x?xbf16> to tensor<6x8xbf16>
  %w = call @matrix_bf16(%c12, %c8, %c5, %c7) : (index, index, index, index) -> tensor<?x?xbf16>
  %ws = tensor.cast %w : tensor<?x?xbf16> to tensor<12x8xbf16>
  %wkn = call @matrix_bf16(%c8, %c12, %c11, %c3) : (index, index, index, index) -> tensor<?x?xbf16>
  %wkns = tensor.cast %wkn : tensor<?x?xbf16> to tensor<8x12xbf16>
  %v = call @matrix(%c3, %c12, %c5, %c3) : (index, index, index, index) -> tensor<?x?xf32>
  %vs = tensor.cast %v : tensor<?x?xf32> to tensor<3x12xf32>
  %bias = tensor.extract_slice %vs[0, 0] [1, 12] [1, 1] : tensor<3x12xf32> to tensor<12xf32>
  %vb = call @matrix_bf16(%c3, %c12, %c7, %c5) : (index, index, index, index) -> tensor<?x?xbf16>
  %vbs = tensor.cast %vb : tensor<?x?xbf16> to tensor<3x12xbf16>
  %bias_bf16 = tensor.extract_slice %vbs[1, 0] [1, 12] [1, 1] : tensor<3x12xbf16> to tensor<12xbf16>

  %y = call @linear_gelu_bf16(%xs, %ws, %bias) : (tensor<6x8xbf16>, tensor<12x8xbf16>, tensor<12xf32>) -> tensor<6x12xbf16>
  %z = call @bf16_chain(%xs, %wkns, %bias_bf16) : (tensor<6x8xbf16>, tensor<8x12xbf16>, tensor<12xbf16>) -> tensor<6x12xbf16>

  %y0 = tensor.cast %y : tensor<6x12xbf16> to tensor<?x?xbf16>
  call @print2d_bf16(%y0) : (tensor<?x?xbf16>) -> ()
  %z0 = tensor.cast %z : tensor<6x12xbf16> to tensor<?x?xbf16>
  call @print2d_bf16(%z0) : (tensor<?x?xbf16>) -> ()
  return
}
