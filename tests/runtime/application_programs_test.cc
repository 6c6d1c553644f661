// Application programs in tdf's niche (recursive divide and conquer, search,
// tree-structured computation), written against the public API only
// (tdf/builder.h, tdf/session.h, tdf/autodiff.h) the way a user would write
// them, each checked against a plain C++ implementation of the same
// algorithm:
//
//   * N-queens: place(row, cols, d1, d2, n), a recursive function whose body
//     loops over the columns and calls itself inside the loop (a call in a
//     Cond in a While in a recursive function). There are no bitwise ops, so
//     the bit sets are int64s read with Div/Mod and extended with Add/Mul/Div.
//   * Merge sort of a float32 vector: msort splits with static Slice/Reshape
//     (peeling one element off an odd length, halving an even one), recurses
//     twice on independent halves, and calls merge(a, b), a While loop over
//     three nested Conds that appends one element per iteration (Concat).
//   * An arithmetic expression tree held in an int64 table, evaluated by the
//     mutually recursive eval_node / eval_add / eval_mul, and differentiated
//     with respect to its leaf values (AddGradients), checked against an
//     analytic reverse pass and central finite differences.
//   * Search with early exit: a tail-recursive binary search, and a DFS over
//     a general tree (first child / next sibling) whose loop over the
//     children stops at the first subtree that finds the target.
//
// Every program runs in both execution modes with 1, 2 and 8 workers; each
// run must leave no live frame, a second run of the same session must give
// the same answer and the same firing counts, the frames created must be
// what the native recursion predicts (one per invocation and per loop
// iteration, plus the root), and a mistyped or missing feed, or a bad input
// deep in the recursion, must fail with a status that names node and op.
// ApplicationVariantsTest runs every program under every static executor
// variant (exec_test::ForEachVariant). ApplicationRegressionTest holds the
// minimal repro of a static-mode bug these programs ran into.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "runtime/exec_test_util.h"
#include "tdf/autodiff.h"
#include "tdf/builder.h"
#include "tdf/session.h"
#include "tdf/tensor.h"

namespace tdf {
namespace {

using exec_test::Built;
using exec_test::Feeds;
using exec_test::ForEachMode;
using exec_test::I;
using exec_test::MakeSession;
using exec_test::ModeName;
using exec_test::OpCount;
using exec_test::Outs;
using ::testing::HasSubstr;

constexpr DType kI64 = DType::kInt64;
constexpr DType kF32 = DType::kFloat32;
constexpr DType kF64 = DType::kFloat64;

template <typename T>
std::vector<T> Values(const Tensor& t) {
  if (!t.valid() || t.dtype() != DTypeOf<T>::value) {
    ADD_FAILURE() << "expected a valid " << DTypeName(DTypeOf<T>::value) << " tensor";
    return {};
  }
  return std::vector<T>(t.data<T>(), t.data<T>() + t.num_elements());
}

template <typename T>
Tensor Matrix(const std::vector<T>& values, int64_t rows, int64_t cols) {
  absl::StatusOr<Tensor> t = Tensor::FromVector<T>(values, Shape({rows, cols}));
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? *std::move(t) : Tensor();
}

bool SameTensor(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape().DebugString() != b.shape().DebugString()) return false;
  return a.num_elements() == 0 || std::memcmp(a.raw_data(), b.raw_data(), a.bytes()) == 0;
}

// Runs `fetches` twice on `s`. Both runs must succeed, leave no live frame,
// and agree: same outputs bit for bit, and the same firing and frame counts.
// Returns the first run's outputs and stats (empty outputs on failure).
struct Ran {
  std::vector<Tensor> out;
  RunStats stats;
};
Ran RunTwice(Session* s, const Feeds& feeds, const std::vector<std::string>& fetches) {
  Ran first;
  for (int rep = 0; rep < 2; ++rep) {
    SCOPED_TRACE(absl::StrCat("run ", rep));
    RunStats st;
    absl::StatusOr<std::vector<Tensor>> out = s->Run(feeds, fetches, {}, &st);
    EXPECT_TRUE(out.ok()) << out.status();
    if (!out.ok()) return {};
    EXPECT_EQ(out->size(), fetches.size());
    EXPECT_EQ(st.live_frames_after_run, 0);
    EXPECT_EQ(st.firings, st.live_firings + st.dead_firings);
    EXPECT_GT(st.frames_created, 0);
    if (rep == 0) {
      first = {*std::move(out), st};
      continue;
    }
    for (size_t k = 0; k < fetches.size() && k < out->size(); ++k)
      EXPECT_TRUE(SameTensor(out->at(k), first.out[k])) << "fetch " << fetches[k] << " changed between runs";
    EXPECT_EQ(st.firings, first.stats.firings);
    EXPECT_EQ(st.live_firings, first.stats.live_firings);
    EXPECT_EQ(st.dead_firings, first.stats.dead_firings);
    EXPECT_EQ(st.firings_by_op, first.stats.firings_by_op);
    EXPECT_EQ(st.frames_created, first.stats.frames_created);
    EXPECT_EQ(st.max_tag_depth, first.stats.max_tag_depth);
    EXPECT_EQ(st.instantiations, first.stats.instantiations);
  }
  return first;
}

// A run that must fail with `code` and a message containing every one of
// `parts`; the session must still work afterwards (checked by the caller).
void ExpectRunFails(Session* s, const Feeds& feeds, const std::vector<std::string>& fetches, absl::StatusCode code,
                    const std::vector<std::string>& parts) {
  RunStats st;
  absl::StatusOr<std::vector<Tensor>> out = s->Run(feeds, fetches, {}, &st);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), code) << out.status();
  for (const std::string& p : parts) EXPECT_THAT(std::string(out.status().message()), HasSubstr(p));
}

