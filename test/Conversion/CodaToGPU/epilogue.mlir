// RUN: coda-opt %s --coda-plan-kernels --coda-to-gpu --coda-lower-tile-epilogues > %t.mlir
// RUN: FileCheck %s < %t.mlir
// RUN: %python %testlib/kernel_memory.py %t.mlir | FileCheck %s --check-prefix=MEMORY

// Row reductions: each thread combines its columns of a row, then the 4
// lanes that share the row exchange partial results; the whole row must be
// in the tile, so the ABI limits N and the kernel traps beyond it.
// CHECK-LABEL: func.func private @layernorm
// CHECK-SAME:    max_n = 128 : i64
// CHECK-LABEL: gpu.func @layernorm
// CHECK-SAME:    (%{{[^:]*}}: !llvm.ptr, %{{[^:]*}}: !llvm.ptr, %{{[^:]*}}: !llvm.ptr<1>, %{{[^:]*}}: !llvm.ptr<1>, %{{[^:]*}}: !llvm.ptr<1>, %{{[^:]*}}: i32, %[[N:[^:]*]]: i32,
// CHECK:         %[[WIDE:.*]] = arith.cmpi ugt, %[[N]], %c128_i32
// CHECK:         scf.if %[[WIDE]] {
// CHECK-NEXT:      llvm.intr.trap
// CHECK:         nvvm.wgmma.wait.group.sync.aligned 0
// CHECK:         arith.addf
// CHECK:         gpu.shuffle  xor %{{.*}}, %c1_i32{{.*}}, %c32_i32{{.*}} : f32
// CHECK:         gpu.shuffle  xor %{{.*}}, %c2_i32{{.*}}, %c32_i32{{.*}} : f32
// CHECK:         arith.divf
// CHECK:         math.rsqrt
// CHECK:         arith.maximumf
// CHECK:         gpu.shuffle  xor
// MEMORY: layernorm: loads input#2; stores output#0 output#1
func.func @layernorm(%a: tensor<?x64xf16>, %b: tensor<128x64xf16>, %gamma: tensor<128xf32>)
    -> (tensor<?x128xf16>, tensor<?xf32>) {
  %y, %mx = coda.gemm %a, %b transpose_b ins(%gamma : tensor<128xf32> [n])
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
    %max = coda.row_reduce max %acc
    coda.yield %o, %max : f32, f32
  }
  return %y, %mx : tensor<?x128xf16>, tensor<?xf32>
}

