// RUN: coda-opt %s --coda-launch-programs --split-input-file --verify-diagnostics | FileCheck %s

// Every program's body becomes a launch through the host runtime: its
// arguments packed five words each (a tensor's address, rank and sizes; a
// scalar's bits), coda_host_shapes filling in the outputs' sizes, the
// outputs allocated and packed, then coda_host_launch with the program's
// index among the module's programs. The host code around the calls is left
// as it is.

// CHECK-DAG:   func.func private @coda_host_shapes(i64, memref<?xi64>) attributes {llvm.emit_c_interface}
// CHECK-DAG:   func.func private @coda_host_launch(i64, memref<?xi64>) attributes {llvm.emit_c_interface}
// CHECK-LABEL: func.func @first(
// CHECK:         %[[I0:.*]] = arith.constant 0 : i64
// CHECK:         call @coda_host_launch(%[[I0]],
// CHECK-LABEL: func.func @second(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<?x8xf32>, %[[W:[^:]*]]: tensor<12x8xf32>, %[[S:[^:]*]]: f32 {coda.name = "gain"}, %[[SEED:[^:]*]]: i64 {coda.name = "seed"})
// CHECK-NOT:     coda.gemm
// CHECK:         %[[P:.*]] = memref.alloca() : memref<30xi64>
// CHECK:         %[[XB:.*]] = bufferization.to_buffer %[[X]] read_only : tensor<?x8xf32> to memref<?x8xf32>
// CHECK:         %[[XP:.*]] = memref.extract_aligned_pointer_as_index %[[XB]]
// CHECK:         %[[XW:.*]] = arith.index_cast %[[XP]] : index to i64
// CHECK:         memref.store %[[XW]], %[[P]][%{{.*}}] : memref<30xi64>
// CHECK:         %[[BITS:.*]] = arith.bitcast %[[S]] : f32 to i32
// CHECK:         %[[WORD:.*]] = arith.extui %[[BITS]] : i32 to i64
// CHECK:         memref.store %[[WORD]], %[[P]]
// CHECK:         memref.store %[[SEED]], %[[P]]
// CHECK:         %[[I1:.*]] = arith.constant 1 : i64
// CHECK:         %[[DYN:.*]] = memref.cast %[[P]] : memref<30xi64> to memref<?xi64>
// CHECK:         call @coda_host_shapes(%[[I1]], %[[DYN]])
// CHECK:         %[[M:.*]] = memref.load %[[P]]
// CHECK:         %[[MI:.*]] = arith.index_cast %[[M]] : i64 to index
// CHECK:         %[[OUT0:.*]] = memref.alloc(%[[MI]]) : memref<?x12xf32>
// CHECK:         %[[OUT1:.*]] = memref.alloc() : memref<12xf32>
// CHECK:         call @coda_host_launch(%[[I1]], %[[DYN]])
// CHECK:         %[[T0:.*]] = bufferization.to_tensor %[[OUT0]] restrict writable
// CHECK:         %[[T1:.*]] = bufferization.to_tensor %[[OUT1]] restrict writable
// CHECK:         return %[[T0]], %[[T1]]
// CHECK-LABEL: func.func @host(
// CHECK:         call @first(
// CHECK:         call @second(
// CHECK:         arith.addf
func.func @first(%x: tensor<?x8xf32>, %w: tensor<8x8xf32>) -> (tensor<?x8xf32> {coda.name = "output"}) {
  %0 = coda.gemm %x, %w transpose_b : tensor<?x8xf32>, tensor<8x8xf32> -> (tensor<?x8xf32> [m, n]) {
  ^bb0(%acc: f32):
    coda.yield %acc : f32
  }
  return %0 : tensor<?x8xf32>
}
func.func @second(%x: tensor<?x8xf32>, %w: tensor<12x8xf32>, %gain: f32 {coda.name = "gain"},
                  %seed: i64 {coda.name = "seed"})
    -> (tensor<?x12xf32> {coda.name = "output"}, tensor<12xf32> {coda.name = "sum"}) {
  %0:2 = coda.gemm %x, %w transpose_b ins(%gain : f32, %seed : i64)
      : tensor<?x8xf32>, tensor<12x8xf32> -> (tensor<?x12xf32> [m, n], tensor<12xf32> [n]) {
  ^bb0(%acc: f32, %g: f32, %s: i64):
    %y = arith.mulf %acc, %g : f32
    %d = coda.dropout %y, %s {p = 0.5 : f32}
    %c = coda.col_reduce sum %d
    coda.yield %d, %c : f32, f32
  }
  return %0#0, %0#1 : tensor<?x12xf32>, tensor<12xf32>
}
func.func @host(%x: tensor<?x8xf32>, %w1: tensor<8x8xf32>, %w2: tensor<12x8xf32>) -> tensor<?x12xf32> {
  %h = call @first(%x, %w1) : (tensor<?x8xf32>, tensor<8x8xf32>) -> tensor<?x8xf32>
  %g = arith.constant 2.0 : f32
  %s = arith.constant 3 : i64
  %y:2 = call @second(%h, %w2, %g, %s) : (tensor<?x8xf32>, tensor<12x8xf32>, f32, i64) -> (tensor<?x12xf32>, tensor<12xf32>)
  %z = arith.addf %y#0, %y#0 : tensor<?x12xf32>
  return %z : tensor<?x12xf32>
}

// -----

// A module without programs is left as it is.
// CHECK-LABEL: func.func @no_programs
// CHECK-NOT:   coda_host
func.func @no_programs(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}

// -----

// expected-error @+1 {{'unoutlined' holds a coda.gemm but is not a coda program (its body must be exactly one coda.gemm and a return); run coda-outline-programs first, which makes each such coda.gemm a program of its own}}
func.func @unoutlined(%x: tensor<?x8xf32>, %w: tensor<8x8xf32>) -> tensor<?x8xf32> {
  %0 = coda.gemm %x, %w transpose_b : tensor<?x8xf32>, tensor<8x8xf32> -> (tensor<?x8xf32> [m, n]) {
  ^bb0(%acc: f32):
    coda.yield %acc : f32
  }
  %1 = arith.addf %0, %0 : tensor<?x8xf32>
  return %1 : tensor<?x8xf32>
}
