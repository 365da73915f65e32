/*
 * tests/fuzz/fuzz_report.c — fuzzes lms-report's timeline reader
 * (tools/lms-report.c): the input is a timeline file. Built from
 * lms-report.c itself (its main renamed), reading with read_timeline_from
 * and, when the file is accepted, writing the page and the SVG to
 * /dev/null, since the figures drawn are computed from what was read.
 *
 * What must hold, for any input: no crash, no sanitizer report, no hang
 * (libFuzzer's -timeout), and an exit status of 0 or 2 from the reader.
 */
#include <stdio.h>

#include "fuzz.h"

#define main lms_report_main
#include "tools/lms-report.c"
#undef main

static FILE *sink;

int LLVMFuzzerInitialize(int *argc, char **argv[])
{
    (void)argc, (void)argv;
    if ((sink = fopen("/dev/null", "w")) == NULL)
        abort();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    FILE *f = fmemopen((void *)data, size, "r");
    FUZZ_CHECK(f != NULL, "fmemopen: %s", strerror(errno));
    report_t *r = report_new("fuzz.json");
    int rc = read_timeline_from(r, f);
    fclose(f);
    FUZZ_CHECK(rc == 0 || rc == 2, "read_timeline_from returned %d", rc);
    if (rc == 0) {
        write_to(r, sink, false);
        write_to(r, sink, true);
    }
    report_free(r);
    return 0;
}
