// RUN: not coda-opt %s --coda-split-rows -split-input-file 2>/dev/null | FileCheck %s
// RUN: not coda-opt %s --coda-split-rows -split-input-file 2>&1 | FileCheck %s --check-prefix=ERR

// A LayerNorm's written output reads its row's statistics in every element:
// the program becomes a graph of its row statistics (the accumulator in f32,
// the mean, the variance centered on it) and their application, which reads
// no accumulator. Inputs keep their names; what the two pass is named
// split_acc and split_row<i>.
// CHECK-LABEL: func.func @layernorm(
// CHECK-SAME:      %[[A:.*]]: tensor<?x64xbf16>, %[[B:.*]]: tensor<8192x64xbf16>, %[[G:.*]]: tensor<8192xf32> {coda.name = "gamma"})
// CHECK-NEXT:    %[[S:.*]]:3 = call @layernorm_row_statistics(%[[A]], %[[B]], %[[G]])
// CHECK-NEXT:    %[[O:.*]] = call @layernorm_row_apply(%[[A]], %[[B]], %[[G]], %[[S]]#0, %[[S]]#1, %[[S]]#2)
// CHECK-NEXT:    return %[[O]]
// CHECK-LABEL: func.func @layernorm_row_statistics(
// CHECK-SAME:      -> (tensor<?x8192xf32> {coda.name = "split_acc"}, tensor<?xf32> {coda.name = "split_row0"}, tensor<?xf32> {coda.name = "split_row1"})
// CHECK-SAME:      attributes {coda.derived_from = @layernorm}
// CHECK:         ^bb0(%[[ACC:.*]]: f32, %{{.*}}: f32):
// CHECK-NEXT:      %[[MEAN:.*]] = coda.row_reduce mean %[[ACC]]
// CHECK-NEXT:      %[[D:.*]] = arith.subf %[[ACC]], %[[MEAN]]
// CHECK-NEXT:      %[[SQ:.*]] = arith.mulf %[[D]], %[[D]]
// CHECK-NEXT:      %[[VAR:.*]] = coda.row_reduce mean %[[SQ]]
// CHECK-NEXT:      coda.yield %[[ACC]], %[[MEAN]], %[[VAR]]
// CHECK-LABEL: func.func @layernorm_row_apply(
// CHECK-SAME:      %{{.*}}: tensor<?x8192xf32> {coda.name = "split_acc"}, %{{.*}}: tensor<?xf32> {coda.name = "split_row0"}, %{{.*}}: tensor<?xf32> {coda.name = "split_row1"})
// CHECK-SAME:      -> (tensor<?x8192xbf16> {coda.name = "output"})
// CHECK:         ^bb0(%[[UNREAD:.*]]: f32, %[[GAMMA:.*]]: f32, %[[SACC:.*]]: f32, %[[SMEAN:.*]]: f32, %[[SVAR:.*]]: f32):
// CHECK-NOT:       coda.row_reduce
// CHECK:           arith.subf %[[SACC]], %[[SMEAN]]
// CHECK-NOT:       %[[UNREAD]]
// CHECK:           coda.yield
func.func @layernorm(%a: tensor<?x64xbf16>, %b: tensor<8192x64xbf16>,
                     %gamma: tensor<8192xf32> {coda.name = "gamma"})
    -> (tensor<?x8192xbf16> {coda.name = "output"}) {
  %0 = coda.gemm %a, %b transpose_b ins(%gamma : tensor<8192xf32> [n])
      : tensor<?x64xbf16>, tensor<8192x64xbf16> -> (tensor<?x8192xbf16> [m, n]) {
  ^bb0(%acc: f32, %g: f32):
    %mean = coda.row_reduce mean %acc
    %d = arith.subf %acc, %mean : f32
    %sq = arith.mulf %d, %d : f32
    %var = coda.row_reduce mean %sq
    %eps = arith.constant 1.0e-5 : f32
    %v = arith.addf %var, %eps : f32
    %r = math.rsqrt %v : f32
    %n = arith.mulf %d, %r : f32
    %y = arith.mulf %n, %g : f32
    coda.yield %y : f32
  }
  return %0 : tensor<?x8192xbf16>
}

// -----

