// RUN: coda-opt %s --coda-plan-kernels=cluster-m=2 --coda-to-gpu | FileCheck %s
// RUN: coda-opt %s --coda-plan-kernels="cluster-m=2 tile-n=192" --coda-to-gpu | FileCheck %s --check-prefix=MN
// RUN: coda-opt %s --coda-plan-kernels --coda-to-gpu --coda-lower-tile-epilogues | FileCheck %s --check-prefix=ALONE --implicit-check-not=nvvm.cluster --implicit-check-not=nvvm.mapa --implicit-check-not=multicast_mask

// Clusters of two blocks along M: the blocks compute vertically adjacent
// tiles and share their B tile, each loading half of it into both by TMA
// multicast. The ABI asks for the cluster launch; B's box is half the tile's
// 256 rows, A's is the block's own 128.
// CHECK-LABEL: func.func private @k_major(
// CHECK-SAME:    cluster_m = 2 : i64
// CHECK-SAME:    params = [{box = array<i64: 64, 128>, index = 0 : i64, kind = "tensor_map", role = "a"},
// CHECK-SAME:              {box = array<i64: 64, 128>, index = 1 : i64, kind = "tensor_map", role = "b"},

// The barriers of both blocks are initialized (256 consumer arrivals per
// empty barrier, as without clusters) before either block uses the other's.
// CHECK:       gpu.func @k_major
// CHECK:         %[[TID:.*]] = arith.index_castui %thread_id_x
// CHECK:         %[[LANE:.*]] = arith.remui %[[TID]], %c32_i32
// CHECK-COUNT-8: nvvm.mbarrier.init %{{.*}}, %c{{1|256}}_i32
// CHECK:         nvvm.fence.mbarrier.init
// CHECK:         nvvm.cluster.arrive
// CHECK-NEXT:    nvvm.cluster.wait

// Units of two tiles: ceil(ceil(M / 128) / 2) row pairs x N tiles x batch;
// the cluster is blockIdx.x / 2, its rank blockIdx.x % 2.
// CHECK:         %[[M_TILES_UP:.*]] = arith.addi %arg3, %c127_i32
// CHECK:         %[[TILES_M:.*]] = arith.divui %[[M_TILES_UP]], %c128_i32
// CHECK:         %[[PAIRS_UP:.*]] = arith.addi %[[TILES_M]], %c1_i32
// CHECK:         %[[PAIRS:.*]] = arith.divui %[[PAIRS_UP]], %c2_i32
// CHECK:         %[[BLOCK:.*]] = arith.index_castui %block_id_x
// CHECK:         %[[GRID:.*]] = arith.index_castui %grid_dim_x
// CHECK:         %[[CLUSTER:.*]] = arith.divui %[[BLOCK]], %c2_i32
// CHECK:         %[[CLUSTERS:.*]] = arith.divui %[[GRID]], %c2_i32
// CHECK:         %[[RANK:.*]] = arith.remui %[[BLOCK]], %c2_i32

// The producer walks the cluster's units; its tile is row block 2 u + rank.
// It loads its own A tile, and the half of B of its rank into both blocks.
// CHECK:         scf.for %{{.*}} = %[[CLUSTER]] to %{{.*}} step %[[CLUSTERS]]
// CHECK:           %[[UNIT_ROW2:.*]] = arith.muli %{{.*}}, %c2_i32
// CHECK:           %[[ROW_BLOCK:.*]] = arith.addi %[[UNIT_ROW2]], %[[RANK]]
// CHECK:           scf.for
// CHECK:             nvvm.mbarrier.arrive.expect_tx %[[FULL:.*]], %c49152_i32
// CHECK:             nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %arg0, %[[FULL]], box[%{{.*}}, %{{.*}}] : !llvm.ptr<7>, !llvm.ptr
// CHECK:             %[[IS0:.*]] = arith.cmpi eq, %[[RANK]], %c0_i32
// CHECK-NEXT:        scf.if %[[IS0]] {
// CHECK:               nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %arg1, %[[FULL]], box[%{{.*}}, %{{.*}}] multicast_mask = %c3_i16
// CHECK:             %[[IS1:.*]] = arith.cmpi eq, %[[RANK]], %c1_i32
// CHECK-NEXT:        scf.if %[[IS1]] {
// CHECK:               %[[SECOND_HALF:.*]] = arith.addi %{{.*}}, %c16384_i32
// CHECK:               nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %arg1, %[[FULL]], box[%{{.*}}, %{{.*}}] multicast_mask = %c3_i16

