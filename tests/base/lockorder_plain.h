/* tests/base/lockorder_plain.h — see lockorder_plain.c. */
#ifndef LMS_TESTS_LOCKORDER_PLAIN_H
#define LMS_TESTS_LOCKORDER_PLAIN_H

#include <pthread.h>

/* Takes high at LO_META, then low at LO_SWAP (the wrong order) with the
 * wrappers built without the witness; returns lo_depth() while both are
 * held. */
unsigned plain_depth_while_held(pthread_mutex_t *low, pthread_mutex_t *high);

#endif