// The start of an error message about a node of function `fn`'s body. In
// static mode the node's name says which function it belongs to
// ("node 'msort/cond_6/...'"); in dynamic mode it is the body's own name
// ("node 'cond_6/...'"), and only the tag tells where the run was.
// How an error names a node of function `fn`: static mode's transformed
// names start with the function's, dynamic mode's function-local names are
// followed by "in function 'fn'".
std::string NodeOf(Session* s, const std::string& fn) {
  return s->options().mode == ExecutionMode::kStatic ? absl::StrCat("node '", fn, "/") : "node '";
}
std::string OpAtTag(Session* s, const std::string& op, const std::string& fn) {
  return s->options().mode == ExecutionMode::kStatic ? absl::StrCat("(", op, ") at tag [")
                                                     : absl::StrCat("(", op, ") in function '", fn, "' at tag [");
}

// The length of a vector as an int64 scalar (there is no Shape/Size op).
Output Length(GraphBuilder& f, Output x) { return f.Cast(f.Sum(f.Op("OnesLike", {x})), kI64); }

Output Slice(GraphBuilder& f, Output x, std::vector<int64_t> begin, std::vector<int64_t> size) {
  return f.Op("Slice", {x}, {{"begin", std::move(begin)}, {"size", std::move(size)}});
}

// ===========================================================================
// 1. N-queens

// place(row, cols, d1, d2, n): the number of ways to complete a board whose
// rows < row hold queens attacking the columns in `cols` and the diagonals
// in d1 (shifted left per row) and d2 (shifted right per row).
//
//   count = 0; for (c = 0, bit = 1; c < n && row < n; ++c, bit *= 2)
//     count += taken(cols|d1|d2, bit) ? 0 : place(row+1, cols+bit, (d1+bit)*2, (d2+bit)/2, n);
//   return count + (row == n);
Graph NQueensGraph() {
  GraphBuilder b;
  absl::Status st = b.DefineFunction(
      {"place", {{"row", kI64}, {"cols", kI64}, {"d1", kI64}, {"d2", kI64}, {"n", kI64}}, {{"count", kI64}}},
      [](GraphBuilder& f, const Outs& a) -> Outs {
        const Output row = a[0], cols = a[1], d1 = a[2], d2 = a[3], n = a[4];
        Outs loop = f.While(
            [&](const Outs& v) { return f.LogicalAnd(f.Less(v[0], n), f.Less(row, n)); },
            [&](const Outs& v) -> Outs {
              const Output c = v[0], bit = v[1], count = v[2];
              const Output one = f.Const<int64_t>(1), two = f.Const<int64_t>(2);
              auto taken = [&](Output set) { return f.Equal(f.Mod(f.Div(set, bit), two), one); };
              const Output blocked = f.LogicalOr(taken(cols), f.LogicalOr(taken(d1), taken(d2)));
              const Output sub = f.Cond(
                  blocked, [&] { return Outs{f.Const<int64_t>(0)}; },
                  [&] {
                    return f.Call("place", {f.Add(row, f.Const<int64_t>(1)), f.Add(cols, bit),
                                            f.Mul(f.Add(d1, bit), f.Const<int64_t>(2)),
                                            f.Div(f.Add(d2, bit), f.Const<int64_t>(2)), n});
                  })[0];
              return {f.Add(c, one), f.Mul(bit, two), f.Add(count, sub)};
            },
            {f.Const<int64_t>(0), f.Const<int64_t>(1), f.Const<int64_t>(0)});
        return {f.Add(loop[2], f.Cast(f.Equal(row, n), kI64))};
      });
  EXPECT_TRUE(st.ok()) << st;
  Output zero = b.Const<int64_t>(0);
  b.Identity(b.Call("place", {zero, zero, zero, zero, b.Placeholder("n", kI64)})[0], "result");
  return Built(b);
}

struct QueensNative {
  int64_t solutions = 0;
  int64_t calls = 0;           // invocations of place
  int64_t loop_iterations = 0; // live iterations of place's loop, over all invocations
};

void NativePlace(int row, uint64_t cols, uint64_t d1, uint64_t d2, int n, QueensNative& q) {
  ++q.calls;
  if (row == n) {
    ++q.solutions;
    return;
  }
  for (int c = 0; c < n; ++c) {
    ++q.loop_iterations;
    const uint64_t bit = uint64_t{1} << c;
    if ((cols | d1 | d2) & bit) continue;
    NativePlace(row + 1, cols | bit, (d1 | bit) << 1, (d2 | bit) >> 1, n, q);
  }
}

