// Test helpers: run one CPU kernel directly (no executor) on given inputs.
//
//   absl::StatusOr<std::vector<Tensor>> out =
//       RunOp("Add", {Tensor::Scalar<int64_t>(1), Tensor::Scalar<int64_t>(2)});
#ifndef TDF_TESTS_KERNELS_KERNEL_TEST_UTIL_H_
#define TDF_TESTS_KERNELS_KERNEL_TEST_UTIL_H_

#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tdf/graph.h"
#include "tdf/kernel.h"
#include "tdf/tensor.h"

namespace tdf {
namespace kernel_test {

inline NodeDef MakeNode(const std::string& op, int num_inputs, AttrMap attrs = {}) {
  NodeDef node;
  node.name = absl::StrCat("test_", op);
  node.op = op;
  for (int i = 0; i < num_inputs; ++i) node.input.push_back(absl::StrCat("in", i));
  node.attr = std::move(attrs);
  return node;
}

// Creates the CPU kernel for `op` and runs it once.
inline absl::StatusOr<std::vector<Tensor>> RunOp(const std::string& op, const std::vector<Tensor>& inputs,
                                                 AttrMap attrs = {}, int num_outputs = 1) {
  NodeDef node = MakeNode(op, static_cast<int>(inputs.size()), std::move(attrs));
  absl::StatusOr<std::unique_ptr<OpKernel>> kernel = KernelRegistry::Global()->Create(node, Device::Type::kCpu);
  if (!kernel.ok()) return kernel.status();
  std::vector<const Tensor*> ptrs;
  for (const Tensor& t : inputs) ptrs.push_back(&t);
  std::vector<Tensor> outputs(num_outputs);
  KernelContext ctx(ptrs.data(), static_cast<int>(ptrs.size()), outputs.data(), num_outputs, Device::Cpu());
  absl::Status s = (*kernel)->Compute(ctx);
  if (!s.ok()) return s;
  return outputs;
}

// The single output of `op`; fails the test (and returns an invalid tensor)
// on error.
inline Tensor Run1(const std::string& op, const std::vector<Tensor>& inputs, AttrMap attrs = {}) {
  absl::StatusOr<std::vector<Tensor>> out = RunOp(op, inputs, std::move(attrs));
  EXPECT_TRUE(out.ok()) << op << ": " << out.status();
  if (!out.ok()) return Tensor();
  return (*out)[0];
}

// The error of `op` (OkStatus if it unexpectedly succeeded).
inline absl::Status RunError(const std::string& op, const std::vector<Tensor>& inputs, AttrMap attrs = {}) {
  return RunOp(op, inputs, std::move(attrs)).status();
}

template <typename T>
Tensor T_(std::vector<T> values, Shape shape) {
  absl::StatusOr<Tensor> t = Tensor::FromVector<T>(values, shape);
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? *t : Tensor();
}
inline Tensor F64(std::vector<double> v, Shape s) { return T_<double>(std::move(v), std::move(s)); }
inline Tensor F32(std::vector<float> v, Shape s) { return T_<float>(std::move(v), std::move(s)); }
inline Tensor I64(std::vector<int64_t> v, Shape s) { return T_<int64_t>(std::move(v), std::move(s)); }
inline Tensor I32(std::vector<int32_t> v, Shape s) { return T_<int32_t>(std::move(v), std::move(s)); }
inline Tensor B(std::vector<bool> v, Shape s) { return T_<bool>(std::move(v), std::move(s)); }

// Elements as a vector (CPU tensors of dtype T).
template <typename T>
std::vector<T> Values(const Tensor& t) {
  if (t.dtype() != DTypeOf<T>::value) {
    ADD_FAILURE() << "expected dtype " << DTypeName(DTypeOf<T>::value) << ", got " << t.DebugString();
    return {};
  }
  const T* p = t.data<T>();
  return std::vector<T>(p, p + t.num_elements());
}

inline ::testing::AssertionResult TensorEq(const Tensor& actual, const Tensor& expected) {
  if (actual.Equals(expected)) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "got " << actual.DebugString() << ", want " << expected.DebugString();
}

// Same dtype and shape, every element within `tol` (absolute + relative).
inline ::testing::AssertionResult TensorNear(const Tensor& actual, const Tensor& expected, double tol) {
  if (actual.dtype() != expected.dtype() || actual.shape() != expected.shape())
    return ::testing::AssertionFailure() << "got " << actual.DebugString() << ", want " << expected.DebugString();
  for (int64_t i = 0; i < actual.num_elements(); ++i) {
    double a = 0, e = 0;
    DispatchDType(actual.dtype(), [&](auto zero) {
      using T = decltype(zero);
      a = static_cast<double>(actual.data<T>()[i]);
      e = static_cast<double>(expected.data<T>()[i]);
    });
    // Equal infinities match (the Max of an empty set is -inf on every
    // device); a NaN never does.
    if (a == e) continue;
    if (!(std::abs(a - e) <= tol * (1 + std::abs(e))))
      return ::testing::AssertionFailure() << "element " << i << ": got " << a << ", want " << e << " (got "
                                           << actual.DebugString() << ")";
  }
  return ::testing::AssertionSuccess();
}

}  // namespace kernel_test
}  // namespace tdf

#endif  // TDF_TESTS_KERNELS_KERNEL_TEST_UTIL_H_
