// Rank placement (tdf::DeviceName, design.md §8) through the placement pass
// and in a one-process Session, where every rank is the local process.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tdf/builder.h"
#include "tdf/placement.h"
#include "tdf/reference_programs.h"
#include "tdf/session.h"
#include "tdf/validate.h"

namespace tdf {
namespace {

const NodeDef& Node(const Graph& g, const std::string& name) {
  const NodeDef* n = g.FindNode(name);
  EXPECT_NE(n, nullptr) << "no node " << name;
  static const NodeDef kMissing;
  return n != nullptr ? *n : kMissing;
}

// x (rank 0, host) -> t = Tanh (rank 1) -> s = Sum (rank 0, cpu)
Graph TwoRankGraph() {
  GraphBuilder b;
  Output x = b.Placeholder("x", DType::kFloat32);
  Output t = b.Op("Tanh", {x}, {}, "t");
  Output s = b.Op("Sum", {t}, {}, "s");
  b.SetDevice(x, "rank:0");
  b.SetDevice(t, "rank:1");
  b.SetDevice(s, "/job:worker/task:0/device:CPU:0");
  absl::StatusOr<Graph> g = b.Build();
  EXPECT_TRUE(g.ok()) << g.status();
  return *g;
}

TEST(RankPlacement, AutoPlacementKeepsTheRankAndPutsCopiesWhereHostBytesCross) {
  Graph g = TwoRankGraph();
  PlacementOptions opts;
  opts.place_tensor_ops_on_gpu = true;
  opts.device_count_override = 1;
  PlacementReport report;
  ASSERT_TRUE(PlaceDevices(g, opts, &report).ok());
  // "rank:1" names no device: the Tanh goes to rank 1's GPU. Sum names the
  // CPU of rank 0 and stays there.
  EXPECT_EQ(Node(g, "t").device, "rank:1/cuda:0");
  EXPECT_EQ(Node(g, "s").device, "/job:worker/task:0/device:CPU:0");
  EXPECT_EQ(report.copies_to_device, 1);
  EXPECT_EQ(report.copies_to_host, 1);
  // The host value goes to the GPU on the consumer's rank; the device value
  // comes back to the host on the producer's rank.
  const NodeDef& to_device = Node(g, Node(g, "t").input[0]);
  EXPECT_EQ(to_device.op, "CopyToDevice");
  EXPECT_EQ(to_device.device, "rank:1/cpu");
  EXPECT_EQ(*to_device.GetString("device"), "cuda:0");
  const NodeDef& to_host = Node(g, Node(g, "s").input[0]);
  EXPECT_EQ(to_host.op, "CopyToHost");
  EXPECT_EQ(to_host.device, "rank:1/cpu");
  EXPECT_TRUE(Validate(g).ok()) << Validate(g);
}

TEST(RankPlacement, OneCopyPerRankForAValueUsedOnTwoRanksGpus) {
  GraphBuilder b;
  Output x = b.Placeholder("x", DType::kFloat32);
  Output t0 = b.Op("Tanh", {x}, {}, "t0");
  Output t1 = b.Op("Tanh", {x}, {}, "t1");
  b.SetDevice(t0, "rank:0/cuda:0");
  b.SetDevice(t1, "rank:1/cuda:0");
  b.Op("AddN", {t0, t1}, {}, "sum");
  absl::StatusOr<Graph> g = b.Build();
  ASSERT_TRUE(g.ok()) << g.status();
  PlacementOptions opts;
  opts.device_count_override = 1;
  PlacementReport report;
  ASSERT_TRUE(PlaceDevices(*g, opts, &report).ok());
  EXPECT_EQ(report.copies_to_device, 2);
  const NodeDef& c0 = Node(*g, Node(*g, "t0").input[0]);
  const NodeDef& c1 = Node(*g, Node(*g, "t1").input[0]);
  EXPECT_NE(c0.name, c1.name);
  EXPECT_EQ(c0.device, "rank:0/cpu");
  EXPECT_EQ(c1.device, "rank:1/cpu");
}

TEST(RankPlacement, CpuFallbackKeepsTheRank) {
  Graph g = TwoRankGraph();
  g.node[1].device = "rank:1/cuda:0";
  PlacementOptions opts;
  opts.device_count_override = 0;
  PlacementReport report;
  ASSERT_TRUE(PlaceDevices(g, opts, &report).ok());
  EXPECT_TRUE(report.fell_back_to_cpu);
  EXPECT_EQ(Node(g, "t").device, "rank:1/cpu");
}

TEST(RankPlacement, MalformedRankIsAnErrorNamingTheNode) {
  Graph g = TwoRankGraph();
  g.node[1].device = "rank:one";
  absl::Status s = PlaceDevices(g, PlacementOptions{});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("node 't' (Tanh)"), absl::string_view::npos) << s;
  EXPECT_NE(s.message().find("bad rank 'one'"), absl::string_view::npos) << s;
}

// Every node of fib, main graph and body, on some rank in one of the
// accepted spellings: a one-process Session runs it unchanged.
TEST(RankPlacement, OneProcessSessionRunsEveryRankLocally) {
  Graph g = reference::Fib();
  const std::vector<std::string> spellings = {"rank:0", "rank:1/cpu", "/job:worker/task:2/device:CPU:0",
                                              "/job:localhost/replica:0/task:0/device:CPU:0", "rank:3"};
  int k = 0;
  for (NodeDef& n : g.node) n.device = spellings[k++ % spellings.size()];
  FunctionDef fib = *g.library.Find("fib");
  for (NodeDef& n : fib.node) n.device = spellings[k++ % spellings.size()];
  g.library.Put(fib);
  ASSERT_TRUE(Validate(g).ok()) << Validate(g);
  absl::StatusOr<std::unique_ptr<Session>> session = Session::Create(g);
  ASSERT_TRUE(session.ok()) << session.status();
  RunStats stats;
  absl::StatusOr<std::vector<Tensor>> out =
      (*session)->Run({{"n", Tensor::Scalar<int64_t>(15)}}, {"result"}, {}, &stats);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].scalar<int64_t>(), reference::NativeFib(15));
  EXPECT_EQ(stats.live_frames_after_run, 0);
}

}  // namespace
}  // namespace tdf
