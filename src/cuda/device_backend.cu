// The device backend of a CUDA build: device discovery, the per-device
// CudaDevice (stream, cuBLAS handle, caching allocator, error words) and
// stream-ordered copies.
#include "cuda/device_backend.h"
#include "base/sync.h"

#include <cuda_runtime_api.h>

#include "cuda/cuda_device.h"
#include "tdf/status.h"

#include <algorithm>
#include <atomic>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

// As in cuda_kernel_util.h: nvcc's #2810 on `status = F()` is spurious.
#pragma nv_diag_suppress 2810

namespace tdf {
namespace {

struct Discovery {
  int count = 0;
  std::string description;
};

// Probed once: cudaGetDeviceCount initializes the runtime, and its answer
// (or the reason there is no device) does not change during a process.
const Discovery& Discover() {
  static const Discovery* const discovery = [] {
    auto* d = new Discovery;
    int count = 0;
    cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess) {
      // No driver, no device, or a driver too old for this runtime. Clear
      // the error so it does not surface from an unrelated later call.
      (void)cudaGetLastError();
      d->count = 0;
      int driver = 0;
      int runtime = 0;
      (void)cudaDriverGetVersion(&driver);
      (void)cudaRuntimeGetVersion(&runtime);
      if (driver == 0) {
        d->description = absl::StrCat("no CUDA device: no NVIDIA driver is loaded (", cudaGetErrorName(err),
                                      "; CUDA runtime ", runtime / 1000, ".", runtime % 1000 / 10, ")");
      } else {
        d->description = absl::StrCat("no CUDA device: ", cudaGetErrorName(err), " (", cudaGetErrorString(err),
                                      "; driver supports CUDA ", driver / 1000, ".", driver % 1000 / 10,
                                      ", runtime is ", runtime / 1000, ".", runtime % 1000 / 10, ")");
      }
      return d;
    }
    if (count == 0) {
      d->description = "no CUDA device: the CUDA runtime reports 0 devices";
      return d;
    }
    d->count = count;
    d->description = absl::StrCat(count, count == 1 ? " CUDA device:" : " CUDA devices:");
    for (int i = 0; i < count; ++i) {
      cudaDeviceProp prop;
      if (cudaGetDeviceProperties(&prop, i) != cudaSuccess) {
        (void)cudaGetLastError();
        absl::StrAppend(&d->description, i == 0 ? " " : ", ", "cuda:", i, " (properties unavailable)");
        continue;
      }
      absl::StrAppend(&d->description, i == 0 ? " " : ", ", "cuda:", i, " ", prop.name, " (sm_", prop.major,
                      prop.minor, ", ", prop.totalGlobalMem >> 20, " MiB)");
    }
    return d;
  }();
  return *discovery;
}

absl::Status CudaError(cudaError_t err, const char* what, Device device) {
  return absl::InternalError(
      absl::StrCat(what, " on ", device.ToString(), " failed: ", cudaGetErrorName(err), " (", cudaGetErrorString(err), ")"));
}

// The CudaDevice of `device`, made current for the calling thread.
absl::StatusOr<cuda::CudaDevice*> UseDevice(Device device, const char* what) {
  if (device.type != Device::Type::kCuda)
    return absl::InvalidArgumentError(absl::StrCat(what, ": ", device.ToString(), " is not a CUDA device"));
  const Discovery& d = Discover();
  if (device.index < 0 || device.index >= d.count)
    return absl::FailedPreconditionError(
        absl::StrCat(what, ": ", device.ToString(), " does not exist (", d.description, ")"));
  absl::StatusOr<cuda::CudaDevice*> dev = cuda::CudaDevice::Get(device.index);
  if (!dev.ok()) return dev.status();
  absl::Status s = (*dev)->MakeCurrent();
  if (!s.ok()) return s;
  return dev;
}

// A stream-ordered copy that returns when `dst` is filled: an event recorded
// after the copy is waited on, so only work queued before the copy (which
// produced `src`) is waited for.
absl::Status Copy(void* dst, const void* src, size_t bytes, Device device, cudaMemcpyKind kind, const char* what) {
  if (bytes == 0) return absl::OkStatus();
  absl::StatusOr<cuda::CudaDevice*> dev = UseDevice(device, what);
  if (!dev.ok()) return dev.status();
  cudaStream_t stream = (*dev)->stream();
  cudaError_t err = cudaMemcpyAsync(dst, src, bytes, kind, stream);
  if (err != cudaSuccess) return CudaError(err, what, device);
  cudaEvent_t done;
  err = cudaEventCreateWithFlags(&done, cudaEventDisableTiming);
  if (err != cudaSuccess) return CudaError(err, what, device);
  err = cudaEventRecord(done, stream);
  if (err == cudaSuccess) err = cudaEventSynchronize(done);
  (void)cudaEventDestroy(done);
  if (err != cudaSuccess) return CudaError(err, what, device);
  return absl::OkStatus();
}

void CachingFree(void* data, size_t bytes, Device device) {
  if (data == nullptr) return;
  // A deleter cannot report an error; Get fails only if the device vanished,
  // and then there is nothing left to free.
  absl::StatusOr<cuda::CudaDevice*> dev = cuda::CudaDevice::Get(device.index);
  if (dev.ok()) (*dev)->Free(data, bytes);
}

}  // namespace

