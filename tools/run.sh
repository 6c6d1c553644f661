#!/usr/bin/env bash
# The main job: builds tdf (release preset) and runs the benchmark harness in
# quick mode (the reference programs on the static-tag executor, the dynamic
# baseline and native C++). Extra arguments go to the harness.
#
#   bash tools/run.sh
#
# Installs missing Debian packages first (apt-get, only when needed) and
# reuses build/release between runs.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source tools/quickstart/common.sh

tdf_ensure_packages

# Build only what runs here; `bash tools/test.sh` builds the rest in the same
# build directory.
if [[ -f bench/CMakeLists.txt ]]; then
  tdf_build release --target tdf_bench
  exe=build/release/bench/tdf_bench
  [[ -x "$exe" ]] || exe="$(find build/release -name tdf_bench -type f -perm -u+x | head -n 1)"
  [[ -n "$exe" && -x "$exe" ]] || tdf_die "built target tdf_bench but found no tdf_bench executable under build/release"
  # The table (CSV) and chart go into the build directory, not the source
  # tree; a later --csv/--plot in "$@" overrides these.
  out=build/release
  tdf_log "running $exe --quick $* (CSV and chart in $out/)"
  exec "$exe" --quick --csv="$out/tdf_bench.csv" --plot="$out/tdf_bench.png" "$@"
fi

if [[ -f examples/CMakeLists.txt ]] && grep -q fib_example examples/CMakeLists.txt; then
  tdf_log "no benchmark harness (bench/) in this checkout; running examples/fib_example instead"
  tdf_build release --target fib_example
  exe="$(find build/release -name fib_example -type f -perm -u+x | head -n 1)"
  [[ -n "$exe" ]] || tdf_die "built target fib_example but found no fib_example executable under build/release"
  exec "$exe" "$@"
fi

tdf_die "this checkout has neither the benchmark harness (bench/) nor examples/fib_example to run"
