//===- KernelShape.cpp - the tunable shape of a GEMM kernel ---------------===//

#include "coda/Kernel/KernelShape.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/Twine.h"

using namespace mlir;
using llvm::StringRef;
using namespace mlir::coda;

int64_t mlir::coda::getPartnerTileMultiple(int64_t distance) {
  return distance >= 8 ? 2 * distance : 0;
}

StringRef mlir::coda::getScheduleName(Schedule schedule) {
  return schedule == Schedule::Pingpong ? "pingpong" : "cooperative";
}

std::optional<Schedule> mlir::coda::parseScheduleName(StringRef name) {
  for (Schedule schedule : {Schedule::Cooperative, Schedule::Pingpong})
    if (name == getScheduleName(schedule))
      return schedule;
  return std::nullopt;
}

std::string KernelShape::getKey() const {
  return std::to_string(tileM) + "/" + std::to_string(tileN) + "/" +
         std::to_string(stages) + "/" +
         (schedule ? getScheduleName(*schedule).str() : "") + "/" +
         std::to_string(clusterM) + "/" + std::to_string(groupRows) + "/" +
         std::to_string(clusterN);
}

std::optional<KernelShape> KernelShape::parseKey(StringRef key) {
  llvm::SmallVector<StringRef, 7> parts;
  key.trim().split(parts, '/');
  KernelShape shape;
  if (parts.size() != 7 || parts[0].getAsInteger(10, shape.tileM) ||
      parts[1].getAsInteger(10, shape.tileN) ||
      parts[2].getAsInteger(10, shape.stages) ||
      parts[4].getAsInteger(10, shape.clusterM) ||
      parts[5].getAsInteger(10, shape.groupRows) ||
      parts[6].getAsInteger(10, shape.clusterN))
    return std::nullopt;
  if (!parts[3].empty() && !(shape.schedule = parseScheduleName(parts[3])))
    return std::nullopt;
  return shape;
}

std::string KernelShape::describe() const {
  return std::to_string(tileM ? tileM : kDefaultTileM) + "x" +
         std::to_string(tileN ? tileN : kDefaultTileN) + " " +
         getScheduleName(schedule.value_or(kDefaultSchedule)).str() +
         (clusterM > 1 ? " cluster " + std::to_string(clusterM) : "") +
         (clusterN > 1 ? " row cluster " + std::to_string(clusterN) : "") +
         (groupRows ? " group " + std::to_string(groupRows) : "");
}

std::string KernelShape::getScheduleError(StringRef name) {
  return ("schedule must be 'cooperative' or 'pingpong' (or empty to choose "
          "per GEMM), got '" +
          name + "'")
      .str();
}