bool DeviceBackend::CompiledWithCuda() { return true; }

int DeviceBackend::DeviceCount() { return Discover().count; }

std::string DeviceBackend::Describe() { return Discover().description; }

Buffer* DeviceBackend::AllocateBuffer(size_t bytes, Device device) {
  absl::StatusOr<cuda::CudaDevice*> dev = UseDevice(device, "AllocateBuffer");
  if (!dev.ok()) return nullptr;
  absl::StatusOr<void*> data = (*dev)->Allocate(bytes);
  if (!data.ok()) return nullptr;
  return Buffer::Wrap(*data, bytes, device, &CachingFree);
}

absl::Status DeviceBackend::Memset(void* dst, int value, size_t bytes, Device device) {
  if (bytes == 0) return absl::OkStatus();
  TDF_ASSIGN_OR_RETURN(cuda::CudaDevice * dev, UseDevice(device, "Memset"));
  TDF_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(dst, value, bytes, dev->stream()));
  // Callers (Tensor::Zeros) expect the bytes set when this returns.
  TDF_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(dev->stream()));
  return absl::OkStatus();
}

absl::Status DeviceBackend::CopyHostToDevice(void* dst, const void* src, size_t bytes, Device device) {
  return Copy(dst, src, bytes, device, cudaMemcpyHostToDevice, "CopyHostToDevice");
}

absl::Status DeviceBackend::CopyDeviceToHost(void* dst, const void* src, size_t bytes, Device device) {
  return Copy(dst, src, bytes, device, cudaMemcpyDeviceToHost, "CopyDeviceToHost");
}

absl::Status DeviceBackend::CopyDeviceToDevice(void* dst, const void* src, size_t bytes, Device device) {
  return Copy(dst, src, bytes, device, cudaMemcpyDeviceToDevice, "CopyDeviceToDevice");
}

absl::Status DeviceBackend::CopyHostToDeviceAsync(void* dst, const void* src, size_t bytes, Device device) {
  if (bytes == 0) return absl::OkStatus();
  TDF_ASSIGN_OR_RETURN(cuda::CudaDevice * dev, UseDevice(device, "CopyHostToDeviceAsync"));
  TDF_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, dev->stream()));
  return absl::OkStatus();
}

void* DeviceBackend::Stream(Device device) {
  absl::StatusOr<cuda::CudaDevice*> dev = UseDevice(device, "Stream");
  return dev.ok() ? static_cast<void*>((*dev)->stream()) : nullptr;
}

absl::Status DeviceBackend::Synchronize(Device device, uint64_t run_id) {
  TDF_ASSIGN_OR_RETURN(cuda::CudaDevice * dev, UseDevice(device, "Synchronize"));
  return dev->Synchronize(run_id);
}

DeviceBackend::AllocatorStats DeviceBackend::GetAllocatorStats(Device device) {
  if (device.type != Device::Type::kCuda || device.index < 0 || device.index >= DeviceCount()) return {};
  absl::StatusOr<cuda::CudaDevice*> dev = cuda::CudaDevice::Get(device.index);
  return dev.ok() ? (*dev)->stats() : AllocatorStats{};
}

absl::Status DeviceBackend::EmptyCache(Device device) {
  TDF_ASSIGN_OR_RETURN(cuda::CudaDevice * dev, UseDevice(device, "EmptyCache"));
  return dev->EmptyCache();
}

// ---------------------------------------------------------------------------
// CudaDevice

