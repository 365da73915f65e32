/*
 * interpose/nccl.c — what NCCL's collectives touch of lms's memory, made
 * resident before they go on to NCCL, and NCCL's groups (access.h,
 * internal.h).
 *
 * Note [NCCL collectives]
 * A collective reads count elements of its send buffer and writes count
 * of its receive buffer, times the communicator's size where the operation
 * gathers or scatters (ncclCommCount). Receive buffers are overwrites when
 * every rank's is written whole (all-reduce, broadcast, reduce-scatter,
 * all-gather, all-to-all, scatter, receive), and writes when only the
 * root's is (reduce, gather): an overwrite of a buffer NCCL then leaves
 * alone would lose its contents. A datatype lms does not know makes the
 * whole allocations resident.
 *
 * Note [NCCL groups]
 * Between ncclGroupStart and ncclGroupEnd, NCCL only records the calls; the
 * kernels are launched by ncclGroupEnd, all at once. So a call inside a
 * group makes nothing resident (that would last only until the next lms
 * call); its ranges are kept, per thread, and the outermost ncclGroupEnd
 * makes them all resident in one lms_access_many, on the stream of the
 * group's first call, before NCCL launches. That is enough when a group
 * spans several streams: NCCL makes every stream of the group wait for the
 * others before its kernel starts, and makes them all wait for the kernel.
 * If they cannot all be resident at once, ncclGroupEnd fails and does not
 * go on to NCCL; the group is as it was, and ncclGroupEnd may be called
 * again once memory is free.
 */
#include <stdint.h>

#include "interpose/internal.h"

static __thread struct {
    int depth;      /* ncclGroupStart calls not yet ended */
    void *stream;   /* of the group's first call */
    bool has_stream;
    touches_t t;
} group;

void access_group_started(void)
{
    if (group.depth++ == 0) {
        access_clear(&group.t);
        group.has_stream = false;
    }
}

lms_status_t access_group_ending(void)
{
    if (group.depth != 1 || !group.has_stream)
        return LMS_OK;
    return access_run(&group.t, group.stream);
}

void access_group_ended(void)
{
    if (group.depth > 0 && --group.depth == 0)
        access_clear(&group.t);
}

/* The bytes of n elements of datatype d, times `ranks`; ACCESS_UNKNOWN if lms does
 * not know d (a datatype of a later NCCL) or the product overflows. */
static size_t elems(size_t n, ncclDataType_t d, size_t ranks)
{
    static const unsigned char size[] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1}; /* ncclInt8.. */
    size_t b;
    if ((unsigned)d >= sizeof size || ranks == 0 || __builtin_mul_overflow(n, (size_t)size[d], &b) ||
        __builtin_mul_overflow(b, ranks, &b))
        return ACCESS_UNKNOWN;
    return b;
}

/* The communicator's size; 0 if NCCL does not say. ncclCommCount is looked
 * up on first use by whichever thread gets there: threads that race store the
 * same answer, and the release/acquire pair lets a reader use what another
 * thread found (a plain static was a data race, issue 25). */
static size_t ranks_of(ncclComm_t comm)
{
    typedef ncclResult_t (*count_fn)(const ncclComm_t, int *);
    static count_fn found;
    count_fn count = __atomic_load_n(&found, __ATOMIC_ACQUIRE);
    if (count == NULL) {
        count = (count_fn)interpose_sym("ncclCommCount");
        __atomic_store_n(&found, count, __ATOMIC_RELEASE);
    }
    int n;
    return count != NULL && count(comm, &n) == ncclSuccess && n > 0 ? (size_t)n : 0;
}

/* A collective's ranges: made resident now, or kept for the end of the
 * thread's group (Note [NCCL groups]). */
