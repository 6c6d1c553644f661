// Internal (CUDA builds only; included by src/cuda/*.cu): one CudaDevice per
// device index, holding the device's stream, its cuBLAS handle (cuBLAS is
// loaded on the first Init, see cuda/cublas_loader.h), a caching
// allocator for device buffers and the device-side error words of the
// launches that can fail (CheckedLaunch).
//
//   TDF_ASSIGN_OR_RETURN(cuda::CudaDevice* dev, cuda::CudaDevice::Get(0));
//   TDF_ASSIGN_OR_RETURN(void* p, dev->Allocate(1 << 20));
//   TDF_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(p, 0, 1 << 20, dev->stream()));
//   dev->Free(p, 1 << 20);
//
// Why one stream: every kernel, copy and allocation of a device is ordered on
// it, so a consumer on the device never needs a host synchronization, and a
// buffer freed while a queued kernel still reads it can be handed to the next
// allocation at once (the next user is queued behind that kernel). Several
// streams would need per-block stream tracking and events in the allocator.
//
// Thread safety: Get() and every method are thread-safe.
#ifndef TDF_SRC_CUDA_CUDA_DEVICE_H_
#define TDF_SRC_CUDA_CUDA_DEVICE_H_

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "cuda/cublas_loader.h"
#include "cuda/device_backend.h"
#include "tdf/kernel.h"

namespace tdf {
namespace cuda {

// "CUDA call `what` failed: cudaErrorX (text) [file:line]".
absl::Status CudaErrorStatus(cudaError_t err, const char* what, const char* file, int line);
absl::Status CublasErrorStatus(cublasStatus_t err, const char* what, const char* file, int line);

}  // namespace cuda
}  // namespace tdf

