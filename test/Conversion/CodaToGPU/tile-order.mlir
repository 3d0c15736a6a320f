// RUN: coda-opt %s --coda-plan-kernels=group-rows=3 --coda-to-gpu --coda-lower-tile-epilogues | FileCheck %s
// RUN: coda-opt %s --coda-plan-kernels --coda-to-gpu --coda-lower-tile-epilogues | FileCheck %s --check-prefix=DEFAULT
// RUN: coda-opt %s --coda-plan-kernels="cluster-m=2 group-rows=4" --coda-to-gpu --coda-lower-tile-epilogues | FileCheck %s --check-prefix=CLUSTER
// RUN: coda-opt %s --coda-plan-kernels="tile-n=128 schedule=pingpong" --coda-to-gpu --coda-lower-tile-epilogues | FileCheck %s --check-prefix=PINGPONG

// The tile order (raster): within a batch, the units (tiles, or a cluster's
// vertically adjacent tiles) are walked group-rows row blocks at a time,
// column by column, row by row within a column; the last group may be
// shorter. The ABI records the group size, and the schedule the runtime
// reports.
// CHECK:       group_rows = 3 : i64
// CHECK-SAME:  schedule = "cooperative"
// CHECK:       gpu.func @k
// The producer's tile loop decodes its unit first.
// CHECK:         scf.for %[[UNIT:.*]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args
// CHECK-NEXT:      %[[BATCH:.*]] = arith.divui %[[UNIT]], %[[PER_BATCH:.*]] : i32
// CHECK-NEXT:      %[[IN_BATCH:.*]] = arith.remui %[[UNIT]], %[[PER_BATCH]] : i32
// CHECK-NEXT:      %[[ROWS:.*]] = arith.divui %[[PER_BATCH]], %[[TILES_N:.*]] : i32
// CHECK-NEXT:      %[[G:.*]] = arith.constant 3 : i32
// CHECK-NEXT:      %[[GROUP_SIZE:.*]] = arith.muli %[[G]], %[[TILES_N]] : i32
// CHECK-NEXT:      %[[GROUP:.*]] = arith.divui %[[IN_BATCH]], %[[GROUP_SIZE]] : i32
// CHECK-NEXT:      %[[G1:.*]] = arith.constant 3 : i32
// CHECK-NEXT:      %[[FIRST:.*]] = arith.muli %[[GROUP]], %[[G1]] : i32
// CHECK-NEXT:      %[[G2:.*]] = arith.constant 3 : i32
// CHECK-NEXT:      %[[LEFT:.*]] = arith.subi %[[ROWS]], %[[FIRST]] : i32
// CHECK-NEXT:      %[[GROUP_ROWS:.*]] = arith.minui %[[LEFT]], %[[G2]] : i32
// CHECK-NEXT:      %[[IN_GROUP:.*]] = arith.remui %[[IN_BATCH]], %[[GROUP_SIZE]] : i32
// CHECK-NEXT:      %[[ROW_IN:.*]] = arith.remui %[[IN_GROUP]], %[[GROUP_ROWS]] : i32
// CHECK-NEXT:      %[[ROW:.*]] = arith.addi %[[FIRST]], %[[ROW_IN]] : i32
// CHECK-NEXT:      %[[COL:.*]] = arith.divui %[[IN_GROUP]], %[[GROUP_ROWS]] : i32
// CHECK:           arith.muli %[[ROW]], %c128_i32
// CHECK:           arith.muli %[[COL]], %c256_i32

// Groups of 8 row blocks by default.
// DEFAULT:     group_rows = 8 : i64
// DEFAULT:     scf.for
// DEFAULT:       arith.divui %{{.*}}, %{{.*}} : i32
// DEFAULT:       %[[G:.*]] = arith.constant 8 : i32
// DEFAULT-NEXT:  arith.muli %[[G]], %{{.*}} : i32

// Ping-pong consumers walk the same order.
// PINGPONG:    group_rows = 8 : i64
// PINGPONG-SAME: schedule = "pingpong"

// In clusters of two, a group of 4 row blocks is 2 units of two tiles.
// CLUSTER:     cluster_m = 2 : i64, group_rows = 4 : i64
// CLUSTER:     scf.for
// CLUSTER:       arith.divui %{{.*}}, %{{.*}} : i32
// CLUSTER:       %[[G:.*]] = arith.constant 2 : i32
// CLUSTER-NEXT:  arith.muli %[[G]], %{{.*}} : i32
// CLUSTER:       arith.minui %{{.*}}, %c2_i32
func.func @k(%a: tensor<?x64xbf16>, %b: tensor<?x64xbf16>) -> tensor<?x?xf32> {
  %o = coda.gemm %a, %b transpose_b : tensor<?x64xbf16>, tensor<?x64xbf16> -> (tensor<?x?xf32> [m, n]) {
  ^bb0(%acc: f32):
    coda.yield %acc : f32
  }
  return %o : tensor<?x?xf32>
}
