//===- ReferenceCApi.cpp - the C API of coda's CPU reference --------------===//

#include "coda/Dialect/Coda/Transforms/Backward.h"
#include "coda/Frontend/EpilogueImport.h"
#include "coda/Registration/Registration.h"
#include "coda/Runner/CpuRunner.h"
#include "coda/Runner/coda_reference.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/SourceMgr.h"

#include <string>

using namespace mlir;
using namespace mlir::coda;

struct coda_reference_program {
  std::unique_ptr<MLIRContext> context;
  std::unique_ptr<CpuExecutable> executable;
  std::string description;
};

static thread_local std::string lastError;

static coda_status fail(std::string message) {
  lastError = std::move(message);
  return CODA_ERROR;
}

/// The name of a program argument's or output's type as the interface spells
/// it.
static std::string typeName(Type type, bool widened) {
  if (auto tensor = dyn_cast<RankedTensorType>(type))
    type = tensor.getElementType();
  if (widened && isa<FloatType>(type))
    return "f64";
  std::string name;
  llvm::raw_string_ostream(name) << type;
  return name;
}

static std::string describe(const ProgramSignature &signature, bool widened) {
  llvm::json::Array arguments, outputs;
  for (const ProgramArgument &arg : signature.arguments)
    arguments.push_back(
        llvm::json::Object{{"name", arg.name},
                           {"role", stringifyArgumentRole(arg.role)},
                           {"type", typeName(arg.type, widened)},
                           {"dims", arg.dims},
                           {"tensor", isa<RankedTensorType>(arg.type)}});
  for (const ProgramOutput &output : signature.outputs)
    outputs.push_back(
        llvm::json::Object{{"name", output.name},
                           {"type", typeName(output.type, widened)},
                           {"dims", output.dims},
                           {"source", stringifyOutputSource(output.source)},
                           {"source_argument", output.sourceArgument}});
  std::string text;
  llvm::raw_string_ostream os(text);
  os << llvm::json::Value(
      llvm::json::Object{{"arguments", std::move(arguments)},
                         {"outputs", std::move(outputs)},
                         {"transpose_a", signature.transposeA},
                         {"transpose_b", signature.transposeB},
                         {"accumulator_half_n", signature.halfNAccumulator}});
  return text;
}

extern "C" {

const char *coda_reference_last_error(void) { return lastError.c_str(); }

coda_status coda_reference_load(const char *source, size_t length,
                                const coda_compile_options *options,
                                int32_t widen_to_f64,
                                coda_reference_program **program) {
  if (!source || !program)
    return fail("coda_reference_load: null argument");
  coda_compile_options defaults = {};
  const coda_compile_options &o = options ? *options : defaults;
  auto orDefault = [](const char *value, const char *fallback) {
    return StringRef(value ? value : fallback);
  };

  DialectRegistry registry;
  registerDialects(registry);
  auto context = std::make_unique<MLIRContext>(registry);
  context->printOpOnDiagnostic(false);
  context->loadAllAvailableDialects();
  std::string diagnostics;
  llvm::raw_string_ostream os(diagnostics);
  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(
      llvm::MemoryBuffer::getMemBufferCopy(StringRef(source, length),
                                           o.epilogue ? "epilogue" : "program"),
      llvm::SMLoc());
  sourceMgr.setDiagHandler(
      [](const llvm::SMDiagnostic &d, void *stream) {
        d.print(nullptr, *static_cast<llvm::raw_ostream *>(stream));
      },
      &os);
  SourceMgrDiagnosticHandler handler(sourceMgr, context.get(), os);

  OwningOpRef<ModuleOp> module;
  if (o.epilogue) {
    EpilogueImportOptions import;
    if (llvm::Error error = setImportOptions(
            context.get(), orDefault(o.dtype, "bf16"),
            orDefault(o.layout_a, "mk"), orDefault(o.layout_b, "nk"), import))
      return fail(llvm::toString(std::move(error)));
    import.withC = o.with_c;
    import.withAlpha = o.with_alpha;
    module = importEpilogue(sourceMgr, context.get(), import);
  } else {
    module = parseSourceFile<ModuleOp>(sourceMgr, context.get());
  }
  if (!module)
    return fail(diagnostics);
  std::string function = orDefault(o.function, "").str();
  if (o.derive) {
    FailureOr<std::string> derived = deriveProgram(*module, function, o.derive);
    if (failed(derived))
      return fail(diagnostics);
    function = *derived;
  }
  FailureOr<ProgramSignature> signature =
      ProgramSignature::get(*module, function);
  if (failed(signature))
    return fail(diagnostics);
  std::string description = describe(*signature, widen_to_f64 != 0);
  auto executable =
      CpuExecutable::create(std::move(module), *signature, widen_to_f64 != 0);
  if (!executable)
    return fail(diagnostics + llvm::toString(executable.takeError()));
  *program = new coda_reference_program{
      std::move(context), std::move(*executable), std::move(description)};
  return CODA_OK;
}

void coda_reference_destroy(coda_reference_program *program) { delete program; }

const char *coda_reference_describe(const coda_reference_program *program) {
  return program ? program->description.c_str() : "";
}

coda_status coda_reference_run(const coda_reference_program *program,
                               const coda_value *arguments,
                               size_t num_arguments, const coda_tensor *outputs,
                               size_t num_outputs) {
  if (!program || (num_arguments && !arguments) || (num_outputs && !outputs))
    return fail("coda_reference_run: null argument");
  auto buffer = [](const coda_tensor &tensor) -> llvm::Expected<BufferRef> {
    if (tensor.rank < 0 || tensor.rank > 3)
      return llvm::createStringError("a tensor has rank " +
                                     std::to_string(tensor.rank) +
                                     "; coda tensors have rank 0 to 3");
    return BufferRef{
        reinterpret_cast<void *>(tensor.data),
        SmallVector<int64_t>(tensor.shape, tensor.shape + tensor.rank)};
  };
  SmallVector<ArgumentRef> args;
  for (size_t i = 0; i < num_arguments; ++i) {
    llvm::Expected<BufferRef> tensor = buffer(arguments[i].tensor);
    if (!tensor)
      return fail(llvm::toString(tensor.takeError()));
    args.push_back({*tensor, arguments[i].f32, arguments[i].i64});
  }
  SmallVector<BufferRef> results;
  for (size_t i = 0; i < num_outputs; ++i) {
    llvm::Expected<BufferRef> tensor = buffer(outputs[i]);
    if (!tensor)
      return fail(llvm::toString(tensor.takeError()));
    results.push_back(*tensor);
  }
  if (llvm::Error error = program->executable->runInto(args, results))
    return fail(llvm::toString(std::move(error)));
  lastError.clear();
  return CODA_OK;
}

} // extern "C"