// Maps a cudaError_t to an absl::Status naming the call (and so the kernel or
// copy it belongs to), and returns it from the enclosing function.
#define TDF_CUDA_RETURN_IF_ERROR(expr)                                                        \
  do {                                                                                        \
    cudaError_t tdf_cuda_err_ = (expr);                                                       \
    if (tdf_cuda_err_ != cudaSuccess)                                                         \
      return ::tdf::cuda::CudaErrorStatus(tdf_cuda_err_, #expr, __FILE__, __LINE__);          \
  } while (0)

// After a <<<...>>> launch: reports a launch failure naming the kernel.
#define TDF_CUDA_RETURN_IF_LAUNCH_FAILED(kernel_name)                                          \
  do {                                                                                        \
    cudaError_t tdf_cuda_err_ = cudaGetLastError();                                           \
    if (tdf_cuda_err_ != cudaSuccess)                                                         \
      return ::tdf::cuda::CudaErrorStatus(tdf_cuda_err_, "launch of kernel " kernel_name,     \
                                          __FILE__, __LINE__);                                \
  } while (0)

#define TDF_CUBLAS_RETURN_IF_ERROR(expr)                                                      \
  do {                                                                                        \
    cublasStatus_t tdf_cublas_err_ = (expr);                                                  \
    if (tdf_cublas_err_ != CUBLAS_STATUS_SUCCESS)                                             \
      return ::tdf::cuda::CublasErrorStatus(tdf_cublas_err_, #expr, __FILE__, __LINE__);      \
  } while (0)

// The cuBLAS functions tdf calls, as (field, name) pairs. tdf does not link
// cuBLAS: cuda/cublas_loader.cc resolves these with dlsym. <cublas_v2.h>
// #defines each name to its versioned symbol (cublasCreate_v2, ...), so the
// pointer types and the symbol names both come from the headers.
#define TDF_CUBLAS_FUNCTIONS(X)    \
  X(create, cublasCreate)          \
  X(set_stream, cublasSetStream)   \
  X(sgemm, cublasSgemm)            \
  X(dgemm, cublasDgemm)

namespace tdf {
namespace cuda {

struct CublasFunctions {
#define TDF_CUBLAS_FIELD(field, function) decltype(&function) field = nullptr;
  TDF_CUBLAS_FUNCTIONS(TDF_CUBLAS_FIELD)
#undef TDF_CUBLAS_FIELD
};

// Bits of an error word (set by kernels with atomicOr).
enum DeviceErrorBit : unsigned int {
  kErrIntegerDivisionByZero = 1u << 0,
  kErrGatherIndexOutOfRange = 1u << 1,
  kErrIntegerPowNegativeExponent = 1u << 2,
  kErrRowIndexOutOfRange = 1u << 3,  // indexed rows (row_kernels.cu)
  kErrScatterIndexOutOfRange = 1u << 4,  // DeviceBackend::ScatterAddRows
};

class CudaDevice {
 public:
  // The device of `index`, created on first use. Fails when the index names
  // no device (the message says why: no driver, no device, ...).
  static absl::StatusOr<CudaDevice*> Get(int index);

  int index() const { return index_; }
  cudaStream_t stream() const { return stream_; }
  cublasHandle_t cublas() const { return cublas_; }
  // The loaded cuBLAS functions (set by Init, so never null afterwards).
  const CublasFunctions& blas() const { return *blas_; }
  // How many error words CheckedLaunch hands out before it must read them
  // back (one stream synchronization per that many checked launches).
  static constexpr int kErrorWords = 4096;

  // A block of at least `bytes` bytes from the free list of its size bucket,
  // or from cudaMalloc (after emptying the cache once if the driver is out of
  // memory). The caller must have made this device current.
  absl::StatusOr<void*> Allocate(size_t bytes);
  // Returns a block obtained from Allocate(bytes) to its free list.
  void Free(void* ptr, size_t bytes);
  absl::Status EmptyCache();
  DeviceBackend::AllocatorStats stats() const;

  // Waits for the stream, then reads and clears the error words of the
  // checked launches since the last read: InvalidArgument naming the first
  // launch for `run_id` (in stream order) whose kernel recorded an error.
  // Errors of other runs' launches are kept for those runs' Synchronize.
  absl::Status Synchronize(uint64_t run_id = 0);
  // Makes this device current for the calling thread.
  absl::Status MakeCurrent() const;

  // The size a request is rounded up to: multiples of 512 bytes up to 1 MiB,
  // then multiples of 2 MiB, so that the free lists stay few and reusable.
  static size_t BucketSize(size_t bytes);

 private:
  friend class CheckedLaunch;
  explicit CudaDevice(int index) : index_(index) {}
  absl::Status Init();
  // Waits for the stream, reads the words handed out since the last read,
  // clears them, and keeps what failed in pending_errors_.
  absl::Status ReadErrorWords() ABSL_EXCLUSIVE_LOCKS_REQUIRED(check_mu_);

  const int index_;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  const CublasFunctions* blas_ = nullptr;
  unsigned int* error_words_ = nullptr;  // device memory [kErrorWords], owned

  // Held from a checked launch's word until its kernels are queued, and by
  // Synchronize: every word Synchronize reads belongs to a queued launch.
  absl::Mutex check_mu_;
  uint64_t words_handed_out_ ABSL_GUARDED_BY(check_mu_) = 0;  // ever; word k is k % kErrorWords
  uint64_t words_read_ ABSL_GUARDED_BY(check_mu_) = 0;
  // Per word: "node 'x' (Op) at tag [..]" of the launch that has it, and
  // the run it was made for.
  std::vector<std::string> launch_sites_ ABSL_GUARDED_BY(check_mu_);
  std::vector<uint64_t> launch_runs_ ABSL_GUARDED_BY(check_mu_);
  // Errors read back but not yet reported, by run: the first failed
  // launch's site and error bits, and how many more failed.
  struct PendingError {
    std::string site;
    unsigned int bits = 0;
    int64_t more = 0;
  };
  absl::flat_hash_map<uint64_t, PendingError> pending_errors_ ABSL_GUARDED_BY(check_mu_);

  mutable absl::Mutex mu_;
  absl::flat_hash_map<size_t, std::vector<void*>> free_lists_ ABSL_GUARDED_BY(mu_);
  DeviceBackend::AllocatorStats stats_ ABSL_GUARDED_BY(mu_);
};

// A launch whose kernels may find an error in element values (an index out
// of range, an integer division by zero), which only the device sees. It
// gets its own error word and remembers who launched it (the context's
// site), so the Synchronize that finds the error names that node and tag.
// Construct it right before the launches and keep it until they are queued:
//
//   CheckedLaunch checked(launch.device, ctx);
//   TDF_RETURN_IF_ERROR(checked.status());
//   GatherKernelImpl<<<grid, 256, 0, launch.stream>>>(..., checked.word());
//
// Not with a Synchronize in between (it holds the device's check lock).
class CheckedLaunch {
 public:
  CheckedLaunch(CudaDevice* device, const KernelContext& ctx);
  ~CheckedLaunch();
  CheckedLaunch(const CheckedLaunch&) = delete;
  CheckedLaunch& operator=(const CheckedLaunch&) = delete;

  // Not OK when reading back a full ring of words failed (a CUDA error);
  // word() is null then.
  const absl::Status& status() const { return status_; }
  unsigned int* word() const { return word_; }

 private:
  CudaDevice* device_;
  unsigned int* word_ = nullptr;
  absl::Status status_;
};

// The stream a kernel runs on: the context's (when the executor set one),
// otherwise the device's own.
inline cudaStream_t StreamFor(const void* device_context, const CudaDevice& device) {
  return device_context != nullptr ? static_cast<cudaStream_t>(const_cast<void*>(device_context)) : device.stream();
}

}  // namespace cuda
}  // namespace tdf

#endif  // TDF_SRC_CUDA_CUDA_DEVICE_H_
