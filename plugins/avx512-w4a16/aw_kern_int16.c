/*
 * plugins/avx512-w4a16/aw_kern_int16.c — path "int16": exact 16-bit integer
 * activations through vpdpbusd. Compiled with -mavx512f -mavx512bw
 * -mavx512vl -mavx512vnni.
 *
 * Activations, per (row, group of 128): m = max |x|, sh = 13 - floor(log2 m)
 * (so m * 2^sh is in [2^13, 2^14)), a = round(x * 2^sh) clamped to
 * [-16384, 16383] (15-bit signed), split as a = 128 * hi + lo with
 * hi = a >> 7 in [-128, 127] and lo = a & 127 in [0, 127] — both fit the
 * signed-byte operand of vpdpbusd. |a * 2^-sh - x| <= 2^-sh <= 2^-13 * m:
 * every value within 6 octaves of the group's maximum keeps at least as many
 * bits as bf16 would give it, and the group's error is below bf16 rounding of
 * its largest element. The error bound per element is 2^-13 * m (clamping
 * included); the test and the self-test check exactly that.
 *
 * Weights stay unsigned nibbles (0..15): v & 0x0F0F0F0F and (v >> 4) & ..
 * give bytes (k0, k4, k1, k5) and (k2, k6, k3, k7) of each lane's octet, and
 * prep stores the activation bytes in that order. Per (column, group), all in
 * int32 and exact: acc = 128 * sum(q hi) + sum(q lo) = sum(q a)
 * (|acc| <= 128 * 15 * 16384 < 2^31); then in fp32
 *   y += s * 2^-sh * acc - (s z) * (2^-sh * sum a).
 */
#include "aw_kern.h"

/* ---- prep ------------------------------------------------------------------------ */

void aw_int16_prep(void *arg, size_t begin, size_t end, unsigned worker)
{
    const aw_job *j = arg;
    const uint32_t groups = j->w->groups;
    /* per pair of octets: inputs (0,4,1,5, 2,6,3,7) of each */
    const __m512i perm = _mm512_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7, 8, 12, 9, 13, 10, 14, 11, 15);
    const __m512i lo_mask = _mm512_set1_epi32(127);
    const __m512i amin = _mm512_set1_epi32(-16384), amax = _mm512_set1_epi32(16383);
    (void)worker;

    for (size_t i = begin; i < end; i++) {
        const float *x = j->x + i * j->ldx;
        int8_t *row = (int8_t *)j->act + i * j->act_row_bytes;
        for (uint32_t g = 0; g < groups; g++) {
            const float *xg = x + (size_t)g * AW_GROUP;
            int8_t *hi = row + (size_t)g * 256u, *lo = hi + 128;
            __m512 mx = _mm512_setzero_ps();
            for (unsigned c = 0; c < AW_GROUP; c += 16)
                mx = _mm512_max_ps(mx, _mm512_abs_ps(_mm512_loadu_ps(xg + c)));
            /* max_ps drops a NaN in its second operand; find them explicitly */
            __mmask16 bad = 0;
            for (unsigned c = 0; c < AW_GROUP; c += 16) {
                __m512 v = _mm512_loadu_ps(xg + c);
                bad |= _mm512_cmp_ps_mask(_mm512_abs_ps(v), _mm512_set1_ps(INFINITY),
                                          _CMP_NLT_UQ); /* NaN or inf */
            }
            float m = _mm512_reduce_max_ps(mx);
            float *gsum = &j->gsum[i * groups + g], *gscale = &j->gscale[i * groups + g];
            if (bad != 0 || m == 0.0f) {
                memset(hi, 0, 256u);
                /* a non-finite activation makes the whole group's output NaN */
                *gscale = bad != 0 ? NAN : 1.0f;
                *gsum = bad != 0 ? NAN : 0.0f;
                continue;
            }
            int sh = 13 - ilogbf(m);
            if (sh > 126)
                sh = 126; /* keep 2^sh and 2^-sh normal: only for |x| < 2^-113 */
            const __m512 scale = _mm512_set1_ps(ldexpf(1.0f, sh));
            __m512i asum = _mm512_setzero_si512();
            for (unsigned c = 0; c < AW_GROUP; c += 16) {
                __m512i a = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(xg + c), scale));
                a = _mm512_min_epi32(_mm512_max_epi32(a, amin), amax);
                asum = _mm512_add_epi32(asum, a);
                a = _mm512_permutexvar_epi32(perm, a);
                _mm_storeu_si128((__m128i *)(void *)(hi + c),
                                 _mm512_cvtepi32_epi8(_mm512_srai_epi32(a, 7)));
                _mm_storeu_si128((__m128i *)(void *)(lo + c),
                                 _mm512_cvtepi32_epi8(_mm512_and_si512(a, lo_mask)));
            }
            float f = ldexpf(1.0f, -sh);
            *gscale = f;
            *gsum = (float)_mm512_reduce_add_epi32(asum) * f; /* |sum a| <= 2^21: exact */
        }
    }
}

