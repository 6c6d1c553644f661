// The documentation's shell blocks are run, as its C++ is built
// (readme_examples_test.cc). In README.md and every docs/*.md, a code block
// (fenced, or indented by four spaces) is
//   - a transcript when a line starts with "$ ": each "$ " command is run
//     and its output (stdout and stderr) must equal the lines under it, line
//     for line; "…" in a shown line stands for one number that varies from
//     run to run (a time, a peak under several workers);
//   - a command block when a line invokes the CLI (`tdf ...`, also under
//     mpirun) or Graphviz (`... | dot ...`): every line is run;
// and every command must exit 0, unless a marker on the line before the
// block says otherwise:
//   <!-- not-run: WHY -->   the block is not run (a usage synopsis);
//   <!-- exits: N -->       every command of the block exits with status N.
// The commands run with bash (pipefail) in a scratch folder of the build
// tree that looks like the source root: examples/ and tests/ (the data
// files), build/release (this build), and `tdf` (this build's CLI) on PATH.
// Graphviz lines run without Graphviz as their tdf part alone; mpirun lines
// only in a build with MPI.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

// The build defines these (top-level CMakeLists.txt) where it has the CLI.
#ifndef TDF_CLI
#define TDF_CLI ""
#define TDF_BINARY_DIR ""
#endif

namespace {

namespace fs = std::filesystem;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> SplitLines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) lines.push_back(line);
  return lines;
}

std::string TrimLeft(const std::string& s) {
  const size_t start = s.find_first_not_of(" \t");
  return start == std::string::npos ? "" : s.substr(start);
}

std::vector<std::string> Words(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> words;
  std::string word;
  while (in >> word) words.push_back(word);
  return words;
}

struct ShellBlock {
  int line = 0;                    // of the block's first line, 1-based
  std::vector<std::string> lines;  // without the fence or the indentation
  std::string not_run;             // the not-run marker's reason
  int exits = 0;                   // the exit status its commands must have
};

// The non-C++ code blocks of a Markdown text, fenced or indented, with the
// markers on the line before them (blank lines between are allowed).
std::vector<ShellBlock> CodeBlocks(const std::string& text) {
  const std::vector<std::string> lines = SplitLines(text);
  std::vector<ShellBlock> blocks;
  std::string not_run;
  int exits = 0;
  static const std::regex not_run_marker("<!-- not-run: (.+) -->"), exits_marker("<!-- exits: ([0-9]+) -->");
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string& line = lines[i];
    std::smatch match;
    if (std::regex_match(line, match, not_run_marker)) {
      not_run = match[1];
      continue;
    }
    if (std::regex_match(line, match, exits_marker)) {
      exits = std::stoi(match[1]);
      continue;
    }
    if (line.empty()) continue;
    if (line.rfind("```", 0) == 0) {
      const bool cpp = line == "```cpp" || line == "```c++";
      ShellBlock block{static_cast<int>(i) + 2, {}, not_run, exits};
      while (++i < lines.size() && lines[i] != "```") block.lines.push_back(lines[i]);
      if (!cpp) blocks.push_back(block);
    } else if (line.rfind("    ", 0) == 0 && (i == 0 || lines[i - 1].empty() || lines[i - 1].rfind("<!--", 0) == 0)) {
      ShellBlock block{static_cast<int>(i) + 1, {}, not_run, exits};
      for (; i < lines.size(); ++i) {
        if (lines[i].rfind("    ", 0) == 0) {
          block.lines.push_back(lines[i].substr(4));
        } else if (lines[i].empty() && i + 1 < lines.size() && lines[i + 1].rfind("    ", 0) == 0) {
          block.lines.push_back("");
        } else {
          break;
        }
      }
      --i;
      blocks.push_back(block);
    } else {
      // A paragraph: skip it whole, so that its indented continuation lines
      // are not taken for a code block.
      while (i + 1 < lines.size() && !lines[i + 1].empty() && lines[i + 1].rfind("```", 0) != 0) ++i;
    }
    not_run.clear();
    exits = 0;
  }
  return blocks;
}

