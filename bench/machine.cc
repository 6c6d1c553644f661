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

void PinToCpu(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  (void)pthread_setaffinity_np(pthread_self(), sizeof(set), &set);  // best effort
}

double OneBurst(int round_trips) {
  alignas(64) std::atomic<int> turn{0};
  std::thread echo([&] {
    PinToCpu(1);
    for (int i = 0; i < round_trips; ++i) {
      while (turn.load(std::memory_order_acquire) != 2 * i + 1) {
      }
      turn.store(2 * i + 2, std::memory_order_release);
    }
  });
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < round_trips; ++i) {
    turn.store(2 * i + 1, std::memory_order_release);
    while (turn.load(std::memory_order_acquire) != 2 * i + 2) {
    }
  }
  const auto end = std::chrono::steady_clock::now();
  echo.join();
  return std::chrono::duration<double, std::nano>(end - start).count() / round_trips;
}

}  // namespace

double CoreToCoreRoundTripNs() {
  if (std::thread::hardware_concurrency() < 2) return std::numeric_limits<double>::quiet_NaN();
  double result = std::numeric_limits<double>::quiet_NaN();
  // Pinned for the probe only: the caller's own affinity comes back after.
  std::thread probe([&] {
    PinToCpu(0);
    std::vector<double> bursts;
    for (int b = 0; b < 3; ++b) bursts.push_back(OneBurst(50000));
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
