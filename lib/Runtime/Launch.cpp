//===- Launch.cpp - check arguments, pack parameters, launch --------------===//

#include "Launch.h"
#include "RuntimeImpl.h"

#include "coda/Dialect/Coda/Transforms/Backward.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/MathExtras.h"

#include <cstring>
#include <vector>

using namespace mlir;
using namespace mlir::coda;
using namespace mlir::coda::runtime;

CUlaunchConfig runtime::getLaunchConfig(const Kernel &kernel, int64_t grid,
                                        CUstream stream,
                                        CUlaunchAttribute &attribute) {
  const KernelABI &abi = kernel.abi;
  attribute = {};
  attribute.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
  attribute.value.clusterDim.x = static_cast<unsigned>(abi.getClusterSize());
  attribute.value.clusterDim.y = 1;
  attribute.value.clusterDim.z = 1;
  CUlaunchConfig config = {};
  config.gridDimX = static_cast<unsigned>(grid);
  config.gridDimY = config.gridDimZ = 1;
  config.blockDimX = static_cast<unsigned>(abi.blockDims[0]);
  config.blockDimY = static_cast<unsigned>(abi.blockDims[1]);
  config.blockDimZ = static_cast<unsigned>(abi.blockDims[2]);
  config.sharedMemBytes = static_cast<unsigned>(abi.sharedMemoryBytes);
  config.hStream = stream;
  config.attrs = &attribute;
  config.numAttrs = abi.getClusterSize() > 1 ? 1 : 0;
  return config;
}

namespace {
/// The buffers one launch needs besides its arguments, from the driver's
/// stream-ordered allocator on the launch's stream, freed on the stream after
/// the launch: copies of the operands that TMA cannot read where they are,
/// and the partial results of deterministic column reductions and of row
/// statistics.
///
/// An operand TMA cannot read has a base that is not 16-byte aligned, or rows
/// that are not a multiple of 16 bytes long (K not a multiple of 8 in bf16,
/// say). It is copied into a buffer whose rows start 16 bytes apart; the
/// tensor map then describes the copy, and TMA reads it as it reads any
/// operand (its boxes past the last column filled with zeros). Operands TMA
/// can read are not copied.
class LaunchBuffers {
public:
  LaunchBuffers(const CudaDriver &driver, CUstream stream)
      : driver(driver), stream(stream) {}
  LaunchBuffers(const LaunchBuffers &) = delete;
  LaunchBuffers &operator=(const LaunchBuffers &) = delete;
  ~LaunchBuffers() {
    for (CUdeviceptr buffer : buffers)
      (void)driver.cuMemFreeAsync(buffer, stream);
  }

  /// A buffer of `bytes` bytes (uninitialized).
  llvm::Expected<CUdeviceptr> allocate(uint64_t bytes, const Twine &what) {
    CUdeviceptr buffer = 0;
    if (auto e = driver.check(driver.cuMemAllocAsync(&buffer, bytes, stream),
                              "cuMemAllocAsync", what))
      return std::move(e);
    buffers.push_back(buffer);
    return buffer;
  }

  /// The address and row pitch (bytes) that TMA reads `rows` rows of
  /// `rowBytes` bytes at `pointer` from: their own, or a staged copy's.
  llvm::Expected<std::pair<CUdeviceptr, uint64_t>> get(CUdeviceptr pointer,
                                                       uint64_t rowBytes,
                                                       uint64_t rows,
                                                       const Twine &what) {
    if (pointer % 16 == 0 && rowBytes % 16 == 0)
      return std::make_pair(pointer, rowBytes);
    uint64_t pitch = llvm::alignTo(rowBytes, 16);
    llvm::Expected<CUdeviceptr> buffer =
        allocate(pitch * rows, "staging " + what);
    if (!buffer)
      return buffer.takeError();
    CUDA_MEMCPY2D copy = {};
    copy.srcMemoryType = copy.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    copy.srcDevice = pointer;
    copy.srcPitch = rowBytes;
    copy.dstDevice = *buffer;
    copy.dstPitch = pitch;
    copy.WidthInBytes = rowBytes;
    copy.Height = rows;
    if (auto e = driver.check(driver.cuMemcpy2DAsync(&copy, stream),
                              "cuMemcpy2DAsync", "staging " + what))
      return std::move(e);
    return std::make_pair(*buffer, pitch);
  }

private:
  const CudaDriver &driver;
  CUstream stream;
  SmallVector<CUdeviceptr> buffers;
};
} // namespace