// Whether a command line runs the CLI (`tdf ...`, `mpirun ... tdf ...`)
// or pipes into Graphviz (`... | dot ...`).
bool InvokesTdfOrDot(const std::string& line) {
  const std::vector<std::string> words = Words(line);
  if (words.empty()) return false;
  if (words[0] == "tdf") return true;
  if (words[0] == "mpirun" && std::find(words.begin(), words.end(), "tdf") != words.end()) return true;
  for (size_t i = 0; i + 1 < words.size(); ++i)
    if (words[i] == "|" && words[i + 1] == "dot") return true;
  return false;
}

bool IsTranscript(const ShellBlock& block) {
  return std::any_of(block.lines.begin(), block.lines.end(),
                     [](const std::string& line) { return TrimLeft(line).rfind("$ ", 0) == 0; });
}

bool IsCommandBlock(const ShellBlock& block) {
  return std::any_of(block.lines.begin(), block.lines.end(), InvokesTdfOrDot);
}

// Whether an output line is the line the documentation shows, where "…"
// stands for one number.
bool LineMatches(const std::string& shown, const std::string& actual) {
  const std::string placeholder = "…";
  if (shown.find(placeholder) == std::string::npos) return shown == actual;
  std::string pattern;
  for (size_t i = 0; i < shown.size();) {
    if (shown.compare(i, placeholder.size(), placeholder) == 0) {
      pattern += "[-+]?[0-9]+(\\.[0-9]+)?([eE][-+]?[0-9]+)?";
      i += placeholder.size();
      continue;
    }
    if (std::string("\\^$.|?*+()[]{}").find(shown[i]) != std::string::npos) pattern += '\\';
    pattern += shown[i++];
  }
  return std::regex_match(actual, std::regex(pattern));
}

// Where the commands of one documentation page run.
class Sandbox {
 public:
  explicit Sandbox(const std::string& name) : dir_(fs::path(TDF_BINARY_DIR) / "doc_commands" / name) {
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "bin");
    fs::create_directories(dir_ / "build");
    fs::create_directory_symlink(fs::path(TDF_SOURCE_DIR) / "examples", dir_ / "examples");
    fs::create_directory_symlink(fs::path(TDF_SOURCE_DIR) / "tests", dir_ / "tests");
    fs::create_directory_symlink(TDF_BINARY_DIR, dir_ / "build" / "release");
    fs::create_symlink(TDF_CLI, dir_ / "bin" / "tdf");
  }

  struct Result {
    int status = -1;
    std::string output;
  };

  // Runs one command line with bash, stdout and stderr together.
  Result Run(const std::string& command) {
    const fs::path script = dir_ / ("command_" + std::to_string(++count_) + ".sh");
    {
      std::ofstream out(script);
      out << "set -o pipefail\ncd '" << dir_.string() << "' || exit 99\nexport PATH='" << (dir_ / "bin").string()
          << "':\"$PATH\"\n";
#ifdef TDF_DOC_MPI_ENV
      // Oversubscribed, as the doc's `mpirun -np 2` may outnumber the cores.
      out << "export " << TDF_DOC_MPI_ENV << " OMPI_MCA_rmaps_base_oversubscribe=1\n";
#endif
      out << command << "\n";
    }
    // Output to a file, not a pipe: a process the command left behind (an
    // mpirun daemon) would hold a pipe open and the read would never end.
    // timeout kills the command's process group, then SIGKILLs it 10 s on.
    const fs::path output = dir_ / ("command_" + std::to_string(count_) + ".out");
    Result result;
    const int status = std::system(
        ("timeout --kill-after=10 300 bash '" + script.string() + "' > '" + output.string() + "' 2>&1 < /dev/null")
            .c_str());
    result.output = ReadFile(output.string());
    result.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return result;
  }

 private:
  fs::path dir_;
  int count_ = 0;
};

bool HaveGraphviz() { return std::system("command -v dot >/dev/null 2>&1") == 0; }