namespace cuda {

absl::Status CudaErrorStatus(cudaError_t err, const char* what, const char* file, int line) {
  return absl::InternalError(absl::StrCat("CUDA call `", what, "` failed: ", cudaGetErrorName(err), " (",
                                          cudaGetErrorString(err), ") [", file, ":", line, "]"));
}

absl::Status CublasErrorStatus(cublasStatus_t err, const char* what, const char* file, int line) {
  return absl::InternalError(absl::StrCat("cuBLAS call `", what, "` failed: status ", static_cast<int>(err), " [",
                                          file, ":", line, "]"));
}

absl::StatusOr<CudaDevice*> CudaDevice::Get(int index) {
  // Devices are created once and live for the process: buffers freed during
  // static destruction still find their device's free list. Every kernel
  // launch and buffer looks its device up, so a created one is read without
  // the lock.
  static constexpr int kMaxDevices = 64;
  static absl::Mutex mu(absl::kConstInit);
  static std::atomic<CudaDevice*> devices[kMaxDevices] = {};
  if (index >= 0 && index < kMaxDevices) {
    if (CudaDevice* dev = devices[index].load(std::memory_order_acquire)) return dev;
  }
  if (index < 0 || index >= kMaxDevices || index >= Discover().count)
    return absl::FailedPreconditionError(
        absl::StrCat("cuda:", index, " does not exist (", Discover().description, ")"));
  base::MutexLock lock(&mu);
  if (devices[index].load(std::memory_order_relaxed) == nullptr) {
    auto* dev = new CudaDevice(index);
    absl::Status s = dev->Init();
    if (!s.ok()) {
      delete dev;
      return s;
    }
    devices[index].store(dev, std::memory_order_release);
  }
  return devices[index].load(std::memory_order_relaxed);
}

absl::Status CudaDevice::MakeCurrent() const {
  // cudaGetDevice reads the runtime's per-thread state; cudaSetDevice is
  // only needed when the thread is on another device.
  int current = -1;
  if (cudaGetDevice(&current) == cudaSuccess && current == index_) return absl::OkStatus();
  TDF_CUDA_RETURN_IF_ERROR(cudaSetDevice(index_));
  return absl::OkStatus();
}

absl::Status CudaDevice::Init() {
  TDF_RETURN_IF_ERROR(MakeCurrent());
  TDF_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  TDF_ASSIGN_OR_RETURN(blas_, LoadCublas());
  TDF_CUBLAS_RETURN_IF_ERROR(blas_->create(&cublas_));
  TDF_CUBLAS_RETURN_IF_ERROR(blas_->set_stream(cublas_, stream_));
  TDF_CUDA_RETURN_IF_ERROR(cudaMalloc(&error_words_, kErrorWords * sizeof(unsigned int)));
  TDF_CUDA_RETURN_IF_ERROR(cudaMemset(error_words_, 0, kErrorWords * sizeof(unsigned int)));
  {
    base::MutexLock lock(&check_mu_);
    launch_sites_.assign(kErrorWords, std::string());
    launch_runs_.assign(kErrorWords, 0);
  }
  return absl::OkStatus();
}

size_t CudaDevice::BucketSize(size_t bytes) {
  constexpr size_t kSmall = 512;
  constexpr size_t kLarge = size_t{2} << 20;
  if (bytes <= (size_t{1} << 20)) return bytes == 0 ? kSmall : (bytes + kSmall - 1) / kSmall * kSmall;
  return (bytes + kLarge - 1) / kLarge * kLarge;
}

absl::StatusOr<void*> CudaDevice::Allocate(size_t bytes) {
  const size_t size = BucketSize(bytes);
  {
    base::MutexLock lock(&mu_);
    auto it = free_lists_.find(size);
    if (it != free_lists_.end() && !it->second.empty()) {
      void* p = it->second.back();
      it->second.pop_back();
      ++stats_.cache_hits;
      stats_.bytes_cached -= static_cast<int64_t>(size);
      stats_.bytes_in_use += static_cast<int64_t>(size);
      return p;
    }
  }
  void* p = nullptr;
  cudaError_t err = cudaMalloc(&p, size);
  if (err == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();
    TDF_RETURN_IF_ERROR(EmptyCache());
    err = cudaMalloc(&p, size);
  }
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    return absl::ResourceExhaustedError(absl::StrCat("cudaMalloc of ", size, " bytes on cuda:", index_,
                                                     " failed: ", cudaGetErrorName(err)));
  }
  base::MutexLock lock(&mu_);
  ++stats_.driver_allocations;
  stats_.bytes_in_use += static_cast<int64_t>(size);
  return p;
}

void CudaDevice::Free(void* ptr, size_t bytes) {
  const size_t size = BucketSize(bytes);
  base::MutexLock lock(&mu_);
  free_lists_[size].push_back(ptr);
  stats_.bytes_in_use -= static_cast<int64_t>(size);
  stats_.bytes_cached += static_cast<int64_t>(size);
}

absl::Status CudaDevice::EmptyCache() {
  // Queued kernels may still use a cached block's previous contents only if
  // they were its previous owner's; cudaFree waits for the device anyway, so
  // synchronizing first just makes that explicit.
  TDF_RETURN_IF_ERROR(MakeCurrent());
  TDF_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  absl::flat_hash_map<size_t, std::vector<void*>> lists;
  {
    base::MutexLock lock(&mu_);
    lists.swap(free_lists_);
    stats_.bytes_cached = 0;
  }
  for (auto& [size, blocks] : lists)
    for (void* p : blocks) TDF_CUDA_RETURN_IF_ERROR(cudaFree(p));
  return absl::OkStatus();
}

