/*
 * tests/plugins/tp_wrong_long_k.c — "test-wrong-long-k": a bug only rows
 * longer than 1024 show (columns from 1024 on dequantized with zero point 8
 * instead of the stored one, as a kernel's second K block might). First
 * contact's arithmetic check runs two and a half groups at most and passes
 * it; `edgert verify`, whose cases reach K = 2048, must catch it.
 *
 * tp_common.h with its TP_WRONG_PAST_K knob.
 */
#define TP_NAME "test-wrong-long-k"
#define TP_WRONG_PAST_K 1024u
#define TP_DESCRIBE "test plugin with a deliberate bug: zero point 8 from column 1024 on"
#include "tp_common.h"