// How a documented command line runs in this build: as written, or its tdf
// part alone without Graphviz; empty (with the reason in `skipped`) where
// it cannot run here.
std::string Runnable(const std::string& line, std::string* skipped) {
  const std::vector<std::string> words = Words(line);
  if (!words.empty() && words[0] == "mpirun") {
#ifndef TDF_DOC_MPI_ENV
    *skipped = "a build without MPI";
    return "";
#endif
  }
  const size_t pipe_to_dot = line.find("| dot ");
  if (pipe_to_dot != std::string::npos && !HaveGraphviz()) {
    *skipped = "no Graphviz `dot`: ran its tdf part alone";
    return line.substr(0, pipe_to_dot) + "> /dev/null";
  }
  if (line.find("build/release/examples/") != std::string::npos) {
#ifndef TDF_DOC_EXAMPLES_BUILT
    *skipped = "the examples are not built (TDF_BUILD_EXAMPLES=OFF)";
    return "";
#endif
  }
  return line;
}

std::vector<std::string> DocumentationFiles() {
  const std::string root = TDF_SOURCE_DIR;
  std::vector<std::string> files = {"README.md"};
  for (const auto& entry : fs::directory_iterator(root + "/docs"))
    if (entry.path().extension() == ".md") files.push_back("docs/" + entry.path().filename().string());
  std::sort(files.begin() + 1, files.end());
  return files;
}

class DocCommands : public ::testing::TestWithParam<std::string> {};

// Every transcript and command block of the page runs as shown, or is
// marked not-run.
TEST_P(DocCommands, RunAsShown) {
  if (std::string(TDF_CLI).empty()) GTEST_SKIP() << "a build without the tdf CLI";
  const std::string doc = GetParam();
  const std::string text = ReadFile(std::string(TDF_SOURCE_DIR) + "/" + doc);
  ASSERT_FALSE(text.empty()) << doc;
  std::string name = doc;
  std::replace_if(name.begin(), name.end(), [](char c) { return !std::isalnum(static_cast<unsigned char>(c)); }, '_');
  Sandbox sandbox(name);
  int ran = 0, not_run = 0;
  for (const ShellBlock& block : CodeBlocks(text)) {
    const bool transcript = IsTranscript(block), commands = !transcript && IsCommandBlock(block);
    SCOPED_TRACE(doc + ":" + std::to_string(block.line));
    if (!block.not_run.empty()) {
      EXPECT_TRUE(transcript || commands) << "a not-run marker on a block that would not run anyway: drop it";
      ++not_run;
      continue;
    }
    if (!transcript && !commands) continue;
    for (size_t i = 0; i < block.lines.size(); ++i) {
      std::string command = TrimLeft(block.lines[i]);
      if (command.empty()) continue;
      std::vector<std::string> shown;
      if (transcript) {
        ASSERT_EQ(command.rfind("$ ", 0), 0u) << "output before the first \"$ \" command: " << command;
        command = command.substr(2);
        while (i + 1 < block.lines.size() && TrimLeft(block.lines[i + 1]).rfind("$ ", 0) != 0)
          shown.push_back(block.lines[++i]);
        while (!shown.empty() && shown.back().empty()) shown.pop_back();
      }
      std::string skipped;
      const std::string runnable = Runnable(command, &skipped);
      if (!skipped.empty()) std::printf("%s:%d: %s: %s\n", doc.c_str(), block.line, command.c_str(), skipped.c_str());
      if (runnable.empty()) continue;
      const Sandbox::Result result = sandbox.Run(runnable);
      ++ran;
      EXPECT_EQ(result.status, block.exits) << command << "\n" << result.output;
      if (!transcript || !skipped.empty()) continue;
      const std::vector<std::string> actual = SplitLines(result.output);
      for (size_t k = 0; k < std::max(shown.size(), actual.size()); ++k) {
        const std::string shown_line = k < shown.size() ? shown[k] : "(nothing)";
        const std::string actual_line = k < actual.size() ? actual[k] : "(nothing)";
        EXPECT_TRUE(k < shown.size() && k < actual.size() && LineMatches(shown_line, actual_line))
            << command << ": output line " << k + 1 << "\n  the docs show: " << shown_line
            << "\n  the run prints: " << actual_line;
      }
    }
  }
  std::printf("%s: %d commands run, %d blocks marked not-run\n", doc.c_str(), ran, not_run);
}

