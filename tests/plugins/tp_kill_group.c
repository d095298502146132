/* Sends SIGTERM to its process group in its constructor: the child's own
 * (the sandbox gives it one), so PLUGIN_CRASHED(SIGTERM) at stage dlopen;
 * it ended the host that shared the group before. */
#include <signal.h>
#define TP_NAME "test-kill-group"
#define TP_ON_LOAD kill(0, SIGTERM)
#include "tp_common.h"
