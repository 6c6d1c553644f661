// Randomized robustness test of the CPU kernels (design.md §6: bad input
// never crashes, hangs or leaks; it ends in a Status). Every op with a CPU
// kernel, and the state kernels, runs 2000 times by default, directly (no
// executor), on generated cases: cases built to be valid, so that the
// compute paths run, then mutated (a dtype, a dim, an index, an attribute,
// an input more or less), and wholly random ones (any number of inputs of
// any dtype, rank 0-4 with dims 0-5, NaN/inf and extreme integers, attrs of
// the wrong type or missing). Every call must return an error, or OK with
// well-formed outputs of the dtypes the op's schema infers, without writing
// into its inputs or past its outputs; the asan preset adds ASan/UBSan and
// LeakSanitizer. A watchdog turns a hang into an abort naming the case.
//
// The test is split over several files (one held it all and outgrew the
// size limit):
//   kernel_robustness.h                   this header: seeds, the watchdog,
//                                         the generator (Gen), cases, their
//                                         mutations, and the checks
//   kernel_robustness_builders.h          valid cases for every op
//   kernel_robustness_test.cc             the random cases, for every CPU
//                                         kernel and the state kernels; it
//                                         says how to reproduce a failure
//   kernel_robustness_regression_test.cc  each bug they found, as a fixed
//                                         case, and a few ops run through a
//                                         Session with feeds of the wrong
//                                         dtype or shape
#ifndef TDF_TESTS_KERNELS_KERNEL_ROBUSTNESS_H_
#define TDF_TESTS_KERNELS_KERNEL_ROBUSTNESS_H_

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/kernels/kernel_util.h"
#include "runtime/scalar_ops.h"
#include "tdf/kernel.h"
#include "tdf/op_registry.h"

namespace tdf {
namespace kernel_robustness {

inline constexpr DType kAllDTypes[] = {DType::kBool, DType::kInt32, DType::kInt64, DType::kFloat32,
                                      DType::kFloat64};

inline uint64_t EnvOr(const char* name, uint64_t fallback) {
  const char* v = std::getenv(name);
  uint64_t out = 0;
  return v != nullptr && absl::SimpleAtoi(v, &out) ? out : fallback;
}

inline uint64_t BaseSeed() { return EnvOr("TDF_KERNEL_ROBUSTNESS_SEED", 20240601); }
inline int CasesPerOp() { return static_cast<int>(EnvOr("TDF_KERNEL_ROBUSTNESS_CASES", 2000)); }

// FNV-1a of the op name: a seed per op that does not depend on which other
// ops exist or the order they run in.
inline uint64_t OpSeed(const std::string& op) {
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

inline std::string Describe(const Case& c, int num_outputs) {
  std::vector<std::string> in;
  for (const Tensor& t : c.inputs) in.push_back(t.DebugString());
  std::vector<std::string> attrs;
  for (const auto& [name, v] : c.attrs) attrs.push_back(absl::StrCat(name, "=", v.DebugString()));
  return absl::StrCat("inputs (", absl::StrJoin(in, "; "), "), attrs {", absl::StrJoin(attrs, ", "),
                      "}, num_outputs ", num_outputs);
}

// Wholly random: any number of inputs around the schema's, any attrs.
inline Case RandomCase(Gen& g, const OpSchema& schema) {
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
inline int64_t EdgeInt(Gen& g) {
  return g.Chance(0.8) ? g.Pick<int64_t>({-1, std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()})
                       : g.ExtremeInt();
}

inline void MutateInput(Gen& g, Case& c) {
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

inline void MutateAttr(Gen& g, const OpSchema& schema, Case& c) {
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
inline void Mutate(Gen& g, const OpSchema& schema, Case& c) {
  for (int m = 0, n = static_cast<int>(g.Uniform(1, 3)); m < n; ++m) {
    if (!schema.attrs().empty() && g.Chance(0.5)) {
      MutateAttr(g, schema, c);
    } else {
      MutateInput(g, c);
    }
  }
}

// ---------------------------------------------------------------------------
// Checks.

// Everything a consumer may assume of a tensor a kernel returned: a dtype,
// a consistent shape, storage large enough, every element readable
// (reading a bool that is neither 0 nor 1 is UB that UBSan reports). Only
// CopyToDevice may return a device tensor (in a CUDA build, on a GPU).
inline ::testing::AssertionResult WellFormed(const Tensor& t, bool device_ok = false) {
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
inline std::vector<std::string> Snapshot(const std::vector<Tensor>& inputs) {
  std::vector<std::string> out;
  for (const Tensor& t : inputs)
    out.emplace_back(t.valid() ? std::string(static_cast<const char*>(t.raw_data()), t.bytes()) : std::string());
  return out;
}

inline bool SameScalar(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || !a.is_scalar() || !b.is_scalar()) return false;
  if (a.Equals(b)) return true;
  if (a.dtype() == DType::kFloat64) return std::isnan(a.scalar<double>()) && std::isnan(b.scalar<double>());
  if (a.dtype() == DType::kFloat32) return std::isnan(a.scalar<float>()) && std::isnan(b.scalar<float>());
  return false;
}

inline constexpr int kSlack = 3;  // output slots past num_outputs that must stay untouched

struct Tally {
  int cases = 0;
  int created = 0;
  int ok = 0;
  int failures = 0;
};

// Runs `kernel` on one case and checks the contract; returns whether it
// returned OK. `label` identifies the case in failure messages.
inline bool CheckCompute(OpKernel& kernel, const std::string& op, const OpSchema* schema, const NodeDef& node,
                         const Case& c, int num_outputs, void* session_state, const std::string& label,
                         Tally& tally) {
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
inline int ChooseNumOutputs(Gen& g, const OpSchema& schema, const NodeDef& node, const Case& c) {
  std::vector<DType> unknown(c.inputs.size(), DType::kInvalid);
  absl::StatusOr<std::vector<DType>> types = schema.InferTypes({node, unknown, nullptr});
  const int expected = types.ok() ? static_cast<int>(types->size()) : 1;
  return g.Chance(0.9) ? expected : static_cast<int>(g.Uniform(1, expected + 1));
}

inline std::vector<std::string> CpuKernelOps() {
  std::vector<std::string> ops;
  for (const std::string& op : OpRegistry::Global()->ListOps())
    if (KernelRegistry::Global()->Has(op, Device::Type::kCpu)) ops.push_back(op);
  return ops;
}

}  // namespace kernel_robustness
}  // namespace tdf

#endif  // TDF_TESTS_KERNELS_KERNEL_ROBUSTNESS_H_
