//===- TileChoice.cpp - the kernel shape of a problem ---------------------===//

#include "coda/Runtime/Runtime.h"

#include "coda/Conversion/CodaToGPU/KernelABI.h"

using namespace mlir;
using namespace mlir::coda;

int64_t mlir::coda::chooseTileN(const ProblemShape &problem,
                                int multiprocessors) {
  constexpr int64_t kTileM = 128;
  // Relative work per output column of a tile; a narrower tile reloads A
  // more often and issues narrower wgmmas.
  constexpr double kEfficiency192 = 0.85;
  auto cost = [&](int64_t tileN, double efficiency) {
    KernelABI kernel;
    kernel.tileM = kTileM;
    kernel.tileN = tileN;
    int64_t tiles = kernel.getNumTiles(problem.m, problem.n, problem.batch);
    int64_t waves = (tiles + multiprocessors - 1) / multiprocessors;
    return static_cast<double>(waves) * tileN / efficiency;
  };
  return cost(192, kEfficiency192) < cost(256, 1.0) ? 192 : 256;
}

SmallVector<GpuCompileOptions> mlir::coda::getTuningCandidates() {
  auto shape = [](int64_t tileM, int64_t tileN, StringRef schedule) {
    GpuCompileOptions options;
    options.tileM = tileM;
    options.tileN = tileN;
    options.schedule = schedule.str();
    return options;
  };
  // The compiler's default first (an empty shape: the kernel prepare()
  // compiles), then narrower and taller tiles and the other schedule.
  return {GpuCompileOptions(), shape(128, 192, "cooperative"),
          shape(128, 128, "cooperative"), shape(256, 128, "cooperative"),
          shape(128, 128, "pingpong")};
}

std::string mlir::coda::describeShape(const GpuCompileOptions &shape) {
  if (!shape.tileM && !shape.tileN && shape.schedule.empty())
    return "128x256 cooperative";
  return std::to_string(shape.tileM) + "x" + std::to_string(shape.tileN) +
         " " + shape.schedule;
}
