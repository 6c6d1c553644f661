#!/usr/bin/env bash
# Builds the GPU test and benchmark binaries for a lent device machine and
# packs them, with the shared libraries they need that such a machine lacks
# (Abseil, oneTBB, Protobuf, ...), into .devbin/ for the device tool's
# `carry`. The device image has CUDA but none of tdf's Debian dependencies,
# and nothing can be installed there, so the binaries travel ready-built.
# No -march=native (the device's CPU is another), sm_90 only (H100/H200).
#
#   bash tools/device/pack.sh            # then carry .devbin and run
#   bash tools/device/gpu_checks.sh      # there (see its header)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
build=build/device
targets=(tdf_cuda_tests tdf_cuda_bench tdf_treernn_bench)
if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DTDF_NATIVE_ARCH=OFF -DTDF_ENABLE_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES=90
fi
cmake --build "$build" -j"$(nproc)" --target "${targets[@]}"
exclude="$(git rev-parse --git-common-dir)/info/exclude"
grep -qx '/.devbin/' "$exclude" 2>/dev/null || echo '/.devbin/' >>"$exclude"
rm -rf .devbin && mkdir -p .devbin/lib
for t in "${targets[@]}"; do
  find "$build" -name "$t" -type f -perm -u+x -exec cp {} .devbin/ \;
  strip .devbin/"$t"
done
# Every non-glibc shared library the binaries load, except the CUDA runtime's
# driver pieces, which the device machine has in a matching version.
for t in "${targets[@]}"; do ldd .devbin/"$t"; done | awk '/=> \//{print $3}' | sort -u |
  grep -Ev '/(libc|libm|libdl|librt|libpthread|ld-linux[^/]*|libgcc_s|libstdc\+\+|libcuda)\.so' |
  while read -r lib; do cp -L "$lib" .devbin/lib/; done
cp tools/device/gpu_checks.sh .devbin/
du -sh .devbin; ls .devbin .devbin/lib
