// The tree-structured application programs (application_programs.h says
// what they are and how they are checked): an arithmetic expression tree
// evaluated by mutual recursion and differentiated, a tail-recursive binary
// search, and a DFS over a general tree that stops at the first match; with
// their native C++ models and checks, shared by
// application_tree_programs_test.cc and application_programs_test.cc.
#ifndef TDF_TESTS_RUNTIME_APPLICATION_TREE_PROGRAMS_H_
#define TDF_TESTS_RUNTIME_APPLICATION_TREE_PROGRAMS_H_

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/application_programs.h"
#include "runtime/exec_test_util.h"
#include "tdf/builder.h"
#include "tdf/session.h"
#include "tdf/tensor.h"

namespace tdf {
namespace application_programs {

// ===========================================================================
// 3. Expression trees: mutual recursion and its gradient

// A tree is a table of rows (op, left, right, leaf): op 0 is a leaf whose
// value is leaves[leaf]; op 1 adds its two children, op 2 multiplies them,
// op 3 is tanh of its left child. Leaves may share a leaf value.
enum ExprOp : int64_t { kLeaf = 0, kPlus = 1, kTimes = 2, kTanh = 3 };

struct ExprTree {
  std::vector<int64_t> table;  // rows of 4
  int64_t num_leaves = 0;
  int64_t rows() const { return static_cast<int64_t>(table.size() / 4); }
  int64_t at(int64_t node, int col) const { return table[static_cast<size_t>(node * 4 + col)]; }
};

inline int64_t GrowExpr(ExprTree& t, std::mt19937& rng, int depth) {
  const int64_t me = t.rows();
  // The row (kLeaf, -1, -1, 0), one value at a time: inserted as one list,
  // GCC 12 warns of an overflow that is not there once this is inlined.
  for (int64_t v : {int64_t{kLeaf}, int64_t{-1}, int64_t{-1}, int64_t{0}}) t.table.push_back(v);
  const int choice = depth <= 0 ? 0 : std::uniform_int_distribution<int>(0, 9)(rng);
  if (choice <= 2) {
    t.table[me * 4 + 3] = std::uniform_int_distribution<int64_t>(0, t.num_leaves - 1)(rng);
  } else if (choice == 3) {
    t.table[me * 4] = kTanh;
    const int64_t l = GrowExpr(t, rng, depth - 1);
    t.table[me * 4 + 1] = l;
  } else {
    t.table[me * 4] = choice <= 6 ? kPlus : kTimes;
    const int64_t l = GrowExpr(t, rng, depth - 1);
    const int64_t r = GrowExpr(t, rng, depth - 1);
    t.table[me * 4 + 1] = l;
    t.table[me * 4 + 2] = r;
  }
  return me;
}

struct ExprCounts {
  int64_t nodes = 0, adds = 0, muls = 0, tanhs = 0;
};

inline double NativeEval(const ExprTree& t, const std::vector<double>& v, int64_t i, ExprCounts* c = nullptr) {
  if (c != nullptr) ++c->nodes;
  switch (t.at(i, 0)) {
    case kLeaf:
      return v[t.at(i, 3)];
    case kTanh:
      if (c != nullptr) ++c->tanhs;
      return std::tanh(NativeEval(t, v, t.at(i, 1), c));
    case kPlus:
      if (c != nullptr) ++c->adds;
      return NativeEval(t, v, t.at(i, 1), c) + NativeEval(t, v, t.at(i, 2), c);
    default:
      if (c != nullptr) ++c->muls;
      return NativeEval(t, v, t.at(i, 1), c) * NativeEval(t, v, t.at(i, 2), c);
  }
}

// Reverse pass: adds d(root)/d(leaves) * adj for the subtree at i.
inline void NativeBackward(const ExprTree& t, const std::vector<double>& v, int64_t i, double adj,
                           std::vector<double>& g) {
  switch (t.at(i, 0)) {
    case kLeaf:
      g[t.at(i, 3)] += adj;
      return;
    case kTanh: {
      const double y = std::tanh(NativeEval(t, v, t.at(i, 1)));
      NativeBackward(t, v, t.at(i, 1), adj * (1 - y * y), g);
      return;
    }
    case kPlus:
      NativeBackward(t, v, t.at(i, 1), adj, g);
      NativeBackward(t, v, t.at(i, 2), adj, g);
      return;
    default: {
      const double l = NativeEval(t, v, t.at(i, 1)), r = NativeEval(t, v, t.at(i, 2));
      NativeBackward(t, v, t.at(i, 1), adj * r, g);
      NativeBackward(t, v, t.at(i, 2), adj * l, g);
      return;
    }
  }
}

// eval_node(i, T, v) = op == leaf ? v[leaf] : op == tanh ? tanh(eval_node(left))
//                    : op == plus ? eval_add(i, T, v) : eval_mul(i, T, v)
// eval_add(i, T, v) = eval_node(left) + eval_node(right); eval_mul likewise.
inline Graph ExprGraph() {
  GraphBuilder b;
  auto sig = [](const std::string& name) {
    return FunctionSignature{name, {{"i", kI64}, {"table", kI64}, {"leaves", kF64}}, {{"value", kF64}}};
  };
  auto field = [](GraphBuilder& f, Output row, int64_t col) { return f.Gather(row, f.Const<int64_t>(col)); };
  // Declared first: eval_node's body calls eval_add and eval_mul, which call it.
  EXPECT_TRUE(b.Declare(sig("eval_add")).ok());
  EXPECT_TRUE(b.Declare(sig("eval_mul")).ok());
  absl::Status st = b.DefineFunction(sig("eval_node"), [&](GraphBuilder& f, const Outs& a) -> Outs {
    const Output i = a[0], table = a[1], leaves = a[2];
    const Output row = f.Gather(table, i);
    const Output op = field(f, row, 0);
    return f.Cond(
        f.Equal(op, f.Const<int64_t>(kLeaf)), [&] { return Outs{f.Gather(leaves, field(f, row, 3))}; },
        [&] {
          return f.Cond(
              f.Equal(op, f.Const<int64_t>(kTanh)),
              [&] { return Outs{f.Tanh(f.Call("eval_node", {field(f, row, 1), table, leaves})[0])}; },
              [&] {
                return f.Cond(
                    f.Equal(op, f.Const<int64_t>(kPlus)), [&] { return f.Call("eval_add", {i, table, leaves}); },
                    [&] { return f.Call("eval_mul", {i, table, leaves}); });
              });
        });
  });
  EXPECT_TRUE(st.ok()) << st;
  for (const char* name : {"eval_add", "eval_mul"}) {
    const bool add = std::string(name) == "eval_add";
    st = b.DefineFunction(sig(name), [&](GraphBuilder& f, const Outs& a) -> Outs {
      const Output row = f.Gather(a[1], a[0]);
      const Output l = f.Call("eval_node", {field(f, row, 1), a[1], a[2]})[0];
      const Output r = f.Call("eval_node", {field(f, row, 2), a[1], a[2]})[0];
      return {add ? f.Add(l, r) : f.Mul(l, r)};
    });
    EXPECT_TRUE(st.ok()) << name << ": " << st;
  }
  b.Identity(b.Call("eval_node", {b.Const<int64_t>(0), b.Placeholder("table", kI64), b.Placeholder("leaves", kF64)})[0],
             "result");
  return Built(b);
}

struct ExprCase {
  ExprTree tree;
  std::vector<double> leaves;
  Feeds feeds() const {
    return {{"table", Matrix<int64_t>(tree.table, tree.rows(), 4)}, {"leaves", Tensor::Vector<double>(leaves)}};
  }
};

inline std::vector<ExprCase> ExprCases() {
  std::vector<ExprCase> cases;
  std::mt19937 rng(7);
  for (int depth : {0, 1, 3, 6, 8}) {
    ExprCase c;
    c.tree.num_leaves = 1 + depth;
    GrowExpr(c.tree, rng, depth);
    std::uniform_real_distribution<double> u(0.4, 1.3);
    for (int64_t k = 0; k < c.tree.num_leaves; ++k) c.leaves.push_back(u(rng));
    cases.push_back(std::move(c));
  }
  return cases;
}

inline void CheckExprEval(Session* s, const ExprCase& ec) {
  SCOPED_TRACE(absl::StrCat("tree with ", ec.tree.rows(), " nodes"));
  ExprCounts c;
  const double want = NativeEval(ec.tree, ec.leaves, 0, &c);
  ASSERT_EQ(c.nodes, ec.tree.rows());  // every node is reached once
  Ran r = RunTwice(s, ec.feeds(), {"result"});
  ASSERT_EQ(r.out.size(), 1u);
  // The same operations in the same order: equal to the last bit.
  EXPECT_EQ(r.out[0].scalar<double>(), want);
  EXPECT_EQ(r.stats.frames_created, 1 + c.nodes + c.adds + c.muls);
  EXPECT_EQ(OpCount(r.stats, "Tanh").first, c.tanhs);
  if (s->options().mode == ExecutionMode::kDynamic) EXPECT_EQ(r.stats.instantiations, c.nodes + c.adds + c.muls);
}

// `s` runs the graph with gradients (fetch `grad`), `forward` the graph
// without them.
inline void CheckExprGradient(Session* s, Session* forward, const std::string& grad, const ExprCase& ec) {
  SCOPED_TRACE(absl::StrCat("tree with ", ec.tree.rows(), " nodes"));
  ExprCounts c;
  const double want = NativeEval(ec.tree, ec.leaves, 0, &c);
  std::vector<double> want_grad(ec.leaves.size(), 0.0);
  NativeBackward(ec.tree, ec.leaves, 0, 1.0, want_grad);
  Ran r = RunTwice(s, ec.feeds(), {"result", grad});
  ASSERT_EQ(r.out.size(), 2u);
  EXPECT_EQ(r.out[0].scalar<double>(), want);
  const std::vector<double> got = Values<double>(r.out[1]);
  ASSERT_EQ(got.size(), ec.leaves.size());
  for (size_t k = 0; k < got.size(); ++k) {
    EXPECT_NEAR(got[k], want_grad[k], 1e-12 * (1 + std::abs(want_grad[k]))) << "leaf " << k;
    // Central differences, on the native evaluation.
    std::vector<double> up = ec.leaves, down = ec.leaves;
    const double h = 1e-6;
    up[k] += h;
    down[k] -= h;
    const double fd = (NativeEval(ec.tree, up, 0) - NativeEval(ec.tree, down, 0)) / (2 * h);
    EXPECT_NEAR(got[k], fd, 1e-6 * (1 + std::abs(fd))) << "leaf " << k;
  }
  // Fused: one frame per invocation, shared by its forward and backward
  // parts, and each forward op fires once per invocation, as in a
  // forward-only run.
  Ran f = RunTwice(forward, ec.feeds(), {"result"});
  EXPECT_EQ(r.stats.frames_created, 1 + c.nodes + c.adds + c.muls);
  EXPECT_EQ(r.stats.frames_created, f.stats.frames_created);
  EXPECT_EQ(OpCount(r.stats, "Tanh").first, c.tanhs);
  EXPECT_EQ(OpCount(r.stats, "Tanh"), OpCount(f.stats, "Tanh"));
  EXPECT_EQ(OpCount(r.stats, "TanhGrad").first, c.tanhs);
  // Evaluating without the gradient is the forward computation.
  Ran eval = RunTwice(s, ec.feeds(), {"result"});
  ASSERT_EQ(eval.out.size(), 1u);
  EXPECT_EQ(eval.out[0].scalar<double>(), want);
  EXPECT_EQ(eval.stats.frames_created, f.stats.frames_created);
  EXPECT_EQ(OpCount(eval.stats, "TanhGrad").first, 0);
}

// ===========================================================================
// 4. Search with early exit

// bsearch(a, key, lo, hi): an index of key in the sorted a[lo:hi], or -1.
//   lo >= hi ? -1 : a[mid] == key ? mid : a[mid] < key ? bsearch(mid+1, hi) : bsearch(lo, mid)
// Both recursive calls are tail calls.
inline Graph BinarySearchGraph() {
  GraphBuilder b;
  absl::Status st = b.DefineFunction(
      {"bsearch", {{"a", kI64}, {"key", kI64}, {"lo", kI64}, {"hi", kI64}}, {{"index", kI64}}},
      [](GraphBuilder& f, const Outs& args) -> Outs {
        const Output a = args[0], key = args[1], lo = args[2], hi = args[3];
        return f.Cond(
            f.GreaterEqual(lo, hi), [&] { return Outs{f.Const<int64_t>(-1)}; },
            [&] {
              const Output mid = f.Div(f.Add(lo, hi), f.Const<int64_t>(2));
              const Output at = f.Gather(a, mid);
              return f.Cond(
                  f.Equal(at, key), [&] { return Outs{mid}; },
                  [&] {
                    return f.Cond(
                        f.Less(at, key),
                        [&] { return f.Call("bsearch", {a, key, f.Add(mid, f.Const<int64_t>(1)), hi}); },
                        [&] { return f.Call("bsearch", {a, key, lo, mid}); });
                  });
            });
      });
  EXPECT_TRUE(st.ok()) << st;
  const Output a = b.Placeholder("a", kI64);
  b.Identity(b.Call("bsearch", {a, b.Placeholder("key", kI64), b.Const<int64_t>(0), b.Placeholder("n", kI64)})[0],
             "result");
  return Built(b);
}

inline int64_t NativeBsearch(const std::vector<int64_t>& a, int64_t key, int64_t lo, int64_t hi, int64_t& calls) {
  ++calls;
  if (lo >= hi) return -1;
  const int64_t mid = (lo + hi) / 2;
  if (a[mid] == key) return mid;
  return a[mid] < key ? NativeBsearch(a, key, mid + 1, hi, calls) : NativeBsearch(a, key, lo, mid, calls);
}

// dfs(i, target, T) over a tree of rows (value, first_child, next_sibling):
// the first node in preorder with value == target, or -1. A node that
// matches does not look at its children (a Cond chooses whether to
// recurse), and the loop over the children stops at the first that finds it.
//   T[i].value == target ? i
//   : { r = -1; for (c = T[i].first_child; c >= 0 && r < 0; c = T[c].next) r = dfs(c); r }
// The loop body reads target and T. Written naturally they are loop
// invariants; `carry_invariants` passes them through the loop as loop
// variables instead (unchanged), which worked around a static-mode bug,
// fixed since: a call in a loop body whose arguments mix loop variables and
// invariants was entered once more, as a partial invocation, by the
// iteration that exits the loop (ApplicationRegressionTest, in
// application_programs_test.cc).
inline Graph TreeDfsGraph(bool carry_invariants) {
  GraphBuilder b;
  absl::Status st = b.DefineFunction(
      {"dfs", {{"i", kI64}, {"target", kI64}, {"tree", kI64}}, {{"found", kI64}}},
      [carry_invariants](GraphBuilder& f, const Outs& args) -> Outs {
        const Output i = args[0], target = args[1], tree = args[2];
        const Output row = f.Gather(tree, i);
        auto field = [&](Output r, int64_t col) { return f.Gather(r, f.Const<int64_t>(col)); };
        return f.Cond(
            f.Equal(field(row, 0), target), [&] { return Outs{i}; },
            [&] {
              Outs init = {field(row, 1), f.Const<int64_t>(-1)};
              if (carry_invariants) init.insert(init.end(), {target, tree});
              Outs loop = f.While(
                  [&](const Outs& v) {
                    return f.LogicalAnd(f.GreaterEqual(v[0], f.Const<int64_t>(0)), f.Less(v[1], f.Const<int64_t>(0)));
                  },
                  [&](const Outs& v) -> Outs {
                    const Output t = carry_invariants ? v[2] : target, table = carry_invariants ? v[3] : tree;
                    const Output r = f.Call("dfs", {v[0], t, table})[0];
                    Outs next = {field(f.Gather(table, v[0]), 2), r};
                    if (carry_invariants) next.insert(next.end(), {v[2], v[3]});
                    return next;
                  },
                  init);
              return Outs{loop[1]};
            });
      });
  EXPECT_TRUE(st.ok()) << st;
  b.Identity(b.Call("dfs", {b.Const<int64_t>(0), b.Placeholder("target", kI64), b.Placeholder("tree", kI64)})[0],
             "result");
  return Built(b);
}

struct DfsNative {
  int64_t calls = 0;
  int64_t loop_frames = 0;  // iteration frames of the children loops that ran
  int64_t max_depth = 0;
};

inline int64_t NativeDfs(const std::vector<int64_t>& t, int64_t i, int64_t target, DfsNative& c, int64_t depth) {
  ++c.calls;
  c.max_depth = std::max(c.max_depth, depth);
  if (t[i * 3] == target) return i;
  int64_t r = -1;
  ++c.loop_frames;  // the iteration that finds the condition false
  for (int64_t child = t[i * 3 + 1]; child >= 0 && r < 0; child = t[child * 3 + 2]) {
    ++c.loop_frames;
    r = NativeDfs(t, child, target, c, depth + 1);
  }
  return r;
}

inline void CheckBsearch(Session* s, const std::vector<int64_t>& a, int64_t key) {
  SCOPED_TRACE(absl::StrCat("key ", key));
  const int64_t n = static_cast<int64_t>(a.size());
  int64_t calls = 0;
  const int64_t want = NativeBsearch(a, key, 0, n, calls);
  if (want >= 0) {
    ASSERT_EQ(a[want], key);
  } else {
    ASSERT_FALSE(std::binary_search(a.begin(), a.end(), key));
  }
  Ran r = RunTwice(s, {{"a", Tensor::Vector<int64_t>(a)}, {"key", I(key)}, {"n", I(n)}}, {"result"});
  ASSERT_EQ(r.out.size(), 1u);
  EXPECT_EQ(r.out[0].scalar<int64_t>(), want);
  EXPECT_EQ(r.stats.frames_created, 1 + calls);
  EXPECT_EQ(r.stats.max_tag_depth, calls);  // tail calls still count in the depth
  const SessionOptions& o = s->options();
  if (o.mode == ExecutionMode::kStatic && o.num_workers == 1 && o.forward_call_values && o.release_tail_callers) {
    // A tail recursion holds one live frame: every caller but the outermost
    // is released when its tail call starts.
    EXPECT_EQ(r.stats.tail_callers_released, calls - 1);
    EXPECT_LE(r.stats.peak_live_frames, 3);
  } else if (o.mode == ExecutionMode::kStatic && o.num_workers == 1) {
    EXPECT_EQ(r.stats.tail_callers_released, 0);
    EXPECT_EQ(r.stats.peak_live_frames, 1 + calls);
  }
}

inline std::vector<int64_t> SortedDistinct(size_t n, std::mt19937& rng) {
  std::vector<int64_t> a;
  for (int64_t v = 0; a.size() < n;) a.push_back(v += std::uniform_int_distribution<int64_t>(1, 5)(rng));
  return a;
}

// A random tree of 200 nodes: node k > 0 hangs under a random one of the
// 8 nodes before it, appended to its children. Values are random in
// [0, 150), so some repeat (the first in preorder wins) and some are missing.
constexpr int64_t kDfsNodes = 200;
inline std::vector<int64_t> RandomDfsTree() {
  std::mt19937 rng(5);
  std::vector<int64_t> t(kDfsNodes * 3, -1);
  std::vector<int64_t> last_child(kDfsNodes, -1);
  for (int64_t k = 0; k < kDfsNodes; ++k) {
    t[k * 3] = std::uniform_int_distribution<int64_t>(0, 149)(rng);
    if (k == 0) continue;
    const int64_t parent = std::uniform_int_distribution<int64_t>(std::max<int64_t>(0, k - 8), k - 1)(rng);
    if (last_child[parent] < 0) {
      t[parent * 3 + 1] = k;
    } else {
      t[last_child[parent] * 3 + 2] = k;
    }
    last_child[parent] = k;
  }
  return t;
}

// `exact_frames`: check frames_created against the native search.
inline void CheckDfs(Session* s, const std::vector<int64_t>& t, int64_t target, bool exact_frames) {
  SCOPED_TRACE(absl::StrCat("target ", target));
  DfsNative c;
  const int64_t want = NativeDfs(t, 0, target, c, 1);
  if (want >= 0) EXPECT_EQ(t[want * 3], target);
  if (want < 0) EXPECT_EQ(c.calls, kDfsNodes);  // a miss visits every node
  Ran r = RunTwice(s, {{"target", I(target)}, {"tree", Matrix<int64_t>(t, kDfsNodes, 3)}}, {"result"});
  ASSERT_EQ(r.out.size(), 1u);
  EXPECT_EQ(r.out[0].scalar<int64_t>(), want);
  EXPECT_GE(r.stats.max_tag_depth, c.max_depth);
  // The root, the invocations, and the iterations of the loops that ran;
  // and the invocation that matched (the last one) drains its untaken loop
  // in one dead iteration: skip_dead_branches skips a Cond branch's nodes,
  // but a While in it still enters and exits.
  if (exact_frames) EXPECT_EQ(r.stats.frames_created, 1 + c.calls + c.loop_frames + (want >= 0 ? 1 : 0));
  if (s->options().mode == ExecutionMode::kDynamic) EXPECT_EQ(r.stats.instantiations, c.calls);
}

inline void CheckTreeDfs(const Graph& g, int workers, bool exact_frames) {
  const std::vector<int64_t> t = RandomDfsTree();
  int64_t found = 0, missing = 0;
  for (int64_t target = -1; target <= 151; target += 3) {
    DfsNative c;
    (NativeDfs(t, 0, target, c, 1) >= 0 ? found : missing) += 1;
  }
  EXPECT_GT(found, 10);
  EXPECT_GT(missing, 3);
  ForEachMode(g, workers, [&](Session* s) {
    for (int64_t target = -1; target <= 151; target += 3) CheckDfs(s, t, target, exact_frames);
  });
}

}  // namespace application_programs
}  // namespace tdf

#endif  // TDF_TESTS_RUNTIME_APPLICATION_TREE_PROGRAMS_H_
