// The executor's inline scalar path (runtime/scalar_ops.h) must agree with
// the CPU kernels it stands in for: every op it maps, every dtype, values
// that include zero, negatives and extremes (integer overflow wraps in
// both; INT_MIN / -1 must neither trap nor be undefined — UBSan checks the
// asan preset's run). Where the fast path declines
// (returns false), the kernel decides; where it answers, the kernel must give
// the same tensor.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "kernels/kernel_test_util.h"
#include "runtime/scalar_ops.h"

namespace tdf {
namespace {

using kernel_test::RunOp;

std::vector<Tensor> Samples(DType dtype) {
  switch (dtype) {
    case DType::kBool: return {Tensor::Scalar<bool>(false), Tensor::Scalar<bool>(true)};
    case DType::kInt32:
      return {Tensor::Scalar<int32_t>(0), Tensor::Scalar<int32_t>(7), Tensor::Scalar<int32_t>(-3),
              Tensor::Scalar<int32_t>(-1), Tensor::Scalar<int32_t>(std::numeric_limits<int32_t>::max()),
              Tensor::Scalar<int32_t>(std::numeric_limits<int32_t>::min())};
    case DType::kInt64:
      return {Tensor::Scalar<int64_t>(0), Tensor::Scalar<int64_t>(7), Tensor::Scalar<int64_t>(-3),
              Tensor::Scalar<int64_t>(-1), Tensor::Scalar<int64_t>(int64_t{1} << 40),
              Tensor::Scalar<int64_t>(std::numeric_limits<int64_t>::max()),
              Tensor::Scalar<int64_t>(std::numeric_limits<int64_t>::min())};
    case DType::kFloat32:
      return {Tensor::Scalar<float>(0.0f), Tensor::Scalar<float>(2.5f), Tensor::Scalar<float>(-1.25f)};
    case DType::kFloat64:
      return {Tensor::Scalar<double>(0.0), Tensor::Scalar<double>(2.5), Tensor::Scalar<double>(-1e300)};
    default: return {};
  }
}

bool SameTensor(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.num_elements() != b.num_elements() || a.shape().rank() != b.shape().rank())
    return false;
  if (a.Equals(b)) return true;
  // 0.0 / 0.0: NaN on both sides (Equals holds NaN != NaN).
  if (a.dtype() == DType::kFloat64) return std::isnan(a.scalar<double>()) && std::isnan(b.scalar<double>());
  if (a.dtype() == DType::kFloat32) return std::isnan(a.scalar<float>()) && std::isnan(b.scalar<float>());
  return false;
}

const std::vector<std::string> kBinaryOps = {
    "Add",     "Sub",       "Mul",          "Div",   "Mod",        "Maximum",    "Minimum",      "Less",
    "LessEqual", "Greater", "GreaterEqual", "Equal", "NotEqual",   "LogicalAnd", "LogicalOr",    "AddN",
    "SumToShapeOf"};
const std::vector<std::string> kUnaryOps = {"Identity", "Neg", "LogicalNot", "ZerosLike", "OnesLike", "AddN"};
const std::vector<DType> kDTypes = {DType::kBool, DType::kInt32, DType::kInt64, DType::kFloat32, DType::kFloat64};

TEST(ScalarFastPath, BinaryOpsAgreeWithTheirKernels) {
  int answered = 0;
  for (const std::string& op : kBinaryOps) {
    const runtime::ScalarOp code = runtime::ScalarOpFor(op);
    ASSERT_NE(code, runtime::ScalarOp::kNone) << op;
    for (DType dtype : kDTypes) {
      for (const Tensor& a : Samples(dtype)) {
        for (const Tensor& b : Samples(dtype)) {
          Tensor fast;
          if (!runtime::ComputeScalar(code, a, &b, &fast)) continue;
          ++answered;
          absl::StatusOr<std::vector<Tensor>> kernel = RunOp(op, {a, b});
          ASSERT_TRUE(kernel.ok()) << op << "(" << a.DebugString() << ", " << b.DebugString()
                                   << "): the fast path answered " << fast.DebugString() << ", the kernel failed: "
                                   << kernel.status();
          EXPECT_TRUE(SameTensor(fast, (*kernel)[0]))
              << op << "(" << a.DebugString() << ", " << b.DebugString() << "): fast " << fast.DebugString()
              << ", kernel " << (*kernel)[0].DebugString();
        }
      }
    }
  }
  EXPECT_GT(answered, 300);  // the fast path is not vacuously declining
}

TEST(ScalarFastPath, UnaryOpsAgreeWithTheirKernels) {
  int answered = 0;
  for (const std::string& op : kUnaryOps) {
    const runtime::ScalarOp code = runtime::ScalarOpFor(op);
    for (DType dtype : kDTypes) {
      for (const Tensor& a : Samples(dtype)) {
        Tensor fast;
        if (!runtime::ComputeScalar(code, a, nullptr, &fast)) continue;
        ++answered;
        absl::StatusOr<std::vector<Tensor>> kernel = RunOp(op, {a});
        ASSERT_TRUE(kernel.ok()) << op << "(" << a.DebugString() << "): " << kernel.status();
        EXPECT_TRUE(SameTensor(fast, (*kernel)[0]))
            << op << "(" << a.DebugString() << "): fast " << fast.DebugString() << ", kernel "
            << (*kernel)[0].DebugString();
      }
    }
  }
  EXPECT_GT(answered, 30);
}

TEST(ScalarFastPath, DeclinesWhatOnlyAKernelCanReport) {
  Tensor out;
  const Tensor zero = Tensor::Scalar<int64_t>(0);
  const Tensor seven = Tensor::Scalar<int64_t>(7);
  // Integer division by zero: the kernel's error names the node.
  EXPECT_FALSE(runtime::ComputeScalar(runtime::ScalarOpFor("Div"), seven, &zero, &out));
  EXPECT_FALSE(runtime::ComputeScalar(runtime::ScalarOpFor("Mod"), seven, &zero, &out));
  // Mixed dtypes and non-scalars.
  const Tensor half = Tensor::Scalar<double>(0.5);
  EXPECT_FALSE(runtime::ComputeScalar(runtime::ScalarOpFor("Add"), seven, &half, &out));
  const Tensor vec = Tensor::Vector<int64_t>({1, 2});
  EXPECT_FALSE(runtime::ComputeScalar(runtime::ScalarOpFor("SumToShapeOf"), vec, &seven, &out));
  EXPECT_FALSE(runtime::ComputeScalar(runtime::ScalarOpFor("ZerosLike"), vec, nullptr, &out));
  // An invalid (empty) tensor is the kernel's to report.
  EXPECT_FALSE(runtime::ComputeScalar(runtime::ScalarOpFor("SumToShapeOf"), Tensor(), &seven, &out));
}

}  // namespace
}  // namespace tdf
