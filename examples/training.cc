// Fits y = w x + c to four points with SGD: variables, gradients of the
// loss w.r.t. their reads, an optimizer step run as a target, and a
// checkpoint that a second session restores.
#include <cmath>
#include <cstdio>
#include <vector>

#include "tdf/tdf.h"

int main() {
  tdf::GraphBuilder b;
  tdf::Output x = b.Placeholder("x", tdf::DType::kFloat64);
  tdf::Output y = b.Placeholder("y", tdf::DType::kFloat64);
  tdf::Output w = b.Variable("w", tdf::Tensor::Scalar(0.0));
  tdf::Output c = b.Variable("c", tdf::Tensor::Scalar(0.0));
  tdf::Output w_now = b.Read(w), c_now = b.Read(c);
  tdf::Output error = w_now * x + c_now - y;
  tdf::Output loss = b.Identity(b.Mean(error * error), "loss");
  absl::StatusOr<tdf::Graph> graph = b.Build();
  if (!graph.ok()) return std::fprintf(stderr, "%s\n", graph.status().ToString().c_str()), 1;

  // d loss / d w and d loss / d c, then one SGD step that applies them.
  absl::StatusOr<std::vector<std::string>> grads = tdf::AddGradients(*graph, {loss}, {w_now, c_now});
  if (!grads.ok()) return std::fprintf(stderr, "%s\n", grads.status().ToString().c_str()), 1;
  absl::StatusOr<std::string> step = tdf::AddSgdStep(*graph, {"w", "c"}, *grads, /*learning_rate=*/0.05);
  if (!step.ok()) return std::fprintf(stderr, "%s\n", step.status().ToString().c_str()), 1;

  absl::StatusOr<std::unique_ptr<tdf::Session>> session = tdf::Session::Create(*graph);
  if (!session.ok()) return std::fprintf(stderr, "%s\n", session.status().ToString().c_str()), 1;
  const std::vector<std::pair<std::string, tdf::Tensor>> data = {
      {x, tdf::Tensor::Vector<double>({0, 1, 2, 3})}, {y, tdf::Tensor::Vector<double>({1, 3, 5, 7})}};  // y = 2x + 1
  for (int i = 0; i < 500; ++i) {
    absl::StatusOr<std::vector<tdf::Tensor>> ran = (*session)->Run(data, {}, {*step});  // a step, no fetch
    if (!ran.ok()) return std::fprintf(stderr, "%s\n", ran.status().ToString().c_str()), 1;
  }
  absl::Status saved = (*session)->SaveVariables("training_example.ckpt.pbtxt");
  if (!saved.ok()) return std::fprintf(stderr, "%s\n", saved.ToString().c_str()), 1;

  // A new session of the same graph starts from w = c = 0; the checkpoint
  // brings the trained values back. Fetching the loss takes no step.
  absl::StatusOr<std::unique_ptr<tdf::Session>> restored = tdf::Session::Create(*graph);
  if (!restored.ok()) return std::fprintf(stderr, "%s\n", restored.status().ToString().c_str()), 1;
  absl::Status loaded = (*restored)->RestoreVariables("training_example.ckpt.pbtxt");
  if (!loaded.ok()) return std::fprintf(stderr, "%s\n", loaded.ToString().c_str()), 1;
  absl::StatusOr<std::vector<tdf::Tensor>> out = (*restored)->Run(data, {loss, w_now, c_now});
  if (!out.ok()) return std::fprintf(stderr, "%s\n", out.status().ToString().c_str()), 1;
  const double final_loss = (*out)[0].scalar<double>(), fit_w = (*out)[1].scalar<double>(),
               fit_c = (*out)[2].scalar<double>();
  // The loss is round-off by now, and round-off differs between builds.
  std::printf("after 500 steps: w = %.4f, c = %.4f, loss %s 1e-12\n", fit_w, fit_c, final_loss < 1e-12 ? "<" : ">=");
  return std::abs(fit_w - 2) < 1e-3 && std::abs(fit_c - 1) < 1e-3 ? 0 : 1;
}