std::optional<CUtensorMapDataType> runtime::tensorMapType(Type type) {
  if (type.isBF16())
    return CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  if (type.isF16())
    return CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  if (type.isF32())
    return CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
  return std::nullopt;
}

namespace {
/// The storage behind one kernel parameter.
struct alignas(64) ParamStorage {
  union {
    CUtensorMap tensorMap;
    CUdeviceptr pointer;
    float f32;
    int64_t i64;
    int32_t i32;
  };
};
} // namespace

/// The bytes [first, end) of a tensor of `type` and `shape` at `pointer`;
/// empty for an empty tensor.
static std::pair<uint64_t, uint64_t> getSpan(uint64_t pointer, Type type,
                                             ArrayRef<int64_t> shape) {
  uint64_t bytes = type.getIntOrFloatBitWidth() / 8;
  for (int64_t size : shape)
    bytes *= static_cast<uint64_t>(size);
  return {pointer, pointer + bytes};
}

/// Whether two spans share a byte.
static bool overlap(std::pair<uint64_t, uint64_t> x,
                    std::pair<uint64_t, uint64_t> y) {
  return x.first < x.second && y.first < y.second && x.first < y.second &&
         y.first < x.second;
}

llvm::Error GpuProgram::checkOutputMemory(ArrayRef<DeviceValue> arguments,
                                          ArrayRef<DeviceTensor> outputs) {
  auto spanOf = [&](unsigned i) {
    return getSpan(outputs[i].pointer,
                   signature.outputs[i].type.getElementType(),
                   outputs[i].shape);
  };
  for (unsigned i = 0; i < outputs.size(); ++i) {
    std::pair<uint64_t, uint64_t> span = spanOf(i);
    const std::string &name = signature.outputs[i].name;
    for (unsigned j = 0; j < i; ++j)
      if (overlap(span, spanOf(j)))
        return error("outputs '" + signature.outputs[j].name + "' and '" +
                     name + "' overlap in memory: each output needs its own");
    for (auto [arg, value] : llvm::zip(signature.arguments, arguments)) {
      auto type = dyn_cast<RankedTensorType>(arg.type);
      if (!type)
        continue;
      std::pair<uint64_t, uint64_t> input = getSpan(
          value.tensor.pointer, type.getElementType(), value.tensor.shape);
      bool elementwise =
          arg.role != ArgumentRole::A && arg.role != ArgumentRole::B;
      if (overlap(span, input) && !(elementwise && input == span))
        return error("output '" + name + "' overlaps '" + arg.name +
                     "' in memory: an output may be an epilogue input or C "
                     "of its own bytes (written in place, element for "
                     "element), and must not overlap A, B or any other "
                     "tensor");
    }
  }
  return llvm::Error::success();
}

