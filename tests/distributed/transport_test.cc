// The MPI transport (distributed/transport.h) and its wire format. Runs
// under mpirun (tests/CMakeLists.txt: 2 and 3 ranks, loopback only): every
// rank runs every test, in order, and each test is collective.
//
// TDF_TEST_MPI_INIT chooses who initializes MPI: unset, the transport does
// (and finalizes it at exit); "multiple", this main does with
// MPI_THREAD_MULTIPLE (the application keeps control); "funneled", this main
// does with MPI_THREAD_FUNNELED, which the transport must refuse.
#include "distributed/transport.h"

#include <dlfcn.h>
#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "distributed/wire_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tdf {
namespace distributed {
namespace {

using ::testing::HasSubstr;

std::string InitMode() {
  const char* mode = std::getenv("TDF_TEST_MPI_INIT");
  return mode == nullptr ? "" : mode;
}

absl::Time Deadline() { return absl::Now() + absl::Seconds(20); }

std::unique_ptr<MpiTransport> CreateOrDie() {
  absl::StatusOr<std::unique_ptr<MpiTransport>> t = MpiTransport::Create();
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? *std::move(t) : nullptr;
}

void CloseOrFail(MpiTransport& t) {
  int late = 0;
  absl::Status s = t.Close([&](ReceivedToken&&) { ++late; }, Deadline());
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_EQ(late, 0);
}

ReceivedToken ReceiveOrDie(MpiTransport& t) {
  absl::StatusOr<ReceivedToken> r = t.Receive(Deadline());
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *std::move(r) : ReceivedToken{};
}

// ---------------------------------------------------------------------------
// Wire format (no communication).

WireToken Data(int64_t key, WireTag tag, Tensor value) {
  WireToken t;
  t.key = key;
  t.tag = std::move(tag);
  t.value = std::move(value);
  return t;
}

WireToken RoundTrip(const WireToken& in) {
  absl::StatusOr<std::vector<char>> bytes = EncodeToken(in);
  EXPECT_TRUE(bytes.ok()) << bytes.status();
  if (!bytes.ok()) return {};
  absl::StatusOr<WireToken> out = DecodeToken(bytes->data(), bytes->size());
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? *std::move(out) : WireToken{};
}

TEST(WireFormat, RoundTripsEveryKindOfToken) {
  WireToken scalar = RoundTrip(Data(3, {0, 1, 127, 128, 1ll << 40}, Tensor::Scalar<double>(2.5)));
  EXPECT_EQ(scalar.key, 3);
  EXPECT_EQ(scalar.tag, (WireTag{0, 1, 127, 128, 1ll << 40}));
  EXPECT_FALSE(scalar.dead);
  EXPECT_TRUE(scalar.value.Equals(Tensor::Scalar<double>(2.5)));
  Tensor m = *Tensor::FromVector<float>({1, 2, 3, 4, 5, 6}, Shape({2, 3}));
  EXPECT_TRUE(RoundTrip(Data(0, {}, m)).value.Equals(m));
  Tensor empty = *Tensor::Zeros(DType::kInt32, Shape({0, 5}));
  EXPECT_TRUE(RoundTrip(Data(9, {4}, empty)).value.Equals(empty));
  Tensor flags = Tensor::Vector<bool>({true, false, true});
  EXPECT_TRUE(RoundTrip(Data(1, {}, flags)).value.Equals(flags));
  WireToken dead;
  dead.key = 5;
  dead.dead = true;
  WireToken d = RoundTrip(dead);
  EXPECT_TRUE(d.dead);
  EXPECT_FALSE(d.value.valid());
  WireToken go;
  go.control = true;
  go.tag = {2};
  EXPECT_TRUE(RoundTrip(go).control);
}

TEST(WireFormat, RejectsBadTokens) {
  WireToken no_value;
  EXPECT_EQ(EncodeToken(no_value).status().code(), absl::StatusCode::kInvalidArgument);
  WireToken dead_with_value = Data(0, {}, Tensor::Scalar<int64_t>(1));
  dead_with_value.dead = true;
  EXPECT_EQ(EncodeToken(dead_with_value).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(EncodeToken(Data(-1, {}, Tensor::Scalar<int64_t>(1))).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(EncodeToken(Data(0, {1, -2}, Tensor::Scalar<int64_t>(1))).status().message(),
              HasSubstr("tag label 1 must be >= 0"));
}

// Every truncation and every single-byte corruption of valid messages ends
// in a status or a token, never a crash or a huge allocation.
TEST(WireFormat, MalformedMessagesAreErrors) {
  const std::vector<WireToken> tokens = {
      Data(300, {1, 2, 3, 200000}, *Tensor::FromVector<int64_t>({7, 8, 9}, Shape({3}))),
      Data(1, {}, Tensor::Scalar<float>(1.5f)), Data(2, {5}, Tensor::Vector<bool>({true, false}))};
  int errors = 0;
  for (const WireToken& token : tokens) {
    const std::vector<char> bytes = *EncodeToken(token);
    for (size_t cut = 0; cut < bytes.size(); ++cut) {
      absl::StatusOr<WireToken> t = DecodeToken(bytes.data(), cut);
      EXPECT_FALSE(t.ok()) << "truncated to " << cut;
      errors += !t.ok();
    }
    for (size_t i = 0; i < bytes.size(); ++i) {
      for (int v : {0x00, 0x01, 0x7F, 0x80, 0xFF}) {
        std::vector<char> bad = bytes;
        bad[i] = static_cast<char>(v);
        absl::StatusOr<WireToken> t = DecodeToken(bad.data(), bad.size());
        if (!t.ok()) {
          EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument) << t.status();
          ++errors;
        }
      }
    }
  }
  EXPECT_GT(errors, 0);
  // A tag length that the message cannot hold.
  const char huge_tag[] = {1, 2, 0, '\xff', '\xff', '\xff', '\xff', 0x0f};
  EXPECT_THAT(DecodeToken(huge_tag, sizeof(huge_tag)).status().message(), HasSubstr("tag length"));
}

// ---------------------------------------------------------------------------
// The transport, collectively on every rank.

TEST(Transport, ScalarTokensGoRoundTheRing) {
  std::unique_ptr<MpiTransport> t = CreateOrDie();
  ASSERT_NE(t, nullptr);
  const int n = t->size(), me = t->rank();
  ASSERT_GE(n, 2);
  const int next = (me + 1) % n, prev = (me + n - 1) % n;
  ASSERT_TRUE(t->Send(next, Data(10, {0, static_cast<int64_t>(me)}, Tensor::Scalar<int64_t>(100 + me))).ok());
  ASSERT_TRUE(t->Send(next, Data(11, {1}, Tensor::Scalar<double>(me + 0.5))).ok());
  ASSERT_TRUE(t->Send(next, Data(12, {}, Tensor::Scalar<bool>(me % 2 == 0))).ok());
  ASSERT_TRUE(t->Send(next, Data(13, {}, Tensor::Scalar<int32_t>(-me))).ok());
  ASSERT_TRUE(t->Send(next, Data(14, {}, Tensor::Scalar<float>(1.25f * me))).ok());
  std::map<int64_t, ReceivedToken> got;
  for (int i = 0; i < 5; ++i) {
    ReceivedToken r = ReceiveOrDie(*t);
    EXPECT_EQ(r.source_rank, prev);
    got[r.token.key] = std::move(r);
  }
  ASSERT_EQ(got.size(), 5u);
  EXPECT_EQ(got[10].token.tag, (WireTag{0, prev}));
  EXPECT_TRUE(got[10].token.value.Equals(Tensor::Scalar<int64_t>(100 + prev)));
  EXPECT_TRUE(got[11].token.value.Equals(Tensor::Scalar<double>(prev + 0.5)));
  EXPECT_TRUE(got[12].token.value.Equals(Tensor::Scalar<bool>(prev % 2 == 0)));
  EXPECT_TRUE(got[13].token.value.Equals(Tensor::Scalar<int32_t>(-prev)));
  EXPECT_TRUE(got[14].token.value.Equals(Tensor::Scalar<float>(1.25f * prev)));
  CloseOrFail(*t);
  const TransportCounters c = t->counters();
  EXPECT_EQ(c.tokens_sent, 5);
  EXPECT_EQ(c.tokens_received, 5);
  EXPECT_GT(c.bytes_sent, 0);
}

Tensor Filled(DType dtype, Shape shape, int seed) {
  Tensor t = *Tensor::Zeros(dtype, shape);
  DispatchDType(dtype, [&](auto zero) {
    using T = decltype(zero);
    T* p = t.mutable_data<T>();
    for (int64_t i = 0; i < t.num_elements(); ++i) p[i] = static_cast<T>((i * 7 + seed) % 13);
  });
  return t;
}

// Tensors of every rank and size: a 4 MB one goes by MPI's rendezvous
// protocol, which completes only while the receiver receives.
TEST(Transport, TensorTokensToEveryOtherRank) {
  std::unique_ptr<MpiTransport> t = CreateOrDie();
  ASSERT_NE(t, nullptr);
  const int n = t->size(), me = t->rank();
  const std::vector<std::pair<DType, Shape>> kinds = {{DType::kFloat32, Shape({3, 4})},
                                                      {DType::kInt32, Shape({17})},
                                                      {DType::kFloat64, Shape({0, 5})},
                                                      {DType::kBool, Shape({2, 2, 2})},
                                                      {DType::kFloat32, Shape({1024, 1024})}};
  for (int dst = 0; dst < n; ++dst) {
    if (dst == me) continue;
    for (size_t k = 0; k < kinds.size(); ++k)
      ASSERT_TRUE(t->Send(dst, Data(static_cast<int64_t>(k), {static_cast<int64_t>(me)},
                                    Filled(kinds[k].first, kinds[k].second, me)))
                      .ok());
  }
  std::set<std::pair<int, int64_t>> seen;
  for (int i = 0; i < static_cast<int>(kinds.size()) * (n - 1); ++i) {
    ReceivedToken r = ReceiveOrDie(*t);
    ASSERT_GE(r.token.key, 0);
    ASSERT_LT(r.token.key, static_cast<int64_t>(kinds.size()));
    EXPECT_TRUE(seen.insert({r.source_rank, r.token.key}).second);
    EXPECT_EQ(r.token.tag, (WireTag{r.source_rank}));
    const auto& [dtype, shape] = kinds[r.token.key];
    EXPECT_TRUE(r.token.value.Equals(Filled(dtype, shape, r.source_rank))) << "key " << r.token.key;
  }
  CloseOrFail(*t);
}

TEST(Transport, DeadAndControlTokensCarryNoValue) {
  std::unique_ptr<MpiTransport> t = CreateOrDie();
  ASSERT_NE(t, nullptr);
  const int next = (t->rank() + 1) % t->size();
  WireToken dead;
  dead.key = 1;
  dead.tag = {3, 1, 4};
  dead.dead = true;
  WireToken go;
  go.key = 2;
  go.control = true;
  WireToken dead_go = go;
  dead_go.key = 3;
  dead_go.dead = true;
  for (const WireToken& w : {dead, go, dead_go}) ASSERT_TRUE(t->Send(next, w).ok());
  std::map<int64_t, WireToken> got;
  for (int i = 0; i < 3; ++i) {
    ReceivedToken r = ReceiveOrDie(*t);
    got[r.token.key] = std::move(r.token);
  }
  EXPECT_TRUE(got[1].dead);
  EXPECT_FALSE(got[1].control);
  EXPECT_EQ(got[1].tag, (WireTag{3, 1, 4}));
  EXPECT_FALSE(got[1].value.valid());
  EXPECT_TRUE(got[2].control);
  EXPECT_FALSE(got[2].dead);
  EXPECT_TRUE(got[3].control);
  EXPECT_TRUE(got[3].dead);
  CloseOrFail(*t);
}

// A tag as deep as a recursion of 100000 calls, labels of every size.
TEST(Transport, LongTagPaths) {
  std::unique_ptr<MpiTransport> t = CreateOrDie();
  ASSERT_NE(t, nullptr);
  const int next = (t->rank() + 1) % t->size();
  WireTag tag;
  for (int64_t i = 0; i < 100000; ++i) tag.push_back(i % 3 == 0 ? i : (i * 2654435761ll) % (1ll << 50));
  ASSERT_TRUE(t->Send(next, Data(77, tag, Tensor::Scalar<int64_t>(5))).ok());
  ReceivedToken r = ReceiveOrDie(*t);
  EXPECT_EQ(r.token.key, 77);
  EXPECT_TRUE(r.token.tag == tag);
  EXPECT_TRUE(r.token.value.Equals(Tensor::Scalar<int64_t>(5)));
  CloseOrFail(*t);
}

// Four threads per rank send to every other rank while two threads per rank
// poll: every token arrives exactly once, intact.
TEST(Transport, ManyConcurrentSendersAndPollers) {
  std::unique_ptr<MpiTransport> t = CreateOrDie();
  ASSERT_NE(t, nullptr);
  const int n = t->size(), me = t->rank();
  constexpr int kSenders = 4, kPerPeer = 500, kPollers = 2;
  const int expected = kSenders * kPerPeer * (n - 1);
  std::atomic<int> received{0};
  std::atomic<bool> failed{false};
  std::mutex mu;
  std::set<std::tuple<int, int64_t, int64_t>> seen;  // (source, sender thread, i)
  std::vector<std::thread> threads;
  for (int s = 0; s < kSenders; ++s) {
    threads.emplace_back([&, s] {
      for (int i = 0; i < kPerPeer; ++i) {
        for (int dst = 0; dst < n; ++dst) {
          if (dst == me) continue;
          Tensor v = i % 50 == 0 ? Filled(DType::kFloat64, Shape({64}), i) : Tensor::Scalar<int64_t>(i * 1000 + s);
          if (!t->Send(dst, Data(s, {static_cast<int64_t>(me), s, i}, v)).ok()) failed = true;
        }
      }
    });
  }
  for (int p = 0; p < kPollers; ++p) {
    threads.emplace_back([&] {
      const absl::Time deadline = Deadline();
      while (received.load() < expected && absl::Now() < deadline && !failed) {
        absl::StatusOr<int> got = t->Poll([&](ReceivedToken&& r) {
          const int64_t s = r.token.key, i = r.token.tag.size() == 3 ? r.token.tag[2] : -1;
          const bool ok = r.token.tag.size() == 3 && r.token.tag[0] == r.source_rank && r.token.tag[1] == s &&
                          (i % 50 == 0 ? r.token.value.Equals(Filled(DType::kFloat64, Shape({64}), i))
                                       : r.token.value.Equals(Tensor::Scalar<int64_t>(i * 1000 + s)));
          if (!ok) failed = true;
          std::lock_guard<std::mutex> lock(mu);
          if (!seen.insert({r.source_rank, s, i}).second) failed = true;
          received.fetch_add(1);
        });
        if (!got.ok()) failed = true;
        if (got.ok() && *got == 0) std::this_thread::yield();
      }
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_FALSE(failed.load());
  EXPECT_EQ(received.load(), expected);
  EXPECT_EQ(static_cast<int>(seen.size()), expected);
  CloseOrFail(*t);
}

// Close delivers what was sent but not yet received, to `late`.
TEST(Transport, CloseReceivesTokensStillInFlight) {
  std::unique_ptr<MpiTransport> t = CreateOrDie();
  ASSERT_NE(t, nullptr);
  const int next = (t->rank() + 1) % t->size();
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(t->Send(next, Data(i, {}, Tensor::Scalar<int64_t>(i))).ok());
  int late = 0;
  EXPECT_TRUE(t->Close([&](ReceivedToken&&) { ++late; }, Deadline()).ok());
  EXPECT_EQ(late, 10);
  EXPECT_EQ(t->Send(next, Data(0, {}, Tensor::Scalar<int64_t>(0))).code(), absl::StatusCode::kFailedPrecondition);
}

TEST(Transport, EndRunReceivesTheRunsTokensAndFailures) {
  std::unique_ptr<MpiTransport> t = CreateOrDie();
  ASSERT_NE(t, nullptr);
  const int next = (t->rank() + 1) % t->size();
  for (int run = 0; run < 3; ++run) {
    // Tokens nobody polled, and on rank 0 a failure for every other rank.
    for (int i = 0; i < 5; ++i) ASSERT_TRUE(t->Send(next, Data(i, {}, Tensor::Scalar<int64_t>(i))).ok());
    if (t->rank() == 0)
      for (int p = 1; p < t->size(); ++p)
        ASSERT_TRUE(t->SendFailure(p, absl::InternalError(absl::StrCat("rank 0: run ", run))).ok());
    int late = 0;
    std::vector<std::pair<int, absl::Status>> failures;
    absl::Status ended = t->EndRun([&](ReceivedToken&&) { ++late; }, &failures, Deadline());
    ASSERT_TRUE(ended.ok()) << ended;
    EXPECT_EQ(late, 5);
    if (t->rank() == 0) {
      EXPECT_TRUE(failures.empty());
    } else {
      ASSERT_EQ(failures.size(), 1u);
      EXPECT_EQ(failures[0].first, 0);
      EXPECT_EQ(failures[0].second, absl::InternalError(absl::StrCat("rank 0: run ", run)));
    }
  }
  // Every rank agrees on the lowest failing rank's status.
  absl::Status agreed = t->AgreeOnStatus(t->rank() == t->size() - 1 ? absl::NotFoundError("no such thing")
                                                                     : absl::OkStatus());
  EXPECT_EQ(agreed, absl::NotFoundError(absl::StrCat("rank ", t->size() - 1, ": no such thing")));
  CloseOrFail(*t);
}

// One probe per message: tokens up to a failure, the failure, then the
// tokens sent after it at the next poll.
TEST(Transport, PollTokensAndFailureStopsAtAFailure) {
  std::unique_ptr<MpiTransport> t = CreateOrDie();
  ASSERT_NE(t, nullptr);
  if (t->rank() == 0) {
    for (int p = 1; p < t->size(); ++p) {
      for (int i = 0; i < 3; ++i) ASSERT_TRUE(t->Send(p, Data(i, {}, Tensor::Scalar<int64_t>(i))).ok());
      ASSERT_TRUE(t->SendFailure(p, absl::AbortedError("rank 0: stop")).ok());
      for (int i = 3; i < 5; ++i) ASSERT_TRUE(t->Send(p, Data(i, {}, Tensor::Scalar<int64_t>(i))).ok());
    }
  } else {
    std::vector<int64_t> keys;
    std::pair<int, absl::Status> failure{-1, absl::OkStatus()};
    const absl::Time deadline = Deadline();
    while (failure.second.ok() && absl::Now() < deadline) {
      absl::StatusOr<int> got =
          t->PollTokensAndFailure([&](ReceivedToken&& r) { keys.push_back(r.token.key); }, &failure);
      ASSERT_TRUE(got.ok()) << got.status();
    }
    EXPECT_EQ(keys, (std::vector<int64_t>{0, 1, 2}));
    EXPECT_EQ(failure.first, 0);
    EXPECT_EQ(failure.second, absl::AbortedError("rank 0: stop"));
    failure = {-1, absl::OkStatus()};
    while (keys.size() < 5 && absl::Now() < deadline) {
      absl::StatusOr<int> got =
          t->PollTokensAndFailure([&](ReceivedToken&& r) { keys.push_back(r.token.key); }, &failure);
      ASSERT_TRUE(got.ok()) << got.status();
    }
    EXPECT_EQ(keys, (std::vector<int64_t>{0, 1, 2, 3, 4}));
    EXPECT_TRUE(failure.second.ok()) << failure.second;
  }
  // Nothing was left over: EndRun receives no token and no failure.
  int late = 0;
  std::vector<std::pair<int, absl::Status>> failures;
  ASSERT_TRUE(t->EndRun([&](ReceivedToken&&) { ++late; }, &failures, Deadline()).ok());
  EXPECT_EQ(late, 0);
  EXPECT_TRUE(failures.empty());
  CloseOrFail(*t);
}

TEST(Transport, ErrorsNameTheRank) {
  std::unique_ptr<MpiTransport> t = CreateOrDie();
  ASSERT_NE(t, nullptr);
  const std::string me = absl::StrCat("rank ", t->rank(), ": ");
  absl::Status s = t->Send(t->size(), Data(0, {}, Tensor::Scalar<int64_t>(1)));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr(me));
  s = t->Send((t->rank() + 1) % t->size(), WireToken{});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr(me));
  // Nothing was sent to anyone: a receive ends at its deadline.
  absl::StatusOr<ReceivedToken> r = t->Receive(absl::Now() + absl::Milliseconds(30));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(r.status().message(), HasSubstr(me));
  CloseOrFail(*t);
}

// Only in the TDF_TEST_MPI_INIT=funneled run: MPI initialized by the
// application below MPI_THREAD_MULTIPLE is refused, clearly.
TEST(ThreadLevel, ApplicationInitializedMpiWithoutThreadsIsRefused) {
  if (InitMode() != "funneled") GTEST_SKIP() << "run with TDF_TEST_MPI_INIT=funneled";
  absl::StatusOr<std::unique_ptr<MpiTransport>> t = MpiTransport::Create();
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(t.status().message(), HasSubstr("MPI_THREAD_FUNNELED"));
  EXPECT_THAT(t.status().message(), HasSubstr("needs MPI_THREAD_MULTIPLE"));
  int rank = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  EXPECT_THAT(t.status().message(), HasSubstr(absl::StrCat("rank ", rank, ": ")));
}

TEST(ThreadLevel, WhoInitializedMpi) {
  int initialized = 0, provided = 0;
  MPI_Initialized(&initialized);
  if (InitMode().empty()) {
    // The transport tests above initialized it, for threads.
    ASSERT_TRUE(initialized);
  }
  if (initialized) {
    MPI_Query_thread(&provided);
    EXPECT_EQ(provided, InitMode() == "funneled" ? MPI_THREAD_FUNNELED : MPI_THREAD_MULTIPLE);
  }
}

}  // namespace
}  // namespace distributed
}  // namespace tdf

// LeakSanitizer reports at exit the allocations that Open MPI's PMIx keeps
// (tools/lsan_mpi.supp suppresses them by library name). MPI_Finalize
// unloads PMIx with Open MPI's plugins, and a report on an unloaded library
// cannot name it: keep it loaded until the process ends.
void KeepPmixLoadedForLeakReports() {
#if defined(__SANITIZE_ADDRESS__)
  (void)dlopen("libpmix.so.2", RTLD_LAZY | RTLD_NOLOAD | RTLD_NODELETE);
#endif
}

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  const std::string mode = tdf::distributed::InitMode();
  bool owned = false;
  if (mode == "multiple" || mode == "funneled") {
    int provided = 0;
    MPI_Init_thread(&argc, &argv, mode == "multiple" ? MPI_THREAD_MULTIPLE : MPI_THREAD_FUNNELED, &provided);
    owned = true;
  } else if (!mode.empty()) {
    std::fprintf(stderr, "TDF_TEST_MPI_INIT=%s: want unset, multiple or funneled\n", mode.c_str());
    return 2;
  }
  const int result = RUN_ALL_TESTS();
  KeepPmixLoadedForLeakReports();
  if (owned) MPI_Finalize();
  return result;
}
