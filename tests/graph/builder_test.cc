#include "tdf/builder.h"

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tdf/session.h"
#include "tdf/validate.h"

namespace tdf {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Outs = std::vector<Output>;

constexpr DType kI64 = DType::kInt64;

Graph BuildOk(const GraphBuilder& b) {
  absl::StatusOr<Graph> g = b.Build();
  EXPECT_TRUE(g.ok()) << g.status();
  return g.ok() ? *std::move(g) : Graph{};
}

const NodeDef& Node(const Graph& g, const std::string& name) {
  const NodeDef* n = g.FindNode(name);
  EXPECT_NE(n, nullptr) << "no node " << name;
  static const NodeDef kMissing;
  return n ? *n : kMissing;
}

std::vector<const NodeDef*> WithOp(const std::vector<NodeDef>& nodes, const std::string& op) {
  std::vector<const NodeDef*> out;
  for (const NodeDef& n : nodes)
    if (n.op == op) out.push_back(&n);
  return out;
}

// The node an input string refers to ("x:1" -> x, "^x" -> x).
std::string Src(const std::string& input) {
  InputRef ref = InputRef::Parse(input).value();
  return ref.node;
}

TEST(GraphBuilder, NamesAreExplicitOrGeneratedAndUnique) {
  GraphBuilder b;
  Output x = b.Placeholder("x", kI64);
  Output a = b.Add(x, x);
  Output c = b.Add(x, x);
  Output r = b.Identity(a, "result");
  EXPECT_EQ(b.Name(x), "x");
  EXPECT_EQ(b.Name(r), "result");
  EXPECT_NE(b.Name(a), b.Name(c));
  Graph g = BuildOk(b);
  EXPECT_EQ(g.node.size(), 4u);
  EXPECT_THAT(Node(g, b.Name(a)).input, ElementsAre("x", "x"));
  EXPECT_TRUE(Validate(g).ok()) << Validate(g);
}

TEST(GraphBuilder, DuplicateExplicitNameIsAnError) {
  GraphBuilder b;
  b.Placeholder("x", kI64);
  Output dup = b.Placeholder("x", kI64);
  EXPECT_FALSE(dup.valid());
  EXPECT_EQ(b.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(std::string(b.status().message()), HasSubstr("duplicate node name 'x'"));
}

TEST(GraphBuilder, InfersDtypesAndOutputCounts) {
  GraphBuilder b;
  Output x = b.Placeholder("x", kI64);
  Output f = b.Const<float>(1.5f);
  EXPECT_EQ(b.dtype(x), kI64);
  EXPECT_EQ(b.dtype(f), DType::kFloat32);
  EXPECT_EQ(b.dtype(b.Add(x, x)), kI64);
  EXPECT_EQ(b.dtype(b.Less(x, x)), DType::kBool);
  EXPECT_EQ(b.dtype(b.Cast(x, DType::kFloat64)), DType::kFloat64);
  Output m = b.Op("Merge", {x, x}, {{"T", kI64}});
  std::vector<Output> outs = b.Outputs(m);
  ASSERT_EQ(outs.size(), 2u);
  EXPECT_EQ(b.dtype(outs[1]), DType::kInt32);  // value_index
  EXPECT_EQ(b.Name(outs[1]), b.Name(m) + ":1");
  EXPECT_TRUE(b.status().ok());
}

TEST(GraphBuilder, DtypeMismatchIsRecordedAndLaterCallsAreNoOps) {
  GraphBuilder b;
  Output x = b.Placeholder("x", kI64);
  Output f = b.Const<float>(1.0f);
  Output bad = b.Add(x, f);
  EXPECT_FALSE(bad.valid());
  EXPECT_EQ(b.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(b.status().message()), HasSubstr("dtype mismatch: input 0 is int64, input 1 is float32"));
  // Later calls return invalid Outputs and keep the first error.
  Output later = b.Identity(x, "later");
  EXPECT_FALSE(later.valid());
  absl::StatusOr<Graph> g = b.Build();
  EXPECT_EQ(g.status(), b.status());
}

TEST(GraphBuilder, UnknownOpIsAnError) {
  GraphBuilder b;
  EXPECT_FALSE(b.Op("Frobnicate", {}).valid());
  EXPECT_EQ(b.status().code(), absl::StatusCode::kNotFound);
}

// Cond(x > 0, x + 1, x - 1): one Switch of x on the predicate, the then
// branch reading output 1 and the else branch output 0, Merge(else, then).
TEST(GraphBuilder, BranchResultConstantKeepsItsPivot) {
  GraphBuilder b;
  Output x = b.Placeholder("x", kI64);
  Outs r = b.Cond(b.Greater(x, b.Const<int64_t>(0)), [&] { return Outs{b.Const<int64_t>(7)}; },
                  [&] { return Outs{b.Identity(x)}; });
  Graph g = BuildOk(b);
  const NodeDef& merge = Node(g, b.Name(r[0]));
  // The then result is a Const: it must be dead when the branch is not
  // taken, so it stays triggered by the then pivot, an Identity of the pivot
  // switch's true output.
  const NodeDef& seven = Node(g, Src(merge.input[1]));
  ASSERT_EQ(seven.input.size(), 1u);
  EXPECT_EQ(seven.input[0][0], '^');
  const NodeDef& pivot = Node(g, seven.input[0].substr(1));
  EXPECT_EQ(pivot.op, "Identity");
  EXPECT_THAT(pivot.input[0], ::testing::EndsWith("pivot_switch:1"));
}

TEST(GraphBuilder, CondLowersToSwitchAndMerge) {
  GraphBuilder b;
  Output x = b.Placeholder("x", kI64);
  Output pred = b.Greater(x, b.Const<int64_t>(0));
  Outs r = b.Cond(pred, [&] { return Outs{b.Add(x, b.Const<int64_t>(1))}; },
                  [&] { return Outs{b.Sub(x, b.Const<int64_t>(1))}; });
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(b.dtype(r[0]), kI64);
  b.Identity(r[0], "result");
  Graph g = BuildOk(b);
  const std::string pred_name = b.Name(pred);

  // The captured x is switched once, shared by both branches.
  std::vector<const NodeDef*> switches = WithOp(g.node, "Switch");
  ASSERT_EQ(switches.size(), 2u);  // pivot switch + the switch of x
  const NodeDef* pivot_switch = nullptr;
  const NodeDef* x_switch = nullptr;
  for (const NodeDef* s : switches) (s->input[0] == pred_name ? pivot_switch : x_switch) = s;
  ASSERT_NE(pivot_switch, nullptr);
  ASSERT_NE(x_switch, nullptr);
  EXPECT_THAT(pivot_switch->input, ElementsAre(pred_name, pred_name));
  EXPECT_THAT(x_switch->input, ElementsAre("x", pred_name));
  EXPECT_EQ(x_switch->GetType("T").value(), kI64);

  const NodeDef& add = *WithOp(g.node, "Add").at(0);
  const NodeDef& sub = *WithOp(g.node, "Sub").at(0);
  EXPECT_EQ(add.input[0], x_switch->name + ":1");  // then: true output
  EXPECT_EQ(sub.input[0], x_switch->name);         // else: false output

  // A branch constant whose consumer also reads a switched value needs no
  // trigger of its own (the consumer is dead when the branch is not taken):
  // its pivot edge is dropped so the executor can fold it.
  const NodeDef& then_one = Node(g, Src(add.input[1]));
  EXPECT_EQ(then_one.op, "Const");
  EXPECT_TRUE(then_one.input.empty());

  const NodeDef& merge = Node(g, b.Name(r[0]));
  EXPECT_EQ(merge.op, "Merge");
  EXPECT_THAT(merge.input, ElementsAre(sub.name, add.name));
  EXPECT_EQ(merge.GetType("T").value(), kI64);
  EXPECT_TRUE(Validate(g).ok()) << Validate(g);
}

TEST(GraphBuilder, CondNonBoolPredicateIsAnError) {
  GraphBuilder b;
  Output x = b.Placeholder("x", kI64);
  Outs r = b.Cond(x, [&] { return Outs{x}; }, [&] { return Outs{x}; });
  ASSERT_EQ(r.size(), 1u);  // as many as the branches return, invalid
  EXPECT_FALSE(r[0].valid());
  EXPECT_THAT(std::string(b.status().message()), HasSubstr("Cond predicate 'x' must be bool, is int64"));
}

TEST(GraphBuilder, CondBranchesReturningDifferentCountsIsAnError) {
  GraphBuilder b;
  Output x = b.Placeholder("x", kI64);
  Outs r = b.Cond(b.Less(x, x), [&] { return Outs{x}; }, [&] { return Outs{x, x}; });
  ASSERT_EQ(r.size(), 2u);  // the longer branch's count, invalid
  EXPECT_FALSE(r[0].valid() || r[1].valid());
  EXPECT_EQ(b.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(b.status().message()), HasSubstr("Cond branches return 1 (then) and 2 (else) values"));
}

TEST(GraphBuilder, CondBranchesReturningDifferentDtypesIsAnError) {
  GraphBuilder b;
  Output x = b.Placeholder("x", kI64);
  b.Cond(b.Less(x, x), [&] { return Outs{x}; }, [&] { return Outs{b.Const<float>(1.0f)}; });
  EXPECT_THAT(std::string(b.status().message()),
              HasSubstr("Cond output 0 is int64 in the then branch and float32 in the else branch"));
}

TEST(GraphBuilder, UsingABranchValueOutsideTheBranchIsAnError) {
  GraphBuilder b;
  Output x = b.Placeholder("x", kI64);
  Output inside;
  b.Cond(b.Less(x, x),
         [&] {
           inside = b.Add(x, x);
           return Outs{inside};
         },
         [&] { return Outs{x}; });
  ASSERT_TRUE(b.status().ok()) << b.status();
  Output leak = b.Identity(inside);
  EXPECT_FALSE(leak.valid());
  EXPECT_THAT(std::string(b.status().message()), HasSubstr("of a cond branch or loop body is used outside it"));
}

// while (i < n) i = i + 1: Enter -> Merge -> Switch -> (Exit | body ->
// NextIteration -> Merge input 1); n enters as a loop invariant.
TEST(GraphBuilder, WhileLowersToEnterMergeSwitchNextIterationExit) {
  GraphBuilder b;
  Output n = b.Placeholder("n", kI64);
  Outs r = b.While([&](const Outs& v) { return b.Less(v[0], n); },
                   [&](const Outs& v) { return Outs{b.Add(v[0], b.Const<int64_t>(1))}; },
                   {b.Const<int64_t>(0, "zero")}, {7, "loop"});
  ASSERT_EQ(r.size(), 1u);
  b.Identity(r[0], "result");
  Graph g = BuildOk(b);

  const NodeDef& enter = Node(g, "loop/enter_0");
  EXPECT_EQ(enter.op, "Enter");
  EXPECT_THAT(enter.input, ElementsAre("zero"));
  EXPECT_EQ(enter.GetString("frame_name").value(), "loop");
  EXPECT_FALSE(enter.GetBool("is_constant").value());
  EXPECT_EQ(enter.GetInt("parallel_iterations").value(), 7);

  const NodeDef& merge = Node(g, "loop/merge_0");
  EXPECT_THAT(merge.input, ElementsAre("loop/enter_0", "loop/next_0"));  // NextIteration patched in
  const NodeDef& next = Node(g, "loop/next_0");
  EXPECT_EQ(next.op, "NextIteration");
  const NodeDef& add = Node(g, Src(next.input[0]));
  EXPECT_EQ(add.op, "Add");
  EXPECT_EQ(add.input[0], "loop/body_0");

  const NodeDef& loop_cond = Node(g, "loop/loop_cond");
  EXPECT_EQ(loop_cond.op, "LoopCond");
  const NodeDef& sw = Node(g, "loop/switch_0");
  EXPECT_THAT(sw.input, ElementsAre("loop/merge_0", "loop/loop_cond"));
  EXPECT_THAT(Node(g, "loop/exit_0").input, ElementsAre("loop/switch_0"));
  EXPECT_THAT(Node(g, "loop/body_0").input, ElementsAre("loop/switch_0:1"));
  EXPECT_EQ(b.Name(r[0]), "loop/exit_0");

  // n is captured as a constant Enter of the same frame.
  const NodeDef& less = Node(g, Src(loop_cond.input[0]));
  EXPECT_EQ(less.input[0], "loop/merge_0");
  const NodeDef& n_enter = Node(g, Src(less.input[1]));
  EXPECT_EQ(n_enter.op, "Enter");
  EXPECT_THAT(n_enter.input, ElementsAre("n"));
  EXPECT_TRUE(n_enter.GetBool("is_constant").value());
  EXPECT_EQ(n_enter.GetString("frame_name").value(), "loop");

  // The body constant fires once per iteration: triggered by the body pivot.
  const NodeDef& one = Node(g, Src(add.input[1]));
  EXPECT_THAT(one.input, ElementsAre("^loop/body_0"));
  EXPECT_TRUE(Validate(g).ok()) << Validate(g);
}

TEST(GraphBuilder, CapturingTheSameOuterValueTwiceMakesOneEnter) {
  GraphBuilder b;
  Output n = b.Placeholder("n", kI64);
  b.While([&](const Outs& v) { return b.Less(v[0], n); },
          [&](const Outs& v) { return Outs{b.Add(v[0], n)}; }, {b.Const<int64_t>(0)});
  Graph g = BuildOk(b);
  int enters_of_n = 0;
  for (const NodeDef* e : WithOp(g.node, "Enter")) enters_of_n += e->input[0] == "n";
  EXPECT_EQ(enters_of_n, 1);
}

TEST(GraphBuilder, NestedWhileEntersOuterValuesThroughEveryLevel) {
  GraphBuilder b;
  Output n = b.Placeholder("n", kI64);
  Outs r = b.While(
      [&](const Outs& v) { return b.Less(v[0], n); },
      [&](const Outs& v) {
        Outs inner = b.While([&](const Outs& w) { return b.Less(w[0], n); },  // n from two levels out
                             [&](const Outs& w) { return Outs{b.Add(w[0], v[0])}; },  // v from one level out
                             {v[0]}, {10, "inner"});
        return Outs{inner[0]};
      },
      {b.Const<int64_t>(1)}, {10, "outer"});
  b.Identity(r[0], "result");
  Graph g = BuildOk(b);
  // The inner loop's variable enters from the outer body.
  EXPECT_THAT(Node(g, "inner/enter_0").input, ElementsAre("outer/body_0"));
  EXPECT_EQ(Node(g, "inner/enter_0").GetString("frame_name").value(), "inner");
  // n reaches the inner loop through an outer constant Enter, then an inner one.
  const NodeDef* outer_n = nullptr;
  const NodeDef* inner_n = nullptr;
  for (const NodeDef* e : WithOp(g.node, "Enter")) {
    if (e->input[0] == "n") outer_n = e;
  }
  ASSERT_NE(outer_n, nullptr);
  EXPECT_EQ(outer_n->GetString("frame_name").value(), "outer");
  for (const NodeDef* e : WithOp(g.node, "Enter")) {
    if (e->input[0] == outer_n->name && e->GetString("frame_name").value() == "inner") inner_n = e;
  }
  ASSERT_NE(inner_n, nullptr);
  EXPECT_TRUE(inner_n->GetBool("is_constant").value());
  // The outer body value used in the inner body enters as a constant too.
  bool v_enters_inner = false;
  for (const NodeDef* e : WithOp(g.node, "Enter")) {
    v_enters_inner |= e->input[0] == "outer/body_0" && e->GetBool("is_constant").value() &&
                      e->GetString("frame_name").value() == "inner";
  }
  EXPECT_TRUE(v_enters_inner);
  EXPECT_TRUE(Validate(g).ok()) << Validate(g);
}

TEST(GraphBuilder, WhileBodyReturningWrongCountIsAnError) {
  GraphBuilder b;
  Output n = b.Placeholder("n", kI64);
  b.While([&](const Outs& v) { return b.Less(v[0], n); }, [&](const Outs& v) { return Outs{v[0], v[0]}; },
          {b.Const<int64_t>(0)});
  EXPECT_THAT(std::string(b.status().message()), HasSubstr("While body returns 2 values for 1 loop variables"));
}

TEST(GraphBuilder, WhileNonBoolConditionIsAnError) {
  GraphBuilder b;
  Output n = b.Placeholder("n", kI64);
  b.While([&](const Outs& v) { return b.Add(v[0], n); }, [&](const Outs& v) { return v; }, {b.Const<int64_t>(0)});
  EXPECT_THAT(std::string(b.status().message()), HasSubstr("While condition must be bool, is int64"));
}

TEST(GraphBuilder, UsingALoopValueOutsideTheLoopIsAnError) {
  GraphBuilder b;
  Output n = b.Placeholder("n", kI64);
  Output inside;
  b.While([&](const Outs& v) { return b.Less(v[0], n); },
          [&](const Outs& v) {
            inside = b.Add(v[0], n);
            return Outs{inside};
          },
          {b.Const<int64_t>(0)});
  ASSERT_TRUE(b.status().ok()) << b.status();
  EXPECT_FALSE(b.Identity(inside).valid());
  EXPECT_THAT(std::string(b.status().message()), HasSubstr("is used outside it"));
}

TEST(GraphBuilder, CallOfUndeclaredFunctionIsAnError) {
  GraphBuilder b;
  Output x = b.Placeholder("x", kI64);
  Outs r = b.Call("nope", {x});
  ASSERT_EQ(r.size(), 1u);
  EXPECT_FALSE(r[0].valid());
  EXPECT_EQ(b.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(b.status().message()), HasSubstr("Call of undeclared function 'nope'"));
}

TEST(GraphBuilder, DefineFunctionBuildsArgsRetvalsAndInvoke) {
  GraphBuilder b;
  ASSERT_TRUE(b.DefineFunction({"inc", {{"x", kI64}}, {{"r", kI64}}},
                               [](GraphBuilder& f, const Outs& a) { return Outs{f.Add(a[0], f.Const<int64_t>(1))}; })
                  .ok());
  Output x = b.Placeholder("x", kI64);
  Outs r = b.Call("inc", {x});
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(b.dtype(r[0]), kI64);
  Graph g = BuildOk(b);
  const FunctionDef* f = g.library.Find("inc");
  ASSERT_NE(f, nullptr);
  EXPECT_TRUE(f->defined);
  ASSERT_EQ(WithOp(f->node, "Arg").size(), 1u);
  EXPECT_EQ(WithOp(f->node, "Arg")[0]->name, "x");
  ASSERT_EQ(WithOp(f->node, "Retval").size(), 1u);
  EXPECT_EQ(WithOp(f->node, "Retval")[0]->GetInt("index").value(), 0);
  const NodeDef& call = Node(g, b.Name(r[0]));
  EXPECT_EQ(call.op, "Invoke");
  EXPECT_EQ(call.GetString("function").value(), "inc");
  EXPECT_TRUE(Validate(g).ok()) << Validate(g);
}

TEST(GraphBuilder, FunctionBodyReturningWrongCountIsAnError) {
  GraphBuilder b;
  absl::Status s = b.DefineFunction({"f", {{"x", kI64}}, {{"r", kI64}}},
                                    [](GraphBuilder& f, const Outs& a) { return Outs{a[0], a[0]}; });
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("in function 'f': body returns 2 values; the signature has 1"));
  EXPECT_EQ(b.status(), s);
}

TEST(GraphBuilder, VariableInsideFunctionIsAnError) {
  GraphBuilder b;
  absl::Status s = b.DefineFunction({"f", {{"x", kI64}}, {{"r", kI64}}}, [](GraphBuilder& f, const Outs& a) {
    f.Variable("v", Tensor::Scalar<int64_t>(0));
    return Outs{a[0]};
  });
  EXPECT_THAT(std::string(s.message()), HasSubstr("variable 'v' must be created in the main graph"));
}

TEST(GraphBuilder, RecursiveFunctionCanCallItself) {
  GraphBuilder b;
  ASSERT_TRUE(b.DefineFunction({"down", {{"n", kI64}}, {{"r", kI64}}}, [](GraphBuilder& f, const Outs& a) {
                 return f.Cond(f.LessEqual(a[0], f.Const<int64_t>(0)), [&] { return Outs{a[0]}; },
                               [&] { return f.Call("down", {f.Sub(a[0], f.Const<int64_t>(1))}); });
               }).ok())
      << b.status();
  b.Identity(b.Call("down", {b.Placeholder("n", kI64)})[0], "result");
  Graph g = BuildOk(b);
  EXPECT_EQ(WithOp(g.library.Find("down")->node, "Invoke").size(), 1u);
  EXPECT_TRUE(Validate(g).ok()) << Validate(g);
}

}  // namespace
}  // namespace tdf

