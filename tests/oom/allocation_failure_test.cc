// Every allocation of a run failing in turn (issue #26, item 4): operator
// new is replaced for this binary (hence a binary of its own) by one that
// can be told to throw std::bad_alloc at its k-th call from now, on any
// thread. For k = 0, 1, 2, ... until the run makes fewer allocations, the
// run must end OK with the right answer (a failure the executor can do
// without: offering work, a free list that cannot grow) or with
// RESOURCE_EXHAUSTED, the session must still run right afterwards, and,
// with one worker, nothing may be left allocated. Before, the first such
// failure inside a run ended the process (std::terminate). Deterministic,
// and runs under the sanitizers too (LeakSanitizer then checks for leaks
// as well); how a real shortage ends a run, and a Session::Create, is in
// tests/runtime/out_of_memory_test.cc. Session::Create is swept the same
// way.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "runtime/out_of_memory.h"
#include "tdf/builder.h"
#include "tdf/reference_programs.h"
#include "tdf/session.h"

namespace {

// Allocations still to succeed before one fails; negative: none fails.
std::atomic<int64_t> countdown{-1};
std::atomic<int64_t> injected{0};
// Blocks from operator new not yet deleted.
std::atomic<int64_t> live_blocks{0};

void* Allocate(std::size_t bytes) {
  if (countdown.load(std::memory_order_relaxed) >= 0 && countdown.fetch_sub(1, std::memory_order_relaxed) == 0) {
    injected.fetch_add(1, std::memory_order_relaxed);
    throw std::bad_alloc();
  }
  void* p = std::malloc(bytes == 0 ? 1 : bytes);
  if (p == nullptr) throw std::bad_alloc();
  live_blocks.fetch_add(1, std::memory_order_relaxed);
  return p;
}

void Deallocate(void* p) noexcept {
  if (p == nullptr) return;
  live_blocks.fetch_sub(1, std::memory_order_relaxed);
  std::free(p);
}

}  // namespace

