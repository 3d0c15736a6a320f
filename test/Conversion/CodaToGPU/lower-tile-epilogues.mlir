// The third stage on its own: coda-lower-tile-epilogues lowers a
// coda.tile_epilogue written by hand, in a kernel of its own.
// RUN: coda-opt %s --split-input-file --coda-lower-tile-epilogues --verify-diagnostics | FileCheck %s

!acc = !llvm.struct<(f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32)>
#plan = #coda.kernel_plan<chip = "sm_90a", tile_m = 128, tile_n = 64, stages = 4, schedule = cooperative, cluster_m = 1, group_rows = 8, epilogue_vector_bytes = 16>

// A bias along n and a scale: the interior copy reads the bias a pair at a
// time, scales and stores each row's 16-byte chunks after the quad
// transpose; the other copy checks its accesses. The products may contract.
// CHECK-LABEL: gpu.func @scale_bias
// CHECK-NOT:     coda.tile_epilogue
// CHECK:         nvvm.vote.sync all
// CHECK:         scf.if
// CHECK:           llvm.load %{{.*}} : !llvm.ptr<1> -> i32
// CHECK:           arith.mulf %{{.*}} fastmath<contract> : f32
// CHECK:           gpu.shuffle xor
// CHECK:           llvm.store %{{.*}} : vector<4xi32>, !llvm.ptr<1>
// CHECK:         } else {
// CHECK:           arith.cmpi ult
// CHECK:         gpu.return
gpu.module @kernels {
  gpu.func @scale_bias(%acc: !acc, %batch: i32, %row: i32, %col: i32, %m: i32, %n: i32, %batches: i32, %bias: !llvm.ptr<1>, %scale: f32, %out: !llvm.ptr<1>) kernel {
    coda.tile_epilogue %acc at(%batch, %row, %col) of(%batches, %m, %n) ins(%bias, %scale : !llvm.ptr<1>, f32) outs(%out : !llvm.ptr<1>) attributes {input_dims = [#coda.dims<[n]>, #coda.dims<[]>], input_types = [tensor<64xbf16>, f32], output_types = [tensor<?x64xbf16>], plan = #plan, result_dims = [#coda.dims<[m, n]>]} : !acc {
    ^bb0(%a: f32, %b: f32, %s: f32):
      %0 = arith.addf %a, %b : f32
      %1 = arith.mulf %0, %s : f32
      coda.yield %1 : f32
    }
    gpu.return
  }
}

// -----

!acc = !llvm.struct<(f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32)>
#plan = #coda.kernel_plan<chip = "sm_90a", tile_m = 128, tile_n = 64, stages = 4, schedule = cooperative, cluster_m = 1, group_rows = 8, epilogue_vector_bytes = 16>

func.func @outside(%acc: !acc, %i: i32, %out: !llvm.ptr<1>) {
  // expected-error @+1 {{'coda.tile_epilogue' op must be inside a gpu.func: it runs on the registers of a kernel's threads}}
  coda.tile_epilogue %acc at(%i, %i, %i) of(%i, %i, %i) outs(%out : !llvm.ptr<1>) attributes {input_dims = [], input_types = [], output_types = [tensor<?x64xf32>], plan = #plan, result_dims = [#coda.dims<[m, n]>]} : !acc {
  ^bb0(%a: f32):
    coda.yield %a : f32
  }
  return
}
