#!/bin/sh
# lms_run_test.sh LMS_RUN HELLO CUDART_PROBE LIBDIR WORKDIR — the launcher
# (tools/lms-run.in) as a user runs it, on sim (LMS_BACKEND=sim from CTest):
#   - a program under it gets lms: the interposer's cudart probe
#     (tests/interpose/cudart_probe.c, "-" where the build has none: no CUDA
#     toolkit) and examples/hello, each seeing the device limit it was given;
#   - LD_PRELOAD is liblms.so's absolute path, first, with an earlier preload
#     kept; the LMS_* variables given reach the program, the others keep the
#     environment's values;
#   - the command's exit status comes back (0, 3, 128+N for a signal N), when
#     lms-run execs it and when it waits for it;
#   - bad arguments give a usage message and 2, --help the usage and 0;
#   - LMS_LIBRARY naming no file, or no liblms.so beside lms-run or in the
#     install layout (PREFIX/bin, PREFIX/LIBDIR), is refused with 127; the
#     install layout and LMS_LIBRARY are found;
#   - --trace writes the timeline, --report the report (from the default
#     timeline ./lms-timeline.json too), --stats lms's stats, and lms-run says
#     where they are.
set -u
run=${1:?usage: lms_run_test.sh path/to/lms-run path/to/hello cudart_probe|- libdir work-dir}
hello=${2:?}
probe=${3:?}
libdir=${4:?}
work=${5:?}
rm -rf "$work"
mkdir -p "$work"
work=$(cd -P "$work" && pwd)
here=$(cd -P "$(dirname "$run")" && pwd)
run=$here/$(basename "$run")
lib=$here/liblms.so
cd "$work" || exit 1
unset LD_PRELOAD LMS_LIBRARY LMS_TRACE LMS_STATS LMS_DEVICE_LIMIT LMS_HOST_LIMIT

fails=0
# shellcheck disable=SC2016 # expanded by the command lms-run runs
show_preload='printf "%s\n" "$LD_PRELOAD"'
fail() {
    printf 'FAIL: %s\n' "$*" >&2
    printf '  stdout: %s\n  stderr: %s\n' "$(cat "$work/out")" "$(cat "$work/err")" >&2
    fails=$((fails + 1))
}
# go ARGS...: lms-run ARGS in the current directory; rc, $work/out, $work/err
go() {
    "$run" "$@" >"$work/out" 2>"$work/err"
    rc=$?
}
want_rc() { [ "$rc" = "$1" ] || fail "$2: exit status $rc, want $1"; }
# said FILE PATTERN WHAT: a line of FILE (out or err) matches PATTERN (grep -E)
said() { grep -Eq -- "$2" "$work/$1" || fail "$3: no line matching '$2' on std$1"; }
quiet() { [ ! -s "$work/$1" ] || fail "$2: std$1 not empty"; }

# ---- programs get lms ------------------------------------------------------
if [ "$probe" != - ]; then
    go --device-limit 64MiB --host-limit 64MiB -- "$probe"
    want_rc 0 "cudart_probe under lms-run"
    said out 'answered by lms' "cudart_probe under lms-run"
    export LD_PRELOAD=libm.so.6
    go --device-limit=64MiB --host-limit=64MiB "$probe"
    want_rc 0 "cudart_probe under lms-run with an earlier LD_PRELOAD"
    unset LD_PRELOAD
    # with another limit the probe sees another memory size and fails
    export LMS_DEVICE_LIMIT=32MiB
    go --host-limit 64MiB -- "$probe"
    want_rc 1 "cudart_probe with LMS_DEVICE_LIMIT=32MiB from the environment"
    unset LMS_DEVICE_LIMIT
else
    echo "no cudart_probe in this build (no CUDA toolkit): examples/hello only"
fi
go --device-limit 64MiB --host-limit 128MiB -- "$hello"
want_rc 0 "hello under lms-run"
said out '^device limit: 64 MiB' "hello under lms-run --device-limit 64MiB"

# ---- the environment -------------------------------------------------------
export LD_PRELOAD=libm.so.6
go -- sh -c "$show_preload"
unset LD_PRELOAD
[ "$(cat "$work/out")" = "$lib libm.so.6" ] ||
    fail "LD_PRELOAD with libm.so.6 before: want '$lib libm.so.6'"
