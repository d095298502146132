/* Calls itself by another name than its manifest: NAME_MISMATCH. */
#define TP_NAME "someone-else"
#include "tp_common.h"