// alpha, beta and C, per-row and per-column inputs and scalars: scalars are
// parameters; C (f16) is loaded ahead, in an epilogue without dropout 16
// bytes (8 columns) per lane, regrouped at its first use by the quad
// transpose into the lane's pairs of columns: without checks in an interior
// tile, and where the quad's 32 columns fit (else pair by pair) in the others.
// CHECK-LABEL: gpu.func @affine
// CHECK-SAME:    (%{{[^:]*}}: !llvm.ptr, %{{[^:]*}}: !llvm.ptr, %[[C:[^:]*]]: !llvm.ptr<1>, %[[ALPHA:[^:]*]]: f32, %[[BETA:[^:]*]]: f32, %{{[^:]*}}: !llvm.ptr<1>, %{{[^:]*}}: !llvm.ptr<1>, %{{[^:]*}}: f32, %{{[^:]*}}: !llvm.ptr<1>, %{{[^:]*}}: !llvm.ptr<1>,
// Three K steps before a tile's main loop ends (or once its first wgmmas
// are issued), the consumer warpgroup's threads prefetch its rows of the
// tile's part of C into L2, a 128-byte line each in turn (64 rows of 256 f16
// columns: 4 lines a row, 2 per thread, those inside the output), for the
// epilogue after the main loop.
// CHECK:         nvvm.wgmma.mma_async
// CHECK:         %[[LEAD:.*]] = arith.subi %[[KSTEPS:.*]], %c3_i32
// CHECK:         %[[SPLIT:.*]] = arith.maxsi %[[LEAD]], %c1_i32
// CHECK:         scf.for %{{.*}} = %c1_i32{{.*}} to %[[SPLIT]]
// CHECK:           nvvm.wgmma.mma_async
// CHECK-NOT:       nvvm.prefetch
// CHECK:         arith.remui %{{.*}}, %c4_i32
// CHECK:         %[[LINE:.*]] = arith.muli %{{.*}}, %c128_i32
// CHECK:         %[[INSIDE:.*]] = arith.cmpi ult, %[[LINE]], %{{.*}}
// CHECK:         %[[ROW_INSIDE:.*]] = arith.cmpi ult, %{{.*}}, %{{.*}}
// CHECK:         %[[PREFETCHES:.*]] = arith.andi %[[ROW_INSIDE]], %[[INSIDE]]
// CHECK:         scf.if %[[PREFETCHES]] {
// CHECK:           llvm.getelementptr %[[C]]
// CHECK:           nvvm.prefetch level = L2, %{{.*}} : !llvm.ptr<1>
// CHECK:           nvvm.prefetch level = L2
// CHECK-NOT:       nvvm.prefetch
// CHECK:         scf.for %{{.*}} = %[[SPLIT]] to %[[KSTEPS]]
// CHECK:           nvvm.wgmma.mma_async
// CHECK:         nvvm.wgmma.wait.group.sync.aligned 0
// CHECK:         nvvm.vote.sync  all
// CHECK-NEXT:    scf.if
// CHECK:           %[[C_ROW:.*]] = llvm.getelementptr %[[C]]
// CHECK:           %[[C_CHUNK:.*]] = llvm.getelementptr %[[C_ROW]]
// CHECK-NOT:       scf.if
// CHECK:           %[[CHUNK:.*]] = llvm.load %[[C_CHUNK]] : !llvm.ptr<1> -> vector<4xi32>
// CHECK-NOT:       scf.if
// CHECK:           %[[ACC:.*]] = llvm.extractvalue
// CHECK:           %[[SCALED:.*]] = arith.mulf %[[ACC]], %[[ALPHA]] {{.*}}: f32
// CHECK:           llvm.extractelement %[[CHUNK]]
// CHECK:           gpu.shuffle  xor %{{.*}}, %c2_i32{{.*}}, %c32_i32{{.*}} : i32
// CHECK:           gpu.shuffle  xor %{{.*}}, %c1_i32{{.*}}, %c32_i32{{.*}} : i32
// CHECK:           %[[CPAIR:.*]] = arith.extf %{{.*}} : vector<2xf16> to vector<2xf32>
// CHECK:           %[[CIN:.*]] = llvm.extractelement %[[CPAIR]]
// CHECK:           %[[CB:.*]] = arith.mulf %[[CIN]], %[[BETA]] {{.*}}: f32
// CHECK:           arith.addf %[[SCALED]], %[[CB]] {{.*}}: f32
// CHECK:         } else {
// CHECK:           %[[C_ROW2:.*]] = llvm.getelementptr %[[C]]
// CHECK:           scf.if %{{.*}} -> (vector<4xi32>) {
// CHECK-NEXT:        llvm.load %{{.*}} : !llvm.ptr<1> -> vector<4xi32>
// CHECK:           } else {
// CHECK-NEXT:        llvm.mlir.zero : vector<4xi32>
// CHECK:           gpu.shuffle  xor
// CHECK:           scf.if %{{.*}} -> (i32) {
// CHECK:           } else {
// CHECK:             scf.if %{{.*}} -> (i32) {
// CHECK-NEXT:          llvm.load %[[C_ROW2]] : !llvm.ptr<1> -> i32
// MEMORY: affine: loads c#2 input#5 input#6; stores output#0 output#1
func.func @affine(%a: tensor<?x?xbf16>, %b: tensor<?x?xbf16>, %c: tensor<?x?xf16>,
                  %alpha: f32, %beta: f32, %row: tensor<?xbf16>, %col: tensor<?xf32>, %s: f32)
    -> (tensor<?x?xf32>, tensor<?xf32>) {
  %o, %v = coda.gemm %a, %b c(%c : tensor<?x?xf16>) alpha(%alpha) beta(%beta)
      ins(%row : tensor<?xbf16> [m], %col : tensor<?xf32> [n], %s : f32)
      : tensor<?x?xbf16>, tensor<?x?xbf16> -> (tensor<?x?xf32> [m, n], tensor<?xf32> [n]) {
  ^bb0(%acc: f32, %r: f32, %cl: f32, %sc: f32):
    %0 = arith.mulf %acc, %r : f32
    %1 = arith.addf %0, %cl : f32
    %2 = arith.mulf %cl, %sc : f32
    coda.yield %1, %2 : f32, f32
  }
  return %o, %v : tensor<?x?xf32>, tensor<?xf32>
}

