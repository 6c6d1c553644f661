// tdf::DistributedSession (tdf/distributed.h): each rank runs its partition
// in an ordinary Session whose runs take a RemoteChannel over the MPI
// transport; a run ends with one collective step that settles errors.
#include "tdf/distributed.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/hash_tables.h"
#include "distributed/cut_pruning.h"
#include "distributed/spread.h"
#include "distributed/transport.h"
#include "runtime/remote_channel.h"
#include "runtime/session_access.h"
#include "tdf/partition.h"
#include "tdf/status.h"
#include "tdf/transform.h"
#include "tdf/validate.h"

namespace tdf {
namespace {

using distributed::MpiTransport;
using distributed::ReceivedToken;
using distributed::WireToken;

// The executor's RemoteChannel over the transport. It also watches for
// other ranks' failures: one that arrives ends this rank's run with it.
class MpiRemoteChannel : public runtime::RemoteChannel {
 public:
  // `invocation_keys`: the Recvs that bring a call's first argument (or
  // announcement) to this rank, each live arrival one remote invocation.
  MpiRemoteChannel(MpiTransport* transport, base::FlatHashSet<int64_t> invocation_keys)
      : transport_(transport), invocation_keys_(std::move(invocation_keys)) {}

  int rank() const override { return transport_->rank(); }

  absl::Status Send(int dst_rank, int64_t key, absl::Span<const int64_t> tag, bool dead, bool control,
                    const Tensor& value) override {
    WireToken token;
    token.key = key;
    token.tag.assign(tag.begin(), tag.end());
    token.dead = dead;
    token.control = control;
    if (!dead && !control) token.value = value;
    return transport_->Send(dst_rank, token);
  }

  absl::StatusOr<int> Poll(Poller poller, absl::FunctionRef<void(runtime::RemoteArrival&)> handler) override {
    std::pair<int, absl::Status> failure{-1, absl::OkStatus()};
    int64_t tokens = 0;
    absl::StatusOr<int> got = transport_->PollTokensAndFailure(
        [&](ReceivedToken&& r) {
          runtime::RemoteArrival a;
          a.source_rank = r.source_rank;
          a.key = r.token.key;
          a.tag = absl::MakeConstSpan(r.token.tag);
          a.dead = r.token.dead;
          a.control = r.token.control;
          a.value = std::move(r.token.value);
          if (!a.dead && invocation_keys_.contains(a.key)) remote_invocations_.fetch_add(1, std::memory_order_relaxed);
          ++tokens;
          handler(a);
        },
        &failure);
    if (poller != Poller::kWaitingThread && tokens > 0)
      received_while_busy_.fetch_add(tokens, std::memory_order_relaxed);
    if (poller == Poller::kBusyBesideOthers && tokens > 0)
      received_beside_others_.fetch_add(tokens, std::memory_order_relaxed);
    if (!got.ok() || failure.second.ok()) return got;
    std::lock_guard<std::mutex> lock(mu_);
    peer_failures_.push_back(failure);
    return failure.second;
  }

  // Remote invocations so far, over the channel's life.
  int64_t remote_invocations() const { return remote_invocations_.load(std::memory_order_relaxed); }
  // Tokens busy workers took in, over the channel's life.
  int64_t received_while_busy() const { return received_while_busy_.load(std::memory_order_relaxed); }
  // Of those, the tokens taken in while other workers of this rank ran.
  int64_t received_beside_others() const { return received_beside_others_.load(std::memory_order_relaxed); }

  // The failures of other ranks that this run received, and clears them.
  std::vector<std::pair<int, absl::Status>> TakePeerFailures() {
    std::lock_guard<std::mutex> lock(mu_);
    return std::move(peer_failures_);
  }

