// The layers of src/ (docs/architecture.md): base below graph, graph below
// transform and autodiff, those below runtime; the CUDA backend beside the
// runtime. A lower layer never includes a higher one: tensors reach device
// memory through base/device_memory.h, not the backend.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace tdf {
namespace {

namespace fs = std::filesystem;

// The src/ folders each layer may include, besides its own.
const std::map<std::string, std::set<std::string>>& Allowed() {
  static const auto* allowed = new std::map<std::string, std::set<std::string>>{
      {"base", {}},
      {"graph", {"base"}},
      {"transform", {"base", "graph"}},
      {"autodiff", {"base", "graph", "transform"}},
  };
  return *allowed;
}

TEST(Layering, LowerLayersIncludeNoHigherOne) {
  const fs::path src = fs::path(TDF_SOURCE_DIR) / "src";
  std::set<std::string> layers;
  for (const auto& entry : fs::directory_iterator(src))
    if (entry.is_directory()) layers.insert(entry.path().filename().string());
  int checked = 0;
  for (const auto& [layer, allowed] : Allowed()) {
    ASSERT_TRUE(fs::is_directory(src / layer)) << layer;
    for (const auto& entry : fs::recursive_directory_iterator(src / layer)) {
      if (!entry.is_regular_file()) continue;
      std::ifstream in(entry.path());
      std::string line;
      while (std::getline(in, line)) {
        const std::string prefix = "#include \"";
        if (line.rfind(prefix, 0) != 0) continue;
        const std::string path = line.substr(prefix.size());
        const std::string top = path.substr(0, path.find('/'));
        if (!layers.count(top) || top == layer) continue;  // tdf/, absl/, ...: not a layer
        EXPECT_TRUE(allowed.count(top)) << entry.path().string() << " (" << layer << ") includes " << path;
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 0);  // the walk saw includes across layers at all
}

}  // namespace
}  // namespace tdf