AW_INLINE __m512i i16_bcast(const int8_t *p)
{
    int32_t d;
    memcpy(&d, p, sizeof d);
    return _mm512_set1_epi32(d);
}

/* ---- decode ---------------------------------------------------------------------- */

AW_INLINE void int16_decode_panel(const aw_job *j, size_t p, const unsigned R)
{
    const aw_packed *w = j->w;
    const uint8_t *blk = aw_data(w) + p * w->panel_bytes;
    const __m512i nib = _mm512_set1_epi8(0x0F);
    __m512 yacc[4];

    for (unsigned r = 0; r < R; r++)
        yacc[r] = _mm512_setzero_ps();
    for (uint32_t g = 0; g < w->groups; g++, blk += AW_BLOCK_BYTES) {
        __m512i hA[4], hB[4], lA[4], lB[4];
        const int8_t *xa[4];
        for (unsigned r = 0; r < R; r++) {
            hA[r] = hB[r] = lA[r] = lB[r] = _mm512_setzero_si512();
            xa[r] = (const int8_t *)j->act + r * j->act_row_bytes + (size_t)g * 256u;
        }
        for (unsigned t = 0; t < AW_OCTETS; t++) {
            aw_prefetch(blk + 64u * t);
            __m512i v = _mm512_load_si512((const void *)(blk + 64u * t));
            __m512i a = _mm512_and_si512(v, nib);
            __m512i b = _mm512_and_si512(_mm512_srli_epi32(v, 4), nib);
            for (unsigned r = 0; r < R; r++) {
                hA[r] = _mm512_dpbusd_epi32(hA[r], a, i16_bcast(xa[r] + 8u * t));
                hB[r] = _mm512_dpbusd_epi32(hB[r], b, i16_bcast(xa[r] + 8u * t + 4u));
                lA[r] = _mm512_dpbusd_epi32(lA[r], a, i16_bcast(xa[r] + 128u + 8u * t));
                lB[r] = _mm512_dpbusd_epi32(lB[r], b, i16_bcast(xa[r] + 128u + 8u * t + 4u));
            }
        }
        aw_prefetch(blk + AW_CODE_BYTES);
        __m512 sc, sz;
        aw_meta(blk + AW_CODE_BYTES, &sc, &sz);
        for (unsigned r = 0; r < R; r++) {
            __m512i acc = _mm512_add_epi32(_mm512_slli_epi32(_mm512_add_epi32(hA[r], hB[r]), 7),
                                           _mm512_add_epi32(lA[r], lB[r]));
            size_t gi = r * w->groups + g;
            yacc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc),
                                      _mm512_mul_ps(sc, _mm512_set1_ps(j->gscale[gi])), yacc[r]);
            yacc[r] = _mm512_fnmadd_ps(sz, _mm512_set1_ps(j->gsum[gi]), yacc[r]);
        }
    }
    __mmask16 mask = aw_panel_mask(w, p);
    for (unsigned r = 0; r < R; r++)
        _mm512_mask_storeu_ps(j->y + r * j->ldy + p * AW_PANEL, mask, yacc[r]);
}

/* ---- prefill ------------------------------------------------------------------------ */

#define INT16_RB 4u /* 4 rows x 3 panels x (hi, lo) = 24 int32 accumulators */
#define INT16_PB AW_PREFILL_PB

/* wexp[quad u][p][64 bytes]: u = 2t -> low nibbles of octet t, 2t + 1 -> high */
static void int16_expand(const aw_packed *w, size_t p0, unsigned P, uint32_t g, uint8_t *wexp)
{
    const __m512i nib = _mm512_set1_epi8(0x0F);
    for (unsigned p = 0; p < P; p++) {
        const uint8_t *codes = aw_data(w) + (p0 + p) * w->panel_bytes + (size_t)g * AW_BLOCK_BYTES;
        for (unsigned t = 0; t < AW_OCTETS; t++) {
            __m512i v = _mm512_load_si512((const void *)(codes + 64u * t));
            _mm512_store_si512((void *)(wexp + ((size_t)(2u * t) * P + p) * 64u),
                               _mm512_and_si512(v, nib));
            _mm512_store_si512((void *)(wexp + ((size_t)(2u * t + 1u) * P + p) * 64u),
                               _mm512_and_si512(_mm512_srli_epi32(v, 4), nib));
        }
    }
}

