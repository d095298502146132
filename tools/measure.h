/*
 * tools/measure.h — the clock and the order statistic every measuring
 * command shares (bench, verify and the peaks), so that each figure they
 * print is timed and summarised the same way.
 */
#ifndef EDGERT_TOOLS_MEASURE_H
#define EDGERT_TOOLS_MEASURE_H

#include <stddef.h>

/** Seconds on the monotonic clock (an arbitrary origin: differences only). */
double measure_now_s(void);
/** The median of v[0..n) (the mean of the middle two for even n; NaN for
 *  n == 0). Sorts v ascending in place, so v[0] and v[n-1] are then the
 *  minimum and maximum. */
double measure_median(double *v, size_t n);

#endif
