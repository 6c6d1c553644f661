// Helpers shared by the executor tests (issue #3): an observer that records
// every firing, tag parsing and small session/run wrappers.
#ifndef TDF_TESTS_RUNTIME_EXEC_TEST_UTIL_H_
#define TDF_TESTS_RUNTIME_EXEC_TEST_UTIL_H_

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "base/sync.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "tdf/builder.h"
#include "tdf/graph.h"
#include "tdf/session.h"
#include "tdf/tensor.h"

namespace tdf {
namespace exec_test {

using Feeds = std::vector<std::pair<std::string, Tensor>>;
using Outs = std::vector<Output>;

inline Tensor I(int64_t v) { return Tensor::Scalar<int64_t>(v); }

inline std::string WorkersName(const ::testing::TestParamInfo<int>& info) {
  return std::to_string(info.param) + "Workers";
}

// One recorded firing.
struct Firing {
  std::string node;
  std::string op;
  std::string tag;
  bool dead = false;
  int worker = 0;
};

// Records every firing; OnFiring is called concurrently from workers.
class RecordingObserver : public ExecutionObserver {
 public:
  void OnFiring(const FiringEvent& e) override {
    base::MutexLock lock(&mu_);
    firings_.push_back(Firing{*e.node, *e.op, e.tag, e.dead, e.worker});
  }
  std::vector<Firing> Firings() const {
    base::MutexLock lock(&mu_);
    return firings_;
  }
  void Clear() {
    base::MutexLock lock(&mu_);
    firings_.clear();
  }
  // The tags at which `node` fired with the given deadness.
  std::multiset<std::string> Tags(const std::string& node, bool dead = false) const {
    base::MutexLock lock(&mu_);
    std::multiset<std::string> out;
    for (const Firing& f : firings_)
      if (f.node == node && f.dead == dead) out.insert(f.tag);
    return out;
  }

 private:
  mutable absl::Mutex mu_;
  std::vector<Firing> firings_ ABSL_GUARDED_BY(mu_);
};

// "[3, while_2]" -> {"3", "while_2"}; "[]" -> {}.
inline std::vector<std::string> ParseTag(std::string tag) {
  absl::string_view v = tag;
  EXPECT_TRUE(absl::ConsumePrefix(&v, "[")) << tag;
  EXPECT_TRUE(absl::ConsumeSuffix(&v, "]")) << tag;
  if (v.empty()) return {};
  return absl::StrSplit(v, ", ");
}

// The built graph; a builder error fails the test.
inline Graph Built(const GraphBuilder& b) {
  absl::StatusOr<Graph> g = b.Build();
  EXPECT_TRUE(g.ok()) << g.status();
  return g.ok() ? *std::move(g) : Graph{};
}

inline std::unique_ptr<Session> MakeSession(const Graph& g, const SessionOptions& opts) {
  absl::StatusOr<std::unique_ptr<Session>> s = Session::Create(g, opts);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? *std::move(s) : nullptr;
}

// Runs `session` fetching "result"; a failed run fails the test and returns
// an invalid tensor. Checks that no frame outlives the run.
inline Tensor RunResult(Session* session, const Feeds& feeds, RunStats* stats = nullptr) {
  RunStats local;
  RunStats* s = stats != nullptr ? stats : &local;
  absl::StatusOr<std::vector<Tensor>> out = session->Run(feeds, {"result"}, {}, s);
  EXPECT_TRUE(out.ok()) << out.status();
  if (!out.ok()) return Tensor();
  EXPECT_EQ(s->live_frames_after_run, 0);
  EXPECT_EQ(s->firings, s->live_firings + s->dead_firings);
  return out->at(0);
}

// (live, dead) firings of `op`, zero when it never fired.
inline std::pair<int64_t, int64_t> OpCount(const RunStats& s, const std::string& op) {
  auto it = s.firings_by_op.find(op);
  return it == s.firings_by_op.end() ? std::pair<int64_t, int64_t>{0, 0} : it->second;
}
inline std::pair<int64_t, int64_t> NodeCount(const RunStats& s, const std::string& node) {
  auto it = s.firings_by_node.find(node);
  return it == s.firings_by_node.end() ? std::pair<int64_t, int64_t>{0, 0} : it->second;
}

// Names of the executable graph's nodes (after transformation) with `op`.
inline std::vector<std::string> NodesWithOp(const Session& s, const std::string& op) {
  std::vector<std::string> out;
  for (const NodeDef& n : s.executable_graph().node)
    if (n.op == op) out.push_back(n.name);
  return out;
}

// fib(n) as the reference programs define it (fib(0) = fib(1) = 1) makes
// 2 * fib(n) - 1 invocations.
inline int64_t FibCalls(int64_t fib_n) { return 2 * fib_n - 1; }

inline const char* ModeName(ExecutionMode mode) { return mode == ExecutionMode::kStatic ? "static" : "dynamic"; }

// Runs `body` on a session of `graph` in static and in dynamic mode, each
// under a trace naming it: for what both modes must do alike.
inline void ForEachMode(const Graph& graph, int workers, const std::function<void(Session*)>& body) {
  for (ExecutionMode mode : {ExecutionMode::kStatic, ExecutionMode::kDynamic}) {
    SCOPED_TRACE(ModeName(mode));
    SessionOptions options;
    options.mode = mode;
    options.num_workers = workers;
    auto s = MakeSession(graph, options);
    ASSERT_NE(s, nullptr);
    body(s.get());
  }
}

// Every combination of value forwarding (with and without releasing tail
// callers), dead-branch skipping and the
// general (per-node counting) path, each under a trace that names it: the
// options that change which nodes fire, never what a run computes.
inline void ForEachVariant(int workers, const std::function<void(const SessionOptions&)>& body) {
  for (bool forward : {true, false}) {
    // Releasing tail callers needs forwarded values (tail results).
    for (bool release : {true, false}) {
      if (!forward && !release) continue;
      for (bool skip : {true, false}) {
        for (bool general : {false, true}) {
          SCOPED_TRACE(absl::StrCat("forward_call_values ", forward, " release_tail_callers ", release,
                                    " skip_dead_branches ", skip, " general ", general));
          SessionOptions options;
          options.num_workers = workers;
          options.forward_call_values = forward;
          options.release_tail_callers = release;
          options.skip_dead_branches = skip;
          options.collect_node_stats = general;
          body(options);
        }
      }
    }
  }
}

}  // namespace exec_test
}  // namespace tdf

#endif  // TDF_TESTS_RUNTIME_EXEC_TEST_UTIL_H_
