// RUN: coda-opt %s --coda-plan-kernels=fast-activations=1 --coda-to-gpu --coda-lower-tile-epilogues | FileCheck %s
// RUN: coda-opt %s --coda-plan-kernels --coda-to-gpu --coda-lower-tile-epilogues | FileCheck %s --check-prefix=EXACT

// With fast-activations, GELU(tanh), SiLU and sigmoid are x/2 (1 + tanh(u)),
// x/2 (1 + tanh(x/2)) and (1 + tanh(x/2)) / 2 on tanh.approx.f32: one
// special-function instruction where the exact forms take an exponential and
// a division.
// CHECK-LABEL: gpu.func @gelu
// CHECK:         %[[X2:.*]] = arith.mulf %[[X:.*]], %[[X]] fastmath<contract> : f32
// CHECK:         %[[CX2:.*]] = arith.mulf %{{.*}}, %[[X2]] fastmath<contract> : f32
// CHECK:         %[[POLY:.*]] = arith.addf %{{.*}}, %[[CX2]] fastmath<contract> : f32
// CHECK:         %[[U:.*]] = arith.mulf %[[X]], %[[POLY]] fastmath<contract> : f32
// CHECK:         %[[H:.*]] = arith.mulf %{{.*}}, %[[X]] fastmath<contract> : f32
// CHECK:         %[[T:.*]] = llvm.inline_asm "tanh.approx.f32 $0, $1;", "=f,f" %[[U]] : (f32) -> f32
// CHECK:         %[[HT:.*]] = arith.mulf %[[H]], %[[T]] fastmath<contract> : f32
// CHECK:         arith.addf %[[H]], %[[HT]] fastmath<contract> : f32
// CHECK-NOT:     llvm.nvvm.ex2.approx
// CHECK-LABEL: gpu.func @silu
// CHECK:         llvm.inline_asm "tanh.approx.f32 $0, $1;"
// CHECK-NOT:     llvm.nvvm.ex2.approx
// CHECK-LABEL: gpu.func @sigmoid
// CHECK:         llvm.inline_asm "tanh.approx.f32 $0, $1;"
// CHECK-NOT:     llvm.nvvm.ex2.approx
// CHECK-LABEL: gpu.func @erf

// GELU(erf) has no tanh form: erf as a rational approximation on the same
// ex2.approx and div.approx either way, not libdevice's erf.
// CHECK-NOT:     tanh.approx
// CHECK-NOT:     math.erf
// CHECK:         llvm.nvvm.div.approx.ftz.f
// CHECK:         llvm.nvvm.ex2.approx.ftz.f
// CHECK:         math.copysign
// CHECK-NOT:     math.erf

// By default: 2^t and a division (ex2.approx.ftz, div.approx.ftz), no tanh.
// EXACT-NOT:   tanh.approx
// EXACT:       llvm.nvvm.ex2.approx.ftz.f
// EXACT:       llvm.nvvm.div.approx.ftz.f
func.func @gelu(%a: tensor<?x64xbf16>, %b: tensor<?x64xbf16>) -> tensor<?x?xf32> {
  %o = coda.gemm %a, %b transpose_b : tensor<?x64xbf16>, tensor<?x64xbf16> -> (tensor<?x?xf32> [m, n]) {
  ^bb0(%acc: f32):
    %0 = coda.activation gelu_tanh %acc
    coda.yield %0 : f32
  }
  return %o : tensor<?x?xf32>
}

func.func @silu(%a: tensor<?x64xbf16>, %b: tensor<?x64xbf16>) -> tensor<?x?xf32> {
  %o = coda.gemm %a, %b transpose_b : tensor<?x64xbf16>, tensor<?x64xbf16> -> (tensor<?x?xf32> [m, n]) {
  ^bb0(%acc: f32):
    %0 = coda.activation silu %acc
    coda.yield %0 : f32
  }
  return %o : tensor<?x?xf32>
}

func.func @sigmoid(%a: tensor<?x64xbf16>, %b: tensor<?x64xbf16>) -> tensor<?x?xf32> {
  %o = coda.gemm %a, %b transpose_b : tensor<?x64xbf16>, tensor<?x64xbf16> -> (tensor<?x?xf32> [m, n]) {
  ^bb0(%acc: f32):
    %0 = coda.activation sigmoid %acc
    coda.yield %0 : f32
  }
  return %o : tensor<?x?xf32>
}

func.func @erf(%a: tensor<?x64xbf16>, %b: tensor<?x64xbf16>) -> tensor<?x?xf32> {
  %o = coda.gemm %a, %b transpose_b : tensor<?x64xbf16>, tensor<?x64xbf16> -> (tensor<?x?xf32> [m, n]) {
  ^bb0(%acc: f32):
    %0 = coda.activation gelu_erf %acc
    coda.yield %0 : f32
  }
  return %o : tensor<?x?xf32>
}