go sh -c "$show_preload"
[ "$(cat "$work/out")" = "$lib" ] || fail "LD_PRELOAD alone: want '$lib'"
export LMS_HOST_LIMIT=7MiB LMS_POLICY=lru
go --device-limit 1.5G --trace t.json -- env
unset LMS_HOST_LIMIT LMS_POLICY
want_rc 0 "env under lms-run"
said out '^LMS_DEVICE_LIMIT=1\.5G$' "--device-limit 1.5G"
said out '^LMS_HOST_LIMIT=7MiB$' "LMS_HOST_LIMIT from the environment"
said out '^LMS_POLICY=lru$' "LMS_POLICY from the environment"
said out "^LMS_TRACE=$work/t\\.json\$" "--trace t.json, made absolute"
said err "timeline: none written at $work/t\\.json" "a command that never started lms"
export LMS_DEVICE_LIMIT=1G
go --host-limit 512m --stats -- env
unset LMS_DEVICE_LIMIT
said out '^LMS_DEVICE_LIMIT=1G$' "LMS_DEVICE_LIMIT from the environment"
said out '^LMS_HOST_LIMIT=512m$' "--host-limit 512m"
said out '^LMS_STATS=1$' "--stats"
for size in 4096 2KiB 64mib 3B 5Tb .5G 1P; do
    go --device-limit "$size" -- env
    said out "^LMS_DEVICE_LIMIT=$size\$" "--device-limit $size"
done

# ---- exit statuses ---------------------------------------------------------
for mode in exec wait; do
    set -- # exec: nothing to say at the end; wait: --stats
    [ "$mode" = exec ] || set -- --stats
    go "$@" -- sh -c 'exit 3'
    want_rc 3 "$mode: a command exiting 3"
    go "$@" -- sh -c 'kill -TERM $$'
    want_rc 143 "$mode: a command killed by SIGTERM"
    go "$@" true
    want_rc 0 "$mode: true"
    go "$@" -- "$work/no such command"
    want_rc 127 "$mode: a command not found"
done

# with nothing to say at the end lms-run execs the command: its parent is ours
# shellcheck disable=SC2016
go sh -c 'echo "$PPID"'
[ "$(cat "$work/out")" = $$ ] || fail "exec: the command's parent is not lms-run's caller ($$)"
# shellcheck disable=SC2016
go --stats sh -c 'echo "$PPID"'
[ "$(cat "$work/out")" != $$ ] || fail "wait: the command's parent is lms-run's caller"
# Ctrl-C, which the terminal sends to the whole process group (here a session
# of its own): the command dies of it, lms-run waits that out and says its
# piece. Not where SIGINT is ignored (a test run started in the background),
# as it then is for every program started from here.
sh -c 'kill -INT $$; exit 0'
if [ $? != 130 ]; then
    echo "SIGINT is ignored here: the Ctrl-C check is left out"
elif command -v setsid >/dev/null 2>&1; then
    setsid -w "$run" --trace int.json -- sh -c 'kill -INT 0; sleep 5' >"$work/out" 2>"$work/err"
    rc=$?
    want_rc 130 "a Ctrl-C"
    said err "timeline: none written at $work/int\\.json" "lms-run after a Ctrl-C"
else
    echo "no setsid: the Ctrl-C check is left out"
fi

# ---- bad arguments ---------------------------------------------------------
for args in '--bogus true' '-x true' '--device-limit' '--device-limit 4XB true' \
    '--host-limit 4GiBs true' '--device-limit= true' '--device-limit 1.2.3G true' \
    '--host-limit -- true' '--trace' '--trace --report true' '--trace= true' '' '--stats --'; do
    # shellcheck disable=SC2086 # the words are the arguments
    go $args
    want_rc 2 "lms-run $args"
    said err '^usage: lms-run' "lms-run $args"
    quiet out "lms-run $args"
done
go --help
want_rc 0 "--help"
said out '^usage: lms-run' "--help"
quiet err "--help"