llvm::Error GpuProgram::launch(ArrayRef<DeviceValue> arguments,
                               ArrayRef<DeviceTensor> outputs, void *stream,
                               uint64_t seedAddress) {
  const std::string &name = signature.functionName;
  ContextScope scope(*runtime.impl->driver, runtime.impl->context);

  if (arguments.size() != signature.arguments.size())
    return error("'" + name + "' takes " + Twine(signature.arguments.size()) +
                 " arguments, got " + Twine(arguments.size()));
  if (outputs.size() != signature.outputs.size())
    return error("'" + name + "' has " + Twine(signature.outputs.size()) +
                 " outputs, got " + Twine(outputs.size()));
  SmallVector<SmallVector<int64_t>> shapes;
  for (const DeviceValue &value : arguments)
    shapes.emplace_back(value.tensor.shape.begin(), value.tensor.shape.end());
  llvm::Expected<ProblemShape> problem = signature.inferProblemShape(shapes);
  if (!problem)
    return problem.takeError();
  for (auto [i, output] : llvm::enumerate(outputs)) {
    SmallVector<int64_t> expected = signature.getOutputShape(i, *problem);
    if (ArrayRef<int64_t>(output.shape) != ArrayRef<int64_t>(expected))
      return error(
          "output '" + signature.outputs[i].name + "' must have " +
          Twine(expected.size()) + " dims of sizes " +
          llvm::join(llvm::map_range(
                         expected, [](int64_t d) { return std::to_string(d); }),
                     ", "));
    if (!output.pointer && problem->m && problem->n && problem->batch)
      return error("output '" + signature.outputs[i].name +
                   "' is a null pointer");
  }
  for (auto [arg, value] : llvm::zip(signature.arguments, arguments))
    if (isa<RankedTensorType>(arg.type) && !value.tensor.pointer &&
        llvm::all_of(value.tensor.shape, [](int64_t d) { return d > 0; }))
      return error("'" + arg.name + "' is a null pointer");
  if (llvm::Error e = checkOutputMemory(arguments, outputs))
    return e;
  if (seedAddress) {
    if (signature.findSeed() < 0)
      return error("'" + name +
                   "' has no dropout seed to read from device memory");
    if (seedAddress % 8 != 0)
      return error("the dropout seed's device address must be 8-byte "
                   "aligned");
  }
  if (problem->m == 0 || problem->n == 0 || problem->batch == 0) {
    // Nothing to compute unless an output spans only the other dimension
    // (reductions over an empty M or N), which the GPU kernels do not fill.
    for (auto [i, output] : llvm::enumerate(outputs))
      if (llvm::all_of(output.shape, [](int64_t d) { return d > 0; }))
        return error(
            "'" + name + "': output '" + signature.outputs[i].name +
            "' is not empty for M = " + Twine(problem->m) +
            ", N = " + Twine(problem->n) +
            (signature.batched ? ", batch " + Twine(problem->batch) : Twine()) +
            ": reductions over an empty dimension are not supported "
            "on the GPU (the CPU reference computes them)");
    return llvm::Error::success();
  }
  if (problem->k == 0)
    return error("'" + name + "': K = 0 is not supported on the GPU");
  *problem = getTiledProblem(*problem);
  if (!isAutotuned()) {
    KernelShape shape = chooseShape(*problem);
    llvm::Expected<bool> split = usesRowSplit(*problem, shape);
    if (!split)
      return split.takeError();
    if (*split)
      return launchRowSplit(*problem, arguments, outputs, stream, seedAddress);
    return launchShape(shape, *problem, arguments, outputs, stream,
                       seedAddress);
  }
  llvm::Expected<KernelShape> tuned =
      tuneShape(*problem, arguments, outputs, stream, seedAddress);
  if (!tuned)
    return tuned.takeError();
  return launchShape(*tuned, *problem, arguments, outputs, stream, seedAddress);
}

llvm::Expected<bool> GpuProgram::usesRowSplit(const ProblemShape &problem,
                                              const KernelShape &shape) {
  if (constraint != TileConstraint::RowCluster)
    return false;
  int64_t tileN = shape.tileN ? shape.tileN : KernelShape::kDefaultTileN;
  bool fits = problem.n <= tileN * std::max<int64_t>(shape.clusterN, 1);
  // Rows one tile holds need no exchange; a pinned kernel shape is kept.
  if (fits &&
      (shape.clusterN <= 1 || options.shape.isPinned() || rowSplitRefused))
    return false;
  llvm::Error refused = loadRowSplit(problem);
  if (!refused)
    return true;
  if (!fits)
    return std::move(refused);
  llvm::consumeError(std::move(refused));
  return false;
}

llvm::Error GpuProgram::loadRowSplit(const ProblemShape &problem) {
  std::lock_guard<std::mutex> lock(loaded->rowSplit);
  if (rowApply)
    return llvm::Error::success();
  const std::string &name = signature.functionName;
  auto refusal = [&] {
    return error("'" + name + "' reduces rows over N = " + Twine(problem.n) +
                 ", wider than a cluster of its GPU kernel's tiles holds, and "
                 "cannot be split (the CPU reference reduces any width): " +
                 rowSplitRefusal);
  };
  auto refuse = [&](llvm::Error why) {
    rowSplitRefusal = llvm::toString(std::move(why));
    rowSplitRefused = true;
    return refusal();
  };
  if (rowSplitRefused)
    return refusal();
  // The tile rule chooses the split's shapes: a pinned cluster would
  // exchange its statistics again.
  GpuCompileOptions split;
  split.fastActivations = options.fastActivations;
  split.deterministic = options.deterministic;
  auto statistics = runtime.loadProgram(source, name, split, sourceName,
                                        BackwardNames::kRowStatistics);
  if (!statistics)
    return refuse(statistics.takeError());
  auto apply = runtime.loadProgram(source, name, split, sourceName,
                                   BackwardNames::kRowApply);
  if (!apply)
    return refuse(apply.takeError());
  rowStatistics = std::move(*statistics);
  rowApply = std::move(*apply);
  return llvm::Error::success();
}

