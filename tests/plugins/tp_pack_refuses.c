/* An honest kernel whose pack refuses the group size its manifest declares
 * (64, in the test): first contact cannot measure it, and must say why
 * (core/sandbox/sandbox.c) instead of passing it silently with no figures. */
#define TP_NAME "test-pack-refuses"
#define TP_PACK_REFUSES_GROUP 64u
#include "tp_common.h"
