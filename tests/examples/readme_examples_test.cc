// The README's code examples are the example programs in examples/, which
// are built and run as tests: each ```cpp block that follows a line
// "<!-- example: examples/NAME.cc -->" must equal that file.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(ReadmeExamples, CodeBlocksAreTheBuiltExamples) {
  const std::string root = TDF_SOURCE_DIR;
  const std::string readme = ReadFile(root + "/README.md");
  ASSERT_FALSE(readme.empty());
  const std::string marker = "<!-- example: ";
  int checked = 0;
  for (size_t pos = readme.find(marker); pos != std::string::npos; pos = readme.find(marker, pos + 1)) {
    const size_t name_end = readme.find(" -->", pos);
    ASSERT_NE(name_end, std::string::npos);
    const std::string file = readme.substr(pos + marker.size(), name_end - pos - marker.size());
    const size_t open = readme.find("```cpp\n", name_end);
    ASSERT_NE(open, std::string::npos) << file;
    const size_t close = readme.find("```\n", open + 7);
    ASSERT_NE(close, std::string::npos) << file;
    const std::string block = readme.substr(open + 7, close - open - 7);
    const std::string source = ReadFile(root + "/" + file);
    ASSERT_FALSE(source.empty()) << file;
    EXPECT_EQ(block, source) << "README block for " << file << " differs from the file";
    ++checked;
  }
  EXPECT_GE(checked, 2);
}

}  // namespace
