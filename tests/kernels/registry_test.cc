#include <set>
#include <string>
#include <vector>

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

// A kernel's creation error carries "node 'name' (Op): " exactly once
// (issue #26, item 9). The prefix used to be skipped whenever the name
// appeared anywhere in the message: node 'r' is in "Reshape: bad target
// shape", so that error named no node. Names here are chosen to occur in
// their messages.
TEST(CpuKernelRegistry, CreationErrorsNameTheNodeOnce) {
  struct Case {
    std::string name, op;
    AttrMap attrs;
  };
  const std::vector<Case> cases = {
      {"r", "Reshape", {{"shape", std::vector<int64_t>{-3, 2}}}},
      {"Reshape", "Reshape", {{"shape", std::vector<int64_t>{-1, -1}}}},
      {"e", "Slice", {{"begin", std::vector<int64_t>{0, 0}}, {"size", std::vector<int64_t>{1}}}},
      {"a", "Cast", {{"DstT", DType::kInvalid}}},
      {"C", "Const", {{"value", Tensor()}}},
      // Errors that NodeDef's attr getters label already: not twice.
      {"r", "Reshape", {}},
      {"s", "Concat", {{"axis", std::string("s")}}},
  };
  for (const Case& c : cases) {
    NodeDef node;
    node.name = c.name;
    node.op = c.op;
    node.input = {"in0"};
    node.attr = c.attrs;
    absl::StatusOr<std::unique_ptr<OpKernel>> k = KernelRegistry::Global()->Create(node, Device::Type::kCpu);
    ASSERT_FALSE(k.ok()) << c.name;
    const std::string message(k.status().message());
    const std::string label = "node '" + c.name + "' (" + c.op + "): ";
    EXPECT_EQ(message.rfind(label, 0), 0u) << message;
    EXPECT_EQ(message.find(label, 1), std::string::npos) << "labeled twice: " << message;
    EXPECT_EQ(k.status().code(), absl::StatusCode::kInvalidArgument) << message;
  }
}

}  // namespace
}  // namespace tdf
