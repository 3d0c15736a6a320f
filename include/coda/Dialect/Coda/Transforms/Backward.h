//===- Backward.h - backward programs derived from a forward one -*- C++
//-*-===//
//
// Reverse-mode differentiation of a coda program. From a forward program
// `out = f(acc, inputs)` with `acc = alpha * op(A) op(B)`, deriveBackward
// builds coda programs that compute, in one GEMM + epilogue each:
//
//  - the epilogue gradient: `grad_acc = sum_i grad_out_i * d out_i / d acc`
//    and the gradient of every tensor input (a `[n]` input's as a column
//    sum, a `[m]` input's as a row sum, a `[m, n]` input's elementwise), on
//    the accumulator of a GEMM: the forward GEMM recomputed, or, when the
//    forward saved its accumulator, the GEMM that produces the output's
//    gradient (the next layer's dgrad `dY W_next`);
//  - the operand gradients `grad_a = alpha grad_acc op(B)^T` and
//    `grad_b = alpha op(A)^T grad_acc` in the layouts A and B are stored in.
//
// Dropout's backward regenerates the forward mask from the same seed and
// stream; row reductions get their exact backward (row reductions again).
// Beside an `[m, n]` output, outputs that span `[m]` or `[n]` (row
// statistics, column sums) take no gradient: they are the statistics and
// gradients a training step reads. A program whose outputs all span `[m]` or
// `[n]` is a loss over rows (a cross-entropy's log-sum-exp and class logit):
// its `[m]` outputs take gradients, each row's total, and its recomputed
// backward reads the forward's row reductions from `@f_saving` instead of
// reducing its rows again. `coda.detach` stops a gradient.
//
//===----------------------------------------------------------------------===//

#ifndef CODA_DIALECT_CODA_TRANSFORMS_BACKWARD_H
#define CODA_DIALECT_CODA_TRANSFORMS_BACKWARD_H

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <optional>

