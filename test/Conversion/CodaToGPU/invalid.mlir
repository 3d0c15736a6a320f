// RUN: coda-opt %s --coda-plan-kernels --coda-to-gpu --coda-lower-tile-epilogues -split-input-file -verify-diagnostics

func.func @tf32_n_major(%a: tensor<?x64xf32>, %b: tensor<64x?xf32>) -> tensor<?x?xf32> {
  // expected-error @+1 {{cannot run on the GPU: f32 operands are multiplied as tf32 by wgmma, which reads them only with K contiguous; store A as [M, K] (no transpose_a) and B as [N, K] (transpose_b)}}
  %o = coda.gemm %a, %b : tensor<?x64xf32>, tensor<64x?xf32> -> (tensor<?x?xf32> [m, n]) {
  ^bb0(%acc: f32):
    coda.yield %acc : f32
  }
  return %o : tensor<?x?xf32>
}

// -----

func.func @col_reduce_bf16(%a: tensor<?x64xbf16>, %b: tensor<128x64xbf16>) -> tensor<128xbf16> {
  %o = coda.gemm %a, %b transpose_b : tensor<?x64xbf16>, tensor<128x64xbf16> -> (tensor<128xbf16> [n]) {
  ^bb0(%acc: f32):
    // expected-error @+1 {{is accumulated across row blocks in f32: output #0 must be f32, not 'bf16'}}
    %s = coda.col_reduce sum %acc
    coda.yield %s : f32
  }
  return %o : tensor<128xbf16>
}

// -----

func.func @wide_row_reduce(%a: tensor<?x64xbf16>, %b: tensor<4104x64xbf16>) -> tensor<?x4104xf32> {
  // expected-error @+1 {{cannot fuse a row reduction on the GPU: a whole row must fit the tiles of one cluster along N, but N = 4104 is more than tile-n x cluster-n = 256 x 16; tile-n can be up to 256 and cluster-n up to 16, rows of up to 4096 columns (row statistics, whose results no element of the row needs, are merged after the GEMM for rows of any width unless cluster-n is pinned)}}
  %o = coda.gemm %a, %b transpose_b : tensor<?x64xbf16>, tensor<4104x64xbf16> -> (tensor<?x4104xf32> [m, n]) {
  ^bb0(%acc: f32):
    %s = coda.row_reduce max %acc
    %d = arith.subf %acc, %s : f32
    coda.yield %d : f32
  }
  return %o : tensor<?x4104xf32>
}

// -----

func.func @extra_ops(%a: tensor<?x64xbf16>, %b: tensor<?x64xbf16>) -> tensor<?x?xf32> {
  // expected-error @+1 {{cannot run on the GPU: the body of @extra_ops must be this coda.gemm and a return of its results, in order}}
  %o = coda.gemm %a, %b transpose_b : tensor<?x64xbf16>, tensor<?x64xbf16> -> (tensor<?x?xf32> [m, n]) {
  ^bb0(%acc: f32):
    coda.yield %acc : f32
  }
  %t = tensor.cast %o : tensor<?x?xf32> to tensor<?x?xf32>
  return %t : tensor<?x?xf32>
}

// -----

func.func @computed_operand(%a: tensor<?x64xbf16>, %b: tensor<?x64xbf16>) -> tensor<?x?xf32> {
  %alpha = arith.constant 2.0 : f32
  // expected-error @+1 {{cannot run on the GPU: alpha must be an argument of @computed_operand, but it is computed by 'arith.constant'}}
  %o = coda.gemm %a, %b transpose_b alpha(%alpha) : tensor<?x64xbf16>, tensor<?x64xbf16> -> (tensor<?x?xf32> [m, n]) {
  ^bb0(%acc: f32):
    coda.yield %acc : f32
  }
  return %o : tensor<?x?xf32>
}

// -----

func.func @nested(%a: tensor<?x64xbf16>, %b: tensor<?x64xbf16>) -> tensor<?x?xf32> {
  %r = scf.execute_region -> tensor<?x?xf32> {
    // expected-error @+1 {{cannot run on the GPU: the GPU lowering runs coda programs, top-level functions whose body is one coda.gemm}}
    %o = coda.gemm %a, %b transpose_b : tensor<?x64xbf16>, tensor<?x64xbf16> -> (tensor<?x?xf32> [m, n]) {
    ^bb0(%acc: f32):
      coda.yield %acc : f32
    }
    scf.yield %o : tensor<?x?xf32>
  }
  return %r : tensor<?x?xf32>
}

// -----

// A program in a module nested in the one the pass runs on.
module {
  module @inner {
    func.func @in_inner_module(%a: tensor<?x64xbf16>, %b: tensor<?x64xbf16>) -> tensor<?x?xf32> {
      // expected-error @+1 {{cannot run on the GPU: the GPU lowering runs coda programs, top-level functions whose body is one coda.gemm}}
      %o = coda.gemm %a, %b transpose_b : tensor<?x64xbf16>, tensor<?x64xbf16> -> (tensor<?x?xf32> [m, n]) {
      ^bb0(%acc: f32):
        coda.yield %acc : f32
      }
      return %o : tensor<?x?xf32>
    }
  }
}