// A LayerNorm of h rounded to bf16 (coda.round, the DSL's bf16(...)): what
// follows the row reductions starts from the rounded h, so the statistics
// save it in bf16 instead of the f32 accumulator, and the application reads
// neither the accumulator nor the residual. h is an output as it is: the
// statistics write it there (named as the output), the application reads it
// and writes the rest.
// CHECK-LABEL: func.func @rounded(
// CHECK-NEXT:    %[[S:.*]]:3 = call @rounded_row_statistics(
// CHECK-NEXT:    %[[O:.*]] = call @rounded_row_apply(%{{.*}}, %{{.*}}, %{{.*}}, %[[S]]#0, %[[S]]#1, %[[S]]#2)
// CHECK-NEXT:    return %[[S]]#0, %[[O]]
// CHECK-LABEL: func.func @rounded_row_statistics(
// CHECK-SAME:      -> (tensor<?x8192xbf16> {coda.name = "h"}, tensor<?xf32> {coda.name = "split_row0"}, tensor<?xf32> {coda.name = "split_row1"})
// CHECK:           %[[H:.*]] = coda.round %{{.*}} to bf16
// CHECK:           coda.yield %[[H]], %{{.*}}, %{{.*}} : f32, f32, f32
// CHECK-LABEL: func.func @rounded_row_apply(
// CHECK-SAME:      %{{.*}}: tensor<?x8192xbf16> {coda.name = "h"}
// CHECK-SAME:      -> (tensor<?x8192xbf16> {coda.name = "output"})
// CHECK:         ^bb0(%[[UNREAD:.*]]: f32, %[[RES:.*]]: f32, %[[SH:.*]]: f32, %[[SMEAN:.*]]: f32, %[[SVAR:.*]]: f32):
// CHECK-NEXT:      %[[D:.*]] = arith.subf %[[SH]], %[[SMEAN]]
// CHECK-NOT:       %[[UNREAD]]
// CHECK-NOT:       %[[RES]]
// CHECK-NOT:       coda.round
// CHECK:           coda.yield %{{.*}} : f32
func.func @rounded(%a: tensor<?x64xbf16>, %b: tensor<8192x64xbf16>,
                   %res: tensor<?x8192xbf16> {coda.name = "residual"})
    -> (tensor<?x8192xbf16> {coda.name = "h"}, tensor<?x8192xbf16> {coda.name = "output"}) {
  %0:2 = coda.gemm %a, %b transpose_b ins(%res : tensor<?x8192xbf16> [m, n])
      : tensor<?x64xbf16>, tensor<8192x64xbf16> -> (tensor<?x8192xbf16> [m, n], tensor<?x8192xbf16> [m, n]) {
  ^bb0(%acc: f32, %r: f32):
    %sum = arith.addf %acc, %r : f32
    %h = coda.round %sum to bf16
    %mean = coda.row_reduce mean %h
    %d = arith.subf %h, %mean : f32
    %sq = arith.mulf %d, %d : f32
    %var = coda.row_reduce mean %sq
    %eps = arith.constant 1.0e-5 : f32
    %v = arith.addf %var, %eps : f32
    %rstd = math.rsqrt %v : f32
    %n = arith.mulf %d, %rstd : f32
    coda.yield %h, %n : f32, f32
  }
  return %0#0, %0#1 : tensor<?x8192xbf16>, tensor<?x8192xbf16>
}

// -----

// A reduction repeated (saved once) still leaves the rounded h the only value
// the outputs need.
// CHECK-LABEL: func.func @rounded_repeated_row_statistics(
// CHECK-SAME:      -> (tensor<?x8192xbf16> {coda.name = "h"}, tensor<?xf32> {coda.name = "split_row0"})
func.func @rounded_repeated(%a: tensor<?x64xbf16>, %b: tensor<8192x64xbf16>)
    -> (tensor<?x8192xbf16> {coda.name = "h"}, tensor<?x8192xbf16> {coda.name = "output"}) {
  %0:2 = coda.gemm %a, %b transpose_b
      : tensor<?x64xbf16>, tensor<8192x64xbf16> -> (tensor<?x8192xbf16> [m, n], tensor<?x8192xbf16> [m, n]) {
  ^bb0(%acc: f32):
    %h = coda.round %acc to bf16
    %m1 = coda.row_reduce max %acc
    %x = arith.subf %h, %m1 : f32
    %m2 = coda.row_reduce max %acc
    %y = arith.subf %x, %m2 : f32
    coda.yield %h, %y : f32, f32
  }
  return %0#0, %0#1 : tensor<?x8192xbf16>, tensor<?x8192xbf16>
}

// -----

