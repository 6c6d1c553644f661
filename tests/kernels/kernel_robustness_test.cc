// Randomized robustness test of the CPU kernels (design.md §6: bad input
// never crashes, hangs or leaks; it ends in a Status). Every op with a CPU
// kernel, and the state kernels, runs a few hundred times, directly (no
// executor), on generated cases: cases built to be valid, so that the
// compute paths run, then mutated (a dtype, a dim, an index, an attribute,
// an input more or less), and wholly random ones (any number of inputs of
// any dtype, rank 0-4 with dims 0-5, NaN/inf and extreme integers, attrs of
// the wrong type or missing). Every call must return an error, or OK with
// well-formed outputs of the dtypes the op's schema infers, without writing
// into its inputs or past its outputs; the asan preset adds ASan/UBSan and
// LeakSanitizer. A watchdog turns a hang into an abort naming the case.
//
// Each op has its own seed, printed with every failure; to reproduce or to
// soak longer:
//
//   TDF_KERNEL_ROBUSTNESS_SEED=7 TDF_KERNEL_ROBUSTNESS_CASES=20000 \
//     build/release/tests/tdf_kernels_tests --gtest_filter='*KernelRobustness*/Gather'
//
// The end of the file runs a few representative ops through a Session with
// feeds of the wrong dtype or shape: the status names the node and its op.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kernels/kernel_test_util.h"
#include "runtime/kernels/kernel_util.h"
#include "runtime/scalar_ops.h"
#include "runtime/state_kernels.h"
#include "tdf/builder.h"
#include "tdf/kernel.h"
#include "tdf/op_registry.h"
#include "tdf/session.h"

namespace tdf {
namespace {

using kernel_test::MakeNode;
using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr DType kAllDTypes[] = {DType::kBool, DType::kInt32, DType::kInt64, DType::kFloat32, DType::kFloat64};

uint64_t EnvOr(const char* name, uint64_t fallback) {
  const char* v = std::getenv(name);
  uint64_t out = 0;
  return v != nullptr && absl::SimpleAtoi(v, &out) ? out : fallback;
}

uint64_t BaseSeed() { return EnvOr("TDF_KERNEL_ROBUSTNESS_SEED", 20240601); }
int CasesPerOp() { return static_cast<int>(EnvOr("TDF_KERNEL_ROBUSTNESS_CASES", 2000)); }

// FNV-1a of the op name: a seed per op that does not depend on which other
// ops exist or the order they run in.
uint64_t OpSeed(const std::string& op) {
  uint64_t h = 1469598103934665603ull;
  for (char c : op) h = (h ^ static_cast<uint8_t>(c)) * 1099511628211ull;
  return h ^ BaseSeed();
}

// ---------------------------------------------------------------------------
// Watchdog: a kernel that loops forever would otherwise only show as a ctest
// timeout with no clue which case it was.

class Watchdog {
 public:
  explicit Watchdog(std::chrono::seconds limit) : limit_(limit), thread_([this] { Loop(); }) {}
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  void Enter(std::string what) {
    std::lock_guard<std::mutex> lock(mu_);
    what_ = std::move(what);
    since_ = std::chrono::steady_clock::now();
  }

 private:
  void Loop() {
    std::unique_lock<std::mutex> lock(mu_);
    while (!done_) {
      cv_.wait_for(lock, std::chrono::seconds(1));
      if (!done_ && std::chrono::steady_clock::now() - since_ > limit_) {
        std::fprintf(stderr, "kernel_robustness_test: no progress for %llds in %s\n",
                     static_cast<long long>(limit_.count()), what_.c_str());
        std::abort();
      }
    }
  }

  const std::chrono::seconds limit_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::string what_ = "(start)";
  std::chrono::steady_clock::time_point since_ = std::chrono::steady_clock::now();
  std::thread thread_;
};

// ---------------------------------------------------------------------------
// Random values, shapes, tensors and attributes.

class Gen {
 public:
  explicit Gen(uint64_t seed) : rng_(seed) {}

  int64_t Uniform(int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng_); }
  bool Chance(double p) { return std::bernoulli_distribution(p)(rng_); }
  template <typename T>
  T Pick(std::initializer_list<T> v) {
    return *(v.begin() + Uniform(0, static_cast<int64_t>(v.size()) - 1));
  }

  DType AnyDType() { return kAllDTypes[Uniform(0, 4)]; }
  DType NumericDType() { return kAllDTypes[Uniform(1, 4)]; }
  DType FloatDType() { return Chance(0.5) ? DType::kFloat32 : DType::kFloat64; }
  DType IndexDType() { return Chance(0.5) ? DType::kInt32 : DType::kInt64; }

  // Small dims, 0 now and then: empty tensors are where off-by-ones live.
  int64_t Dim() { return Chance(0.1) ? 0 : Uniform(1, Chance(0.7) ? 3 : 5); }
  Shape AnyShape(int min_rank = 0, int max_rank = 4) {
    Shape s;
    for (int i = 0, r = static_cast<int>(Uniform(min_rank, max_rank)); i < r; ++i) s.AddDim(Dim());
    return s;
  }
  // A shape that broadcasts to `s`: leading dims dropped, some dims 1.
  Shape BroadcastableTo(const Shape& s) {
    Shape out;
    for (int i = static_cast<int>(Uniform(0, s.rank())); i < s.rank(); ++i)
      out.AddDim(Chance(0.4) ? 1 : s.dim(i));
    return out;
  }

  int64_t ExtremeInt() {
    return Pick<int64_t>({std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(),
                          std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max(),
                          int64_t{1} << 31, int64_t{1} << 40, -(int64_t{1} << 40), int64_t{1} << 62, -1, 0,
                          static_cast<int64_t>(rng_())});
  }
  // An axis-like or size-like integer: mostly small, sometimes extreme.
  int64_t SmallOrExtremeInt() { return Chance(0.8) ? Uniform(-5, 6) : ExtremeInt(); }

  template <typename T>
  T Value() {
    if constexpr (std::is_same_v<T, bool>) {
      return Chance(0.5);
    } else if constexpr (std::is_integral_v<T>) {
      if (Chance(0.7)) return static_cast<T>(Uniform(-3, 6));
      if (Chance(0.6))
        return Pick<T>({T{0}, T{1}, T{-1}, std::numeric_limits<T>::min(), std::numeric_limits<T>::max(),
                        static_cast<T>(std::numeric_limits<T>::min() + 1),
                        static_cast<T>(std::numeric_limits<T>::max() - 1)});
      return static_cast<T>(rng_());
    } else {
      if (Chance(0.7)) return static_cast<T>(std::uniform_real_distribution<double>(-4, 4)(rng_));
      if (Chance(0.8))
        return Pick<T>({T{0}, -T{0}, T{1}, std::numeric_limits<T>::quiet_NaN(), std::numeric_limits<T>::infinity(),
                        -std::numeric_limits<T>::infinity(), std::numeric_limits<T>::max(),
                        std::numeric_limits<T>::lowest(), std::numeric_limits<T>::denorm_min(),
                        std::numeric_limits<T>::min(), static_cast<T>(1e30)});
      // Any bit pattern: NaN payloads, huge exponents.
      using Bits = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
      const Bits bits = static_cast<Bits>(rng_());
      T v;
      std::memcpy(&v, &bits, sizeof(v));
      return v;
    }
  }

  Tensor Fill(DType dtype, const Shape& shape) {
    absl::StatusOr<Tensor> t = Tensor::Empty(dtype, shape);
    EXPECT_TRUE(t.ok()) << t.status();
    if (!t.ok()) return Tensor();
    DispatchDType(dtype, [&](auto zero) {
      using T = decltype(zero);
      T* p = t->mutable_data<T>();
      for (int64_t i = 0; i < t->num_elements(); ++i) p[i] = Value<T>();
    });
    return *std::move(t);
  }

