/*
 * examples/hello.c — lms as a program sees it: only <lms.h> and liblms.so.
 *
 *   LMS_DEVICE_LIMIT=64MiB build/examples/hello
 *
 * Allocates until the device limit is reached, shows what lms reports, and
 * frees everything.
 */
#include <stdio.h>

#include <lms.h>

int main(void)
{
    enum { MAX = 4096 };
    static void *blocks[MAX];
    size_t free_bytes, total;
    if (lms_memory_info(&free_bytes, &total) != LMS_OK) { /* initializes lms */
        fprintf(stderr, "lms: %s\n", lms_last_error());
        return 1;
    }
    printf("device limit: %zu MiB, free: %zu MiB\n", total >> 20, free_bytes >> 20);
    int n = 0;
    lms_status_t st = LMS_OK;
    while (n < MAX && (st = lms_malloc(&blocks[n], 8u << 20, NULL)) == LMS_OK)
        n++;
    printf("allocated %d x 8 MiB, then: %s\n  %s\n", n, lms_status_str(st), lms_last_error());
    void *base;
    size_t size;
    if (n > 0 && lms_allocation_of((char *)blocks[0] + 12345, &base, &size) == LMS_OK)
        printf("an address inside the first block belongs to %p (%zu bytes)\n", base, size);
    for (int i = 0; i < n; i++)
        lms_free(blocks[i], NULL);
    lms_memory_info(&free_bytes, &total);
    printf("after freeing: %zu MiB free\n", free_bytes >> 20);
    return lms_shutdown() == LMS_OK ? 0 : 1;
}