namespace tdf {
namespace {

// Every helper emits its registered op with the attrs the op's kernel reads:
// the values come out of a session as the op defines them.
TEST(GraphBuilder, OpHelpersRunAsTheirOps) {
  GraphBuilder b;
  const Output v = b.Const(*Tensor::FromVector<double>({-4, 1, 9}, Shape({3})));
  const Output w = b.Const(*Tensor::FromVector<double>({2, 3, -1}, Shape({3})));
  const Output m = b.Const(*Tensor::FromVector<double>({1, 2, 3, 4, 5, 6}, Shape({2, 3})));
  const Output mask = b.Const(*Tensor::FromVector<bool>({true, false, true}, Shape({3})));
  b.Identity(b.Maximum(v, w), "maximum");
  b.Identity(b.Minimum(v, w), "minimum");
  b.Identity(b.Pow(b.Abs(v), b.Const(2.0)), "pow_abs");
  b.Identity(b.Square(v), "square");
  b.Identity(b.Sign(v), "sign");
  b.Identity(b.Sqrt(b.Abs(v)), "sqrt");
  b.Identity(b.Mul(b.Rsqrt(b.Abs(v)), b.Reciprocal(w)), "rsqrt_reciprocal");
  b.Identity(b.Select(mask, v, w), "select");
  b.Identity(b.AddN({v, w, v}), "addn");
  b.Identity(b.Add(b.ZerosLike(v), b.OnesLike(w)), "ones");
  b.Identity(b.Max(m, {1}), "max_rows");
  b.Identity(b.Slice(m, {0, 1}, {2, -1}), "slice");
  b.Identity(b.Transpose(m), "transpose");
  b.Identity(b.Transpose(m, {1, 0}), "transpose_perm");
  b.Identity(b.SoftmaxCrossEntropy(m, b.Const(*Tensor::FromVector<double>({0, 0, 1, 1, 0, 0}, Shape({2, 3}))))[0],
             "xent");
  absl::StatusOr<Graph> g = b.Build();
  ASSERT_TRUE(g.ok()) << g.status();
  absl::StatusOr<std::unique_ptr<Session>> s = Session::Create(*g);
  ASSERT_TRUE(s.ok()) << s.status();
  const std::vector<std::string> names = {"maximum", "minimum", "pow_abs", "square",         "sign",
                                          "sqrt",    "rsqrt_reciprocal", "select", "addn", "ones",
                                          "max_rows", "slice", "transpose", "transpose_perm", "xent"};
  absl::StatusOr<std::vector<Tensor>> out = (*s)->Run({}, names);
  ASSERT_TRUE(out.ok()) << out.status();
  auto values = [](const Tensor& t) { return std::vector<double>(t.data<double>(), t.data<double>() + t.num_elements()); };
  using ::testing::DoubleNear;
  using ::testing::ElementsAre;
  EXPECT_THAT(values((*out)[0]), ElementsAre(2, 3, 9));
  EXPECT_THAT(values((*out)[1]), ElementsAre(-4, 1, -1));
  EXPECT_THAT(values((*out)[2]), ElementsAre(16, 1, 81));
  EXPECT_THAT(values((*out)[3]), ElementsAre(16, 1, 81));
  EXPECT_THAT(values((*out)[4]), ElementsAre(-1, 1, 1));
  EXPECT_THAT(values((*out)[5]), ElementsAre(2, 1, 3));
  EXPECT_THAT(values((*out)[6]), ElementsAre(DoubleNear(0.25, 1e-15), DoubleNear(1.0 / 3, 1e-15),
                                             DoubleNear(-1.0 / 3, 1e-15)));
  EXPECT_THAT(values((*out)[7]), ElementsAre(-4, 3, 9));
  EXPECT_THAT(values((*out)[8]), ElementsAre(-6, 5, 17));
  EXPECT_THAT(values((*out)[9]), ElementsAre(1, 1, 1));
  EXPECT_THAT(values((*out)[10]), ElementsAre(3, 6));
  EXPECT_EQ((*out)[11].shape(), Shape({2, 2}));
  EXPECT_THAT(values((*out)[11]), ElementsAre(2, 3, 5, 6));
  EXPECT_EQ((*out)[12].shape(), Shape({3, 2}));
  EXPECT_THAT(values((*out)[12]), ElementsAre(1, 4, 2, 5, 3, 6));
  EXPECT_THAT(values((*out)[13]), ElementsAre(1, 4, 2, 5, 3, 6));
  // Row 0: -log softmax(1,2,3)[2]; row 1: -log softmax(4,5,6)[0].
  const double lse = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0));
  EXPECT_THAT(values((*out)[14]), ElementsAre(DoubleNear(lse - 3, 1e-12), DoubleNear(lse + 3 - 4, 1e-12)));
}

}  // namespace
}  // namespace tdf

