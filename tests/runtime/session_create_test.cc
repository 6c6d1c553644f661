// Session::Create's two forms: from a graph the caller keeps (copied) and
// from one it gives up (Create(Graph&&): its nodes are taken, not copied).
// Both run the same; a call-free main graph skips the transformation.
#include <gtest/gtest.h>

#include <cstdint>
#include <utility>

#include "runtime/exec_test_util.h"
#include "tdf/builder.h"
#include "tdf/reference_programs.h"
#include "tdf/session.h"
#include "tdf/transform.h"

namespace tdf {
namespace {

using exec_test::I;
using exec_test::RunResult;

TEST(SessionCreate, FromAnRvalueTakesTheGraphAndRunsTheSame) {
  for (ExecutionMode mode : {ExecutionMode::kStatic, ExecutionMode::kDynamic}) {
    SessionOptions options;
    options.mode = mode;
    const Graph fib = reference::Fib();
    auto copied = Session::Create(fib, options);
    ASSERT_TRUE(copied.ok()) << copied.status();
    Graph given = reference::Fib();
    auto taken = Session::Create(std::move(given), options);
    ASSERT_TRUE(taken.ok()) << taken.status();
    EXPECT_TRUE(given.node.empty());
    EXPECT_TRUE(given.library.functions().empty());
    EXPECT_EQ(fib, reference::Fib());  // the lvalue form leaves the caller's graph alone
    for (int64_t n : {0, 1, 15}) {
      EXPECT_EQ(RunResult(copied->get(), {{"n", I(n)}}).scalar<int64_t>(), reference::NativeFib(n));
      EXPECT_EQ(RunResult(taken->get(), {{"n", I(n)}}).scalar<int64_t>(), reference::NativeFib(n));
    }
    EXPECT_EQ((*copied)->executable_graph(), (*taken)->executable_graph());
  }
}

TEST(SessionCreate, ACallFreeGraphRunsAsItIs) {
  // Static mode: no Invoke, so the graph is its own transformation; its
  // (unused) library does not come along, as StaticizeRecursion drops it.
  Graph chain = reference::OpChain(50);
  GraphBuilder unused;
  (void)unused.DefineFunction(FunctionSignature{"unused", {{"x", DType::kInt64}}, {{"r", DType::kInt64}}},
                              [](GraphBuilder& f, const std::vector<Output>& a) -> std::vector<Output> {
                                return {f.Add(a[0], f.Const<int64_t>(1))};
                              });
  absl::StatusOr<Graph> lib = unused.Build();
  ASSERT_TRUE(lib.ok()) << lib.status();
  chain.library = lib->library;
  absl::StatusOr<Graph> transformed = StaticizeRecursion(chain);
  ASSERT_TRUE(transformed.ok()) << transformed.status();
  for (bool rvalue : {false, true}) {
    Graph input = chain;
    auto s = rvalue ? Session::Create(std::move(input)) : Session::Create(input);
    ASSERT_TRUE(s.ok()) << s.status();
    EXPECT_EQ((*s)->executable_graph(), *transformed);
    EXPECT_TRUE((*s)->executable_graph().library.functions().empty());
    auto out = (*s)->Run({{"x", I(3)}}, {"result"});
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ((*out)[0].scalar<int64_t>(), 3 + 50);
  }
}

TEST(SessionCreate, AnInvalidRvalueGraphIsAnErrorAndKeptIntact) {
  GraphBuilder b;
  b.Identity(b.Placeholder("x", DType::kInt64), "result");
  absl::StatusOr<Graph> g = b.Build();
  ASSERT_TRUE(g.ok()) << g.status();
  g->node.back().input = {"missing"};
  const Graph before = *g;
  auto s = Session::Create(std::move(*g));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("missing"), std::string::npos) << s.status();
  EXPECT_EQ(*g, before);  // validation fails before anything is taken
}

// A device name the runtime does not know is an error naming the node
// (it was the bare "unknown device" message, found by mutated_graphs_test).
TEST(SessionCreate, AnUnknownDeviceNamesTheNode) {
  GraphBuilder b;
  Output x = b.Placeholder("x", DType::kInt64);
  Output y = b.Add(x, b.Const<int64_t>(1));
  b.SetDevice(y, "tpu:7");
  b.Identity(y, "result");
  absl::StatusOr<Graph> g = b.Build();
  ASSERT_TRUE(g.ok()) << g.status();
  absl::StatusOr<std::unique_ptr<Session>> s = Session::Create(*g);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("node '" + b.Name(y) + "' (Add)"), absl::string_view::npos) << s.status();
  EXPECT_NE(s.status().message().find("unknown device 'tpu:7'"), absl::string_view::npos) << s.status();
}

}  // namespace
}  // namespace tdf
