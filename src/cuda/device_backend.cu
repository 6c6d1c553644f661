// The device backend of a CUDA build: device discovery, memory and copies
// through the CUDA runtime. Every call is synchronous for now; streams and a
// caching allocator arrive with the CUDA kernels, behind this same interface.
#include "cuda/device_backend.h"

#include <cuda_runtime_api.h>

#include <string>

#include "absl/strings/str_cat.h"

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

// Checks that `device` names an existing CUDA device and makes it current
// for the calling thread.
absl::Status UseDevice(Device device, const char* what) {
  if (device.type != Device::Type::kCuda)
    return absl::InvalidArgumentError(absl::StrCat(what, ": ", device.ToString(), " is not a CUDA device"));
  const Discovery& d = Discover();
  if (device.index < 0 || device.index >= d.count)
    return absl::FailedPreconditionError(
        absl::StrCat(what, ": ", device.ToString(), " does not exist (", d.description, ")"));
  cudaError_t err = cudaSetDevice(device.index);
  if (err != cudaSuccess) return CudaError(err, what, device);
  return absl::OkStatus();
}

absl::Status Copy(void* dst, const void* src, size_t bytes, Device device, cudaMemcpyKind kind, const char* what) {
  if (bytes == 0) return absl::OkStatus();
  absl::Status s = UseDevice(device, what);
  if (!s.ok()) return s;
  cudaError_t err = cudaMemcpy(dst, src, bytes, kind);
  if (err != cudaSuccess) return CudaError(err, what, device);
  // A device-to-device cudaMemcpy may return before the copy is done;
  // callers expect the destination filled when this returns.
  if (kind == cudaMemcpyDeviceToDevice) {
    err = cudaDeviceSynchronize();
    if (err != cudaSuccess) return CudaError(err, what, device);
  }
  return absl::OkStatus();
}

void CudaFree(void* data, size_t, Device device) {
  if (data == nullptr) return;
  // A deleter cannot report an error; cudaFree fails only when the context is
  // already gone (process teardown), when there is nothing left to free.
  (void)cudaSetDevice(device.index);
  (void)cudaFree(data);
}

}  // namespace

bool DeviceBackend::CompiledWithCuda() { return true; }

int DeviceBackend::DeviceCount() { return Discover().count; }

std::string DeviceBackend::Describe() { return Discover().description; }

Buffer* DeviceBackend::AllocateBuffer(size_t bytes, Device device) {
  if (!UseDevice(device, "AllocateBuffer").ok()) return nullptr;
  void* data = nullptr;
  // cudaMalloc(0) may return a null pointer; allocate at least one byte so
  // every buffer has a distinct, valid address.
  if (cudaMalloc(&data, bytes == 0 ? 1 : bytes) != cudaSuccess) {
    (void)cudaGetLastError();
    return nullptr;
  }
  return Buffer::Wrap(data, bytes, device, &CudaFree);
}

absl::Status DeviceBackend::Memset(void* dst, int value, size_t bytes, Device device) {
  if (bytes == 0) return absl::OkStatus();
  absl::Status s = UseDevice(device, "Memset");
  if (!s.ok()) return s;
  cudaError_t err = cudaMemset(dst, value, bytes);
  if (err != cudaSuccess) return CudaError(err, "Memset", device);
  // cudaMemset is asynchronous with respect to the host for device memory;
  // callers expect the bytes set when this returns.
  err = cudaDeviceSynchronize();
  if (err != cudaSuccess) return CudaError(err, "Memset", device);
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

}  // namespace tdf
