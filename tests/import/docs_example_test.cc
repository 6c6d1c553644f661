// docs/tensorflow_import.md's C++ example is examples/tf_import.cc, built
// and run as the test Example.tf_import: the ```cpp block after
// "<!-- example: examples/tf_import.cc -->" must equal that file.
#include <fstream>
#include <sstream>
#include <string>

#include "gtest/gtest.h"

namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(TfImportDocs, CodeBlockIsTheBuiltExample) {
  const std::string root = TDF_SOURCE_DIR;
  const std::string doc = ReadFile(root + "/docs/tensorflow_import.md");
  const std::string marker = "<!-- example: examples/tf_import.cc -->\n```cpp\n";
  const size_t open = doc.find(marker);
  ASSERT_NE(open, std::string::npos);
  const size_t close = doc.find("```\n", open + marker.size());
  ASSERT_NE(close, std::string::npos);
  EXPECT_EQ(doc.substr(open + marker.size(), close - open - marker.size()), ReadFile(root + "/examples/tf_import.cc"));
}

}  // namespace
