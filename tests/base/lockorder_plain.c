/* tests/base/lockorder_plain.c — lockorder.h's wrappers built without
 * LMS_LOCK_ORDER, as in a release build: plain pthread calls, which the
 * witness never sees (test_lockorder.c builds them with it). */
#undef LMS_LOCK_ORDER
#include "base/lockorder.h"

#include "lockorder_plain.h"

unsigned plain_depth_while_held(pthread_mutex_t *low, pthread_mutex_t *high)
{
    /* the wrong order: the witness, were it built in, would abort */
    lo_lock(high, LO_META);
    lo_lock(low, LO_SWAP);
    unsigned depth = lo_depth();
    lo_unlock(low, LO_SWAP);
    lo_unlock(high, LO_META);
    return depth;
}
