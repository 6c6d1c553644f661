// Reverse-mode autodiff over a built Graph (tdf/autodiff.h).
//
// One scope (the main graph or a function body) is differentiated at a time:
// the nodes on a path from an x to a y are visited consumers-first, each op's
// registered gradient (gradients.cc) is appended to the scope, and the
// gradients reaching an output are summed (AddN). Control flow and calls get
// special treatment here:
//   * Merge (of a Cond): dy is switched on the cond's predicate, so the
//     gradient flows only into the branch that ran (the other gets a dead
//     token, which is how the backward pass skips it).
//   * Switch: the two branch gradients merge again; a branch that did not use
//     the value contributes ZerosLike of its Switch output (live only when
//     that branch ran).
//   * Invoke of g: g_ext is built (once; recursion finds it memoized), the
//     forward Invoke becomes the x-part of a split call site of g_ext and a
//     second Invoke, the dy-part, joins the same site (site_group). See
//     staticize_recursion.cc for split sites.
#include <algorithm>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/match.h"
#include "autodiff/emitter.h"
#include "autodiff/loop_lowering.h"
#include "tdf/autodiff.h"
#include "tdf/status.h"

namespace tdf {
namespace {

using autodiff::Emitter;
using autodiff::GradArgs;
using autodiff::Key;

bool IsFloat(DType t) { return t == DType::kFloat32 || t == DType::kFloat64; }

std::vector<int64_t> Range(int64_t begin, int64_t end) {
  std::vector<int64_t> v;
  for (int64_t i = begin; i < end; ++i) v.push_back(i);
  return v;
}

absl::StatusOr<std::string> Canonical(const std::string& name) {
  TDF_ASSIGN_OR_RETURN(InputRef ref, InputRef::Parse(name));
  if (ref.is_control) return absl::InvalidArgumentError(absl::StrCat("'", name, "' is a control input, not an output"));
  return Key(ref.node, ref.port);
}

// The loop nodes (Enter, Exit, NextIteration) on a data path from an x to a
// y of the scope `nodes`.
absl::StatusOr<std::set<std::string>> LoopNodesOnPath(const std::vector<NodeDef>& nodes,
                                                      const std::vector<std::string>& ys,
                                                      const std::vector<std::string>& xs) {
  const int n = static_cast<int>(nodes.size());
  std::map<std::string, int> index;
  for (int i = 0; i < n; ++i) index[nodes[i].name] = i;
  std::vector<std::vector<int>> producers(n), consumers(n);
  for (int i = 0; i < n; ++i) {
    for (int k = 0; k < nodes[i].num_data_inputs(); ++k) {
      TDF_ASSIGN_OR_RETURN(InputRef ref, InputRef::Parse(nodes[i].input[k]));
      auto it = index.find(ref.node);
      if (it == index.end()) continue;  // reported by Backprop
      producers[i].push_back(it->second);
      consumers[it->second].push_back(i);
    }
  }
  auto reach = [&](const std::vector<std::string>& from, const std::vector<std::vector<int>>& next) {
    std::vector<char> seen(n, 0);
    std::vector<int> work;
    for (const std::string& name : from) {
      absl::StatusOr<InputRef> ref = InputRef::Parse(name);
      if (!ref.ok()) continue;
      auto it = index.find(ref->node);
      if (it != index.end() && !seen[it->second]) seen[it->second] = 1, work.push_back(it->second);
    }
    while (!work.empty()) {
      const int i = work.back();
      work.pop_back();
      for (int j : next[i])
        if (!seen[j]) seen[j] = 1, work.push_back(j);
    }
    return seen;
  };
  const std::vector<char> fwd = reach(xs, consumers), bwd = reach(ys, producers);
  std::set<std::string> out;
  for (int i = 0; i < n; ++i) {
    const std::string& op = nodes[i].op;
    if (fwd[i] && bwd[i] && (op == "Enter" || op == "Exit" || op == "NextIteration")) out.insert(nodes[i].name);
  }
  return out;
}

// Fuses a sum of gradient terms with a MatMul term into one MatMulAdd: for
// each AddN emitted by this pass (nodes[first..]) one input that is an
// emitted MatMul read by nothing else (and not handed out in `keep`) becomes
// the MatMulAdd's product, and the MatMul node goes. A weight's gradient,
// summed over the calls of a recursive function (x^T dy + the children's
// sums), is then one pass over a [rows, cols] buffer instead of a product
// tensor and an AddN.
void FuseMatMulSums(std::vector<NodeDef>& nodes, size_t first, const std::vector<std::string>& keep) {
  std::map<std::string, int> uses;  // data and control references
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < nodes.size(); ++i) {
    index[nodes[i].name] = i;
    for (const std::string& in : nodes[i].input) {
      absl::StatusOr<InputRef> r = InputRef::Parse(in);
      if (r.ok()) ++uses[r->node];
    }
  }
  for (const std::string& k : keep) {
    absl::StatusOr<InputRef> r = InputRef::Parse(k);
    if (r.ok()) ++uses[r->node];
  }
  std::set<size_t> fused;
  for (size_t i = first; i < nodes.size(); ++i) {
    NodeDef& sum = nodes[i];
    if (sum.op != "AddN" || !sum.device.empty()) continue;
    const int nd = sum.num_data_inputs();
    for (int k = 0; k < nd; ++k) {
      absl::StatusOr<InputRef> r = InputRef::Parse(sum.input[k]);
      if (!r.ok() || r->port != 0) continue;
      auto it = index.find(r->node);
      if (it == index.end() || it->second < first || fused.count(it->second)) continue;
      const NodeDef& mm = nodes[it->second];
      if (mm.op != "MatMul" || !mm.device.empty() || mm.num_data_inputs() != 2 || mm.input.size() != 2 ||
          uses[mm.name] != 1)
        continue;
      NodeDef f;
      f.name = sum.name;
      f.op = "MatMulAdd";
      f.input = {mm.input[0], mm.input[1]};
      for (int j = 0; j < static_cast<int>(sum.input.size()); ++j)
        if (j != k) f.input.push_back(sum.input[j]);
      f.attr = {{"transpose_a", mm.GetBoolOr("transpose_a", false)},
                {"transpose_b", mm.GetBoolOr("transpose_b", false)}};
      fused.insert(it->second);
      sum = std::move(f);
      break;
    }
  }
  if (fused.empty()) return;
  std::vector<NodeDef> kept;
  kept.reserve(nodes.size() - fused.size());
  for (size_t i = 0; i < nodes.size(); ++i)
    if (!fused.count(i)) kept.push_back(std::move(nodes[i]));
  nodes = std::move(kept);
}

// How the gradient of a recursion-invariant argument travels up the
// recursion (FactorableArgs).
enum class RowsKind {
  // W [K, N] used as x W: the rows [x_i | dy_i] of its products, standing
  // for sum_i x_i^T dy_i (OuterRowsConcat / OuterRowsSum).
  kOuter,
  // P [R, ...] read by Gather(P, idx) along axis 0: the rows [idx | dy row]
  // of its reads, standing for their scatter-add into zeros of P's shape
  // (IndexedRows / IndexedRowsConcat / IndexedRowsSum).
  kIndexed,
};

// Ops of a RowsKind: the empty or concatenated sum, and the dense sum.
const char* ConcatOp(RowsKind k) { return k == RowsKind::kOuter ? "OuterRowsConcat" : "IndexedRowsConcat"; }
const char* DenseOp(RowsKind k) { return k == RowsKind::kOuter ? "OuterRowsSum" : "IndexedRowsSum"; }

// The float arguments of f whose gradient can travel as rows: every use of
// the argument, through Switch and Identity, is the same argument of a call
// of f itself or one kind of read: the right operand of a plain MatMul (a
// recursive network's weight), or the params of a Gather along axis 0 (a
// table of states or embeddings the recursion reads rows of). f_ext then
// returns, for such an argument, the rows of its reads in its invocation and
// all the invocations below it, not a dense gradient of the argument's
// shape: a call adds its rows to its caller's (a copy of a few rows) instead
// of summing two dense gradients, and the outermost caller forms the dense
// gradient once (one GEMM, one scatter). Summed densely per invocation, the
// weight's gradient was most of the backward time of a TreeRNN node, and a
// table's gradient costs the whole table per invocation.
std::map<int, RowsKind> FactorableArgs(const FunctionDef& f) {
  std::map<std::string, std::vector<std::pair<const NodeDef*, int>>> uses;  // output -> (consumer, input)
  std::map<int64_t, std::string> args;
  for (const NodeDef& n : f.node) {
    if (n.op == "Arg") args[n.GetIntOr("index", -1)] = n.name;
    for (int k = 0; k < n.num_data_inputs(); ++k) {
      absl::StatusOr<InputRef> r = InputRef::Parse(n.input[k]);
      if (r.ok()) uses[Key(r->node, r->port)].push_back({&n, k});
    }
  }
  const FunctionSignature& sig = f.signature;
  std::map<int, RowsKind> out;
  for (const auto& [a, name] : args) {
    if (a < 0 || a >= static_cast<int64_t>(sig.inputs.size()) || !IsFloat(sig.inputs[a].type)) continue;
    std::set<std::string> stream{name};
    std::vector<std::string> work{name};
    std::vector<const NodeDef*> products, gathers;
    bool ok = true;
    auto follow = [&](const std::string& key) {
      if (stream.insert(key).second) work.push_back(key);
    };
    while (ok && !work.empty()) {
      const std::string key = work.back();
      work.pop_back();
      for (const auto& [c, k] : uses[key]) {
        if (c->op == "Switch" && k == 0) {
          follow(Key(c->name, 0));
          follow(Key(c->name, 1));
        } else if (c->op == "Identity") {
          follow(Key(c->name, 0));
        } else if (c->op == "MatMul" && k == 1 && c->num_data_inputs() == 2 &&
                   !c->GetBoolOr("transpose_a", false) && !c->GetBoolOr("transpose_b", false)) {
          products.push_back(c);
        } else if (c->op == "Gather" && k == 0 && c->num_data_inputs() == 2 && c->GetIntOr("axis", 0) == 0) {
          gathers.push_back(c);
        } else if (c->op == "Invoke" && k == a && c->FindAttr("partial_args") == nullptr &&
                   c->GetString("function").value_or("") == sig.name) {
          // passed on unchanged to the same argument of a recursive call
        } else {
          ok = false;
          break;
        }
      }
    }
    for (const NodeDef* c : products) {
      absl::StatusOr<InputRef> r = InputRef::Parse(c->input[0]);
      ok = ok && r.ok() && stream.count(Key(r->node, r->port)) == 0;  // not W W
    }
    if (!ok || products.empty() == gathers.empty()) continue;  // no read, or two kinds
    out[static_cast<int>(a)] = products.empty() ? RowsKind::kIndexed : RowsKind::kOuter;
  }
  return out;
}

// An x of a scope whose gradient is kept as rows: argument `arg` of the
// function whose extended function is `ext`.
struct FactoredX {
  int arg;
  std::string ext;
  RowsKind kind;
};

class Differentiator {
 public:
  explicit Differentiator(Graph& graph) : graph_(graph) {}

