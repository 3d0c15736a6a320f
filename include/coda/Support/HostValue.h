//===- HostValue.h - program arguments in host memory -----------*- C++ -*-===//
//
// The host-side values of a program's arguments, which the CPU reference runs
// on and the tools copy to and from the GPU, and the host element type of a
// program's tensor element type.
//
//===----------------------------------------------------------------------===//

#ifndef CODA_SUPPORT_HOSTVALUE_H
#define CODA_SUPPORT_HOSTVALUE_H

#include "coda/Support/Npy.h"

#include "mlir/IR/Types.h"

#include <cstdint>
#include <optional>

namespace mlir::coda {

/// The value bound to one program argument: `array` for tensors (in the
/// argument's element type), `f32` or `i64` for scalars of that type.
struct ArgumentValue {
  HostArray array;
  float f32 = 0.0f;
  int64_t i64 = 0;
};

/// The host element type of a tensor element type, if coda supports it.
std::optional<ElementType> getHostElementType(Type type);

} // namespace mlir::coda

#endif // CODA_SUPPORT_HOSTVALUE_H
