#include <cmath>
#include <random>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/kernel_test_util.h"

namespace tdf {
namespace {

using kernel_test::F32;
using kernel_test::F64;
using kernel_test::I64;
using kernel_test::Run1;
using kernel_test::RunError;
using kernel_test::RunOp;
using kernel_test::TensorNear;
using kernel_test::Values;

TEST(SoftmaxKernel, RowsSumToOneAndMatchDefinition) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<double> dist(-5, 5);
  std::vector<double> x(4 * 6);
  for (double& v : x) v = dist(rng);
  std::vector<double> out = Values<double>(Run1("Softmax", {F64(x, {4, 6})}));
  ASSERT_EQ(out.size(), x.size());
  for (int r = 0; r < 4; ++r) {
    double denom = 0, sum = 0;
    for (int c = 0; c < 6; ++c) denom += std::exp(x[r * 6 + c]);
    for (int c = 0; c < 6; ++c) {
      EXPECT_NEAR(out[r * 6 + c], std::exp(x[r * 6 + c]) / denom, 1e-15);
      sum += out[r * 6 + c];
    }
    EXPECT_NEAR(sum, 1.0, 1e-14);
  }
}

TEST(SoftmaxKernel, StableForLargeLogits) {
  std::vector<double> out = Values<double>(Run1("Softmax", {F64({1000, 1000, -1000}, {3})}));
  EXPECT_NEAR(out[0], 0.5, 1e-15);
  EXPECT_NEAR(out[1], 0.5, 1e-15);
  EXPECT_EQ(out[2], 0.0);
  std::vector<float> f = Values<float>(Run1("Softmax", {F32({100, 0}, {1, 2})}));
  EXPECT_NEAR(f[0], 1.0f, 1e-6);
}

TEST(SoftmaxKernel, Errors) {
  EXPECT_EQ(RunError("Softmax", {Tensor::Scalar<double>(1)}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RunError("Softmax", {I64({1, 2}, {2})}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Run1("Softmax", {F64({}, {2, 0})}).shape(), Shape({2, 0}));
}

TEST(SoftmaxCrossEntropyKernel, LossAndBackprop) {
  const std::vector<double> logits = {1, 2, 3, 0.5, 0.5, -1};
  const std::vector<double> labels = {0, 0, 1, 0.25, 0.75, 0};
  absl::StatusOr<std::vector<Tensor>> out =
      RunOp("SoftmaxCrossEntropy", {F64(logits, {2, 3}), F64(labels, {2, 3})}, {}, 2);
  ASSERT_TRUE(out.ok()) << out.status();
  const Tensor& loss = (*out)[0];
  const Tensor& backprop = (*out)[1];
  ASSERT_EQ(loss.shape(), Shape({2}));
  ASSERT_EQ(backprop.shape(), Shape({2, 3}));
  std::vector<double> want_loss, want_bp;
  for (int r = 0; r < 2; ++r) {
    double denom = 0;
    for (int c = 0; c < 3; ++c) denom += std::exp(logits[r * 3 + c]);
    double l = 0;
    for (int c = 0; c < 3; ++c) {
      const double p = std::exp(logits[r * 3 + c]) / denom;
      l -= labels[r * 3 + c] * std::log(p);
      want_bp.push_back(p - labels[r * 3 + c]);
    }
    want_loss.push_back(l);
  }
  EXPECT_TRUE(TensorNear(loss, F64(want_loss, {2}), 1e-14));
  EXPECT_TRUE(TensorNear(backprop, F64(want_bp, {2, 3}), 1e-14));
  // The first row's loss is -log(softmax(3)) = log(e + e^2 + e^3) - 3.
  EXPECT_NEAR(Values<double>(loss)[0], std::log(std::exp(1) + std::exp(2) + std::exp(3)) - 3, 1e-14);
}

TEST(SoftmaxCrossEntropyKernel, StableForExtremeLogits) {
  absl::StatusOr<std::vector<Tensor>> out =
      RunOp("SoftmaxCrossEntropy", {F64({1000, -1000}, {1, 2}), F64({1, 0}, {1, 2})}, {}, 2);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_NEAR(Values<double>((*out)[0])[0], 0.0, 1e-12);
  EXPECT_FALSE(std::isnan(Values<double>((*out)[1])[1]));
}

TEST(SoftmaxCrossEntropyKernel, Errors) {
  EXPECT_EQ(RunError("SoftmaxCrossEntropy", {F64({1, 2}, {1, 2}), F64({1, 0, 0}, {1, 3})}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RunError("SoftmaxCrossEntropy", {F64({1, 2}, {1, 2}), F32({1, 0}, {1, 2})}).code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tdf
