//===- CudaDriver.h - the CUDA Driver API, loaded at run time ---*- C++ -*-===//
//
// coda's runtime calls the CUDA Driver API through entry points it looks up in
// libcuda.so.1 when it is first needed, so that the tools
// start and run on the CPU on machines without a GPU driver, and report a
// missing driver as an error instead of failing to load.
//
//===----------------------------------------------------------------------===//

#ifndef CODA_LIB_RUNTIME_CUDADRIVER_H
#define CODA_LIB_RUNTIME_CUDADRIVER_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cuda.h>

namespace mlir::coda::runtime {

/// The driver entry points coda uses.
#define CODA_CUDA_DRIVER_FUNCTIONS(X)                                          \
  X(cuInit)                                                                    \
  X(cuDeviceGet)                                                               \
  X(cuDeviceGetCount)                                                          \
  X(cuDeviceGetAttribute)                                                      \
  X(cuDeviceGetName)                                                           \
  X(cuDevicePrimaryCtxRetain)                                                  \
  X(cuDevicePrimaryCtxRelease)                                                 \
  X(cuCtxGetCurrent)                                                           \
  X(cuCtxSetCurrent)                                                           \
  X(cuCtxGetDevice)                                                            \
  X(cuCtxSynchronize)                                                          \
  X(cuModuleLoadDataEx)                                                        \
  X(cuModuleUnload)                                                            \
  X(cuModuleGetFunction)                                                       \
  X(cuFuncSetAttribute)                                                        \
  X(cuLaunchKernelEx)                                                          \
  X(cuOccupancyMaxActiveClusters)                                              \
  X(cuMemAlloc)                                                                \
  X(cuMemFree)                                                                 \
  X(cuMemcpyHtoD)                                                              \
  X(cuMemcpyDtoH)                                                              \
  X(cuMemsetD8)                                                                \
  X(cuMemsetD32Async)                                                          \
  X(cuMemAllocAsync)                                                           \
  X(cuMemFreeAsync)                                                            \
  X(cuMemcpy2DAsync)                                                           \
  X(cuStreamSynchronize)                                                       \
  X(cuEventCreate)                                                             \
  X(cuEventRecord)                                                             \
  X(cuEventSynchronize)                                                        \
  X(cuEventElapsedTime)                                                        \
  X(cuEventDestroy)                                                            \
  X(cuGetErrorName)                                                            \
  X(cuGetErrorString)                                                          \
  X(cuTensorMapEncodeTiled)

/// The loaded driver: one function pointer per entry point, named like it.
struct CudaDriver {
#define CODA_DECLARE_ENTRY(name) decltype(&::name) name = nullptr;
  CODA_CUDA_DRIVER_FUNCTIONS(CODA_DECLARE_ENTRY)
#undef CODA_DECLARE_ENTRY

  /// The driver, loaded and initialized (cuInit) on first use; an error when
  /// libcuda.so.1 is missing, too old, or finds no device.
  static llvm::Expected<const CudaDriver &> get();

  /// Success, or an error that says which call failed doing what, with the
  /// driver's name and description of `result`.
  llvm::Error check(CUresult result, llvm::StringRef call,
                    const llvm::Twine &context) const;
};

} // namespace mlir::coda::runtime

#endif // CODA_LIB_RUNTIME_CUDADRIVER_H
