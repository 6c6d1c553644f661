// tdf: the command-line tool.
//
//   tdf validate FILE
//   tdf transform FILE -o OUT.pbtxt
//   tdf dot FILE [-o OUT.dot] [--static] [--ranks N]
//   tdf partition FILE --ranks N -o DIR
//   tdf run FILE --feed n=30 [--feed x=1.5] --fetch result [--target NODE]
//                [--workers N] [--mode static|dynamic] [--trace out.json] [--stats]
//                [--runs N] [--restore CKPT] [--save CKPT] [--gpu]
//   mpirun -np N tdf run FILE --feed ... --fetch ... [--spread FUNCTION[:DEPTH[:hash|round-robin]]]
//   tdf reference NAME -o OUT.pbtxt      (write a built-in reference program)
//   tdf import-tf GRAPH.pb -o OUT.pbtxt  (a TensorFlow 1.x GraphDef in tdf's form)
//
// FILE is a graph in binary (.pb) or text (.pbtxt) protobuf form, tdf's own
// (tdf/serialize.h) or a GraphDef TensorFlow wrote (tdf/tf_import.h). Exit status: 0 success, 1 the command failed, 2 usage.
#include <cstdio>
#include <algorithm>
#include <filesystem>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <new>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/ascii.h"
#include "absl/time/time.h"
#include "oneapi/tbb/global_control.h"
#include "tdf/dot.h"
#include "tdf/graph.h"
#include "tdf/partition.h"
#include "tdf/reference_programs.h"
#include "tdf/serialize.h"
#include "tdf/session.h"
#include "tdf/status.h"
#include "tdf/tf_import.h"
#include "tdf/transform.h"
#include "tdf/validate.h"
#ifdef TDF_CLI_WITH_MPI
#include "mpi_run.h"
#endif

namespace {

constexpr char kUsage[] =
    "usage: tdf <command> [options]\n"
    "\n"
    "commands:\n"
    "  validate FILE                       check a graph (ops, inputs, attrs, types, frames, calls)\n"
    "  transform FILE -o OUT               staticize recursion (the Yaghi transformation) and save\n"
    "  dot FILE [-o OUT.dot] [--static] [--ranks N]\n"
    "                                      Graphviz DOT (of the transformed graph with --static;\n"
    "                                      with --ranks, its partitions as clusters per rank)\n"
    "  partition FILE --ranks N -o DIR     transform if needed, cut into one graph per rank\n"
    "                                      (nodes placed by their device, \"rank:R/...\") with\n"
    "                                      Send/Recv pairs; writes DIR/rank_<R>.pbtxt\n"
    "  run FILE --feed NAME=VALUE... --fetch NAME... [--target NAME...]\n"
    "      [--workers N] [--mode static|dynamic] [--trace OUT.json] [--stats]\n"
    "      [--runs N] [--restore CKPT] [--save CKPT] [--gpu]\n"
    "      [--deadline DURATION] [--max-depth N] [--max-frames N]\n"
    "      [--spread FUNCTION[:DEPTH[:hash|round-robin]]...]  (under mpirun)\n"
    "                                      run what the fetches and targets need and\n"
    "                                      print the fetched tensors (of the last of N\n"
    "                                      runs); variables from / to a checkpoint;\n"
    "                                      --gpu: tensor ops and float variables on\n"
    "                                      cuda:0 (the CPU, with a note, without one);\n"
    "                                      limits: each run's deadline (50ms, 2s, 1m),\n"
    "                                      the nesting of calls and loops, live frames\n"
    "  import-tf FILE -o OUT               a TensorFlow 1.x GraphDef (.pb or .pbtxt) in\n"
    "                                      tdf's form (docs/tensorflow_import.md)\n"
    "  reference NAME -o OUT               save a built-in reference program\n"
    "                                      (fib ack tak fact even_odd exp primes mc91 sum yaghi\n"
    "                                       while_loop call_in_while while_in_function)\n"
    "\n"
    "FILE: a graph as binary (.pb) or text (.pbtxt) protobuf, in tdf's form or as\n"
    "TensorFlow wrote it (imported on the fly). VALUE: a scalar of the\n"
    "placeholder's dtype (42, 1.5, true), or a comma-separated vector (1,2,3).\n";

// Exit codes.
constexpr int kOk = 0;
constexpr int kFailed = 1;
constexpr int kUsageError = 2;

// Prints a usage error; returns the usage exit status.
int Usage(const std::string& command, const std::string& message) {
  std::cerr << "tdf " << command << ": " << message << "\n\n" << kUsage;
  return kUsageError;
}

// Command-line arguments after the command name: flags with values, boolean
// flags and positionals.
class Args {
 public:
  Args(int argc, char** argv, int first) {
    for (int i = first; i < argc; ++i) args_.emplace_back(argv[i]);
  }