  // Integer indices of `dtype`, mostly in [0, limit): now and then one out
  // of range (negative, the limit itself, huge).
  Tensor Indices(DType dtype, const Shape& shape, int64_t limit) {
    Tensor t = Fill(dtype, shape);
    const bool poison = Chance(0.1);
    DispatchDType(dtype, [&](auto zero) {
      using T = decltype(zero);
      if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
        T* p = t.mutable_data<T>();
        for (int64_t i = 0; i < t.num_elements(); ++i)
          p[i] = limit > 0 ? static_cast<T>(Uniform(0, limit - 1)) : T{0};
        if (poison && t.num_elements() > 0)
          p[Uniform(0, t.num_elements() - 1)] = Pick<T>({T{-1}, static_cast<T>(limit), std::numeric_limits<T>::min(),
                                                          std::numeric_limits<T>::max()});
      }
    });
    return t;
  }

  // A tensor the library can make: usually ordinary, sometimes an invalid
  // one (an empty token slot), a view of the shared zero mapping, or a CPU
  // scalar on the heap (Tensor::FromBuffer) rather than inline.
  Tensor AnyTensor() {
    const int64_t kind = Uniform(0, 99);
    if (kind < 3) return Tensor();
    if (kind < 6) return SharedZeros(AnyDType());
    if (kind < 9) return HeapScalar(AnyDType());
    return Fill(AnyDType(), AnyShape());
  }

  // kernels::Zeros big enough to be a view of the read-only zero mapping.
  Tensor SharedZeros(DType dtype) {
    const int64_t elems = 4096 / static_cast<int64_t>(DTypeSize(dtype));
    Shape shape = Chance(0.5) ? Shape({elems}) : Shape({elems / 8, 8});
    absl::StatusOr<Tensor> t = kernels::Zeros(dtype, shape);
    EXPECT_TRUE(t.ok()) << t.status();
    return t.ok() ? *t : Tensor();
  }

  Tensor HeapScalar(DType dtype) {
    Buffer* buffer = Buffer::Allocate(DTypeSize(dtype), Device::Cpu());
    Tensor t = Tensor::FromBuffer(dtype, Shape(), buffer);
    buffer->Unref();  // FromBuffer took its own reference
    DispatchDType(dtype, [&](auto zero) {
      using T = decltype(zero);
      *t.mutable_data<T>() = Value<T>();
    });
    return t;
  }

  std::vector<int64_t> IntList() {
    std::vector<int64_t> v(Uniform(0, 5));
    for (int64_t& x : v) x = Chance(0.15) ? -1 : SmallOrExtremeInt();
    return v;
  }

  // A value of the attribute type `type` (AttrValue::TypeName()).
  AttrValue AttrOfType(const std::string& type) {
    if (type == "int") return SmallOrExtremeInt();
    if (type == "float") return static_cast<double>(Value<double>());
    if (type == "bool") return Chance(0.5);
    if (type == "string") return Pick<const char*>({"", "cpu", "cuda:0", "x", "\xff"});
    if (type == "type") return Chance(0.1) ? DType::kInvalid : AnyDType();
    if (type == "shape") {
      Shape s = AnyShape();
      if (s.rank() > 0 && Chance(0.2)) s.set_dim(0, Chance(0.5) ? -1 : ExtremeInt());
      return s;
    }
    if (type == "tensor") return AnyTensor();
    if (type == "list(int)") return IntList();
    if (type == "list(float)") return std::vector<double>{Value<double>()};
    if (type == "list(string)") return std::vector<std::string>{"a"};
    if (type == "list(type)") return std::vector<DType>{AnyDType()};
    return AttrValue();  // "none"
  }
  AttrValue AnyAttr() {
    return AttrOfType(Pick<const char*>({"int", "float", "bool", "string", "type", "shape", "tensor", "list(int)",
                                         "list(float)", "list(string)", "list(type)", "none"}));
  }

  std::mt19937_64& rng() { return rng_; }

 private:
  std::mt19937_64 rng_;
};

// ---------------------------------------------------------------------------
// Cases.

struct Case {
  std::vector<Tensor> inputs;
  AttrMap attrs;
};

std::string Describe(const Case& c, int num_outputs) {
  std::vector<std::string> in;
  for (const Tensor& t : c.inputs) in.push_back(t.DebugString());
  std::vector<std::string> attrs;
  for (const auto& [name, v] : c.attrs) attrs.push_back(absl::StrCat(name, "=", v.DebugString()));
  return absl::StrCat("inputs (", absl::StrJoin(in, "; "), "), attrs {", absl::StrJoin(attrs, ", "),
                      "}, num_outputs ", num_outputs);
}

using Builder = std::function<Case(Gen&)>;

Case Binary(Gen& g, DType t) {
  Shape s = g.AnyShape();
  Shape s2 = g.Chance(0.5) ? s : g.BroadcastableTo(s);
  if (g.Chance(0.5)) std::swap(s, s2);
  return {{g.Fill(t, s), g.Fill(t, s2)}, {}};
}

// A factorization of `s`'s element count for Reshape: dims shuffled,
// merged, padded with 1s, one of them -1 now and then.
std::vector<int64_t> ReshapeTarget(Gen& g, const Shape& s) {
  std::vector<int64_t> dims(s.dims().begin(), s.dims().end());
  std::shuffle(dims.begin(), dims.end(), g.rng());
  while (dims.size() > 1 && g.Chance(0.3)) {
    const int64_t last = dims.back();
    dims.pop_back();
    dims.back() *= last;
  }
  if (g.Chance(0.3)) dims.insert(dims.begin() + g.Uniform(0, static_cast<int64_t>(dims.size())), 1);
  if (!dims.empty() && g.Chance(0.4)) dims[g.Uniform(0, static_cast<int64_t>(dims.size()) - 1)] = -1;
  return dims;
}

// Shapes for Concat along `axis` (shared dims, the axis dim varying).
std::vector<Shape> ConcatShapes(Gen& g, const Shape& base, int axis, int n) {
  std::vector<Shape> out;
  for (int i = 0; i < n; ++i) {
    Shape s = base;
    s.set_dim(axis, g.Dim());
    out.push_back(s);
  }
  return out;
}

// A row of indexed rows: the index's bits in element 0 (indexed_rows.cc).
Tensor IndexedRowsOf(Gen& g, DType t, int64_t m, int64_t D, int64_t R) {
  Tensor rows = g.Fill(t, Shape({m, 1 + D}));
  for (int64_t r = 0; r < m; ++r) {
    int64_t index = R > 0 ? g.Uniform(0, R - 1) : 0;
    if (g.Chance(0.05)) index = g.Pick<int64_t>({-1, R, std::numeric_limits<int32_t>::max()});
    char* row = static_cast<char*>(rows.raw_mutable_data()) + r * (1 + D) * DTypeSize(t);
    if (t == DType::kFloat32) {
      const int32_t i = static_cast<int32_t>(index);
      std::memcpy(row, &i, sizeof(i));
    } else {
      std::memcpy(row, &index, sizeof(index));
    }
  }
  return rows;
}

int64_t RowSize(const Shape& s) {
  int64_t d = 1;
  for (int i = 1; i < s.rank(); ++i) d *= s.dim(i);
  return d;
}

