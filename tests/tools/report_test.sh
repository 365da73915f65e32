#!/bin/sh
# report_test.sh LMS_REPORT FIXTURES WORKDIR — lms-report on hand-made
# timelines (FIXTURES: finished.json, malformed.json), and on ones made from
# them here (cut, torn, wrong) and a large generated one:
#   - the exit status, the path printed, the default output name;
#   - the page and the --svg file are well-formed XML (python3 or xmllint,
#     where there is one; else the closing tags are looked for);
#   - the numbers shown are the ones worked out by hand for the fixture
#     (each in an element with a stable id and a data- attribute), and a
#     fixture changed on purpose shows different ones;
#   - a cut run is read and said not to have finished; a malformed line in
#     the middle, numbers out of range, a file that is not a timeline, an
#     empty and a missing file are refused with exit status 2, the file and line on stderr, and no
#     output written.
set -eu
report=${1:?usage: report_test.sh path/to/lms-report fixtures-dir work-dir}
fixtures=${2:?}
work=${3:?}
rm -rf "$work"
mkdir -p "$work"
failures=0

fail() {
    echo "FAIL: $*"
    failures=$((failures + 1))
}

# has FILE ID ATTR VALUE: the element with id="ID" has ATTR="VALUE"
has() {
    grep -q "id=\"$2\"[^>]* $3=\"$4\"" "$1"
}

# expect FILE ID VALUE [ATTR]: as has, and a failure that says what was there
expect() {
    attr=${4:-data-value}
    if ! has "$1" "$2" "$attr" "$3"; then
        got=$(grep -o "id=\"$2\"[^>]* $attr=\"[^\"]*\"" "$1" | sed 's/.* '"$attr"'=//' || true)
        fail "$(basename "$1"): #$2 $attr: expected \"$3\", found ${got:-nothing}"
    fi
}

# wellformed FILE: parses as XML
wellformed() {
    if command -v python3 >/dev/null 2>&1; then
        python3 -c 'import sys, xml.etree.ElementTree as ET; ET.parse(sys.argv[1])' "$1" ||
            fail "$1 is not well-formed XML"
    elif command -v xmllint >/dev/null 2>&1; then
        xmllint --noout "$1" || fail "$1 is not well-formed XML"
    else
        grep -q '</svg>' "$1" || fail "$1 has no </svg>"
    fi
}

# run_ok OUT ARGS...: lms-report succeeds and prints OUT
run_ok() {
    want=$1
    shift
    if ! out=$("$report" "$@" 2>"$work/stderr"); then
        fail "lms-report $* exited with $?: $(cat "$work/stderr")"
        return
    fi
    [ "$out" = "$want" ] || fail "lms-report $* printed '$out', not '$want'"
    [ -s "$want" ] || fail "lms-report $* wrote nothing to $want"
}

# refused FILE LINE_PATTERN: exit status 2, the file (and line) on stderr, no output
refused() {
    rc=0
    "$report" "$1" -o "$work/refused.html" >"$work/stdout" 2>"$work/stderr" || rc=$?
    [ "$rc" -eq 2 ] || fail "lms-report $1 exited with $rc, not 2"
    grep -q "$2" "$work/stderr" || fail "lms-report $1: stderr does not match '$2': $(cat "$work/stderr")"
    [ ! -e "$work/refused.html" ] || fail "lms-report $1 wrote a report"
    [ ! -s "$work/stdout" ] || fail "lms-report $1 printed on stdout: $(cat "$work/stdout")"
    rm -f "$work/refused.html"
}

# 1. A finished run. The default output is the input with .json -> .html.
cp "$fixtures/finished.json" "$work/finished.json"
run_ok "$work/finished.html" "$work/finished.json"
page=$work/finished.html
wellformed "$page"
run_ok "$work/charts.svg" "$work/finished.json" --svg -o "$work/charts.svg"
wellformed "$work/charts.svg"
head -c 200 "$work/charts.svg" | grep -q '<svg' || fail "charts.svg does not start with an <svg>"
grep -q '<svg' "$page" || fail "the page has no inline SVG"
if grep -qiE '<script|https?://[^"]*\.(js|css|png|woff)|<link ' "$page"; then
    fail "the page has a script or loads something"
