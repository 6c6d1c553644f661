#include "distributed/transport.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <string>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tdf {
namespace distributed {
namespace {

// The MPI tags of token and failure messages on the transport's own
// communicator.
constexpr int kTokenTag = 1;
constexpr int kFailureTag = 2;

std::mutex g_init_mu;

const char* ThreadLevelName(int level) {
  switch (level) {
    case MPI_THREAD_SINGLE: return "MPI_THREAD_SINGLE";
    case MPI_THREAD_FUNNELED: return "MPI_THREAD_FUNNELED";
    case MPI_THREAD_SERIALIZED: return "MPI_THREAD_SERIALIZED";
    case MPI_THREAD_MULTIPLE: return "MPI_THREAD_MULTIPLE";
    default: return "an unknown thread level";
  }
}

std::string ErrorString(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) return absl::StrCat("MPI error ", code);
  return std::string(text, length);
}

std::string WorldRankPrefix() {
  int initialized = 0, finalized = 0, rank = -1;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized && MPI_Comm_rank(MPI_COMM_WORLD, &rank) == MPI_SUCCESS)
    return absl::StrCat("rank ", rank, ": ");
  return "";
}

void FinalizeAtExit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

// Initializes MPI (then tdf owns it and finalizes it at exit) or checks that
// the application initialized it for threads.
absl::Status EnsureMpiForThreads() {
  std::lock_guard<std::mutex> lock(g_init_mu);
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (finalized) return absl::FailedPreconditionError("MPI has already been finalized; tdf cannot use it");
  int provided = MPI_THREAD_SINGLE;
  if (!initialized) {
    const int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
    if (rc != MPI_SUCCESS) return absl::InternalError(absl::StrCat("MPI_Init_thread failed: ", ErrorString(rc)));
    std::atexit(FinalizeAtExit);
    if (provided < MPI_THREAD_MULTIPLE)
      return absl::FailedPreconditionError(
          absl::StrCat(WorldRankPrefix(), "this MPI library provides only ", ThreadLevelName(provided),
                       "; tdf's transport sends and receives from several worker threads and needs "
                       "MPI_THREAD_MULTIPLE"));
    return absl::OkStatus();
  }
  MPI_Query_thread(&provided);
  if (provided < MPI_THREAD_MULTIPLE)
    return absl::FailedPreconditionError(absl::StrCat(
        WorldRankPrefix(), "the application initialized MPI with ", ThreadLevelName(provided),
        "; tdf's transport sends and receives from several worker threads and needs MPI_THREAD_MULTIPLE: "
        "initialize MPI with MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided)"));
  return absl::OkStatus();
}

// Buffers of sends a destroyed transport could not finish: MPI may still
// read them, so they stay (reachable) until the process ends.
std::vector<std::vector<char>>& DetachedBuffers() {
  static auto* const buffers = new std::vector<std::vector<char>>;
  return *buffers;
}

// Buffers of a non-blocking collective (a run's or a close's count
// exchange) that ran past its deadline: another rank may still join it, and
// MPI then writes into them. A collective cannot be cancelled or freed, so
// they stay (reachable) until the process ends; freed, they were heap
// corruption (a rank that joined a run's end after the others' timeout).
void AbandonExchange(std::vector<int64_t>* sent, std::vector<int64_t>* got) {
  static auto* const buffers = new std::vector<std::vector<int64_t>>;
  static auto* const mu = new std::mutex;
  std::lock_guard<std::mutex> lock(*mu);
  buffers->push_back(std::move(*sent));
  buffers->push_back(std::move(*got));
}

// Waits politely: spinning first (a token usually arrives within
// microseconds), then yielding the core (ranks may share cores), then
// sleeping briefly.
class Backoff {
 public:
  void Wait() {
    ++rounds_;
    if (rounds_ < 64) return;
    if (rounds_ < 4096) {
      std::this_thread::yield();
      return;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }

 private:
  int64_t rounds_ = 0;
};

}  // namespace

