// TensorFlow 1.x control flow and functions in the forms TensorFlow writes:
// tf.while_loop (Enter/Merge/Switch/LoopCond/NextIteration/Exit, loop
// invariants as constant Enters, constants tied into the frame by control
// inputs), nested loops, tf.cond (Switch/Merge with pred_id and switch_t),
// conds inside loops, and a FunctionDef library called by name and through
// PartitionedCall, including a recursive function.
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tf_test_util.h"

namespace tdf {
namespace {

using ::testing::HasSubstr;


std::string Attr(const std::string& key, const std::string& value) {
  return "attr { key: \"" + key + "\" value { " + value + " } } ";
}
std::string T(const std::string& dtype) { return Attr("T", "type: " + dtype); }
std::string Node(const std::string& name, const std::string& op, const std::vector<std::string>& inputs,
                 const std::string& attrs = "") {
  std::string s = "node { name: \"" + name + "\" op: \"" + op + "\" ";
  for (const std::string& in : inputs) s += "input: \"" + in + "\" ";
  return s + attrs + "}\n";
}
std::string IntConst(const std::string& name, int v, const std::vector<std::string>& control = {}) {
  return Node(name, "Const", control,
              Attr("dtype", "type: DT_INT32") +
                  Attr("value", "tensor { dtype: DT_INT32 tensor_shape { } int_val: " + std::to_string(v) + " }"));
}
std::string Enter(const std::string& name, const std::string& input, const std::string& frame, bool constant) {
  return Node(name, "Enter", {input},
              T("DT_INT32") + Attr("frame_name", "s: \"" + frame + "\"") +
                  Attr("is_constant", constant ? "b: true" : "b: false") + Attr("parallel_iterations", "i: 10"));
}
std::string IntPlaceholder(const std::string& name) {
  return Node(name, "Placeholder", {}, Attr("dtype", "type: DT_INT32") + Attr("shape", "shape { }"));
}
std::string I32(const std::string& name, const std::string& op, const std::vector<std::string>& in) {
  return Node(name, op, in, T("DT_INT32"));
}

// One loop variable `v` of loop `w` (prefix), as tf.while_loop writes it:
// Enter -> Merge(Enter, NextIteration) -> Switch(Merge, LoopCond) ->
// Identity (body) and Exit.
std::string LoopVar(const std::string& w, const std::string& v, const std::string& init, const std::string& frame,
                    const std::string& next) {
  return Enter(w + "/Enter_" + v, init, frame, false) +
         Node(w + "/Merge_" + v, "Merge", {w + "/Enter_" + v, w + "/NextIteration_" + v},
              T("DT_INT32") + Attr("N", "i: 2")) +
         Node(w + "/Switch_" + v, "Switch", {w + "/Merge_" + v, w + "/LoopCond"},
              T("DT_INT32") + Attr("_class", "list { s: \"loc:@" + w + "/Merge_" + v + "\" }")) +
         I32(w + "/Identity_" + v, "Identity", {w + "/Switch_" + v + ":1"}) +
         I32(w + "/NextIteration_" + v, "NextIteration", {next}) + I32(w + "/Exit_" + v, "Exit", {w + "/Switch_" + v});
}

TEST(TfImportControlFlow, WhileLoopWithInvariants) {
  // i, acc = 0, 0; while i < n: acc += i * k; i += 1   (n and k invariants)
  const std::string f = "while/while_context";
  const std::string graph =
      IntPlaceholder("n") + IntPlaceholder("k") + IntConst("zero", 0) +
      LoopVar("while", "i", "zero", f, "while/add_1") + LoopVar("while", "acc", "zero", f, "while/add") +
      Enter("while/Less/Enter", "n", f, true) + I32("while/Less", "Less", {"while/Merge_i", "while/Less/Enter"}) +
      Node("while/LoopCond", "LoopCond", {"while/Less"}) + Enter("while/mul/Enter", "k", f, true) +
      I32("while/mul", "Mul", {"while/Identity_i", "while/mul/Enter"}) +
      I32("while/add", "AddV2", {"while/Identity_acc", "while/mul"}) +
      IntConst("while/add_1/y", 1, {"^while/Identity_i"}) +
      I32("while/add_1", "AddV2", {"while/Identity_i", "while/add_1/y"}) + "versions { producer: 27 }";
  absl::StatusOr<Graph> g = ImportTensorFlowGraph(graph);
  ASSERT_TRUE(g.ok()) << g.status();
  for (int n : {0, 1, 10, 100}) {
    const int k = 3;
    int acc = 0;
    for (int i = 0; i < n; ++i) acc += i * k;
    absl::StatusOr<std::vector<Tensor>> out =
        testing_tf::Run(*g, {{"n", Tensor::Scalar<int32_t>(n)}, {"k", Tensor::Scalar<int32_t>(k)}}, {"while/Exit_acc", "while/Exit_i"});
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ((*out)[0].scalar<int32_t>(), acc) << "n=" << n;
    EXPECT_EQ((*out)[1].scalar<int32_t>(), n);
  }
}

// tf.cond(pred, lambda: a + b, lambda: a - 1) in v1 form, inside whatever
// frame `a`, `b` and `pred` live in; the result is `c/Merge`.
std::string CondAddOrDecrement(const std::string& c, const std::string& pred, const std::string& a,
                               const std::string& b) {
  return Node(c + "/Switch", "Switch", {pred, pred}, T("DT_BOOL")) +
         Node(c + "/switch_t", "Identity", {c + "/Switch:1"}, T("DT_BOOL")) +
         Node(c + "/switch_f", "Identity", {c + "/Switch"}, T("DT_BOOL")) +
         Node(c + "/pred_id", "Identity", {pred}, T("DT_BOOL")) +
         I32(c + "/add/Switch", "Switch", {a, c + "/pred_id"}) + I32(c + "/add/Switch_1", "Switch", {b, c + "/pred_id"}) +
         I32(c + "/add", "AddV2", {c + "/add/Switch:1", c + "/add/Switch_1:1"}) +
         I32(c + "/sub/Switch", "Switch", {a, c + "/pred_id"}) + IntConst(c + "/sub/y", 1, {"^" + c + "/switch_f"}) +
         I32(c + "/sub", "Sub", {c + "/sub/Switch", c + "/sub/y"}) +
         Node(c + "/Merge", "Merge", {c + "/sub", c + "/add"}, T("DT_INT32") + Attr("N", "i: 2"));
}

TEST(TfImportControlFlow, CondAtTopLevel) {
  const std::string graph = IntPlaceholder("a") + IntPlaceholder("b") +
                            Node("p", "Placeholder", {}, Attr("dtype", "type: DT_BOOL")) +
                            CondAddOrDecrement("cond", "p", "a", "b") + "versions { producer: 27 }";
  absl::StatusOr<Graph> g = ImportTensorFlowGraph(graph);
  ASSERT_TRUE(g.ok()) << g.status();
  for (bool p : {true, false}) {
    absl::StatusOr<std::vector<Tensor>> out =
        testing_tf::Run(*g, {{"a", Tensor::Scalar<int32_t>(5)}, {"b", Tensor::Scalar<int32_t>(7)}, {"p", Tensor::Scalar<bool>(p)}},
            {"cond/Merge"});
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ((*out)[0].scalar<int32_t>(), p ? 5 + 7 : 5 - 1);
  }
}

TEST(TfImportControlFlow, NestedLoopsWithACondInside) {
  // total = 0
  // for i in range(n):                 (outer loop "while")
  //   t = total
  //   for j in range(i):               (inner loop "while/while", i invariant)
  //     t = t + j if j % 2 == 0 else t - 1
  //   total = t
  const std::string outer = "while/while_context";
  const std::string inner = "while/while/while_context";
  const std::string w = "while/while";
  const std::string graph =
      IntPlaceholder("n") + IntConst("zero", 0) +
      // outer loop
      LoopVar("while", "i", "zero", outer, "while/i_next") + LoopVar("while", "total", "zero", outer, w + "/Exit_t") +
      Enter("while/Less/Enter", "n", outer, true) + I32("while/Less", "Less", {"while/Merge_i", "while/Less/Enter"}) +
      Node("while/LoopCond", "LoopCond", {"while/Less"}) + IntConst("while/one", 1, {"^while/Identity_i"}) +
      I32("while/i_next", "AddV2", {"while/Identity_i", "while/one"}) +
      IntConst("while/zero_j", 0, {"^while/Identity_i"}) +
      // inner loop, in the outer body
      LoopVar(w, "j", "while/zero_j", inner, w + "/j_next") + LoopVar(w, "t", "while/Identity_total", inner, w + "/cond/Merge") +
      Enter(w + "/Less/Enter", "while/Identity_i", inner, true) +
      I32(w + "/Less", "Less", {w + "/Merge_j", w + "/Less/Enter"}) + Node(w + "/LoopCond", "LoopCond", {w + "/Less"}) +
      IntConst(w + "/one", 1, {"^" + w + "/Identity_j"}) + I32(w + "/j_next", "AddV2", {w + "/Identity_j", w + "/one"}) +
      IntConst(w + "/two", 2, {"^" + w + "/Identity_j"}) + IntConst(w + "/zero", 0, {"^" + w + "/Identity_j"}) +
      I32(w + "/mod", "FloorMod", {w + "/Identity_j", w + "/two"}) + I32(w + "/even", "Equal", {w + "/mod", w + "/zero"}) +
      CondAddOrDecrement(w + "/cond", w + "/even", w + "/Identity_t", w + "/Identity_j") + "versions { producer: 27 }";
  absl::StatusOr<Graph> g = ImportTensorFlowGraph(graph);
  ASSERT_TRUE(g.ok()) << g.status();
  for (int n : {0, 1, 2, 5, 12}) {
    int total = 0;
    for (int i = 0; i < n; ++i) {
      int t = total;
      for (int j = 0; j < i; ++j) t = j % 2 == 0 ? t + j : t - 1;
      total = t;
    }
    absl::StatusOr<std::vector<Tensor>> out = testing_tf::Run(*g, {{"n", Tensor::Scalar<int32_t>(n)}}, {"while/Exit_total"});
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ((*out)[0].scalar<int32_t>(), total) << "n=" << n;
  }
}

// scale_add(a, b) = (2a + b, a * b); fact(n) = n <= 1 ? 1 : n * fact(n - 1),
// in FunctionDef form: signature, node_def inputs "node:output_arg:index",
// ret map.
constexpr char kLibrary[] = R"pb(
library {
  function {
    signature {
      name: "scale_add"
      input_arg { name: "a" type: DT_FLOAT }
      input_arg { name: "b" type: DT_FLOAT }
      output_arg { name: "sum" type: DT_FLOAT }
      output_arg { name: "prod" type: DT_FLOAT }
    }
    node_def {
      name: "two" op: "Const"
      attr { key: "dtype" value { type: DT_FLOAT } }
      attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape { } float_val: 2 } } }
    }
    node_def { name: "mul" op: "Mul" input: "a" input: "two:output:0" attr { key: "T" value { type: DT_FLOAT } } }
    node_def { name: "add" op: "AddV2" input: "mul:z:0" input: "b" attr { key: "T" value { type: DT_FLOAT } } }
    node_def { name: "ab" op: "Mul" input: "a" input: "b" attr { key: "T" value { type: DT_FLOAT } } }
    ret { key: "sum" value: "add:z:0" }
    ret { key: "prod" value: "ab:z:0" }
  }
  function {
    signature {
      name: "fact"
      input_arg { name: "n" type: DT_INT64 }
      output_arg { name: "y" type: DT_INT64 }
    }
    node_def {
      name: "one" op: "Const"
      attr { key: "dtype" value { type: DT_INT64 } }
      attr { key: "value" value { tensor { dtype: DT_INT64 tensor_shape { } int64_val: 1 } } }
    }
    node_def { name: "le" op: "LessEqual" input: "n" input: "one:output:0" attr { key: "T" value { type: DT_INT64 } } }
    node_def { name: "sw" op: "Switch" input: "n" input: "le:z:0" attr { key: "T" value { type: DT_INT64 } } }
    node_def { name: "sw_t" op: "Identity" input: "sw:output_true:0" attr { key: "T" value { type: DT_INT64 } } }
    node_def {
      name: "base" op: "Const" input: "^sw_t"
      attr { key: "dtype" value { type: DT_INT64 } }
      attr { key: "value" value { tensor { dtype: DT_INT64 tensor_shape { } int64_val: 1 } } }
    }
    node_def { name: "nm1" op: "Sub" input: "sw:output_false:0" input: "one:output:0" attr { key: "T" value { type: DT_INT64 } } }
    node_def { name: "rec" op: "fact" input: "nm1:z:0" }
    node_def { name: "prod" op: "Mul" input: "sw:output_false:0" input: "rec:y:0" attr { key: "T" value { type: DT_INT64 } } }
    node_def { name: "m" op: "Merge" input: "prod:z:0" input: "base:output:0"
               attr { key: "T" value { type: DT_INT64 } } attr { key: "N" value { i: 2 } } }
    ret { key: "y" value: "m:output:0" }
  }
}
versions { producer: 27 min_consumer: 12 }
)pb";

