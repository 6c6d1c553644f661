// GPU kernel registration of a CUDA build (called by KernelRegistry::Global).
// Also registers the host-side copy kernels (CopyToDevice, CopyToHost) that
// the placement pass inserts (tdf/placement.h).
#include "cuda/copy_kernels.h"
#include "cuda/cuda_kernel_util.h"
#include "tdf/kernel.h"

namespace tdf {
void RegisterCudaKernels(KernelRegistry& registry) {
  cuda::RegisterCudaElementwiseKernels(registry);
  cuda::RegisterCudaReductionKernels(registry);
  cuda::RegisterCudaArrayKernels(registry);
  cuda::RegisterCudaMatMulKernels(registry);
  cuda::RegisterCudaGradientKernels(registry);
  cuda::RegisterCudaRowKernels(registry);
  RegisterCopyKernels(registry);
}
}  // namespace tdf
