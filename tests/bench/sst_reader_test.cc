// The TreeRNN benchmark's trees (bench/treebank.h): the SST reader on a
// sample file in the treebank's format, malformed input, the vocabulary, and
// the synthetic tree generator.
#include <fstream>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "treebank.h"

namespace tdf_treernn {
namespace {

using ::testing::HasSubstr;

const std::string kSample = std::string(TDF_SOURCE_DIR) + "/bench/data/sst_sample.txt";

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// A tree is well formed: post-order, full binary, every node but the root
// has one parent, labels in 0..4, leaves carry words.
void ExpectWellFormed(const Tree& t, int vocabulary_size) {
  ASSERT_FALSE(t.nodes.empty());
  std::vector<int> parents(t.nodes.size(), 0);
  for (int j = 0; j < t.num_nodes(); ++j) {
    const TreeNode& n = t.nodes[j];
    EXPECT_GE(n.label, 0);
    EXPECT_LT(n.label, kNumClasses);
    if (n.is_leaf()) {
      EXPECT_EQ(n.right, -1);
      EXPECT_GE(n.word, 0);
      EXPECT_LT(n.word, vocabulary_size);
    } else {
      EXPECT_EQ(n.word, -1);
      ASSERT_GE(n.left, 0);
      ASSERT_LT(n.left, j);
      ASSERT_LT(n.right, j);
      EXPECT_LT(n.left, n.right);  // the left subtree comes first
      ++parents[n.left];
      ++parents[n.right];
    }
  }
  for (int j = 0; j + 1 < t.num_nodes(); ++j) EXPECT_EQ(parents[j], 1) << "node " << j;
  EXPECT_EQ(parents.back(), 0);
  int leaves = 0;
  for (const TreeNode& n : t.nodes) leaves += n.is_leaf();
  EXPECT_EQ(leaves, t.num_leaves());
}

TEST(SstReader, ReadsTheSampleFile) {
  Vocabulary vocab;
  absl::StatusOr<std::vector<Tree>> trees = ReadTreebank(kSample, &vocab);
  ASSERT_TRUE(trees.ok()) << trees.status();
  ASSERT_EQ(trees->size(), 8u);
  for (const Tree& t : *trees) ExpectWellFormed(t, vocab.size());

  // (3 (2 It) (4 (2 (2 's) (2 a)) (4 lovely))) in post-order:
  // It, 's, a, ('s a), lovely, (('s a) lovely), root.
  const Tree& t = (*trees)[0];
  ASSERT_EQ(t.num_nodes(), 7);
  EXPECT_EQ(t.num_leaves(), 4);
  EXPECT_EQ(t.depth(), 3);
  const std::vector<std::string> words = {"It", "'s", "a", "", "lovely", "", ""};
  const std::vector<int> labels = {2, 2, 2, 2, 4, 4, 3};
  for (int j = 0; j < 7; ++j) {
    EXPECT_EQ(t.nodes[j].label, labels[j]) << j;
    if (!words[j].empty()) EXPECT_EQ(vocab.word(t.nodes[j].word), words[j]);
  }
  EXPECT_EQ(t.nodes[3].left, 1);
  EXPECT_EQ(t.nodes[3].right, 2);
  EXPECT_EQ(t.nodes[5].left, 3);
  EXPECT_EQ(t.nodes[5].right, 4);
  EXPECT_EQ(t.nodes[6].left, 0);
  EXPECT_EQ(t.nodes[6].right, 5);

  // A one-word sentence is a single leaf.
  const Tree& wow = (*trees)[3];
  ASSERT_EQ(wow.num_nodes(), 1);
  EXPECT_EQ(vocab.word(wow.nodes[0].word), "Wow");
  EXPECT_EQ(wow.depth(), 0);

  // Words repeat across trees with one id; "." is shared.
  EXPECT_EQ(vocab.Find("."), vocab.Find("."));
  EXPECT_NE(vocab.Find("."), Vocabulary::kUnknown);
  EXPECT_EQ(vocab.word(Vocabulary::kUnknown), "<unk>");
}

TEST(SstReader, RoundTripsThroughToString) {
  Vocabulary vocab;
  absl::StatusOr<std::vector<Tree>> trees = ReadTreebank(kSample, &vocab);
  ASSERT_TRUE(trees.ok()) << trees.status();
  std::vector<std::string> lines;
  for (absl::string_view l : absl::StrSplit(ReadFile(kSample), '\n', absl::SkipEmpty()))
    lines.emplace_back(l);
  ASSERT_EQ(lines.size(), trees->size());
  for (size_t i = 0; i < lines.size(); ++i) EXPECT_EQ(ToString((*trees)[i], vocab), lines[i]);
}

TEST(SstReader, FrozenVocabularyMapsUnseenWordsToUnknown) {
  Vocabulary vocab;
  ASSERT_TRUE(ParseTree("(3 (2 good) (2 film))", &vocab).ok());
  const int size = vocab.size();
  ParseOptions frozen;
  frozen.grow_vocabulary = false;
  absl::StatusOr<Tree> t = ParseTree("(1 (2 bad) (2 film))", &vocab, frozen);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(vocab.size(), size);
  EXPECT_EQ(t->nodes[0].word, Vocabulary::kUnknown);
  EXPECT_EQ(vocab.word(t->nodes[1].word), "film");
}

TEST(SstReader, WhitespaceIsFlexible) {
  Vocabulary vocab;
  absl::StatusOr<Tree> t = ParseTree("  (3\t(2 a)\n   (2  b) )  \n", &vocab);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->num_nodes(), 3);
}

TEST(SstReader, MalformedInputIsAnErrorNotACrash) {
  struct Bad {
    std::string text;
    std::string message;
  };
  const std::vector<Bad> cases = {
      {"", "expected '('"},
      {"   ", "expected '('"},
      {"3 (2 a)", "expected '('"},
      {"(", "expected a sentiment label"},
      {"(3", "unclosed '('"},
      {"(3 (2 a)", "unclosed '(' at offset 0"},
      {"(3 (2 a) (2 b)", "unclosed"},
      {"(5 a)", "label 0..4"},
      {"(x a)", "label 0..4"},
      {"(12 a)", "label 0..4"},
      {"(-1 a)", "label 0..4"},
      {"((2 a) (2 b))", "label 0..4"},
      {"(3)", "neither a word nor children"},
      {"(3 ())", "label 0..4"},
      {"(3 (2 a))", "one child"},
      {"(3 (2 a) (2 b) (2 c))", "more than two children"},
      {"(3 a b)", "second word"},
      {"(3 a (2 b))", "cannot also have children"},
      {"(3 (2 a) b)", "next to subtrees"},
      {"(3 (2 a) (2 b)) (2 c)", "after the tree"},
      {"(3 (2 a) (2 b)))", "after the tree"},
      {")", "expected '('"},
  };
  for (const Bad& c : cases) {
    Vocabulary vocab;
    absl::StatusOr<Tree> t = ParseTree(c.text, &vocab);
    ASSERT_FALSE(t.ok()) << "'" << c.text << "' parsed";
    EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument) << c.text;
    EXPECT_THAT(t.status().message(), HasSubstr(c.message)) << "'" << c.text << "': " << t.status();
    EXPECT_EQ(vocab.size(), 1) << "'" << c.text << "' added words";  // only <unk>
  }
}

