// The third stage on its own, a case per pattern file: coda-lower-tile-epilogues lowers a
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

// -----

// row_partials on an epilogue whose row reduction the row's elements need
// (x minus its row max, an output along n): not row statistics.
!acc = !llvm.struct<(f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32)>
#plan = #coda.kernel_plan<chip = "sm_90a", tile_m = 128, tile_n = 64, stages = 4, schedule = cooperative, cluster_m = 1, group_rows = 8, epilogue_vector_bytes = 16>
gpu.module @kernels {
  gpu.func @not_statistics(%acc: !acc, %i: i32, %out: !llvm.ptr<1>, %scratch: !llvm.ptr<1>) kernel {
    // expected-error @+1 {{'coda.tile_epilogue' op has row_partials, but its row reductions are not row statistics (whose results reach only outputs along [m], through scalar arith and math ops): they cannot be merged after the GEMM; drop row_partials and run them in a cluster along N}}
    coda.tile_epilogue %acc at(%i, %i, %i) of(%i, %i, %i) outs(%out : !llvm.ptr<1>) row_partials(%scratch : !llvm.ptr<1>) attributes {input_dims = [], input_types = [], output_types = [tensor<?x64xf32>], plan = #plan, result_dims = [#coda.dims<[m, n]>]} : !acc {
    ^bb0(%a: f32):
      %m = coda.row_reduce max %a
      %d = arith.subf %a, %m : f32
      coda.yield %d : f32
    }
    gpu.return
  }
}

// -----

// ReductionPatterns: a row max over the quad (lanes l ^ 1, l ^ 2) written to
// a [m] output, and a column sum over the warp's rows (lanes l ^ 4, 8, 16)
// added to its [n] output with one atomic per column and warp.
!acc = !llvm.struct<(f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32)>
#plan = #coda.kernel_plan<chip = "sm_90a", tile_m = 128, tile_n = 64, stages = 4, schedule = cooperative, cluster_m = 1, group_rows = 8, epilogue_vector_bytes = 16>
// CHECK-LABEL: gpu.func @reductions
// CHECK:         gpu.shuffle xor %{{.*}}, %c1_i32
// CHECK:         gpu.shuffle xor %{{.*}}, %c2_i32
// CHECK:         arith.maximumf
// CHECK:         gpu.shuffle xor %{{.*}}, %c4_i32
// CHECK:         gpu.shuffle xor %{{.*}}, %c8_i32
// CHECK:         gpu.shuffle xor %{{.*}}, %c16_i32
// CHECK:         llvm.atomicrmw fadd %{{.*}} monotonic
gpu.module @kernels {
  gpu.func @reductions(%acc: !acc, %i: i32, %max: !llvm.ptr<1>, %sum: !llvm.ptr<1>) kernel {
    coda.tile_epilogue %acc at(%i, %i, %i) of(%i, %i, %i) outs(%max, %sum : !llvm.ptr<1>, !llvm.ptr<1>) attributes {input_dims = [], input_types = [], output_types = [tensor<?xf32>, tensor<64xf32>], plan = #plan, result_dims = [#coda.dims<[m]>, #coda.dims<[n]>]} : !acc {
    ^bb0(%a: f32):
      %0 = coda.row_reduce max %a
      %1 = coda.col_reduce sum %a
      coda.yield %0, %1 : f32, f32
    }
    gpu.return
  }
}

// -----

