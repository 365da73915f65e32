/*
 * examples/hello/hello.c — lms as a program sees it: only <lms.h> and liblms.so.
 *
 *   LMS_DEVICE_LIMIT=64MiB LMS_HOST_LIMIT=256MiB build/examples/hello
 *   LMS_SWAP=0 LMS_DEVICE_LIMIT=64MiB build/examples/hello
 *
 * lms's build makes it as build/examples/hello; against an installed lms it
 * builds alone, with CMakeLists.txt beside it (find_package(lms)) or with
 * `cc hello.c $(pkg-config --cflags --libs lms)`.
 *
 * Allocates 8 MiB blocks until lms says no, makes each resident in turn as a
 * kernel about to write it would (so earlier ones are swapped out to host
 * memory when they no longer fit), brings the first back, shows what lms
 * reports, and frees everything.
 */
#include <stdio.h>

#include <lms.h>

int main(void)
{
    enum { MAX = 4096, BLOCK = 8u << 20 };
    static void *blocks[MAX];
    size_t free_bytes, total;
    if (lms_memory_info(&free_bytes, &total) != LMS_OK) { /* initializes lms */
        fprintf(stderr, "lms: %s\n", lms_last_error());
        return 1;
    }
    printf("lms %s (built with lms.h %s)\n", lms_version(), LMS_VERSION);
    printf("device limit: %zu MiB, free: %zu MiB\n", total >> 20, free_bytes >> 20);
    int n = 0;
    lms_status_t st = LMS_OK;
    while (n < MAX && (st = lms_malloc(&blocks[n], BLOCK, NULL)) == LMS_OK)
        n++;
    printf("allocated %d x 8 MiB, then: %s\n  %s\n", n, lms_status_str(st), lms_last_error());
    for (int i = 0; i < n; i++) /* each as a kernel writing it would need it */
        if ((st = lms_access(blocks[i], BLOCK, LMS_OVERWRITE, NULL)) != LMS_OK) {
            fprintf(stderr, "lms_access: %s\n", lms_last_error());
            return 1;
        }
    if (n > 0 && lms_access(blocks[0], BLOCK, LMS_READ, NULL) != LMS_OK) {
        fprintf(stderr, "lms_access: %s\n", lms_last_error());
        return 1;
    }
    lms_stats_t s;
    if (lms_stats(&s) == LMS_OK)
        printf("swapped out %llu MiB, fetched %llu MiB, peak resident %llu MiB of %llu\n",
               (unsigned long long)(s.bytes_d2h >> 20), (unsigned long long)(s.bytes_h2d >> 20),
               (unsigned long long)(s.peak_resident_bytes >> 20),
               (unsigned long long)(s.device_limit >> 20));
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