  // Differentiates one scope; see the file comment. Returns one gradient per
  // x. `dx_control`: control inputs for zero gradients (so that in a function
  // body they fire in the backward phase, with dy).
  absl::StatusOr<std::vector<std::string>> Backprop(std::vector<NodeDef>& nodes, const std::string& prefix,
                                                    const std::vector<std::string>& ys,
                                                    const std::vector<std::string>& seeds,
                                                    const std::vector<std::string>& xs,
                                                    const std::vector<std::string>& dx_control,
                                                    const std::map<std::string, FactoredX>& factored = {});

 private:
  absl::StatusOr<std::string> ExtOf(const std::string& fname);

  Graph& graph_;
  std::map<std::string, std::string> ext_;            // f -> f_ext
  std::map<std::string, std::map<int, RowsKind>> factored_;  // f_ext -> its arguments with row gradients
};

absl::StatusOr<std::vector<std::string>> Differentiator::Backprop(std::vector<NodeDef>& nodes,
                                                                  const std::string& prefix,
                                                                  const std::vector<std::string>& ys,
                                                                  const std::vector<std::string>& seeds,
                                                                  const std::vector<std::string>& xs,
                                                                  const std::vector<std::string>& dx_control,
                                                                  const std::map<std::string, FactoredX>& factored) {
  // While loops on the gradient path become tail-recursive functions first
  // (loop_lowering.h); the rest of this function then sees only calls.
  // Until none is left: a loop that fed only a dead end inside another loop
  // joins the path once that loop has become a call.
  for (;;) {
    TDF_ASSIGN_OR_RETURN(std::set<std::string> loop_nodes, LoopNodesOnPath(nodes, ys, xs));
    if (loop_nodes.empty()) break;
    // An empty prefix marks a function body (ExtOf).
    TDF_RETURN_IF_ERROR(autodiff::LowerLoopsToRecursion(nodes, graph_.library, prefix.empty(), loop_nodes));
  }

  const int n0 = static_cast<int>(nodes.size());
  std::map<std::string, int> index;
  for (int i = 0; i < n0; ++i) index[nodes[i].name] = i;
  std::vector<std::vector<InputRef>> ins(n0);
  std::vector<std::vector<int>> consumers(n0);
  for (int i = 0; i < n0; ++i) {
    for (int k = 0; k < nodes[i].num_data_inputs(); ++k) {
      TDF_ASSIGN_OR_RETURN(InputRef ref, InputRef::Parse(nodes[i].input[k]));
      auto it = index.find(ref.node);
      if (it == index.end())
        return NodeError(nodes[i], absl::StatusCode::kInvalidArgument,
                         absl::StrCat("input '", nodes[i].input[k], "' names no node"));
      ins[i].push_back(ref);
      consumers[it->second].push_back(i);
    }
  }
  auto node_of = [&](const std::string& out) -> absl::StatusOr<int> {
    TDF_ASSIGN_OR_RETURN(InputRef ref, InputRef::Parse(out));
    auto it = index.find(ref.node);
    if (it == index.end()) return absl::NotFoundError(absl::StrCat("autodiff: no node '", ref.node, "'"));
    return it->second;
  };
  Emitter e(&nodes, &graph_.library, prefix);
  e.Init();

  // Nodes on a path x -> y (data edges).
  std::vector<char> fwd(n0, 0), bwd(n0, 0);
  std::vector<int> work;
  for (const std::string& x : xs) {
    TDF_ASSIGN_OR_RETURN(int i, node_of(x));
    if (!fwd[i]) work.push_back(i);
    fwd[i] = 1;
  }
  while (!work.empty()) {
    int i = work.back();
    work.pop_back();
    for (int c : consumers[i])
      if (!fwd[c]) fwd[c] = 1, work.push_back(c);
  }
  std::vector<int> roots;
  for (const std::string& y : ys) {
    TDF_ASSIGN_OR_RETURN(int i, node_of(y));
    roots.push_back(i);
    if (!bwd[i]) work.push_back(i);
    bwd[i] = 1;
  }
  while (!work.empty()) {
    int i = work.back();
    work.pop_back();
    for (const InputRef& r : ins[i]) {
      int p = index[r.node];
      if (!bwd[p]) bwd[p] = 1, work.push_back(p);
    }
  }
  std::vector<char> on(n0, 0);
  for (int i = 0; i < n0; ++i) {
    on[i] = fwd[i] && bwd[i];
    const std::string& op = nodes[i].op;
    if (on[i] && (op == "Enter" || op == "Exit" || op == "NextIteration"))
      return NodeError(nodes[i], absl::StatusCode::kInternal, "a While loop on the gradient path was not lowered");
  }
  // Post-order over on-path nodes; visiting it backwards puts consumers first.
  std::vector<int> post;
  std::vector<char> state(n0, 0);
  for (int root : roots) {
    if (!on[root] || state[root]) continue;
    std::vector<std::pair<int, size_t>> stack{{root, 0}};
    state[root] = 1;
    while (!stack.empty()) {
      auto& [i, k] = stack.back();
      if (k < ins[i].size()) {
        int p = index[ins[i][k++].node];
        if (on[p] && !state[p]) {
          state[p] = 1;
          stack.push_back({p, 0});
        }
        continue;
      }
      post.push_back(i);
      stack.pop_back();
    }
  }

  std::map<std::string, std::vector<std::string>> grads;
  for (size_t k = 0; k < ys.size(); ++k) {
    TDF_ASSIGN_OR_RETURN(std::string y, Canonical(ys[k]));
    std::string seed = k < seeds.size() && !seeds[k].empty() ? seeds[k] : e.Ones(y);
    grads[y].push_back(seed);
  }
  // Outputs that carry a factored x unchanged (the x, and Switch and
  // Identity outputs of it), each mapped to the x; their gradients are
  // rows (FactorableArgs: outer-product or indexed), collected in `rows`.
  std::map<std::string, const FactoredX*> stream;
  for (const auto& [x, fx] : factored) {
    TDF_ASSIGN_OR_RETURN(std::string key, Canonical(x));
    std::vector<std::string> work{key};
    stream[key] = &fx;
    while (!work.empty()) {
      const std::string at = work.back();
      work.pop_back();
      TDF_ASSIGN_OR_RETURN(int p, node_of(at));
      for (int c : consumers[p]) {
        for (size_t k = 0; k < ins[c].size(); ++k) {
          if (Key(ins[c][k].node, ins[c][k].port) != at) continue;
          std::vector<std::string> outs;
          if (nodes[c].op == "Switch" && k == 0) outs = {Key(nodes[c].name, 0), Key(nodes[c].name, 1)};
          if (nodes[c].op == "Identity") outs = {Key(nodes[c].name, 0)};
          for (const std::string& o : outs)
            if (stream.emplace(o, &fx).second) work.push_back(o);
        }
      }
    }
  }
  std::map<std::string, std::vector<std::string>> rows;
  auto total_rows = [&](const std::string& key) {
    auto it = rows.find(key);
    if (it == rows.end() || it->second.empty()) return std::string();
    if (it->second.size() > 1) {
      std::vector<std::string> in{key};  // the weight itself, for its shape
      in.insert(in.end(), it->second.begin(), it->second.end());
      it->second = {e.Op(ConcatOp(stream.at(key)->kind), in)};
    }
    return it->second[0];
  };
  auto add_grad = [&](int consumer, int input, const std::string& g) {
    if (g.empty()) return;
    const InputRef& r = ins[consumer][input];
    if (!fwd[index[r.node]]) return;
    if (stream.count(Key(r.node, r.port)))
      return e.Fail(NodeError(nodes[consumer], absl::StatusCode::kInternal,
                              "a gradient kept as rows (outer-product or indexed) reached this op"));
    if (!IsFloat(e.TypeOf(Key(r.node, r.port)))) return;
    grads[Key(r.node, r.port)].push_back(g);
  };
  // Rows that outermost calls return for an x, per kind: concatenated and
  // made dense once when x's gradient is summed (one GEMM or one scatter for
  // all calls, e.g. every tree of a batch, not a dense tensor per call). A
  // plain Concat: rows stay rows, where ConcatOp would compact a long sum
  // into min(K, N) rows, a GEMM of its own.
  std::map<std::string, std::map<RowsKind, std::vector<std::string>>> outer_rows;
  auto total = [&](const std::string& key) {
    if (auto o = outer_rows.find(key); o != outer_rows.end()) {
      for (auto& [kind, parts] : o->second) {
        const std::string r = parts.size() == 1 ? parts[0] : e.Op("Concat", parts, {{"axis", int64_t{0}}});
        grads[key].push_back(e.Op(DenseOp(kind), {r, key}));
      }
      outer_rows.erase(o);
    }
    auto it = grads.find(key);
    if (it == grads.end() || it->second.empty()) return std::string();
    std::string s = e.Sum(it->second);
    it->second = {s};
    return s;
  };

  for (auto it = post.rbegin(); it != post.rend(); ++it) {
    const int i = *it;
    const NodeDef node = nodes[i];  // a copy: `nodes` grows below
    const int nout = e.NumOutputs(node.name);
    std::vector<std::string> dys(nout);
    bool any = false;
    for (int p = 0; p < nout; ++p) {
      dys[p] = total(Key(node.name, p));
      any |= !dys[p].empty();
    }
    if (!stream.empty()) {
      auto in_stream = [&](size_t k) { return k < ins[i].size() && stream.count(Key(ins[i][k].node, ins[i][k].port)); };
      if ((node.op == "Switch" || node.op == "Identity") && in_stream(0)) {
        const std::string in = Key(ins[i][0].node, ins[i][0].port);
        if (node.op == "Identity") {
          if (std::string r = total_rows(Key(node.name, 0)); !r.empty()) rows[in].push_back(r);
          continue;
        }
        std::string r0 = total_rows(Key(node.name, 0)), r1 = total_rows(Key(node.name, 1));
        if (r0.empty() && r1.empty()) continue;
        // A branch that did not multiply by the weight adds no rows (an
        // empty sum, live only when that branch ran).
        const char* empty = ConcatOp(stream.at(in)->kind);
        if (r0.empty()) r0 = e.Op(empty, {Key(node.name, 0)});
        if (r1.empty()) r1 = e.Op(empty, {Key(node.name, 1)});
        rows[in].push_back(e.Op("Merge", {r0, r1}, {{"T", e.TypeOf(r0)}}));
        continue;
      }
      if (node.op == "MatMul" && in_stream(1)) {
        if (dys[0].empty()) continue;
        const std::string a = Key(ins[i][0].node, ins[i][0].port), w = Key(ins[i][1].node, ins[i][1].port);
        add_grad(i, 0, e.Op("MatMul", {dys[0], w}, {{"transpose_a", false}, {"transpose_b", true}}));
        rows[w].push_back(e.Op("Concat", {a, dys[0]}, {{"axis", int64_t{1}}}));  // the row [a | dy]
        TDF_RETURN_IF_ERROR(e.status());
        continue;
      }
      if (node.op == "Gather" && in_stream(0)) {
        if (dys[0].empty()) continue;
        const std::string p = Key(ins[i][0].node, ins[i][0].port);
        rows[p].push_back(e.Op("IndexedRows", {p, Key(ins[i][1].node, ins[i][1].port), dys[0]}));
        TDF_RETURN_IF_ERROR(e.status());
        continue;
      }
    }
    // An x with no x upstream (a Placeholder, a Read) ends the backward walk.
    bool from_x = false;
    for (const InputRef& r : ins[i]) from_x |= fwd[index[r.node]] != 0;
    if (!any || !from_x) continue;
    if (node.op == "Merge") {
      // A Cond's Merge (GraphBuilder names it "<cond>/merge_<k>" next to
      // "<cond>/pivot_switch", whose input is the predicate).
      const size_t cut = node.name.rfind("/merge_");
      auto pivot = cut == std::string::npos ? index.end() : index.find(node.name.substr(0, cut) + "/pivot_switch");
      if (pivot == index.end() || ins[i].size() != 2)
        return NodeError(node, absl::StatusCode::kUnimplemented,
                         "gradient of a Merge that is not a GraphBuilder Cond's output");
      const std::string& pred = nodes[pivot->second].input[0];
      std::string sw = e.Op("Switch", {dys[0], pred}, {{"T", e.TypeOf(dys[0])}});
      add_grad(i, 0, Key(sw, 0));
      add_grad(i, 1, Key(sw, 1));
    } else if (node.op == "Switch") {
      if (!IsFloat(e.TypeOf(node.input[0]))) continue;
      std::string g0 = dys[0].empty() ? e.Zeros(Key(node.name, 0)) : dys[0];
      std::string g1 = dys[1].empty() ? e.Zeros(Key(node.name, 1)) : dys[1];
      add_grad(i, 0, e.Op("Merge", {g0, g1}, {{"T", e.TypeOf(g0)}}));
    } else if (node.op == "Invoke") {
      TDF_ASSIGN_OR_RETURN(std::string fname, node.GetString("function"));
      const FunctionDef* f = graph_.library.Find(fname);
      if (f == nullptr || node.FindAttr("partial_args") != nullptr)
        return NodeError(node, absl::StatusCode::kInvalidArgument, "cannot differentiate this call");
      const FunctionSignature sig = f->signature;
      std::vector<int> fin, fout;
      for (size_t a = 0; a < sig.inputs.size(); ++a)
        if (IsFloat(sig.inputs[a].type)) fin.push_back(static_cast<int>(a));
      for (size_t r = 0; r < sig.outputs.size(); ++r)
        if (IsFloat(sig.outputs[r].type)) fout.push_back(static_cast<int>(r));
      if (fin.empty() || fout.empty()) continue;
      TDF_ASSIGN_OR_RETURN(std::string ext, ExtOf(fname));
      const int64_t nin = static_cast<int64_t>(sig.inputs.size()), nres = static_cast<int64_t>(sig.outputs.size());
      // The forward call becomes the x-part of a split site of f_ext ...
      NodeDef& fwd_call = nodes[i];
      fwd_call.attr["function"] = ext;
      fwd_call.attr["partial_args"] = Range(0, nin);
      fwd_call.attr["partial_results"] = Range(0, nres);
      fwd_call.attr["site_group"] = node.name;
      e.Reinfer(fwd_call);
      // ... and its gradient call the dy-part of the same site.
      std::vector<std::string> dy_in;
      for (int r : fout) dy_in.push_back(dys[r].empty() ? e.Zeros(Key(node.name, r)) : dys[r]);
      const int64_t ndy = static_cast<int64_t>(fout.size()), ndx = static_cast<int64_t>(fin.size());
      AttrMap attrs{{"function", ext},
                    {"partial_args", Range(nin, nin + ndy)},
                    {"partial_results", Range(nres, nres + ndx)},
                    {"site_group", node.name}};
      // The control inputs of the call order its gradient part too.
      std::vector<std::string> control;
      for (size_t k = node.num_data_inputs(); k < node.input.size(); ++k) control.push_back(node.input[k].substr(1));
      std::string back = e.Op("Invoke", dy_in, attrs, control);
      auto callee_rows = factored_.find(ext);
      for (size_t k = 0; k < fin.size(); ++k) {
        const std::string dx = Key(back, static_cast<int>(k));
        if (callee_rows == factored_.end() || callee_rows->second.count(fin[k]) == 0) {
          add_grad(i, fin[k], dx);
          continue;
        }
        // g_ext returns this argument's gradient as rows.
        const RowsKind kind = callee_rows->second.at(fin[k]);
        const std::string w = Key(ins[i][fin[k]].node, ins[i][fin[k]].port);
        auto s = stream.find(w);
        if (s != stream.end() && s->second->arg == fin[k] && s->second->ext == ext && s->second->kind == kind) {
          rows[w].push_back(dx);  // a recursive call's rows join this invocation's
        } else if (fwd[index[ins[i][fin[k]].node]]) {
          if (s != stream.end() || !IsFloat(e.TypeOf(w))) {
            add_grad(i, fin[k], e.Op(DenseOp(kind), {dx, w}));  // add_grad tells why not
          } else {
            outer_rows[w][kind].push_back(dx);  // the outermost calls form the sum (total)
          }
        }
      }
    } else {
      const autodiff::GradFn* fn = autodiff::FindGradient(node.op);
      if (fn == nullptr)
        return NodeError(node, absl::StatusCode::kUnimplemented, "no gradient is registered for this op");
      GradArgs a;
      a.node = &node;
      for (const InputRef& r : ins[i]) {
        a.x.push_back(Key(r.node, r.port));
        a.x_types.push_back(e.TypeOf(Key(r.node, r.port)));
      }
      for (int p = 0; p < nout; ++p) a.y.push_back(Key(node.name, p));
      a.dy = dys;
      if (node.op == "SoftmaxCrossEntropy" && !dys[1].empty())
        return NodeError(node, absl::StatusCode::kUnimplemented, "no gradient through the backprop output (1)");
      std::vector<std::string> gx = (*fn)(e, a);
      TDF_RETURN_IF_ERROR(e.status());
      if (gx.size() != ins[i].size())
        return NodeError(node, absl::StatusCode::kInternal, "gradient function returned the wrong arity");
      for (size_t k = 0; k < gx.size(); ++k) add_grad(i, static_cast<int>(k), gx[k]);
    }
    TDF_RETURN_IF_ERROR(e.status());
  }

  std::vector<std::string> out;
  for (const std::string& x : xs) {
    TDF_ASSIGN_OR_RETURN(std::string key, Canonical(x));
    std::string g;
    if (stream.count(key)) {
      g = total_rows(key);
      if (g.empty()) g = e.Op(ConcatOp(stream.at(key)->kind), {key}, {}, dx_control);
    } else {
      g = total(key);
      if (g.empty()) g = e.Op("ZerosLike", {key}, {}, dx_control);
    }
    out.push_back(g);
  }
  TDF_RETURN_IF_ERROR(e.status());
  FuseMatMulSums(nodes, static_cast<size_t>(n0), out);
  return out;
}

absl::StatusOr<std::string> Differentiator::ExtOf(const std::string& fname) {
  if (auto it = ext_.find(fname); it != ext_.end()) return it->second;
  const FunctionDef* found = graph_.library.Find(fname);
  if (found == nullptr || !found->defined)
    return absl::NotFoundError(absl::StrCat("autodiff: function '", fname, "' is not defined"));
  const FunctionDef f = *found;  // a copy: the library grows below
  std::string ext = fname + "_ext";
  while (graph_.library.Find(ext) != nullptr) ext += "_";
  const FunctionSignature& sig = f.signature;
  const int nin = static_cast<int>(sig.inputs.size()), nres = static_cast<int>(sig.outputs.size());
  std::vector<int> fin, fout;
  for (int a = 0; a < nin; ++a)
    if (IsFloat(sig.inputs[a].type)) fin.push_back(a);
  for (int r = 0; r < nres; ++r)
    if (IsFloat(sig.outputs[r].type)) fout.push_back(r);
  FunctionSignature esig = sig;
  esig.name = ext;
  for (int r : fout) esig.inputs.push_back({absl::StrCat("d_", sig.outputs[r].name), sig.outputs[r].type});
  for (int a : fin) esig.outputs.push_back({absl::StrCat("d_", sig.inputs[a].name), sig.inputs[a].type});
  TDF_RETURN_IF_ERROR(graph_.library.Declare(esig));
  ext_[fname] = ext;
  const std::map<int, RowsKind> row_args = FactorableArgs(f);
  factored_[ext] = row_args;

  std::vector<NodeDef> body = f.node;
  std::set<std::string> names;
  for (const NodeDef& n : body) names.insert(n.name);
  auto fresh = [&](std::string base) {
    std::string name = base;
    for (int k = 1; names.count(name) != 0; ++k) name = absl::StrCat(base, "_", k);
    names.insert(name);
    return name;
  };
  std::vector<std::string> arg_node(nin), retval_in(nres);
  for (const NodeDef& n : body) {
    if (n.op == "Arg") arg_node[n.GetIntOr("index", -1)] = n.name;
    if (n.op == "Retval") retval_in[n.GetIntOr("index", -1)] = n.input[0];
  }
  for (int a : fin) {
    if (!arg_node[a].empty()) continue;  // an unused argument still gets a (zero) gradient
    NodeDef arg;
    arg.name = fresh(absl::StrCat("arg_", a));
    arg.op = "Arg";
    arg.attr = {{"T", sig.inputs[a].type}, {"index", static_cast<int64_t>(a)}};
    arg_node[a] = arg.name;
    body.push_back(std::move(arg));
  }
  std::vector<std::string> ys, seeds, xs;
  for (size_t k = 0; k < fout.size(); ++k) {
    const int r = fout[k];
    NodeDef arg;
    arg.name = fresh(absl::StrCat("d_", sig.outputs[r].name.empty() ? absl::StrCat("y", r) : sig.outputs[r].name));
    arg.op = "Arg";
    arg.attr = {{"T", sig.outputs[r].type}, {"index", static_cast<int64_t>(nin + k)}};
    ys.push_back(retval_in[r]);
    seeds.push_back(arg.name);
    body.push_back(std::move(arg));
  }
  std::map<std::string, FactoredX> factored;
  for (int a : fin) {
    xs.push_back(arg_node[a]);
    if (auto r = row_args.find(a); r != row_args.end()) factored[arg_node[a]] = FactoredX{a, ext, r->second};
  }
  absl::StatusOr<std::vector<std::string>> dx = Backprop(body, "", ys, seeds, xs, seeds, factored);
  if (!dx.ok())
    return absl::Status(dx.status().code(), absl::StrCat("in function '", fname, "': ", dx.status().message()));
  for (size_t k = 0; k < fin.size(); ++k) {
    NodeDef ret;
    ret.name = fresh(absl::StrCat("d_", sig.inputs[fin[k]].name.empty() ? absl::StrCat("x", fin[k])
                                                                           : sig.inputs[fin[k]].name,
                                  "_retval"));
    ret.op = "Retval";
    ret.input = {(*dx)[k]};
    ret.attr = {{"T", sig.inputs[fin[k]].type}, {"index", static_cast<int64_t>(nres + k)}};
    body.push_back(std::move(ret));
  }
  TDF_RETURN_IF_ERROR(graph_.library.Define(esig, std::move(body)));
  return ext;
}

}  // namespace

