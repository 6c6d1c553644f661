/// \file
/// A Session compiles a graph (with its function library) once and runs it
/// many times, possibly from several threads at once. Variables persist across
/// runs.
///
/// \code
///   tdf::Graph graph = tdf::reference::Fib();  // tdf/reference_programs.h
///   absl::StatusOr<std::unique_ptr<tdf::Session>> session = tdf::Session::Create(graph);
///   tdf::RunStats stats;
///   absl::StatusOr<std::vector<tdf::Tensor>> out =
///       (*session)->Run({{"n", tdf::Tensor::Scalar<int64_t>(30)}}, {"result"}, {}, &stats);
///   // out->at(0).scalar<int64_t>() == 1346269
/// \endcode
#ifndef TDF_SESSION_H_
#define TDF_SESSION_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "tdf/graph.h"
#include "tdf/tensor.h"

namespace tdf {

namespace runtime {
class SessionAccess;  // internal (src/runtime/session_access.h): DistributedSession's runs
}  // namespace runtime

/// How a session runs functions.
enum class ExecutionMode {
  /// Functions are compiled once into the static graph (StaticizeRecursion);
  /// each invocation is a frame (design.md §2-3).
  kStatic,
  /// The dynamic-expansion baseline: each Invoke instantiates a fresh copy of
  /// the callee's body at run time.
  kDynamic,
};

/// One event per node firing, for tracing.
struct FiringEvent {
  const std::string* node;  ///< not owned; lives as long as the session
  const std::string* op;    ///< the node's op; not owned
  std::string tag;           ///< list view, newest label first
  int worker;                ///< which worker fired it
  bool dead;                 ///< a dead firing (deadness propagated, no kernel)
  int64_t start_ns;  ///< since the run started
  int64_t end_ns;    ///< since the run started
  /// Instances of the node fired by the one batched kernel call this
  /// firing was part of (SessionOptions::batching); 0: fired alone.
  int batch = 0;
};

/// Observers see every firing. Called concurrently from worker threads.
class ExecutionObserver {
 public:
  virtual ~ExecutionObserver() = default;
  /// One firing, after it ended.
  virtual void OnFiring(const FiringEvent& event) = 0;
};

/// How a session runs: workers, mode, limits, devices, tracing, and the
/// optimizations that can be turned off for comparison.
struct SessionOptions {
  ExecutionMode mode = ExecutionMode::kStatic;  ///< static (the Yaghi transformation) or dynamic
  /// Threads of the run's task arena, 1 to kMaxWorkers (Session::Create
  /// rejects others). oneTBB runs at most its max_allowed_parallelism of them
  /// (the machine's concurrency unless a tbb::global_control raises it; it
  /// warns once when asked for more): RunStats::num_workers says how many.
  int num_workers = 1;
  static constexpr int kMaxWorkers = 256;  ///< the most num_workers may ask for
  int default_parallel_iterations = 10; ///< for Enter nodes without the attr
  int64_t max_live_frames = 10'000'000; ///< a run exceeding it fails (ResourceExhausted)
  /// With several workers, each one publishes the frames it creates and
  /// frees to the run's live count in batches of 32: one shared counter
  /// written per frame cost fib a quarter of its time at 2 workers. So
  /// RunStats::peak_live_frames and max_live_frames are exact to within
  /// workers x 32 frames (exact with one worker). True: every frame is
  /// counted as it is created and freed, exactly, at that cost.
  bool exact_live_frames = false;
  /// Nesting of calls and loops: a run fails (ResourceExhausted) when it would
  /// create a frame deeper than this. Workers go depth first along the
  /// chain in hand, so a recursion that is too deep only on a branch not yet
  /// reached (fib(60) under a limit of 50: its n - 2 calls come first) may
  /// compute for a long time before it fails; set a deadline as well.
  int64_t max_tag_depth = 2'000'000;
  /// Per run: a run still going once it has passed fails (DEADLINE_EXCEEDED).
  /// Zero or negative: every run fails so, before it starts. The default of
  /// every run; RunOptions::deadline replaces it for one run.
  absl::Duration deadline = absl::InfiniteDuration();
  /// Per-node firing counts in RunStats (RunOptions::collect_node_stats
  /// replaces it for one run).
  bool collect_node_stats = false;
  /// In function bodies, a Cond branch that is not taken is skipped as a whole:
  /// the ops after it receive its dead tokens directly, and the branch's own
  /// nodes do not fire dead one by one (results are the same; RunStats and
  /// traces show fewer dead firings). Off: every dead node fires, as in
  /// TensorFlow's executor. Not skipped, in either setting: dead branches of
  /// a Cond inside a While body (they fire dead node by node), and a While
  /// inside an untaken branch, which still enters one dead iteration frame
  /// and drains it.
  bool skip_dead_branches = true;
  /// Static mode: a Call delivers its argument straight to the consumers of
  /// the callee's argument Merge, a function's result goes from the node
  /// that computes it straight to the consumers of the caller's Return (past
  /// the result Identity and, inside function bodies, the Return), the
  /// Identities of a function body (a Cond's pivots) are passed over by their
  /// producer, a result Merge of a Cond's two branches by the taken branch's
  /// kernel, and a Cond's pivot Switch by a Switch of the same predicate: all
  /// of them would only pass the value on (fib: 11 -> 5 firings per call).
  /// Results are the same; RunStats show fewer Merge, Identity, Return and
  /// Switch firings. Off: all of them fire, as in the paper.
  bool forward_call_values = true;
  /// Static mode, with forward_call_values: a function whose result is a tail
  /// call's (ack's ack(m - 1, ...), a tail-recursive search, f(n) = g(n + 1)
  /// with no condition at all) gives its frame
  /// back once its own work is done, and the callee returns straight to the
  /// caller's caller: a tail recursion holds one live frame, not one per call.
  /// Tag depths still count every call (max_tag_depth applies as before);
  /// error messages and traces show the calls passed over as "+k tail
  /// calls" instead of their labels. Off: every caller stays live until its
  /// callee returns.
  bool release_tail_callers = true;
  /// A run that needs the results of a differentiated call (AddGradients'
  /// paired forward and gradient calls, one invocation) but not its gradient
  /// leaves the gradient out: the dy arguments enter dead and the gradient
  /// path drains (the Switches that bring them into a Cond skip what they
  /// would make dead; Calls and results on the way fire dead). That makes
  /// evaluating a training graph's loss about as cheap as the forward graph
  /// when the gradient is tensor work (a recursion of MatMuls: a third of a
  /// training step), but no cheaper than a whole step when it is scalar
  /// work, where a dead firing costs about what a live one does (exp(w,
  /// 1000): 1.1x a step). Off: such a call runs whole, its gradient included
  /// (still nothing after it: no step).
  bool evaluate_without_gradients = true;
  /// Static mode: each call site gets a compiled unit, its callee's scalar
  /// work from the arguments' arrival on (predicate, Switch routing,
  /// arithmetic, the callee's own calls) as straight-line code on
  /// registers, run when the site's arguments are all at hand: by a Call of
  /// one argument, or by the first Call of a site that a compiled unit made.
  /// A base case returns its result to the caller with no frame allocated
  /// and no node dispatched; any other path creates the callee's frame with
  /// what its waiting nodes need and queues its calls. RunStats count the
  /// nodes it stands for as fired (and the frame as created), as if they
  /// had; compiled_units counts its runs. Off: every invocation runs node by
  /// node (for A/B comparisons and debugging). Traces, observers and
  /// per-node counts run node by node either way.
  bool compile_threads = true;
  /// With compile_threads: a compiled unit whose path ends in calls also
  /// gets a continuation, the scalar work its frame does once every result
  /// of those calls has returned (a join: fib's Add, nth's Switches on
  /// isprime's answer), run on registers by the worker that delivers the
  /// last result; each result is stored on arrival and counted, none
  /// dispatches a node. A dead result, a value the unit does not cover or
  /// a continuation nested too deep delivers the results node by node.
  /// RunStats::compiled_continuations counts its runs.
  bool compile_continuations = true;
  /// Chrome trace JSON (opens in Perfetto) written after each run. Also
  /// switched on by the environment variable TDF_TRACE=path. RunOptions::
  /// trace_path replaces both for one run.
  std::string trace_path;
  /// Sees every firing of every run (RunOptions::observer replaces it for
  /// one run). Not owned; outlives the session's runs.
  ExecutionObserver* observer = nullptr;
  /// Device placement (tdf/placement.h), run by Create when this is set or
  /// a node names a GPU: tensor ops with a CUDA kernel and floating-point
  /// Variables go to cuda:0; control flow, predicates, integer index
  /// arithmetic and the state ops stay on the host, and copies are inserted
  /// where values cross. Fetched values and ReadVariable come back as host
  /// tensors.
  bool place_tensor_ops_on_gpu = false;
  /// Without a usable device: true runs cuda:N nodes on the CPU (one log
  /// line); false makes Create fail with FAILED_PRECONDITION naming the node.
  bool fallback_to_cpu = true;
  /// Batching one op across tags (design.md §9): a worker may defer a ready
  /// tensor op whose op has a batching rule (src/runtime/batching/
  /// batching_rules.h) into a bucket of the same node's ready instances under
  /// other tags (same input shapes, same shared weights) and run other ready
  /// work first; a bucket fires as one kernel call over its stacked inputs
  /// when the worker has nothing else to run, when it holds batch_max_size
  /// instances, or after batch_max_deferral of the worker's firings. Results
  /// are those of unbatched runs; dead instances never batch. CPU kernels
  /// only (a node placed on a GPU fires alone). Off by default.
  ///
  /// \code
  ///   tdf::SessionOptions options;
  ///   options.batching = true;         // a TreeRNN's nodes batch across trees
  ///   options.batch_max_size = 64;
  /// \endcode
  bool batching = false;
  /// The most instances one batched firing takes (>= 1; Create rejects others).
  int batch_max_size = 256;
  /// A bucket fires at the latest after this many other firings of its
  /// worker since its first instance came (>= 1).
  int64_t batch_max_deferral = 100'000;
};

/// What a run did (Session::Run's `stats`).
struct RunStats {
  int64_t firings = 0;          ///< every node firing, live and dead
  int64_t live_firings = 0;     ///< firings that ran their kernel or control flow
  int64_t dead_firings = 0;     ///< firings that only passed deadness on
  std::map<std::string, std::pair<int64_t, int64_t>> firings_by_op;  ///< op -> (live, dead)
  std::map<std::string, std::pair<int64_t, int64_t>> firings_by_node;  ///< when collect_node_stats
  /// Main-graph nodes the run left out: its fetches and targets do not need
  /// them (Session::Run).
  int64_t nodes_pruned = 0;
  int64_t frames_created = 0;   ///< invocations, loop iterations and the root
  /// Invocations reclaimed while their tail call still ran, which then
  /// returned to their caller (SessionOptions::release_tail_callers).
  int64_t tail_callers_released = 0;
  int64_t peak_live_frames = 0;  ///< the most frames alive at once (see exact_live_frames)
  /// Frames still live when the run ended: 0 after a successful run unless
  /// something leaked; after a failed one, those the run then reclaimed
  /// (freed after Run returns when there are many: see Session::Run).
  int64_t live_frames_after_run = 0;
  int64_t max_tag_depth = 0;   ///< the deepest tag: nested calls and loop iterations
  int64_t instantiations = 0;   ///< dynamic mode: function bodies copied
  /// Several workers: batches of ready work a worker handed to the arena for
  /// an idle worker to steal.
  int64_t offers = 0;
  /// Frames other workers could reach (ancestors of offered work and what
  /// several of their nodes feed); the rest used no lock-prefixed counters.
  int64_t shared_frames = 0;
  /// Invocations a compiled unit ran (SessionOptions::compile_threads): a
  /// base case whole, any other up to its calls.
  int64_t compiled_units = 0;
  /// Continuations a compiled unit's frame ran when its calls returned
  /// (SessionOptions::compile_continuations).
  int64_t compiled_continuations = 0;
  absl::Duration elapsed;       ///< wall time of the run
  /// Threads the run could use: SessionOptions::num_workers, capped at
  /// oneTBB's max_allowed_parallelism.
  int num_workers = 0;
  /// SessionOptions::batching: kernel calls that fired several instances of
  /// one node at once.
  int64_t batched_firings = 0;
  /// The instances those batched kernel calls fired (each also counted in
  /// firings, as if fired alone).
  int64_t batched_instances = 0;
  /// Stacked inputs of batched firings that were the rows of one earlier
  /// batched output, taken as they lay instead of copied (a chain of batched
  /// ops over the same instances).
  int64_t batched_inputs_without_copy = 0;
  /// batch_size_histogram[i]: batched firings of 2^i to 2^(i+1) - 1
  /// instances (index 0 stays 0: a batch has at least 2).
  std::vector<int64_t> batch_size_histogram;
  /// Time instances spent deferred in buckets, summed over instances
  /// (those that then fired alone included).
  absl::Duration deferred_time;
  /// Instances per batched firing (0 without any).
  double mean_batch_size() const {
    return batched_firings > 0 ? static_cast<double>(batched_instances) / static_cast<double>(batched_firings) : 0.0;
  }
};

/// Cancels runs from another thread.
class CancellationToken {
 public:
  /// Runs that hold this token stop at their next check.
  void Cancel() { cancelled_.store(true, std::memory_order_relaxed); }
  /// Whether Cancel was called.
  bool cancelled() const { return cancelled_.load(std::memory_order_relaxed); }

