// tdf_cuda_bench: GPU vs CPU throughput of MatMul and elementwise Add (one
// kernel, no executor), and of a TreeRNN forward pass (a recursive function,
// through Session). GPU cases skip with "no CUDA device" where there is none.
//
//   tdf_cuda_bench --benchmark_filter=MatMul
#include <benchmark/benchmark.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "cuda/device_backend.h"
#include "tdf/builder.h"
#include "tdf/kernel.h"
#include "tdf/placement.h"
#include "tdf/session.h"
#include "tdf/transform.h"

namespace tdf {
namespace {

Tensor RandomFloats(const Shape& shape, uint32_t seed) {
  Tensor t = *Tensor::Empty(DType::kFloat32, shape);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1, 1);
  float* p = t.mutable_data<float>();
  for (int64_t i = 0; i < t.num_elements(); ++i) p[i] = dist(rng);
  return t;
}

bool HaveGpu(benchmark::State& state) {
  if (DeviceBackend::DeviceCount() > 0) return true;
  state.SkipWithError("no CUDA device");
  return false;
}

// Runs `op` on `inputs` (already on `device`) once per iteration. GPU
// iterations synchronize, so the time is the kernel's, not the launch's;
// with `sync_each` false only the last one does, so the time is what a
// worker thread spends launching (or, if the GPU is slower, the kernel's).
void RunKernelLoop(benchmark::State& state, const std::string& op, Device device, const std::vector<Tensor>& inputs,
                   bool sync_each = true) {
  NodeDef node;
  node.name = "bench";
  node.op = op;
  for (size_t i = 0; i < inputs.size(); ++i) node.input.push_back("in" + std::to_string(i));
  node.device = device.ToString();
  absl::StatusOr<std::unique_ptr<OpKernel>> kernel = KernelRegistry::Global()->Create(node, device.type);
  if (!kernel.ok()) {
    state.SkipWithError(std::string(kernel.status().message()).c_str());
    return;
  }
  std::vector<const Tensor*> ptrs;
  for (const Tensor& t : inputs) ptrs.push_back(&t);
  Tensor out;
  for (auto _ : state) {
    KernelContext ctx(ptrs.data(), static_cast<int>(ptrs.size()), &out, 1, device);
    absl::Status s = (*kernel)->Compute(ctx);
    if (s.ok() && !device.is_cpu() && sync_each) s = DeviceBackend::Synchronize(device);
    if (!s.ok()) {
      state.SkipWithError(std::string(s.message()).c_str());
      return;
    }
    benchmark::DoNotOptimize(out.raw_data());
  }
  if (!device.is_cpu() && !sync_each) {
    absl::Status s = DeviceBackend::Synchronize(device);
    if (!s.ok()) state.SkipWithError(std::string(s.message()).c_str());
  }
}

std::vector<Tensor> OnDevice(const std::vector<Tensor>& host, Device device) {
  std::vector<Tensor> out;
  for (const Tensor& h : host) {
    Tensor d = *Tensor::Empty(h.dtype(), h.shape(), device);
    (void)DeviceBackend::CopyHostToDevice(d.raw_mutable_data(), h.raw_data(), h.bytes(), device);
    out.push_back(d);
  }
  return out;
}

void BM_MatMul_Cpu(benchmark::State& state) {
  const int64_t n = state.range(0);
  RunKernelLoop(state, "MatMul", Device::Cpu(), {RandomFloats(Shape({n, n}), 1), RandomFloats(Shape({n, n}), 2)});
  state.SetItemsProcessed(state.iterations() * 2 * n * n * n);  // flops
}
void BM_MatMul_Gpu(benchmark::State& state) {
  if (!HaveGpu(state)) return;
  const int64_t n = state.range(0);
  RunKernelLoop(state, "MatMul", Device::Cuda(0),
                OnDevice({RandomFloats(Shape({n, n}), 1), RandomFloats(Shape({n, n}), 2)}, Device::Cuda(0)));
  state.SetItemsProcessed(state.iterations() * 2 * n * n * n);
}
BENCHMARK(BM_MatMul_Cpu)->RangeMultiplier(2)->Range(256, 2048)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_MatMul_Gpu)->RangeMultiplier(2)->Range(256, 2048)->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_Add_Cpu(benchmark::State& state) {
  const int64_t n = state.range(0);
  RunKernelLoop(state, "Add", Device::Cpu(), {RandomFloats(Shape({n}), 1), RandomFloats(Shape({n}), 2)});
  state.SetItemsProcessed(state.iterations() * n);
  state.SetBytesProcessed(state.iterations() * n * 12);
}
void BM_Add_Gpu(benchmark::State& state) {
  if (!HaveGpu(state)) return;
  const int64_t n = state.range(0);
  RunKernelLoop(state, "Add", Device::Cuda(0),
                OnDevice({RandomFloats(Shape({n}), 1), RandomFloats(Shape({n}), 2)}, Device::Cuda(0)));
  state.SetItemsProcessed(state.iterations() * n);
  state.SetBytesProcessed(state.iterations() * n * 12);
}
BENCHMARK(BM_Add_Cpu)->RangeMultiplier(4)->Range(1 << 20, 64 << 20)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Add_Gpu)->RangeMultiplier(4)->Range(1 << 20, 64 << 20)->UseRealTime()->Unit(benchmark::kMillisecond);

