//===- TileChoice.cpp - the tile width of a problem -----------------------===//

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
