//===- ReferenceCApi.cpp - the C API of coda's CPU reference --------------===//

#include "coda/Dialect/Coda/Transforms/Backward.h"
#include "coda/Frontend/EpilogueImport.h"
#include "coda/Registration/Registration.h"
#include "coda/Runner/CpuRunner.h"
#include "coda/Runner/HostFunction.h"
#include "coda/Runner/coda_reference.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/SourceMgr.h"

#include <cstring>
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

static llvm::json::Object describeObject(const ProgramSignature &signature,
                                         bool widened) {
  llvm::json::Array arguments, outputs;
  for (const ProgramArgument &arg : signature.arguments)
    arguments.push_back(
        llvm::json::Object{{"name", arg.name},
                           {"role", stringifyArgumentRole(arg.role)},
                           {"type", typeName(arg.type, widened)},
                           {"dims", arg.dims},
                           {"period", arg.period},
                           {"tensor", isa<RankedTensorType>(arg.type)}});
  for (const ProgramOutput &output : signature.outputs)
    outputs.push_back(
        llvm::json::Object{{"name", output.name},
                           {"type", typeName(output.type, widened)},
                           {"dims", output.dims},
                           {"source", stringifyOutputSource(output.source)},
                           {"source_argument", output.sourceArgument}});
  return llvm::json::Object{{"arguments", std::move(arguments)},
                            {"outputs", std::move(outputs)},
                            {"transpose_a", signature.transposeA},
                            {"transpose_b", signature.transposeB},
                            {"accumulator_half_n", signature.halfNAccumulator}};
}

/// `value` as JSON text.
static std::string toJson(llvm::json::Object value) {
  std::string text;
  llvm::raw_string_ostream(text) << llvm::json::Value(std::move(value));
  return text;
}

namespace {

std::unique_ptr<MLIRContext> makeContext() {
  DialectRegistry registry;
  registerDialects(registry);
  auto context = std::make_unique<MLIRContext>(registry);
  context->printOpOnDiagnostic(false);
  context->loadAllAvailableDialects();
  return context;
}

/// The diagnostics of `context` while it lives, as text (with the source
/// line of each): what a failed call reports.
struct CapturedDiagnostics {
  CapturedDiagnostics(MLIRContext &context, StringRef source, StringRef name)
      : os(text), handler(sourceMgr, &context, os) {
    sourceMgr.AddNewSourceBuffer(
        llvm::MemoryBuffer::getMemBufferCopy(source, name), llvm::SMLoc());
    sourceMgr.setDiagHandler(
        [](const llvm::SMDiagnostic &d, void *stream) {
          d.print(nullptr, *static_cast<llvm::raw_ostream *>(stream));
        },
        &os);
  }

  std::string text;
  llvm::raw_string_ostream os;
  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler handler;
};

/// The BufferRef of `tensor`, or an error when its rank is not 0 to 3.
llvm::Expected<BufferRef> toBuffer(const coda_tensor &tensor) {
  if (tensor.rank < 0 || tensor.rank > 3)
    return llvm::createStringError("a tensor has rank " +
                                   std::to_string(tensor.rank) +
                                   "; coda tensors have rank 0 to 3");
  return BufferRef{
      reinterpret_cast<void *>(tensor.data),
      SmallVector<int64_t>(tensor.shape, tensor.shape + tensor.rank)};
}

/// The coda_tensor of a buffer.
coda_tensor toTensor(void *data, ArrayRef<int64_t> shape) {
  coda_tensor tensor = {};
  tensor.data = reinterpret_cast<uint64_t>(data);
  tensor.rank = static_cast<int32_t>(shape.size());
  llvm::copy(shape, tensor.shape);
  return tensor;
}

/// Launches a host function's programs through a caller's function.
class CallbackLauncher : public ProgramLauncher {
public:
  CallbackLauncher(coda_reference_launch_fn launch, void *user)
      : function(launch), user(user) {}

  llvm::Error launch(unsigned index, ArrayRef<ArgumentRef> args,
                     ArrayRef<BufferRef> outputs) override {
    SmallVector<coda_value> values;
    for (const ArgumentRef &arg : args) {
      coda_value value = {};
      value.tensor = toTensor(arg.buffer.data, arg.buffer.shape);
      value.f32 = static_cast<float>(arg.number);
      value.i64 = arg.i64;
      values.push_back(value);
    }
    SmallVector<coda_tensor> tensors;
    for (const BufferRef &output : outputs)
      tensors.push_back(toTensor(output.data, output.shape));
    char message[1024] = "";
    if (function(user, static_cast<int32_t>(index), values.data(),
                 values.size(), tensors.data(), tensors.size(), message,
                 sizeof(message)) != CODA_OK)
      return llvm::createStringError(
          message[0]
              ? std::string(message)
              : "launching program " + std::to_string(index) + " failed");
    return llvm::Error::success();
  }

private:
  coda_reference_launch_fn function;
  void *user;
};

} // namespace

