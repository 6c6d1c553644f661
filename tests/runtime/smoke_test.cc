#include <gtest/gtest.h>

#include "tdf/reference_programs.h"
#include "tdf/session.h"

namespace tdf {
namespace {

TEST(Smoke, Fib) {
  SessionOptions opts;
  auto s = Session::Create(reference::Fib(), opts);
  ASSERT_TRUE(s.ok()) << s.status();
  RunStats stats;
  auto out = (*s)->Run({{"n", Tensor::Scalar<int64_t>(10)}}, {"result"}, {}, &stats);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->at(0).scalar<int64_t>(), 89);
  EXPECT_EQ(stats.live_frames_after_run, 0);
}

}  // namespace
}  // namespace tdf