// Column reductions: each thread combines its two rows, the 8 lanes that
// share a column exchange partial results, and lanes 0-3 of every warp add
// theirs to the f32 output with an atomic; the ABI asks the runtime to fill
// the output with the identity first.
// CHECK-LABEL: func.func private @dbias
// CHECK-SAME:    {fill = 0.000000e+00 : f64, index = 1 : i64, kind = "atomic_ptr", role = "output"}
// CHECK-SAME:    {fill = 0xFFF0000000000000 : f64, index = 2 : i64, kind = "atomic_ptr", role = "output"}
// CHECK-LABEL: gpu.func @dbias
// CHECK:         nvvm.wgmma.wait.group.sync.aligned 0
// CHECK:         gpu.shuffle  xor %{{.*}}, %c4_i32{{.*}}, %c32_i32{{.*}} : f32
// CHECK:         gpu.shuffle  xor %{{.*}}, %c8_i32{{.*}}, %c32_i32{{.*}} : f32
// CHECK:         gpu.shuffle  xor %{{.*}}, %c16_i32{{.*}}, %c32_i32{{.*}} : f32
// CHECK:         scf.if
// CHECK:           llvm.atomicrmw fadd %{{.*}}, %{{.*}} monotonic : !llvm.ptr<1>, f32
// CHECK:         arith.maximumf
// CHECK:         scf.if
// CHECK:           llvm.atomicrmw fmax %{{.*}}, %{{.*}} monotonic : !llvm.ptr<1>, f32
// MEMORY: dbias: loads input#2; stores output#0 output#1 output#2
func.func @dbias(%a: tensor<?x64xbf16>, %b: tensor<?x64xbf16>, %bias: tensor<?xf32>)
    -> (tensor<?x?xbf16>, tensor<?xf32>, tensor<?xf32>) {
  %o, %s, %mx = coda.gemm %a, %b transpose_b ins(%bias : tensor<?xf32> [n])
      : tensor<?x64xbf16>, tensor<?x64xbf16>
      -> (tensor<?x?xbf16> [m, n], tensor<?xf32> [n], tensor<?xf32> [n]) {
  ^bb0(%acc: f32, %bi: f32):
    %0 = arith.addf %acc, %bi : f32
    %1 = coda.col_reduce sum %0
    %2 = coda.col_reduce max %acc
    coda.yield %0, %1, %2 : f32, f32, f32
  }
  return %o, %s, %mx : tensor<?x?xbf16>, tensor<?xf32>, tensor<?xf32>
}