fi

# worked out by hand from finished.json:
#   stats as written; copies: H2D 12 + 24 + 4 MB, D2H 6 + 6 MB;
#   stalls [30,32) and [31,33) overlap, so with [85,86) the union is 4 ms of
#   100 ms: 0.04 (their plain sum is 5 ms); compute [0,30) on stream 0 and
#   [20,35) on stream 1 overlap: with [40,70) the union is 65 ms: 0.65;
#   iteration 1 is [0,40): H2D 12 MB, D2H 6 MB, stalls 3 ms, compute 35 ms;
#   iteration 2 is [40,80): H2D 24 MB + half of the 4 MB copy at [79,81),
#   D2H 6 MB, no stall; after it, [80,100): 2 MB, 1 ms of stalls.
expect "$page" backend sim
expect "$page" device "sim &lt;test&gt; &amp; co"
expect "$page" device-limit 67108864
expect "$page" host-limit 268435456
expect "$page" chunk 2097152
expect "$page" duration 100000.000
expect "$page" finished 1
expect "$page" streams 2
expect "$page" bytes-h2d 40000000
expect "$page" bytes-d2h 12000000
expect "$page" evictions 6
expect "$page" prefetch-hits 7
expect "$page" ooms 2
expect "$page" peak-resident 33554432
expect "$page" stall-share 0.040000
expect "$page" compute-share 0.650000
expect "$page" copied-h2d 40000000
expect "$page" copied-d2h 12000000
expect "$page" stall-time 5000.000
expect "$page" iterations 2
expect "$page" iter-1 40000.000 data-duration-us
expect "$page" iter-1 12000000 data-h2d-bytes
expect "$page" iter-1 6000000 data-d2h-bytes
expect "$page" iter-1 3000.000 data-stall-us
expect "$page" iter-1 35000.000 data-compute-us
expect "$page" iter-2 26000000 data-h2d-bytes
expect "$page" iter-2 6000000 data-d2h-bytes
expect "$page" iter-2 0.000 data-stall-us
expect "$page" iter-tail 20000.000 data-duration-us
expect "$page" iter-tail 2000000 data-h2d-bytes
expect "$page" iter-tail 1000.000 data-stall-us
grep -q 'available each way 12 GB/s (sim throttle)' "$page" || fail "the available bandwidth is not labelled"
grep -q 'run did not finish' "$page" && fail "a finished run is said not to have finished"

# 2. The same run with one stall 2 ms longer and the first copy 1 MB bigger
# must show other numbers (the checks above can fail).
sed -e 's/"ts":85000,"dur":1000/"ts":85000,"dur":3000/' \
    -e 's/"dur":1000,"pid":7,"tid":1,"args":{"bytes":12000000}/"dur":1000,"pid":7,"tid":1,"args":{"bytes":13000000}/' \
    "$fixtures/finished.json" >"$work/wrong.json"
cmp -s "$fixtures/finished.json" "$work/wrong.json" && fail "wrong.json was not changed"
run_ok "$work/wrong.html" "$work/wrong.json"
has "$work/wrong.html" stall-share data-value 0.040000 && fail "a longer stall left the stall share at 0.04"
has "$work/wrong.html" iter-1 data-h2d-bytes 12000000 && fail "a bigger copy left iteration 1's H2D bytes"
expect "$work/wrong.html" stall-share 0.060000
expect "$work/wrong.html" iter-1 13000000 data-h2d-bytes
expect "$work/wrong.html" copied-h2d 41000000

# 3. Cut after line 21 (the first iteration mark), as a process that died
# leaves it: no otherData, so no stats; the run is 40 ms (to the mark);
# stalls 3 ms of it, compute 35 ms; evictions from the evict events (3
# chunks copied); peak resident from the counters.
head -n 21 "$fixtures/finished.json" >"$work/cut.json"
run_ok "$work/cut.html" "$work/cut.json" -o "$work/cut.html"
wellformed "$work/cut.html"
expect "$work/cut.html" finished 0
grep -q 'run did not finish' "$work/cut.html" || fail "cut.html does not say the run did not finish"
expect "$work/cut.html" backend sim # from the process name
expect "$work/cut.html" duration 40000.000
expect "$work/cut.html" stall-share 0.075000
expect "$work/cut.html" compute-share 0.875000
expect "$work/cut.html" bytes-h2d 12000000
expect "$work/cut.html" bytes-h2d events data-source
expect "$work/cut.html" evictions 3
expect "$work/cut.html" peak-resident 16777216
expect "$work/cut.html" prefetch-hits none data-source
expect "$work/cut.html" iter-1 12000000 data-h2d-bytes

