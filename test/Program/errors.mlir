// Every way a module can fail to be a coda program, as coda-run reports it.
// RUN: split-file --leading-lines %s %t
// RUN: not coda-run %t/none.mlir 2>&1 | FileCheck %s --check-prefix=NONE
// RUN: not coda-run %t/two.mlir 2>&1 | FileCheck %s --check-prefix=TWO
// RUN: not coda-run %t/two.mlir --function nope 2>&1 | FileCheck %s --check-prefix=NAMED
// RUN: not coda-run %t/external.mlir --function ext 2>&1 | FileCheck %s --check-prefix=EXTERNAL
// RUN: not coda-run %t/extra-op.mlir 2>&1 | FileCheck %s --check-prefix=EXTRA
// RUN: not coda-run %t/order.mlir 2>&1 | FileCheck %s --check-prefix=ORDER
// RUN: not coda-run %t/branch.mlir 2>&1 | FileCheck %s --check-prefix=BRANCH
// RUN: not coda-run %t/computed.mlir 2>&1 | FileCheck %s --check-prefix=COMPUTED
// RUN: not coda-run %t/twice.mlir 2>&1 | FileCheck %s --check-prefix=TWICE
// RUN: not coda-run %t/unused.mlir 2>&1 | FileCheck %s --check-prefix=UNUSED
// RUN: not coda-run %t/same-input.mlir 2>&1 | FileCheck %s --check-prefix=SAME-INPUT
// RUN: not coda-run %t/same-output.mlir 2>&1 | FileCheck %s --check-prefix=SAME-OUTPUT
// RUN: coda-run %t/two.mlir --function second --a %S/../Runner/Inputs/a4x8.npy --b %S/../Runner/Inputs/a4x8.npy 2>&1 | FileCheck %s --check-prefix=PICK

//--- none.mlir
// NONE: none.mlir:{{[0-9]+}}:{{[0-9]+}}: error: no function holds a coda.gemm
func.func @f() {
  return
}

//--- two.mlir
func.func @first(%a: tensor<?x?xf32>, %b: tensor<?x?xf32>) -> tensor<?x?xf32> {
  %0 = coda.gemm %a, %b : tensor<?x?xf32>, tensor<?x?xf32> -> (tensor<?x?xf32> [m, n]) {
  ^bb0(%acc: f32):
    coda.yield %acc : f32
  }
  return %0 : tensor<?x?xf32>
}
// TWO: two.mlir:[[@LINE+2]]:1: error: several functions hold a coda.gemm ('first', 'second'); name the one to run
// PICK: coda-run: second on cpu: M 4, N 4, K 8, f32 (A mk, B nk)
func.func @second(%a: tensor<?x?xf32>, %b: tensor<?x?xf32>) -> tensor<?x?xf32> {
  %0 = coda.gemm %a, %b transpose_b : tensor<?x?xf32>, tensor<?x?xf32> -> (tensor<?x?xf32> [m, n]) {
  ^bb0(%acc: f32):
    coda.yield %acc : f32
  }
  return %0 : tensor<?x?xf32>
}
// NAMED: error: no function named 'nope'

//--- external.mlir
// EXTERNAL: external.mlir:[[@LINE+1]]:1: error: 'ext' is not a coda program: it has no body
func.func private @ext(%a: tensor<?x?xf32>)

//--- extra-op.mlir
func.func @f(%a: tensor<?x?xf32>, %b: tensor<?x?xf32>) -> tensor<?x?xf32> {
  %0 = coda.gemm %a, %b : tensor<?x?xf32>, tensor<?x?xf32> -> (tensor<?x?xf32> [m, n]) {
  ^bb0(%acc: f32):
    coda.yield %acc : f32
  }
  %c0 = arith.constant 0 : index
  return %0 : tensor<?x?xf32>
}
// EXTRA: error: 'f' is not a coda program: its body must be exactly one coda.gemm and a return

//--- order.mlir
func.func @f(%a: tensor<?x?xf32>, %b: tensor<?x?xf32>) -> (tensor<?x?xf32>, tensor<?x?xf32>) {
  %0, %1 = coda.gemm %a, %b : tensor<?x?xf32>, tensor<?x?xf32> -> (tensor<?x?xf32> [m, n], tensor<?x?xf32> [m, n]) {
  ^bb0(%acc: f32):
    coda.yield %acc, %acc : f32, f32
  }
  return %1, %0 : tensor<?x?xf32>, tensor<?x?xf32>
}
// ORDER: error: 'f' is not a coda program: it must return the coda.gemm results, in order