// Cases that are valid, or nearly, for each op: without them random inputs
// would rarely get past the first check of the ops with several inputs.
const std::map<std::string, Builder>& ValidBuilders() {
  static const auto* const builders = [] {
    auto* b = new std::map<std::string, Builder>;
    for (const char* op : {"Add", "Sub", "Mul", "Div", "Mod", "Maximum", "Minimum", "Pow"})
      (*b)[op] = [](Gen& g) { return Binary(g, g.NumericDType()); };
    for (const char* op : {"TanhGrad", "SigmoidGrad", "ReluGrad"})
      (*b)[op] = [](Gen& g) { return Binary(g, g.FloatDType()); };
    for (const char* op : {"Less", "LessEqual", "Greater", "GreaterEqual", "Equal", "NotEqual"})
      (*b)[op] = [](Gen& g) { return Binary(g, g.AnyDType()); };
    for (const char* op : {"LogicalAnd", "LogicalOr"}) (*b)[op] = [](Gen& g) { return Binary(g, DType::kBool); };
    for (const char* op : {"Neg", "Abs", "Square", "Sign"})
      (*b)[op] = [](Gen& g) { return Case{{g.Fill(g.NumericDType(), g.AnyShape())}, {}}; };
    for (const char* op : {"Exp", "Log", "Tanh", "Sigmoid", "Relu", "Sqrt", "Rsqrt", "Reciprocal", "Softmax"})
      (*b)[op] = [](Gen& g) { return Case{{g.Fill(g.FloatDType(), g.AnyShape())}, {}}; };
    (*b)["LogicalNot"] = [](Gen& g) { return Case{{g.Fill(DType::kBool, g.AnyShape())}, {}}; };
    (*b)["LoopCond"] = [](Gen& g) { return Case{{g.Fill(DType::kBool, Shape())}, {}}; };
    for (const char* op : {"Identity", "ZerosLike", "OnesLike", "CopyToHost"})
      (*b)[op] = [](Gen& g) { return Case{{g.Chance(0.2) ? g.SharedZeros(g.AnyDType()) : g.AnyTensor()}, {}}; };
    (*b)["CopyToDevice"] = [](Gen& g) { return Case{{g.AnyTensor()}, {{"device", "cuda:0"}}}; };
    (*b)["NoOp"] = [](Gen&) { return Case{}; };
    (*b)["Const"] = [](Gen& g) {
      Tensor v = g.AnyTensor();
      return Case{{}, {{"value", v}, {"dtype", v.dtype()}}};
    };
    (*b)["Cast"] = [](Gen& g) { return Case{{g.AnyTensor()}, {{"DstT", g.AnyDType()}}}; };
    (*b)["Select"] = [](Gen& g) {
      const DType t = g.AnyDType();
      Shape s = g.AnyShape();
      return Case{{g.Fill(DType::kBool, g.BroadcastableTo(s)), g.Fill(t, g.Chance(0.5) ? s : g.BroadcastableTo(s)),
                   g.Fill(t, g.Chance(0.5) ? s : g.BroadcastableTo(s))},
                  {}};
    };
    (*b)["AddN"] = [](Gen& g) {
      const DType t = g.NumericDType();
      const bool big = g.Chance(0.2);
      Shape s = big ? g.SharedZeros(t).shape() : g.AnyShape();
      Case c;
      for (int i = 0, n = static_cast<int>(g.Uniform(1, 5)); i < n; ++i)
        c.inputs.push_back(big && g.Chance(0.5) ? *kernels::Zeros(t, s) : g.Fill(t, s));
      return c;
    };
    for (const char* op : {"MatMul", "MatMulAdd"}) {
      const bool add = std::string(op) == "MatMulAdd";
      (*b)[op] = [add](Gen& g) {
        const DType t = g.FloatDType();
        const bool ta = g.Chance(0.3), tb = g.Chance(0.3);
        // Now and then a product big enough that its zero addends are shared
        // zeros, or to be split among workers (kernels::ParallelFor).
        const bool parallel = g.Chance(0.03);
        const int64_t m = parallel || g.Chance(0.1) ? 64 : g.Dim(), k = parallel ? 64 : g.Dim(),
                      n = parallel ? 64 : g.Chance(0.1) ? 8 : g.Dim();
        Case c{{g.Fill(t, ta ? Shape({k, m}) : Shape({m, k})), g.Fill(t, tb ? Shape({n, k}) : Shape({k, n}))},
               {{"transpose_a", ta}, {"transpose_b", tb}}};
        if (add)
          for (int i = 0, a = static_cast<int>(g.Uniform(0, 3)); i < a; ++i)
            c.inputs.push_back(g.Chance(0.3) ? *kernels::Zeros(t, Shape({m, n})) : g.Fill(t, Shape({m, n})));
        return c;
      };
    }
    (*b)["OuterRowsConcat"] = [](Gen& g) {
      const DType t = g.FloatDType();
      const int64_t K = g.Dim(), N = g.Dim();
      Case c{{g.Fill(t, Shape({K, N}))}, {}};
      for (int i = 0, n = static_cast<int>(g.Uniform(0, 4)); i < n; ++i)
        c.inputs.push_back(g.Fill(t, Shape({g.Dim(), K + N})));
      return c;
    };
    (*b)["OuterRowsSum"] = [](Gen& g) {
      const DType t = g.FloatDType();
      const bool parallel = g.Chance(0.03);  // big enough for kernels::ParallelFor
      const int64_t K = parallel ? 64 : g.Dim(), N = parallel ? 64 : g.Dim(), m = parallel ? 64 : g.Dim();
      return Case{{g.Fill(t, Shape({m, K + N})), g.Fill(t, Shape({K, N}))}, {}};
    };
    (*b)["IndexedRows"] = [](Gen& g) {
      const DType t = g.FloatDType();
      const Shape p = g.AnyShape(1, 3);
      Tensor idx = g.Indices(g.IndexDType(), g.AnyShape(0, 2), p.dim(0));
      Shape dy = idx.shape();
      for (int d = 1; d < p.rank(); ++d) dy.AddDim(p.dim(d));
      return Case{{g.Fill(t, p), idx, g.Fill(t, dy)}, {}};
    };
    (*b)["IndexedRowsConcat"] = [](Gen& g) {
      const DType t = g.FloatDType();
      const Shape p = g.AnyShape(1, 3);
      Case c{{g.Fill(t, p)}, {}};
      for (int i = 0, n = static_cast<int>(g.Uniform(0, 4)); i < n; ++i)
        c.inputs.push_back(IndexedRowsOf(g, t, g.Dim(), RowSize(p), p.dim(0)));
      return c;
    };
    for (const char* op : {"IndexedRowsSum", "IndexedRowsSplit"})
      (*b)[op] = [](Gen& g) {
        const DType t = g.FloatDType();
        const Shape p = g.AnyShape(1, 3);
        return Case{{IndexedRowsOf(g, t, g.Dim(), RowSize(p), p.dim(0)), g.Fill(t, p)}, {}};
      };
    for (const char* op : {"Sum", "Mean", "Max"})
      (*b)[op] = [](Gen& g) {
        Tensor x = g.Fill(g.NumericDType(), g.AnyShape());
        Case c{{x}, {{"keep_dims", g.Chance(0.5)}}};
        if (g.Chance(0.8)) {
          std::vector<int64_t> axes;
          for (int d = 0; d < x.rank(); ++d)
            if (g.Chance(0.5)) axes.push_back(g.Chance(0.3) ? d - x.rank() : d);
          c.attrs["axes"] = axes;
        }
        return c;
      };
    (*b)["Reshape"] = [](Gen& g) {
      Tensor x = g.AnyTensor();
      return Case{{x}, {{"shape", ReshapeTarget(g, x.shape())}}};
    };
    (*b)["ReshapeLike"] = [](Gen& g) {
      Tensor x = g.AnyTensor();
      Shape like;
      for (int64_t d : ReshapeTarget(g, x.shape())) like.AddDim(d < 0 ? x.num_elements() : d);
      return Case{{x, g.Fill(g.AnyDType(), like)}, {}};
    };
    (*b)["Transpose"] = [](Gen& g) {
      Tensor x = g.AnyTensor();
      Case c{{x}, {}};
      if (g.Chance(0.8)) {
        std::vector<int64_t> perm(x.rank());
        for (int i = 0; i < x.rank(); ++i) perm[i] = i;
        std::shuffle(perm.begin(), perm.end(), g.rng());
        c.attrs["perm"] = perm;
      }
      return c;
    };
    (*b)["Concat"] = [](Gen& g) {
      const DType t = g.AnyDType();
      const Shape base = g.AnyShape(1, 4);
      const int axis = static_cast<int>(g.Uniform(0, base.rank() - 1));
      Case c{{}, {{"axis", g.Chance(0.3) ? int64_t{axis - base.rank()} : int64_t{axis}}}};
      for (const Shape& s : ConcatShapes(g, base, axis, static_cast<int>(g.Uniform(1, 4))))
        c.inputs.push_back(g.Fill(t, s));
      return c;
    };
    (*b)["ConcatGrad"] = [](Gen& g) {
      const DType t = g.AnyDType();
      const Shape base = g.AnyShape(1, 4);
      const int axis = static_cast<int>(g.Uniform(0, base.rank() - 1));
      Case c{{Tensor()}, {{"axis", g.Chance(0.3) ? int64_t{axis - base.rank()} : int64_t{axis}}}};
      int64_t total = 0;
      for (const Shape& s : ConcatShapes(g, base, axis, static_cast<int>(g.Uniform(1, 4)))) {
        c.inputs.push_back(g.Fill(t, s));
        total += s.dim(axis);
      }
      Shape dy = base;
      dy.set_dim(axis, total);
      c.inputs[0] = g.Fill(t, dy);
      return c;
    };
    for (const char* op : {"Slice", "SliceGrad"}) {
      const bool grad = std::string(op) == "SliceGrad";
      (*b)[op] = [grad](Gen& g) {
        const DType t = grad ? g.NumericDType() : g.AnyDType();
        Tensor x = g.Fill(t, g.AnyShape());
        std::vector<int64_t> begin, size;
        Shape slice;
        for (int d = 0; d < x.rank(); ++d) {
          const int64_t dim = x.shape().dim(d);
          begin.push_back(g.Uniform(0, dim));
          const int64_t s = g.Uniform(0, dim - begin.back());
          size.push_back(g.Chance(0.2) && s == dim - begin.back() ? -1 : s);
          slice.AddDim(s);
        }
        Case c{{x}, {{"begin", begin}, {"size", size}}};
        if (grad) c.inputs.push_back(g.Fill(t, slice));
        return c;
      };
    }
    for (const char* op : {"Gather", "GatherGrad"}) {
      const bool grad = std::string(op) == "GatherGrad";
      (*b)[op] = [grad](Gen& g) {
        const DType t = grad ? g.NumericDType() : g.AnyDType();
        Tensor params = g.Fill(t, g.AnyShape(1, 4));
        const int axis = static_cast<int>(g.Uniform(0, params.rank() - 1));
        Tensor idx = g.Indices(g.IndexDType(), g.AnyShape(0, 2), params.shape().dim(axis));
        Case c{{params, idx}, {}};
        if (g.Chance(0.8)) c.attrs["axis"] = g.Chance(0.3) ? int64_t{axis - params.rank()} : int64_t{axis};
        else if (axis != 0) c.attrs["axis"] = int64_t{axis};
        if (grad) {
          Shape dy;
          for (int d = 0; d < axis; ++d) dy.AddDim(params.shape().dim(d));
          for (int64_t d : idx.shape().dims()) dy.AddDim(d);
          for (int d = axis + 1; d < params.rank(); ++d) dy.AddDim(params.shape().dim(d));
          c.inputs.push_back(g.Fill(t, dy));
        }
        return c;
      };
    }
    (*b)["SoftmaxCrossEntropy"] = [](Gen& g) {
      const DType t = g.FloatDType();
      const Shape s = g.AnyShape(1, 4);
      return Case{{g.Fill(t, s), g.Fill(t, s)}, {}};
    };
    (*b)["BroadcastTo"] = [](Gen& g) {
      const Shape s = g.AnyShape();
      return Case{{g.Fill(g.AnyDType(), g.BroadcastableTo(s)), g.Fill(g.AnyDType(), s)}, {}};
    };
    (*b)["SumToShapeOf"] = [](Gen& g) {
      const Shape s = g.AnyShape();
      // x: s with its 1s widened and leading dims added.
      Shape x;
      for (int i = 0, lead = static_cast<int>(g.Uniform(0, 2)); i < lead && s.rank() + i < 4; ++i) x.AddDim(g.Dim());
      for (int64_t d : s.dims()) x.AddDim(d == 1 && g.Chance(0.5) ? g.Dim() : d);
      const DType t = g.NumericDType();
      return Case{{g.Fill(t, x), g.Fill(g.Chance(0.8) ? t : g.AnyDType(), s)}, {}};
    };
    return b;
  }();
  return *builders;
}

