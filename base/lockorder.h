/*
 * base/lockorder.h — the order in which lms's locks are taken, stated once,
 * and a witness that checks it (jemalloc's witness is the model).
 *
 * Every lock of lms is taken and released through the wrappers below, each
 * with its rank. Built with LMS_LOCK_ORDER (Debug builds, and any build with
 * LMS_SANITIZE), the witness keeps the ranks each thread holds and aborts,
 * naming both locks, when a thread takes a lock whose rank is not above
 * every rank it holds: the first time two locks are taken in an order that
 * could deadlock, not the first time they do. Without LMS_LOCK_ORDER the
 * wrappers are the plain pthread calls.
 *
 * Note [Lock order]
 * A thread takes locks in rising rank only (LO_RANKS, first to last), so no
 * two threads can each wait for a lock the other holds. No two locks share a
 * rank, and no lock is taken while one of its own rank is held (two sim
 * streams' locks, say): the code never nests two of one rank. Why each lock
 * sits where it does:
 *   - interpose/'s graph_lock and trace_lock come first: a graph's pins and
 *     the access trace are updated with them held, around lms calls that take
 *     swap_lock (lms_pin, lms_allocation_of).
 *   - swap_lock is held across every device call swap/ makes but the waits
 *     (Note [Stream-ordered free] in swap/streams.c and the file comment of
 *     swap/lms.c), so the device's locks all rank after it; the timeline's
 *     reports come from swap/ with it held.
 *   - A backend's observer lock (sim.observer_lock, cuda.observe_lock) is
 *     held while the backend tells the observer of work done, which is the
 *     check layer's: it takes check.lock to find the handle, then calls
 *     swap/'s timeline, which takes timeline_lock (device/check_work.c,
 *     device/sim.c, Note [Timing work on the GPU] in device/cuda_work.c).
 *     swap_lock is held where set_observer and cuda's polling run.
 *   - check.lock is held across the layers below's block_release, map,
 *     unmap and set_access under full validation, and across their
 *     va_free, host_register and host_unregister always (device/check.c),
 *     so the handle tables', the fault layer's and every backend lock rank
 *     after it. A handle table's lock is taken under it, with nothing under
 *     it but host metadata (device/handle.c).
 *   - Inside the sim, sim.event_lock is held while a stream's lock is read
 *     (event_pending); its other locks are never held two at once.
 *   - timeline_lock is a leaf but for write(2) and host metadata, and is
 *     taken by device threads with an observer lock held.
 *   - interpose/'s remaining tables' locks are leaves. start_lock is one
 *     too, and ranks after swap_lock for fork: its prepare handler is
 *     registered by a constructor, first, so it runs last, after swap/'s has
 *     taken swap_lock (prepare handlers run in the reverse order of their
 *     registration). interpose/trace.c's, registered at the first traced
 *     call, after lms started, runs before swap/'s: trace_lock, then
 *     swap_lock, as the ranks say.
 *   - meta_lock is last: host metadata (base_meta_*) is allocated under any
 *     other lock, and it takes none (jemalloc's own locks are jemalloc's).
 * A trylock never waits, so it is not checked against the locks held; the
 * lock it took counts as held from then on. A condition wait gives its lock
 * up and takes it again: it is checked as a fresh lock before it waits, so
 * a lock of a higher rank held across the wait is an error.
 * The witness keeps each thread's held locks in a fixed thread-local array
 * (LO_MAX_HELD): no allocation, so it works under any lock, host metadata's
 * included. A forked child is one thread, a copy of the one that forked,
 * so it starts with the locks that thread held as the fork handlers left
 * them (swap_lock, taken in the prepare handler and released in the
 * child's).
 */
#ifndef LMS_BASE_LOCKORDER_H
#define LMS_BASE_LOCKORDER_H

#include <pthread.h>
#include <stdbool.h>
#include <time.h>

/* X(rank, the lock it is) — in the order locks are taken (Note [Lock order]). */
#define LO_RANKS(X)                                                                          \
    X(LO_GRAPH, "graph_lock (interpose/graph.c)")                                            \
    X(LO_ACCESS_TRACE, "trace_lock (interpose/trace.c)")                                     \
    X(LO_SWAP, "swap_lock (swap/lms.c)")                                                     \
    X(LO_DEV_OBSERVER, "a backend's observer lock (sim.observer_lock, cuda.observe_lock)")   \
    X(LO_DEV_CHECK, "check.lock (device/check.h)")                                           \
    X(LO_DEV_HANDLES, "a handle table's lock (device/handle.h)")                             \
    X(LO_DEV_FAULT, "the fault layer's lock (device/fault.c)")                               \
    X(LO_CUDA, "cuda.lock (device/cuda.h)")                                                  \
    X(LO_SIM, "sim.lock (device/sim.c)")                                                     \
    X(LO_SIM_EVENT, "sim.event_lock (device/sim.c)")                                         \
    X(LO_SIM_STREAM, "a sim stream's lock (device/sim.c)")                                   \
    X(LO_SIM_VMM, "sim.vmm_lock (device/sim.c)")                                             \
    X(LO_SIM_LINK, "a sim link's lock (device/sim.c)")                                       \
    X(LO_TIMELINE, "timeline_lock (swap/trace.c)")                                           \
    X(LO_TORCH_RECORDED, "recorded_lock (interpose/torch.c)")                                \
    X(LO_LAUNCH_LAYOUTS, "table_lock (interpose/launch.c)")                                  \
    X(LO_LAUNCH_LIBS, "found_lock (interpose/launch.c)")                                     \
    X(LO_INTERPOSE_START, "start_lock (interpose/launch.c)")                                 \
    X(LO_TENSORMAP, "the tensor maps' lock (interpose/tensormap.c)")                         \
    X(LO_META, "meta_lock (base/meta.c)")

