#include "tdf/validate.h"

#include <cstdint>
#include <limits>
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

constexpr DType kI64 = DType::kInt64;
constexpr DType kF32 = DType::kFloat32;

NodeDef N(const std::string& name, const std::string& op, std::vector<std::string> inputs = {}, AttrMap attrs = {}) {
  NodeDef n;
  n.name = name;
  n.op = op;
  n.input = std::move(inputs);
  n.attr = std::move(attrs);
  return n;
}

NodeDef I64(const std::string& name, int64_t v, std::vector<std::string> inputs = {}) {
  return N(name, "Const", std::move(inputs), {{"value", Tensor::Scalar<int64_t>(v)}, {"dtype", kI64}});
}
NodeDef F32(const std::string& name, float v) {
  return N(name, "Const", {}, {{"value", Tensor::Scalar<float>(v)}, {"dtype", kF32}});
}
NodeDef Ph(const std::string& name, DType t) { return N(name, "Placeholder", {}, {{"dtype", t}}); }
NodeDef Arg(const std::string& name, int64_t index, DType t = kI64) {
  return N(name, "Arg", {}, {{"T", t}, {"index", index}});
}
NodeDef Ret(const std::string& name, const std::string& in, int64_t index, DType t = kI64) {
  return N(name, "Retval", {in}, {{"T", t}, {"index", index}});
}

Graph G(std::vector<NodeDef> nodes) {
  Graph g;
  g.node = std::move(nodes);
  return g;
}

// Adds function `name`(x: int64) -> (r: int64) with the given body.
void AddFunction(Graph& g, const std::string& name, std::vector<NodeDef> body,
                 std::vector<ArgDef> inputs = {{"x", kI64}}, std::vector<ArgDef> outputs = {{"r", kI64}}) {
  ASSERT_TRUE(g.library.Define({name, std::move(inputs), std::move(outputs)}, std::move(body)).ok());
}

// f(x) = x + 1.
void AddIncrement(Graph& g, const std::string& name = "f") {
  AddFunction(g, name, {Arg("x", 0), I64("one", 1), N("y", "Add", {"x", "one"}), Ret("r", "y", 0)});
}

void ExpectError(const Graph& g, absl::StatusCode code, const std::string& substring) {
  absl::Status s = Validate(g);
  EXPECT_EQ(s.code(), code) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr(substring));
}
void ExpectInvalid(const Graph& g, const std::string& substring) {
  ExpectError(g, absl::StatusCode::kInvalidArgument, substring);
}

// A valid while loop: i = 0; while (i < n) i = i + 1.
std::vector<NodeDef> Loop() {
  AttrMap t{{"T", kI64}};
  return {
      Ph("n", kI64),
      I64("zero", 0),
      N("enter", "Enter", {"zero"}, {{"T", kI64}, {"frame_name", "L"}}),
      N("lim", "Enter", {"n"}, {{"T", kI64}, {"frame_name", "L"}, {"is_constant", true}}),
      N("m", "Merge", {"enter", "ni"}, t),
      N("less", "Less", {"m", "lim"}),
      N("lc", "LoopCond", {"less"}),
      N("sw", "Switch", {"m", "lc"}, t),
      N("exit", "Exit", {"sw"}, t),
      N("body", "Identity", {"sw:1"}),
      I64("one", 1, {"^body"}),
      N("add", "Add", {"body", "one"}),
      N("ni", "NextIteration", {"add"}, t),
      N("result", "Identity", {"exit"}),
  };
}

NodeDef& Find(std::vector<NodeDef>& nodes, const std::string& name) {
  for (NodeDef& n : nodes)
    if (n.name == name) return n;
  ADD_FAILURE() << "no node " << name;
  return nodes[0];
}

// ---------------------------------------------------------------- valid graphs

TEST(Validate, AcceptsEveryReferenceProgram) {
  for (const Graph& g : {reference::Fib(), reference::Ack(), reference::Tak(), reference::Fact(),
                         reference::EvenOdd(), reference::Exp(), reference::Primes(), reference::McCarthy91(),
                         reference::Sum(), reference::Yaghi(), reference::WhileLoop(), reference::OpChain(10),
                         reference::CallInWhile(), reference::WhileInFunction()}) {
    EXPECT_TRUE(Validate(g).ok()) << Validate(g);
  }
}

