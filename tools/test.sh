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
tdf_build "$preset"
tdf_log "running the tests (preset $preset)"
ctest --preset "$preset" -j "$(nproc)" "$@"
