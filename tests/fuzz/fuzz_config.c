/*
 * tests/fuzz/fuzz_config.c — fuzz target: a model folder's config.json
 * (rn_config_read, runner/config.c), the first file `edgert run` reads of a
 * user's model and the one that sizes everything after it.
 *
 * The input is written as <scratch>/config.json and read. On success, what
 * the rest of the runner relies on must hold: sizes at least 1 (hidden 2),
 * the query heads a multiple of the KV heads and at most 64 of them per KV
 * head, an even head size, finite positive numbers (eps in (0, 1), rope
 * theta above 1, llama3 rope scaling's four with low < high), the end id
 * below the vocabulary, a known model type; a violation aborts (a finding).
 * On failure the message must be there, terminated.
 */
#define _GNU_SOURCE
#include <math.h>

#include "internal.h" /* the runner's (runner/internal.h) */

#include "fuzz_util.h"

static int positive(double v)
{
    return isfinite(v) && v > 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[4200], err[1024];
    fz_write(fz_path(path, sizeof path, "config.json"), data, size);
    rn_config c;
    memset(err, 0x55, sizeof err);
    edgert_status st = rn_config_read(path, &c, err, sizeof err);
    if (st != EDGERT_OK) {
        if (memchr(err, '\0', sizeof err) == NULL || err[0] == '\0')
            abort();
        return 0;
    }
    static const char *const types[] = {"llama", "mistral", "qwen2", "qwen3"};
    int known = 0;
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        known |= memchr(c.model_type, '\0', sizeof c.model_type) != NULL &&
                 strcmp(c.model_type, types[i]) == 0;
    if (!known || c.layers < 1 || c.hidden < 2 || c.heads < 1 || c.kv_heads < 1 ||
        c.heads % c.kv_heads != 0 || c.heads / c.kv_heads > RN_ATTN_MAX_GROUP ||
        c.head_dim < 2 || c.head_dim % 2 != 0 || c.mlp < 1 || c.vocab < 1 || c.max_pos < 1)
        abort();
    if (!(positive(c.eps) && c.eps < 1 && isfinite(c.rope_theta) && c.rope_theta > 1))
        abort();
    if (c.rope_llama3 && !(positive(c.rs_factor) && positive(c.rs_low) && positive(c.rs_high) &&
                           positive(c.rs_orig) && c.rs_high > c.rs_low))
        abort();
    if (c.eos < -1 || (c.eos >= 0 && (uint32_t)c.eos >= c.vocab))
        abort();
    return 0;
}
