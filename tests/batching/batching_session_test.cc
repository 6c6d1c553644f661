// Batching across tags in a Session (SessionOptions::batching, design.md
// §9): results equal the unbatched run's (the TreeRNN's forward, loss,
// gradients and SGD steps at 1, 2 and 8 workers), a single tag runs without
// a batch, dead instances never batch, instances of different shapes go to
// different batches, and errors of a batched node name an instance's tag.
#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tdf/builder.h"
#include "tdf/session.h"
#include "treebank.h"
#include "treernn.h"

namespace tdf {
namespace {

using ::testing::HasSubstr;

// ---- TreeRNN: batched equals unbatched -----------------------------------

tdf_treernn::ModelConfig SmallConfig(int vocabulary) {
  tdf_treernn::ModelConfig c;
  c.vocabulary_size = vocabulary;
  c.embedding = 6;
  c.hidden = 4;
  c.dtype = DType::kFloat64;
  c.learning_rate = 0.1;
  return c;
}

class BatchedTreeRnnTest : public ::testing::TestWithParam<int> {};

TEST_P(BatchedTreeRnnTest, TrainingAndInferenceEqualUnbatched) {
  using namespace tdf_treernn;  // NOLINT(build/namespaces)
  const int workers = GetParam();
  Vocabulary vocab;
  GeneratorOptions gen;
  gen.vocabulary_size = 30;
  gen.mean_length = 7;
  gen.stddev_length = 3;
  gen.min_length = 1;
  gen.max_length = 14;
  const std::vector<Tree> trees = GenerateTrees(24, gen, &vocab);
  const ModelConfig c = SmallConfig(vocab.size());
  const Parameters init = InitParameters(c);
  constexpr int kBatch = 6;
  for (bool train : {true, false}) {
    SCOPED_TRACE(absl::StrCat(train ? "training" : "inference", ", ", workers, " workers"));
    absl::StatusOr<std::unique_ptr<Model>> plain = Model::Create(Impl::kRecursion, c, init, kBatch, train, workers);
    absl::StatusOr<std::unique_ptr<Model>> batched =
        Model::Create(Impl::kBatchedRecursion, c, init, kBatch, train, workers);
    ASSERT_TRUE(plain.ok()) << plain.status();
    ASSERT_TRUE(batched.ok()) << batched.status();
    int64_t batched_firings = 0;
    for (int step = 0; step < 4; ++step) {
      Batch batch;
      for (int k = 0; k < kBatch; ++k) batch.push_back(&trees[step * kBatch + k]);
      absl::StatusOr<PreparedBatch> p1 = (*plain)->Prepare(batch);
      absl::StatusOr<PreparedBatch> p2 = (*batched)->Prepare(batch);
      ASSERT_TRUE(p1.ok() && p2.ok());
      absl::StatusOr<double> want = (*plain)->Run(*p1);
      absl::StatusOr<double> got = (*batched)->Run(*p2);
      ASSERT_TRUE(want.ok()) << want.status();
      ASSERT_TRUE(got.ok()) << got.status();
      EXPECT_NEAR(*got, *want, 1e-12 * std::max(1.0, std::abs(*want))) << "step " << step;
      const RunStats& s = (*batched)->last_stats();
      EXPECT_EQ(s.live_frames_after_run, 0);
      // Every instance still counts as a firing: the same counts as unbatched.
      EXPECT_EQ(s.firings_by_op, (*plain)->last_stats().firings_by_op);
      EXPECT_EQ((*plain)->last_stats().batched_firings, 0);
      batched_firings += s.batched_firings;
      if (s.batched_firings > 0) {
        EXPECT_GT(s.mean_batch_size(), 1.0);
        int64_t in_histogram = 0;
        for (int64_t h : s.batch_size_histogram) in_histogram += h;
        EXPECT_EQ(in_histogram, s.batched_firings);
        EXPECT_EQ(s.batch_size_histogram[0], 0);
      }
    }
    // Six trees per run: their nodes' MatMuls, Tanhs, Adds... batch.
    EXPECT_GT(batched_firings, 0);
    if (train) {
      absl::StatusOr<Parameters> a = (*plain)->ReadParameters();
      absl::StatusOr<Parameters> b = (*batched)->ReadParameters();
      ASSERT_TRUE(a.ok() && b.ok());
      EXPECT_LE(MaxRelativeDifference(*b, *a), 1e-12);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Workers, BatchedTreeRnnTest, ::testing::Values(1, 2, 8));

// ---- small graphs ---------------------------------------------------------

SessionOptions Batching(int workers = 1) {
  SessionOptions o;
  o.batching = true;
  o.num_workers = workers;
  return o;
}

// Counts observed firings per op, batched (FiringEvent::batch > 0) or not.
class OpCounter : public ExecutionObserver {
 public:
  void OnFiring(const FiringEvent& e) override {
    absl::MutexLock lock(&mu_);
    Counts& c = counts_[*e.op];
    if (e.dead) {
      ++c.dead;
      if (e.batch > 0) ++c.dead_batched;
    } else if (e.batch > 0) {
      ++c.batched;
    } else {
      ++c.alone;
    }
  }
  struct Counts {
    int alone = 0, batched = 0, dead = 0, dead_batched = 0;
  };
  Counts Get(const std::string& op) {
    absl::MutexLock lock(&mu_);
    return counts_[op];
  }

 private:
  absl::Mutex mu_;
  std::map<std::string, Counts> counts_;
};

Tensor Matrix(int64_t rows, int64_t cols, double start) {
  std::vector<double> v(rows * cols);
  for (size_t i = 0; i < v.size(); ++i) v[i] = start + 0.01 * static_cast<double>(i);
  return *Tensor::FromVector<double>(v, Shape({rows, cols}));
}

// f(x, W, p) = p ? tanh(x W) : tanh(x); main calls it once per input.
Graph CondGraph(int calls) {
  GraphBuilder b;
  absl::Status s = b.DefineFunction(
      {"f", {{"x", DType::kFloat64}, {"W", DType::kFloat64}, {"p", DType::kBool}}, {{"y", DType::kFloat64}}},
      [](GraphBuilder& f, const std::vector<Output>& a) -> std::vector<Output> {
        return f.Cond(
            a[2], [&] { return std::vector<Output>{f.Tanh(f.MatMul(a[0], a[1]))}; },
            [&] { return std::vector<Output>{f.Tanh(a[0])}; });
      });
  EXPECT_TRUE(s.ok()) << s;
  Output W = b.Placeholder("W", DType::kFloat64);
  for (int k = 0; k < calls; ++k) {
    b.Identity(b.Call("f", {b.Placeholder(absl::StrCat("x", k), DType::kFloat64), W,
                            b.Placeholder(absl::StrCat("p", k), DType::kBool)})[0],
               absl::StrCat("y", k));
  }
  return *b.Build();
}

TEST(BatchingSession, DeadInstancesNeverBatch) {
  constexpr int kCalls = 8;
  for (bool skip_dead : {true, false}) {
    SCOPED_TRACE(absl::StrCat("skip_dead_branches ", skip_dead));
    OpCounter counter;
    SessionOptions o = Batching();
    o.skip_dead_branches = skip_dead;
    o.observer = &counter;
    absl::StatusOr<std::unique_ptr<Session>> session = Session::Create(CondGraph(kCalls), o);
    ASSERT_TRUE(session.ok()) << session.status();
    std::vector<std::pair<std::string, Tensor>> feeds = {{"W", Matrix(3, 3, -0.1)}};
    std::vector<std::string> fetches;
    for (int k = 0; k < kCalls; ++k) {
      feeds.emplace_back(absl::StrCat("x", k), Matrix(1, 3, 0.1 * k));
      feeds.emplace_back(absl::StrCat("p", k), Tensor::Scalar<bool>(k < 3));  // 3 MatMuls, 5 plain Tanhs
      fetches.push_back(absl::StrCat("y", k));
    }
    RunStats stats;
    absl::StatusOr<std::vector<Tensor>> out = (*session)->Run(feeds, fetches, {}, &stats);
    ASSERT_TRUE(out.ok()) << out.status();
    // The MatMul fired live exactly for the three taken branches, as one batch.
    EXPECT_EQ(stats.firings_by_op["MatMul"].first, 3);
    const OpCounter::Counts mm = counter.Get("MatMul");
    EXPECT_EQ(mm.batched, 3);
    EXPECT_EQ(mm.alone, 0);
    EXPECT_EQ(mm.dead_batched, 0);
    EXPECT_EQ(mm.dead, skip_dead ? 0 : 5);
    EXPECT_EQ(counter.Get("Tanh").dead_batched, 0);
    // MatMul x3, Tanh x3 after it, Tanh x5 on the other branch.
    EXPECT_EQ(stats.batched_instances, 11);
    EXPECT_EQ(stats.batched_firings, 3);
    // And the values are the unbatched ones.
    SessionOptions plain_options;
    plain_options.skip_dead_branches = skip_dead;
    absl::StatusOr<std::unique_ptr<Session>> plain = Session::Create(CondGraph(kCalls), plain_options);
    ASSERT_TRUE(plain.ok());
    absl::StatusOr<std::vector<Tensor>> want = (*plain)->Run(feeds, fetches, {});
    ASSERT_TRUE(want.ok());
    for (int k = 0; k < kCalls; ++k) EXPECT_TRUE((*out)[k].Equals((*want)[k])) << k;
  }
}

// f(x, W, b) = tanh(x W + b) per call: the Add takes the MatMul's batched
// output and the Tanh the Add's as they lie (RunStats counts the inputs
// taken without a copy), whatever order the instances became ready in.
TEST(BatchingSession, ChainedBatchedOpsTakeTheirInputsWithoutACopy) {
  constexpr int kCalls = 8;
  GraphBuilder b;
  absl::Status s = b.DefineFunction(
      {"f", {{"x", DType::kFloat64}, {"W", DType::kFloat64}, {"b", DType::kFloat64}}, {{"y", DType::kFloat64}}},
      [](GraphBuilder& f, const std::vector<Output>& a) -> std::vector<Output> {
        return {f.Tanh(f.Add(f.MatMul(a[0], a[1]), a[2]))};
      });
  ASSERT_TRUE(s.ok()) << s;
  Output W = b.Placeholder("W", DType::kFloat64);
  Output bias = b.Placeholder("b", DType::kFloat64);
  std::vector<std::pair<std::string, Tensor>> feeds = {{"W", Matrix(3, 4, -0.1)}, {"b", Matrix(1, 4, 0.3)}};
  std::vector<std::string> fetches;
  for (int k = 0; k < kCalls; ++k) {
    b.Identity(b.Call("f", {b.Placeholder(absl::StrCat("x", k), DType::kFloat64), W, bias})[0], absl::StrCat("y", k));
    feeds.emplace_back(absl::StrCat("x", k), Matrix(1, 3, 0.1 * k));
    fetches.push_back(absl::StrCat("y", k));
  }
  const Graph g = *b.Build();
  absl::StatusOr<std::unique_ptr<Session>> batched = Session::Create(g, Batching());
  absl::StatusOr<std::unique_ptr<Session>> plain = Session::Create(g, SessionOptions());
  ASSERT_TRUE(batched.ok()) << batched.status();
  ASSERT_TRUE(plain.ok()) << plain.status();
  RunStats stats;
  absl::StatusOr<std::vector<Tensor>> out = (*batched)->Run(feeds, fetches, {}, &stats);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(stats.batched_firings, 3);
  EXPECT_EQ(stats.batched_instances, 3 * kCalls);
  EXPECT_EQ(stats.batched_inputs_without_copy, 2);  // the Add's x W, the Tanh's sum; not the fed x
  absl::StatusOr<std::vector<Tensor>> want = (*plain)->Run(feeds, fetches, {});
  ASSERT_TRUE(want.ok()) << want.status();
  for (int k = 0; k < kCalls; ++k) EXPECT_TRUE((*out)[k].Equals((*want)[k])) << k;
}

TEST(BatchingSession, SingleTagFiresAloneWithoutWaiting) {
  // One call: every deferred instance fires as soon as the worker has
  // nothing else, alone (no batch), even with deferral bounds that would
  // otherwise never be reached.
  SessionOptions o = Batching();
  o.batch_max_size = 1 << 20;
  o.batch_max_deferral = int64_t{1} << 60;
  absl::StatusOr<std::unique_ptr<Session>> session = Session::Create(CondGraph(1), o);
  ASSERT_TRUE(session.ok()) << session.status();
  RunStats stats;
  absl::StatusOr<std::vector<Tensor>> out = (*session)->Run(
      {{"W", Matrix(3, 3, -0.1)}, {"x0", Matrix(1, 3, 0.2)}, {"p0", Tensor::Scalar<bool>(true)}}, {"y0"}, {}, &stats);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(stats.batched_firings, 0);
  EXPECT_EQ(stats.firings_by_op["MatMul"].first, 1);
  EXPECT_EQ(stats.live_frames_after_run, 0);
}

// g(x) = tanh(x) for inputs of two shapes: two buckets.
TEST(BatchingSession, MixedShapesSplitIntoSeparateBatches) {
  GraphBuilder b;
  ASSERT_TRUE(b.DefineFunction({"g", {{"x", DType::kFloat64}}, {{"y", DType::kFloat64}}},
                               [](GraphBuilder& f, const std::vector<Output>& a) -> std::vector<Output> {
                                 return {f.Tanh(a[0])};
                               })
                  .ok());
  std::vector<std::pair<std::string, Tensor>> feeds;
  std::vector<std::string> fetches;
  for (int k = 0; k < 5; ++k) {
    b.Identity(b.Call("g", {b.Placeholder(absl::StrCat("x", k), DType::kFloat64)})[0], absl::StrCat("y", k));
    feeds.emplace_back(absl::StrCat("x", k), k < 3 ? Matrix(2, 3, 0.1 * k) : Matrix(4, 3, -0.1 * k));
    fetches.push_back(absl::StrCat("y", k));
  }
  Graph graph = *b.Build();
  for (int workers : {1, 2}) {
    absl::StatusOr<std::unique_ptr<Session>> session = Session::Create(graph, Batching(workers));
    ASSERT_TRUE(session.ok()) << session.status();
    RunStats stats;
    absl::StatusOr<std::vector<Tensor>> out = (*session)->Run(feeds, fetches, {}, &stats);
    ASSERT_TRUE(out.ok()) << out.status();
    for (int k = 0; k < 5; ++k) {
      const Tensor& x = feeds[k].second;
      ASSERT_EQ((*out)[k].shape(), x.shape());
      for (int64_t i = 0; i < x.num_elements(); ++i)
        EXPECT_DOUBLE_EQ((*out)[k].data<double>()[i], std::tanh(x.data<double>()[i]));
    }
    if (workers == 1) {
      // A [2, 3] batch of 3 and a [4, 3] batch of 2: never one of 5.
      EXPECT_EQ(stats.batched_firings, 2);
      EXPECT_EQ(stats.batched_instances, 5);
      ASSERT_EQ(stats.batch_size_histogram.size(), 2u);
      EXPECT_EQ(stats.batch_size_histogram[1], 2);  // sizes 2 and 3
    }
  }
}

TEST(BatchingSession, MaxBatchSizeBoundsBatches) {
  GraphBuilder b;
  ASSERT_TRUE(b.DefineFunction({"g", {{"x", DType::kFloat64}}, {{"y", DType::kFloat64}}},
                               [](GraphBuilder& f, const std::vector<Output>& a) -> std::vector<Output> {
                                 return {f.Tanh(a[0])};
                               })
                  .ok());
  std::vector<std::pair<std::string, Tensor>> feeds;
  std::vector<std::string> fetches;
  for (int k = 0; k < 10; ++k) {
    b.Identity(b.Call("g", {b.Placeholder(absl::StrCat("x", k), DType::kFloat64)})[0], absl::StrCat("y", k));
    feeds.emplace_back(absl::StrCat("x", k), Matrix(1, 3, 0.1 * k));
    fetches.push_back(absl::StrCat("y", k));
  }
  SessionOptions o = Batching();
  o.batch_max_size = 4;
  absl::StatusOr<std::unique_ptr<Session>> session = Session::Create(*b.Build(), o);
  ASSERT_TRUE(session.ok()) << session.status();
  RunStats stats;
  ASSERT_TRUE((*session)->Run(feeds, fetches, {}, &stats).ok());
  EXPECT_EQ(stats.batched_instances, 10);  // 4 + 4 + 2
  EXPECT_EQ(stats.batched_firings, 3);
  EXPECT_GT(stats.deferred_time, absl::ZeroDuration());
}

TEST(BatchingSession, ErrorInABatchNamesTheInstancesTag) {
  // h(i, P) = Gather(P, i): one call's index is out of range. The batch
  // fails as a whole; its instances then fire alone and the bad one's
  // error names node, op and its tag.
  GraphBuilder b;
  ASSERT_TRUE(b.DefineFunction({"h", {{"i", DType::kInt64}, {"P", DType::kFloat64}}, {{"y", DType::kFloat64}}},
                               [](GraphBuilder& f, const std::vector<Output>& a) -> std::vector<Output> {
                                 return {f.Gather(a[1], a[0])};
                               })
                  .ok());
  Output P = b.Placeholder("P", DType::kFloat64);
  std::vector<std::pair<std::string, Tensor>> feeds = {{"P", Matrix(4, 2, 0)}};
  std::vector<std::string> fetches;
  for (int k = 0; k < 4; ++k) {
    b.Identity(b.Call("h", {b.Placeholder(absl::StrCat("i", k), DType::kInt64), P})[0], absl::StrCat("y", k));
    feeds.emplace_back(absl::StrCat("i", k), Tensor::Vector<int64_t>({k == 2 ? 7 : k}));
    fetches.push_back(absl::StrCat("y", k));
  }
  absl::StatusOr<std::unique_ptr<Session>> session = Session::Create(*b.Build(), Batching());
  ASSERT_TRUE(session.ok()) << session.status();
  absl::StatusOr<std::vector<Tensor>> out = (*session)->Run(feeds, fetches, {});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument) << out.status();
  EXPECT_THAT(std::string(out.status().message()), HasSubstr("(Gather)"));
  EXPECT_THAT(std::string(out.status().message()), HasSubstr("at tag ["));
  EXPECT_THAT(std::string(out.status().message()), HasSubstr("at tag [2]"));
  EXPECT_THAT(std::string(out.status().message()), HasSubstr("index 7"));
}

TEST(BatchingSession, BoundsAreValidated) {
  SessionOptions o = Batching();
  o.batch_max_size = 0;
  EXPECT_EQ(Session::Create(CondGraph(1), o).status().code(), absl::StatusCode::kInvalidArgument);
  o = Batching();
  o.batch_max_deferral = 0;
  EXPECT_EQ(Session::Create(CondGraph(1), o).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tdf