// The fixed cost of one small op: a [1, 150] Add (a TreeRNN node's size),
// synchronized each time (a round trip: launch, run, wait) or launched back
// to back (what a worker thread pays per GPU op).
void BM_SmallAdd_Cpu(benchmark::State& state) {
  RunKernelLoop(state, "Add", Device::Cpu(), {RandomFloats(Shape({1, 150}), 1), RandomFloats(Shape({1, 150}), 2)});
}
void BM_SmallAdd_Gpu_RoundTrip(benchmark::State& state) {
  if (!HaveGpu(state)) return;
  RunKernelLoop(state, "Add", Device::Cuda(0),
                OnDevice({RandomFloats(Shape({1, 150}), 1), RandomFloats(Shape({1, 150}), 2)}, Device::Cuda(0)));
}
void BM_SmallAdd_Gpu_Launch(benchmark::State& state) {
  if (!HaveGpu(state)) return;
  RunKernelLoop(state, "Add", Device::Cuda(0),
                OnDevice({RandomFloats(Shape({1, 150}), 1), RandomFloats(Shape({1, 150}), 2)}, Device::Cuda(0)),
                /*sync_each=*/false);
}
BENCHMARK(BM_SmallAdd_Cpu)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_SmallAdd_Gpu_RoundTrip)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_SmallAdd_Gpu_Launch)->UseRealTime()->Unit(benchmark::kMicrosecond);

// TreeRNN forward: h(i) = i < internal ? tanh([h(2i+1), h(2i+2)]·W + b) : E[i - internal],
// a complete binary tree of 2^depth leaves, hidden size H.
Graph TreeRnn(int64_t depth, int64_t hidden) {
  const int64_t internal = (int64_t{1} << depth) - 1;
  const int64_t leaves = internal + 1;
  GraphBuilder b;
  (void)b.DefineFunction(
      {"tree", {{"i", DType::kInt64}}, {{"h", DType::kFloat32}}},
      [&](GraphBuilder& f, const std::vector<Output>& args) -> std::vector<Output> {
        Output i = args[0];
        return f.Cond(
            f.Less(i, f.Const<int64_t>(internal)),
            [&] {
              Output two = f.Const<int64_t>(2);
              Output l = f.Call("tree", {f.Add(f.Mul(i, two), f.Const<int64_t>(1))})[0];
              Output r = f.Call("tree", {f.Add(f.Mul(i, two), two)})[0];
              Output w = f.Const(RandomFloats(Shape({2 * hidden, hidden}), 3));
              Output bias = f.Const(RandomFloats(Shape({1, hidden}), 4));
              return std::vector<Output>{f.Tanh(f.Add(f.MatMul(f.Concat({l, r}, 1), w), bias))};
            },
            [&] {
              Output e = f.Const(RandomFloats(Shape({leaves, hidden}), 5));
              return std::vector<Output>{
                  f.Reshape(f.Gather(e, f.Sub(i, f.Const<int64_t>(internal))), {1, hidden})};
            });
      });
  Output root = b.Placeholder("root", DType::kInt64);
  b.Identity(b.Sum(b.Call("tree", {root})[0]), "total");
  return *b.Build();
}

void TreeRnnLoop(benchmark::State& state, bool gpu) {
  const int64_t depth = state.range(0);
  const int64_t hidden = state.range(1);
  absl::StatusOr<Graph> g = StaticizeRecursion(TreeRnn(depth, hidden));
  if (!g.ok()) {
    state.SkipWithError(std::string(g.status().message()).c_str());
    return;
  }
  if (gpu) {
    PlacementOptions opts;
    opts.place_tensor_ops_on_gpu = true;
    opts.fallback_to_cpu = false;
    absl::Status s = PlaceDevices(*g, opts);
    if (!s.ok()) {
      state.SkipWithError(std::string(s.message()).c_str());
      return;
    }
  }
  SessionOptions so;
  so.num_workers = static_cast<int>(state.range(2));
  absl::StatusOr<std::unique_ptr<Session>> session = Session::Create(*g, so);
  if (!session.ok()) {
    state.SkipWithError(std::string(session.status().message()).c_str());
    return;
  }
  for (auto _ : state) {
    absl::StatusOr<std::vector<Tensor>> out = (*session)->Run({{"root", Tensor::Scalar<int64_t>(0)}}, {"total"});
    if (!out.ok()) {
      state.SkipWithError(std::string(out.status().message()).c_str());
      return;
    }
    benchmark::DoNotOptimize(out->data());
  }
  state.SetItemsProcessed(state.iterations() * ((int64_t{1} << (depth + 1)) - 1));  // tree nodes
}
void BM_TreeRnnForward_Cpu(benchmark::State& state) { TreeRnnLoop(state, false); }
void BM_TreeRnnForward_Gpu(benchmark::State& state) {
  if (!HaveGpu(state)) return;
  TreeRnnLoop(state, true);
}
// Args: depth, hidden size, workers.
void TreeRnnArgs(benchmark::internal::Benchmark* b) {
  b->Args({6, 64, 1})->Args({6, 64, 4})->Args({8, 256, 4})->Args({6, 1024, 4});
  b->UseRealTime()->Unit(benchmark::kMillisecond);
}
BENCHMARK(BM_TreeRnnForward_Cpu)->Apply(TreeRnnArgs);
BENCHMARK(BM_TreeRnnForward_Gpu)->Apply(TreeRnnArgs);

}  // namespace
}  // namespace tdf

BENCHMARK_MAIN();