# 4. Cut in the middle of line 22, with no newline after it, as a write
# torn by the process's death leaves it: read up to line 21, with a warning.
{ cat "$work/cut.json"; printf '{"name":"prefetch","cat":"swap","ph":"i","s":"t","ts":405'; } >"$work/torn.json"
run_ok "$work/torn.html" "$work/torn.json"
grep -q 'torn.json:22: the last line is cut off' "$work/stderr" || fail "no warning for the torn last line: $(cat "$work/stderr")"
expect "$work/torn.html" finished 0
expect "$work/torn.html" stall-share 0.075000

# 5. Refused: a line cut in the middle of the file, a line that is not an
# event, a file that is not a timeline, an empty one, a missing one.
refused "$fixtures/malformed.json" 'malformed.json:23:[0-9]*: a string is not closed'
sed '12s/.*/{"name":"h2d","cat":"copy","ph":"X","ts":1000,"pid":7,"tid":1,"args":{"bytes":1}},/' \
    "$fixtures/finished.json" >"$work/nodur.json"
refused "$work/nodur.json" 'nodur.json:12: a span ("ph":"X") without "dur"'
sed '9s/}},$/}} {"name":"x"},/' "$fixtures/finished.json" >"$work/two.json"
refused "$work/two.json" "two.json:9:[0-9]*: not one event"
# Numbers a double holds but lms never writes (issue 24, bug 6; Note
# [Numbers in range]): a span ending at 1e308 + 1e308 us (infinity, which
# hung the reader), and a tid or an iteration's n of 1e30 (an undefined
# conversion to an integer)
sed '12s/.*/{"name":"h2d","cat":"copy","ph":"X","ts":1e308,"dur":1e308,"pid":7,"tid":1,"args":{"bytes":1}},/' \
    "$fixtures/finished.json" >"$work/huge_ts.json"
refused "$work/huge_ts.json" 'huge_ts.json:12:[0-9]*: a time of more than 1e15 us'
sed '12s/.*/{"name":"kernel","cat":"compute","ph":"X","ts":1,"dur":1,"pid":7,"tid":1e30},/' \
    "$fixtures/finished.json" >"$work/huge_tid.json"
refused "$work/huge_tid.json" 'huge_tid.json:12:[0-9]*: expected a whole number of at most 2^53'
sed '12s/.*/{"name":"iteration","cat":"mark","ph":"i","s":"p","ts":1,"pid":7,"tid":3,"args":{"n":1e30}},/' \
    "$fixtures/finished.json" >"$work/huge_n.json"
refused "$work/huge_n.json" 'huge_n.json:12:[0-9]*: expected a whole number of at most 2^53'
printf '{"displayTimeUnit":"ms","traceEvents":[]}\n' >"$work/other.json"
refused "$work/other.json" 'other.json:1: not an lms timeline'
: >"$work/empty.json"
refused "$work/empty.json" 'empty.json: empty'
refused "$work/missing.json" 'missing.json: No such file'
rc=0
"$report" >/dev/null 2>&1 || rc=$?
[ "$rc" -eq 2 ] || fail "lms-report with no file exited with $rc, not 2"