QueensNative NativeQueens(int n) {
  QueensNative q;
  NativePlace(0, 0, 0, 0, n, q);
  return q;
}

void CheckQueens(Session* s, int n) {
  SCOPED_TRACE(absl::StrCat("n = ", n));
  // The well-known counts, as a check on the native solver itself.
  const std::vector<int64_t> known = {1, 1, 0, 0, 2, 10, 4, 40, 92};
  const QueensNative q = NativeQueens(n);
  ASSERT_EQ(q.solutions, known[n]);
  Ran r = RunTwice(s, {{"n", I(n)}}, {"result"});
  ASSERT_EQ(r.out.size(), 1u);
  EXPECT_EQ(r.out[0].scalar<int64_t>(), q.solutions);
  // The root, one frame per invocation, and per invocation one frame per
  // loop iteration plus the one that finds the condition false.
  EXPECT_EQ(r.stats.frames_created, 1 + q.calls + q.loop_iterations + q.calls);
  if (s->options().mode == ExecutionMode::kDynamic) EXPECT_EQ(r.stats.instantiations, q.calls);
  // A static call site's Call nodes fire live once per invocation (five
  // arguments); a dynamic one's Invoke once.
  if (s->options().mode == ExecutionMode::kStatic) {
    EXPECT_EQ(OpCount(r.stats, "Call").first, 5 * q.calls);
  } else {
    EXPECT_EQ(OpCount(r.stats, "Invoke").first, q.calls);
  }
}

class ApplicationNQueensTest : public ::testing::TestWithParam<int> {};

TEST_P(ApplicationNQueensTest, CountsSolutionsForOneToEight) {
  const Graph g = NQueensGraph();
  ForEachMode(g, GetParam(), [&](Session* s) {
    for (int n = 1; n <= 8; ++n) CheckQueens(s, n);
  });
}

TEST_P(ApplicationNQueensTest, BadFeedsNameTheNodeAndOp) {
  const Graph g = NQueensGraph();
  ForEachMode(g, GetParam(), [&](Session* s) {
    ExpectRunFails(s, {{"n", Tensor::Scalar<int32_t>(4)}}, {"result"}, absl::StatusCode::kInvalidArgument,
                   {"feed 'n' is int32", "node 'n' (Placeholder) wants int64"});
    ExpectRunFails(s, {}, {"result"}, absl::StatusCode::kInvalidArgument, {"node 'n' (Placeholder)", "missing feed"});
    Ran r = RunTwice(s, {{"n", I(6)}}, {"result"});
    ASSERT_EQ(r.out.size(), 1u);
    EXPECT_EQ(r.out[0].scalar<int64_t>(), 4);
  });
}

INSTANTIATE_TEST_SUITE_P(Workers, ApplicationNQueensTest, ::testing::Values(1, 2, 8), exec_test::WorkersName);

// ===========================================================================
// 2. Merge sort

// merge(a, b): the sorted union of two sorted vectors, one element per loop
// iteration (stable: ties take a's element first).
// msort(x): n <= 1 ? x
//         : n odd ? merge(x[0:1], msort(x[1:]))
//         : merge(msort(first half), msort(second half))
// Slice's begin and size are attributes, fixed when the graph is built, so
// a half of a vector whose length is only known at run time is taken as a
// row of Reshape(x, [2, -1]); an odd length first peels off one element.
Graph MergeSortGraph() {
  GraphBuilder b;
  absl::Status st = b.DefineFunction(
      {"merge", {{"a", kF32}, {"b", kF32}}, {{"m", kF32}}}, [](GraphBuilder& f, const Outs& args) -> Outs {
        const Output x = args[0], y = args[1];
        const Output nx = Length(f, x), ny = Length(f, y);
        const Output total = f.Add(nx, ny);
        const Output empty = f.Const(*Tensor::FromVector<float>({}, Shape({0})));
        Outs loop = f.While(
            [&](const Outs& v) { return f.Less(f.Add(v[0], v[1]), total); },
            [&](const Outs& v) -> Outs {
              const Output i = v[0], j = v[1], out = v[2];
              const Output one = f.Const<int64_t>(1);
              Outs pick = f.Cond(
                  f.GreaterEqual(i, nx), [&] { return Outs{f.Gather(y, j), i, f.Add(j, one)}; },
                  [&] {
                    return f.Cond(
                        f.GreaterEqual(j, ny), [&] { return Outs{f.Gather(x, i), f.Add(i, one), j}; },
                        [&] {
                          const Output xi = f.Gather(x, i), yj = f.Gather(y, j);
                          return f.Cond(
                              f.LessEqual(xi, yj), [&] { return Outs{xi, f.Add(i, one), j}; },
                              [&] { return Outs{yj, i, f.Add(j, one)}; });
                        });
                  });
              return {pick[1], pick[2], f.Concat({out, f.Reshape(pick[0], {1})}, 0)};
            },
            {f.Const<int64_t>(0), f.Const<int64_t>(0), empty});
        return {loop[2]};
      });
  EXPECT_TRUE(st.ok()) << st;
  st = b.DefineFunction({"msort", {{"x", kF32}}, {{"y", kF32}}}, [](GraphBuilder& f, const Outs& args) -> Outs {
    const Output x = args[0];
    const Output n = Length(f, x);
    return f.Cond(
        f.LessEqual(n, f.Const<int64_t>(1)), [&] { return Outs{x}; },
        [&] {
          return f.Cond(
              f.Equal(f.Mod(n, f.Const<int64_t>(2)), f.Const<int64_t>(1)),
              [&] {
                const Output head = Slice(f, x, {0}, {1});
                const Output rest = f.Call("msort", {Slice(f, x, {1}, {-1})})[0];
                return f.Call("merge", {head, rest});
              },
              [&] {
                const Output halves = f.Reshape(x, {2, -1});
                const Output lo = f.Call("msort", {f.Reshape(Slice(f, halves, {0, 0}, {1, -1}), {-1})})[0];
                const Output hi = f.Call("msort", {f.Reshape(Slice(f, halves, {1, 0}, {1, -1}), {-1})})[0];
                return f.Call("merge", {lo, hi});
              });
        });
  });
  EXPECT_TRUE(st.ok()) << st;
  b.Identity(b.Call("msort", {b.Placeholder("x", kF32)})[0], "result");
  return Built(b);
}

