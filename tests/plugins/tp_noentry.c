/* Exports the entry under the wrong name: NO_ENTRY_SYMBOL. */
#define TP_NAME "test-noentry"
#define TP_ENTRY_NAME edgert_plugin_entry_v0
#include "tp_common.h"
