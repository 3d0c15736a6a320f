//===- CApi.cpp - the C API of coda's GPU runtime -------------------------===//

#include "coda/Runtime/Runtime.h"
#include "coda/Runtime/coda_runtime.h"
#include "coda/Support/HostValue.h"

#include "mlir/IR/TypeUtilities.h"
#include "llvm/Support/JSON.h"

#include <cstddef>
#include <string>

using namespace mlir;
using namespace mlir::coda;

// A program shares its runtime, whose kernels it uses: the runtime goes once
// it and all of its programs are destroyed, in any order.
struct coda_runtime {
  std::shared_ptr<GpuRuntime> runtime;
};

struct coda_program {
  std::shared_ptr<GpuRuntime> runtime;
  // Declared after the runtime, so destroyed before it.
  std::unique_ptr<GpuProgram> program;
};

struct coda_graph {
  std::shared_ptr<GpuRuntime> runtime;
  std::unique_ptr<GpuProgramGraph> graph;
  std::string description;
};

static thread_local std::string lastError;

/// Records `error` for coda_last_error and returns the status it means.
static coda_status status(llvm::Error error) {
  if (!error) {
    lastError.clear();
    return CODA_OK;
  }
  lastError = llvm::toString(std::move(error));
  return CODA_ERROR;
}

static coda_status fail(const std::string &message) {
  lastError = message;
  return CODA_ERROR;
}

/// The tensor `tensor` describes, or an error naming `what` when its rank is
/// not 0 to 3.
static llvm::Expected<DeviceTensor> toTensor(const coda_tensor &tensor,
                                             const std::string &what) {
  if (tensor.rank < 0 || tensor.rank > 3)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "'" + what + "' has rank " +
                                       std::to_string(tensor.rank) +
                                       "; coda tensors have rank 0 to 3");
  DeviceTensor result;
  result.pointer = tensor.data;
  result.shape.assign(tensor.shape, tensor.shape + tensor.rank);
  return result;
}

/// Argument `index` of `program`, or null when either is out of range.
static const ProgramArgument *getArgument(const coda_program *program,
                                          int32_t index) {
  if (!program || index < 0 ||
      size_t(index) >= program->program->getSignature().arguments.size())
    return nullptr;
  return &program->program->getSignature().arguments[index];
}

/// Output `index` of `program`, or null when either is out of range.
static const ProgramOutput *getOutput(const coda_program *program,
                                      int32_t index) {
  if (!program || index < 0 ||
      size_t(index) >= program->program->getSignature().outputs.size())
    return nullptr;
  return &program->program->getSignature().outputs[index];
}

/// The compile options `o` asks for; an error when its schedule names none.
static llvm::Expected<GpuCompileOptions>
getCompileOptions(const coda_compile_options &o) {
  GpuCompileOptions compile;
  KernelShape &shape = compile.shape;
  shape.tileM = o.tile_m;
  shape.tileN = o.tile_n;
  shape.stages = o.stages;
  if (o.schedule && *o.schedule &&
      !(shape.schedule = parseScheduleName(o.schedule)))
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   KernelShape::getScheduleError(o.schedule));
  shape.clusterM = o.cluster_m;
  shape.groupRows = o.group_rows;
  compile.autotune = o.autotune != 0;
  compile.fastActivations = o.fast_activations != 0;
  compile.deterministic = o.deterministic != 0;
  return compile;
}

/// Every field of coda_compile_options, in order.
// clang-format off
#define CODA_COMPILE_OPTIONS_FIELDS(X)                                         \
  X(tile_n) X(stages) X(function) X(epilogue) X(dtype) X(layout_a)             \
  X(layout_b) X(with_c) X(with_alpha) X(tile_m) X(schedule) X(autotune)        \
  X(cluster_m) X(group_rows) X(fast_activations) X(derive) X(deterministic)
// clang-format on

// A field added after the last one listed must be listed too (the struct
// ends with it and its padding).
constexpr size_t kOptionsEnd = offsetof(coda_compile_options, deterministic) +
                               sizeof(coda_compile_options::deterministic);
