// File: distributed/transport.h (internal)
//
// Tokens between the ranks of an MPI job (design.md §8): each Send of a
// partitioned graph (tdf/partition.h) becomes one non-blocking MPI message
// (distributed/wire_format.h) to the rank of its Recv; receiving is a
// progress loop of matched probes (MPI_Improbe + MPI_Mrecv), which any
// number of threads may run at once. docs/distributed.md says how the
// executor uses it.
//
//   TDF_ASSIGN_OR_RETURN(std::unique_ptr<MpiTransport> t, MpiTransport::Create());  // collective
//   WireToken token;
//   token.key = 7;
//   token.tag = {0, 3};
//   token.value = Tensor::Scalar<int64_t>(42);
//   TDF_RETURN_IF_ERROR(t->Send(/*dst_rank=*/1, token));
//   ...
//   TDF_ASSIGN_OR_RETURN(int n, t->Poll([&](ReceivedToken&& r) { Deliver(r); }));
//   TDF_RETURN_IF_ERROR(t->Close([&](ReceivedToken&& r) { Deliver(r); }, deadline));  // collective
//
// MPI ownership. If MPI is not initialized, Create initializes it with
// MPI_THREAD_MULTIPLE and finalizes it at process exit. An application that
// initialized MPI itself keeps control of it (tdf never finalizes it), but
// must have asked for MPI_THREAD_MULTIPLE: workers send and poll from
// several threads; with a lower level Create fails with FailedPrecondition.
// The transport works on its own duplicate of the communicator, so its
// messages never match the application's.
//
// Errors are absl::Status values that name this rank ("rank 1: ..."); MPI
// errors on the transport's communicator return codes (MPI_ERRORS_RETURN)
// instead of aborting the job.
//
// Thread safety: Send, Poll and Receive may be called concurrently from any
// threads; Create and Close are collective (every rank of the communicator
// calls them, each from one thread) and must not overlap other calls.
#ifndef TDF_SRC_DISTRIBUTED_TRANSPORT_H_
#define TDF_SRC_DISTRIBUTED_TRANSPORT_H_

#include <mpi.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "distributed/wire_format.h"

namespace tdf {
namespace distributed {

struct ReceivedToken {
  int source_rank = -1;
  WireToken token;
};

struct TransportOptions {
  // The ranks of the run; duplicated by Create (collective over it).
  MPI_Comm comm = MPI_COMM_WORLD;
};

struct TransportCounters {
  int64_t tokens_sent = 0;
  int64_t bytes_sent = 0;
  int64_t tokens_received = 0;
  int64_t bytes_received = 0;
};

class MpiTransport {
 public:
  using Handler = absl::FunctionRef<void(ReceivedToken&&)>;

  // Collective. See the file comment for MPI initialization.
  static absl::StatusOr<std::unique_ptr<MpiTransport>> Create(const TransportOptions& options = {});
  // Without a successful Close, sends still in flight are detached from MPI
  // (MPI_Request_free) and their buffers kept until process exit: a failed
  // run may leave a peer that never receives them.
  ~MpiTransport();
  MpiTransport(const MpiTransport&) = delete;
  MpiTransport& operator=(const MpiTransport&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }

  // Encodes the token and starts sending it; returns without waiting for
  // the receiver. Errors: InvalidArgument for a bad destination or token
  // (wire_format.h), FailedPrecondition after Close, Internal for MPI errors.
  absl::Status Send(int dst_rank, const WireToken& token);

  // Receives every token that has arrived, up to `max_tokens`, and hands
  // each to `handler` (on this thread); returns how many. Also completes
  // finished sends. Never blocks on a peer.
  absl::StatusOr<int> Poll(Handler handler, int max_tokens = 1 << 30);

  // Poll and PollFailure with one matched probe per message, whatever its
  // kind (a run's waiting thread polls this in a loop: a second probe per
  // poll would double the time a token waits to be seen). Hands tokens to
  // `handler` until a failure comes: then `failure` gets its source and
  // status, and the tokens after it stay for the next poll.
  absl::StatusOr<int> PollTokensAndFailure(Handler handler, std::pair<int, absl::Status>* failure);

