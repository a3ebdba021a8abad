#!/usr/bin/env bash
# Checks what `cmake --install` put under a prefix: the versioned library with
# its SONAME, the headers, the CLI, the CMake package and the pkg-config file.
#   check_install.sh PREFIX
set -euo pipefail
prefix=${1:?usage: check_install.sh PREFIX}
version=$(sed -n 's/^project(attnjit VERSION \([0-9.]*\).*/\1/p' "$(dirname "$0")/../../CMakeLists.txt")
lib="$prefix/lib"
fail() { echo "check_install: $*" >&2; exit 1; }
[ -f "$lib/libattnjit.so.$version" ] || fail "missing $lib/libattnjit.so.$version"
[ "$(readlink "$lib/libattnjit.so.${version%%.*}")" = "libattnjit.so.$version" ] || fail "bad SONAME link"
[ -L "$lib/libattnjit.so" ] || fail "missing the development link $lib/libattnjit.so"
soname=$(objdump -p "$lib/libattnjit.so.$version" | awk '/SONAME/ {print $2}')
[ "$soname" = "libattnjit.so.${version%%.*}" ] || fail "SONAME is '$soname'"
for h in attnjit.h attnjit.hpp prewarm.hpp version.h; do
  [ -f "$prefix/include/attnjit/$h" ] || fail "missing header include/attnjit/$h"
done
[ -x "$prefix/bin/attnjit" ] || fail "missing the CLI bin/attnjit"
[ "$("$prefix/bin/attnjit" --version)" = "attnjit $version" ] || fail "bin/attnjit --version disagrees"
for f in attnjitConfig.cmake attnjitConfigVersion.cmake attnjitTargets.cmake; do
  [ -f "$lib/cmake/attnjit/$f" ] || fail "missing lib/cmake/attnjit/$f"
done
[ "$(PKG_CONFIG_PATH="$lib/pkgconfig" pkg-config --modversion attnjit)" = "$version" ] || fail "pkg-config version"
echo "install ok: $prefix: libattnjit.so.$version (SONAME $soname), headers, bin/attnjit, CMake package, attnjit.pc"