// Every replaceable form but the aligned ones (which pair among
// themselves): under a sanitizer, a form not defined here is the
// sanitizer's, whose blocks these deletes would miscount.
void* operator new(std::size_t bytes) { return Allocate(bytes); }
void* operator new[](std::size_t bytes) { return Allocate(bytes); }
void* operator new(std::size_t bytes, const std::nothrow_t&) noexcept {
  try {
    return Allocate(bytes);
  } catch (const std::bad_alloc&) {
    return nullptr;
  }
}
void* operator new[](std::size_t bytes, const std::nothrow_t& tag) noexcept { return operator new(bytes, tag); }
void operator delete(void* p) noexcept { Deallocate(p); }
void operator delete[](void* p) noexcept { Deallocate(p); }
void operator delete(void* p, std::size_t) noexcept { Deallocate(p); }
void operator delete[](void* p, std::size_t) noexcept { Deallocate(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { Deallocate(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { Deallocate(p); }

namespace tdf {
namespace {

using Outs = std::vector<Output>;
using Feeds = std::vector<std::pair<std::string, Tensor>>;
constexpr DType kI64 = DType::kInt64;
constexpr DType kF32 = DType::kFloat32;

// t(n, x) = Sum(x, {0, 2}) + (n == 0 ? 0 : t(n - 1, x)) for x of shape
// [2, 3, 4]: a kernel that allocates (the reduction's axis mask) in every
// call. All ones: t(n) = 8 (n + 1) in each of 3 elements.
Graph TensorRecursion() {
  GraphBuilder b;
  (void)b.DefineFunction({"t", {{"n", kI64}, {"x", kF32}}, {{"r", kF32}}}, [](GraphBuilder& f, const Outs& a) -> Outs {
    Output n = a[0], x = a[1];
    return f.Cond(
        f.Equal(n, f.Const<int64_t>(0)), [&] { return Outs{f.Sum(x, {0, 2})}; },
        [&] { return Outs{f.Add(f.Sum(x, {0, 2}), f.Call("t", {f.Sub(n, f.Const<int64_t>(1)), x})[0])}; });
  });
  Output x = b.Const(*Tensor::FromVector<float>(std::vector<float>(24, 1.0f), Shape({2, 3, 4})));
  b.Identity(b.Call("t", {b.Placeholder("n", kI64), x})[0], "result");
  absl::StatusOr<Graph> g = b.Build();
  EXPECT_TRUE(g.ok()) << g.status();
  return g.ok() ? *std::move(g) : Graph();
}

struct Program {
  std::string name;
  std::function<Graph()> graph;
  Feeds feeds;
  // Whether `result` (the fetched tensor) is the right answer.
  std::function<bool(const Tensor&)> right;
};

bool IsInt(const Tensor& t, int64_t want) { return t.dtype() == kI64 && t.scalar<int64_t>() == want; }

std::vector<Program> Programs() {
  auto n = [](int64_t v) { return Feeds{{"n", Tensor::Scalar<int64_t>(v)}}; };
  return {
      {"fib", reference::Fib, n(9), [](const Tensor& t) { return IsInt(t, reference::NativeFib(9)); }},
      {"ack", reference::Ack, {{"m", Tensor::Scalar<int64_t>(2)}, {"n", Tensor::Scalar<int64_t>(2)}},
       [](const Tensor& t) { return IsInt(t, reference::NativeAck(2, 2)); }},
      {"call_in_while", reference::CallInWhile, n(12),
       [](const Tensor& t) { return IsInt(t, reference::NativeCallInWhile(12)); }},
      {"while_in_function", reference::WhileInFunction, n(6),
       [](const Tensor& t) { return IsInt(t, reference::NativeWhileInFunction(6)); }},
      {"tensor_recursion", TensorRecursion, n(5),
       [](const Tensor& t) {
         if (t.dtype() != kF32 || t.num_elements() != 3) return false;
         for (int i = 0; i < 3; ++i)
           if (t.data<float>()[i] != 48.0f) return false;
         return true;
       }},
  };
}

struct Variant {
  ExecutionMode mode;
  int workers;
};

std::string VariantName(const Program& p, const Variant& v) {
  return absl::StrCat(p.name, v.mode == ExecutionMode::kStatic ? " static" : " dynamic", " at ", v.workers,
                      " workers");
}

// Runs `program` with its k-th allocation failing for k = 0, 1, ... until a
// run makes fewer; returns how many runs had one fail.
int64_t SweepRuns(const Program& program, const Variant& variant) {
  SCOPED_TRACE(VariantName(program, variant));
  SessionOptions options;
  options.mode = variant.mode;
  options.num_workers = variant.workers;
  absl::StatusOr<std::unique_ptr<Session>> session = Session::Create(program.graph(), options);
  EXPECT_TRUE(session.ok()) << session.status();
  if (!session.ok()) return 0;
  const std::vector<std::string> fetches = {"result"};
  auto run = [&](int64_t fail_at) {
    const int64_t before = injected.load();
    countdown.store(fail_at);
    absl::StatusOr<std::vector<Tensor>> out = (*session)->Run(program.feeds, fetches);
    countdown.store(-1);
    return std::make_pair(std::move(out), injected.load() > before);
  };
  // Caches that fill once (frame pools, the memory reserve) are full after
  // these.
  for (int i = 0; i < 3; ++i) {
    auto [out, failed] = run(-1);
    EXPECT_TRUE(out.ok() && program.right(out->at(0))) << out.status();
  }
  const int64_t blocks = live_blocks.load();
  int64_t failures = 0;
  for (int64_t k = 0;; ++k) {
    SCOPED_TRACE(absl::StrCat("allocation ", k, " fails"));
    auto [out, failed] = run(k);
    if (out.ok()) {
      EXPECT_TRUE(program.right(out->at(0)));
    } else {
      EXPECT_EQ(out.status().code(), absl::StatusCode::kResourceExhausted) << out.status();
    }
    // The session is whole.
    auto [again, unused] = run(-1);
    EXPECT_TRUE(again.ok() && program.right(again->at(0))) << again.status();
    if (!failed) break;
    ++failures;
    if (::testing::Test::HasFailure()) break;  // one report, not one per k
  }
  // With one worker every run is on this thread: what its caches keep is
  // the same after each run, and a leak grows with every failed run.
  if (variant.workers == 1) EXPECT_EQ(live_blocks.load(), blocks) << "blocks left allocated by failed runs";
  return failures;
}

TEST(AllocationFailure, EveryAllocationOfARunFailingEndsItResourceExhausted) {
  for (const Program& program : Programs()) {
    for (Variant variant : {Variant{ExecutionMode::kStatic, 1}, Variant{ExecutionMode::kDynamic, 1},
                            Variant{ExecutionMode::kStatic, 2}, Variant{ExecutionMode::kDynamic, 2}}) {
      const int64_t failures = SweepRuns(program, variant);
      // The sweep reached the executor: every run allocates (its workers'
      // state at least).
      EXPECT_GT(failures, 0) << VariantName(program, variant);
      if (::testing::Test::HasFailure()) return;
    }
  }
}

// Session::Create with its k-th allocation failing, for k = 0, 1, ... until
// a Create makes fewer: each ends OK (and the session runs right) or with
// RESOURCE_EXHAUSTED, and leaves nothing allocated. Before, a failure as
// one of Create's Abseil hash tables grew could corrupt the table and end
// the process (base/hash_tables.h).
int64_t SweepCreates(const Program& program, ExecutionMode mode) {
  SCOPED_TRACE(VariantName(program, Variant{mode, 1}));
  SessionOptions options;
  options.mode = mode;
  options.num_workers = 1;
  const Graph graph = program.graph();
  const std::vector<std::string> fetches = {"result"};
  {
    // Registries and caches that fill once are full after this.
    absl::StatusOr<std::unique_ptr<Session>> warm = Session::Create(graph, options);
    EXPECT_TRUE(warm.ok()) << warm.status();
    if (!warm.ok()) return 0;
    EXPECT_TRUE((*warm)->Run(program.feeds, fetches).ok());
  }
  int64_t failures = 0;
  for (int64_t k = 0;; ++k) {
    SCOPED_TRACE(absl::StrCat("allocation ", k, " fails"));
    // The memory reserve (runtime/out_of_memory.h) is kept on purpose
    // between Creates: counted out.
    runtime::FreeMemoryReserve();
    const int64_t blocks = live_blocks.load();
    const int64_t before = injected.load();
    bool failed = false;
    {
      countdown.store(k);
      absl::StatusOr<std::unique_ptr<Session>> session = Session::Create(graph, options);
      countdown.store(-1);
      failed = injected.load() > before;
      if (session.ok()) {
        absl::StatusOr<std::vector<Tensor>> out = (*session)->Run(program.feeds, fetches);
        EXPECT_TRUE(out.ok() && program.right(out->at(0))) << out.status();
      } else {
        EXPECT_EQ(session.status().code(), absl::StatusCode::kResourceExhausted) << session.status();
      }
    }
    runtime::FreeMemoryReserve();
    EXPECT_EQ(live_blocks.load(), blocks) << "blocks left allocated by a failed Create";
    if (!failed) break;
    ++failures;
    if (::testing::Test::HasFailure()) break;
  }
  return failures;
}

TEST(AllocationFailure, EveryAllocationOfASessionCreateFailingEndsItResourceExhausted) {
  for (const Program& program : Programs()) {
    for (ExecutionMode mode : {ExecutionMode::kStatic, ExecutionMode::kDynamic}) {
      const int64_t failures = SweepCreates(program, mode);
      EXPECT_GT(failures, 0) << VariantName(program, Variant{mode, 1});
      if (::testing::Test::HasFailure()) return;
    }
  }
}

}  // namespace
}  // namespace tdf
