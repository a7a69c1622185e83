// The process-wide CUDA driver table: libcuda.so.1 loaded at run time (dlopen), its
// entry points resolved through cuGetProcAddress at the ABI of cuda_api.h. A process
// without the NVIDIA driver runs as before; asking for GPU memory there is a clear
// error naming what is missing. Tests install a fake table (tests/cuda/fake_cuda.h).
// Control path only.
#pragma once

#include <memory>
#include <string>

#include "cuda/cuda_api.h"
#include "tent/status.h"

namespace tent::cuda {

inline constexpr const char* kDriverLibrary = "libcuda.so.1";

// Loads a table from `library`: NotFound when it cannot be opened (the dlerror text,
// and what to install), FailedPrecondition when it lacks cuGetProcAddress (a driver
// older than CUDA 11.3) or a required entry point. Never unloaded.
Result<std::unique_ptr<CudaDriver>> loadDriver(const std::string& library);

// The active table: a test override, else libcuda.so.1 (or the library override),
// loaded on first use. The answer, table or error, is kept for the process.
Result<const CudaDriver*> driver();

// The active table only when CUDA is already loaded in this process (an override,
// or libcuda.so.1 mapped by the application): never loads the driver, so a process
// that does not use CUDA keeps not using it. nullptr otherwise.
const CudaDriver* driverIfLoaded() noexcept;

// Test hooks; production never calls them. `table` must outlive its use; nullptr
// restores the real driver. The library override makes driver() load another name
// (a name that does not exist gives the "not loadable" path on any machine).
void setDriverOverride(const CudaDriver* table) noexcept;
void setDriverLibraryOverride(const std::string& library);

// "CUDA_ERROR_OUT_OF_MEMORY (2): out of memory", from the table's own error strings.
std::string errorText(const CudaDriver& d, CUresult rc);

}  // namespace tent::cuda
