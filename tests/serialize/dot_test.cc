#include "tdf/dot.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tdf/reference_programs.h"
#include "tdf/transform.h"

namespace tdf {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

int Count(const std::string& text, const std::string& needle) {
  int n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

TEST(Dot, UntransformedGraphHasOneClusterPerFunction) {
  const std::string dot = GraphToDot(reference::EvenOdd());
  EXPECT_THAT(dot, HasSubstr("digraph \"tdf\" {"));
  EXPECT_THAT(dot, HasSubstr("label=\"function even(n: int64) -> ("));
  EXPECT_THAT(dot, HasSubstr("label=\"function odd(n: int64) -> ("));
  EXPECT_EQ(Count(dot, "subgraph \"cluster_lib_"), 2);
  EXPECT_THAT(dot, HasSubstr("Invoke odd"));
  EXPECT_THAT(dot, HasSubstr("shape=invtriangle"));  // Switch
  EXPECT_THAT(dot, HasSubstr("shape=triangle"));     // Merge
  EXPECT_EQ(dot.back(), '\n');
  EXPECT_EQ(Count(dot, "{"), Count(dot, "}"));
}

TEST(Dot, DeclaredOnlyFunctionIsMarked) {
  Graph g;
  ASSERT_TRUE(g.library.Declare({"later", {{"x", DType::kInt64}}, {{"y", DType::kInt64}}}).ok());
  EXPECT_THAT(GraphToDot(g), HasSubstr("[declared only]"));
}

TEST(Dot, ControlEdgesAreDashedAndPortsLabelled) {
  Graph g;
  NodeDef a{"a", "Placeholder", {}, {{"dtype", DType::kBool}}, ""};
  NodeDef sw{"sw", "Switch", {"a", "a"}, {{"T", DType::kBool}}, ""};
  NodeDef id{"id", "Identity", {"sw:1", "^a"}, {}, ""};
  g.node = {a, sw, id};
  const std::string dot = GraphToDot(g);
  EXPECT_THAT(dot, HasSubstr("n0 -> n2 [style=dashed"));
  EXPECT_THAT(dot, HasSubstr("n1 -> n2 [label=\"1\"]"));
  EXPECT_THAT(dot, HasSubstr("n0 -> n1;"));  // port 0: no label
}

TEST(Dot, LoopFramesAreClustersWithBackEdgesUnconstrained) {
  const std::string dot = GraphToDot(reference::WhileLoop());
  EXPECT_THAT(dot, HasSubstr("label=\"loop "));
  EXPECT_THAT(dot, HasSubstr("shape=house"));     // Enter
  EXPECT_THAT(dot, HasSubstr("shape=invhouse"));  // Exit
  EXPECT_THAT(dot, HasSubstr("shape=diamond"));   // NextIteration
  EXPECT_THAT(dot, HasSubstr("constraint=false"));
  EXPECT_THAT(dot, Not(HasSubstr("no frame clusters")));
}

TEST(Dot, TransformedGraphLabelsCallSitesAndClustersFunctions) {
  absl::StatusOr<Graph> g = StaticizeRecursion(reference::Fib());
  ASSERT_TRUE(g.ok()) << g.status();
  const std::string dot = GraphToDot(*g);
  EXPECT_THAT(dot, Not(HasSubstr("no frame clusters")));
  EXPECT_THAT(dot, HasSubstr("label=\"function fib\""));
  EXPECT_THAT(dot, HasSubstr("Call fib #0 arg 0"));
  EXPECT_THAT(dot, HasSubstr("Call fib #2 arg 0"));
  EXPECT_THAT(dot, HasSubstr("Return fib #1"));
  EXPECT_THAT(dot, HasSubstr("shape=rarrow"));
  EXPECT_THAT(dot, HasSubstr("shape=larrow"));
  EXPECT_THAT(dot, HasSubstr("style=dashed"));  // Call -> Return control edges
  EXPECT_EQ(Count(dot, "{"), Count(dot, "}"));
}

TEST(Dot, InvalidGraphIsStillDrawn) {
  Graph g;
  g.node.push_back(NodeDef{"x", "Identity", {"nowhere", "bad:port"}, {}, ""});
  g.node.push_back(NodeDef{"we\"ird\n\xff", "Exit", {"x"}, {}, ""});
  const std::string dot = GraphToDot(g);
  EXPECT_THAT(dot, HasSubstr("? nowhere"));
  EXPECT_THAT(dot, HasSubstr("we\\\"ird\\n?"));
  EXPECT_THAT(dot, HasSubstr("no frame clusters"));
}

}  // namespace
}  // namespace tdf
