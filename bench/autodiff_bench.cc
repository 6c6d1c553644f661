// tdf_autodiff_bench: the thesis' depth test (seeds/003 §4) — gradient
// descent on exp(x, n) = n == 0 ? 1 : x * exp(x, n - 1), where d/dx = n x^(n-1).
//
// Variants, each one SGD step per benchmark iteration on one Session:
//   forward  exp(w, n) alone (the reference cost of the forward pass)
//   fused    AddGradients: each call of exp and its gradient call share one
//            invocation of exp_ext; forward values wait in the frame
//   fused_eval  the fused training graph, fetching the loss only: the run
//            leaves the step out, and the gradient (it drains as dead
//            firings; SessionOptions::evaluate_without_gradients)
//   fused_eval_whole  the same with evaluate_without_gradients off: the
//            gradient runs live, the step does not
//   naive    a hand-written gradient function dexp(x, n) = n == 0 ? 0 :
//            exp(x, n - 1) + x * dexp(x, n - 1), a separate recursive
//            function that recomputes the forward values (O(n^2) calls)
//   unrolled the product x * x * ... * x built as n Muls in the main graph,
//            differentiated as straight-line code (builder cost limits n)
//
// Counters: us_per_step (wall), user_us_per_step (process user CPU, all
// threads), firings per step, peak_live_frames (frames alive at once — the
// memory that grows with n) and peak_frame_bytes_est (not measured: frames ×
// nodes); maxrss_mb is the process high-water mark after the case (monotone
// over the run: read it in case order).
//
//   tdf_autodiff_bench [--quick] [google benchmark flags]
//   --quick: n up to 10^3 (default: up to 10^6; naive up to 10^3, unrolled 10^4).
#include <sys/resource.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "tdf/autodiff.h"
#include "tdf/builder.h"
#include "tdf/session.h"

