// The SST reader and the synthetic tree generator (treebank.h).
#include "treebank.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace tdf_treernn {

int Tree::depth() const {
  std::vector<int> d(nodes.size(), 0);
  for (size_t i = 0; i < nodes.size(); ++i)
    if (!nodes[i].is_leaf()) d[i] = 1 + std::max(d[nodes[i].left], d[nodes[i].right]);
  return nodes.empty() ? 0 : d.back();
}

Vocabulary::Vocabulary() { Add("<unk>"); }

int Vocabulary::Add(absl::string_view word) {
  auto [it, inserted] = ids_.try_emplace(std::string(word), size());
  if (inserted) words_.emplace_back(word);
  return it->second;
}

int Vocabulary::Find(absl::string_view word) const {
  auto it = ids_.find(word);
  return it == ids_.end() ? kUnknown : it->second;
}

// ---- the reader ----------------------------------------------------------

namespace {

// Tokens: "(", ")", or an atom (a maximal run of other non-space bytes).
class Lexer {
 public:
  explicit Lexer(absl::string_view text) : text_(text) {}

  void SkipSpace() {
    while (pos_ < text_.size() && IsSpace(text_[pos_])) ++pos_;
  }
  bool AtEnd() {
    SkipSpace();
    return pos_ >= text_.size();
  }
  size_t pos() const { return pos_; }
  // The next token, consumed; empty at the end.
  absl::string_view Next() {
    SkipSpace();
    if (pos_ >= text_.size()) return {};
    const size_t start = pos_;
    if (text_[pos_] == '(' || text_[pos_] == ')') return text_.substr(pos_++, 1);
    while (pos_ < text_.size() && !IsSpace(text_[pos_]) && text_[pos_] != '(' && text_[pos_] != ')') ++pos_;
    return text_.substr(start, pos_ - start);
  }

 private:
  static bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
  absl::string_view text_;
  size_t pos_ = 0;
};

std::string Show(absl::string_view token) {
  if (token.empty()) return "the end of the input";
  constexpr size_t kMax = 40;
  return absl::StrCat("'", token.substr(0, kMax), token.size() > kMax ? "...'" : "'");
}

absl::Status Error(size_t offset, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("SST tree, offset ", offset, ": ", what));
}

struct Open {
  int label = -1;
  int children[2] = {-1, -1};
  int num_children = 0;
  int word = -1;  // index into the words seen so far
  size_t offset = 0;
};

}  // namespace

absl::StatusOr<Tree> ParseTree(absl::string_view text, Vocabulary* vocab, const ParseOptions& options) {
  Lexer lex(text);
  Tree tree;
  std::vector<absl::string_view> words;
  std::vector<Open> stack;
  size_t at = (lex.SkipSpace(), lex.pos());
  absl::string_view tok = lex.Next();
  if (tok != "(") return Error(at, absl::StrCat("expected '(' to open a tree, got ", Show(tok)));
  stack.push_back({});
  stack.back().offset = at;
  while (!stack.empty()) {
    Open& top = stack.back();
    at = (lex.SkipSpace(), lex.pos());
    tok = lex.Next();
    if (top.label < 0) {
      if (tok.size() != 1 || tok[0] < '0' || tok[0] > '4')
        return Error(at, absl::StrCat("expected a sentiment label 0..4 after '(', got ", Show(tok)));
      top.label = tok[0] - '0';
      continue;
    }
    if (tok.empty()) return Error(at, absl::StrCat("unclosed '(' at offset ", top.offset));
    if (tok == "(") {
      if (top.word >= 0) return Error(at, "a leaf '(label word)' cannot also have children");
      if (top.num_children == 2) return Error(at, "a node has more than two children (SST trees are binary)");
      if (static_cast<int>(stack.size()) >= options.max_depth)
        return Error(at, absl::StrCat("trees nested deeper than ", options.max_depth, " levels"));
      stack.push_back({});
      stack.back().offset = at;
      continue;
    }
    if (tok == ")") {
      TreeNode node;
      node.label = top.label;
      if (top.word >= 0) {
        node.word = top.word;
      } else if (top.num_children == 2) {
        node.left = top.children[0];
        node.right = top.children[1];
      } else {
        return Error(at, top.num_children == 0 ? "a node has neither a word nor children"
                                               : "a node has one child (SST trees are binary)");
      }
      tree.nodes.push_back(node);
      stack.pop_back();
      if (!stack.empty()) {
        Open& parent = stack.back();
        parent.children[parent.num_children++] = tree.root();
      }
      continue;
    }
    // A word.
    if (top.num_children > 0) return Error(at, absl::StrCat("word ", Show(tok), " next to subtrees"));
    if (top.word >= 0) return Error(at, absl::StrCat("a leaf has a second word ", Show(tok)));
    top.word = static_cast<int>(words.size());
    words.push_back(tok);
  }
  if (!lex.AtEnd()) {
    at = lex.pos();
    return Error(at, absl::StrCat("unexpected ", Show(lex.Next()), " after the tree"));
  }
  for (TreeNode& n : tree.nodes) {
    if (n.word < 0) continue;
    absl::string_view w = words[n.word];
    n.word = options.grow_vocabulary ? vocab->Add(w) : vocab->Find(w);
  }
  return tree;
}