  // Parses against the flags a command accepts. Returns an error message.
  std::string Parse(const std::vector<std::string>& value_flags, const std::vector<std::string>& bool_flags) {
    for (size_t i = 0; i < args_.size(); ++i) {
      const std::string& a = args_[i];
      if (a.size() > 1 && a[0] == '-') {
        std::string name = a;
        std::string value;
        bool has_value = false;
        const size_t eq = a.find('=');
        if (absl::StartsWith(a, "--") && eq != std::string::npos) {
          name = a.substr(0, eq);
          value = a.substr(eq + 1);
          has_value = true;
        }
        if (std::find(bool_flags.begin(), bool_flags.end(), name) != bool_flags.end()) {
          if (has_value) return absl::StrCat(name, " takes no value");
          bools_[name] = true;
          continue;
        }
        if (std::find(value_flags.begin(), value_flags.end(), name) == value_flags.end())
          return absl::StrCat("unknown option ", name);
        if (!has_value) {
          if (i + 1 >= args_.size()) return absl::StrCat(name, " needs a value");
          value = args_[++i];
        }
        values_[name].push_back(value);
      } else {
        positionals_.push_back(a);
      }
    }
    return "";
  }

  const std::vector<std::string>& positionals() const { return positionals_; }
  std::vector<std::string> All(const std::string& flag) const {
    auto it = values_.find(flag);
    return it == values_.end() ? std::vector<std::string>{} : it->second;
  }
  // The last value of `flag`, or `fallback`.
  std::string Get(const std::string& flag, const std::string& fallback = "") const {
    auto it = values_.find(flag);
    return it == values_.end() ? fallback : it->second.back();
  }
  bool Has(const std::string& flag) const { return values_.count(flag) > 0 || bools_.count(flag) > 0; }

 private:
  std::vector<std::string> args_;
  std::vector<std::string> positionals_;
  std::map<std::string, std::vector<std::string>> values_;
  std::map<std::string, bool> bools_;
};

int Fail(const absl::Status& status) {
  // A status made when even its message could not be allocated has none.
  std::cerr << "tdf: " << (status.message().empty() ? absl::StatusCodeToString(status.code()) : status.message()) << "\n";
  return kFailed;
}

absl::Status WriteFile(const std::string& path, const std::string& data) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return absl::PermissionDeniedError(absl::StrCat("cannot write '", path, "'"));
  out << data;
  out.close();
  if (!out) return absl::DataLossError(absl::StrCat("writing '", path, "' failed"));
  return absl::OkStatus();
}

#define TDF_ONE_FILE(path, args, command)                                   \
  if ((args).positionals().size() != 1) return Usage(command, "takes exactly one argument"); \
  const std::string path = (args).positionals()[0]

int Validate(const Args& args) {
  TDF_ONE_FILE(path, args, "validate");
  absl::StatusOr<tdf::Graph> graph = tdf::LoadGraphOrTensorFlowGraph(path);
  if (!graph.ok()) return Fail(graph.status());
  absl::Status s = tdf::Validate(*graph);
  if (!s.ok()) return Fail(absl::Status(s.code(), absl::StrCat(path, ": ", s.message())));
  std::cout << path << ": ok (" << graph->node.size() << " nodes, " << graph->library.functions().size()
            << " functions)\n";
  return kOk;
}

int ImportTf(const Args& args) {
  TDF_ONE_FILE(path, args, "import-tf");
  const std::string out = args.Get("-o");
  if (out.empty()) return Usage("import-tf", "import-tf needs -o OUT");
  absl::StatusOr<tdf::Graph> graph = tdf::ImportTensorFlowGraphFile(path);
  if (!graph.ok()) return Fail(graph.status());
  absl::Status s = tdf::SaveGraph(*graph, out);
  if (!s.ok()) return Fail(s);
  std::cerr << "wrote " << out << " (" << graph->node.size() << " nodes, " << graph->library.functions().size()
            << " functions)\n";
  return kOk;
}