AW_INLINE void int16_tile(const aw_job *j, const uint8_t *wexp, size_t p0, uint32_t g, size_t r0,
                          const unsigned R, const unsigned P, const __m512 *sc, const __m512 *sz,
                          const __mmask16 *mask)
{
    __m512i ah[INT16_RB][INT16_PB], al[INT16_RB][INT16_PB];
    const int8_t *xa[INT16_RB];
    for (unsigned r = 0; r < R; r++) {
        xa[r] = (const int8_t *)j->act + (r0 + r) * j->act_row_bytes + (size_t)g * 256u;
        for (unsigned p = 0; p < P; p++)
            ah[r][p] = al[r][p] = _mm512_setzero_si512();
    }
    for (unsigned u = 0; u < 2u * AW_OCTETS; u++) {
        __m512i wv[INT16_PB];
        for (unsigned p = 0; p < P; p++)
            wv[p] = _mm512_load_si512((const void *)(wexp + ((size_t)u * P + p) * 64u));
        for (unsigned r = 0; r < R; r++) {
            __m512i bh = i16_bcast(xa[r] + 4u * u), bl = i16_bcast(xa[r] + 128u + 4u * u);
            for (unsigned p = 0; p < P; p++) {
                ah[r][p] = _mm512_dpbusd_epi32(ah[r][p], wv[p], bh);
                al[r][p] = _mm512_dpbusd_epi32(al[r][p], wv[p], bl);
            }
        }
    }
    for (unsigned r = 0; r < R; r++) {
        size_t gi = (r0 + r) * j->w->groups + g;
        __m512 f = _mm512_set1_ps(j->gscale[gi]), gs = _mm512_set1_ps(j->gsum[gi]);
        float *yr = j->y + (r0 + r) * j->ldy + p0 * AW_PANEL;
        for (unsigned p = 0; p < P; p++) {
            __m512i acc = _mm512_add_epi32(_mm512_slli_epi32(ah[r][p], 7), al[r][p]);
            __m512 v = _mm512_mul_ps(_mm512_cvtepi32_ps(acc), _mm512_mul_ps(sc[p], f));
            v = _mm512_fnmadd_ps(sz[p], gs, v);
            aw_y_add(yr + p * AW_PANEL, mask[p], g == 0u, v);
        }
    }
}

AW_INLINE void int16_rows(const aw_job *j, const uint8_t *wexp, size_t p0, uint32_t g,
                          const unsigned P, const __m512 *sc, const __m512 *sz,
                          const __mmask16 *mask)
{
    size_t r0 = 0;
    for (; r0 + INT16_RB <= j->m; r0 += INT16_RB)
        int16_tile(j, wexp, p0, g, r0, INT16_RB, P, sc, sz, mask);
    switch (j->m - r0) {
    case 1: int16_tile(j, wexp, p0, g, r0, 1, P, sc, sz, mask); break;
    case 2: int16_tile(j, wexp, p0, g, r0, 2, P, sc, sz, mask); break;
    case 3: int16_tile(j, wexp, p0, g, r0, 3, P, sc, sz, mask); break;
    default: break;
    }
}

static void int16_prefill_block(const aw_job *j, size_t p0, unsigned P, uint8_t *wexp)
{
    const aw_packed *w = j->w;
    for (uint32_t g = 0; g < w->groups; g++) {
        __m512 sc[INT16_PB], sz[INT16_PB];
        __mmask16 mask[INT16_PB];
        for (unsigned p = 0; p < P; p++) {
            aw_meta(aw_data(w) + (p0 + p) * w->panel_bytes + (size_t)g * AW_BLOCK_BYTES +
                        AW_CODE_BYTES, &sc[p], &sz[p]);
            mask[p] = aw_panel_mask(w, p0 + p);
        }
        int16_expand(w, p0, P, g, wexp);
        switch (P) {
        case 3: int16_rows(j, wexp, p0, g, 3, sc, sz, mask); break;
        case 2: int16_rows(j, wexp, p0, g, 2, sc, sz, mask); break;
        default: int16_rows(j, wexp, p0, g, 1, sc, sz, mask); break;
        }
    }
}

void aw_int16_gemm(void *arg, size_t begin, size_t end, unsigned worker)
{
    const aw_job *j = arg;
    const aw_packed *w = j->w;
    (void)worker;
    if (j->m <= AW_DECODE_MAX_M) {
        for (size_t p = begin; p < end; p++) {
            switch (j->m) {
            case 1: int16_decode_panel(j, p, 1); break;
            case 2: int16_decode_panel(j, p, 2); break;
            case 3: int16_decode_panel(j, p, 3); break;
            default: int16_decode_panel(j, p, 4); break;
            }
        }
        return;
    }
    _Alignas(64) uint8_t wexp[2u * AW_OCTETS * INT16_PB * 64u]; /* 6 KiB, per chunk */
    for (size_t b = begin; b < end; b++) {
        size_t p0 = b * INT16_PB;
        unsigned P = w->panels - p0 < INT16_PB ? (unsigned)(w->panels - p0) : INT16_PB;
        int16_prefill_block(j, p0, P, wexp);
    }
}