absl::StatusOr<std::unique_ptr<MpiTransport>> MpiTransport::Create(const TransportOptions& options) {
  absl::Status ready = EnsureMpiForThreads();
  if (!ready.ok()) return ready;
  MPI_Comm comm = MPI_COMM_NULL;
  int rc = MPI_Comm_dup(options.comm, &comm);
  if (rc != MPI_SUCCESS)
    return absl::InternalError(absl::StrCat(WorldRankPrefix(), "MPI_Comm_dup failed: ", ErrorString(rc)));
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  int rank = 0, size = 0;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  return std::unique_ptr<MpiTransport>(new MpiTransport(comm, rank, size));
}

MpiTransport::MpiTransport(MPI_Comm comm, int rank, int size)
    : comm_(comm), rank_(rank), size_(size), sent_to_(size), received_from_(size), failures_sent_to_(size),
      failures_received_from_(size) {
  for (int p = 0; p < size; ++p) {
    sent_to_[p].store(0, std::memory_order_relaxed);
    received_from_[p].store(0, std::memory_order_relaxed);
    failures_sent_to_[p].store(0, std::memory_order_relaxed);
    failures_received_from_[p].store(0, std::memory_order_relaxed);
  }
}

MpiTransport::~MpiTransport() {
  if (comm_ == MPI_COMM_NULL) return;  // closed
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  // Not closed: detach what is still in flight. The communicator is left
  // to MPI_Finalize (freeing it is collective).
  std::lock_guard<std::mutex> lock(send_mu_);
  for (size_t i = 0; i < send_requests_.size(); ++i) {
    if (send_requests_[i] == MPI_REQUEST_NULL) continue;
    MPI_Request_free(&send_requests_[i]);
    DetachedBuffers().push_back(std::move(send_buffers_[i]));
  }
}

absl::Status MpiTransport::MpiError(int code, absl::string_view call) const {
  return absl::InternalError(absl::StrCat("rank ", rank_, ": ", call, " failed: ", ErrorString(code)));
}

absl::Status MpiTransport::Send(int dst_rank, const WireToken& token) {
  if (closed_.load(std::memory_order_acquire))
    return absl::FailedPreconditionError(absl::StrCat("rank ", rank_, ": send after the transport was closed"));
  if (dst_rank < 0 || dst_rank >= size_)
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", rank_, ": send to rank ", dst_rank, ", but the run has ", size_, " ranks"));
  // Encoded into this thread's buffer; handed to the in-flight list only if
  // MPI does not finish with it at once (small messages usually go out
  // eagerly), so the common path allocates nothing.
  thread_local std::vector<char> scratch;
  absl::Status encoded = EncodeToken(token, &scratch);
  if (!encoded.ok())
    return absl::Status(encoded.code(), absl::StrCat("rank ", rank_, ": token for key ", token.key, " to rank ",
                                                     dst_rank, ": ", encoded.message()));
  if (scratch.size() > static_cast<size_t>(INT_MAX))
    return absl::InvalidArgumentError(absl::StrCat("rank ", rank_, ": token for key ", token.key, " is ",
                                                   scratch.size(), " bytes; one message holds at most ", INT_MAX));
  MPI_Request request = MPI_REQUEST_NULL;
  int rc = MPI_Isend(scratch.data(), static_cast<int>(scratch.size()), MPI_BYTE, dst_rank, kTokenTag, comm_, &request);
  if (rc != MPI_SUCCESS) return MpiError(rc, absl::StrCat("MPI_Isend to rank ", dst_rank));
  sent_to_[dst_rank].fetch_add(1, std::memory_order_relaxed);
  bytes_sent_.fetch_add(static_cast<int64_t>(scratch.size()), std::memory_order_relaxed);
  int done = 0;
  rc = MPI_Test(&request, &done, MPI_STATUS_IGNORE);
  if (rc != MPI_SUCCESS) return MpiError(rc, absl::StrCat("MPI_Test of a send to rank ", dst_rank));
  if (done) return absl::OkStatus();
  {
    std::lock_guard<std::mutex> lock(send_mu_);
    send_requests_.push_back(request);
    send_buffers_.push_back(std::move(scratch));  // the bytes stay where MPI reads them
  }
  scratch = std::vector<char>();
  sends_in_flight_.fetch_add(1, std::memory_order_release);
  return absl::OkStatus();
}

