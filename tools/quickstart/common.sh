# Shared by tools/run.sh and tools/test.sh (sourced, not run).
#
# Installs the build dependencies with apt-get when some are missing (and
# only then), and configures + builds a CMake preset incrementally in
# build/<preset>.

# Debian 12 packages that build and test everything in the repository.
TDF_PACKAGES=(
  build-essential cmake pkgconf doxygen
  libabsl-dev libtbb-dev libeigen3-dev libprotobuf-dev protobuf-compiler
  libgtest-dev libgmock-dev libbenchmark-dev
  graphviz gnuplot-nox
  clang libclang-rt-14-dev
  openmpi-bin libopenmpi-dev
)

tdf_log() { echo "== tdf: $*" >&2; }
tdf_die() { echo "== tdf: error: $*" >&2; exit 1; }

tdf_package_installed() {
  [[ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null)" == "install ok installed" ]]
}

tdf_ensure_packages() {
  local missing=() p
  if command -v dpkg-query >/dev/null 2>&1; then
    for p in "${TDF_PACKAGES[@]}"; do
      tdf_package_installed "$p" || missing+=("$p")
    done
  else
    # Not Debian-like: trust that the tools are there, and let CMake say
    # precisely what is missing if not.
    tdf_log "no dpkg; not checking packages (need: ${TDF_PACKAGES[*]})"
    return 0
  fi
  if ((${#missing[@]} == 0)); then
    tdf_log "all ${#TDF_PACKAGES[@]} build packages are installed; skipping apt-get"
    return 0
  fi
  local sudo=()
  if [[ "$(id -u)" != 0 ]]; then
    command -v sudo >/dev/null 2>&1 || tdf_die "missing packages (${missing[*]}); run as root or install sudo"
    sudo=(sudo)
  fi
  tdf_log "installing missing packages: ${missing[*]}"
  "${sudo[@]}" apt-get update
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
}

# tdf_build <preset> [cmake --build args...]: configure (cheap when nothing
# changed) and build incrementally in build/<preset>.
tdf_build() {
  local preset="$1"
  shift
  cmake --preset "$preset"
  cmake --build --preset "$preset" -j "$(nproc)" "$@"
}
