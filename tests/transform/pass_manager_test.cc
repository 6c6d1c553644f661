// GraphPass / PassManager and the pruning pass.
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tdf/builder.h"
#include "tdf/reference_programs.h"
#include "tdf/transform.h"

namespace tdf {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Appends its name to a shared log; fails when told to.
class LoggingPass : public GraphPass {
 public:
  LoggingPass(std::string name, std::vector<std::string>* log, bool fail = false)
      : name_(std::move(name)), log_(log), fail_(fail) {}
  absl::string_view name() const override { return name_; }
  absl::Status Run(Graph& graph) override {
    log_->push_back(name_);
    if (fail_) return absl::InternalError("boom");
    NodeDef n;
    n.name = name_;
    n.op = "NoOp";
    graph.node.push_back(n);
    return absl::OkStatus();
  }

 private:
  std::string name_;
  std::vector<std::string>* log_;
  bool fail_;
};

TEST(PassManager, RunsPassesInOrder) {
  std::vector<std::string> log;
  PassManager pm;
  pm.AddPass(std::make_unique<LoggingPass>("a", &log));
  pm.AddPass(std::make_unique<LoggingPass>("b", &log));
  EXPECT_EQ(pm.size(), 2u);
  Graph g;
  ASSERT_TRUE(pm.Run(g).ok());
  EXPECT_THAT(log, ElementsAre("a", "b"));
  ASSERT_EQ(g.node.size(), 2u);
  EXPECT_EQ(g.node[1].name, "b");
}

TEST(PassManager, StopsAtTheFirstFailureAndNamesThePass) {
  std::vector<std::string> log;
  PassManager pm;
  pm.AddPass(std::make_unique<LoggingPass>("a", &log));
  pm.AddPass(std::make_unique<LoggingPass>("bad", &log, /*fail=*/true));
  pm.AddPass(std::make_unique<LoggingPass>("c", &log));
  Graph g;
  absl::Status s = pm.Run(g);
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_EQ(s.message(), "pass 'bad': boom");
  EXPECT_THAT(log, ElementsAre("a", "bad"));
}

TEST(PassManager, VerifierRunsAfterEveryPassAndNamesTheCulprit) {
  std::vector<std::string> log;
  PassManager pm;
  pm.AddPass(std::make_unique<LoggingPass>("a", &log));
  pm.AddPass(std::make_unique<LoggingPass>("b", &log));
  pm.AddPass(std::make_unique<LoggingPass>("c", &log));
  std::vector<size_t> sizes;
  pm.SetVerifier([&](const Graph& g) {
    sizes.push_back(g.node.size());
    return g.node.size() < 2 ? absl::OkStatus() : absl::InvalidArgumentError("too big");
  });
  Graph g;
  absl::Status s = pm.Run(g);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("after pass 'b'"));
  EXPECT_THAT(s.message(), HasSubstr("too big"));
  EXPECT_THAT(sizes, ElementsAre(1u, 2u));
  EXPECT_THAT(log, ElementsAre("a", "b"));
}

TEST(PassManager, BuiltinPassesHaveStableNames) {
  EXPECT_EQ(CreateStaticizeRecursionPass()->name(), "staticize-recursion");
  EXPECT_EQ(CreatePruneUnreachableFunctionsPass()->name(), "prune-unreachable-functions");
}

TEST(PassManager, StaticizePassReplacesTheGraph) {
  Graph g = reference::EvenOdd();
  absl::StatusOr<Graph> want = StaticizeRecursion(g);
  ASSERT_TRUE(want.ok()) << want.status();
  PassManager pm;
  pm.AddPass(CreateStaticizeRecursionPass());
  ASSERT_TRUE(pm.Run(g).ok());
  EXPECT_TRUE(g == *want);
}

TEST(PassManager, FailingStaticizePassLeavesTheGraphUnchanged) {
  Graph g = reference::Fib();
  for (NodeDef& n : g.node)
    if (n.op == "Invoke") n.attr["function"] = std::string("missing");
  const Graph before = g;
  PassManager pm;
  pm.AddPass(CreateStaticizeRecursionPass());
  absl::Status s = pm.Run(g);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr("pass 'staticize-recursion': node '"));
  EXPECT_TRUE(g == before);
}

FunctionSignature Unary(const std::string& name) { return {name, {{"x", DType::kInt64}}, {{"r", DType::kInt64}}}; }

// main calls a; a calls b; c calls d; d is declared only; e calls itself.
Graph PruneFixture() {
  GraphBuilder b;
  auto identity = [](GraphBuilder& f, const std::vector<Output>& a) { return std::vector<Output>{f.Identity(a[0])}; };
  auto calling = [](const std::string& callee) {
    return [callee](GraphBuilder& f, const std::vector<Output>& a) { return f.Call(callee, {a[0]}); };
  };
  EXPECT_TRUE(b.DefineFunction(Unary("b"), identity).ok());
  EXPECT_TRUE(b.DefineFunction(Unary("a"), calling("b")).ok());
  EXPECT_TRUE(b.Declare(Unary("d")).ok());
  EXPECT_TRUE(b.DefineFunction(Unary("c"), calling("d")).ok());
  EXPECT_TRUE(b.Declare(Unary("e")).ok());
  EXPECT_TRUE(b.DefineFunction(Unary("e"), calling("e")).ok());
  b.Identity(b.Call("a", {b.Const<int64_t>(1)})[0], "result");
  absl::StatusOr<Graph> g = b.Build();
  EXPECT_TRUE(g.ok()) << g.status();
  return g.ok() ? *std::move(g) : Graph{};
}

std::vector<std::string> FunctionNames(const Graph& g) {
  std::vector<std::string> names;
  for (const auto& [name, f] : g.library.functions()) names.push_back(name);
  return names;
}

TEST(PruneUnreachableFunctions, KeepsTransitivelyCalledFunctionsOnly) {
  Graph g = PruneFixture();
  ASSERT_THAT(FunctionNames(g), ElementsAre("a", "b", "c", "d", "e"));
  const std::vector<NodeDef> main_nodes = g.node;
  ASSERT_TRUE(PruneUnreachableFunctions(g).ok());
  EXPECT_THAT(FunctionNames(g), ElementsAre("a", "b"));
  EXPECT_EQ(g.node, main_nodes);
}

TEST(PruneUnreachableFunctions, KeepsCalledButUndefinedFunctionsForLaterPassesToReport) {
  Graph g = PruneFixture();
  for (NodeDef& n : g.node)
    if (n.op == "Invoke") n.attr["function"] = std::string("c");
  ASSERT_TRUE(PruneUnreachableFunctions(g).ok());
  EXPECT_THAT(FunctionNames(g), ElementsAre("c", "d"));
  EXPECT_FALSE(g.library.Find("d")->defined);
}

TEST(PruneUnreachableFunctions, MainGraphWithoutCallsEmptiesTheLibrary) {
  Graph g = PruneFixture();
  g.node.clear();
  ASSERT_TRUE(PruneUnreachableFunctions(g).ok());
  EXPECT_TRUE(g.library.empty());
}

}  // namespace
}  // namespace tdf