absl::StatusOr<std::vector<Tree>> ParseTreebank(absl::string_view text, Vocabulary* vocab,
                                                const ParseOptions& options) {
  std::vector<Tree> trees;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    if (line.find_first_not_of(" \t\r") == absl::string_view::npos) continue;
    absl::StatusOr<Tree> tree = ParseTree(line, vocab, options);
    if (!tree.ok())
      return absl::Status(tree.status().code(), absl::StrCat("line ", line_number, ": ", tree.status().message()));
    trees.push_back(*std::move(tree));
  }
  return trees;
}

absl::StatusOr<std::vector<Tree>> ReadTreebank(const std::string& path, Vocabulary* vocab,
                                               const ParseOptions& options) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read '", path, "'"));
  std::stringstream buffer;
  buffer << in.rdbuf();
  absl::StatusOr<std::vector<Tree>> trees = ParseTreebank(buffer.str(), vocab, options);
  if (!trees.ok()) return absl::Status(trees.status().code(), absl::StrCat(path, ": ", trees.status().message()));
  return trees;
}

std::string ToString(const Tree& tree, const Vocabulary& vocab) {
  std::vector<std::string> text(tree.nodes.size());
  for (size_t i = 0; i < tree.nodes.size(); ++i) {
    const TreeNode& n = tree.nodes[i];
    text[i] = n.is_leaf() ? absl::StrCat("(", n.label, " ", vocab.word(n.word), ")")
                          : absl::StrCat("(", n.label, " ", text[n.left], " ", text[n.right], ")");
  }
  return tree.nodes.empty() ? "" : text.back();
}

// ---- the generator -------------------------------------------------------

namespace {

// SplitMix64: tiny, fast, and the same sequence everywhere.
class Random {
 public:
  explicit Random(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  double Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }  // [0, 1)
  int Below(int n) { return static_cast<int>(Uniform() * n); }              // [0, n)
  double Normal() {  // Box-Muller
    const double u = 1.0 - Uniform(), v = Uniform();
    return std::sqrt(-2.0 * std::log(u)) * std::cos(6.283185307179586 * v);
  }

 private:
  uint64_t state_;
};

struct Builder {
  Random& rng;
  const GeneratorOptions& options;
  const std::vector<double>& zipf_cdf;  // over word ids 1 .. size-1
  Tree tree;

  int Label() { return rng.Uniform() < 0.6 ? 2 : rng.Below(kNumClasses); }
  int Word() {
    const double u = rng.Uniform() * zipf_cdf.back();
    return 1 + static_cast<int>(std::upper_bound(zipf_cdf.begin(), zipf_cdf.end(), u) - zipf_cdf.begin());
  }
  // Appends the subtree over `n` words in post-order; returns its root.
  int Span(int n) {
    TreeNode node;
    node.label = Label();
    if (n == 1) {
      node.word = Word();
    } else {
      const int left = rng.Uniform() < options.right_branching ? 1 : 1 + rng.Below(n - 1);
      node.left = Span(left);
      node.right = Span(n - left);
    }
    tree.nodes.push_back(node);
    return tree.root();
  }
};

}  // namespace

