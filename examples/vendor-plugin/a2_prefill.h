/*
 * examples/vendor-plugin/a2_prefill.h — the prefill kernel (m > 4), written
 * once and instantiated by each kernel file for its instruction:
 *   a2_kern_avx2.c:  acc += vpmaddwd(w, x)          (AVX2)
 *   a2_kern_vnni.c:  vpdpwssd acc, w, x             (AVX-VNNI)
 * The including file defines, before including it:
 *   A2P_FN(name)       the path's prefix for this file's functions
 *   A2P_RB             rows of the register tile (4..6; its other side is
 *                      the two halves of a panel, 16 columns)
 *   A2P_DOT(acc, w, x) acc += the int16 pair dot products of w and x
 *
 * Per panel (one parallel_for item), block of up to 64 rows and block g of
 * 128 inputs: the codes are expanded into int16 pairs (a2_expand_pairs,
 * 4 KiB, in L1), then every tile of A2P_RB rows runs the block's 64 pair
 * steps, each one ymm load per half, one broadcast per row and A2P_RB x 2
 * dot products into int32 accumulators (exact: |sum q a| <= 128 * 15 *
 * 16384 < 2^25), stored at each of the block's S weight groups' edges.
 * The tile is added to the rows' fp32 sums once per block with the groups'
 * scales and zero-point corrections,
 *   sum += 2^-sh * sum_s (s_s acc_s) - sum_s (s z)_s (2^-sh sum a)_s,
 * and the sums are stored into y once, after the last block. (With one
 * call and one combination per block whatever S, groups of 64 and 32 cost
 * 1.06x and 1.17x group 128's time, one thread, m = 512, n = k = 2048, on
 * a Zen 3; cut into one call and one flush per group they cost 1.30x and
 * 1.56x.)
 */
#define A2P_PB 2u /* halves of a panel */

#ifndef A2P_FN
#error "define A2P_FN, A2P_RB and A2P_DOT before including a2_prefill.h"
#endif

/* The hot loop on its own, in the shape GCC 12 register-allocates cleanly
 * (the accumulators stay in registers; inlined into the flush code below
 * they were spilled): out[(s * R + r) * P + p] = the sum over weight group s
 * of the block (S of them, 64 / S pairs each) of codes(half p) . a(row r).
 * Rows are `rs` bytes apart. One call per tile and block whatever S: the
 * accumulators are stored and cleared at each group's edge. */
A2_INLINE void A2P_FN(kern)(const int16_t *wexp, const int8_t *xa, size_t rs, unsigned S,
                            const unsigned R, const unsigned P, __m256i *out)
{
    const unsigned np = A2_GROUP / 2u / S;
    for (unsigned s = 0; s < S; s++) {
    __m256i acc[A2P_RB][A2P_PB];
    A2_UNROLL
    for (unsigned r = 0; r < R; r++)
        A2_UNROLL
        for (unsigned p = 0; p < P; p++)
            acc[r][p] = _mm256_setzero_si256();
    for (unsigned pr = s * np; pr < (s + 1u) * np; pr++) {
        __m256i wv[A2P_PB];
        A2_UNROLL
        for (unsigned p = 0; p < P; p++)
            wv[p] = _mm256_load_si256((const __m256i *)(const void *)(wexp +
                                                                       ((size_t)pr * P + p) * 16u));
        A2_UNROLL
        for (unsigned r = 0; r < R; r++) {
            __m256i xb = a2_bcast(xa + r * rs + 4u * pr);
            A2_UNROLL
            for (unsigned p = 0; p < P; p++)
                A2P_DOT(acc[r][p], wv[p], xb);
        }
    }
    A2_UNROLL
    for (unsigned r = 0; r < R; r++)
        A2_UNROLL
        for (unsigned p = 0; p < P; p++)
            _mm256_store_si256(&out[(s * R + r) * P + p], acc[r][p]);
    }
}

/* One noinline instance per tile shape (R rows, P halves), in a table. */
#define A2P_KERN_FN(R, P)                                                                     \
    static __attribute__((noinline)) void A2P_FN(kern_##R##_##P)(                             \
        const int16_t *wexp, const int8_t *xa, size_t rs, unsigned S, __m256i *out)           \
    {                                                                                         \
        A2P_FN(kern)(wexp, xa, rs, S, R, P, out);                                             \
    }
#define A2P_KERN_ROW(R) A2P_KERN_FN(R, 1) A2P_KERN_FN(R, 2)
#define A2P_KERN_REF(R) {A2P_FN(kern_##R##_1), A2P_FN(kern_##R##_2)}
A2P_KERN_ROW(1) A2P_KERN_ROW(2) A2P_KERN_ROW(3) A2P_KERN_ROW(4)
#if A2P_RB >= 5
A2P_KERN_ROW(5)
#endif
#if A2P_RB >= 6
A2P_KERN_ROW(6)
#endif

typedef void (*A2P_FN(kern_fn))(const int16_t *, const int8_t *, size_t, unsigned, __m256i *);
static const A2P_FN(kern_fn) A2P_FN(kerns)[A2P_RB][A2P_PB] = {
    A2P_KERN_REF(1), A2P_KERN_REF(2), A2P_KERN_REF(3), A2P_KERN_REF(4),
#if A2P_RB >= 5
    A2P_KERN_REF(5),
#endif
#if A2P_RB >= 6
    A2P_KERN_REF(6),
#endif
};
#undef A2P_KERN_ROW
#undef A2P_KERN_REF
#undef A2P_KERN_FN

