// Seeded random recursive programs whose matrix and table arguments take the
// rows paths of AddGradients (outer-product rows for a weight used as x W,
// indexed rows for a table read by Gather) or, when some use rules them out,
// the dense path: one or two recursive calls (a chain or a tree), square
// and non-square weights, scalar and vector indices, shapes that trigger
// the compaction of long row sums, and uses that force the dense gradient
// (elementwise, transposed). Each is checked against central finite
// differences, with the expected path asserted from the ops AddGradients
// emitted.
#include <map>
#include <random>

#include "autodiff_test_util.h"
#include "gtest/gtest.h"
#include "tdf/autodiff.h"
#include "tdf/builder.h"

namespace tdf {
namespace {

using testing_autodiff::CheckGradients;
using testing_autodiff::Feeds;

Tensor RandomTensor(const Shape& shape, std::mt19937& rng, double lo, double hi) {
  std::uniform_real_distribution<double> d(lo, hi);
  std::vector<double> v(shape.num_elements());
  for (double& x : v) x = d(rng);
  return *Tensor::FromVector<double>(v, shape);
}

struct Case {
  int calls;          // recursive calls per inner invocation: 1 (chain) or 2 (tree)
  int64_t hidden;     // H
  int64_t rows;       // R, rows of the table T [R, H]
  bool w_dense;       // W also used elementwise: dense gradient
  bool w_transposed;  // x W^T instead of x W: dense gradient
  bool t_dense;       // T also summed whole: dense gradient
  bool t_vector;      // T read by a vector of two indices (summed) instead of one
  int64_t depth;
};

// f(i, h, W, T) = i <= 0 ? h * T[i mod R]
//               : tanh(x W + T[idx]) with x = [f(i-1) | f(i-2)] (tree) or f(i-1) (chain).
Graph Build(const Case& c, std::mt19937& rng) {
  GraphBuilder b;
  const DType F = DType::kFloat64, I = DType::kInt64;
  const int64_t H = c.hidden, R = c.rows;
  absl::Status s = b.DefineFunction(
      {"f", {{"i", I}, {"h", F}, {"W", F}, {"T", F}}, {{"y", F}}},
      [&](GraphBuilder& f, const std::vector<Output>& a) -> std::vector<Output> {
        Output i = a[0], h = a[1], W = a[2], T = a[3];
        auto row = [&](Output index) {  // [1, H]: T[index], or T[index] + T[index + 1 mod R]
          if (!c.t_vector) return f.Reshape(f.Gather(T, index), {1, H});
          Output next = f.Op("Mod", {f.Add(index, f.Const<int64_t>(1)), f.Const<int64_t>(R)});
          Output both = f.Concat({f.Reshape(index, {1}), f.Reshape(next, {1})}, 0);
          return f.Sum(f.Gather(T, both), {0}, true);
        };
        Output k = f.Op("Mod", {f.Op("Maximum", {i, f.Const<int64_t>(0)}), f.Const<int64_t>(R)});
        return f.Cond(
            f.LessEqual(i, f.Const<int64_t>(0)), [&] { return std::vector<Output>{f.Mul(h, row(k))}; },
            [&] {
              Output x = f.Call("f", {f.Sub(i, f.Const<int64_t>(1)), h, W, T})[0];
              if (c.calls == 2) x = f.Concat({x, f.Call("f", {f.Sub(i, f.Const<int64_t>(2)), h, W, T})[0]}, 1);
              Output xw = f.MatMul(x, W, false, c.w_transposed);
              if (c.w_dense) xw = f.Add(xw, f.Mul(f.Sum(W), f.Const<double>(0.1)));
              Output pre = f.Add(xw, row(k));
              if (c.t_dense) pre = f.Add(pre, f.Mul(f.Sum(T), f.Const<double>(0.05)));
              return std::vector<Output>{f.Tanh(pre)};
            });
      });
  EXPECT_TRUE(s.ok()) << s;
  Output h = b.Placeholder("h", F), W = b.Placeholder("W", F), T = b.Placeholder("T", F);
  Output y = b.Call("f", {b.Placeholder("n", I), h, W, T})[0];
  b.Identity(b.Sum(b.Mul(y, b.Const(RandomTensor(Shape({1, H}), rng, -1, 1)))), "loss");
  absl::StatusOr<Graph> g = b.Build();
  EXPECT_TRUE(g.ok()) << g.status();
  return g.ok() ? *g : Graph{};
}

TEST(RowGradients, RandomRecursiveProgramsMatchFiniteDifferences) {
  int outer_rows = 0, indexed_rows = 0, dense_w = 0, dense_t = 0;
  for (uint32_t seed = 0; seed < 60; ++seed) {
    std::mt19937 rng(seed);
    auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
    Case c;
    c.calls = pick(1, 2);
    c.hidden = pick(1, 3);
    c.rows = pick(1, 4);
    c.w_dense = pick(0, 4) == 0;
    c.w_transposed = pick(0, 4) == 0;
    c.t_dense = pick(0, 4) == 0;
    c.t_vector = pick(0, 1) == 1;
    c.depth = pick(0, c.calls == 2 ? 5 : 9);
    const std::string where = ::testing::PrintToString(seed) + " calls=" + std::to_string(c.calls) +
                              " H=" + std::to_string(c.hidden) + " R=" + std::to_string(c.rows) +
                              " w_dense=" + std::to_string(c.w_dense) + " w_t=" + std::to_string(c.w_transposed) +
                              " t_dense=" + std::to_string(c.t_dense) + " t_vec=" + std::to_string(c.t_vector) +
                              " n=" + std::to_string(c.depth);
    Graph g = Build(c, rng);
    // Which path each argument takes, from the ops of f_ext.
    Graph grad = g;
    ASSERT_TRUE(AddGradients(grad, {"loss"}, {"h", "W", "T"}).ok()) << where;
    std::map<std::string, int> ops;
    for (const NodeDef& n : grad.library.Find("f_ext")->node) ++ops[n.op];
    const bool w_rows = !c.w_dense && !c.w_transposed, t_rows = !c.t_dense;
    EXPECT_EQ(ops["OuterRowsConcat"] > 0, w_rows) << where;
    EXPECT_EQ(ops["IndexedRows"] > 0, t_rows) << where;
    EXPECT_EQ(ops["GatherGrad"] > 0, !t_rows) << where;
    outer_rows += w_rows, dense_w += !w_rows, indexed_rows += t_rows, dense_t += !t_rows;
    const int64_t K = c.calls * c.hidden;
    Feeds feeds = {{"h", RandomTensor(Shape({1, c.hidden}), rng, -1, 1)},
                   {"W", RandomTensor(c.w_transposed ? Shape({c.hidden, K}) : Shape({K, c.hidden}), rng, -0.8, 0.8)},
                   {"T", RandomTensor(Shape({c.rows, c.hidden}), rng, -1, 1)},
                   {"n", Tensor::Scalar<int64_t>(c.depth)}};
    auto r = CheckGradients(g, "loss", {"h", "W", "T"}, feeds, 1e-6);
    EXPECT_TRUE(r.ok()) << where << ": " << r.status();
  }
  // Every path was taken by some program.
  EXPECT_GT(outer_rows, 0);
  EXPECT_GT(indexed_rows, 0);
  EXPECT_GT(dense_w, 0);
  EXPECT_GT(dense_t, 0);
}

}  // namespace
}  // namespace tdf
