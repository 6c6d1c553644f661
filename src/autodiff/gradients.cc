// The gradient registry: for each differentiable op, the graph fragment that
// computes its inputs' gradients from its outputs' gradients (reverse mode).
// Broadcasting binary ops reduce each gradient to its input's shape with
// SumToShapeOf. Integer and bool inputs get no gradient.
#include <map>
#include <memory>

#include "absl/strings/str_cat.h"
#include "autodiff/emitter.h"
#include "base/sync.h"
#include "tdf/op_registry.h"

namespace tdf {
namespace autodiff {

std::string Key(const std::string& node, int port) {
  return port == 0 ? node : absl::StrCat(node, ":", port);
}

std::vector<DType> Emitter::InputTypes(const NodeDef& node) const {
  std::vector<DType> types;
  for (int i = 0; i < node.num_data_inputs(); ++i) {
    absl::StatusOr<InputRef> ref = InputRef::Parse(node.input[i]);
    DType t = DType::kInvalid;
    if (ref.ok()) {
      auto it = types_.find(ref->node);
      if (it != types_.end() && ref->port < static_cast<int>(it->second.size())) t = it->second[ref->port];
    }
    types.push_back(t);
  }
  return types;
}

void Emitter::Reinfer(const NodeDef& node) {
  names_.insert(node.name);
  const OpSchema* schema = OpRegistry::Global()->Find(node.op);
  if (schema == nullptr) return;
  std::vector<DType> in = InputTypes(node);
  InferenceContext ctx{node, in, library_};
  absl::StatusOr<std::vector<DType>> out = schema->InferTypes(ctx);
  if (out.ok()) types_[node.name] = *std::move(out);
}

void Emitter::Init() {
  for (const NodeDef& n : *nodes_) names_.insert(n.name);
  // Back edges (NextIteration -> Merge) need a second sweep.
  for (int pass = 0; pass < 3; ++pass)
    for (const NodeDef& n : *nodes_) Reinfer(n);
}

DType Emitter::TypeOf(const std::string& output) const {
  absl::StatusOr<InputRef> ref = InputRef::Parse(output);
  if (!ref.ok()) return DType::kInvalid;
  auto it = types_.find(ref->node);
  if (it == types_.end() || ref->port >= static_cast<int>(it->second.size())) return DType::kInvalid;
  return it->second[ref->port];
}

int Emitter::NumOutputs(const std::string& node) const {
  auto it = types_.find(node);
  return it == types_.end() ? 0 : static_cast<int>(it->second.size());
}

std::string Emitter::UniqueName(const std::string& base) {
  for (;;) {
    std::string candidate = absl::StrCat(prefix_, base, "_", ++counter_);
    if (names_.insert(candidate).second) return candidate;
  }
}

std::string Emitter::Op(const std::string& op, const std::vector<std::string>& inputs, AttrMap attrs,
                        const std::vector<std::string>& control) {
  if (!status_.ok()) return "";
  for (const std::string& in : inputs) {
    if (in.empty()) {
      Fail(absl::InternalError(absl::StrCat("autodiff: empty input to a new ", op, " node")));
      return "";
    }
  }
  const OpSchema* schema = OpRegistry::Global()->Find(op);
  if (schema == nullptr) {
    Fail(absl::NotFoundError(absl::StrCat("autodiff: unknown op '", op, "'")));
    return "";
  }
  NodeDef n;
  n.name = UniqueName(op);
  n.op = op;
  n.input = inputs;
  for (const std::string& c : control) n.input.push_back(absl::StrCat("^", InputRef::Parse(c)->node));
  n.attr = std::move(attrs);
  std::vector<DType> in = InputTypes(n);
  InferenceContext ctx{n, in, library_};
  absl::StatusOr<std::vector<DType>> out = schema->InferTypes(ctx);
  if (!out.ok()) {
    Fail(absl::Status(out.status().code(), absl::StrCat("autodiff: building the gradient: ", out.status().message())));
    return "";
  }
  types_[n.name] = *std::move(out);
  std::string name = n.name;
  nodes_->push_back(std::move(n));
  return name;
}

std::string Emitter::Sum(const std::vector<std::string>& terms) {
  if (terms.empty()) return "";
  if (terms.size() == 1) return terms[0];
  return Op("AddN", terms);
}

namespace {

bool IsFloat(DType t) { return t == DType::kFloat32 || t == DType::kFloat64; }

using Registry = std::map<std::string, GradFn>;

// Elementwise unary: dx = f(e, x, y, dy).
GradFn Unary(std::function<std::string(Emitter&, const std::string& x, const std::string& y, const std::string& dy)> f) {
  return [f](Emitter& e, const GradArgs& a) -> std::vector<std::string> {
    return {f(e, a.x[0], a.y[0], a.dy[0])};
  };
}

Registry MakeRegistry() {
  Registry r;
  r["Identity"] = Unary([](Emitter&, auto&, auto&, auto& dy) { return dy; });
  r["Neg"] = Unary([](Emitter& e, auto&, auto&, auto& dy) { return e.Neg(dy); });
  r["Exp"] = Unary([](Emitter& e, auto&, auto& y, auto& dy) { return e.Mul(dy, y); });
  r["Log"] = Unary([](Emitter& e, auto& x, auto&, auto& dy) { return e.Div(dy, x); });
  r["Tanh"] = Unary([](Emitter& e, auto&, auto& y, auto& dy) { return e.Op("TanhGrad", {y, dy}); });
  r["Sigmoid"] = Unary([](Emitter& e, auto&, auto& y, auto& dy) { return e.Op("SigmoidGrad", {y, dy}); });
  r["Relu"] = Unary([](Emitter& e, auto& x, auto&, auto& dy) { return e.Op("ReluGrad", {x, dy}); });
  r["Square"] = Unary([](Emitter& e, auto& x, auto&, auto& dy) { return e.Mul(dy, e.Add(x, x)); });
  r["Sqrt"] = Unary([](Emitter& e, auto&, auto& y, auto& dy) { return e.Div(dy, e.Add(y, y)); });
  r["Rsqrt"] = Unary([](Emitter& e, auto& x, auto& y, auto& dy) {
    // d x^-1/2 = -1/2 x^-3/2 = -y / (2x)
    return e.Neg(e.Div(e.Mul(dy, y), e.Add(x, x)));
  });
  r["Reciprocal"] = Unary([](Emitter& e, auto&, auto& y, auto& dy) { return e.Neg(e.Mul(dy, e.Mul(y, y))); });
  r["Abs"] = Unary([](Emitter& e, auto& x, auto&, auto& dy) { return e.Mul(dy, e.Op("Sign", {x})); });
  // Piecewise constant in x (and ZerosLike/OnesLike read only x's shape):
  // the derivative is zero wherever it exists, so x gets no gradient from
  // them, like an integer input (an x reached by nothing else gets zeros).
  // A loop accumulator often starts as ZerosLike(x).
  for (const char* op : {"ZerosLike", "OnesLike", "Sign"})
    r[op] = [](Emitter&, const GradArgs&) -> std::vector<std::string> { return {""}; };
  // The activations' gradient helpers (second derivatives): (y or x, dy).
  r["TanhGrad"] = [](Emitter& e, const GradArgs& a) -> std::vector<std::string> {
    // z = dy (1 - y^2): dy_in = g (1 - y^2), dy = -2 y dy g.
    const std::string &y = a.x[0], &dy = a.x[1], &g = a.dy[0];
    return {e.SumTo(e.Neg(e.Mul(e.Mul(g, dy), e.Add(y, y))), y), e.SumTo(e.Op("TanhGrad", {y, g}), dy)};
  };
  r["SigmoidGrad"] = [](Emitter& e, const GradArgs& a) -> std::vector<std::string> {
    // z = dy y (1 - y): d/dy = dy (1 - 2y) g, d/d(dy) = g y (1 - y).
    const std::string &y = a.x[0], &dy = a.x[1], &g = a.dy[0];
    return {e.SumTo(e.Mul(e.Mul(g, dy), e.Sub(e.Sub(e.Ones(y), y), y)), y),
            e.SumTo(e.Op("SigmoidGrad", {y, g}), dy)};
  };
  r["ReluGrad"] = [](Emitter& e, const GradArgs& a) -> std::vector<std::string> {
    // z = x > 0 ? dy : 0: piecewise constant in x.
    return {"", e.SumTo(e.Op("ReluGrad", {a.x[0], a.dy[0]}), a.x[1])};
  };
  r["Cast"] = [](Emitter& e, const GradArgs& a) -> std::vector<std::string> {
    if (!IsFloat(a.x_types[0]) || !IsFloat(e.TypeOf(a.y[0]))) return {""};
    if (a.x_types[0] == e.TypeOf(a.dy[0])) return {a.dy[0]};
    return {e.Op("Cast", {a.dy[0]}, {{"DstT", a.x_types[0]}})};
  };
  r["Add"] = [](Emitter& e, const GradArgs& a) -> std::vector<std::string> {
    return {e.SumTo(a.dy[0], a.x[0]), e.SumTo(a.dy[0], a.x[1])};
  };
  r["Sub"] = [](Emitter& e, const GradArgs& a) -> std::vector<std::string> {
    return {e.SumTo(a.dy[0], a.x[0]), e.SumTo(e.Neg(a.dy[0]), a.x[1])};
  };
  r["Mul"] = [](Emitter& e, const GradArgs& a) -> std::vector<std::string> {
    return {e.SumTo(e.Mul(a.dy[0], a.x[1]), a.x[0]), e.SumTo(e.Mul(a.dy[0], a.x[0]), a.x[1])};
  };
  r["Div"] = [](Emitter& e, const GradArgs& a) -> std::vector<std::string> {
    // y = a / b: da = dy / b, db = -dy * y / b.
    return {e.SumTo(e.Div(a.dy[0], a.x[1]), a.x[0]),
            e.SumTo(e.Neg(e.Div(e.Mul(a.dy[0], a.y[0]), a.x[1])), a.x[1])};
  };
  r["Pow"] = [](Emitter& e, const GradArgs& a) -> std::vector<std::string> {
    // y = a^b: da = dy * b * y / a, db = dy * y * log(a) (a > 0).
    return {e.SumTo(e.Div(e.Mul(e.Mul(a.dy[0], a.x[1]), a.y[0]), a.x[0]), a.x[0]),
            e.SumTo(e.Mul(e.Mul(a.dy[0], a.y[0]), e.Op("Log", {a.x[0]})), a.x[1])};
  };
  r["Mod"] = [](Emitter& e, const GradArgs& a) -> std::vector<std::string> {
    // y = fmod(a, b) = a - trunc(a / b) b: da = dy, db = -dy trunc(a / b),
    // where trunc(a / b) = (a - y) / b (exact away from the jumps at b | a).
    return {e.SumTo(a.dy[0], a.x[0]),
            e.SumTo(e.Neg(e.Mul(a.dy[0], e.Div(e.Sub(a.x[0], a.y[0]), a.x[1]))), a.x[1])};
  };
  auto minmax = [](const char* cmp) {
    return [cmp](Emitter& e, const GradArgs& a) -> std::vector<std::string> {
      // Ties go to the first input, as the forward kernel picks it.
      std::string pick_a = e.Op(cmp, {a.x[0], a.x[1]});
      std::string zeros = e.Zeros(a.dy[0]);
      return {e.SumTo(e.Op("Select", {pick_a, a.dy[0], zeros}), a.x[0]),
              e.SumTo(e.Op("Select", {pick_a, zeros, a.dy[0]}), a.x[1])};
    };
  };
  r["Maximum"] = minmax("GreaterEqual");
  r["Minimum"] = minmax("LessEqual");
  r["Select"] = [](Emitter& e, const GradArgs& a) -> std::vector<std::string> {
    std::string zeros = e.Zeros(a.dy[0]);
    return {"", e.SumTo(e.Op("Select", {a.x[0], a.dy[0], zeros}), a.x[1]),
            e.SumTo(e.Op("Select", {a.x[0], zeros, a.dy[0]}), a.x[2])};
  };
  r["AddN"] = [](Emitter& e, const GradArgs& a) -> std::vector<std::string> {
    return std::vector<std::string>(a.x.size(), a.dy[0]);
  };
  r["MatMul"] = [](Emitter& e, const GradArgs& a) -> std::vector<std::string> {
    const bool ta = a.node->GetBoolOr("transpose_a", false);
    const bool tb = a.node->GetBoolOr("transpose_b", false);
    const std::string &A = a.x[0], &B = a.x[1], &dC = a.dy[0];
    auto mm = [&](const std::string& p, const std::string& q, bool tp, bool tq) {
      return e.Op("MatMul", {p, q}, {{"transpose_a", tp}, {"transpose_b", tq}});
    };
    std::vector<std::string> g;
    if (!ta && !tb) g = {mm(dC, B, false, true), mm(A, dC, true, false)};
    if (!ta && tb) g = {mm(dC, B, false, false), mm(dC, A, true, false)};
    if (ta && !tb) g = {mm(B, dC, false, true), mm(A, dC, false, false)};
    if (ta && tb) g = {mm(B, dC, true, true), mm(dC, A, true, true)};
    // MatMulAdd(a, b, addends...): each addend's gradient is dy.
    for (size_t k = 2; k < a.x.size(); ++k) g.push_back(dC);
    return g;
  };
  r["MatMulAdd"] = r["MatMul"];
  auto reduce_grad = [](bool mean) {
    return [mean](Emitter& e, const GradArgs& a) -> std::vector<std::string> {
      // dy has the reduced shape; a keep_dims reduction of x gives the shape
      // to broadcast it from.
      AttrMap kd{{"keep_dims", true}};
      if (const AttrValue* axes = a.node->FindAttr("axes")) kd["axes"] = *axes;
      std::string like = e.Op("Sum", {a.x[0]}, kd);
      std::string g = e.Op("BroadcastTo", {e.Op("ReshapeLike", {a.dy[0], like}), a.x[0]});
      if (!mean) return {g};
      // 1/count = size(reduced) / size(x).
      std::string scale = e.Div(e.Op("Sum", {e.Ones(like)}), e.Op("Sum", {e.Ones(a.x[0])}));
      return {e.Mul(g, scale)};
    };
  };
  r["Max"] = [](Emitter& e, const GradArgs& a) -> std::vector<std::string> {
    // dy goes to the elements equal to their slice's max, split evenly
    // among ties.
    AttrMap kd{{"keep_dims", true}};
    if (const AttrValue* axes = a.node->FindAttr("axes")) kd["axes"] = *axes;
    std::string max = e.Op("Max", {a.x[0]}, kd);
    std::string mask = e.Op("Cast", {e.Op("Equal", {a.x[0], max})}, {{"DstT", a.x_types[0]}});
    std::string count = e.Op("Sum", {mask}, kd);
    std::string g = e.Op("BroadcastTo", {e.Op("ReshapeLike", {a.dy[0], max}), a.x[0]});
    return {e.Div(e.Mul(g, mask), count)};
  };
  r["Sum"] = reduce_grad(false);
  r["Mean"] = reduce_grad(true);
  r["Reshape"] = [](Emitter& e, const GradArgs& a) -> std::vector<std::string> {
    return {e.Op("ReshapeLike", {a.dy[0], a.x[0]})};
  };
  r["ReshapeLike"] = [](Emitter& e, const GradArgs& a) -> std::vector<std::string> {
    return {e.Op("ReshapeLike", {a.dy[0], a.x[0]}), ""};
  };
  r["BroadcastTo"] = [](Emitter& e, const GradArgs& a) -> std::vector<std::string> {
    return {e.SumTo(a.dy[0], a.x[0]), ""};
  };
  r["SumToShapeOf"] = [](Emitter& e, const GradArgs& a) -> std::vector<std::string> {
    return {e.Op("BroadcastTo", {a.dy[0], a.x[0]}), ""};
  };
  r["Transpose"] = [](Emitter& e, const GradArgs& a) -> std::vector<std::string> {
    AttrMap attrs;
    if (const AttrValue* perm = a.node->FindAttr("perm")) {
      const auto& p = *perm->get_if<std::vector<int64_t>>();
      std::vector<int64_t> inv(p.size());
      for (size_t i = 0; i < p.size(); ++i) inv[p[i]] = static_cast<int64_t>(i);
      attrs["perm"] = inv;
    }
    return {e.Op("Transpose", {a.dy[0]}, attrs)};
  };
  r["Concat"] = [](Emitter& e, const GradArgs& a) -> std::vector<std::string> {
    // One ConcatGrad node splits dy back into the inputs' blocks (their
    // sizes along the axis are only known at run time).
    if (a.x.size() == 1) return {a.dy[0]};
    std::vector<std::string> in = {a.dy[0]};
    in.insert(in.end(), a.x.begin(), a.x.end());
    std::string split = e.Op("ConcatGrad", in, {{"axis", a.node->GetIntOr("axis", 0)}});
    std::vector<std::string> out;
    for (size_t k = 0; k < a.x.size(); ++k) out.push_back(IsFloat(a.x_types[k]) ? Key(split, static_cast<int>(k)) : "");
    return out;
  };
  r["Slice"] = [](Emitter& e, const GradArgs& a) -> std::vector<std::string> {
    AttrMap attrs;
    for (const char* name : {"begin", "size"})
      if (const AttrValue* v = a.node->FindAttr(name)) attrs[name] = *v;
    return {e.Op("SliceGrad", {a.x[0], a.dy[0]}, attrs)};
  };
  r["Gather"] = [](Emitter& e, const GradArgs& a) -> std::vector<std::string> {
    // Dense: zeros of params' shape with dy's rows added at the indices.
    return {e.Op("GatherGrad", {a.x[0], a.x[1], a.dy[0]}, {{"axis", a.node->GetIntOr("axis", 0)}}), ""};
  };
  r["Softmax"] = [](Emitter& e, const GradArgs& a) -> std::vector<std::string> {
    // dx = y * (dy - sum(dy * y, last axis)).
    const std::string& y = a.y[0];
    std::string s = e.Op("Sum", {e.Mul(a.dy[0], y)}, {{"axes", std::vector<int64_t>{-1}}, {"keep_dims", true}});
    return {e.Mul(y, e.Sub(a.dy[0], s))};
  };
  r["SoftmaxCrossEntropy"] = [](Emitter& e, const GradArgs& a) -> std::vector<std::string> {
    // Output 1 is d loss / d logits already; scale it by the per-row dloss.
    if (a.dy[0].empty()) return {"", ""};
    const std::string& backprop = a.y[1];
    std::string col =
        e.Op("Sum", {backprop}, {{"axes", std::vector<int64_t>{-1}}, {"keep_dims", true}});  // [batch, 1]
    return {e.Mul(e.Op("ReshapeLike", {a.dy[0], col}), backprop), ""};
  };
  return r;
}

const Registry& GetRegistry() {
  static const Registry* const registry = new Registry(MakeRegistry());
  return *registry;
}

// Gradients registered at run time, apart from the built-in map, which is
// read without a lock. Entries are never removed, so the pointers that
// FindGradient hands out stay valid.
struct AddedGradients {
  absl::Mutex mu;
  std::map<std::string, std::unique_ptr<GradFn>> fns ABSL_GUARDED_BY(mu);
};

AddedGradients& GetAddedGradients() {
  static AddedGradients* const added = new AddedGradients;
  return *added;
}

}  // namespace

const GradFn* FindGradient(const std::string& op) {
  const Registry& r = GetRegistry();
  auto it = r.find(op);
  if (it != r.end()) return &it->second;
  AddedGradients& added = GetAddedGradients();
  base::MutexLock lock(&added.mu);
  auto found = added.fns.find(op);
  return found == added.fns.end() ? nullptr : found->second.get();
}

absl::Status RegisterGradient(const std::string& op, GradFn fn) {
  AddedGradients& added = GetAddedGradients();
  base::MutexLock lock(&added.mu);
  if (GetRegistry().count(op) > 0 || added.fns.count(op) > 0)
    return absl::AlreadyExistsError(absl::StrCat("op '", op, "' already has a gradient"));
  added.fns.emplace(op, std::make_unique<GradFn>(std::move(fn)));
  return absl::OkStatus();
}

std::vector<std::string> GradientOps() {
  std::vector<std::string> ops;
  for (const auto& [name, fn] : GetRegistry()) ops.push_back(name);
  AddedGradients& added = GetAddedGradients();
  base::MutexLock lock(&added.mu);
  for (const auto& [name, fn] : added.fns) ops.push_back(name);
  return ops;
}

}  // namespace autodiff
}  // namespace tdf
