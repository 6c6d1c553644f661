// File: bench/cases.cc
//
// The benchmark cases: the paper's table 1 (seeds/002 §6.1, with its
// published times) and the scaling cases of issue #5, full and --quick.
#include <map>
#include <mutex>
#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "benchmark/benchmark.h"
#include "harness.h"
#include "native.h"
#include "tbb_baseline.h"

namespace tdf_bench {
namespace {

Case Make(const std::string& family, std::vector<int64_t> args, double plot_x = kNaN, double paper_static = kNaN,
          double paper_dynamic = kNaN) {
  Case c;
  c.family = family;
  c.args = std::move(args);
  c.label = absl::StrCat(family, "(", absl::StrJoin(c.args, ","), ")");
  c.name = absl::StrCat(family, "/", absl::StrJoin(c.args, "/"));
  c.plot_x = plot_x;
  c.paper_static_s = paper_static;
  c.paper_dynamic_s = paper_dynamic;
  return c;
}

// A family name the switch does not know is a bug in this file.
[[noreturn]] void UnknownFamily(const std::string& family) {
  std::fprintf(stderr, "tdf_bench: no such benchmark family '%s'\n", family.c_str());
  std::abort();
}

}  // namespace

std::string Variant::Key() const {
  switch (kind) {
    case Kind::kNative: return "native";
    case Kind::kTbb: return absl::StrCat("tbb/", workers, "w");
    case Kind::kStatic: return absl::StrCat("static/", workers, "w");
    case Kind::kDynamic: return absl::StrCat("dynamic/", workers, "w");
  }
  return "?";
}

std::string Variant::Description() const {
  switch (kind) {
    case Kind::kNative: return "native";
    case Kind::kTbb: return absl::StrCat("oneTBB ", workers, "w");
    case Kind::kStatic: return absl::StrCat("static ", workers, "w");
    case Kind::kDynamic: return absl::StrCat("dynamic ", workers, "w");
  }
  return "?";
}

std::vector<Case> PaperCases(bool quick) {
  std::vector<Case> cases;
  if (quick) {
    for (int64_t n : {20, 22, 24}) cases.push_back(Make("fib", {n}, n));
    cases.back().paper_static_s = 0.812;  // fib(24)
    cases.back().paper_dynamic_s = 0.990;
    cases.push_back(Make("ack", {2, 3}));
    cases.push_back(Make("ack", {3, 3}, 3, 0.089, 0.118));
    cases.push_back(Make("ack", {3, 4}, 4, 0.348, 0.503));
    for (int64_t x : {16, 17, 18}) cases.push_back(Make("tak", {x, 12, 6}, x));
    cases.push_back(Make("primes", {300}, 300));
    cases.push_back(Make("primes", {500}, 500));
    return cases;
  }
  // seeds/002 table 1: static and dynamic seconds.
  const double fib_times[][2] = {{0.812, 0.990},   {1.259, 1.629},   {2.127, 2.572},   {3.295, 4.178},
                                 {5.338, 6.739},   {8.614, 10.937},  {13.968, 17.801}, {22.717, 28.610},
                                 {37.446, 46.855}, {61.287, 75.646}};
  for (int64_t n = 24; n <= 33; ++n) {
    cases.push_back(Make("fib", {n}, n, fib_times[n - 24][0], fib_times[n - 24][1]));
  }
  const double ack_times[][2] = {{0.089, 0.118}, {0.348, 0.503},   {1.511, 2.095},
                                 {6.165, 8.323}, {25.489, 33.147}, {100.882, 128.955}};
  for (int64_t n = 3; n <= 8; ++n) cases.push_back(Make("ack", {3, n}, n, ack_times[n - 3][0], ack_times[n - 3][1]));
  cases.push_back(Make("tak", {24, 16, 8}, 24, 18.881, 16.075));
  cases.push_back(Make("tak", {25, 16, 8}, 25, 29.545, 25.394));
  cases.push_back(Make("tak", {26, 16, 8}, 26, 45.218, 38.722));
  cases.push_back(Make("tak", {27, 16, 8}, 27, 67.757, 57.876));
  cases.push_back(Make("tak", {27, 17, 8}, kNaN, 188.506, 159.778));  // off the x = first-argument line
  const double primes_times[][2] = {{13.502, 13.458}, {14.836, 14.784}, {16.268, 16.076},
                                    {17.556, 17.348}, {18.868, 18.912}, {20.636, 20.378}};
  for (int i = 0; i < 6; ++i) {
    int64_t n = 7500 + 500 * i;
    cases.push_back(Make("primes", {n}, n, primes_times[i][0], primes_times[i][1]));
  }
  return cases;
}

std::vector<Case> ScalingCases(bool quick) {
  std::vector<Case> cases;
  std::vector<int64_t> sums = quick ? std::vector<int64_t>{1000, 10000, 100000}
                                    : std::vector<int64_t>{1000, 10000, 100000, 1000000};
  for (int64_t n : sums) cases.push_back(Make("sum", {n}, n));
  for (int64_t n : quick ? std::vector<int64_t>{100} : std::vector<int64_t>{1000, 10000}) {
    Case c = Make("callinwhile", {n});
    c.tbb = false;
    cases.push_back(c);
  }
  for (int64_t n : quick ? std::vector<int64_t>{50} : std::vector<int64_t>{100, 1000}) {
    Case c = Make("whileinfunction", {n});
    c.tbb = false;
    cases.push_back(c);
  }
  // chain's quick length is 10^4: GraphBuilder names nodes by scanning all
  // earlier ones, so building the chain is quadratic (10^5 nodes: ~40 s).
  const int64_t length = quick ? 100000 : 1000000;
  const int64_t chain_length = quick ? 10000 : 1000000;
  Case loop = Make("while", {length});
  loop.unit = "iters";
  loop.tbb = false;
  loop.dynamic = false;  // no functions: dynamic mode would run the same graph
  cases.push_back(loop);
  Case chain = Make("chain", {chain_length, 0});
  chain.label = absl::StrCat("chain(", chain_length, ")");
  chain.name = absl::StrCat("chain/", chain_length);
  chain.unit = "ops";
  chain.tbb = false;
  chain.dynamic = false;
  cases.push_back(chain);
  return cases;
}

namespace {

int64_t ComputeExpected(const Case& c) {
  const std::vector<int64_t>& a = c.args;
  if (c.family == "fib") return native::FibOracle(a[0]);
  if (c.family == "ack") return native::AckOracle(a[0], a[1]);
  if (c.family == "tak") return native::Tak(a[0], a[1], a[2]);
  if (c.family == "primes") return native::PrimesOracle(a[0]);
  if (c.family == "sum") return native::SumOracle(a[0]);
  if (c.family == "while") return a[0];
  if (c.family == "chain") return a[1] + a[0];
  if (c.family == "callinwhile") {
    int64_t s = 0;
    for (int64_t i = 0; i < a[0]; ++i) s += native::FibOracle(i % 10);
    return s;
  }
  if (c.family == "whileinfunction") return native::WhileInFunctionOracle(a[0]);
  UnknownFamily(c.family);
}

int64_t ComputeCalls(const Case& c) {
  const std::vector<int64_t>& a = c.args;
  if (c.family == "fib") return native::FibCalls(a[0]);
  if (c.family == "ack") return native::AckCalls(a[0], a[1]);
  if (c.family == "tak") return native::TakCalls(a[0], a[1], a[2]);
  if (c.family == "primes") return native::PrimesCalls(a[0]);
  if (c.family == "sum") return native::SumCalls(a[0]);
  if (c.family == "while") return a[0];
  if (c.family == "chain") return a[0];
  if (c.family == "callinwhile") return native::CallInWhileCalls(a[0]);
  if (c.family == "whileinfunction") return native::WhileInFunctionCalls(a[0]);
  UnknownFamily(c.family);
}

template <typename F>
int64_t Cached(std::map<std::string, int64_t>& cache, const Case& c, F compute) {
  static std::mutex mu;
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = cache.find(c.name);
    if (it != cache.end()) return it->second;
  }
  int64_t v = compute(c);
  std::lock_guard<std::mutex> lock(mu);
  cache[c.name] = v;
  return v;
}

}  // namespace

