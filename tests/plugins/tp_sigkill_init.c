/* Killed by SIGKILL in init, as the OOM killer or a user would kill it:
 * PLUGIN_CRASHED(SIGKILL) at stage init, a verdict of the moment that first
 * contact does not cache (core/sandbox/sandbox.c). */
#include <signal.h>
#define TP_NAME "test-sigkill-init"
#define TP_ON_INIT raise(SIGKILL)
#include "tp_common.h"
