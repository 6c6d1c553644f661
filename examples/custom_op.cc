// A C++ lambda as an op, in one call: its signature comes from the lambda,
// it runs elementwise in graphs and sessions like a built-in op, and its
// gradient (optional) lets AddGradients differentiate through it.
#include <cmath>
#include <cstdio>
#include <tuple>
#include <vector>

#include "tdf/tdf.h"

int main() {
  // softplus(x, k) = log(1 + exp(k x)) / k; d/dx = sigmoid(k x), d/dk is
  // left out (0): k is a setting here.
  absl::Status registered = tdf::RegisterFunctionOp(
      "Softplus",
      [](double x, double k) { return std::log1p(std::exp(k * x)) / k; },
      [](double x, double k, double dy) { return std::make_tuple(dy / (1 + std::exp(-k * x)), 0.0); });
  if (!registered.ok()) return std::fprintf(stderr, "%s\n", registered.ToString().c_str()), 1;

  tdf::GraphBuilder b;
  tdf::Output x = b.Placeholder("x", tdf::DType::kFloat64);
  tdf::Output y = b.Op("Softplus", {x, b.Const(2.0)}, {}, "y");
  tdf::Output loss = b.Sum(y * y);  // the op composes with the others
  absl::StatusOr<tdf::Graph> graph = b.Build();
  if (!graph.ok()) return std::fprintf(stderr, "%s\n", graph.status().ToString().c_str()), 1;
  absl::StatusOr<std::vector<std::string>> grads = tdf::AddGradients(*graph, {loss}, {x});
  if (!grads.ok()) return std::fprintf(stderr, "%s\n", grads.status().ToString().c_str()), 1;

  absl::StatusOr<std::unique_ptr<tdf::Session>> session = tdf::Session::Create(*graph);
  if (!session.ok()) return std::fprintf(stderr, "%s\n", session.status().ToString().c_str()), 1;
  absl::StatusOr<std::vector<tdf::Tensor>> out =
      (*session)->Run({{x, tdf::Tensor::Vector<double>({-1.0, 0.0, 1.0})}}, {y, (*grads)[0]});
  if (!out.ok()) return std::fprintf(stderr, "%s\n", out.status().ToString().c_str()), 1;
  bool right = true;
  for (int i = 0; i < 3; ++i) {
    const double xi = i - 1.0, yi = (*out)[0].data<double>()[i], gi = (*out)[1].data<double>()[i];
    std::printf("x = %4.1f  softplus = %.6f  d loss/dx = %.6f\n", xi, yi, gi);
    right &= std::abs(gi - 2 * yi / (1 + std::exp(-2 * xi))) < 1e-12;
  }
  return right ? 0 : 1;
}
