// File: bench/treernn_verify.cc
//
// tdf_treernn_bench's check of the tdf implementations against the native
// one in float64, before anything is timed (treernn_verify.h).
#include "treernn_verify.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tdf/status.h"

namespace tdf_treernn {

std::vector<Batch> MakeBatches(const std::vector<Tree>& trees, int size) {
  std::vector<Batch> out;
  for (size_t start = 0; start + size <= trees.size(); start += size) {
    Batch b;
    for (int k = 0; k < size; ++k) b.push_back(&trees[start + k]);
    out.push_back(std::move(b));
  }
  return out;
}

// Two SGD steps (training) or one loss (inference) of `impl` against native.
absl::Status VerifyOne(Impl impl, const ModelConfig& config, const std::vector<Tree>& trees, int batch, int workers,
                       bool train, std::string* summary) {
  constexpr double kTolerance = 1e-9;
  const int steps = train ? 2 : 1;
  if (static_cast<int>(trees.size()) < steps * batch) return absl::InvalidArgumentError("too few trees to verify");
  std::vector<Batch> batches = MakeBatches(trees, batch);
  Parameters native = InitParameters(config);
  TDF_ASSIGN_OR_RETURN(std::unique_ptr<Model> model, Model::Create(impl, config, native, batch, train, workers));
  double worst_loss = 0;
  for (int s = 0; s < steps; ++s) {
    Parameters grads;
    const double want = NativeLoss(config, native, batches[s], train ? &grads : nullptr);
    if (train) NativeSgd(config, grads, &native);
    TDF_ASSIGN_OR_RETURN(PreparedBatch prepared, model->Prepare(batches[s]));
    TDF_ASSIGN_OR_RETURN(double got, model->Run(prepared));
    const double d = std::abs(got - want) / std::max(1.0, std::abs(want));
    if (!(d <= kTolerance))
      return absl::InternalError(absl::StrCat("step ", s + 1, ": loss ", got, ", native ", want));
    if (model->last_stats().live_frames_after_run != 0)
      return absl::InternalError(absl::StrCat(model->last_stats().live_frames_after_run, " frames live after a run"));
    worst_loss = std::max(worst_loss, d);
  }
  double worst_param = 0;
  if (train) {
    TDF_ASSIGN_OR_RETURN(Parameters got, model->ReadParameters());
    worst_param = MaxRelativeDifference(got, native);
    if (!(worst_param <= kTolerance))
      return absl::InternalError(
          absl::StrCat("parameters after ", steps, " SGD steps differ from native by ", worst_param, " (relative)"));
    // Training must have moved them.
    if (MaxRelativeDifference(got, InitParameters(config)) == 0)
      return absl::InternalError("the SGD steps left the parameters unchanged");
  }
  *summary = absl::StrCat("loss diff ", worst_loss, train ? absl::StrCat(", params diff ", worst_param) : "");
  return absl::OkStatus();
}

// Returns the number of mismatches; unimplemented cases are reported, not
// counted.
int Verify(const ModelConfig& config32, const std::vector<Tree>& trees, std::vector<std::string>* unimplemented) {
  ModelConfig config = config32;
  config.dtype = tdf::DType::kFloat64;
  int bad = 0;
  std::fprintf(stderr, "verifying against native C++ (float64, tolerance 1e-9):\n");
  for (Impl impl : {Impl::kRecursion, Impl::kIteration, Impl::kUnrolled, Impl::kBatchedRecursion}) {
    for (bool train : {true, false}) {
      for (int batch : {1, 3}) {
        for (int workers : {1, 2}) {
          std::string summary;
          absl::Status s = VerifyOne(impl, config, trees, batch, workers, train, &summary);
          const std::string what = absl::StrCat(ImplName(impl), " ", train ? "training (2 SGD steps)" : "inference",
                                                ", batch ", batch, ", ", workers, "w");
          if (s.code() == absl::StatusCode::kUnimplemented) {
            std::fprintf(stderr, "  %-48s UNIMPLEMENTED: %s\n", what.c_str(), std::string(s.message()).c_str());
            unimplemented->push_back(absl::StrCat(what, ": ", s.message()));
            break;  // the same answer for every worker count
          }
          if (!s.ok()) {
            ++bad;
            std::fprintf(stderr, "  %-48s MISMATCH: %s\n", what.c_str(), s.ToString().c_str());
          } else {
            std::fprintf(stderr, "  %-48s ok (%s)\n", what.c_str(), summary.c_str());
          }
        }
      }
    }
  }
  return bad;
}

}  // namespace tdf_treernn
