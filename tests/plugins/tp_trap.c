/*
 * A plugin that kills the process the moment it is loaded, like a library
 * built for a CPU this one lacks would (SIGILL in a constructor). The tests
 * pair it with manifests whose declarative gates fail: if the core ever
 * dlopened it, the test process would die.
 */
#define TP_NAME "test-trap"
#include "tp_common.h"

__attribute__((constructor)) static void tp_trap_on_load(void)
{
    __builtin_trap();
}
