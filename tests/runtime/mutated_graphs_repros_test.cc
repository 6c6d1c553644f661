// Seed-free tests of the graph mutation test (mutated_graphs.h): the
// smallest form of each bug the mutants found (the mutants themselves run in
// mutated_graphs_test.cc; kKnownBugs in mutated_graphs.h notes the bugs),
// and a later find of theirs, Calls that disagree on an argument index.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "runtime/mutated_graphs.h"
#include "tdf/autodiff.h"
#include "tdf/builder.h"
#include "tdf/graph.h"
#include "tdf/reference_programs.h"
#include "tdf/session.h"
#include "tdf/tensor.h"

namespace tdf {
namespace mutated_graphs {
namespace {

// The smallest form of each bug the mutants found, independent of seeds.
// Each must end like any mutant (a Status; OK leaves no frame live); each
// runs in a child process, since each crashed (or, F, left frames live)
// before the fixes: a failure shows the child's sanitizer report or signal.

struct Repro {
  std::string name;
  Graph graph;
  SessionOptions options;
  Feeds feeds;
  std::vector<std::string> fetches;
  std::vector<std::string> targets;
};

NodeDef* FindIn(std::vector<NodeDef>& nodes, const std::string& name) {
  for (NodeDef& n : nodes)
    if (n.name == name) return &n;
  ADD_FAILURE() << "no node " << name;
  static NodeDef dummy;
  return &dummy;
}

Graph TransformedGraph(Graph g) {
  absl::StatusOr<std::unique_ptr<Session>> s = Session::Create(std::move(g));
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? (*s)->executable_graph() : Graph{};
}

std::vector<Repro> Repros() {
  using namespace reference;  // NOLINT
  std::vector<Repro> out;
  SessionOptions o;
  o.deadline = kDeadline;
  {
    // Bug A: a lone Enter (nothing reads it), run as a target.
    GraphBuilder b;
    Output n = b.Placeholder("n", DType::kInt64);
    b.Op("Enter", {n}, {{"T", DType::kInt64}, {"frame_name", "loop"}}, "lonely_enter");
    absl::StatusOr<Graph> g = b.Build();
    EXPECT_TRUE(g.ok()) << g.status();
    out.push_back({"A: a lone Enter, targeted", g.ok() ? *g : Graph{}, o, {{"n", I64(1)}}, {}, {"lonely_enter"}});
  }
  {
    // Bug A: loopsum's loop gets a copy of its invariant Enter that nothing reads.
    Graph g = WhileInFunction();
    std::vector<NodeDef>& body = g.library.FindMutable("loopsum")->node;
    NodeDef copy = *FindIn(body, "Enter_4");
    copy.name = "unused_enter";
    body.push_back(copy);
    out.push_back({"A: an unused Enter in a function's loop", g, o, {{"n", I64(4)}}, {"result"}, {}});
  }
  {
    // Bug B: fib's main-graph Call given call site 1, that of fib's own
    // recursive calls (transformed graph).
    Graph g = TransformedGraph(Fib());
    FindIn(g.node, "Invoke_1/call_0")->attr["call_site"] = int64_t{1};
    out.push_back({"B: a main-graph Call with the recursive calls' call_site", g, o, {{"n", I64(6)}}, {"result"}, {}});
  }
  {
    // Bug C: fetching the gradient part's Call of a split call site.
    Graph g = Exp();
    absl::StatusOr<std::vector<std::string>> grads = AddGradients(g, {"result"}, {"x"});
    EXPECT_TRUE(grads.ok()) << grads.status();
    out.push_back({"C: fetching a gradient Call of a transformed graph", TransformedGraph(g), o,
                   {{"x", F64(1.1)}, {"n", I64(4)}}, {"Invoke_1/call_2"}, {}});
  }
  {
    // Bug D: loopsum's argument Merge lists its Call input twice.
    Graph g = TransformedGraph(WhileInFunction());
    NodeDef* merge = FindIn(g.node, "loopsum/n");
    if (!merge->input.empty()) merge->input.insert(merge->input.begin(), merge->input[0]);
    out.push_back({"D: an argument Merge listing its Call input twice", g, o, {{"n", I64(4)}}, {"result"}, {}});
  }
  {
    // Bug E: dynamic mode, a Retval that reads a node inside the body's loop.
    Graph g = WhileInFunction();
    FindIn(g.library.FindMutable("loopsum")->node, "r_retval")->input[0] = "while_3/Add_7";
    SessionOptions dynamic = o;
    dynamic.mode = ExecutionMode::kDynamic;
    out.push_back({"E: dynamic mode, a Retval reading a node of the body's loop", g, dynamic, {{"n", I64(4)}},
                   {"result"}, {}});
  }
  {
    // Bug F: fetching a main-graph Enter: OK, with a frame left live.
    out.push_back({"F: fetching a main-graph Enter", WhileLoop(), o, {{"n", I64(5)}}, {"while_2/enter_0"}, {}});
  }
  {
    // Bug G: call_site INT64_MAX is truncated to int32 (-1) by Compile:
    // heap-buffer-overflow in FinishUnit during Session::Create.
    Graph g = TransformedGraph(Fib());
    FindIn(g.node, "fib/cond_3/else/Invoke_8/return_0")->attr["call_site"] = std::numeric_limits<int64_t>::max();
    out.push_back({"G: a Return with call_site INT64_MAX", g, o, {{"n", I64(6)}}, {"result"}, {}});
  }
  {
    // Bug G: call_site 2^31 - 1: return_edges_by_label.assign(max_label + 1)
    // overflows int32; std::length_error escapes Session::Create.
    Graph g = TransformedGraph(Fib());
    FindIn(g.node, "fib/cond_3/else/Invoke_8/return_0")->attr["call_site"] =
        int64_t{std::numeric_limits<int32_t>::max()};
    out.push_back({"G: a Return with call_site 2^31 - 1", g, o, {{"n", I64(6)}}, {"result"}, {}});
  }
  {
    // Bug I: a function body's node reads a main-graph node (transformed
    // graph): the value is delivered into the wrong frame.
    Graph g = TransformedGraph(WhileInFunction());
    FindIn(g.node, "loopsum/r_retval")->input[0] = "Invoke_1/call_0";
    out.push_back({"I: a function body reading a main-graph Call", g, o, {{"n", I64(4)}}, {"result"}, {}});
  }
  // Bug J: an empty graph: Layout memcpy's from a null pending_template
  // (UBSan: null pointer passed as argument 2).
  out.push_back({"J: an empty graph", Graph{}, o, {}, {}, {}});
  {
    // Bug K: the gradient argument Merge of exp_ext loses the main site's
    // Call: the Call feeds nothing, and a run that evaluates `result` alone
    // (the gradient part deferred dead) ended OK with 6 frames live.
    Graph g = Exp();
    absl::StatusOr<std::vector<std::string>> grads = AddGradients(g, {"result"}, {"x"});
    EXPECT_TRUE(grads.ok()) << grads.status();
    Graph t = TransformedGraph(g);
    NodeDef* merge = FindIn(t.node, "exp_ext/d_r");
    std::vector<std::string>& in = merge->input;
    in.erase(std::remove(in.begin(), in.end(), "Invoke_1/call_2"), in.end());
    out.push_back({"K: a Call of an argument that feeds no argument Merge", t, o, {{"x", F64(1.1)}, {"n", I64(4)}},
                   {}, {"result"}});
  }
  return out;
}

// 0 when `r` ends as every mutant must; otherwise prints why.
int RunRepro(const Repro& r) {
  try {
    absl::StatusOr<std::unique_ptr<Session>> s = Session::Create(r.graph, r.options);
    if (!s.ok()) {
      std::fprintf(stderr, "Create: %s\n", s.status().ToString().c_str());
      return s.status().message().empty() ? 1 : 0;
    }
    RunStats stats;
    absl::StatusOr<std::vector<Tensor>> out = (*s)->Run(r.feeds, r.fetches, r.targets, &stats);
    std::fprintf(stderr, "Run: %s, live frames after the run %lld\n",
                 out.ok() ? "OK" : out.status().ToString().c_str(),
                 static_cast<long long>(stats.live_frames_after_run));
    if (out.ok() ? stats.live_frames_after_run != 0 : out.status().message().empty()) return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "exception: %s\n", e.what());
    return 1;
  }
  return 0;
}

// Found by the mutants under TSan: a transformed graph whose Calls disagree
// on which argument feeds an argument Merge made the executor send that
// argument dead as well as live, two deliveries racing into one slot.
TEST(MutatedGraphsTest, CallsThatDisagreeOnAnArgumentIndexAreRejected) {
  const Graph fib = TransformedGraph(reference::Fib());
  // The main graph's Call supplies fib's argument 0, as fib's own calls do.
  Graph g = fib;
  FindIn(g.node, "Invoke_1/call_0")->attr["arg_index"] = int64_t{1000};
  absl::StatusOr<std::unique_ptr<Session>> s = Session::Create(g);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string message(s.status().message());
  EXPECT_NE(message.find("Invoke_1/call_0"), std::string::npos) << message;
  EXPECT_NE(message.find("1000"), std::string::npos) << message;
  // Unchanged, it compiles and runs.
  absl::StatusOr<std::unique_ptr<Session>> ok = Session::Create(fib);
  ASSERT_TRUE(ok.ok()) << ok.status();
  absl::StatusOr<std::vector<Tensor>> out = (*ok)->Run({{"n", I64(10)}}, {"result"});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].scalar<int64_t>(), reference::NativeFib(10));
}

TEST(MutatedGraphsTest, MinimalRepros) {
  ThreadsafeDeathTests style;
  for (const Repro& r : Repros()) {
    SCOPED_TRACE(r.name);
    EXPECT_EXIT(std::_Exit(RunRepro(r)), ::testing::ExitedWithCode(0), "");
  }
}

}  // namespace
}  // namespace mutated_graphs
}  // namespace tdf