// DropoutPatterns: Philox rounds (32 x 32 -> 64-bit products) from the seed,
// one call per 8 slots.
!acc = !llvm.struct<(f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32)>
#plan = #coda.kernel_plan<chip = "sm_90a", tile_m = 128, tile_n = 64, stages = 4, schedule = cooperative, cluster_m = 1, group_rows = 8, epilogue_vector_bytes = 16>
// CHECK-LABEL: gpu.func @dropout
// CHECK:         arith.trunci %[[SEED:.*]] : i64 to i32
// CHECK:         arith.mului_extended
// CHECK:         llvm.store
gpu.module @kernels {
  gpu.func @dropout(%acc: !acc, %i: i32, %seed: i64, %out: !llvm.ptr<1>) kernel {
    coda.tile_epilogue %acc at(%i, %i, %i) of(%i, %i, %i) ins(%seed : i64) outs(%out : !llvm.ptr<1>) attributes {input_dims = [#coda.dims<[]>], input_types = [i64], output_types = [tensor<?x64xf32>], plan = #plan, result_dims = [#coda.dims<[m, n]>]} : !acc {
    ^bb0(%a: f32, %s: i64):
      %0 = coda.dropout %a, %s {p = 0.1 : f32}
      coda.yield %0 : f32
    }
    gpu.return
  }
}

// -----

// An accumulator [m, n/2]: the thread's 16 product columns are 32 output
// columns, runs of 4 (the product at the even ones, absent at the odd ones:
// alpha scales the product, and a sum with an absent column is the other
// term, so the zero is never used); partner(x, 1) is the thread's own
// neighbouring slot, so no shuffle; outputs are stored by 4-byte pairs,
// without the quad transpose of 16-byte chunks.
!acc = !llvm.struct<(f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32)>
#plan = #coda.kernel_plan<chip = "sm_90a", tile_m = 128, tile_n = 64, stages = 4, schedule = cooperative, cluster_m = 1, group_rows = 8, epilogue_vector_bytes = 16>
// CHECK-LABEL: gpu.func @half_accumulator
// CHECK:         scf.if
// CHECK-NOT:       gpu.shuffle
// CHECK:           %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NOT:       %[[ZERO]]{{[,) ]}}
// CHECK-NOT:       gpu.shuffle
// CHECK:           arith.mulf %{{.*}}, %arg2
// CHECK-NOT:       %[[ZERO]]{{[,) ]}}
// CHECK:           llvm.store %{{.*}} : i32, !llvm.ptr<1>
// CHECK-NOT:       vector<4xi32>
// CHECK-NOT:       %[[ZERO]]{{[,) ]}}
// CHECK:         } else {
// CHECK:         gpu.return
gpu.module @kernels {
  gpu.func @half_accumulator(%acc: !acc, %i: i32, %alpha: f32, %out: !llvm.ptr<1>) kernel {
    coda.tile_epilogue %acc at(%i, %i, %i) of(%i, %i, %i) alpha(%alpha) outs(%out : !llvm.ptr<1>) attributes {accumulator_half_n, input_dims = [], input_types = [], output_types = [tensor<?x128xbf16>], plan = #plan, result_dims = [#coda.dims<[m, n]>]} : !acc {
    ^bb0(%a: f32):
      %p = coda.partner %a xor 1
      %0 = arith.addf %a, %p : f32
      coda.yield %0 : f32
    }
    gpu.return
  }
}

// -----

// A product with an absent column of an accumulator [m, n/2] is absent,
// its other factor not even built: a pair epilogue's gradient (SwiGLU's)
// computes the activation at the pair's first column only. In an interior
// tile the thread's 2 row slots of 16 product columns take 32 SiLUs (each
// one ex2), not 64.
!acc = !llvm.struct<(f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32)>
#plan = #coda.kernel_plan<chip = "sm_90a", tile_m = 128, tile_n = 64, stages = 4, schedule = cooperative, cluster_m = 1, group_rows = 8, epilogue_vector_bytes = 16>
// CHECK-LABEL: gpu.func @half_accumulator_product
// CHECK:         scf.if
// CHECK-COUNT-32:  llvm.nvvm.ex2.approx.ftz.f
// CHECK-NOT:       llvm.nvvm.ex2.approx.ftz.f
// CHECK:         } else {
gpu.module @kernels {
  gpu.func @half_accumulator_product(%acc: !acc, %i: i32, %x: !llvm.ptr<1>, %out: !llvm.ptr<1>) kernel {
    coda.tile_epilogue %acc at(%i, %i, %i) of(%i, %i, %i) ins(%x : !llvm.ptr<1>) outs(%out : !llvm.ptr<1>) attributes {accumulator_half_n, input_dims = [#coda.dims<[m, n]>], input_types = [tensor<?x128xbf16>], output_types = [tensor<?x128xbf16>], plan = #plan, result_dims = [#coda.dims<[m, n]>]} : !acc {
    ^bb0(%a: f32, %v: f32):
      %s = coda.activation silu %v
      %0 = arith.mulf %a, %s : f32
      coda.yield %0 : f32
    }
    gpu.return
  }
}
