// coda-to-gpu builds the kernel a coda.kernel_plan describes, and checks a
// plan written by hand as coda-plan-kernels checks the plans it chooses.
// RUN: coda-opt %s --coda-to-gpu --coda-lower-tile-epilogues -split-input-file -verify-diagnostics

func.func @no_plan(%a: tensor<?x64xbf16>, %b: tensor<128x64xbf16>) -> tensor<?x128xf32> {
  // expected-error @+1 {{has no coda.kernel_plan: run coda-plan-kernels first, which chooses its kernel}}
  %o = coda.gemm %a, %b transpose_b : tensor<?x64xbf16>, tensor<128x64xbf16> -> (tensor<?x128xf32> [m, n]) {
  ^bb0(%acc: f32):
    coda.yield %acc : f32
  }
  return %o : tensor<?x128xf32>
}

// -----

func.func @bad_tile(%a: tensor<?x64xbf16>, %b: tensor<128x64xbf16>) -> tensor<?x128xf32> {
  // expected-error @+1 {{tile-n must be 64, 128, 192 or 256, got 96}}
  %o = coda.gemm %a, %b transpose_b : tensor<?x64xbf16>, tensor<128x64xbf16> -> (tensor<?x128xf32> [m, n]) attributes {coda.kernel_plan = #coda.kernel_plan<chip = "sm_90a", tile_m = 128, tile_n = 96, stages = 4, schedule = cooperative, cluster_m = 1, group_rows = 8, epilogue_vector_bytes = 16>} {
  ^bb0(%acc: f32):
    coda.yield %acc : f32
  }
  return %o : tensor<?x128xf32>
}

// -----

func.func @bad_chip(%a: tensor<?x64xbf16>, %b: tensor<128x64xbf16>) -> tensor<?x128xf32> {
  // expected-error @+1 {{cannot run on chip 'sm_80': the GPU lowering emits wgmma and TMA instructions, which need chip sm_90a}}
  %o = coda.gemm %a, %b transpose_b : tensor<?x64xbf16>, tensor<128x64xbf16> -> (tensor<?x128xf32> [m, n]) attributes {coda.kernel_plan = #coda.kernel_plan<chip = "sm_80", tile_m = 128, tile_n = 128, stages = 4, schedule = cooperative, cluster_m = 1, group_rows = 8, epilogue_vector_bytes = 16>} {
  ^bb0(%acc: f32):
    coda.yield %acc : f32
  }
  return %o : tensor<?x128xf32>
}

// -----

// Input #0 is added to the accumulator but not only stored: it is no bias
// the accumulators can start at.
func.func @bad_bias_input(%a: tensor<?x64xbf16>, %b: tensor<128x64xbf16>, %bias: tensor<128xf32>) -> tensor<?x128xf32> {
  // expected-error @+1 {{cannot start the accumulators at epilogue input #0 (coda.kernel_plan bias_input): that needs a tensor along [n] added to the accumulator, which nothing else reads, the sum only stored, in a cooperative kernel of one fragment per consumer without C or alpha (this GEMM has none)}}
  %o = coda.gemm %a, %b transpose_b ins(%bias : tensor<128xf32> [n]) : tensor<?x64xbf16>, tensor<128x64xbf16> -> (tensor<?x128xf32> [m, n]) attributes {coda.kernel_plan = #coda.kernel_plan<chip = "sm_90a", tile_m = 128, tile_n = 128, stages = 4, schedule = cooperative, cluster_m = 1, group_rows = 8, epilogue_vector_bytes = 16, bias_input = 0>} {
  ^bb0(%acc: f32, %bb: f32):
    %s = arith.addf %acc, %bb : f32
    %g = coda.activation gelu_tanh %s
    coda.yield %g : f32
  }
  return %o : tensor<?x128xf32>
}

// -----

func.func @bad_schedule(%a: tensor<?x64xbf16>, %b: tensor<128x64xbf16>) -> tensor<?x128xf32> {
  // expected-error @+2 {{expected a schedule, 'cooperative' or 'pingpong', got 'fast'}}
  // expected-error @+1 {{failed to parse Coda_KernelPlanAttr parameter 'schedule'}}
  %o = coda.gemm %a, %b transpose_b : tensor<?x64xbf16>, tensor<128x64xbf16> -> (tensor<?x128xf32> [m, n]) attributes {coda.kernel_plan = #coda.kernel_plan<chip = "sm_90a", tile_m = 128, tile_n = 128, stages = 4, schedule = fast, cluster_m = 1, group_rows = 8, epilogue_vector_bytes = 16>} {
  ^bb0(%acc: f32):
    coda.yield %acc : f32
  }
  return %o : tensor<?x128xf32>
}

