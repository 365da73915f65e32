/* swap/residency.c — being written */
#include "swap/swap.h"