/* Epilogue data of a block's weight groups (S <= 4) for the halves of a
 * panel: scale and s * z. */
typedef struct A2P_FN(meta) {
    __m256 sc[A2_GROUP / A2_MIN_GROUP][A2P_PB], sz[A2_GROUP / A2_MIN_GROUP][A2P_PB];
} A2P_FN(meta);

/* Rows per block of a panel: their fp32 sums (yb, 4 KiB) stay in L1 over
 * all groups and reach y once. (Flushed into y per group, a tall y of a
 * wide matrix — lm_head, 512 KiB per row — put every row of a tile in the
 * same cache set.) The codes are expanded again per block: 64 rows of work
 * per expansion. */
#define A2P_ROWS 64u

/* rows [r0, r0 + R) x halves [0, P) of block g (every weight group of it)
 * into the block's sums yb (A2_PANEL floats per row): yb = (g == 0 ? 0 :
 * yb) + this block's part. wexp is the block's expansion. Per output
 * vector: t = sum_s fp32(acc_s) sc_s and c = sum_s (s z)_s 2^-sh (sum a)_s
 * over the block's S groups, then t 2^-sh - c (2^-sh, the activations'
 * scale, is one per block: a power of two, so the multiply is exact):
 * per group a conversion and two fused multiply-adds, as few as one group
 * of 128 needs. */
static void A2P_FN(tile)(const a2_job *j, const int16_t *wexp, uint32_t g, size_t r0,
                         unsigned R, unsigned P, const A2P_FN(meta) *md, float *yb)
{
    _Alignas(32) __m256i out[A2_GROUP / A2_MIN_GROUP * A2P_RB * A2P_PB];
    const unsigned S = j->w->sub;
    const int8_t *xa = j->act + r0 * j->act_row_bytes + (size_t)g * A2_ACT_GROUP_BYTES;
    A2P_FN(kerns)[R - 1u][P - 1u](wexp, xa, j->act_row_bytes, S, out);
    for (unsigned r = 0; r < R; r++) {
        size_t gi = (r0 + r) * j->w->groups + g;
        const __m256 f = _mm256_set1_ps(j->gscale[gi]);
        const float *gs = &j->gsum[gi * S];
        for (unsigned h = 0; h < P; h++) {
            float *yp = yb + r * A2_PANEL + h * A2_HALF;
            __m256 t = _mm256_mul_ps(_mm256_cvtepi32_ps(out[r * P + h]), md->sc[0][h]);
            __m256 c = _mm256_mul_ps(md->sz[0][h], _mm256_set1_ps(gs[0]));
            for (unsigned s = 1; s < S; s++) {
                t = _mm256_fmadd_ps(_mm256_cvtepi32_ps(out[(s * R + r) * P + h]), md->sc[s][h],
                                    t);
                c = _mm256_fmadd_ps(md->sz[s][h], _mm256_set1_ps(gs[s]), c);
            }
            __m256 v = _mm256_fmsub_ps(t, f, c);
            if (g != 0u)
                v = _mm256_add_ps(v, _mm256_load_ps(yp));
            _mm256_store_ps(yp, v);
        }
    }
}

/* Rows [r0, r0 + rows) of panel p, every group, into y. */
static void A2P_FN(block)(const a2_job *j, size_t p, size_t r0, size_t rows, int16_t *wexp)
{
    const a2_packed *w = j->w;
    const unsigned P = a2_halves(w, p);
    _Alignas(32) float yb[A2P_ROWS * A2_PANEL];
    A2P_FN(meta) md;
    for (uint32_t g = 0; g < w->groups; g++) {
        const uint8_t *blk = a2_block(w, p, g);
        for (unsigned s = 0; s < w->sub; s++)
            for (unsigned h = 0; h < P; h++)
                a2_meta(a2_block_meta(blk, s, h), &md.sc[s][h], &md.sz[s][h]);
        a2_expand_pairs(w, p, P, g, wexp);
        size_t r = 0;
        for (; r + A2P_RB <= rows; r += A2P_RB)
            A2P_FN(tile)(j, wexp, g, r0 + r, A2P_RB, P, &md, yb + r * A2_PANEL);
        if (r < rows)
            A2P_FN(tile)(j, wexp, g, r0 + r, (unsigned)(rows - r), P, &md, yb + r * A2_PANEL);
    }
    for (unsigned h = 0; h < P; h++) {
        const a2_cols cols = a2_half_cols(w, p, h);
        for (size_t r = 0; r < rows; r++)
            a2_store_y(j->y + (r0 + r) * j->ldy + p * A2_PANEL + h * A2_HALF, cols,
                       _mm256_load_ps(yb + r * A2_PANEL + h * A2_HALF));
    }
}

/* Panel p, every row. */
static void A2P_FN(panel)(const a2_job *j, size_t p, int16_t *wexp)
{
    for (size_t r0 = 0; r0 < j->m; r0 += A2P_ROWS)
        A2P_FN(block)(j, p, r0, j->m - r0 < A2P_ROWS ? j->m - r0 : A2P_ROWS, wexp);
}

/* Panels [begin, end) (an edgert_range_fn). */
static void A2P_FN(prefill_panels)(void *arg, size_t begin, size_t end, unsigned worker)
{
    const a2_job *j = arg;
    (void)worker;
    _Alignas(32) int16_t wexp[A2_GROUP * A2_PANEL]; /* 4 KiB, per chunk */
    for (size_t p = begin; p < end; p++)
        A2P_FN(panel)(j, p, wexp);
}

#undef A2P_PB
