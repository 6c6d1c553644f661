// The lean firings compute two-input scalar ops through kBinaryScalarFns,
// ComputeScalar specialised per op with a shortcut for two int64 scalars.
// Differential: for every op, dtype pair and a spread of values (overflow,
// division by zero, INT_MIN / -1, NaN), the table gives what the general
// ComputeScalar gives: the same refusal or the same tensor.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/scalar_ops.h"
#include "tdf/tensor.h"

namespace tdf {
namespace runtime {
namespace {

std::vector<Tensor> Values() {
  std::vector<Tensor> v;
  for (int64_t x : {int64_t{0}, int64_t{1}, int64_t{-1}, int64_t{7}, int64_t{-13},
                    std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min()})
    v.push_back(Tensor::Scalar<int64_t>(x));
  for (int32_t x : {0, 1, -1, 5, std::numeric_limits<int32_t>::min()}) v.push_back(Tensor::Scalar<int32_t>(x));
  for (double x : {0.0, 1.5, -2.25, std::nan("")}) v.push_back(Tensor::Scalar<double>(x));
  for (float x : {0.0f, 3.0f, -0.5f}) v.push_back(Tensor::Scalar<float>(x));
  for (bool x : {false, true}) v.push_back(Tensor::Scalar<bool>(x));
  v.push_back(Tensor());  // invalid: both must refuse or agree
  return v;
}

// Same dtype and the same bits (NaN results compare equal to themselves).
bool SameTensor(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.valid() != b.valid()) return false;
  if (!a.valid()) return true;
  switch (a.dtype()) {
    case DType::kInt64: return a.scalar<int64_t>() == b.scalar<int64_t>();
    case DType::kInt32: return a.scalar<int32_t>() == b.scalar<int32_t>();
    case DType::kBool: return a.scalar<bool>() == b.scalar<bool>();
    case DType::kFloat64: {
      const double x = a.scalar<double>(), y = b.scalar<double>();
      return x == y || (std::isnan(x) && std::isnan(y));
    }
    case DType::kFloat32: {
      const float x = a.scalar<float>(), y = b.scalar<float>();
      return x == y || (std::isnan(x) && std::isnan(y));
    }
    default: return false;
  }
}

TEST(ScalarOps, PerOpTableMatchesTheGeneralFunction) {
  const std::vector<Tensor> values = Values();
  int64_t computed = 0;
  for (int op = 0; op <= static_cast<int>(ScalarOp::kOnesLike); ++op) {
    const ScalarOp scalar_op = static_cast<ScalarOp>(op);
    for (const Tensor& a : values) {
      for (const Tensor& b : values) {
        SCOPED_TRACE(absl::StrCat("op ", op, " a ", a.DebugString(), " b ", b.DebugString()));
        Tensor general, table;
        const bool general_ok = ComputeScalar(scalar_op, a, &b, &general);
        const bool table_ok = ComputeScalarBinary(scalar_op, a, b, &table);
        ASSERT_EQ(table_ok, general_ok);
        if (general_ok) {
          ++computed;
          EXPECT_TRUE(SameTensor(table, general)) << table.DebugString() << " vs " << general.DebugString();
        }
      }
    }
  }
  EXPECT_GT(computed, 500);  // the comparison covered real results, not only refusals
}

TEST(ScalarOps, Int64ShortcutWrapsAndRefusesLikeTheKernels) {
  const Tensor min = Tensor::Scalar<int64_t>(std::numeric_limits<int64_t>::min());
  const Tensor max = Tensor::Scalar<int64_t>(std::numeric_limits<int64_t>::max());
  const Tensor one = Tensor::Scalar<int64_t>(1);
  const Tensor zero = Tensor::Scalar<int64_t>(0);
  const Tensor minus_one = Tensor::Scalar<int64_t>(-1);
  Tensor out;
  ASSERT_TRUE(ComputeScalarBinary(ScalarOp::kAdd, max, one, &out));
  EXPECT_EQ(out.scalar<int64_t>(), std::numeric_limits<int64_t>::min());
  ASSERT_TRUE(ComputeScalarBinary(ScalarOp::kDiv, min, minus_one, &out));
  EXPECT_EQ(out.scalar<int64_t>(), std::numeric_limits<int64_t>::min());
  EXPECT_FALSE(ComputeScalarBinary(ScalarOp::kDiv, one, zero, &out));  // the kernel reports it
  EXPECT_FALSE(ComputeScalarBinary(ScalarOp::kMod, one, zero, &out));
  ASSERT_TRUE(ComputeScalarBinary(ScalarOp::kLessEqual, one, max, &out));
  EXPECT_EQ(out.dtype(), DType::kBool);
  EXPECT_TRUE(out.scalar<bool>());
  // Mixed dtypes are the kernel's to report.
  EXPECT_FALSE(ComputeScalarBinary(ScalarOp::kAdd, one, Tensor::Scalar<int32_t>(1), &out));
}

}  // namespace
}  // namespace runtime
}  // namespace tdf
