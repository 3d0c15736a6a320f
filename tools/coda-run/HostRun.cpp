//===- HostRun.cpp - run a GPU program on host arrays ---------------------===//

#include "HostRun.h"

#include <cstring>

using namespace mlir;
using namespace mlir::coda;

llvm::Expected<std::unique_ptr<GpuRuntime>> mlir::coda::createDeviceRuntime() {
  auto runtime = GpuRuntime::create(0);
  if (!runtime)
    return llvm::createStringError(
        "--device cuda: " + llvm::toString(runtime.takeError()) +
        " (--device cpu runs the CPU reference)");
  return runtime;
}

llvm::Expected<HostRunResult>
mlir::coda::runOnHost(GpuRuntime &runtime, GpuProgram &program,
                      ArrayRef<ArgumentValue> arguments,
                      const ProblemShape &problem, int benchmarkIterations) {
  const ProgramSignature &signature = program.getSignature();
  std::vector<DeviceBuffer> buffers;
  SmallVector<DeviceValue> values;
  for (auto [arg, value] : llvm::zip(signature.arguments, arguments)) {
    DeviceValue device;
    device.f32 = value.f32;
    device.i64 = value.i64;
    if (isa<RankedTensorType>(arg.type)) {
      llvm::Expected<DeviceBuffer> buffer =
          DeviceBuffer::allocate(runtime, value.array.data.size());
      if (!buffer)
        return buffer.takeError();
      if (auto e = buffer->upload(value.array.data.data()))
        return std::move(e);
      device.tensor.pointer = buffer->get();
      device.tensor.shape.assign(value.array.shape.begin(),
                                 value.array.shape.end());
      buffers.push_back(std::move(*buffer));
    }
    values.push_back(device);
  }

  HostRunResult result;
  SmallVector<DeviceTensor> outputs;
  for (auto [i, output] : llvm::enumerate(signature.outputs)) {
    HostArray array(*getHostElementType(output.type.getElementType()),
                    signature.getOutputShape(i, problem));
    llvm::Expected<DeviceBuffer> buffer =
        DeviceBuffer::allocate(runtime, array.data.size());
    if (!buffer)
      return buffer.takeError();
    if (auto e = buffer->fill(0xFF))
      return std::move(e);
    outputs.push_back(
        {buffer->get(),
         SmallVector<int64_t, 3>(array.shape.begin(), array.shape.end())});
    result.outputs.push_back(std::move(array));
    buffers.push_back(std::move(*buffer));
  }

  if (auto e = program.launch(values, outputs, /*stream=*/nullptr))
    return std::move(e);
  if (auto e = runtime.synchronize())
    return std::move(e);
  size_t firstOutput = buffers.size() - outputs.size();
  for (auto [i, array] : llvm::enumerate(result.outputs))
    if (auto e = buffers[firstOutput + i].download(array.data.data()))
      return std::move(e);

  if (benchmarkIterations > 0) {
    llvm::Expected<double> ms =
        program.benchmark(values, outputs, /*warmup=*/5, benchmarkIterations);
    if (!ms)
      return ms.takeError();
    result.medianMs = *ms;
  }
  return std::move(result);
}