struct SortNative {
  int64_t msort_calls = 0;
  int64_t merge_calls = 0;
  int64_t merge_iterations = 0;  // live iterations of merge's loop
  int64_t max_depth = 0;         // deepest chain of calls (msort, then merge)
};

// The same recursion as MergeSortGraph, counting what it does.
std::vector<float> NativeMsort(const std::vector<float>& x, SortNative& c, int64_t depth) {
  ++c.msort_calls;
  c.max_depth = std::max(c.max_depth, depth);
  const size_t n = x.size();
  if (n <= 1) return x;
  std::vector<float> a, b;
  if (n % 2 == 1) {
    a = {x[0]};
    b = NativeMsort(std::vector<float>(x.begin() + 1, x.end()), c, depth + 1);
  } else {
    a = NativeMsort(std::vector<float>(x.begin(), x.begin() + n / 2), c, depth + 1);
    b = NativeMsort(std::vector<float>(x.begin() + n / 2, x.end()), c, depth + 1);
  }
  ++c.merge_calls;
  c.merge_iterations += static_cast<int64_t>(a.size() + b.size());
  std::vector<float> m;
  std::merge(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(m));
  return m;
}

void CheckSort(Session* s, const std::vector<float>& x) {
  SCOPED_TRACE(absl::StrCat("n = ", x.size()));
  SortNative c;
  const std::vector<float> want = NativeMsort(x, c, 1);
  std::vector<float> check = x;
  std::sort(check.begin(), check.end());
  ASSERT_EQ(want, check);  // the native model sorts
  Ran r = RunTwice(s, {{"x", Tensor::Vector<float>(x)}}, {"result"});
  ASSERT_EQ(r.out.size(), 1u);
  ASSERT_EQ(r.out[0].rank(), 1);
  EXPECT_EQ(Values<float>(r.out[0]), want);
  // Root + invocations + merge's iteration frames (one more per merge: the
  // iteration that finds the condition false).
  EXPECT_EQ(r.stats.frames_created, 1 + c.msort_calls + c.merge_calls + c.merge_iterations + c.merge_calls);
  if (s->options().mode == ExecutionMode::kDynamic) EXPECT_EQ(r.stats.instantiations, c.msort_calls + c.merge_calls);
  // One Concat per element merged.
  EXPECT_EQ(OpCount(r.stats, "Concat").first, c.merge_iterations);
  EXPECT_GE(r.stats.max_tag_depth, c.max_depth);
}

std::vector<float> RandomFloats(size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-100.0f, 100.0f);
  std::vector<float> v(n);
  for (float& e : v) e = u(rng);
  return v;
}

class ApplicationMergeSortTest : public ::testing::TestWithParam<int> {};

TEST_P(ApplicationMergeSortTest, SortsRandomVectors) {
  const Graph g = MergeSortGraph();
  std::mt19937 rng(20240611);
  std::vector<std::vector<float>> inputs;
  for (int n : {0, 1, 2, 7, 64, 1000}) inputs.push_back(RandomFloats(n, rng));
  // Many ties, and an already sorted and a reversed input.
  std::vector<float> ties(37);
  for (float& e : ties) e = static_cast<float>(std::uniform_int_distribution<int>(0, 4)(rng));
  inputs.push_back(ties);
  std::vector<float> sorted(20);
  for (size_t k = 0; k < sorted.size(); ++k) sorted[k] = static_cast<float>(k);
  inputs.push_back(sorted);
  inputs.push_back(std::vector<float>(sorted.rbegin(), sorted.rend()));

  ForEachMode(g, GetParam(), [&](Session* s) {
    for (const std::vector<float>& x : inputs) CheckSort(s, x);
  });
}