TEST(TfImportControlFlow, FunctionLibraryCalledByNameAndThroughPartitionedCall) {
  const std::string graph =
      Node("x", "Placeholder", {}, Attr("dtype", "type: DT_FLOAT")) +
      Node("y", "Placeholder", {}, Attr("dtype", "type: DT_FLOAT")) + Node("call", "scale_add", {"x", "y"}) +
      Node("pcall", "PartitionedCall", {"x", "y"},
           Attr("f", "func { name: \"scale_add\" }") + Attr("Tin", "list { type: DT_FLOAT type: DT_FLOAT }") +
               Attr("Tout", "list { type: DT_FLOAT type: DT_FLOAT }")) +
      Node("n", "Placeholder", {}, Attr("dtype", "type: DT_INT64")) + Node("f", "fact", {"n"}) + kLibrary;
  absl::StatusOr<Graph> g = ImportTensorFlowGraph(graph);
  ASSERT_TRUE(g.ok()) << g.status();
  absl::StatusOr<std::vector<Tensor>> out =
      testing_tf::Run(*g, {{"x", Tensor::Scalar<float>(1.5f)}, {"y", Tensor::Scalar<float>(-4.0f)}, {"n", Tensor::Scalar<int64_t>(10)}},
          {"call", "call:1", "pcall", "pcall:1", "f"});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].scalar<float>(), 2 * 1.5f - 4.0f);
  EXPECT_EQ((*out)[1].scalar<float>(), 1.5f * -4.0f);
  EXPECT_EQ((*out)[2].scalar<float>(), 2 * 1.5f - 4.0f);
  EXPECT_EQ((*out)[3].scalar<float>(), 1.5f * -4.0f);
  int64_t fact = 1;
  for (int64_t i = 2; i <= 10; ++i) fact *= i;
  EXPECT_EQ((*out)[4].scalar<int64_t>(), fact);
}

