/*
 * swap/util.c — the helpers of util.h.
 */
#include "swap/util.h"

#include "base/base.h"

bool swap_grow(void **array, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return true;
    size_t cap2 = *cap ? *cap * 2 : 16;
    while (cap2 < need)
        cap2 *= 2;
    void *p = base_meta_realloc(*array, cap2 * elem);
    if (p == NULL)
        return false;
    *array = p;
    *cap = cap2;
    return true;
}

char *swap_fmt(uint64_t bytes, char *buf) { return base_format_size(bytes, buf, 32); }