struct coda_reference_host {
  std::unique_ptr<MLIRContext> context;
  std::unique_ptr<HostFunction> function;
  std::unique_ptr<CpuProgramLauncher> reference;
  std::string description;
  std::vector<HostArray> results;
};

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

  auto context = makeContext();
  CapturedDiagnostics captured(*context, StringRef(source, length),
                               o.epilogue ? "epilogue" : "program");
  llvm::SourceMgr &sourceMgr = captured.sourceMgr;
  std::string &diagnostics = captured.text;

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
  std::string description =
      toJson(describeObject(*signature, widen_to_f64 != 0));
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
  SmallVector<ArgumentRef> args;
  for (size_t i = 0; i < num_arguments; ++i) {
    llvm::Expected<BufferRef> tensor = toBuffer(arguments[i].tensor);
    if (!tensor)
      return fail(llvm::toString(tensor.takeError()));
    args.push_back({*tensor, arguments[i].f32, arguments[i].i64});
  }
  SmallVector<BufferRef> results;
  for (size_t i = 0; i < num_outputs; ++i) {
    llvm::Expected<BufferRef> tensor = toBuffer(outputs[i]);
    if (!tensor)
      return fail(llvm::toString(tensor.takeError()));
    results.push_back(*tensor);
  }
  if (llvm::Error error = program->executable->runInto(args, results))
    return fail(llvm::toString(std::move(error)));
  lastError.clear();
  return CODA_OK;
}

coda_status coda_reference_host_load(const char *source, size_t length,
                                     const char *function,
                                     coda_reference_host **host) {
  if (!source || !function || !host)
    return fail("coda_reference_host_load: null argument");
  auto context = makeContext();
  CapturedDiagnostics captured(*context, StringRef(source, length), "module");
  OwningOpRef<ModuleOp> module =
      parseSourceFile<ModuleOp>(captured.sourceMgr, context.get());
  if (!module)
    return fail(captured.text);
  auto created = HostFunction::create(*module, function);
  if (!created)
    return fail(captured.text + llvm::toString(created.takeError()));
  // coda_tensor holds up to three sizes.
  for (auto [what, types] :
       {std::make_pair("argument", (*created)->getArgumentTypes()),
        std::make_pair("result", (*created)->getResultTypes())})
    for (auto [i, type] : llvm::enumerate(types))
      if (type.shape.size() > 3)
        return fail(std::string(what) + " #" + std::to_string(i) + " of '" +
                    function + "' is " + type.spelling +
                    "; the C API and python take tensors of rank 0 to 3 "
                    "(coda-run --entry any rank)");
  auto shapes = [](ArrayRef<HostTensorType> types) {
    llvm::json::Array array;
    for (const HostTensorType &type : types) {
      llvm::json::Array shape;
      for (int64_t size : type.shape)
        shape.push_back(ShapedType::isDynamic(size) ? -1 : size);
      array.push_back(
          llvm::json::Object{{"type", getElementTypeName(type.elementType)},
                             {"shape", std::move(shape)}});
    }
    return array;
  };
  llvm::json::Array programs;
  for (const ProgramSignature &signature : (*created)->getPrograms()) {
    llvm::json::Object entry = describeObject(signature, /*widened=*/false);
    entry["name"] = signature.functionName;
    programs.push_back(std::move(entry));
  }
  std::string programText;
  llvm::raw_string_ostream(programText) << (*created)->getProgramModule();
  const ProgramGraph *graph = (*created)->getGraph();
  std::string description = toJson(llvm::json::Object{
      {"arguments", shapes((*created)->getArgumentTypes())},
      {"results", shapes((*created)->getResultTypes())},
      {"programs", std::move(programs)},
      {"program_source", std::move(programText)},
      {"graph", graph ? llvm::json::Value(graph->describe()) : nullptr},
      {"graph_violation", (*created)->getGraphViolation()}});
  auto reference = std::make_unique<CpuProgramLauncher>(
      (*created)->getProgramModule(), (*created)->getPrograms());
  // The parsed module goes: the host function keeps what it runs.
  *host = new coda_reference_host{std::move(context),
                                  std::move(*created),
                                  std::move(reference),
                                  std::move(description),
                                  {}};
  return CODA_OK;
}

void coda_reference_host_destroy(coda_reference_host *host) { delete host; }

const char *coda_reference_host_describe(const coda_reference_host *host) {
  return host ? host->description.c_str() : "";
}

coda_status coda_reference_host_run(coda_reference_host *host,
                                    const coda_tensor *arguments,
                                    size_t num_arguments,
                                    coda_reference_launch_fn launch,
                                    void *user) {
  if (!host || (num_arguments && !arguments))
    return fail("coda_reference_host_run: null argument");
  host->results.clear();
  ArrayRef<HostTensorType> types = host->function->getArgumentTypes();
  if (num_arguments != types.size())
    return fail("the host function takes " + std::to_string(types.size()) +
                " arguments, got " + std::to_string(num_arguments));
  std::vector<HostArray> args;
  for (size_t i = 0; i < num_arguments; ++i) {
    llvm::Expected<BufferRef> buffer = toBuffer(arguments[i]);
    if (!buffer)
      return fail(llvm::toString(buffer.takeError()));
    HostArray &array = args.emplace_back(types[i].elementType, buffer->shape);
    if (!array.data.empty())
      std::memcpy(array.data.data(), buffer->data, array.data.size());
  }
  CallbackLauncher callback(launch, user);
  ProgramLauncher &launcher =
      launch ? static_cast<ProgramLauncher &>(callback) : *host->reference;
  llvm::Expected<std::vector<HostArray>> results =
      host->function->run(args, launcher);
  if (!results)
    return fail(llvm::toString(results.takeError()));
  host->results = std::move(*results);
  lastError.clear();
  return CODA_OK;
}

coda_status coda_reference_host_result(const coda_reference_host *host,
                                       size_t index, coda_tensor *result) {
  if (!host || !result)
    return fail("coda_reference_host_result: null argument");
  if (index >= host->results.size())
    return fail("the last run has " + std::to_string(host->results.size()) +
                " results, not " + std::to_string(index + 1));
  const HostArray &array = host->results[index];
  *result = toTensor(const_cast<uint8_t *>(array.data.data()), array.shape);
  return CODA_OK;
}

} // extern "C"
