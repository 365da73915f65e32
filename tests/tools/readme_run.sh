#!/bin/sh
# tests/tools/readme_run.sh SOURCE_DIR BUILD_DIR [DOC]
#
# Runs the shell blocks of DOC (README.md by default) that are marked
# runnable: a ```sh block on the line right after the line
#   <!-- run -->
# Each block runs on its own with `sh -e`, in order, from a copy of the
# repository root: a directory of links to SOURCE_DIR's entries in which
# build/ is BUILD_DIR, so that the README's `build/lms-info` is the build
# under test (build/ itself for make test, build/asan for its second pass).
# HOME is an empty directory of the test's, so that `make install
# PREFIX=$HOME/.local` installs nowhere else. `make` is a stand-in that runs
# `make install PREFIX=P` as `cmake --install BUILD_DIR --prefix P` (the
# build is already done; $CMAKE names cmake where it is not on PATH) and
# refuses anything else: a block that rebuilds belongs unmarked. Nothing is
# fetched. The blocks get the test's environment (CTest gives LMS_BACKEND=sim).
#
# Every marked block is run; each that fails is named by its line in DOC,
# with the block, its exit status and its output. The test fails when one
# does, when DOC marks none, or when a mark is not followed by a ```sh block.
set -u
src=$(cd "$1" && pwd) build=$(cd "$2" && pwd) doc=${3:-$src/README.md}
mark='<!-- run -->'
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Split the marked blocks into $tmp/blocks/LINE, LINE being the line of the
# block's opening fence; a mark with no ```sh fence after it is an error.
mkdir "$tmp/blocks"
awk -v mark="$mark" -v dir="$tmp/blocks" '
    inside && /^```/ { inside = 0; close(file); next }
    inside { print > file; next }
    marked { marked = 0
             if ($0 != "```sh") {
                 print FILENAME ":" NR ": a run mark not followed by ```sh"; bad = 1; next
             }
             inside = 1; file = dir "/" NR; printf "" > file; next }
    $0 == mark { marked = 1 }
    END { if (inside) { print FILENAME ": a marked block is not closed"; bad = 1 }
          exit bad }' "$doc" || exit 1
blocks=$(ls "$tmp/blocks" | sort -n)
if [ -z "$blocks" ]; then
    echo "$doc: no block marked '$mark'" >&2
    exit 1
fi

# The repository root as the blocks see it, with build/ the build under test.
mkdir "$tmp/root" "$tmp/home" "$tmp/bin"
for entry in "$src"/* "$src"/.[!.]*; do
    name=${entry##*/}
    [ -e "$entry" ] && [ "$name" != build ] && ln -s "$entry" "$tmp/root/$name"
done
ln -s "$build" "$tmp/root/build"
cat > "$tmp/bin/make" <<EOF
#!/bin/sh
# readme_run.sh's make: only an install, from the build already made.
if [ \$# = 2 ] && [ "\$1" = install ]; then
    case \$2 in
    PREFIX=?*) exec "${CMAKE:-cmake}" --install "$build" --prefix "\${2#PREFIX=}" ;;
    esac
fi
echo "readme_run.sh: 'make \$*' is not run here (it would build):" \
     "only 'make install PREFIX=...' is" >&2
exit 1
EOF
chmod +x "$tmp/bin/make"

failed=0 n=0
for line in $blocks; do
    n=$((n + 1))
    if (cd "$tmp/root" && HOME=$tmp/home PATH=$tmp/bin:$PATH \
            sh -e "$tmp/blocks/$line") > "$tmp/out" 2>&1; then
        echo "ok: $doc:$line"
    else
        rc=$?
        failed=$((failed + 1))
        echo "FAILED: $doc:$line, exit status $rc; the block:"
        sed 's/^/    /' "$tmp/blocks/$line"
        echo "  its output:"
        sed 's/^/    /' "$tmp/out"
    fi
done
echo "$n marked blocks, $failed failed"
[ "$failed" = 0 ]