llvm::Error GpuProgram::launchRowSplit(const ProblemShape &problem,
                                       ArrayRef<DeviceValue> arguments,
                                       ArrayRef<DeviceTensor> outputs,
                                       void *stream, uint64_t seedAddress) {
  if (auto e = loadRowSplit(problem))
    return e;
  // The scratch: the accumulator [M, N] in f32 (or a rounded value in its
  // 16-bit type) and each row reduction [M] in f32; a rounded value that
  // is an output of the program as it is goes to that output instead.
  LaunchBuffers buffers(*runtime.impl->driver, static_cast<CUstream>(stream));
  const ProgramSignature &written = rowStatistics->getSignature();
  SmallVector<DeviceTensor> saved;
  for (auto [i, output] : llvm::enumerate(written.outputs)) {
    if (int own = signature.findOutput(output.name); own >= 0) {
      saved.push_back(outputs[own]);
      continue;
    }
    SmallVector<int64_t> shape = written.getOutputShape(i, problem);
    uint64_t bytes = output.type.getElementTypeBitWidth() / 8;
    for (int64_t size : shape)
      bytes *= size;
    llvm::Expected<CUdeviceptr> buffer =
        buffers.allocate(bytes, "the row split's " + output.name);
    if (!buffer)
      return buffer.takeError();
    saved.push_back(
        {*buffer, SmallVector<int64_t, 3>(shape.begin(), shape.end())});
  }
  if (auto e = rowStatistics->launch(arguments, saved, stream, seedAddress))
    return e;
  noteRowSplit();
  // The application's arguments by role and name: A, B, the forward's
  // epilogue inputs, then what the statistics wrote.
  SmallVector<DeviceValue> applied;
  for (const ProgramArgument &arg : rowApply->getSignature().arguments) {
    int index = arg.role == ArgumentRole::Input ? signature.findInput(arg.name)
                                                : signature.findRole(arg.role);
    if (index >= 0) {
      applied.push_back(arguments[index]);
      continue;
    }
    int given = written.findOutput(arg.name);
    if (given < 0)
      return error("the row split of '" + signature.functionName + "' takes '" +
                   arg.name +
                   "', which neither the program nor its statistics give");
    DeviceValue value;
    value.tensor = saved[given];
    applied.push_back(std::move(value));
  }
  // The application's outputs by name: the program's but those the
  // statistics wrote.
  SmallVector<DeviceTensor> appliedOutputs;
  for (const ProgramOutput &output : rowApply->getSignature().outputs)
    appliedOutputs.push_back(outputs[signature.findOutput(output.name)]);
  return rowApply->launch(applied, appliedOutputs, stream, seedAddress);
}