// A rounded value that is no output as it is (here: written in f32) is
// saved as split_rounded.
// CHECK-LABEL: func.func @rounded_unwritten(
// CHECK-NEXT:    %[[S:.*]]:2 = call @rounded_unwritten_row_statistics(
// CHECK-NEXT:    %[[O:.*]]:2 = call @rounded_unwritten_row_apply(
// CHECK-NEXT:    return %[[O]]#0, %[[O]]#1
// CHECK-LABEL: func.func @rounded_unwritten_row_statistics(
// CHECK-SAME:      -> (tensor<?x8192xbf16> {coda.name = "split_rounded"}, tensor<?xf32> {coda.name = "split_row0"})
// CHECK-LABEL: func.func @rounded_unwritten_row_apply(
// CHECK-SAME:      -> (tensor<?x8192xf32> {coda.name = "h"}, tensor<?x8192xbf16> {coda.name = "output"})
func.func @rounded_unwritten(%a: tensor<?x64xbf16>, %b: tensor<8192x64xbf16>)
    -> (tensor<?x8192xf32> {coda.name = "h"}, tensor<?x8192xbf16> {coda.name = "output"}) {
  %0:2 = coda.gemm %a, %b transpose_b
      : tensor<?x64xbf16>, tensor<8192x64xbf16> -> (tensor<?x8192xf32> [m, n], tensor<?x8192xbf16> [m, n]) {
  ^bb0(%acc: f32):
    %h = coda.round %acc to bf16
    %mean = coda.row_reduce mean %h
    %d = arith.subf %h, %mean : f32
    coda.yield %h, %d : f32, f32
  }
  return %0#0, %0#1 : tensor<?x8192xf32>, tensor<?x8192xbf16>
}

// -----

// A value rounded after the row reductions, or one that leaves the
// accumulator needed past them, is not saved: the statistics keep the f32
// accumulator.
// CHECK-LABEL: func.func @rounded_late_row_statistics(
// CHECK-SAME:      -> (tensor<?x8192xf32> {coda.name = "split_acc"}
// CHECK-LABEL: func.func @rounded_late_row_apply(
func.func @rounded_late(%a: tensor<?x64xbf16>, %b: tensor<8192x64xbf16>)
    -> (tensor<?x8192xbf16> {coda.name = "output"}) {
  %0 = coda.gemm %a, %b transpose_b
      : tensor<?x64xbf16>, tensor<8192x64xbf16> -> (tensor<?x8192xbf16> [m, n]) {
  ^bb0(%acc: f32):
    %h = coda.round %acc to bf16
    %mean = coda.row_reduce mean %h
    %d = arith.subf %acc, %mean : f32
    %late = coda.round %d to bf16
    coda.yield %late : f32
  }
  return %0 : tensor<?x8192xbf16>
}

// -----

// Row statistics (an rstd written [m]) are merged after the GEMM at any
// width, and a program without row reductions has none to split: both are
// left as they are.
// CHECK-LABEL: func.func @statistics(
// CHECK-NEXT:    coda.gemm
// CHECK-NOT:   func.func @statistics_row_statistics
func.func @statistics(%a: tensor<?x64xbf16>, %b: tensor<8192x64xbf16>)
    -> (tensor<?x8192xbf16>, tensor<?xf32>) {
  %0:2 = coda.gemm %a, %b transpose_b : tensor<?x64xbf16>, tensor<8192x64xbf16>
      -> (tensor<?x8192xbf16> [m, n], tensor<?xf32> [m]) {
  ^bb0(%acc: f32):
    %sq = arith.mulf %acc, %acc : f32
    %ms = coda.row_reduce mean %sq
    %r = math.rsqrt %ms : f32
    coda.yield %acc, %r : f32, f32
  }
  return %0#0, %0#1 : tensor<?x8192xbf16>, tensor<?xf32>
}

// -----