TEST(Validate, AcceptsEveryReferenceProgramAfterStaticizeRecursion) {
  for (const Graph& g : {reference::Fib(), reference::Ack(), reference::Tak(), reference::Fact(),
                         reference::EvenOdd(), reference::Exp(), reference::Primes(), reference::McCarthy91(),
                         reference::Sum(), reference::Yaghi(), reference::WhileLoop(), reference::OpChain(10),
                         reference::CallInWhile(), reference::WhileInFunction()}) {
    absl::StatusOr<Graph> t = StaticizeRecursion(g);
    ASSERT_TRUE(t.ok()) << t.status();
    EXPECT_TRUE(Validate(*t).ok()) << Validate(*t);
    // With the original library the call sites' indices and dtypes are checked too.
    t->library = g.library;
    EXPECT_TRUE(Validate(*t).ok()) << Validate(*t);
  }
}

TEST(Validate, AcceptsTransformedCallOfFunctionWithoutArguments) {
  GraphBuilder b;
  ASSERT_TRUE(b.DefineFunction({"seven", {}, {{"r", kI64}}},
                               [](GraphBuilder& f, const std::vector<Output>&) {
                                 return std::vector<Output>{f.Const<int64_t>(7)};
                               })
                  .ok());
  b.Identity(b.Call("seven", {})[0], "result");
  absl::StatusOr<Graph> g = b.Build();
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_TRUE(Validate(*g).ok()) << Validate(*g);
  absl::StatusOr<Graph> t = StaticizeRecursion(*g);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_TRUE(Validate(*t).ok()) << Validate(*t);
  t->library = g->library;
  EXPECT_TRUE(Validate(*t).ok()) << Validate(*t);
}

TEST(Validate, AcceptsHandBuiltWhileLoop) { EXPECT_TRUE(Validate(G(Loop())).ok()) << Validate(G(Loop())); }

TEST(Validate, AcceptsFunctionAndInvoke) {
  Graph g = G({Ph("x", kI64), N("call", "Invoke", {"x"}, {{"function", "f"}}), N("result", "Identity", {"call"})});
  AddIncrement(g);
  EXPECT_TRUE(Validate(g).ok()) << Validate(g);
}

TEST(Validate, AcceptsDeclaredFunctionThatIsNeverCalled) {
  Graph g = G({I64("c", 1)});
  ASSERT_TRUE(g.library.Declare({"g", {{"x", kI64}}, {{"r", kI64}}}).ok());
  EXPECT_TRUE(Validate(g).ok()) << Validate(g);
}

// f(x) = x + 1 called twice, in the transformed form (design.md §2).
std::vector<NodeDef> TransformedTwoCalls() {
  auto call = [](const std::string& name, int64_t site) {
    return N(name, "Call", {"x"}, {{"T", kI64}, {"function", "f"}, {"call_site", site}, {"arg_index", 0}});
  };
  auto ret = [](const std::string& name, const std::string& call_name, int64_t site) {
    return N(name, "Return", {"f/r", "^" + call_name},
             {{"T", kI64}, {"function", "f"}, {"call_site", site}, {"result_index", 0}});
  };
  return {Ph("x", kI64),
          call("call0", 0),
          call("call1", 1),
          N("f/x", "Merge", {"call0", "call1"}, {{"T", kI64}}),
          N("f/one", "Const", {}, {{"value", Tensor::Scalar<int64_t>(1)}, {"_function", "f"}}),
          N("f/add", "Add", {"f/x", "f/one"}),
          N("f/r", "Identity", {"f/add"}),
          ret("ret0", "call0", 0),
          ret("ret1", "call1", 1),
          N("sum", "Add", {"ret0", "ret1"})};
}

TEST(Validate, AcceptsTransformedGraphWithOrWithoutLibrary) {
  Graph g = G(TransformedTwoCalls());
  EXPECT_TRUE(Validate(g).ok()) << Validate(g);
  AddIncrement(g);
  EXPECT_TRUE(Validate(g).ok()) << Validate(g);
}

TEST(Validate, AcceptsVariableOps) {
  Graph g = G({N("v", "Variable", {}, {{"dtype", kF32}, {"initial_value", Tensor::Scalar<float>(1)}}),
               F32("d", 2), N("r", "Read", {"v"}, {{"dtype", kF32}}), N("a", "AssignAdd", {"v", "d"}, {{"dtype", kF32}}),
               N("vid", "Identity", {"v"}), N("r2", "Read", {"vid"}, {{"dtype", kF32}})});
  EXPECT_TRUE(Validate(g).ok()) << Validate(g);
}

// ------------------------------------------------------------------ structure

TEST(Validate, UnknownOp) { ExpectInvalid(G({N("x", "Frobnicate")}), "node 'x' (Frobnicate): unknown op 'Frobnicate'"); }

