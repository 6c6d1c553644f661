// A few hundred seeded random programs — compositions of elementwise ops,
// Conds (nested), While loops (nested, with captured invariants, Conds and
// calls inside) and calls of a recursive function of random depth —
// differentiated and checked against central finite differences.
#include <algorithm>
#include <random>

#include "autodiff_test_util.h"
#include "gtest/gtest.h"
#include "tdf/builder.h"

namespace tdf {
namespace {

using testing_autodiff::CheckGradients;

constexpr DType kF = DType::kFloat64;
constexpr DType kI = DType::kInt64;

class ProgramGenerator {
 public:
  explicit ProgramGenerator(uint32_t seed) : rng_(seed) {}

  Graph Generate(bool with_calls, bool with_loops = false) {
    GraphBuilder b;
    if (with_calls) {
      // rf(x, n) = n == 0 ? tanh(x) : x * c1 + tanh(rf(x * c2, n - 1)) * x
      const double c1 = Uniform(-1, 1), c2 = Uniform(0.5, 1.2);
      EXPECT_TRUE(b.DefineFunction({"rf", {{"x", kF}, {"n", kI}}, {{"y", kF}}},
                                   [&](GraphBuilder& f, const std::vector<Output>& a) -> std::vector<Output> {
                                     Output x = a[0], n = a[1];
                                     return f.Cond(
                                         f.Equal(n, f.Const<int64_t>(0)), [&] { return std::vector<Output>{f.Tanh(x)}; },
                                         [&] {
                                           Output r = f.Call("rf", {f.Mul(x, f.Const<double>(c2)),
                                                                    f.Sub(n, f.Const<int64_t>(1))})[0];
                                           return std::vector<Output>{
                                               f.Add(f.Mul(x, f.Const<double>(c1)), f.Mul(f.Tanh(r), x))};
                                         });
                                   })
                      .ok());
    }
    std::vector<Output> pool = {b.Placeholder("x0", kF), b.Placeholder("x1", kF)};
    const int steps = 3 + Int(0, 6);
    Grow(b, pool, steps, with_calls, 2, with_loops ? 2 : 0);
    Output y = pool.back();
    y = b.Add(y, b.Mul(pool[pool.size() - 2], b.Const<double>(Uniform(-1, 1))));
    b.Identity(y, "y");
    absl::StatusOr<Graph> g = b.Build();
    EXPECT_TRUE(g.ok()) << g.status();
    return g.ok() ? *g : Graph{};
  }

  double Uniform(double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(rng_); }
  int Int(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }

 private:
  Output Pick(const std::vector<Output>& pool) { return pool[Int(0, static_cast<int>(pool.size()) - 1)]; }

  void Grow(GraphBuilder& b, std::vector<Output>& pool, int steps, bool with_calls, int cond_depth, int loop_depth) {
    for (int s = 0; s < steps; ++s) {
      const int kind = Int(0, loop_depth > 0 ? 11 : with_calls ? 9 : 8);
      Output v;
      if (kind <= 3) {
        Output a = Pick(pool);
        switch (Int(0, 5)) {
          case 0: v = b.Tanh(a); break;
          case 1: v = b.Sigmoid(a); break;
          case 2: v = b.Tanh(b.Op("Square", {a})); break;
          case 3: v = b.Neg(a); break;
          case 4: v = b.Exp(b.Tanh(a)); break;
          default: v = b.Op("Sqrt", {b.Add(b.Op("Square", {a}), b.Const<double>(1.0))}); break;
        }
      } else if (kind <= 6) {
        Output a = Pick(pool), c = Pick(pool);
        switch (Int(0, 4)) {
          case 0: v = b.Add(a, c); break;
          case 1: v = b.Sub(a, c); break;
          case 2: v = b.Mul(a, c); break;
          case 3: v = b.Div(a, b.Add(b.Const<double>(1.5), b.Op("Square", {c}))); break;
          default: v = b.Tanh(b.Mul(a, b.Const<double>(Uniform(-2, 2)))); break;
        }
      } else if (kind <= 8 && cond_depth > 0) {
        Output p = b.Less(Pick(pool), Pick(pool));
        std::vector<Output> snapshot = pool;
        const int then_steps = Int(1, 3), else_steps = Int(0, 3);
        v = b.Cond(
            p,
            [&] {
              std::vector<Output> local = snapshot;
              Grow(b, local, then_steps, with_calls, cond_depth - 1, loop_depth);
              return std::vector<Output>{local.back()};
            },
            [&] {
              std::vector<Output> local = snapshot;
              Grow(b, local, else_steps, with_calls, cond_depth - 1, loop_depth);
              return std::vector<Output>{local.back()};
            })[0];
      } else if (kind >= 10) {
        // A loop of 0..3 iterations over two float variables; the body reads
        // the enclosing values (loop invariants) too.
        const int64_t iterations = Int(0, 3);
        const int body_steps = Int(1, 3);
        std::vector<Output> snapshot = pool;
        std::vector<Output> out = b.While(
            [&](const std::vector<Output>& l) { return b.Less(l[0], b.Const<int64_t>(iterations)); },
            [&](const std::vector<Output>& l) {
              std::vector<Output> local = snapshot;
              local.push_back(l[1]);
              local.push_back(l[2]);
              Grow(b, local, body_steps, with_calls, std::max(cond_depth - 1, 0), loop_depth - 1);
              return std::vector<Output>{b.Add(l[0], b.Const<int64_t>(1)), b.Tanh(local.back()),
                                         b.Tanh(b.Add(l[1], local[local.size() - 2]))};
            },
            {b.Const<int64_t>(0), Pick(pool), Pick(pool)});
        v = b.Add(out[1], b.Mul(out[2], b.Const<double>(Uniform(-1, 1))));
      } else if (with_calls) {
        v = b.Call("rf", {Pick(pool), b.Const<int64_t>(Int(0, 4))})[0];
      } else {
        v = b.Add(Pick(pool), Pick(pool));
      }
      pool.push_back(v);
    }
  }

  std::mt19937 rng_;
};

void RunPrograms(uint32_t first_seed, int count, bool with_calls, bool with_loops = false, int workers = 1) {
  for (int k = 0; k < count; ++k) {
    const uint32_t seed = first_seed + k;
    ProgramGenerator gen(seed);
    Graph g = gen.Generate(with_calls, with_loops);
    const double x0 = gen.Uniform(-1.2, 1.2), x1 = gen.Uniform(-1.2, 1.2);
    SessionOptions options;
    options.num_workers = workers;
    auto res = CheckGradients(g, "y", {"x0", "x1"},
                              {{"x0", Tensor::Scalar<double>(x0)}, {"x1", Tensor::Scalar<double>(x1)}}, 1e-6, 1e-6,
                              options);
    EXPECT_TRUE(res.ok()) << "seed " << seed << " (x0=" << x0 << ", x1=" << x1 << "): " << res.status();
  }
}

TEST(RandomPrograms, ElementwiseAndConds) { RunPrograms(1000, 200, false); }

TEST(RandomPrograms, WithRecursiveCalls) { RunPrograms(5000, 150, true); }

TEST(RandomPrograms, WithWhileLoops) { RunPrograms(9000, 150, false, true); }

TEST(RandomPrograms, WithWhileLoopsAndRecursiveCalls) { RunPrograms(12000, 100, true, true); }
// Two workers: the split sites' parts (and, where a run fetches y alone,
// gradient parts that enter dead) arrive from either worker.
TEST(RandomPrograms, WithWhileLoopsAndRecursiveCallsTwoWorkers) { RunPrograms(15000, 100, true, true, 2); }

}  // namespace
}  // namespace tdf
