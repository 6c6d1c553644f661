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
//
// The programs, their native models and the checks are shared by several
// test files (one file held them all and outgrew the size limit):
//   application_programs.h              this header: the run checks, N-queens
//                                       and merge sort
//   application_tree_programs.h         the expression tree and search programs
//   application_divide_conquer_test.cc  ApplicationNQueensTest, ApplicationMergeSortTest
//   application_tree_programs_test.cc   ApplicationExprTreeTest, ApplicationSearchTest
//   application_programs_test.cc        ApplicationVariantsTest (every program under
//                                       every static executor variant) and
//                                       ApplicationRegressionTest (minimal repros of
//                                       the bugs these programs ran into)
#ifndef TDF_TESTS_RUNTIME_APPLICATION_PROGRAMS_H_
#define TDF_TESTS_RUNTIME_APPLICATION_PROGRAMS_H_

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "runtime/exec_test_util.h"
#include "tdf/builder.h"
#include "tdf/session.h"
#include "tdf/tensor.h"

namespace tdf {
namespace application_programs {

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

inline bool SameTensor(const Tensor& a, const Tensor& b) {
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
inline Ran RunTwice(Session* s, const Feeds& feeds, const std::vector<std::string>& fetches) {
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
inline void ExpectRunFails(Session* s, const Feeds& feeds, const std::vector<std::string>& fetches,
                           absl::StatusCode code, const std::vector<std::string>& parts) {
  RunStats st;
  absl::StatusOr<std::vector<Tensor>> out = s->Run(feeds, fetches, {}, &st);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), code) << out.status();
  for (const std::string& p : parts) EXPECT_THAT(std::string(out.status().message()), HasSubstr(p));
}

// How an error names a node of function `fn`'s body: static mode's
// transformed names start with the function's ("node 'msort/cond_6/...'");
// dynamic mode's function-local names ("node 'cond_6/...'") are followed by
// "in function 'fn'" (OpAtTag).
inline std::string NodeOf(Session* s, const std::string& fn) {
  return s->options().mode == ExecutionMode::kStatic ? absl::StrCat("node '", fn, "/") : "node '";
}
inline std::string OpAtTag(Session* s, const std::string& op, const std::string& fn) {
  return s->options().mode == ExecutionMode::kStatic ? absl::StrCat("(", op, ") at tag [")
                                                     : absl::StrCat("(", op, ") in function '", fn, "' at tag [");
}

// The length of a vector as an int64 scalar (there is no Shape/Size op).
inline Output Length(GraphBuilder& f, Output x) { return f.Cast(f.Sum(f.Op("OnesLike", {x})), kI64); }

inline Output Slice(GraphBuilder& f, Output x, std::vector<int64_t> begin, std::vector<int64_t> size) {
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
inline Graph NQueensGraph() {
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

inline void NativePlace(int row, uint64_t cols, uint64_t d1, uint64_t d2, int n, QueensNative& q) {
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

inline QueensNative NativeQueens(int n) {
  QueensNative q;
  NativePlace(0, 0, 0, 0, n, q);
  return q;
}

inline void CheckQueens(Session* s, int n) {
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
inline Graph MergeSortGraph() {
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
inline std::vector<float> NativeMsort(const std::vector<float>& x, SortNative& c, int64_t depth) {
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

inline void CheckSort(Session* s, const std::vector<float>& x) {
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

inline std::vector<float> RandomFloats(size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-100.0f, 100.0f);
  std::vector<float> v(n);
  for (float& e : v) e = u(rng);
  return v;
}

}  // namespace application_programs
}  // namespace tdf

#endif  // TDF_TESTS_RUNTIME_APPLICATION_PROGRAMS_H_
