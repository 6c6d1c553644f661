// Test helpers: run one CUDA kernel directly (no executor) on host inputs,
// copying them to cuda:0 and the outputs back, so every GPU kernel can be
// compared with its CPU twin (kernels/kernel_test_util.h). Plain C++ over
// DeviceBackend: compiles in a build without CUDA, where the tests skip.
#ifndef TDF_TESTS_CUDA_GPU_TEST_UTIL_H_
#define TDF_TESTS_CUDA_GPU_TEST_UTIL_H_

#include <string>
#include <vector>

#include "cuda/device_backend.h"
#include "kernels/kernel_test_util.h"
#include "tdf/kernel.h"
#include "tdf/status.h"
#include "tdf/tensor.h"

namespace tdf {
namespace gpu_test {

#define TDF_SKIP_WITHOUT_GPU()                                                       \
  do {                                                                                \
    if (::tdf::DeviceBackend::DeviceCount() == 0)                                     \
      GTEST_SKIP() << ::tdf::DeviceBackend::Describe(); /* "no CUDA device: <why>" */ \
  } while (0)

inline absl::StatusOr<Tensor> ToDevice(const Tensor& host, Device device = Device::Cuda(0)) {
  TDF_ASSIGN_OR_RETURN(Tensor t, Tensor::Empty(host.dtype(), host.shape(), device));
  TDF_RETURN_IF_ERROR(DeviceBackend::CopyHostToDevice(t.raw_mutable_data(), host.raw_data(), host.bytes(), device));
  return t;
}

inline absl::StatusOr<Tensor> ToHost(const Tensor& t) {
  if (t.device().is_cpu()) return t;
  TDF_ASSIGN_OR_RETURN(Tensor host, Tensor::Empty(t.dtype(), t.shape()));
  TDF_RETURN_IF_ERROR(DeviceBackend::CopyDeviceToHost(host.raw_mutable_data(), t.raw_data(), t.bytes(), t.device()));
  return host;
}

// Creates the CUDA kernel of `op` on cuda:0, runs it once on copies of
// `inputs`, synchronizes (reporting deferred kernel errors) and returns the
// outputs on the host. Outputs must be device tensors.
inline absl::StatusOr<std::vector<Tensor>> RunGpuOp(const std::string& op, const std::vector<Tensor>& inputs,
                                                    AttrMap attrs = {}, int num_outputs = 1) {
  NodeDef node = kernel_test::MakeNode(op, static_cast<int>(inputs.size()), std::move(attrs));
  node.device = "cuda:0";
  TDF_ASSIGN_OR_RETURN(std::unique_ptr<OpKernel> kernel, KernelRegistry::Global()->Create(node, Device::Type::kCuda));
  std::vector<Tensor> dev_inputs;
  for (const Tensor& t : inputs) {
    TDF_ASSIGN_OR_RETURN(Tensor d, ToDevice(t));
    dev_inputs.push_back(std::move(d));
  }
  std::vector<const Tensor*> ptrs;
  for (const Tensor& t : dev_inputs) ptrs.push_back(&t);
  std::vector<Tensor> outputs(num_outputs);
  KernelContext ctx(ptrs.data(), static_cast<int>(ptrs.size()), outputs.data(), num_outputs, Device::Cuda(0));
  ctx.set_device_context(DeviceBackend::Stream(Device::Cuda(0)));
  TDF_RETURN_IF_ERROR(kernel->Compute(ctx));
  TDF_RETURN_IF_ERROR(DeviceBackend::Synchronize(Device::Cuda(0)));
  std::vector<Tensor> host;
  for (const Tensor& t : outputs) {
    if (t.valid() && t.device() != Device::Cuda(0))
      return absl::InternalError(absl::StrCat(op, ": output on ", t.device().ToString(), ", want cuda:0"));
    TDF_ASSIGN_OR_RETURN(Tensor h, ToHost(t));
    host.push_back(std::move(h));
  }
  return host;
}

}  // namespace gpu_test
}  // namespace tdf

#endif  // TDF_TESTS_CUDA_GPU_TEST_UTIL_H_
