/*
 * tests/swap/timeline_probe.c — LMS_TRACE set in the environment, in a
 * process that exits with lms still running. A child starts lms from the
 * options (CTest sets LMS_TRACE, LMS_DEVICE_LIMIT, LMS_HOST_LIMIT), swaps
 * over 1.5 x the device, marks iterations, and returns from main without
 * lms_shutdown; its exit must finish the timeline. The parent then reads the
 * file: one JSON value, its events ending with the final memory counter,
 * otherData with every stat, and the child's marks and evictions in it.
 * A plain program (it forks a child that runs atexit handlers), using only
 * lms.h and liblms.so; CTest also hands the file to python3's json module.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <lms.h>

#include "json.h"

#define CHUNKS 12 /* 2 MiB each, over an 8 MiB device limit */
#define MARKS 3

#define CHECK(cond, ...)                                                \
    do {                                                                \
        if (!(cond)) {                                                  \
            fprintf(stderr, "timeline_probe: " __VA_ARGS__);            \
            fputc('\n', stderr);                                        \
            exit(1);                                                    \
        }                                                               \
    } while (0)

static int child(void)
{
    void *p[CHUNKS];
    for (int i = 0; i < CHUNKS; i++)
        CHECK(lms_malloc(&p[i], 2u << 20, NULL) == LMS_OK, "lms_malloc: %s", lms_last_error());
    for (int it = 0; it < MARKS; it++) {
        for (int i = 0; i < CHUNKS; i++)
            CHECK(lms_access(p[i], 2u << 20, it == 0 ? LMS_OVERWRITE : LMS_WRITE, NULL) == LMS_OK,
                  "lms_access: %s", lms_last_error());
        CHECK(lms_mark_iteration() == LMS_OK, "lms_mark_iteration: %s", lms_last_error());
    }
    return 0; /* lms still running: the exit finishes the timeline */
}

static size_t count(const json_t *events, const char *name)
{
    size_t n = 0;
    for (size_t i = 0; i < events->n; i++) {
        const json_t *e = json_get(&events->items[i], "name");
        n += e != NULL && e->kind == JSON_STRING && strcmp(e->string, name) == 0;
    }
    return n;
}

int main(void)
{
    const char *path = getenv("LMS_TRACE");
    CHECK(path != NULL && path[0] != '\0', "set LMS_TRACE to the file to write");
    unlink(path);
    pid_t pid = fork();
    CHECK(pid >= 0, "fork failed");
    if (pid == 0)
        exit(child());
    int status;
    CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0,
          "the child failed (status %d)", status);

    FILE *f = fopen(path, "rb");
    CHECK(f != NULL, "the child wrote no %s", path);
    static char text[16 << 20];
    size_t len = fread(text, 1, sizeof text, f);
    fclose(f);
    CHECK(len > 0 && len < sizeof text, "%s is empty or too large", path);
    char error[128];
    json_t *v = json_parse(text, len, error, sizeof error);
    CHECK(v != NULL, "%s is not one JSON value (%s): the exit did not finish it", path, error);
    const json_t *events = json_get(v, "traceEvents"), *other = json_get(v, "otherData");
    CHECK(events != NULL && events->kind == JSON_ARRAY && events->n > 0, "no traceEvents");
    CHECK(other != NULL && json_get(other, "lms") != NULL &&
              strcmp(json_get(other, "lms")->string, "timeline 1") == 0,
          "no otherData of a timeline");
    const json_t *stats = json_get(other, "stats"), *evictions = json_get(stats, "evictions");
    CHECK(stats != NULL && stats->n == sizeof(lms_stats_t) / sizeof(uint64_t),
          "otherData.stats has %zu fields", stats != NULL ? stats->n : 0);
    CHECK(evictions != NULL && evictions->number > 0, "the child evicted nothing?");
    const json_t *last = json_get(&events->items[events->n - 1], "name");
    CHECK(last != NULL && strcmp(last->string, "memory") == 0,
          "the events end with the final memory counter");
    CHECK(count(events, "iteration") == MARKS, "%zu iteration marks, %d made",
          count(events, "iteration"), MARKS);
    CHECK(count(events, "evict") > 0 && count(events, "d2h") > 0, "no evictions or copies");
    printf("timeline_probe: the timeline of a process that exited with lms running is "
           "complete: %zu events, %.0f chunks evicted\n",
           events->n, evictions->number);
    json_free(v);
    return 0;
}