TEST(Validate, EmptyNodeName) { ExpectInvalid(G({I64("", 1)}), "node '' (Const): empty node name"); }

TEST(Validate, NodeNameThatCannotBeReferenced) {
  ExpectInvalid(G({I64("a:1", 1)}), "node 'a:1' (Const): node names may not contain ':' or start with '^'");
  ExpectInvalid(G({I64("^a", 1)}), "node '^a' (Const): node names may not contain");
}

TEST(Validate, FunctionBodyReferencingAMainGraphNode) {
  Graph g = G({I64("outer", 1)});
  AddFunction(g, "f", {Arg("x", 0), N("y", "Add", {"x", "outer"}), Ret("r", "y", 0)});
  ExpectInvalid(g, "function 'f': node 'y' (Add): input 'outer' names an unknown node");
}

TEST(Validate, DuplicateNodeName) {
  ExpectInvalid(G({I64("a", 1), I64("a", 2)}), "node 'a' (Const): duplicate node name");
}

TEST(Validate, MalformedPort) {
  ExpectInvalid(G({I64("a", 1), N("b", "Identity", {"a:x"})}), "node 'b' (Identity): malformed input 'a:x': bad port");
}

TEST(Validate, NegativePort) {
  ExpectInvalid(G({I64("a", 1), N("b", "Identity", {"a:-1"})}), "node 'b' (Identity): malformed input 'a:-1'");
}

TEST(Validate, EmptyInputName) {
  ExpectInvalid(G({I64("a", 1), N("b", "Identity", {":0"})}), "node 'b' (Identity): malformed input ':0': empty node name");
}

TEST(Validate, DanglingInput) {
  ExpectInvalid(G({N("b", "Identity", {"nope"})}), "node 'b' (Identity): input 'nope' names an unknown node");
}

TEST(Validate, DanglingControlInput) {
  ExpectInvalid(G({I64("a", 1, {"^ghost"})}), "node 'a' (Const): input '^ghost' names an unknown node");
}

TEST(Validate, DataInputAfterControlInput) {
  ExpectInvalid(G({I64("a", 1), I64("c", 2), N("b", "Add", {"a", "^c", "c"})}),
                "node 'b' (Add): data input 'c' after a control input");
}

TEST(Validate, PortOutOfRange) {
  ExpectInvalid(G({I64("a", 1), N("b", "Identity", {"a:1"})}),
                "node 'b' (Identity): input 'a:1' refers to output 1 of node 'a' (Const), which has 1 output");
}

TEST(Validate, PortOutOfRangeOfSwitch) {
  Graph g = G({I64("a", 1), N("p", "Const", {}, {{"value", Tensor::Scalar<bool>(true)}}),
               N("sw", "Switch", {"a", "p"}, {{"T", kI64}}), N("b", "Identity", {"sw:2"})});
  ExpectInvalid(g, "node 'b' (Identity): input 'sw:2' refers to output 2 of node 'sw' (Switch), which has 2 outputs");
}

TEST(Validate, WrongArity) {
  ExpectInvalid(G({I64("a", 1), N("add", "Add", {"a"})}),
                "node 'add' (Add): wrong number of data inputs: has 1, op takes 2");
}

TEST(Validate, ControlInputsDoNotCountTowardsArity) {
  ExpectInvalid(G({I64("a", 1), N("id", "Identity", {"^a"})}),
                "node 'id' (Identity): wrong number of data inputs: has 0, op takes 1");
}

TEST(Validate, MissingAttribute) {
  ExpectInvalid(G({I64("a", 1), N("e", "Enter", {"a"}, {{"T", kI64}})}),
                "node 'e' (Enter): missing required attribute 'frame_name' (string)");
}

TEST(Validate, MistypedAttribute) {
  ExpectInvalid(G({I64("a", 1), N("e", "Enter", {"a"}, {{"T", kI64}, {"frame_name", 3}})}),
                "node 'e' (Enter): attribute 'frame_name' should be string, is int");
}

TEST(Validate, ConstValueDisagreesWithDtype) {
  ExpectInvalid(G({N("c", "Const", {}, {{"value", Tensor::Scalar<int64_t>(1)}, {"dtype", kF32}})}),
                "node 'c' (Const): attr dtype float32 but value is int64");
}

TEST(Validate, PlaceholderWithInvalidDtype) {
  ExpectInvalid(G({Ph("p", DType::kInvalid)}), "node 'p' (Placeholder): dtype must not be invalid");
}

// --------------------------------------------------------------------- dtypes