namespace mlir::coda {

class GemmOp;

/// Where the epilogue gradient finds the forward's accumulator.
enum class AccumulatorSource {
  /// `@f_backward` recomputes the forward GEMM on A and B; the gradient of
  /// every `[m, n]` output is an epilogue input `grad_<output>`.
  Recompute,
  /// `@f_saving`, the forward program that also writes its accumulator (the
  /// output `saved_acc`, in the operand type), and `@f_backward_saved`, which
  /// reads `saved_acc` as an input and runs on the accumulator of its own
  /// GEMM: the gradient of the forward's first `[m, n]` output, produced by
  /// `A [M, K] * B [K, N]` (the next layer's `dY * W_next`, W_next stored
  /// `[K, N]` as an `nn.Linear` weight of that layer). The forward's row
  /// reductions that the epilogue gradient reads are saved too (`[m]`
  /// outputs `saved_row<i>` of `@f_saving`, inputs of `@f_backward_saved`),
  /// not computed again.
  Saved,
};

/// How `@f_backward_saved`'s B, the next layer's weight W_next, is stored.
enum class NextWeightLayout {
  /// `[K, N]`: an `nn.Linear` weight (`[out, in]` of the next layer).
  KN,
  /// `[N, K]`: a weight stored `[in, out]` (Hugging Face's `Conv1D`); the
  /// program is then `@f_backward_saved_nk`.
  NK,
};

/// The names the derived programs take, after the forward program's name.
struct BackwardNames {
  static constexpr const char *kBackward = "backward";
  static constexpr const char *kSaving = "saving";
  static constexpr const char *kBackwardSaved = "backward_saved";
  /// `kBackwardSaved` for a next layer's weight stored `[N, K]`.
  static constexpr const char *kBackwardSavedNK = "backward_saved_nk";
  /// The epilogue gradient on the saved accumulator, with no GEMM of its
  /// own to ride on: every output's gradient an input.
  static constexpr const char *kBackwardFromSaved = "backward_from_saved";
  static constexpr const char *kGradA = "grad_a";
  static constexpr const char *kGradB = "grad_b";
  /// The forward with dropout the identity (evaluation mode).
  static constexpr const char *kInference = "inference";
  /// The accumulator the saving program writes.
  static constexpr const char *kSavedAcc = "saved_acc";
  /// The prefix of the row statistics the saving program writes
  /// (`saved_row0`, ...: the values of the forward's row reductions that its
  /// epilogue gradient reads, `[m]` in f32).
  static constexpr const char *kSavedRow = "saved_row";
  /// The gradient of the accumulator.
  static constexpr const char *kGradAcc = "grad_acc";
  /// The forward split in two for rows wider than the GPU exchanges across
  /// tiles (deriveRowSplit): its accumulator and row reductions, then its
  /// epilogue on them.
  static constexpr const char *kRowStatistics = "row_statistics";
  static constexpr const char *kRowApply = "row_apply";
  /// What the row statistics write and their application reads: the
  /// accumulator (f32), or the rounded value (coda.round) in its own type
  /// when what follows the row reductions starts from it, and the row
  /// reductions (`split_row0`, ...).
  static constexpr const char *kSplitAcc = "split_acc";
  static constexpr const char *kSplitRounded = "split_rounded";
  static constexpr const char *kSplitRow = "split_row";
  /// The attribute of a derived program: the symbol of its forward.
  static constexpr const char *kDerivedFrom = "coda.derived_from";
};

/// The name of the program `suffix` (a BackwardNames constant) derived from
/// `forward`: `@f_<suffix>`.
std::string getDerivedName(func::FuncOp forward, StringRef suffix);

/// The programs derived from one forward program `@f`, inserted after it.
struct BackwardPrograms {
  /// Saved: `@f_saving`. Recompute, for a loss over rows whose gradient
  /// reads the forward's row reductions: `@f_saving`, the forward that also
  /// writes them (`saved_row<i>`, no accumulator); else null.
  func::FuncOp saving;
  /// `@f_backward` (Recompute) or `@f_backward_saved` (Saved): the outputs
  /// `grad_acc` (`[m, n]`, the operand type), then `grad_<input>` for every
  /// tensor input, in order (`[m, n]` in the input's type, `[m]`/`[n]` f32).
  func::FuncOp backward;
  /// Saved, unless an output spans `[m, n/2]`: `@f_backward_from_saved`,
  /// the same outputs from A, B, the forward's inputs, `saved_acc`, the saved
  /// row statistics and every `[m, n]` output's gradient (`grad_<output>`).
  /// Its epilogue reads no accumulator of its own, so its kernel runs no
  /// product: the backward of a program whose output's gradient no GEMM
  /// produces (an attention's input, say), without the forward's GEMM again.
  func::FuncOp fromSaved;
  /// `@f_grad_a`: `grad_a` in A's layout and type, from `grad_acc` and B.
  func::FuncOp gradA;
  /// `@f_grad_b`: `grad_b` in B's layout and type, from `grad_acc` and A.
  func::FuncOp gradB;
};

/// Derives the backward programs of the program `forward` (a function
/// holding one coda.gemm, as ProgramSignature describes) and inserts them
/// into its module; `next` is how the B of `@f_backward_saved` is stored
/// (Saved only). Emits an error at the offending op and fails when the
/// program is not differentiable: a batched GEMM, a C operand, an op with no
/// derivative.
FailureOr<BackwardPrograms>
deriveBackward(func::FuncOp forward, AccumulatorSource source,
               NextWeightLayout next = NextWeightLayout::KN);

/// Inserts after `forward` its inference form `@f_inference`: the forward
/// with every coda.dropout the identity, as nn.Dropout in evaluation mode,
/// and the forward's arguments (the seed unread).
func::FuncOp deriveInference(func::FuncOp forward);

/// A forward program whose row reductions need whole rows in every element
/// (a LayerNorm's or softmax's written output), split in two programs whose
/// rows have no width limit on the GPU.
struct RowSplitPrograms {
  /// `@f_row_statistics`: the forward's GEMM, writing its accumulator
  /// (`split_acc`, `[m, n]` f32) and the value of every row reduction
  /// (`split_row<i>`, `[m]` f32), which are then row statistics, merged
  /// after the GEMM at any width; not the forward's outputs. When everything
  /// the outputs need past the row reductions starts from one rounded value
  /// (coda.round, e.g. `h = bf16(input + bias + residual)` before a
  /// LayerNorm of h), it writes that value in its own type instead
  /// (`split_rounded`, `[m, n]` bf16 or f16): half the bytes, and the
  /// application reads no other input to recompute it; when the forward
  /// writes that value as it is (an output h in its type), under that
  /// output's name, in its place.
  func::FuncOp statistics;
  /// `@f_row_apply`: A, B, the forward's inputs, `split_acc` (or the rounded
  /// value) and `split_row<i>`; the forward's epilogue on them, each row
  /// reduction read, writing the forward's outputs but one the statistics
  /// wrote. It reads no accumulator of its own, so its kernel runs no
  /// product.
  func::FuncOp apply;
};

/// Rewrites each sum or mean over a row in `gemm`'s epilogue whose values are
/// a sum of terms, each values that read no row reduction times factors
/// uniform along the row (row reductions, `[m]` inputs, constants), into the
/// sum of the factors times each term's reduction: the same value, computed
/// from reductions that read no other (SeparateRowReductions.cpp). Others are
/// kept.
void separateRowReductions(GemmOp gemm);

/// Inserts after `forward` its row split, first separating the row reductions
/// of its epilogue (separateRowReductions). Emits an error and fails when its
/// epilogue has no row reduction, when they are row statistics already, or
/// when one reads another in a way no merge of per-tile results computes;
/// and, as deriveBackward, for a batched GEMM, a C operand or an accumulator
/// [m, n/2].
FailureOr<RowSplitPrograms> deriveRowSplit(func::FuncOp forward);

/// Derives the program named `derived` ("backward", "saving",
/// "backward_saved", "backward_saved_nk", "backward_from_saved", "grad_a",
/// "grad_b", "inference", "row_statistics", "row_apply") of
/// the program `function`
/// of `module` (its only one when empty), erasing the derived programs not
/// asked for, and returns its name; or emits an error and fails.
FailureOr<std::string> deriveProgram(ModuleOp module, StringRef function,
                                     StringRef derived);

} // namespace mlir::coda

#endif // CODA_DIALECT_CODA_TRANSFORMS_BACKWARD_H
