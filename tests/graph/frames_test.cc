#include "graph/frames.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tdf/builder.h"
#include "tdf/reference_programs.h"
#include "tdf/transform.h"

namespace tdf {
namespace {

using ::testing::HasSubstr;

NodeDef N(const std::string& name, const std::string& op, std::vector<std::string> inputs = {}, AttrMap attrs = {}) {
  NodeDef n;
  n.name = name;
  n.op = op;
  n.input = std::move(inputs);
  n.attr = std::move(attrs);
  return n;
}

int IndexOf(const std::vector<NodeDef>& nodes, const std::string& name) {
  for (size_t i = 0; i < nodes.size(); ++i)
    if (nodes[i].name == name) return static_cast<int>(i);
  ADD_FAILURE() << "no node " << name;
  return -1;
}

int BlockOf(const FrameInfo& info, const std::vector<NodeDef>& nodes, const std::string& name) {
  int i = IndexOf(nodes, name);
  return i < 0 ? -1 : info.block_of_node[i];
}

Graph BuildOrFail(GraphBuilder& b) {
  absl::StatusOr<Graph> g = b.Build();
  EXPECT_TRUE(g.ok()) << g.status();
  return g.ok() ? *std::move(g) : Graph{};
}

TEST(InferFrames, StraightLineGraphIsAllMain) {
  std::vector<NodeDef> nodes = {N("a", "Const"), N("b", "Identity", {"a"}), N("c", "NoOp", {"^b"})};
  absl::StatusOr<FrameInfo> fi = InferFrames(nodes);
  ASSERT_TRUE(fi.ok()) << fi.status();
  ASSERT_EQ(fi->blocks.size(), 1u);
  EXPECT_EQ(fi->blocks[0].kind, BlockInfo::Kind::kMain);
  EXPECT_EQ(fi->blocks[0].parent, -1);
  EXPECT_EQ(fi->block_of_node, (std::vector<int>{0, 0, 0}));
}

TEST(InferFrames, WhileLoopBodyIsOneLoopBlock) {
  GraphBuilder b;
  Output n = b.Placeholder("n", DType::kInt64);
  std::vector<Output> r = b.While([&](const std::vector<Output>& v) { return b.Less(v[0], n); },
                                  [&](const std::vector<Output>& v) {
                                    return std::vector<Output>{b.Add(v[0], b.Const<int64_t>(1))};
                                  },
                                  {b.Const<int64_t>(0)}, {10, "loop"});
  b.Identity(r[0], "result");
  Graph g = BuildOrFail(b);
  absl::StatusOr<FrameInfo> fi = InferFrames(g.node);
  ASSERT_TRUE(fi.ok()) << fi.status();
  ASSERT_EQ(fi->blocks.size(), 2u);
  EXPECT_EQ(fi->blocks[1].kind, BlockInfo::Kind::kLoop);
  EXPECT_EQ(fi->blocks[1].name, "loop");
  EXPECT_EQ(fi->blocks[1].parent, 0);
  EXPECT_EQ(DescribeBlock(*fi, 1), "loop 'loop' in main");
  // Enter and Exit fire outside/inside exactly like TensorFlow's frames:
  // the Enter in the parent, the Merge/Switch/Exit/NextIteration in the loop.
  EXPECT_EQ(BlockOf(*fi, g.node, "n"), 0);
  EXPECT_EQ(BlockOf(*fi, g.node, "loop/enter_0"), 0);
  EXPECT_EQ(BlockOf(*fi, g.node, "loop/merge_0"), 1);
  EXPECT_EQ(BlockOf(*fi, g.node, "loop/switch_0"), 1);
  EXPECT_EQ(BlockOf(*fi, g.node, "loop/next_0"), 1);
  EXPECT_EQ(BlockOf(*fi, g.node, "loop/exit_0"), 1);
  EXPECT_EQ(BlockOf(*fi, g.node, "result"), 0);
  // Every body node is in the loop, including the pivot-triggered constant.
  for (size_t i = 0; i < g.node.size(); ++i) {
    if (g.node[i].name.rfind("loop/", 0) == 0 && g.node[i].op != "Enter")
      EXPECT_EQ(fi->block_of_node[i], 1) << g.node[i].name;
  }
}

TEST(InferFrames, NestedWhileLoopsNestBlocks) {
  GraphBuilder b;
  Output n = b.Placeholder("n", DType::kInt64);
  std::vector<Output> r = b.While(
      [&](const std::vector<Output>& v) { return b.Less(v[0], n); },
      [&](const std::vector<Output>& v) {
        std::vector<Output> inner = b.While([&](const std::vector<Output>& w) { return b.Less(w[0], v[0]); },
                                            [&](const std::vector<Output>& w) {
                                              return std::vector<Output>{b.Add(w[0], b.Const<int64_t>(1))};
                                            },
                                            {b.Const<int64_t>(0)}, {10, "inner"});
        return std::vector<Output>{b.Add(v[0], inner[0])};
      },
      {b.Const<int64_t>(1)}, {10, "outer"});
  b.Identity(r[0], "result");
  Graph g = BuildOrFail(b);
  absl::StatusOr<FrameInfo> fi = InferFrames(g.node);
  ASSERT_TRUE(fi.ok()) << fi.status();
  ASSERT_EQ(fi->blocks.size(), 3u);
  const int outer = BlockOf(*fi, g.node, "outer/merge_0");
  const int inner = BlockOf(*fi, g.node, "inner/merge_0");
  EXPECT_EQ(fi->blocks[outer].kind, BlockInfo::Kind::kLoop);
  EXPECT_EQ(fi->blocks[outer].parent, 0);
  EXPECT_EQ(fi->blocks[inner].kind, BlockInfo::Kind::kLoop);
  EXPECT_EQ(fi->blocks[inner].parent, outer);
  EXPECT_EQ(DescribeBlock(*fi, inner), "loop 'inner' in loop 'outer' in main");
  EXPECT_EQ(BlockOf(*fi, g.node, "inner/enter_0"), outer);
  EXPECT_EQ(BlockOf(*fi, g.node, "inner/exit_0"), inner);
  EXPECT_EQ(BlockOf(*fi, g.node, "outer/next_0"), outer);
  EXPECT_EQ(BlockOf(*fi, g.node, "result"), 0);
}

TEST(InferFrames, EntersWithOneFrameNameShareOneBlock) {
  std::vector<NodeDef> nodes = {
      N("a", "Const"), N("b", "Const"),
      N("ea", "Enter", {"a"}, {{"frame_name", "L"}}),
      N("eb", "Enter", {"b"}, {{"frame_name", "L"}, {"is_constant", true}}),
      N("add", "Add", {"ea", "eb"}),
  };
  absl::StatusOr<FrameInfo> fi = InferFrames(nodes);
  ASSERT_TRUE(fi.ok()) << fi.status();
  EXPECT_EQ(fi->blocks.size(), 2u);
  EXPECT_EQ(BlockOf(*fi, nodes, "add"), 1);
}

// f(x) = x + 1, called twice from main, in the transformed form of design.md §2.
std::vector<NodeDef> TransformedTwoCalls() {
  auto call = [](const std::string& name, const std::string& in, int64_t site) {
    return N(name, "Call", {in}, {{"T", DType::kInt64}, {"function", "f"}, {"call_site", site}, {"arg_index", 0}});
  };
  auto ret = [](const std::string& name, const std::string& call_name, int64_t site) {
    return N(name, "Return", {"f/r", "^" + call_name},
             {{"T", DType::kInt64}, {"function", "f"}, {"call_site", site}, {"result_index", 0}});
  };
  return {
      N("x", "Placeholder", {}, {{"dtype", DType::kInt64}}),
      call("call0", "x", 0),
      call("call1", "x", 1),
      N("f/x", "Merge", {"call0", "call1"}, {{"T", DType::kInt64}}),
      N("f/one", "Const", {}, {{"value", Tensor::Scalar<int64_t>(1)}, {"_function", "f"}}),
      N("f/add", "Add", {"f/x", "f/one"}),
      N("f/r", "Identity", {"f/add"}),
      ret("ret0", "call0", 0),
      ret("ret1", "call1", 1),
      N("sum", "Add", {"ret0", "ret1"}),
  };
}

TEST(InferFrames, CallReturnPlacesBodyInFunctionBlockAndReturnInCaller) {
  std::vector<NodeDef> nodes = TransformedTwoCalls();
  absl::StatusOr<FrameInfo> fi = InferFrames(nodes);
  ASSERT_TRUE(fi.ok()) << fi.status();
  ASSERT_EQ(fi->blocks.size(), 2u);
  EXPECT_EQ(fi->blocks[1].kind, BlockInfo::Kind::kFunction);
  EXPECT_EQ(fi->blocks[1].name, "f");
  EXPECT_EQ(fi->blocks[1].parent, -1);
  EXPECT_EQ(DescribeBlock(*fi, 1), "function 'f'");
  for (const char* main_node : {"x", "call0", "call1", "ret0", "ret1", "sum"})
    EXPECT_EQ(BlockOf(*fi, nodes, main_node), 0) << main_node;
  for (const char* body_node : {"f/x", "f/one", "f/add", "f/r"}) EXPECT_EQ(BlockOf(*fi, nodes, body_node), 1) << body_node;
}

TEST(InferFrames, SourcelessFunctionNodeCreatesItsBlockOnDemand) {
  std::vector<NodeDef> nodes = {N("g/c", "Const", {}, {{"_function", "g"}}), N("g/id", "Identity", {"g/c"}),
                                N("m", "Const")};
  absl::StatusOr<FrameInfo> fi = InferFrames(nodes);
  ASSERT_TRUE(fi.ok()) << fi.status();
  ASSERT_EQ(fi->blocks.size(), 2u);
  EXPECT_EQ(fi->block_of_node, (std::vector<int>{1, 1, 0}));
  EXPECT_EQ(fi->blocks[1].name, "g");
}

TEST(InferFrames, FunctionBodyAloneIsBlockZero) {
  std::vector<NodeDef> body = {N("x", "Arg", {}, {{"T", DType::kInt64}, {"index", 0}}),
                               N("y", "Identity", {"x"}),
                               N("r", "Retval", {"y"}, {{"T", DType::kInt64}, {"index", 0}})};
  absl::StatusOr<FrameInfo> fi = InferFrames(body, "f");
  ASSERT_TRUE(fi.ok()) << fi.status();
  ASSERT_EQ(fi->blocks.size(), 1u);
  EXPECT_EQ(fi->blocks[0].kind, BlockInfo::Kind::kFunction);
  EXPECT_EQ(fi->blocks[0].name, "f");
  EXPECT_EQ(fi->block_of_node, (std::vector<int>{0, 0, 0}));
}

TEST(InferFrames, IsDeterministic) {
  std::vector<NodeDef> nodes = TransformedTwoCalls();
  absl::StatusOr<FrameInfo> a = InferFrames(nodes);
  absl::StatusOr<FrameInfo> b = InferFrames(nodes);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->block_of_node, b->block_of_node);
}

TEST(InferFrames, ExitOutsideLoopIsAnError) {
  std::vector<NodeDef> nodes = {N("a", "Const"), N("x", "Exit", {"a"}), N("y", "Identity", {"x"})};
  absl::StatusOr<FrameInfo> fi = InferFrames(nodes);
  EXPECT_EQ(fi.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(fi.status().message(), HasSubstr("node 'x' (Exit): Exit outside a loop frame"));
}

TEST(InferFrames, NextIterationOutsideLoopIsAnError) {
  std::vector<NodeDef> nodes = {N("a", "Const"), N("ni", "NextIteration", {"a"})};
  absl::StatusOr<FrameInfo> fi = InferFrames(nodes);
  EXPECT_THAT(fi.status().message(), HasSubstr("node 'ni' (NextIteration): NextIteration outside a loop frame"));
}

TEST(InferFrames, InputsFromTwoFramesAreAnError) {
  std::vector<NodeDef> nodes = {N("a", "Const"), N("e", "Enter", {"a"}, {{"frame_name", "w"}}),
                                N("bad", "Add", {"a", "e"})};
  absl::StatusOr<FrameInfo> fi = InferFrames(nodes);
  EXPECT_EQ(fi.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(fi.status().message(),
              HasSubstr("node 'bad' (Add): inputs from two different frames: main and loop 'w' in main"));
}

TEST(InferFrames, ControlInputFromAnotherFrameIsAnError) {
  std::vector<NodeDef> nodes = {N("a", "Const"), N("e", "Enter", {"a"}, {{"frame_name", "w"}}),
                                N("in_loop", "Identity", {"e"}), N("bad", "Identity", {"a", "^in_loop"})};
  absl::StatusOr<FrameInfo> fi = InferFrames(nodes);
  EXPECT_THAT(fi.status().message(), HasSubstr("node 'bad' (Identity): inputs from two different frames"));
}

TEST(InferFrames, UnreachableNodeIsAnError) {
  std::vector<NodeDef> nodes = {N("a", "Const"), N("p", "Identity", {"q"}), N("q", "Identity", {"p"})};
  absl::StatusOr<FrameInfo> fi = InferFrames(nodes);
  EXPECT_THAT(fi.status().message(), HasSubstr("node 'p' (Identity): is not reachable from any source node"));
}

TEST(InferFrames, ReturnWithoutCallControlInputIsUnreachable) {
  std::vector<NodeDef> nodes = {N("a", "Const"), N("r", "Return", {"a"}, {{"function", "f"}})};
  absl::StatusOr<FrameInfo> fi = InferFrames(nodes);
  EXPECT_THAT(fi.status().message(), HasSubstr("node 'r' (Return): is not reachable"));
}

TEST(InferFrames, DanglingInputIsAnError) {
  std::vector<NodeDef> nodes = {N("a", "Identity", {"nope"})};
  absl::StatusOr<FrameInfo> fi = InferFrames(nodes);
  EXPECT_THAT(fi.status().message(), HasSubstr("node 'a' (Identity): input 'nope' names an unknown node"));
}

TEST(InferFrames, ReferenceProgramsAndTheirFunctionBodiesInfer) {
  using reference::OpChain;
  for (const Graph& g : {reference::Fib(), reference::Ack(), reference::Tak(), reference::Fact(), reference::EvenOdd(),
                         reference::Exp(), reference::Primes(), reference::McCarthy91(), reference::Sum(),
                         reference::Yaghi(), reference::WhileLoop(), OpChain(5), reference::CallInWhile(),
                         reference::WhileInFunction()}) {
    absl::StatusOr<FrameInfo> fi = InferFrames(g.node);
    EXPECT_TRUE(fi.ok()) << fi.status();
    for (const auto& [name, f] : g.library.functions()) {
      absl::StatusOr<FrameInfo> body = InferFrames(f.node, name);
      ASSERT_TRUE(body.ok()) << name << ": " << body.status();
      EXPECT_EQ(body->blocks[0].kind, BlockInfo::Kind::kFunction);
    }
  }
}

TEST(InferFrames, TransformedReferenceProgramsInfer) {
  for (const Graph& g : {reference::Fib(), reference::Ack(), reference::Tak(), reference::EvenOdd(),
                         reference::Exp(), reference::Primes(), reference::McCarthy91(), reference::Yaghi(),
                         reference::CallInWhile(), reference::WhileInFunction()}) {
    absl::StatusOr<Graph> t = StaticizeRecursion(g);
    ASSERT_TRUE(t.ok()) << t.status();
    absl::StatusOr<FrameInfo> fi = InferFrames(t->node);
    ASSERT_TRUE(fi.ok()) << fi.status();
    // One function block per function of the library, whatever the number
    // of call sites.
    int functions = 0;
    for (const BlockInfo& b : fi->blocks) functions += b.kind == BlockInfo::Kind::kFunction;
    EXPECT_EQ(functions, static_cast<int>(g.library.functions().size()));
    // Calls and Returns fire in the caller's block; Call data consumers in the callee's.
    for (size_t i = 0; i < t->node.size(); ++i) {
      const NodeDef& n = t->node[i];
      if (n.op != "Return") continue;
      const std::string call = InputRef::Parse(n.input.back()).value().node;
      EXPECT_EQ(fi->block_of_node[i], BlockOf(*fi, t->node, call)) << n.name;
    }
  }
}

TEST(InferFrames, CallInsideLoopAndLoopInsideFunction) {
  absl::StatusOr<Graph> t = StaticizeRecursion(reference::CallInWhile());
  ASSERT_TRUE(t.ok()) << t.status();
  absl::StatusOr<FrameInfo> fi = InferFrames(t->node);
  ASSERT_TRUE(fi.ok()) << fi.status();
  bool saw_call_in_loop = false;
  for (size_t i = 0; i < t->node.size(); ++i) {
    if (t->node[i].op != "Call") continue;
    const BlockInfo& b = fi->blocks[fi->block_of_node[i]];
    saw_call_in_loop |= b.kind == BlockInfo::Kind::kLoop && b.parent == 0;
  }
  EXPECT_TRUE(saw_call_in_loop);

  absl::StatusOr<Graph> w = StaticizeRecursion(reference::WhileInFunction());
  ASSERT_TRUE(w.ok()) << w.status();
  fi = InferFrames(w->node);
  ASSERT_TRUE(fi.ok()) << fi.status();
  bool saw_loop_in_function = false;
  for (size_t b = 0; b < fi->blocks.size(); ++b) {
    const BlockInfo& blk = fi->blocks[b];
    if (blk.kind == BlockInfo::Kind::kLoop && fi->blocks[blk.parent].kind == BlockInfo::Kind::kFunction) {
      saw_loop_in_function = true;
      EXPECT_THAT(DescribeBlock(*fi, static_cast<int>(b)), HasSubstr("in function '"));
    }
  }
  EXPECT_TRUE(saw_loop_in_function);
}

}  // namespace
}  // namespace tdf
