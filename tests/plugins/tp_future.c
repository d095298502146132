/* Built as against a future plugin.h: it implements ABI 1 and 2, and its
 * descriptor grew at the end (every descriptor's struct_size is the grown
 * size). Today's core must load it with ABI 1. */
#define TP_NAME "test-future"
#define TP_ABI_LO 1u
#define TP_ABI_HI 2u
#define TP_FUTURE 1
#include "tp_common.h"
