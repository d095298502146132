/*
 * examples/integrate/integrate.c — the smallest honest edgert application.
 *
 * Open a handle (probe this device, find and gate the backends), select one
 * for a priority, pack a weight matrix into its layout, run one GEMM, and
 * check the result against a plain fp32 loop over the same quantized weights.
 *
 *   integrate [speed|fidelity] [CHECKPOINT]
 *
 * With CHECKPOINT (a GPTQ or dense safetensors file, e.g. from `edgert
 * quantize`), the weights are its first linear layer instead: opened and
 * validated by edgert_checkpoint_open, packed for the selected backend by
 * edgert_checkpoint_layer_packed, checked against the layer's own dense (or
 * dequantized) values. A file from `edgert pack` holds one backend's packed
 * bytes only, which edgert_checkpoint_layer_packed maps without repacking;
 * this check needs values a reference can be computed from, so it refuses
 * such a file (an application would map it and run its GEMMs).
 *
 * Build against an installed edgert:
 *   cc integrate.c $(pkg-config --cflags --libs edgert) -lm -o integrate
 * (installed under a prefix the dynamic loader does not search, run it with
 * LD_LIBRARY_PATH=<prefix>/lib, or link with -Wl,-rpath,<prefix>/lib)
 * or with CMake: find_package(edgert) and link edgert::edgert (CMakeLists.txt
 * here). EDGERT_PRIORITY and EDGERT_BACKEND override the choice made here:
 * an operator swaps the kernel of this program without rebuilding it.
 * Exit codes: 0 ok, 1 a failure, 3 no backend eligible.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "edgert/edgert.h"

enum { N = 257, K = 512, M = 3, GROUP = 128 };

/* A deterministic, LLM-like dense matrix and activations. */
static void fill(float *w, float *x)
{
    unsigned s = 12345u;
    for (size_t i = 0; i < (size_t)N * K; i++) {
        s = s * 1664525u + 1013904223u;
        w[i] = 0.02f * ((float)(s >> 8) / 16777216.0f - 0.5f);
    }
    for (size_t i = 0; i < (size_t)M * K; i++) {
        s = s * 1664525u + 1013904223u;
        x[i] = (float)(s >> 8) / 8388608.0f - 1.0f;
    }
}

/*
 * y [m][n] from the backend against y_ref = x . wq^T in double, element by
 * element, over the error the backend's arithmetic allows; returns the
 * largest |y - y_ref| / allowed (<= 1: right).
 *   16-bit and wider activations (bf16: 2^-8 relative rounding): 1e-2 of
 *     the largest |y_ref|, far above that and far below a wrong result.
 *   8-bit activations (W4A8: s = max|x| / 127 per group of inputs or per
 *     token, x rounded to the nearest s q; the token's s bounds a group's):
 *     each x_k moves by at most s / 2, so y by at most
 *     (s / 2) sum_k |w_k|; plus 2^-10 sum_k |x_k w_k| for the fp16 scales
 *     such backends store (2^-11 each) and the fp32 sums.
 * With `dense` set, wq are dense weights the backend got quantized to int4
 * by round to nearest (a dense checkpoint): each weight then moves by at
 * most max|w| / 7 of its group of 128 (symmetric: s / 2 with s = max|w| / 7;
 * asymmetric: s = (max - min) / 15 <= 2 max|w| / 15, plus the zero point's
 * rounding, at most s), so y by sum_k |x_k| max|w|_group / 7 more.
 */
