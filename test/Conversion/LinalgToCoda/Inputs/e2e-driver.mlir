// Helpers for the end-to-end tests, which append this file to theirs: inputs
// filled deterministically, results printed with printMemrefF32.

func.func private @printMemrefF32(memref<*xf32>)

// A rows x cols matrix of ((i * a + j * b) mod 17) / 8 - 1, in [-1, 1].
func.func @matrix(%rows: index, %cols: index, %a: index, %b: index) -> tensor<?x?xf32> {
  %e = tensor.empty(%rows, %cols) : tensor<?x?xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
      outs(%e : tensor<?x?xf32>) {
  ^bb0(%out: f32):
    %i = linalg.index 0 : index
    %j = linalg.index 1 : index
    %x = arith.muli %i, %a : index
    %y = arith.muli %j, %b : index
    %s = arith.addi %x, %y : index
    %c17 = arith.constant 17 : index
    %m = arith.remui %s, %c17 : index
    %mi = arith.index_cast %m : index to i32
    %f = arith.sitofp %mi : i32 to f32
    %eighth = arith.constant 1.250000e-01 : f32
    %one = arith.constant 1.000000e+00 : f32
    %g = arith.mulf %f, %eighth : f32
    %h = arith.subf %g, %one : f32
    linalg.yield %h : f32
  } -> tensor<?x?xf32>
  return %r : tensor<?x?xf32>
}

// The same matrix in bf16 (its values are exact in bf16).
func.func @matrix_bf16(%rows: index, %cols: index, %a: index, %b: index) -> tensor<?x?xbf16> {
  %f = call @matrix(%rows, %cols, %a, %b) : (index, index, index, index) -> tensor<?x?xf32>
  %e = tensor.empty(%rows, %cols) : tensor<?x?xbf16>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
      ins(%f : tensor<?x?xf32>) outs(%e : tensor<?x?xbf16>) {
  ^bb0(%in: f32, %out: bf16):
    %t = arith.truncf %in : f32 to bf16
    linalg.yield %t : bf16
  } -> tensor<?x?xbf16>
  return %r : tensor<?x?xbf16>
}

func.func @print2d(%t: tensor<?x?xf32>) {
  %m = bufferization.to_buffer %t : tensor<?x?xf32> to memref<?x?xf32>
  %u = memref.cast %m : memref<?x?xf32> to memref<*xf32>
  call @printMemrefF32(%u) : (memref<*xf32>) -> ()
  return
}

func.func @print2d_bf16(%t: tensor<?x?xbf16>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %rows = tensor.dim %t, %c0 : tensor<?x?xbf16>
  %cols = tensor.dim %t, %c1 : tensor<?x?xbf16>
  %e = tensor.empty(%rows, %cols) : tensor<?x?xf32>
  %f = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
      ins(%t : tensor<?x?xbf16>) outs(%e : tensor<?x?xf32>) {
  ^bb0(%in: bf16, %out: f32):
    %x = arith.extf %in : bf16 to f32
    linalg.yield %x : f32
  } -> tensor<?x?xf32>
  call @print2d(%f) : (tensor<?x?xf32>) -> ()
  return
}
