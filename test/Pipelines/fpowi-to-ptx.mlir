// REQUIRES: ptxas
// RUN: coda-opt %s --coda-gpu-pipeline="chip=sm_90a" | FileCheck %s
//
// x^2 as frontends emit it (math.fpowi with an i64 exponent: torch-mlir's
// pow, the variance of a raised LayerNorm) becomes a multiplication in the
// kernel, as on the CPU, not a call of libdevice's powi (which takes an i32
// exponent: the call was left unresolved and the kernel computed NaN).
// CHECK: gpu.binary @square_kernels
// CHECK-NOT: powi
// CHECK-SAME: mul.rn.f32
func.func @square(%a: tensor<?x64xbf16>, %b: tensor<128x64xbf16>) -> (tensor<?x128xf32> {coda.name = "output"}) {
  %o = coda.gemm %a, %b transpose_b : tensor<?x64xbf16>, tensor<128x64xbf16> -> (tensor<?x128xf32> [m, n]) {
  ^bb0(%acc: f32):
    %c2 = arith.constant 2 : i64
    %0 = math.fpowi %acc, %c2 : f32, i64
    coda.yield %0 : f32
  }
  return %o : tensor<?x128xf32>
}
