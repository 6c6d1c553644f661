// A recursive program on the GPU: a TreeRNN forward pass over a fixed binary
// tree, written as a recursive function over a node index,
//
//   h(i) = i < kInternal ? tanh([h(2i+1), h(2i+2)] · W + b)    [1, 2H]·[2H, H]
//                        : E[i - kInternal]                     (a leaf)
//
// run as one static graph (StaticizeRecursion) on the CPU, checked against a
// native C++ evaluation, and on cuda:0 after the placement pass (skipped
// without a device); and its gradients with respect to the weights, which
// differentiate through the recursion (the fused autodiff pass), on both.
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "absl/strings/match.h"
#include "tdf/autodiff.h"
#include "cuda/gpu_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tdf/builder.h"
#include "tdf/placement.h"
#include "tdf/session.h"
#include "tdf/transform.h"
#include "tdf/validate.h"

namespace tdf {
namespace {

constexpr int64_t kHidden = 8;
constexpr int64_t kInternal = 7;  // a complete tree of 15 nodes: 7 internal, 8 leaves
constexpr int64_t kLeaves = kInternal + 1;

struct Weights {
  std::vector<float> w;  // [2H, H]
  std::vector<float> b;  // [H]
  std::vector<float> e;  // [kLeaves, H]
};

Weights MakeWeights() {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-0.5f, 0.5f);
  Weights p;
  for (int64_t i = 0; i < 2 * kHidden * kHidden; ++i) p.w.push_back(dist(rng));
  for (int64_t i = 0; i < kHidden; ++i) p.b.push_back(dist(rng));
  for (int64_t i = 0; i < kLeaves * kHidden; ++i) p.e.push_back(dist(rng));
  return p;
}

std::vector<float> NativeTreeRnn(const Weights& p, int64_t i) {
  if (i >= kInternal) {
    const float* row = p.e.data() + (i - kInternal) * kHidden;
    return std::vector<float>(row, row + kHidden);
  }
  std::vector<float> x = NativeTreeRnn(p, 2 * i + 1);
  std::vector<float> r = NativeTreeRnn(p, 2 * i + 2);
  x.insert(x.end(), r.begin(), r.end());
  std::vector<float> h(kHidden);
  for (int64_t j = 0; j < kHidden; ++j) {
    float acc = p.b[j];
    for (int64_t k = 0; k < 2 * kHidden; ++k) acc += x[k] * p.w[k * kHidden + j];
    h[j] = std::tanh(acc);
  }
  return h;
}

Graph TreeRnnGraph(const Weights& p) {
  GraphBuilder b;
  absl::Status s = b.DefineFunction(
      {"tree", {{"i", DType::kInt64}}, {{"h", DType::kFloat32}}},
      [&](GraphBuilder& f, const std::vector<Output>& args) -> std::vector<Output> {
        Output i = args[0];
        return f.Cond(
            f.Less(i, f.Const<int64_t>(kInternal)),
            [&] {
              Output two = f.Const<int64_t>(2);
              Output left = f.Call("tree", {f.Add(f.Mul(i, two), f.Const<int64_t>(1))})[0];
              Output right = f.Call("tree", {f.Add(f.Mul(i, two), two)})[0];
              Output x = f.Concat({left, right}, 1);
              Output w = f.Const(*Tensor::FromVector<float>(p.w, Shape({2 * kHidden, kHidden})));
              Output bias = f.Const(*Tensor::FromVector<float>(p.b, Shape({1, kHidden})));
              return std::vector<Output>{f.Tanh(f.Add(f.MatMul(x, w), bias))};
            },
            [&] {
              Output e = f.Const(*Tensor::FromVector<float>(p.e, Shape({kLeaves, kHidden})));
              Output row = f.Gather(e, f.Sub(i, f.Const<int64_t>(kInternal)));
              return std::vector<Output>{f.Reshape(row, {1, kHidden})};
            });
      });
  EXPECT_TRUE(s.ok()) << s;
  Output root = b.Placeholder("root", DType::kInt64);
  Output h = b.Identity(b.Call("tree", {root})[0], "h");
  b.Identity(b.Sum(h), "total");
  absl::StatusOr<Graph> g = b.Build();
  EXPECT_TRUE(g.ok()) << g.status();
  return g.ok() ? *g : Graph{};
}

absl::StatusOr<std::vector<Tensor>> RunTree(const Graph& graph, int64_t root) {
  TDF_ASSIGN_OR_RETURN(std::unique_ptr<Session> session, Session::Create(graph));
  TDF_ASSIGN_OR_RETURN(std::vector<Tensor> out,
                       session->Run({{"root", Tensor::Scalar<int64_t>(root)}}, {"h", "total"}));
  // Session::Run brings fetched device values home.
  for (const Tensor& t : out)
    if (!t.device().is_cpu()) return absl::InternalError("a fetched value is still on " + t.device().ToString());
  return out;
}

TEST(TreeRnn, CpuMatchesNative) {
  const Weights p = MakeWeights();
  Graph g = TreeRnnGraph(p);
  for (int64_t root : {0, 1, 3, 9}) {
    SCOPED_TRACE(root);
    absl::StatusOr<std::vector<Tensor>> out = RunTree(g, root);
    ASSERT_TRUE(out.ok()) << out.status();
    const std::vector<float> want = NativeTreeRnn(p, root);
    ASSERT_EQ((*out)[0].shape(), Shape({1, kHidden}));
    for (int64_t j = 0; j < kHidden; ++j) EXPECT_NEAR((*out)[0].data<float>()[j], want[j], 1e-5);
  }
}

TEST(TreeRnn, PlacementKeepsControlFlowOnTheCpuAndComputeOnTheGpu) {
  Graph g = *StaticizeRecursion(TreeRnnGraph(MakeWeights()));
  PlacementOptions opts;
  opts.place_tensor_ops_on_gpu = true;
  opts.device_count_override = 1;
  PlacementReport report;
  ASSERT_TRUE(PlaceDevices(g, opts, &report).ok());
  ASSERT_TRUE(Validate(g).ok()) << Validate(g);
  int gpu_matmuls = 0;
  for (const NodeDef& n : g.node) {
    if (n.op == "MatMul" || n.op == "Tanh" || n.op == "Concat" || n.op == "Gather") {
      EXPECT_EQ(n.device, "cuda:0") << NodeLabel(n);
      gpu_matmuls += n.op == "MatMul";
    }
    if (n.op == "Switch" || n.op == "Merge" || n.op == "Call" || n.op == "Return" || n.op == "Less" ||
        n.op == "Placeholder")
      EXPECT_FALSE(absl::StartsWith(n.device, "cuda")) << NodeLabel(n);
  }
  EXPECT_EQ(gpu_matmuls, 1);  // one shared body, however deep the recursion
  // Index arithmetic (i * 2 + 1, i - kInternal) stays on the host: every
  // GPU node computes floating-point values.
  std::vector<const std::vector<NodeDef>*> bodies = {&g.node};
  std::vector<const FunctionDef*> fns = {nullptr};
  for (const auto& [name, f] : g.library.functions()) {
    bodies.push_back(&f.node);
    fns.push_back(&f);
  }
  for (size_t b = 0; b < bodies.size(); ++b) {
    absl::StatusOr<std::vector<std::vector<DType>>> types = InferOutputTypes(*bodies[b], fns[b], g.library);
    ASSERT_TRUE(types.ok()) << types.status();
    for (size_t i = 0; i < bodies[b]->size(); ++i) {
      const NodeDef& n = (*bodies[b])[i];
      if (!absl::StartsWith(n.device, "cuda")) continue;
      bool floating = false;
      for (DType t : (*types)[i]) floating |= IsFloating(t);
      EXPECT_TRUE(floating) << NodeLabel(n) << " computes no floating-point value on the GPU";
    }
  }
  EXPECT_GT(report.copies_to_device, 0);
  EXPECT_GT(report.copies_to_host, 0);
}

TEST(TreeRnn, FallbackToCpuGivesTheSameAnswer) {
  const Weights p = MakeWeights();
  Graph g = *StaticizeRecursion(TreeRnnGraph(p));
  PlacementOptions opts;
  opts.place_tensor_ops_on_gpu = true;
  opts.device_count_override = 0;
  PlacementReport report;
  ASSERT_TRUE(PlaceDevices(g, opts, &report).ok());
  EXPECT_TRUE(report.fell_back_to_cpu);
  absl::StatusOr<std::vector<Tensor>> out = RunTree(g, 0);
  ASSERT_TRUE(out.ok()) << out.status();
  const std::vector<float> want = NativeTreeRnn(p, 0);
  for (int64_t j = 0; j < kHidden; ++j) EXPECT_NEAR((*out)[0].data<float>()[j], want[j], 1e-5);
}

TEST(TreeRnn, GpuMatchesCpu) {
  TDF_SKIP_WITHOUT_GPU();
  const Weights p = MakeWeights();
  Graph cpu_graph = TreeRnnGraph(p);
  Graph gpu_graph = *StaticizeRecursion(cpu_graph);
  PlacementOptions opts;
  opts.place_tensor_ops_on_gpu = true;
  opts.fallback_to_cpu = false;
  PlacementReport report;
  ASSERT_TRUE(PlaceDevices(gpu_graph, opts, &report).ok());
  ASSERT_GT(report.gpu_nodes, 0);
  for (int64_t root : {0, 2, 11}) {
    SCOPED_TRACE(root);
    absl::StatusOr<std::vector<Tensor>> cpu = RunTree(cpu_graph, root);
    absl::StatusOr<std::vector<Tensor>> gpu = RunTree(gpu_graph, root);
    ASSERT_TRUE(cpu.ok()) << cpu.status();
    ASSERT_TRUE(gpu.ok()) << gpu.status();
    EXPECT_TRUE(kernel_test::TensorNear((*gpu)[0], (*cpu)[0], 1e-5));
    EXPECT_TRUE(kernel_test::TensorNear((*gpu)[1], (*cpu)[1], 1e-5));
  }
}

// The same tree with the weights as feeds, passed down the recursion as
// arguments, and the gradients of sum(h(root)) with respect to them: the
// backward pass runs through the recursive calls (fused with the forward
// invocations) on the GPU.
Graph TreeRnnGradientGraph() {
  GraphBuilder b;
  absl::Status s = b.DefineFunction(
      {"tree",
       {{"i", DType::kInt64}, {"w", DType::kFloat64}, {"bias", DType::kFloat64}, {"e", DType::kFloat64}},
       {{"h", DType::kFloat64}}},
      [&](GraphBuilder& f, const std::vector<Output>& args) -> std::vector<Output> {
        Output i = args[0], w = args[1], bias = args[2], e = args[3];
        return f.Cond(
            f.Less(i, f.Const<int64_t>(kInternal)),
            [&] {
              Output two = f.Const<int64_t>(2);
              Output left = f.Call("tree", {f.Add(f.Mul(i, two), f.Const<int64_t>(1)), w, bias, e})[0];
              Output right = f.Call("tree", {f.Add(f.Mul(i, two), two), w, bias, e})[0];
              Output x = f.Concat({left, right}, 1);
              return std::vector<Output>{f.Tanh(f.Add(f.MatMul(x, w), bias))};
            },
            [&] {
              Output row = f.Gather(e, f.Sub(i, f.Const<int64_t>(kInternal)));
              return std::vector<Output>{f.Reshape(row, {1, kHidden})};
            });
      });
  EXPECT_TRUE(s.ok()) << s;
  Output root = b.Placeholder("root", DType::kInt64);
  Output w = b.Placeholder("w", DType::kFloat64);
  Output bias = b.Placeholder("bias", DType::kFloat64);
  Output e = b.Placeholder("e", DType::kFloat64);
  Output h = b.Call("tree", {root, w, bias, e})[0];
  b.Identity(b.Sum(b.Mul(h, h)), "loss");
  absl::StatusOr<Graph> g = b.Build();
  EXPECT_TRUE(g.ok()) << g.status();
  if (!g.ok()) return Graph{};
  absl::StatusOr<std::vector<std::string>> grads = AddGradients(*g, {"loss"}, {"w", "bias", "e"});
  EXPECT_TRUE(grads.ok()) << grads.status();
  if (grads.ok()) {
    const char* names[] = {"dw", "dbias", "de"};
    for (int k = 0; k < 3; ++k) {
      NodeDef id;
      id.name = names[k];
      id.op = "Identity";
      id.input = {(*grads)[k]};
      g->node.push_back(std::move(id));
    }
  }
  return *g;
}

std::vector<std::pair<std::string, Tensor>> GradientFeeds(int64_t root) {
  const Weights p = MakeWeights();
  auto to64 = [](const std::vector<float>& v, Shape shape) {
    std::vector<double> d(v.begin(), v.end());
    return *Tensor::FromVector<double>(d, std::move(shape));
  };
  return {{"w", to64(p.w, Shape({2 * kHidden, kHidden}))},
          {"bias", to64(p.b, Shape({1, kHidden}))},
          {"e", to64(p.e, Shape({kLeaves, kHidden}))},
          {"root", Tensor::Scalar<int64_t>(root)}};
}

// The graph itself, on the CPU: dbias against central differences.
TEST(TreeRnn, GradientsThroughTheRecursionMatchFiniteDifferences) {
  const Graph graph = TreeRnnGradientGraph();
  absl::StatusOr<std::unique_ptr<Session>> session = Session::Create(graph);
  ASSERT_TRUE(session.ok()) << session.status();
  std::vector<std::pair<std::string, Tensor>> feeds = GradientFeeds(0);
  absl::StatusOr<std::vector<Tensor>> out = (*session)->Run(feeds, {"dbias"});
  ASSERT_TRUE(out.ok()) << out.status();
  const Tensor bias = feeds[1].second;
  constexpr double kEps = 1e-6;
  for (int64_t j = 0; j < kHidden; ++j) {
    double loss[2];
    for (int side = 0; side < 2; ++side) {
      Tensor moved = *Tensor::FromVector<double>(
          std::vector<double>(bias.data<double>(), bias.data<double>() + kHidden), bias.shape());
      moved.mutable_data<double>()[j] += side == 0 ? kEps : -kEps;
      std::vector<std::pair<std::string, Tensor>> f = feeds;
      f[1].second = moved;
      absl::StatusOr<std::vector<Tensor>> l = (*session)->Run(f, {"loss"});
      ASSERT_TRUE(l.ok()) << l.status();
      loss[side] = (*l)[0].scalar<double>();
    }
    EXPECT_NEAR((*out)[0].data<double>()[j], (loss[0] - loss[1]) / (2 * kEps), 1e-6) << j;
  }
}

TEST(TreeRnn, GradientsThroughTheRecursionOnTheGpuMatchTheCpu) {
  TDF_SKIP_WITHOUT_GPU();
  const Graph graph = TreeRnnGradientGraph();
  for (int64_t root : {0, 1, 9}) {
    SCOPED_TRACE(root);
    const std::vector<std::pair<std::string, Tensor>> feeds = GradientFeeds(root);
    std::vector<std::vector<Tensor>> results;
    for (bool gpu : {false, true}) {
      SessionOptions options;
      options.place_tensor_ops_on_gpu = gpu;
      options.fallback_to_cpu = false;
      options.num_workers = 2;
      absl::StatusOr<std::unique_ptr<Session>> session = Session::Create(graph, options);
      ASSERT_TRUE(session.ok()) << session.status();
      RunStats stats;
      absl::StatusOr<std::vector<Tensor>> out =
          (*session)->Run(feeds, {"loss", "dw", "dbias", "de"}, {}, &stats);
      ASSERT_TRUE(out.ok()) << (gpu ? "gpu: " : "cpu: ") << out.status();
      EXPECT_EQ(stats.live_frames_after_run, 0);
      for (Tensor& t : *out) {
        ASSERT_TRUE(t.device().is_cpu());
      }
      results.push_back(*out);
    }
    for (size_t k = 0; k < results[0].size(); ++k) {
      SCOPED_TRACE(k);
      EXPECT_TRUE(kernel_test::TensorNear(results[1][k], results[0][k], 1e-10));
    }
    // The gradient is not trivially zero (a leaf root has dw = dbias = 0,
    // but not de).
    double norm = 0;
    for (size_t k = 1; k < results[0].size(); ++k)
      for (int64_t j = 0; j < results[0][k].num_elements(); ++j) norm += std::abs(results[0][k].data<double>()[j]);
    EXPECT_GT(norm, 0);
  }
}

}  // namespace
}  // namespace tdf
