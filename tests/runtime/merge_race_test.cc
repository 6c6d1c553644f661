// A Merge whose two inputs are both live fires with the first and drops the
// second. With several workers the second can arrive while the Merge is
// firing on another worker, which releases its input slots: the second must
// not write its slot then (a data race on the slot, and with tensors a
// buffer released twice or never). TSan caught it on a program from
// random_recursion_test.cc; this is its smallest form, with tensor values.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/exec_test_util.h"
#include "tdf/builder.h"
#include "tdf/session.h"

namespace tdf {
namespace {

using exec_test::Built;
using exec_test::I;
using exec_test::MakeSession;
using exec_test::OpCount;
using exec_test::Outs;

// f(x, n) = n > 0 ? Merge(x + 1, x + 1) + f(x, n - 1) : x = x + n (x + 1).
Graph TwoLiveInputs() {
  GraphBuilder b;
  (void)b.DefineFunction(
      FunctionSignature{"f", {{"x", DType::kFloat64}, {"n", DType::kInt64}}, {{"r", DType::kFloat64}}},
      [](GraphBuilder& f, const Outs& a) -> Outs {
        return f.Cond(
            f.Greater(a[1], f.Const<int64_t>(0)),
            [&] {
              Output u = f.Add(a[0], f.Const<double>(1.0));
              Output v = f.Add(a[0], f.Const<double>(1.0));
              Output m = f.Op("Merge", {u, v}, {{"T", DType::kFloat64}});
              return Outs{f.Add(m, f.Call("f", {a[0], f.Sub(a[1], f.Const<int64_t>(1))})[0])};
            },
            [&] { return Outs{a[0]}; });
      });
  Output x = b.Placeholder("x", DType::kFloat64);
  Output n = b.Placeholder("n", DType::kInt64);
  b.Identity(b.Call("f", {x, n})[0], "result");
  return Built(b);
}

class MergeRaceTest : public ::testing::TestWithParam<int> {};

TEST_P(MergeRaceTest, ASecondLiveInputIsDroppedWithoutTouchingTheFiringMerge) {
  const Graph g = TwoLiveInputs();
  const std::vector<double> x = {0.5, -2, 3, 7};
  constexpr int64_t kDepth = 6;
  for (bool general : {false, true}) {
    SCOPED_TRACE(absl::StrCat("collect_node_stats ", general));
    SessionOptions options;
    options.num_workers = GetParam();
    options.collect_node_stats = general;
    auto s = MakeSession(g, options);
    ASSERT_NE(s, nullptr);
    for (int run = 0; run < 200; ++run) {
      RunStats st;
      auto out = s->Run({{"x", *Tensor::FromVector<double>(x, Shape({4}))}, {"n", I(kDepth)}}, {"result"}, {}, &st);
      ASSERT_TRUE(out.ok()) << out.status();
      for (int i = 0; i < 4; ++i) EXPECT_EQ((*out)[0].data<double>()[i], x[i] + kDepth * (x[i] + 1)) << i;
      // The two-input Merge once per invocation that recurses; the others
      // (arguments, the Cond's result) are forwarded.
      EXPECT_EQ(OpCount(st, "Merge").first, kDepth);
      EXPECT_EQ(st.live_frames_after_run, 0);
      if (HasFailure()) return;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Workers, MergeRaceTest, ::testing::Values(2, 8), exec_test::WorkersName);

}  // namespace
}  // namespace tdf
