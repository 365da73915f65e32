#!/bin/sh
# check_libc_malloc.sh NM ALLOWED OBJECT... — no object of lms's own sources
# calls the C library's allocator: lms's tables come from its private arena
# (base_meta_*, base/meta.c), never from the program's malloc, which under
# LD_PRELOAD is the framework's (issue 25). It fails naming each object that
# references malloc, calloc, realloc, free or another function that hands
# back or takes memory of the C library's heap, unless ALLOWED (a space-
# separated list of SOURCE:SYMBOL, SOURCE a path from the top of the tree
# such as interpose/launch.c) allows that symbol in that object. Run by the
# build before liblms.so is linked (CMakeLists.txt, lms_libc_malloc_check)
# and by CTest (alloc.libc_malloc).
set -eu
nm=${1:?usage: check_libc_malloc.sh NM ALLOWED OBJECT...}
allowed=" ${2-} "
shift 2
[ $# -gt 0 ] || { echo "FAIL: no objects given"; exit 1; }
banned='malloc calloc realloc reallocarray free strdup strndup __strdup __strndup aligned_alloc
posix_memalign memalign valloc pvalloc asprintf vasprintf getline getdelim open_memstream'
bad=0
for obj in "$@"; do
    # the source an object was built from: .../<target>.dir/device/sim.c.o
    src=$(echo "$obj" | sed -n 's|.*\.dir/\(.*\)\.o$|\1|p')
    [ -n "$src" ] || src=$obj
    for sym in $("$nm" -u "$obj" | awk '{ print $NF }' | sed 's/@.*//'); do
        for b in $banned; do
            [ "$sym" = "$b" ] || continue
            case $allowed in
            *" $src:$sym "*) ;;
            *) echo "FAIL: $src calls the C library's $sym: use base_meta_* (base/base.h), or allow it with its reason in CMakeLists.txt (LMS_LIBC_MALLOC_ALLOWED)"
               bad=1 ;;
            esac
        done
    done
done
[ "$bad" = 0 ] || exit 1
echo "check_libc_malloc: $# objects call no C library allocator beyond:${allowed% }"
