// Test helpers: run one CUDA kernel directly (no executor) on host inputs,
// copying them to cuda:0 and the outputs back, so every GPU kernel can be
// compared with its CPU twin (kernels/kernel_test_util.h). Plain C++ over
// DeviceBackend: compiles in a build without CUDA, where the tests skip.
#ifndef TDF_TESTS_CUDA_GPU_TEST_UTIL_H_
#define TDF_TESTS_CUDA_GPU_TEST_UTIL_H_

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cuda/device_backend.h"
#include "gtest/gtest.h"
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

// Creates the CUDA kernel of `op` on cuda:0 and runs it once, input i
// copied to cuda:0 when on_device[i], else passed as given (on the host);
// synchronizes (reporting deferred kernel errors) and returns the outputs on
// the host. Each output must be a cuda:0 tensor; with allow_unset, an output
// the kernel did not set comes back unset.
inline absl::StatusOr<std::vector<Tensor>> RunGpuKernel(const std::string& op, const std::vector<Tensor>& inputs,
                                                        const std::vector<bool>& on_device, AttrMap attrs,
                                                        int num_outputs, bool allow_unset) {
  NodeDef node = kernel_test::MakeNode(op, static_cast<int>(inputs.size()), std::move(attrs));
  node.device = "cuda:0";
  TDF_ASSIGN_OR_RETURN(std::unique_ptr<OpKernel> kernel, KernelRegistry::Global()->Create(node, Device::Type::kCuda));
  std::vector<Tensor> placed;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (on_device[i]) {
      TDF_ASSIGN_OR_RETURN(Tensor d, ToDevice(inputs[i]));
      placed.push_back(std::move(d));
    } else {
      placed.push_back(inputs[i]);
    }
  }
  std::vector<const Tensor*> ptrs;
  for (const Tensor& t : placed) ptrs.push_back(&t);
  std::vector<Tensor> outputs(num_outputs);
  KernelContext ctx(ptrs.data(), static_cast<int>(ptrs.size()), outputs.data(), num_outputs, Device::Cuda(0));
  ctx.set_device_context(DeviceBackend::Stream(Device::Cuda(0)));
  TDF_RETURN_IF_ERROR(kernel->Compute(ctx));
  TDF_RETURN_IF_ERROR(DeviceBackend::Synchronize(Device::Cuda(0)));
  std::vector<Tensor> host;
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Tensor& t = outputs[i];
    if (!t.valid() && !allow_unset) return absl::InternalError(absl::StrCat(op, ": output ", i, " is not set"));
    if (t.valid() && t.device() != Device::Cuda(0))
      return absl::InternalError(absl::StrCat(op, ": output ", i, " on ", t.device().ToString(), ", want cuda:0"));
    TDF_ASSIGN_OR_RETURN(Tensor h, ToHost(t));
    host.push_back(std::move(h));
  }
  return host;
}

// Creates the CUDA kernel of `op` on cuda:0, runs it once on copies of
// `inputs`, synchronizes (reporting deferred kernel errors) and returns the
// outputs on the host. Outputs must be device tensors (or left unset).
inline absl::StatusOr<std::vector<Tensor>> RunGpuOp(const std::string& op, const std::vector<Tensor>& inputs,
                                                    AttrMap attrs = {}, int num_outputs = 1) {
  return RunGpuKernel(op, inputs, std::vector<bool>(inputs.size(), true), std::move(attrs), num_outputs,
                      /*allow_unset=*/true);
}

// Runs the CUDA kernel of `op` with input i on cuda:0 when on_device[i],
// else as given (on the host); synchronizes and returns the outputs on the
// host (each must be set, a device tensor).
inline absl::StatusOr<std::vector<Tensor>> RunGpuMixed(const std::string& op, const std::vector<Tensor>& inputs,
                                                       const std::vector<bool>& on_device, AttrMap attrs = {},
                                                       int num_outputs = 1) {
  return RunGpuKernel(op, inputs, on_device, std::move(attrs), num_outputs, /*allow_unset=*/false);
}

// ---- Comparing a CUDA kernel with its CPU twin ----

// Values in [lo, hi) of dtype `dtype` (integers: whole numbers; bool: coin),
// the same for the same seed and element count.
inline Tensor Random(DType dtype, const Shape& shape, double lo = -2, double hi = 2, uint32_t seed = 1) {
  std::mt19937 rng(seed + static_cast<uint32_t>(shape.num_elements()) * 7919u);
  std::uniform_real_distribution<double> dist(lo, hi);
  Tensor t = *Tensor::Empty(dtype, shape);
  DispatchDType(dtype, [&](auto zero) {
    using T = decltype(zero);
    T* p = t.mutable_data<T>();
    for (int64_t i = 0; i < t.num_elements(); ++i) {
      const double v = dist(rng);
      if constexpr (std::is_same_v<T, bool>) {
        p[i] = v > (lo + hi) / 2;
      } else if constexpr (std::is_integral_v<T>) {
        p[i] = static_cast<T>(std::floor(v));
      } else {
        p[i] = static_cast<T>(v);
      }
    }
  });
  return t;
}