absl::Status MpiTransport::ReapSends(bool wait) {
  std::unique_lock<std::mutex> lock(send_mu_, std::defer_lock);
  if (wait) {
    lock.lock();
  } else if (!lock.try_lock()) {
    return absl::OkStatus();  // another thread is reaping
  }
  if (send_requests_.empty()) return absl::OkStatus();
  std::vector<int> indices(send_requests_.size());
  int completed = 0;
  const int rc = MPI_Testsome(static_cast<int>(send_requests_.size()), send_requests_.data(), &completed,
                              indices.data(), MPI_STATUSES_IGNORE);
  if (rc != MPI_SUCCESS) return MpiError(rc, "MPI_Testsome of sends");
  if (completed == MPI_UNDEFINED || completed == 0) return absl::OkStatus();
  // MPI_Testsome set the finished requests to MPI_REQUEST_NULL.
  size_t kept = 0;
  for (size_t i = 0; i < send_requests_.size(); ++i) {
    if (send_requests_[i] == MPI_REQUEST_NULL) continue;
    if (kept != i) {
      send_requests_[kept] = send_requests_[i];
      send_buffers_[kept] = std::move(send_buffers_[i]);
    }
    ++kept;
  }
  send_requests_.resize(kept);
  send_buffers_.resize(kept);
  sends_in_flight_.fetch_sub(completed, std::memory_order_release);
  return absl::OkStatus();
}

absl::StatusOr<bool> MpiTransport::ReceiveOne(ReceivedToken* out, int source_filter) {
  int flag = 0;
  MPI_Message message = MPI_MESSAGE_NULL;
  MPI_Status status;
  int rc = MPI_Improbe(source_filter, kTokenTag, comm_, &flag, &message, &status);
  if (rc != MPI_SUCCESS) return MpiError(rc, "MPI_Improbe");
  if (!flag) return false;
  absl::Status received = ReceiveMatchedToken(&message, status, out);
  if (!received.ok()) return received;
  return true;
}

absl::Status MpiTransport::ReceiveMatchedToken(MPI_Message* message, const MPI_Status& status, ReceivedToken* out) {
  int count = 0;
  MPI_Get_count(&status, MPI_BYTE, &count);
  thread_local std::vector<char> buffer;
  buffer.resize(static_cast<size_t>(count));
  const int rc = MPI_Mrecv(buffer.data(), count, MPI_BYTE, message, MPI_STATUS_IGNORE);
  const int source = status.MPI_SOURCE;
  if (rc != MPI_SUCCESS) return MpiError(rc, absl::StrCat("MPI_Mrecv from rank ", source));
  received_from_[source].fetch_add(1, std::memory_order_relaxed);
  bytes_received_.fetch_add(count, std::memory_order_relaxed);
  absl::StatusOr<WireToken> token = DecodeToken(buffer.data(), buffer.size());
  if (!token.ok())
    return absl::DataLossError(absl::StrCat("rank ", rank_, ": malformed token from rank ", source, " (", count,
                                            " bytes): ", token.status().message()));
  out->source_rank = source;
  out->token = *std::move(token);
  return absl::OkStatus();
}

absl::StatusOr<int> MpiTransport::Poll(Handler handler, int max_tokens) {
  if (closed_.load(std::memory_order_acquire))
    return absl::FailedPreconditionError(absl::StrCat("rank ", rank_, ": poll after the transport was closed"));
  if (sends_in_flight_.load(std::memory_order_acquire) > 0) {
    absl::Status reaped = ReapSends(/*wait=*/false);
    if (!reaped.ok()) return reaped;
  }
  int n = 0;
  while (n < max_tokens) {
    ReceivedToken received;
    absl::StatusOr<bool> got = ReceiveOne(&received);
    if (!got.ok()) return got.status();
    if (!*got) break;
    handler(std::move(received));
    ++n;
  }
  return n;
}

