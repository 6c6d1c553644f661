// A rank that exits early (#29 failures): its process ends in the middle
// of the job, without MPI_Finalize, while rank 0 waits in a run for its
// tokens. Open MPI (4.1, no fault tolerance) then ends the whole job:
// mpirun notices the exit and terminates the other ranks, so nothing
// hangs. Run only by the ctest entry Distributed.RankExitsEarly
// (TDF_TEST_RANK_EXIT=1), which passes on mpirun's message naming the
// exited rank and fails on its timeout; elsewhere it skips.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <thread>

#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "tdf/distributed.h"
#include "tdf/reference_programs.h"

namespace tdf {
namespace {

TEST(RankExit, ARankThatExitsMidJobEndsTheJob) {
  if (std::getenv("TDF_TEST_RANK_EXIT") == nullptr) GTEST_SKIP() << "run by Distributed.RankExitsEarly";
  Graph g = reference::Fib();
  // fib's body on the last rank: rank 0's run waits for its results.
  for (const auto& [name, f] : g.library.functions())
    for (NodeDef& n : g.library.FindMutable(name)->node) n.device = "rank:1";
  DistributedOptions options;
  // Long: the job must end through mpirun, well before the run's deadline.
  options.session.deadline = absl::Seconds(100);
  absl::StatusOr<std::unique_ptr<DistributedSession>> s = DistributedSession::Create(g, options);
  ASSERT_TRUE(s.ok()) << s.status();
  if ((*s)->rank() == 1) {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    std::fprintf(stderr, "rank 1 exits without finalizing MPI\n");
    std::fflush(stderr);
    std::_Exit(3);
  }
  if ((*s)->rank() == 0) {
    std::fprintf(stderr, "rank 0 runs, waiting for rank 1\n");
    std::fflush(stderr);
    absl::StatusOr<std::vector<Tensor>> got = (*s)->Run({{"n", Tensor::Scalar<int64_t>(30)}}, {"result"});
    // Reached only if mpirun let rank 0 live on: the run must have failed.
    EXPECT_FALSE(got.ok());
    std::fprintf(stderr, "rank 0's run returned: %s\n", got.status().ToString().c_str());
  }
}

}  // namespace
}  // namespace tdf
