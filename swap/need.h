/*
 * swap/need.h — a chunk's states, and what swap/ tells policy/ of a chunk
 * for a plan (policy_chunk_facts_t). Apart from chunks.h so that the trace
 * simulator, whose chunks go through the same states, describes them with
 * this same code and checks its plans against it (Note [One plan] in
 * policy/plan.c): no chunk_t here, only its fields.
 */
#ifndef LMS_SWAP_NEED_H
#define LMS_SWAP_NEED_H

#include <stdbool.h>
#include <stdint.h>

#include "policy/policy.h"

/* Chunk states: see DESIGN.md, swap/, and Note [Chunk states] in residency.c. */
enum { UNBACKED, RESIDENT, EVICTING, HOST, FETCHING };

/* A chunk in state, named by holds open access windows (an access is
 * reported to policy/ once its chunks are in: resid_report_access), and
 * free in alloc/ or not. A fetch ahead that waits for a victim's block
 * waits in no state of its own: the next plan places it again. */
static inline policy_chunk_facts_t swap_chunk_facts(uint8_t state, uint32_t holds, bool free)
{
    return (policy_chunk_facts_t){.block = state == RESIDENT || state == FETCHING,
                                  .leaving = state == EVICTING,
                                  .held = holds > 0,
                                  .data = state == HOST && !free};
}

#endif /* LMS_SWAP_NEED_H */