TEST_P(ApplicationMergeSortTest, BadFeedsNameTheNodeAndOp) {
  const Graph g = MergeSortGraph();
  ForEachMode(g, GetParam(), [&](Session* s) {
    ExpectRunFails(s, {{"x", Tensor::Vector<double>({3, 1, 2})}}, {"result"}, absl::StatusCode::kInvalidArgument,
                   {"feed 'x' is float64", "node 'x' (Placeholder) wants float32"});
    ExpectRunFails(s, {}, {"result"}, absl::StatusCode::kInvalidArgument, {"node 'x' (Placeholder)", "missing feed"});
    // A 3x3 matrix passes the Placeholder (it has no shape) but not the
    // first invocation's one-dimensional Slice: the error names that node,
    // its op and its tag.
    ExpectRunFails(s, {{"x", Matrix<float>({9, 8, 7, 6, 5, 4, 3, 2, 1}, 3, 3)}}, {"result"},
                   absl::StatusCode::kInvalidArgument, {NodeOf(s, "msort"), OpAtTag(s, "Slice", "msort") + "0]", "rank 2"});
    Ran r = RunTwice(s, {{"x", Tensor::Vector<float>({3, -1, 2})}}, {"result"});
    ASSERT_EQ(r.out.size(), 1u);
    EXPECT_EQ(Values<float>(r.out[0]), (std::vector<float>{-1, 2, 3}));
  });
}

INSTANTIATE_TEST_SUITE_P(Workers, ApplicationMergeSortTest, ::testing::Values(1, 2, 8), exec_test::WorkersName);

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

