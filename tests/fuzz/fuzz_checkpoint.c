/*
 * tests/fuzz/fuzz_checkpoint.c — fuzz target: checkpoint import
 * (core/weights/checkpoint.c over core/formats/safetensors.c): GPTQ and dense layer lists,
 * the GPTQ settings from the metadata, shapes checked against each other,
 * zero points, scales and g_idx; and packed-file headers (core/weights/packfile.c).
 *
 * The input is written as <scratch>/input.safetensors and opened with
 * edgert_checkpoint_open. Every layer the file declares is then converted
 * (edgert_checkpoint_layer_weights) and read as dense fp32
 * (edgert_checkpoint_layer_dense) when it is small: what the open accepted
 * must be safe to read to the end. The layer sizes are bounded by the input's
 * own size (the reader checked every tensor lies inside the file), except for
 * a dense layer's canonical form, which is capped here.
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "edgert/edgert.h"

#include "fuzz_util.h"

#define FZ_MAX_WEIGHTS (1u << 20)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[4200], err[1024];
    fz_write(fz_path(path, sizeof path, "input.safetensors"), data, size);
    edgert_checkpoint *ck = NULL;
    if (edgert_checkpoint_open(path, &ck, err, sizeof err) != EDGERT_OK)
        return 0;
    for (size_t i = 0; i < edgert_checkpoint_layer_count(ck); i++) {
        const edgert_layer *l = edgert_checkpoint_layer_at(ck, i);
        if (!l || (uint64_t)l->n * l->k > FZ_MAX_WEIGHTS)
            continue;
        edgert_qtensor q;
        if (edgert_checkpoint_layer_weights(ck, i, &q, err, sizeof err) == EDGERT_OK)
            edgert_qtensor_free(&q);
        float *w = malloc((size_t)l->n * l->k * sizeof *w + 1);
        if (!w)
            abort();
        edgert_checkpoint_layer_dense(ck, i, 0, l->n, w, err, sizeof err);
        free(w);
    }
    edgert_checkpoint_close(ck);
    return 0;
}