// Nodes written in the main graph's form as a FunctionDef body: node_def,
// and every input naming an output arg ("sw:output_true:0", "add:z:0"),
// as TensorFlow writes function bodies.
std::string ToFunctionBody(std::string nodes, const std::set<std::string>& args) {
  std::string out;
  std::smatch m;
  const std::regex input("input: \"([^\"^:]+)(:([0-9]+))?\"");
  std::string::const_iterator from = nodes.cbegin();
  while (std::regex_search(from, nodes.cend(), m, input)) {
    out.append(from, m[0].first);
    const std::string node = m[1].str();
    const int port = m[3].matched ? std::stoi(m[3].str()) : 0;
    std::string arg = "z";  // any name: single-output ops are indexed by port
    if (nodes.find("name: \"" + node + "\" op: \"Switch\"") != std::string::npos) {
      arg = port == 1 ? "output_true" : "output_false";
    } else if (nodes.find("name: \"" + node + "\" op: \"Merge\"") != std::string::npos) {
      arg = port == 1 ? "value_index" : "output";
    }
    const bool single_arg = arg == "z";
    out += args.count(node) > 0 ? "input: \"" + node + "\""
                                : "input: \"" + node + ":" + arg + ":" + std::to_string(single_arg ? port : 0) + "\"";
    from = m[0].second;
  }
  out.append(from, nodes.cend());
  for (size_t pos = out.find("node {"); pos != std::string::npos; pos = out.find("node {", pos)) out.replace(pos, 6, "node_def {");
  return out;
}