TEST(Validate, DtypeMismatchInAdd) {
  ExpectInvalid(G({I64("a", 1), F32("b", 2), N("add", "Add", {"a", "b"})}),
                "node 'add' (Add): dtype mismatch: input 0 is int64, input 1 is float32");
}

TEST(Validate, SwitchWithNonBoolPredicate) {
  ExpectInvalid(G({I64("a", 1), N("sw", "Switch", {"a", "a"}, {{"T", kI64}})}),
                "node 'sw' (Switch): predicate (input 1) must be bool, got int64");
}

TEST(Validate, LogicalOpOnIntegers) {
  ExpectInvalid(G({I64("a", 1), N("not", "LogicalNot", {"a"})}),
                "node 'not' (LogicalNot): operand (input 0) must be bool, got int64");
}

TEST(Validate, MismatchPropagatesThroughInferredTypes) {
  // a + 1 is int64, so Exp (float only) downstream must fail.
  ExpectInvalid(G({I64("a", 1), N("id", "Identity", {"a"}), N("e", "Exp", {"id"})}),
                "node 'e' (Exp): expects float32 or float64 inputs, got int64");
}

TEST(Validate, BackEdgeDtypeMismatchIntoMerge) {
  std::vector<NodeDef> nodes = Loop();
  // The body now produces float32 and feeds it back into an int64 Merge.
  Find(nodes, "add") = N("add", "Cast", {"body"}, {{"DstT", kF32}});
  Find(nodes, "ni").attr["T"] = kF32;
  ExpectInvalid(G(nodes), "node 'm' (Merge): dtype mismatch: input 1 is float32, attr T is int64");
}

TEST(Validate, BackEdgeFromNextIterationPortOutOfRange) {
  std::vector<NodeDef> nodes = Loop();
  Find(nodes, "m").input[1] = "ni:1";
  ExpectInvalid(G(nodes), "node 'm' (Merge): input 'ni:1' refers to output 1 of node 'ni' (NextIteration)");
}

// --------------------------------------------------------------------- cycles

TEST(Validate, CycleNotClosedThroughNextIteration) {
  ExpectInvalid(G({I64("c", 1), N("x", "Add", {"c", "y"}), N("y", "Identity", {"x"})}),
                "is on a cycle not closed through NextIteration (or Call/Return)");
  Graph g = G({I64("c", 1), N("x", "Add", {"c", "y"}), N("y", "Identity", {"x"})});
  absl::Status s = Validate(g);
  EXPECT_THAT(std::string(s.message()), HasSubstr("x -> y -> x"));
}

TEST(Validate, ControlEdgeCycle) {
  ExpectInvalid(G({I64("a", 1, {"^b"}), I64("b", 2, {"^a"})}), "(Const): is on a cycle not closed through");
}

TEST(Validate, SelfLoop) {
  ExpectInvalid(G({N("x", "Identity", {"x"})}), "node 'x' (Identity): is on a cycle not closed through NextIteration");
}

// --------------------------------------------------------------------- frames

TEST(Validate, ExitOutsideLoop) {
  ExpectInvalid(G({I64("a", 1), N("x", "Exit", {"a"}, {{"T", kI64}})}), "node 'x' (Exit): Exit outside a loop frame");
}

TEST(Validate, NextIterationOutsideLoop) {
  ExpectInvalid(G({I64("a", 1), N("ni", "NextIteration", {"a"}, {{"T", kI64}})}),
                "node 'ni' (NextIteration): NextIteration outside a loop frame");
}

TEST(Validate, InputsFromTwoFrames) {
  std::vector<NodeDef> nodes = Loop();
  // The body adds a main-graph value without entering it into the loop.
  Find(nodes, "add").input[1] = "n";
  ExpectInvalid(G(nodes), "node 'add' (Add): inputs from two different frames: main and loop 'L' in main (the latter through 'body')");
}

TEST(Validate, UseOfLoopValueOutsideTheLoop) {
  std::vector<NodeDef> nodes = Loop();
  nodes.push_back(N("leak", "Identity", {"body"}));
  nodes.push_back(N("bad", "Add", {"leak", "n"}));
  ExpectInvalid(G(nodes), "node 'bad' (Add): inputs from two different frames");
}

TEST(Validate, LoopNeverEntered) {
  // A Merge/NextIteration ring that no source reaches.
  ExpectInvalid(G({I64("c", 1), N("m", "Merge", {"ni"}, {{"T", kI64}}), N("ni", "NextIteration", {"m"}, {{"T", kI64}})}),
                "node 'm' (Merge): is not reachable from any source node");
}

