// Internal (CUDA builds only): cuBLAS is opened with dlopen() when the first
// CudaDevice is initialised instead of being linked, because linking it makes
// the loader map and relocate libcublas + libcublasLt (~600 MB on disk, ~200
// MB of RSS) at the start of every process, CPU-only runs included.
//
//   TDF_ASSIGN_OR_RETURN(const cuda::CublasFunctions* blas, cuda::LoadCublas());
//   TDF_CUBLAS_RETURN_IF_ERROR(blas->create(&handle));
//
// Plain C++ (CublasFunctions is defined in cuda/cuda_device.h, which needs
// the CUDA headers), so tests can probe the loader without them.
#ifndef TDF_SRC_CUDA_CUBLAS_LOADER_H_
#define TDF_SRC_CUDA_CUBLAS_LOADER_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tdf {
namespace cuda {

struct CublasFunctions;

// Opens the cuBLAS library and resolves every function tdf calls, once per
// process (thread-safe); later calls return the first answer. On failure the
// status names the library or symbol and carries dlerror()'s text.
absl::StatusOr<const CublasFunctions*> LoadCublas();

// "libcublas.so.<CUBLAS_VER_MAJOR>" of the toolkit tdf was compiled against.
const char* CublasLibraryName();

// The symbols LoadCublas resolves ("cublasCreate_v2", ...).
std::vector<std::string> CublasSymbolNames();

// Opens `library`, resolves the same symbols and closes it again; reports
// what LoadCublas would. For tests of the failure messages.
absl::Status ProbeCublasLibrary(const std::string& library);

}  // namespace cuda
}  // namespace tdf

#endif  // TDF_SRC_CUDA_CUBLAS_LOADER_H_
