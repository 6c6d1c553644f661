// Training: SGD and Adam steps as graph ops, many runs of one session.
#include <cmath>

#include "autodiff_test_util.h"
#include "gtest/gtest.h"
#include "tdf/builder.h"

namespace tdf {
namespace {

constexpr DType kF = DType::kFloat64;
constexpr DType kI = DType::kInt64;

// y = X w + b with X 6x2; the data are exactly linear, so the loss can reach 0.
struct LinearModel {
  Graph graph;
  std::vector<std::string> grads;
};

LinearModel BuildLinear() {
  GraphBuilder b;
  Output w = b.Variable("w", *Tensor::Zeros(kF, Shape({2, 1})));
  Output bias = b.Variable("b", Tensor::Scalar<double>(0.0));
  Output rw = b.Read(w), rb = b.Read(bias);
  Output X = b.Const(*Tensor::FromVector<double>({1, 2, -1, 0.5, 0, 1, 2, -1, 0.3, 0.3, -0.7, 1.5}, Shape({6, 2})));
  // Targets of w = (2, -3), b = 0.5.
  std::vector<double> t;
  const double* x = X.valid() ? nullptr : nullptr;
  (void)x;
  const double xs[12] = {1, 2, -1, 0.5, 0, 1, 2, -1, 0.3, 0.3, -0.7, 1.5};
  for (int i = 0; i < 6; ++i) t.push_back(2 * xs[2 * i] - 3 * xs[2 * i + 1] + 0.5);
  Output Y = b.Const(*Tensor::FromVector<double>(t, Shape({6, 1})));
  Output err = b.Sub(b.Add(b.MatMul(X, rw), rb), Y);
  b.Identity(b.Mean(b.Op("Square", {err})), "loss");
  LinearModel m;
  m.graph = *b.Build();
  auto g = AddGradients(m.graph, {"loss"}, {b.Name(rw), b.Name(rb)});
  EXPECT_TRUE(g.ok()) << g.status();
  m.grads = *g;
  return m;
}

TEST(Training, SgdFitsLinearRegression) {
  LinearModel m = BuildLinear();
  auto step = AddSgdStep(m.graph, {"w", "b"}, m.grads, 0.1);
  ASSERT_TRUE(step.ok()) << step.status();
  auto s = Session::Create(m.graph);
  ASSERT_TRUE(s.ok()) << s.status();
  double first = 0, last = 0;
  for (int i = 0; i < 500; ++i) {
    auto out = (*s)->Run({}, {"loss"}, {*step});
    ASSERT_TRUE(out.ok()) << out.status();
    (i == 0 ? first : last) = (*out)[0].scalar<double>();
  }
  EXPECT_GT(first, 1.0);
  EXPECT_LT(last, 1e-8);
  Tensor w = *(*s)->ReadVariable("w");
  EXPECT_NEAR(w.data<double>()[0], 2.0, 1e-4);
  EXPECT_NEAR(w.data<double>()[1], -3.0, 1e-4);
  EXPECT_NEAR((*(*s)->ReadVariable("b")).scalar<double>(), 0.5, 1e-4);
}

TEST(Training, AdamFitsLinearRegression) {
  LinearModel m = BuildLinear();
  AdamOptions o;
  o.learning_rate = 0.05;
  auto step = AddAdamStep(m.graph, {"w", "b"}, m.grads, o);
  ASSERT_TRUE(step.ok()) << step.status();
  auto s = Session::Create(m.graph);
  ASSERT_TRUE(s.ok()) << s.status();
  double last = 0;
  for (int i = 0; i < 1500; ++i) {
    auto out = (*s)->Run({}, {"loss"}, {*step});
    ASSERT_TRUE(out.ok()) << out.status();
    last = (*out)[0].scalar<double>();
  }
  EXPECT_LT(last, 1e-6);
  Tensor w = *(*s)->ReadVariable("w");
  EXPECT_NEAR(w.data<double>()[0], 2.0, 1e-2);
  EXPECT_NEAR(w.data<double>()[1], -3.0, 1e-2);
}

// Gradient descent through recursion: find w with exp(w, 5) = 2.
TEST(Training, SgdThroughRecursiveFunction) {
  GraphBuilder b;
  ASSERT_TRUE(b.DefineFunction({"exp", {{"x", kF}, {"n", kI}}, {{"y", kF}}},
                               [](GraphBuilder& f, const std::vector<Output>& a) -> std::vector<Output> {
                                 return f.Cond(
                                     f.Equal(a[1], f.Const<int64_t>(0)),
                                     [&] { return std::vector<Output>{f.Const<double>(1.0)}; },
                                     [&] {
                                       return std::vector<Output>{
                                           f.Mul(a[0], f.Call("exp", {a[0], f.Sub(a[1], f.Const<int64_t>(1))})[0])};
                                     });
                               })
                  .ok());
  Output w = b.Variable("w", Tensor::Scalar<double>(1.0));
  Output rw = b.Read(w);
  Output e = b.Sub(b.Call("exp", {rw, b.Const<int64_t>(5)})[0], b.Const<double>(2.0));
  b.Identity(b.Mul(e, e), "loss");
  Graph g = *b.Build();
  auto grads = AddGradients(g, {"loss"}, {b.Name(rw)});
  ASSERT_TRUE(grads.ok()) << grads.status();
  auto step = AddSgdStep(g, {"w"}, *grads, 0.005);
  ASSERT_TRUE(step.ok()) << step.status();
  auto s = Session::Create(g);
  ASSERT_TRUE(s.ok()) << s.status();
  for (int i = 0; i < 300; ++i) {
    RunStats stats;
    ASSERT_TRUE((*s)->Run({}, {}, {*step}, &stats).ok());
    ASSERT_EQ(stats.live_frames_after_run, 0);
  }
  EXPECT_NEAR((*(*s)->ReadVariable("w")).scalar<double>(), std::pow(2.0, 0.2), 1e-6);
}

}  // namespace
}  // namespace tdf
