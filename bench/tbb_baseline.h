// File: bench/tbb_baseline.h
//
// The oneTBB baseline: the benchmark programs with tbb::task_group, one task
// per call and no cutoff, so that the comparison with tdf is task runtime
// against task runtime. Every call (the outermost included) is run as a task
// of a fresh task_group that its caller waits on; independent calls (fib's
// two, tak's three inner ones) are spawned into the same group so they can
// run in parallel. ack and primes are chains: their calls are still tasks,
// each waited on by its caller.
#ifndef TDF_BENCH_TBB_BASELINE_H_
#define TDF_BENCH_TBB_BASELINE_H_

#include <cstdint>
#include <functional>
#include <memory>

namespace tdf_bench {
namespace tbb_baseline {

// Stack size for TBB worker threads: the chains above nest one task_group
// wait per call, so primes(10^4) and sum(n) need a deep C stack. Call once,
// before any other TBB use, and keep the returned object alive.
std::shared_ptr<void> ConfigureThreadStack(size_t bytes);

// Lets arenas have `threads` threads even beyond the hardware's count (TBB
// caps workers at hardware_concurrency - 1 otherwise, so --workers=N on a
// small machine would silently run fewer). Keep the returned object alive.
std::shared_ptr<void> AllowParallelism(int threads);

// Runs fn inside a task arena of `threads` threads (cached per count).
int64_t RunInArena(int threads, const std::function<int64_t()>& fn);

int64_t Fib(int64_t n);
int64_t Ack(int64_t m, int64_t n);
int64_t Tak(int64_t x, int64_t y, int64_t z);
int64_t Primes(int64_t n);
int64_t Sum(int64_t n);

}  // namespace tbb_baseline
}  // namespace tdf_bench

#endif  // TDF_BENCH_TBB_BASELINE_H_