llvm::Error GpuProgram::launchShape(const KernelShape &shape,
                                    const ProblemShape &problem,
                                    ArrayRef<DeviceValue> arguments,
                                    ArrayRef<DeviceTensor> outputs,
                                    void *stream, uint64_t seedAddress) {
  const CudaDriver &driver = *runtime.impl->driver;
  const std::string &name = signature.functionName;
  llvm::Expected<std::shared_ptr<Kernel>> prepared =
      prepareShape(shape, seedAddress != 0);
  if (!prepared)
    return prepared.takeError();
  const Kernel &kernel = **prepared;
  const KernelABI &abi = kernel.abi;
  if (abi.maxN && problem.n > abi.maxN)
    return error("'" + name + "' reduces rows over N = " + Twine(problem.n) +
                 ", but its GPU kernel (" + Twine(abi.tileN) +
                 "-column tiles in " + "clusters of " + Twine(abi.clusterN) +
                 ") holds at most " + Twine(abi.maxN) +
                 " columns per row; the GPU reduces rows of up to " +
                 Twine(256 * KernelShape::kMaxClusterN) +
                 " columns (256-column tiles in clusters of " +
                 Twine(KernelShape::kMaxClusterN) +
                 ", chosen unless the tile is pinned), the CPU reference any");
  for (int64_t size : {problem.m, problem.n, problem.k, problem.batch,
                       abi.getNumTiles(problem.m, problem.n, problem.batch)})
    if (size > INT32_MAX)
      return error("'" + name +
                   "': sizes (and output tile counts) above "
                   "2^31 - 1 are not supported");

  std::vector<ParamStorage> storage(abi.params.size());
  SmallVector<void *> params;
  LaunchBuffers buffers(driver, static_cast<CUstream>(stream));
  // Outputs that the kernel combines into with atomics, and their start value.
  SmallVector<std::pair<const DeviceTensor *, float>> atomicOutputs;
  // Outputs merged after the kernel from partial results, and their scratch.
  SmallVector<std::pair<const KernelParam *, CUdeviceptr>> mergedOutputs;
  // The merge kernel of row statistics (KernelABI's RowPartials), if any.
  StringRef rowMerge;
  for (auto [param, slot] : llvm::zip(abi.params, storage)) {
    params.push_back(&slot);
    switch (param.kind) {
    case KernelParamKind::TensorMap: {
      const ProgramArgument &arg = signature.arguments[param.index];
      const DeviceTensor &tensor = arguments[param.index].tensor;
      auto type = cast<RankedTensorType>(arg.type);
      unsigned elementBytes = type.getElementTypeBitWidth() / 8;
      size_t rank = tensor.shape.size();
      uint64_t rowBytes = tensor.shape[rank - 1] * elementBytes, rows = 1;
      for (int64_t size : ArrayRef(tensor.shape).drop_back())
        rows *= size;
      auto source = buffers.get(tensor.pointer, rowBytes, rows,
                                "'" + arg.name + "' for '" + name + "'");
      if (!source)
        return source.takeError();
      auto [address, pitch] = *source;
      SmallVector<cuuint64_t> dims, strides;
      uint64_t stride = pitch;
      for (size_t d = 0; d < rank; ++d) {
        int64_t size = tensor.shape[rank - 1 - d];
        dims.push_back(size);
        if (d > 0) {
          strides.push_back(stride);
          stride *= size;
        }
      }
      if (param.halves) {
        // B [N, K] as (K, 2, N / 2): pair j's two rows, j and N / 2 + j.
        uint64_t pairs = tensor.shape[0] / 2;
        dims = {dims[0], 2, pairs};
        strides = {pitch * pairs, pitch};
        rank = 3;
      }
      SmallVector<cuuint32_t> box, elementStrides(rank, 1);
      for (int64_t b : param.box)
        box.push_back(static_cast<cuuint32_t>(b));
      if (auto e = driver.check(
              driver.cuTensorMapEncodeTiled(
                  &slot.tensorMap, *tensorMapType(type.getElementType()), rank,
                  reinterpret_cast<void *>(address), dims.data(),
                  strides.data(), box.data(), elementStrides.data(),
                  CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                  CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                  CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
              "cuTensorMapEncodeTiled",
              "describing '" + arg.name + "' for '" + name + "'"))
        return e;
      break;
    }
    case KernelParamKind::AtomicPtr:
      slot.pointer = outputs[param.index].pointer;
      atomicOutputs.emplace_back(&outputs[param.index],
                                 static_cast<float>(param.fill.value_or(0.0)));
      break;
    case KernelParamKind::Partials: {
      uint64_t bytes = uint64_t(abi.getPartialRows(problem.m, problem.batch)) *
                       problem.n * sizeof(float);
      llvm::Expected<CUdeviceptr> scratch =
          buffers.allocate(bytes, "the partial results of '" +
                                      signature.outputs[param.index].name +
                                      "' of '" + name + "'");
      if (!scratch)
        return scratch.takeError();
      slot.pointer = *scratch;
      mergedOutputs.emplace_back(&param, *scratch);
      break;
    }
    case KernelParamKind::RowPartials: {
      uint64_t bytes = uint64_t(abi.getRowPartialCount(problem.m, problem.n,
                                                       problem.batch)) *
                       sizeof(float);
      llvm::Expected<CUdeviceptr> scratch = buffers.allocate(
          bytes, "the row statistics' partial results of '" + name + "'");
      if (!scratch)
        return scratch.takeError();
      slot.pointer = *scratch;
      rowMerge = param.merge;
      break;
    }
    case KernelParamKind::GlobalPtr:
      // An output, a tensor input, or the seed given by its address.
      slot.pointer =
          param.role == KernelParamRole::Output ? outputs[param.index].pointer
          : isa<RankedTensorType>(signature.arguments[param.index].type)
              ? arguments[param.index].tensor.pointer
              : seedAddress;
      break;
    case KernelParamKind::F32:
      slot.f32 = arguments[param.index].f32;
      break;
    case KernelParamKind::I64:
      slot.i64 = arguments[param.index].i64;
      break;
    case KernelParamKind::I32: {
      int64_t size = param.role == KernelParamRole::M   ? problem.m
                     : param.role == KernelParamRole::N ? problem.n
                     : param.role == KernelParamRole::K ? problem.k
                                                        : problem.batch;
      slot.i32 = static_cast<int32_t>(size);
      break;
    }
    }
  }

  for (auto [output, fill] : atomicOutputs) {
    uint32_t bits;
    std::memcpy(&bits, &fill, sizeof(bits));
    size_t count = 1;
    for (int64_t size : output->shape)
      count *= size;
    if (auto e =
            driver.check(driver.cuMemsetD32Async(output->pointer, bits, count,
                                                 static_cast<CUstream>(stream)),
                         "cuMemsetD32Async",
                         "initializing a reduced output of '" + name + "'"))
      return e;
  }

  std::array<int64_t, 3> grid = abi.getGridDims(
      problem.m, problem.n, problem.batch, kernel.activeClusters);
  CUlaunchAttribute attribute;
  CUlaunchConfig config = getLaunchConfig(
      kernel, grid[0], static_cast<CUstream>(stream), attribute);
  if (auto e = driver.check(driver.cuLaunchKernelEx(&config, kernel.function,
                                                    params.data(), nullptr),
                            "cuLaunchKernelEx", "launching '" + name + "'"))
    return e;

  // The row statistics' merge, on the kernel's own parameters.
  if (!rowMerge.empty()) {
    CUlaunchConfig merge = {};
    merge.gridDimX = static_cast<unsigned>(
        llvm::divideCeil(problem.m, KernelABI::kRowMergeThreads));
    merge.gridDimY = static_cast<unsigned>(problem.batch);
    merge.gridDimZ = 1;
    merge.blockDimX = KernelABI::kRowMergeThreads;
    merge.blockDimY = merge.blockDimZ = 1;
    merge.hStream = static_cast<CUstream>(stream);
    if (auto e = driver.check(
            driver.cuLaunchKernelEx(&merge, kernel.merges.lookup(rowMerge),
                                    params.data(), nullptr),
            "cuLaunchKernelEx", "merging the row statistics of '" + name + "'"))
      return e;
  }
  // Each merge kernel combines its output's partial results in a fixed order.
  for (auto [param, scratch] : mergedOutputs) {
    const DeviceTensor &output = outputs[param->index];
    int64_t batches = output.shape.size() > 1 ? output.shape.front() : 1;
    auto rows = static_cast<int32_t>(
        abi.getPartialRows(problem.m, problem.batch) / batches);
    auto n = static_cast<int32_t>(problem.n);
    CUdeviceptr partials = scratch, result = output.pointer;
    void *mergeParams[] = {&partials, &result, &rows, &n};
    CUlaunchConfig merge = {};
    merge.gridDimX = static_cast<unsigned>(
        llvm::divideCeil(problem.n, KernelABI::kMergeColumns));
    merge.gridDimY = static_cast<unsigned>(batches);
    merge.gridDimZ = 1;
    merge.blockDimX = KernelABI::kMergeThreads;
    merge.blockDimY = merge.blockDimZ = 1;
    merge.hStream = static_cast<CUstream>(stream);
    if (auto e = driver.check(
            driver.cuLaunchKernelEx(&merge, kernel.merges.lookup(param->merge),
                                    mergeParams, nullptr),
            "cuLaunchKernelEx",
            "merging '" + signature.outputs[param->index].name + "' of '" +
                name + "'"))
      return e;
  }
  return llvm::Error::success();
}