static double worst_ratio(const float *y, const float *x, const float *wq, size_t m, size_t n,
                          size_t k, int activation_bits, int dense)
{
    double largest = 0.0, worst = 0.0;
    for (size_t i = 0; i < m * n; i++) {
        double ref = 0.0;
        for (size_t c = 0; c < k; c++)
            ref += (double)x[(i / n) * k + c] * (double)wq[(i % n) * k + c];
        largest = fmax(largest, fabs(ref));
    }
    for (size_t i = 0; i < m; i++) {
        double xmax = 0.0;
        for (size_t c = 0; c < k; c++)
            xmax = fmax(xmax, fabs((double)x[i * k + c]));
        for (size_t r = 0; r < n; r++) {
            double ref = 0.0, sw = 0.0, sxw = 0.0, int4 = 0.0;
            for (size_t g = 0; g < k; g += GROUP) {
                double gmax = 0.0, sx = 0.0;
                for (size_t c = g; c < k && c < g + GROUP; c++) {
                    double xv = x[i * k + c], wv = wq[r * k + c];
                    ref += xv * wv;
                    sw += fabs(wv);
                    sxw += fabs(xv * wv);
                    gmax = fmax(gmax, fabs(wv));
                    sx += fabs(xv);
                }
                int4 += sx * gmax / 7.0;
            }
            double allowed = activation_bits == 8 ? xmax / 254.0 * sw + ldexp(sxw, -10)
                                                  : 1e-2 * largest;
            if (dense)
                allowed += int4;
            worst = fmax(worst, fabs((double)y[i * n + r] - ref) / (allowed + 1e-30));
        }
    }
    return worst;
}

/* Layer 0 of a checkpoint through backend be, against its dense values. */
static int run_checkpoint(edgert_backend *be, int activation_bits, const char *path, char *err,
                          size_t len)
{
    edgert_checkpoint *ck = NULL;
    edgert_packed *p = NULL;
    float *w = NULL, *y = NULL, *x = NULL;
    int rc = 1;
    if (edgert_checkpoint_open(path, &ck, err, len) != EDGERT_OK)
        return 1;
    const edgert_layer *l = edgert_checkpoint_layer_at(ck, 0);
    printf("%s: %s checkpoint, %zu linear layers; layer 0 %s [n=%u k=%u] %s\n", path,
           edgert_checkpoint_kind(ck), edgert_checkpoint_layer_count(ck), l->name, l->n, l->k,
           l->format);
    w = malloc(sizeof(float) * l->n * l->k);
    y = malloc(sizeof(float) * M * l->n);
    x = malloc(sizeof(float) * M * l->k);
    if (!w || !y || !x)
        goto out;
    for (size_t i = 0; i < (size_t)M * l->k; i++)
        x[i] = (float)((i * 2654435761u) % 1000u) / 500.0f - 1.0f;
    if (edgert_checkpoint_layer_packed(ck, 0, be, &p, err, len) != EDGERT_OK ||
        edgert_checkpoint_layer_dense(ck, 0, 0, l->n, w, err, len) != EDGERT_OK)
        goto out;
    edgert_gemm_args a = {.struct_size = sizeof a, .m = M, .x = x, .ldx = l->k, .y = y,
                          .ldy = l->n};
    if (edgert_gemm(be, p, &a, err, len) != EDGERT_OK)
        goto out;
    /* a dense file is quantized on the fly, to int4 (worst_ratio's bound
     * includes it); a GPTQ file's dequantized values differ only by the
     * backend's arithmetic */
    double worst = worst_ratio(y, x, w, M, l->n, l->k, activation_bits, l->symmetric < 0);
    printf("layer 0: max error / allowed = %.2e: %s\n", worst, worst <= 1.0 ? "ok" : "WRONG");
    rc = worst <= 1.0 ? 0 : 1;
out:
    edgert_packed_free(p);
    edgert_checkpoint_close(ck);
    free(w), free(y), free(x);
    return rc;
}

