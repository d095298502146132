/* ABI 1 only, but its descriptor (built with the ABI-2 header) holds
 * nonsense in the ABI-2 fields: the core must not read them (they are not
 * ABI 1's) and loads it, not mappable. */
#define TP_NAME "test-abi1-v2fields"
#define TP_PACKED_FLAGS 0xFFFFFFFFu
#define TP_PACKED_LAYOUT "not a layout id!"
#include "tp_common.h"
