/*
 * swap/trace.h — private to swap/: the LMS_TRACE timeline, a Chrome
 * trace-event file of what lms decided and what the device ran
 * (docs/timeline-format.md is the format; trace.c owns the writer).
 *
 * init.c opens it at init and finishes it at shutdown or process exit;
 * residency (residency.c, evict.c, window.c, prefetch.c) reports its
 * decisions; the device reports its work through the observer (timeline_device_work). Every report
 * is made only when timeline_on: the one check a hot path pays while no timeline is written.
 *
 * Threads: timeline_on changes only under swap_lock (open and finish), and
 * the swap-side reports are made under swap_lock; timeline_device_work comes
 * from device threads and takes the writer's own lock only.
 */
#ifndef LMS_SWAP_TRACE_H
#define LMS_SWAP_TRACE_H

#include <stdbool.h>
#include <stdint.h>

#include "device/device.h"
#include "swap/internal.h"

/* A timeline is being written. */
HIDDEN extern bool timeline_on;

/* Who started an eviction. */
typedef enum timeline_by {
    TIMELINE_BY_RECLAIM,  /* the reclaim thread, keeping blocks free ahead of need */
    TIMELINE_BY_DIRECT,   /* a caller that needed blocks now (direct reclaim) */
    TIMELINE_BY_PREFETCH, /* room for what the schedule reads next */
} timeline_by_t;

/* Truncates the file the setting names (LMS_TRACE's; each "%p" in it this
 * process's id: base_expand_path) and writes the head of the timeline: its
 * metadata, and the memory counter at 0. info and dev are the device's
 * (backend, name, chunk size; the sim's throttle is the link's bandwidth).
 * Time 0 is now. Sets timeline_on. LMS_ERR_SYSTEM, with a message naming
 * the path and LMS_TRACE, if the file cannot be written; LMS_ERR_INVALID if
 * the name is too long. */
HIDDEN lms_status_t timeline_open(const char *setting, const dev_info_t *info,
                                  const dev_config_t *dev);

/* lms's copy streams: their work is drawn on the H2D and D2H tracks and
 * counted in the links' busy time (which starts again at 0); work on any
 * other stream is the program's (a compute track per stream). */
HIDDEN void timeline_copy_streams(dev_stream_t *h2d, dev_stream_t *d2h);

/* The device's observer (dev_set_observer(dev, timeline_device_work, NULL)),
 * set while a timeline is written or the links are measured
 * (swap_config_t.measure_links): it keeps the links' busy time whether or
 * not a timeline is open. */
HIDDEN void timeline_device_work(void *ctx, const dev_work_t *work);

/* The time the copy streams kept each direction busy, and both at once,
 * since timeline_copy_streams (Note [Both directions busy] in trace.c). */
HIDDEN void timeline_link_busy(uint64_t *h2d_ns, uint64_t *d2h_ns, uint64_t *both_ns);

/* Decisions, made at at_ns (base_now_ns()); a run of chunks moved as one
 * operation is one report. fetch: ahead = prefetched by the schedule, else
 * on demand. */
HIDDEN void timeline_evict(uint64_t at_ns, size_t chunks, size_t bytes, bool copied,
                           timeline_by_t by);
HIDDEN void timeline_fetch(uint64_t at_ns, bool ahead, size_t chunks, size_t bytes);
/* A caller blocked waiting for device memory from start_ns to end_ns. */
HIDDEN void timeline_stall(uint64_t start_ns, uint64_t end_ns);
/* An iteration ended (marked, or found by policy/). */
HIDDEN void timeline_iteration(void);
/* The current resident and host bytes (as lms_stats says them), at every
 * change; written at most once per 100 us. */
HIDDEN void timeline_memory(uint64_t resident, uint64_t host);
/* From a thread that runs regularly (the reclaim thread): writes a memory
 * counter held back by the 100 us rule once it is due, and the buffer to
 * the file once a second. */
HIDDEN void timeline_tick(void);

/* Writes the end (the last memory counter, the closing lines and otherData
 * with stats) and closes the file; clears timeline_on. No device observer
 * call may come after it but those it drops (init.c calls it once the device
 * is closed, or at exit). */
HIDDEN void timeline_finish(const lms_stats_t *stats);

/* In a child forked while a timeline was open: forgets it without writing
 * (the parent's file and buffer are the parent's). */
HIDDEN void timeline_forget(void);

#endif /* LMS_SWAP_TRACE_H */