INSTANTIATE_TEST_SUITE_P(Docs, DocCommands, ::testing::ValuesIn(DocumentationFiles()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string name = info.param;
                           for (char& c : name)
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           return name;
                         });

// The documented transcripts include the example programs' output.
TEST(DocCommandsCoverage, EveryExampleOutputIsChecked) {
  int example_transcripts = 0;
  for (const std::string& doc : DocumentationFiles())
    for (const ShellBlock& block : CodeBlocks(ReadFile(std::string(TDF_SOURCE_DIR) + "/" + doc)))
      if (IsTranscript(block) && block.not_run.empty())
        for (const std::string& line : block.lines)
          if (TrimLeft(line).rfind("$ build/release/examples/", 0) == 0) ++example_transcripts;
  EXPECT_GE(example_transcripts, 6);
}

TEST(DocCommandsParsing, FindsFencedAndIndentedBlocksWithTheirMarkers) {
  const std::vector<ShellBlock> blocks = CodeBlocks(
      "text\n\n```\n$ build/release/examples/fib_example\nfib(20) = 10946\n```\n\n"
      "<!-- not-run: synopsis -->\n\n    tdf validate FILE\n\n"
      "<!-- exits: 1 -->\n\n    $ tdf validate bad.pbtxt\n    tdf: bad\n\n"
      "```cpp\nint a;\n```\n\n    tdf dot x | dot -Tpng -o x.png\n\n"
      "A paragraph\n    continued, not a block: tdf run\n");
  ASSERT_EQ(blocks.size(), 4u);
  EXPECT_EQ(blocks[0].line, 4);
  EXPECT_TRUE(IsTranscript(blocks[0]));
  EXPECT_EQ(blocks[0].lines, (std::vector<std::string>{"$ build/release/examples/fib_example", "fib(20) = 10946"}));
  EXPECT_EQ(blocks[1].not_run, "synopsis");
  EXPECT_TRUE(IsCommandBlock(blocks[1]));
  EXPECT_EQ(blocks[2].exits, 1);
  EXPECT_EQ(blocks[2].not_run, "");
  EXPECT_TRUE(IsTranscript(blocks[2]));
  EXPECT_TRUE(IsCommandBlock(blocks[3]));
  EXPECT_EQ(blocks[3].exits, 0);
}

TEST(DocCommandsParsing, TellsCommandsFromOtherLines) {
  EXPECT_TRUE(InvokesTdfOrDot("tdf run fib.pbtxt --feed n=1 --fetch result"));
  EXPECT_TRUE(InvokesTdfOrDot("mpirun -np 2 tdf run fib.pbtxt"));
  EXPECT_TRUE(InvokesTdfOrDot("cat x.dot | dot -Tsvg"));
  EXPECT_FALSE(InvokesTdfOrDot("tools/tdf_cli  the command-line tool"));
  EXPECT_FALSE(InvokesTdfOrDot("mpirun -np 2 build/release/bench/tdf_transport_bench"));
  EXPECT_FALSE(InvokesTdfOrDot("cmake --build --preset release --target docs"));
}

// An edited output line is a mismatch; "…" matches a number and only that.
TEST(DocCommandsParsing, OutputLinesMatchExactlyButForNumberPlaceholders) {
  EXPECT_TRUE(LineMatches("fib(20) = 10946", "fib(20) = 10946"));
  EXPECT_FALSE(LineMatches("fib(20) = 10947", "fib(20) = 10946"));
  EXPECT_FALSE(LineMatches("fib(20) = 10946", "fib(20) = 10946 "));
  EXPECT_TRUE(LineMatches("1 firings, at most … live", "1 firings, at most 38 live"));
  EXPECT_TRUE(LineMatches("  elapsed          …ms", "  elapsed          1.90979ms"));
  EXPECT_TRUE(LineMatches("loss = …", "loss = 7.51e-17"));
  EXPECT_FALSE(LineMatches("at most … live", "at most many live"));
  EXPECT_FALSE(LineMatches("at most … live", "at most 38 live, 0 after"));
  EXPECT_FALSE(LineMatches("(x) = …", "[x] = 1"));
}

}  // namespace
