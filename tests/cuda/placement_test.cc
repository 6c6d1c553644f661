// The placement pass's structure (copy insertion, what stays on the CPU, the
// no-device fallback and its FailedPrecondition twin). These run on every
// machine: device_count_override stands in for a GPU.
#include "tdf/placement.h"

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "cuda/device_backend.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tdf/builder.h"
#include "tdf/kernel.h"
#include "tdf/op_registry.h"
#include "tdf/session.h"
#include "tdf/transform.h"
#include "tdf/validate.h"

namespace tdf {
namespace {

using ::testing::HasSubstr;

const NodeDef& Node(const Graph& g, const std::string& name) {
  const NodeDef* n = g.FindNode(name);
  EXPECT_NE(n, nullptr) << "no node " << name;
  static const NodeDef kMissing;
  return n != nullptr ? *n : kMissing;
}

int CountOp(const Graph& g, const std::string& op) {
  int count = 0;
  for (const NodeDef& n : g.node) count += n.op == op;
  return count;
}

// x (host) -> MatMul (gpu) -> Tanh (gpu) -> Sum (cpu)
Graph MixedGraph() {
  GraphBuilder b;
  Output x = b.Placeholder("x", DType::kFloat32);
  Output w = b.Const(*Tensor::FromVector<float>({1, 2, 3, 4}, Shape({2, 2})), "w");
  Output m = b.Op("MatMul", {x, w}, {}, "m");
  Output t = b.Op("Tanh", {m}, {}, "t");
  Output s = b.Op("Sum", {t}, {}, "s");
  b.SetDevice(w, "cuda:0");
  b.SetDevice(m, "cuda:0");
  b.SetDevice(t, "cuda:0");
  b.SetDevice(s, "cpu");
  absl::StatusOr<Graph> g = b.Build();
  EXPECT_TRUE(g.ok()) << g.status();
  return *g;
}

TEST(Placement, InsertsCopiesWhereValuesCrossDevices) {
  Graph g = MixedGraph();
  PlacementOptions opts;
  opts.device_count_override = 1;
  PlacementReport report;
  ASSERT_TRUE(PlaceDevices(g, opts, &report).ok());
  EXPECT_EQ(report.copies_to_device, 1);  // x -> MatMul
  EXPECT_EQ(report.copies_to_host, 1);    // Tanh -> Sum
  EXPECT_EQ(report.gpu_nodes, 3);
  EXPECT_FALSE(report.fell_back_to_cpu);

  const NodeDef& m = Node(g, "m");
  ASSERT_EQ(m.input.size(), 2u);
  const NodeDef& to_dev = Node(g, m.input[0]);
  EXPECT_EQ(to_dev.op, "CopyToDevice");
  EXPECT_EQ(to_dev.input, std::vector<std::string>{"x"});
  EXPECT_EQ(*to_dev.GetString("device"), "cuda:0");
  EXPECT_EQ(m.input[1], "w");  // GPU -> GPU: no copy
  EXPECT_EQ(Node(g, "t").input[0], "m");
  const NodeDef& to_host = Node(g, Node(g, "s").input[0]);
  EXPECT_EQ(to_host.op, "CopyToHost");
  EXPECT_EQ(to_host.input, std::vector<std::string>{"t"});
  EXPECT_TRUE(Validate(g).ok()) << Validate(g);
}

TEST(Placement, OneCopyServesEveryConsumerOnADevice) {
  GraphBuilder b;
  Output x = b.Placeholder("x", DType::kFloat32);
  Output a = b.Op("Exp", {x}, {}, "a");
  Output c = b.Op("Log", {x}, {}, "c");
  b.SetDevice(a, "cuda:0");
  b.SetDevice(c, "cuda:0");
  Graph g = *b.Build();
  PlacementOptions opts;
  opts.device_count_override = 1;
  PlacementReport report;
  ASSERT_TRUE(PlaceDevices(g, opts, &report).ok());
  EXPECT_EQ(report.copies_to_device, 1);
  EXPECT_EQ(Node(g, "a").input[0], Node(g, "c").input[0]);
}

TEST(Placement, GpuOptionPlacesTensorOpsButNotControlFlowOrPredicates) {
  GraphBuilder b;
  Output x = b.Placeholder("x", DType::kFloat32);
  Output n = b.Placeholder("n", DType::kInt64);
  Output pred = b.Less(n, b.Const<int64_t>(3, "three"));
  std::vector<Output> out = b.Cond(
      pred, [&] { return std::vector<Output>{b.Tanh(x)}; }, [&] { return std::vector<Output>{b.Exp(x)}; });
  b.Identity(out[0], "result");
  Graph g = *b.Build();
  PlacementOptions opts;
  opts.place_tensor_ops_on_gpu = true;
  opts.device_count_override = 1;
  PlacementReport report;
  ASSERT_TRUE(PlaceDevices(g, opts, &report).ok());
  EXPECT_GT(report.gpu_nodes, 0);
  for (const NodeDef& node : g.node) {
    const OpSchema* schema = OpRegistry::Global()->Find(node.op);
    ASSERT_NE(schema, nullptr) << node.op;
    const bool on_gpu = absl::StartsWith(node.device, "cuda");
    if (schema->kind() != OpKind::kKernel || node.op == "Placeholder" || node.op == "LoopCond")
      EXPECT_FALSE(on_gpu) << NodeLabel(node) << " must stay on the CPU";
    if (node.op == "Tanh" || node.op == "Exp") EXPECT_EQ(node.device, "cuda:0") << NodeLabel(node);
    if (node.op == "Switch") {
      // The predicate is computed on the host (no copy needed).
      InputRef ref = *InputRef::Parse(node.input[1]);
      const NodeDef& p = Node(g, ref.node);
      EXPECT_FALSE(absl::StartsWith(p.device, "cuda")) << NodeLabel(p);
    }
  }
  EXPECT_NE(Node(g, pred.builder->Name(pred)).device, "cuda:0");
  // Values coming out of a Switch reach the GPU through a CopyToDevice
  // (which forwards when the value is already there).
  EXPECT_GE(report.copies_to_device, 1);
  EXPECT_TRUE(Validate(g).ok()) << Validate(g);
}

// Integer and boolean work on integer and boolean values stays on the host;
// anything that reads or makes a floating-point value goes to the GPU.
TEST(Placement, GpuOptionLeavesIndexArithmeticOnTheHost) {
  GraphBuilder b;
  Output table = b.Placeholder("table", DType::kFloat32);
  Output children = b.Placeholder("children", DType::kInt64);
  Output i = b.Placeholder("i", DType::kInt64);
  Output j = b.Add(b.Mul(i, b.Const<int64_t>(2, "two")), b.Const<int64_t>(1, "one"));  // int math
  Output child = b.Gather(children, j);                                                    // int Gather
  Output row = b.Gather(table, child);                                                     // float Gather
  Output scaled = b.Mul(row, b.Const<float>(0.5f, "half"));                                // float math
  Output as_float = b.Cast(i, DType::kFloat32);                                            // int -> float
  Output positive = b.Greater(scaled, b.ZerosLike(scaled));                                // float -> bool
  b.Identity(b.Add(scaled, as_float), "out");
  b.Identity(positive, "mask");
  Graph g = *b.Build();
  PlacementOptions opts;
  opts.place_tensor_ops_on_gpu = true;
  opts.device_count_override = 1;
  ASSERT_TRUE(PlaceDevices(g, opts).ok());
  auto device_of = [&](const Output& o) { return Node(g, o.builder->Name(o)).device; };
  EXPECT_EQ(device_of(j), "");
  EXPECT_EQ(Node(g, "two").device, "");
  EXPECT_EQ(Node(g, "one").device, "");
  EXPECT_EQ(device_of(child), "");
  EXPECT_EQ(device_of(row), "cuda:0");
  EXPECT_EQ(device_of(scaled), "cuda:0");
  EXPECT_EQ(Node(g, "half").device, "cuda:0");
  EXPECT_EQ(device_of(as_float), "cuda:0");
  EXPECT_EQ(device_of(positive), "cuda:0");
  EXPECT_TRUE(Validate(g).ok()) << Validate(g);
}

// A placed graph placed again (as Session::Create does with a graph that
// names GPUs) is unchanged: copies are not copied.
TEST(Placement, IsIdempotent) {
  GraphBuilder b;
  Output x = b.Placeholder("x", DType::kFloat32);
  Output n = b.Placeholder("n", DType::kInt64);
  std::vector<Output> out = b.Cond(
      b.Less(n, b.Const<int64_t>(3)), [&] { return std::vector<Output>{b.Tanh(x)}; },
      [&] { return std::vector<Output>{b.Exp(x)}; });
  b.Identity(b.Sum(b.Add(out[0], x)), "result");
  Graph g = *b.Build();
  PlacementOptions opts;
  opts.place_tensor_ops_on_gpu = true;
  opts.device_count_override = 1;
  PlacementReport first;
  ASSERT_TRUE(PlaceDevices(g, opts, &first).ok());
  EXPECT_GT(first.copies_to_device + first.copies_to_host, 0);
  const size_t nodes = g.node.size();
  PlacementReport second;
  ASSERT_TRUE(PlaceDevices(g, opts, &second).ok());
  EXPECT_EQ(second.copies_to_device, 0);
  EXPECT_EQ(second.copies_to_host, 0);
  EXPECT_EQ(g.node.size(), nodes);
  opts.place_tensor_ops_on_gpu = false;
  ASSERT_TRUE(PlaceDevices(g, opts, &second).ok());
  EXPECT_EQ(g.node.size(), nodes);
}

TEST(Placement, ExplicitDeviceWinsOverTheOption) {
  Graph g = MixedGraph();
  PlacementOptions opts;
  opts.place_tensor_ops_on_gpu = true;
  opts.device_count_override = 1;
  ASSERT_TRUE(PlaceDevices(g, opts).ok());
  EXPECT_EQ(Node(g, "s").device, "cpu");
}

TEST(Placement, FloatVariablesGoToTheGpuAndStateOpsStayHostNodes) {
  GraphBuilder b;
  Output v = b.Variable("v", *Tensor::FromVector<float>({1, 2}, Shape({2})));
  Output steps = b.Variable("steps", Tensor::Scalar<int64_t>(0));
  Output r = b.Read(v);
  Output e = b.Exp(r);
  b.Identity(e, "out");
  b.Op("AssignSub", {v, e}, {{"dtype", DType::kFloat32}}, "step");
  b.Op("AssignAdd", {steps, b.Const<int64_t>(1)}, {{"dtype", DType::kInt64}}, "count");
  Graph g = *b.Build();
  PlacementOptions opts;
  opts.place_tensor_ops_on_gpu = true;
  opts.device_count_override = 1;
  ASSERT_TRUE(PlaceDevices(g, opts).ok());
  EXPECT_EQ(Node(g, "v").device, "cuda:0");
  EXPECT_EQ(Node(g, "steps").device, "");  // integer state stays on the host
  for (const NodeDef& n : g.node) {
    if (n.op == "Read" || n.op == "AssignSub" || n.op == "AssignAdd")
      EXPECT_FALSE(absl::StartsWith(n.device, "cuda")) << NodeLabel(n);
    if (n.op == "Exp") EXPECT_EQ(n.device, "cuda:0");
    // A state op reads its inputs where they are: no copy in front of it.
    if (n.op == "AssignSub" || n.op == "AssignAdd")
      for (const std::string& in : n.input) EXPECT_FALSE(absl::StrContains(in, "_to_")) << NodeLabel(n) << " " << in;
  }
  // A Read's value may be on either device: copies that forward at run time.
  EXPECT_EQ(Node(g, r.builder->Name(e)).input[0], absl::StrCat(r.builder->Name(r), "/_to_cuda0"));
  EXPECT_TRUE(Validate(g).ok()) << Validate(g);
}

TEST(Placement, NoDeviceFallsBackToCpu) {
  Graph g = MixedGraph();
  PlacementOptions opts;
  opts.device_count_override = 0;
  opts.fallback_to_cpu = true;
  PlacementReport report;
  ASSERT_TRUE(PlaceDevices(g, opts, &report).ok());
  EXPECT_TRUE(report.fell_back_to_cpu);
  EXPECT_THAT(report.fallback_reason, HasSubstr("CUDA"));
  EXPECT_EQ(report.gpu_nodes, 0);
  EXPECT_EQ(CountOp(g, "CopyToDevice") + CountOp(g, "CopyToHost"), 0);
  for (const NodeDef& n : g.node) EXPECT_FALSE(absl::StartsWith(n.device, "cuda")) << NodeLabel(n);
}

TEST(Placement, NoDeviceWithoutFallbackNamesTheFirstGpuNode) {
  Graph g = MixedGraph();
  PlacementOptions opts;
  opts.device_count_override = 0;
  opts.fallback_to_cpu = false;
  absl::Status s = PlaceDevices(g, opts);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("node 'w' (Const)"));
  EXPECT_THAT(s.message(), HasSubstr("cuda:0"));
}

TEST(Placement, MissingDeviceIndexIsTreatedLikeNoDevice) {
  Graph g = MixedGraph();
  for (NodeDef& n : g.node)
    if (n.name == "t") n.device = "cuda:3";
  PlacementOptions opts;
  opts.device_count_override = 1;
  opts.fallback_to_cpu = false;
  absl::Status s = PlaceDevices(g, opts);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("node 't' (Tanh)"));
}

