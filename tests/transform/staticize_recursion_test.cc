// Structure tests of StaticizeRecursion on the reference programs: the exact
// shape tdf/transform.h promises (and the executor relies on).
#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tdf/builder.h"
#include "tdf/graph.h"
#include "tdf/reference_programs.h"
#include "tdf/transform.h"
#include "tdf/validate.h"
#include "transform/transform_test_util.h"

namespace tdf {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::UnorderedElementsAreArray;
using testutil::CallSitesOf;
using testutil::CheckStaticShape;
using testutil::Node;
using testutil::NodesWithOp;

Graph Staticize(const Graph& g) {
  absl::StatusOr<Graph> out = StaticizeRecursion(g);
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? *std::move(out) : Graph{};
}

TEST(StaticizeRecursion, FibHasOneBodyAndThreeSites) {
  Graph in = reference::Fib();
  Graph out = Staticize(in);
  CheckStaticShape(in, out);
  EXPECT_TRUE(NodesWithOp(out, "Invoke").empty());
  EXPECT_TRUE(out.library.empty());
  // main: fib(n); body: fib(n-1), fib(n-2).
  EXPECT_EQ(CallSitesOf(in, "fib").size(), 3u);
  EXPECT_EQ(NodesWithOp(out, "Call").size(), 3u);
  EXPECT_EQ(NodesWithOp(out, "Return").size(), 3u);

  const NodeDef& merge = Node(out, "fib/n");
  EXPECT_EQ(merge.op, "Merge");
  ASSERT_EQ(merge.input.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    const NodeDef& call = Node(out, merge.input[i]);
    EXPECT_EQ(call.op, "Call");
    EXPECT_EQ(call.GetIntOr("call_site", -2), i);
    EXPECT_EQ(call.GetIntOr("arg_index", -2), 0);
  }
  // The main graph's call is site 0 and feeds "result" through its Return.
  const NodeDef& result = Node(out, "result");
  ASSERT_EQ(result.input.size(), 1u);
  const NodeDef& ret = Node(out, result.input[0]);
  EXPECT_EQ(ret.op, "Return");
  EXPECT_EQ(ret.GetIntOr("call_site", -2), 0);
  EXPECT_EQ(ret.input[0], "fib/r_retval");
  EXPECT_EQ(Node(out, "fib/r_retval").op, "Identity");
  EXPECT_EQ(Node(out, "n").op, "Placeholder");  // main nodes keep their names
}

TEST(StaticizeRecursion, CallAndReturnAttrsAndEdges) {
  Graph in = reference::Fib();
  Graph out = Staticize(in);
  std::vector<const NodeDef*> invokes = NodesWithOp(in, "Invoke");
  ASSERT_FALSE(invokes.empty());
  const std::string s = invokes[0]->name;  // the main graph's fib(n)
  const NodeDef& call = Node(out, s + "/call_0");
  EXPECT_EQ(call.op, "Call");
  EXPECT_THAT(call.input, ElementsAre("n"));
  EXPECT_EQ(*call.GetType("T"), DType::kInt64);
  EXPECT_EQ(*call.GetString("function"), "fib");
  EXPECT_EQ(*call.GetInt("call_site"), 0);
  EXPECT_EQ(*call.GetInt("arg_index"), 0);
  const NodeDef& ret = Node(out, s + "/return_0");
  EXPECT_THAT(ret.input, ElementsAre("fib/r_retval", "^" + s + "/call_0"));
  EXPECT_EQ(*ret.GetType("T"), DType::kInt64);
  EXPECT_EQ(*ret.GetString("function"), "fib");
  EXPECT_EQ(*ret.GetInt("call_site"), 0);
  EXPECT_EQ(*ret.GetInt("result_index"), 0);
}

TEST(StaticizeRecursion, BodyConstsAreMarkedWithTheirFunction) {
  Graph out = Staticize(reference::Yaghi());
  // f(x) = g(x + 1): the Const 1 sits at the top level of f's body.
  int marked = 0;
  for (const NodeDef& n : out.node) {
    if (!absl::StartsWith(n.name, "f/") || n.op != "Const") continue;
    EXPECT_TRUE(n.input.empty());
    EXPECT_EQ(*n.GetString("_function"), "f") << n.name;
    ++marked;
  }
  EXPECT_EQ(marked, 1);
  // Main-graph sources are fired by the run, not by an invocation.
  for (const NodeDef& n : out.node)
    if (n.FindAttr("_function") != nullptr) EXPECT_TRUE(absl::StrContains(n.name, "/")) << n.name;
}

TEST(StaticizeRecursion, YaghiSitesAreNumberedPerFunction) {
  Graph in = reference::Yaghi();
  Graph out = Staticize(in);
  CheckStaticShape(in, out);
  std::vector<const NodeDef*> main_invokes = NodesWithOp(in, "Invoke");
  ASSERT_EQ(main_invokes.size(), 2u);  // f(4), f(5)
  const NodeDef& f4 = Node(out, main_invokes[0]->name + "/call_0");
  const NodeDef& f5 = Node(out, main_invokes[1]->name + "/call_0");
  EXPECT_EQ(*f4.GetInt("call_site"), 0);
  EXPECT_EQ(*f5.GetInt("call_site"), 1);
  EXPECT_EQ(Node(out, f4.input[0]).GetTensor("value")->scalar<int64_t>(), 4);
  EXPECT_EQ(Node(out, f5.input[0]).GetTensor("value")->scalar<int64_t>(), 5);
  EXPECT_THAT(Node(out, "f/x").input, ElementsAre(f4.name, f5.name));
  // g has one site, in f's body.
  std::vector<const NodeDef*> g_calls;
  for (const NodeDef* c : NodesWithOp(out, "Call"))
    if (*c->GetString("function") == "g") g_calls.push_back(c);
  ASSERT_EQ(g_calls.size(), 1u);
  EXPECT_EQ(*g_calls[0]->GetInt("call_site"), 0);
  EXPECT_TRUE(absl::StartsWith(g_calls[0]->name, "f/"));
  EXPECT_THAT(Node(out, "g/y").input, ElementsAre(g_calls[0]->name));
}

TEST(StaticizeRecursion, MutualRecursionNumbersSitesAcrossBodies) {
  Graph in = reference::EvenOdd();
  Graph out = Staticize(in);
  CheckStaticShape(in, out);
  // even: site 0 in main, site 1 in odd's body; odd: site 0 in even's body.
  std::map<std::string, std::vector<std::string>> calls;
  for (const NodeDef* c : NodesWithOp(out, "Call")) calls[*c->GetString("function")].push_back(c->name);
  ASSERT_EQ(calls["even"].size(), 2u);
  ASSERT_EQ(calls["odd"].size(), 1u);
  EXPECT_FALSE(absl::StartsWith(calls["even"][0], "odd/"));
  EXPECT_TRUE(absl::StartsWith(calls["even"][1], "odd/"));
  EXPECT_TRUE(absl::StartsWith(calls["odd"][0], "even/"));
  EXPECT_EQ(*Node(out, calls["even"][1]).GetInt("call_site"), 1);
  EXPECT_EQ(Node(out, "even/n").input, calls["even"]);
  EXPECT_EQ(Node(out, "odd/n").input, calls["odd"]);
}

TEST(StaticizeRecursion, MultipleArgumentsGetOneCallEach) {
  for (const auto& [name, graph, fn, args, sites] :
       std::vector<std::tuple<std::string, Graph, std::string, int, int>>{
           {"ack", reference::Ack(), "ack", 2, 4},
           {"tak", reference::Tak(), "tak", 3, 5},
       }) {
    SCOPED_TRACE(name);
    Graph out = Staticize(graph);
    CheckStaticShape(graph, out);
    EXPECT_EQ(CallSitesOf(graph, fn).size(), static_cast<size_t>(sites));
    EXPECT_EQ(NodesWithOp(out, "Call").size(), static_cast<size_t>(sites * args));
    EXPECT_EQ(NodesWithOp(out, "Return").size(), static_cast<size_t>(sites));
    // Every Return waits on all Calls of its site.
    for (const NodeDef* ret : NodesWithOp(out, "Return")) {
      std::string site = ret->name.substr(0, ret->name.rfind("/return_"));
      std::vector<std::string> want;
      for (int j = 0; j < args; ++j) want.push_back(absl::StrCat("^", site, "/call_", j));
      EXPECT_EQ(std::vector<std::string>(ret->input.begin() + 1, ret->input.end()), want) << ret->name;
    }
  }
}

TEST(StaticizeRecursion, ReferenceProgramsHaveTheStaticShape) {
  for (const auto& [name, graph] : std::vector<std::pair<std::string, Graph>>{
           {"fib", reference::Fib()},
           {"ack", reference::Ack()},
           {"tak", reference::Tak()},
           {"fact", reference::Fact()},
           {"evenodd", reference::EvenOdd()},
           {"exp", reference::Exp()},
           {"primes", reference::Primes()},
           {"mc91", reference::McCarthy91()},
           {"sum", reference::Sum()},
           {"yaghi", reference::Yaghi()},
           {"call_in_while", reference::CallInWhile()},
           {"while_in_function", reference::WhileInFunction()},
           {"while_loop", reference::WhileLoop()},
       }) {
    SCOPED_TRACE(name);
    Graph out = Staticize(graph);
    CheckStaticShape(graph, out);
  }
}

TEST(StaticizeRecursion, LoopInFunctionGetsAPrefixedFrameName) {
  Graph in = reference::WhileInFunction();
  Graph out = Staticize(in);
  int enters = 0;
  for (const NodeDef* e : NodesWithOp(out, "Enter")) {
    ++enters;
    EXPECT_TRUE(absl::StartsWith(e->name, "loopsum/")) << e->name;
    const NodeDef* orig = nullptr;
    for (const NodeDef& n : in.library.Find("loopsum")->node)
      if ("loopsum/" + n.name == e->name) orig = &n;
    ASSERT_NE(orig, nullptr);
    EXPECT_EQ(*e->GetString("frame_name"), "loopsum/" + *orig->GetString("frame_name"));
  }
  EXPECT_GT(enters, 0);
}

TEST(StaticizeRecursion, LoopInMainGraphKeepsItsFrameName) {
  Graph in = reference::CallInWhile();
  Graph out = Staticize(in);
  std::vector<const NodeDef*> before = NodesWithOp(in, "Enter");
  ASSERT_FALSE(before.empty());
  for (const NodeDef* e : before) {
    const NodeDef& after = Node(out, e->name);
    EXPECT_EQ(*after.GetString("frame_name"), *e->GetString("frame_name"));
  }
  // fib is called from the loop body (site 0) and twice from its own body.
  EXPECT_EQ(Node(out, "fib/n").input.size(), 3u);
}

TEST(StaticizeRecursion, UnreachableFunctionsAreDropped) {
  GraphBuilder b;
  ASSERT_TRUE(b.DefineFunction({"unused", {{"x", DType::kInt64}}, {{"r", DType::kInt64}}},
                               [](GraphBuilder& f, const std::vector<Output>& a) {
                                 return std::vector<Output>{f.Identity(a[0])};
                               })
                  .ok());
  ASSERT_TRUE(b.DefineFunction({"id", {{"x", DType::kInt64}}, {{"r", DType::kInt64}}},
                               [](GraphBuilder& f, const std::vector<Output>& a) {
                                 return std::vector<Output>{f.Identity(a[0], "body")};
                               })
                  .ok());
  b.Identity(b.Call("id", {b.Const<int64_t>(1)})[0], "result");
  absl::StatusOr<Graph> in = b.Build();
  ASSERT_TRUE(in.ok()) << in.status();
  Graph out = Staticize(*in);
  CheckStaticShape(*in, out);
  for (const NodeDef& n : out.node) EXPECT_FALSE(absl::StartsWith(n.name, "unused/")) << n.name;
  EXPECT_EQ(Node(out, "id/body").op, "Identity");
}

TEST(StaticizeRecursion, GraphWithoutCallsOnlyLosesItsLibrary) {
  Graph in = reference::WhileLoop();
  Graph out = Staticize(in);
  EXPECT_EQ(out.node, in.node);
  EXPECT_TRUE(out.library.empty());
}

TEST(StaticizeRecursion, FunctionWithoutArgumentsGetsOneCall) {
  GraphBuilder b;
  ASSERT_TRUE(b.DefineFunction({"one", {}, {{"r", DType::kInt64}}},
                               [](GraphBuilder& f, const std::vector<Output>&) {
                                 return std::vector<Output>{f.Const<int64_t>(1, "c")};
                               })
                  .ok());
  ASSERT_TRUE(b.DefineFunction({"two", {}, {{"r", DType::kInt64}}},
                               [](GraphBuilder& f, const std::vector<Output>&) {
                                 Output one = f.Call("one", {})[0];
                                 return std::vector<Output>{f.Add(one, one)};
                               })
                  .ok());
  b.Identity(b.Call("two", {})[0], "result");
  absl::StatusOr<Graph> in = b.Build();
  ASSERT_TRUE(in.ok()) << in.status();
  Graph out = Staticize(*in);
  CheckStaticShape(*in, out);
  EXPECT_TRUE(Validate(out).ok()) << Validate(out);
  const std::string main_site = NodesWithOp(*in, "Invoke")[0]->name;
  const NodeDef& main_call = Node(out, main_site + "/call");
  EXPECT_TRUE(main_call.input.empty());
  EXPECT_EQ(main_call.FindAttr("_function"), nullptr);  // the run fires it
  EXPECT_EQ(*main_call.GetInt("arg_index"), -1);
  EXPECT_EQ(*main_call.GetType("T"), DType::kBool);
  // The call inside two's body starts with every invocation of two.
  std::string body_site;
  for (const NodeDef& n : in->library.Find("two")->node)
    if (n.op == "Invoke") body_site = "two/" + n.name;
  const NodeDef& body_call = Node(out, body_site + "/call");
  EXPECT_TRUE(body_call.input.empty());
  EXPECT_EQ(body_call.GetString("_function").value_or(""), "two");
  EXPECT_THAT(Node(out, body_site + "/return_0").input,
              ElementsAre("one/r_retval", "^" + body_site + "/call"));
  EXPECT_EQ(Node(out, "one/c").GetString("_function").value_or(""), "one");
}

TEST(StaticizeRecursion, ResultsPortsAndControlEdgesOfAnInvokeAreRewired) {
  GraphBuilder b;
  ASSERT_TRUE(b.DefineFunction({"swap", {{"a", DType::kInt64}, {"b", DType::kFloat64}},
                                {{"p", DType::kFloat64}, {"q", DType::kInt64}}},
                               [](GraphBuilder& f, const std::vector<Output>& a) {
                                 return std::vector<Output>{a[1], a[0]};
                               })
                  .ok());
  Output x = b.Placeholder("x", DType::kInt64);
  Output y = b.Placeholder("y", DType::kFloat64);
  Output gate = b.Op("NoOp", {}, {}, "gate");
  std::vector<Output> r = b.Call("swap", {x, y});
  ASSERT_EQ(r.size(), 2u);
  b.AddControlInput(r[0], gate);
  Output after = b.Op("NoOp", {}, {}, "after");
  b.AddControlInput(after, r[0]);
  b.Identity(r[1], "q");
  b.Identity(r[0], "p");
  absl::StatusOr<Graph> in = b.Build();
  ASSERT_TRUE(in.ok()) << in.status();
  Graph out = Staticize(*in);
  CheckStaticShape(*in, out);
  EXPECT_TRUE(Validate(out).ok()) << Validate(out);
  const std::string s = NodesWithOp(*in, "Invoke")[0]->name;
  // The Invoke's control inputs gate every Call.
  EXPECT_THAT(Node(out, s + "/call_0").input, ElementsAre("x", "^gate"));
  EXPECT_THAT(Node(out, s + "/call_1").input, ElementsAre("y", "^gate"));
  EXPECT_EQ(*Node(out, s + "/call_1").GetType("T"), DType::kFloat64);
  // "S:1" reads Return 1; "^S" waits for every Return.
  EXPECT_THAT(Node(out, "q").input, ElementsAre(s + "/return_1"));
  EXPECT_THAT(Node(out, "p").input, ElementsAre(s + "/return_0"));
  EXPECT_THAT(Node(out, "after").input, ElementsAre("^" + s + "/return_0", "^" + s + "/return_1"));
  EXPECT_THAT(Node(out, s + "/return_0").input, ElementsAre("swap/p_retval", "^" + s + "/call_0", "^" + s + "/call_1"));
  EXPECT_EQ(*Node(out, s + "/return_0").GetType("T"), DType::kFloat64);
  EXPECT_EQ(*Node(out, s + "/return_1").GetType("T"), DType::kInt64);
  EXPECT_THAT(Node(out, "swap/p_retval").input, ElementsAre("swap/b"));
}

// Built by hand: the builder only makes well-formed calls.
Graph OneCall(const std::string& callee) {
  Graph g;
  NodeDef c;
  c.name = "c";
  c.op = "Const";
  c.attr = {{"value", Tensor::Scalar<int64_t>(1)}, {"dtype", DType::kInt64}};
  NodeDef call;
  call.name = "x";
  call.op = "Invoke";
  call.input = {"c"};
  call.attr = {{"function", callee}};
  g.node = {c, call};
  return g;
}

FunctionSignature Unary(const std::string& name) {
  return {name, {{"a", DType::kInt64}}, {{"r", DType::kInt64}}};
}

TEST(StaticizeRecursionError, CallOfUndefinedFunctionNamesTheInvoke) {
  absl::StatusOr<Graph> out = StaticizeRecursion(OneCall("nope"));
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(out.status().message(), HasSubstr("node 'x' (Invoke)"));
  EXPECT_THAT(out.status().message(), HasSubstr("'nope'"));
}

TEST(StaticizeRecursionError, CallOfDeclaredOnlyFunctionNamesTheInvoke) {
  Graph g = OneCall("later");
  ASSERT_TRUE(g.library.Declare(Unary("later")).ok());
  absl::StatusOr<Graph> out = StaticizeRecursion(g);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(out.status().message(), HasSubstr("node 'x' (Invoke)"));
  EXPECT_THAT(out.status().message(), HasSubstr("declared but not defined"));
}

TEST(StaticizeRecursionError, UndefinedCallInsideABodyNamesFunctionAndNode) {
  Graph g = OneCall("outer");
  NodeDef arg{"a", "Arg", {}, {{"T", DType::kInt64}, {"index", 0}}, ""};
  NodeDef inner{"inner", "Invoke", {"a"}, {{"function", "missing"}}, ""};
  NodeDef ret{"r", "Retval", {"inner"}, {{"T", DType::kInt64}, {"index", 0}}, ""};
  ASSERT_TRUE(g.library.Define(Unary("outer"), {arg, inner, ret}).ok());
  absl::StatusOr<Graph> out = StaticizeRecursion(g);
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(out.status().message(), HasSubstr("in function 'outer'"));
  EXPECT_THAT(out.status().message(), HasSubstr("node 'inner' (Invoke)"));
}

TEST(StaticizeRecursionError, WrongArgumentCount) {
  Graph g = OneCall("two");
  NodeDef a0{"a", "Arg", {}, {{"T", DType::kInt64}, {"index", 0}}, ""};
  NodeDef a1{"b", "Arg", {}, {{"T", DType::kInt64}, {"index", 1}}, ""};
  NodeDef ret{"r", "Retval", {"a"}, {{"T", DType::kInt64}, {"index", 0}}, ""};
  ASSERT_TRUE(g.library
                  .Define({"two", {{"a", DType::kInt64}, {"b", DType::kInt64}}, {{"r", DType::kInt64}}},
                          {a0, a1, ret})
                  .ok());
  absl::StatusOr<Graph> out = StaticizeRecursion(g);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(out.status().message(), HasSubstr("node 'x' (Invoke): calls 'two' with 1 arguments; it takes 2"));
}

TEST(StaticizeRecursionError, FunctionWithoutResultsIsUnimplemented) {
  Graph g = OneCall("sink");
  NodeDef arg{"a", "Arg", {}, {{"T", DType::kInt64}, {"index", 0}}, ""};
  ASSERT_TRUE(g.library.Define({"sink", {{"a", DType::kInt64}}, {}}, {arg}).ok());
  absl::StatusOr<Graph> out = StaticizeRecursion(g);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(out.status().message(), HasSubstr("node 'x' (Invoke)"));
}

TEST(StaticizeRecursionError, MissingRetvalNamesTheFunction) {
  Graph g = OneCall("noret");
  NodeDef arg{"a", "Arg", {}, {{"T", DType::kInt64}, {"index", 0}}, ""};
  ASSERT_TRUE(g.library.Define(Unary("noret"), {arg}).ok());
  absl::StatusOr<Graph> out = StaticizeRecursion(g);
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(out.status().message(), HasSubstr("function 'noret' has no Retval node for result 0"));
}

TEST(StaticizeRecursionError, DuplicateArgIndex) {
  Graph g = OneCall("dup");
  NodeDef a0{"a", "Arg", {}, {{"T", DType::kInt64}, {"index", 0}}, ""};
  NodeDef a1{"b", "Arg", {}, {{"T", DType::kInt64}, {"index", 0}}, ""};
  NodeDef ret{"r", "Retval", {"a"}, {{"T", DType::kInt64}, {"index", 0}}, ""};
  ASSERT_TRUE(g.library.Define(Unary("dup"), {a0, a1, ret}).ok());
  absl::StatusOr<Graph> out = StaticizeRecursion(g);
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(out.status().message(), HasSubstr("node 'b' (Arg): index 0 is also taken by node 'a'"));
}

TEST(StaticizeRecursionError, DanglingInputNamesTheConsumer) {
  Graph g = OneCall("id");
  NodeDef arg{"a", "Arg", {}, {{"T", DType::kInt64}, {"index", 0}}, ""};
  NodeDef ret{"r", "Retval", {"ghost"}, {{"T", DType::kInt64}, {"index", 0}}, ""};
  ASSERT_TRUE(g.library.Define(Unary("id"), {arg, ret}).ok());
  absl::StatusOr<Graph> out = StaticizeRecursion(g);
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(out.status().message(),
              HasSubstr("node 'r' (Retval): input 'ghost' names no node of function 'id'"));
}

// Bodies of more than 16 nodes find producers through a table, smaller
// ones by comparing names: both rewrite inputs and report dangling ones.
TEST(StaticizeRecursionError, DanglingInputInALongBody) {
  for (const int length : {3, 30}) {
    Graph g = OneCall("id");
    std::vector<NodeDef> body = {NodeDef{"a", "Arg", {}, {{"T", DType::kInt64}, {"index", 0}}, ""}};
    std::string last = "a";
    for (int i = 0; i < length; ++i) {
      const std::string name = absl::StrCat("i", i);
      body.push_back(NodeDef{name, "Identity", {last}, {{"T", DType::kInt64}}, ""});
      last = name;
    }
    body.push_back(NodeDef{"r", "Retval", {last}, {{"T", DType::kInt64}, {"index", 0}}, ""});
    Graph good = g;
    ASSERT_TRUE(good.library.Define(Unary("id"), body).ok());
    absl::StatusOr<Graph> out = StaticizeRecursion(good);
    ASSERT_TRUE(out.ok()) << length << ": " << out.status();
    const NodeDef* retval = out->FindNode("id/r");
    ASSERT_NE(retval, nullptr);
    EXPECT_EQ(retval->input, std::vector<std::string>{absl::StrCat("id/", last)}) << length;

    body.back().input = {"ghost"};
    ASSERT_TRUE(g.library.Define(Unary("id"), body).ok());
    out = StaticizeRecursion(g);
    ASSERT_FALSE(out.ok()) << length;
    EXPECT_THAT(out.status().message(),
                HasSubstr("node 'r' (Retval): input 'ghost' names no node of function 'id'")) << length;
  }
}

TEST(StaticizeRecursionError, NameClashIsReported) {
  Graph g = OneCall("id");
  NodeDef clash{"x/call_0", "Const", {}, {{"value", Tensor::Scalar<int64_t>(2)}, {"dtype", DType::kInt64}}, ""};
  g.node.push_back(clash);
  NodeDef arg{"a", "Arg", {}, {{"T", DType::kInt64}, {"index", 0}}, ""};
  NodeDef ret{"r", "Retval", {"a"}, {{"T", DType::kInt64}, {"index", 0}}, ""};
  ASSERT_TRUE(g.library.Define(Unary("id"), {arg, ret}).ok());
  absl::StatusOr<Graph> out = StaticizeRecursion(g);
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(out.status().message(), HasSubstr("node 'x/call_0'"));
}

}  // namespace
}  // namespace tdf