// A consumer releases a slot in both blocks: lane l arrives on the empty
// barrier of block l % 2.
// CHECK:         nvvm.setmaxregister  increase 232
// CHECK:         %[[PEER:.*]] = arith.remui %[[LANE]], %c2_i32
// CHECK-NEXT:    %[[REMOTE:.*]] = nvvm.mapa %{{.*}}, %[[PEER]] : !llvm.ptr<3> -> !llvm.ptr<7>
// CHECK-NEXT:    nvvm.mbarrier.arrive %[[REMOTE]] : !llvm.ptr<7>

// A tile below the last row block (the second block of a cluster whose unit
// holds only one) is multiplied and not written: no prefetch (none here: the
// program reads no input) and no epilogue.
// CHECK:         %[[INSIDE:.*]] = arith.cmpi ult, %[[ROW:.*]], %[[TILES_M]]
// CHECK-NEXT:    scf.if %[[INSIDE]] {
// CHECK-NEXT:    }
// CHECK:         nvvm.wgmma.wait.group.sync.aligned 0
// CHECK:         %[[INSIDE2:.*]] = arith.cmpi ult, %[[ROW]], %[[TILES_M]]
// CHECK-NEXT:    scf.if %[[INSIDE2]] {
// CHECK:           coda.tile_epilogue

// No block leaves while the other may still arrive on its barriers.
// CHECK:         nvvm.cluster.arrive
// CHECK-NEXT:    nvvm.cluster.wait
// CHECK-NEXT:    gpu.return
func.func @k_major(%a: tensor<?x64xbf16>, %b: tensor<?x64xbf16>) -> tensor<?x?xf32> {
  %o = coda.gemm %a, %b transpose_b : tensor<?x64xbf16>, tensor<?x64xbf16> -> (tensor<?x?xf32> [m, n]) {
  ^bb0(%acc: f32):
    coda.yield %acc : f32
  }
  return %o : tensor<?x?xf32>
}

// A B stored [K, N] is read in 64-column boxes: with 192-column tiles, the
// block of rank 0 loads boxes 0 and 2 into both blocks, rank 1 box 1.
// MN-LABEL: func.func private @n_major(
// MN-SAME:    {box = array<i64: 64, 64>, index = 1 : i64, kind = "tensor_map", role = "b"}
// MN:         gpu.func @n_major
// MN:         %[[RANK:.*]] = arith.remui %{{.*}}, %c2_i32
// MN:         arith.cmpi eq, %[[RANK]], %c0_i32
// MN:         multicast_mask
// MN:         arith.cmpi eq, %[[RANK]], %c1_i32
// MN:         multicast_mask
// MN:         arith.cmpi eq, %[[RANK]], %c0_i32
// MN:         multicast_mask
// MN-NOT:     multicast_mask
// MN:         nvvm.setmaxregister  increase 232
func.func @n_major(%a: tensor<?x64xbf16>, %b: tensor<64x?xbf16>) -> tensor<?x?xf32> {
  %o = coda.gemm %a, %b : tensor<?x64xbf16>, tensor<64x?xbf16> -> (tensor<?x?xf32> [m, n]) {
  ^bb0(%acc: f32):
    coda.yield %acc : f32
  }
  return %o : tensor<?x?xf32>
}

// Without clusters (the default) the kernel has none of the above.
// ALONE: cluster_m = 1 : i64
// ALONE: cluster_m = 1 : i64