absl::StatusOr<std::vector<std::string>> AddGradients(Graph& graph, const std::vector<std::string>& ys,
                                                      const std::vector<std::string>& xs,
                                                      const std::vector<std::string>& grad_ys) {
  if (ys.empty()) return absl::InvalidArgumentError("AddGradients: no ys");
  if (!grad_ys.empty() && grad_ys.size() != ys.size())
    return absl::InvalidArgumentError(
        absl::StrCat("AddGradients: ", grad_ys.size(), " upstream gradients for ", ys.size(), " ys"));
  {
    // A port past a node's outputs would otherwise get a (meaningless) zero
    // gradient instead of an error.
    Emitter types(&graph.node, &graph.library, "grad/");
    types.Init();
    for (const std::vector<std::string>* names : {&ys, &xs, &grad_ys}) {
      for (const std::string& name : *names) {
        TDF_ASSIGN_OR_RETURN(InputRef ref, InputRef::Parse(name));
        const int n = types.NumOutputs(ref.node);
        if (n > 0 && ref.port >= n)
          return absl::InvalidArgumentError(
              absl::StrCat("AddGradients: '", name, "': node '", ref.node, "' has ", n, " output(s)"));
      }
    }
  }
  Differentiator d(graph);
  TDF_ASSIGN_OR_RETURN(std::vector<std::string> dx, d.Backprop(graph.node, "grad/", ys, grad_ys, xs, {}));
  // A call's results become Return nodes in the executable graph: hand out
  // an Identity instead, which keeps its name and can be fetched.
  Emitter e(&graph.node, &graph.library, "grad/");
  e.Init();
  for (std::string& g : dx) {
    const NodeDef* producer = graph.FindNode(InputRef::Parse(g)->node);
    if (producer != nullptr && producer->op == "Invoke") g = e.Op("Identity", {g});
  }
  TDF_RETURN_IF_ERROR(e.status());
  return dx;
}

std::vector<std::string> DifferentiableOps() {
  std::vector<std::string> ops = autodiff::GradientOps();
  for (const char* op : {"Merge", "Switch", "Invoke"}) ops.push_back(op);
  std::sort(ops.begin(), ops.end());
  return ops;
}

}  // namespace tdf
