// Running out of memory ends a run, or a Session::Create, with
// RESOURCE_EXHAUSTED and never the process (issue #26, item 4). Each test
// runs in a child process (a death test) that lowers its address-space
// limit (RLIMIT_AS) to what it already maps plus a little, then asks for
// more: allocations fail as they would on a machine without the memory
// (malloc returns null, operator new throws std::bad_alloc). Before, the
// std::bad_alloc of a dynamic-mode recursion that needed more ended the
// process with "terminate called after throwing an instance of
// 'std::bad_alloc'" (exit 134). Skipped under the sanitizers, which map
// terabytes of shadow memory and fail on their own once limited.
// tests/oom/ injects one failing allocation at a time into every run path.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "runtime/exec_test_util.h"
#include "tdf/reference_programs.h"
#include "tdf/session.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define TDF_OOM_TEST_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
#define TDF_OOM_TEST_SANITIZER 1
#endif
#endif

namespace tdf {
namespace {

using exec_test::I;

// The process's mapped address space now (VmSize), in bytes.
int64_t MappedBytes() {
  std::ifstream status("/proc/self/status");
  std::string key;
  while (status >> key) {
    int64_t kib = 0;
    if (key == "VmSize:" && status >> kib) return kib * 1024;
    status.ignore(1 << 20, '\n');
  }
  return -1;
}

// Lowers the soft address-space limit to what is mapped now plus
// `headroom`; false when it cannot.
bool LimitAddressSpace(int64_t headroom) {
  const int64_t mapped = MappedBytes();
  if (mapped < 0) return false;
  rlimit limit{};
  if (getrlimit(RLIMIT_AS, &limit) != 0) return false;
  limit.rlim_cur = static_cast<rlim_t>(mapped + headroom);
  return setrlimit(RLIMIT_AS, &limit) == 0;
}

// Lifts the soft limit back to the hard one.
void UnlimitAddressSpace() {
  rlimit limit{};
  getrlimit(RLIMIT_AS, &limit);
  limit.rlim_cur = limit.rlim_max;
  setrlimit(RLIMIT_AS, &limit);
}

// Headroom over what a process maps before the run: far less than the
// runs below need, enough for anything else.
constexpr int64_t kHeadroom = int64_t{192} << 20;

// In the child: sum(n) in dynamic mode (a frame and a copy of the body per
// call: about 1 KB a level) at a depth that needs gigabytes, under the
// limit. Exits 0 when the run failed with RESOURCE_EXHAUSTED and the same
// session then runs a small sum right, printing the status either way.
void DeepDynamicRecursionUnderALimit(int workers) {
  SessionOptions options;
  options.mode = ExecutionMode::kDynamic;
  options.num_workers = workers;
  absl::StatusOr<std::unique_ptr<Session>> session = Session::Create(reference::Sum(), options);
  if (!session.ok()) std::exit(3);
  // The arena's threads (and their malloc arenas) start before the limit.
  absl::StatusOr<std::vector<Tensor>> warm = (*session)->Run({{"n", I(10'000)}}, {"result"});
  if (!warm.ok()) std::exit(4);
  if (!LimitAddressSpace(kHeadroom)) std::exit(5);
  absl::StatusOr<std::vector<Tensor>> out = (*session)->Run({{"n", I(1'900'000)}}, {"result"});
  UnlimitAddressSpace();
  std::fprintf(stderr, "%s\n", out.status().ToString().c_str());
  if (out.status().code() != absl::StatusCode::kResourceExhausted) std::exit(1);
  // The failed run's frames are gone and the session is whole.
  absl::StatusOr<std::vector<Tensor>> again = (*session)->Run({{"n", I(10'000)}}, {"result"});
  if (!again.ok() || again->at(0).scalar<int64_t>() != reference::NativeSum(10'000)) std::exit(2);
  std::exit(0);
}

class OutOfMemoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
#ifdef TDF_OOM_TEST_SANITIZER
    GTEST_SKIP() << "the sanitizers' shadow memory does not fit an address-space limit";
#endif
    // A fresh process (re-executed), not a fork of one with threads.
    GTEST_FLAG_SET(death_test_style, "threadsafe");
  }
};

// The message names what ran out: the node, its op and the tag.
constexpr char kNamesTheNode[] = "RESOURCE_EXHAUSTED: node '[^']+' \\([A-Za-z]+\\).* at tag .*out of memory";

TEST_F(OutOfMemoryTest, DeepDynamicRecursionEndsResourceExhausted) {
  EXPECT_EXIT(DeepDynamicRecursionUnderALimit(1), ::testing::ExitedWithCode(0), kNamesTheNode);
}

TEST_F(OutOfMemoryTest, DeepDynamicRecursionEndsResourceExhaustedAtTwoWorkers) {
  EXPECT_EXIT(DeepDynamicRecursionUnderALimit(2), ::testing::ExitedWithCode(0), kNamesTheNode);
}

// In the child: Session::Create of a chain of 3 * 10^5 ops, whose
// compilation takes a few hundred MB, under a limit of 64 MB more.
void CreateUnderALimit() {
  const Graph chain = reference::OpChain(300'000);
  if (!LimitAddressSpace(int64_t{64} << 20)) std::exit(5);
  absl::StatusOr<std::unique_ptr<Session>> session = Session::Create(chain);
  UnlimitAddressSpace();
  std::fprintf(stderr, "%s\n", session.status().ToString().c_str());
  std::exit(session.status().code() == absl::StatusCode::kResourceExhausted ? 0 : 1);
}

TEST_F(OutOfMemoryTest, SessionCreateEndsResourceExhausted) {
  EXPECT_EXIT(CreateUnderALimit(), ::testing::ExitedWithCode(0), "RESOURCE_EXHAUSTED: .*out of memory");
}

}  // namespace
}  // namespace tdf
