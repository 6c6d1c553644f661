// Gradients of every differentiable op against central finite differences
// (float64).
#include <functional>
#include <map>
#include <random>

#include "absl/strings/str_cat.h"
#include "autodiff_test_util.h"
#include "gtest/gtest.h"
#include "tdf/builder.h"

namespace tdf {
namespace {

using testing_autodiff::CheckGradients;
using testing_autodiff::Feeds;

Tensor Random(const Shape& shape, uint32_t seed, double lo = -1.5, double hi = 1.5) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  std::vector<double> v(shape.num_elements());
  for (double& x : v) x = u(rng);
  return *Tensor::FromVector<double>(v, shape);
}

// loss = Sum(op(a, b) * w) with a fixed random weight w of the result's shape
// (so every output element gets a different upstream gradient).
void CheckBinary(const std::string& op, const Shape& sa, const Shape& sb, const Shape& sout, double lo = -1.5,
                 double hi = 1.5, AttrMap attrs = {}) {
  GraphBuilder b;
  Output a = b.Placeholder("a", DType::kFloat64);
  Output c = b.Placeholder("b", DType::kFloat64);
  Output y = b.Op(op, {a, c}, attrs);
  b.Identity(b.Sum(b.Mul(y, b.Const(Random(sout, 7)))), "loss");
  absl::StatusOr<Graph> g = b.Build();
  ASSERT_TRUE(g.ok()) << g.status();
  Feeds feeds = {{"a", Random(sa, 1, lo, hi)}, {"b", Random(sb, 2, lo, hi)}};
  auto r = CheckGradients(*g, "loss", {"a", "b"}, feeds);
  EXPECT_TRUE(r.ok()) << op << ": " << r.status();
}

void CheckUnary(const std::string& op, const Shape& s, const Shape& sout, double lo = -1.5, double hi = 1.5,
                AttrMap attrs = {}) {
  GraphBuilder b;
  Output a = b.Placeholder("a", DType::kFloat64);
  Output y = b.Op(op, {a}, attrs);
  b.Identity(b.Sum(b.Mul(y, b.Const(Random(sout, 7)))), "loss");
  absl::StatusOr<Graph> g = b.Build();
  ASSERT_TRUE(g.ok()) << g.status();
  auto r = CheckGradients(*g, "loss", {"a"}, {{"a", Random(s, 1, lo, hi)}});
  EXPECT_TRUE(r.ok()) << op << ": " << r.status();
}

TEST(OpGradients, ElementwiseUnary) {
  const Shape s({2, 3});
  for (const char* op : {"Identity", "Neg", "Exp", "Tanh", "Sigmoid", "Square", "Abs"}) CheckUnary(op, s, s);
  CheckUnary("Relu", s, s);  // random values avoid the kink at 0
  for (const char* op : {"Log", "Sqrt", "Rsqrt", "Reciprocal"}) CheckUnary(op, s, s, 0.5, 2.0);
  CheckUnary("Identity", Shape({}), Shape({}));
  CheckUnary("Exp", Shape({}), Shape({}));
}

TEST(OpGradients, ElementwiseBinaryWithBroadcasting) {
  const Shape m({2, 3}), row({3}), col({2, 1}), scalar({});
  for (const char* op : {"Add", "Sub", "Mul", "Maximum", "Minimum"}) {
    CheckBinary(op, m, m, m);
    CheckBinary(op, m, row, m);
    CheckBinary(op, col, row, m);
    CheckBinary(op, scalar, m, m);
    CheckBinary(op, scalar, scalar, scalar);
  }
  CheckBinary("Div", m, m, m, 0.5, 2.0);
  CheckBinary("Div", m, row, m, 0.5, 2.0);
  CheckBinary("Div", scalar, m, m, 0.5, 2.0);
  CheckBinary("Pow", m, m, m, 0.5, 2.0);
}

TEST(OpGradients, MatMulAllTransposes) {
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      Shape sa = ta ? Shape({3, 2}) : Shape({2, 3});
      Shape sb = tb ? Shape({4, 3}) : Shape({3, 4});
      CheckBinary("MatMul", sa, sb, Shape({2, 4}), -1.5, 1.5, {{"transpose_a", ta}, {"transpose_b", tb}});
    }
  }
}

TEST(OpGradients, MatMulAddAllTransposes) {
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      GraphBuilder b;
      Output a = b.Placeholder("a", DType::kFloat64), c = b.Placeholder("b", DType::kFloat64);
      Output d = b.Placeholder("d", DType::kFloat64), e = b.Placeholder("e", DType::kFloat64);
      Output y = b.Op("MatMulAdd", {a, c, d, e}, {{"transpose_a", ta}, {"transpose_b", tb}});
      b.Identity(b.Sum(b.Mul(y, b.Const(Random(Shape({2, 4}), 7)))), "loss");
      auto g = b.Build();
      ASSERT_TRUE(g.ok()) << g.status();
      Feeds feeds = {{"a", Random(ta ? Shape({3, 2}) : Shape({2, 3}), 1)},
                     {"b", Random(tb ? Shape({4, 3}) : Shape({3, 4}), 2)},
                     {"d", Random(Shape({2, 4}), 3)},
                     {"e", Random(Shape({2, 4}), 4)}};
      auto r = CheckGradients(*g, "loss", {"a", "b", "d", "e"}, feeds);
      EXPECT_TRUE(r.ok()) << "ta=" << ta << " tb=" << tb << ": " << r.status();
    }
  }
}

