#!/usr/bin/env bash
# test_install.sh - the installed tree works, run by CTest as
#   bash tests/install/test_install.sh BUILD_DIR SOURCE_DIR CC [EXTRA_CFLAGS]
# `cmake --install BUILD_DIR --prefix TMP` must give the CLI, the headers, both libraries
# (shared and static) and the runtime's, rly.pc and rlyConfig.cmake; a small C program
# (tests/install/consumer) then builds against that tree, with pkg-config (shared and static)
# and with find_package(rly) (rly::rly and rly::rly_static), and runs. EXTRA_CFLAGS carries the
# sanitizer flags of a sanitized build. Also: the project configures without its tests
# (-DBUILD_TESTING=OFF, and the older -DRLY_BUILD_TESTS=OFF), so it needs no test dependency.
# Closes with `N passed, N failed`.
set -u
BUILD=${1:?usage: test_install.sh BUILD_DIR SOURCE_DIR CC [EXTRA_CFLAGS]}
SRC=${2:?usage: test_install.sh BUILD_DIR SOURCE_DIR CC [EXTRA_CFLAGS]}
CC=${3:?usage: test_install.sh BUILD_DIR SOURCE_DIR CC [EXTRA_CFLAGS]}
EXTRA=${4:-}
HERE=$SRC/tests/install

T=$(mktemp -d "${TMPDIR:-/tmp}/rly_install.XXXXXX")
trap 'rm -rf "$T"' EXIT
P=$T/prefix
pass=0
fail=0
check() {
    if [ "$2" -eq 0 ]; then
        pass=$((pass + 1))
    else
        echo "FAIL $1: $3" >&2
        [ -s "$T/log" ] && sed 's/^/  log: /' "$T/log" | tail -8 >&2
        fail=$((fail + 1))
    fi
}

# ---- the installed tree ----
cmake --install "$BUILD" --prefix "$P" >"$T/log" 2>&1
check install $? "cmake --install failed"
LIBDIR=$(dirname "$(find "$P" -name librly.so -print -quit)")
for f in bin/rly include/rly/rly.h include/rly/rly_runtime.h include/rly/dlpack.h; do
    test -e "$P/$f"
    check "installed.$f" $? "$f not installed"
done
for f in librly.so librly.a librly_runtime.so librly_runtime.a pkgconfig/rly.pc \
    pkgconfig/rly_runtime.pc cmake/rly/rlyConfig.cmake cmake/rly/rlyConfigVersion.cmake \
    cmake/rly/rlyTargets.cmake; do
    test -e "$LIBDIR/$f"
    check "installed.$f" $? "$f not installed in $LIBDIR"
done
"$P/bin/rly" --version >"$T/log" 2>&1
check installed.cli $? "the installed rly does not run"
! grep -rq -e "$SRC/src" -e "$BUILD" "$LIBDIR/cmake/rly" "$LIBDIR/pkgconfig"
check installed.no_build_paths $? "the installed package files name the source or build tree"

# ---- pkg-config ----
export PKG_CONFIG_PATH=$LIBDIR/pkgconfig
want="$("$P/bin/rly" --version): 3f" # the consumer prints the version and add(1f, 2f)
if command -v pkg-config >/dev/null 2>&1; then
    # shellcheck disable=SC2046
    $CC $EXTRA -o "$T/pc_shared" "$HERE/consumer/main.c" $(pkg-config --cflags --libs rly) \
        -Wl,-rpath,"$LIBDIR" >"$T/log" 2>&1
    check pkgconfig.shared.build $? "building with pkg-config --libs rly failed"
    out=$("$T/pc_shared" 2>&1)
    [ "$out" = "$want" ]
    check pkgconfig.shared.run $? "got '$out', want '$want'"
    libs=$(pkg-config --static --libs rly | sed 's/-lrly\b/-l:librly.a/')
    # shellcheck disable=SC2086
    $CC $EXTRA -o "$T/pc_static" "$HERE/consumer/main.c" $(pkg-config --cflags rly) $libs \
        >"$T/log" 2>&1
    check pkgconfig.static.build $? "building with pkg-config --static --libs rly failed"
    ! ldd "$T/pc_static" | grep -q librly
    check pkgconfig.static.no_so $? "the static build still loads librly.so"
    out=$("$T/pc_static" 2>&1)
    [ "$out" = "$want" ]
    check pkgconfig.static.run $? "got '$out', want '$want'"
    [ "$(pkg-config --modversion rly)" = "$(pkg-config --modversion rly_runtime)" ]
    check pkgconfig.runtime $? "rly_runtime.pc missing or at another version"
else
    echo "SKIP pkg-config checks: no pkg-config"
fi

# ---- find_package(rly) ----
cmake -S "$HERE/consumer" -B "$T/cb" -G Ninja -DCMAKE_PREFIX_PATH="$P" -DCMAKE_C_COMPILER="$CC" \
    -DCMAKE_C_FLAGS="$EXTRA" -DCMAKE_EXE_LINKER_FLAGS="$EXTRA" >"$T/log" 2>&1 &&
    cmake --build "$T/cb" >>"$T/log" 2>&1
check find_package.build $? "configuring or building tests/install/consumer failed"
for v in shared static; do
    out=$("$T/cb/consumer_$v" 2>&1)
    [ "$out" = "$want" ]
    check "find_package.$v.run" $? "got '$out', want '$want'"
done

# ---- configure without the tests (no cmocka needed) ----
for opt in -DBUILD_TESTING=OFF -DRLY_BUILD_TESTS=OFF; do
    cmake -S "$SRC" -B "$T/notests" -G Ninja "$opt" \
        >"$T/log" 2>&1
    check "configure$opt" $? "configuring with $opt failed"
    ! ninja -C "$T/notests" -t targets all 2>/dev/null | grep -q -e '^test_support:' -e '^bench_parse:'
    check "configure$opt.no_tests" $? "$opt still defines test or bench targets"
    ninja -C "$T/notests" -t targets all 2>/dev/null | grep -q '^rly:'
    check "configure$opt.has_cli" $? "$opt defines no rly target"
    rm -rf "$T/notests"
done

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