absl::StatusOr<int> MpiTransport::PollTokensAndFailure(Handler handler, std::pair<int, absl::Status>* failure) {
  if (closed_.load(std::memory_order_acquire))
    return absl::FailedPreconditionError(absl::StrCat("rank ", rank_, ": poll after the transport was closed"));
  if (sends_in_flight_.load(std::memory_order_acquire) > 0) {
    absl::Status reaped = ReapSends(/*wait=*/false);
    if (!reaped.ok()) return reaped;
  }
  // Only tokens and failures use the transport's communicator for
  // point-to-point messages (collectives have their own context).
  int n = 0;
  for (;;) {
    int flag = 0;
    MPI_Message message = MPI_MESSAGE_NULL;
    MPI_Status status;
    const int rc = MPI_Improbe(MPI_ANY_SOURCE, MPI_ANY_TAG, comm_, &flag, &message, &status);
    if (rc != MPI_SUCCESS) return MpiError(rc, "MPI_Improbe");
    if (!flag) return n;
    if (status.MPI_TAG == kFailureTag) {
      absl::Status received = ReceiveMatchedFailure(&message, status, &failure->first, &failure->second);
      if (!received.ok()) return received;
      return n;
    }
    ReceivedToken token;
    absl::Status received = ReceiveMatchedToken(&message, status, &token);
    if (!received.ok()) return received;
    handler(std::move(token));
    ++n;
  }
}

absl::StatusOr<ReceivedToken> MpiTransport::Receive(absl::Time deadline) {
  return ReceiveFrom(MPI_ANY_SOURCE, deadline);
}

absl::StatusOr<ReceivedToken> MpiTransport::ReceiveFrom(int source_rank, absl::Time deadline) {
  if (source_rank != MPI_ANY_SOURCE && (source_rank < 0 || source_rank >= size_))
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", rank_, ": receive from rank ", source_rank, ", but the run has ", size_, " ranks"));
  if (closed_.load(std::memory_order_acquire))
    return absl::FailedPreconditionError(absl::StrCat("rank ", rank_, ": receive after the transport was closed"));
  const absl::Time start = absl::Now();
  Backoff backoff;
  for (;;) {
    ReceivedToken received;
    absl::StatusOr<bool> got = ReceiveOne(&received, source_rank);
    if (!got.ok()) return got.status();
    if (*got) return received;
    if (sends_in_flight_.load(std::memory_order_acquire) > 0) {
      absl::Status reaped = ReapSends(/*wait=*/false);
      if (!reaped.ok()) return reaped;
    }
    if (absl::Now() >= deadline)
      return absl::DeadlineExceededError(absl::StrCat("rank ", rank_, ": no token arrived within ",
                                                      absl::FormatDuration(absl::Now() - start)));
    backoff.Wait();
  }
}