int Transform(const Args& args) {
  TDF_ONE_FILE(path, args, "transform");
  const std::string out = args.Get("-o");
  if (out.empty()) return Usage("transform", "transform needs -o OUT");
  absl::StatusOr<tdf::Graph> graph = tdf::LoadGraphOrTensorFlowGraph(path);
  if (!graph.ok()) return Fail(graph.status());
  absl::StatusOr<tdf::Graph> transformed = tdf::StaticizeRecursion(*graph);
  if (!transformed.ok()) return Fail(transformed.status());
  absl::Status s = tdf::SaveGraph(*transformed, out);
  if (!s.ok()) return Fail(s);
  std::cerr << "wrote " << out << " (" << transformed->node.size() << " nodes)\n";
  return kOk;
}

// --ranks N: a positive rank count, or a usage error.
bool ParseRanks(const Args& args, const std::string& command, int* ranks, int* exit_code) {
  const std::string text = args.Get("--ranks");
  if (!absl::SimpleAtoi(text, ranks) || *ranks < 1) {
    *exit_code = Usage(command, absl::StrCat("--ranks ", text, ": not a positive integer"));
    return false;
  }
  return true;
}

// Loads, validates, transforms (when the graph still has functions) and
// partitions FILE.
absl::StatusOr<tdf::PartitionedGraph> LoadPartitioned(const std::string& path, int ranks) {
  absl::StatusOr<tdf::Graph> graph = tdf::LoadGraphOrTensorFlowGraph(path);
  if (!graph.ok()) return graph.status();
  absl::Status valid = tdf::Validate(*graph);
  if (!valid.ok()) return absl::Status(valid.code(), absl::StrCat(path, ": ", valid.message()));
  if (!graph->library.empty()) {
    graph = tdf::StaticizeRecursion(*graph);
    if (!graph.ok()) return graph.status();
  }
  tdf::PartitionOptions options;
  options.num_ranks = ranks;
  return tdf::PartitionGraph(*graph, options);
}

int Partition(const Args& args) {
  TDF_ONE_FILE(path, args, "partition");
  const std::string dir = args.Get("-o");
  if (dir.empty()) return Usage("partition", "partition needs -o DIR");
  if (!args.Has("--ranks")) return Usage("partition", "partition needs --ranks N");
  int ranks = 0, exit_code = kOk;
  if (!ParseRanks(args, "partition", &ranks, &exit_code)) return exit_code;
  absl::StatusOr<tdf::PartitionedGraph> parts = LoadPartitioned(path, ranks);
  if (!parts.ok()) return Fail(parts.status());
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) return Fail(absl::PermissionDeniedError(absl::StrCat("cannot create '", dir, "': ", error.message())));
  for (int r = 0; r < ranks; ++r) {
    const tdf::Graph& g = parts->partitions[r];
    int sends = 0, recvs = 0, replicas = 0;
    for (const tdf::NodeDef& n : g.node) {
      sends += n.op == "Send";
      recvs += n.op == "Recv";
      replicas += n.GetBoolOr(tdf::kReplicaAttr, false);
    }
    const std::string out = absl::StrCat(dir, "/rank_", r, ".pbtxt");
    absl::Status s = tdf::SaveGraph(g, out);
    if (!s.ok()) return Fail(s);
    std::cerr << "wrote " << out << " (" << g.node.size() << " nodes: " << sends << " Send, " << recvs << " Recv, "
              << replicas << " replicas)\n";
  }
  std::cerr << parts->pairs.size() << " Send/Recv pairs\n";
  return kOk;
}

int Dot(const Args& args) {
  TDF_ONE_FILE(path, args, "dot");
  std::string dot;
  if (args.Has("--ranks")) {
    int ranks = 0, exit_code = kOk;
    if (!ParseRanks(args, "dot", &ranks, &exit_code)) return exit_code;
    absl::StatusOr<tdf::PartitionedGraph> parts = LoadPartitioned(path, ranks);
    if (!parts.ok()) return Fail(parts.status());
    dot = tdf::PartitionsToDot(*parts);
  } else {
    absl::StatusOr<tdf::Graph> graph = tdf::LoadGraphOrTensorFlowGraph(path);
    if (!graph.ok()) return Fail(graph.status());
    if (args.Has("--static")) {
      graph = tdf::StaticizeRecursion(*graph);
      if (!graph.ok()) return Fail(graph.status());
    }
    dot = tdf::GraphToDot(*graph);
  }
  const std::string out = args.Get("-o");
  if (out.empty()) {
    std::cout << dot;
    return kOk;
  }
  absl::Status s = WriteFile(out, dot);
  return s.ok() ? kOk : Fail(s);
}

