#!/usr/bin/env bash
# test_package.sh BUILD_DIR: cpack -G DEB, dpkg -x into a scratch root, run from there.
# Build the programs first (ctest does not build): cmake --build BUILD_DIR.
set -euo pipefail
build=$(cd "$1" && pwd)
scratch=$(mktemp -d "${TMPDIR:-/tmp}/splitseg-deb.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

echo "== cpack"
(cd "$build" && cpack -G DEB -B "$scratch/out" >"$scratch/cpack.log" 2>&1) || { tail -40 "$scratch/cpack.log"; fail "cpack"; }
deb=$(ls "$scratch"/out/*.deb | head -1)
[ -f "$deb" ] || fail "no .deb written"
ls -l "$deb"
# (grep -q on a pipe would end the writer early; with pipefail that reads as a failure.)
info=$(dpkg-deb --info "$deb")
grep -E "Package|Version|Depends|Installed-Size" <<<"$info"
grep -q "Depends:.*libinsighttoolkit" <<<"$info" || fail "no ITK dependency declared"

echo "== dpkg -x"
dpkg -x "$deb" "$scratch/root"
root="$scratch/root/usr"
for f in bin/splitseg-cli lib/splitseg/plugins share/applications/splitseg.desktop \
         share/icons/hicolor/scalable/apps/splitseg.svg share/splitseg/presets; do
  [ -e "$root/$f" ] || fail "missing $f in the package"
done
ls "$root/lib/splitseg/plugins"
[ -e "$root/lib/splitseg/libtorch_cpu.so" ] || fail "LibTorch not bundled"
echo "bundled: $(ls "$root/lib/splitseg" | wc -l) files, $(du -sh "$root/lib/splitseg" | cut -f1)"
rpath=$(readelf -d "$root/bin/splitseg-cli" | grep -E 'R(UN)?PATH' || true)
echo "$rpath"
grep -q 'ORIGIN/../lib/splitseg' <<<"$rpath" || fail "run path of splitseg-cli"

echo "== run from the scratch root (no build tree, no venv on the library path)"
env -i PATH=/usr/bin:/bin HOME="$scratch" ldd "$root/bin/splitseg-cli" >"$scratch/ldd.txt"
# Library names only: a load address can contain "c10" too (0x00007f1737c10000 made this fail once).
libs='^[[:space:]]*[^[:space:]]*(torch|c10|nvidia|cuda)[^[:space:]]* =>'
if grep -E "$libs" "$scratch/ldd.txt" | grep -v "$scratch" | grep -q .; then
  grep -E "$libs" "$scratch/ldd.txt" | grep -v "$scratch"
  fail "a LibTorch/CUDA library resolves outside the package"
fi
grep -q 'not found' "$scratch/ldd.txt" && { grep 'not found' "$scratch/ldd.txt"; fail "unresolved libraries"; }
env -i PATH=/usr/bin:/bin HOME="$scratch" "$root/bin/splitseg-cli" --version
env -i PATH=/usr/bin:/bin HOME="$scratch" "$root/bin/splitseg-cli" devices
plugins=$(env -i PATH=/usr/bin:/bin HOME="$scratch" "$root/bin/splitseg-cli" plugins --json)
grep -q '"resunet3d"' <<<"$plugins" || { echo "$plugins"; fail "the packaged plugin did not load"; }
grep -q "$scratch/root/usr/lib/splitseg/plugins" <<<"$plugins" || { echo "$plugins"; fail "plugin not from the package"; }
echo "PASS"
