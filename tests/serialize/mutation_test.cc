// Deterministic mutation testing of the graph loaders: a few thousand
// corruptions (truncations, byte flips, huge varints, spliced and duplicated
// regions) of serialized reference programs go through ParseGraph and
// GraphFromText. The loaders must answer with a Status; anything they accept
// must survive Validate (which must not crash either) and re-serialize to a
// fixed point. Run under the asan preset this also catches memory errors;
// fuzz/graph_loader_fuzz.cc is the coverage-guided version.
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "google/protobuf/stubs/logging.h"
#include "gtest/gtest.h"
#include "tdf/reference_programs.h"
#include "tdf/serialize.h"
#include "tdf/validate.h"

namespace tdf {
namespace {

// The binary parser logs each string that is not UTF-8 before failing; the
// Status already says so, and thousands of log lines would bury real output.
class QuietProtobufLog {
 public:
  QuietProtobufLog() : previous_(google::protobuf::SetLogHandler(nullptr)) {}
  ~QuietProtobufLog() { google::protobuf::SetLogHandler(previous_); }

 private:
  google::protobuf::LogHandler* previous_;
};

class Mutator {
 public:
  explicit Mutator(uint64_t seed) : rng_(seed) {}

  std::string Mutate(std::string s) {
    const int steps = 1 + static_cast<int>(Uniform(3));
    for (int i = 0; i < steps; ++i) s = MutateOnce(std::move(s));
    return s;
  }

 private:
  uint64_t Uniform(uint64_t n) { return n == 0 ? 0 : rng_() % n; }

  std::string MutateOnce(std::string s) {
    const size_t at = Uniform(s.size() + 1);
    switch (Uniform(7)) {
      case 0:  // truncate
        return s.substr(0, at);
      case 1:  // flip a bit
        if (!s.empty()) s[at % s.size()] ^= static_cast<char>(1 << Uniform(8));
        return s;
      case 2:  // random byte
        if (!s.empty()) s[at % s.size()] = static_cast<char>(Uniform(256));
        return s;
      case 3: {  // insert a huge varint (a length or count claiming ~2^63)
        std::string v(9, '\xff');
        v += '\x7f';
        return s.insert(at, v);
      }
      case 4: {  // delete a region
        const size_t len = Uniform(16) + 1;
        return s.erase(at, len);
      }
      case 5: {  // duplicate a region (repeated fields, nested messages)
        const size_t len = Uniform(64) + 1;
        return s.insert(at, s.substr(at, len));
      }
      default: {  // splice in interesting text / bytes
        static const char* const kTokens[] = {
            "dim { size: -1 } ", "dim { size: 1000000000 } ", "dtype: 77 ", "type: DT_BOOL ", "tensor_content: \"\\001\" ",
            "int64_val: 1 ", "list { } ", "declared_only: true ", "{", "}", "\"", "\x12\xff\xff\xff\xff\x0f",
            "\x0a\x00", "\x42\x05\x0a\x03\x08\xff\x01"};
        return s.insert(at, kTokens[Uniform(sizeof(kTokens) / sizeof(kTokens[0]))]);
      }
    }
  }

  std::mt19937_64 rng_;
};

std::vector<Graph> Seeds() {
  return {reference::Fib(), reference::Ack(), reference::EvenOdd(), reference::Exp(), reference::CallInWhile(),
          reference::WhileInFunction()};
}

// Accepted input: Validate must answer, and the graph must serialize to a
// fixed point (bytes, not ==, so NaNs produced by a mutation compare equal).
void CheckAccepted(const Graph& g, int64_t& accepted) {
  ++accepted;
  (void)Validate(g);
  absl::StatusOr<std::string> bytes = SerializeGraph(g);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  absl::StatusOr<Graph> again = ParseGraph(*bytes);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*SerializeGraph(*again), *bytes);
}

TEST(SerializeMutation, BinaryLoaderSurvivesMutations) {
  QuietProtobufLog quiet;
  Mutator mutator(20240601);
  int64_t accepted = 0, rejected = 0;
  for (const Graph& seed : Seeds()) {
    const std::string bytes = *SerializeGraph(seed);
    for (int i = 0; i < 600; ++i) {
      absl::StatusOr<Graph> g = ParseGraph(mutator.Mutate(bytes));
      if (g.ok()) {
        CheckAccepted(*g, accepted);
      } else {
        ++rejected;
        EXPECT_FALSE(g.status().message().empty());
      }
    }
  }
  // Both outcomes must occur, or the mutations are not exercising anything.
  EXPECT_GT(accepted, 0);
  EXPECT_GT(rejected, 0);
}

TEST(SerializeMutation, TextLoaderSurvivesMutations) {
  QuietProtobufLog quiet;
  Mutator mutator(7);
  int64_t accepted = 0, rejected = 0;
  for (const Graph& seed : Seeds()) {
    const std::string text = GraphToText(seed);
    for (int i = 0; i < 400; ++i) {
      absl::StatusOr<Graph> g = GraphFromText(mutator.Mutate(text));
      if (g.ok()) {
        CheckAccepted(*g, accepted);
        EXPECT_TRUE(GraphFromText(GraphToText(*g)).ok());
      } else {
        ++rejected;
        EXPECT_FALSE(g.status().message().empty());
      }
    }
  }
  EXPECT_GT(accepted, 0);
  EXPECT_GT(rejected, 0);
}

}  // namespace
}  // namespace tdf
