/*
 * tests/plugins/tp_wrong_oracle.c — a "ref-w4a16" with test-wrong-long-k's
 * bug (zero point 8 from column 1024 on): the oracle `edgert verify` trusts
 * is wrong, and verify of another backend must say so, although it runs no
 * cases of the reference's own beside it.
 *
 * tp_common.h with its TP_WRONG_PAST_K knob.
 */
#define TP_NAME "ref-w4a16"
#define TP_WRONG_PAST_K 1024u
#define TP_DESCRIBE "test plugin: a reference with a bug, zero point 8 from column 1024 on"
#include "tp_common.h"
