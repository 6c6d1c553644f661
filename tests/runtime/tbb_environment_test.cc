// The executor tests run sessions with 1, 2 and 8 workers. oneTBB caps its
// worker pool at the machine's concurrency by default (one extra thread on a
// 2-core box), which would silently turn "8 workers" into 2 and hide the
// interleavings those tests exist to exercise. This environment lifts the
// cap for the whole test binary, as bench/main.cc does for benchmarks.
#include <gtest/gtest.h>

#include <memory>

#include "oneapi/tbb/global_control.h"

namespace tdf {
namespace {

class TbbWorkerCap : public ::testing::Environment {
 public:
  void SetUp() override {
    control_ = std::make_unique<tbb::global_control>(tbb::global_control::max_allowed_parallelism, kThreads);
  }
  void TearDown() override { control_.reset(); }

 private:
  // 8 workers for one session, plus the calling threads of the tests that
  // run several sessions at once.
  static constexpr size_t kThreads = 16;
  std::unique_ptr<tbb::global_control> control_;
};

::testing::Environment* const kTbbWorkerCap = ::testing::AddGlobalTestEnvironment(new TbbWorkerCap);

}  // namespace
}  // namespace tdf
