/*
 * tests/fuzz/fuzz_safetensors.c — fuzz target: the safetensors reader
 * (core/formats/safetensors.c), which reads a user's checkpoints (edgert_checkpoint,
 * `edgert quantize`, `pack`) and npu-export's weights and calibration files.
 *
 * The target compiles safetensors.c itself, as npu-export does. The input is written as
 * <scratch>/input.safetensors and opened (header length, JSON, dtypes,
 * shapes, offsets, overlaps); every float tensor is then read as fp32 (the
 * reader checked that its bytes are inside the file, so the input bounds
 * them), and names are looked up as the export pairs projections.
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "formats/safetensors.h"

#include "fuzz_util.h"

static void read_tensors(st_file *sf)
{
    char err[512];
    for (size_t i = 0; i < sf->n; i++) {
        const st_tensor *t = &sf->t[i];
        if (st_find(sf, t->name) == NULL)
            abort(); /* a name the reader accepted must be found */
        if (!st_is_float(t->dtype))
            continue;
        uint64_t n = st_numel(t);
        float *out = malloc(n ? (size_t)n * sizeof *out : 1);
        if (!out)
            abort();
        st_read_f32(sf, t, 0, n, out, err, sizeof err);
        st_meta_get(sf, "format");
        free(out);
    }
    st_find(sf, "lm_head.weight");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[4200], err[512];
    fz_write(fz_path(path, sizeof path, "input.safetensors"), data, size);
    st_file sf;
    if (st_open(&sf, path, err, sizeof err) == 0) {
        read_tensors(&sf);
        st_close(&sf);
    }
    return 0;
}