TEST(TfImportControlFlow, WhileLoopInsideAFunction) {
  // triangle(n) = sum of i for i < n, a tf.while_loop in a Defun's body;
  // called twice from the main graph.
  const std::string f = "while/while_context";
  std::string body = IntConst("zero", 0) + LoopVar("while", "i", "zero", f, "while/add_1") +
                     LoopVar("while", "acc", "zero", f, "while/add") + Enter("while/Less/Enter", "n", f, true) +
                     I32("while/Less", "Less", {"while/Merge_i", "while/Less/Enter"}) +
                     Node("while/LoopCond", "LoopCond", {"while/Less"}) +
                     I32("while/add", "AddV2", {"while/Identity_acc", "while/Identity_i"}) +
                     IntConst("while/one", 1, {"^while/Identity_i"}) +
                     I32("while/add_1", "AddV2", {"while/Identity_i", "while/one"});
  body = ToFunctionBody(body, {"n"});
  const std::string graph = IntPlaceholder("a") + IntPlaceholder("b") + Node("ta", "triangle", {"a"}) +
                            Node("tb", "triangle", {"b"}) + I32("sum", "AddV2", {"ta", "tb"}) +
                            "library { function { signature { name: \"triangle\" "
                            "input_arg { name: \"n\" type: DT_INT32 } output_arg { name: \"t\" type: DT_INT32 } } " +
                            body + " ret { key: \"t\" value: \"while/Exit_acc:output:0\" } } }";
  absl::StatusOr<Graph> g = ImportTensorFlowGraph(graph);
  ASSERT_TRUE(g.ok()) << g.status();
  absl::StatusOr<std::vector<Tensor>> out =
      testing_tf::Run(*g, {{"a", Tensor::Scalar<int32_t>(10)}, {"b", Tensor::Scalar<int32_t>(7)}}, {"sum"});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].scalar<int32_t>(), 10 * 9 / 2 + 7 * 6 / 2);
}

