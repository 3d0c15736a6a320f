//===- HostValue.cpp - program arguments in host memory -------------------===//

#include "coda/Support/HostValue.h"

using namespace mlir;
using namespace mlir::coda;

std::optional<ElementType> mlir::coda::getHostElementType(Type type) {
  if (type.isF32())
    return ElementType::F32;
  if (type.isF16())
    return ElementType::F16;
  if (type.isBF16())
    return ElementType::BF16;
  return std::nullopt;
}
