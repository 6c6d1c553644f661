// Runs on the GPU through a Session: errors that GPU kernels record on the
// device fail the run that caused them (and no other run in flight), even
// when it fetches nothing from the GPU, naming the node and tag of the
// launch. Skipped without a device.
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "cuda/gpu_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tdf/builder.h"
#include "tdf/session.h"

namespace tdf {
namespace {

using ::testing::AnyOf;
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

// sum over j < n of table[idx[j]] (rows of a GPU table, one Gather per
// iteration, named "row_gather", in the While loop "rows").
Graph RowsInLoop() {
  GraphBuilder b;
  Output table = b.Const(*Tensor::FromVector<float>({1, 2, 3, 4, 5, 6}, Shape({3, 2})), "table");
  Output idx = b.Placeholder("idx", DType::kInt64);
  Output n = b.Placeholder("n", DType::kInt64);
  WhileOptions o;
  o.name = "rows";
  std::vector<Output> out = b.While(
      [&](const std::vector<Output>& v) { return b.Less(v[0], n); },
      [&](const std::vector<Output>& v) {
        Output row = b.Op("Gather", {table, b.Gather(idx, v[0])}, {{"axis", int64_t{0}}}, "row_gather");
        return std::vector<Output>{b.Add(v[0], b.Const<int64_t>(1)), b.Add(v[1], row)};
      },
      {b.Const<int64_t>(0), b.Const(*Tensor::FromVector<float>({0, 0}, Shape({2})))}, o);
  b.Identity(out[1], "sum");
  return *b.Build();
}

std::unique_ptr<Session> GpuSessionFor(const Graph& g) {
  SessionOptions options;
  options.place_tensor_ops_on_gpu = true;
  options.fallback_to_cpu = false;
  absl::StatusOr<std::unique_ptr<Session>> session = Session::Create(g, options);
  EXPECT_TRUE(session.ok()) << session.status();
  return session.ok() ? std::move(*session) : nullptr;
}

absl::Status RunRows(Session* s, const std::vector<int64_t>& idx) {
  return s
      ->Run({{"idx", Tensor::Vector<int64_t>(idx)}, {"n", Tensor::Scalar<int64_t>(static_cast<int64_t>(idx.size()))}},
            {"sum"})
      .status();
}

TEST(GpuSession, AKernelErrorNamesTheNodeAndTagThatLaunchedIt) {
  TDF_SKIP_WITHOUT_GPU();
  std::unique_ptr<Session> s = GpuSessionFor(RowsInLoop());
  ASSERT_NE(s, nullptr);
  // The device finds the bad index; the run's end names the launch.
  absl::Status bad = RunRows(s.get(), {0, 1, 2, 9, 1});
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument) << bad;
  EXPECT_THAT(std::string(bad.message()),
              HasSubstr("node 'row_gather' (Gather) at tag [3, rows]: Gather: an index is out of range"));
  // Two bad launches: the first in stream order is named, the other counted.
  // Iterations overlap (parallel_iterations), so either may launch first.
  bad = RunRows(s.get(), {0, 7, 2, 9});
  EXPECT_THAT(std::string(bad.message()), AnyOf(HasSubstr("node 'row_gather' (Gather) at tag [1, rows]: "),
                                                HasSubstr("node 'row_gather' (Gather) at tag [3, rows]: ")));
  EXPECT_THAT(std::string(bad.message()), HasSubstr("(and 1 later checked launch(es))"));
  EXPECT_TRUE(RunRows(s.get(), {2, 0, 1}).ok());
}

TEST(GpuSession, AKernelErrorIsNamedPastAFullRingOfErrorWords) {
  TDF_SKIP_WITHOUT_GPU();
  std::unique_ptr<Session> s = GpuSessionFor(RowsInLoop());
  ASSERT_NE(s, nullptr);
  // More checked launches in one run than the device has error words: the
  // ring is read back when full, before the bad launch (4500) or after it
  // (100, reported when the run ends).
  constexpr int kLaunches = 5000;  // > CudaDevice::kErrorWords (4096)
  for (int at : {100, 4500}) {
    std::vector<int64_t> idx(kLaunches, 1);
    idx[at] = -1;
    absl::Status bad = RunRows(s.get(), idx);
    EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(std::string(bad.message()), HasSubstr(absl::StrCat("node 'row_gather' (Gather) at tag [", at, ", rows]: ")));
  }
  EXPECT_TRUE(RunRows(s.get(), std::vector<int64_t>(kLaunches, 2)).ok());
}

TEST(GpuSession, RunsInFlightAtOnceEachGetTheirOwnKernelErrors) {
  TDF_SKIP_WITHOUT_GPU();
  std::unique_ptr<Session> s = GpuSessionFor(RowsInLoop());
  ASSERT_NE(s, nullptr);
  // Threads run at once on one device; half their runs have a bad index.
  // Each bad run fails, naming its launch; no good run fails for it.
  constexpr int kThreads = 6, kRuns = 12;
  std::vector<std::string> failures(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int r = 0; r < kRuns; ++r) {
        const bool bad = (t + r) % 2 == 0;
        std::vector<int64_t> idx(40, (t + r) % 3);
        if (bad) idx[17] = 3;
        const absl::Status status = RunRows(s.get(), idx);
        const bool named = absl::StrContains(status.message(), "node 'row_gather' (Gather) at tag [17, rows]: ");
        if (bad != !status.ok() || (bad && !named))
          failures[t] += absl::StrCat("thread ", t, " run ", r, (bad ? " (bad)" : " (good)"), ": ",
                                      status.ToString(), "\n");
      }
    });
  }
  for (std::thread& th : threads) th.join();
  for (const std::string& f : failures) EXPECT_EQ(f, "");
}

}  // namespace
}  // namespace tdf
