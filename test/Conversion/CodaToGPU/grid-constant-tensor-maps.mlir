// RUN: coda-opt %s --coda-grid-constant-tensor-maps -split-input-file -verify-diagnostics | FileCheck %s

// The tensor-map parameters of the kernel (and only those) become 128-byte
// byval grid constants, aligned to 64 bytes. (The output's fill value, -inf,
// is part of a well-formed ABI.)
// CHECK-LABEL: gpu.module @k_kernels
// CHECK:         llvm.func @k(
// CHECK-SAME:      %{{[^:]*}}: !llvm.ptr {llvm.align = 64 : i64, llvm.byval = !llvm.array<128 x i8>, nvvm.grid_constant},
// CHECK-SAME:      %{{[^:]*}}: !llvm.ptr {llvm.align = 64 : i64, llvm.byval = !llvm.array<128 x i8>, nvvm.grid_constant},
// CHECK-SAME:      %{{[^:]*}}: !llvm.ptr<1>, %{{[^:]*}}: i32)
gpu.module @k_kernels attributes {coda.kernel_abi = {
    block = array<i64: 256, 1, 1>, cluster_m = 1 : i64, group_rows = 8 : i64, kernel = "k", max_n = 0 : i64, module = "k_kernels",
    params = [{box = array<i64: 64, 128>, index = 0 : i64, kind = "tensor_map", role = "a"},
              {box = array<i64: 64, 128>, index = 1 : i64, kind = "tensor_map", role = "b"},
              {fill = 0xFFF0000000000000 : f64, index = 0 : i64, kind = "atomic_ptr", role = "output"},
              {index = -1 : i64, kind = "i32", role = "m"}],
    schedule = "cooperative", shared_memory_bytes = 1024 : i64, tile = array<i64: 128, 128, 64>}} {
  llvm.func @k(%a: !llvm.ptr, %b: !llvm.ptr, %out: !llvm.ptr<1>, %m: i32) attributes {nvvm.kernel} {
    llvm.return
  }
}

// -----

// expected-error @+1 {{has a malformed 'coda.kernel_abi' attribute}}
gpu.module @bad_kernels attributes {coda.kernel_abi = {kernel = "k"}} {
}

// -----

// A schedule the runtime does not know.
// expected-error @+1 {{has a malformed 'coda.kernel_abi' attribute}}
gpu.module @sideways_kernels attributes {coda.kernel_abi = {
    block = array<i64: 256, 1, 1>, cluster_m = 1 : i64, group_rows = 8 : i64, kernel = "k", max_n = 0 : i64, module = "sideways_kernels",
    params = [{box = array<i64: 64, 128>, index = 0 : i64, kind = "tensor_map", role = "a"}],
    schedule = "sideways", shared_memory_bytes = 1024 : i64, tile = array<i64: 128, 128, 64>}} {
}

// -----

// expected-error @+1 {{has no llvm.func kernel 'k' with 1 parameters: run this pass after convert-gpu-to-nvvm}}
gpu.module @early_kernels attributes {coda.kernel_abi = {
    block = array<i64: 256, 1, 1>, cluster_m = 1 : i64, group_rows = 8 : i64, kernel = "k", max_n = 0 : i64, module = "early_kernels",
    params = [{box = array<i64: 64, 128>, index = 0 : i64, kind = "tensor_map", role = "a"}],
    schedule = "pingpong", shared_memory_bytes = 1024 : i64, tile = array<i64: 128, 128, 64>}} {
  gpu.func @k(%a: !llvm.ptr) kernel {
    gpu.return
  }
}