// Wholly random: any number of inputs around the schema's, any attrs.
Case RandomCase(Gen& g, const OpSchema& schema) {
  Case c;
  const int max = schema.max_inputs() < 0 ? schema.min_inputs() + 3 : schema.max_inputs() + 1;
  for (int i = 0, n = static_cast<int>(g.Uniform(0, max)); i < n; ++i) c.inputs.push_back(g.AnyTensor());
  for (const AttrSpec& spec : schema.attrs()) {
    const int64_t r = g.Uniform(0, 99);
    if (r < 15) continue;  // missing
    c.attrs[spec.name] = r < 30 ? g.AnyAttr() : g.AttrOfType(spec.type);
  }
  return c;
}

// The integers most likely to overflow arithmetic on them.
int64_t EdgeInt(Gen& g) {
  return g.Chance(0.8) ? g.Pick<int64_t>({-1, std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()})
                       : g.ExtremeInt();
}

void MutateInput(Gen& g, Case& c) {
  const int64_t what = g.Uniform(0, 5);
  const bool has_input = !c.inputs.empty();
  Tensor* in = has_input ? &c.inputs[g.Uniform(0, static_cast<int64_t>(c.inputs.size()) - 1)] : nullptr;
  if (what == 4 || in == nullptr) {
    c.inputs.push_back(has_input && g.Chance(0.5) ? c.inputs[0] : g.AnyTensor());
  } else if (what == 5) {
    c.inputs.erase(c.inputs.begin() + g.Uniform(0, static_cast<int64_t>(c.inputs.size()) - 1));
  } else if (what == 0) {
    *in = g.AnyTensor();
  } else if (what == 1) {  // another dtype, same shape
    *in = g.Fill(g.AnyDType(), in->shape());
  } else if (what == 2) {  // one dim changed, or the rank
    Shape s = in->shape();
    if (s.rank() > 0 && g.Chance(0.7)) {
      s.set_dim(static_cast<int>(g.Uniform(0, s.rank() - 1)), g.Uniform(0, 5));
    } else if (s.rank() < 4 && g.Chance(0.5)) {
      s.AddDim(g.Dim());
    } else {
      s = g.AnyShape();
    }
    *in = g.Fill(in->valid() ? in->dtype() : g.AnyDType(), s);
  } else if (in->num_elements() > 0) {  // one element extreme (an index out of range)
    Tensor t = in->Clone();
    const int64_t i = g.Uniform(0, t.num_elements() - 1);
    DispatchDType(t.dtype(), [&](auto zero) {
      using T = decltype(zero);
      if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
        t.mutable_data<T>()[i] = static_cast<T>(g.ExtremeInt());
      } else {
        t.mutable_data<T>()[i] = g.Value<T>();
      }
    });
    *in = t;
  }
}

