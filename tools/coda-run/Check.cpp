//===- Check.cpp - comparing and writing coda-run's results ---------------===//

#include "Check.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/WithColor.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cmath>

using namespace mlir;
using namespace mlir::coda;

namespace {
/// The relative-norm error tolerance of an output of `type` compared with
/// the CPU reference, for GEMMs on f32 operands (multiplied in tf32 on the
/// GPU) when `tf32`: four roundings of the output type (bf16, f16), or of
/// tf32, whichever is looser.
double getTolerance(ElementType type, bool tf32) {
  double output = type == ElementType::BF16 ? 8e-3 : 1e-3;
  return tf32 ? std::max(output, 2e-3) : output;
}

/// ||got - want|| / ||want|| over the finite values, infinite when a NaN or
/// an infinity of one is not the other's (the same NaN or infinity agrees).
double getRelativeError(const HostArray &got, const HostArray &want) {
  double diff = 0, norm = 0;
  for (int64_t i = 0, e = want.getNumElements(); i < e; ++i) {
    double g = got.getAsFloat(i), w = want.getAsFloat(i);
    if ((std::isnan(g) && std::isnan(w)) || (std::isinf(g) && g == w))
      continue;
    if (!std::isfinite(g) || !std::isfinite(w))
      return INFINITY;
    diff += (g - w) * (g - w);
    norm += w * w;
  }
  return norm > 0 ? std::sqrt(diff / norm) : std::sqrt(diff);
}

} // namespace

llvm::Error mlir::coda::reportResults(ArrayRef<ResultReport> results) {
  bool checkFailed = false;
  SmallVector<std::string> written;
  for (const ResultReport &result : results) {
    const HostArray &array = *result.array;
    llvm::outs() << "  " << result.name << " " << array.getShapeString() << " "
                 << getElementTypeName(array.elementType);
    if (result.reference) {
      double error = getRelativeError(array, *result.reference);
      bool ok = error <= getTolerance(array.elementType, result.tf32);
      checkFailed |= !ok;
      llvm::outs() << llvm::formatv(
          ", vs CPU reference: relative error {0:e2} ({1})", error,
          ok ? "ok" : "FAILED");
    }
    for (const std::string &path : result.files) {
      if (llvm::Error error =
              writeNpy(path, array.convertTo(ElementType::F32))) {
        llvm::outs() << "\n";
        for (const std::string &earlier : written)
          if (!llvm::sys::fs::remove(earlier))
            llvm::errs() << "removed " << earlier
                         << ", written before the failure\n";
        return error;
      }
      if (llvm::sys::fs::is_regular_file(path))
        written.push_back(path);
      llvm::outs() << " -> " << path;
    }
    llvm::outs() << "\n";
  }
  if (checkFailed)
    return llvm::createStringError(
        "the GPU result differs from the CPU reference");
  return llvm::Error::success();
}

int mlir::coda::fail(const Twine &message) {
  llvm::WithColor::error(llvm::errs(), "coda-run") << message << "\n";
  return 1;
}

int mlir::coda::fail(llvm::Error error) {
  return fail(llvm::toString(std::move(error)));
}

int mlir::coda::failWithoutCuda() {
  return fail("this coda-run was built without the CUDA headers: "
              "--device cuda is not available");
}

double mlir::coda::secondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
      .count();
}