// ---------------------------------------------------------------- invocations

TEST(Validate, InvokeOfUndefinedFunction) {
  ExpectError(G({I64("a", 1), N("call", "Invoke", {"a"}, {{"function", "nope"}})}), absl::StatusCode::kNotFound,
              "node 'call' (Invoke): calls undefined function 'nope'");
}

TEST(Validate, InvokeOfDeclaredOnlyFunction) {
  Graph g = G({I64("a", 1), N("call", "Invoke", {"a"}, {{"function", "g"}})});
  ASSERT_TRUE(g.library.Declare({"g", {{"x", kI64}}, {{"r", kI64}}}).ok());
  ExpectInvalid(g, "node 'call' (Invoke): function 'g' is declared but has no definition");
}

TEST(Validate, InvokeWithWrongNumberOfArguments) {
  Graph g = G({I64("a", 1), N("call", "Invoke", {"a", "a"}, {{"function", "f"}})});
  AddIncrement(g);
  ExpectInvalid(g, "node 'call' (Invoke): calls 'f' with 2 arguments; it takes 1");
}

TEST(Validate, InvokeWithWrongArgumentType) {
  Graph g = G({F32("a", 1), N("call", "Invoke", {"a"}, {{"function", "f"}})});
  AddIncrement(g);
  ExpectInvalid(g, "node 'call' (Invoke): argument 0 of 'f' must be int64, got float32");
}

TEST(Validate, InvokeResultTypeFlowsDownstream) {
  Graph g = G({I64("a", 1), N("call", "Invoke", {"a"}, {{"function", "f"}}), N("e", "Exp", {"call"})});
  AddIncrement(g);
  ExpectInvalid(g, "node 'e' (Exp): expects float32 or float64 inputs, got int64");
}

TEST(Validate, InvokeOfUndefinedFunctionInsideABody) {
  Graph g = G({I64("a", 1)});
  AddFunction(g, "f", {Arg("x", 0), N("c", "Invoke", {"x"}, {{"function", "ghost"}}), Ret("r", "c", 0)});
  ExpectError(g, absl::StatusCode::kNotFound, "function 'f': node 'c' (Invoke): calls undefined function 'ghost'");
}

TEST(Validate, CallWithNegativeCallSite) {
  std::vector<NodeDef> nodes = TransformedTwoCalls();
  Find(nodes, "call1").attr["call_site"] = -1;
  ExpectInvalid(G(nodes), "node 'call1' (Call): call_site must be >= 0, is -1");
}

TEST(Validate, CallArgIndexOutOfRange) {
  Graph g = G(TransformedTwoCalls());
  Find(g.node, "call0").attr["arg_index"] = 1;
  AddIncrement(g);
  ExpectInvalid(g, "node 'call0' (Call): arg_index 1 is out of range: function 'f' has 1 arguments");
}

TEST(Validate, ReturnResultIndexOutOfRange) {
  Graph g = G(TransformedTwoCalls());
  Find(g.node, "ret1").attr["result_index"] = 3;
  AddIncrement(g);
  ExpectInvalid(g, "node 'ret1' (Return): result_index 3 is out of range: function 'f' has 1 results");
}

TEST(Validate, ReturnWithoutCallControlEdgeIsUnreachable) {
  std::vector<NodeDef> nodes = TransformedTwoCalls();
  Find(nodes, "ret1").input = {"f/r"};
  ExpectInvalid(G(nodes), "node 'ret1' (Return): is not reachable from any source node");
}

// ------------------------------------------------------------ function bodies

TEST(Validate, FunctionMissingRetval) {
  Graph g = G({I64("a", 1)});
  AddFunction(g, "f", {Arg("x", 0), N("y", "Identity", {"x"})});
  ExpectInvalid(g, "function 'f': no Retval node for result 0 ('r')");
}

TEST(Validate, FunctionMissingArg) {
  Graph g = G({I64("a", 1)});
  AddFunction(g, "f", {I64("c", 1), Ret("r", "c", 0)});
  ExpectInvalid(g, "function 'f': no Arg node for argument 0 ('x')");
}

TEST(Validate, DuplicateArgIndex) {
  Graph g = G({I64("a", 1)});
  AddFunction(g, "f", {Arg("a", 0), Arg("b", 0), N("s", "Add", {"a", "b"}), Ret("r", "s", 0)},
              {{"x", kI64}, {"y", kI64}});
  ExpectInvalid(g, "function 'f': node 'b' (Arg): duplicate Arg index 0 (also node 'a')");
}

