#!/usr/bin/env bash
# Gathers what the bare accelerator machine lacks into ONE git-ignored folder, .gpu-kit/ (carry it
# with the device tool: carry [".gpu-kit"]). That machine has torch (CUDA) in /opt/torch/.venv, cmake,
# ninja, nvcc and a compiler, and nothing else: the header-only dependencies of core + CLI go here,
# with tiny CMake package files (tests/gpu/kit/*.cmake) that find_package picks up through
# CMAKE_PREFIX_PATH=.gpu-kit. spdlog and fmt are used header-only (SPDLOG_HEADER_ONLY,
# FMT_HEADER_ONLY): nothing to link. gloo's headers come too: core/ranks includes the wheel's
# ProcessGroupGloo.hpp, which needs them (the library itself is inside libtorch_cpu).
#   tests/gpu/prepare.sh [KIT_DIR]   (default .gpu-kit; refuses to grow past 50 MiB)
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
KIT="${1:-$ROOT/.gpu-kit}"
INC=/usr/include
rm -rf "$KIT"
mkdir -p "$KIT/include" "$KIT/lib/cmake"
copy() {  # copy DIR from /usr/include; required unless $2 = optional
  if [ -d "$INC/$1" ]; then cp -a "$INC/$1" "$KIT/include/"
  elif [ "${2:-}" = optional ]; then echo "prepare: $INC/$1 absent (optional)" >&2
  else echo "prepare: $INC/$1 missing: apt-get install the package that provides it" >&2; exit 1; fi
}
copy nlohmann; copy CLI; copy spdlog; copy fmt; copy gloo
# OpenSSL's libcrypto (core/ranks: the run secret's handshake and the store's encryption): its
# headers and the library itself, found through OPENSSL_ROOT_DIR=.gpu-kit (tests/gpu/CMakeLists.txt).
copy openssl
cp -a "$INC"/x86_64-linux-gnu/openssl/*.h "$KIT/include/openssl/"
cp /usr/lib/x86_64-linux-gnu/libcrypto.so.3 "$KIT/lib/"
ln -sf libcrypto.so.3 "$KIT/lib/libcrypto.so"
# Debian's spdlog is configured for an external fmt library (tweakme.h): the kit keeps that choice
# and makes fmt header-only, so neither libspdlog nor libfmt is needed at link time.
for pkg in nlohmann_json CLI11 spdlog; do
  mkdir -p "$KIT/lib/cmake/$pkg"
  cp "$ROOT/tests/gpu/kit/$pkg.cmake" "$KIT/lib/cmake/$pkg/${pkg}Config.cmake"
  # Any version asked for is accepted: the kit holds the versions this project is built with here.
  printf 'set(PACKAGE_VERSION_COMPATIBLE TRUE)\nset(PACKAGE_VERSION_EXACT FALSE)\nset(PACKAGE_VERSION "${PACKAGE_FIND_VERSION}")\n' \
    >"$KIT/lib/cmake/$pkg/${pkg}ConfigVersion.cmake"
done
# Versions of what was copied, for the log and the ConfigVersion checks.
ver() { grep -m1 -E "$2" "$1" | grep -oE '[0-9]+' | head -1; }
{
  j=$INC/nlohmann/detail/abi_macros.hpp; [ -f "$j" ] || j=$INC/nlohmann/json.hpp
  echo "nlohmann_json $(ver $j 'define NLOHMANN_JSON_VERSION_MAJOR').$(ver $j 'define NLOHMANN_JSON_VERSION_MINOR')"
  echo "CLI11 $(sed -n 's/.*CLI11_VERSION "\([0-9.]*\)".*/\1/p' $INC/CLI/Version.hpp | head -1)"
  echo "spdlog $(ver $INC/spdlog/version.h 'define SPDLOG_VER_MAJOR').$(ver $INC/spdlog/version.h 'define SPDLOG_VER_MINOR')"
  echo "fmt $(ver $INC/fmt/core.h 'define FMT_VERSION')"
  echo "openssl $(sed -n 's/.*define OPENSSL_FULL_VERSION_STR "\([0-9.]*\)".*/\1/p' $INC/x86_64-linux-gnu/openssl/opensslv.h $INC/openssl/opensslv.h 2>/dev/null | head -1)"
  echo "prepared $(date -u +%FT%TZ) on $(hostname)"
} >"$KIT/VERSIONS"
size=$(du -sm "$KIT" | cut -f1)
if [ "$size" -gt 50 ]; then echo "prepare: $KIT is $size MiB (> 50 MiB)" >&2; exit 1; fi
echo "prepare: $KIT ready ($size MiB): $(tr '\n' ';' <"$KIT/VERSIONS")"
