// The second stage: coda-to-gpu builds the kernel skeleton, with each tile's
// epilogue still the GEMM's region, as a coda.tile_epilogue on the consumer's
// accumulator fragments. The op prints and parses back.
// RUN: coda-opt %s --coda-plan-kernels=tile-n=64 --coda-to-gpu | FileCheck %s
// RUN: coda-opt %s --coda-plan-kernels=tile-n=64 --coda-to-gpu | coda-opt | FileCheck %s
// RUN: coda-opt %s --coda-plan-kernels="tile-m=256 tile-n=64" --coda-to-gpu | FileCheck %s --check-prefix=TWO

// CHECK-LABEL: gpu.func @bias_relu(
// CHECK-SAME:    %[[BIAS:[a-z0-9]+]]: !llvm.ptr<1>, %[[OUT:[a-z0-9]+]]: !llvm.ptr<1>, %[[M:[a-z0-9]+]]: i32, %[[N:[a-z0-9]+]]: i32, %{{.*}}: i32, %[[BATCHES:[a-z0-9]+]]: i32)
// The op takes the kernel's parameters for the GEMM's inputs and outputs,
// and the plan; nothing is stored before it is lowered.
// CHECK:         coda.tile_epilogue %[[ACC:.*]] at(%{{.*}}, %[[ROW:.*]], %[[COL:.*]]) of(%[[BATCHES]], %[[M]], %[[N]])
// CHECK-SAME:      ins(%[[BIAS]] : !llvm.ptr<1>) outs(%[[OUT]] : !llvm.ptr<1>)
// CHECK-SAME:      attributes {input_dims = [#coda.dims<[n]>], input_types = [tensor<128xf32>], output_types = [tensor<?x128xbf16>],
// CHECK-SAME:      plan = #coda.kernel_plan<chip = "sm_90a", tile_m = 128, tile_n = 64, {{.*}}, epilogue_vector_bytes = 16, chunked_loads = true>, result_dims = [#coda.dims<[m, n]>]}
// CHECK-SAME:      : !llvm.struct<(f32, {{.*}})> {
// CHECK-NEXT:    ^bb0(%[[A:.*]]: f32, %[[B:.*]]: f32):
// CHECK-NEXT:      %[[S:.*]] = arith.addf %[[A]], %[[B]] : f32
// CHECK-NEXT:      %[[R:.*]] = coda.activation relu %[[S]]
// CHECK-NEXT:      coda.yield %[[R]] : f32
// CHECK-NEXT:    }
// CHECK-NOT:     llvm.store

// A consumer of 128 rows holds two fragments.
// TWO:           coda.tile_epilogue %{{.*}}, %{{.*}} at(
// TWO-SAME:        : !llvm.struct<(f32, {{.*}})>, !llvm.struct<(f32, {{.*}})> {
func.func @bias_relu(%x: tensor<?x64xbf16>, %w: tensor<128x64xbf16>, %bias: tensor<128xf32>) -> tensor<?x128xbf16> {
  %o = coda.gemm %x, %w transpose_b ins(%bias : tensor<128xf32> [n]) : tensor<?x64xbf16>, tensor<128x64xbf16> -> (tensor<?x128xbf16> [m, n]) {
  ^bb0(%acc: f32, %b: f32):
    %s = arith.addf %acc, %b : f32
    %r = coda.activation relu %s
    coda.yield %r : f32
  }
  return %o : tensor<?x128xbf16>
}
