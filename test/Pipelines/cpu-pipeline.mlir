// RUN: coda-opt %s --coda-cpu-pipeline | FileCheck %s --implicit-check-not=@malloc

// The CPU pipeline allocates buffers with aligned_alloc (not malloc aligned
// by integer arithmetic, which would hide from LLVM that they alias no
// argument), and the GEMM's sum over K keeps its reassociation flags down to
// the LLVM dialect, so that the JIT vectorizes it.
// CHECK:     llvm.func @aligned_alloc(i64, i64) -> !llvm.ptr
// CHECK:     llvm.func @gemm(
// CHECK:       llvm.call @aligned_alloc
// CHECK:       llvm.fmul %{{.*}}, %{{.*}} {fastmathFlags = #llvm.fastmath<contract, reassoc>} : f32
// CHECK:       llvm.fadd %{{.*}}, %{{.*}} {fastmathFlags = #llvm.fastmath<contract, reassoc>} : f32
func.func @gemm(%a: tensor<?x?xf32>, %b: tensor<?x?xf32>) -> tensor<?x?xf32> {
  %0 = coda.gemm %a, %b transpose_b : tensor<?x?xf32>, tensor<?x?xf32> -> (tensor<?x?xf32> [m, n]) {
  ^bb0(%acc: f32):
    coda.yield %acc : f32
  }
  return %0 : tensor<?x?xf32>
}
