/*
 * tools/metrics.c — fidelity metrics (see metrics.h), all in double.
 *
 * KL uses log-sum-exp so logits of any magnitude (1000 and more) neither
 * overflow nor lose the distribution: with p = softmax(a), q = softmax(b),
 *   log p_i = (a_i - max a) - log Σ exp(a_j - max a)     (likewise q)
 *   KL(p || q) = Σ p_i (log p_i - log q_i).
 * Terms with p_i == 0 (exp underflowed) contribute 0, the limit of p log p/q.
 * Rounding can make the sum a hair negative when p == q; it is clamped to 0.
 */
#include "metrics.h"

#include <math.h>

double metric_sqnr_db(const float *ref, const float *test, size_t n)
{
    double sig = 0.0, noise = 0.0;
    for (size_t i = 0; i < n; i++) {
        double r = (double)ref[i], d = (double)test[i] - r;
        sig += r * r;
        noise += d * d;
    }
    if (sig == 0.0)
        return NAN;
    if (noise == 0.0)
        return INFINITY;
    if (isnan(noise))
        return NAN;
    return 10.0 * log10(sig / noise);
}

/* max and log Σ exp(v - max) of one logit vector. */
static void lse(const float *v, size_t n, double *max_out, double *log_z)
{
    double mx = -INFINITY;
    for (size_t i = 0; i < n; i++)
        if ((double)v[i] > mx)
            mx = (double)v[i];
    double z = 0.0;
    for (size_t i = 0; i < n; i++)
        z += exp((double)v[i] - mx);
    *max_out = mx;
    *log_z = log(z);
}

double metric_kl(const float *p_logits, const float *q_logits, size_t n)
{
    if (n == 0)
        return 0.0;
    double pm, plz, qm, qlz;
    lse(p_logits, n, &pm, &plz);
    lse(q_logits, n, &qm, &qlz);
    if (!isfinite(pm) || !isfinite(qm) || !isfinite(plz) || !isfinite(qlz))
        return NAN; /* a NaN or infinite logit: no distribution to compare */
    double kl = 0.0;
    for (size_t i = 0; i < n; i++) {
        double lp = ((double)p_logits[i] - pm) - plz;
        double lq = ((double)q_logits[i] - qm) - qlz;
        double p = exp(lp);
        if (p > 0.0)
            kl += p * (lp - lq);
    }
    return kl > 0.0 ? kl : 0.0;
}

size_t metric_argmax(const float *v, size_t n)
{
    size_t best = 0;
    for (size_t i = 1; i < n; i++)
        if (v[i] > v[best] || (isnan(v[best]) && !isnan(v[i])))
            best = i;
    return best;
}