std::vector<Tree> GenerateTrees(int count, const GeneratorOptions& options, Vocabulary* vocab) {
  const int size = std::max(2, options.vocabulary_size);
  for (int id = vocab->size(); id < size; ++id) vocab->Add(absl::StrCat("w", id));
  std::vector<double> cdf(size - 1);
  double total = 0;
  for (int r = 1; r < size; ++r) cdf[r - 1] = total += 1.0 / std::pow(static_cast<double>(r), options.zipf_exponent);
  Random rng(options.seed);
  std::vector<Tree> trees;
  trees.reserve(count);
  for (int t = 0; t < count; ++t) {
    const double length = std::round(options.mean_length + options.stddev_length * rng.Normal());
    const int n = static_cast<int>(std::clamp<double>(length, options.min_length, options.max_length));
    Builder b{rng, options, cdf, {}};
    b.Span(n);
    trees.push_back(std::move(b.tree));
  }
  return trees;
}

TreebankStats Stats(const std::vector<Tree>& trees) {
  TreebankStats s;
  s.trees = static_cast<int>(trees.size());
  int64_t leaves = 0, depth = 0;
  int64_t labels[kNumClasses] = {};
  for (const Tree& t : trees) {
    leaves += t.num_leaves();
    s.max_length = std::max(s.max_length, t.num_leaves());
    const int d = t.depth();
    depth += d;
    s.max_depth = std::max(s.max_depth, d);
    s.nodes += t.num_nodes();
    for (const TreeNode& n : t.nodes) ++labels[n.label];
  }
  if (s.trees > 0) {
    s.mean_length = static_cast<double>(leaves) / s.trees;
    s.mean_depth = static_cast<double>(depth) / s.trees;
  }
  for (int c = 0; c < kNumClasses; ++c) s.label_share[c] = s.nodes > 0 ? static_cast<double>(labels[c]) / s.nodes : 0;
  return s;
}

TreeParallelism Parallelism(const Tree& tree, int workers) {
  TreeParallelism p;
  const int n = tree.num_nodes();
  // level[j]: internal nodes from j up to the root, j included. Post-order
  // puts a parent after its children, so one backward sweep fills it.
  std::vector<int> level(n, 0), waiting(n, 0), parent(n, -1);
  for (int j = n - 1; j >= 0; --j) {
    const TreeNode& node = tree.nodes[j];
    if (node.is_leaf()) continue;
    ++p.internal_nodes;
    level[j] = (parent[j] < 0 ? 0 : level[parent[j]]) + 1;
    p.span = std::max(p.span, level[j]);
    for (int child : {node.left, node.right}) {
      parent[child] = j;
      if (!tree.nodes[child].is_leaf()) ++waiting[j];
    }
  }
  std::vector<int> ready;
  for (int j = 0; j < n; ++j)
    if (!tree.nodes[j].is_leaf() && waiting[j] == 0) ready.push_back(j);
  int done = 0;
  while (done < p.internal_nodes) {
    // The `workers` ready nodes farthest from the root run this step.
    const int take = std::min<int>(std::max(workers, 1), static_cast<int>(ready.size()));
    std::partial_sort(ready.begin(), ready.begin() + take, ready.end(),
                      [&](int a, int b) { return level[a] > level[b]; });
    std::vector<int> ran(ready.begin(), ready.begin() + take);
    ready.erase(ready.begin(), ready.begin() + take);
    for (int j : ran)
      if (parent[j] >= 0 && --waiting[parent[j]] == 0) ready.push_back(parent[j]);
    done += take;
    ++p.best_schedule;
  }
  return p;
}

}  // namespace tdf_treernn