//--- branch.mlir
// The gemm's block must end in the return itself, not in a branch to it.
func.func @f(%a: tensor<?x?xf32>, %b: tensor<?x?xf32>) -> tensor<?x?xf32> {
  %0 = coda.gemm %a, %b : tensor<?x?xf32>, tensor<?x?xf32> -> (tensor<?x?xf32> [m, n]) {
  ^bb0(%acc: f32):
    coda.yield %acc : f32
  }
  cf.br ^bb1(%0 : tensor<?x?xf32>)
^bb1(%r: tensor<?x?xf32>):
  return %r : tensor<?x?xf32>
}
// BRANCH: error: 'f' is not a coda program: it must return the coda.gemm results, in order

//--- computed.mlir
func.func @f(%a: tensor<?x?xf32>, %b: tensor<?x?xf32>) -> tensor<?x?xf32> {
  %alpha = arith.constant 2.0 : f32
  %0 = coda.gemm %a, %b alpha(%alpha) : tensor<?x?xf32>, tensor<?x?xf32> -> (tensor<?x?xf32> [m, n]) {
  ^bb0(%acc: f32):
    coda.yield %acc : f32
  }
  return %0 : tensor<?x?xf32>
}
// COMPUTED: error: 'f' is not a coda program: its body must be exactly one coda.gemm and a return

//--- twice.mlir
func.func @f(%a: tensor<?x?xf32>) -> tensor<?x?xf32> {
  %0 = coda.gemm %a, %a : tensor<?x?xf32>, tensor<?x?xf32> -> (tensor<?x?xf32> [m, n]) {
  ^bb0(%acc: f32):
    coda.yield %acc : f32
  }
  return %0 : tensor<?x?xf32>
}
// TWICE: error: 'f' is not a coda program: argument #0 feeds two coda.gemm operands

//--- unused.mlir
func.func @f(%a: tensor<?x?xf32>, %b: tensor<?x?xf32>, %x: f32) -> tensor<?x?xf32> {
  %0 = coda.gemm %a, %b : tensor<?x?xf32>, tensor<?x?xf32> -> (tensor<?x?xf32> [m, n]) {
  ^bb0(%acc: f32):
    coda.yield %acc : f32
  }
  return %0 : tensor<?x?xf32>
}
// UNUSED: error: 'f' is not a coda program: argument #2 is not used by the coda.gemm

//--- same-input.mlir
func.func @f(%a: tensor<?x?xf32>, %b: tensor<?x?xf32>, %x: f32 {coda.name = "s"},
             %y: f32 {coda.name = "s"}) -> tensor<?x?xf32> {
  %0 = coda.gemm %a, %b ins(%x : f32, %y : f32) : tensor<?x?xf32>, tensor<?x?xf32> -> (tensor<?x?xf32> [m, n]) {
  ^bb0(%acc: f32, %u: f32, %v: f32):
    %1 = arith.mulf %acc, %u : f32
    %2 = arith.addf %1, %v : f32
    coda.yield %2 : f32
  }
  return %0 : tensor<?x?xf32>
}
// SAME-INPUT: error: 'f' is not a coda program: two epilogue inputs are named 's'; each needs a coda.name of its own

//--- same-output.mlir
func.func @f(%a: tensor<?x?xf32>, %b: tensor<?x?xf32>)
    -> (tensor<?x?xf32> {coda.name = "y"}, tensor<?x?xf32> {coda.name = "y"}) {
  %0:2 = coda.gemm %a, %b : tensor<?x?xf32>, tensor<?x?xf32> -> (tensor<?x?xf32> [m, n], tensor<?x?xf32> [m, n]) {
  ^bb0(%acc: f32):
    %1 = arith.negf %acc : f32
    coda.yield %acc, %1 : f32, f32
  }
  return %0#0, %0#1 : tensor<?x?xf32>, tensor<?x?xf32>
}
// SAME-OUTPUT: error: 'f' is not a coda program: two outputs are named 'y'; each needs a coda.name of its own