  // Waits for one token; DeadlineExceeded (naming this rank) if none has
  // arrived by `deadline`.
  absl::StatusOr<ReceivedToken> Receive(absl::Time deadline);
  // The same from one rank only: its tokens arrive in the order it sent them.
  absl::StatusOr<ReceivedToken> ReceiveFrom(int source_rank, absl::Time deadline);

  // Collective: ends the transport on every rank. Waits until this rank's
  // sends have completed, learns from every rank how many tokens it sent
  // here, and receives those still in flight (handing them to `late`);
  // then frees the communicator. After a run every token should already
  // have been received: `late` seeing one is the caller's to judge. Fails
  // with DeadlineExceeded, naming the ranks that did not take part or whose
  // tokens did not arrive, if `deadline` passes first.
  absl::Status Close(Handler late, absl::Time deadline);

  TransportCounters counters() const;

  // Failures of a run, between ranks (their own MPI tag: they never mix
  // with tokens). A rank whose run fails tells every other rank, so that
  // their runs end too, with its status. Non-blocking.
  absl::Status SendFailure(int dst_rank, const absl::Status& failure);
  // A failure some rank sent, if one has arrived (its source and status).
  absl::StatusOr<bool> PollFailure(int* source_rank, absl::Status* failure);

  // Collective, once at the end of every run: every rank learns how many
  // tokens and failures each other rank has sent it so far and receives
  // exactly those still in flight (tokens to `late`, failures into
  // `failures`, by source rank). No rank starts its next run before every
  // rank has entered this one's end, so nothing of the next run is taken.
  // DeadlineExceeded if some rank does not join by `deadline`; the
  // transport is then out of step and should be closed. The same
  // exchange carries each rank's `figures` (as many on every rank): on
  // success `all_figures` holds every rank's, rank by rank.
  absl::Status EndRun(Handler late, std::vector<std::pair<int, absl::Status>>* failures, absl::Time deadline,
                      absl::Span<const int64_t> figures = {}, std::vector<int64_t>* all_figures = nullptr);

  // Collective and blocking (for session creation, not runs): OK if every
  // rank's `local` is OK, else the lowest failing rank's status, prefixed
  // with that rank, on every rank.
  absl::Status AgreeOnStatus(const absl::Status& local);

 private:
  MpiTransport(MPI_Comm comm, int rank, int size);
  absl::Status MpiError(int code, absl::string_view call) const;
  // Tests sends in flight and frees the finished ones. With `wait`, takes
  // the lock even if another thread holds it.
  absl::Status ReapSends(bool wait);
  // One matched probe and receive; false if nothing was waiting.
  absl::StatusOr<bool> ReceiveOne(ReceivedToken* out, int source = MPI_ANY_SOURCE);
  absl::StatusOr<bool> ReceiveFailure(int source, int* source_rank, absl::Status* failure);
  // The receives of a message MPI_Improbe matched, by its kind.
  absl::Status ReceiveMatchedToken(MPI_Message* message, const MPI_Status& status, ReceivedToken* out);
  absl::Status ReceiveMatchedFailure(MPI_Message* message, const MPI_Status& status, int* source_rank,
                                     absl::Status* failure);

  MPI_Comm comm_;
  const int rank_;
  const int size_;
  std::atomic<bool> closed_{false};

  // Sends MPI has not finished with: requests and their buffers, index for
  // index (MPI_Testsome wants the requests contiguous).
  std::mutex send_mu_;
  std::vector<MPI_Request> send_requests_;        // guarded by send_mu_
  std::vector<std::vector<char>> send_buffers_;   // guarded by send_mu_
  std::atomic<int64_t> sends_in_flight_{0};

  std::vector<std::atomic<int64_t>> sent_to_;        // tokens, by destination
  std::vector<std::atomic<int64_t>> received_from_;  // tokens, by source
  std::vector<std::atomic<int64_t>> failures_sent_to_;        // by destination
  std::vector<std::atomic<int64_t>> failures_received_from_;  // by source
  std::atomic<int64_t> bytes_sent_{0};
  std::atomic<int64_t> bytes_received_{0};
};

}  // namespace distributed
}  // namespace tdf

#endif  // TDF_SRC_DISTRIBUTED_TRANSPORT_H_