// f(i, h, W) = i == 0 ? h : f(i - 1, tanh(product(h, W)), W);
// loss = sum(f(n, h0, W) * c), h0 [1, 3], W [3, 3]. Returns the graph and,
// in `ops`, the op counts of f_ext and the main graph after AddGradients.
using Product = std::function<Output(GraphBuilder&, Output h, Output W)>;
Graph RecursiveChain(const Product& product, std::map<std::string, int>* ext_ops, std::map<std::string, int>* main_ops) {
  GraphBuilder b;
  absl::Status s = b.DefineFunction(
      {"f", {{"i", DType::kInt64}, {"h", DType::kFloat64}, {"W", DType::kFloat64}}, {{"y", DType::kFloat64}}},
      [&](GraphBuilder& f, const std::vector<Output>& a) -> std::vector<Output> {
        return f.Cond(
            f.Equal(a[0], f.Const<int64_t>(0)), [&] { return std::vector<Output>{a[1]}; },
            [&] {
              Output next = f.Tanh(product(f, a[1], a[2]));
              return std::vector<Output>{f.Call("f", {f.Sub(a[0], f.Const<int64_t>(1)), next, a[2]})[0]};
            });
      });
  EXPECT_TRUE(s.ok()) << s;
  Output h = b.Placeholder("h", DType::kFloat64), W = b.Placeholder("W", DType::kFloat64);
  Output y = b.Call("f", {b.Placeholder("n", DType::kInt64), h, W})[0];
  b.Identity(b.Sum(b.Mul(y, b.Const(Random(Shape({1, 3}), 9)))), "loss");
  absl::StatusOr<Graph> g = b.Build();
  EXPECT_TRUE(g.ok()) << g.status();
  if (!g.ok()) return Graph{};
  Graph grad = *g;
  absl::StatusOr<std::vector<std::string>> d = AddGradients(grad, {"loss"}, {"h", "W"});
  EXPECT_TRUE(d.ok()) << d.status();
  if (const FunctionDef* ext = grad.library.Find("f_ext"); ext != nullptr)
    for (const NodeDef& n : ext->node) ++(*ext_ops)[n.op];
  for (const NodeDef& n : grad.node) ++(*main_ops)[n.op];
  return *g;
}

// A weight used by a MatMul in every call of a recursive function: its
// gradient sum_i x_i^T dy_i travels up the recursion as outer-product rows
// [x_i | dy_i] (no dense [K, N] product or sum per level), compacted to
// min(K, N) = 3 rows once longer (n = 5, 12), and the outermost call forms
// the dense gradient once.
TEST(OpGradients, RecursiveWeightGradientIsOuterProductRows) {
  std::map<std::string, int> ops, main_ops;
  Graph g = RecursiveChain([](GraphBuilder& f, Output h, Output W) { return f.MatMul(h, W); }, &ops, &main_ops);
  EXPECT_EQ(ops["MatMulAdd"], 0);
  EXPECT_EQ(ops["MatMul"], 2);  // forward h W, backward dy W^T: no x^T dy
  EXPECT_EQ(ops["OuterRowsConcat"], 2);  // the rows of this call and the recursive one; the empty sum
  EXPECT_EQ(main_ops["OuterRowsSum"], 1);
  for (int64_t n : {0, 1, 3, 5, 12}) {
    auto r = CheckGradients(g, "loss", {"h", "W"},
                            {{"h", Random(Shape({1, 3}), 5)}, {"W", Random(Shape({3, 3}), 6, -0.9, 0.9)},
                             {"n", Tensor::Scalar<int64_t>(n)}});
    EXPECT_TRUE(r.ok()) << "n=" << n << ": " << r.status();
  }
}

