// Runs on the GPU through a Session: errors that GPU kernels record on the
// device fail the run that caused them, even when it fetches nothing from
// the GPU. Skipped without a device.
#include <memory>

#include "cuda/gpu_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tdf/builder.h"
#include "tdf/session.h"

namespace tdf {
namespace {

using ::testing::HasSubstr;

TEST(GpuSession, AKernelErrorFailsTheRunThatCausedIt) {
  TDF_SKIP_WITHOUT_GPU();
  GraphBuilder b;
  Output table = b.Const(*Tensor::FromVector<float>({1, 2, 3, 4, 5, 6}, Shape({3, 2})), "table");
  Output index = b.Placeholder("index", DType::kInt64);
  b.Identity(b.Gather(table, index), "row");  // on the GPU; nothing of it is fetched
  Graph g = *b.Build();
  SessionOptions options;
  options.place_tensor_ops_on_gpu = true;
  options.fallback_to_cpu = false;
  absl::StatusOr<std::unique_ptr<Session>> session = Session::Create(g, options);
  ASSERT_TRUE(session.ok()) << session.status();
  absl::StatusOr<std::vector<Tensor>> bad =
      (*session)->Run({{"index", *Tensor::FromVector<int64_t>({0, 7}, Shape({2}))}}, {}, {"row"});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument) << bad.status();
  EXPECT_THAT(bad.status().message(), HasSubstr("out of range"));
  // The error was this run's: the next one is clean.
  absl::StatusOr<std::vector<Tensor>> good =
      (*session)->Run({{"index", *Tensor::FromVector<int64_t>({2, 0}, Shape({2}))}}, {"row"});
  ASSERT_TRUE(good.ok()) << good.status();
  EXPECT_TRUE(kernel_test::TensorEq((*good)[0], *Tensor::FromVector<float>({5, 6, 1, 2}, Shape({2, 2}))));
}

}  // namespace
}  // namespace tdf