llvm::Expected<std::vector<HostArray>>
mlir::coda::runGraphOnDevice(GpuRuntime &runtime, const HostFunction &host,
                             ArrayRef<HostArray> args,
                             GpuCompileOptions options, StringRef sourceName) {
  if (llvm::Error error = host.checkArguments(args))
    return std::move(error);
  std::string source;
  llvm::raw_string_ostream os(source);
  host.getProgramModule()->print(os, OpPrintingFlags().enableDebugInfo());
  auto graph = runtime.loadProgramGraph(source, host.getGraph()->functionName,
                                        options, sourceName);
  if (!graph)
    return graph.takeError();
  std::vector<DeviceBuffer> buffers;
  auto allocate = [&](size_t bytes) -> llvm::Expected<uint64_t> {
    llvm::Expected<DeviceBuffer> buffer =
        DeviceBuffer::allocate(runtime, bytes);
    if (!buffer)
      return buffer.takeError();
    if (auto e = buffer->fill(0xFF))
      return std::move(e);
    buffers.push_back(std::move(*buffer));
    return buffers.back().get();
  };
  SmallVector<DeviceValue> values;
  for (const HostArray &arg : args) {
    llvm::Expected<uint64_t> pointer = allocate(arg.data.size());
    if (!pointer)
      return pointer.takeError();
    if (auto e = buffers.back().upload(arg.data.data()))
      return std::move(e);
    DeviceValue &value = values.emplace_back();
    value.tensor.pointer = *pointer;
    value.tensor.shape.assign(arg.shape.begin(), arg.shape.end());
  }
  llvm::Expected<GraphPlan> plan = (*graph)->plan(values);
  if (!plan)
    return plan.takeError();
  std::vector<HostArray> results;
  SmallVector<DeviceTensor> tensors;
  size_t firstResult = buffers.size();
  for (auto [type, shape] :
       llvm::zip(host.getResultTypes(), plan->resultShapes)) {
    HostArray &array = results.emplace_back(type.elementType, shape);
    llvm::Expected<uint64_t> pointer = allocate(array.data.size());
    if (!pointer)
      return pointer.takeError();
    tensors.push_back(
        {*pointer, SmallVector<int64_t, 3>(shape.begin(), shape.end())});
  }
  llvm::Expected<uint64_t> workspace = allocate(plan->workspaceBytes);
  if (!workspace)
    return workspace.takeError();
  if (auto e = (*graph)->launch(values, tensors, *workspace,
                                plan->workspaceBytes, /*stream=*/nullptr))
    return std::move(e);
  if (auto e = runtime.synchronize())
    return std::move(e);
  for (auto [i, array] : llvm::enumerate(results))
    if (auto e = buffers[firstResult + i].download(array.data.data()))
      return std::move(e);
  return std::move(results);
}

GpuProgramLauncher::GpuProgramLauncher(GpuRuntime &runtime, ModuleOp module,
                                       ArrayRef<ProgramSignature> programs,
                                       GpuCompileOptions options,
                                       StringRef sourceName)
    : runtime(runtime), module(module), sourceName(sourceName.str()),
      programs(programs.begin(), programs.end()), options(options) {}

llvm::Error GpuProgramLauncher::launch(unsigned index,
                                       ArrayRef<ArgumentRef> args,
                                       ArrayRef<BufferRef> outputs) {
  const ProgramSignature &signature = programs[index];
  std::unique_ptr<GpuProgram> &program = loaded[index];
  if (!program) {
    // The runtime compiles from text, the program alone (its kernels then
    // cached whatever host code calls it); locations keep pointing into the
    // file.
    OwningOpRef<ModuleOp> alone(module.clone());
    isolateProgram(*alone, signature.functionName);
    std::string source;
    llvm::raw_string_ostream os(source);
    alone->print(os, OpPrintingFlags().enableDebugInfo());
    auto created = runtime.loadProgram(source, signature.functionName, options,
                                       sourceName);
    if (!created)
      return created.takeError();
    program = std::move(*created);
  }
  SmallVector<ArgumentValue> values;
  SmallVector<SmallVector<int64_t>> shapes;
  for (auto [arg, ref] : llvm::zip(signature.arguments, args)) {
    ArgumentValue value;
    value.f32 = static_cast<float>(ref.number);
    value.i64 = ref.i64;
    shapes.push_back(ref.buffer.shape);
    if (auto tensor = dyn_cast<RankedTensorType>(arg.type)) {
      value.array = HostArray(*getHostElementType(tensor.getElementType()),
                              ref.buffer.shape);
      std::memcpy(value.array.data.data(), ref.buffer.data,
                  value.array.data.size());
    }
    values.push_back(std::move(value));
  }
  llvm::Expected<ProblemShape> problem = signature.inferProblemShape(shapes);
  if (!problem)
    return problem.takeError();
  llvm::Expected<HostRunResult> run =
      runOnHost(runtime, *program, values, *problem);
  if (!run)
    return run.takeError();
  for (auto [array, output] : llvm::zip(run->outputs, outputs))
    std::memcpy(output.data, array.data.data(), array.data.size());
  return llvm::Error::success();
}
