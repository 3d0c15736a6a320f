//===- Bindings.h - bind user data to a program's arguments -----*- C++ -*-===//

#ifndef CODA_RUNNER_BINDINGS_H
#define CODA_RUNNER_BINDINGS_H

#include "coda/Runner/CpuRunner.h"

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace mlir::coda {

/// What a user supplies for one run: .npy paths for A, B and C, GEMM scalars,
/// the dropout seed, and `name=value` pairs for epilogue inputs (a .npy path,
/// or a number for a scalar input).
struct RunRequest {
  std::string a, b, c;
  /// Numbers as given: --alpha and --beta, checked when bound.
  std::optional<std::string> alpha, beta;
  std::optional<int64_t> seed;
  std::vector<std::pair<std::string, std::string>> inputs;
};

/// The values bound to a program's arguments, and the problem they describe.
struct BoundArguments {
  std::vector<ArgumentValue> values;
  ProblemShape problem;
  /// Notes for the user about defaults that were applied ("seed 0").
  std::vector<std::string> notes;
};

/// Loads and converts everything `request` names, in the program's argument
/// order: tensors are rounded to each argument's element type (nearest even),
/// alpha and beta default to 1, the seed to 0. Fails with a message that names
/// the offending argument on a missing, unknown or mis-shaped value.
llvm::Expected<BoundArguments> bindArguments(const ProgramSignature &signature,
                                             const RunRequest &request);

} // namespace mlir::coda

#endif // CODA_RUNNER_BINDINGS_H
