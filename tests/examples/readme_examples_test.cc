// The documentation's code examples are the example programs in examples/,
// which are built and run as tests (Example.<name>): in README.md and in
// every docs/*.md, each ```cpp block must follow a line
// "<!-- example: examples/NAME.cc -->" and equal that file, and no ```cpp
// block may appear without one. So the C++ the docs show always compiles
// and runs.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// README.md and docs/*.md, relative to the source root.
std::vector<std::string> DocumentationFiles(const std::string& root) {
  std::vector<std::string> files = {"README.md"};
  for (const auto& entry : std::filesystem::directory_iterator(root + "/docs"))
    if (entry.path().extension() == ".md") files.push_back("docs/" + entry.path().filename().string());
  std::sort(files.begin() + 1, files.end());
  return files;
}

struct Block {
  int line;             // of the opening fence, 1-based
  std::string example;  // the marker's file; empty without a marker
  std::string code;
};

// The ```cpp (or ```c++) blocks of `text`, with the example marker on the
// line before the fence (blank lines between are allowed).
std::vector<Block> CppBlocks(const std::string& text) {
  std::vector<Block> blocks;
  std::istringstream in(text);
  std::string line, marker;
  int number = 0;
  const std::string open = "<!-- example: ", close = " -->";
  while (std::getline(in, line)) {
    ++number;
    if (line.rfind(open, 0) == 0 && line.size() > open.size() + close.size() &&
        line.compare(line.size() - close.size(), close.size(), close) == 0) {
      marker = line.substr(open.size(), line.size() - open.size() - close.size());
      continue;
    }
    if (line == "```cpp" || line == "```c++") {
      Block block{number, marker, ""};
      while (std::getline(in, line) && line != "```") {
        ++number;
        block.code += line + "\n";
      }
      ++number;
      blocks.push_back(block);
      marker.clear();
      continue;
    }
    if (line.rfind("```", 0) == 0) {
      // Another kind of block (shell, output, a diagram): skip its body so
      // that a fence inside it is not taken for a cpp block.
      while (std::getline(in, line) && line != "```") ++number;
      ++number;
      marker.clear();
      continue;
    }
    if (!line.empty()) marker.clear();
  }
  return blocks;
}

TEST(DocExamples, EveryCppBlockIsABuiltExample) {
  const std::string root = TDF_SOURCE_DIR;
  std::set<std::string> shown;
  int checked = 0;
  for (const std::string& doc : DocumentationFiles(root)) {
    const std::string text = ReadFile(root + "/" + doc);
    ASSERT_FALSE(text.empty()) << doc;
    for (const Block& block : CppBlocks(text)) {
      SCOPED_TRACE(doc + ":" + std::to_string(block.line));
      ASSERT_FALSE(block.example.empty())
          << "a ```cpp block without an <!-- example: examples/NAME.cc --> marker: put the code in examples/ "
             "(built and run as a test) and mark the block";
      const std::string source = ReadFile(root + "/" + block.example);
      ASSERT_FALSE(source.empty()) << block.example;
      EXPECT_EQ(block.code, source) << "the block for " << block.example << " differs from the file";
      shown.insert(block.example);
      ++checked;
    }
  }
  EXPECT_GE(checked, 5);
  // Every example program is shown somewhere.
  for (const auto& entry : std::filesystem::directory_iterator(root + "/examples"))
    if (entry.path().extension() == ".cc")
      EXPECT_EQ(shown.count("examples/" + entry.path().filename().string()), 1u)
          << entry.path().filename() << " is in no documentation page";
}

TEST(DocExamples, AnUnmarkedOrChangedBlockIsFound) {
  const std::vector<Block> blocks =
      CppBlocks("text\n<!-- example: examples/a.cc -->\n\n```cpp\nint a;\n```\n```sh\n```cpp\n```\n```cpp\nint b;\n```\n");
  ASSERT_EQ(blocks.size(), 2u);
  EXPECT_EQ(blocks[0].example, "examples/a.cc");
  EXPECT_EQ(blocks[0].code, "int a;\n");
  EXPECT_EQ(blocks[0].line, 4);
  EXPECT_EQ(blocks[1].example, "");
  EXPECT_EQ(blocks[1].line, 10);
}

}  // namespace
