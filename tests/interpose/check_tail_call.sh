#!/bin/sh
# check_tail_call.sh LIB — liblms.so's dlsym hands RTLD_DEFAULT and RTLD_NEXT
# to glibc's dlsym as a tail call (an indirect jump), so that glibc sees the
# caller's return address, not liblms.so's (Note [dlsym], issue 25). Had the
# compiler made it a call, RTLD_NEXT would mean "after liblms.so" for every
# caller; interpose.launch checks that meaning from the probe, this checks
# the code that gives it. The function calls glibc's dlsym through a pointer
# and has no switch tables, so its one indirect jump is that tail call.
# Exits 77 (skipped) where objdump is missing or the architecture is neither
# x86-64 nor aarch64.
set -eu
lib=${1:?usage: check_tail_call.sh path/to/liblms.so}
command -v objdump >/dev/null 2>&1 || { echo "SKIP: no objdump"; exit 77; }
body=$(objdump -d --no-show-raw-insn "$lib" | awk '/^[0-9a-f]+ <dlsym>:$/ { on = 1; next } on && /^$/ { exit } on')
[ -n "$body" ] || { echo "FAIL: $lib defines no dlsym"; exit 1; }
case $(uname -m) in
    x86_64) jump='jmp[a-z]*[[:space:]]+\*' ;;
    aarch64) jump='[[:space:]]br[[:space:]]+x[0-9]' ;;
    *) echo "SKIP: $(uname -m): no pattern for an indirect jump"; exit 77 ;;
esac
if ! echo "$body" | grep -qE "$jump"; then
    echo "FAIL: $lib's dlsym has no indirect jump: RTLD_NEXT is not passed on as a tail call"
    echo "$body"
    exit 1
fi
echo "check_tail_call: $lib's dlsym passes RTLD_DEFAULT/RTLD_NEXT on with: $(echo "$body" | grep -E "$jump" | head -1 | sed 's/^[[:space:]]*//')"
