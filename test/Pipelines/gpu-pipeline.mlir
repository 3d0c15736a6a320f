// REQUIRES: ptxas
// RUN: coda-opt %s --coda-gpu-pipeline="chip=sm_90a" > %t.mlir
// RUN: FileCheck %s --check-prefix=HOST < %t.mlir
// RUN: rm -rf %t.dir && %python %testlib/extract_ptx.py %t.mlir %t.dir | FileCheck %s --check-prefix=BINARIES
// RUN: FileCheck %s --check-prefix=PTX < %t.dir/mlp_kernels.ptx
// RUN: FileCheck %s --check-prefix=LN < %t.dir/layernorm_kernels.ptx
// ptxas must keep the wgmma pipeline asynchronous (its C7510-C7519
// advisories report wgmma it serialized or waits it injected) and the
// kernels must not spill.
// RUN: %ptxas -arch=sm_90a -v %t.dir/mlp_kernels.ptx -o %t.dir/mlp.cubin 2>&1 \
// RUN:   | FileCheck %s --check-prefix=PTXAS --implicit-check-not=C751 --implicit-check-not="Performance Loss"
// RUN: %ptxas -arch=sm_90a -v %t.dir/layernorm_kernels.ptx -o %t.dir/layernorm.cubin 2>&1 \
// RUN:   | FileCheck %s --check-prefix=PTXAS --implicit-check-not=C751 --implicit-check-not="Performance Loss"
// format=bin assembles the PTX with ptxas.
// RUN: coda-opt %s --coda-gpu-pipeline="format=bin toolkit=%cuda_toolkit" | FileCheck %s --check-prefix=CUBIN

// One binary per program, next to the program's host declaration.
// HOST-LABEL: func.func private @mlp(
// HOST-SAME:    coda.kernel_abi = {block = array<i64: 384, 1, 1>, cluster_m = 1 : i64, group_rows = 8 : i64, kernel = "mlp"
// HOST:       gpu.binary @mlp_kernels  [#gpu.object<#nvvm.target<O = 3, chip = "sm_90a", features = "+ptx80">, properties = {{.*}}, assembly = "
// HOST-LABEL: func.func private @layernorm(
// HOST-SAME:    max_n = 128 : i64
// HOST:       gpu.binary @layernorm_kernels

// BINARIES: layernorm_kernels
// BINARIES-NEXT: mlp_kernels

// PTX:      .target sm_90a
// PTX:      .extern .shared .align 1024 .b8 coda_smem[];
// PTX:      .visible .entry mlp(
// PTX-NEXT:   .param .align 64 .b8 mlp_param_0[128],
// PTX-NEXT:   .param .align 64 .b8 mlp_param_1[128],
// PTX:      .maxntid 384, 1, 1
// PTX-NEXT: .minnctapersm 1
// PTX-DAG:  mbarrier.init.shared.b64
// PTX-DAG:  setmaxnreg.dec.sync.aligned.u32 {{.*}}40;
// PTX-DAG:  setmaxnreg.inc.sync.aligned.u32 {{.*}}232;
// PTX-DAG:  cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes
// PTX-DAG:  mbarrier.try_wait.parity.shared.b64
// PTX-DAG:  wgmma.fence.sync.aligned
// PTX-DAG:  wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16
// PTX-DAG:  wgmma.commit_group.sync.aligned
// PTX-DAG:  wgmma.wait_group.sync.aligned 1
// PTX-DAG:  wgmma.wait_group.sync.aligned 0
// PTX-DAG:  shfl.sync.bfly.b32
// PTX-DAG:  st.global.v4.b32
// The interior-tile test is warp-uniform; GELU is one ex2 and one division,
// both single approximate instructions; products feeding sums contract.
// PTX-DAG:  vote.sync.all.pred
// PTX-DAG:  ex2.approx.ftz.f32
// PTX-DAG:  div.approx.ftz.f32
// PTX-DAG:  fma.rn.f32
// PTX-NOT:  .entry
// PTX-NOT:  st.local

// LN:       .visible .entry layernorm(
// LN:       wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16
// LN:       shfl.sync.bfly.b32
// LN:       trap;
// LN-NOT:   .entry

// PTXAS: 0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads

// CUBIN: gpu.binary @mlp_kernels  [#gpu.object<#nvvm.target<O = 3, chip = "sm_90a", features = "+ptx80">, properties = {{.*}}, bin = "

func.func @mlp(%x: tensor<?x768xbf16>, %w: tensor<3072x768xbf16>,
               %bias: tensor<3072xf32> {coda.name = "bias"},
               %res: tensor<?x3072xbf16> {coda.name = "residual"},
               %seed: i64 {coda.name = "seed"})
    -> (tensor<?x3072xbf16> {coda.name = "output"}) {
  %out = coda.gemm %x, %w transpose_b
      ins(%bias : tensor<3072xf32> [n], %res : tensor<?x3072xbf16> [m, n], %seed : i64)
      : tensor<?x768xbf16>, tensor<3072x768xbf16> -> (tensor<?x3072xbf16> [m, n]) {
  ^bb0(%acc: f32, %b: f32, %r: f32, %s: i64):
    %0 = arith.addf %acc, %b : f32
    %1 = coda.activation gelu_tanh %0
    %2 = coda.dropout %1, %s {p = 0.1 : f32}
    %3 = arith.addf %2, %r : f32
    coda.yield %3 : f32
  }
  return %out : tensor<?x3072xbf16>
}

func.func @layernorm(%a: tensor<?x64xf16>, %b: tensor<128x64xf16>, %gamma: tensor<128xf32>)
    -> (tensor<?x128xf16>, tensor<?xf32>) {
  %y, %mu = coda.gemm %a, %b transpose_b ins(%gamma : tensor<128xf32> [n])
      : tensor<?x64xf16>, tensor<128x64xf16> -> (tensor<?x128xf16> [m, n], tensor<?xf32> [m]) {
  ^bb0(%acc: f32, %g: f32):
    %mean = coda.row_reduce mean %acc
    %d = arith.subf %acc, %mean : f32
    %sq = arith.mulf %d, %d : f32
    %var = coda.row_reduce mean %sq
    %eps = arith.constant 1.0e-05 : f32
    %v = arith.addf %var, %eps : f32
    %r = math.rsqrt %v : f32
    %n = arith.mulf %d, %r : f32
    %o = arith.mulf %n, %g : f32
    coda.yield %o, %mean : f32, f32
  }
  return %y, %mu : tensor<?x128xf16>, tensor<?xf32>
}
