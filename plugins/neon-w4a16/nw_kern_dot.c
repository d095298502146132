/*
 * plugins/neon-w4a16/nw_kern_dot.c — the dotprod path: SDOT and UDOT
 * (FEAT_DotProd), compiled with -march=armv8.2-a+dotprod and called only
 * when the host has the `asimddp` flag.
 *
 * 16-bit activations with int8 dot products: each (row, group) of fp16
 * activations is put on an int16 grid v = x16 / 2^E (nw_kern.h: exact for
 * every element within 4 binades of the group's largest, others rounded to
 * the grid step 2^E <= max|x16| * 2^-14) and split into a signed high byte
 * and an unsigned low byte, v = 256 h + l. The raw codes q in [0, 15] are
 * both valid int8 and uint8, so
 *
 *     sum v (q - z) = 256 SDOT(h, q) + UDOT(l, q) - z sum v
 *
 * is computed exactly in int32 (per group |256 SDOT| <= 256 * 128 * 128 *
 * 15, UDOT <= 128 * 255 * 15, |z sum v| <= 15 * 128 * 32768: the total stays
 * below 2^27), converted to fp32 once per group and accumulated in fp32 as
 * y += (s 2^E) * sum. Nothing is rounded to 8 bits: the int8 halves
 * carry all 16 bits.
 *
 * SDOT/UDOT by element: one instruction does 4 weight rows x 4 columns
 * against one 4-byte column group of x (a lane of a 16-byte x register).
 */
#include <arm_neon.h>

#include "nw_kern.h"

/* Dot products of one 16-column block (chunks 2u, 2u + 1) of one row of x. */
#define NW_DOT_BLOCK(u)                                                                     \
    do {                                                                                    \
        const int8x16_t xh16 = vld1q_s8(xh + 16u * (u));                                    \
        const uint8x16_t xl16 = vld1q_u8(xl + 16u * (u));                                   \
        const uint8x16_t b0 = vld1q_u8(codes + 32u * (u));                                  \
        const uint8x16_t b1 = vld1q_u8(codes + 32u * (u) + 16u);                            \
        const uint8x16_t q0 = vandq_u8(b0, mask), q1 = vshrq_n_u8(b0, 4);                   \
        const uint8x16_t q2 = vandq_u8(b1, mask), q3 = vshrq_n_u8(b1, 4);                   \
        ah0 = vdotq_laneq_s32(ah0, vreinterpretq_s8_u8(q0), xh16, 0);                       \
        al0 = vdotq_laneq_u32(al0, q0, xl16, 0);                                            \
        ah1 = vdotq_laneq_s32(ah1, vreinterpretq_s8_u8(q1), xh16, 1);                       \
        al1 = vdotq_laneq_u32(al1, q1, xl16, 1);                                            \
        ah0 = vdotq_laneq_s32(ah0, vreinterpretq_s8_u8(q2), xh16, 2);                       \
        al0 = vdotq_laneq_u32(al0, q2, xl16, 2);                                            \
        ah1 = vdotq_laneq_s32(ah1, vreinterpretq_s8_u8(q3), xh16, 3);                       \
        al1 = vdotq_laneq_u32(al1, q3, xl16, 3);                                            \
    } while (0)

NW_BODY void nw_dot_g(const nw_job *job, size_t panel_begin, size_t panel_end,
                      const unsigned ch)
{
    const nw_packed *w = job->w;
    const nw_act *a = job->a;
    const size_t k = w->k, groups = w->groups;
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

            for (uint32_t m = 0; m < a->m; m++) {
                const int8_t *xh = a->xh + m * k + g * 8u * ch;
                const uint8_t *xl = a->xl + m * k + g * 8u * ch;
                int32x4_t ah0 = vdupq_n_s32(0), ah1 = vdupq_n_s32(0);
                uint32x4_t al0 = vdupq_n_u32(0), al1 = vdupq_n_u32(0);
                NW_DOT_BLOCK(0); /* groups of 32 */
                NW_DOT_BLOCK(1);
                if (ch > 4u) { /* of 64 */
                    NW_DOT_BLOCK(2);
                    NW_DOT_BLOCK(3);
                }
                if (ch > 8u) { /* of 128 */
                    NW_DOT_BLOCK(4);
                    NW_DOT_BLOCK(5);
                    NW_DOT_BLOCK(6);
                    NW_DOT_BLOCK(7);
                }
                int32x4_t d = vaddq_s32(vshlq_n_s32(vaddq_s32(ah0, ah1), 8),
                                        vreinterpretq_s32_u32(vaddq_u32(al0, al1)));
                d = vmlsq_s32(d, z, vdupq_n_s32(a->sv[m * groups + g]));
                const float32x4_t sf = vmulq_n_f32(s, a->fe[m * groups + g]);
                float *y = job->y + m * job->ldy + n0;
                if (valid == NW_NR) {
                    vst1q_f32(y, vfmaq_f32(vld1q_f32(y), sf, vcvtq_f32_s32(d)));
                } else {
                    float v[NW_NR];
                    vst1q_f32(v, vmulq_f32(sf, vcvtq_f32_s32(d)));
                    nw_y_add(y, v, valid);
                }
            }
        }
    }
}

NW_KERNEL_BY_GROUP(nw_kern_dotprod, nw_dot_g)