void MutateAttr(Gen& g, const OpSchema& schema, Case& c) {
  const AttrSpec& spec = schema.attrs()[g.Uniform(0, static_cast<int64_t>(schema.attrs().size()) - 1)];
  const int64_t how = g.Uniform(0, 99);
  if (how < 10) {
    c.attrs.erase(spec.name);
  } else if (how < 20) {
    c.attrs[spec.name] = g.AnyAttr();
  } else if (how < 35) {
    c.attrs[spec.name] = g.AttrOfType(spec.type);
  } else if (how < 40) {
    c.attrs["bogus"] = g.AnyAttr();
  } else {
    // Edge values at one position of every int and list(int) attribute at
    // once: begin INT64_MIN with size -1, a -1 dim beside a huge one, ...
    const int64_t j = g.Uniform(0, 4);
    for (auto& [name, value] : c.attrs) {
      if (const auto* list = value.get_if<std::vector<int64_t>>(); list != nullptr && !list->empty()) {
        std::vector<int64_t> v = *list;
        v[std::min<int64_t>(j, static_cast<int64_t>(v.size()) - 1)] = EdgeInt(g);
        value = v;
      } else if (value.holds<int64_t>() && g.Chance(0.5)) {
        value = EdgeInt(g);
      }
    }
  }
}

// One to three changes to a (valid) case: to its inputs, or to its attrs.
void Mutate(Gen& g, const OpSchema& schema, Case& c) {
  for (int m = 0, n = static_cast<int>(g.Uniform(1, 3)); m < n; ++m) {
    if (!schema.attrs().empty() && g.Chance(0.5)) {
      MutateAttr(g, schema, c);
    } else {
      MutateInput(g, c);
    }
  }
}

Case MakeCase(Gen& g, const std::string& op, const OpSchema& schema) {
  auto it = ValidBuilders().find(op);
  if (it == ValidBuilders().end() || g.Chance(0.3)) return RandomCase(g, schema);
  Case c = it->second(g);
  if (g.Chance(0.6)) Mutate(g, schema, c);
  return c;
}

// ---------------------------------------------------------------------------
// Checks.

// Everything a consumer may assume of a tensor a kernel returned: a dtype,
// a consistent shape, storage large enough, every element readable
// (reading a bool that is neither 0 nor 1 is UB that UBSan reports). Only
// CopyToDevice may return a device tensor (in a CUDA build, on a GPU).
::testing::AssertionResult WellFormed(const Tensor& t, bool device_ok = false) {
  if (!t.valid()) return ::testing::AssertionFailure() << "invalid tensor";
  if (!t.is_inline_scalar()) {
    if (!t.device().is_cpu() && !device_ok)
      return ::testing::AssertionFailure() << "not on the CPU: " << t.DebugString();
    absl::Status s = t.shape().Validate();
    if (!s.ok()) return ::testing::AssertionFailure() << s;
    if (t.num_elements() != t.shape().num_elements())
      return ::testing::AssertionFailure() << "num_elements " << t.num_elements() << " for shape "
                                           << t.shape().DebugString();
    if (t.buffer() == nullptr || t.buffer()->bytes() < t.bytes())
      return ::testing::AssertionFailure() << "buffer of " << (t.buffer() ? t.buffer()->bytes() : 0)
                                           << " bytes for " << t.bytes();
  }
  if (!t.device().is_cpu()) return ::testing::AssertionSuccess();
  int64_t nonzero = 0;
  DispatchDType(t.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const T* p = t.data<T>();
    for (int64_t i = 0; i < t.num_elements(); ++i) nonzero += p[i] ? 1 : 0;
  });
  static volatile int64_t sink;  // keeps the reads above
  sink = nonzero;
  return ::testing::AssertionSuccess();
}

// The bytes of every valid input, to check that kernels never write into
// their inputs (tensors are immutable and shared).
std::vector<std::string> Snapshot(const std::vector<Tensor>& inputs) {
  std::vector<std::string> out;
  for (const Tensor& t : inputs)
    out.emplace_back(t.valid() ? std::string(static_cast<const char*>(t.raw_data()), t.bytes()) : std::string());
  return out;
}

bool SameScalar(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || !a.is_scalar() || !b.is_scalar()) return false;
  if (a.Equals(b)) return true;
  if (a.dtype() == DType::kFloat64) return std::isnan(a.scalar<double>()) && std::isnan(b.scalar<double>());
  if (a.dtype() == DType::kFloat32) return std::isnan(a.scalar<float>()) && std::isnan(b.scalar<float>());
  return false;
}

constexpr int kSlack = 3;  // output slots past num_outputs that must stay untouched

struct Tally {
  int cases = 0;
  int created = 0;
  int ok = 0;
  int failures = 0;
};

// Runs `kernel` on one case and checks the contract; returns whether it
// returned OK. `label` identifies the case in failure messages.
bool CheckCompute(OpKernel& kernel, const std::string& op, const OpSchema* schema, const NodeDef& node,
                  const Case& c, int num_outputs, void* session_state, const std::string& label, Tally& tally) {
  std::vector<const Tensor*> ptrs;
  std::vector<DType> types;
  for (const Tensor& t : c.inputs) {
    ptrs.push_back(&t);
    types.push_back(t.dtype());
  }
  // What the executor would expect of the node, when its schema accepts it.
  std::vector<DType> inferred;
  int expected_outputs = -1;
  if (schema != nullptr) {
    absl::StatusOr<std::vector<DType>> typed = schema->InferTypes({node, types, nullptr});
    if (typed.ok()) {
      inferred = *typed;
      expected_outputs = static_cast<int>(typed->size());
    } else {
      std::vector<DType> unknown(types.size(), DType::kInvalid);
      absl::StatusOr<std::vector<DType>> untyped = schema->InferTypes({node, unknown, nullptr});
      if (untyped.ok()) expected_outputs = static_cast<int>(untyped->size());
    }
  }
  const std::vector<std::string> before = Snapshot(c.inputs);
  std::vector<Tensor> outputs(std::max(num_outputs, 1) + kSlack);
  KernelContext ctx(ptrs.data(), static_cast<int>(ptrs.size()), outputs.data(), num_outputs, Device::Cpu());
  ctx.set_session_state(session_state);
  absl::Status s = kernel.Compute(ctx);

  auto fail = [&]() -> std::string {
    ++tally.failures;
    return absl::StrCat(op, " ", label, ": ", Describe(c, num_outputs), "\n  status ", s.ToString(), "\n  ");
  };
  if (Snapshot(c.inputs) != before) ADD_FAILURE() << fail() << "wrote into an input";
  for (int i = std::max(num_outputs, 1); i < static_cast<int>(outputs.size()); ++i)
    if (outputs[i].valid()) ADD_FAILURE() << fail() << "wrote output " << i << " past num_outputs";
  // The executor's inline scalar path (runtime/scalar_ops.h) must agree
  // with the kernel wherever it answers for a node the schema accepts.
  const runtime::ScalarOp sop = runtime::ScalarOpFor(op);
  bool all_valid = true;
  for (const Tensor& t : c.inputs) all_valid &= t.valid();
  Tensor fast;
  const bool answered = sop != runtime::ScalarOp::kNone && all_valid && !inferred.empty() &&
                        (c.inputs.size() == 1 ? runtime::ComputeScalar(sop, c.inputs[0], nullptr, &fast)
                         : c.inputs.size() == 2
                             ? runtime::ComputeScalarBinary(sop, c.inputs[0], c.inputs[1], &fast)
                             : false);
  if (!s.ok()) {
    if (s.message().empty()) ADD_FAILURE() << fail() << "error without a message";
    // Bad input is the caller's error, not the runtime's.
    if (s.code() == absl::StatusCode::kInternal || s.code() == absl::StatusCode::kUnknown)
      ADD_FAILURE() << fail() << "bad input reported as " << absl::StatusCodeToString(s.code());
    if (answered) ADD_FAILURE() << fail() << "the scalar fast path answers " << fast.DebugString();
    return false;
  }
  // OK: the outputs the executor would read are all there and well formed.
  const int check = expected_outputs >= 0 ? std::min(num_outputs, expected_outputs) : 0;
  for (int i = 0; i < std::max(num_outputs, 1); ++i) {
    if (i < check || outputs[i].valid()) {
      ::testing::AssertionResult w = WellFormed(outputs[i], /*device_ok=*/op == "CopyToDevice");
      if (!w) ADD_FAILURE() << fail() << "output " << i << ": " << w.message();
    }
    if (i < check && i < static_cast<int>(inferred.size()) && inferred[i] != DType::kInvalid &&
        outputs[i].valid() && outputs[i].dtype() != inferred[i])
      ADD_FAILURE() << fail() << "output " << i << " is " << DTypeName(outputs[i].dtype()) << ", the schema infers "
                    << DTypeName(inferred[i]);
  }
  if (answered && !SameScalar(fast, outputs[0]))
    ADD_FAILURE() << fail() << "the scalar fast path gives " << fast.DebugString() << ", the kernel "
                  << outputs[0].DebugString();
  return true;
}