// The rows form needs every use of W to be a product x W or the recursive
// call's W: used elementwise as well, or transposed, W gets the dense sum
// (MatMulAdd per level), and the gradients are right either way.
TEST(OpGradients, WeightUsedOtherwiseGetsDenseGradient) {
  const Product products[] = {
      [](GraphBuilder& f, Output h, Output W) { return f.Add(f.MatMul(h, W), f.Sum(W)); },
      [](GraphBuilder& f, Output h, Output W) { return f.MatMul(h, W, /*transpose_a=*/false, /*transpose_b=*/true); },
  };
  for (int variant : {0, 1}) {
    std::map<std::string, int> ops, main_ops;
    Graph g = RecursiveChain(products[variant], &ops, &main_ops);
    EXPECT_EQ(ops["OuterRowsConcat"], 0) << "variant " << variant;
    EXPECT_EQ(ops["MatMulAdd"], 1) << "variant " << variant;
    for (int64_t n : {0, 1, 4}) {
      auto r = CheckGradients(g, "loss", {"h", "W"},
                              {{"h", Random(Shape({1, 3}), 5)}, {"W", Random(Shape({3, 3}), 6, -0.5, 0.5)},
                               {"n", Tensor::Scalar<int64_t>(n)}});
      EXPECT_TRUE(r.ok()) << "variant " << variant << " n=" << n << ": " << r.status();
    }
  }
}

TEST(OpGradients, Reductions) {
  const Shape s({2, 3, 4});
  for (const char* op : {"Sum", "Mean"}) {
    CheckUnary(op, s, Shape({}));
    CheckUnary(op, s, Shape({2, 4}), -1.5, 1.5, {{"axes", std::vector<int64_t>{1}}});
    CheckUnary(op, s, Shape({2, 1, 4}), -1.5, 1.5, {{"axes", std::vector<int64_t>{1}}, {"keep_dims", true}});
    CheckUnary(op, s, Shape({3}), -1.5, 1.5, {{"axes", std::vector<int64_t>{0, 2}}});
  }
}

TEST(OpGradients, ShapeOps) {
  CheckUnary("Reshape", Shape({2, 3}), Shape({3, 2}), -1.5, 1.5, {{"shape", std::vector<int64_t>{3, 2}}});
  CheckUnary("Transpose", Shape({2, 3, 4}), Shape({4, 2, 3}), -1.5, 1.5,
             {{"perm", std::vector<int64_t>{2, 0, 1}}});
  CheckUnary("Transpose", Shape({2, 3}), Shape({3, 2}));
  CheckUnary("Softmax", Shape({2, 5}), Shape({2, 5}));
  CheckUnary("Softmax", Shape({4}), Shape({4}));
}

TEST(OpGradients, Slice) {
  const AttrMap middle{{"begin", std::vector<int64_t>{1, 1}}, {"size", std::vector<int64_t>{2, 2}}};
  CheckUnary("Slice", Shape({3, 4}), Shape({2, 2}), -1.5, 1.5, middle);
  const AttrMap to_end{{"begin", std::vector<int64_t>{0, 2, 1}}, {"size", std::vector<int64_t>{-1, 1, -1}}};
  CheckUnary("Slice", Shape({2, 3, 4}), Shape({2, 1, 3}), -1.5, 1.5, to_end);
  const AttrMap whole{{"begin", std::vector<int64_t>{0}}, {"size", std::vector<int64_t>{-1}}};
  CheckUnary("Slice", Shape({5}), Shape({5}), -1.5, 1.5, whole);
  const AttrMap empty{{"begin", std::vector<int64_t>{1, 0}}, {"size", std::vector<int64_t>{0, 4}}};
  CheckUnary("Slice", Shape({3, 4}), Shape({0, 4}), -1.5, 1.5, empty);
}

TEST(OpGradients, Concat) {
  for (int64_t axis : {0, 1, -1}) {
    SCOPED_TRACE(axis);
    GraphBuilder b;
    Output a = b.Placeholder("a", DType::kFloat64);
    Output c = b.Placeholder("c", DType::kFloat64);
    Output d = b.Placeholder("d", DType::kFloat64);
    // Inputs of different sizes along the axis, one used twice.
    Output y = b.Concat({a, c, a, d}, axis);
    const Shape out = axis == 0 ? Shape({9, 2}) : Shape({2, 9});
    b.Identity(b.Sum(b.Mul(y, b.Const(Random(out, 7)))), "loss");
    auto g = b.Build();
    ASSERT_TRUE(g.ok()) << g.status();
    auto shape = [&](int64_t n) { return axis == 0 ? Shape({n, 2}) : Shape({2, n}); };
    auto r = CheckGradients(*g, "loss", {"a", "c", "d"},
                            {{"a", Random(shape(2), 1)}, {"c", Random(shape(4), 2)}, {"d", Random(shape(1), 3)}});
    EXPECT_TRUE(r.ok()) << r.status();
  }
  CheckUnary("Concat", Shape({3}), Shape({3}), -1.5, 1.5, {{"axis", int64_t{0}}});  // one input
}

