#include "tdf/reference_programs.h"

#include <functional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tdf/builder.h"

namespace tdf {
namespace reference {
namespace {

using Outs = std::vector<Output>;
constexpr DType kI64 = DType::kInt64;

FunctionSignature Sig(const std::string& name, std::vector<ArgDef> in, std::vector<ArgDef> out) {
  return FunctionSignature{name, std::move(in), std::move(out)};
}

Graph BuildOrDie(GraphBuilder& b) {
  absl::StatusOr<Graph> g = b.Build();
  if (!g.ok()) {
    std::fprintf(stderr, "reference program failed to build: %s\n", g.status().ToString().c_str());
    std::abort();  // a bug in this file, never user input
  }
  return *std::move(g);
}

Output I(GraphBuilder& f, int64_t v) { return f.Const<int64_t>(v); }

}  // namespace

Graph Fib() {
  GraphBuilder b;
  (void)b.DefineFunction(Sig("fib", {{"n", kI64}}, {{"r", kI64}}), [](GraphBuilder& f, const Outs& a) -> Outs {
    Output n = a[0];
    return f.Cond(
        f.LessEqual(n, I(f, 1)), [&] { return Outs{I(f, 1)}; },
        [&] {
          Output x = f.Call("fib", {f.Sub(n, I(f, 1))})[0];
          Output y = f.Call("fib", {f.Sub(n, I(f, 2))})[0];
          return Outs{f.Add(x, y)};
        });
  });
  Output n = b.Placeholder("n", kI64);
  b.Identity(b.Call("fib", {n})[0], "result");
  return BuildOrDie(b);
}

Graph Ack() {
  GraphBuilder b;
  (void)b.DefineFunction(Sig("ack", {{"m", kI64}, {"n", kI64}}, {{"r", kI64}}), [](GraphBuilder& f, const Outs& a) -> Outs {
    Output m = a[0], n = a[1];
    return f.Cond(
        f.Equal(m, I(f, 0)), [&] { return Outs{f.Add(n, I(f, 1))}; },
        [&] {
          return f.Cond(
              f.Equal(n, I(f, 0)), [&] { return f.Call("ack", {f.Sub(m, I(f, 1)), I(f, 1)}); },
              [&] {
                Output inner = f.Call("ack", {m, f.Sub(n, I(f, 1))})[0];
                return f.Call("ack", {f.Sub(m, I(f, 1)), inner});
              });
        });
  });
  Output m = b.Placeholder("m", kI64);
  Output n = b.Placeholder("n", kI64);
  b.Identity(b.Call("ack", {m, n})[0], "result");
  return BuildOrDie(b);
}

Graph Tak() {
  GraphBuilder b;
  (void)b.DefineFunction(Sig("tak", {{"x", kI64}, {"y", kI64}, {"z", kI64}}, {{"r", kI64}}),
                         [](GraphBuilder& f, const Outs& a) -> Outs {
                           Output x = a[0], y = a[1], z = a[2];
                           return f.Cond(
                               f.Less(y, x),
                               [&] {
                                 Output t1 = f.Call("tak", {f.Sub(x, I(f, 1)), y, z})[0];
                                 Output t2 = f.Call("tak", {f.Sub(y, I(f, 1)), z, x})[0];
                                 Output t3 = f.Call("tak", {f.Sub(z, I(f, 1)), x, y})[0];
                                 return f.Call("tak", {t1, t2, t3});
                               },
                               [&] { return Outs{z}; });
                         });
  Output x = b.Placeholder("x", kI64);
  Output y = b.Placeholder("y", kI64);
  Output z = b.Placeholder("z", kI64);
  b.Identity(b.Call("tak", {x, y, z})[0], "result");
  return BuildOrDie(b);
}

Graph Fact() {
  GraphBuilder b;
  (void)b.DefineFunction(Sig("fact", {{"n", kI64}}, {{"r", kI64}}), [](GraphBuilder& f, const Outs& a) -> Outs {
    Output n = a[0];
    return f.Cond(
        f.LessEqual(n, I(f, 1)), [&] { return Outs{I(f, 1)}; },
        [&] { return Outs{f.Mul(n, f.Call("fact", {f.Sub(n, I(f, 1))})[0])}; });
  });
  Output n = b.Placeholder("n", kI64);
  b.Identity(b.Call("fact", {n})[0], "result");
  return BuildOrDie(b);
}

Graph EvenOdd() {
  GraphBuilder b;
  (void)b.Declare(Sig("odd", {{"n", kI64}}, {{"r", DType::kBool}}));
  auto def = [&](const std::string& name, const std::string& other, bool base) {
    (void)b.DefineFunction(Sig(name, {{"n", kI64}}, {{"r", DType::kBool}}),
                           [=](GraphBuilder& f, const Outs& a) -> Outs {
                             Output n = a[0];
                             return f.Cond(
                                 f.Equal(n, I(f, 0)), [&] { return Outs{f.Const<bool>(base)}; },
                                 [&] { return f.Call(other, {f.Sub(n, I(f, 1))}); });
                           });
  };
  def("even", "odd", true);
  def("odd", "even", false);
  Output n = b.Placeholder("n", kI64);
  b.Identity(b.Call("even", {n})[0], "result");
  return BuildOrDie(b);
}

Graph Exp() {
  GraphBuilder b;
  (void)b.DefineFunction(Sig("exp", {{"x", DType::kFloat64}, {"n", kI64}}, {{"r", DType::kFloat64}}),
                         [](GraphBuilder& f, const Outs& a) -> Outs {
                           Output x = a[0], n = a[1];
                           return f.Cond(
                               f.Equal(n, I(f, 0)), [&] { return Outs{f.Const<double>(1.0)}; },
                               [&] { return Outs{f.Mul(x, f.Call("exp", {x, f.Sub(n, I(f, 1))})[0])}; });
                         });
  Output x = b.Placeholder("x", DType::kFloat64);
  Output n = b.Placeholder("n", kI64);
  b.Identity(b.Call("exp", {x, n})[0], "result");
  return BuildOrDie(b);
}

Graph Primes() {
  GraphBuilder b;
  (void)b.DefineFunction(Sig("isprime", {{"n", kI64}, {"d", kI64}}, {{"r", DType::kBool}}),
                         [](GraphBuilder& f, const Outs& a) -> Outs {
                           Output n = a[0], d = a[1];
                           return f.Cond(
                               f.Greater(f.Mul(d, d), n), [&] { return Outs{f.Const<bool>(true)}; },
                               [&] {
                                 return f.Cond(
                                     f.Equal(f.Mod(n, d), I(f, 0)), [&] { return Outs{f.Const<bool>(false)}; },
                                     [&] { return f.Call("isprime", {n, f.Add(d, I(f, 1))}); });
                               });
                         });
  (void)b.DefineFunction(Sig("nth", {{"k", kI64}, {"c", kI64}}, {{"r", kI64}}), [](GraphBuilder& f, const Outs& a) -> Outs {
    Output k = a[0], c = a[1];
    Output prime = f.Call("isprime", {c, I(f, 2)})[0];
    return f.Cond(
        prime,
        [&] {
          return f.Cond(
              f.Equal(k, I(f, 1)), [&] { return Outs{c}; },
              [&] { return f.Call("nth", {f.Sub(k, I(f, 1)), f.Add(c, I(f, 1))}); });
        },
        [&] { return f.Call("nth", {k, f.Add(c, I(f, 1))}); });
  });
  Output n = b.Placeholder("n", kI64);
  b.Identity(b.Call("nth", {n, b.Const<int64_t>(2)})[0], "result");
  return BuildOrDie(b);
}

Graph McCarthy91() {
  GraphBuilder b;
  (void)b.DefineFunction(Sig("mc91", {{"n", kI64}}, {{"r", kI64}}), [](GraphBuilder& f, const Outs& a) -> Outs {
    Output n = a[0];
    return f.Cond(
        f.Greater(n, I(f, 100)), [&] { return Outs{f.Sub(n, I(f, 10))}; },
        [&] { return f.Call("mc91", {f.Call("mc91", {f.Add(n, I(f, 11))})[0]}); });
  });
  Output n = b.Placeholder("n", kI64);
  b.Identity(b.Call("mc91", {n})[0], "result");
  return BuildOrDie(b);
}

Graph Sum() {
  GraphBuilder b;
  (void)b.DefineFunction(Sig("sum", {{"n", kI64}}, {{"r", kI64}}), [](GraphBuilder& f, const Outs& a) -> Outs {
    Output n = a[0];
    return f.Cond(
        f.Equal(n, I(f, 0)), [&] { return Outs{I(f, 0)}; },
        [&] { return Outs{f.Add(n, f.Call("sum", {f.Sub(n, I(f, 1))})[0])}; });
  });
  Output n = b.Placeholder("n", kI64);
  b.Identity(b.Call("sum", {n})[0], "result");
  return BuildOrDie(b);
}

Graph Yaghi() {
  GraphBuilder b;
  (void)b.DefineFunction(Sig("g", {{"y", kI64}}, {{"r", kI64}}),
                         [](GraphBuilder& f, const Outs& a) -> Outs { return Outs{f.Identity(a[0], "g_body")}; });
  (void)b.DefineFunction(Sig("f", {{"x", kI64}}, {{"r", kI64}}), [](GraphBuilder& f, const Outs& a) -> Outs {
    return f.Call("g", {f.Add(a[0], I(f, 1))});
  });
  Output a = b.Call("f", {b.Const<int64_t>(4)})[0];
  Output c = b.Call("f", {b.Const<int64_t>(5)})[0];
  b.Identity(b.Add(a, c), "result");
  return BuildOrDie(b);
}

Graph WhileLoop() {
  GraphBuilder b;
  Output n = b.Placeholder("n", kI64);
  Outs out = b.While([&](const Outs& v) { return b.Less(v[0], n); },
                     [&](const Outs& v) { return Outs{b.Add(v[0], b.Const<int64_t>(1))}; },
                     {b.Const<int64_t>(0)});
  b.Identity(out[0], "result");
  return BuildOrDie(b);
}

Graph OpChain(int64_t length) {
  GraphBuilder b;
  Output x = b.Placeholder("x", kI64);
  Output one = b.Const<int64_t>(1);
  for (int64_t i = 0; i < length; ++i) x = b.Add(x, one);
  b.Identity(x, "result");
  return BuildOrDie(b);
}

Graph ManyCalls(int64_t calls, int64_t functions) {
  GraphBuilder b;
  for (int64_t i = 0; i < functions; ++i) {
    (void)b.DefineFunction(Sig(absl::StrCat("f", i), {{"n", kI64}}, {{"r", kI64}}),
                           [i](GraphBuilder& f, const Outs& a) -> Outs {
                             Output n = a[0];
                             return f.Cond(
                                 f.LessEqual(n, I(f, 0)), [&] { return Outs{I(f, i)}; },
                                 [&] { return Outs{f.Add(n, I(f, i))}; });
                           });
  }
  Output n = b.Placeholder("n", kI64);
  Output sum = b.Call("f0", {n})[0];
  for (int64_t k = 1; k < calls; ++k) sum = b.Add(sum, b.Call(absl::StrCat("f", k % functions), {n})[0]);
  b.Identity(sum, "result");
  return BuildOrDie(b);
}

Graph CallChain(int64_t functions) {
  GraphBuilder b;
  // Each function calls one defined before it.
  (void)b.DefineFunction(Sig(absl::StrCat("f", functions - 1), {{"n", kI64}}, {{"r", kI64}}),
                         [](GraphBuilder& f, const Outs& a) -> Outs { return Outs{f.Identity(a[0])}; });
  for (int64_t i = functions - 2; i >= 0; --i) {
    (void)b.DefineFunction(Sig(absl::StrCat("f", i), {{"n", kI64}}, {{"r", kI64}}),
                           [i](GraphBuilder& f, const Outs& a) -> Outs {
                             Output n = a[0];
                             return f.Cond(
                                 f.LessEqual(n, I(f, 0)), [&] { return Outs{I(f, 0)}; },
                                 [&] { return Outs{f.Add(f.Call(absl::StrCat("f", i + 1), {n})[0], I(f, 1))}; });
                           });
  }
  Output n = b.Placeholder("n", kI64);
  b.Identity(b.Call("f0", {n})[0], "result");
  return BuildOrDie(b);
}

Graph LongBody(int64_t conds) {
  GraphBuilder b;
  (void)b.DefineFunction(Sig("f", {{"n", kI64}}, {{"r", kI64}}), [conds](GraphBuilder& f, const Outs& a) -> Outs {
    Output n = a[0], x = n;
    for (int64_t k = 0; k < conds; ++k) {
      x = f.Cond(
          f.LessEqual(x, I(f, 0)), [&] { return Outs{f.Add(x, f.Add(f.Mul(n, n), I(f, 1)))}; },
          [&] { return Outs{f.Sub(x, I(f, 1))}; })[0];
    }
    return Outs{x};
  });
  Output n = b.Placeholder("n", kI64);
  b.Identity(b.Call("f", {n})[0], "result");
  return BuildOrDie(b);
}

Graph WideBody(int64_t calls) {
  GraphBuilder b;
  (void)b.DefineFunction(Sig("g", {{"n", kI64}}, {{"r", kI64}}), [](GraphBuilder& f, const Outs& a) -> Outs {
    return f.Cond(
        f.LessEqual(a[0], I(f, 0)), [&] { return Outs{I(f, 1)}; }, [&] { return Outs{f.Add(a[0], I(f, 1))}; });
  });
  (void)b.DefineFunction(Sig("f", {{"n", kI64}}, {{"r", kI64}}), [calls](GraphBuilder& f, const Outs& a) -> Outs {
    Output sum = f.Call("g", {a[0]})[0];
    for (int64_t k = 1; k < calls; ++k) sum = f.Add(sum, f.Call("g", {a[0]})[0]);
    return Outs{sum};
  });
  Output n = b.Placeholder("n", kI64);
  b.Identity(b.Call("f", {n})[0], "result");
  return BuildOrDie(b);
}

Graph MultiWayIf(int64_t depth) {
  GraphBuilder b;
  // The nodes GraphBuilder::Cond makes for these nested Conds (a pivot
  // Switch and its then/else Identities, a Switch passing n on to the
  // else branch, a Merge of the branches' values), written out with
  // short names: Cond names a node by every enclosing branch, and the
  // names of a D-deep nest add up to O(D^2) bytes.
  (void)b.DefineFunction(Sig("f", {{"n", kI64}}, {{"r", kI64}}), [depth](GraphBuilder& f, const Outs& a) -> Outs {
    Output x = a[0];  // n, in the else branch of every Cond so far
    std::vector<Output> then_values;
    Output else_pivot;
    for (int64_t k = 0; k < depth; ++k) {
      Output pred = f.Equal(x, I(f, k));
      std::vector<Output> pivot = f.Outputs(f.Op("Switch", {pred, pred}, {{"T", DType::kBool}}));
      Output then_value = I(f, 10 * k);
      f.AddControlInput(then_value, f.Identity(pivot[1]));
      then_values.push_back(then_value);
      else_pivot = f.Identity(pivot[0]);
      if (k + 1 < depth) x = f.Outputs(f.Op("Switch", {x, pred}, {{"T", kI64}}))[0];
    }
    Output value = I(f, -1);
    if (depth > 0) f.AddControlInput(value, else_pivot);
    for (int64_t k = depth - 1; k >= 0; --k) value = f.Op("Merge", {value, then_values[k]}, {{"T", kI64}});
    return Outs{value};
  });
  Output n = b.Placeholder("n", kI64);
  b.Identity(b.Call("f", {n})[0], "result");
  return BuildOrDie(b);
}

Graph CallInWhile() {
  GraphBuilder b;
  (void)b.DefineFunction(Sig("fib", {{"n", kI64}}, {{"r", kI64}}), [](GraphBuilder& f, const Outs& a) -> Outs {
    Output n = a[0];
    return f.Cond(
        f.LessEqual(n, I(f, 1)), [&] { return Outs{I(f, 1)}; },
        [&] { return Outs{f.Add(f.Call("fib", {f.Sub(n, I(f, 1))})[0], f.Call("fib", {f.Sub(n, I(f, 2))})[0])}; });
  });
  Output n = b.Placeholder("n", kI64);
  Outs out = b.While(
      [&](const Outs& v) { return b.Less(v[0], n); },
      [&](const Outs& v) {
        Output fi = b.Call("fib", {b.Mod(v[0], b.Const<int64_t>(10))})[0];
        return Outs{b.Add(v[0], b.Const<int64_t>(1)), b.Add(v[1], fi)};
      },
      {b.Const<int64_t>(0), b.Const<int64_t>(0)});
  b.Identity(out[1], "result");
  return BuildOrDie(b);
}

Graph WhileInFunction() {
  GraphBuilder b;
  (void)b.DefineFunction(Sig("loopsum", {{"n", kI64}}, {{"r", kI64}}), [](GraphBuilder& f, const Outs& a) -> Outs {
    Output n = a[0];
    Outs out = f.While([&](const Outs& v) { return f.LessEqual(v[0], n); },
                       [&](const Outs& v) { return Outs{f.Add(v[0], I(f, 1)), f.Add(v[1], v[0])}; },
                       {I(f, 1), I(f, 0)});
    return Outs{out[1]};
  });
  (void)b.DefineFunction(Sig("f", {{"n", kI64}}, {{"r", kI64}}), [](GraphBuilder& f, const Outs& a) -> Outs {
    Output n = a[0];
    return f.Cond(
        f.Equal(n, I(f, 0)), [&] { return Outs{I(f, 0)}; },
        [&] { return Outs{f.Add(f.Call("loopsum", {n})[0], f.Call("f", {f.Sub(n, I(f, 1))})[0])}; });
  });
  Output n = b.Placeholder("n", kI64);
  b.Identity(b.Call("f", {n})[0], "result");
  return BuildOrDie(b);
}

int64_t NativeFib(int64_t n) { return n <= 1 ? 1 : NativeFib(n - 1) + NativeFib(n - 2); }
int64_t NativeAck(int64_t m, int64_t n) {
  // Iterate the tail call on m so deep ack(3, n) needs less C stack.
  while (m != 0) {
    if (n == 0) {
      n = 1;
    } else {
      n = NativeAck(m, n - 1);
    }
    --m;
  }
  return n + 1;
}
int64_t NativeTak(int64_t x, int64_t y, int64_t z) {
  return y < x ? NativeTak(NativeTak(x - 1, y, z), NativeTak(y - 1, z, x), NativeTak(z - 1, x, y)) : z;
}
int64_t NativeFact(int64_t n) { return n <= 1 ? 1 : n * NativeFact(n - 1); }
bool NativeEven(int64_t n) { return n % 2 == 0; }
double NativeExp(double x, int64_t n) {
  double r = 1;
  for (int64_t i = 0; i < n; ++i) r *= x;
  return r;
}
int64_t NativePrimes(int64_t n) {
  int64_t k = n, c = 2;
  for (;;) {
    bool prime = true;
    for (int64_t d = 2; d * d <= c; ++d) {
      if (c % d == 0) {
        prime = false;
        break;
      }
    }
    if (prime) {
      if (k == 1) return c;
      --k;
    }
    ++c;
  }
}
int64_t NativeMcCarthy91(int64_t n) { return n > 100 ? n - 10 : NativeMcCarthy91(NativeMcCarthy91(n + 11)); }
int64_t NativeSum(int64_t n) { return n * (n + 1) / 2; }
int64_t NativeCallInWhile(int64_t n) {
  int64_t s = 0;
  for (int64_t i = 0; i < n; ++i) s += NativeFib(i % 10);
  return s;
}
int64_t NativeWhileInFunction(int64_t n) {
  int64_t s = 0;
  for (int64_t k = 1; k <= n; ++k) s += k * (k + 1) / 2;
  return s;
}

int64_t NativeManyCalls(int64_t calls, int64_t functions, int64_t n) {
  int64_t s = 0;
  for (int64_t k = 0; k < calls; ++k) s += n <= 0 ? k % functions : n + k % functions;
  return s;
}
int64_t NativeLongBody(int64_t conds, int64_t n) {
  int64_t x = n;
  for (int64_t k = 0; k < conds; ++k) x = x <= 0 ? x + n * n + 1 : x - 1;
  return x;
}
int64_t NativeMultiWayIf(int64_t depth, int64_t n) { return n >= 0 && n < depth ? 10 * n : -1; }
int64_t NativeWideBody(int64_t calls, int64_t n) { return calls * (n <= 0 ? 1 : n + 1); }
int64_t NativeCallChain(int64_t functions, int64_t n) {
  if (functions == 1) return n;
  return n <= 0 ? 0 : n + functions - 1;
}

}  // namespace reference
}  // namespace tdf