 private:
  MpiTransport* transport_;
  const base::FlatHashSet<int64_t> invocation_keys_;
  std::atomic<int64_t> remote_invocations_{0};
  std::atomic<int64_t> received_while_busy_{0};
  std::atomic<int64_t> received_beside_others_{0};
  std::mutex mu_;
  std::vector<std::pair<int, absl::Status>> peer_failures_;
};

// Keys of gathered fetches: far above any Send/Recv pair's (one per cut
// edge of the graph).
constexpr int64_t kGatherKeyBase = int64_t{1} << 62;

std::string NodeOf(const std::string& ref) {
  const size_t colon = ref.rfind(':');
  return colon == std::string::npos ? ref : ref.substr(0, colon);
}

// The keys of the Recvs (in one rank's partition) that bring a call site's
// first Call its input from the caller's rank: its lowest argument, or the
// control input of a function without arguments (StaticizeRecursion names
// them SITE/call_J, SITE/call). Not a Call's own announcement: a rank that
// runs part of a descendant also creates the ancestors' frames, and those
// announced copies are no invocation of their own here.
base::FlatHashSet<int64_t> InvocationKeys(const Graph& partition) {
  base::FlatHashMap<std::string, const NodeDef*> recvs;
  for (const NodeDef& n : partition.node)
    if (n.op == "Recv") recvs.emplace(n.name, &n);
  base::FlatHashMap<std::string, std::pair<int64_t, const NodeDef*>> first_call;  // site -> (arg index, Call)
  for (const NodeDef& n : partition.node) {
    if (n.op != "Call") continue;
    const size_t slash = n.name.rfind("/call");
    if (slash == std::string::npos) continue;
    const int64_t arg = n.GetInt("arg_index").value_or(-1);
    auto [it, inserted] = first_call.try_emplace(n.name.substr(0, slash), arg, &n);
    if (!inserted && arg < it->second.first) it->second = {arg, &n};
  }
  base::FlatHashSet<int64_t> keys;
  for (const auto& [site, call] : first_call) {
    const NodeDef& c = *call.second;
    if (c.input.empty()) continue;
    auto it = recvs.find(NodeOf(c.input[0][0] == '^' ? c.input[0].substr(1) : c.input[0]));
    if (it == recvs.end()) continue;
    std::string sent = it->second->GetString("tensor_name").value_or("");
    if (!sent.empty() && sent[0] == '^') sent = sent.substr(1);
    if (NodeOf(sent) == c.name) continue;  // the Call's announcement
    keys.insert(it->second->GetInt("key").value_or(-1));
  }
  return keys;
}

}  // namespace

class DistributedSession::Impl {
 public:
  DistributedOptions options;
  std::unique_ptr<MpiTransport> transport;
  std::unique_ptr<MpiRemoteChannel> channel;
  std::unique_ptr<Session> session;
  base::FlatHashSet<int64_t> invocation_keys;   // MpiRemoteChannel's
  base::FlatHashMap<std::string, int> rank_of;  // node name -> rank
  // Which cut edges a run needs (distributed/cut_pruning.h).
  std::unique_ptr<distributed::CutEdgePruner> cut_pruner;
  // A main-graph Invoke's results, as StaticizeRecursion names them.
  base::FlatHashMap<std::string, std::vector<std::string>> invoke_returns;
  // Set when a run's collective end failed: the ranks are out of step.
  std::string broken;
  std::mutex run_mu;  // runs are collective: one at a time