TEST(Validate, DuplicateRetvalIndex) {
  Graph g = G({I64("a", 1)});
  AddFunction(g, "f", {Arg("x", 0), Ret("r", "x", 0), Ret("r2", "x", 0)});
  ExpectInvalid(g, "function 'f': node 'r2' (Retval): duplicate Retval index 0 (also node 'r')");
}

TEST(Validate, ArgIndexOutOfRange) {
  Graph g = G({I64("a", 1)});
  AddFunction(g, "f", {Arg("x", 0), Arg("z", 1), Ret("r", "x", 0)});
  ExpectInvalid(g, "function 'f': node 'z' (Arg): index 1 is out of range: function 'f' has 1 arguments");
}

TEST(Validate, ArgTypeDisagreesWithSignature) {
  Graph g = G({I64("a", 1)});
  AddFunction(g, "f", {Arg("x", 0, kF32), I64("c", 1), Ret("r", "c", 0)});
  ExpectInvalid(g, "function 'f': node 'x' (Arg): attr T is float32 but the signature says int64 for argument 0");
}

TEST(Validate, RetvalInputTypeDisagreesWithItsT) {
  Graph g = G({I64("a", 1)});
  AddFunction(g, "f", {Arg("x", 0), F32("c", 1), Ret("r", "c", 0)});
  ExpectInvalid(g, "function 'f': node 'r' (Retval): dtype mismatch: input 0 is float32, attr T is int64");
}

TEST(Validate, DtypeErrorInsideFunctionBodyNamesTheFunction) {
  Graph g = G({I64("a", 1)});
  AddFunction(g, "f", {Arg("x", 0), F32("c", 1), N("y", "Add", {"x", "c"}), Ret("r", "y", 0)});
  ExpectInvalid(g, "function 'f': node 'y' (Add): dtype mismatch: input 0 is int64, input 1 is float32");
}

TEST(Validate, ExitOutsideLoopInsideFunctionBody) {
  Graph g = G({I64("a", 1)});
  AddFunction(g, "f", {Arg("x", 0), N("e", "Exit", {"x"}, {{"T", kI64}}), Ret("r", "e", 0)});
  ExpectInvalid(g, "function 'f': node 'e' (Exit): Exit outside a loop frame (it fires in function 'f')");
}

TEST(Validate, VariableInsideFunctionBody) {
  Graph g = G({I64("a", 1)});
  AddFunction(g, "f", {Arg("x", 0), N("v", "Variable", {}, {{"dtype", kI64}}), Ret("r", "x", 0)});
  ExpectInvalid(g, "function 'f': node 'v' (Variable): Variable inside a function body");
}

TEST(Validate, PlaceholderInsideFunctionBody) {
  Graph g = G({I64("a", 1)});
  AddFunction(g, "f", {Arg("x", 0), Ph("p", kI64), Ret("r", "x", 0)});
  ExpectInvalid(g, "function 'f': node 'p' (Placeholder): Placeholder inside a function body");
}

TEST(Validate, ArgInMainGraph) {
  ExpectInvalid(G({Arg("x", 0)}), "node 'x' (Arg): Arg outside a function body");
}

TEST(Validate, RetvalInMainGraph) {
  ExpectInvalid(G({I64("a", 1), Ret("r", "a", 0)}), "node 'r' (Retval): Retval outside a function body");
}

TEST(Validate, SignatureWithInvalidDtype) {
  Graph g = G({I64("a", 1)});
  AddFunction(g, "f", {Arg("x", 0), Ret("r", "x", 0, DType::kInvalid)}, {{"x", kI64}}, {{"r", DType::kInvalid}});
  ExpectInvalid(g, "function 'f': result 0 has an invalid dtype");
}

TEST(ValidateFunction, DeclaredOnlyFunctionHasNoBody) {
  FunctionLibrary lib;
  ASSERT_TRUE(lib.Declare({"g", {}, {}}).ok());
  absl::Status s = ValidateFunction(*lib.Find("g"), lib);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("function 'g' is declared but has no definition"));
}

TEST(ValidateFunction, AcceptsRecursiveFunction) {
  Graph fib = reference::Fib();
  const FunctionDef* f = fib.library.Find("fib");
  ASSERT_NE(f, nullptr);
  EXPECT_TRUE(ValidateFunction(*f, fib.library).ok()) << ValidateFunction(*f, fib.library);
}

// ------------------------------------------------------------------ variables

TEST(Validate, ReadDtypeDisagreesWithVariable) {
  ExpectInvalid(G({N("v", "Variable", {}, {{"dtype", kI64}}), N("r", "Read", {"v"}, {{"dtype", kF32}})}),
                "node 'r' (Read): attr dtype is float32 but variable 'v' is int64");
}

