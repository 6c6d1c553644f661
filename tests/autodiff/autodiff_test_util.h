// Test helpers: run a graph's gradients and compare them with central finite
// differences of the same graph's forward output.
#ifndef TDF_TESTS_AUTODIFF_AUTODIFF_TEST_UTIL_H_
#define TDF_TESTS_AUTODIFF_AUTODIFF_TEST_UTIL_H_

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "tdf/autodiff.h"
#include "tdf/session.h"
#include "tdf/status.h"

namespace tdf {
namespace testing_autodiff {

using Feeds = std::vector<std::pair<std::string, Tensor>>;

inline std::vector<double> Values(const Tensor& t) {
  std::vector<double> v(t.num_elements());
  for (int64_t i = 0; i < t.num_elements(); ++i) v[i] = t.data<double>()[i];
  return v;
}

inline double SumOf(const Tensor& t) {
  double s = 0;
  for (double v : Values(t)) s += v;
  return s;
}

inline Tensor WithElement(const Tensor& t, int64_t i, double value) {
  if (t.is_inline_scalar()) return Tensor::Scalar<double>(value);
  Tensor c = t.Clone();
  c.mutable_data<double>()[i] = value;
  return c;
}

struct GradResult {
  double y = 0;
  std::vector<Tensor> dx;
  RunStats stats;
};

// Adds gradients of `y` (a float64 scalar, or summed when not) w.r.t. `xs`
// (float64 placeholders) to a copy of `graph`, runs it once, and checks each
// gradient element against a central difference with step h. Tolerance:
// |analytic - numeric| <= tol * max(1, |numeric|).
inline absl::StatusOr<GradResult> CheckGradients(const Graph& graph, const std::string& y,
                                                 const std::vector<std::string>& xs, const Feeds& feeds,
                                                 double tol = 1e-6, double h = 1e-6, SessionOptions options = {}) {
  Graph g = graph;
  TDF_ASSIGN_OR_RETURN(std::vector<std::string> dx, AddGradients(g, {y}, xs));
  TDF_ASSIGN_OR_RETURN(std::unique_ptr<Session> session, Session::Create(g, options));
  std::vector<std::string> fetches = {y};
  fetches.insert(fetches.end(), dx.begin(), dx.end());
  GradResult result;
  TDF_ASSIGN_OR_RETURN(std::vector<Tensor> out, session->Run(feeds, fetches, {}, &result.stats));
  if (result.stats.live_frames_after_run != 0)
    return absl::InternalError(absl::StrCat(result.stats.live_frames_after_run, " frames live after the run"));
  result.y = SumOf(out[0]);
  for (size_t k = 0; k < xs.size(); ++k) result.dx.push_back(out[k + 1]);
  // y fetched alone from the same session: the run leaves the gradient out
  // (Session::Run; a call's gradient part enters its invocation dead), and
  // must give the same y, fire no more live, and reclaim every frame.
  RunStats alone;
  TDF_ASSIGN_OR_RETURN(std::vector<Tensor> y_alone, session->Run(feeds, {y}, {}, &alone));
  if (alone.live_frames_after_run != 0)
    return absl::InternalError(absl::StrCat(alone.live_frames_after_run, " frames live after the run of ", y, " alone"));
  if (!(std::abs(SumOf(y_alone[0]) - result.y) <= 1e-12 * std::max(1.0, std::abs(result.y))))
    return absl::InternalError(absl::StrCat(y, " alone: ", SumOf(y_alone[0]), ", with the gradients: ", result.y));
  if (alone.live_firings > result.stats.live_firings)
    return absl::InternalError(absl::StrCat(y, " alone fired ", alone.live_firings, " nodes live, with the gradients ",
                                            result.stats.live_firings));
  // Forward-only session on the original graph for the differences.
  TDF_ASSIGN_OR_RETURN(std::unique_ptr<Session> fwd, Session::Create(graph));
  for (size_t k = 0; k < xs.size(); ++k) {
    size_t feed = feeds.size();
    for (size_t f = 0; f < feeds.size(); ++f)
      if (feeds[f].first == xs[k]) feed = f;
    if (feed == feeds.size()) return absl::InvalidArgumentError(absl::StrCat("no feed for ", xs[k]));
    const Tensor& base = feeds[feed].second;
    for (int64_t i = 0; i < base.num_elements(); ++i) {
      const double x0 = base.data<double>()[i];
      double f[2];
      for (int s = 0; s < 2; ++s) {
        Feeds p = feeds;
        p[feed].second = WithElement(base, i, x0 + (s == 0 ? h : -h));
        TDF_ASSIGN_OR_RETURN(std::vector<Tensor> o, fwd->Run(p, {y}));
        f[s] = SumOf(o[0]);
      }
      const double numeric = (f[0] - f[1]) / (2 * h);
      if (result.dx[k].num_elements() != base.num_elements())
        return absl::InternalError(absl::StrCat("gradient of ", xs[k], " has ", result.dx[k].num_elements(),
                                                " elements, x has ", base.num_elements()));
      const double analytic = result.dx[k].data<double>()[i];
      if (!(std::abs(analytic - numeric) <= tol * std::max(1.0, std::abs(numeric))))
        return absl::InternalError(absl::StrCat("d", y, "/d", xs[k], "[", i, "]: analytic ", analytic,
                                                ", numeric ", numeric));
    }
  }
  return result;
}

}  // namespace testing_autodiff
}  // namespace tdf

#endif  // TDF_TESTS_AUTODIFF_AUTODIFF_TEST_UTIL_H_
