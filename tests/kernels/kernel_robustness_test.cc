// Randomized robustness test of the CPU kernels (kernel_robustness.h says
// what every call must do, and how the test is split): every op with a CPU
// kernel, and the state kernels, run 2000 times by default, directly (no
// executor), on generated cases.
//
// Each op has its own seed, printed with every failure; to reproduce or to
// soak longer:
//
//   TDF_KERNEL_ROBUSTNESS_SEED=7 TDF_KERNEL_ROBUSTNESS_CASES=20000 \
//     build/release/tests/tdf_kernels_tests --gtest_filter='*KernelRobustness*/Gather'
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/kernel_robustness.h"
#include "kernels/kernel_robustness_builders.h"
#include "kernels/kernel_test_util.h"
#include "runtime/state_kernels.h"
#include "tdf/kernel.h"
#include "tdf/op_registry.h"

namespace tdf {
namespace kernel_robustness {
namespace {

using kernel_test::MakeNode;
using ::testing::HasSubstr;

class KernelRobustnessTest : public ::testing::TestWithParam<std::string> {};

TEST_P(KernelRobustnessTest, RandomCasesGiveAStatusOrValidOutputs) {
  const std::string op = GetParam();
  const OpSchema* schema = OpRegistry::Global()->Find(op);
  ASSERT_NE(schema, nullptr);
  const uint64_t seed = OpSeed(op);
  SCOPED_TRACE(absl::StrCat("op ", op, ", seed ", seed, " (TDF_KERNEL_ROBUSTNESS_SEED=", BaseSeed(), ")"));
  Gen g(seed);
  Watchdog watchdog(std::chrono::seconds(60));
  Tally tally;
  const int cases = CasesPerOp();
  for (int i = 0; i < cases && tally.failures < 5; ++i) {
    const std::string label = absl::StrCat("case ", i, " of seed ", seed);
    watchdog.Enter(absl::StrCat(op, " ", label));
    Case c = MakeCase(g, op, *schema);
    NodeDef node = MakeNode(op, static_cast<int>(c.inputs.size()), c.attrs);
    const int num_outputs = ChooseNumOutputs(g, *schema, node, c);
    ++tally.cases;
    absl::StatusOr<std::unique_ptr<OpKernel>> kernel = KernelRegistry::Global()->Create(node, Device::Type::kCpu);
    if (!kernel.ok()) {
      // A kernel that cannot be made says so naming the node.
      EXPECT_THAT(std::string(kernel.status().message()), HasSubstr(node.name)) << label << ": " << kernel.status();
      continue;
    }
    ASSERT_NE(*kernel, nullptr) << label;
    ++tally.created;
    if (CheckCompute(**kernel, op, schema, node, c, num_outputs, nullptr, label, tally)) ++tally.ok;
  }
  if (EnvOr("TDF_KERNEL_ROBUSTNESS_VERBOSE", 0) != 0)
    std::printf("%-20s %d cases, %d kernels created, %d OK\n", op.c_str(), tally.cases, tally.created, tally.ok);
  // The generators must reach the compute paths, not only the first check.
  if (ValidBuilders().count(op) > 0 && op != "CopyToDevice") {
    EXPECT_GT(tally.ok, cases / 20) << op << ": only " << tally.ok << " of " << tally.cases << " cases ran";
  }
}

INSTANTIATE_TEST_SUITE_P(AllCpuKernels, KernelRobustnessTest, ::testing::ValuesIn(CpuKernelOps()),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

TEST(KernelRobustness, CoversEveryCpuKernelOp) {
  // Catches a registry that would make the suite above vacuous.
  EXPECT_GE(CpuKernelOps().size(), 55u);
  for (const std::string& op : CpuKernelOps())
    EXPECT_TRUE(ValidBuilders().count(op) > 0) << "no valid-case builder for " << op
                                               << "; add one in kernel_robustness_builders.h";
}

// ---------------------------------------------------------------------------
// The state kernels (Read, Assign, AssignAdd, AssignSub, ScatterAdd) take the
// session's variables through KernelContext::session_state().

// A store of one to three variables of random dtypes and values.
std::unique_ptr<runtime::VariableStore> RandomStore(Gen& g) {
  auto store = std::make_unique<runtime::VariableStore>();
  for (int i = 0, n = static_cast<int>(g.Uniform(1, 3)); i < n; ++i) {
    auto slot = std::make_unique<runtime::VariableSlot>();
    slot->name = absl::StrCat("v", i);
    slot->dtype = g.AnyDType();
    Tensor value = g.Fill(slot->dtype, g.AnyShape());
    {
      absl::MutexLock lock(&slot->mu);
      slot->value = value;
    }
    store->slots.push_back(std::move(slot));
  }
  return store;
}

Case StateCase(Gen& g, const std::string& op, const runtime::VariableStore& store) {
  const int64_t h = g.Uniform(0, static_cast<int64_t>(store.slots.size()) - 1);
  const runtime::VariableSlot& var = *store.slots[h];
  Tensor value;
  {
    absl::MutexLock lock(&var.mu);
    value = var.value;
  }
  Case c{{Tensor::Scalar<int64_t>(h)}, {{"dtype", var.dtype}}};
  if (op == "Assign") c.inputs.push_back(g.Fill(var.dtype, g.Chance(0.5) ? value.shape() : g.AnyShape()));
  if (op == "AssignAdd" || op == "AssignSub") c.inputs.push_back(g.Fill(var.dtype, value.shape()));
  if (op == "ScatterAdd") {
    const Shape& vs = value.shape();
    Tensor idx = g.Indices(g.IndexDType(), g.AnyShape(0, 2), vs.rank() > 0 ? vs.dim(0) : 1);
    Shape updates = idx.shape();
    for (int d = 1; d < vs.rank(); ++d) updates.AddDim(vs.dim(d));
    c.inputs.push_back(idx);
    c.inputs.push_back(g.Fill(var.dtype, updates));
  }
  return c;
}

class StateKernelRobustnessTest : public ::testing::TestWithParam<std::string> {};

TEST_P(StateKernelRobustnessTest, RandomCasesGiveAStatusOrValidOutputs) {
  const std::string op = GetParam();
  const OpSchema* schema = OpRegistry::Global()->Find(op);
  ASSERT_NE(schema, nullptr);
  const uint64_t seed = OpSeed(op);
  SCOPED_TRACE(absl::StrCat("op ", op, ", seed ", seed, " (TDF_KERNEL_ROBUSTNESS_SEED=", BaseSeed(), ")"));
  Gen g(seed);
  Watchdog watchdog(std::chrono::seconds(60));
  Tally tally;
  std::unique_ptr<runtime::VariableStore> store;
  const int cases = CasesPerOp();
  for (int i = 0; i < cases && tally.failures < 5; ++i) {
    const std::string label = absl::StrCat("case ", i, " of seed ", seed);
    watchdog.Enter(absl::StrCat(op, " ", label));
    if (i % 20 == 0) store = RandomStore(g);  // variables live across updates, as in a session
    Case c = g.Chance(0.2) ? RandomCase(g, *schema) : StateCase(g, op, *store);
    if (g.Chance(0.4)) Mutate(g, *schema, c);
    if (!c.inputs.empty() && g.Chance(0.1)) c.inputs[0] = Tensor::Scalar<int64_t>(g.ExtremeInt());  // bad handle
    NodeDef node = MakeNode(op, static_cast<int>(c.inputs.size()), c.attrs);
    const int num_outputs = ChooseNumOutputs(g, *schema, node, c);
    ++tally.cases;
    absl::StatusOr<std::unique_ptr<OpKernel>> kernel = runtime::MakeStateKernel(node);
    if (!kernel.ok()) {
      EXPECT_THAT(std::string(kernel.status().message()), HasSubstr(node.name)) << label << ": " << kernel.status();
      continue;
    }
    ++tally.created;
    void* state = g.Chance(0.05) ? nullptr : store.get();
    if (CheckCompute(**kernel, op, schema, node, c, num_outputs, state, label, tally)) ++tally.ok;
    // Whatever happened, every variable still holds a value of its dtype.
    for (const auto& slot : store->slots) {
      absl::MutexLock lock(&slot->mu);
      EXPECT_EQ(slot->value.dtype(), slot->dtype) << label << ": variable " << slot->name;
      EXPECT_TRUE(WellFormed(slot->value)) << label << ": variable " << slot->name;
    }
  }
  if (EnvOr("TDF_KERNEL_ROBUSTNESS_VERBOSE", 0) != 0)
    std::printf("%-20s %d cases, %d kernels created, %d OK\n", op.c_str(), tally.cases, tally.created, tally.ok);
  EXPECT_GT(tally.ok, cases / 20) << op << ": only " << tally.ok << " of " << tally.cases << " cases ran";
}

INSTANTIATE_TEST_SUITE_P(StateKernels, StateKernelRobustnessTest,
                         ::testing::Values("Read", "Assign", "AssignAdd", "AssignSub", "ScatterAdd"),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });
}  // namespace
}  // namespace kernel_robustness
}  // namespace tdf