TEST(Validate, AssignThroughIdentityChecksTheVariable) {
  ExpectInvalid(G({N("v", "Variable", {}, {{"dtype", kI64}}), N("h", "Identity", {"v"}), F32("d", 1),
                   N("a", "Assign", {"h", "d"}, {{"dtype", kF32}})}),
                "node 'a' (Assign): attr dtype is float32 but variable 'v' is int64");
}

TEST(Validate, AssignValueDisagreesWithDtype) {
  ExpectInvalid(G({N("v", "Variable", {}, {{"dtype", kI64}}), F32("d", 1),
                   N("a", "AssignSub", {"v", "d"}, {{"dtype", kI64}})}),
                "node 'a' (AssignSub): value is float32, variable is int64");
}

TEST(Validate, ReadOfSomethingThatIsNotAVariable) {
  ExpectInvalid(G({I64("c", 1), N("r", "Read", {"c"}, {{"dtype", kI64}})}),
                "node 'r' (Read): input 0 must be a variable handle; it comes from node 'c' (Const)");
}

TEST(Validate, ReadOfAFloatIsNotAHandle) {
  ExpectInvalid(G({F32("c", 1), N("r", "Read", {"c"}, {{"dtype", kF32}})}),
                "node 'r' (Read): variable handle (input 0) must be int64, got float32");
}

TEST(Validate, VariableInitialValueDisagreesWithDtype) {
  ExpectInvalid(G({N("v", "Variable", {}, {{"dtype", kI64}, {"initial_value", Tensor::Scalar<float>(1)}})}),
                "node 'v' (Variable): initial_value is float32, attr dtype is int64");
}

// ------------------------------------------------ attrs invalid on their face
// What a kernel would refuse whatever it is fed is refused here, naming the
// node and its op (issue #26, item 9: `tdf validate` accepted a Reshape to
// [-3,2]).

using IntList = std::vector<int64_t>;

// x: float32 placeholder; `op` node "r" reading it with `attrs`.
Graph OneOp(const std::string& op, AttrMap attrs, int extra_inputs = 0) {
  std::vector<std::string> inputs(1 + extra_inputs, "x");
  return G({Ph("x", kF32), N("r", op, inputs, std::move(attrs))});
}

TEST(ValidateAttrs, AcceptsAttrsThatSomeInputFits) {
  for (const Graph& g : {OneOp("Reshape", {{"shape", IntList{-1, 2}}}), OneOp("Reshape", {{"shape", IntList{}}}),
                         OneOp("Reshape", {{"shape", IntList{0, -1}}}), OneOp("Transpose", {}),
                         OneOp("Transpose", {{"perm", IntList{}}}), OneOp("Transpose", {{"perm", IntList{2, 0, 1}}}),
                         OneOp("Slice", {{"begin", IntList{0, 3}}, {"size", IntList{-1, 0}}}),
                         OneOp("SliceGrad", {{"begin", IntList{1}}, {"size", IntList{2}}}, 1),
                         OneOp("Cast", {{"DstT", kI64}}),
                         // Negative axes count from the end, as the kernels normalize them.
                         OneOp("Sum", {{"axes", IntList{-1, 0}}}), OneOp("Concat", {{"axis", int64_t{-1}}}),
                         G({Ph("x", kF32), Ph("i", kI64), N("r", "Gather", {"x", "i"}, {{"axis", int64_t{-1}}})}),
                         G({N("v", "Variable", {}, {{"dtype", kF32}, {"shape", Shape({2, 0, 3})}})}),
                         OneOp("CopyToDevice", {{"device", "cuda:1"}})}) {
    EXPECT_TRUE(Validate(g).ok()) << Validate(g);
  }
}

TEST(ValidateAttrs, ReshapeTargetWithANegativeDimOtherThanMinusOne) {
  ExpectInvalid(OneOp("Reshape", {{"shape", IntList{-3, 2}}}),
                "node 'r' (Reshape): bad target shape [-3,2]: dims must be >= 0, with at most one -1");
}

TEST(ValidateAttrs, ReshapeTargetWithTwoUnknownDims) {
  ExpectInvalid(OneOp("Reshape", {{"shape", IntList{-1, 4, -1}}}),
                "node 'r' (Reshape): bad target shape [-1,4,-1]: dims must be >= 0, with at most one -1");
}