// dropout(x) + y selects between the kept sum x * scale + y and y itself,
// rather than between the kept product and 0 before the sum, so that the
// product and the sum contract into one fma. A pair of bf16 residual values
// (4 bytes) becomes two f32 by moving the low half up and clearing the high
// half's low bits.
// CHECK-LABEL: gpu.func @dropout_add
// CHECK:         nvvm.vote.sync  all
// CHECK-NOT:     vector<4xi32>
// CHECK:         %[[PAIR:.*]] = llvm.load %{{.*}} : !llvm.ptr<1> -> i32
// CHECK:         %[[LOW:.*]] = arith.shli %[[PAIR]], %c16_i32{{.*}} : i32
// CHECK:         %[[HIGH:.*]] = arith.andi %[[PAIR]], %c-65536_i32 : i32
// CHECK:         llvm.bitcast %[[LOW]] : i32 to f32
// CHECK-NEXT:    llvm.bitcast %[[HIGH]] : i32 to f32
// CHECK:         %[[KEEP:.*]] = arith.cmpi uge, %{{.*}}, %c6554_i32
// CHECK:         %[[KEPT:.*]] = arith.mulf %{{.*}}, %{{.*}} {{.*}}: f32
// CHECK:         %[[SUM:.*]] = arith.addf %[[KEPT]], %[[RES:[^ ]*]] {{.*}}: f32
// CHECK:         arith.select %[[KEEP]], %[[SUM]], %[[RES]] : f32
// MEMORY: dropout_add: loads input#2; stores output#0
func.func @dropout_add(%a: tensor<?x?xbf16>, %b: tensor<?x?xbf16>,
                       %r: tensor<?x?xbf16> {coda.name = "residual"},
                       %seed: i64 {coda.name = "seed"})
    -> (tensor<?x?xbf16> {coda.name = "output"}) {
  %o = coda.gemm %a, %b transpose_b ins(%r : tensor<?x?xbf16> [m, n], %seed : i64)
      : tensor<?x?xbf16>, tensor<?x?xbf16> -> (tensor<?x?xbf16> [m, n]) {
  ^bb0(%acc: f32, %x: f32, %s: i64):
    %d = coda.dropout %acc, %s {p = 0.1 : f32}
    %y = arith.addf %x, %d : f32
    coda.yield %y : f32
  }
  return %o : tensor<?x?xbf16>
}

// An input the epilogue does not read is neither prefetched nor loaded, and
// its alignment does not decide which copy of the epilogue runs.
// CHECK-LABEL: gpu.func @unused_residual
// CHECK-SAME:    (%{{[^:]*}}: !llvm.ptr, %{{[^:]*}}: !llvm.ptr, %[[R:[^:]*]]: !llvm.ptr<1>,
// CHECK-NOT:     nvvm.prefetch
// CHECK-NOT:     %[[R]]
// CHECK:         nvvm.vote.sync  all
// MEMORY: unused_residual: loads -; stores output#0
func.func @unused_residual(%a: tensor<?x?xbf16>, %b: tensor<?x?xbf16>,
                           %r: tensor<?x?xbf16> {coda.name = "residual"})
    -> (tensor<?x?xbf16> {coda.name = "output"}) {
  %o = coda.gemm %a, %b transpose_b ins(%r : tensor<?x?xbf16> [m, n])
      : tensor<?x?xbf16>, tensor<?x?xbf16> -> (tensor<?x?xbf16> [m, n]) {
  ^bb0(%acc: f32, %x: f32):
    coda.yield %acc : f32
  }
  return %o : tensor<?x?xbf16>
}

// An epilogue that does not read its accumulator runs no main loop: nothing
// would hide a prefetch of its tile's inputs into L2, and none is issued
// (the loads themselves, three steps ahead, stream faster without).
// CHECK-LABEL: gpu.func @no_product
// CHECK-SAME:    (%{{[^:]*}}: !llvm.ptr, %{{[^:]*}}: !llvm.ptr, %[[G:[^:]*]]: !llvm.ptr<1>,
// CHECK-NOT:     nvvm.prefetch
// CHECK:         llvm.getelementptr %[[G]]
// CHECK-NOT:     nvvm.prefetch
// CHECK:         gpu.return
// MEMORY: no_product: loads input#2; stores output#0
func.func @no_product(%a: tensor<?x?xbf16>, %b: tensor<?x?xbf16>,
                      %g: tensor<?x?xbf16> {coda.name = "grad"})
    -> (tensor<?x?xbf16> {coda.name = "output"}) {
  %o = coda.gemm %a, %b transpose_b ins(%g : tensor<?x?xbf16> [m, n])
      : tensor<?x?xbf16>, tensor<?x?xbf16> -> (tensor<?x?xbf16> [m, n]) {
  ^bb0(%acc: f32, %x: f32):
    %y = arith.mulf %x, %x : f32
    coda.yield %y : f32
  }
  return %o : tensor<?x?xbf16>
}

