// Counts the steps of the Collatz sequence from n with a While loop whose
// body chooses with a Cond: x -> x / 2 when x is even, 3 x + 1 when odd.
#include <cstdio>
#include <vector>

#include "tdf/tdf.h"

int main() {
  using tdf::Output;
  using Outs = std::vector<Output>;

  tdf::GraphBuilder b;
  Output n = b.Placeholder("n", tdf::DType::kInt64);
  // while (x > 1) { x = x % 2 == 0 ? x / 2 : 3 * x + 1; steps = steps + 1; }
  Outs final_values = b.While(
      [](const Outs& v) { return v[0] > 1; },
      [&](const Outs& v) {
        Output x = v[0];
        Output next = b.Cond(Equal(x % 2, 0), [&] { return x / 2; }, [&] { return 3 * x + 1; });
        return Outs{next, v[1] + 1};
      },
      {n, b.ConstLike(n, 0)});
  Output steps = b.Identity(final_values[1], "steps");
  absl::StatusOr<tdf::Graph> graph = b.Build();
  if (!graph.ok()) return std::fprintf(stderr, "%s\n", graph.status().ToString().c_str()), 1;

  absl::StatusOr<std::unique_ptr<tdf::Session>> session = tdf::Session::Create(*graph);
  if (!session.ok()) return std::fprintf(stderr, "%s\n", session.status().ToString().c_str()), 1;
  absl::StatusOr<std::vector<tdf::Tensor>> out = (*session)->Run({{n, tdf::Tensor::Scalar<int64_t>(27)}}, {steps});
  if (!out.ok()) return std::fprintf(stderr, "%s\n", out.status().ToString().c_str()), 1;
  std::printf("27 reaches 1 after %lld steps\n", static_cast<long long>((*out)[0].scalar<int64_t>()));
  return (*out)[0].scalar<int64_t>() == 111 ? 0 : 1;
}