TEST(OpGradients, Gather) {
  const Tensor rows = Tensor::Vector<int64_t>({2, 0, 2, 3, 2});  // repeats accumulate
  for (int64_t axis : {0, 1}) {
    SCOPED_TRACE(axis);
    GraphBuilder b;
    Output params = b.Placeholder("p", DType::kFloat64);
    Output y = b.Gather(params, b.Const(rows), axis);
    b.Identity(b.Sum(b.Mul(y, b.Const(Random(axis == 0 ? Shape({5, 3}) : Shape({4, 5}), 7)))), "loss");
    auto g = b.Build();
    ASSERT_TRUE(g.ok()) << g.status();
    auto r = CheckGradients(*g, "loss", {"p"}, {{"p", Random(axis == 0 ? Shape({4, 3}) : Shape({4, 4}), 1)}});
    EXPECT_TRUE(r.ok()) << r.status();
  }
  {
    // A scalar index (a TreeRNN leaf reading its row), int32 indices of a
    // matrix, and a rank-1 params vector.
    GraphBuilder b;
    Output params = b.Placeholder("p", DType::kFloat64);
    Output v = b.Placeholder("v", DType::kFloat64);
    Output row = b.Gather(params, b.Const<int64_t>(1));
    Output m = b.Gather(params, b.Const(*Tensor::FromVector<int32_t>({0, 1, 1, 0}, Shape({2, 2}))));
    Output s = b.Gather(v, b.Const(Tensor::Vector<int64_t>({4, 4, 0})));
    b.Identity(b.Add(b.Add(b.Sum(b.Mul(row, b.Const(Random(Shape({3}), 8)))),
                           b.Sum(b.Mul(m, b.Const(Random(Shape({2, 2, 3}), 9))))),
                     b.Sum(b.Mul(s, b.Const(Random(Shape({3}), 10))))),
               "loss");
    auto g = b.Build();
    ASSERT_TRUE(g.ok()) << g.status();
    auto r = CheckGradients(*g, "loss", {"p", "v"}, {{"p", Random(Shape({3, 3}), 1)}, {"v", Random(Shape({5}), 2)}});
    EXPECT_TRUE(r.ok()) << r.status();
  }
}

// The three ops together inside a recursive function, as the TreeRNN uses
// them: the gradient crosses calls and a Cond.
TEST(OpGradients, SliceGatherConcatInARecursiveFunction) {
  // f(i, t) = i == 0 ? t[0:1, :]
  //                   : column sums of Concat(f(i-1, t), tanh(t[1:2, :] * f(i-1, t))), a [1, 2] row.
  GraphBuilder b;
  absl::Status s = b.DefineFunction(
      {"f", {{"i", DType::kInt64}, {"t", DType::kFloat64}}, {{"y", DType::kFloat64}}},
      [](GraphBuilder& f, const std::vector<Output>& a) -> std::vector<Output> {
        Output i = a[0], t = a[1];
        return f.Cond(
            f.Equal(i, f.Const<int64_t>(0)),
            [&] { return std::vector<Output>{f.Gather(t, f.Const(Tensor::Vector<int64_t>({0})))}; },
            [&] {
              Output prev = f.Call("f", {f.Sub(i, f.Const<int64_t>(1)), t})[0];
              Output row = f.Op("Slice", {t}, {{"begin", std::vector<int64_t>{1, 0}},
                                               {"size", std::vector<int64_t>{1, -1}}});
              Output both = f.Concat({prev, f.Tanh(f.Mul(row, prev))}, 0);
              return std::vector<Output>{f.Sum(both, {0}, true)};
            });
      });
  ASSERT_TRUE(s.ok()) << s;
  Output t = b.Placeholder("t", DType::kFloat64);
  Output n = b.Placeholder("n", DType::kInt64);
  b.Identity(b.Sum(b.Call("f", {n, t})[0]), "loss");
  auto g = b.Build();
  ASSERT_TRUE(g.ok()) << g.status();
  auto r = CheckGradients(*g, "loss", {"t"}, {{"t", Random(Shape({3, 2}), 4, -0.8, 0.8)}, {"n", Tensor::Scalar<int64_t>(4)}});
  EXPECT_TRUE(r.ok()) << r.status();
}

