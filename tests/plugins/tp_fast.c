/* Same honest kernel under another name: the manifests give it a W4A8 layout
 * and a higher declared speed, so selection tests have a speed/fidelity split. */
#define TP_NAME "test-fast"
#include "tp_common.h"