// Indices in [0, limit) (int64 or int32), with repeats when count > limit.
inline Tensor RandomIndices(DType dtype, const Shape& shape, int64_t limit, uint32_t seed = 3) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int64_t> dist(0, limit - 1);
  Tensor t = *Tensor::Empty(dtype, shape);
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    if (dtype == DType::kInt64) {
      t.mutable_data<int64_t>()[i] = dist(rng);
    } else {
      t.mutable_data<int32_t>()[i] = static_cast<int32_t>(dist(rng));
    }
  }
  return t;
}

// Runs `op` on the CPU and on the GPU and expects the same result (or the
// same status code). Float outputs within `tol` (tol <= 0: bit for bit);
// others exactly.
inline void ExpectSame(const std::string& op, const std::vector<Tensor>& inputs, AttrMap attrs = {},
                       int num_outputs = 1, double tol = 1e-5) {
  SCOPED_TRACE(op);
  absl::StatusOr<std::vector<Tensor>> cpu = kernel_test::RunOp(op, inputs, attrs, num_outputs);
  absl::StatusOr<std::vector<Tensor>> gpu = RunGpuOp(op, inputs, attrs, num_outputs);
  ASSERT_EQ(cpu.ok(), gpu.ok()) << "cpu: " << cpu.status() << "; gpu: " << gpu.status();
  if (!cpu.ok()) {
    EXPECT_EQ(cpu.status().code(), gpu.status().code()) << cpu.status() << " vs " << gpu.status();
    return;
  }
  for (int i = 0; i < num_outputs; ++i) {
    const Tensor& c = (*cpu)[i];
    const Tensor& g = (*gpu)[i];
    if (IsFloating(c.dtype()) && tol > 0) {
      EXPECT_TRUE(kernel_test::TensorNear(g, c, tol)) << "output " << i;
    } else {
      EXPECT_TRUE(kernel_test::TensorEq(g, c)) << "output " << i;
    }
  }
}

// A product [m, k] x [k, n] (MatMul, MatMulAdd).
struct MatMulCase {
  int64_t m, k, n;
};
// The shape of operand a of case c ([m, k]; transposed: [k, m]), and of b
// ([k, n]; transposed: [n, k]).
inline Shape OperandA(const MatMulCase& c, bool transpose_a) {
  return transpose_a ? Shape({c.k, c.m}) : Shape({c.m, c.k});
}
inline Shape OperandB(const MatMulCase& c, bool transpose_b) {
  return transpose_b ? Shape({c.n, c.k}) : Shape({c.k, c.n});
}
// Calls fn(dtype, c, transpose_a, transpose_b) for float32 and float64, each
// case and each pair of transposes, under a trace naming them.
template <typename Fn>
void ForEachMatMulCase(std::initializer_list<MatMulCase> cases, Fn&& fn) {
  for (DType dtype : {DType::kFloat32, DType::kFloat64}) {
    for (const MatMulCase& c : cases) {
      for (bool ta : {false, true}) {
        for (bool tb : {false, true}) {
          SCOPED_TRACE(::testing::Message() << DTypeName(dtype) << " m=" << c.m << " k=" << c.k << " n=" << c.n
                                            << " ta=" << ta << " tb=" << tb);
          fn(dtype, c, ta, tb);
        }
      }
    }
  }
}

// Expects an error on both, with the same code; returns the GPU's.
inline absl::Status BothFail(const std::string& op, const std::vector<Tensor>& inputs, AttrMap attrs = {},
                             int num_outputs = 1) {
  absl::Status cpu = kernel_test::RunOp(op, inputs, attrs, num_outputs).status();
  absl::Status gpu = RunGpuOp(op, inputs, attrs, num_outputs).status();
  EXPECT_FALSE(cpu.ok()) << op << ": the CPU kernel succeeded";
  EXPECT_FALSE(gpu.ok()) << op << ": the GPU kernel succeeded";
  EXPECT_EQ(cpu.code(), gpu.code()) << op << ": " << cpu << " vs " << gpu;
  return gpu;
}
inline void ExpectBothFail(const std::string& op, const std::vector<Tensor>& inputs, AttrMap attrs = {},
                           int num_outputs = 1) {
  (void)BothFail(op, inputs, std::move(attrs), num_outputs);
}

}  // namespace gpu_test
}  // namespace tdf

#endif  // TDF_TESTS_CUDA_GPU_TEST_UTIL_H_
