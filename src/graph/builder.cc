#include "tdf/builder.h"

#include <algorithm>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "tdf/op_registry.h"
#include "tdf/status.h"

namespace tdf {

struct GraphBuilder::NodeInfo {
  NodeDef def;
  int context = 0;                 // the context the node fires in
  std::vector<int> port_context;   // per output port, where the value lives (boundary ops only)
  std::vector<DType> output_types;
};

// A cond branch or a loop, in a tree rooted at context 0 (the top level).
struct GraphBuilder::Context {
  enum class Kind { kTop, kCondBranch, kLoop };
  Kind kind = Kind::kTop;
  int parent = -1;
  std::string name;     // prefix for generated node names
  Output pivot;         // triggers sourceless nodes in this context
  // Cond branch: the predicate (in the parent), the branch (0 else, 1 then)
  // and the Switch nodes shared by both branches of one cond.
  Output pred;
  int branch = 0;
  std::shared_ptr<std::map<std::pair<int, int>, int>> cond_switches;
  int sibling = -1;  // the other branch
  // Loop: frame name and parallel_iterations for invariant Enters.
  std::string frame_name;
  int parallel_iterations = 10;
  // Values of enclosing contexts already made usable here.
  std::map<std::pair<int, int>, Output> captured;
};

GraphBuilder::GraphBuilder() : GraphBuilder(nullptr, false) {}

GraphBuilder::GraphBuilder(FunctionLibrary* library, bool is_function)
    : library_(library != nullptr ? library : &owned_library_), is_function_(is_function) {
  auto top = std::make_unique<Context>();
  contexts_.push_back(std::move(top));
}

GraphBuilder::~GraphBuilder() = default;

void GraphBuilder::Fail(absl::Status s) {
  if (status_.ok()) status_ = std::move(s);
}

bool GraphBuilder::HasNode(Output o) const {
  return o.valid() && o.builder == this && o.node < static_cast<int>(nodes_.size());
}

bool GraphBuilder::HasOutput(Output o) const {
  return HasNode(o) && o.port >= 0 && o.port < static_cast<int>(nodes_[o.node].output_types.size());
}

void GraphBuilder::FailInvalid(absl::string_view what, Output o) {
  if (!status_.ok()) return;
  if (o.builder != nullptr && o.builder != this) {
    Fail(absl::InvalidArgumentError(absl::StrCat(what, ": the Output comes from another builder")));
  } else if (HasNode(o)) {
    const NodeInfo& n = nodes_[o.node];
    Fail(absl::InvalidArgumentError(absl::StrCat(what, ": output ", o.port, " of ", NodeLabel(n.def), ", which has ",
                                                 n.output_types.size(), " outputs")));
  } else {
    Fail(absl::InvalidArgumentError(absl::StrCat(what, ": the Output is invalid")));
  }
}

Output GraphBuilder::FailedOutput(int num_outputs, int port) {
  failed_output_counts_.push_back(num_outputs);
  return Output{this, -1 - static_cast<int>(failed_output_counts_.size()), port};
}

std::vector<Output> GraphBuilder::FailedOutputs(int num_outputs) {
  Output first = FailedOutput(num_outputs);
  std::vector<Output> outs;
  for (int p = 0; p < num_outputs; ++p) outs.push_back(Output{this, first.node, p});
  return outs;
}

int GraphBuilder::GuessOutputCount(const NodeDef& def, size_t num_inputs) const {
  const OpSchema* schema = OpRegistry::Global()->Find(def.op);
  if (schema == nullptr) return 1;
  // An arity the schema accepts, so that the dtype rule may index inputs.
  size_t n = std::max<size_t>(num_inputs, schema->min_inputs());
  if (schema->max_inputs() >= 0) n = std::min<size_t>(n, schema->max_inputs());
  const std::vector<DType> unknown(n, DType::kInvalid);
  absl::StatusOr<std::vector<DType>> types = schema->InferTypes(InferenceContext{def, unknown, library_});
  return types.ok() ? static_cast<int>(types->size()) : 1;
}

std::string GraphBuilder::UniqueName(const std::string& base) {
  const std::string& prefix = contexts_[current_context_]->name;
  for (;;) {
    std::string candidate = absl::StrCat(prefix, base, "_", ++name_counter_);
    if (node_by_name_.count(candidate) == 0) return candidate;
  }
}

DType GraphBuilder::dtype(Output o) const {
  return HasOutput(o) ? nodes_[o.node].output_types[o.port] : DType::kInvalid;
}

std::string GraphBuilder::Name(Output o) const {
  // Port 0 of a node without outputs (NoOp) still names it, as a target.
  if (!HasNode(o) || o.port < 0 || (o.port > 0 && !HasOutput(o))) return "<invalid>";
  const std::string& name = nodes_[o.node].def.name;
  return o.port == 0 ? name : absl::StrCat(name, ":", o.port);
}

std::vector<Output> GraphBuilder::Outputs(Output node) const {
  // Outputs name their builder for the operators to add nodes through;
  // reading a node's outputs does not change the builder.
  GraphBuilder* self = const_cast<GraphBuilder*>(this);
  if (HasNode(node)) {
    std::vector<Output> outs;
    for (int p = 0; p < static_cast<int>(nodes_[node.node].output_types.size()); ++p)
      outs.push_back(Output{self, node.node, p});
    return outs;
  }
  // A failed call's node: as many invalid Outputs as it would have had.
  // Anything else (another builder's, forged): one plain invalid Output.
  const int failed = -2 - node.node;
  if (node.builder != this || failed < 0 || failed >= static_cast<int>(failed_output_counts_.size()))
    return {Output{}};
  std::vector<Output> outs;
  for (int p = 0; p < failed_output_counts_[failed]; ++p) outs.push_back(Output{self, node.node, p});
  return outs;
}

Output GraphBuilder::AddNode(NodeDef def, int context, std::vector<DType> output_types) {
  NodeInfo info;
  info.def = std::move(def);
  info.context = context;
  info.output_types = std::move(output_types);
  node_by_name_[info.def.name] = static_cast<int>(nodes_.size());
  nodes_.push_back(std::move(info));
  return Output{this, static_cast<int>(nodes_.size()) - 1, 0};
}

namespace {
int OutputContextOf(const std::vector<int>& port_context, int node_context, int port) {
  if (port < static_cast<int>(port_context.size())) return port_context[port];
  return node_context;
}

bool IsLoopInvariant(const NodeDef& producer) {
  return producer.op == "Enter" && producer.GetBoolOr("is_constant", false);
}
}  // namespace

Output GraphBuilder::Capture(Output o) {
  if (!status_.ok()) return Output{};
  if (!HasOutput(o)) {
    FailInvalid("an input", o);
    return Output{};
  }
  const int target = current_context_;
  const NodeInfo& producer = nodes_[o.node];
  const int source = OutputContextOf(producer.port_context, producer.context, o.port);
  if (source == target) return o;
  Context& ctx = *contexts_[target];
  auto cached = ctx.captured.find({o.node, o.port});
  if (cached != ctx.captured.end()) return cached->second;
  if (target == 0) {
    Fail(absl::InvalidArgumentError(absl::StrCat("value '", Name(o),
                                                 "' of a cond branch or loop body is used outside it")));
    return Output{};
  }
  // Make `o` usable in the parent first, then cross one boundary.
  current_context_ = ctx.parent;
  Output outer = Capture(o);
  current_context_ = target;
  if (!outer.valid()) return Output{};
  Output inner;
  const DType t = dtype(outer);
  if (ctx.kind == Context::Kind::kCondBranch) {
    auto key = std::make_pair(outer.node, outer.port);
    auto it = ctx.cond_switches->find(key);
    int sw;
    if (it != ctx.cond_switches->end()) {
      sw = it->second;
    } else {
      NodeDef d;
      d.op = "Switch";
      current_context_ = ctx.parent;
      d.name = UniqueName("Switch");
      current_context_ = target;
      d.input = {Name(outer), Name(ctx.pred)};
      d.attr["T"] = t;
      Output s = AddNode(std::move(d), ctx.parent, {t, t});
      nodes_[s.node].port_context = {ctx.branch == 0 ? target : ctx.sibling,
                                     ctx.branch == 1 ? target : ctx.sibling};
      sw = s.node;
      (*ctx.cond_switches)[key] = sw;
    }
    inner = Output{this, sw, ctx.branch};
  } else {
    NodeDef d;
    d.op = "Enter";
    current_context_ = ctx.parent;
    d.name = UniqueName("Enter");
    current_context_ = target;
    d.input = {Name(outer)};
    d.attr["T"] = t;
    d.attr["frame_name"] = ctx.frame_name;
    d.attr["is_constant"] = true;
    d.attr["parallel_iterations"] = static_cast<int64_t>(ctx.parallel_iterations);
    inner = AddNode(std::move(d), ctx.parent, {t});
    nodes_[inner.node].port_context = {target};
  }
  ctx.captured[{o.node, o.port}] = inner;
  ctx.captured[{inner.node, inner.port}] = inner;
  return inner;
}

Output GraphBuilder::Op(const std::string& op, const std::vector<Output>& inputs, AttrMap attrs,
                        const std::string& name) {
  NodeDef def;
  def.op = op;
  def.name = name;
  def.attr = std::move(attrs);
  auto failed = [&] { return FailedOutput(GuessOutputCount(def, inputs.size())); };
  if (!status_.ok()) return failed();
  const OpSchema* schema = OpRegistry::Global()->Find(op);
  if (schema == nullptr) {
    Fail(absl::NotFoundError(absl::StrCat("unknown op '", op, "'")));
    return failed();
  }
  if (op == "Merge" && contexts_[current_context_]->kind == Context::Kind::kLoop) {
    // The executor offers a loop invariant to the nodes that read it in
    // place, never to a Merge, which fires on the first live input it is
    // delivered (a control input too, with no value). Each invariant input
    // goes through an Identity triggered by the iteration's pivot (below),
    // a value of the iteration like any other.
    std::vector<Output> per_iteration;
    bool any_invariant = false;
    for (Output in : inputs) {
      Output c = Capture(in);
      if (!c.valid()) return failed();
      if (IsLoopInvariant(nodes_[c.node].def)) {
        c = Op("Identity", {c});
        any_invariant = true;
      }
      per_iteration.push_back(c);
    }
    if (any_invariant) return Op(op, per_iteration, std::move(def.attr), name);
  }
  std::vector<DType> input_types;
  for (Output in : inputs) {
    Output c = Capture(in);
    if (!c.valid()) return failed();
    def.input.push_back(Name(c));
    input_types.push_back(dtype(c));
  }
  if (name.empty()) {
    def.name = UniqueName(op);
  } else if (node_by_name_.count(name) > 0) {
    Fail(absl::AlreadyExistsError(absl::StrCat("duplicate node name '", name, "'")));
    return failed();
  }
  // Nodes inside a loop body that read only loop invariants would otherwise
  // run in the exiting iteration too: like sourceless nodes, they are
  // triggered by the iteration's pivot. So is a call that reads any
  // invariant: its arguments enter the callee one by one (a Call per
  // argument in static mode), and a live invariant would start a partial
  // invocation in the exiting iteration, running whatever in the callee
  // needs only that argument (side effects included).
  const bool in_loop = !inputs.empty() && contexts_[current_context_]->kind == Context::Kind::kLoop;
  bool only_invariants = in_loop, any_invariant = false;
  for (size_t i = 0; in_loop && i < def.input.size(); ++i) {
    const std::string& in = def.input[i];
    const std::string producer = in.substr(0, in.rfind(':') == std::string::npos ? in.size() : in.rfind(':'));
    auto it = node_by_name_.find(producer);
    const NodeDef* p = it == node_by_name_.end() ? nullptr : &nodes_[it->second].def;
    const bool invariant = p != nullptr && p->op == "Enter" && p->GetBoolOr("is_constant", false);
    only_invariants &= invariant;
    any_invariant |= invariant;
  }
  if (only_invariants || (op == "Invoke" && any_invariant)) {
    Output pivot = contexts_[current_context_]->pivot;
    if (pivot.valid()) def.input.push_back(absl::StrCat("^", nodes_[pivot.node].def.name));
  }
  // Sourceless nodes inside a branch or loop run once per branch/iteration.
  if (inputs.empty() && current_context_ != 0) {
    Output pivot = contexts_[current_context_]->pivot;
    if (pivot.valid()) def.input.push_back(absl::StrCat("^", nodes_[pivot.node].def.name));
  }
  InferenceContext ictx{def, input_types, library_};
  absl::StatusOr<std::vector<DType>> types = schema->InferTypes(ictx);
  if (!types.ok()) {
    Fail(types.status());
    return failed();
  }
  return AddNode(std::move(def), current_context_, *std::move(types));
}

void GraphBuilder::AddControlInput(Output dst, Output src) {
  if (!status_.ok()) return;
  if (!HasNode(dst)) return FailInvalid("AddControlInput: dst", dst);
  if (!HasNode(src)) return FailInvalid("AddControlInput: src", src);
  nodes_[dst.node].def.input.push_back(absl::StrCat("^", nodes_[src.node].def.name));
}

void GraphBuilder::SetDevice(Output node, const std::string& device) {
  if (!status_.ok()) return;
  if (!HasNode(node)) return FailInvalid("SetDevice", node);
  nodes_[node.node].def.device = device;
}

Output GraphBuilder::Placeholder(const std::string& name, DType dtype) {
  return Op("Placeholder", {}, {{"dtype", dtype}}, name);
}

Output GraphBuilder::Const(const Tensor& value, const std::string& name) {
  return Op("Const", {}, {{"value", value}, {"dtype", value.dtype()}}, name);
}

Output GraphBuilder::Identity(Output x, const std::string& name) { return Op("Identity", {x}, {}, name); }

Output GraphBuilder::Variable(const std::string& name, const Tensor& initial_value) {
  if (current_context_ != 0 || is_function_) {
    Fail(absl::InvalidArgumentError(absl::StrCat("variable '", name, "' must be created in the main graph")));
    return FailedOutput(1);
  }
  return Op("Variable", {},
            {{"dtype", initial_value.dtype()}, {"shape", initial_value.shape()}, {"initial_value", initial_value}},
            name);
}

Output GraphBuilder::Read(Output variable) {
  DType t = HasNode(variable) ? nodes_[variable.node].def.GetType("dtype").value_or(DType::kInvalid)
                               : DType::kInvalid;
  return Op("Read", {variable}, {{"dtype", t}});
}

Output GraphBuilder::Assign(Output variable, Output value) {
  return Op("Assign", {variable, value}, {{"dtype", dtype(value)}});
}

Output GraphBuilder::AssignAdd(Output variable, Output delta) {
  return Op("AssignAdd", {variable, delta}, {{"dtype", dtype(delta)}});
}

Output GraphBuilder::Sum(Output x, std::vector<int64_t> axes, bool keep_dims) {
  AttrMap attrs{{"keep_dims", keep_dims}};
  if (!axes.empty()) attrs["axes"] = std::move(axes);
  return Op("Sum", {x}, std::move(attrs));
}

Output GraphBuilder::Mean(Output x, std::vector<int64_t> axes, bool keep_dims) {
  AttrMap attrs{{"keep_dims", keep_dims}};
  if (!axes.empty()) attrs["axes"] = std::move(axes);
  return Op("Mean", {x}, std::move(attrs));
}

Output GraphBuilder::Max(Output x, std::vector<int64_t> axes, bool keep_dims) {
  AttrMap attrs{{"keep_dims", keep_dims}};
  if (!axes.empty()) attrs["axes"] = std::move(axes);
  return Op("Max", {x}, std::move(attrs));
}

std::vector<Output> GraphBuilder::Cond(Output pred, const BranchFn& then_fn, const BranchFn& else_fn) {
  std::vector<Output> results[2];  // else, then: as far as they were built
  bool ran[2] = {false, false};
  std::vector<Output> merged = CondOrError(pred, then_fn, else_fn, results, ran);
  if (status_.ok()) return merged;
  // One invalid Output per branch result: a branch that did not run runs
  // now, as a no-op, to tell how many it returns.
  const BranchFn* fns[2] = {&else_fn, &then_fn};
  for (int b : {1, 0})
    if (!ran[b]) results[b] = (*fns[b])();
  const size_t n = std::max(results[0].size(), results[1].size());
  std::vector<Output> outs;
  for (size_t i = 0; i < n; ++i) outs.push_back(FailedOutput(2));  // a Merge's (value, index)
  return outs;
}

// Builds the cond; the caller turns an error into invalid Outputs.
std::vector<Output> GraphBuilder::CondOrError(Output pred, const BranchFn& then_fn, const BranchFn& else_fn,
                                              std::vector<Output> results[2], bool ran[2]) {
  if (!status_.ok()) return {};
  Output p = Capture(pred);
  if (!p.valid()) return {};
  if (dtype(p) != DType::kBool) {
    Fail(absl::InvalidArgumentError(absl::StrCat("Cond predicate '", Name(p), "' must be bool, is ",
                                                 DTypeName(dtype(p)))));
    return {};
  }
  // In a loop body, a predicate from outside the loop is a loop invariant,
  // and a Switch of an invariant on it would read only invariants: it would
  // fire in every iteration the loop creates, the exiting one too, whose
  // body must stay dead (a live branch result there reaches NextIteration
  // and starts yet another iteration, forever). An Identity of it gets the
  // iteration's pivot, as Op gives every node that reads only invariants.
  if (contexts_[current_context_]->kind == Context::Kind::kLoop && IsLoopInvariant(nodes_[p.node].def)) {
    p = Op("Identity", {p});
    if (!p.valid()) return {};
  }
  const int parent = current_context_;
  const std::string cond_name = UniqueName("cond");
  auto switches = std::make_shared<std::map<std::pair<int, int>, int>>();
  int branch_ctx[2];
  for (int b = 0; b < 2; ++b) {
    auto ctx = std::make_unique<Context>();
    ctx->kind = Context::Kind::kCondBranch;
    ctx->parent = parent;
    ctx->name = absl::StrCat(cond_name, b == 1 ? "/then/" : "/else/");
    ctx->pred = p;
    ctx->branch = b;
    ctx->cond_switches = switches;
    contexts_.push_back(std::move(ctx));
    branch_ctx[b] = static_cast<int>(contexts_.size()) - 1;
  }
  contexts_[branch_ctx[0]]->sibling = branch_ctx[1];
  contexts_[branch_ctx[1]]->sibling = branch_ctx[0];
  // Pivots: Identity(Switch(pred, pred):branch) trigger sourceless nodes.
  NodeDef ps;
  ps.op = "Switch";
  ps.name = absl::StrCat(cond_name, "/pivot_switch");
  ps.input = {Name(p), Name(p)};
  ps.attr["T"] = DType::kBool;
  Output psw = AddNode(std::move(ps), parent, {DType::kBool, DType::kBool});
  nodes_[psw.node].port_context = {branch_ctx[0], branch_ctx[1]};
  const size_t first_branch_node = nodes_.size();
  const BranchFn* fns[2] = {&else_fn, &then_fn};
  for (int b : {1, 0}) {
    current_context_ = branch_ctx[b];
    NodeDef pv;
    pv.op = "Identity";
    pv.name = absl::StrCat(cond_name, b == 1 ? "/then/pivot" : "/else/pivot");
    pv.input = {Name(Output{this, psw.node, b})};
    contexts_[branch_ctx[b]]->pivot = AddNode(std::move(pv), branch_ctx[b], {DType::kBool});
    results[b] = (*fns[b])();
    ran[b] = true;
    for (Output& o : results[b]) o = Capture(o);
    current_context_ = parent;
    if (!status_.ok()) return {};
  }
  if (results[0].size() != results[1].size()) {
    Fail(absl::InvalidArgumentError(absl::StrCat("Cond branches return ", results[1].size(), " (then) and ",
                                                 results[0].size(), " (else) values")));
    return {};
  }
  UntriggerBranchConstants(first_branch_node, branch_ctx, results);
  std::vector<Output> merged;
  for (size_t i = 0; i < results[0].size(); ++i) {
    DType tf = dtype(results[0][i]), tt = dtype(results[1][i]);
    if (tf != tt) {
      Fail(absl::InvalidArgumentError(absl::StrCat("Cond output ", i, " is ", DTypeName(tt), " in the then branch and ",
                                                   DTypeName(tf), " in the else branch")));
      return {};
    }
    NodeDef m;
    m.op = "Merge";
    m.name = absl::StrCat(cond_name, "/merge_", i);
    m.input = {Name(results[0][i]), Name(results[1][i])};
    m.attr["T"] = tt;
    merged.push_back(AddNode(std::move(m), parent, {tt, DType::kInt32}));
  }
  return merged;
}

// A branch Const needs its pivot edge only to be dead when the branch is not
// taken. When every consumer also takes another value of the branch (one
// that is dead then anyway) and the Const is not a branch result, the edge
// is dropped: at the top level of a function the Const becomes sourceless
// and the executor folds it into the frame instead of firing it.
void GraphBuilder::UntriggerBranchConstants(size_t first, const int branch_ctx[2],
                                            const std::vector<Output> results[2]) {
  auto is_pivot_const = [&](size_t k) {
    const NodeDef& d = nodes_[k].def;
    return d.op == "Const" && d.input.size() == 1 && !d.input[0].empty() && d.input[0][0] == '^' &&
           (nodes_[k].context == branch_ctx[0] || nodes_[k].context == branch_ctx[1]);
  };
  std::map<std::string, size_t> index;
  for (size_t k = first; k < nodes_.size(); ++k) index[nodes_[k].def.name] = k;
  std::vector<size_t> candidates;
  for (size_t k = first; k < nodes_.size(); ++k) {
    if (!is_pivot_const(k)) continue;
    bool is_result = false;
    for (int b = 0; b < 2; ++b)
      for (const Output& o : results[b]) is_result |= o.node == static_cast<int>(k);
    if (is_result) continue;
    bool any_consumer = false, all_covered = true;
    for (size_t c = k + 1; c < nodes_.size() && all_covered; ++c) {
      const NodeDef& cd = nodes_[c].def;
      bool uses = false, covered = false;
      for (const std::string& in : cd.input) {
        if (!in.empty() && in[0] == '^') continue;
        const std::string producer = in.substr(0, in.rfind(':') == std::string::npos ? in.size() : in.rfind(':'));
        if (producer == nodes_[k].def.name) {
          uses = true;
          continue;
        }
        auto it = index.find(producer);
        // Producers outside this cond (already captured) or non-constant
        // branch nodes are dead when the branch is not taken.
        if (it == index.end() || !is_pivot_const(it->second)) covered = true;
      }
      // Ops whose inputs do not share one deadness (Merge fires on any live
      // input; a call's arguments become separate Call nodes) keep the edge.
      static const std::set<std::string> kSplitOps = {"Merge", "Invoke", "Enter", "Exit", "NextIteration",
                                                      "Retval", "Call", "Return"};
      if (uses) {
        any_consumer = true;
        all_covered &= covered && kSplitOps.count(cd.op) == 0;
      }
    }
    if (any_consumer && all_covered) candidates.push_back(k);
  }
  const int parent = contexts_[branch_ctx[0]]->parent;
  const Output parent_pivot = contexts_[parent]->pivot;
  for (size_t k : candidates) {
    NodeDef& d = nodes_[k].def;
    d.input.clear();
    if (parent != 0 && parent_pivot.valid()) d.input.push_back(absl::StrCat("^", nodes_[parent_pivot.node].def.name));
    nodes_[k].context = parent;
  }
}

std::vector<Output> GraphBuilder::While(const LoopCondFn& cond_fn, const LoopBodyFn& body_fn,
                                        const std::vector<Output>& loop_vars, const WhileOptions& options) {
  std::vector<Output> exits = WhileOrError(cond_fn, body_fn, loop_vars, options);
  if (status_.ok()) return exits;
  // One invalid Output per loop variable (one when there were none).
  std::vector<Output> outs;
  for (size_t i = 0; i < std::max<size_t>(loop_vars.size(), 1); ++i) outs.push_back(FailedOutput(1));
  return outs;
}

// Builds the loop; the caller turns an error into invalid Outputs.
std::vector<Output> GraphBuilder::WhileOrError(const LoopCondFn& cond_fn, const LoopBodyFn& body_fn,
                                               const std::vector<Output>& loop_vars, const WhileOptions& options) {
  if (!status_.ok()) return {};
  if (loop_vars.empty()) {
    Fail(absl::InvalidArgumentError("While needs at least one loop variable"));
    return {};
  }
  const int parent = current_context_;
  std::vector<Output> vars;
  for (Output v : loop_vars) {
    Output c = Capture(v);
    if (!c.valid()) return {};
    // In a loop body, an initial value from outside that loop is its
    // invariant, and an Enter reading only invariants would fire in every
    // iteration, the exiting one too, and start this loop there (whole,
    // when every initial value is one; its results then reach NextIteration
    // and the outer loop never ends). As Op does for such nodes, an
    // Identity triggered by the iteration's pivot.
    if (contexts_[parent]->kind == Context::Kind::kLoop && IsLoopInvariant(nodes_[c.node].def)) {
      c = Op("Identity", {c});
      if (!c.valid()) return {};
    }
    vars.push_back(c);
  }
  const std::string loop_name = options.name.empty() ? UniqueName("while") : options.name;
  auto lctx = std::make_unique<Context>();
  lctx->kind = Context::Kind::kLoop;
  lctx->parent = parent;
  lctx->name = loop_name + "/";
  lctx->frame_name = loop_name;
  lctx->parallel_iterations = options.parallel_iterations;
  contexts_.push_back(std::move(lctx));
  const int loop = static_cast<int>(contexts_.size()) - 1;

  const size_t n = vars.size();
  std::vector<Output> merges(n);
  for (size_t i = 0; i < n; ++i) {
    const DType t = dtype(vars[i]);
    NodeDef e;
    e.op = "Enter";
    e.name = absl::StrCat(loop_name, "/enter_", i);
    e.input = {Name(vars[i])};
    e.attr = {{"T", t}, {"frame_name", loop_name}, {"is_constant", false},
              {"parallel_iterations", static_cast<int64_t>(options.parallel_iterations)}};
    Output enter = AddNode(std::move(e), parent, {t});
    nodes_[enter.node].port_context = {loop};
    NodeDef m;
    m.op = "Merge";
    m.name = absl::StrCat(loop_name, "/merge_", i);
    m.input = {Name(enter), Name(enter)};  // input 1 becomes the NextIteration below
    m.attr["T"] = t;
    merges[i] = AddNode(std::move(m), loop, {t, DType::kInt32});
  }
  current_context_ = loop;
  contexts_[loop]->pivot = merges[0];
  Output pred = cond_fn(merges);
  pred = Capture(pred);
  if (!status_.ok()) { current_context_ = parent; return {}; }
  if (dtype(pred) != DType::kBool) {
    Fail(absl::InvalidArgumentError(absl::StrCat("While condition must be bool, is ", DTypeName(dtype(pred)))));
    current_context_ = parent;
    return {};
  }
  NodeDef lc;
  lc.op = "LoopCond";
  lc.name = absl::StrCat(loop_name, "/loop_cond");
  lc.input = {Name(pred)};
  Output loop_cond = AddNode(std::move(lc), loop, {DType::kBool});
  std::vector<Output> exits(n), body_in(n);
  for (size_t i = 0; i < n; ++i) {
    const DType t = dtype(vars[i]);
    NodeDef s;
    s.op = "Switch";
    s.name = absl::StrCat(loop_name, "/switch_", i);
    s.input = {Name(merges[i]), Name(loop_cond)};
    s.attr["T"] = t;
    Output sw = AddNode(std::move(s), loop, {t, t});
    NodeDef x;
    x.op = "Exit";
    x.name = absl::StrCat(loop_name, "/exit_", i);
    x.input = {Name(sw)};
    x.attr["T"] = t;
    exits[i] = AddNode(std::move(x), loop, {t});
    nodes_[exits[i].node].port_context = {parent};
    NodeDef id;
    id.op = "Identity";
    id.name = absl::StrCat(loop_name, "/body_", i);
    id.input = {Name(Output{this, sw.node, 1})};
    body_in[i] = AddNode(std::move(id), loop, {t});
  }
  contexts_[loop]->pivot = body_in[0];
  std::vector<Output> outs = body_fn(body_in);
  if (status_.ok() && outs.size() != n)
    Fail(absl::InvalidArgumentError(absl::StrCat("While body returns ", outs.size(), " values for ", n,
                                                 " loop variables")));
  for (size_t i = 0; status_.ok() && i < n; ++i) {
    Output o = Capture(outs[i]);
    if (!o.valid()) break;
    if (dtype(o) != dtype(vars[i])) {
      Fail(absl::InvalidArgumentError(absl::StrCat("While body output ", i, " is ", DTypeName(dtype(o)),
                                                   ", loop variable is ", DTypeName(dtype(vars[i])))));
      break;
    }
    if (nodes_[o.node].def.op == "Enter") {
      // A loop invariant returned by the body must still stop with the loop:
      // gate it on the body pivot, which is dead after the last iteration.
      NodeDef gate;
      gate.op = "Identity";
      gate.name = UniqueName("Identity");
      gate.input = {Name(o), absl::StrCat("^", nodes_[contexts_[loop]->pivot.node].def.name)};
      o = AddNode(std::move(gate), loop, {dtype(o)});
    }
    NodeDef ni;
    ni.op = "NextIteration";
    ni.name = absl::StrCat(loop_name, "/next_", i);
    ni.input = {Name(o)};
    ni.attr["T"] = dtype(o);
    Output next = AddNode(std::move(ni), loop, {dtype(o)});
    nodes_[merges[i].node].def.input[1] = Name(next);
  }
  current_context_ = parent;
  if (!status_.ok()) return {};
  return exits;
}

absl::Status GraphBuilder::Declare(const FunctionSignature& signature) {
  absl::Status s = library_->Declare(signature);
  if (!s.ok()) Fail(s);
  return s;
}

absl::Status GraphBuilder::DefineFunction(const FunctionSignature& signature, const FunctionBodyFn& body) {
  if (!status_.ok()) return status_;
  TDF_RETURN_IF_ERROR(Declare(signature));
  GraphBuilder fb(library_, true);
  std::vector<Output> args;
  for (size_t i = 0; i < signature.inputs.size(); ++i) {
    const ArgDef& a = signature.inputs[i];
    args.push_back(fb.Op("Arg", {}, {{"T", a.type}, {"index", static_cast<int64_t>(i)}},
                         a.name.empty() ? absl::StrCat("arg_", i) : a.name));
  }
  std::vector<Output> outs = body(fb, args);
  if (fb.status_.ok() && outs.size() != signature.outputs.size())
    fb.Fail(absl::InvalidArgumentError(absl::StrCat("body returns ", outs.size(), " values; the signature has ",
                                                    signature.outputs.size())));
  for (size_t i = 0; fb.status_.ok() && i < outs.size(); ++i) {
    if (fb.dtype(outs[i]) != signature.outputs[i].type) {
      fb.Fail(absl::InvalidArgumentError(absl::StrCat("result ", i, " is ", DTypeName(fb.dtype(outs[i])),
                                                      "; the signature says ",
                                                      DTypeName(signature.outputs[i].type))));
      break;
    }
    const std::string& rname = signature.outputs[i].name;
    fb.Op("Retval", {outs[i]}, {{"T", signature.outputs[i].type}, {"index", static_cast<int64_t>(i)}},
          rname.empty() ? absl::StrCat("retval_", i) : absl::StrCat(rname, "_retval"));
  }
  if (!fb.status_.ok()) {
    absl::Status s(fb.status_.code(), absl::StrCat("in function '", signature.name, "': ", fb.status_.message()));
    Fail(s);
    return s;
  }
  std::vector<NodeDef> nodes;
  for (NodeInfo& n : fb.nodes_) nodes.push_back(std::move(n.def));
  absl::Status s = library_->Define(signature, std::move(nodes));
  if (!s.ok()) Fail(s);
  return s;
}

std::vector<Output> GraphBuilder::Call(const std::string& function, const std::vector<Output>& args) {
  const FunctionDef* f = library_->Find(function);
  // On an error, one invalid Output per result of the function (one when it
  // is unknown), so that Call(...)[k] stays in bounds.
  const int results = f != nullptr ? static_cast<int>(f->signature.outputs.size()) : 1;
  if (!status_.ok()) return FailedOutputs(results);
  if (f == nullptr) {
    Fail(absl::NotFoundError(absl::StrCat("Call of undeclared function '", function, "'")));
    return FailedOutputs(results);
  }
  Output call = Op("Invoke", args, {{"function", function}}, "");
  if (!call.valid()) return FailedOutputs(results);
  return Outputs(call);
}

absl::StatusOr<Graph> GraphBuilder::Build() const {
  if (!status_.ok()) return status_;
  Graph g;
  g.node.reserve(nodes_.size());
  for (const NodeInfo& n : nodes_) g.node.push_back(n.def);
  g.library = *library_;
  return g;
}

}  // namespace tdf