absl::Status MpiTransport::Close(Handler late, absl::Time deadline) {
  if (closed_.exchange(true, std::memory_order_acq_rel) || comm_ == MPI_COMM_NULL)
    return absl::FailedPreconditionError(absl::StrCat("rank ", rank_, ": the transport is already closed"));
  auto drain = [&]() -> absl::Status {
    absl::Status reaped = ReapSends(/*wait=*/true);
    if (!reaped.ok()) return reaped;
    int n = 0;
    do {
      ReceivedToken received;
      absl::StatusOr<bool> got = ReceiveOne(&received);
      if (!got.ok()) return got.status();
      if (!*got) break;
      late(std::move(received));
    } while (++n < 1024);
    return absl::OkStatus();
  };
  // 1. Every rank learns how many tokens each other rank sent it. A
  //    non-blocking collective, so that this rank keeps receiving (a large
  //    send completes only when its receiver takes it).
  std::vector<int64_t> sent(size_), expected(size_, 0);
  for (int p = 0; p < size_; ++p) sent[p] = sent_to_[p].load(std::memory_order_relaxed);
  MPI_Request exchange = MPI_REQUEST_NULL;
  int rc = MPI_Ialltoall(sent.data(), 1, MPI_INT64_T, expected.data(), 1, MPI_INT64_T, comm_, &exchange);
  if (rc != MPI_SUCCESS) return MpiError(rc, "MPI_Ialltoall of token counts");
  Backoff backoff;
  for (int done = 0; !done;) {
    rc = MPI_Test(&exchange, &done, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) return MpiError(rc, "MPI_Test of the token count exchange");
    if (done) break;
    absl::Status drained = drain();
    if (!drained.ok()) {
      AbandonExchange(&sent, &expected);
      return drained;
    }
    if (absl::Now() >= deadline) {
      AbandonExchange(&sent, &expected);
      return absl::DeadlineExceededError(absl::StrCat(
          "rank ", rank_, ": close: not every one of the ", size_, " ranks joined by the deadline"));
    }
    backoff.Wait();
  }
  // 2. Receive what is still in flight to this rank; finish this rank's sends.
  for (;;) {
    std::vector<std::string> missing;
    for (int p = 0; p < size_; ++p) {
      const int64_t have = received_from_[p].load(std::memory_order_relaxed);
      if (have < expected[p]) missing.push_back(absl::StrCat(expected[p] - have, " from rank ", p));
    }
    const int64_t in_flight = sends_in_flight_.load(std::memory_order_acquire);
    if (missing.empty() && in_flight == 0) break;
    absl::Status drained = drain();
    if (!drained.ok()) return drained;
    if (absl::Now() >= deadline) {
      std::string what = missing.empty() ? "" : absl::StrCat("tokens still to arrive: ", absl::StrJoin(missing, ", "));
      if (in_flight > 0) absl::StrAppend(&what, what.empty() ? "" : "; ", in_flight, " sends not finished");
      return absl::DeadlineExceededError(absl::StrCat("rank ", rank_, ": close: ", what));
    }
    backoff.Wait();
  }
  rc = MPI_Comm_free(&comm_);
  if (rc != MPI_SUCCESS) return MpiError(rc, "MPI_Comm_free");
  comm_ = MPI_COMM_NULL;
  return absl::OkStatus();
}

TransportCounters MpiTransport::counters() const {
  TransportCounters c;
  for (int p = 0; p < size_; ++p) {
    c.tokens_sent += sent_to_[p].load(std::memory_order_relaxed);
    c.tokens_received += received_from_[p].load(std::memory_order_relaxed);
  }
  c.bytes_sent = bytes_sent_.load(std::memory_order_relaxed);
  c.bytes_received = bytes_received_.load(std::memory_order_relaxed);
  return c;
}

absl::Status MpiTransport::SendFailure(int dst_rank, const absl::Status& failure) {
  if (closed_.load(std::memory_order_acquire))
    return absl::FailedPreconditionError(absl::StrCat("rank ", rank_, ": send after the transport was closed"));
  if (dst_rank < 0 || dst_rank >= size_ || failure.ok())
    return absl::InvalidArgumentError(absl::StrCat("rank ", rank_, ": a failure to rank ", dst_rank,
                                                   " must be an error for one of the ", size_, " ranks"));
  // One byte of status code, then the message.
  std::vector<char> bytes;
  bytes.push_back(static_cast<char>(static_cast<int>(failure.code())));
  bytes.insert(bytes.end(), failure.message().begin(), failure.message().end());
  if (bytes.size() > static_cast<size_t>(INT_MAX)) bytes.resize(INT_MAX);
  MPI_Request request = MPI_REQUEST_NULL;
  const int rc =
      MPI_Isend(bytes.data(), static_cast<int>(bytes.size()), MPI_BYTE, dst_rank, kFailureTag, comm_, &request);
  if (rc != MPI_SUCCESS) return MpiError(rc, absl::StrCat("MPI_Isend of a failure to rank ", dst_rank));
  failures_sent_to_[dst_rank].fetch_add(1, std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> lock(send_mu_);
    send_requests_.push_back(request);
    send_buffers_.push_back(std::move(bytes));
  }
  sends_in_flight_.fetch_add(1, std::memory_order_release);
  return absl::OkStatus();
}

