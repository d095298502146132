/*
 * tests/plugins/tp_wrong.c — "test-wrong": a plugin with a SUBTLE bug that
 * its own self-test does not see, for `edgert verify` to catch.
 *
 * The bug: the last group of every row is dequantized with the symmetric
 * zero point 8 instead of the stored one. Symmetric weights (zero point 8
 * everywhere, as in the self-test) come out right; asymmetric weights are off
 * by s * (z - 8) * Σ x over the last group wherever z != 8 — a few percent of
 * an output, and only in some rows. Everything else (ABI, strides, padding,
 * threading) is honest, so only the arithmetic check can fail it.
 *
 * tp_common.h with its TP_WRONG_LAST_ZERO knob.
 */
#define TP_NAME "test-wrong"
#define TP_WRONG_LAST_ZERO 1
#define TP_DESCRIBE "test plugin with a deliberate bug: last group's zero point taken as 8"
#include "tp_common.h"
