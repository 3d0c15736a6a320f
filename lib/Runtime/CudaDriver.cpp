//===- CudaDriver.cpp - the CUDA Driver API, loaded at run time -----------===//

#include "CudaDriver.h"

#include "llvm/ADT/Twine.h"

#include <dlfcn.h>
#include <mutex>

using namespace mlir::coda::runtime;

static llvm::Error driverError(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

/// Loads libcuda.so.1 and every entry point coda uses.
static llvm::Error load(CudaDriver &driver) {
  void *library = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
  if (!library)
    return driverError(
        llvm::Twine("cannot load the CUDA driver (libcuda.so.1): ") +
        dlerror() +
        "; running programs on the GPU needs an NVIDIA GPU and "
        "its driver (the CPU reference runs without them)");
  using DriverGetVersion = CUresult (*)(int *);
  auto getVersion =
      reinterpret_cast<DriverGetVersion>(dlsym(library, "cuDriverGetVersion"));
  int version = 0;
  if (!getVersion || getVersion(&version) != CUDA_SUCCESS || version < 12000)
    return driverError("the CUDA driver is too old: coda needs a driver for "
                       "CUDA 12.0 or newer (found " +
                       llvm::Twine(version / 1000) + "." +
                       llvm::Twine(version % 1000 / 10) + ")");
    // Look up each entry point under the name cuda.h binds it to (cuMemAlloc is
    // cuMemAlloc_v2), so that its signature is the one this code calls.
#define CODA_SYMBOL_NAME(name) #name
#define CODA_BOUND_NAME(name) CODA_SYMBOL_NAME(name)
#define CODA_LOAD_ENTRY(name)                                                  \
  {                                                                            \
    void *pointer = dlsym(library, CODA_BOUND_NAME(name));                     \
    if (!pointer)                                                              \
      return driverError(                                                      \
          "the CUDA driver has no entry point " CODA_BOUND_NAME(               \
              name) "; it may be too old");                                    \
    driver.name = reinterpret_cast<decltype(driver.name)>(pointer);            \
  }
  CODA_CUDA_DRIVER_FUNCTIONS(CODA_LOAD_ENTRY)
#undef CODA_LOAD_ENTRY
#undef CODA_BOUND_NAME
#undef CODA_SYMBOL_NAME
  return driver.check(driver.cuInit(0), "cuInit", "initializing the driver");
}

llvm::Expected<const CudaDriver &> CudaDriver::get() {
  static CudaDriver driver;
  static std::string failure;
  static std::once_flag once;
  std::call_once(once, [] {
    if (llvm::Error error = load(driver))
      failure = llvm::toString(std::move(error));
  });
  if (!failure.empty())
    return driverError(failure);
  return driver;
}

llvm::Error CudaDriver::check(CUresult result, llvm::StringRef call,
                              const llvm::Twine &context) const {
  if (result == CUDA_SUCCESS)
    return llvm::Error::success();
  const char *name = nullptr, *description = nullptr;
  if (cuGetErrorName)
    cuGetErrorName(result, &name);
  if (cuGetErrorString)
    cuGetErrorString(result, &description);
  std::string what =
      name ? std::string(name) : "CUDA error " + std::to_string(result);
  if (description)
    what += std::string(" (") + description + ")";
  return driverError(context + ": " + call + " failed with " + what);
}