absl::StatusOr<bool> MpiTransport::ReceiveFailure(int source_filter, int* source_rank, absl::Status* failure) {
  int flag = 0;
  MPI_Message message = MPI_MESSAGE_NULL;
  MPI_Status status;
  int rc = MPI_Improbe(source_filter, kFailureTag, comm_, &flag, &message, &status);
  if (rc != MPI_SUCCESS) return MpiError(rc, "MPI_Improbe of failures");
  if (!flag) return false;
  absl::Status received = ReceiveMatchedFailure(&message, status, source_rank, failure);
  if (!received.ok()) return received;
  return true;
}

absl::Status MpiTransport::ReceiveMatchedFailure(MPI_Message* message, const MPI_Status& status, int* source_rank,
                                                 absl::Status* failure) {
  int count = 0;
  MPI_Get_count(&status, MPI_BYTE, &count);
  std::vector<char> buffer(static_cast<size_t>(std::max(count, 0)));
  const int rc = MPI_Mrecv(buffer.data(), count, MPI_BYTE, message, MPI_STATUS_IGNORE);
  const int source = status.MPI_SOURCE;
  if (rc != MPI_SUCCESS) return MpiError(rc, absl::StrCat("MPI_Mrecv of a failure from rank ", source));
  failures_received_from_[source].fetch_add(1, std::memory_order_relaxed);
  // A code outside absl's is still a failure: Unknown, never OK.
  int code = buffer.empty() ? static_cast<int>(absl::StatusCode::kUnknown) : static_cast<unsigned char>(buffer[0]);
  if (code <= 0 || code > static_cast<int>(absl::StatusCode::kUnauthenticated))
    code = static_cast<int>(absl::StatusCode::kUnknown);
  std::string text = buffer.empty() ? std::string() : std::string(buffer.begin() + 1, buffer.end());
  if (text.empty()) text = absl::StrCat("rank ", source, " failed");
  *source_rank = source;
  *failure = absl::Status(static_cast<absl::StatusCode>(code), text);
  return absl::OkStatus();
}

absl::StatusOr<bool> MpiTransport::PollFailure(int* source_rank, absl::Status* failure) {
  if (closed_.load(std::memory_order_acquire))
    return absl::FailedPreconditionError(absl::StrCat("rank ", rank_, ": poll after the transport was closed"));
  return ReceiveFailure(MPI_ANY_SOURCE, source_rank, failure);
}

