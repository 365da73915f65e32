/*
 * interpose/scan.c — the launch parameter scanner (scan.h).
 */
#include <string.h>

#include "interpose/scan.h"

static bool in_range(uintptr_t v, scan_range_t r) { return v >= r.lo && v - r.lo < r.bytes; }

/* Scans `size` bytes at p, which sit at offset `at` of the parameter
 * buffer: the words at multiples of 8 of the buffer. Adds to *found. */
static void scan_bytes(const unsigned char *p, size_t at, size_t size, scan_range_t r,
                       uintptr_t *out, uint32_t *param_of, uint32_t param, size_t max,
                       size_t *found)
{
    if (size < 8)
        return;
    size_t first = (at + 7) & ~(size_t)7; /* the first multiple of 8 at or after at */
    for (size_t o = first; o - at <= size - 8; o += 8) {
        uint64_t v;
        memcpy(&v, p + (o - at), sizeof v); /* the host copy need not be aligned */
        if (!in_range((uintptr_t)v, r))
            continue;
        if (*found < max) {
            out[*found] = (uintptr_t)v;
            if (param_of != NULL)
                param_of[*found] = param;
        }
        ++*found;
    }
}

size_t scan_params(void *const *values, const scan_param_t *layout, size_t n, scan_range_t r,
                   uintptr_t *out, uint32_t *param_of, size_t max)
{
    size_t found = 0;
    for (size_t i = 0; i < n; i++)
        if (values[i] != NULL)
            scan_bytes(values[i], layout[i].offset, layout[i].size, r, out, param_of,
                       (uint32_t)i, max, &found);
    return found;
}

size_t scan_buffer(const void *buf, size_t size, scan_range_t r, uintptr_t *out, size_t max)
{
    size_t found = 0;
    if (buf != NULL)
        scan_bytes(buf, 0, size, r, out, NULL, 0, max, &found);
    return found;
}

bool scan_extra(void *const *extra, const void **buf, size_t *size)
{
    const void *b = NULL;
    const size_t *sz = NULL;
    if (extra == NULL)
        return false;
    for (size_t i = 0; i < 2 * SCAN_EXTRA_MAX; i += 2) {
        uintptr_t key = (uintptr_t)extra[i];
        if (key == SCAN_EXTRA_END) {
            if (b == NULL || sz == NULL)
                return false;
            *buf = b;
            *size = *sz;
            return true;
        }
        if (key == SCAN_EXTRA_BUFFER_POINTER)
            b = extra[i + 1];
        else if (key == SCAN_EXTRA_BUFFER_SIZE)
            sz = extra[i + 1];
        else
            return false;
    }
    return false;
}
