// RUN: coda-opt %s --coda-plan-kernels=seed-in-memory=1 --coda-to-gpu --coda-lower-tile-epilogues | FileCheck %s
// RUN: coda-opt %s --coda-plan-kernels --coda-to-gpu --coda-lower-tile-epilogues | FileCheck %s --check-prefix=VALUE

// With seed-in-memory the parameter of the seed (the i64 argument named
// "seed") is the global address of its 8 bytes (a global_ptr in the ABI),
// read once as the kernel starts, and the first dropout's Philox key is that
// value; another i64 input (a second dropout's seed) and the other parameters
// stay values.
// CHECK:       coda.kernel_abi = {{.*}}params = [{{.*}}{index = 2 : i64, kind = "global_ptr", role = "input"},
// CHECK-SAME:    {index = 3 : i64, kind = "i64", role = "input"},
// CHECK-SAME:    {index = 4 : i64, kind = "f32", role = "input"},
// CHECK-SAME:    {index = 0 : i64, kind = "global_ptr", role = "output"}
// CHECK:       gpu.func @paper(%{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %[[SEEDPTR:.*]]: !llvm.ptr<1>, %[[OTHER:.*]]: i64, %{{.*}}: f32, %{{.*}}: !llvm.ptr<1>,
// CHECK-NEXT:    %[[SEED:.*]] = llvm.load %[[SEEDPTR]] : !llvm.ptr<1> -> i64
// CHECK-NOT:     llvm.load %{{.*}} : !llvm.ptr<1> -> i64
// CHECK:         arith.trunci %[[SEED]] : i64 to i32
// CHECK:         arith.shrui %[[SEED]]
// CHECK:         arith.trunci %[[OTHER]] : i64 to i32

// By default the parameter is the seed itself.
// VALUE:       {index = 2 : i64, kind = "i64", role = "input"}
// VALUE:       gpu.func @paper(%{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: i64, %{{.*}}: i64, %{{.*}}: f32,
// VALUE-NOT:   llvm.load %{{.*}} : !llvm.ptr<1> -> i64
func.func @paper(%a: tensor<?x?xbf16>, %b: tensor<?x?xbf16>,
                 %seed: i64 {coda.name = "seed"}, %seed2: i64 {coda.name = "seed2"},
                 %scale: f32 {coda.name = "scale"})
    -> (tensor<?x?xbf16> {coda.name = "output"}) {
  %o = coda.gemm %a, %b transpose_b ins(%seed : i64, %seed2 : i64, %scale : f32)
      : tensor<?x?xbf16>, tensor<?x?xbf16> -> (tensor<?x?xbf16> [m, n]) {
  ^bb0(%acc: f32, %s: i64, %s2: i64, %c: f32):
    %0 = coda.dropout %acc, %s {p = 0.1 : f32}
    %1 = coda.dropout %0, %s2 {p = 0.2 : f32}
    %2 = arith.mulf %1, %c : f32
    coda.yield %2 : f32
  }
  return %o : tensor<?x?xbf16>
}
