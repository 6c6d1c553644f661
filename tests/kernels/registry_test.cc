#include <set>
#include <string>

#include "gtest/gtest.h"
#include "tdf/kernel.h"
#include "tdf/op_registry.h"

namespace tdf {
namespace {

// Every op that runs a kernel has a CPU kernel, except the ones the runtime
// handles itself: Placeholder (fed) and the state ops (need session state).
TEST(CpuKernelRegistry, EveryKernelOpHasACpuKernel) {
  const std::set<std::string> not_here = {"Placeholder", "Variable", "Read",      "Assign",
                                          "AssignAdd",   "AssignSub", "ScatterAdd"};
  int checked = 0;
  for (const std::string& op : OpRegistry::Global()->ListOps()) {
    const OpSchema* schema = OpRegistry::Global()->Find(op);
    ASSERT_NE(schema, nullptr);
    if (schema->kind() != OpKind::kKernel || not_here.count(op) > 0) continue;
    EXPECT_TRUE(KernelRegistry::Global()->Has(op, Device::Type::kCpu)) << "no CPU kernel for " << op;
    ++checked;
  }
  EXPECT_GE(checked, 55);  // the 55 ops of issue #3 at the time of writing
}

TEST(CpuKernelRegistry, UnknownOpIsUnimplemented) {
  NodeDef node;
  node.name = "n";
  node.op = "NoSuchOp";
  absl::StatusOr<std::unique_ptr<OpKernel>> k = KernelRegistry::Global()->Create(node, Device::Type::kCpu);
  EXPECT_EQ(k.status().code(), absl::StatusCode::kUnimplemented);
}

}  // namespace
}  // namespace tdf