constexpr size_t kOptionsAlign = alignof(coda_compile_options);
static_assert((kOptionsEnd + kOptionsAlign - 1) / kOptionsAlign *
                      kOptionsAlign ==
                  sizeof(coda_compile_options),
              "CODA_COMPILE_OPTIONS_FIELDS must list every field");

extern "C" {

const char *coda_compile_options_layout(void) {
  static const std::string layout = [] {
    std::string text = "size " + std::to_string(sizeof(coda_compile_options));
#define CODA_DESCRIBE_FIELD(name)                                              \
  text += ", " #name " " +                                                     \
          std::to_string(offsetof(coda_compile_options, name)) + " " +         \
          std::to_string(sizeof(coda_compile_options::name));
    CODA_COMPILE_OPTIONS_FIELDS(CODA_DESCRIBE_FIELD)
#undef CODA_DESCRIBE_FIELD
    return text;
  }();
  return layout.c_str();
}

const char *coda_last_error(void) { return lastError.c_str(); }

coda_status coda_runtime_create(int device, coda_runtime **runtime) {
  if (!runtime)
    return fail("coda_runtime_create: runtime is null");
  auto created = GpuRuntime::create(device);
  if (!created)
    return status(created.takeError());
  *runtime = new coda_runtime{std::move(*created)};
  return CODA_OK;
}

void coda_runtime_destroy(coda_runtime *runtime) { delete runtime; }

coda_status coda_program_load(coda_runtime *runtime, const char *source,
                              size_t length,
                              const coda_compile_options *options,
                              coda_program **program) {
  if (!runtime || !source || !program)
    return fail("coda_program_load: null argument");
  coda_compile_options defaults = {};
  const coda_compile_options &o = options ? *options : defaults;
  llvm::Expected<GpuCompileOptions> compile = getCompileOptions(o);
  if (!compile)
    return status(compile.takeError());
  auto orDefault = [](const char *value, const char *fallback) {
    return StringRef(value ? value : fallback);
  };
  auto loaded = o.epilogue
                    ? runtime->runtime->loadEpilogue(
                          StringRef(source, length), orDefault(o.dtype, "bf16"),
                          orDefault(o.layout_a, "mk"),
                          orDefault(o.layout_b, "nk"), o.with_c, o.with_alpha,
                          *compile, "epilogue", orDefault(o.derive, ""))
                    : runtime->runtime->loadProgram(
                          StringRef(source, length), orDefault(o.function, ""),
                          *compile, "program", orDefault(o.derive, ""));
  if (!loaded)
    return status(loaded.takeError());
  *program = new coda_program{runtime->runtime, std::move(*loaded)};
  return CODA_OK;
}

void coda_program_destroy(coda_program *program) { delete program; }

int32_t coda_program_num_arguments(const coda_program *program) {
  return program ? program->program->getSignature().arguments.size() : 0;
}

const char *coda_program_argument_name(const coda_program *program,
                                       int32_t index) {
  const ProgramArgument *argument = getArgument(program, index);
  return argument ? argument->name.c_str() : nullptr;
}

coda_argument_kind coda_program_argument_kind(const coda_program *program,
                                              int32_t index) {
  const ProgramArgument *argument = getArgument(program, index);
  if (!argument || isa<RankedTensorType>(argument->type))
    return CODA_ARGUMENT_TENSOR;
  return argument->type.isF32() ? CODA_ARGUMENT_F32 : CODA_ARGUMENT_I64;
}

const char *coda_program_argument_role(const coda_program *program,
                                       int32_t index) {
  const ProgramArgument *argument = getArgument(program, index);
  return argument ? stringifyArgumentRole(argument->role).data() : nullptr;
}

/// "bf16", "f16", "f32" or "i64": the element type of a tensor type, or the
/// type itself (scalars are f32 or i64).
static const char *typeName(Type type) {
  std::optional<ElementType> element =
      getHostElementType(getElementTypeOrSelf(type));
  // getElementTypeName spells each type with a string literal.
  return element ? getElementTypeName(*element).data() : "i64";
}

const char *coda_program_argument_type(const coda_program *program,
                                       int32_t index) {
  const ProgramArgument *argument = getArgument(program, index);
  return argument ? typeName(argument->type) : nullptr;
}

int32_t coda_program_argument_dims(const coda_program *program, int32_t index) {
  const ProgramArgument *argument = getArgument(program, index);
  return argument ? argument->dims : 0;
}

int32_t coda_program_argument_period(const coda_program *program,
                                     int32_t index) {
  const ProgramArgument *argument = getArgument(program, index);
  return argument ? static_cast<int32_t>(argument->period) : 0;
}

int32_t coda_program_num_outputs(const coda_program *program) {
  return program ? program->program->getSignature().outputs.size() : 0;
}

const char *coda_program_output_name(const coda_program *program,
                                     int32_t index) {
  const ProgramOutput *output = getOutput(program, index);
  return output ? output->name.c_str() : nullptr;
}

const char *coda_program_output_type(const coda_program *program,
                                     int32_t index) {
  const ProgramOutput *output = getOutput(program, index);
  return output ? typeName(output->type) : nullptr;
}

int32_t coda_program_output_dims(const coda_program *program, int32_t index) {
  const ProgramOutput *output = getOutput(program, index);
  return output ? output->dims : 0;
}

coda_output_source coda_program_output_source(const coda_program *program,
                                              int32_t index,
                                              int32_t *argument) {
  const ProgramOutput *output = getOutput(program, index);
  if (argument)
    *argument = output ? output->sourceArgument : -1;
  if (!output)
    return CODA_OUTPUT_COMPUTED;
  switch (output->source) {
  case OutputSource::Computed:
    return CODA_OUTPUT_COMPUTED;
  case OutputSource::Argument:
    return CODA_OUTPUT_ARGUMENT;
  case OutputSource::ColumnSum:
    return CODA_OUTPUT_COLUMN_SUM;
  }
  return CODA_OUTPUT_COMPUTED;
}

void coda_program_layouts(const coda_program *program, int32_t *transpose_a,
                          int32_t *transpose_b) {
  const ProgramSignature *signature =
      program ? &program->program->getSignature() : nullptr;
  if (transpose_a)
    *transpose_a = signature && signature->transposeA;
  if (transpose_b)
    *transpose_b = signature && signature->transposeB;
}

int32_t coda_program_accumulator_half_n(const coda_program *program) {
  return program && program->program->getSignature().halfNAccumulator;
}

void coda_program_kernel_shape(const coda_program *program, int64_t *tile_m,
                               int64_t *tile_n, const char **schedule,
                               int64_t *cluster_m, int64_t *group_rows) {
  KernelShape shape;
  if (program)
    shape = program->program->getCompileStats().shape;
  if (tile_m)
    *tile_m = shape.tileM;
  if (tile_n)
    *tile_n = shape.tileN;
  if (cluster_m)
    *cluster_m = shape.clusterM;
  if (group_rows)
    *group_rows = shape.groupRows;
  // A literal: the stats change with the next launch.
  if (schedule)
    *schedule = shape.schedule ? getScheduleName(*shape.schedule).data() : "";
}

coda_status coda_program_prepare(coda_program *program) {
  if (!program)
    return fail("coda_program_prepare: program is null");
  return status(program->program->prepare());
}

coda_status coda_program_prepare_problem(coda_program *program, int64_t batch,
                                         int64_t m, int64_t n, int64_t k,
                                         int32_t seed_in_memory) {
  if (!program)
    return fail("coda_program_prepare_problem: program is null");
  if (batch < 1 || m < 1 || n < 1 || k < 1)
    return fail("coda_program_prepare_problem: batch, m, n and k must be at "
                "least 1, got " +
                std::to_string(batch) + ", " + std::to_string(m) + ", " +
                std::to_string(n) + " and " + std::to_string(k));
  if (program->program->isAutotuned())
    return fail("coda_program_prepare_problem: an autotuned program compiles "
                "its kernels at the first launch of a problem, which times "
                "them");
  ProblemShape problem{batch, m, n, k};
  return status(program->program->prepare(problem, seed_in_memory != 0));
}

/// coda_program_launch, with the seed read from `seedAddress` when it is not
/// 0.
static coda_status launch(coda_program *program, const coda_value *arguments,
                          size_t num_arguments, const coda_tensor *outputs,
                          size_t num_outputs, uint64_t seedAddress,
                          void *stream) {
  if (!program || (num_arguments && !arguments) || (num_outputs && !outputs))
    return fail("coda_program_launch: null argument");
  // Only tensor arguments' descriptions are read: callers may leave them
  // uninitialized for scalars. launch() checks the counts.
  const ProgramSignature &signature = program->program->getSignature();
  SmallVector<DeviceValue> values;
  for (auto [i, value] : llvm::enumerate(ArrayRef(arguments, num_arguments))) {
    DeviceValue device{{}, value.f32, value.i64};
    if (i < signature.arguments.size() &&
        isa<RankedTensorType>(signature.arguments[i].type)) {
      llvm::Expected<DeviceTensor> tensor =
          toTensor(value.tensor, signature.arguments[i].name);
      if (!tensor)
        return status(tensor.takeError());
      device.tensor = std::move(*tensor);
    }
    values.push_back(std::move(device));
  }
  SmallVector<DeviceTensor> results;
  for (auto [i, tensor] : llvm::enumerate(ArrayRef(outputs, num_outputs))) {
    llvm::Expected<DeviceTensor> result = toTensor(
        tensor, i < signature.outputs.size() ? signature.outputs[i].name
                                             : "output #" + std::to_string(i));
    if (!result)
      return status(result.takeError());
    results.push_back(std::move(*result));
  }
  return status(program->program->launch(values, results, stream, seedAddress));
}

coda_status coda_program_launch(coda_program *program,
                                const coda_value *arguments,
                                size_t num_arguments,
                                const coda_tensor *outputs, size_t num_outputs,
                                void *stream) {
  return launch(program, arguments, num_arguments, outputs, num_outputs,
                /*seedAddress=*/0, stream);
}

coda_status coda_program_launch_device_seed(
    coda_program *program, const coda_value *arguments, size_t num_arguments,
    const coda_tensor *outputs, size_t num_outputs, uint64_t seed_address,
    void *stream) {
  if (!seed_address)
    return fail("coda_program_launch_device_seed: the seed's address is 0");
  return launch(program, arguments, num_arguments, outputs, num_outputs,
                seed_address, stream);
}

/// The JSON of a tensor or scalar type: its element type's name and, for
/// a tensor, its sizes (-1 where dynamic).
static llvm::json::Object describeType(Type type) {
  llvm::json::Array shape;
  if (auto tensor = dyn_cast<RankedTensorType>(type))
    for (int64_t size : tensor.getShape())
      shape.push_back(ShapedType::isDynamic(size) ? -1 : size);
  return llvm::json::Object{{"type", typeName(type)},
                            {"tensor", isa<RankedTensorType>(type)},
                            {"shape", std::move(shape)}};
}

coda_status coda_graph_load(coda_runtime *runtime, const char *source,
                            size_t length, const coda_compile_options *options,
                            coda_graph **graph) {
  if (!runtime || !source || !graph)
    return fail("coda_graph_load: null argument");
  coda_compile_options defaults = {};
  const coda_compile_options &o = options ? *options : defaults;
  if (o.epilogue || (o.derive && *o.derive))
    return fail("coda_graph_load: a program graph is read from coda IR as it "
                "is; `epilogue` and `derive` must be unset");
  llvm::Expected<GpuCompileOptions> compile = getCompileOptions(o);
  if (!compile)
    return status(compile.takeError());
  auto loaded = runtime->runtime->loadProgramGraph(
      StringRef(source, length), o.function ? o.function : "", *compile);
  if (!loaded)
    return status(loaded.takeError());
  const ProgramGraph &described = (*loaded)->getGraph();
  llvm::json::Object object = described.describe();
  llvm::json::Array arguments, results;
  for (Type type : described.argumentTypes)
    arguments.push_back(describeType(type));
  for (Type type : described.resultTypes)
    results.push_back(describeType(type));
  object["arguments"] = std::move(arguments);
  object["result_types"] = std::move(results);
  std::string description;
  llvm::raw_string_ostream(description) << llvm::json::Value(std::move(object));
  *graph = new coda_graph{runtime->runtime, std::move(*loaded),
                          std::move(description)};
  return CODA_OK;
}

void coda_graph_destroy(coda_graph *graph) { delete graph; }

const char *coda_graph_describe(const coda_graph *graph) {
  return graph ? graph->description.c_str() : "";
}

/// The values of a graph's `arguments` (their tensors' descriptions read
/// only where the function takes a tensor), or an error naming the call.
static llvm::Expected<SmallVector<DeviceValue>>
getGraphArguments(const coda_graph *graph, const coda_value *arguments,
                  size_t count, const char *call) {
  if (!graph || (count && !arguments))
    return llvm::createStringError(std::string(call) + ": null argument");
  ArrayRef<Type> types = graph->graph->getGraph().argumentTypes;
  if (count != types.size())
    return llvm::createStringError("'" + graph->graph->getGraph().functionName +
                                   "' takes " + std::to_string(types.size()) +
                                   " arguments, got " + std::to_string(count));
  SmallVector<DeviceValue> values;
  for (auto [i, value] : llvm::enumerate(ArrayRef(arguments, count))) {
    DeviceValue device{{}, value.f32, value.i64};
    if (isa<RankedTensorType>(types[i])) {
      llvm::Expected<DeviceTensor> tensor =
          toTensor(value.tensor, "argument #" + std::to_string(i));
      if (!tensor)
        return tensor.takeError();
      device.tensor = std::move(*tensor);
    }
    values.push_back(std::move(device));
  }
  return values;
}

coda_status coda_graph_plan(const coda_graph *graph,
                            const coda_value *arguments, size_t num_arguments,
                            coda_tensor *results, size_t num_results,
                            uint64_t *workspace_bytes) {
  auto values =
      getGraphArguments(graph, arguments, num_arguments, "coda_graph_plan");
  if (!values)
    return status(values.takeError());
  if ((num_results && !results) || !workspace_bytes)
    return fail("coda_graph_plan: null argument");
  llvm::Expected<GraphPlan> plan = graph->graph->plan(*values);
  if (!plan)
    return status(plan.takeError());
  if (num_results != plan->resultShapes.size())
    return fail("'" + graph->graph->getGraph().functionName + "' returns " +
                std::to_string(plan->resultShapes.size()) + " results, got " +
                std::to_string(num_results) + " to describe");
  for (auto [i, shape] : llvm::enumerate(plan->resultShapes)) {
    results[i].rank = static_cast<int32_t>(shape.size());
    llvm::copy(shape, results[i].shape);
  }
  *workspace_bytes = static_cast<uint64_t>(plan->workspaceBytes);
  return CODA_OK;
}

coda_status coda_graph_prepare(coda_graph *graph, const coda_value *arguments,
                               size_t num_arguments) {
  auto values =
      getGraphArguments(graph, arguments, num_arguments, "coda_graph_prepare");
  if (!values)
    return status(values.takeError());
  return status(graph->graph->prepare(*values));
}

coda_status coda_graph_launch(coda_graph *graph, const coda_value *arguments,
                              size_t num_arguments, const coda_tensor *results,
                              size_t num_results, uint64_t workspace,
                              uint64_t workspace_bytes, void *stream) {
  auto values =
      getGraphArguments(graph, arguments, num_arguments, "coda_graph_launch");
  if (!values)
    return status(values.takeError());
  if (num_results && !results)
    return fail("coda_graph_launch: null argument");
  SmallVector<DeviceTensor> tensors;
  for (auto [i, tensor] : llvm::enumerate(ArrayRef(results, num_results))) {
    llvm::Expected<DeviceTensor> result =
        toTensor(tensor, "result #" + std::to_string(i));
    if (!result)
      return status(result.takeError());
    tensors.push_back(std::move(*result));
  }
  return status(graph->graph->launch(*values, tensors, workspace,
                                     workspace_bytes, stream));
}

} // extern "C"