// A table read by Gather in every call of a recursive function (a tree's
// leaf states, an embedding table): its gradient travels up the recursion
// as indexed rows [index | dy row] (no dense table-shaped gradient per
// level), compacted to one row per distinct index once there are more rows
// than the table has (n = 6 and 12 reads of a 4-row table, with repeats),
// and the outermost call scatters them once. Rank-3 table, vector and
// scalar indices, float64.
TEST(OpGradients, RecursiveTableGradientIsIndexedRows) {
  // f(i, t) = i == 0 ? t[0] : tanh(f(i-1, t) * t[i % 4] + sum(t[[i % 4, (i + 1) % 4]], axis 0)).
  GraphBuilder b;
  absl::Status s = b.DefineFunction(
      {"f", {{"i", DType::kInt64}, {"t", DType::kFloat64}}, {{"y", DType::kFloat64}}},
      [](GraphBuilder& f, const std::vector<Output>& a) -> std::vector<Output> {
        Output i = a[0], t = a[1];
        return f.Cond(
            f.Equal(i, f.Const<int64_t>(0)), [&] { return std::vector<Output>{f.Gather(t, f.Const<int64_t>(0))}; },
            [&] {
              Output prev = f.Call("f", {f.Sub(i, f.Const<int64_t>(1)), t})[0];
              Output k = f.Op("Mod", {i, f.Const<int64_t>(4)});
              Output next = f.Op("Mod", {f.Add(i, f.Const<int64_t>(1)), f.Const<int64_t>(4)});
              Output pair = f.Concat({f.Reshape(k, {1}), f.Reshape(next, {1})}, 0);
              Output two = f.Sum(f.Gather(t, pair), {0});
              return std::vector<Output>{f.Tanh(f.Add(f.Mul(prev, f.Gather(t, k)), two))};
            });
      });
  ASSERT_TRUE(s.ok()) << s;
  Output t = b.Placeholder("t", DType::kFloat64);
  b.Identity(b.Sum(b.Mul(b.Call("f", {b.Placeholder("n", DType::kInt64), t})[0], b.Const(Random(Shape({2, 3}), 8)))),
             "loss");
  auto g = b.Build();
  ASSERT_TRUE(g.ok()) << g.status();
  Graph grad = *g;
  ASSERT_TRUE(AddGradients(grad, {"loss"}, {"t"}).ok());
  std::map<std::string, int> ops;
  for (const NodeDef& n : grad.library.Find("f_ext")->node) ++ops[n.op];
  EXPECT_EQ(ops["GatherGrad"], 0);
  EXPECT_EQ(ops["IndexedRows"], 3);
  int sums = 0;
  for (const NodeDef& n : grad.node) sums += n.op == "IndexedRowsSum";
  EXPECT_EQ(sums, 1);
  for (int64_t n : {0, 1, 3, 6, 12}) {
    auto r = CheckGradients(*g, "loss", {"t"},
                            {{"t", Random(Shape({4, 2, 3}), 4, -0.8, 0.8)}, {"n", Tensor::Scalar<int64_t>(n)}});
    EXPECT_TRUE(r.ok()) << "n=" << n << ": " << r.status();
  }
}

// Several outermost calls of one recursive function that share a weight and
// a table (a batch of trees): their rows are concatenated, and each dense
// gradient is formed once for all calls (one OuterRowsSum, one
// IndexedRowsSum), not once per call and summed. With more rows than
// min(K, N) in all (n up to 5 in three calls of a [3, 3] weight), a plain
// Concat keeps every row. Calls with n = 0 add no rows.
TEST(OpGradients, OutermostCallsShareOneDenseSum) {
  // f(i, h, W, t) = i == 0 ? h : f(i - 1, tanh(h W + t[i % 4]), W, t);
  // loss = sum_k sum(f(n_k, h_k, W, t) * c_k) over three calls.
  GraphBuilder b;
  absl::Status s = b.DefineFunction(
      {"f",
       {{"i", DType::kInt64}, {"h", DType::kFloat64}, {"W", DType::kFloat64}, {"t", DType::kFloat64}},
       {{"y", DType::kFloat64}}},
      [](GraphBuilder& f, const std::vector<Output>& a) -> std::vector<Output> {
        Output i = a[0], h = a[1], W = a[2], t = a[3];
        return f.Cond(
            f.Equal(i, f.Const<int64_t>(0)), [&] { return std::vector<Output>{h}; },
            [&] {
              Output row = f.Gather(t, f.Reshape(f.Op("Mod", {i, f.Const<int64_t>(4)}), {1}));  // [1, 3]
              Output next = f.Tanh(f.Add(f.MatMul(h, W), row));
              return std::vector<Output>{f.Call("f", {f.Sub(i, f.Const<int64_t>(1)), next, W, t})[0]};
            });
      });
  ASSERT_TRUE(s.ok()) << s;
  Output W = b.Placeholder("W", DType::kFloat64), t = b.Placeholder("t", DType::kFloat64);
  std::vector<Output> terms;
  for (int k = 0; k < 3; ++k) {
    Output y = b.Call("f", {b.Placeholder(absl::StrCat("n", k), DType::kInt64),
                            b.Placeholder(absl::StrCat("h", k), DType::kFloat64), W, t})[0];
    terms.push_back(b.Sum(b.Mul(y, b.Const(Random(Shape({1, 3}), 20 + k)))));
  }
  b.Identity(b.AddN(terms), "loss");
  auto g = b.Build();
  ASSERT_TRUE(g.ok()) << g.status();
  Graph grad = *g;
  ASSERT_TRUE(AddGradients(grad, {"loss"}, {"W", "t", "h0"}).ok());
  std::map<std::string, int> main_ops;
  for (const NodeDef& n : grad.node) ++main_ops[n.op];
  EXPECT_EQ(main_ops["OuterRowsSum"], 1);
  EXPECT_EQ(main_ops["IndexedRowsSum"], 1);
  EXPECT_EQ(main_ops["OuterRowsConcat"], 0);
  EXPECT_EQ(main_ops["IndexedRowsConcat"], 0);
  for (const std::vector<int64_t>& n : std::vector<std::vector<int64_t>>{{0, 0, 0}, {1, 0, 2}, {5, 4, 5}}) {
    Feeds feeds = {{"W", Random(Shape({3, 3}), 6, -0.9, 0.9)}, {"t", Random(Shape({4, 3}), 7, -0.8, 0.8)}};
    for (int k = 0; k < 3; ++k) {
      feeds.push_back({absl::StrCat("n", k), Tensor::Scalar<int64_t>(n[k])});
      feeds.push_back({absl::StrCat("h", k), Random(Shape({1, 3}), 30 + k)});
    }
    auto r = CheckGradients(*g, "loss", {"W", "t", "h0"}, feeds);
    EXPECT_TRUE(r.ok()) << "n=" << n[0] << "," << n[1] << "," << n[2] << ": " << r.status();
  }
}

