// GPU kernel registration of a CUDA build. No op has a CUDA kernel yet, so a
// cuda:N node falls back to the CPU (SessionOptions::fallback_to_cpu) or
// fails with a clear "no kernel" error; kernels are added here as they land.
#include "tdf/kernel.h"

namespace tdf {
void RegisterCudaKernels(KernelRegistry&) {}
}  // namespace tdf
