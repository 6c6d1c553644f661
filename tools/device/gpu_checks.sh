#!/usr/bin/env bash
# Runs on the lent GPU machine over the binaries tools/device/pack.sh packed:
# the CUDA tests, the GPU benchmarks, node traces and a memory check, as the
# mode says. Logs go to $OUT (the device tool brings back at most 8 files).
#   device run: carry [".devbin"], command "bash .devbin/gpu_checks.sh MODE"
#   MODE: tests | bench | trace | memcheck | full (tests, bench, memcheck)
set -uo pipefail
mode="${1:-full}"
out="${OUT:-/tmp/tdf_out}"
mkdir -p "$out"
here=.devbin
has() { [ "$mode" = full ] || [[ ",$mode," == *",$1,"* ]]; }
cublas=$(ls /usr/local/cuda/lib64/libcublas.so.* 2>/dev/null | head -1)
[ -n "$cublas" ] || cublas=$(find / -name 'libcublas.so.1[0-9]*' -not -path '/proc/*' 2>/dev/null | head -1)
export LD_LIBRARY_PATH="$PWD/$here/lib:$(dirname "${cublas:-/usr/local/cuda/lib64/x}"):${LD_LIBRARY_PATH:-}"
{
  date -u
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv
  echo "cublas: $cublas"; nproc; grep -m1 'model name' /proc/cpuinfo
  ldd $here/tdf_cuda_tests | grep -i 'not found' || echo "ldd: all found"
} >"$out/env.txt" 2>&1
head -3 "$out/env.txt" | tail -1
if has tests; then
  echo "== tdf_cuda_tests"
  timeout 120 $here/tdf_cuda_tests 2>&1 | tee "$out/cuda_tests.log" |
    grep -E '^\[  FAILED  \]|^\[==========\]|^\[  PASSED  \]|Failure|Expected|Which is|actual' | head -60
fi
if has bench; then
  echo "== tdf_cuda_bench"
  timeout 90 $here/tdf_cuda_bench --benchmark_min_time=0.2 2>&1 | tee "$out/cuda_bench.log" | grep '^BM_'
  echo "== tdf_treernn_bench --gpu (float64 check against native, then trees/s)"
  timeout 120 $here/tdf_treernn_bench --gpu --quick --batch_sizes=1,10 --repetitions=1 \
    --filter='/(recursion|iteration)/b(1|10)/' >"$out/treernn_gpu.log" 2>&1
  grep -E 'MISMATCH|UNIMPLEMENTED|FAILED|^training|^inference|verifying' "$out/treernn_gpu.log" | head -40
  echo "== tdf_treernn_bench (CPU, same machine)"
  timeout 60 $here/tdf_treernn_bench --quick --no_verify --batch_sizes=1,10 --repetitions=1 \
    --filter='/(recursion|iteration)/b(1|10)/' >"$out/treernn_cpu.log" 2>&1
  grep -E 'FAILED|^training|^inference' "$out/treernn_cpu.log"
fi
if has trace; then
  echo "== node traces of the TreeRNN forward (GPU, CPU)"
  for d in Gpu Cpu; do
    TDF_TRACE="$out/trace_$d.json" timeout 60 $here/tdf_cuda_bench --benchmark_min_time=0.3 \
      --benchmark_filter="TreeRnnForward_$d/6/64/4" 2>&1 | grep '^BM_'
  done
  echo "== node trace of a TreeRNN training step on the GPU (recursion, batch 1, 1 worker)"
  TDF_TRACE="$out/trace_train_gpu.json" timeout 60 $here/tdf_treernn_bench --gpu --quick --no_verify \
    --batch_sizes=1 --repetitions=1 --no_ceiling --filter='^train/recursion/b1/1w$' 2>&1 | grep -E '^training'

fi
if has memcheck && command -v compute-sanitizer >/dev/null; then
  echo "== compute-sanitizer memcheck"
  timeout 120 compute-sanitizer --tool memcheck --print-limit 20 $here/tdf_cuda_tests \
    --gtest_filter='CudaRowKernels.*:GpuVariables.*:GpuSession.*:CudaGradientKernels.*:TreeRnn.*' 2>&1 | tee "$out/memcheck.log" |
    grep -E 'ERROR SUMMARY|Invalid|FAILED|PASSED' | head -40
fi