TEST(OpGradients, AddNSelectCast) {
  {
    GraphBuilder b;
    Output a = b.Placeholder("a", DType::kFloat64);
    Output c = b.Placeholder("b", DType::kFloat64);
    Output y = b.Op("AddN", {a, c, b.Mul(a, c)});
    Output sel = b.Op("Select", {b.Less(a, c), b.Exp(a), b.Tanh(c)});
    Output cast = b.Cast(b.Cast(b.Mul(y, sel), DType::kFloat32), DType::kFloat64);
    b.Identity(b.Sum(b.Add(cast, b.Mul(y, sel))), "loss");
    auto g = b.Build();
    ASSERT_TRUE(g.ok()) << g.status();
    // float32 round trip: the Cast path is only accurate to ~1e-7 relative.
    auto r = CheckGradients(*g, "loss", {"a", "b"}, {{"a", Random(Shape({5}), 3)}, {"b", Random(Shape({5}), 4)}},
                            1e-4, 1e-3);
    EXPECT_TRUE(r.ok()) << r.status();
  }
}

TEST(OpGradients, SoftmaxCrossEntropy) {
  GraphBuilder b;
  Output logits = b.Placeholder("logits", DType::kFloat64);
  Output labels = b.Const(*Tensor::FromVector<double>({0, 1, 0, 0.5, 0.25, 0.25}, Shape({2, 3})));
  Output xent = b.Op("SoftmaxCrossEntropy", {logits, labels});
  b.Identity(b.Sum(b.Mul(xent, b.Const(*Tensor::FromVector<double>({0.7, 1.3}, Shape({2}))))), "loss");
  auto g = b.Build();
  ASSERT_TRUE(g.ok()) << g.status();
  auto r = CheckGradients(*g, "loss", {"logits"}, {{"logits", Random(Shape({2, 3}), 5)}});
  EXPECT_TRUE(r.ok()) << r.status();
}

TEST(OpGradients, UnusedInputGetsZerosAndIntegersGetNone) {
  GraphBuilder b;
  Output a = b.Placeholder("a", DType::kFloat64);
  Output unused = b.Placeholder("u", DType::kFloat64);
  Output n = b.Placeholder("n", DType::kInt64);
  b.Identity(b.Mul(a, b.Cast(n, DType::kFloat64)), "y");
  auto g = b.Build();
  ASSERT_TRUE(g.ok());
  auto r = CheckGradients(*g, "y", {"a", "u"},
                          {{"a", Tensor::Scalar<double>(2.0)}, {"u", Tensor::Scalar<double>(1.0)},
                           {"n", Tensor::Scalar<int64_t>(3)}});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->dx[0].scalar<double>(), 3.0);
  EXPECT_EQ(r->dx[1].scalar<double>(), 0.0);
}

