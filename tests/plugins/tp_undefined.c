/* Needs a symbol nobody defines: RTLD_NOW makes dlopen fail (DLOPEN_FAILED). */
#define TP_NAME "test-undefined"
#include "tp_common.h"

extern int edgert_test_symbol_that_does_not_exist(void);

int tp_use_undefined(void);
EDGERT_PLUGIN_EXPORT int tp_use_undefined(void)
{
    return edgert_test_symbol_that_does_not_exist();
}
