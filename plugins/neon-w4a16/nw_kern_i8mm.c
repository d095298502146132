/*
 * plugins/neon-w4a16/nw_kern_i8mm.c — the i8mm path: SMMLA and UMMLA
 * (FEAT_I8MM), compiled with -march=armv8.2-a+i8mm and called only when the
 * host has the `i8mm` flag.
 *
 * The same exact int16-activation arithmetic as the dotprod path
 * (nw_kern_dot.c: v = 256 h + l, sum v (q - z) = 256 SMMLA(h, q) +
 * UMMLA(l, q) - z sum v, all in int32), but two rows of x at a time: one
 * SMMLA multiplies a 2 x 8 block of x (rows 2p, 2p + 1) by 8 columns of two
 * weight rows, 32 multiply-adds per instruction. Zipping the 32-bit lanes of
 * a chunk's low and high nibbles gives those 2 x 8 weight blocks directly.
 * An odd last row of x is paired with zeros (its partner's output is
 * dropped).
 */
#include <arm_neon.h>

#include "nw_kern.h"

/* Store row m's 4 sums (rows 0..3 of the panel) into y. */
static inline void nw_i8mm_store(const nw_job *job, uint32_t m, size_t n0, unsigned valid,
                                 size_t pg, size_t groups, int32x4_t d, int32x4_t z,
                                 float32x4_t s)
{
    const nw_act *a = job->a;
    d = vmlsq_s32(d, z, vdupq_n_s32(a->sv[m * groups + pg % groups]));
    const float32x4_t sf = vmulq_n_f32(s, a->fe[m * groups + pg % groups]);
    float *y = job->y + m * job->ldy + n0;
    if (valid == NW_NR) {
        vst1q_f32(y, vfmaq_f32(vld1q_f32(y), sf, vcvtq_f32_s32(d)));
    } else {
        float v[NW_NR];
        vst1q_f32(v, vmulq_f32(sf, vcvtq_f32_s32(d)));
        nw_y_add(y, v, valid);
    }
}

NW_BODY void nw_i8mm_g(const nw_job *job, size_t panel_begin, size_t panel_end,
                       const unsigned ch)
{
    const nw_packed *w = job->w;
    const nw_act *a = job->a;
    const size_t k = w->k, groups = w->groups;
    const uint32_t pairs = (a->m + 1u) / 2u;
    const uint8x16_t mask = vdupq_n_u8(15u);

    for (size_t p = panel_begin; p < panel_end; p++) {
        const size_t n0 = p * NW_NR;
        const unsigned valid = w->n - n0 < NW_NR ? (unsigned)(w->n - n0) : NW_NR;
        for (uint32_t m = 0; m < a->m; m++)
            for (unsigned r = 0; r < valid; r++)
                job->y[m * job->ldy + n0 + r] = 0.0f;

        for (size_t g = 0; g < groups; g++) {
            const size_t pg = p * groups + g;
            const uint8_t *codes = w->codes + pg * 16u * ch;
            const float32x4_t s = vld1q_f32(w->scales + pg * NW_NR);
            const uint8_t *zp = w->zeros + pg * NW_NR;
            const int32_t z_in[NW_NR] = {zp[0], zp[1], zp[2], zp[3]};
            const int32x4_t z = vld1q_s32(z_in);

            /* weight operands: rows {0,1} and {2,3} x 8 columns, per chunk */
            uint8x16_t w01[NW_CHUNKS], w23[NW_CHUNKS];
            for (unsigned t = 0; t < ch; t++) {
                const uint8x16_t b = vld1q_u8(codes + 16u * t);
                const uint32x4_t lo = vreinterpretq_u32_u8(vandq_u8(b, mask));
                const uint32x4_t hi = vreinterpretq_u32_u8(vshrq_n_u8(b, 4));
                w01[t] = vreinterpretq_u8_u32(vzip1q_u32(lo, hi));
                w23[t] = vreinterpretq_u8_u32(vzip2q_u32(lo, hi));
            }

            for (uint32_t pr = 0; pr < pairs; pr++) {
                /* ch blocks of 32 bytes: {h row 2pr, h row 2pr+1, l ..., l ...} */
                const uint8_t *x = a->xp + ((size_t)pr * (k / 8u) + g * ch) * 32u;
                /* [m0.r0, m0.r1, m1.r0, m1.r1] and the same for r2, r3 */
                int32x4_t h01 = vdupq_n_s32(0), h23 = vdupq_n_s32(0);
                uint32x4_t l01 = vdupq_n_u32(0), l23 = vdupq_n_u32(0);
                for (unsigned t = 0; t < ch; t++) {
                    const int8x16_t xh = vld1q_s8((const int8_t *)(x + 32u * t));
                    const uint8x16_t xl = vld1q_u8(x + 32u * t + 16u);
                    h01 = vmmlaq_s32(h01, xh, vreinterpretq_s8_u8(w01[t]));
                    h23 = vmmlaq_s32(h23, xh, vreinterpretq_s8_u8(w23[t]));
                    l01 = vmmlaq_u32(l01, xl, w01[t]);
                    l23 = vmmlaq_u32(l23, xl, w23[t]);
                }
                const int32x4_t d01 = vaddq_s32(vshlq_n_s32(h01, 8), vreinterpretq_s32_u32(l01));
                const int32x4_t d23 = vaddq_s32(vshlq_n_s32(h23, 8), vreinterpretq_s32_u32(l23));
                const uint32_t m0 = 2u * pr;
                nw_i8mm_store(job, m0, n0, valid, pg, groups,
                              vcombine_s32(vget_low_s32(d01), vget_low_s32(d23)), z, s);
                if (m0 + 1u < a->m)
                    nw_i8mm_store(job, m0 + 1u, n0, valid, pg, groups,
                                  vcombine_s32(vget_high_s32(d01), vget_high_s32(d23)), z, s);
            }
        }
    }
}

NW_KERNEL_BY_GROUP(nw_kern_i8mm, nw_i8mm_g)
