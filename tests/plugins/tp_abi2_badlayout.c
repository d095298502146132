/* ABI 2, mappable, with a packed_layout id a cache could not use safely as
 * a key (blanks, an escape): refused at load, INVALID_DESCRIPTOR. */
#define TP_NAME "test-abi2-badlayout"
#define TP_ABI_LO 1u
#define TP_ABI_HI 2u
#define TP_PACKED_FLAGS EDGERT_PACKED_MAPPABLE
#define TP_PACKED_LAYOUT "bad id\x1b[2J"
#define TP_PACKED_FNS 1
#include "tp_common.h"
