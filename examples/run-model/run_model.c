/*
 * examples/run-model/run_model.c — a whole model through the model runner
 * (edgert/runner.h): open a handle, open a Hugging Face model folder on the
 * backend the selector picks for the priority, prefill the prompt, decode
 * greedily, print the token ids. What `edgert run` does, in 80 lines.
 *
 *   run-model MODEL_DIR [speed|fidelity|fp32] [ID ...]
 *
 * fp32 runs the dense reference instead of a backend. Build against an
 * installed edgert:
 *   cc run_model.c $(pkg-config --cflags --libs edgert-runner) -o run-model
 * Exit codes: 0 ok, 1 a failure, 3 no backend can run the model here.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "edgert/runner.h"

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: run-model MODEL_DIR [speed|fidelity|fp32] [ID ...]\n");
        return 1;
    }
    const char *mode = argc > 2 ? argv[2] : "speed";
    int32_t prompt[64] = {1, 2, 3, 4};
    uint32_t n = 4;
    if (argc > 3)
        for (n = 0; n < 64 && (int)n + 3 < argc; n++)
            prompt[n] = atoi(argv[n + 3]);
    char err[4096];
    edgert_ctx *ctx = NULL;
    edgert_options o = {.struct_size = sizeof o};
    if (edgert_open(&o, &ctx, err, sizeof err) != EDGERT_OK) {
        fprintf(stderr, "run-model: %s\n", err);
        return 1;
    }
    edgert_model_options mo = {.struct_size = sizeof mo};
    mo.priority = strcmp(mode, "fidelity") == 0 ? EDGERT_PRIORITY_FIDELITY : EDGERT_PRIORITY_SPEED;
    mo.backend = strcmp(mode, "fp32") == 0 ? "fp32" : NULL;
    mo.context = 256;
    edgert_model *m = NULL;
    edgert_status st = edgert_model_open(ctx, argv[1], &mo, &m, err, sizeof err);
    if (st != EDGERT_OK) {
        fprintf(stderr, "run-model: %s\n", err);
        edgert_close(ctx);
        return st == EDGERT_E_NOT_ELIGIBLE || st == EDGERT_E_NOT_FOUND ? 3 : 1;
    }
    const edgert_model_info *info = edgert_model_get_info(m);
    float *logits = malloc(sizeof(float) * info->vocab);
    printf("%s on %s:", argv[1], info->backend);
    st = logits ? edgert_model_forward(m, prompt, n, logits, 0, err, sizeof err) : EDGERT_E_NOMEM;
    for (int t = 0; st == EDGERT_OK && t < 8; t++) {
        int32_t best = 0;
        for (uint32_t v = 1; v < info->vocab; v++)
            best = logits[v] > logits[best] ? (int32_t)v : best;
        printf(" %d", best);
        st = edgert_model_forward(m, &best, 1, logits, 0, err, sizeof err);
    }
    printf("\n");
    if (st != EDGERT_OK)
        fprintf(stderr, "run-model: %s\n", st == EDGERT_E_NOMEM ? "out of memory" : err);
    free(logits);
    edgert_model_close(m);
    edgert_close(ctx);
    return st == EDGERT_OK ? 0 : 1;
}