TEST(ValidateAttrs, ReshapeTargetWhoseKnownDimsOverflow) {
  const int64_t kMax = std::numeric_limits<int64_t>::max();
  ExpectInvalid(OneOp("Reshape", {{"shape", IntList{-1, kMax, 5}}}), "node 'r' (Reshape): bad target shape");
  ExpectInvalid(OneOp("Reshape", {{"shape", IntList{-1, kMax, 5}}}), "has too many elements");
}

TEST(ValidateAttrs, TransposePermThatIsNotAPermutation) {
  ExpectInvalid(OneOp("Transpose", {{"perm", IntList{0, 0}}}),
                "node 'r' (Transpose): perm [0,0] is not a permutation of 0..1");
  ExpectInvalid(OneOp("Transpose", {{"perm", IntList{1, 2}}}), "perm [1,2] is not a permutation of 0..1");
  ExpectInvalid(OneOp("Transpose", {{"perm", IntList{-1}}}), "perm [-1] is not a permutation of 0..0");
}

TEST(ValidateAttrs, SliceBeginAndSizeOfDifferentLengths) {
  ExpectInvalid(OneOp("Slice", {{"begin", IntList{0, 0}}, {"size", IntList{1}}}),
                "node 'r' (Slice): begin [0,0] has 2 entries but size [1] has 1");
}

TEST(ValidateAttrs, SliceNegativeBegin) {
  ExpectInvalid(OneOp("Slice", {{"begin", IntList{0, -1}}, {"size", IntList{1, 1}}}),
                "node 'r' (Slice): begin [0,-1]: dim 1 is negative");
  ExpectInvalid(OneOp("Slice", {{"begin", IntList{std::numeric_limits<int64_t>::min()}}, {"size", IntList{-1}}}),
                "dim 0 is negative");
}

TEST(ValidateAttrs, SliceSizeBelowMinusOne) {
  ExpectInvalid(OneOp("Slice", {{"begin", IntList{0}}, {"size", IntList{-2}}}),
                "node 'r' (Slice): size [-2]: dim 0 is below -1");
}

TEST(ValidateAttrs, SliceGradHasSlicesRules) {
  ExpectInvalid(OneOp("SliceGrad", {{"begin", IntList{-1}}, {"size", IntList{1}}}, 1),
                "node 'r' (SliceGrad): begin [-1]: dim 0 is negative");
}

TEST(ValidateAttrs, CastToAnInvalidDtype) {
  ExpectInvalid(OneOp("Cast", {{"DstT", DType::kInvalid}}), "node 'r' (Cast): DstT must not be invalid");
}

TEST(ValidateAttrs, VariableWithAnInvalidDtype) {
  ExpectInvalid(G({N("v", "Variable", {}, {{"dtype", DType::kInvalid}})}),
                "node 'v' (Variable): dtype must not be invalid");
}

TEST(ValidateAttrs, VariableShapeWithANegativeDim) {
  ExpectInvalid(G({N("v", "Variable", {}, {{"dtype", kF32}, {"shape", Shape({2, -1})}})}),
                "node 'v' (Variable): negative dimension in shape [2,-1]");
}

TEST(ValidateAttrs, VariableWithAnInvalidInitialValue) {
  ExpectInvalid(G({N("v", "Variable", {}, {{"dtype", kF32}, {"initial_value", Tensor()}})}),
                "node 'v' (Variable): initial_value is an invalid tensor");
}

TEST(ValidateAttrs, CopyToDeviceOnAHostDevice) {
  ExpectInvalid(OneOp("CopyToDevice", {{"device", "cpu"}}),
                "node 'r' (CopyToDevice): attr device 'cpu' is not a CUDA device");
  ExpectInvalid(OneOp("CopyToDevice", {{"device", "cuda:x"}}), "attr device 'cuda:x' is not a CUDA device");
}

TEST(ValidateAttrs, InsideAFunctionBodyNamesTheFunctionToo) {
  Graph g;
  AddFunction(g, "f",
              {Arg("x", 0), N("r", "Reshape", {"x"}, {{"shape", IntList{-3, 2}}}), Ret("out", "r", 0)});
  ExpectInvalid(g, "function 'f': node 'r' (Reshape): bad target shape [-3,2]");
}

// The builder runs the same checks when the node is added.
TEST(ValidateAttrs, TheBuilderRecordsTheSameError) {
  GraphBuilder b;
  EXPECT_FALSE(b.Reshape(b.Placeholder("x", kF32), {-3, 2}).valid());
  EXPECT_EQ(b.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(b.status().message()), HasSubstr("(Reshape): bad target shape [-3,2]"));
}

}  // namespace
}  // namespace tdf
