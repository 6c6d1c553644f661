// Builds fib as a recursive function, runs it in one static graph and
// prints the result with a few facts about the run.
#include <cstdio>
#include <vector>

#include "tdf/tdf.h"

int main() {
  using tdf::DType;
  using tdf::Output;
  using Outs = std::vector<Output>;

  tdf::GraphBuilder b;
  // fib(n) = n <= 1 ? 1 : fib(n-1) + fib(n-2); the body may call itself
  // because DefineFunction declares "fib" before building it. A number
  // beside an Output takes its dtype: n - 1 subtracts an int64 1.
  absl::Status defined = b.DefineFunction(
      {"fib", {{"n", DType::kInt64}}, {{"r", DType::kInt64}}},
      [](tdf::GraphBuilder& f, const Outs& args) -> Outs {
        Output n = args[0];
        return {f.Cond(n <= 1, [&] { return f.ConstLike(n, 1); },
                       [&] { return f.Call("fib", {n - 1})[0] + f.Call("fib", {n - 2})[0]; })};
      });
  if (!defined.ok()) return std::fprintf(stderr, "%s\n", defined.ToString().c_str()), 1;
  Output n = b.Placeholder("n", DType::kInt64);
  Output result = b.Call("fib", {n})[0];
  absl::StatusOr<tdf::Graph> graph = b.Build();
  if (!graph.ok()) return std::fprintf(stderr, "%s\n", graph.status().ToString().c_str()), 1;

  tdf::SessionOptions options;
  options.num_workers = 2;  // work stealing on a oneTBB arena
  absl::StatusOr<std::unique_ptr<tdf::Session>> session = tdf::Session::Create(*graph, options);
  if (!session.ok()) return std::fprintf(stderr, "%s\n", session.status().ToString().c_str()), 1;

  tdf::RunStats stats;
  absl::StatusOr<std::vector<tdf::Tensor>> out =
      (*session)->Run({{n, tdf::Tensor::Scalar<int64_t>(20)}}, {result}, {}, &stats);  // or by name
  if (!out.ok()) return std::fprintf(stderr, "%s\n", out.status().ToString().c_str()), 1;
  std::printf("fib(20) = %lld\n", static_cast<long long>((*out)[0].scalar<int64_t>()));
  std::printf("%lld firings, %lld frames, at most %lld live, %lld live after the run\n",
              static_cast<long long>(stats.firings), static_cast<long long>(stats.frames_created),
              static_cast<long long>(stats.peak_live_frames), static_cast<long long>(stats.live_frames_after_run));
  return (*out)[0].scalar<int64_t>() == 10946 ? 0 : 1;
}
