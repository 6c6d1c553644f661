// GraphPass / PassManager (tdf/transform.h) and the built-in passes.
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "tdf/status.h"
#include "tdf/transform.h"

namespace tdf {
namespace {

class StaticizeRecursionPass : public GraphPass {
 public:
  absl::string_view name() const override { return "staticize-recursion"; }
  absl::Status Run(Graph& graph) override {
    TDF_ASSIGN_OR_RETURN(Graph out, StaticizeRecursion(graph));
    graph = std::move(out);
    return absl::OkStatus();
  }
};

class PruneUnreachableFunctionsPass : public GraphPass {
 public:
  absl::string_view name() const override { return "prune-unreachable-functions"; }
  absl::Status Run(Graph& graph) override { return PruneUnreachableFunctions(graph); }
};

}  // namespace

std::unique_ptr<GraphPass> CreateStaticizeRecursionPass() { return std::make_unique<StaticizeRecursionPass>(); }

std::unique_ptr<GraphPass> CreatePruneUnreachableFunctionsPass() {
  return std::make_unique<PruneUnreachableFunctionsPass>();
}

void PassManager::AddPass(std::unique_ptr<GraphPass> pass) { passes_.push_back(std::move(pass)); }

absl::Status PassManager::Run(Graph& graph) const {
  for (const std::unique_ptr<GraphPass>& pass : passes_) {
    absl::Status s = pass->Run(graph);
    if (!s.ok()) return absl::Status(s.code(), absl::StrCat("pass '", pass->name(), "': ", s.message()));
    if (!verifier_) continue;
    s = verifier_(graph);
    if (!s.ok())
      return absl::Status(s.code(), absl::StrCat("verification after pass '", pass->name(), "' failed: ", s.message()));
  }
  return absl::OkStatus();
}

}  // namespace tdf
