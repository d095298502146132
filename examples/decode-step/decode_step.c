/*
 * examples/decode-step/decode_step.c — decode through edgert_step: the GEMMs
 * of a token's step run in order on the selected backend, and the
 * application's own work runs in callbacks between them.
 *
 * The "model" is LAYERS feed-forward blocks with a residual stream h:
 *     a = silu(h * Wup^T);  h = h + a * Wdown^T
 * edgert computes the two GEMMs of each block; the callback after an up
 * projection applies SiLU (writing the down projection's input), the one
 * after a down projection adds the residual (writing the next block's
 * input). A real model's norms and attention go in the same places. The
 * step is described once (the ops point at the buffers) and run for every
 * token; edgert reads the next GEMM's weights ahead while the current one
 * finishes, which is what the step buys over one edgert_gemm per GEMM.
 *
 * The check: the same tokens through edgert_gemm one call at a time give
 * the same numbers, bit for bit.
 *
 *   decode-step [speed|fidelity]
 *
 * Build against an installed edgert:
 *   cc decode_step.c $(pkg-config --cflags --libs edgert) -lm -o decode-step
 * (installed under a prefix the dynamic loader does not search, run it with
 * LD_LIBRARY_PATH=<prefix>/lib, or link with -Wl,-rpath,<prefix>/lib)
 * Exit codes: 0 ok, 1 a failure, 3 no backend eligible.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "edgert/edgert.h"

enum { D = 512, F = 1536, LAYERS = 4, OPS = 2 * LAYERS, TOKENS = 8, GROUP = 128 };

typedef struct model {
    edgert_backend *be;
    edgert_packed *w[OPS];  /* up0, down0, up1, down1, ... */
    float h[D], a[F], y[F]; /* residual stream, SiLU output, GEMM output */
} model;

/* After op i: SiLU after an up projection, the residual after a down. */
static edgert_status between(void *user, size_t i)
{
    model *m = user;
    if (i % 2 == 0)
        for (int j = 0; j < F; j++)
            m->a[j] = m->y[j] / (1.0f + expf(-m->y[j]));
    else
        for (int j = 0; j < D; j++)
            m->h[j] += m->y[j];
    return EDGERT_OK;
}

static void first_token(model *m, int t)
{
    for (int j = 0; j < D; j++)
        m->h[j] = sinf(0.05f * (float)(j + 7 * t));
}

/* Deterministic weights, quantized (int4, group 128, as the backend's
 * layout wants them) and packed by the backend. */
static edgert_status load(model *m, int symmetric, char *err, size_t len)
{
    float *w = malloc(sizeof(float) * D * F);
    if (!w) {
        snprintf(err, len, "out of memory");
        return EDGERT_E_NOMEM;
    }
    edgert_status st = EDGERT_OK;
    for (int i = 0; st == EDGERT_OK && i < OPS; i++) {
        uint32_t n = i % 2 ? D : F, k = i % 2 ? F : D;
        for (uint32_t r = 0; r < n * k; r++)
            w[r] = 0.04f * sinf(0.013f * (float)r + (float)i);
        edgert_qtensor q;
        st = edgert_quantize_rtn(w, n, k, GROUP, symmetric, &q);
        if (st != EDGERT_OK) {
            snprintf(err, len, "cannot quantize the weights");
            break;
        }
        st = edgert_pack(m->be, &q.view, &m->w[i], err, len);
        edgert_qtensor_free(&q);
    }
    free(w);
    return st;
}

int main(int argc, char **argv)
{
    char err[1024] = "";
    int rc = 1;
    edgert_priority prio = EDGERT_PRIORITY_SPEED;
    if (argc > 2 || (argc > 1 && edgert_priority_parse(argv[1], &prio) != 0)) {
        fprintf(stderr, "usage: decode-step [speed|fidelity]\n");
        return 2;
    }
    static model m;
    edgert_ctx *ctx = NULL;
    edgert_selection *sel = NULL;
    edgert_options o = {.struct_size = sizeof o};
    if (edgert_open(&o, &ctx, err, sizeof err) != EDGERT_OK)
        goto fail;
    edgert_status st = edgert_select(ctx, prio, NULL, &sel, err, sizeof err);
    if (st != EDGERT_OK) {
        rc = st == EDGERT_E_NOT_ELIGIBLE ? 3 : 1;
        goto fail;
    }
    const edgert_candidate *chosen = edgert_selection_selected(sel);
    if (!chosen->runs_in_process) {
        printf("%s exports a graph; nothing to run here\n", chosen->name);
        rc = 0;
        goto out;
    }
    if (edgert_backend_open(ctx, chosen->name, NULL, &m.be, err, sizeof err) != EDGERT_OK ||
        load(&m, chosen->layout.symmetric, err, sizeof err) != EDGERT_OK)
        goto fail;
    printf("%s: %s\n", chosen->name, edgert_backend_describe(m.be));

    /* The step, described once: op i reads h (up) or a (down) into y. */
    edgert_gemm_args up = {.struct_size = sizeof up, .m = 1, .x = m.h, .ldx = D, .y = m.y,
                           .ldy = F};
    edgert_gemm_args down = {.struct_size = sizeof down, .m = 1, .x = m.a, .ldx = F, .y = m.y,
                             .ldy = D};
    edgert_step_op ops[OPS];
    for (int i = 0; i < OPS; i++)
        ops[i] = (edgert_step_op){.struct_size = sizeof ops[i], .weights = m.w[i],
                                  .args = i % 2 ? &down : &up, .after = between, .user = &m};

    float out[TOKENS][D];
    for (int t = 0; t < TOKENS; t++) { /* one step per token */
        first_token(&m, t);
        if (edgert_step(m.be, ops, OPS, err, sizeof err) != EDGERT_OK)
            goto fail;
        memcpy(out[t], m.h, sizeof m.h);
    }
    /* The same tokens, one edgert_gemm per GEMM. */
    int same = 1;
    for (int t = 0; t < TOKENS; t++) {
        first_token(&m, t);
        for (int i = 0; i < OPS; i++) {
            if (edgert_gemm(m.be, m.w[i], i % 2 ? &down : &up, err, sizeof err) != EDGERT_OK)
                goto fail;
            between(&m, (size_t)i);
        }
        same &= memcmp(out[t], m.h, sizeof m.h) == 0;
    }
    printf("%d tokens, %d GEMMs per step with a callback after each; h[0] = %.6f; the same as "
           "one edgert_gemm per GEMM: %s\n",
           TOKENS, OPS, out[TOKENS - 1][0], same ? "ok" : "DIFFERENT");
    rc = same ? 0 : 1;
    goto out;
fail:
    fprintf(stderr, "decode-step: %s\n", err);
out:
    for (int i = 0; i < OPS; i++)
        edgert_packed_free(m.w[i]);
    edgert_backend_close(m.be);
    edgert_selection_free(sel);
    edgert_close(ctx);
    return rc;
}
