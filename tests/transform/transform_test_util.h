// Helpers for the transform tests: lookups, and CheckStaticShape, which
// checks every promise of tdf/transform.h about StaticizeRecursion's output
// against its input, computing the expected shape independently of the pass.
#ifndef TDF_TESTS_TRANSFORM_TRANSFORM_TEST_UTIL_H_
#define TDF_TESTS_TRANSFORM_TRANSFORM_TEST_UTIL_H_

#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "tdf/graph.h"

namespace tdf {
namespace testutil {

inline const NodeDef& Node(const Graph& g, const std::string& name) {
  static const NodeDef* const kMissing = new NodeDef{"<missing>", "<missing>", {}, {}, ""};
  const NodeDef* n = g.FindNode(name);
  EXPECT_NE(n, nullptr) << "no node '" << name << "'";
  return n != nullptr ? *n : *kMissing;
}

inline std::vector<const NodeDef*> NodesWithOp(const Graph& g, const std::string& op) {
  std::vector<const NodeDef*> out;
  for (const NodeDef& n : g.node)
    if (n.op == op) out.push_back(&n);
  return out;
}

inline std::string Callee(const NodeDef& invoke) { return invoke.GetString("function").value_or(""); }

// Functions reachable from the main graph, alphabetically.
inline std::set<std::string> ReachableFunctions(const Graph& g) {
  std::set<std::string> seen;
  std::vector<std::string> work;
  auto visit = [&](const std::vector<NodeDef>& nodes) {
    for (const NodeDef& n : nodes)
      if (n.op == "Invoke" && seen.insert(Callee(n)).second) work.push_back(Callee(n));
  };
  visit(g.node);
  while (!work.empty()) {
    std::string f = work.back();
    work.pop_back();
    visit(g.library.Find(f)->node);
  }
  return seen;
}

// The output names ("S" or "f/S") of the call sites of `fn`, in the site
// order tdf/transform.h specifies.
inline std::vector<std::string> CallSitesOf(const Graph& g, const std::string& fn) {
  std::vector<std::string> sites;
  for (const NodeDef& n : g.node)
    if (n.op == "Invoke" && Callee(n) == fn) sites.push_back(n.name);
  for (const std::string& f : ReachableFunctions(g))
    for (const NodeDef& n : g.library.Find(f)->node)
      if (n.op == "Invoke" && Callee(n) == fn) sites.push_back(absl::StrCat(f, "/", n.name));
  return sites;
}

// Checks the whole contract of StaticizeRecursion(in) == out.
inline void CheckStaticShape(const Graph& in, const Graph& out) {
  EXPECT_TRUE(out.library.empty());
  std::set<std::string> names;
  for (const NodeDef& n : out.node) {
    EXPECT_NE(n.op, "Invoke") << n.name;
    EXPECT_TRUE(names.insert(n.name).second) << "duplicate node " << n.name;
  }
  // Every input names a node of the output.
  for (const NodeDef& n : out.node) {
    for (const std::string& input : n.input) {
      absl::StatusOr<InputRef> ref = InputRef::Parse(input);
      ASSERT_TRUE(ref.ok()) << ref.status();
      EXPECT_EQ(names.count(ref->node), 1u) << n.name << " reads missing " << input;
    }
  }
  // Main-graph nodes other than Invokes keep their names and ops.
  for (const NodeDef& n : in.node) {
    if (n.op == "Invoke") continue;
    const NodeDef* o = out.FindNode(n.name);
    ASSERT_NE(o, nullptr) << n.name;
    EXPECT_EQ(o->op, n.op);
    EXPECT_EQ(o->FindAttr("_function"), nullptr) << n.name;
  }

  const std::set<std::string> reachable = ReachableFunctions(in);
  // The exact node count at the end rules out extra copies and bodies of
  // unreachable functions.
  size_t expected_nodes = 0;
  for (const NodeDef& n : in.node)
    if (n.op != "Invoke") ++expected_nodes;

  for (const std::string& fname : reachable) {
    SCOPED_TRACE("function " + fname);
    const FunctionDef& f = *in.library.Find(fname);
    const size_t x = f.signature.inputs.size(), y = f.signature.outputs.size();
    const std::vector<std::string> sites = CallSitesOf(in, fname);

    // Each body node appears exactly once, renamed, with its op transformed.
    size_t body_nodes = 0;
    for (const NodeDef& n : f.node) {
      if (n.op == "Invoke") continue;
      ++body_nodes;
      const NodeDef* o = out.FindNode(fname + "/" + n.name);
      ASSERT_NE(o, nullptr) << n.name;
      const std::string want_op = n.op == "Arg" ? "Merge" : n.op == "Retval" ? "Identity" : n.op;
      EXPECT_EQ(o->op, want_op) << o->name;
      // Sourceless body nodes are fired by the invocation.
      if (o->input.empty()) {
        EXPECT_EQ(o->GetString("_function").value_or(""), fname) << o->name;
      } else {
        EXPECT_EQ(o->FindAttr("_function"), nullptr) << o->name;
      }
      if (n.op == "Arg") {
        // One input per site, in site order: S/call_<j>.
        const int64_t j = *n.GetInt("index");
        std::vector<std::string> want;
        for (const std::string& s : sites) want.push_back(absl::StrCat(s, "/call_", j));
        EXPECT_EQ(o->input, want) << o->name;
        EXPECT_EQ(*o->GetType("T"), f.signature.inputs[j].type);
      }
      if (n.op == "Enter") {
        EXPECT_EQ(*o->GetString("frame_name"), fname + "/" + *n.GetString("frame_name"));
      }
    }
    expected_nodes += body_nodes;
    size_t prefixed = 0;
    for (const NodeDef& o : out.node)
      if (absl::StartsWith(o.name, fname + "/") && o.op != "Call" && o.op != "Return") ++prefixed;
    EXPECT_EQ(prefixed, body_nodes) << "body copied more than once, or foreign nodes";

    // Calls and Returns of fname: one per (site, arg) and (site, result),
    // labelled with the site's index.
    std::map<int64_t, std::vector<const NodeDef*>> calls, returns;
    for (const NodeDef& o : out.node) {
      if ((o.op == "Call" || o.op == "Return") && o.GetString("function").value_or("") == fname) {
        (o.op == "Call" ? calls : returns)[*o.GetInt("call_site")].push_back(&o);
      }
    }
    ASSERT_EQ(calls.size(), sites.size());
    ASSERT_EQ(returns.size(), sites.size());
    for (size_t i = 0; i < sites.size(); ++i) {
      SCOPED_TRACE("site " + sites[i]);
      ASSERT_EQ(calls.count(i), 1u);
      ASSERT_EQ(calls[i].size(), x == 0 ? 1u : x);
      ASSERT_EQ(returns[i].size(), y);
      std::vector<std::string> controls;
      for (size_t j = 0; j < calls[i].size(); ++j) {
        const NodeDef& c = *calls[i][j];
        const std::string want = x == 0 ? sites[i] + "/call" : absl::StrCat(sites[i], "/call_", j);
        EXPECT_EQ(c.name, want);
        EXPECT_EQ(*c.GetInt("arg_index"), x == 0 ? -1 : static_cast<int64_t>(j));
        EXPECT_EQ(*c.GetType("T"), x == 0 ? DType::kBool : f.signature.inputs[j].type);
        controls.push_back("^" + c.name);
      }
      for (size_t r = 0; r < y; ++r) {
        const NodeDef& ret = *returns[i][r];
        EXPECT_EQ(ret.name, absl::StrCat(sites[i], "/return_", r));
        EXPECT_EQ(*ret.GetInt("result_index"), static_cast<int64_t>(r));
        EXPECT_EQ(*ret.GetType("T"), f.signature.outputs[r].type);
        ASSERT_FALSE(ret.input.empty());
        EXPECT_EQ(out.FindNode(ret.input[0])->op, "Identity");
        EXPECT_TRUE(absl::StartsWith(ret.input[0], fname + "/"));
        EXPECT_EQ(std::vector<std::string>(ret.input.begin() + 1, ret.input.end()), controls);
      }
      expected_nodes += calls[i].size() + y;
    }
  }
  EXPECT_EQ(out.node.size(), expected_nodes);
}

}  // namespace testutil
}  // namespace tdf

#endif  // TDF_TESTS_TRANSFORM_TRANSFORM_TEST_UTIL_H_