TEST(SstReader, DeepNestingIsBounded) {
  Vocabulary vocab;
  std::string open;
  for (int i = 0; i < 200000; ++i) open += "(2 ";
  absl::StatusOr<Tree> t = ParseTree(open, &vocab);
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(t.status().message(), HasSubstr("deeper than 10000"));
  // A deep but well-formed chain (2 (2 x) (2 (2 x) ... (2 w))) parses
  // within a raised limit.
  constexpr int kLevels = 20000;
  std::string chain;
  for (int i = 0; i < kLevels; ++i) chain += "(2 (2 x) ";
  chain += "(2 w)" + std::string(kLevels, ')');
  ParseOptions deep;
  deep.max_depth = 30000;
  absl::StatusOr<Tree> ok = ParseTree(chain, &vocab, deep);
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->num_leaves(), kLevels + 1);
  EXPECT_EQ(ok->depth(), kLevels);
  deep.max_depth = 1000;
  absl::StatusOr<Tree> too_deep = ParseTree(chain, &vocab, deep);
  ASSERT_FALSE(too_deep.ok());
  EXPECT_THAT(too_deep.status().message(), HasSubstr("deeper than 1000"));
}

TEST(SstReader, ErrorsNameTheLineAndTheFile) {
  Vocabulary vocab;
  absl::StatusOr<std::vector<Tree>> trees = ParseTreebank("(2 a)\n\n(3 (2 b) (2 c))\n(3 (2 b)\n", &vocab);
  ASSERT_FALSE(trees.ok());
  EXPECT_THAT(trees.status().message(), HasSubstr("line 4"));
  absl::StatusOr<std::vector<Tree>> missing = ReadTreebank("/nonexistent/sst.txt", &vocab);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
}