  // A fetch or feed as this rank's session names it, and its rank.
  std::pair<std::string, int> Resolve(const std::string& ref) const {
    std::string name = ref;
    const std::string node = NodeOf(ref);
    if (auto it = invoke_returns.find(node); it != invoke_returns.end()) {
      const size_t colon = ref.rfind(':');
      int port = 0;
      if (colon != std::string::npos && !absl::SimpleAtoi(ref.substr(colon + 1), &port)) port = -1;
      if (port >= 0 && port < static_cast<int>(it->second.size())) name = it->second[port];
    }
    auto r = rank_of.find(NodeOf(name));
    // Names of no node are rank 0's to report.
    return {name, r == rank_of.end() ? 0 : r->second};
  }
};

DistributedSession::DistributedSession(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
DistributedSession::~DistributedSession() = default;

int DistributedSession::rank() const { return impl_->transport->rank(); }
int DistributedSession::num_ranks() const { return impl_->transport->size(); }
int DistributedSession::RankOf(const std::string& node) const {
  auto it = impl_->rank_of.find(node);
  return it == impl_->rank_of.end() ? -1 : it->second;
}

absl::StatusOr<std::unique_ptr<DistributedSession>> DistributedSession::Create(const Graph& original,
                                                                               DistributedOptions options,
                                                                               MPI_Comm comm) {
  distributed::TransportOptions topts;
  topts.comm = comm;
  TDF_ASSIGN_OR_RETURN(std::unique_ptr<MpiTransport> transport, MpiTransport::Create(topts));
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  const int rank = transport->rank();
  // Every rank builds every partition (the pass is deterministic) and
  // keeps its own; the ranks then agree, so that none runs while another
  // could not start.
  absl::Status local = [&]() -> absl::Status {
    // A frame other ranks take part in must keep its place in the label
    // path (no tail hand-over), and a Recv's token must reach every node
    // it feeds (no skipped dead regions): docs/distributed.md.
    options.session.release_tail_callers = false;
    options.session.skip_dead_branches = false;
    // A split site's gradient part whose Returns are on another rank looks
    // unneeded here, and a run that leaves it out lets the invocation end
    // before that part's arguments come (found with exp's gradient on 2
    // ranks: a Call into an ended invocation).
    options.session.evaluate_without_gradients = false;
    if (options.session.mode != ExecutionMode::kStatic)
      return absl::InvalidArgumentError("a distributed session runs static graphs (ExecutionMode::kStatic)");
    TDF_RETURN_IF_ERROR(Validate(original));
    // Spread functions become copies placed by tag (distributed/spread.h).
    Graph graph;
    TDF_ASSIGN_OR_RETURN(graph, distributed::SpreadInvocations(original, options.spread, transport->size()));
    if (!options.spread.empty()) TDF_RETURN_IF_ERROR(Validate(graph));
    Graph transformed;
    const bool calls = std::any_of(graph.node.begin(), graph.node.end(), [](const NodeDef& n) { return n.op == "Invoke"; });
    if (calls) {
      TDF_ASSIGN_OR_RETURN(transformed, StaticizeRecursion(graph));
      for (const NodeDef& n : graph.node) {
        if (n.op != "Invoke") continue;
        const FunctionDef* f = graph.library.Find(n.GetString("function").value_or(""));
        if (f == nullptr) continue;
        std::vector<std::string> returns;
        for (size_t r = 0; r < f->signature.outputs.size(); ++r) returns.push_back(absl::StrCat(n.name, "/return_", r));
        impl->invoke_returns.emplace(n.name, std::move(returns));
      }
    } else {
      transformed.node = graph.node;
    }
    transformed.library = FunctionLibrary();
    PartitionOptions popts;
    popts.num_ranks = transport->size();
    TDF_ASSIGN_OR_RETURN(PartitionedGraph parts, PartitionGraph(transformed, popts));
    for (size_t i = 0; i < transformed.node.size(); ++i) impl->rank_of[transformed.node[i].name] = parts.rank_of_node[i];
    impl->invocation_keys = InvocationKeys(parts.partitions[rank]);
    TDF_ASSIGN_OR_RETURN(impl->cut_pruner, distributed::CutEdgePruner::Create(transformed, parts, rank));
    TDF_ASSIGN_OR_RETURN(impl->session, Session::Create(std::move(parts.partitions[rank]), options.session));
    return absl::OkStatus();
  }();
  TDF_RETURN_IF_ERROR(transport->AgreeOnStatus(local));
  impl->channel = std::make_unique<MpiRemoteChannel>(transport.get(), std::move(impl->invocation_keys));
  impl->transport = std::move(transport);
  return std::unique_ptr<DistributedSession>(new DistributedSession(std::move(impl)));
}

absl::StatusOr<std::vector<Tensor>> DistributedSession::Run(const std::vector<std::pair<std::string, Tensor>>& feeds,
                                                            const std::vector<std::string>& fetches, RunStats* stats,
                                                            DistributedRunStats* remote_stats,
                                                            const RunOptions& run_options) {
  return Run(run_options, feeds, fetches, {}, stats, remote_stats);
}

absl::StatusOr<std::vector<Tensor>> DistributedSession::Run(const RunOptions& run_options,
                                                            const std::vector<std::pair<std::string, Tensor>>& feeds,
                                                            const std::vector<std::string>& fetches,
                                                            const std::vector<std::string>& targets, RunStats* stats,
                                                            DistributedRunStats* remote_stats) {
  Impl& s = *impl_;
  std::lock_guard<std::mutex> lock(s.run_mu);
  if (!s.broken.empty())
    return absl::FailedPreconditionError(
        absl::StrCat("rank ", rank(), ": this session's ranks are out of step (", s.broken, "); create a new one"));
  const int me = rank();
  std::vector<std::pair<std::string, Tensor>> my_feeds;
  for (const auto& [name, value] : feeds)
    if (s.Resolve(name).second == me) my_feeds.emplace_back(name, value);
  std::vector<std::string> my_fetches;
  std::vector<int> where;  // fetch k -> index in my_fetches, or -1
  for (const std::string& f : fetches) {
    auto [name, r] = s.Resolve(f);
    where.push_back(r == me ? static_cast<int>(my_fetches.size()) : -1);
    if (r == me) my_fetches.push_back(name);
  }
  // Every fetch and target, wherever it is, is a root of the closure that
  // says which cut edges run (the same on every rank); a target naming an
  // Invoke has run when each of its results has.
  std::vector<std::string> roots;
  for (const std::string& f : fetches) roots.push_back(NodeOf(s.Resolve(f).first));
  std::vector<std::string> my_targets;
  for (const std::string& t : targets) {
    std::vector<std::string> names{t};
    if (auto it = s.invoke_returns.find(t); it != s.invoke_returns.end()) names = it->second;
    for (const std::string& name : names) {
      auto [resolved, r] = s.Resolve(name);
      roots.push_back(NodeOf(resolved));
      if (r == me) my_targets.push_back(resolved);
    }
  }
  const std::shared_ptr<const runtime::RemoteNeeds> needs = s.cut_pruner->Needed(roots);
  RunOptions ro = run_options;
  if (!ro.deadline.has_value() && s.options.session.deadline == absl::InfiniteDuration())
    ro.deadline = s.options.default_deadline;
  const distributed::TransportCounters before = s.transport->counters();
  const int64_t invocations_before = s.channel->remote_invocations();
  const int64_t while_busy_before = s.channel->received_while_busy();
  const int64_t beside_others_before = s.channel->received_beside_others();
  RunStats own_stats;  // the figures exchanged at the end need firings
  if (stats == nullptr) stats = &own_stats;
  absl::StatusOr<std::vector<Tensor>> out =
      runtime::SessionAccess::Run(*s.session, ro, my_feeds, my_fetches, my_targets, stats, s.channel.get(),
                                  needs.get());
  const distributed::TransportCounters after = s.transport->counters();
  const int64_t figures[] = {after.tokens_sent - before.tokens_sent,
                             after.bytes_sent - before.bytes_sent,
                             after.tokens_received - before.tokens_received,
                             after.bytes_received - before.bytes_received,
                             s.channel->remote_invocations() - invocations_before,
                             stats->firings,
                             stats->live_firings,
                             stats->frames_created,
                             s.channel->received_while_busy() - while_busy_before,
                             s.channel->received_beside_others() - beside_others_before};
  constexpr int kFigures = sizeof(figures) / sizeof(figures[0]);

  // The run's end. Failures: this rank's own (sent to every other rank),
  // and those other ranks sent, during the run or until now.
  std::vector<std::pair<int, absl::Status>> failures = s.channel->TakePeerFailures();
  if (!out.ok() && failures.empty()) {
    const absl::Status own(out.status().code(),
                           absl::StrCat("rank ", me, ": ",
                                        distributed::OriginalNames(out.status().message(), s.options.spread)));
    failures.emplace_back(me, own);
    for (int p = 0; p < num_ranks(); ++p) {
      if (p == me) continue;
      absl::Status sent = s.transport->SendFailure(p, own);
      if (!sent.ok()) failures.emplace_back(me, sent);
    }
  }
  int64_t late = 0;
  std::vector<int64_t> all_figures;
  absl::Status ended = s.transport->EndRun([&](ReceivedToken&&) { ++late; }, &failures,
                                           absl::Now() + s.options.peer_timeout, figures, &all_figures);
  if (remote_stats != nullptr) {
    auto fill = [](RankRunStats* r, int rank, const int64_t* f) {
      r->rank = rank;
      r->tokens_sent = f[0];
      r->bytes_sent = f[1];
      r->tokens_received = f[2];
      r->bytes_received = f[3];
      r->remote_invocations = f[4];
      r->firings = f[5];
      r->live_firings = f[6];
      r->frames_created = f[7];
      r->tokens_received_while_busy = f[8];
      r->tokens_received_beside_other_workers = f[9];
    };
    *remote_stats = DistributedRunStats();
    fill(remote_stats, me, figures);
    int64_t total[kFigures] = {};
    if (ended.ok() && all_figures.size() == static_cast<size_t>(kFigures) * num_ranks()) {
      for (int p = 0; p < num_ranks(); ++p) {
        const int64_t* f = all_figures.data() + static_cast<size_t>(kFigures) * p;
        remote_stats->ranks.emplace_back();
        fill(&remote_stats->ranks.back(), p, f);
        for (int j = 0; j < kFigures; ++j) total[j] += f[j];
      }
    }
    fill(&remote_stats->total, -1, total);
  }
  if (!ended.ok()) {
    s.broken = std::string(ended.message());
    if (!failures.empty()) return failures.front().second;
    return ended;
  }
  if (!failures.empty()) {
    // Every rank reports the lowest failing rank's own failure: the same
    // status everywhere, whichever failure reached a rank first.
    auto first = std::min_element(failures.begin(), failures.end(),
                                  [](const auto& a, const auto& b) { return a.first < b.first; });
    return first->second;
  }
  if (late > 0)
    return absl::InternalError(absl::StrCat("rank ", me, ": ", late, " tokens arrived after this rank's run ended"));
  std::vector<Tensor> results(fetches.size());
  for (size_t k = 0; k < fetches.size(); ++k)
    if (where[k] >= 0) results[k] = std::move((*out)[where[k]]);
  if (s.options.gather_fetches) {
    absl::Status gathered = Gather(fetches, &results);
    if (!gathered.ok()) {
      s.broken = std::string(gathered.message());
      return gathered;
    }
  }
  return results;
}

absl::Status DistributedSession::Gather(const std::vector<std::string>& fetches, std::vector<Tensor>* results) {
  // Each owner sends its fetched values to rank 0 after the run's end, and
  // rank 0 receives them from that owner alone: one rank's messages arrive
  // in order, so none of its next run's tokens can be taken instead. The
  // next run's end counts them like any token.
  Impl& s = *impl_;
  const int me = rank();
  const absl::Time deadline = absl::Now() + s.options.peer_timeout;
  for (size_t k = 0; k < fetches.size(); ++k) {
    const int owner = s.Resolve(fetches[k]).second;
    if (owner == 0) continue;
    const int64_t key = kGatherKeyBase + static_cast<int64_t>(k);
    if (me == owner) {
      WireToken token;
      token.key = key;
      token.value = (*results)[k];
      TDF_RETURN_IF_ERROR(s.transport->Send(0, token));
    } else if (me == 0) {
      TDF_ASSIGN_OR_RETURN(ReceivedToken r, s.transport->ReceiveFrom(owner, deadline));
      if (r.token.key != key || !r.token.value.valid())
        return absl::DataLossError(absl::StrCat("rank 0: gathering fetch '", fetches[k], "' from rank ", owner,
                                                ": got a token for key ", r.token.key));
      (*results)[k] = std::move(r.token.value);
    }
  }
  return absl::OkStatus();
}

absl::Status DistributedSession::Close() {
  std::lock_guard<std::mutex> lock(impl_->run_mu);
  int64_t late = 0;
  absl::Status closed =
      impl_->transport->Close([&](ReceivedToken&&) { ++late; }, absl::Now() + impl_->options.peer_timeout);
  if (!closed.ok()) return closed;
  if (late > 0)
    return absl::InternalError(absl::StrCat("rank ", rank(), ": ", late, " tokens arrived after the last run"));
  return absl::OkStatus();
}

}  // namespace tdf