DeviceBackend::AllocatorStats CudaDevice::stats() const {
  base::MutexLock lock(&mu_);
  return stats_;
}

namespace {

std::string DescribeErrorBits(unsigned int bits) {
  std::string what;
  auto add = [&](const char* text) { absl::StrAppend(&what, what.empty() ? "" : "; ", text); };
  if (bits & kErrIntegerDivisionByZero) add("integer division by zero");
  if (bits & kErrGatherIndexOutOfRange) add("Gather: an index is out of range");
  if (bits & kErrIntegerPowNegativeExponent) add("integer Pow with a negative exponent (base other than 1 or -1)");
  if (bits & kErrRowIndexOutOfRange) add("indexed rows: a row index is out of range");
  if (bits & kErrScatterIndexOutOfRange) add("ScatterAdd: an index is out of range (nothing was added)");
  if (what.empty()) what = absl::StrCat("error bits 0x", absl::Hex(bits));
  return what;
}

}  // namespace

absl::Status CudaDevice::Synchronize(uint64_t run_id) {
  TDF_RETURN_IF_ERROR(MakeCurrent());
  base::MutexLock lock(&check_mu_);
  TDF_RETURN_IF_ERROR(ReadErrorWords());
  auto it = pending_errors_.find(run_id);
  if (it == pending_errors_.end()) return absl::OkStatus();
  PendingError e = std::move(it->second);
  pending_errors_.erase(it);
  return absl::InvalidArgumentError(
      absl::StrCat("a kernel on cuda:", index_, " failed: ", e.site.empty() ? "" : absl::StrCat(e.site, ": "),
                   DescribeErrorBits(e.bits),
                   e.more > 0 ? absl::StrCat(" (and ", e.more, " later checked launch(es))") : ""));
}

absl::Status CudaDevice::ReadErrorWords() {
  TDF_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  const uint64_t count = words_handed_out_ - words_read_;
  if (count == 0) return absl::OkStatus();
  // The words in hand-out order: one range of the ring, or two when it wraps.
  const uint64_t first = words_read_ % kErrorWords;
  const uint64_t head = std::min<uint64_t>(count, kErrorWords - first);
  std::vector<unsigned int> words(count);
  TDF_CUDA_RETURN_IF_ERROR(
      cudaMemcpy(words.data(), error_words_ + first, head * sizeof(unsigned int), cudaMemcpyDeviceToHost));
  if (head < count)
    TDF_CUDA_RETURN_IF_ERROR(
        cudaMemcpy(words.data() + head, error_words_, (count - head) * sizeof(unsigned int), cudaMemcpyDeviceToHost));
  bool failed = false;
  for (uint64_t k = 0; k < count; ++k) {
    if (words[k] == 0) continue;
    failed = true;
    const uint64_t word = (first + k) % kErrorWords;
    auto [it, first_of_run] = pending_errors_.try_emplace(launch_runs_[word]);
    if (first_of_run) {
      it->second.site = launch_sites_[word];
      it->second.bits = words[k];
    } else {
      ++it->second.more;
    }
  }
  if (failed) {
    TDF_CUDA_RETURN_IF_ERROR(cudaMemset(error_words_ + first, 0, head * sizeof(unsigned int)));
    if (head < count) TDF_CUDA_RETURN_IF_ERROR(cudaMemset(error_words_, 0, (count - head) * sizeof(unsigned int)));
  }
  words_read_ = words_handed_out_;
  return absl::OkStatus();
}

CheckedLaunch::CheckedLaunch(CudaDevice* device, const KernelContext& ctx) : device_(device) {
  device_->check_mu_.Lock();
  TDF_TSAN_ACQUIRE(&device_->check_mu_);
  // A full ring is read back first: one stream synchronization per
  // kErrorWords checked launches, and every launch keeps its own word.
  if (device_->words_handed_out_ - device_->words_read_ == CudaDevice::kErrorWords) {
    status_ = device_->ReadErrorWords();
    if (!status_.ok()) return;
  }
  const uint64_t k = device_->words_handed_out_++ % CudaDevice::kErrorWords;
  device_->launch_sites_[k] = ctx.DescribeSite();
  device_->launch_runs_[k] = ctx.site() != nullptr ? ctx.site()->run_id() : 0;
  word_ = device_->error_words_ + k;
}

CheckedLaunch::~CheckedLaunch() {
  TDF_TSAN_RELEASE(&device_->check_mu_);
  device_->check_mu_.Unlock();
}

}  // namespace cuda

}  // namespace tdf