TEST(Placement, BadDeviceStringIsInvalidArgument) {
  Graph g = MixedGraph();
  for (NodeDef& n : g.node)
    if (n.name == "t") n.device = "tpu:0";
  absl::Status s = PlaceDevices(g, PlacementOptions{});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("node 't' (Tanh)"));
}

TEST(Placement, RealDeviceCountFallbackStillRuns) {
  // With the machine's real device count: on a GPU-less machine the graph is
  // rewritten to the CPU and runs; with a GPU it stays placed.
  Graph g = MixedGraph();
  PlacementReport report;
  ASSERT_TRUE(PlaceDevices(g, PlacementOptions{}, &report).ok());
  EXPECT_EQ(report.fell_back_to_cpu, DeviceBackend::DeviceCount() == 0);
  if (!report.fell_back_to_cpu) GTEST_SKIP() << "a CUDA device exists; the GPU run is in tree_rnn_test";
  absl::StatusOr<std::unique_ptr<Session>> session = Session::Create(g);
  ASSERT_TRUE(session.ok()) << session.status();
  absl::StatusOr<std::vector<Tensor>> out =
      (*session)->Run({{"x", *Tensor::FromVector<float>({0.1f, 0.2f}, Shape({1, 2}))}}, {"s"});
  ASSERT_TRUE(out.ok()) << out.status();
  // tanh([0.1,0.2]·[[1,2],[3,4]]) = tanh([0.7, 1.0])
  EXPECT_NEAR(*(*out)[0].ScalarValue<float>(), std::tanh(0.7f) + std::tanh(1.0f), 1e-5);
}

