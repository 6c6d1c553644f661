// Seeded structural mutation of runnable graphs (mutated_graphs.h says what
// every mutant must do and how the test is split): the mutants themselves,
// 4000 seeds drawn from the reference programs, and the known crashers,
// each in a child process.
//
// TDF_MUTATED_GRAPHS_SEED=<seed> runs one mutant alone and prints its graph
// (text form) and every outcome: the way to reproduce a failure.
// TDF_MUTATED_GRAPHS_RANGE=<first>-<end> runs other seeds, and
// TDF_MUTATED_GRAPHS_SKIP=<seed>,... leaves some out (to hunt past a crash),
// TDF_MUTATED_GRAPHS_TRACE=1 names each seed on stderr as it starts. With
// any of them, run this test alone:
//
//   TDF_MUTATED_GRAPHS_SEED=17 build/release/tests/tdf_runtime_tests \
//     --gtest_filter=MutatedGraphsTest.EveryMutantEndsInAStatus
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "runtime/mutated_graphs.h"

namespace tdf {
namespace mutated_graphs {
namespace {

std::string Counts(const std::map<std::string, int>& m) {
  std::vector<std::string> parts;
  for (const auto& [k, v] : m) parts.push_back(absl::StrCat(k, " ", v));
  return parts.empty() ? "none" : absl::StrJoin(parts, ", ");
}

void PrintSummary(const Summary& sum, absl::Duration took) {
  std::printf(
      "mutants %d: Create failed %d (%s), created %d\n"
      "runs %d: OK %d, failed %s; deadline hits %d, max overrun %lld ms\n"
      "frames reclaimed after failed runs: %lld\n"
      "run errors naming no node: %s\nrun errors naming a node but no tag: %s\n"
      "Create errors naming no node or function: %s\ntook %s\n",
      sum.mutants, sum.create_failed, Counts(sum.create_codes).c_str(), sum.created, sum.runs, sum.runs_ok,
      Counts(sum.run_codes).c_str(), sum.deadline_hits, static_cast<long long>(sum.max_overrun_ms),
      static_cast<long long>(sum.frames_reclaimed_after_failures), Counts(sum.run_errors_without_node).c_str(),
      Counts(sum.run_errors_without_tag).c_str(), Counts(sum.create_errors_without_node).c_str(),
      absl::FormatDuration(took).c_str());
  for (const std::string& e : sum.examples_without_node) std::printf("  no node: %s\n", e.c_str());
  for (const std::string& e : sum.examples_without_tag) std::printf("  no tag: %s\n", e.c_str());
  std::fflush(stdout);
}

TEST(MutatedGraphsTest, EveryMutantEndsInAStatus) {
  InstallCrashReporter();
  Watchdog watchdog;
  Summary sum;
  const absl::Time start = absl::Now();
  uint64_t first = 0, end = kNumMutants;
  bool chosen = false;  // a seed or range named by hand runs known crashers too
  if (const char* one = std::getenv("TDF_MUTATED_GRAPHS_SEED")) {
    first = std::strtoull(one, nullptr, 10);
    end = first + 1;
    chosen = true;
  } else if (const char* range = std::getenv("TDF_MUTATED_GRAPHS_RANGE")) {
    std::vector<std::string> bounds = absl::StrSplit(range, '-');
    first = std::strtoull(bounds[0].c_str(), nullptr, 10);
    end = bounds.size() > 1 ? std::strtoull(bounds[1].c_str(), nullptr, 10) : first + 1;
    chosen = true;
  }
  std::set<uint64_t> skip;
  if (const char* list = std::getenv("TDF_MUTATED_GRAPHS_SKIP"))
    for (absl::string_view s : absl::StrSplit(list, ',', absl::SkipEmpty()))
      skip.insert(std::strtoull(std::string(s).c_str(), nullptr, 10));
  for (uint64_t seed = first; seed < end; ++seed) {
    if (skip.count(seed) != 0) continue;
    const KnownBug* bug = FindKnownBug(seed);
    if (bug != nullptr && bug->crashes && !chosen) continue;  // KnownCrashers runs it
    RunMutant(sum, watchdog, seed);
  }
  PrintSummary(sum, absl::Now() - start);
  for (const std::string& b : sum.bad) ADD_FAILURE() << b;
}

// The known crashers, each alone in a child process (a memory error ends
// the child, not the other mutants' runs). Each must end like any other
// mutant; a failure shows the child's report.
TEST(MutatedGraphsTest, KnownCrashers) {
  ThreadsafeDeathTests style;
  for (const KnownBug& bug : kKnownBugs) {
    if (!bug.crashes) continue;
    SCOPED_TRACE(absl::StrCat("seed ", bug.seed, ": ", bug.note));
    EXPECT_EXIT(
        {
          InstallCrashReporter();
          Summary sum;
          {
            Watchdog watchdog;
            RunMutant(sum, watchdog, bug.seed);
          }
          for (const std::string& b : sum.bad) std::fprintf(stderr, "FAILURE: %s\n", b.c_str());
          std::fflush(stderr);
          std::_Exit(sum.bad.empty() ? 0 : 1);
        },
        ::testing::ExitedWithCode(0), "");
  }
}

}  // namespace
}  // namespace mutated_graphs
}  // namespace tdf
