/*
 * examples/integrate/integrate.c — the smallest honest edgert application.
 *
 * Open a handle (probe this device, find and gate the backends), select one
 * for a priority, pack a weight matrix into its layout, run one GEMM, and
 * check the result against a plain fp32 loop over the same quantized weights.
 *
 *   integrate [speed|fidelity]
 *
 * Build against an installed edgert:
 *   cc integrate.c $(pkg-config --cflags --libs edgert) -o integrate
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

/* The largest |y - y_ref| over the largest |y_ref|: a relative error. */
static double compare(const float *y, const float *x, const float *wq)
{
    double worst = 0.0, scale = 0.0;
    for (size_t i = 0; i < M; i++)
        for (size_t r = 0; r < N; r++) {
            double ref = 0.0;
            for (size_t c = 0; c < K; c++)
                ref += (double)x[i * K + c] * (double)wq[r * K + c];
            worst = fmax(worst, fabs((double)y[i * N + r] - ref));
            scale = fmax(scale, fabs(ref));
        }
    return scale > 0.0 ? worst / scale : worst;
}

int main(int argc, char **argv)
{
    char err[1024] = "";
    int rc = 1;
    edgert_priority prio = EDGERT_PRIORITY_SPEED;
    if (argc > 1 && edgert_priority_parse(argv[1], &prio) != 0) {
        fprintf(stderr, "usage: integrate [speed|fidelity]\n");
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
    if (edgert_open(&o, &ctx, err, sizeof err) != EDGERT_OK)
        goto fail;
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

    /* The same quantized weights, dequantized, in a plain loop. A 16-bit
     * activation backend differs by its activation rounding (bf16: 2^-8
     * relative); 1e-2 of the largest output is far above that and far
     * below a wrong result. */
    edgert_dequantize(&q.view, wq);
    double rel = compare(y, x, wq);
    printf("packed %zu bytes; y[0][0] = %.6f; max error / max |y| = %.2e: %s\n",
           edgert_packed_bytes(packed), y[0], rel, rel < 1e-2 ? "ok" : "WRONG");
    rc = rel < 1e-2 ? 0 : 1;
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
