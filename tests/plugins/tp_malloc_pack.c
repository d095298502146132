/* An honest kernel whose pack allocates the packed values with malloc
 * instead of host->alloc (which plugin.h says it must use): first contact
 * cannot evict them before timing, so it gives no quick decode figure and
 * warns (core/sandbox/sandbox.c), instead of ranking a figure read from the cache. */
#define TP_NAME "test-malloc-pack"
#define TP_PACK_MALLOC
#include "tp_common.h"
