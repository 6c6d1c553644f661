// Differentiates a recursive function: exp(x, n) = n == 0 ? 1 : x * exp(x, n-1)
// has dy/dx = n * x^(n-1). The gradient pass pairs every call of exp with its
// gradient call on one call site, so the backward pass reuses the forward
// values of each invocation instead of recomputing them.
#include <cmath>
#include <cstdio>

#include "tdf/autodiff.h"
#include "tdf/reference_programs.h"
#include "tdf/session.h"

int main() {
  tdf::Graph graph = tdf::reference::Exp();  // placeholders x (float64), n (int64); fetch "result"
  absl::StatusOr<std::vector<std::string>> grads = tdf::AddGradients(graph, {"result"}, {"x"});
  if (!grads.ok()) return std::fprintf(stderr, "%s\n", grads.status().ToString().c_str()), 1;

  absl::StatusOr<std::unique_ptr<tdf::Session>> session = tdf::Session::Create(graph);
  if (!session.ok()) return std::fprintf(stderr, "%s\n", session.status().ToString().c_str()), 1;
  const double x = 1.1;
  const int64_t n = 10;
  absl::StatusOr<std::vector<tdf::Tensor>> out = (*session)->Run(
      {{"x", tdf::Tensor::Scalar<double>(x)}, {"n", tdf::Tensor::Scalar<int64_t>(n)}}, {"result", (*grads)[0]});
  if (!out.ok()) return std::fprintf(stderr, "%s\n", out.status().ToString().c_str()), 1;
  const double y = (*out)[0].scalar<double>(), dydx = (*out)[1].scalar<double>();
  std::printf("exp(%.1f, %lld) = %.6f, d/dx = %.6f (n x^(n-1) = %.6f)\n", x, static_cast<long long>(n), y, dydx,
              n * std::pow(x, n - 1));
  return std::abs(dydx - n * std::pow(x, n - 1)) < 1e-9 ? 0 : 1;
}