int64_t Expected(const Case& c) {
  static std::map<std::string, int64_t> cache;
  return Cached(cache, c, ComputeExpected);
}

int64_t Calls(const Case& c) {
  static std::map<std::string, int64_t> cache;
  return Cached(cache, c, ComputeCalls);
}

int64_t RunNative(const Case& c) {
  // Arguments go through DoNotOptimize so no call sees a constant.
  std::vector<int64_t> a = c.args;
  for (int64_t& v : a) benchmark::DoNotOptimize(v);
  if (c.family == "fib") return native::Fib(a[0]);
  if (c.family == "ack") return native::Ack(a[0], a[1]);
  if (c.family == "tak") return native::Tak(a[0], a[1], a[2]);
  if (c.family == "primes") return native::Primes(a[0]);
  if (c.family == "sum") return native::Sum(a[0]);
  if (c.family == "while") return native::WhileLoop(a[0]);
  if (c.family == "chain") return native::OpChain(a[1], a[0]);
  if (c.family == "callinwhile") return native::CallInWhile(a[0]);
  if (c.family == "whileinfunction") return native::WhileInFunction(a[0]);
  UnknownFamily(c.family);
}

int64_t RunTbb(const Case& c, int workers) {
  std::vector<int64_t> a = c.args;
  for (int64_t& v : a) benchmark::DoNotOptimize(v);
  return tbb_baseline::RunInArena(workers, [&]() -> int64_t {
    if (c.family == "fib") return tbb_baseline::Fib(a[0]);
    if (c.family == "ack") return tbb_baseline::Ack(a[0], a[1]);
    if (c.family == "tak") return tbb_baseline::Tak(a[0], a[1], a[2]);
    if (c.family == "primes") return tbb_baseline::Primes(a[0]);
    if (c.family == "sum") return tbb_baseline::Sum(a[0]);
    UnknownFamily(c.family + " (oneTBB)");
  });
}

}  // namespace tdf_bench
