//===- Npy.h - host arrays and the .npy file format -------------*- C++ -*-===//

#ifndef CODA_SUPPORT_NPY_H
#define CODA_SUPPORT_NPY_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>
#include <vector>

namespace mlir::coda {

/// The element types host arrays hold.
enum class ElementType { F32, F16, BF16 };

/// The size in bytes of one element.
unsigned getElementSize(ElementType type);
/// The name users see: "f32", "f16", "bf16".
llvm::StringRef getElementTypeName(ElementType type);

/// A dense row-major array in host memory.
struct HostArray {
  ElementType elementType = ElementType::F32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> data;

  HostArray() = default;
  HostArray(ElementType elementType, llvm::ArrayRef<int64_t> shape);

  int64_t getNumElements() const;
  /// Element `i` widened to f32.
  float getAsFloat(int64_t i) const;
  /// Sets element `i`, rounding to the element type (nearest even).
  void setFromFloat(int64_t i, float value);
  /// This array converted to `type`, rounding to nearest even.
  HostArray convertTo(ElementType type) const;
  /// The shape spelled "[2, 3]".
  std::string getShapeString() const;
};

/// Reads a float32 or float16 C-order .npy file.
llvm::Expected<HostArray> readNpy(llvm::StringRef path);

/// Writes `array` as a C-order .npy file of its element type; bf16 arrays are
/// written as float32 (numpy has no bf16), exactly.
llvm::Error writeNpy(llvm::StringRef path, const HostArray &array);

} // namespace mlir::coda

#endif // CODA_SUPPORT_NPY_H
