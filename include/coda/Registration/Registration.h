//===- Registration.h - everything coda's tools register --------*- C++ -*-===//

#ifndef CODA_REGISTRATION_REGISTRATION_H
#define CODA_REGISTRATION_REGISTRATION_H

namespace mlir {
class DialectRegistry;
namespace coda {

/// Adds the coda dialect and every upstream dialect, interface and extension
/// that coda programs and their lowerings use.
void registerDialects(DialectRegistry &registry);

/// Registers coda's passes and pipelines, and the upstream passes that appear
/// in them or are useful next to them.
void registerPasses();

} // namespace coda
} // namespace mlir

#endif // CODA_REGISTRATION_REGISTRATION_H
