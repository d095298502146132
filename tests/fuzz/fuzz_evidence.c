/*
 * tests/fuzz/fuzz_evidence.c — fuzz target: the evidence file
 * (core/evidence/evidence.c), the per-user cache of figures measured on this device.
 *
 * One handle is opened per process (live, no manifests, an empty sysroot,
 * the environment ignored, evidence_file in the scratch folder); its device
 * fingerprint is then fixed to FZ_DEVICE so inputs can match it. Per input,
 * one eligible candidate FZ_BACKEND is added whose library is a small file
 * of known content (XXH3 FZ_LIBRARY_XXH3), and:
 *   1. the reader: the input as the evidence file, er_evidence_apply (what
 *      edgert_open does): shape checks, every entry matched against the
 *      candidate, measured figures and the FAILED_VERIFY gate;
 *   2. the writer: edgert_evidence_store of one new entry, which reads the
 *      input as the old file and copies its other entries through;
 *   3. the round trip: what the writer wrote must load again. A cache the
 *      writer makes and the reader refuses is lost whole on the next run
 *      (every measurement, and every FAILED_VERIFY gate), so that aborts.
 * The candidate is freed after each input; nothing outlives it but the
 * handle. tests/fuzz/make_seeds.py writes seeds with FZ_DEVICE and the hash.
 */
#define _GNU_SOURCE
#include <math.h>

#include "context/context.h"

#include "fuzz_util.h"
#include "formats/yamldoc.h"
#include "gate/gate.h"
#include "evidence/evidence.h"

#define FZ_DEVICE "0123456789abcdef"
#define FZ_BACKEND "fuzz-w4a16"
#define FZ_LIBRARY_TEXT "edgert fuzz: the plugin file the evidence is keyed by\n"
#define FZ_LIBRARY_XXH3 0x0ca5b0b748757192ull

static edgert_ctx *fz_ctx;

static void quiet(void *user, edgert_log_level level, const char *msg)
{
    (void)user;
    (void)level;
    (void)msg;
}

static void close_handle(void)
{
    edgert_close(fz_ctx);
    fz_ctx = NULL;
}

/* The handle and the library file, once per process (closed at exit). */
static edgert_ctx *handle(void)
{
    if (fz_ctx)
        return fz_ctx;
    char lib[4200], ev[4200], none[4200], err[512];
    fz_write(fz_path(lib, sizeof lib, "libfuzz.so"), (const uint8_t *)FZ_LIBRARY_TEXT,
             strlen(FZ_LIBRARY_TEXT));
    uint64_t h = 0;
    if (er_file_xxh3(lib, &h) != 0 || h != FZ_LIBRARY_XXH3) {
        fprintf(stderr, "fuzz_evidence: XXH3 of the library file is %016llx, expected %016llx\n",
                (unsigned long long)h, FZ_LIBRARY_XXH3);
        abort();
    }
    fz_mkdirs("none");
    const char *paths[1] = {fz_path(none, sizeof none, "none")};
    edgert_options o = {.struct_size = sizeof o};
    o.sysroot = none;
    o.manifest_paths = paths;
    o.manifest_path_count = 1;
    o.ignore_env = 1;
    o.no_env_selection = 1;
    o.evidence_file = fz_path(ev, sizeof ev, "evidence.json");
    o.threads = 1;
    o.log = quiet;
    o.log_level = EDGERT_LOG_ERROR;
    if (edgert_open(&o, &fz_ctx, err, sizeof err) != EDGERT_OK) {
        fprintf(stderr, "fuzz_evidence: edgert_open: %s\n", err);
        abort();
    }
    snprintf(fz_ctx->fingerprint, sizeof fz_ctx->fingerprint, "%s", FZ_DEVICE);
    atexit(close_handle); /* before the scratch folder's removal: atexit runs LIFO */
    return fz_ctx;
}

static er_cand *add_candidate(edgert_ctx *ctx, er_cand **slot)
{
    char lib[4200];
    er_cand *c = calloc(1, sizeof *c);
    if (!c)
        abort();
    c->ctx = ctx;
    c->m.name = er_strdup(FZ_BACKEND);
    c->m.library_path = er_strdup(fz_path(lib, sizeof lib, "libfuzz.so"));
    if (!c->m.name || !c->m.library_path)
        abort();
    er_cand_publish(ctx, c);
    c->pub.eligible = 1;
    *slot = c;
    ctx->cands = slot;
    ctx->ncands = 1;
    return c;
}

/* What the writer wrote must load again, as the evidence reader loads it. */
static void check_round_trip(const char *path)
{
    er_diags d = {0};
    er_yaml y;
    if (er_yaml_load(&y, path, &d) != EDGERT_OK) {
        char msg[1024];
        er_diag_last_error(&d, 0, msg, sizeof msg);
        fprintf(stderr, "fuzz_evidence: the evidence writer wrote a file its reader refuses: "
                        "%s\n", msg);
        abort();
    }
    er_yaml_free(&y);
    er_diags_free(&d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    edgert_ctx *ctx = handle();
    fz_write(ctx->evidence_path, data, size);
    er_cand *slot[1];
    er_cand *c = add_candidate(ctx, slot);
    er_evidence_apply(ctx);

    edgert_evidence e = {sizeof e, FZ_BACKEND, 3.5, NAN, 0.98, 1e-3, 20.0, 1, "fuzz", 1, 3.4, 3.6,
                         64u, 0, NULL, 0u};
    char err[512];
    if (edgert_evidence_store(ctx, NULL, &e, 1, err, sizeof err) == EDGERT_OK)
        check_round_trip(ctx->evidence_path);

    ctx->cands = NULL;
    ctx->ncands = 0;
    er_cand_free(c);
    er_diags_free(&ctx->diags);
    return 0;
}