static lms_status_t collective(const void *send, size_t sbytes, const void *recv, size_t rbytes,
                               lms_access_mode_t rmode, void *stream)
{
    if (group.depth == 0) {
        TOUCHES(t);
        access_touch(&t, send, sbytes, LMS_READ);
        access_touch(&t, recv, rbytes, rmode);
        return access_run(&t, stream);
    }
    access_touch(&group.t, send, sbytes, LMS_READ);
    access_touch(&group.t, recv, rbytes, rmode);
    if (!group.has_stream) {
        group.stream = stream;
        group.has_stream = true;
    }
    return LMS_OK;
}

lms_status_t access_ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count,
                                  ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                  cudaStream_t stream)
{
    (void)op, (void)comm;
    size_t b = elems(count, datatype, 1);
    return collective(sendbuff, b, recvbuff, b, LMS_OVERWRITE, stream);
}

lms_status_t access_ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count,
                                  ncclDataType_t datatype, int root, ncclComm_t comm,
                                  cudaStream_t stream)
{
    (void)root, (void)comm;
    size_t b = elems(count, datatype, 1);
    return collective(sendbuff, b, recvbuff, b, LMS_OVERWRITE, stream);
}

lms_status_t access_ncclBcast(void *buff, size_t count, ncclDataType_t datatype, int root,
                              ncclComm_t comm, cudaStream_t stream)
{
    (void)root, (void)comm;
    return collective(NULL, 0, buff, elems(count, datatype, 1), LMS_WRITE, stream);
}

lms_status_t access_ncclReduce(const void *sendbuff, void *recvbuff, size_t count,
                               ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm,
                               cudaStream_t stream)
{
    (void)op, (void)root, (void)comm;
    size_t b = elems(count, datatype, 1);
    return collective(sendbuff, b, recvbuff, b, LMS_WRITE, stream);
}

lms_status_t access_ncclReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount,
                                      ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                      cudaStream_t stream)
{
    (void)op;
    return collective(sendbuff, elems(recvcount, datatype, ranks_of(comm)), recvbuff,
                      elems(recvcount, datatype, 1), LMS_OVERWRITE, stream);
}

lms_status_t access_ncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount,
                                  ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream)
{
    return collective(sendbuff, elems(sendcount, datatype, 1), recvbuff,
                      elems(sendcount, datatype, ranks_of(comm)), LMS_OVERWRITE, stream);
}

lms_status_t access_ncclAlltoAll(const void *sendbuff, void *recvbuff, size_t count,
                                 ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream)
{
    size_t b = elems(count, datatype, ranks_of(comm));
    return collective(sendbuff, b, recvbuff, b, LMS_OVERWRITE, stream);
}

lms_status_t access_ncclGather(const void *sendbuff, void *recvbuff, size_t count,
                               ncclDataType_t datatype, int root, ncclComm_t comm,
                               cudaStream_t stream)
{
    (void)root;
    return collective(sendbuff, elems(count, datatype, 1), recvbuff,
                      elems(count, datatype, ranks_of(comm)), LMS_WRITE, stream);
}

lms_status_t access_ncclScatter(const void *sendbuff, void *recvbuff, size_t count,
                                ncclDataType_t datatype, int root, ncclComm_t comm,
                                cudaStream_t stream)
{
    (void)root;
    return collective(sendbuff, elems(count, datatype, ranks_of(comm)), recvbuff,
                      elems(count, datatype, 1), LMS_OVERWRITE, stream);
}

lms_status_t access_ncclSend(const void *sendbuff, size_t count, ncclDataType_t datatype, int peer,
                             ncclComm_t comm, cudaStream_t stream)
{
    (void)peer, (void)comm;
    return collective(sendbuff, elems(count, datatype, 1), NULL, 0, LMS_READ, stream);
}

lms_status_t access_ncclRecv(void *recvbuff, size_t count, ncclDataType_t datatype, int peer,
                             ncclComm_t comm, cudaStream_t stream)
{
    (void)peer, (void)comm;
    return collective(NULL, 0, recvbuff, elems(count, datatype, 1), LMS_OVERWRITE, stream);
}