int main(int argc, char **argv)
{
    char err[1024] = "";
    int rc = 1;
    edgert_priority prio = EDGERT_PRIORITY_SPEED;
    if (argc > 3 || (argc > 1 && edgert_priority_parse(argv[1], &prio) != 0)) {
        fprintf(stderr, "usage: integrate [speed|fidelity] [CHECKPOINT]\n");
        return 2;
    }
    edgert_ctx *ctx = NULL;
    edgert_selection *sel = NULL;
    edgert_backend *be = NULL;
    edgert_packed *packed = NULL;
    edgert_qtensor q = {0};
    float *w = malloc(sizeof(float) * N * K), *wq = malloc(sizeof(float) * N * K);
    float x[M * K], y[M * N];
    if (!w || !wq)
        goto out;
    fill(w, x);

    edgert_options o = {.struct_size = sizeof o};
    /* the selection is for these weights: a backend whose layout cannot take
     * them (asymmetric zero points for a W4A8 one, a file packed for another
     * backend) fails the LAYOUT_MISMATCH gate instead of failing at pack */
    o.weights = argc > 2 ? argv[2] : NULL;
    if (edgert_open(&o, &ctx, err, sizeof err) != EDGERT_OK)
        goto fail;
    /* what opening found wrong (a skipped manifest, a misspelt EDGERT_DISABLE
     * name) is kept, not logged: show the warnings */
    for (size_t i = 0; i < edgert_diag_count(ctx); i++) {
        const edgert_diag *d = edgert_diag_at(ctx, i);
        if (d->level > EDGERT_LOG_WARN)
            continue;
        if (d->file && d->line)
            fprintf(stderr, "integrate: %s:%u:%u: %s\n", d->file, d->line, d->column, d->message);
        else
            fprintf(stderr, "integrate: %s%s%s\n", d->file ? d->file : "", d->file ? ": " : "",
                    d->message);
    }
    edgert_status st = edgert_select(ctx, prio, NULL, &sel, err, sizeof err);
    if (st != EDGERT_OK) {
        rc = st == EDGERT_E_NOT_ELIGIBLE ? 3 : 1;
        goto fail;
    }
    const edgert_candidate *chosen = edgert_selection_selected(sel);
    printf("edgert %s: selected %s for priority %s\n", edgert_version(), chosen->name,
           edgert_priority_name(edgert_selection_priority(sel)));
    if (!chosen->runs_in_process) {
        printf("%s is not an in-process backend (it exports a graph); nothing to run here\n",
               chosen->name);
        rc = 0;
        goto out;
    }
    if (edgert_backend_open(ctx, chosen->name, NULL, &be, err, sizeof err) != EDGERT_OK)
        goto fail;
    printf("path: %s\n", edgert_backend_describe(be));
    if (argc > 2) {
        rc = run_checkpoint(be, chosen->layout.activation_bits, argv[2], err, sizeof err);
        if (rc != 0 && err[0])
            goto fail;
        goto out;
    }

    /* Canonical int4 weights (scale and zero point per group of 128), in the
     * backend's own layout after edgert_pack. */
    if (edgert_quantize_rtn(w, N, K, GROUP, chosen->layout.symmetric, &q) != EDGERT_OK) {
        snprintf(err, sizeof err, "cannot quantize the weights");
        goto fail;
    }
    q.view.name = "example.proj";
    if (edgert_pack(be, &q.view, &packed, err, sizeof err) != EDGERT_OK)
        goto fail;
    edgert_gemm_args a = {.struct_size = sizeof a, .m = M, .x = x, .ldx = K, .y = y, .ldy = N};
    if (edgert_gemm(be, packed, &a, err, sizeof err) != EDGERT_OK)
        goto fail;

    /* The same quantized weights, dequantized, in a plain loop, within what
     * the backend's activation arithmetic allows (worst_ratio). */
    edgert_dequantize(&q.view, wq);
    double worst = worst_ratio(y, x, wq, M, N, K, chosen->layout.activation_bits, 0);
    printf("packed %zu bytes; y[0][0] = %.6f; max error / allowed = %.2e: %s\n",
           edgert_packed_bytes(packed), y[0], worst, worst <= 1.0 ? "ok" : "WRONG");
    rc = worst <= 1.0 ? 0 : 1;
    goto out;
fail:
    fprintf(stderr, "integrate: %s\n", err);
out:
    edgert_packed_free(packed);
    edgert_backend_close(be);
    edgert_qtensor_free(&q);
    edgert_selection_free(sel);
    edgert_close(ctx);
    free(w);
    free(wq);
    return rc;
}
