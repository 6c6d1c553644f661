// Variables that live on the GPU: with place_tensor_ops_on_gpu, a
// floating-point Variable keeps its value on cuda:0 between runs, and an
// optimizer step (AssignSub, the sparse ScatterAdd of an embedding's rows,
// Adam's Assigns) updates it with GPU kernels. Every step must give what the
// same graph gives on the CPU; the user-facing API (ReadVariable,
// AssignVariable, checkpoints) sees host tensors. Skipped without a device.
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "cuda/gpu_test_util.h"
#include "gtest/gtest.h"
#include "tdf/autodiff.h"
#include "tdf/builder.h"
#include "tdf/session.h"

namespace tdf {
namespace {

Tensor RandomDoubles(const Shape& shape, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> dist(-0.5, 0.5);
  Tensor t = *Tensor::Empty(DType::kFloat64, shape);
  for (int64_t i = 0; i < t.num_elements(); ++i) t.mutable_data<double>()[i] = dist(rng);
  return t;
}

// loss = sum(tanh(E[words] W + b)^2): W, b dense updates; E (read only by
// a Gather) the sparse ScatterAdd update.
struct Model {
  Graph graph;
  std::string step;
  std::vector<std::string> variables = {"E", "W", "b"};
};

Model MakeModel(bool adam) {
  GraphBuilder g;
  Output e = g.Variable("E", RandomDoubles(Shape({10, 4}), 1));
  Output w = g.Variable("W", RandomDoubles(Shape({4, 3}), 2));
  Output bias = g.Variable("b", RandomDoubles(Shape({3}), 3));
  Output words = g.Placeholder("words", DType::kInt64);
  Output re = g.Read(e), rw = g.Read(w), rb = g.Read(bias);
  Output h = g.Tanh(g.Add(g.MatMul(g.Gather(re, words), rw), rb));
  g.Identity(g.Sum(g.Mul(h, h)), "loss");
  Model m;
  m.graph = *g.Build();
  std::vector<std::string> grads =
      *AddGradients(m.graph, {"loss"}, {g.Name(re), g.Name(rw), g.Name(rb)});
  if (adam) {
    AdamOptions options;
    options.learning_rate = 0.05;
    m.step = *AddAdamStep(m.graph, m.variables, grads, options);
  } else {
    m.step = *AddSgdStep(m.graph, m.variables, grads, 0.1);
  }
  return m;
}

std::unique_ptr<Session> MakeSession(const Graph& graph, bool gpu) {
  SessionOptions options;
  options.place_tensor_ops_on_gpu = gpu;
  options.fallback_to_cpu = false;
  absl::StatusOr<std::unique_ptr<Session>> s = Session::Create(graph, options);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? *std::move(s) : nullptr;
}

void TrainAndCompare(bool adam) {
  Model m = MakeModel(adam);
  std::unique_ptr<Session> cpu = MakeSession(m.graph, false);
  std::unique_ptr<Session> gpu = MakeSession(m.graph, true);
  ASSERT_NE(cpu, nullptr);
  ASSERT_NE(gpu, nullptr);
  // The variables live on the GPU in the GPU session's graph.
  for (const NodeDef& n : gpu->executable_graph().node)
    if (n.op == "Variable") EXPECT_EQ(n.device, "cuda:0") << n.name;
  const std::vector<std::vector<int64_t>> batches = {{1, 2, 2}, {0, 9}, {3, 3, 3, 4}, {7}, {2, 5, 8}};
  for (int step = 0; step < 10; ++step) {
    SCOPED_TRACE(step);
    const std::vector<int64_t>& ids = batches[step % batches.size()];
    const std::vector<std::pair<std::string, Tensor>> feeds = {
        {"words", *Tensor::FromVector<int64_t>(ids, Shape({static_cast<int64_t>(ids.size())}))}};
    absl::StatusOr<std::vector<Tensor>> lc = cpu->Run(feeds, {"loss"}, {m.step});
    absl::StatusOr<std::vector<Tensor>> lg = gpu->Run(feeds, {"loss"}, {m.step});
    ASSERT_TRUE(lc.ok()) << lc.status();
    ASSERT_TRUE(lg.ok()) << lg.status();
    EXPECT_NEAR((*lg)[0].scalar<double>(), (*lc)[0].scalar<double>(), 1e-12);
  }
  for (const std::string& name : gpu->VariableNames()) {
    SCOPED_TRACE(name);
    absl::StatusOr<Tensor> vc = cpu->ReadVariable(name);
    absl::StatusOr<Tensor> vg = gpu->ReadVariable(name);
    ASSERT_TRUE(vc.ok()) << vc.status();
    ASSERT_TRUE(vg.ok()) << vg.status();
    EXPECT_TRUE(vg->device().is_cpu());
    EXPECT_TRUE(kernel_test::TensorNear(*vg, *vc, 1e-12));
  }
  // Training moved the parameters.
  EXPECT_FALSE(kernel_test::TensorNear(*gpu->ReadVariable("W"), RandomDoubles(Shape({4, 3}), 2), 1e-6));
}

TEST(GpuVariables, SgdStepsMatchTheCpu) {
  TDF_SKIP_WITHOUT_GPU();
  TrainAndCompare(/*adam=*/false);
}

TEST(GpuVariables, AdamStepsMatchTheCpu) {
  TDF_SKIP_WITHOUT_GPU();
  TrainAndCompare(/*adam=*/true);
}

TEST(GpuVariables, AssignCheckpointAndRestoreGoThroughTheHost) {
  TDF_SKIP_WITHOUT_GPU();
  Model m = MakeModel(false);
  std::unique_ptr<Session> gpu = MakeSession(m.graph, true);
  ASSERT_NE(gpu, nullptr);
  const Tensor w = RandomDoubles(Shape({4, 3}), 11);
  ASSERT_TRUE(gpu->AssignVariable("W", w).ok());
  absl::StatusOr<Tensor> back = gpu->ReadVariable("W");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(kernel_test::TensorEq(*back, w));
  // The assigned value is what the next run computes with.
  const std::vector<std::pair<std::string, Tensor>> feeds = {{"words", *Tensor::FromVector<int64_t>({1}, Shape({1}))}};
  std::unique_ptr<Session> cpu = MakeSession(m.graph, false);
  ASSERT_TRUE(cpu->AssignVariable("W", w).ok());
  EXPECT_NEAR((*gpu->Run(feeds, {"loss"}))[0].scalar<double>(), (*cpu->Run(feeds, {"loss"}))[0].scalar<double>(),
              1e-12);
  const std::string path = ::testing::TempDir() + "/gpu_variables.ckpt";
  ASSERT_TRUE(gpu->SaveVariables(path).ok());
  ASSERT_TRUE(gpu->Run(feeds, {}, {m.step}).ok());  // moves the variables
  ASSERT_TRUE(gpu->RestoreVariables(path).ok());
  EXPECT_TRUE(kernel_test::TensorEq(*gpu->ReadVariable("W"), w));
  std::remove(path.c_str());
}

// E[idx[j]] += upd[j] on a GPU variable, as the target "scatter".
Graph ScatterGraph(const Tensor& initial) {
  GraphBuilder g;
  Output e = g.Variable("E", initial);
  g.Op("ScatterAdd", {e, g.Placeholder("idx", DType::kInt64), g.Placeholder("upd", DType::kFloat64)},
       {{"dtype", DType::kFloat64}}, "scatter");
  absl::StatusOr<Graph> graph = g.Build();
  EXPECT_TRUE(graph.ok()) << graph.status();
  return graph.ok() ? *std::move(graph) : Graph();
}

TEST(GpuVariables, ScatterAddChecksItsIndicesOnTheDeviceAllOrNothing) {
  TDF_SKIP_WITHOUT_GPU();
  const Tensor initial = RandomDoubles(Shape({5, 2}), 21);
  std::unique_ptr<Session> gpu = MakeSession(ScatterGraph(initial), true);
  std::unique_ptr<Session> cpu = MakeSession(ScatterGraph(initial), false);
  ASSERT_NE(gpu, nullptr);
  ASSERT_NE(cpu, nullptr);
  auto feeds = [](std::vector<int64_t> idx) {
    const int64_t k = static_cast<int64_t>(idx.size());
    return std::vector<std::pair<std::string, Tensor>>{{"idx", Tensor::Vector<int64_t>(idx)},
                                                       {"upd", RandomDoubles(Shape({k, 2}), 30 + k)}};
  };
  // Repeats accumulate, as on the CPU.
  for (const std::vector<int64_t>& idx : {std::vector<int64_t>{1, 3, 1}, {4}, {0, 0, 2, 2, 2}}) {
    ASSERT_TRUE(gpu->Run(feeds(idx), {}, {"scatter"}).ok());
    ASSERT_TRUE(cpu->Run(feeds(idx), {}, {"scatter"}).ok());
  }
  const Tensor before = *gpu->ReadVariable("E");
  EXPECT_TRUE(kernel_test::TensorNear(before, *cpu->ReadVariable("E"), 1e-12));
  // A bad index fails the run, names the node, and adds nothing at all.
  absl::Status bad = gpu->Run(feeds({2, 5, 1}), {}, {"scatter"}).status();
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument) << bad;
  EXPECT_NE(bad.message().find("node 'scatter' (ScatterAdd) at tag []: ScatterAdd: an index is out of range"),
            std::string::npos)
      << bad;
  EXPECT_TRUE(kernel_test::TensorEq(*gpu->ReadVariable("E"), before));
  bad = gpu->Run(feeds({-1}), {}, {"scatter"}).status();
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument) << bad;
  EXPECT_TRUE(kernel_test::TensorEq(*gpu->ReadVariable("E"), before));
  // The variable still updates afterwards.
  ASSERT_TRUE(gpu->Run(feeds({3}), {}, {"scatter"}).ok());
  ASSERT_TRUE(cpu->Run(feeds({3}), {}, {"scatter"}).ok());
  EXPECT_TRUE(kernel_test::TensorNear(*gpu->ReadVariable("E"), *cpu->ReadVariable("E"), 1e-12));
}

}  // namespace
}  // namespace tdf
