/*
 * plugins/neon-w4a16/nw_kern_bf16.c — the bf16 path: BFMMLA (FEAT_BF16),
 * compiled with -march=armv8.2-a+bf16 and called only when the host has the
 * `bf16` flag.
 *
 * No activation precision is lost to bf16: each fp16 activation is the exact
 * sum hi + lo of two bf16 numbers (nw_kern.h), and one BFMMLA multiplies the
 * 2 x 4 matrix {hi; lo} of one x row by 4 columns of two weight rows, so
 * summing the two output rows gives x16 . w for both weight rows. The weight
 * side is q - z in bf16 (exact: integers in [-15, 15]), looked up with TBL
 * from a 31-entry table indexed by q - z + 15, so this path computes the same
 * sum x16 (q - z) as the base path: products exact, sums in fp32 (BFMMLA
 * rounds its sums to fp32, round-to-odd, denormals flushed), then
 * y += s * sum. (Folding the zero point out as sum (q - 8) x - (z - 8) sum x
 * would cancel catastrophically in fp32 when a large activation meets q = z.)
 *
 * Per (panel, group) the weights are converted once into a 1 KiB tile of
 * BFMMLA operands and reused for every row of x.
 */
#include <arm_neon.h>
#include <string.h>

#include "nw_kern.h"

/* tile[t][h][pair]: rows {0,1} (pair 0) or {2,3} (pair 1) x k-quad 2t + h, bf16 */
typedef struct nw_btile {
    bfloat16x8_t v[NW_CHUNKS][2][2];
} nw_btile;

/* little-endian bf16 bits of e - 15 for e = 0..30 at bytes 2e, 2e + 1 */
static uint8x16x4_t nw_qz_table(void)
{
    uint8_t bytes[64] = {0};
    for (int e = 0; e <= 30; e++) {
        float f = (float)(e - 15);
        uint32_t bits;
        memcpy(&bits, &f, sizeof bits);
        bytes[2 * e] = (uint8_t)(bits >> 16);
        bytes[2 * e + 1] = (uint8_t)(bits >> 24);
    }
    uint8x16x4_t t;
    for (int i = 0; i < 4; i++)
        t.val[i] = vld1q_u8(bytes + 16 * i);
    return t;
}

NW_BODY void nw_decode_btile(const uint8_t *codes, const uint8_t *zeros, uint8x16x4_t table,
                             nw_btile *tile, const unsigned ch)
{
    /* byte j holds a code of row j / 4: its table offset is 2 (q - z + 15) */
    static const uint8_t spread[16] = {0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3};
    uint8_t base4[16] = {(uint8_t)(30u - 2u * zeros[0]), (uint8_t)(30u - 2u * zeros[1]),
                         (uint8_t)(30u - 2u * zeros[2]), (uint8_t)(30u - 2u * zeros[3])};
    const uint8x16_t base = vqtbl1q_u8(vld1q_u8(base4), vld1q_u8(spread));
    const uint8x16_t mask = vdupq_n_u8(15u), one = vdupq_n_u8(1u);

    for (unsigned t = 0; t < ch; t++) {
        uint8x16_t b = vld1q_u8(codes + 16u * t);
        uint8x16_t q[2] = {vandq_u8(b, mask), vshrq_n_u8(b, 4)};
        for (unsigned h = 0; h < 2u; h++) {
            uint8x16_t lo = vaddq_u8(vshlq_n_u8(q[h], 1), base); /* even, in [0, 60] */
            uint8x16_t hi = vorrq_u8(lo, one);
            tile->v[t][h][0] =
                vreinterpretq_bf16_u8(vqtbl4q_u8(table, vzip1q_u8(lo, hi))); /* rows 0, 1 */
            tile->v[t][h][1] =
                vreinterpretq_bf16_u8(vqtbl4q_u8(table, vzip2q_u8(lo, hi))); /* rows 2, 3 */
        }
    }
}

NW_BODY void nw_bf16_g(const nw_job *job, size_t panel_begin, size_t panel_end,
                       const unsigned ch)
{
    const nw_packed *w = job->w;
    const nw_act *a = job->a;
    const size_t k = w->k, groups = w->groups;
    const uint8x16x4_t table = nw_qz_table();
    nw_btile tile;

    for (size_t p = panel_begin; p < panel_end; p++) {
        const size_t n0 = p * NW_NR;
        const unsigned valid = w->n - n0 < NW_NR ? (unsigned)(w->n - n0) : NW_NR;
        for (uint32_t m = 0; m < a->m; m++)
            for (unsigned r = 0; r < valid; r++)
                job->y[m * job->ldy + n0 + r] = 0.0f;

        for (size_t g = 0; g < groups; g++) {
            const size_t pg = p * groups + g;
            nw_decode_btile(w->codes + pg * 16u * ch, w->zeros + pg * NW_NR, table, &tile, ch);
            const float32x4_t s = vld1q_f32(w->scales + pg * NW_NR);

            for (uint32_t m = 0; m < a->m; m++) {
                /* 2 ch k-quads of 8 bf16 {hi x4, lo x4} for this group */
                const bfloat16_t *x = (const bfloat16_t *)(const void *)(a->xb + m * k * 2u) +
                                      g * 8u * ch * 2u;
                /* [hi.r0, hi.r1, lo.r0, lo.r1] (and r2, r3); two sets for ILP */
                float32x4_t acc[2][2];
                for (unsigned h = 0; h < 2u; h++) {
                    acc[h][0] = vdupq_n_f32(0.0f);
                    acc[h][1] = vdupq_n_f32(0.0f);
                }
                for (unsigned t = 0; t < ch; t++) {
                    const bfloat16x8_t x0 = vld1q_bf16(x + 16u * t);
                    const bfloat16x8_t x1 = vld1q_bf16(x + 16u * t + 8u);
                    acc[0][0] = vbfmmlaq_f32(acc[0][0], x0, tile.v[t][0][0]);
                    acc[0][1] = vbfmmlaq_f32(acc[0][1], x0, tile.v[t][0][1]);
                    acc[1][0] = vbfmmlaq_f32(acc[1][0], x1, tile.v[t][1][0]);
                    acc[1][1] = vbfmmlaq_f32(acc[1][1], x1, tile.v[t][1][1]);
                }
                float32x4_t a01 = vaddq_f32(acc[0][0], acc[1][0]);
                float32x4_t a23 = vaddq_f32(acc[0][1], acc[1][1]);
                /* hi row + lo row: sum (q - z) x16 for rows 0..3 */
                const float32x4_t dot =
                    vcombine_f32(vadd_f32(vget_low_f32(a01), vget_high_f32(a01)),
                                 vadd_f32(vget_low_f32(a23), vget_high_f32(a23)));
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

NW_KERNEL_BY_GROUP(nw_kern_bf16, nw_bf16_g)
