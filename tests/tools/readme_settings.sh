#!/bin/sh
# tests/tools/readme_settings.sh LMS_INFO DOC [--write]
#
# docs/settings.md (the README's until issue 28 moved the reference to docs/)
# carries the settings table between the lines
#   <!-- generated: lms-info --options --markdown -->
#   <!-- end -->
# This checks that it is what LMS_INFO --options --markdown prints now (the
# options table, LMS_OPTIONS in base/base.h), and shows the difference when it
# is not. With --write it puts that output in DOC in place of the old.
set -eu
info=$1 doc=$2 mode=${3:-check}
begin='<!-- generated: lms-info --options --markdown -->'
end='<!-- end -->'
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$info" --options --markdown > "$tmp/table"
n_begin=$(grep -c -x -F -- "$begin" "$doc" || true)
if [ "$n_begin" != 1 ]; then
    echo "$doc: expected one line '$begin', found $n_begin" >&2
    exit 1
fi
# the lines between the markers, and the doc with the new table between them
awk -v b="$begin" -v e="$end" '
    $0 == b { inside = 1; next }
    inside && $0 == e { inside = 0; closed = 1 }
    inside { print }
    END { if (!closed) exit 1 }' "$doc" > "$tmp/old" || {
    echo "$doc: no '$end' line after '$begin'" >&2
    exit 1
}
if [ "$mode" = --write ]; then
    awk -v b="$begin" -v e="$end" -v table="$tmp/table" '
        $0 == b { print; while ((getline line < table) > 0) print line; skip = 1; next }
        skip && $0 == e { skip = 0 }
        !skip { print }' "$doc" > "$tmp/doc"
    cat "$tmp/doc" > "$doc"
    exit 0
fi
if ! diff -u "$tmp/old" "$tmp/table"; then
    echo "$doc's settings table is not the options table (LMS_OPTIONS in base/base.h)." >&2
    echo "Regenerate it: sh tests/tools/readme_settings.sh build/lms-info $doc --write" >&2
    exit 1
fi
