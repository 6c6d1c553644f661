// The reference programs that tests/distributed runs across ranks, and
// their seeded random placement, and the world's size (session_test.cc,
// pruning_test.cc, gradient_test.cc).
#ifndef TDF_TESTS_DISTRIBUTED_TEST_PROGRAMS_H_
#define TDF_TESTS_DISTRIBUTED_TEST_PROGRAMS_H_

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "tdf/distributed.h"
#include "tdf/graph.h"
#include "tdf/reference_programs.h"
#include "tdf/tensor.h"

namespace tdf {
namespace distributed_test {

// A reference program, its feeds, and (in "result") its answer to fetch.
struct Program {
  std::string name;
  Graph graph;
  std::vector<std::pair<std::string, Tensor>> feeds;
};

inline std::vector<Program> Programs() {
  auto i64 = [](int64_t v) { return Tensor::Scalar<int64_t>(v); };
  return {
      {"fib", reference::Fib(), {{"n", i64(9)}}},
      {"ack", reference::Ack(), {{"m", i64(2)}, {"n", i64(3)}}},
      {"tak", reference::Tak(), {{"x", i64(8)}, {"y", i64(4)}, {"z", i64(2)}}},
      {"fact", reference::Fact(), {{"n", i64(10)}}},
      {"primes", reference::Primes(), {{"n", i64(6)}}},
      {"evenodd", reference::EvenOdd(), {{"n", i64(7)}}},
      {"mc91", reference::McCarthy91(), {{"n", i64(87)}}},
      {"sum", reference::Sum(), {{"n", i64(20)}}},
      {"yaghi", reference::Yaghi(), {}},
      {"while", reference::WhileLoop(), {{"n", i64(12)}}},
      {"callinwhile", reference::CallInWhile(), {{"n", i64(6)}}},
      {"whileinfunction", reference::WhileInFunction(), {{"n", i64(5)}}},
  };
}

// The number of ranks: MPI starts with the first session, so a throwaway
// one tells the size.
inline int NumRanks() {
  static const int ranks = [] {
    absl::StatusOr<std::unique_ptr<DistributedSession>> probe = DistributedSession::Create(reference::Fib());
    const int n = probe.ok() ? (*probe)->num_ranks() : 1;
    if (probe.ok()) (void)(*probe)->Close();
    return n;
  }();
  return ranks;
}

// Every node (bodies included) on a seeded random rank: the same placement
// on every rank, since each rank seeds alike.
inline void PlaceRandomly(Graph& g, uint32_t seed, int ranks) {
  std::mt19937 rng(seed);
  auto place = [&](std::vector<NodeDef>& nodes) {
    for (NodeDef& n : nodes) n.device = absl::StrCat("rank:", rng() % ranks);
  };
  place(g.node);
  for (const auto& [name, f] : g.library.functions()) place(g.library.FindMutable(name)->node);
}

}  // namespace distributed_test
}  // namespace tdf

#endif  // TDF_TESTS_DISTRIBUTED_TEST_PROGRAMS_H_