 private:
  std::atomic<bool> cancelled_{false};
};

/// Settings of one run, for what an application varies from run to run on
/// one session (TensorFlow's RunOptions: timeout_in_ms, trace_level). A field
/// left unset takes the session's value (SessionOptions); a set one replaces
/// it for this run only, so a run may also lift a setting the session has
/// (deadline = absl::InfiniteDuration(), observer = nullptr, trace_path = "").
///
/// \code
///   tdf::RunOptions quick;
///   quick.deadline = absl::Milliseconds(50);     // this run only
///   absl::StatusOr<std::vector<tdf::Tensor>> out =
///       session->Run(quick, {{"n", tdf::Tensor::Scalar<int64_t>(30)}}, {"result"}, {});
/// \endcode
struct RunOptions {
  /// SessionOptions::deadline for this run: DEADLINE_EXCEEDED once it has
  /// passed (zero or negative: before the run starts); absl::InfiniteDuration()
  /// runs without one.
  std::optional<absl::Duration> deadline;
  /// SessionOptions::collect_node_stats for this run.
  std::optional<bool> collect_node_stats;
  /// SessionOptions::trace_path (and TDF_TRACE) for this run: the Chrome
  /// trace of this run goes there; "" traces nothing.
  std::optional<std::string> trace_path;
  /// SessionOptions::observer for this run; nullptr: none. Not owned.
  std::optional<ExecutionObserver*> observer;
  /// Cancels this run from another thread (not owned; outlives the run).
  const CancellationToken* cancel = nullptr;
};

/// A compiled graph, run as often as needed, from any number of threads.
class Session {
 public:
  /// Validates, transforms (static mode) and compiles `graph`. Errors name the
  /// offending node. The session keeps a graph of its own: passed an rvalue,
  /// it takes `graph`'s nodes instead of copying them (a 10^6-node graph is
  /// 250 MB), and leaves `graph` empty: untouched if it fails validation,
  /// empty once the session is created or a later step fails.
  /// ExecutionMode::kDynamic rejects split call sites (UNIMPLEMENTED): the
  /// paired forward and backward calls that AddGradients makes.
  static absl::StatusOr<std::unique_ptr<Session>> Create(const Graph& graph, SessionOptions options = {});
  /// The same, taking `graph`'s nodes instead of copying them.
  static absl::StatusOr<std::unique_ptr<Session>> Create(Graph&& graph, SessionOptions options = {});
  /// Waits until the frames of this session's failed runs are freed (see
  /// Run), then gives memory back as follows.
  ///
  /// Memory policy. The frames a run frees are kept for later runs, of any
  /// session: by the run's workers (up to 4096 per function, until the run
  /// ends), then by the thread (up to 4096 of a size; all threads' pools
  /// together at most 64 MiB), then by a process-wide depot (up to 256 MiB);
  /// past that they go back to malloc. When the last Session of the process
  /// is destroyed, the depot and the destroying thread's pool are freed. And
  /// when a Session is destroyed after frames have taken 64 MiB or more from
  /// malloc since memory was last given back (or emptying the caches freed
  /// that much), malloc_trim(0) returns the free pages of every malloc arena
  /// to the system: deep recursions run from several threads leave most of
  /// their memory in those threads' arenas (8 threads of sum(10^6): 1.1 GB
  /// of RSS after the Session was gone, 0.27 GB of it in use; now 13 MB). A
  /// session that lives on keeps what it has, within the bounds above.
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  /// Feeds placeholders, fires what the fetches and targets need, returns the
  /// fetched tensors in order. `fetches` ("node" or "node:port") and
  /// `targets` (nodes that must run) name nodes of the main graph. As in
  /// TensorFlow, a run fires only the main-graph nodes they depend on (data
  /// and control inputs, transitively; RunStats::nodes_pruned counts the
  /// rest): only the Placeholders among them need a feed, side effects
  /// nothing needs (an optimizer step) do not happen, and a run with neither
  /// fetches nor targets fires nothing. A main-graph loop runs whole when
  /// anything needs one of its results; a call runs whole (its body and every
  /// argument of its site) when anything needs one of its results, except
  /// that a differentiated call (AddGradients) whose gradient nothing needs
  /// runs its forward part only: the gradient path drains dead. The results of a
  /// main-graph While are fetched by their Exit nodes' names (b.Name(b.While(...)[i])),
  /// or named as targets; a loop in an untaken branch gives dead Exits. Other
  /// nodes inside a While loop's body or a function's body cannot be fetched
  /// (NOT_FOUND): fetch what leaves them (the loop's results, the call's results). A fetch in a Cond
  /// branch that did not run fails the run (FAILED_PRECONDITION: dead output).
  /// A main-graph Invoke (GraphBuilder::Call) is fetched as its call's
  /// results, in either mode: "call" or "call:r" is result r; as a target,
  /// the call must have run. Each Placeholder is fed at most once (a name given
  /// twice is INVALID_ARGUMENT); a needed one that is not fed is
  /// INVALID_ARGUMENT too. A run whose `cancel` is already cancelled returns
  /// CANCELLED without running. A run that fails (an error, its deadline, a
  /// cancel) returns as soon as its workers stop: the frames it leaves live,
  /// when there are many (4096 or more: a deep recursion), are freed after it
  /// returns, on a background thread, and RunStats::live_frames_after_run
  /// counts them all the same. A stall (FAILED_PRECONDITION) frees them
  /// before it returns: its message names nodes read from them. Destroying
  /// the session waits until its runs' frames are freed.
  /// Thread-safe: several runs may be in flight at once.
  absl::StatusOr<std::vector<Tensor>> Run(const std::vector<std::pair<std::string, Tensor>>& feeds,
                                          const std::vector<std::string>& fetches,
                                          const std::vector<std::string>& targets = {},
                                          RunStats* stats = nullptr, const CancellationToken* cancel = nullptr);
  /// The same with per-run settings (RunOptions: deadline, tracing, node
  /// stats, observer, cancel), which replace the session's for this run.
  /// `targets` has no default here: with one, Run({}, {}, {...}) would name
  /// either overload.
  absl::StatusOr<std::vector<Tensor>> Run(const RunOptions& run_options,
                                          const std::vector<std::pair<std::string, Tensor>>& feeds,
                                          const std::vector<std::string>& fetches,
                                          const std::vector<std::string>& targets, RunStats* stats = nullptr);