// A reduction of values that read another reduction, linearly (as a
// LayerNorm's gradient does), is separated first: mean(-(acc - c s acc) / s)
// is -mean(acc) / s + mean(acc) / s * c s, from reductions of the row's
// values only (mean(acc) computed once), which are row statistics.
// CHECK-LABEL: func.func @separated_row_statistics(
// CHECK-SAME:      -> (tensor<?x8192xf32> {coda.name = "split_acc"}, tensor<?xf32> {coda.name = "split_row0"}, tensor<?xf32> {coda.name = "split_row1"})
// CHECK:         ^bb0(%[[ACC:.*]]: f32, %{{.*}}: f32):
// CHECK-NEXT:      %[[SQ:.*]] = arith.mulf %[[ACC]], %[[ACC]] : f32
// CHECK-NEXT:      %[[C:.*]] = coda.row_reduce mean %[[SQ]]
// CHECK-NEXT:      %[[MEAN:.*]] = coda.row_reduce mean %[[ACC]]
// CHECK-NEXT:      coda.yield %[[ACC]], %[[C]], %[[MEAN]] : f32, f32, f32
// CHECK-LABEL: func.func @separated_row_apply(
// CHECK:         ^bb0(%{{.*}}: f32, %[[S:.*]]: f32, %[[X:.*]]: f32, %[[C:.*]]: f32, %[[MEAN:.*]]: f32):
// CHECK-NEXT:      %[[K:.*]] = arith.mulf %[[C]], %[[S]] : f32
// CHECK-NEXT:      %[[D0:.*]] = arith.divf %[[MEAN]], %[[S]] : f32
// CHECK-NEXT:      %[[N0:.*]] = arith.negf %[[D0]] : f32
// CHECK-NEXT:      %[[D1:.*]] = arith.divf %[[MEAN]], %[[S]] : f32
// CHECK-NEXT:      %[[T1:.*]] = arith.mulf %[[D1]], %[[K]] : f32
// CHECK-NEXT:      %[[R:.*]] = arith.addf %[[N0]], %[[T1]] : f32
// CHECK-NEXT:      %[[Y:.*]] = arith.mulf %[[X]], %[[R]] : f32
// CHECK-NEXT:      coda.yield %[[Y]] : f32
func.func @separated(%a: tensor<?x64xbf16>, %b: tensor<8192x64xbf16>,
                     %scale: tensor<?xf32> {coda.name = "scale"}) -> tensor<?x8192xbf16> {
  %0 = coda.gemm %a, %b transpose_b ins(%scale : tensor<?xf32> [m])
      : tensor<?x64xbf16>, tensor<8192x64xbf16> -> (tensor<?x8192xbf16> [m, n]) {
  ^bb0(%acc: f32, %s: f32):
    %sq = arith.mulf %acc, %acc : f32
    %c = coda.row_reduce mean %sq
    %k = arith.mulf %c, %s : f32
    %p = arith.mulf %k, %acc : f32
    %q = arith.subf %acc, %p : f32
    %d = arith.divf %q, %s : f32
    %n = arith.negf %d : f32
    %r = coda.row_reduce mean %n
    %y = arith.mulf %acc, %r : f32
    coda.yield %y : f32
  }
  return %0 : tensor<?x8192xbf16>
}

// -----

// What cannot be split fails the pass, saying why: a reduction of a function
// of values scaled by another reduction (no merge of per-tile results
// computes it), and a batched GEMM.
// ERR: error: 'coda.gemm' op cannot be split into its row statistics and their application: a row reduction reads another in a way no merge of per-tile results computes (only a variance centered on a mean and a sum of exponentials shifted by a maximum are)
func.func @scaled(%a: tensor<?x64xbf16>, %b: tensor<8192x64xbf16>) -> tensor<?x8192xbf16> {
  %0 = coda.gemm %a, %b transpose_b : tensor<?x64xbf16>, tensor<8192x64xbf16>
      -> (tensor<?x8192xbf16> [m, n]) {
  ^bb0(%acc: f32):
    %mx = coda.row_reduce max %acc
    %p = arith.mulf %acc, %mx : f32
    %e = math.exp %p : f32
    %s = coda.row_reduce sum %e
    %y = arith.divf %acc, %s : f32
    coda.yield %y : f32
  }
  return %0 : tensor<?x8192xbf16>
}

// -----

// ERR: error: 'coda.gemm' op cannot be split into its row statistics and their application: batched GEMMs are not supported; fold the batch into M
func.func @batched(%a: tensor<4x?x64xbf16>, %b: tensor<8192x64xbf16>) -> tensor<4x?x8192xbf16> {
  %0 = coda.gemm %a, %b transpose_b : tensor<4x?x64xbf16>, tensor<8192x64xbf16>
      -> (tensor<4x?x8192xbf16> [b, m, n]) {
  ^bb0(%acc: f32):
    %mean = coda.row_reduce mean %acc
    %d = arith.subf %acc, %mean : f32
    coda.yield %d : f32
  }
  return %0 : tensor<4x?x8192xbf16>
}

// -----

// The split's values and the program's outputs are bound by name: an output
// named as one of the split's own is refused.
// ERR: error: cannot derive '@clash_row_statistics': two of its results would be named 'split_row0'; rename the forward's input or output that it comes from (the derived names are grad_<input>, grad_<output>, grad_acc, saved_acc, saved_row<i>, split_acc, split_rounded and split_row<i>)
func.func @clash(%a: tensor<?x64xbf16>, %b: tensor<8192x64xbf16>)
    -> (tensor<?x8192xbf16> {coda.name = "output"}, tensor<?xf32> {coda.name = "split_row0"}) {
  %0:2 = coda.gemm %a, %b transpose_b
      : tensor<?x64xbf16>, tensor<8192x64xbf16> -> (tensor<?x8192xbf16> [m, n], tensor<?xf32> [m]) {
  ^bb0(%acc: f32):
    %mx = coda.row_reduce max %acc
    %y = arith.subf %acc, %mx : f32
    coda.yield %y, %mx : f32, f32
  }
  return %0#0, %0#1 : tensor<?x8192xbf16>, tensor<?xf32>
}
