//===- coda-dsl-fuzzer.cpp - libFuzzer target for the epilogue DSL --------===//
//
// Feeds arbitrary bytes to the epilogue front-end. Bad input must end in a
// diagnostic, never a crash, a hang or a sanitizer report; input that passes
// the front-end's checks must build a program that verifies, and that prints
// as text that parses back to a program that verifies. The GEMM set-up
// (operand type, layouts, B's column pairs in halves, C, alpha) varies with
// the input's size, so the corpus covers every combination.
//
// Build it with clang (see docs/dsl.md, "Fuzzing"):
//   CC=clang CXX=clang++ cmake -G Ninja -B build-fuzz -DCODA_ENABLE_FUZZERS=ON
//   ninja -C build-fuzz coda-dsl-fuzzer
//   build-fuzz/bin/coda-dsl-fuzzer -dict=tools/coda-dsl-fuzzer/coda.dict \
//       corpus/ examples/ test/Frontend/
//
//===----------------------------------------------------------------------===//

#include "coda/Frontend/EpilogueImport.h"
#include "coda/Frontend/Sema.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdlib>

using namespace mlir;

/// libMLIR.so is built without AddressSanitizer, this target with it: LLVM's
/// allocators, partly inlined here and partly there, would poison memory that
/// the uninstrumented part then uses. Manual poisoning is turned off.
extern "C" const char *__asan_default_options() {
  return "allow_user_poisoning=0";
}

/// Formats every diagnostic, as a tool would, into a stream that discards it.
static void formatDiagnostic(const llvm::SMDiagnostic &diagnostic, void *) {
  llvm::raw_null_ostream os;
  diagnostic.print("coda-dsl-fuzzer", os);
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  llvm::SourceMgr sourceMgr;
  sourceMgr.setDiagHandler(formatDiagnostic);
  sourceMgr.AddNewSourceBuffer(
      llvm::MemoryBuffer::getMemBufferCopy(
          StringRef(reinterpret_cast<const char *>(data), size), "fuzz.coda"),
      llvm::SMLoc());
  std::optional<coda::dsl::EpilogueProgram> program =
      coda::dsl::checkEpilogue(sourceMgr);
  if (!program)
    return 0;

  // A fresh context per input: a long-lived one would keep every attribute
  // and location ever built, and runs would depend on the inputs before.
  MLIRContext context(MLIRContext::Threading::DISABLED);
  Builder builder(&context);
  coda::EpilogueImportOptions options;
  Type operandTypes[] = {builder.getBF16Type(), builder.getF16Type(),
                         builder.getF32Type()};
  options.operandType = operandTypes[size % 3];
  options.transposeA = size & 4;
  options.transposeB = size & 8;
  options.bHalves = options.transposeB && (size & 64);
  options.withC = size & 16;
  options.withAlpha = size & 32;
  OwningOpRef<ModuleOp> module =
      coda::buildEpilogueModule(*program, sourceMgr, &context, options);
  auto fail = [&](StringRef what) {
    llvm::errs() << "the front-end accepted this epilogue but " << what << ":\n"
                 << StringRef(reinterpret_cast<const char *>(data), size)
                 << "\n";
    module->print(llvm::errs());
    std::abort();
  };
  if (failed(verify(*module)))
    fail("built a program that does not verify");

  std::string text;
  llvm::raw_string_ostream os(text);
  module->print(os);
  if (!parseSourceString<ModuleOp>(text, &context))
    fail("the printed program does not parse back");
  return 0;
}