// How many outputs to give the kernel: the schema's count (what the
// executor gives), now and then another one, which a kernel must either
// refuse or respect.
int ChooseNumOutputs(Gen& g, const OpSchema& schema, const NodeDef& node, const Case& c) {
  std::vector<DType> unknown(c.inputs.size(), DType::kInvalid);
  absl::StatusOr<std::vector<DType>> types = schema.InferTypes({node, unknown, nullptr});
  const int expected = types.ok() ? static_cast<int>(types->size()) : 1;
  return g.Chance(0.9) ? expected : static_cast<int>(g.Uniform(1, expected + 1));
}

std::vector<std::string> CpuKernelOps() {
  std::vector<std::string> ops;
  for (const std::string& op : OpRegistry::Global()->ListOps())
    if (KernelRegistry::Global()->Has(op, Device::Type::kCpu)) ops.push_back(op);
  return ops;
}

class KernelRobustnessTest : public ::testing::TestWithParam<std::string> {};

TEST_P(KernelRobustnessTest, RandomCasesGiveAStatusOrValidOutputs) {
  const std::string op = GetParam();
  const OpSchema* schema = OpRegistry::Global()->Find(op);
  ASSERT_NE(schema, nullptr);
  const uint64_t seed = OpSeed(op);
  SCOPED_TRACE(absl::StrCat("op ", op, ", seed ", seed, " (TDF_KERNEL_ROBUSTNESS_SEED=", BaseSeed(), ")"));
  Gen g(seed);
  Watchdog watchdog(std::chrono::seconds(60));
  Tally tally;
  const int cases = CasesPerOp();
  for (int i = 0; i < cases && tally.failures < 5; ++i) {
    const std::string label = absl::StrCat("case ", i, " of seed ", seed);
    watchdog.Enter(absl::StrCat(op, " ", label));
    Case c = MakeCase(g, op, *schema);
    NodeDef node = MakeNode(op, static_cast<int>(c.inputs.size()), c.attrs);
    const int num_outputs = ChooseNumOutputs(g, *schema, node, c);
    ++tally.cases;
    absl::StatusOr<std::unique_ptr<OpKernel>> kernel = KernelRegistry::Global()->Create(node, Device::Type::kCpu);
    if (!kernel.ok()) {
      // A kernel that cannot be made says so naming the node.
      EXPECT_THAT(std::string(kernel.status().message()), HasSubstr(node.name)) << label << ": " << kernel.status();
      continue;
    }
    ASSERT_NE(*kernel, nullptr) << label;
    ++tally.created;
    if (CheckCompute(**kernel, op, schema, node, c, num_outputs, nullptr, label, tally)) ++tally.ok;
  }
  if (EnvOr("TDF_KERNEL_ROBUSTNESS_VERBOSE", 0) != 0)
    std::printf("%-20s %d cases, %d kernels created, %d OK\n", op.c_str(), tally.cases, tally.created, tally.ok);
  // The generators must reach the compute paths, not only the first check.
  if (ValidBuilders().count(op) > 0 && op != "CopyToDevice") {
    EXPECT_GT(tally.ok, cases / 20) << op << ": only " << tally.ok << " of " << tally.cases << " cases ran";
  }
}

INSTANTIATE_TEST_SUITE_P(AllCpuKernels, KernelRobustnessTest, ::testing::ValuesIn(CpuKernelOps()),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

TEST(KernelRobustness, CoversEveryCpuKernelOp) {
  // Catches a registry that would make the suite above vacuous.
  EXPECT_GE(CpuKernelOps().size(), 55u);
  for (const std::string& op : CpuKernelOps())
    EXPECT_TRUE(ValidBuilders().count(op) > 0) << "no valid-case builder for " << op << "; add one above";
}

// ---------------------------------------------------------------------------
// The state kernels (Read, Assign, AssignAdd, AssignSub, ScatterAdd) take the
// session's variables through KernelContext::session_state().

// A store of one to three variables of random dtypes and values.
std::unique_ptr<runtime::VariableStore> RandomStore(Gen& g) {
  auto store = std::make_unique<runtime::VariableStore>();
  for (int i = 0, n = static_cast<int>(g.Uniform(1, 3)); i < n; ++i) {
    auto slot = std::make_unique<runtime::VariableSlot>();
    slot->name = absl::StrCat("v", i);
    slot->dtype = g.AnyDType();
    Tensor value = g.Fill(slot->dtype, g.AnyShape());
    {
      absl::MutexLock lock(&slot->mu);
      slot->value = value;
    }
    store->slots.push_back(std::move(slot));
  }
  return store;
}

Case StateCase(Gen& g, const std::string& op, const runtime::VariableStore& store) {
  const int64_t h = g.Uniform(0, static_cast<int64_t>(store.slots.size()) - 1);
  const runtime::VariableSlot& var = *store.slots[h];
  Tensor value;
  {
    absl::MutexLock lock(&var.mu);
    value = var.value;
  }
  Case c{{Tensor::Scalar<int64_t>(h)}, {{"dtype", var.dtype}}};
  if (op == "Assign") c.inputs.push_back(g.Fill(var.dtype, g.Chance(0.5) ? value.shape() : g.AnyShape()));
  if (op == "AssignAdd" || op == "AssignSub") c.inputs.push_back(g.Fill(var.dtype, value.shape()));
  if (op == "ScatterAdd") {
    const Shape& vs = value.shape();
    Tensor idx = g.Indices(g.IndexDType(), g.AnyShape(0, 2), vs.rank() > 0 ? vs.dim(0) : 1);
    Shape updates = idx.shape();
    for (int d = 1; d < vs.rank(); ++d) updates.AddDim(vs.dim(d));
    c.inputs.push_back(idx);
    c.inputs.push_back(g.Fill(var.dtype, updates));
  }
  return c;
}

class StateKernelRobustnessTest : public ::testing::TestWithParam<std::string> {};

TEST_P(StateKernelRobustnessTest, RandomCasesGiveAStatusOrValidOutputs) {
  const std::string op = GetParam();
  const OpSchema* schema = OpRegistry::Global()->Find(op);
  ASSERT_NE(schema, nullptr);
  const uint64_t seed = OpSeed(op);
  SCOPED_TRACE(absl::StrCat("op ", op, ", seed ", seed, " (TDF_KERNEL_ROBUSTNESS_SEED=", BaseSeed(), ")"));
  Gen g(seed);
  Watchdog watchdog(std::chrono::seconds(60));
  Tally tally;
  std::unique_ptr<runtime::VariableStore> store;
  const int cases = CasesPerOp();
  for (int i = 0; i < cases && tally.failures < 5; ++i) {
    const std::string label = absl::StrCat("case ", i, " of seed ", seed);
    watchdog.Enter(absl::StrCat(op, " ", label));
    if (i % 20 == 0) store = RandomStore(g);  // variables live across updates, as in a session
    Case c = g.Chance(0.2) ? RandomCase(g, *schema) : StateCase(g, op, *store);
    if (g.Chance(0.4)) Mutate(g, *schema, c);
    if (!c.inputs.empty() && g.Chance(0.1)) c.inputs[0] = Tensor::Scalar<int64_t>(g.ExtremeInt());  // bad handle
    NodeDef node = MakeNode(op, static_cast<int>(c.inputs.size()), c.attrs);
    const int num_outputs = ChooseNumOutputs(g, *schema, node, c);
    ++tally.cases;
    absl::StatusOr<std::unique_ptr<OpKernel>> kernel = runtime::MakeStateKernel(node);
    if (!kernel.ok()) {
      EXPECT_THAT(std::string(kernel.status().message()), HasSubstr(node.name)) << label << ": " << kernel.status();
      continue;
    }
    ++tally.created;
    void* state = g.Chance(0.05) ? nullptr : store.get();
    if (CheckCompute(**kernel, op, schema, node, c, num_outputs, state, label, tally)) ++tally.ok;
    // Whatever happened, every variable still holds a value of its dtype.
    for (const auto& slot : store->slots) {
      absl::MutexLock lock(&slot->mu);
      EXPECT_EQ(slot->value.dtype(), slot->dtype) << label << ": variable " << slot->name;
      EXPECT_TRUE(WellFormed(slot->value)) << label << ": variable " << slot->name;
    }
  }
  if (EnvOr("TDF_KERNEL_ROBUSTNESS_VERBOSE", 0) != 0)
    std::printf("%-20s %d cases, %d kernels created, %d OK\n", op.c_str(), tally.cases, tally.created, tally.ok);
  EXPECT_GT(tally.ok, cases / 20) << op << ": only " << tally.ok << " of " << tally.cases << " cases ran";
}

INSTANTIATE_TEST_SUITE_P(StateKernels, StateKernelRobustnessTest,
                         ::testing::Values("Read", "Assign", "AssignAdd", "AssignSub", "ScatterAdd"),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

// ---------------------------------------------------------------------------
// Regressions: each bug the random cases found, as one fixed case.

using kernel_test::F64;
using kernel_test::RunOp;

// Reshape to [-1, INT64_MAX, 5]: the known dims' product overflowed
// (undefined behaviour) on every firing; now the kernel is refused.
TEST(KernelRobustnessRegression, ReshapeKnownDimsOverflow) {
  const int64_t kMax = std::numeric_limits<int64_t>::max();
  for (std::vector<int64_t> shape :
       {std::vector<int64_t>{-1, kMax, 5}, {3, -1, int64_t{1} << 40, int64_t{1} << 40}, {kMax, kMax}}) {
    absl::Status s = RunOp("Reshape", {F64({1, 2, 3}, {3})}, {{"shape", shape}}).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr("too many elements"));
  }
  // A 0 among the known dims is not an overflow, and still an error.
  EXPECT_FALSE(RunOp("Reshape", {F64({1, 2, 3}, {3})}, {{"shape", std::vector<int64_t>{-1, 0, kMax}}}).ok());
}

// Slice and SliceGrad with begin INT64_MIN and size -1 computed dim - begin
// (signed overflow) before checking begin.
TEST(KernelRobustnessRegression, SliceBeginInt64MinWithSizeToTheEnd) {
  const int64_t kMin = std::numeric_limits<int64_t>::min();
  AttrMap attrs = {{"begin", std::vector<int64_t>{0, kMin}}, {"size", std::vector<int64_t>{-1, -1}}};
  Tensor x = F64({1, 2, 3, 4, 5, 6}, {2, 3});
  absl::Status s = RunOp("Slice", {x}, attrs).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("out of bounds"));
  s = RunOp("SliceGrad", {x, x}, attrs).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("out of bounds"));
}

