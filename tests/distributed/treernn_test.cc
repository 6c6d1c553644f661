// A TreeRNN forward pass and training step across ranks (#29 tests): the
// recursive function over a tree's nodes (as bench/treernn.h's kRecursion,
// at toy sizes) runs wholly on the last rank, the variables, leaf layer,
// classifier, loss and SGD step on rank 0. Under mpirun on 2, 3 and 4
// ranks: the loss before and after a step equals the one-process run's.
#include <mpi.h>

#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "absl/strings/str_cat.h"
#include "tdf/autodiff.h"
#include "tdf/builder.h"
#include "tdf/distributed.h"
#include "tdf/session.h"

namespace tdf {
namespace {

using Feeds = std::vector<std::pair<std::string, Tensor>>;
using Outs = std::vector<Output>;

constexpr int64_t kVocabulary = 7, kEmbedding = 4, kHidden = 3, kClasses = 5;

Tensor Values(const Shape& shape, double scale, int salt) {
  std::vector<double> v(static_cast<size_t>(shape.num_elements()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = scale * std::sin(1.3 * static_cast<double>(i) + salt);
  return *Tensor::FromVector<double>(v, shape);
}

// node(i, tree, P, W, b) -> (h [1, H], states [subtree, H]); tree [N, 3]
// holds each node's children (-1 at leaves) and its leaf row in P.
Graph TreeRnn(bool training, std::string* step) {
  GraphBuilder b;
  (void)b.DefineFunction(
      {"node",
       {{"i", DType::kInt64}, {"tree", DType::kInt64}, {"P", DType::kFloat64}, {"W", DType::kFloat64},
        {"b", DType::kFloat64}},
       {{"h", DType::kFloat64}, {"states", DType::kFloat64}}},
      [](GraphBuilder& f, const Outs& a) -> Outs {
        Output i = a[0], tree = a[1], P = a[2], W = a[3], bias = a[4];
        Output row = f.Gather(tree, i);
        Output left = f.Gather(row, f.Const<int64_t>(0));
        return f.Cond(
            f.Less(left, f.Const<int64_t>(0)),
            [&] {
              Output h = f.Reshape(f.Gather(P, f.Gather(row, f.Const<int64_t>(2))), {1, kHidden});
              return Outs{h, h};
            },
            [&] {
              Outs l = f.Call("node", {left, tree, P, W, bias});
              Outs r = f.Call("node", {f.Gather(row, f.Const<int64_t>(1)), tree, P, W, bias});
              Output h = f.Tanh(f.Add(f.MatMul(f.Concat({l[0], r[0]}, 1), W), bias));
              return Outs{h, f.Concat({l[1], r[1], h}, 0)};
            });
      });
  const char* names[] = {"E", "Wl", "W", "b", "Wc"};
  const Shape shapes[] = {Shape({kVocabulary, kEmbedding}), Shape({kEmbedding, kHidden}),
                          Shape({2 * kHidden, kHidden}), Shape({1, kHidden}), Shape({kHidden, kClasses})};
  std::vector<Output> reads;
  for (int k = 0; k < 5; ++k) reads.push_back(b.Read(b.Variable(names[k], Values(shapes[k], 0.5, k))));
  Output P = b.Tanh(b.MatMul(b.Gather(reads[0], b.Placeholder("words", DType::kInt64)), reads[1]));
  Output tree = b.Placeholder("tree", DType::kInt64);
  Outs states;
  for (int k = 0; k < 2; ++k)
    states.push_back(b.Call("node", {b.Placeholder(absl::StrCat("root_", k), DType::kInt64), tree, P, reads[2],
                                     reads[3]})[1]);
  Output logits = b.MatMul(b.Concat(states, 0), reads[4]);
  b.Identity(b.Sum(b.Op("SoftmaxCrossEntropy", {logits, b.Placeholder("labels", DType::kFloat64)})), "loss");
  Graph g = *b.Build();
  if (training) {
    std::vector<std::string> read_names, vars(names, names + 5);
    for (const Output& r : reads) read_names.push_back(b.Name(r));
    std::vector<std::string> grads = *AddGradients(g, {"loss"}, read_names);
    *step = *AddSgdStep(g, vars, grads, 0.1);
  }
  return g;
}

// Two trees over one node table: (w0 w1) and ((w2 w3) w4), post-order.
Feeds Batch() {
  const std::vector<int64_t> tree = {-1, -1, 0, -1, -1, 1, 0, 1, -1,                // tree 0: nodes 0..2
                                     -1, -1, 2, -1, -1, 3, 3, 4, -1, -1, -1, 4, 5, 6, -1};  // tree 1: 3..7
  std::vector<double> labels(8 * kClasses, 0.0);
  for (int n = 0; n < 8; ++n) labels[n * kClasses + (n * 3) % kClasses] = 1.0;
  return {{"words", *Tensor::FromVector<int64_t>({1, 4, 0, 6, 2}, Shape({5}))},
          {"tree", *Tensor::FromVector<int64_t>(tree, Shape({8, 3}))},
          {"root_0", Tensor::Scalar<int64_t>(2)},
          {"root_1", Tensor::Scalar<int64_t>(7)},
          {"labels", *Tensor::FromVector<double>(labels, Shape({8, kClasses}))}};
}

// The loss of `runs` runs in one process (each a training step when
// `step` is set).
std::vector<double> OneProcess(const Graph& g, const std::string& step, int runs) {
  std::unique_ptr<Session> s = *Session::Create(g);
  std::vector<double> losses;
  for (int r = 0; r < runs; ++r) {
    absl::StatusOr<std::vector<Tensor>> out =
        s->Run(Batch(), {"loss"}, step.empty() ? std::vector<std::string>{} : std::vector<std::string>{step});
    EXPECT_TRUE(out.ok()) << out.status();
    losses.push_back(out.ok() ? (*out)[0].scalar<double>() : NAN);
  }
  return losses;
}

// `seed` 0: the main graph on rank 0; otherwise each of its nodes on a
// seeded random rank, variables included, and the state ops (reads, the
// SGD step's updates) unplaced: they run where their variable lives, and
// their values and gradients cross ranks as any other.
void CheckAcrossRanks(bool training, uint32_t seed = 0) {
  std::string step;
  Graph g = TreeRnn(training, &step);
  const std::vector<double> want = OneProcess(g, step, 3);
  if (training) EXPECT_LT(want[2], want[0]);  // the steps do train
  DistributedOptions options;
  options.gather_fetches = true;
  // Size the placement once MPI is up (the first session starts it).
  absl::StatusOr<std::unique_ptr<DistributedSession>> probe = DistributedSession::Create(g, options);
  ASSERT_TRUE(probe.ok()) << probe.status();
  const int last = (*probe)->num_ranks() - 1;
  ASSERT_TRUE((*probe)->Close().ok());
  probe->reset();
  for (const auto& [name, f] : g.library.functions())
    for (NodeDef& n : g.library.FindMutable(name)->node) n.device = absl::StrCat("rank:", last);
  std::mt19937 rng(seed);
  for (NodeDef& n : g.node) {
    const bool state = n.op == "Read" || n.op.rfind("Assign", 0) == 0 || n.op == "ScatterAdd";
    n.device = seed != 0 && state ? "" : absl::StrCat("rank:", seed == 0 ? 0 : rng() % (last + 1));
  }
  absl::StatusOr<std::unique_ptr<DistributedSession>> s = DistributedSession::Create(g, options);
  ASSERT_TRUE(s.ok()) << s.status();
  // The step is a target, as in one process: a run fires what its fetches
  // and targets need (fetching the loss alone takes no step).
  const std::vector<std::string> targets =
      step.empty() ? std::vector<std::string>{} : std::vector<std::string>{step};
  for (int r = 0; r < 3; ++r) {
    SCOPED_TRACE(absl::StrCat("run ", r));
    RunStats stats;
    DistributedRunStats remote;
    absl::StatusOr<std::vector<Tensor>> out = (*s)->Run(RunOptions(), Batch(), {"loss"}, targets, &stats, &remote);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(stats.live_frames_after_run, 0);
    EXPECT_GT(remote.total.remote_invocations, 0);
    if ((*s)->rank() == 0) EXPECT_NEAR((*out)[0].scalar<double>(), want[r], 1e-12 * std::abs(want[r]));
  }
  EXPECT_TRUE((*s)->Close().ok());
}

TEST(DistributedSession, TreeRnnForwardOnAnotherRank) { CheckAcrossRanks(/*training=*/false); }
TEST(DistributedSession, TreeRnnTrainingStepsOnAnotherRank) { CheckAcrossRanks(/*training=*/true); }
TEST(DistributedSession, TreeRnnTrainingWithVariablesOnRandomRanks) {
  for (uint32_t seed = 1; seed <= 4; ++seed) {
    SCOPED_TRACE(absl::StrCat("seed ", seed));
    CheckAcrossRanks(/*training=*/true, seed);
  }
}

}  // namespace
}  // namespace tdf
