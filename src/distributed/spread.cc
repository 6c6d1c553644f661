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
#include <map>
#include <set>
#include <string>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "tdf/status.h"

namespace tdf {
namespace distributed {
namespace {

bool CallsFunction(const NodeDef& n, const std::string& fn) {
  return n.op == "Invoke" && n.GetString("function").value_or("") == fn;
}

// The call sites of `fn` among `nodes`, numbered in order of first
// appearance: site[k] for node k (-1: no call of fn). The two Invokes of
// an autodiff split site (one site_group) are one site: both parts must
// reach the same copy of the body for each tag.
std::vector<int> SitesOf(const std::vector<NodeDef>& nodes, const std::string& fn, int first, int* count) {
  std::vector<int> site(nodes.size(), -1);
  std::map<std::string, int> groups;
  int next = first;
  for (size_t k = 0; k < nodes.size(); ++k) {
    if (!CallsFunction(nodes[k], fn)) continue;
    const std::string group = nodes[k].GetString("site_group").value_or("");
    if (group.empty()) {
      site[k] = next++;
      continue;
    }
    auto [it, inserted] = groups.emplace(group, next);
    if (inserted) ++next;
    site[k] = it->second;
  }
  *count = next - first;
  return site;
}

std::string CopyName(const std::string& fn, const std::vector<int>& path) {
  return absl::StrCat(fn, "__spread_", absl::StrJoin(path, "_"));
}
std::string LocalName(const std::string& fn, int rank) { return absl::StrCat(fn, "__rank", rank); }

// The length of a copy suffix of `fn` at the start of `rest` ("__rank3",
// "__spread_0_1"), else 0.
size_t CopySuffix(absl::string_view rest) {
  for (absl::string_view marker : {absl::string_view("__rank"), absl::string_view("__spread_")}) {
    if (!absl::StartsWith(rest, marker)) continue;
    size_t end = marker.size();
    while (end < rest.size() && (absl::ascii_isdigit(rest[end]) || (marker.size() > 6 && rest[end] == '_'))) ++end;
    if (end > marker.size()) return end;
  }
  return 0;
}

// `body` on `rank`, its calls of `fn` redirected by `callee(site index)`.
template <typename Callee>
absl::StatusOr<std::vector<NodeDef>> PlaceBody(const FunctionDef& f, int rank, Callee callee) {
  std::vector<NodeDef> body = f.node;
  int num_sites = 0;
  const std::vector<int> sites = SitesOf(body, f.signature.name, 0, &num_sites);
  for (size_t k = 0; k < body.size(); ++k) {
    NodeDef& n = body[k];
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
    if (sites[k] >= 0) n.attr["function"] = callee(sites[k]);
  }
  return body;
}

}  // namespace

std::string OriginalNames(absl::string_view message, const std::vector<SpreadPolicy>& policies) {
  std::string out(message);
  for (const SpreadPolicy& p : policies) {
    if (p.function.empty()) continue;
    std::string renamed;
    size_t from = 0;
    for (size_t at = out.find(p.function); at != std::string::npos; at = out.find(p.function, at + 1)) {
      const size_t suffix = CopySuffix(absl::string_view(out).substr(at + p.function.size()));
      if (suffix == 0) continue;
      absl::StrAppend(&renamed, absl::string_view(out).substr(from, at + p.function.size() - from));
      from = at + p.function.size() + suffix;
    }
    absl::StrAppend(&renamed, absl::string_view(out).substr(from));
    out = std::move(renamed);
  }
  return out;
}

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
    (void)SitesOf(f.node, p.function, 0, &sites);
    // Redirect every call of the function from outside it: external site e
    // is the root of tag [e]. Sites in the main graph first, then in other
    // functions (by name), so that every rank numbers them alike.
    int external = 0;
    auto redirect = [&](std::vector<NodeDef>& nodes) {
      int count = 0;
      const std::vector<int> site = SitesOf(nodes, p.function, external, &count);
      for (size_t k = 0; k < nodes.size(); ++k)
        if (site[k] >= 0) nodes[k].attr["function"] = CopyName(p.function, {site[k]});
      external += count;
    };
    redirect(out.node);
    std::vector<std::string> names;
    for (const auto& [name, fn] : out.library.functions()) names.push_back(name);
    for (const std::string& name : names) {
      if (name == p.function) continue;
      redirect(out.library.FindMutable(name)->node);
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