// "30" for a Placeholder of dtype int64 -> Tensor::Scalar<int64_t>(30);
// "1,2,3" -> a vector.
absl::StatusOr<tdf::Tensor> ParseFeedValue(const std::string& name, const std::string& text, tdf::DType dtype) {
  std::vector<std::string> parts = absl::StrSplit(text, ',');
  const bool vector = parts.size() > 1;
  absl::Status error = absl::InvalidArgumentError(
      absl::StrCat("--feed ", name, "=", text, ": not a ", tdf::DTypeName(dtype), vector ? " vector" : ""));
  absl::StatusOr<tdf::Tensor> result = absl::InvalidArgumentError(
      absl::StrCat("--feed ", name, ": placeholder dtype ", tdf::DTypeName(dtype), " is not supported"));
  tdf::DispatchDType(dtype, [&](auto zero) {
    using T = decltype(zero);
    std::vector<T> values;
    for (const std::string& p : parts) {
      absl::string_view s = absl::StripAsciiWhitespace(p);
      bool ok = false;
      T v{};
      if constexpr (std::is_same_v<T, bool>) {
        ok = absl::SimpleAtob(s, &v);
      } else if constexpr (std::is_same_v<T, float>) {
        ok = absl::SimpleAtof(s, &v);
      } else if constexpr (std::is_same_v<T, double>) {
        ok = absl::SimpleAtod(s, &v);
      } else {
        ok = absl::SimpleAtoi(s, &v);
      }
      if (!ok) {
        result = error;
        return;
      }
      values.push_back(v);
    }
    if (vector) {
      result = tdf::Tensor::FromVector<T>(values, tdf::Shape({static_cast<int64_t>(values.size())}));
    } else {
      result = tdf::Tensor::Scalar<T>(values[0]);
    }
  });
  return result;
}

std::string FormatTensor(const tdf::Tensor& t) {
  if (!t.valid()) return "<dead or empty>";
  if (t.is_scalar() && t.device().is_cpu()) {
    std::string out;
    tdf::DispatchDType(t.dtype(), [&](auto zero) {
      using T = decltype(zero);
      const T v = t.scalar<T>();
      if constexpr (std::is_same_v<T, bool>) {
        out = v ? "true" : "false";
      } else {
        out = absl::StrCat(v);
      }
    });
    return absl::StrCat(out, "  (", tdf::DTypeName(t.dtype()), ")");
  }
  return t.DebugString();
}

void PrintStats(const tdf::RunStats& stats) {
  std::cout << "stats:\n"
            << "  elapsed          " << absl::FormatDuration(stats.elapsed) << "\n"
            << "  workers          " << stats.num_workers << "\n"
            << "  firings          " << stats.firings << " (" << stats.live_firings << " live, " << stats.dead_firings
            << " dead)\n"
            << "  frames created   " << stats.frames_created << "\n"
            << "  peak live frames " << stats.peak_live_frames << "\n"
            << "  released callers " << stats.tail_callers_released << "\n"
            << "  compiled units   " << stats.compiled_units << "\n"
            << "  continuations    " << stats.compiled_continuations << "\n"
            << "  pruned nodes     " << stats.nodes_pruned << "\n"
            << "  live after run   " << stats.live_frames_after_run << "\n"
            << "  max tag depth    " << stats.max_tag_depth << "\n";
  if (stats.instantiations > 0) std::cout << "  instantiations   " << stats.instantiations << "\n";
  if (stats.num_workers > 1) {
    std::cout << "  offers           " << stats.offers << "\n";
    std::cout << "  shared frames    " << stats.shared_frames << "\n";
  }
  if (!stats.firings_by_op.empty()) {
    std::cout << "  firings by op (live/dead):\n";
    for (const auto& [op, counts] : stats.firings_by_op) {
      std::cout << "    " << op << std::string(op.size() < 16 ? 16 - op.size() : 1, ' ') << counts.first << " / "
                << counts.second << "\n";
    }
  }
}