// ConcatGrad wrote one output per part and IndexedRowsSplit always two,
// whatever num_outputs the context had: past the end of the outputs.
TEST(KernelRobustnessRegression, MultiOutputKernelsRespectNumOutputs) {
  Tensor dy = F64({1, 2, 3}, {3});
  absl::StatusOr<std::vector<Tensor>> out =
      RunOp("ConcatGrad", {dy, F64({1}, {1}), F64({1, 2}, {2})}, {{"axis", int64_t{0}}}, /*num_outputs=*/1);
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument) << out.status();
  out = RunOp("ConcatGrad", {dy, F64({1}, {1}), F64({1, 2}, {2})}, {{"axis", int64_t{0}}}, /*num_outputs=*/2);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(kernel_test::TensorEq((*out)[1], F64({2, 3}, {2})));

  // One indexed row [index 1 | 5] of a table [2, 1].
  Tensor rows = F64({0, 5}, {1, 2});
  const int64_t one = 1;
  std::memcpy(rows.mutable_data<double>(), &one, sizeof(one));
  out = RunOp("IndexedRowsSplit", {rows, F64({0, 0}, {2, 1})}, {}, /*num_outputs=*/1);
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument) << out.status();
  out = RunOp("IndexedRowsSplit", {rows, F64({0, 0}, {2, 1})}, {}, /*num_outputs=*/2);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(kernel_test::TensorEq((*out)[0], Tensor::Vector<int64_t>({1})));
}

