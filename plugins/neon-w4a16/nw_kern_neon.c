/*
 * plugins/neon-w4a16/nw_kern_neon.c — the base path: Advanced SIMD of
 * baseline ARMv8-A only (compiled with -march=armv8-a), runs on every ARM64
 * CPU.
 *
 * Per (panel, group): the 4 x 128 codes are dequantized once to exact fp32
 * integers q - z (a 2 KiB tile on the stack), then every row of x is dotted
 * with the tile: FMLA into fp32, eight independent accumulators (4 rows x 2
 * k-quads), reduced with pairwise adds. The group's sum is scaled once,
 * y += s * sum (q - z) x, in fp32. Reusing the tile for all m rows is the
 * prefill reuse; for m = 1 it costs one store and load per weight.
 */
#include <arm_neon.h>

#include "nw_kern.h"

/* tile[t][h][r]: row r, k-quad 2t + h, as 4 fp32 values q - z */
typedef struct nw_tile {
    float32x4_t v[NW_CHUNKS][2][NW_NR];
} nw_tile;

NW_BODY void nw_decode_tile(const uint8_t *codes, const uint8_t *zeros, nw_tile *tile,
                            const unsigned ch)
{
    /* zero point of row j / 4 in byte j */
    static const uint8_t spread[16] = {0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3};
    uint8_t z4[16] = {zeros[0], zeros[1], zeros[2], zeros[3]};
    const int8x16_t z = vreinterpretq_s8_u8(vqtbl1q_u8(vld1q_u8(z4), vld1q_u8(spread)));
    const uint8x16_t mask = vdupq_n_u8(15u);

    for (unsigned t = 0; t < ch; t++) {
        uint8x16_t b = vld1q_u8(codes + 16u * t);
        int8x16_t h[2];
        h[0] = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(b, mask)), z);
        h[1] = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(b, 4)), z);
        for (unsigned k = 0; k < 2u; k++) {
            int16x8_t r01 = vmovl_s8(vget_low_s8(h[k]));
            int16x8_t r23 = vmovl_s8(vget_high_s8(h[k]));
            tile->v[t][k][0] = vcvtq_f32_s32(vmovl_s16(vget_low_s16(r01)));
            tile->v[t][k][1] = vcvtq_f32_s32(vmovl_s16(vget_high_s16(r01)));
            tile->v[t][k][2] = vcvtq_f32_s32(vmovl_s16(vget_low_s16(r23)));
            tile->v[t][k][3] = vcvtq_f32_s32(vmovl_s16(vget_high_s16(r23)));
        }
    }
}

/* [sum a0, sum a1, sum a2, sum a3] */
static inline float32x4_t nw_hsum4(float32x4_t a0, float32x4_t a1, float32x4_t a2,
                                   float32x4_t a3)
{
    return vpaddq_f32(vpaddq_f32(a0, a1), vpaddq_f32(a2, a3));
}

NW_BODY void nw_neon_g(const nw_job *job, size_t panel_begin, size_t panel_end,
                       const unsigned ch)
{
    const nw_packed *w = job->w;
    const nw_act *a = job->a;
    const size_t k = w->k, groups = w->groups;
    nw_tile tile;

    for (size_t p = panel_begin; p < panel_end; p++) {
        const size_t n0 = p * NW_NR;
        const unsigned valid = w->n - n0 < NW_NR ? (unsigned)(w->n - n0) : NW_NR;
        for (uint32_t m = 0; m < a->m; m++)
            for (unsigned r = 0; r < valid; r++)
                job->y[m * job->ldy + n0 + r] = 0.0f;

        for (size_t g = 0; g < groups; g++) {
            const size_t pg = p * groups + g;
            nw_decode_tile(w->codes + pg * 16u * ch, w->zeros + pg * NW_NR, &tile, ch);
            const float32x4_t s = vld1q_f32(w->scales + pg * NW_NR);

            for (uint32_t m = 0; m < a->m; m++) {
                const float *x = a->xf + m * k + g * 8u * ch;
                float32x4_t acc[2][NW_NR];
                for (unsigned h = 0; h < 2u; h++)
                    for (unsigned r = 0; r < NW_NR; r++)
                        acc[h][r] = vdupq_n_f32(0.0f);
                for (unsigned t = 0; t < ch; t++) {
                    const float32x4_t x0 = vld1q_f32(x + 8u * t);
                    const float32x4_t x1 = vld1q_f32(x + 8u * t + 4u);
                    for (unsigned r = 0; r < NW_NR; r++) {
                        acc[0][r] = vfmaq_f32(acc[0][r], tile.v[t][0][r], x0);
                        acc[1][r] = vfmaq_f32(acc[1][r], tile.v[t][1][r], x1);
                    }
                }
                const float32x4_t dot =
                    nw_hsum4(vaddq_f32(acc[0][0], acc[1][0]), vaddq_f32(acc[0][1], acc[1][1]),
                             vaddq_f32(acc[0][2], acc[1][2]), vaddq_f32(acc[0][3], acc[1][3]));
                float *y = job->y + m * job->ldy + n0;
                if (valid == NW_NR) {
                    vst1q_f32(y, vfmaq_f32(vld1q_f32(y), s, dot));
                } else {
                    float v[NW_NR];
                    vst1q_f32(v, vmulq_f32(s, dot));
                    nw_y_add(y, v, valid);
                }
            }
        }
    }
}

NW_KERNEL_BY_GROUP(nw_kern_neon, nw_neon_g)