TEST(TfImportControlFlow, PolymorphicFunctionIsRefusedByName) {
  const std::string graph = R"pb(
    library {
      function {
        signature {
          name: "id" input_arg { name: "a" type_attr: "T" } output_arg { name: "b" type_attr: "T" }
          attr { name: "T" type: "type" }
        }
        ret { key: "b" value: "a" }
      }
    }
  )pb";
  absl::StatusOr<Graph> g = ImportTensorFlowGraph(graph);
  ASSERT_FALSE(g.ok());
  EXPECT_THAT(g.status().message(), HasSubstr("function 'id'"));
  EXPECT_THAT(g.status().message(), HasSubstr("polymorphic"));
}

TEST(TfImportControlFlow, BadOutputNameInAFunctionBodyNamesTheNode) {
  const std::string graph = R"pb(
    library {
      function {
        signature { name: "f" input_arg { name: "a" type: DT_INT32 } output_arg { name: "b" type: DT_INT32 } }
        node_def { name: "sw" op: "Switch" input: "a" input: "a" attr { key: "T" value { type: DT_INT32 } } }
        node_def { name: "i" op: "Identity" input: "sw:output_maybe:0" }
        ret { key: "b" value: "i:output:0" }
      }
    }
  )pb";
  absl::StatusOr<Graph> g = ImportTensorFlowGraph(graph);
  ASSERT_FALSE(g.ok());
  EXPECT_THAT(g.status().message(), HasSubstr("function 'f'"));
  EXPECT_THAT(g.status().message(), HasSubstr("node 'i' (Identity)"));
  EXPECT_THAT(g.status().message(), HasSubstr("output_maybe"));
}

}  // namespace
}  // namespace tdf
