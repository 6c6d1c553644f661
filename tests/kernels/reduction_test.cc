#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/kernel_test_util.h"

namespace tdf {
namespace {

using kernel_test::F64;
using kernel_test::I32;
using kernel_test::I64;
using kernel_test::Run1;
using kernel_test::RunError;
using kernel_test::TensorEq;
using kernel_test::TensorNear;
using kernel_test::Values;
using ::testing::HasSubstr;

AttrMap Axes(std::vector<int64_t> axes, bool keep_dims = false) {
  return {{"axes", std::move(axes)}, {"keep_dims", keep_dims}};
}

// Naive reduction of a rank-3 tensor over the flagged dims.
std::vector<double> NaiveReduce(const std::vector<double>& x, const int64_t (&dims)[3], const bool (&red)[3],
                                bool max, bool mean) {
  int64_t od[3];
  for (int i = 0; i < 3; ++i) od[i] = red[i] ? 1 : dims[i];
  std::vector<double> out(od[0] * od[1] * od[2], max ? -INFINITY : 0.0);
  for (int64_t i = 0; i < dims[0]; ++i)
    for (int64_t j = 0; j < dims[1]; ++j)
      for (int64_t k = 0; k < dims[2]; ++k) {
        const double v = x[(i * dims[1] + j) * dims[2] + k];
        const int64_t o = ((red[0] ? 0 : i) * od[1] + (red[1] ? 0 : j)) * od[2] + (red[2] ? 0 : k);
        out[o] = max ? std::max(out[o], v) : out[o] + v;
      }
  if (mean) {
    int64_t count = 1;
    for (int i = 0; i < 3; ++i)
      if (red[i]) count *= dims[i];
    for (double& v : out) v /= count;
  }
  return out;
}

TEST(ReduceKernel, AllAxesWhenAbsent) {
  Tensor x = F64({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_TRUE(TensorEq(Run1("Sum", {x}), Tensor::Scalar<double>(21)));
  EXPECT_TRUE(TensorEq(Run1("Mean", {x}), Tensor::Scalar<double>(3.5)));
  EXPECT_TRUE(TensorEq(Run1("Max", {x}), Tensor::Scalar<double>(6)));
  EXPECT_TRUE(TensorEq(Run1("Sum", {x}, {{"keep_dims", true}}), F64({21}, {1, 1})));
}

TEST(ReduceKernel, SingleAxesAndNegativeAxes) {
  Tensor x = I64({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_TRUE(TensorEq(Run1("Sum", {x}, Axes({0})), I64({5, 7, 9}, {3})));
  EXPECT_TRUE(TensorEq(Run1("Sum", {x}, Axes({1})), I64({6, 15}, {2})));
  EXPECT_TRUE(TensorEq(Run1("Sum", {x}, Axes({-1}, true)), I64({6, 15}, {2, 1})));
  EXPECT_TRUE(TensorEq(Run1("Max", {x}, Axes({-2})), I64({4, 5, 6}, {3})));
  EXPECT_TRUE(TensorEq(Run1("Mean", {x}, Axes({1})), I64({2, 5}, {2})));  // integer mean truncates
  EXPECT_TRUE(TensorEq(Run1("Sum", {x}, Axes({})), x));                   // no axes: nothing reduced
}

TEST(ReduceKernel, MatchesNaiveLoopsForEveryAxisSet) {
  const int64_t dims[3] = {3, 4, 5};
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> dist(-10, 10);
  std::vector<double> x(60);
  for (double& v : x) v = dist(rng);
  Tensor t = F64(x, {3, 4, 5});
  for (int mask = 0; mask < 8; ++mask) {
    const bool red[3] = {(mask & 1) != 0, (mask & 2) != 0, (mask & 4) != 0};
    std::vector<int64_t> axes;
    for (int i = 0; i < 3; ++i)
      if (red[i]) axes.push_back(i);
    Shape keep_shape;
    for (int i = 0; i < 3; ++i) keep_shape.AddDim(red[i] ? 1 : dims[i]);
    for (const char* op : {"Sum", "Mean", "Max"}) {
      const bool is_max = std::string(op) == "Max", is_mean = std::string(op) == "Mean";
      Tensor want = F64(NaiveReduce(x, dims, red, is_max, is_mean), keep_shape);
      EXPECT_TRUE(TensorNear(Run1(op, {t}, Axes(axes, true)), want, 1e-12)) << op << " mask " << mask;
      Tensor flat = Run1(op, {t}, Axes(axes, false));
      EXPECT_EQ(flat.rank(), 3 - static_cast<int>(axes.size())) << op << " mask " << mask;
      EXPECT_EQ(Values<double>(flat), Values<double>(Run1(op, {t}, Axes(axes, true)))) << op << " mask " << mask;
    }
  }
}

TEST(ReduceKernel, Float32AndInt32) {
  Tensor x = kernel_test::F32({1, 2, 3, 4}, {2, 2});
  EXPECT_TRUE(TensorNear(Run1("Mean", {x}, Axes({1})), kernel_test::F32({1.5f, 3.5f}, {2}), 1e-6));
  EXPECT_TRUE(TensorNear(Run1("Max", {x}, Axes({0})), kernel_test::F32({3, 4}, {2}), 0));
  EXPECT_TRUE(TensorEq(Run1("Sum", {I32({1, 2, 3, 4}, {2, 2})}, Axes({1})), I32({3, 7}, {2})));
}

TEST(ReduceKernel, SizeOneDimsAndDuplicateAxes) {
  Tensor x = F64({1, 2, 3, 4}, {2, 1, 2});
  EXPECT_TRUE(TensorEq(Run1("Sum", {x}, Axes({0, 2})), F64({10}, {1})));
  EXPECT_TRUE(TensorEq(Run1("Sum", {x}, Axes({1})), F64({1, 2, 3, 4}, {2, 2})));
  EXPECT_TRUE(TensorEq(Run1("Sum", {x}, Axes({2, -1})), F64({3, 7}, {2, 1})));
}

TEST(ReduceKernel, Scalars) {
  EXPECT_TRUE(TensorEq(Run1("Sum", {Tensor::Scalar<int64_t>(5)}), Tensor::Scalar<int64_t>(5)));
  EXPECT_TRUE(TensorEq(Run1("Mean", {Tensor::Scalar<double>(2.5)}), Tensor::Scalar<double>(2.5)));
  EXPECT_EQ(RunError("Sum", {Tensor::Scalar<int64_t>(5)}, Axes({0})).code(), absl::StatusCode::kInvalidArgument);
}

TEST(ReduceKernel, EmptyTensors) {
  Tensor x = F64({}, {0, 3});
  EXPECT_TRUE(TensorEq(Run1("Sum", {x}, Axes({0})), F64({0, 0, 0}, {3})));
  EXPECT_EQ(Run1("Sum", {x}, Axes({1})).shape(), Shape({0}));
  EXPECT_EQ(Values<double>(Run1("Max", {x}, Axes({0})))[0], -INFINITY);
  EXPECT_TRUE(std::isnan(Run1("Mean", {x}).scalar<double>()));
  EXPECT_THAT(RunError("Mean", {I64({}, {0})}).message(), HasSubstr("zero elements"));
  EXPECT_TRUE(TensorEq(Run1("Max", {I32({}, {0})}), Tensor::Scalar<int32_t>(std::numeric_limits<int32_t>::min())));
}

TEST(ReduceKernel, Errors) {
  Tensor x = F64({1, 2}, {2});
  absl::Status s = RunError("Sum", {x}, Axes({1}));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("axis 1"));
  EXPECT_EQ(RunError("Sum", {kernel_test::B({true}, {1})}).code(), absl::StatusCode::kInvalidArgument);
}

TEST(SumToShapeOfKernel, UndoesBroadcasting) {
  Tensor g = F64({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_TRUE(TensorEq(Run1("SumToShapeOf", {g, F64({0, 0, 0}, {3})}), F64({5, 7, 9}, {3})));
  EXPECT_TRUE(TensorEq(Run1("SumToShapeOf", {g, F64({0, 0}, {2, 1})}), F64({6, 15}, {2, 1})));
  EXPECT_TRUE(TensorEq(Run1("SumToShapeOf", {g, F64({0, 0, 0}, {1, 3})}), F64({5, 7, 9}, {1, 3})));
  EXPECT_TRUE(TensorEq(Run1("SumToShapeOf", {g, Tensor::Scalar<double>(0)}), Tensor::Scalar<double>(21)));
  EXPECT_EQ(Run1("SumToShapeOf", {g, g}).buffer(), g.buffer());
  EXPECT_TRUE(TensorEq(Run1("SumToShapeOf", {Tensor::Scalar<int64_t>(4), Tensor::Scalar<int64_t>(0)}),
                       Tensor::Scalar<int64_t>(4)));
  // like has extra leading 1s.
  EXPECT_TRUE(TensorEq(Run1("SumToShapeOf", {F64({1, 2}, {2}), F64({0}, {1, 1})}), F64({3}, {1, 1})));
  absl::Status s = RunError("SumToShapeOf", {g, F64({0, 0}, {2})});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("[2,3]"));
}

}  // namespace
}  // namespace tdf