int Run(const Args& args) {
  TDF_ONE_FILE(path, args, "run");
  const std::vector<std::string> fetches = args.All("--fetch");
  const std::vector<std::string> targets = args.All("--target");
  if (fetches.empty() && targets.empty()) return Usage("run", "run needs at least one --fetch NAME or --target NAME");
  tdf::SessionOptions options;
  const std::string workers = args.Get("--workers", "1");
  if (!absl::SimpleAtoi(workers, &options.num_workers) || options.num_workers < 1)
    return Usage("run", absl::StrCat("--workers ", workers, ": not a positive integer"));
  // More workers than hardware threads run as asked (oversubscribed), with
  // tdf's note rather than oneTBB's warning that it ignores the request.
  std::unique_ptr<tbb::global_control> parallelism;
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  if (options.num_workers > static_cast<int>(cores) && options.num_workers <= tdf::SessionOptions::kMaxWorkers) {
    std::cerr << "tdf: note: " << options.num_workers << " workers on " << cores
              << " hardware threads: they take turns\n";
    parallelism = std::make_unique<tbb::global_control>(tbb::global_control::max_allowed_parallelism,
                                                        static_cast<size_t>(options.num_workers));
  }
  if (const std::string deadline = args.Get("--deadline"); !deadline.empty()) {
    if (!absl::ParseDuration(deadline, &options.deadline) || options.deadline <= absl::ZeroDuration())
      return Usage("run", absl::StrCat("--deadline ", deadline, ": not a positive duration (e.g. 50ms, 2s, 1m)"));
  }
  for (const auto& [flag, limit] : {std::pair<const char*, int64_t*>{"--max-depth", &options.max_tag_depth},
                                    std::pair<const char*, int64_t*>{"--max-frames", &options.max_live_frames}}) {
    if (const std::string value = args.Get(flag); !value.empty()) {
      if (!absl::SimpleAtoi(value, limit) || *limit < 1)
        return Usage("run", absl::StrCat(flag, " ", value, ": not a positive integer"));
    }
  }
  const std::string mode = args.Get("--mode", "static");
  if (mode == "static") {
    options.mode = tdf::ExecutionMode::kStatic;
  } else if (mode == "dynamic") {
    options.mode = tdf::ExecutionMode::kDynamic;
  } else {
    return Usage("run", absl::StrCat("--mode ", mode, ": expected static or dynamic"));
  }
  options.trace_path = args.Get("--trace");
  options.place_tensor_ops_on_gpu = args.Has("--gpu");
  const std::string runs_arg = args.Get("--runs", "1");
  int runs = 1;
  if (!absl::SimpleAtoi(runs_arg, &runs) || runs < 1)
    return Usage("run", absl::StrCat("--runs ", runs_arg, ": not a positive integer"));

  absl::StatusOr<tdf::Graph> graph = tdf::LoadGraphOrTensorFlowGraph(path);
  if (!graph.ok()) return Fail(graph.status());

  std::vector<std::pair<std::string, tdf::Tensor>> feeds;
  for (const std::string& feed : args.All("--feed")) {
    const size_t eq = feed.find('=');
    if (eq == std::string::npos || eq == 0) return Usage("run", absl::StrCat("--feed ", feed, ": expected NAME=VALUE"));
    const std::string name = feed.substr(0, eq);
    const tdf::NodeDef* node = graph->FindNode(name);
    if (node == nullptr || node->op != "Placeholder")
      return Fail(absl::InvalidArgumentError(absl::StrCat("--feed ", name, ": the graph has no Placeholder '", name, "'")));
    absl::StatusOr<tdf::DType> dtype = node->GetType("dtype");
    if (!dtype.ok()) return Fail(dtype.status());
    absl::StatusOr<tdf::Tensor> value = ParseFeedValue(name, feed.substr(eq + 1), *dtype);
    if (!value.ok()) return Fail(value.status());
    feeds.emplace_back(name, *std::move(value));
  }

  // Under mpirun (a build with MPI): every rank runs the graph
  // collectively, placed by its ranks and spread by --spread.
  const std::vector<std::string> spread = args.All("--spread");
#ifdef TDF_CLI_WITH_MPI
  if (!spread.empty() || tdf_cli::UnderMpirun()) {
    for (const char* flag : {"--restore", "--save", "--trace"})
      if (args.Has(flag)) return Usage("run", absl::StrCat(flag, " is not supported across ranks"));
    absl::Status across = tdf_cli::RunAcrossRanks(
        *graph, feeds, fetches, targets, options, spread, runs, [](const tdf::Tensor& t) { return FormatTensor(t); },
        args.Has("--stats") ? std::function<void(const tdf::RunStats&)>(PrintStats) : nullptr);
    return across.ok() ? kOk : Fail(across);
  }
#else
  if (!spread.empty()) return Usage("run", "--spread needs a tdf built with MPI (TDF_ENABLE_MPI)");
#endif
  absl::StatusOr<std::unique_ptr<tdf::Session>> session = tdf::Session::Create(*graph, options);
  if (!session.ok()) return Fail(session.status());
  if (const std::string restore = args.Get("--restore"); !restore.empty()) {
    absl::Status restored = (*session)->RestoreVariables(restore);
    if (!restored.ok()) return Fail(restored);
  }
  tdf::RunStats stats;
  absl::StatusOr<std::vector<tdf::Tensor>> outputs;
  for (int i = 0; i < runs; ++i) {
    outputs = (*session)->Run(feeds, fetches, targets, &stats);
    if (!outputs.ok()) return Fail(outputs.status());
  }
  if (const std::string save = args.Get("--save"); !save.empty()) {
    absl::Status saved = (*session)->SaveVariables(save);
    if (!saved.ok()) return Fail(saved);
  }
  for (size_t i = 0; i < fetches.size() && i < outputs->size(); ++i)
    std::cout << fetches[i] << " = " << FormatTensor((*outputs)[i]) << "\n";
  if (args.Has("--stats")) PrintStats(stats);
  if (!options.trace_path.empty()) std::cerr << "trace written to " << options.trace_path << "\n";
  return kOk;
}

