// The graphs shipped in examples/graphs are the reference programs saved with
// SaveGraph (`tdf reference NAME -o examples/graphs/NAME.pbtxt`): a change to
// a reference program or to the format must regenerate them.
#include <string>

#include "gtest/gtest.h"
#include "tdf/reference_programs.h"
#include "tdf/serialize.h"

namespace tdf {
namespace {

void ExpectShipped(const std::string& file, const Graph& want) {
  SCOPED_TRACE(file);
  absl::StatusOr<Graph> shipped = LoadGraph(std::string(TDF_SOURCE_DIR) + "/examples/graphs/" + file);
  ASSERT_TRUE(shipped.ok()) << shipped.status();
  EXPECT_TRUE(*shipped == want) << "regenerate with: tdf reference <name> -o examples/graphs/" << file;
}

TEST(ShippedExamples, AreTheReferencePrograms) {
  ExpectShipped("fib.pbtxt", reference::Fib());
  ExpectShipped("ack.pbtxt", reference::Ack());
  ExpectShipped("even_odd.pbtxt", reference::EvenOdd());
}

}  // namespace
}  // namespace tdf
