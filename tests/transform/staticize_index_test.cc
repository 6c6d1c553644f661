// StaticizeRecursionIndexed's index of its output (transform/staticize_recursion.h)
// must be the one NodeIndex::Build makes from the output: Session::Create
// compiles with it instead of building that one (issue #26, item 5).
#include <string>
#include <vector>

#include "graph/node_index.h"
#include "gtest/gtest.h"
#include "tdf/autodiff.h"
#include "tdf/builder.h"
#include "tdf/reference_programs.h"
#include "tdf/transform.h"
#include "transform/staticize_recursion.h"

namespace tdf {
namespace {

void ExpectSameIndex(const Graph& in) {
  absl::StatusOr<StaticizedGraph> out = StaticizeRecursionIndexed(in);
  ASSERT_TRUE(out.ok()) << out.status();
  absl::StatusOr<Graph> plain = StaticizeRecursion(in);
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_TRUE(out->graph == *plain);
  const std::vector<NodeDef>& nodes = out->graph.node;
  absl::StatusOr<NodeIndex> built = NodeIndex::Build(nodes);
  ASSERT_TRUE(built.ok()) << built.status();
  ASSERT_EQ(out->index.size(), nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) {
    EXPECT_EQ(out->index.Find(nodes[i].name), static_cast<int32_t>(i)) << nodes[i].name;
    absl::Span<const ResolvedInput> got = out->index.inputs(i), want = built->inputs(i);
    ASSERT_EQ(got.size(), want.size()) << nodes[i].name;
    for (size_t j = 0; j < got.size(); ++j) {
      EXPECT_EQ(got[j].src, want[j].src) << nodes[i].name << " input " << nodes[i].input[j];
      EXPECT_EQ(got[j].port, want[j].port) << nodes[i].name << " input " << nodes[i].input[j];
      EXPECT_EQ(got[j].is_control, want[j].is_control) << nodes[i].name << " input " << nodes[i].input[j];
    }
  }
  EXPECT_EQ(out->index.Find("no such node"), -1);
}

TEST(StaticizeIndex, ReferencePrograms) {
  for (const Graph& g : {reference::Fib(), reference::Ack(), reference::Tak(), reference::Fact(),
                         reference::EvenOdd(), reference::Exp(), reference::Primes(), reference::McCarthy91(),
                         reference::Sum(), reference::Yaghi(), reference::CallInWhile(),
                         reference::WhileInFunction(), reference::ManyCalls(40, 7), reference::CallChain(30),
                         reference::LongBody(12), reference::WideBody(20), reference::MultiWayIf(9)}) {
    ExpectSameIndex(g);
  }
}

// Split sites (site_group, partial_args, partial_results), as AddGradients
// makes them: a site's parts share a label and its Merges read both parts.
TEST(StaticizeIndex, GradientsOfARecursiveFunction) {
  Graph g = reference::Exp();
  absl::StatusOr<std::vector<std::string>> dx = AddGradients(g, {"result"}, {"x"});
  ASSERT_TRUE(dx.ok()) << dx.status();
  int grouped = 0;
  for (const NodeDef& n : g.node) grouped += n.op == "Invoke" && n.FindAttr("site_group") != nullptr;
  for (const auto& [name, f] : g.library.functions())
    for (const NodeDef& n : f.node) grouped += n.op == "Invoke" && n.FindAttr("site_group") != nullptr;
  ASSERT_GT(grouped, 0);  // what this test is for
  ExpectSameIndex(g);
}

// Results by port, control inputs from and to an Invoke, a function without
// arguments (one Call), in bodies small and large.
TEST(StaticizeIndex, PortsControlEdgesAndArgumentlessCalls) {
  GraphBuilder b;
  ASSERT_TRUE(b.DefineFunction({"swap", {{"a", DType::kInt64}, {"b", DType::kFloat64}},
                                {{"p", DType::kFloat64}, {"q", DType::kInt64}}},
                               [](GraphBuilder& f, const std::vector<Output>& a) {
                                 return std::vector<Output>{a[1], a[0]};
                               })
                  .ok());
  ASSERT_TRUE(b.DefineFunction({"one", {}, {{"r", DType::kInt64}}},
                               [](GraphBuilder& f, const std::vector<Output>&) {
                                 Output sum = f.Const<int64_t>(1);
                                 // More nodes than a body searched by name (Scope::kScanMax).
                                 for (int i = 0; i < 20; ++i) sum = f.Add(sum, f.Const<int64_t>(i));
                                 return std::vector<Output>{sum};
                               })
                  .ok());
  Output x = b.Placeholder("x", DType::kInt64);
  Output y = b.Placeholder("y", DType::kFloat64);
  Output gate = b.Op("NoOp", {}, {}, "gate");
  std::vector<Output> r = b.Call("swap", {b.Add(x, b.Call("one", {})[0]), y});
  b.AddControlInput(r[0], gate);
  Output after = b.Op("NoOp", {}, {}, "after");
  b.AddControlInput(after, r[0]);
  b.Identity(r[1], "q");
  b.Identity(r[0], "p");
  std::vector<Output> again = b.Call("swap", {r[1], r[0]});
  b.Identity(again[1], "q2");
  absl::StatusOr<Graph> in = b.Build();
  ASSERT_TRUE(in.ok()) << in.status();
  ExpectSameIndex(*in);
}

}  // namespace
}  // namespace tdf
