// The TreeRNN model: native reference and the three tdf implementations
// (treernn.h).
#include "treernn.h"

#include <Eigen/Core>
#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "tdf/autodiff.h"
#include "tdf/builder.h"
#include "tdf/status.h"

namespace tdf_treernn {

const char* const kParameterNames[kNumParameters] = {"E", "Wl", "bl", "W", "b", "Wc", "bc"};

namespace {

using tdf::DType;
using tdf::GraphBuilder;
using tdf::Output;
using tdf::Shape;
using tdf::Tensor;

enum Param { kE, kWl, kBl, kW, kB, kWc, kBc };
constexpr int kC = kNumClasses;

Shape ParamShape(const ModelConfig& c, int i) {
  const int64_t V = c.vocabulary_size, D = c.embedding, H = c.hidden;
  switch (i) {
    case kE: return Shape({V, D});
    case kWl: return Shape({D, H});
    case kW: return Shape({2 * H, H});
    case kWc: return Shape({H, kC});
    case kBc: return Shape({1, kC});
    default: return Shape({1, H});  // bl, b
  }
}

double At(const Tensor& t, int64_t i) {
  return t.dtype() == DType::kFloat32 ? static_cast<double>(t.data<float>()[i]) : t.data<double>()[i];
}

Tensor FromDoubles(DType dtype, const Shape& shape, const std::vector<double>& v) {
  if (dtype == DType::kFloat64) return *Tensor::FromVector<double>(v, shape);
  return *Tensor::FromVector<float>(std::vector<float>(v.begin(), v.end()), shape);
}

Tensor ScalarOf(DType dtype, double v) {
  return dtype == DType::kFloat64 ? Tensor::Scalar<double>(v) : Tensor::Scalar<float>(static_cast<float>(v));
}

// SplitMix64 (as in treebank.cc): the same parameters on every platform.
uint64_t NextRandom(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// ---- native ----------------------------------------------------------------

template <typename T>
double NativeLossT(const ModelConfig& c, const Parameters& p, const Batch& batch, Parameters* g) {
  using Mat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using Vec = Eigen::Matrix<T, 1, Eigen::Dynamic>;
  using CMap = Eigen::Map<const Mat>;
  using MMap = Eigen::Map<Mat>;
  const int64_t V = c.vocabulary_size, D = c.embedding, H = c.hidden;
  CMap E(p.t[kE].data<T>(), V, D), Wl(p.t[kWl].data<T>(), D, H), bl(p.t[kBl].data<T>(), 1, H),
      W(p.t[kW].data<T>(), 2 * H, H), b(p.t[kB].data<T>(), 1, H), Wc(p.t[kWc].data<T>(), H, kC),
      bc(p.t[kBc].data<T>(), 1, kC);
  if (g != nullptr)
    for (int i = 0; i < kNumParameters; ++i) g->t[i] = *Tensor::Zeros(c.dtype, ParamShape(c, i));
  auto grad = [&](int i, int64_t rows, int64_t cols) {
    return MMap(g != nullptr ? g->t[i].mutable_data<T>() : nullptr, rows, cols);
  };
  MMap dE = grad(kE, V, D), dWl = grad(kWl, D, H), dbl = grad(kBl, 1, H), dW = grad(kW, 2 * H, H),
       db = grad(kB, 1, H), dWc = grad(kWc, H, kC), dbc = grad(kBc, 1, kC);
  const T inv_b = T(1) / static_cast<T>(batch.size());
  T loss = 0;
  std::vector<Vec> h, dh;
  Vec x(2 * H), logits(kC), dlogits(kC), da(H), dx(2 * H);
  for (const Tree* tree : batch) {
    const int n = tree->num_nodes();
    h.assign(n, Vec());
    dh.assign(n, Vec());
    for (int j = 0; j < n; ++j) {
      const TreeNode& node = tree->nodes[j];
      if (node.is_leaf()) {
        h[j] = (E.row(node.word) * Wl + bl).array().tanh().matrix();
      } else {
        x << h[node.left], h[node.right];
        h[j] = (x * W + b).array().tanh().matrix();
      }
      logits = h[j] * Wc + bc;
      const T m = logits.maxCoeff();
      const T lse = m + std::log((logits.array() - m).exp().sum());
      loss += lse - logits(node.label);
      if (g != nullptr) {
        dlogits = ((logits.array() - lse).exp() * inv_b).matrix();
        dlogits(node.label) -= inv_b;
        dWc.noalias() += h[j].transpose() * dlogits;
        dbc += dlogits;
        dh[j] = dlogits * Wc.transpose();
      }
    }
    if (g == nullptr) continue;
    for (int j = n - 1; j >= 0; --j) {  // parents before children
      const TreeNode& node = tree->nodes[j];
      da = (dh[j].array() * (T(1) - h[j].array().square())).matrix();
      if (node.is_leaf()) {
        dWl.noalias() += E.row(node.word).transpose() * da;
        dbl += da;
        dE.row(node.word).noalias() += da * Wl.transpose();
      } else {
        x << h[node.left], h[node.right];
        dW.noalias() += x.transpose() * da;
        db += da;
        dx.noalias() = da * W.transpose();
        dh[node.left] += dx.head(H);
        dh[node.right] += dx.tail(H);
      }
    }
  }
  return static_cast<double>(loss * inv_b);
}

template <typename T>
void NativeSgdT(const ModelConfig& c, const Parameters& g, Parameters* p, bool in_place) {
  const T scale = static_cast<T>(-c.learning_rate);  // as AddSgdStep: v += (-lr) * g
  for (int i = 0; i < kNumParameters; ++i) {
    Tensor updated = in_place ? p->t[i] : p->t[i].Clone();
    Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>> v(updated.mutable_data<T>(), updated.num_elements());
    v += scale * Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>(g.t[i].data<T>(), g.t[i].num_elements());
    p->t[i] = updated;
  }
}

// ---- tdf: shared pieces ------------------------------------------------------

struct Vars {
  Output read[kNumParameters];
};

Vars AddVariables(GraphBuilder& b, const Parameters& p) {
  Vars v;
  for (int i = 0; i < kNumParameters; ++i) v.read[i] = b.Read(b.Variable(kParameterNames[i], p.t[i]));
  return v;
}

// P = tanh(E[words] · Wl + bl), the hidden states of the batch's leaves.
Output LeafStates(GraphBuilder& b, const Vars& v, Output words) {
  return b.Tanh(b.Add(b.MatMul(b.Gather(v.read[kE], words), v.read[kWl]), v.read[kBl]));
}

// The classifier over every hidden state and the loss ("loss").
void AddLoss(GraphBuilder& b, const Vars& v, Output states, Output labels, int batch_size, DType dtype) {
  Output logits = b.Add(b.MatMul(states, v.read[kWc]), v.read[kBc]);
  Output xent = b.Op("SoftmaxCrossEntropy", {logits, labels});
  b.Identity(b.Mul(b.Sum(xent), b.Const(ScalarOf(dtype, 1.0 / batch_size))), "loss");
}

// Builds, differentiates (training) and compiles the graph.
struct Compiled {
  std::unique_ptr<tdf::Session> session;
  std::string step;  // the SGD step's target (training)
  int64_t nodes = 0;
};

absl::StatusOr<Compiled> Compile(GraphBuilder& b, const Vars& v, const ModelConfig& c, bool training, int workers,
                                 bool batching = false) {
  TDF_ASSIGN_OR_RETURN(tdf::Graph g, b.Build());
  Compiled out;
  if (training) {
    std::vector<std::string> reads, vars;
    for (int i = 0; i < kNumParameters; ++i) {
      reads.push_back(b.Name(v.read[i]));
      vars.push_back(kParameterNames[i]);
    }
    TDF_ASSIGN_OR_RETURN(std::vector<std::string> grads, tdf::AddGradients(g, {"loss"}, reads));
    TDF_ASSIGN_OR_RETURN(out.step, tdf::AddSgdStep(g, vars, grads, c.learning_rate));
  }
  out.nodes = static_cast<int64_t>(g.node.size());
  for (const auto& [name, f] : g.library.functions()) out.nodes += static_cast<int64_t>(f.node.size());
  tdf::SessionOptions options;
  options.num_workers = workers;
  options.place_tensor_ops_on_gpu = c.gpu;
  options.fallback_to_cpu = false;
  options.observer = c.observer;
  options.batching = batching;
  TDF_ASSIGN_OR_RETURN(out.session, tdf::Session::Create(g, options));
  return out;
}

Tensor Int64Matrix(const std::vector<int64_t>& v, int64_t cols) {
  return *Tensor::FromVector<int64_t>(v, Shape({static_cast<int64_t>(v.size()) / cols, cols}));
}

// One-hot labels [rows, 5], one row per class in `labels`.
Tensor OneHot(DType dtype, const std::vector<int>& labels) {
  std::vector<double> v(labels.size() * kC, 0.0);
  for (size_t i = 0; i < labels.size(); ++i) v[i * kC + labels[i]] = 1.0;
  return FromDoubles(dtype, Shape({static_cast<int64_t>(labels.size()), kC}), v);
}

// The feeds every implementation shares: "words" (the batch's leaves, tree by
// tree, left to right) and, with `per_tree_rows`, "rows_<k>" (tree k's rows
// of the leaf states).
void AddLeafFeeds(const Batch& batch, PreparedBatch* out, bool per_tree_rows) {
  std::vector<int64_t> words;
  for (size_t k = 0; k < batch.size(); ++k) {
    std::vector<int64_t> rows;
    for (const TreeNode& n : batch[k]->nodes) {
      if (!n.is_leaf()) continue;
      rows.push_back(static_cast<int64_t>(words.size()));
      words.push_back(n.word);
    }
    if (per_tree_rows) out->feeds.emplace_back(absl::StrCat("rows_", k), tdf::Tensor::Vector<int64_t>(rows));
  }
  out->feeds.emplace_back("words", tdf::Tensor::Vector<int64_t>(words));
}

absl::Status CheckBatch(const Batch& batch, int batch_size, const ModelConfig& c) {
  if (static_cast<int>(batch.size()) != batch_size)
    return absl::InvalidArgumentError(
        absl::StrCat("the model takes batches of ", batch_size, " trees, got ", batch.size()));
  for (const Tree* t : batch) {
    if (t->nodes.empty()) return absl::InvalidArgumentError("an empty tree");
    for (const TreeNode& n : t->nodes)
      if (n.is_leaf() && (n.word < 0 || n.word >= c.vocabulary_size))
        return absl::InvalidArgumentError(
            absl::StrCat("word id ", n.word, " outside the vocabulary of ", c.vocabulary_size));
  }
  return absl::OkStatus();
}

// ---- the graph-once models (recursion, iteration) ----------------------------

class SessionModel : public Model {
 public:
  SessionModel(Impl impl, ModelConfig config, int batch_size, Compiled compiled)
      : impl_(impl), config_(config), batch_size_(batch_size), compiled_(std::move(compiled)) {
    graph_nodes_ = compiled_.nodes;
    fetches_ = {"loss"};
    if (!compiled_.step.empty()) targets_ = {compiled_.step};
  }

  absl::StatusOr<PreparedBatch> Prepare(const Batch& batch) const override {
    TDF_RETURN_IF_ERROR(CheckBatch(batch, batch_size_, config_));
    PreparedBatch out;
    out.trees = batch;
    const bool recursion = impl_ == Impl::kRecursion || impl_ == Impl::kBatchedRecursion;
    AddLeafFeeds(batch, &out, /*per_tree_rows=*/!recursion);
    if (recursion) {
      // "tree" [N, 4]: per node of the batch (tree by tree, post-order) its
      // children's global indices, its global row in the leaf states P (all
      // leaves of the batch, in AddLeafFeeds' order; -1 where not
      // applicable) and its class; "root_<k>" the global index of tree k's
      // root; "leaf_labels" [leaves, 5] the leaves' one-hot classes in P's order.
      std::vector<int64_t> tree;
      std::vector<int> leaf_labels;
      int64_t offset = 0, leaf = 0;
      for (size_t k = 0; k < batch.size(); ++k) {
        for (const TreeNode& n : batch[k]->nodes) {
          tree.push_back(n.is_leaf() ? -1 : offset + n.left);
          tree.push_back(n.is_leaf() ? -1 : offset + n.right);
          tree.push_back(n.is_leaf() ? leaf++ : -1);
          tree.push_back(n.label);
          if (n.is_leaf()) leaf_labels.push_back(n.label);
        }
        offset += batch[k]->num_nodes();
        out.feeds.emplace_back(absl::StrCat("root_", k), Tensor::Scalar<int64_t>(offset - 1));
      }
      out.feeds.emplace_back("tree", Int64Matrix(tree, 4));
      out.feeds.emplace_back("leaf_labels", OneHot(config_.dtype, leaf_labels));
    } else {
      // Per tree k, the loop's state H_k holds the leaves (rows 0..L-1, left
      // to right) then the internal nodes in post-order; "children_<k>" [I, 2]
      // gives each internal node's children as rows of H_k, "count_<k>" is I.
      std::vector<int> labels;
      for (size_t k = 0; k < batch.size(); ++k) {
        const Tree& t = *batch[k];
        std::vector<int64_t> row(t.num_nodes());
        int64_t leaves = 0, internal = 0;
        for (int j = 0; j < t.num_nodes(); ++j)
          if (t.nodes[j].is_leaf()) row[j] = leaves++;
        for (int j = 0; j < t.num_nodes(); ++j)
          if (!t.nodes[j].is_leaf()) row[j] = leaves + internal++;
        std::vector<int64_t> children;
        for (const TreeNode& n : t.nodes)
          if (n.is_leaf()) labels.push_back(n.label);
        for (const TreeNode& n : t.nodes) {
          if (n.is_leaf()) continue;
          children.push_back(row[n.left]);
          children.push_back(row[n.right]);
          labels.push_back(n.label);
        }
        out.feeds.emplace_back(absl::StrCat("children_", k), Int64Matrix(children, 2));
        out.feeds.emplace_back(absl::StrCat("count_", k), Tensor::Scalar<int64_t>(internal));
      }
      out.feeds.emplace_back("labels", OneHot(config_.dtype, labels));
    }
    return out;
  }

  absl::StatusOr<double> Run(const PreparedBatch& batch) override {
    TDF_ASSIGN_OR_RETURN(std::vector<Tensor> out, compiled_.session->Run(batch.feeds, fetches_, targets_, &stats_));
    return At(out[0], 0);
  }

  absl::StatusOr<Parameters> ReadParameters() const override {
    Parameters p;
    for (int i = 0; i < kNumParameters; ++i) {
      TDF_ASSIGN_OR_RETURN(p.t[i], compiled_.session->ReadVariable(kParameterNames[i]));
    }
    return p;
  }

 private:
  const Impl impl_;
  const ModelConfig config_;
  const int batch_size_;
  Compiled compiled_;
  std::vector<std::string> fetches_, targets_;
};

// node(i, tree, P, Wb, Wcb) -> (h [1, H], loss [1]): the node's hidden state
// and the summed cross-entropy of the internal nodes of its subtree. Wb is
// [W; b] and Wcb [Wc; bc]^T (a bias as the weight of a constant 1 column: one
// product, one argument, one gradient with the weight's). Every internal node does the same fixed-size work (the same
// shapes in every invocation, so that batching can fire it once for many
// nodes), and nothing copies a subtree: a node adds its children's losses
// instead of concatenating their states. The leaves' classifier runs in the
// main graph, over all leaves at once.
absl::Status DefineNodeFunction(GraphBuilder& b, const ModelConfig& c) {
  const DType T = c.dtype;
  std::vector<double> eye(kC * kC, 0.0);
  for (int k = 0; k < kC; ++k) eye[k * kC + k] = 1.0;
  const Tensor one_hot = FromDoubles(T, Shape({kC, 1, kC}), eye);  // class k -> its one-hot [1, 5] row
  const Tensor one = FromDoubles(T, Shape({1, 1}), {1.0});
  const Tensor no_loss = FromDoubles(T, Shape({1}), {0.0});
  return b.DefineFunction(
      {"node",
       {{"i", DType::kInt64}, {"tree", DType::kInt64}, {"P", T}, {"Wb", T}, {"Wcb", T}},
       {{"h", T}, {"loss", T}}},
      [&](GraphBuilder& f, const std::vector<Output>& a) -> std::vector<Output> {
        Output i = a[0], tree = a[1], P = a[2], Wb = a[3], Wcb = a[4];
        Output row = f.Gather(tree, i);  // [left, right, leaf row, class]
        Output left = f.Gather(row, f.Const<int64_t>(0));
        return f.Cond(
            f.Less(left, f.Const<int64_t>(0)),
            [&] {
              // [leaf row] as a vector of one index reads P's row as [1, H].
              Output h = f.Gather(P, f.Slice(row, {2}, {1}));
              return std::vector<Output>{h, f.Const(no_loss)};
            },
            [&] {
              Output right = f.Gather(row, f.Const<int64_t>(1));
              std::vector<Output> l = f.Call("node", {left, tree, P, Wb, Wcb});
              std::vector<Output> r = f.Call("node", {right, tree, P, Wb, Wcb});
              Output h = f.Tanh(f.MatMul(f.Concat({l[0], r[0], f.Const(one)}, 1), Wb));
              Output logits = f.MatMul(f.Concat({h, f.Const(one)}, 1), Wcb, false, true);  // [1, 5]
              Output label = f.Gather(f.Const(one_hot), f.Gather(row, f.Const<int64_t>(3)));
              Output xent = f.Op("SoftmaxCrossEntropy", {logits, label});  // [1]
              return std::vector<Output>{h, f.AddN({xent, l[1], r[1]})};
            });
      });
}

absl::StatusOr<std::unique_ptr<Model>> CreateRecursion(const ModelConfig& c, const Parameters& init, int batch_size,
                                                      bool training, int workers, bool batching) {
  GraphBuilder b;
  TDF_RETURN_IF_ERROR(DefineNodeFunction(b, c));
  Vars v = AddVariables(b, init);
  // The leaves of all trees: their states and their classifier, one product each.
  Output P = LeafStates(b, v, b.Placeholder("words", DType::kInt64));
  Output leaf_logits = b.Add(b.MatMul(P, v.read[kWc]), v.read[kBc]);
  Output leaf_xent = b.Op("SoftmaxCrossEntropy", {leaf_logits, b.Placeholder("leaf_labels", c.dtype)});
  Output tree = b.Placeholder("tree", DType::kInt64);
  // Wcb goes in transposed ([5, H + 1], used as x Wcb^T): autodiff then sums
  // its small gradient densely per node ([H + 1, 5], one MatMulAdd) instead
  // of as outer-product rows, which at 5 columns would be compacted (a dense
  // sum and 5 rows) at nearly every node.
  Output Wb = b.Concat({v.read[kW], v.read[kB]}, 0), Wcb = b.Transpose(b.Concat({v.read[kWc], v.read[kBc]}, 0));
  std::vector<Output> losses{leaf_xent};
  for (int k = 0; k < batch_size; ++k) {
    Output root = b.Placeholder(absl::StrCat("root_", k), DType::kInt64);
    losses.push_back(b.Call("node", {root, tree, P, Wb, Wcb})[1]);
  }
  b.Identity(b.Mul(b.Sum(b.Concat(losses, 0)), b.Const(ScalarOf(c.dtype, 1.0 / batch_size))), "loss");
  TDF_ASSIGN_OR_RETURN(Compiled compiled, Compile(b, v, c, training, workers, batching));
  return std::unique_ptr<Model>(new SessionModel(batching ? Impl::kBatchedRecursion : Impl::kRecursion, c, batch_size,
                                                 std::move(compiled)));
}

absl::StatusOr<std::unique_ptr<Model>> CreateIteration(const ModelConfig& c, const Parameters& init, int batch_size,
                                                      bool training, int workers) {
  GraphBuilder b;
  Vars v = AddVariables(b, init);
  Output P = LeafStates(b, v, b.Placeholder("words", DType::kInt64));
  const int64_t H = c.hidden;
  std::vector<Output> states;
  for (int k = 0; k < batch_size; ++k) {
    Output Pk = b.Gather(P, b.Placeholder(absl::StrCat("rows_", k), DType::kInt64));
    Output children = b.Placeholder(absl::StrCat("children_", k), DType::kInt64);
    Output count = b.Placeholder(absl::StrCat("count_", k), DType::kInt64);
    tdf::WhileOptions opts;
    opts.name = absl::StrCat("tree_", k);
    std::vector<Output> out = b.While(
        [&](const std::vector<Output>& vars) { return b.Less(vars[0], count); },
        [&](const std::vector<Output>& vars) -> std::vector<Output> {
          Output j = vars[0], Hs = vars[1];
          // [h_left; h_right] as one [1, 2H] row: Gather two rows, reshape.
          Output x = b.Reshape(b.Gather(Hs, b.Gather(children, j)), {1, 2 * H});
          Output h = b.Tanh(b.Add(b.MatMul(x, v.read[kW]), v.read[kB]));
          return {b.Add(j, b.Const<int64_t>(1)), b.Concat({Hs, h}, 0)};
        },
        {b.Const<int64_t>(0), Pk}, opts);
    states.push_back(out[1]);
  }
  AddLoss(b, v, b.Concat(states, 0), b.Placeholder("labels", c.dtype), batch_size, c.dtype);
  TDF_ASSIGN_OR_RETURN(Compiled compiled, Compile(b, v, c, training, workers));
  return std::unique_ptr<Model>(new SessionModel(Impl::kIteration, c, batch_size, std::move(compiled)));
}

// ---- the unrolled model --------------------------------------------------------

class UnrolledModel : public Model {
 public:
  UnrolledModel(ModelConfig config, Parameters params, int batch_size, bool training, int workers)
      : config_(config), params_(std::move(params)), batch_size_(batch_size), training_(training),
        workers_(workers) {}

  absl::StatusOr<PreparedBatch> Prepare(const Batch& batch) const override {
    TDF_RETURN_IF_ERROR(CheckBatch(batch, batch_size_, config_));
    PreparedBatch out;
    out.trees = batch;
    return out;
  }

  // Builds the batch's graph (everything but the parameters is a constant),
  // compiles it, runs it once and keeps the updated parameters.
  absl::StatusOr<double> Run(const PreparedBatch& batch) override {
    const Batch& trees = batch.trees;
    const DType T = config_.dtype;
    GraphBuilder b;
    Vars v = AddVariables(b, params_);
    std::vector<int64_t> words;
    std::vector<int> labels;
    for (const Tree* t : trees)
      for (const TreeNode& n : t->nodes) {
        if (n.is_leaf()) words.push_back(n.word);
        labels.push_back(n.label);
      }
    Output P = LeafStates(b, v, b.Const(Tensor::Vector<int64_t>(words)));
    std::vector<Output> states;
    int64_t first_leaf = 0;
    for (const Tree* t : trees) {
      Output Pk = b.Op("Slice", {P}, {{"begin", std::vector<int64_t>{first_leaf, 0}},
                                      {"size", std::vector<int64_t>{t->num_leaves(), -1}}});
      first_leaf += t->num_leaves();
      std::vector<Output> h(t->num_nodes());
      int64_t leaf = 0;
      for (int j = 0; j < t->num_nodes(); ++j) {
        const TreeNode& n = t->nodes[j];
        if (n.is_leaf()) {
          h[j] = b.Op("Slice", {Pk}, {{"begin", std::vector<int64_t>{leaf++, 0}},
                                      {"size", std::vector<int64_t>{1, -1}}});
        } else {
          h[j] = b.Tanh(b.Add(b.MatMul(b.Concat({h[n.left], h[n.right]}, 1), v.read[kW]), v.read[kB]));
        }
        states.push_back(h[j]);
      }
    }
    AddLoss(b, v, b.Concat(states, 0), b.Const(OneHot(T, labels)), batch_size_, T);
    TDF_ASSIGN_OR_RETURN(Compiled compiled, Compile(b, v, config_, training_, workers_));
    graph_nodes_ = compiled.nodes;
    std::vector<std::string> targets;
    if (training_) targets.push_back(compiled.step);
    TDF_ASSIGN_OR_RETURN(std::vector<Tensor> out, compiled.session->Run({}, {"loss"}, targets, &stats_));
    if (training_) {
      for (int i = 0; i < kNumParameters; ++i) {
        TDF_ASSIGN_OR_RETURN(params_.t[i], compiled.session->ReadVariable(kParameterNames[i]));
      }
    }
    return At(out[0], 0);
  }

  absl::StatusOr<Parameters> ReadParameters() const override { return params_; }

 private:
  const ModelConfig config_;
  Parameters params_;
  const int batch_size_;
  const bool training_;
  const int workers_;
};

}  // namespace

Parameters InitParameters(const ModelConfig& c) {
  uint64_t state = c.seed;
  Parameters p;
  for (int i = 0; i < kNumParameters; ++i) {
    const Shape shape = ParamShape(c, i);
    const bool bias = i == kBl || i == kB || i == kBc;
    const double limit = i == kE ? 0.1 : bias ? 0.0 : std::sqrt(6.0 / (shape.dim(0) + shape.dim(1)));
    std::vector<double> v(shape.num_elements());
    for (double& x : v) x = limit * (2.0 * static_cast<double>(NextRandom(state) >> 11) * 0x1.0p-53 - 1.0);
    p.t[i] = FromDoubles(c.dtype, shape, v);
  }
  return p;
}

double MaxRelativeDifference(const Parameters& a, const Parameters& b) {
  double worst = 0;
  for (int i = 0; i < kNumParameters; ++i) {
    if (a.t[i].num_elements() != b.t[i].num_elements()) return INFINITY;
    for (int64_t k = 0; k < a.t[i].num_elements(); ++k) {
      const double x = At(a.t[i], k), y = At(b.t[i], k);
      const double d = std::abs(x - y) / std::max(1.0, std::abs(y));
      if (!(d <= worst)) worst = d;  // NaN sticks
    }
  }
  return worst;
}

double NativeLoss(const ModelConfig& config, const Parameters& params, const Batch& batch, Parameters* grads) {
  return config.dtype == DType::kFloat64 ? NativeLossT<double>(config, params, batch, grads)
                                         : NativeLossT<float>(config, params, batch, grads);
}

void NativeSgd(const ModelConfig& config, const Parameters& grads, Parameters* params, bool in_place) {
  if (config.dtype == DType::kFloat64) {
    NativeSgdT<double>(config, grads, params, in_place);
  } else {
    NativeSgdT<float>(config, grads, params, in_place);
  }
}

const char* ImplName(Impl impl) {
  switch (impl) {
    case Impl::kRecursion: return "recursion";
    case Impl::kIteration: return "iteration";
    case Impl::kUnrolled: return "unrolled";
    case Impl::kBatchedRecursion: return "batched";
  }
  return "?";
}

absl::StatusOr<std::unique_ptr<Model>> Model::Create(Impl impl, const ModelConfig& config, const Parameters& initial,
                                                     int batch_size, bool training, int num_workers) {
  if (batch_size < 1) return absl::InvalidArgumentError("batch size must be >= 1");
  if (config.dtype != DType::kFloat32 && config.dtype != DType::kFloat64)
    return absl::InvalidArgumentError("the model computes in float32 or float64");
  switch (impl) {
    case Impl::kRecursion: return CreateRecursion(config, initial, batch_size, training, num_workers, false);
    case Impl::kBatchedRecursion: return CreateRecursion(config, initial, batch_size, training, num_workers, true);
    case Impl::kIteration: return CreateIteration(config, initial, batch_size, training, num_workers);
    case Impl::kUnrolled:
      return std::unique_ptr<Model>(new UnrolledModel(config, initial, batch_size, training, num_workers));
  }
  return absl::InvalidArgumentError("unknown implementation");
}

}  // namespace tdf_treernn