int Reference(const Args& args) {
  static const std::map<std::string, std::function<tdf::Graph()>>* const kPrograms =
      new std::map<std::string, std::function<tdf::Graph()>>{
          {"fib", tdf::reference::Fib},
          {"ack", tdf::reference::Ack},
          {"tak", tdf::reference::Tak},
          {"fact", tdf::reference::Fact},
          {"even_odd", tdf::reference::EvenOdd},
          {"exp", tdf::reference::Exp},
          {"primes", tdf::reference::Primes},
          {"mc91", tdf::reference::McCarthy91},
          {"sum", tdf::reference::Sum},
          {"yaghi", tdf::reference::Yaghi},
          {"while_loop", tdf::reference::WhileLoop},
          {"call_in_while", tdf::reference::CallInWhile},
          {"while_in_function", tdf::reference::WhileInFunction},
      };
  TDF_ONE_FILE(name, args, "reference");
  auto it = kPrograms->find(name);
  if (it == kPrograms->end()) return Usage("reference", absl::StrCat("no reference program '", name, "'"));
  const std::string out = args.Get("-o");
  if (out.empty()) {
    std::cout << tdf::GraphToText(it->second());
    return kOk;
  }
  absl::Status s = tdf::SaveGraph(it->second(), out);
  return s.ok() ? kOk : Fail(s);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h" ||
      std::string(argv[1]) == "help") {
    std::cout << kUsage;
    return argc < 2 ? kUsageError : kOk;
  }
  const std::string command = argv[1];
  struct Command {
    std::vector<std::string> value_flags;
    std::vector<std::string> bool_flags;
    int (*fn)(const Args&);
  };
  static const std::map<std::string, Command>* const kCommands = new std::map<std::string, Command>{
      {"validate", {{}, {}, Validate}},
      {"transform", {{"-o"}, {}, Transform}},
      {"dot", {{"-o", "--ranks"}, {"--static"}, Dot}},
      {"partition", {{"-o", "--ranks"}, {}, Partition}},
      {"run",
       {{"--feed", "--fetch", "--target", "--workers", "--mode", "--trace", "--runs", "--restore", "--save",
         "--deadline", "--max-depth", "--max-frames", "--spread"},
        {"--stats", "--gpu"},
        Run}},
      {"reference", {{"-o"}, {}, Reference}},
      {"import-tf", {{"-o"}, {}, ImportTf}},
  };
  auto it = kCommands->find(command);
  if (it == kCommands->end()) {
    std::cerr << "tdf: unknown command '" << command << "'\n\n" << kUsage;
    return kUsageError;
  }
  // Out of memory anywhere (reading a graph too large for it, compiling or
  // running one), the command fails instead of aborting (issue #26, item 4).
  try {
    Args args(argc, argv, 2);
    const std::string error = args.Parse(it->second.value_flags, it->second.bool_flags);
    if (!error.empty()) return Usage(command, error);
    return it->second.fn(args);
  } catch (const std::bad_alloc&) {
    std::fputs("tdf: RESOURCE_EXHAUSTED: out of memory (std::bad_alloc)\n", stderr);  // no allocation
    return kFailed;
  }
}