# 6. A large timeline, written out of order: 100000 periods of 20 us; in
# each, stream 0 computes [0,10) and stream 1 [5,15) (union 15: 0.75), an
# H2D copy of 1000 bytes runs [2,6), written before the period's kernels
# and each pair of periods' copies swapped; a mark ends every 1000th
# period. More spans than the union's window holds (Note [Busy time]).
n=100000
awk -v n="$n" 'BEGIN {
    print "{\"traceEvents\":[";
    for (i = 0; i < n; i++) {
        j = (i % 2 == 0) ? i + 1 : i - 1;
        if (j >= n) j = i;
        printf "{\"name\":\"h2d\",\"cat\":\"copy\",\"ph\":\"X\",\"ts\":%d,\"dur\":4,\"pid\":1,\"tid\":1,\"args\":{\"bytes\":1000}},\n", 20 * j + 2;
        printf "{\"name\":\"k\",\"cat\":\"compute\",\"ph\":\"X\",\"ts\":%d,\"dur\":10,\"pid\":1,\"tid\":101,\"args\":{}},\n", 20 * i + 5;
        printf "{\"name\":\"k\",\"cat\":\"compute\",\"ph\":\"X\",\"ts\":%d,\"dur\":10,\"pid\":1,\"tid\":100,\"args\":{}},\n", 20 * i;
        if (i % 1000 == 999)
            printf "{\"name\":\"iteration\",\"cat\":\"mark\",\"ph\":\"i\",\"s\":\"p\",\"ts\":%d,\"pid\":1,\"tid\":3,\"args\":{\"n\":%d}},\n", 20 * (i + 1), (i + 1) / 1000;
    }
    print "{\"name\":\"memory\",\"cat\":\"memory\",\"ph\":\"C\",\"ts\":0,\"pid\":1,\"tid\":0,\"args\":{\"resident\":0,\"host\":0}}";
    print "],";
    print "\"displayTimeUnit\":\"ms\",";
    printf "\"otherData\":{\"lms\":\"timeline 1\",\"backend\":\"sim\",\"device\":\"gen\",\"chunk\":2097152,\"device_limit\":1073741824,\"host_limit\":1073741824,\"link\":{\"h2d_gbps\":0,\"d2h_gbps\":0,\"source\":\"not measured\"},\"duration_us\":%d,\"stats\":{}}}\n", 20 * n;
}' >"$work/large.json"
run_ok "$work/large.html" "$work/large.json"
wellformed "$work/large.html"
expect "$work/large.html" compute-share 0.750000
expect "$work/large.html" copied-h2d 100000000
expect "$work/large.html" duration 2000000.000
expect "$work/large.html" iterations 100
expect "$work/large.html" iter-7 20000.000 data-duration-us
expect "$work/large.html" iter-7 1000000 data-h2d-bytes
expect "$work/large.html" iter-7 15000.000 data-compute-us
expect "$work/large.html" iter-100 1000000 data-h2d-bytes
grep -q 'iter-50"' "$work/large.html" && fail "large.html shows all 100 iterations, not the first and last 12"
grep -q '76 more' "$work/large.html" || fail "large.html does not say how many iterations it left out"
grep -q 'available: not measured' "$work/large.html" || fail "large.html does not say the bandwidth was not measured"
grep -q 'late-spans' "$work/large.html" && fail "large.html counts spans as late"
size=$(wc -c <"$work/large.html")
[ "$size" -lt 200000 ] || fail "large.html is $size bytes: the charts are not binned"

# 7. Written backwards, far more out of order than the window holds: the
# page warns that busy time is left out, and the bytes still add up.
awk 'BEGIN {
    print "{\"traceEvents\":[";
    for (i = 39999; i >= 0; i--) {
        printf "{\"name\":\"k\",\"cat\":\"compute\",\"ph\":\"X\",\"ts\":%d,\"dur\":10,\"pid\":1,\"tid\":100,\"args\":{}},\n", 20 * i;
        printf "{\"name\":\"h2d\",\"cat\":\"copy\",\"ph\":\"X\",\"ts\":%d,\"dur\":4,\"pid\":1,\"tid\":1,\"args\":{\"bytes\":1000}},\n", 20 * i + 2;
    }
}' >"$work/backwards.json"
run_ok "$work/backwards.html" "$work/backwards.json"
grep -q 'id="late-spans"' "$work/backwards.html" || fail "backwards.html does not warn of spans out of order"
expect "$work/backwards.html" copied-h2d 40000000
expect "$work/backwards.html" finished 0

if [ "$failures" -gt 0 ]; then
    echo "report_test: $failures checks failed"
    exit 1
fi
echo "report_test: lms-report passed (finished, changed, cut, torn, refused, large and backwards timelines)"
