//===- Version.h - the compiler version kernels are cached under *- C++ -*-===//

#ifndef CODA_RUNTIME_VERSION_H
#define CODA_RUNTIME_VERSION_H

namespace mlir::coda {

/// The version of the compiler that built this library: the project version
/// and the source revision ("0.1.0-1a2b3c4d5e6f", with "-dirty-<time>" for a
/// modified tree, so that kernels cached by another build are never reused).
extern const char *const kCodaCompilerVersion;

} // namespace mlir::coda

#endif // CODA_RUNTIME_VERSION_H