TEST(OpGradients, OpWithoutGradientIsNamed) {
  // CopyToHost (inserted by the placement pass, normally after AddGradients)
  // has no registered gradient.
  GraphBuilder b;
  Output a = b.Placeholder("a", DType::kFloat64);
  b.Identity(b.Op("CopyToHost", {a}, {}, "copy"), "y");
  Graph g = *b.Build();
  auto dx = AddGradients(g, {"y"}, {"a"});
  ASSERT_FALSE(dx.ok());
  EXPECT_EQ(dx.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(dx.status().message().find("node 'copy' (CopyToHost)"), std::string::npos) << dx.status();
}

TEST(OpGradients, PortPastTheOutputsIsAnError) {
  GraphBuilder b;
  Output a = b.Placeholder("a", DType::kFloat64);
  b.Identity(b.Mul(a, a), "y");
  Graph g = *b.Build();
  EXPECT_EQ(AddGradients(g, {"y"}, {"a:3"}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(AddGradients(g, {"y:1"}, {"a"}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(AddGradients(g, {"y:0"}, {"a:0"}).ok());
}

// ZerosLike, OnesLike and Sign have derivative zero wherever it exists: they
// pass no gradient to x, which still gets the gradient of its other uses,
// or zeros when they are its only uses.
TEST(OpGradients, ZeroDerivativeOpsPassNoGradient) {
  {
    // loss = sum((x^2 + ZerosLike(x) + OnesLike(x) * Sign(x)) * w): d/dx = 2 x w.
    GraphBuilder b;
    Output x = b.Placeholder("x", DType::kFloat64);
    Output y = b.Add(b.Add(b.Mul(x, x), b.Op("ZerosLike", {x})), b.Mul(b.Op("OnesLike", {x}), b.Op("Sign", {x})));
    b.Identity(b.Sum(b.Mul(y, b.Const(Random(Shape({2, 3}), 7)))), "loss");
    auto g = b.Build();
    ASSERT_TRUE(g.ok()) << g.status();
    auto r = CheckGradients(*g, "loss", {"x"}, {{"x", Random(Shape({2, 3}), 1)}});  // no element near 0
    EXPECT_TRUE(r.ok()) << r.status();
  }
  {
    // Only through them: exact zeros of x's shape.
    GraphBuilder b;
    Output x = b.Placeholder("x", DType::kFloat64);
    b.Identity(b.Sum(b.Add(b.Op("ZerosLike", {x}), b.Mul(b.Op("OnesLike", {x}), b.Op("Sign", {x})))), "loss");
    auto g = b.Build();
    ASSERT_TRUE(g.ok()) << g.status();
    auto r = CheckGradients(*g, "loss", {"x"}, {{"x", Random(Shape({4}), 2)}});
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(testing_autodiff::Values(r->dx[0]), std::vector<double>(4, 0.0));
  }
}

// The common loop-accumulator start: acc = ZerosLike(x), then
// acc = acc * x + Sign(x) * x for n iterations (a While on the gradient
// path, lowered to recursion), so acc_n = |x| (1 + x + ... + x^(n-1)).
TEST(OpGradients, LoopAccumulatorStartingAtZerosLike) {
  GraphBuilder b;
  Output x = b.Placeholder("x", DType::kFloat64);
  Output n = b.Placeholder("n", DType::kInt64);
  std::vector<Output> out = b.While(
      [&](const std::vector<Output>& v) { return b.Less(v[0], n); },
      [&](const std::vector<Output>& v) {
        return std::vector<Output>{b.Add(v[0], b.Const<int64_t>(1)),
                                   b.Add(b.Mul(v[1], x), b.Mul(b.Op("Sign", {x}), x))};
      },
      {b.Const<int64_t>(0), b.Op("ZerosLike", {x})});
  b.Identity(b.Sum(b.Mul(out[1], b.Const(Random(Shape({3}), 7)))), "loss");
  auto g = b.Build();
  ASSERT_TRUE(g.ok()) << g.status();
  for (int64_t iters : {0, 1, 4}) {
    auto r = CheckGradients(*g, "loss", {"x"},
                            {{"x", Random(Shape({3}), 3, -0.9, 0.9)}, {"n", Tensor::Scalar<int64_t>(iters)}});
    EXPECT_TRUE(r.ok()) << "n=" << iters << ": " << r.status();
  }
}

// The same ops inside a recursive function body, under a Cond:
// f(x, n) = n == 0 ? ZerosLike(x) : f(x, n - 1) * x + OnesLike(x)
//         = 1 + x + ... + x^(n-1).
TEST(OpGradients, ZerosLikeAndOnesLikeInARecursiveFunction) {
  GraphBuilder b;
  absl::Status s = b.DefineFunction(
      {"f", {{"x", DType::kFloat64}, {"n", DType::kInt64}}, {{"y", DType::kFloat64}}},
      [](GraphBuilder& f, const std::vector<Output>& a) -> std::vector<Output> {
        return f.Cond(
            f.Equal(a[1], f.Const<int64_t>(0)), [&] { return std::vector<Output>{f.Op("ZerosLike", {a[0]})}; },
            [&] {
              Output prev = f.Call("f", {a[0], f.Sub(a[1], f.Const<int64_t>(1))})[0];
              return std::vector<Output>{f.Add(f.Mul(prev, a[0]), f.Op("OnesLike", {a[0]}))};
            });
      });
  ASSERT_TRUE(s.ok()) << s;
  Output x = b.Placeholder("x", DType::kFloat64);
  b.Identity(b.Sum(b.Call("f", {x, b.Placeholder("n", DType::kInt64)})[0]), "loss");
  auto g = b.Build();
  ASSERT_TRUE(g.ok()) << g.status();
  for (int64_t n : {0, 1, 5}) {
    auto r = CheckGradients(*g, "loss", {"x"},
                            {{"x", Random(Shape({2}), 4, -0.9, 0.9)}, {"n", Tensor::Scalar<int64_t>(n)}});
    EXPECT_TRUE(r.ok()) << "n=" << n << ": " << r.status();
  }
  // n = 3 at x = 0.5: d/dx (1 + x + x^2) = 1 + 2x = 2.
  auto r = CheckGradients(*g, "loss", {"x"},
                          {{"x", Tensor::Scalar<double>(0.5)}, {"n", Tensor::Scalar<int64_t>(3)}});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_NEAR(r->dx[0].scalar<double>(), 2.0, 1e-12);
}

TEST(OpGradients, Mod) {
  // fmod: differentiable away from the jumps where b divides a (the random
  // values are not within the difference step of one).
  const Shape m({2, 3}), row({3});
  CheckBinary("Mod", m, m, m, 0.5, 2.0);
  CheckBinary("Mod", m, row, m, 0.5, 2.0);
  GraphBuilder b;
  Output a = b.Placeholder("a", DType::kFloat64), c = b.Placeholder("b", DType::kFloat64);
  b.Identity(b.Sum(b.Mul(b.Mod(a, c), b.Const(Random(m, 7)))), "loss");
  auto g = b.Build();
  ASSERT_TRUE(g.ok()) << g.status();
  // Negative dividends and divisors (fmod truncates toward zero).
  const Tensor as = *Tensor::FromVector<double>({-3.7, 2.9, -0.4, 5.3, -6.1, 1.3}, m);
  const Tensor bs = *Tensor::FromVector<double>({1.1, -0.7, 0.9, -1.6, 2.3, 0.6}, m);
  auto r = CheckGradients(*g, "loss", {"a", "b"}, {{"a", as}, {"b", bs}});
  EXPECT_TRUE(r.ok()) << r.status();
}

TEST(OpGradients, MaxReduction) {
  const Shape s({2, 3, 4});
  CheckUnary("Max", s, Shape({}));
  CheckUnary("Max", s, Shape({2, 4}), -1.5, 1.5, {{"axes", std::vector<int64_t>{1}}});
  CheckUnary("Max", s, Shape({2, 1, 4}), -1.5, 1.5, {{"axes", std::vector<int64_t>{1}}, {"keep_dims", true}});
  CheckUnary("Max", s, Shape({3}), -1.5, 1.5, {{"axes", std::vector<int64_t>{0, 2}}});
  // Ties share the gradient evenly (no derivative there; a subgradient).
  GraphBuilder b;
  Output x = b.Placeholder("x", DType::kFloat64);
  b.Identity(b.Op("Max", {x}), "y");
  Graph g = *b.Build();
  auto dx = AddGradients(g, {"y"}, {"x"});
  ASSERT_TRUE(dx.ok()) << dx.status();
  auto sess = Session::Create(g);
  ASSERT_TRUE(sess.ok()) << sess.status();
  auto out = (*sess)->Run({{"x", Tensor::Vector<double>({1, 3, 3, 2})}}, {(*dx)[0]});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(testing_autodiff::Values((*out)[0]), (std::vector<double>{0, 0.5, 0.5, 0}));
}

// The activations' gradient helpers, so gradients can be differentiated
// again (second derivatives).
TEST(OpGradients, ActivationGradientHelpers) {
  const Shape m({2, 3}), row({3});
  CheckBinary("TanhGrad", m, m, m, -0.9, 0.9);
  CheckBinary("SigmoidGrad", m, m, m, 0.1, 0.9);
  CheckBinary("ReluGrad", m, m, m);  // random x avoids the kink at 0
  CheckBinary("TanhGrad", m, row, m, -0.9, 0.9);
  CheckBinary("SigmoidGrad", row, m, m, 0.1, 0.9);
  for (const char* act : {"Tanh", "Sigmoid", "Relu"}) {
    // y = act(x); the gradient of dy/dx = act'(x) against differences of it.
    GraphBuilder b;
    Output x = b.Placeholder("x", DType::kFloat64);
    b.Identity(b.Op(act, {x}), "y");
    Graph g = *b.Build();
    auto dx = AddGradients(g, {"y"}, {"x"});
    ASSERT_TRUE(dx.ok()) << act << ": " << dx.status();
    auto r = CheckGradients(g, (*dx)[0], {"x"}, {{"x", Random(Shape({5}), 6)}}, 1e-6, 1e-5);
    EXPECT_TRUE(r.ok()) << act << ": " << r.status();
  }
}

TEST(OpGradients, UpstreamGradient) {
  GraphBuilder b;
  Output a = b.Placeholder("a", DType::kFloat64);
  b.Identity(b.Mul(a, a), "y");
  b.Placeholder("dy", DType::kFloat64);
  Graph g = *b.Build();
  auto dx = AddGradients(g, {"y"}, {"a"}, {"dy"});
  ASSERT_TRUE(dx.ok()) << dx.status();
  auto s = Session::Create(g);
  ASSERT_TRUE(s.ok()) << s.status();
  auto out = (*s)->Run({{"a", Tensor::Scalar<double>(3.0)}, {"dy", Tensor::Scalar<double>(0.5)}}, {(*dx)[0]});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].scalar<double>(), 3.0);
}

}  // namespace
}  // namespace tdf