int64_t GrowExpr(ExprTree& t, std::mt19937& rng, int depth) {
  const int64_t me = t.rows();
  t.table.insert(t.table.end(), {kLeaf, -1, -1, 0});
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

double NativeEval(const ExprTree& t, const std::vector<double>& v, int64_t i, ExprCounts* c = nullptr) {
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
void NativeBackward(const ExprTree& t, const std::vector<double>& v, int64_t i, double adj, std::vector<double>& g) {
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
Graph ExprGraph() {
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

std::vector<ExprCase> ExprCases() {
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

void CheckExprEval(Session* s, const ExprCase& ec) {
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
void CheckExprGradient(Session* s, Session* forward, const std::string& grad, const ExprCase& ec) {
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

class ApplicationExprTreeTest : public ::testing::TestWithParam<int> {};

TEST_P(ApplicationExprTreeTest, EvaluatesByMutualRecursion) {
  const Graph g = ExprGraph();
  const std::vector<ExprCase> cases = ExprCases();
  ForEachMode(g, GetParam(), [&](Session* s) {
    for (const ExprCase& ec : cases) CheckExprEval(s, ec);
  });
}

TEST_P(ApplicationExprTreeTest, GradientWithRespectToLeaves) {
  Graph g = ExprGraph();
  absl::StatusOr<std::vector<std::string>> grads = AddGradients(g, {"result"}, {"leaves"});
  ASSERT_TRUE(grads.ok()) << grads.status();
  ASSERT_EQ(grads->size(), 1u);
  {
    // Split call sites need the static mode: the dynamic baseline says so.
    SessionOptions o;
    o.mode = ExecutionMode::kDynamic;
    absl::StatusOr<std::unique_ptr<Session>> dyn = Session::Create(g, o);
    ASSERT_FALSE(dyn.ok());
    EXPECT_EQ(dyn.status().code(), absl::StatusCode::kUnimplemented) << dyn.status();
  }
  SessionOptions o;
  o.num_workers = GetParam();
  auto s = MakeSession(g, o);
  auto forward = MakeSession(ExprGraph(), o);
  ASSERT_NE(s, nullptr);
  ASSERT_NE(forward, nullptr);
  for (const ExprCase& ec : ExprCases()) CheckExprGradient(s.get(), forward.get(), (*grads)[0], ec);
}

TEST_P(ApplicationExprTreeTest, BadInputsNameTheNodeAndOp) {
  Graph g = ExprGraph();
  ExprTree t;
  t.num_leaves = 2;
  // plus(leaf 0, times(leaf 1, <row 7, which does not exist>))
  t.table = {kPlus, 1, 2, 0, kLeaf, -1, -1, 0, kTimes, 3, 7, 0, kLeaf, -1, -1, 1};
  const Feeds bad_child = {{"table", Matrix<int64_t>(t.table, t.rows(), 4)},
                           {"leaves", Tensor::Vector<double>({1.5, 2.5})}};
  ForEachMode(g, GetParam(), [&](Session* s) {
    ExpectRunFails(s, {{"table", Matrix<int64_t>(t.table, t.rows(), 4)}, {"leaves", Tensor::Vector<float>({1, 2})}},
                   {"result"}, absl::StatusCode::kInvalidArgument,
                   {"feed 'leaves' is float32", "node 'leaves' (Placeholder) wants float64"});
    ExpectRunFails(s, {{"leaves", Tensor::Vector<double>({1, 2})}}, {"result"}, absl::StatusCode::kInvalidArgument,
                   {"node 'table' (Placeholder)", "missing feed"});
    // Row 7 is read by the fifth invocation (eval_node -> eval_add ->
    // eval_node -> eval_mul -> eval_node): its first Gather fails there.
    ExpectRunFails(s, bad_child, {"result"}, absl::StatusCode::kInvalidArgument,
                   {NodeOf(s, "eval_node"), OpAtTag(s, "Gather", "eval_node"), "index 7", "out of range [0, 4)"});
    t.table[10] = 3;  // times(leaf 1, leaf 1)
    Ran r = RunTwice(s,
                     {{"table", Matrix<int64_t>(t.table, t.rows(), 4)}, {"leaves", Tensor::Vector<double>({1.5, 2.5})}},
                     {"result"});
    ASSERT_EQ(r.out.size(), 1u);
    EXPECT_EQ(r.out[0].scalar<double>(), 1.5 + 2.5 * 2.5);
    t.table[10] = 7;
  });
}

INSTANTIATE_TEST_SUITE_P(Workers, ApplicationExprTreeTest, ::testing::Values(1, 2, 8), exec_test::WorkersName);

// ===========================================================================
// 4. Search with early exit

// bsearch(a, key, lo, hi): an index of key in the sorted a[lo:hi], or -1.
//   lo >= hi ? -1 : a[mid] == key ? mid : a[mid] < key ? bsearch(mid+1, hi) : bsearch(lo, mid)
// Both recursive calls are tail calls.
Graph BinarySearchGraph() {
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

int64_t NativeBsearch(const std::vector<int64_t>& a, int64_t key, int64_t lo, int64_t hi, int64_t& calls) {
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
// variables instead (unchanged), which works around a static-mode bug: a
// call in a loop body whose arguments mix loop variables and invariants is
// entered once more, as a partial invocation, by the iteration that exits
// the loop (see ApplicationBugsTest below).
Graph TreeDfsGraph(bool carry_invariants) {
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

int64_t NativeDfs(const std::vector<int64_t>& t, int64_t i, int64_t target, DfsNative& c, int64_t depth) {
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

class ApplicationSearchTest : public ::testing::TestWithParam<int> {};

void CheckBsearch(Session* s, const std::vector<int64_t>& a, int64_t key) {
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

std::vector<int64_t> SortedDistinct(size_t n, std::mt19937& rng) {
  std::vector<int64_t> a;
  for (int64_t v = 0; a.size() < n;) a.push_back(v += std::uniform_int_distribution<int64_t>(1, 5)(rng));
  return a;
}

TEST_P(ApplicationSearchTest, BinarySearchIsTailRecursive) {
  const Graph g = BinarySearchGraph();
  std::mt19937 rng(99);
  const std::vector<int64_t> a = SortedDistinct(300, rng);
  std::vector<int64_t> keys = {a.front(), a.back(), a[150], a[17], a.front() - 1, a.back() + 1};
  for (int k = 0; k < 20; ++k) keys.push_back(std::uniform_int_distribution<int64_t>(0, a.back() + 2)(rng));
  ForEachMode(g, GetParam(), [&](Session* s) {
    for (int64_t key : keys) CheckBsearch(s, a, key);
  });
}

// A random tree of 200 nodes: node k > 0 hangs under a random one of the
// 8 nodes before it, appended to its children. Values are random in
// [0, 150), so some repeat (the first in preorder wins) and some are missing.
constexpr int64_t kDfsNodes = 200;
std::vector<int64_t> RandomDfsTree() {
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
void CheckDfs(Session* s, const std::vector<int64_t>& t, int64_t target, bool exact_frames) {
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

void CheckTreeDfs(const Graph& g, int workers, bool exact_frames) {
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

TEST_P(ApplicationSearchTest, TreeDfsStopsAtTheFirstMatch) {
  CheckTreeDfs(TreeDfsGraph(/*carry_invariants=*/true), GetParam(), /*exact_frames=*/true);
}

// The natural form, with target and T as loop invariants of the children
// loop: the exit of a children loop used to enter dfs once more in static
// mode (see ApplicationRegressionTest below).
TEST_P(ApplicationSearchTest, TreeDfsWithLoopInvariantArguments) {
  CheckTreeDfs(TreeDfsGraph(/*carry_invariants=*/false), GetParam(), /*exact_frames=*/true);
}

TEST_P(ApplicationSearchTest, BadFeedsNameTheNodeAndOp) {
  const Graph bs = BinarySearchGraph();
  ForEachMode(bs, GetParam(), [&](Session* s) {
    ExpectRunFails(s, {{"a", Tensor::Vector<int32_t>({1, 2})}, {"key", I(2)}, {"n", I(2)}}, {"result"},
                   absl::StatusCode::kInvalidArgument, {"feed 'a' is int32", "node 'a' (Placeholder) wants int64"});
    ExpectRunFails(s, {{"a", Tensor::Vector<int64_t>({1, 2})}, {"n", I(2)}}, {"result"},
                   absl::StatusCode::kInvalidArgument, {"node 'key' (Placeholder)", "missing feed"});
    // n past the end of a: the search reads a[mid] out of range a few calls deep.
    ExpectRunFails(s, {{"a", Tensor::Vector<int64_t>({1, 2, 3})}, {"key", I(100)}, {"n", I(50)}}, {"result"},
                   absl::StatusCode::kInvalidArgument,
                   {NodeOf(s, "bsearch"), OpAtTag(s, "Gather", "bsearch"), "out of range [0, 3)"});
    Ran r = RunTwice(s, {{"a", Tensor::Vector<int64_t>({1, 2, 3})}, {"key", I(3)}, {"n", I(3)}}, {"result"});
    ASSERT_EQ(r.out.size(), 1u);
    EXPECT_EQ(r.out[0].scalar<int64_t>(), 2);
  });
  const Graph dfs = TreeDfsGraph(/*carry_invariants=*/true);
  ForEachMode(dfs, GetParam(), [&](Session* s) {
    ExpectRunFails(s, {{"target", Tensor::Scalar<double>(1)}, {"tree", Matrix<int64_t>({1, -1, -1}, 1, 3)}},
                   {"result"}, absl::StatusCode::kInvalidArgument,
                   {"feed 'target' is float64", "node 'target' (Placeholder) wants int64"});
    ExpectRunFails(s, {{"target", I(1)}}, {"result"}, absl::StatusCode::kInvalidArgument,
                   {"node 'tree' (Placeholder)", "missing feed"});
  });
}

// A session serves several runs at once: threads search one tree for
// different targets concurrently, each run checked as above.
TEST_P(ApplicationSearchTest, ConcurrentSearchesOnOneSession) {
  const Graph g = TreeDfsGraph(/*carry_invariants=*/true);
  const std::vector<int64_t> t = RandomDfsTree();
  const Tensor tree = Matrix<int64_t>(t, kDfsNodes, 3);
  ForEachMode(g, GetParam(), [&](Session* s) {
    constexpr int kThreads = 4;
    std::vector<std::string> errors(kThreads);
    std::vector<std::thread> threads;
    for (int k = 0; k < kThreads; ++k) {
      threads.emplace_back([&, k] {
        for (int64_t target = k - 1; target <= 151; target += 2 * kThreads) {
          DfsNative c;
          const int64_t want = NativeDfs(t, 0, target, c, 1);
          RunStats st;
          absl::StatusOr<std::vector<Tensor>> out =
              s->Run({{"target", I(target)}, {"tree", tree}}, {"result"}, {}, &st);
          if (!out.ok()) {
            errors[k] = out.status().ToString();
          } else if (out->at(0).scalar<int64_t>() != want || st.live_frames_after_run != 0 ||
                     st.frames_created != 1 + c.calls + c.loop_frames + (want >= 0 ? 1 : 0)) {
            errors[k] = absl::StrCat("target ", target, ": got ", out->at(0).scalar<int64_t>(), " want ", want,
                                     ", frames ", st.frames_created, ", live after ", st.live_frames_after_run);
          }
          if (!errors[k].empty()) return;
        }
      });
    }
    for (std::thread& th : threads) th.join();
    for (int k = 0; k < kThreads; ++k) EXPECT_EQ(errors[k], "") << "thread " << k;
  });
}

INSTANTIATE_TEST_SUITE_P(Workers, ApplicationSearchTest, ::testing::Values(1, 2, 8), exec_test::WorkersName);

// ===========================================================================
// Every program under every static executor variant (value forwarding,
// releasing tail callers, skipping dead branches, per-node counting): the
// options change which nodes fire, never the answers or the frames.

class ApplicationVariantsTest : public ::testing::TestWithParam<int> {};

TEST_P(ApplicationVariantsTest, EveryProgramUnderEveryExecutorVariant) {
  const Graph queens = NQueensGraph(), sort = MergeSortGraph(), expr = ExprGraph(), bsearch = BinarySearchGraph(),
              dfs = TreeDfsGraph(/*carry_invariants=*/true);
  Graph grad_graph = ExprGraph();
  absl::StatusOr<std::vector<std::string>> grads = AddGradients(grad_graph, {"result"}, {"leaves"});
  ASSERT_TRUE(grads.ok()) << grads.status();
  std::mt19937 rng(31337);
  const std::vector<float> x = RandomFloats(45, rng);
  const std::vector<int64_t> a = SortedDistinct(100, rng);
  const std::vector<ExprCase> cases = ExprCases();
  const std::vector<int64_t> tree = RandomDfsTree();
  exec_test::ForEachVariant(GetParam(), [&](const SessionOptions& options) {
    auto s = MakeSession(queens, options);
    ASSERT_NE(s, nullptr);
    CheckQueens(s.get(), 6);
    s = MakeSession(sort, options);
    ASSERT_NE(s, nullptr);
    CheckSort(s.get(), x);
    s = MakeSession(expr, options);
    ASSERT_NE(s, nullptr);
    CheckExprEval(s.get(), cases.back());
    auto g = MakeSession(grad_graph, options);
    ASSERT_NE(g, nullptr);
    CheckExprGradient(g.get(), s.get(), (*grads)[0], cases.back());
    s = MakeSession(bsearch, options);
    ASSERT_NE(s, nullptr);
    for (int64_t key : {a[0], a[63], a[99] + 1, a[40] + 1}) CheckBsearch(s.get(), a, key);
    s = MakeSession(dfs, options);
    ASSERT_NE(s, nullptr);
    for (int64_t target : {int64_t{-1}, tree[0], tree[3 * 77], tree[3 * 199]}) CheckDfs(s.get(), tree, target, true);
  });
}

INSTANTIATE_TEST_SUITE_P(Workers, ApplicationVariantsTest, ::testing::Values(1, 2, 8), exec_test::WorkersName);

// ===========================================================================
// Runtime bugs found while writing the programs above, as minimal repros.

// Fixed bug (static mode): a call in a While body whose arguments mix a
// loop variable and a loop invariant was also entered by the iteration that
// exits the loop. GraphBuilder gated a body node that reads only invariants
// on the iteration's pivot, but not an Invoke with a loop-variable
// argument, and StaticizeRecursion splits it into one Call per argument:
// the Calls of invariant arguments read only the invariant's Enter, live in
// the exiting iteration too, and started a partial invocation whose
// loop-variable argument entered dead. Whatever in the callee depended only
// on the invariant arguments ran live: a side effect happened once more (v
// was 40, not 30), and a recursion driven by an invariant argument ran
// whole for nothing (g below: 1001 extra frames). The builder now gates
// such an Invoke on the pivot too.
TEST(ApplicationRegressionTest, CallInLoopBodyWithInvariantArgumentsSkipsTheExitingIteration) {
  for (ExecutionMode mode : {ExecutionMode::kStatic, ExecutionMode::kDynamic}) {
    SCOPED_TRACE(ModeName(mode));
    SessionOptions o;
    o.mode = mode;
    {
      // f(i, h, k) = i + AssignAdd(h, k); for (c = 0; c < 3; ++c) acc += f(c, v, k).
      GraphBuilder b;
      ASSERT_TRUE(b.DefineFunction({"f", {{"i", kI64}, {"h", kI64}, {"k", kI64}}, {{"r", kI64}}},
                                   [](GraphBuilder& f, const Outs& a) -> Outs {
                                     return {f.Add(a[0], f.AssignAdd(a[1], a[2]))};
                                   })
                      .ok());
      const Output v = b.Variable("v", I(0));
      const Output k = b.Placeholder("k", kI64);
      Outs r = b.While([&](const Outs& x) { return b.Less(x[0], b.Const<int64_t>(3)); },
                       [&](const Outs& x) -> Outs {
                         return {b.Add(x[0], b.Const<int64_t>(1)), b.Add(x[1], b.Call("f", {x[0], v, k})[0])};
                       },
                       {b.Const<int64_t>(0), b.Const<int64_t>(0)});
      b.Identity(r[1], "result");
      auto s = MakeSession(Built(b), o);
      ASSERT_NE(s, nullptr);
      RunStats st;
      ASSERT_TRUE(s->Run({{"k", I(10)}}, {"result"}, {}, &st).ok());
      EXPECT_EQ(s->ReadVariable("v")->scalar<int64_t>(), 30);  // was 40 in static mode
      EXPECT_EQ(OpCount(st, "AssignAdd").first, 3);            // was 4
      EXPECT_EQ(st.frames_created, 1 + 4 + 3);                 // was 9
    }
    {
      // g(i, n) = n == 0 ? 0 : i + g(i, n - 1); for (c = 0; c < 3; ++c) acc += g(c, n).
      GraphBuilder b;
      ASSERT_TRUE(b.DefineFunction({"g", {{"i", kI64}, {"n", kI64}}, {{"r", kI64}}},
                                   [](GraphBuilder& f, const Outs& a) -> Outs {
                                     return f.Cond(
                                         f.Equal(a[1], f.Const<int64_t>(0)), [&] { return Outs{f.Const<int64_t>(0)}; },
                                         [&] {
                                           return Outs{f.Add(
                                               a[0], f.Call("g", {a[0], f.Sub(a[1], f.Const<int64_t>(1))})[0])};
                                         });
                                   })
                      .ok());
      const Output n = b.Placeholder("n", kI64);
      Outs r = b.While([&](const Outs& x) { return b.Less(x[0], b.Const<int64_t>(3)); },
                       [&](const Outs& x) -> Outs {
                         return {b.Add(x[0], b.Const<int64_t>(1)), b.Add(x[1], b.Call("g", {x[0], n})[0])};
                       },
                       {b.Const<int64_t>(0), b.Const<int64_t>(0)});
      b.Identity(r[1], "result");
      auto s = MakeSession(Built(b), o);
      ASSERT_NE(s, nullptr);
      RunStats st;
      auto out = s->Run({{"n", I(1000)}}, {"result"}, {}, &st);
      ASSERT_TRUE(out.ok()) << out.status();
      EXPECT_EQ(out->at(0).scalar<int64_t>(), 3000);
      EXPECT_EQ(st.frames_created, 1 + 4 + 3 * 1001);  // was 4009 in static mode
    }
  }
}

}  // namespace
}  // namespace tdf