# ---- finding liblms.so -----------------------------------------------------
export LMS_LIBRARY=/nonexistent/liblms.so
go -- true
unset LMS_LIBRARY
want_rc 127 "LMS_LIBRARY naming no file"
said err 'LMS_LIBRARY=/nonexistent/liblms.so: no such file' "LMS_LIBRARY naming no file"
mkdir -p "$work/alone" "$work/prefix/bin" "$work/prefix/$libdir" "$work/link"
cp "$run" "$work/alone/lms-run"
"$work/alone/lms-run" -- true >"$work/out" 2>"$work/err"
rc=$?
want_rc 127 "lms-run with no liblms.so near it"
said err 'cannot find liblms\.so' "lms-run with no liblms.so near it"
export LMS_LIBRARY="$lib"
"$work/alone/lms-run" sh -c "$show_preload" >"$work/out" 2>"$work/err"
unset LMS_LIBRARY
[ "$(cat "$work/out")" = "$lib" ] || fail "LMS_LIBRARY=$lib: want it preloaded"
cp "$run" "$work/prefix/bin/lms-run"
ln -s "$lib" "$work/prefix/$libdir/liblms.so"
ln -s "$work/prefix/bin/lms-run" "$work/link/lms-run"
for launcher in "$work/prefix/bin/lms-run" "$work/link/lms-run"; do
    "$launcher" sh -c "$show_preload" >"$work/out" 2>"$work/err"
    [ "$(cat "$work/out")" = "$work/prefix/$libdir/liblms.so" ] ||
        fail "$launcher: want PREFIX/$libdir/liblms.so preloaded"
done
"$work/prefix/bin/lms-run" --report true >"$work/out" 2>"$work/err"
rc=$?
want_rc 127 "--report with no lms-report beside lms-run"
said err 'cannot find lms-report' "--report with no lms-report beside lms-run"

# ---- --trace, --report, --stats ---------------------------------------------
program=${probe#-}
program=${program:-$hello}
mkdir -p "$work/t" "$work/r"
cd "$work/t" || exit 1
go --device-limit 64MiB --host-limit 64MiB --trace run.json -- "$program"
want_rc 0 "--trace run.json"
grep -q '"stats":' "$work/t/run.json" 2>/dev/null || fail "--trace: no finished timeline at t/run.json"
said err "^lms-run: timeline: $work/t/run\\.json" "--trace run.json"
[ ! -e "$work/t/run.html" ] || fail "--trace alone made a report"
cd "$work/r" || exit 1
go --device-limit 64MiB --host-limit 64MiB --report -- "$program"
want_rc 0 "--report"
grep -q '"stats":' "$work/r/lms-timeline.json" 2>/dev/null ||
    fail "--report: no finished timeline at ./lms-timeline.json"
grep -q 'id="finished" data-value="1"' "$work/r/lms-timeline.html" 2>/dev/null ||
    fail "--report: no report of a finished run at ./lms-timeline.html"
said err "^lms-run: timeline: $work/r/lms-timeline\\.json" "--report"
said err "^lms-run: report: $work/r/lms-timeline\\.html\$" "--report"
echo '{"an earlier run":1}' >"$work/r/mine.json"
go --report --trace "$work/r/mine.json" -- sh -c 'exit 3'
want_rc 3 "--report of a command that never started lms"
said err "timeline: none written at $work/r/mine\\.json" "--report with no timeline"
[ ! -e "$work/r/mine.json" ] || fail "a timeline of an earlier run was left"
go --stats --device-limit 64MiB --host-limit 64MiB -- "$program"
want_rc 0 "--stats"
said err '^lms-run: stats: on stderr above' "--stats"
said err '^lms stats: ' "--stats: lms's stats at the end"
# at lms_shutdown too: hello ends with it
go --stats --device-limit 64MiB --host-limit 64MiB -- "$hello"
said err '^lms stats: ' "--stats: lms's stats at lms_shutdown"

# %p: a timeline per process (lms names each by its pid), each one reported;
# a file of that shape from before the run is not this run's
mkdir -p "$work/p"
cd "$work/p" || exit 1
echo '{"an earlier run":1}' >"$work/p/pp-1.json"
touch -t 202001010000 "$work/p/pp-1.json"
go --device-limit 64MiB --host-limit 64MiB --trace 'pp-%p.json' --report -- \
    sh -c '"$1" >/dev/null & "$1" >/dev/null; wait $!' sh "$hello"
want_rc 0 "--trace pp-%p.json, two processes"
n=0
for f in "$work"/p/pp-[0-9]*.json; do
    [ "$f" != "$work/p/pp-1.json" ] || continue
    n=$((n + 1))
    grep -q '"stats":' "$f" || fail "--trace pp-%p.json: $f is no finished timeline"
    said err "^lms-run: timeline: ${f}" "--trace pp-%p.json: $f said"
    [ -f "${f%.json}.html" ] || fail "--trace pp-%p.json --report: no report of $f"
done
[ "$n" = 2 ] || fail "--trace pp-%p.json: $n timelines, want one per process (2)"
! grep -q 'pp-1\.' "$work/err" || fail "--trace pp-%p.json: an earlier run's file was reported"

[ "$fails" = 0 ] || { echo "lms_run_test: $fails failed" >&2; exit 1; }
echo "lms_run_test: passed"