// -----

func.func @bad_flag(%a: tensor<?x64xbf16>, %b: tensor<128x64xbf16>) -> tensor<?x128xf32> {
  // expected-error @+2 {{expected true or false, got 'yes'}}
  // expected-error @+1 {{failed to parse Coda_KernelPlanAttr parameter 'chunked_loads'}}
  %o = coda.gemm %a, %b transpose_b : tensor<?x64xbf16>, tensor<128x64xbf16> -> (tensor<?x128xf32> [m, n]) attributes {coda.kernel_plan = #coda.kernel_plan<chip = "sm_90a", tile_m = 128, tile_n = 128, stages = 4, schedule = cooperative, cluster_m = 1, group_rows = 8, epilogue_vector_bytes = 16, chunked_loads = yes>} {
  ^bb0(%acc: f32):
    coda.yield %acc : f32
  }
  return %o : tensor<?x128xf32>
}

// -----

// An accumulator [m, n/2] spreads each column of the product over two
// output columns: the GPU runs elementwise ops and partner(x, 1) there.
func.func @half_accumulator_dropout(%a: tensor<?x64xbf16>, %b: tensor<128x64xbf16>, %seed: i64) -> tensor<?x256xbf16> {
  %o = coda.gemm %a, %b transpose_b accumulator [m, n/2] ins(%seed : i64) : tensor<?x64xbf16>, tensor<128x64xbf16> -> (tensor<?x256xbf16> [m, n]) attributes {coda.kernel_plan = #coda.kernel_plan<chip = "sm_90a", tile_m = 128, tile_n = 128, stages = 4, schedule = cooperative, cluster_m = 1, group_rows = 8, epilogue_vector_bytes = 16>} {
  ^bb0(%acc: f32, %s: i64):
    // expected-error @+1 {{cannot run on the GPU beside an accumulator [m, n/2]: its epilogue spreads each column of the product over two columns of the output, where the GPU lowering runs elementwise ops and partner(x, 1) only (no dropout, reductions or wider partners); the CPU reference runs it}}
    %1 = coda.dropout %acc, %s {p = 0.1 : f32}
    coda.yield %1 : f32
  }
  return %o : tensor<?x256xbf16>
}

// -----

func.func @half_accumulator_partner(%a: tensor<?x64xbf16>, %b: tensor<128x64xbf16>) -> tensor<?x256xbf16> {
  %o = coda.gemm %a, %b transpose_b accumulator [m, n/2] : tensor<?x64xbf16>, tensor<128x64xbf16> -> (tensor<?x256xbf16> [m, n]) attributes {coda.kernel_plan = #coda.kernel_plan<chip = "sm_90a", tile_m = 128, tile_n = 128, stages = 4, schedule = cooperative, cluster_m = 1, group_rows = 8, epilogue_vector_bytes = 16>} {
  ^bb0(%acc: f32):
    // expected-error @+1 {{cannot run on the GPU beside an accumulator [m, n/2]}}
    %1 = coda.partner %acc xor 2
    coda.yield %1 : f32
  }
  return %o : tensor<?x256xbf16>
}

// -----

// An output stored in halves beside a full accumulator.
func.func @halves_output(%a: tensor<?x64xbf16>, %b: tensor<128x64xbf16>) -> tensor<?x128xbf16> {
  // expected-error @+1 {{cannot run on the GPU: output #0 spans [m, n halves], which the GPU lowering writes beside an accumulator [m, n/2] only (a gated activation's gradient); the CPU reference runs it}}
  %o = coda.gemm %a, %b transpose_b : tensor<?x64xbf16>, tensor<128x64xbf16> -> (tensor<?x128xbf16> [m, n halves]) attributes {coda.kernel_plan = #coda.kernel_plan<chip = "sm_90a", tile_m = 128, tile_n = 128, stages = 4, schedule = cooperative, cluster_m = 1, group_rows = 8, epilogue_vector_bytes = 16>} {
  ^bb0(%acc: f32):
    coda.yield %acc : f32
  }
  return %o : tensor<?x128xbf16>
}
