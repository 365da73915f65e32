/* swap/hostpool.c — see hostpool.h (being written) */
#include "swap/hostpool.h"