namespace {

using tdf::DType;
using tdf::GraphBuilder;
using tdf::Output;

constexpr DType kF = DType::kFloat64;
constexpr DType kI = DType::kInt64;
constexpr double kLearningRate = 1e-12;  // keeps w ~ 1: x^n neither overflows nor underflows

void DefineExp(GraphBuilder& b) {
  (void)b.DefineFunction({"exp", {{"x", kF}, {"n", kI}}, {{"y", kF}}},
                         [](GraphBuilder& f, const std::vector<Output>& a) -> std::vector<Output> {
                           return f.Cond(
                               f.Equal(a[1], f.Const<int64_t>(0)),
                               [&] { return std::vector<Output>{f.Const<double>(1.0)}; },
                               [&] {
                                 return std::vector<Output>{
                                     f.Mul(a[0], f.Call("exp", {a[0], f.Sub(a[1], f.Const<int64_t>(1))})[0])};
                               });
                         });
}

// dexp(x, n) = n == 0 ? 0 : exp(x, n-1) + x * dexp(x, n-1)
void DefineNaiveGradient(GraphBuilder& b) {
  (void)b.DefineFunction({"dexp", {{"x", kF}, {"n", kI}}, {{"dy", kF}}},
                         [](GraphBuilder& f, const std::vector<Output>& a) -> std::vector<Output> {
                           return f.Cond(
                               f.Equal(a[1], f.Const<int64_t>(0)),
                               [&] { return std::vector<Output>{f.Const<double>(0.0)}; },
                               [&] {
                                 Output m = f.Sub(a[1], f.Const<int64_t>(1));
                                 return std::vector<Output>{f.Add(f.Call("exp", {a[0], m})[0],
                                                                  f.Mul(a[0], f.Call("dexp", {a[0], m})[0]))};
                               });
                         });
}

struct Case {
  std::unique_ptr<tdf::Session> session;
  std::vector<std::pair<std::string, tdf::Tensor>> feeds;
  std::vector<std::string> fetches;  // [loss, gradient]
  std::vector<std::string> targets;
};

absl::StatusOr<Case> Build(const std::string& variant, int64_t n) {
  GraphBuilder b;
  DefineExp(b);
  if (variant == "naive") DefineNaiveGradient(b);
  Output w = b.Variable("w", tdf::Tensor::Scalar<double>(1.0));
  Output rw = b.Read(w);
  Output nn = b.Placeholder("n", kI);
  Output loss;
  if (variant == "unrolled") {
    loss = rw;
    for (int64_t i = 1; i < n; ++i) loss = b.Mul(loss, rw);
  } else {
    loss = b.Call("exp", {rw, nn})[0];
  }
  b.Identity(loss, "loss");
  std::string grad;
  if (variant == "naive") grad = b.Name(b.Identity(b.Call("dexp", {rw, nn})[0], "dloss"));
  absl::StatusOr<tdf::Graph> g = b.Build();
  if (!g.ok()) return g.status();
  Case c;
  c.fetches = {"loss"};
  const bool eval = variant == "fused_eval" || variant == "fused_eval_whole";
  const bool fused = variant == "fused" || eval;
  if (fused || variant == "unrolled") {
    absl::StatusOr<std::vector<std::string>> dx = tdf::AddGradients(*g, {"loss"}, {b.Name(rw)});
    if (!dx.ok()) return dx.status();
    grad = (*dx)[0];
  }
  if (!grad.empty()) {
    absl::StatusOr<std::string> step = tdf::AddSgdStep(*g, {"w"}, {grad}, kLearningRate);
    if (!step.ok()) return step.status();
    if (!eval) {
      c.targets = {*step};
      c.fetches.push_back(grad);
    }
  }
  tdf::SessionOptions opts;
  opts.num_workers = 1;
  opts.evaluate_without_gradients = variant != "fused_eval_whole";
  absl::StatusOr<std::unique_ptr<tdf::Session>> s = tdf::Session::Create(*g, opts);
  if (!s.ok()) return s.status();
  c.session = *std::move(s);
  c.feeds = {{"n", tdf::Tensor::Scalar<int64_t>(n)}};
  return c;
}

double UserSeconds() {
  rusage u;
  getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_utime.tv_usec * 1e-6;
}

double MaxRssMb() {
  rusage u;
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss / 1024.0;
}

void RunCase(benchmark::State& state, const std::string& variant, int64_t n) {
  absl::StatusOr<Case> c = Build(variant, n);
  if (!c.ok()) {
    state.SkipWithError(std::string(c.status().message()).c_str());
    return;
  }
  // Check the answer once: d/dw w^n at w = 1 is n.
  {
    auto out = c->session->Run(c->feeds, c->fetches, {});
    if (!out.ok()) {
      state.SkipWithError(std::string(out.status().message()).c_str());
      return;
    }
    if (out->size() > 1 && std::abs((*out)[1].scalar<double>() - static_cast<double>(n)) > 1e-6 * n) {
      state.SkipWithError("wrong gradient");
      return;
    }
  }
  tdf::RunStats stats;
  int64_t steps = 0, peak_frames = 0, firings = 0;
  const double user0 = UserSeconds();
  const auto t0 = std::chrono::steady_clock::now();
  for (auto _ : state) {
    auto out = c->session->Run(c->feeds, c->fetches, c->targets, &stats);
    if (!out.ok() || stats.live_frames_after_run != 0) {
      state.SkipWithError(out.ok() ? "frames leaked" : std::string(out.status().message()).c_str());
      return;
    }
    ++steps;
    peak_frames = std::max(peak_frames, stats.peak_live_frames);
    firings = stats.firings;
  }
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double user = UserSeconds() - user0;
  state.counters["n"] = static_cast<double>(n);
  state.counters["us_per_step"] = wall / steps * 1e6;
  state.counters["user_us_per_step"] = user / steps * 1e6;
  state.counters["firings_per_step"] = static_cast<double>(firings);
  state.counters["peak_live_frames"] = static_cast<double>(peak_frames);
  state.counters["maxrss_mb"] = MaxRssMb();
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false;
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) {
      quick = true;
      continue;
    }
    args.push_back(argv[i]);
  }
  int nargs = static_cast<int>(args.size());
  std::vector<int64_t> sizes = {10, 100, 1000};
  if (!quick) {
    sizes.push_back(10000);
    sizes.push_back(100000);
    // Past the caches: 10^5 frames no longer fit in L3, and 10^6 shows
    // whether the cost per level stays flat beyond that cliff.
    sizes.push_back(1000000);
  }
  for (const char* variant : {"forward", "fused", "fused_eval", "fused_eval_whole", "naive", "unrolled"}) {
    for (int64_t n : sizes) {
      if (std::strcmp(variant, "naive") == 0 && n > 1000) continue;      // O(n^2) calls per step
      if (std::strcmp(variant, "unrolled") == 0 && n > 10000) continue;  // the builder is quadratic in nodes
      std::string v = variant;
      benchmark::RegisterBenchmark(("exp_grad/" + v + "/" + std::to_string(n)).c_str(),
                                   [v, n](benchmark::State& s) { RunCase(s, v, n); })
          ->Unit(benchmark::kMicrosecond)
          ->UseRealTime();
    }
  }
  benchmark::Initialize(&nargs, args.data());
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
