// File: bench/tbb_baseline.cc
#include "tbb_baseline.h"

#include <map>
#include <memory>
#include <mutex>

#include "oneapi/tbb/global_control.h"
#include "oneapi/tbb/task_arena.h"
#include "oneapi/tbb/task_group.h"

namespace tdf_bench {
namespace tbb_baseline {
namespace {

// Runs f() as a task of its own group and waits: one call, one task.
template <typename F>
int64_t Call(F&& f) {
  int64_t r = 0;
  tbb::task_group g;
  g.run([&] { r = f(); });
  g.wait();
  return r;
}

int64_t FibBody(int64_t n) {
  if (n <= 1) return 1;
  int64_t x = 0, y = 0;
  tbb::task_group g;
  g.run([&] { x = FibBody(n - 1); });
  g.run([&] { y = FibBody(n - 2); });
  g.wait();
  return x + y;
}

int64_t AckBody(int64_t m, int64_t n) {
  if (m == 0) return n + 1;
  if (n == 0) return Call([&] { return AckBody(m - 1, 1); });
  int64_t inner = Call([&] { return AckBody(m, n - 1); });
  return Call([&] { return AckBody(m - 1, inner); });
}

int64_t TakBody(int64_t x, int64_t y, int64_t z) {
  if (!(y < x)) return z;
  int64_t a = 0, b = 0, c = 0;
  tbb::task_group g;
  g.run([&] { a = TakBody(x - 1, y, z); });
  g.run([&] { b = TakBody(y - 1, z, x); });
  g.run([&] { c = TakBody(z - 1, x, y); });
  g.wait();
  return Call([&] { return TakBody(a, b, c); });
}

int64_t IsPrimeBody(int64_t n, int64_t d) {
  if (d * d > n) return 1;
  if (n % d == 0) return 0;
  return Call([&] { return IsPrimeBody(n, d + 1); });
}

int64_t NthBody(int64_t k, int64_t c) {
  int64_t prime = Call([&] { return IsPrimeBody(c, 2); });
  if (prime) {
    if (k == 1) return c;
    return Call([&] { return NthBody(k - 1, c + 1); });
  }
  return Call([&] { return NthBody(k, c + 1); });
}

int64_t SumBody(int64_t n) {
  if (n == 0) return 0;
  return n + Call([&] { return SumBody(n - 1); });
}

}  // namespace

std::shared_ptr<void> ConfigureThreadStack(size_t bytes) {
  return std::make_shared<tbb::global_control>(tbb::global_control::thread_stack_size, bytes);
}

std::shared_ptr<void> AllowParallelism(int threads) {
  return std::make_shared<tbb::global_control>(tbb::global_control::max_allowed_parallelism,
                                               static_cast<size_t>(threads));
}

int64_t RunInArena(int threads, const std::function<int64_t()>& fn) {
  static std::mutex mu;
  static std::map<int, std::unique_ptr<tbb::task_arena>>* arenas =
      new std::map<int, std::unique_ptr<tbb::task_arena>>();
  tbb::task_arena* arena;
  {
    std::lock_guard<std::mutex> lock(mu);
    std::unique_ptr<tbb::task_arena>& slot = (*arenas)[threads];
    if (!slot) {
      // One slot reserved for the calling thread: with threads == 1 the
      // caller runs every task itself.
      slot = std::make_unique<tbb::task_arena>(threads, 1);
      slot->initialize();
    }
    arena = slot.get();
  }
  int64_t r = 0;
  arena->execute([&] { r = fn(); });
  return r;
}

int64_t Fib(int64_t n) { return Call([&] { return FibBody(n); }); }
int64_t Ack(int64_t m, int64_t n) { return Call([&] { return AckBody(m, n); }); }
int64_t Tak(int64_t x, int64_t y, int64_t z) { return Call([&] { return TakBody(x, y, z); }); }
int64_t Primes(int64_t n) { return Call([&] { return NthBody(n, 2); }); }
int64_t Sum(int64_t n) { return Call([&] { return SumBody(n); }); }

}  // namespace tbb_baseline
}  // namespace tdf_bench
