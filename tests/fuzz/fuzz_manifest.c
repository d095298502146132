/*
 * tests/fuzz/fuzz_manifest.c — fuzz target: the manifest parser
 * (er_manifest_load, core/discover/manifest.c), the file every backend ships and the
 * core reads before it loads anything.
 *
 * The input is written as <scratch>/manifest.yaml and loaded; on success the
 * manifest is freed, on failure the diagnostics are formatted as the CLI
 * shows them. A relative `library` resolves against the scratch folder;
 * nothing is opened or loaded (that is the gate's and the loader's job).
 */
#define _GNU_SOURCE
#include "common/internal.h"

#include "fuzz_util.h"
#include "discover/manifest.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[4200], msg[1024];
    fz_write(fz_path(path, sizeof path, "manifest.yaml"), data, size);
    er_diags d = {0};
    er_manifest m;
    if (er_manifest_load(path, &m, &d) == EDGERT_OK)
        er_manifest_free(&m);
    er_diag_last_error(&d, 0, msg, sizeof msg);
    er_diags_free(&d);
    return 0;
}
