// Golden tests (MLIR style): testdata/staticize/<case>.in.pbtxt is the input,
// <case>.expected.pbtxt the reviewed output of StaticizeRecursion. Graphs are
// compared as graphs, not as text, so a cosmetic change of the text format
// does not break them; a mismatch prints the first differing line.
//
// Regenerate (and review the diff!) with
//   TDF_UPDATE_GOLDEN=1 tdf_transform_tests --gtest_filter='StaticizeGolden*'
// which rewrites both files from the reference programs.
#include <algorithm>
#include <cstdlib>
#include <ostream>
#include <functional>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "tdf/reference_programs.h"
#include "tdf/serialize.h"
#include "tdf/transform.h"

namespace tdf {
namespace {

struct GoldenCase {
  std::string name;
  std::function<Graph()> make_input;
};

void PrintTo(const GoldenCase& c, std::ostream* os) { *os << c.name; }

std::string GoldenPath(const std::string& name, const std::string& kind) {
  return std::string(TDF_SOURCE_DIR) + "/tests/transform/testdata/staticize/" + name + "." + kind + ".pbtxt";
}

bool UpdateGolden() {
  const char* v = std::getenv("TDF_UPDATE_GOLDEN");
  return v != nullptr && std::string(v) == "1";
}

std::string FirstDifference(const std::string& want, const std::string& got) {
  std::vector<std::string> a = absl::StrSplit(want, '\n'), b = absl::StrSplit(got, '\n');
  for (size_t i = 0; i < std::max(a.size(), b.size()); ++i) {
    const std::string wa = i < a.size() ? a[i] : "<end>", gb = i < b.size() ? b[i] : "<end>";
    if (wa != gb) return "line " + std::to_string(i + 1) + ":\n  expected: " + wa + "\n  actual:   " + gb;
  }
  return "texts are equal; graphs differ in something the text does not show";
}

class StaticizeGolden : public ::testing::TestWithParam<GoldenCase> {};

TEST_P(StaticizeGolden, MatchesExpected) {
  const GoldenCase& c = GetParam();
  const std::string in_path = GoldenPath(c.name, "in"), expected_path = GoldenPath(c.name, "expected");
  if (UpdateGolden()) {
    Graph in = c.make_input();
    absl::StatusOr<Graph> out = StaticizeRecursion(in);
    ASSERT_TRUE(out.ok()) << out.status();
    ASSERT_TRUE(SaveGraph(in, in_path).ok());
    ASSERT_TRUE(SaveGraph(*out, expected_path).ok());
    std::fprintf(stderr, "updated %s and %s\n", in_path.c_str(), expected_path.c_str());
  }
  absl::StatusOr<Graph> in = LoadGraph(in_path);
  ASSERT_TRUE(in.ok()) << in.status();
  absl::StatusOr<Graph> expected = LoadGraph(expected_path);
  ASSERT_TRUE(expected.ok()) << expected.status();
  absl::StatusOr<Graph> out = StaticizeRecursion(*in);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(*out == *expected) << "StaticizeRecursion(" << in_path << ") differs from " << expected_path << " at "
                                 << FirstDifference(GraphToText(*expected), GraphToText(*out))
                                 << "\n(if the change is intended, regenerate with TDF_UPDATE_GOLDEN=1)";
}

// The fixtures are snapshots: if a reference program changes, its golden
// input no longer shows what the program is, and should be regenerated.
TEST_P(StaticizeGolden, InputIsTheCurrentReferenceProgram) {
  absl::StatusOr<Graph> in = LoadGraph(GoldenPath(GetParam().name, "in"));
  ASSERT_TRUE(in.ok()) << in.status();
  EXPECT_TRUE(*in == GetParam().make_input()) << "regenerate with TDF_UPDATE_GOLDEN=1";
}

INSTANTIATE_TEST_SUITE_P(ReferencePrograms, StaticizeGolden,
                         ::testing::Values(GoldenCase{"fib", reference::Fib},
                                           GoldenCase{"even_odd", reference::EvenOdd},
                                           GoldenCase{"yaghi", reference::Yaghi},
                                           GoldenCase{"while_in_function", reference::WhileInFunction}),
                         [](const ::testing::TestParamInfo<GoldenCase>& info) { return info.param.name; });

}  // namespace
}  // namespace tdf