// Identity of an invalid tensor returned OK with an invalid output.
TEST(KernelRobustnessRegression, IdentityOfAnInvalidTensorIsAnError) {
  EXPECT_EQ(RunOp("Identity", {Tensor()}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(RunOp("Identity", {Tensor::Scalar<int64_t>(3)}).ok());
}

// Tensor::Empty bounded the element count by int64 but not the byte count:
// an int64 [2^61] wrapped to 0 bytes and came back as 2^61 elements over
// a 64-byte buffer (reachable through a Variable's shape attr).
TEST(KernelRobustnessRegression, TensorWhoseByteCountWrapsIsRefused) {
  EXPECT_EQ(Tensor::Empty(DType::kInt64, Shape({int64_t{1} << 61})).status().code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(Tensor::Zeros(DType::kFloat32, Shape({int64_t{1} << 61, 2})).status().code(),
            absl::StatusCode::kResourceExhausted);
  // 4096 bytes mod 2^64: must not become a view of the shared zero mapping.
  EXPECT_FALSE(kernels::Zeros(DType::kInt64, Shape({(int64_t{1} << 61) + 512})).ok());

  Graph g;
  NodeDef v = MakeNode("Variable", 0, {{"dtype", DType::kInt64}, {"shape", Shape({int64_t{1} << 61})}});
  v.name = "v";
  g.node.push_back(v);
  EXPECT_FALSE(Session::Create(g).ok());
}

// The state kernels read ctx.input(0) (and 1, 2) without checking the
// arity: Read with no inputs dereferenced a null input array.
TEST(KernelRobustnessRegression, StateKernelsCheckTheirArity) {
  runtime::VariableStore store;
  store.slots.push_back(std::make_unique<runtime::VariableSlot>());
  store.slots[0]->name = "v";
  store.slots[0]->dtype = DType::kInt64;
  {
    absl::MutexLock lock(&store.slots[0]->mu);
    store.slots[0]->value = Tensor::Scalar<int64_t>(7);
  }
  const Tensor handle = Tensor::Scalar<int64_t>(0);
  for (const auto& [op, arity] : std::vector<std::pair<std::string, int>>{
           {"Read", 1}, {"Assign", 2}, {"AssignAdd", 2}, {"AssignSub", 2}, {"ScatterAdd", 3}}) {
    absl::StatusOr<std::unique_ptr<OpKernel>> kernel =
        runtime::MakeStateKernel(MakeNode(op, arity, {{"dtype", DType::kInt64}}));
    ASSERT_TRUE(kernel.ok()) << kernel.status();
    for (int n : {0, arity - 1, arity + 1}) {
      if (n == arity) continue;
      std::vector<const Tensor*> inputs(n, &handle);
      Tensor out[1];
      KernelContext ctx(inputs.data(), n, out, 1, Device::Cpu());
      ctx.set_session_state(&store);
      absl::Status s = (*kernel)->Compute(ctx);
      EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << op << " with " << n << " inputs: " << s;
    }
  }
  // Missing attr dtype: refused when the kernel is made, naming the node.
  absl::StatusOr<std::unique_ptr<OpKernel>> kernel = runtime::MakeStateKernel(MakeNode("Read", 1));
  EXPECT_THAT(std::string(kernel.status().message()), HasSubstr("test_Read"));
}

// A Read whose handle comes through a Placeholder is not traced back to its
// Variable by validation, so nothing checked its attr dtype: it returned a
// float64 for a node typed int64. Now the run fails naming the node.
TEST(KernelRobustnessRegression, ReadOfAFedHandleChecksTheVariablesDtype) {
  GraphBuilder b;
  Output v = b.Variable("v", Tensor::Scalar<double>(2.5));
  Output h = b.Placeholder("h", DType::kInt64);
  b.Identity(b.Op("Read", {h}, {{"dtype", DType::kInt64}}, "read"), "result");
  b.Identity(v, "handle");
  absl::StatusOr<Graph> graph = b.Build();
  ASSERT_TRUE(graph.ok()) << graph.status();
  absl::StatusOr<std::unique_ptr<Session>> s = Session::Create(*graph);
  ASSERT_TRUE(s.ok()) << s.status();
  absl::StatusOr<std::vector<Tensor>> handle = (*s)->Run({}, {"handle"});
  ASSERT_TRUE(handle.ok()) << handle.status();
  absl::StatusOr<std::vector<Tensor>> out = (*s)->Run({{"h", handle->at(0)}}, {"result"});
  ASSERT_FALSE(out.ok()) << out->at(0).DebugString();
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(out.status().message()),
              AllOf(HasSubstr("node 'read' (Read) at tag []"), HasSubstr("variable 'v' is float64, attr dtype is int64")));
}

// ---------------------------------------------------------------------------
// Through a Session: a Placeholder fed a tensor of the wrong dtype fails at
// the feed, naming the Placeholder; one of the wrong shape fails in the
// consuming kernel, and the status names that node, its op and the tag.

struct SessionCase {
  std::string what;
  std::function<void(GraphBuilder&)> build;  // placeholders "x" (and "y"); the node under test "n"
  std::vector<std::pair<std::string, Tensor>> good;
  std::string op;
  std::vector<std::pair<std::string, Tensor>> wrong_shape;
  std::pair<std::string, Tensor> wrong_dtype;
  std::string wrong_dtype_message;
};

Tensor F32(std::vector<float> v, Shape s) { return *Tensor::FromVector<float>(v, s); }
Tensor I64(std::vector<int64_t> v, Shape s) { return *Tensor::FromVector<int64_t>(v, s); }

std::vector<SessionCase> SessionCases() {
  const Tensor f22 = F32({1, 2, 3, 4}, {2, 2});
  return {
      {"elementwise binary",
       [](GraphBuilder& b) {
         b.Identity(b.Op("Add", {b.Placeholder("x", DType::kFloat32), b.Placeholder("y", DType::kFloat32)}, {}, "n"),
                    "result");
       },
       {{"x", f22}, {"y", f22}},
       "Add",
       {{"x", f22}, {"y", F32({1, 2, 3}, {3})}},
       {"x", Tensor::Scalar<int64_t>(1)},
       "feed 'x' is int64; node 'x' (Placeholder) wants float32"},
      {"MatMul",
       [](GraphBuilder& b) {
         b.Identity(b.Op("MatMul", {b.Placeholder("x", DType::kFloat32), b.Placeholder("y", DType::kFloat32)}, {}, "n"),
                    "result");
       },
       {{"x", f22}, {"y", f22}},
       "MatMul",
       {{"x", f22}, {"y", F32({1, 2, 3}, {3, 1})}},
       {"y", Tensor::Scalar<double>(1)},
       "feed 'y' is float64; node 'y' (Placeholder) wants float32"},
      {"reduction",
       [](GraphBuilder& b) {
         b.Identity(b.Op("Sum", {b.Placeholder("x", DType::kFloat32)}, {{"axes", std::vector<int64_t>{1}}}, "n"),
                    "result");
       },
       {{"x", f22}},
       "Sum",
       {{"x", F32({1, 2}, {2})}},
       {"x", I64({1, 2}, {2})},
       "feed 'x' is int64; node 'x' (Placeholder) wants float32"},
      {"Gather",
       [](GraphBuilder& b) {
         b.Identity(b.Op("Gather", {b.Placeholder("x", DType::kFloat32), b.Placeholder("y", DType::kInt64)}, {}, "n"),
                    "result");
       },
       {{"x", f22}, {"y", I64({1, 0}, {2})}},
       "Gather",
       {{"x", Tensor::Scalar<float>(1)}, {"y", I64({0}, {1})}},
       {"y", F32({0}, {1})},
       "feed 'y' is float32; node 'y' (Placeholder) wants int64"},
      {"Concat",
       [](GraphBuilder& b) {
         b.Identity(b.Op("Concat", {b.Placeholder("x", DType::kFloat32), b.Placeholder("y", DType::kFloat32)},
                         {{"axis", int64_t{0}}}, "n"),
                    "result");
       },
       {{"x", f22}, {"y", f22}},
       "Concat",
       {{"x", f22}, {"y", F32({1, 2, 3}, {1, 3})}},
       {"x", Tensor::Scalar<bool>(true)},
       "feed 'x' is bool; node 'x' (Placeholder) wants float32"},
      {"Reshape",
       [](GraphBuilder& b) {
         b.Identity(b.Op("Reshape", {b.Placeholder("x", DType::kFloat32)}, {{"shape", std::vector<int64_t>{4}}}, "n"),
                    "result");
       },
       {{"x", f22}},
       "Reshape",
       {{"x", F32({1, 2, 3}, {3})}},
       {"x", Tensor()},
       "feed 'x' is invalid; node 'x' (Placeholder) wants float32"},
  };
}

class SessionFeedErrorsTest : public ::testing::TestWithParam<int> {};

TEST_P(SessionFeedErrorsTest, WrongDtypeOrShapeNamesTheNode) {
  for (const SessionCase& c : SessionCases()) {
    SCOPED_TRACE(c.what);
    GraphBuilder b;
    c.build(b);
    absl::StatusOr<Graph> graph = b.Build();
    ASSERT_TRUE(graph.ok()) << graph.status();
    SessionOptions options;
    options.num_workers = GetParam();
    absl::StatusOr<std::unique_ptr<Session>> s = Session::Create(*graph, options);
    ASSERT_TRUE(s.ok()) << s.status();

    absl::StatusOr<std::vector<Tensor>> out = (*s)->Run(c.wrong_shape, {"result"});
    ASSERT_FALSE(out.ok());
    EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument) << out.status();
    EXPECT_THAT(std::string(out.status().message()), HasSubstr(absl::StrCat("node 'n' (", c.op, ") at tag []")));

    std::vector<std::pair<std::string, Tensor>> feeds = c.good;
    for (auto& [name, value] : feeds)
      if (name == c.wrong_dtype.first) value = c.wrong_dtype.second;
    out = (*s)->Run(feeds, {"result"});
    ASSERT_FALSE(out.ok());
    EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument) << out.status();
    EXPECT_THAT(std::string(out.status().message()), HasSubstr(c.wrong_dtype_message));

    // The session is still usable.
    out = (*s)->Run(c.good, {"result"});
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_TRUE(WellFormed(out->at(0)));
  }
}

INSTANTIATE_TEST_SUITE_P(Workers, SessionFeedErrorsTest, ::testing::Values(1, 4),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return absl::StrCat(info.param, "Workers");
                         });

}  // namespace
}  // namespace tdf
