#!/usr/bin/env bash
# The Debian package and `cmake --install`: cpack builds the .deb from this build tree; its
# Depends names the runtime libraries' packages and no -dev one; installed, fabench runs, its
# man page is found and the examples are there; then it is removed (also on failure).
TEST=test_package
. "$(dirname "$0")/lib.sh"
start

# cmake --install to a prefix
timeout 120 cmake --install "$FABENCH_BUILD" --prefix "$TMP/prefix" > "$TMP/install-prefix.log" 2>&1 ||
  { cat "$TMP/install-prefix.log"; die "cmake --install"; }
for f in bin/fabench share/man/man1/fabench.1.gz share/doc/fabench/examples/hostfile \
  share/doc/fabench/examples/fabench.sbatch share/doc/fabench/examples/per-node.sh; do
  [ -e "$TMP/prefix/$f" ] || die "cmake --install put no $f into the prefix"
done
"$TMP/prefix/bin/fabench" --help > /dev/null || die "fabench from cmake --install: --help failed"
say "cmake --install: binary, man page and examples"

build_deb
ctl() { dpkg-deb -f "$DEB" "$1"; }
[ "$(ctl Package)" = fabench ] || die "package name '$(ctl Package)'"
version=$(ctl Version)
case "$version" in "$FABENCH_VERSION"-* | "$FABENCH_VERSION"+*) ;; *) die "version $version is not project()'s $FABENCH_VERSION" ;; esac
[ -n "$(ctl Maintainer)" ] && [ -n "$(ctl Description)" ] || die "no Maintainer or Description"
depends=$(ctl Depends)
[ -n "$depends" ] || die "Depends is empty"
say "$(basename "$DEB"): Depends: $depends; Recommends: $(ctl Recommends)"
names=$(echo "$depends" | tr ',|' '\n\n' | sed 's/(.*//; s/ //g' | sed '/^$/d')
dev=$(echo "$names" | grep -E -- '-dev$' | tr '\n' ' ')
[ -z "$dev" ] || die "Depends names development packages: $dev"

# Every library the packaged binary loads comes from a package in Depends; only a CUDA build
# may load libraries no package owns, from the directories its description names.
dpkg-deb -x "$DEB" "$TMP/x" || die "dpkg-deb -x"
bin=$TMP/x/usr/bin/fabench
owner() { # the package owning a library path (usrmerge: /lib is /usr/lib)
  local p=$1 c
  for c in "$p" "/usr$p" "${p#/usr}" "$(readlink -f "$p")"; do
    dpkg -S "$c" 2> /dev/null | head -n 1 | sed "s/:.*//" && return 0
  done
  return 1
}
ldd "$bin" > "$TMP/ldd" 2>&1 || die "ldd of the packaged fabench: $(cat "$TMP/ldd")"
! grep -q 'not found' "$TMP/ldd" || die "the packaged fabench misses libraries: $(grep 'not found' "$TMP/ldd")"
cuda=""
for lib in $(readelf -d "$bin" | sed -n 's/.*Shared library: \[\(.*\)\]/\1/p'); do
  path=$(awk -v l="$lib" '$1 == l && $2 == "=>" { print $3 }' "$TMP/ldd")
  [ -n "$path" ] || die "ldd does not resolve $lib"
  if pkg=$(owner "$path") && [ -n "$pkg" ]; then
    pkg=${pkg%%:*}
    echo "$names" | grep -qx "$pkg" || die "$lib comes from $pkg, which Depends does not name"
  else
    dir=$(dirname "$path")
    ctl Description | grep -q -F "$dir" && [[ "$version" == *+cuda* ]] ||
      die "$lib ($path) belongs to no Debian package and is no CUDA library the package names"
    cuda+=" $lib"
  fi
done
[ -z "$cuda" ] || say "built with CUDA: needs$cuda on every node, as its description says"

install_deb
"$FAB" --help > "$TMP/help" 2>&1 || die "installed fabench --help failed: $(cat "$TMP/help")"
grep -q 'allreduce' "$TMP/help" || die "installed fabench --help lists no allreduce"
[ "$("$FAB" version)" = "fabench $FABENCH_VERSION" ] || die "installed fabench version: $("$FAB" version)"
man1=$PREFIX/share/man/man1/fabench.1.gz
[ -f "$man1" ] || die "no $man1"
if [ "$PREFIX" = /usr ] && command -v man > /dev/null; then
  [ "$(man -w fabench 2>&1)" = "$man1" ] || die "man -w fabench: $(man -w fabench 2>&1)"
fi
# read whole first: grep -q leaving early would stop zcat with SIGPIPE, a failure under pipefail
zcat "$man1" > "$TMP/man" || die "cannot read $man1"
for s in SYNOPSIS 'COMMAND OPTIONS' 'fabench allreduce' 'fabench train' ENVIRONMENT EXAMPLES; do
  grep -q -F "$s" "$TMP/man" || die "the man page has no '$s'"
done
for f in hostfile fabench.sbatch per-node.sh; do
  [ -f "$PREFIX/share/doc/fabench/examples/$f" ] || die "no example $f"
done
say "installed fabench runs; man page $man1; examples in $PREFIX/share/doc/fabench/examples"

# A node without CUDA: /usr/local hidden in a mount namespace of our own.
if [ -n "$cuda" ]; then
  say "not checked on a node without /usr/local: this build links CUDA (a package without it: configure with -DCMAKE_DISABLE_FIND_PACKAGE_CUDAToolkit=ON)"
elif [ "$(id -u)" -eq 0 ] && command -v unshare > /dev/null && [ "$PREFIX" = /usr ]; then
  timeout 60 unshare -m sh -c 'mount -t tmpfs none /usr/local && "$0" --help' "$FAB" > "$TMP/bare" 2>&1 ||
    die "the installed fabench fails without /usr/local: $(head -n 5 "$TMP/bare")"
  say "the installed fabench runs with /usr/local hidden (no CUDA, nothing from outside packages)"
fi
say "PASS"
