// SpreadInvocations (spread.h). Why a graph pass rather than a new kind of
// message: the label-path machinery already ships a call's arguments to
// the rank of its callee's body and its results back to the caller's frame
// (a function placed wholly on another rank), frees every frame on every
// rank with no coordinator, and carries deadness and errors. A policy that
// places invocations down to a bounded depth names finitely many tags, so
// it can be written as placement: one copy of the function per tag above
// that depth, and one per rank below it.
#include "distributed/spread.h"

#include <cstdint>
#include <set>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "tdf/status.h"

namespace tdf {
namespace distributed {
namespace {

bool CallsFunction(const NodeDef& n, const std::string& fn) {
  return n.op == "Invoke" && n.GetString("function").value_or("") == fn;
}

std::string CopyName(const std::string& fn, const std::vector<int>& path) {
  return absl::StrCat(fn, "__spread_", absl::StrJoin(path, "_"));
}
std::string LocalName(const std::string& fn, int rank) { return absl::StrCat(fn, "__rank", rank); }

// `body` on `rank`, its calls of `fn` redirected by `callee(site index)`.
template <typename Callee>
absl::StatusOr<std::vector<NodeDef>> PlaceBody(const FunctionDef& f, int rank, Callee callee) {
  std::vector<NodeDef> body = f.node;
  int site = 0;
  for (NodeDef& n : body) {
    if (n.device.empty()) {
      n.device = absl::StrCat("rank:", rank);
    } else {
      TDF_ASSIGN_OR_RETURN(DeviceName d, DeviceName::Parse(n.device));
      if (d.rank != DeviceName::kAnyRank)
        return absl::InvalidArgumentError(absl::StrCat("spread function '", f.signature.name, "': node '", n.name,
                                                       "' is placed on a rank (", n.device,
                                                       "); a spread body is placed by its policy"));
      d.rank = rank;
      n.device = d.ToString();
    }
    if (CallsFunction(n, f.signature.name)) n.attr["function"] = callee(site++);
  }
  return body;
}

}  // namespace

int HashRank(const std::vector<int>& path, int num_ranks) {
  // FNV-1a over the labels, then a finalizer so that paths differing in
  // their last label land on unrelated ranks.
  uint64_t h = 1469598103934665603ull;
  for (int label : path) {
    h ^= static_cast<uint64_t>(label) + 1;
    h *= 1099511628211ull;
  }
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  return static_cast<int>(h % static_cast<uint64_t>(num_ranks));
}

absl::StatusOr<Graph> SpreadInvocations(const Graph& graph, const std::vector<SpreadPolicy>& policies,
                                        int num_ranks) {
  if (num_ranks < 1) return absl::InvalidArgumentError(absl::StrCat("spread over ", num_ranks, " ranks"));
  std::set<std::string> seen;
  for (const SpreadPolicy& p : policies) {
    const FunctionDef* f = graph.library.Find(p.function);
    if (f == nullptr || !f->defined)
      return absl::InvalidArgumentError(absl::StrCat("spread: no function '", p.function, "' is defined"));
    if (p.max_depth < 1)
      return absl::InvalidArgumentError(
          absl::StrCat("spread '", p.function, "': max_depth ", p.max_depth, " (at least 1)"));
    for (int r : p.ranks)
      if (r < 0 || r >= num_ranks)
        return absl::InvalidArgumentError(
            absl::StrCat("spread '", p.function, "': rank ", r, " is not a rank of this session (", num_ranks, ")"));
    if (!seen.insert(p.function).second)
      return absl::InvalidArgumentError(absl::StrCat("spread: function '", p.function, "' named twice"));
  }
  if (num_ranks == 1) return graph;
  Graph out = graph;
  for (const SpreadPolicy& p : policies) {
    const FunctionDef f = *out.library.Find(p.function);
    const int spread_over = p.ranks.empty() ? num_ranks : static_cast<int>(p.ranks.size());
    int sites = 0;
    for (const NodeDef& n : f.node) sites += CallsFunction(n, p.function) ? 1 : 0;
    // Redirect every call of the function from outside it: external site e
    // is the root of tag [e]. Sites in the main graph first, then in other
    // functions (by name), so that every rank numbers them alike.
    int external = 0;
    for (NodeDef& n : out.node)
      if (CallsFunction(n, p.function)) n.attr["function"] = CopyName(p.function, {external++});
    std::vector<std::string> names;
    for (const auto& [name, fn] : out.library.functions()) names.push_back(name);
    for (const std::string& name : names) {
      if (name == p.function) continue;
      FunctionDef* g = out.library.FindMutable(name);
      for (NodeDef& n : g->node)
        if (CallsFunction(n, p.function)) n.attr["function"] = CopyName(p.function, {external++});
    }
    // Count before copying: each level multiplies by the number of sites.
    int64_t copies = 0, level_size = external;
    for (int d = 1; d <= p.max_depth && copies <= kMaxSpreadCopies; ++d) {
      copies += level_size;
      level_size *= std::max(sites, 1);
    }
    if (copies > kMaxSpreadCopies)
      return absl::InvalidArgumentError(absl::StrCat("spread '", p.function, "' to depth ", p.max_depth, " needs more than ",
                                                     kMaxSpreadCopies, " copies of its body; lower max_depth"));
    // Breadth first, so that round robin counts each level in order.
    std::vector<std::vector<int>> level;
    for (int e = 0; e < external; ++e) level.push_back({e});
    std::set<int> locals;
    for (int depth = 1; depth <= p.max_depth && !level.empty(); ++depth) {
      std::vector<std::vector<int>> next;
      int64_t round_robin = 0;
      for (const std::vector<int>& path : level) {
        const int pick = p.kind == SpreadPolicy::Kind::kRoundRobin ? static_cast<int>(round_robin++ % spread_over)
                                                                   : HashRank(path, spread_over);
        const int rank = p.ranks.empty() ? pick : p.ranks[pick];
        const bool last = depth == p.max_depth;
        if (last) locals.insert(rank);
        TDF_ASSIGN_OR_RETURN(std::vector<NodeDef> body, PlaceBody(f, rank, [&](int site) {
                               if (last) return LocalName(p.function, rank);
                               std::vector<int> child = path;
                               child.push_back(site);
                               return CopyName(p.function, child);
                             }));
        FunctionDef copy;
        copy.signature = f.signature;
        copy.signature.name = CopyName(p.function, path);
        copy.defined = true;
        copy.node = std::move(body);
        out.library.Put(std::move(copy));
        if (!last)
          for (int s = 0; s < sites; ++s) {
            next.push_back(path);
            next.back().push_back(s);
          }
      }
      level = std::move(next);
    }
    // Below the policy's depth, invocations stay on their parent's rank.
    for (int rank : locals) {
      TDF_ASSIGN_OR_RETURN(std::vector<NodeDef> body,
                           PlaceBody(f, rank, [&](int) { return LocalName(p.function, rank); }));
      FunctionDef copy;
      copy.signature = f.signature;
      copy.signature.name = LocalName(p.function, rank);
      copy.defined = true;
      copy.node = std::move(body);
      out.library.Put(std::move(copy));
    }
  }
  return out;
}

}  // namespace distributed
}  // namespace tdf