// Random byte soup from the parser's alphabet: never a crash; whatever parses
// is well formed and prints back to itself.
TEST(SstReader, RandomInputNeverCrashes) {
  std::mt19937 rng(5);
  const std::string alphabet = "(((())))  0123456ab'.";
  int parsed = 0;
  for (int i = 0; i < 20000; ++i) {
    std::string text(rng() % 40, ' ');
    for (char& ch : text) ch = alphabet[rng() % alphabet.size()];
    if (i % 4 == 0) text = "(" + std::to_string(rng() % 5) + " " + text;
    Vocabulary vocab;
    absl::StatusOr<Tree> t = ParseTree(text, &vocab);
    if (!t.ok()) continue;
    ++parsed;
    ExpectWellFormed(*t, vocab.size());
    Vocabulary again;
    absl::StatusOr<Tree> reparsed = ParseTree(ToString(*t, vocab), &again);
    ASSERT_TRUE(reparsed.ok()) << text;
    EXPECT_EQ(ToString(*reparsed, again), ToString(*t, vocab));
  }
  EXPECT_GT(parsed, 0);
}

TEST(TreeGenerator, IsDeterministicAndSstLike) {
  GeneratorOptions options;
  Vocabulary v1, v2, v3;
  std::vector<Tree> a = GenerateTrees(2000, options, &v1);
  std::vector<Tree> b = GenerateTrees(2000, options, &v2);
  options.seed = 2;
  std::vector<Tree> c = GenerateTrees(50, options, &v3);
  ASSERT_EQ(a.size(), 2000u);
  EXPECT_EQ(v1.size(), options.vocabulary_size);
  for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(ToString(a[i], v1), ToString(b[i], v2));
  int same = 0;
  for (size_t i = 0; i < c.size(); ++i) same += ToString(a[i], v1) == ToString(c[i], v3);
  EXPECT_LT(same, 5);
  for (const Tree& t : a) ExpectWellFormed(t, v1.size());

  const TreebankStats s = Stats(a);
  EXPECT_NEAR(s.mean_length, 19.0, 1.0);
  EXPECT_LE(s.max_length, options.max_length);
  EXPECT_GT(s.mean_depth, 5.0);   // deeper than a balanced tree (log2 19 ~ 4.2) ...
  EXPECT_LT(s.mean_depth, 15.0);  // ... shallower than a chain
  for (int k = 0; k < kNumClasses; ++k) EXPECT_GT(s.label_share[k], 0.05) << k;
  EXPECT_NEAR(s.label_share[2], 0.6 + 0.4 / 5, 0.02);
  std::set<int> words;
  for (const Tree& t : a)
    for (const TreeNode& n : t.nodes)
      if (n.is_leaf()) words.insert(n.word);
  EXPECT_EQ(words.count(Vocabulary::kUnknown), 0u);
  EXPECT_GT(words.size(), 1000u);  // Zipf: a long tail of the 3000 words is used
}

TreeParallelism ParallelismOf(const std::string& text, int workers) {
  Vocabulary vocab;
  absl::StatusOr<Tree> tree = ParseTree(text, &vocab);
  EXPECT_TRUE(tree.ok()) << tree.status();
  return tree.ok() ? Parallelism(*tree, workers) : TreeParallelism{};
}

TEST(TreeParallelism, ChainAndBalancedTrees) {
  // A right-branching chain: nothing to overlap.
  const std::string chain = "(1 (1 a) (1 (1 b) (1 (1 c) (1 d))))";
  for (int w : {1, 2, 4}) {
    const TreeParallelism p = ParallelismOf(chain, w);
    EXPECT_EQ(p.internal_nodes, 3);
    EXPECT_EQ(p.span, 3);
    EXPECT_EQ(p.best_schedule, 3) << w;
  }
  // Eight leaves, balanced: 4 + 2 + 1 internal nodes by level.
  const std::string balanced =
      "(1 (1 (1 (1 a) (1 b)) (1 (1 c) (1 d))) (1 (1 (1 e) (1 f)) (1 (1 g) (1 h))))";
  EXPECT_EQ(ParallelismOf(balanced, 1).best_schedule, 7);
  EXPECT_EQ(ParallelismOf(balanced, 2).best_schedule, 4);
  EXPECT_EQ(ParallelismOf(balanced, 4).best_schedule, 3);
  EXPECT_EQ(ParallelismOf(balanced, 4).span, 3);
  EXPECT_EQ(ParallelismOf("(2 word)", 2).internal_nodes, 0);
  EXPECT_EQ(ParallelismOf("(2 word)", 2).best_schedule, 0);
}

TEST(TreeParallelism, LongestPathGoesFirst) {
  // Left: a chain of three internal nodes; right: a node over two cherries.
  // Running the two cherries first takes 5 steps on 2 workers; starting the
  // chain first takes 4, which is optimal (7 nodes, span 4).
  const std::string tree =
      "(1 (1 (1 (1 (1 a) (1 b)) (1 c)) (1 d)) (1 (1 (1 e) (1 f)) (1 (1 g) (1 h))))";
  const TreeParallelism p = ParallelismOf(tree, 2);
  EXPECT_EQ(p.internal_nodes, 7);
  EXPECT_EQ(p.span, 4);
  EXPECT_EQ(p.best_schedule, 4);
}

}  // namespace
}  // namespace tdf_treernn
