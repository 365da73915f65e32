/*
 * interpose/graph.h — CUDA graph capture: what a captured call touches is
 * pinned for the life of the graphs made from the capture (Note [Graph
 * capture] in graph.c).
 *
 * The hooks in interpose.c call these around CUDA's capture, instantiate,
 * clone and destroy calls; the launch and access hooks ask graph_capturing
 * first and, for a stream being captured, pin with graph_pin_pointers
 * instead of making the memory resident on the stream.
 */
#ifndef LMS_INTERPOSE_GRAPH_H
#define LMS_INTERPOSE_GRAPH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lms.h"

/* Whether the CUDA stream `stream` is being captured now. False at once,
 * with no driver call, while no capture is in progress in the process. */
bool graph_capturing(void *stream);

/* Pins the whole lms allocation that each of ptrs[0..n) points into (others
 * are skipped) for the graph being captured on `stream`, and waits until
 * they are resident; nothing is queued on the stream. */
lms_status_t graph_pin_pointers(void *stream, const void *const *ptrs, size_t n);

/* Before CUDA begins a capture on `stream`: lms lets go of the stream
 * (waiting for its queued work), so that it records nothing on it while it
 * is captured. Then graph_capture_begun with whether CUDA began it. */
lms_status_t graph_capture_beginning(void *stream);
void graph_capture_begun(bool began);

/* Before `stream` waits for an event, which joins it to a capture if the
 * event was recorded in one: while a capture is in progress, lms lets go
 * of the stream unless it is captured already. One load otherwise. */
lms_status_t graph_stream_waiting(void *stream);

/* Before CUDA ends the capture on `stream`: its id, false if the stream is
 * not being captured. After: graph_capture_ended with that id and the
 * graph made (NULL if none was): the capture's pins pass to the graph, or
 * are dropped. */
bool graph_capture_id(void *stream, uint64_t *id);
void graph_capture_ended(void *stream, uint64_t id, void *graph);

/* After CUDA made exec from graph, or clone from original: the new one
 * holds the graph's pins too. */
void graph_instantiated(void *graph, void *exec);
void graph_cloned(void *original, void *clone);

/* After CUDA destroyed a graph or an executable graph: the last holder of
 * a capture's pins drops them (after the device's work, when an executable
 * graph held them: it may still be running). */
void graph_destroyed(void *graph);
void graph_exec_destroyed(void *exec);

/* Before the allocation at ptr is freed: no graph will unpin it (its pins
 * go with its memory). No lock while no graph holds pins. */
void graph_forget(const void *ptr);

#endif /* LMS_INTERPOSE_GRAPH_H */
