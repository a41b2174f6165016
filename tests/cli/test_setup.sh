#!/usr/bin/env bash
# test_setup.sh - scripts/setup.sh decides rightly how to install, run by CTest as
#   bash tests/cli/test_setup.sh REPO_DIR
# setup.sh runs with PATH holding only stubs of dpkg, id, sudo and apt-get that log their
# arguments: as root it calls apt-get, as a user with sudo it calls sudo apt-get, as a user
# without sudo it names the missing packages and exits 1 without calling anything, and with
# nothing missing it installs nothing. Only `--build` (the build packages) is exercised, so no
# virtualenv is made. Closes with `N passed, N failed`.
set -u
REPO=${1:?usage: test_setup.sh REPO_DIR}
T=$(mktemp -d "${TMPDIR:-/tmp}/rly_setup.XXXXXX")
trap 'rm -rf "$T"' EXIT
pass=0
fail=0
check() {
    if [ "$2" -eq 0 ]; then
        pass=$((pass + 1))
    else
        echo "FAIL $1: $3" >&2
        sed 's/^/  out: /' "$T/out" | head -5 >&2
        fail=$((fail + 1))
    fi
}

# stubs UID INSTALLED WITH_SUDO: a bin folder of stubs; the calls go to $T/calls
stubs() {
    rm -rf "$T/bin" "$T/calls"
    mkdir -p "$T/bin"
    ln -s "$(command -v dirname)" "$T/bin/dirname"
    ln -s "$(command -v env)" "$T/bin/env"
    printf '#!%s\n[ "$1" = -u ] && echo %s\n' "$BASH" "$1" >"$T/bin/id"
    printf '#!%s\nexit %s\n' "$BASH" "$([ "$2" = yes ] && echo 0 || echo 1)" >"$T/bin/dpkg"
    printf '#!%s\necho "apt-get $*" >>%s\n' "$BASH" "$T/calls" >"$T/bin/apt-get"
    if [ "$3" = yes ]; then
        printf '#!%s\necho "sudo $*" >>%s\n' "$BASH" "$T/calls" >"$T/bin/sudo"
    fi
    chmod +x "$T/bin"/*
}
setup() {
    env -i PATH="$T/bin" "$BASH" "$REPO/scripts/setup.sh" --build >"$T/out" 2>&1
    rc=$?
}

stubs 1000 no no
setup
check user_no_sudo.status $((rc != 1)) "exit status $rc, want 1"
grep -q 'missing packages: cmake ninja-build gcc zlib1g-dev' "$T/out"
check user_no_sudo.names $? "the missing packages are not named"
grep -q 'apt-get install -y cmake' "$T/out"
check user_no_sudo.command $? "no command to run as root"
check user_no_sudo.no_calls "$(test -e "$T/calls" && echo 1 || echo 0)" "it called $(cat "$T/calls" 2>/dev/null)"

stubs 1000 no yes
setup
check user_sudo.status $((rc != 0)) "exit status $rc, want 0"
grep -q '^sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq cmake ninja-build gcc zlib1g-dev$' "$T/calls"
check user_sudo.install $? "no sudo apt-get install: $(cat "$T/calls" 2>/dev/null)"

stubs 0 no no
setup
check root.status $((rc != 0)) "exit status $rc, want 0"
grep -q '^apt-get install -y -qq cmake ninja-build gcc zlib1g-dev$' "$T/calls"
check root.install $? "no apt-get install: $(cat "$T/calls" 2>/dev/null)"

stubs 1000 yes no
setup
check installed.status $((rc != 0)) "exit status $rc, want 0"
check installed.no_calls "$(test -e "$T/calls" && echo 1 || echo 0)" "it called $(cat "$T/calls" 2>/dev/null)"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
