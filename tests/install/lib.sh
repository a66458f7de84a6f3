# Sourced by package.sh and slurm.sh (TEST names the caller): builds the .deb from the build
# tree (FABENCH_BUILD) with cpack, installs it, and undoes all of it at exit.
set -uo pipefail
SKIP=77
say() { echo "$TEST: $*"; }
# CI sets FABENCH_REQUIRE_INSTALL_TESTS=1: there a skip is a failure
skip() {
  [ "${FABENCH_REQUIRE_INSTALL_TESTS:-0}" = 1 ] && { say "FAIL (required): $*"; exit 1; }
  say "SKIP: $*"
  exit $SKIP
}
die() { say "FAIL: $*"; exit 1; }

: "${FABENCH_BUILD:?}" "${FABENCH_VERSION:?}" "${CPACK:=cpack}"
for t in dpkg dpkg-deb dpkg-shlibdeps readelf flock timeout; do
  command -v "$t" > /dev/null || skip "$t missing (dpkg-dev, binutils, util-linux, coreutils)"
done
[ -f "$FABENCH_BUILD/CPackConfig.cmake" ] || die "no CPackConfig.cmake in $FABENCH_BUILD"
grep -q '^FABENCH_HELP2MAN:FILEPATH=.*NOTFOUND' "$FABENCH_BUILD/CMakeCache.txt" &&
  skip "help2man was not found when this build was configured: no man page to package (scripts/install-deps.sh)"

LOCKDIR=/run/lock
[ -d "$LOCKDIR" ] && [ -w "$LOCKDIR" ] || LOCKDIR=/tmp
# Marker of a package one of these tests installed: a test killed before its cleanup leaves
# it, and the next one removes that package.
MARK=$LOCKDIR/fabench-install-test.installed
INSTALLED=0 TMP="" CLEANUPS=()

cleanup() {
  local rc=$? f
  trap - EXIT INT TERM
  for f in ${CLEANUPS[@]+"${CLEANUPS[@]}"}; do "$f"; done
  if [ "$INSTALLED" = 1 ]; then
    dpkg_locked -P fabench > "$TMP/remove.log" 2>&1 || { cat "$TMP/remove.log"; say "FAIL: dpkg -P fabench"; rc=1; }
    rm -f "$MARK"
  fi
  [ -n "$TMP" ] && rm -rf "$TMP"
  exit $rc
}

# dpkg, waiting (bounded) while apt or another dpkg holds its lock
dpkg_locked() {
  local i out
  for i in $(seq 60); do
    out=$(dpkg "$@" 2>&1) && { echo "$out"; return 0; }
    echo "$out" | grep -q -i 'lock' || { echo "$out"; return 1; }
    sleep 1
  done
  echo "$out"
  return 1
}

# one of these tests at a time on this machine (the package is system-wide)
start() {
  local lock=$LOCKDIR/fabench-install-test.lock
  { exec 9>> "$lock"; } 2> /dev/null || { exec 9< "$lock"; } 2> /dev/null || die "cannot open $lock"
  chmod 666 "$lock" 2> /dev/null # every user's runs share it
  flock -w 200 9 || die "another install test held $lock for 200 s"
  rm -rf /tmp/fabench-test_package.* /tmp/fabench-test_slurm.* 2> /dev/null # a killed run's: none holds the lock
  TMP=$(mktemp -d /tmp/fabench-"$TEST".XXXXXX) || die "mktemp"
  trap cleanup EXIT
  trap 'exit 1' INT TERM
  if [ -f "$MARK" ] && [ "$(id -u)" -eq 0 ]; then
    local v
    v=$(dpkg-query -W -f='${Version}' fabench 2> /dev/null)
    if [ -n "$v" ] && [ "$v" = "$(cat "$MARK")" ]; then
      say "removing fabench $v left installed by a test that was killed"
      dpkg_locked -P fabench > /dev/null || die "cannot remove the package a killed test left"
    fi
    rm -f "$MARK"
  fi
}

# DEB: the package, built from the build tree
build_deb() {
  (cd "$FABENCH_BUILD" && timeout 240 "$CPACK" -G DEB -B "$TMP/cpack" --config CPackConfig.cmake) \
    > "$TMP/cpack.log" 2>&1 || { tail -n 40 "$TMP/cpack.log"; die "cpack -G DEB failed"; }
  DEB=$(ls "$TMP"/cpack/*.deb 2> /dev/null | head -n 1)
  [ -n "$DEB" ] || die "cpack made no .deb"
}

# Installs DEB system-wide as root where no fabench package is installed yet; otherwise
# (not root, or someone's own fabench installed, which stays untouched) unpacks it into
# $TMP/root. PREFIX: where its /usr went; FAB: its fabench.
install_deb() {
  if [ "$(id -u)" -eq 0 ] && ! dpkg-query -W -f='${Status}' fabench 2> /dev/null | grep -q 'ok installed'; then
    dpkg-deb -f "$DEB" Version > "$MARK"
    INSTALLED=1
    dpkg_locked -i "$DEB" > "$TMP/install.log" 2>&1 || { cat "$TMP/install.log"; die "dpkg -i $(basename "$DEB")"; }
    PREFIX=/usr
    say "installed $(basename "$DEB")"
  else
    dpkg-deb -x "$DEB" "$TMP/root" || die "dpkg-deb -x"
    PREFIX=$TMP/root/usr
    say "unpacked $(basename "$DEB") into $TMP/root ($([ "$(id -u)" -eq 0 ] && echo "a fabench package is installed already" || echo "not root"))"
  fi
  FAB=$PREFIX/bin/fabench
  [ -x "$FAB" ] || die "the package has no $FAB"
}
