// tdf_transport_bench: the MPI transport's round trip (distributed/
// transport.h), µs per token, against a raw MPI ping-pong of the same bytes
// on the same ranks. Run on two ranks (shared memory when on one machine):
//
//   mpirun -np 2 build/release/bench/tdf_transport_bench
//
// Rank 0 runs the benchmarks; rank 1 echoes what it is sent, in the mode
// rank 0 announces before each benchmark.
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include "absl/time/clock.h"
#include "benchmark/benchmark.h"
#include "distributed/transport.h"

namespace tdf {
namespace distributed {
namespace {

// Echo modes, announced on the control communicator.
enum Mode : int { kQuit = 0, kEchoTokens = 1, kEchoRaw = 2 };
constexpr int64_t kStopKey = 1 << 30;

MpiTransport* g_transport = nullptr;
MPI_Comm g_control = MPI_COMM_NULL;  // announcements
MPI_Comm g_raw = MPI_COMM_NULL;      // the raw ping-pong

absl::Time Deadline() { return absl::Now() + absl::Seconds(60); }

// The fastest repetition: the figure least disturbed by other work on a
// shared machine (--benchmark_repetitions=N).
double Min(const std::vector<double>& v) { return v.empty() ? 0.0 : *std::min_element(v.begin(), v.end()); }

void Announce(Mode mode) { MPI_Send(&mode, 1, MPI_INT, 1, 0, g_control); }

// One token to rank 1 and back, per iteration.
void RoundTrips(benchmark::State& state, const WireToken& token) {
  Announce(kEchoTokens);
  for (auto _ : state) {
    if (!g_transport->Send(1, token).ok()) {
      state.SkipWithError("send failed");
      break;
    }
    absl::StatusOr<ReceivedToken> back = g_transport->Receive(Deadline());
    if (!back.ok()) {
      state.SkipWithError("receive failed");
      break;
    }
    benchmark::DoNotOptimize(back->token.value);
  }
  WireToken stop;
  stop.key = kStopKey;
  stop.control = true;
  (void)g_transport->Send(1, stop);
  state.SetItemsProcessed(state.iterations());
  state.counters["bytes"] = static_cast<double>(EncodeToken(token)->size());
}

void BM_TokenRoundTrip_Scalar(benchmark::State& state) {
  WireToken token;
  token.key = 12;
  for (int64_t i = 0; i < state.range(0); ++i) token.tag.push_back(i % 2);
  token.value = Tensor::Scalar<int64_t>(42);
  RoundTrips(state, token);
}
BENCHMARK(BM_TokenRoundTrip_Scalar)->Arg(4)->Arg(32)->Arg(1024)->UseRealTime()->Unit(benchmark::kMicrosecond)->ComputeStatistics("min", Min);

void BM_TokenRoundTrip_Dead(benchmark::State& state) {
  WireToken token;
  token.key = 12;
  token.tag = {0, 1, 0, 1};
  token.dead = true;
  RoundTrips(state, token);
}
BENCHMARK(BM_TokenRoundTrip_Dead)->UseRealTime()->Unit(benchmark::kMicrosecond)->ComputeStatistics("min", Min);

void BM_TokenRoundTrip_Tensor(benchmark::State& state) {
  WireToken token;
  token.key = 3;
  token.tag = {0, 1, 0, 1};
  token.value = *Tensor::Zeros(DType::kFloat32, Shape({state.range(0) / 4}));
  RoundTrips(state, token);
  state.SetBytesProcessed(state.iterations() * state.range(0) * 2);
}
BENCHMARK(BM_TokenRoundTrip_Tensor)->Arg(1 << 10)->Arg(1 << 16)->Arg(1 << 20)->UseRealTime()->Unit(
    benchmark::kMicrosecond)->ComputeStatistics("min", Min);

// Encoding and decoding alone, on rank 0: the transport's own cost per
// token, apart from MPI's.
void BM_WireFormat_EncodeDecode(benchmark::State& state) {
  WireToken token;
  token.key = 12;
  for (int64_t i = 0; i < state.range(0); ++i) token.tag.push_back(i % 2);
  token.value = Tensor::Scalar<int64_t>(42);
  std::vector<char> bytes;
  for (auto _ : state) {
    if (!EncodeToken(token, &bytes).ok()) state.SkipWithError("encode failed");
    absl::StatusOr<WireToken> back = DecodeToken(bytes.data(), bytes.size());
    benchmark::DoNotOptimize(back);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_WireFormat_EncodeDecode)->Arg(4)->Arg(32)->Arg(1024)->Unit(benchmark::kMicrosecond);

// The baseline: MPI_Send / MPI_Recv of as many bytes as a scalar token with
// a 4-label tag takes, no encoding, no probing.
void BM_RawMpiPingPong(benchmark::State& state) {
  Announce(kEchoRaw);
  std::vector<char> buffer(static_cast<size_t>(state.range(0)), 1);
  for (auto _ : state) {
    MPI_Send(buffer.data(), static_cast<int>(buffer.size()), MPI_BYTE, 1, 0, g_raw);
    MPI_Recv(buffer.data(), static_cast<int>(buffer.size()), MPI_BYTE, 1, 0, g_raw, MPI_STATUS_IGNORE);
  }
  char stop = 0;
  MPI_Send(&stop, 0, MPI_BYTE, 1, 0, g_raw);
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_RawMpiPingPong)->Arg(16)->Arg(1 << 10)->UseRealTime()->Unit(benchmark::kMicrosecond)->ComputeStatistics("min", Min);

int Echo() {
  for (;;) {
    int mode = kQuit;
    MPI_Recv(&mode, 1, MPI_INT, 0, 0, g_control, MPI_STATUS_IGNORE);
    if (mode == kQuit) return 0;
    if (mode == kEchoTokens) {
      for (;;) {
        absl::StatusOr<ReceivedToken> r = g_transport->Receive(Deadline());
        if (!r.ok()) {
          std::fprintf(stderr, "%s\n", r.status().ToString().c_str());
          return 1;
        }
        if (r->token.key == kStopKey) break;
        if (!g_transport->Send(0, r->token).ok()) return 1;
      }
    } else {
      std::vector<char> buffer(1 << 20);
      for (;;) {
        MPI_Status status;
        MPI_Recv(buffer.data(), static_cast<int>(buffer.size()), MPI_BYTE, 0, 0, g_raw, &status);
        int count = 0;
        MPI_Get_count(&status, MPI_BYTE, &count);
        if (count == 0) break;
        MPI_Send(buffer.data(), count, MPI_BYTE, 0, 0, g_raw);
      }
    }
  }
}

}  // namespace
}  // namespace distributed
}  // namespace tdf

int main(int argc, char** argv) {
  using namespace tdf::distributed;  // NOLINT: a benchmark's main
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size != 2) {
    if (rank == 0) std::fprintf(stderr, "tdf_transport_bench: run on 2 ranks (mpirun -np 2), not %d\n", size);
    MPI_Finalize();
    return 2;
  }
  MPI_Comm_dup(MPI_COMM_WORLD, &g_control);
  MPI_Comm_dup(MPI_COMM_WORLD, &g_raw);
  absl::StatusOr<std::unique_ptr<MpiTransport>> transport = MpiTransport::Create();
  if (!transport.ok()) {
    std::fprintf(stderr, "%s\n", transport.status().ToString().c_str());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  g_transport = transport->get();
  int result = 0;
  if (rank == 0) {
    benchmark::Initialize(&argc, argv);
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    Announce(kQuit);
  } else {
    result = Echo();
  }
  absl::Status closed = (*transport)->Close([](ReceivedToken&&) {}, absl::Now() + absl::Seconds(30));
  if (!closed.ok()) std::fprintf(stderr, "%s\n", closed.ToString().c_str());
  transport->reset();
  MPI_Comm_free(&g_control);
  MPI_Comm_free(&g_raw);
  MPI_Finalize();
  return result != 0 || !closed.ok();
}
