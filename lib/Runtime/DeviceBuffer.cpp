//===- DeviceBuffer.cpp - device memory for tools and tests ---------------===//

#include "RuntimeImpl.h"

using namespace mlir;
using namespace mlir::coda;
using namespace mlir::coda::runtime;

llvm::Expected<DeviceBuffer> DeviceBuffer::allocate(GpuRuntime &runtime,
                                                    size_t bytes) {
  const CudaDriver &driver = *runtime.impl->driver;
  ContextScope scope(driver, runtime.impl->context);
  CUdeviceptr pointer = 0;
  if (bytes)
    if (auto e = driver.check(driver.cuMemAlloc(&pointer, bytes), "cuMemAlloc",
                              "allocating " + Twine(bytes) + " bytes"))
      return std::move(e);
  return DeviceBuffer(runtime, pointer, bytes);
}

DeviceBuffer::DeviceBuffer(DeviceBuffer &&other)
    : runtime(other.runtime), pointer(other.pointer), bytes(other.bytes) {
  other.pointer = 0;
}

DeviceBuffer::~DeviceBuffer() {
  if (!pointer)
    return;
  ContextScope scope(*runtime->impl->driver, runtime->impl->context);
  runtime->impl->driver->cuMemFree(pointer);
}

llvm::Error DeviceBuffer::run(llvm::function_ref<int(const CudaDriver &)> call,
                              const char *name, const char *what) const {
  if (!bytes)
    return llvm::Error::success();
  const CudaDriver &driver = *runtime->impl->driver;
  ContextScope scope(driver, runtime->impl->context);
  return driver.check(static_cast<CUresult>(call(driver)), name, what);
}

llvm::Error DeviceBuffer::upload(const void *data) {
  return run(
      [&](const CudaDriver &driver) {
        return driver.cuMemcpyHtoD(pointer, data, bytes);
      },
      "cuMemcpyHtoD", "copying to the GPU");
}

llvm::Error DeviceBuffer::download(void *data) const {
  return run(
      [&](const CudaDriver &driver) {
        return driver.cuMemcpyDtoH(data, pointer, bytes);
      },
      "cuMemcpyDtoH", "copying from the GPU");
}

llvm::Error DeviceBuffer::fill(uint8_t value) {
  return run(
      [&](const CudaDriver &driver) {
        return driver.cuMemsetD8(pointer, value, bytes);
      },
      "cuMemsetD8", "filling GPU memory");
}
