#!/usr/bin/env bash
# Builds tdf and runs its test suite with ctest.
#
#   bash tools/test.sh            # release preset (CUDA too when nvcc is found)
#   bash tools/test.sh asan       # AddressSanitizer + UBSan
#   bash tools/test.sh tsan       # ThreadSanitizer
#   bash tools/test.sh debug
#   bash tools/test.sh release -R Install   # extra arguments go to ctest
#
# Installs missing Debian packages first (apt-get, only when needed) and
# reuses build/<preset> between runs.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source tools/quickstart/common.sh

preset="${1:-release}"
case "$preset" in
  release | debug | asan | tsan | fuzz) ;;
  *) tdf_die "unknown preset '$preset' (want release, debug, asan, tsan or fuzz)" ;;
esac
shift $(($# > 0 ? 1 : 0))

tdf_ensure_packages
if [ "$preset" = fuzz ]; then
  # The libFuzzer targets only (clang, ASan/UBSan), each run for a bounded
  # time by its ctest entry Fuzz.<name>.Smoke.
  cmake --preset fuzz
  fuzz_targets=$(cmake --build --preset fuzz --target help | sed -n 's/^\.\.\. \(tdf_.*_fuzz\).*/\1/p')
  [ -n "$fuzz_targets" ] || tdf_die "no fuzz targets (fuzz/*_fuzz.cc)"
  # shellcheck disable=SC2086
  cmake --build --preset fuzz -j "$(nproc)" --target $fuzz_targets
  tdf_log "running the fuzzers (preset fuzz)"
  ctest --preset fuzz -R '^Fuzz\.' "$@"
  exit 0
fi
tdf_build "$preset"
tdf_log "running the tests (preset $preset)"
# --timeout: a default for the tests that set none (a hang fails, named).
ctest --preset "$preset" -j "$(nproc)" --timeout 900 "$@"
