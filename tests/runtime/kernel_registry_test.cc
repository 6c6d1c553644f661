// KernelRegistry: lookups read a snapshot of the factories without the
// registry's mutex; a registration after lookups must still be seen.
#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tdf/kernel.h"

namespace tdf {
namespace {

using ::testing::HasSubstr;

// A factory that reports which one it is through its error (no kernel
// needs to be built for that).
KernelFactory Tagged(int tag) {
  return [tag](const NodeDef&) -> absl::StatusOr<std::unique_ptr<OpKernel>> {
    return absl::InternalError(absl::StrCat("factory ", tag));
  };
}

NodeDef Node(const std::string& op) {
  NodeDef n;
  n.name = "k";
  n.op = op;
  return n;
}

TEST(KernelRegistryTest, RegistrationAfterLookupsIsSeen) {
  KernelRegistry* registry = KernelRegistry::Global();
  const NodeDef node = Node("KernelRegistryTestOp");
  absl::StatusOr<std::unique_ptr<OpKernel>> missing = registry->Create(node, Device::Type::kCpu);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(missing.status().message(), HasSubstr("no CPU kernel for op KernelRegistryTestOp"));

  registry->Register("KernelRegistryTestOp", Device::Type::kCpu, Tagged(1));
  absl::StatusOr<std::unique_ptr<OpKernel>> first = registry->Create(node, Device::Type::kCpu);
  ASSERT_FALSE(first.ok());
  EXPECT_THAT(first.status().message(), HasSubstr("node 'k' (KernelRegistryTestOp): factory 1"));

  // Replaced: the new factory, not the one the earlier snapshot held.
  registry->Register("KernelRegistryTestOp", Device::Type::kCpu, Tagged(2));
  EXPECT_THAT(registry->Create(node, Device::Type::kCpu).status().message(), HasSubstr("factory 2"));

  EXPECT_TRUE(registry->Has("KernelRegistryTestOp", Device::Type::kCpu));
  EXPECT_FALSE(registry->Has("KernelRegistryTestOp", Device::Type::kCuda));
  EXPECT_THAT(registry->Create(node, Device::Type::kCuda).status().message(),
              HasSubstr("no CUDA kernel for op KernelRegistryTestOp"));
  // The built-in kernels are still there.
  EXPECT_TRUE(registry->Create(Node("Identity"), Device::Type::kCpu).ok());
}

// Lookups on several threads while another registers: each lookup sees
// either no kernel or one of the registered factories (run under TSan by
// the sanitizer presets).
TEST(KernelRegistryTest, LookupsWhileRegistering) {
  KernelRegistry* registry = KernelRegistry::Global();
  std::atomic<bool> stop{false};
  std::atomic<int> found{0};
  std::vector<std::thread> readers;
  for (int t = 0; t < 4; ++t) {
    readers.emplace_back([&] {
      const NodeDef node = Node("KernelRegistryRacedOp");
      while (!stop.load()) {
        absl::StatusOr<std::unique_ptr<OpKernel>> k = registry->Create(node, Device::Type::kCpu);
        ASSERT_FALSE(k.ok());
        if (k.status().code() == absl::StatusCode::kUnimplemented) continue;
        ASSERT_THAT(k.status().message(), HasSubstr("factory "));
        found.fetch_add(1);
      }
    });
  }
  for (int i = 0; i < 200; ++i) registry->Register("KernelRegistryRacedOp", Device::Type::kCpu, Tagged(i));
  while (found.load() == 0) std::this_thread::yield();
  stop.store(true);
  for (std::thread& t : readers) t.join();
  EXPECT_THAT(registry->Create(Node("KernelRegistryRacedOp"), Device::Type::kCpu).status().message(),
              HasSubstr("factory 199"));
}

}  // namespace
}  // namespace tdf