  /// The options it was created with.
  const SessionOptions& options() const { return options_; }
  /// The graph that runs (after transformation in static mode).
  const Graph& executable_graph() const;
  /// The current value of a variable (by the Variable node's name).
  absl::StatusOr<Tensor> ReadVariable(const std::string& name) const;
  /// Sets a variable (its dtype and shape must match); NOT_FOUND for an
  /// unknown name.
  absl::Status AssignVariable(const std::string& name, const Tensor& value);
  /// The Variable nodes' names, in graph order.
  std::vector<std::string> VariableNames() const;

  /// Checkpoints: every variable's value, by name, in one file (the format
  /// and atomic replacement of tdf::SaveTensors, tdf/serialize.h: text for
  /// ".pbtxt", binary otherwise). Each variable is read under its own lock,
  /// so save between runs for a consistent set (during a training step it
  /// may mix values from before and after an update).
  ///
  /// \code
  ///   TDF_RETURN_IF_ERROR(session->SaveVariables("model.ckpt"));
  ///   ... later, in a session of the same graph (or one with the same variables):
  ///   TDF_RETURN_IF_ERROR(session->RestoreVariables("model.ckpt"));
  /// \endcode
  absl::Status SaveVariables(const std::string& path) const;
  /// Sets variables from a checkpoint. Every tensor in the file must name a
  /// variable of this session (NOT_FOUND otherwise) with its dtype and its
  /// current shape (INVALID_ARGUMENT), and every variable must be in the
  /// file (NOT_FOUND) unless `allow_missing`, which leaves the missing ones
  /// as they are. Nothing is assigned unless all of it checks.
  absl::Status RestoreVariables(const std::string& path, bool allow_missing = false);

  class Impl;

 private:
  friend class runtime::SessionAccess;
  Session(SessionOptions options, std::unique_ptr<Impl> impl);
  /// `owned`: &graph when the caller gave up its graph (Create(Graph&&)).
  static absl::StatusOr<std::unique_ptr<Session>> CreateFrom(const Graph& graph, Graph* owned,
                                                             SessionOptions options);
  SessionOptions options_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tdf

#endif  // TDF_SESSION_H_