absl::Status MpiTransport::EndRun(Handler late, std::vector<std::pair<int, absl::Status>>* failures,
                                  absl::Time deadline, absl::Span<const int64_t> figures,
                                  std::vector<int64_t>* all_figures) {
  if (closed_.load(std::memory_order_acquire))
    return absl::FailedPreconditionError(absl::StrCat("rank ", rank_, ": the transport is closed"));
  // 1. Counts, cumulative over the transport's life: tokens and failures
  //    sent to each rank. Nothing is received while the exchange is in
  //    flight: a rank that has finished it may already send its next
  //    run's tokens, and only the counts say which messages are this run's.
  //    Each rank's figures ride along: one exchange per run, not two.
  const int row = 2 + static_cast<int>(figures.size());
  std::vector<int64_t> sent(static_cast<size_t>(row) * size_), got(static_cast<size_t>(row) * size_, 0);
  for (int p = 0; p < size_; ++p) {
    sent[row * p] = sent_to_[p].load(std::memory_order_relaxed);
    sent[row * p + 1] = failures_sent_to_[p].load(std::memory_order_relaxed);
    std::copy(figures.begin(), figures.end(), sent.begin() + row * p + 2);
  }
  MPI_Request exchange = MPI_REQUEST_NULL;
  int rc = MPI_Ialltoall(sent.data(), row, MPI_INT64_T, got.data(), row, MPI_INT64_T, comm_, &exchange);
  if (rc != MPI_SUCCESS) return MpiError(rc, "MPI_Ialltoall of the run's counts");
  Backoff backoff;
  for (int done = 0; !done;) {
    rc = MPI_Test(&exchange, &done, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) return MpiError(rc, "MPI_Test of the run's count exchange");
    if (done) break;
    if (sends_in_flight_.load(std::memory_order_acquire) > 0) {
      absl::Status reaped = ReapSends(/*wait=*/false);
      if (!reaped.ok()) {
        AbandonExchange(&sent, &got);
        return reaped;
      }
    }
    if (absl::Now() >= deadline) {
      AbandonExchange(&sent, &got);
      return absl::DeadlineExceededError(absl::StrCat("rank ", rank_, ": the end of the run: not every one of the ",
                                                      size_, " ranks ended its run by the deadline"));
    }
    backoff.Wait();
  }
  std::vector<int64_t> expected(2 * size_);
  if (all_figures != nullptr) all_figures->clear();
  for (int p = 0; p < size_; ++p) {
    expected[2 * p] = got[row * p];
    expected[2 * p + 1] = got[row * p + 1];
    if (all_figures != nullptr)
      all_figures->insert(all_figures->end(), got.begin() + row * p + 2, got.begin() + row * (p + 1));
  }
  // 2. Exactly what each rank sent here and this rank has not received:
  //    per source, since messages of one source and tag arrive in order.
  for (;;) {
    std::vector<std::string> missing;
    for (int p = 0; p < size_; ++p) {
      while (received_from_[p].load(std::memory_order_relaxed) < expected[2 * p]) {
        ReceivedToken received;
        absl::StatusOr<bool> got = ReceiveOne(&received, p);
        if (!got.ok()) return got.status();
        if (!*got) break;
        late(std::move(received));
      }
      while (failures_received_from_[p].load(std::memory_order_relaxed) < expected[2 * p + 1]) {
        int source = -1;
        absl::Status failure;
        absl::StatusOr<bool> got = ReceiveFailure(p, &source, &failure);
        if (!got.ok()) return got.status();
        if (!*got) break;
        failures->emplace_back(source, std::move(failure));
      }
      const int64_t tokens = expected[2 * p] - received_from_[p].load(std::memory_order_relaxed);
      const int64_t fails = expected[2 * p + 1] - failures_received_from_[p].load(std::memory_order_relaxed);
      if (tokens > 0 || fails > 0) missing.push_back(absl::StrCat(tokens, " tokens and ", fails, " failures from rank ", p));
    }
    if (missing.empty()) return absl::OkStatus();
    if (absl::Now() >= deadline)
      return absl::DeadlineExceededError(
          absl::StrCat("rank ", rank_, ": the end of the run: still to arrive: ", absl::StrJoin(missing, ", ")));
    backoff.Wait();
  }
}

absl::Status MpiTransport::AgreeOnStatus(const absl::Status& local) {
  const int mine = local.ok() ? size_ : rank_;
  int first = size_;
  int rc = MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, comm_);
  if (rc != MPI_SUCCESS) return MpiError(rc, "MPI_Allreduce of statuses");
  if (first == size_) return absl::OkStatus();
  std::string text;
  int64_t header[2] = {static_cast<int64_t>(local.code()), static_cast<int64_t>(local.message().size())};
  rc = MPI_Bcast(header, 2, MPI_INT64_T, first, comm_);
  if (rc != MPI_SUCCESS) return MpiError(rc, "MPI_Bcast of a status");
  text = rank_ == first ? std::string(local.message()) : std::string(static_cast<size_t>(header[1]), '\0');
  rc = MPI_Bcast(text.data(), static_cast<int>(text.size()), MPI_CHAR, first, comm_);
  if (rc != MPI_SUCCESS) return MpiError(rc, "MPI_Bcast of a status");
  return absl::Status(static_cast<absl::StatusCode>(header[0]), absl::StrCat("rank ", first, ": ", text));
}

}  // namespace distributed
}  // namespace tdf
