// A call site with several arguments has one Call node per argument, and
// with several workers they fire concurrently. The site's last Call drops
// the invocation's external reference; a Call that delivered earlier must
// have counted the nodes it made ready before it announced its arrival, or
// the invocation can complete — and its frame be reused — while those nodes
// wait on the Call's worker. The body below has no source nodes (its
// constants are folded into the frame), so nothing else keeps it alive.
#include <gtest/gtest.h>

#include "runtime/exec_test_util.h"
#include "tdf/builder.h"
#include "tdf/session.h"

namespace tdf {
namespace {

using exec_test::Built;
using exec_test::I;
using exec_test::MakeSession;
using exec_test::Outs;
using exec_test::RunResult;

// r(n, a, b, c) = n <= 0 ? a + 2b + 3c : r(n-1, b, c, a) + r(n-2, c, a, b)
int64_t NativeRotate(int64_t n, int64_t a, int64_t b, int64_t c) {
  if (n <= 0) return a + 2 * b + 3 * c;
  return NativeRotate(n - 1, b, c, a) + NativeRotate(n - 2, c, a, b);
}

Graph Rotate() {
  GraphBuilder b;
  const DType i64 = DType::kInt64;
  (void)b.DefineFunction(
      FunctionSignature{"r", {{"n", i64}, {"a", i64}, {"b", i64}, {"c", i64}}, {{"s", i64}}},
      [](GraphBuilder& f, const Outs& x) -> Outs {
        Output n = x[0], a = x[1], bb = x[2], c = x[3];
        return f.Cond(
            f.LessEqual(n, f.Const<int64_t>(0)),
            [&] {
              return Outs{f.Add(a, f.Add(f.Mul(bb, f.Const<int64_t>(2)), f.Mul(c, f.Const<int64_t>(3))))};
            },
            [&] {
              Output l = f.Call("r", {f.Sub(n, f.Const<int64_t>(1)), bb, c, a})[0];
              Output r = f.Call("r", {f.Sub(n, f.Const<int64_t>(2)), c, a, bb})[0];
              return Outs{f.Add(l, r)};
            });
      });
  Output n = b.Placeholder("n", i64);
  b.Identity(b.Call("r", {n, b.Const<int64_t>(1), b.Const<int64_t>(10), b.Const<int64_t>(100)})[0], "result");
  return Built(b);
}

class CallSiteRaceTest : public ::testing::TestWithParam<int> {};

TEST_P(CallSiteRaceTest, ConcurrentArgumentsOfOneSiteNeverLoseTheInvocation) {
  SessionOptions o;
  o.num_workers = GetParam();
  auto s = MakeSession(Rotate(), o);
  ASSERT_NE(s, nullptr);
  const int64_t want = NativeRotate(16, 1, 10, 100);
  for (int run = 0; run < 60; ++run) {
    RunStats stats;
    ASSERT_EQ(RunResult(s.get(), {{"n", I(16)}}, &stats).scalar<int64_t>(), want) << "run " << run;
    ASSERT_EQ(stats.live_frames_after_run, 0) << "run " << run;
  }
}

INSTANTIATE_TEST_SUITE_P(Workers, CallSiteRaceTest, ::testing::Values(2, 8), exec_test::WorkersName);

}  // namespace
}  // namespace tdf
