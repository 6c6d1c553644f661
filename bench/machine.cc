#include "machine.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <limits>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace tdf_bench {
namespace {

bool PinToCpu(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof(set), &set) == 0;
}

// The first two CPUs this process may run on, or false. Two spinning threads
// on one CPU would each wait out a scheduler time slice per round trip.
bool TwoAllowedCpus(int* a, int* b) {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return false;
  int found = 0;
  for (int cpu = 0; cpu < CPU_SETSIZE && found < 2; ++cpu) {
    if (!CPU_ISSET(cpu, &set)) continue;
    (found == 0 ? *a : *b) = cpu;
    ++found;
  }
  return found == 2;
}

constexpr auto kBurstBudget = std::chrono::milliseconds(200);

// NaN when the burst ran out of time budget (the echo thread is checked
// against the same deadline, so neither spins forever).
double OneBurst(int cpu_echo, int round_trips) {
  alignas(64) std::atomic<int> turn{0};
  std::atomic<bool> give_up{false};
  const auto deadline = std::chrono::steady_clock::now() + kBurstBudget;
  std::thread echo([&] {
    PinToCpu(cpu_echo);
    for (int i = 0; i < round_trips; ++i) {
      while (turn.load(std::memory_order_acquire) != 2 * i + 1) {
        if (give_up.load(std::memory_order_relaxed)) return;
      }
      turn.store(2 * i + 2, std::memory_order_release);
    }
  });
  const auto start = std::chrono::steady_clock::now();
  int done = 0;
  for (; done < round_trips; ++done) {
    turn.store(2 * done + 1, std::memory_order_release);
    while (turn.load(std::memory_order_acquire) != 2 * done + 2) {
      if ((done & 255) == 0 && std::chrono::steady_clock::now() > deadline) break;
    }
    if (turn.load(std::memory_order_acquire) != 2 * done + 2) break;
  }
  const auto end = std::chrono::steady_clock::now();
  give_up.store(true, std::memory_order_relaxed);
  echo.join();
  if (done < round_trips) return std::numeric_limits<double>::quiet_NaN();
  return std::chrono::duration<double, std::nano>(end - start).count() / round_trips;
}

}  // namespace

double CoreToCoreRoundTripNs() {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  int cpu_a = 0, cpu_b = 0;
  if (!TwoAllowedCpus(&cpu_a, &cpu_b)) return nan;
  double result = nan;
  // Pinned for the probe only: the caller's own affinity is untouched.
  std::thread probe([&] {
    if (!PinToCpu(cpu_a)) return;
    std::vector<double> bursts;
    for (int b = 0; b < 3; ++b) {
      const double ns = OneBurst(cpu_b, 50000);
      if (std::isnan(ns)) return;
      bursts.push_back(ns);
    }
    std::sort(bursts.begin(), bursts.end());
    result = bursts[1];
  });
  probe.join();
  return result;
}

std::string MachineLine(double round_trip_start_ns, double round_trip_end_ns) {
  std::string line = absl::StrCat(std::thread::hardware_concurrency(), " hardware threads");
  if (!std::isnan(round_trip_start_ns)) {
    absl::StrAppend(&line, absl::StrFormat("; core-to-core round trip %.0f ns (start)", round_trip_start_ns));
    if (!std::isnan(round_trip_end_ns)) absl::StrAppend(&line, absl::StrFormat(" / %.0f ns (end)", round_trip_end_ns));
  }
  return line;
}

}  // namespace tdf_bench