// ---------------------------------------------------------------------------
// After an error every call still returns as many Outputs as a caller would
// index, all invalid (issue #26, item 3): `b.Call("fbi", {n})[0]` read past
// the end of an empty vector. The sizes are checked before any indexing, so
// a short vector fails these tests even without a sanitizer.

namespace tdf {
namespace {

using Outs = std::vector<Output>;
constexpr DType kInt = DType::kInt64;

void ExpectAllInvalid(const GraphBuilder& b, const Outs& outs, size_t want) {
  ASSERT_EQ(outs.size(), want);
  for (const Output& o : outs) {
    EXPECT_FALSE(o.valid());
    EXPECT_EQ(b.dtype(o), DType::kInvalid);
    EXPECT_EQ(b.Name(o), "<invalid>");
  }
}

// Defines pair(x) = (x, x + 1) and leaves `b` with an error.
void DefinePairThenFail(GraphBuilder& b) {
  ASSERT_TRUE(b.DefineFunction({"pair", {{"x", kInt}}, {{"a", kInt}, {"b", kInt}}},
                               [](GraphBuilder& f, const Outs& a) {
                                 return Outs{a[0], f.Add(a[0], f.Const<int64_t>(1))};
                               })
                  .ok());
  b.Op("Frobnicate", {});
  ASSERT_EQ(b.status().code(), absl::StatusCode::kNotFound);
}

TEST(GraphBuilderAfterError, MisspeltCallGivesOneInvalidOutput) {
  GraphBuilder b;
  Output n = b.Placeholder("n", kInt);
  Outs r = b.Call("fbi", {n});
  ASSERT_NO_FATAL_FAILURE(ExpectAllInvalid(b, r, 1));
  EXPECT_EQ(b.status().code(), absl::StatusCode::kNotFound);
  // The README's idiom goes on without touching memory it does not own.
  EXPECT_FALSE(b.Identity(b.Call("fbi", {n})[0], "result").valid());
  EXPECT_THAT(std::string(b.Build().status().message()), HasSubstr("Call of undeclared function 'fbi'"));
}

TEST(GraphBuilderAfterError, CallGivesOneOutputPerResultOfTheFunction) {
  GraphBuilder b;
  DefinePairThenFail(b);
  ExpectAllInvalid(b, b.Call("pair", {b.Placeholder("x", kInt)}), 2);
  ExpectAllInvalid(b, b.Call("unknown", {}), 1);
  // Outputs() of one of them: the Invoke's two outputs.
  Outs c = b.Call("pair", {});
  ASSERT_EQ(c.size(), 2u);
  ExpectAllInvalid(b, b.Outputs(c[1]), 2);
}

TEST(GraphBuilderAfterError, CallOfADeclaredFunctionCountsItsResults) {
  GraphBuilder b;
  ASSERT_TRUE(b.Declare({"three", {{"x", kInt}}, {{"a", kInt}, {"b", kInt}, {"c", kInt}}}).ok());
  // The first error is the call's own: an invalid argument.
  ExpectAllInvalid(b, b.Call("three", {Output{}}), 3);
  EXPECT_THAT(std::string(b.status().message()), HasSubstr("the Output is invalid"));
}

TEST(GraphBuilderAfterError, CallWithAWrongArgumentCountCountsTheFunctionsResults) {
  GraphBuilder b;
  ASSERT_TRUE(b.Declare({"three", {{"x", kInt}}, {{"a", kInt}, {"b", kInt}, {"c", kInt}}}).ok());
  ExpectAllInvalid(b, b.Call("three", {}), 3);
  EXPECT_THAT(std::string(b.status().message()), HasSubstr("calls 'three' with 0 arguments; it takes 1"));
}

TEST(GraphBuilderAfterError, CondGivesOneOutputPerBranchResult) {
  GraphBuilder b;
  Output x = b.Placeholder("x", kInt);
  b.Op("Frobnicate", {});
  int then_runs = 0;
  Outs r = b.Cond(b.Less(x, x),
                  [&] {
                    ++then_runs;
                    return Outs{x, x, b.Add(x, x)};
                  },
                  [&] { return Outs{x, x, x}; });
  ASSERT_NO_FATAL_FAILURE(ExpectAllInvalid(b, r, 3));
  EXPECT_EQ(then_runs, 1);
  // Each is a Merge's value: Outputs() gives (value, index).
  ExpectAllInvalid(b, b.Outputs(r[2]), 2);
}

TEST(GraphBuilderAfterError, CondWithAnInvalidPredicateIsAnErrorAndCountsTheBranches) {
  GraphBuilder b;
  Output x = b.Placeholder("x", kInt);
  Outs r = b.Cond(Output{}, [&] { return Outs{x, x}; }, [&] { return Outs{x, x}; });
  ExpectAllInvalid(b, r, 2);
  EXPECT_EQ(b.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(b.status().message()), HasSubstr("the Output is invalid"));
}

TEST(GraphBuilderAfterError, CondThatFailsInsideABranch) {
  GraphBuilder b;
  Output x = b.Placeholder("x", kInt);
  int else_runs = 0;
  Outs r = b.Cond(b.Less(x, x), [&] { return Outs{b.Add(x, b.Const<float>(1.0f)), x}; },
                  [&] {
                    ++else_runs;
                    return Outs{x, x};
                  });
  ExpectAllInvalid(b, r, 2);
  EXPECT_EQ(else_runs, 1);  // run once, as a no-op, to count its results
  EXPECT_THAT(std::string(b.status().message()), HasSubstr("dtype mismatch"));
}

TEST(GraphBuilderAfterError, CondWithMismatchedBranchesGivesTheLongerCount) {
  GraphBuilder b;
  Output x = b.Placeholder("x", kInt);
  ExpectAllInvalid(b, b.Cond(b.Less(x, x), [&] { return Outs{x}; }, [&] { return Outs{x, x}; }), 2);
  GraphBuilder c;
  Output y = c.Placeholder("y", kInt);
  ExpectAllInvalid(c, c.Cond(y, [&] { return Outs{y, y}; }, [&] { return Outs{y, y}; }), 2);
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("Cond predicate 'y' must be bool"));
}

TEST(GraphBuilderAfterError, WhileGivesOneOutputPerLoopVariable) {
  GraphBuilder b;
  Output n = b.Placeholder("n", kInt);
  b.Op("Frobnicate", {});
  Outs r = b.While([&](const Outs& v) { return b.Less(v[0], n); }, [&](const Outs& v) { return v; },
                   {n, n, n});
  ASSERT_NO_FATAL_FAILURE(ExpectAllInvalid(b, r, 3));
  ExpectAllInvalid(b, b.Outputs(r[2]), 1);  // an Exit's one output
}

TEST(GraphBuilderAfterError, WhileErrorsOfItsOwnGiveOneOutputPerLoopVariable) {
  {
    GraphBuilder b;
    Output n = b.Placeholder("n", kInt);
    ExpectAllInvalid(b, b.While([&](const Outs& v) { return b.Less(v[0], n); }, [&](const Outs& v) { return v; },
                                {n, Output{}}),
                     2);
    EXPECT_THAT(std::string(b.status().message()), HasSubstr("the Output is invalid"));
  }
  {
    GraphBuilder b;
    Output n = b.Placeholder("n", kInt);
    ExpectAllInvalid(b, b.While([&](const Outs& v) { return v[0]; }, [&](const Outs& v) { return v; }, {n, n}), 2);
    EXPECT_THAT(std::string(b.status().message()), HasSubstr("While condition must be bool"));
  }
  {
    GraphBuilder b;
    Output n = b.Placeholder("n", kInt);
    ExpectAllInvalid(b, b.While([&](const Outs& v) { return b.Less(v[0], n); },
                                [&](const Outs& v) { return Outs{v[0]}; }, {n, n}),
                     2);
    EXPECT_THAT(std::string(b.status().message()), HasSubstr("While body returns 1 values for 2 loop variables"));
  }
  {
    GraphBuilder b;
    ExpectAllInvalid(b, b.While([](const Outs&) { return Output{}; }, [](const Outs& v) { return v; }, {}), 1);
    EXPECT_THAT(std::string(b.status().message()), HasSubstr("While needs at least one loop variable"));
  }
}

TEST(GraphBuilderAfterError, OutputsOfAFailedOpCountsItsOutputs) {
  GraphBuilder b;
  Output x = b.Placeholder("x", kInt);
  b.Op("Frobnicate", {});
  // The idiom of tests/runtime/dead_branches_test.cc: Outputs(Switch)[1].
  ExpectAllInvalid(b, b.Outputs(b.Op("Switch", {x, b.Const<bool>(true)})), 2);
  ExpectAllInvalid(b, b.Outputs(b.Op("Merge", {x, x}, {{"T", kInt}})), 2);
  ExpectAllInvalid(b, b.Outputs(b.Op("ConcatGrad", {x, x, x, x}, {{"axis", int64_t{0}}})), 3);
  ExpectAllInvalid(b, b.Outputs(b.Add(x, x)), 1);
  ExpectAllInvalid(b, b.Outputs(Output{}), 1);
  ExpectAllInvalid(b, b.SoftmaxCrossEntropy(x, x), 2);
}

TEST(GraphBuilderAfterError, FailedMultiOutputOpsCountTheirOutputs) {
  {
    // A Switch on a non-bool predicate fails itself.
    GraphBuilder b;
    Output x = b.Placeholder("x", kInt);
    ExpectAllInvalid(b, b.Outputs(b.Op("Switch", {x, x})), 2);
    EXPECT_THAT(std::string(b.status().message()), HasSubstr("predicate (input 1) must be bool"));
  }
  {
    // So does a Switch with one input: the count is still the op's.
    GraphBuilder b;
    Output x = b.Placeholder("x", kInt);
    ExpectAllInvalid(b, b.Outputs(b.Op("Switch", {x})), 2);
    EXPECT_THAT(std::string(b.status().message()), HasSubstr("wrong number of data inputs"));
  }
  {
    GraphBuilder b;
    Output x = b.Placeholder("x", kInt);
    ExpectAllInvalid(b, b.SoftmaxCrossEntropy(x, x), 2);
    EXPECT_THAT(std::string(b.status().message()), HasSubstr("expects float inputs"));
  }
}

// Outputs that are not this builder's, or name no node or port of it, are
// errors of the call they are given to, never an out-of-bounds access.
TEST(GraphBuilderAfterError, ForgedAndForeignOutputsAreErrors) {
  GraphBuilder other;
  const Output foreign = other.Placeholder("y", kInt);
  auto forged = [](GraphBuilder& b) {
    return std::vector<std::pair<Output, std::string>>{
        {Output{}, "the Output is invalid"},
        {Output{&b, 1000, 0}, "the Output is invalid"},
        {Output{&b, -1, 0}, "the Output is invalid"},
        {Output{&b, 0, 7}, "output 7 of node 'x' (Placeholder), which has 1 outputs"},
        {Output{&b, 0, -1}, "output -1 of node 'x' (Placeholder), which has 1 outputs"},
    };
  };
  const std::vector<std::function<void(GraphBuilder&, Output)>> uses = {
      [](GraphBuilder& b, Output o) { EXPECT_FALSE(b.Identity(o).valid()); },
      [](GraphBuilder& b, Output o) { ExpectAllInvalid(b, b.SoftmaxCrossEntropy(o, o), 2); },
      [](GraphBuilder& b, Output o) { EXPECT_FALSE(b.Read(o).valid()); },
      [](GraphBuilder& b, Output o) { EXPECT_FALSE(b.Assign(o, o).valid()); },
  };
  for (size_t u = 0; u < uses.size(); ++u) {
    SCOPED_TRACE(u);
    {
      GraphBuilder b;
      b.Placeholder("x", kInt);
      uses[u](b, foreign);
      EXPECT_THAT(std::string(b.status().message()), HasSubstr("comes from another builder"));
    }
    for (size_t k = 0; k < forged(other).size(); ++k) {
      GraphBuilder b;
      b.Placeholder("x", kInt);
      const auto [o, message] = forged(b)[k];
      SCOPED_TRACE(message);
      EXPECT_EQ(b.dtype(o), DType::kInvalid);
      EXPECT_EQ(b.Name(o), "<invalid>");
      EXPECT_LE(b.Outputs(o).size(), 1u);
      uses[u](b, o);
      EXPECT_EQ(b.status().code(), absl::StatusCode::kInvalidArgument);
      EXPECT_THAT(std::string(b.status().message()), HasSubstr(message));
    }
  }
}

TEST(GraphBuilderAfterError, OutputsOfAnotherBuildersNodeAreInvalid) {
  GraphBuilder other;
  Output sw = other.Op("Switch", {other.Placeholder("x", kInt), other.Const<bool>(true)});
  GraphBuilder b;
  ExpectAllInvalid(b, b.Outputs(sw), 1);
  EXPECT_TRUE(b.status().ok());  // a query; using the Output is the error
}

TEST(GraphBuilderAfterError, ControlEdgesAndDevicesOfInvalidOutputsAreErrors) {
  {
    GraphBuilder b;
    Output x = b.Placeholder("x", kInt);
    b.AddControlInput(x, Output{&b, 1000, 0});
    EXPECT_THAT(std::string(b.status().message()), HasSubstr("AddControlInput: src: the Output is invalid"));
  }
  {
    GraphBuilder b;
    Output x = b.Placeholder("x", kInt);
    b.AddControlInput(Output{}, x);
    EXPECT_THAT(std::string(b.status().message()), HasSubstr("AddControlInput: dst: the Output is invalid"));
  }
  {
    GraphBuilder b;
    b.SetDevice(Output{}, "cpu");
    EXPECT_THAT(std::string(b.status().message()), HasSubstr("SetDevice: the Output is invalid"));
  }
  {
    // A node without outputs is still a control source and a target, not a
    // data input.
    GraphBuilder b;
    Output x = b.Placeholder("x", kInt);
    Output noop = b.Op("NoOp", {}, {}, "noop");
    b.AddControlInput(noop, x);
    b.SetDevice(noop, "cpu");
    EXPECT_EQ(b.Name(noop), "noop");
    EXPECT_TRUE(b.status().ok()) << b.status();
    EXPECT_FALSE(b.Identity(noop).valid());
    EXPECT_THAT(std::string(b.status().message()), HasSubstr("output 0 of node 'noop' (NoOp), which has 0 outputs"));
  }
}

}  // namespace
}  // namespace tdf