typedef enum lo_rank {
    LO_NONE, /* below every rank: no lock */
#define LO_ENUM(rank, what) rank,
    LO_RANKS(LO_ENUM)
#undef LO_ENUM
    LO_RANK_COUNT
} lo_rank_t;

/* The most locks one thread holds at once; the witness aborts beyond it. */
#define LO_MAX_HELD 16

#ifdef LMS_LOCK_ORDER
static const bool lo_witness = true;
#else
static const bool lo_witness = false;
#endif

/* The witness (base/lockorder.c); the wrappers call it only when lo_witness.
 * lo_check aborts unless rank is above every rank this thread holds;
 * lo_held records that the thread holds lock at rank (aborting past
 * LO_MAX_HELD); lo_released forgets it, wherever it is among those held
 * (aborting if the thread does not hold it). */
void lo_check(lo_rank_t rank, const void *lock);
void lo_held(lo_rank_t rank, const void *lock);
void lo_released(lo_rank_t rank, const void *lock);

/* How many locks the witness sees this thread hold (0 without it). */
unsigned lo_depth(void);

/* What rank names, for messages. */
const char *lo_name(lo_rank_t rank);

/* The witness's side of a wrapper: before taking a lock (checked before
 * waiting, so that a wrong order aborts rather than deadlocks), once taken,
 * once given up, and before a condition wait (given up, then checked as a
 * lock taken afresh). */
static inline void lo_taking(lo_rank_t rank, const void *lock)
{
    if (lo_witness)
        lo_check(rank, lock);
}

static inline void lo_taken(lo_rank_t rank, const void *lock)
{
    if (lo_witness)
        lo_held(rank, lock);
}

static inline void lo_given_up(lo_rank_t rank, const void *lock)
{
    if (lo_witness)
        lo_released(rank, lock);
}

static inline void lo_waiting(lo_rank_t rank, const void *lock)
{
    lo_given_up(rank, lock);
    lo_taking(rank, lock);
}

static inline void lo_lock(pthread_mutex_t *m, lo_rank_t rank)
{
    lo_taking(rank, m);
    pthread_mutex_lock(m);
    lo_taken(rank, m);
}

/* Whether m was taken; never waits (Note [Lock order]: not checked). */
static inline bool lo_trylock(pthread_mutex_t *m, lo_rank_t rank)
{
    bool taken = pthread_mutex_trylock(m) == 0;
    if (taken)
        lo_taken(rank, m);
    return taken;
}

static inline void lo_unlock(pthread_mutex_t *m, lo_rank_t rank)
{
    lo_given_up(rank, m);
    pthread_mutex_unlock(m);
}

/* pthread_cond_wait on m, held at rank (Note [Lock order]). */
static inline void lo_cond_wait(pthread_cond_t *c, pthread_mutex_t *m, lo_rank_t rank)
{
    lo_waiting(rank, m);
    pthread_cond_wait(c, m);
    lo_taken(rank, m);
}

/* pthread_cond_timedwait on m, held at rank; returns its answer. */
static inline int lo_cond_timedwait(pthread_cond_t *c, pthread_mutex_t *m, lo_rank_t rank,
                                    const struct timespec *until)
{
    lo_waiting(rank, m);
    int r = pthread_cond_timedwait(c, m, until);
    lo_taken(rank, m);
    return r;
}

static inline void lo_rdlock(pthread_rwlock_t *l, lo_rank_t rank)
{
    lo_taking(rank, l);
    pthread_rwlock_rdlock(l);
    lo_taken(rank, l);
}

static inline void lo_wrlock(pthread_rwlock_t *l, lo_rank_t rank)
{
    lo_taking(rank, l);
    pthread_rwlock_wrlock(l);
    lo_taken(rank, l);
}

static inline void lo_rwunlock(pthread_rwlock_t *l, lo_rank_t rank)
{
    lo_given_up(rank, l);
    pthread_rwlock_unlock(l);
}

#endif /* LMS_BASE_LOCKORDER_H */
