//===- Float.cpp - conversions between f32 and 16-bit floats --------------===//

#include "coda/Support/Float.h"

#include <cstring>

using namespace mlir::coda;

static uint32_t bitsOf(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return bits;
}

static float floatOf(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

uint16_t mlir::coda::floatToBF16(float value) {
  uint32_t bits = bitsOf(value);
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) // NaN: keep the sign, make it quiet
    return static_cast<uint16_t>((bits >> 16) | 0x0040u);
  uint32_t roundingBias = 0x7FFFu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + roundingBias) >> 16);
}

float mlir::coda::bf16ToFloat(uint16_t bits) {
  return floatOf(static_cast<uint32_t>(bits) << 16);
}

uint16_t mlir::coda::floatToF16(float value) {
  uint32_t bits = bitsOf(value);
  uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  uint32_t magnitude = bits & 0x7FFFFFFFu;
  if (magnitude > 0x7F800000u) // NaN
    return sign | 0x7E00u;
  if (magnitude >= 0x477FF000u) // rounds to >= 65520: infinity
    return sign | 0x7C00u;
  if (magnitude >= 0x38800000u) { // normal in f16 (>= 2^-14)
    // Rebias the exponent (127 -> 15) and round 13 dropped mantissa bits.
    uint32_t rebased = magnitude - 0x38000000u;
    uint32_t rounded = rebased + 0x0FFFu + ((rebased >> 13) & 1u);
    return sign | static_cast<uint16_t>(rounded >> 13);
  }
  if (magnitude < 0x33000000u) // below half the smallest subnormal: zero
    return sign;
  // Subnormal in f16. The f32 value is mantissa * 2^(exponent - 150) and the
  // f16 unit is 2^-24, so the f16 bits are mantissa >> (126 - exponent),
  // rounded to nearest even.
  uint32_t exponent = magnitude >> 23;
  uint32_t mantissa = (magnitude & 0x7FFFFFu) | 0x800000u;
  uint32_t shift = 126u - exponent;
  uint32_t truncated = mantissa >> shift;
  uint32_t remainder = mantissa & ((1u << shift) - 1u);
  uint32_t halfway = 1u << (shift - 1u);
  if (remainder > halfway || (remainder == halfway && (truncated & 1u)))
    ++truncated;
  return sign | static_cast<uint16_t>(truncated);
}

float mlir::coda::f16ToFloat(uint16_t bits) {
  uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  uint32_t exponent = (bits >> 10) & 0x1Fu;
  uint32_t mantissa = bits & 0x3FFu;
  if (exponent == 0x1Fu) // infinity or NaN
    return floatOf(sign | 0x7F800000u | (mantissa << 13));
  if (exponent != 0)
    return floatOf(sign | ((exponent + 112u) << 23) | (mantissa << 13));
  // Zero or subnormal: mantissa * 2^-24.
  float magnitude = static_cast<float>(mantissa) * 5.9604644775390625e-8f;
  return sign ? -magnitude : magnitude;
}