// A bias along n keeps its 4-byte pairs (one load per group serves every row
// slot) while the residual beside it is read 16 bytes per lane, an
// activation notwithstanding.
// CHECK-LABEL: gpu.func @bias_residual
// CHECK-SAME:    (%{{[^:]*}}: !llvm.ptr, %{{[^:]*}}: !llvm.ptr, %[[BIAS:[^:]*]]: !llvm.ptr<1>, %[[RES:[^:]*]]: !llvm.ptr<1>,
// CHECK:         nvvm.vote.sync  all
// CHECK-NEXT:    scf.if
// CHECK-DAG:       %[[BIAS_ROW:.*]] = llvm.getelementptr %[[BIAS]]
// CHECK-DAG:       %[[RES_ROW:.*]] = llvm.getelementptr %[[RES]]
// CHECK-DAG:       %[[RES_CHUNK:.*]] = llvm.getelementptr %[[RES_ROW]]
// CHECK-DAG:       llvm.load %[[BIAS_ROW]] : !llvm.ptr<1> -> i32
// CHECK-DAG:       llvm.load %[[RES_CHUNK]] : !llvm.ptr<1> -> vector<4xi32>
// CHECK:         } else {
// MEMORY: bias_residual: loads input#2 input#3; stores output#0
func.func @bias_residual(%a: tensor<?x?xbf16>, %b: tensor<?x?xbf16>,
                         %bias: tensor<?xbf16> {coda.name = "bias"},
                         %r: tensor<?x?xbf16> {coda.name = "residual"})
    -> (tensor<?x?xbf16> {coda.name = "output"}) {
  %o = coda.gemm %a, %b transpose_b ins(%bias : tensor<?xbf16> [n], %r : tensor<?x?xbf16> [m, n])
      : tensor<?x?xbf16>, tensor<?x?xbf16> -> (tensor<?x?xbf16> [m, n]) {
  ^bb0(%acc: f32, %bi: f32, %x: f32):
    %0 = arith.mulf %acc, %bi : f32
    %1 = coda.activation gelu_tanh %0
    %2 = arith.addf %1, %x : f32
    coda.yield %2 : f32
  }
  return %o : tensor<?x?xbf16>
}

// Beside a reduction the residual keeps its 4-byte pairs (regrouping chunks
// there spilled registers in examples/mlp_up.coda).
// CHECK-LABEL: gpu.func @residual_col_sum
// CHECK:         nvvm.vote.sync  all
// CHECK-NOT:     llvm.load {{.*}} -> vector<4xi32>
// CHECK:         llvm.load %{{.*}} : !llvm.ptr<1> -> i32
// CHECK-NOT:     llvm.load {{.*}} -> vector<4xi32>
// CHECK:         llvm.atomicrmw fadd
// MEMORY: residual_col_sum: loads input#2; stores output#0 output#1
func.func @residual_col_sum(%a: tensor<?x?xbf16>, %b: tensor<?x?xbf16>,
                            %r: tensor<?x?xbf16> {coda.name = "residual"})
    -> (tensor<?x?xbf16> {coda.name = "output"}, tensor<?xf32> {coda.name = "dbias"}) {
  %o, %s = coda.gemm %a, %b transpose_b ins(%r : tensor<?x?xbf16> [m, n])
      : tensor<?x?xbf16>, tensor<?x?xbf16> -> (tensor<?x?xbf16> [m, n], tensor<?xf32> [n]) {
  ^bb0(%acc: f32, %x: f32):
    %0 = arith.addf %acc, %x : f32
    %1 = coda.col_reduce sum %acc
    coda.yield %0, %1 : f32, f32
  }
  return %o, %s : tensor<?x?xbf16>, tensor<?xf32>
}