TEST(Placement, PlaceableOpsHaveCudaKernelsInACudaBuild) {
  if (!DeviceBackend::CompiledWithCuda()) GTEST_SKIP() << "built without CUDA: no CUDA kernels are registered";
  for (const std::string& op : OpRegistry::Global()->ListOps()) {
    EXPECT_EQ(KernelRegistry::Global()->Has(op, Device::Type::kCuda), IsGpuPlaceableOp(op)) << op;
  }
}

TEST(Placement, CopyKernelsExistInEveryBuild) {
  EXPECT_TRUE(KernelRegistry::Global()->Has("CopyToDevice", Device::Type::kCpu));
  EXPECT_TRUE(KernelRegistry::Global()->Has("CopyToHost", Device::Type::kCpu));
}

TEST(Placement, CopyToHostForwardsAHostValue) {
  NodeDef node;
  node.name = "c";
  node.op = "CopyToHost";
  node.input = {"x"};
  auto kernel = KernelRegistry::Global()->Create(node, Device::Type::kCpu);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  Tensor x = *Tensor::FromVector<float>({1, 2, 3}, Shape({3}));
  const Tensor* in[] = {&x};
  Tensor out;
  KernelContext ctx(in, 1, &out, 1, Device::Cpu());
  ASSERT_TRUE((*kernel)->Compute(ctx).ok());
  EXPECT_EQ(out.buffer(), x.buffer());  // forwarded, not copied
}

TEST(Placement, PassRunsInAPassManager) {
  Graph g = MixedGraph();
  PlacementOptions opts;
  opts.device_count_override = 1;
  PassManager pm;
  pm.AddPass(CreatePlacementPass(opts));
  pm.SetVerifier([](const Graph& graph) { return Validate(graph); });
  ASSERT_TRUE(pm.Run(g).ok());
  EXPECT_EQ(CountOp(g, "CopyToDevice"), 1);
  EXPECT_EQ(CountOp(g, "CopyToHost"), 1);
}

}  // namespace
}  // namespace tdf
