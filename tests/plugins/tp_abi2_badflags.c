/* ABI 2, a packed_flags bit ABI 2 does not define: refused at load,
 * INVALID_DESCRIPTOR (the core never guesses what a bit means). */
#define TP_NAME "test-abi2-badflags"
#define TP_ABI_LO 1u
#define TP_ABI_HI 2u
#define TP_PACKED_FLAGS (1u << 7)
#include "tp_common.h"
