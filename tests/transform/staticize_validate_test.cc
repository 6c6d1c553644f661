// StaticizeRecursion's output is a plain valid Graph: it passes Validate and
// round-trips through both serialization formats.
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "tdf/reference_programs.h"
#include "tdf/serialize.h"
#include "tdf/transform.h"
#include "tdf/validate.h"

namespace tdf {
namespace {

std::vector<std::pair<std::string, Graph>> ReferencePrograms() {
  return {
      {"fib", reference::Fib()},
      {"ack", reference::Ack()},
      {"tak", reference::Tak()},
      {"fact", reference::Fact()},
      {"evenodd", reference::EvenOdd()},
      {"exp", reference::Exp()},
      {"primes", reference::Primes()},
      {"mc91", reference::McCarthy91()},
      {"sum", reference::Sum()},
      {"yaghi", reference::Yaghi()},
      {"call_in_while", reference::CallInWhile()},
      {"while_in_function", reference::WhileInFunction()},
  };
}

TEST(StaticizeRecursion, OutputOfEveryReferenceProgramValidates) {
  for (const auto& [name, graph] : ReferencePrograms()) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(Validate(graph).ok()) << Validate(graph);  // the input, as a baseline
    absl::StatusOr<Graph> out = StaticizeRecursion(graph);
    ASSERT_TRUE(out.ok()) << out.status();
    absl::Status s = Validate(*out);
    EXPECT_TRUE(s.ok()) << s;
  }
}

TEST(StaticizeRecursion, OutputRoundTripsThroughProtobuf) {
  for (const auto& [name, graph] : ReferencePrograms()) {
    SCOPED_TRACE(name);
    absl::StatusOr<Graph> out = StaticizeRecursion(graph);
    ASSERT_TRUE(out.ok()) << out.status();
    absl::StatusOr<std::string> bytes = SerializeGraph(*out);
    ASSERT_TRUE(bytes.ok()) << bytes.status();
    absl::StatusOr<Graph> back = ParseGraph(*bytes);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_TRUE(*back == *out);
    absl::StatusOr<Graph> from_text = GraphFromText(GraphToText(*out));
    ASSERT_TRUE(from_text.ok()) << from_text.status();
    EXPECT_TRUE(*from_text == *out);
  }
}

TEST(PassManager, VerifiesAfterEachPassWithValidate) {
  PassManager pm;
  pm.AddPass(CreatePruneUnreachableFunctionsPass());
  pm.AddPass(CreateStaticizeRecursionPass());
  pm.SetVerifier([](const Graph& g) { return Validate(g); });
  Graph g = reference::Tak();
  absl::Status s = pm.Run(g);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_TRUE(g.library.empty());
}

}  // namespace
}  // namespace tdf
