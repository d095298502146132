/*
 * plugins/avx512-w4a16/avx512_w4a16.c — entry, options, packing, dispatch
 * and self-test of the avx512-w4a16 backend: int4 weights with a scale and a
 * zero point per (column, group of 128), 16-bit activations, fp32
 * accumulation.
 *
 * This file is compiled WITHOUT ISA flags (plain x86-64), so loading the
 * library and calling init on any x86-64 CPU is safe: AVX-512 code lives only
 * in aw_kern_*.c and is reached only after init checked the host's usable
 * CPU flags. (The core also gates on the manifest's requires.cpu_flags before
 * dlopen; this is the second line of defence.)
 *
 * Code paths (one per ISA, chosen once per instance in init, in the spirit of
 * xxHash's dispatcher), all on the same packed layout (aw_internal.h):
 *   path=amx    prefill (m > 4) on AMX-BF16 tiles, bf16 activations
 *               (aw_kern_amx.c); decode as path int16. Needs amx_bf16,
 *               amx_tile (and Linux's tile-data permission, asked for in
 *               init) and avx512_vnni.
 *   path=int16  vpdpbusd on 15-bit integer activations (power-of-two scale
 *               per group of 128, split into two int8 halves); needs
 *               avx512_vnni. Exact integer dot products per group.
 *   path=bf16   vdpbf16ps on bf16 activations; needs avx512_bf16.
 *   path=fma    fp32 FMA on fp32 activations; needs only avx512f (+ bw, vl,
 *               fma, which every AVX-512 CPU has and the manifest requires).
 *   path=auto   (default, also for NULL or "") amx if the tiles are usable,
 *               else the fastest decode this CPU has: int16 if avx512_vnni,
 *               else bf16 if avx512_bf16, else fma.
 * Options string: "path=<auto|amx|int16|bf16|fma>" (empty or NULL = auto),
 * "prefetch=<far|near|none|far-l1|auto>" for decode's software prefetch
 * (aw_kern.h; auto: plugin_kit.h) and "streams=<1|2|4|auto>", the panels
 * int16's m = 1 decode reads side by side (aw_kern_int16.c; paths int16 and
 * amx: refused with a forced bf16 or fma, read as 1 where auto lands on them;
 * auto: one or 4 by the calls' times, plugin_kit.h), blank-separated, each
 * once. Defaults (aw_decode_defaults): streams=auto except on Intel (one
 * stream); one stream far-l1 (Intel: far), none beside several.
 * Any other text is refused with EDGERT_E_USAGE; a path whose CPU flag the
 * host lacks is refused with EDGERT_E_UNSUPPORTED naming the flag.
 *
 * GEMM: m <= AW_DECODE_MAX_M streams the codes once (GEMV, software
 * prefetch) over panels split on the host's parallel_for; larger m expands
 * each (block of 3 panels, group) once into an L1-resident buffer (fp32,
 * bf16 or u8 codes) and runs a register-blocked micro-kernel over every row
 * block (path amx: blocks of 4 panels, 32 x 32 tiles). Activation scratch is
 * allocated per call (never indexed by worker).
 *
 * No global mutable state: the descriptor, tables and strings are const; an
 * instance is an aw_state allocated through host->alloc. No exit/abort.
 */
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "aw_internal.h"
#include "plugin_kit_x86.h"

typedef struct aw_state {
    const edgert_host *host; /* first: pk_fini and pk_packed_free find it */
    aw_path path;
    aw_kernels kern;
    int pf_near;             /* decode's prefetch (PK_PF_*) reading one stream */
    int pf_streams;          /* and reading `streams` at m = 1 */
    unsigned streams;        /* int16 decode, m = 1: panels read side by side */
    pk_pf_auto pf_auto;      /* where one of them is PK_PF_AUTO (plugin_kit.h) */
    char describe[448];      /* the path's description, the prefetch and streams */
} aw_state;

typedef struct aw_flag_need {
    edgert_cpu_flag flag;
    const char *name;
} aw_flag_need;

typedef struct aw_path_info {
    const char *name;
    aw_flag_need need[3]; /* beyond the base flags; name NULL ends the list */
    const char *describe;
    aw_kernels kern;
} aw_path_info;

#define AW_SAME(prep, gemm) prep, gemm, prep, gemm, AW_PREFILL_PB, 1u

/* The amx path's tiles: real AMX, or (test build) the emulator, which needs
 * no AMX flag. */
#ifdef EDGERT_AMX_EMULATE
#define AW_AMX_NEEDS                                                                          \
    {EDGERT_CPU_AVX512_VNNI, "avx512_vnni"}, {EDGERT_CPU_AVX512_BF16, "avx512_bf16"}
#define AW_AMX_TILES "EMULATED AMX-BF16 tiles (test build)"
#else
#define AW_AMX_NEEDS                                                                          \
    {EDGERT_CPU_AVX512_VNNI, "avx512_vnni"}, {EDGERT_CPU_AMX_BF16, "amx_bf16"},               \
        {EDGERT_CPU_AMX_TILE, "amx_tile"}
#define AW_AMX_TILES "AMX-BF16 tiles"
#endif

static const aw_path_info aw_paths[AW_PATH_COUNT] = {
    [AW_PATH_FMA] = {"fma", {{EDGERT_CPU_AVX512F, "avx512f"}},
                     "fma: AVX-512F fp32 FMA, fp32 activations (no BF16/VNNI needed)",
                     {AW_SAME(aw_fma_prep, aw_fma_gemm)}},
    [AW_PATH_BF16] = {"bf16", {{EDGERT_CPU_AVX512_BF16, "avx512_bf16"}},
                      "bf16: AVX512_BF16 vdpbf16ps, bf16 activations, fp32 accumulate",
                      {AW_SAME(aw_bf16_prep, aw_bf16_gemm)}},
    [AW_PATH_INT16] = {"int16", {{EDGERT_CPU_AVX512_VNNI, "avx512_vnni"}},
                       "int16: AVX512_VNNI, 15-bit integer activations per group of 128 (decode: "
                       "vpdpbusd on two int8 halves; prefill: vpdpwssd), exact int32 group sums, "
                       "fp32 accumulate",
                       {AW_SAME(aw_int16_prep, aw_int16_gemm)}},
    [AW_PATH_AMX] = {"amx", {AW_AMX_NEEDS},
                     "amx: prefill on " AW_AMX_TILES " (TDPBF16PS, bf16 activations, fp32 "
                     "accumulate); decode as path int16 (vpdpbusd GEMV, 15-bit integer "
                     "activations)",
                     {aw_int16_prep, aw_int16_gemm, aw_bf16_prep, aw_amx_gemm, AW_AMX_PB,
                      AW_AMX_ROW_PAD}},
};

/* Every path's kernel files are compiled for these (CMakeLists.txt). */
static const struct {
    edgert_cpu_flag flag;
    const char *name;
} aw_base_flags[] = {
    {EDGERT_CPU_AVX512F, "avx512f"},
    {EDGERT_CPU_AVX512BW, "avx512bw"},
    {EDGERT_CPU_AVX512VL, "avx512vl"},
    {EDGERT_CPU_FMA, "fma"},
};

/* ---- small helpers -------------------------------------------------------- */

/* The first flag path `p` needs that `flags` lacks, or NULL. */
static const char *aw_missing_flag(uint64_t flags, aw_path p)
{
    for (size_t i = 0; i < sizeof aw_paths[p].need / sizeof aw_paths[p].need[0]; i++) {
        const aw_flag_need *n = &aw_paths[p].need[i];
        if (n->name != NULL && !EDGERT_HAS_FLAG(flags, n->flag))
            return n->name;
    }
    return NULL;
}

/* ---- init ----------------------------------------------------------------------- */

/* One "path=<name>" token (the text after "path=", len bytes). */
static int aw_parse_path(const char *s, size_t len, int *auto_path, aw_path *path, char *err,
                         size_t err_len)
{
    if (len == 4 && strncmp(s, "auto", 4) == 0)
        return 0;
    for (int p = 0; p < AW_PATH_COUNT; p++) {
        if (strlen(aw_paths[p].name) == len && strncmp(s, aw_paths[p].name, len) == 0) {
            *auto_path = 0;
            *path = (aw_path)p;
            return 0;
        }
    }
    edgert_errf(err, err_len,
                AW_NAME ": init: unknown path '%.*s' (accepted: auto, amx, int16, bf16, fma)",
                (int)len, s);
    return -1;
}

/* Decode defaults (a tuning fact: every choice computes the same bits).
 * One stream: far-l1, on Intel far (aw_kern.h; the figures below predate
 * far-l1). At m = 1 the int16 GEMV weighs one stream against 4 without
 * software prefetch (streams=auto) except on Intel, because which wins
 * depends on the host: on one AMD EPYC (Zen 5), spark-1.7b decode step, 2
 * threads, series of 5 interleaved rounds, 4 streams without prefetch took
 * 0.77-0.79 of one far-prefetched stream's time (median; 58 against 45 GB/s),
 * 2 streams 0.87-0.88 with or without prefetch, 4 streams with it about 1.0
 * (beside four streams the prefetches only compete for fill buffers); on
 * another (family 26, model 2), paired runs of 8 pairs (bench --versus), one
 * stream took 0.922-0.992 of 4 streams' time in 24 runs of 24, median 0.972,
 * and 0.92-0.95 in the runs whose steps read at 66 GB/s or more. Intel (Xeon
 * with AMX) keeps one stream, as measured there before streams existed:
 * streams are not yet measured on Intel.
 * prefetch=auto (plugin_kit.h) is not the default beside four streams: on
 * an AMD EPYC Zen 4 with the host's memory busy, paired runs (16 pairs
 * each, auto's first version) put none at 0.981-1.059 of auto's step time
 * (median 0.988: auto's calls in the other mode cost about 1%) and far at
 * 0.990-1.083 (1.029); far beat none in one DRAM run of four (0.921), and
 * clearly only with the weights resident in L3 (0.76-0.95). */
static void aw_decode_defaults(const pk_tuning *t, int int16_decode, aw_state *st)
{
    const int intel = pk_cpu_is_intel();
    /* prefetch=auto alone keeps the 4 streams it was measured beside */
    const int auto_streams =
        int16_decode && (t->streams == PK_STREAMS_AUTO ||
                         (t->streams == 0u && t->prefetch != PK_PF_AUTO && !intel));
    const int far = intel ? PK_PF_FAR : PK_PF_FAR_L1; /* one stream's */
    if (auto_streams) {
        pk_streams_settle(t->prefetch, far, PK_PF_NONE, &st->pf_near, &st->pf_streams,
                          &st->streams, &st->pf_auto);
        return;
    }
    st->streams = !int16_decode || t->streams == PK_STREAMS_AUTO ? 1u
                  : t->streams != 0u                              ? t->streams
                  : intel                                         ? 1u
                                                                  : 4u;
    pk_pf_settle(t->prefetch, far, far, PK_PF_NONE, st->streams, &st->pf_near,
                 &st->pf_streams, &st->pf_auto);
}

/* Parse "[path=<name>] [prefetch=far|near|none|far-l1|auto] [streams=1|2|4|auto]"
 * (blank-separated, each at most once). 0 on success. */
static int aw_parse_options(const char *options, int *auto_path, aw_path *path, pk_tuning *t,
                            char *err, size_t err_len)
{
    *auto_path = 1;
    *t = (pk_tuning){-1, 0u};
    int seen_path = 0;
    for (const char *s = options; s != NULL && *s != '\0';) {
        s += strspn(s, " \t");
        size_t len = strcspn(s, " \t");
        if (len == 0)
            break;
        const int tuning = pk_tuning_option(s, len, t);
        if (len >= 5 && strncmp(s, "path=", 5) == 0 && !seen_path++) {
            if (aw_parse_path(s + 5, len - 5, auto_path, path, err, err_len) != 0)
                return -1;
        } else if (tuning != 1) {
            edgert_errf(err, err_len,
                        AW_NAME ": init: unexpected option '%.*s' in '%s' (accepted, each once: "
                                "path=auto|amx|int16|bf16|fma "
                                "prefetch=far|near|none|far-l1|auto streams=1|2|4|auto)",
                        (int)len, s, options);
            return -1;
        }
        s += len;
    }
    const char *conflict = pk_tuning_conflict(t);
    if (conflict != NULL) {
        edgert_errf(err, err_len, AW_NAME ": init: %s", conflict);
        return -1;
    }
    return 0;
}

static edgert_status aw_init(const edgert_host *host, const char *options, void **state,
                             char *err, size_t err_len)
{
    edgert_status rc = pk_check_init(AW_NAME, host, state, err, err_len);
    if (rc != EDGERT_OK)
        return rc;

    int auto_path = 1;
    aw_path path = AW_PATH_FMA;
    pk_tuning tuning;
    if (aw_parse_options(options, &auto_path, &path, &tuning, err, err_len) != 0)
        return EDGERT_E_USAGE;

    const uint64_t flags = host->cpu_flags;
    for (size_t i = 0; i < sizeof aw_base_flags / sizeof aw_base_flags[0]; i++) {
        if (!EDGERT_HAS_FLAG(flags, aw_base_flags[i].flag)) {
            edgert_errf(err, err_len,
                        AW_NAME ": init: this CPU lacks %s (every path needs avx512f, avx512bw, "
                           "avx512vl and fma)",
                   aw_base_flags[i].name);
            return EDGERT_E_UNSUPPORTED;
        }
    }
    if (auto_path) {
        /* amx where tiles are usable (its decode is int16's); else the
         * fastest decode measured on Zen 5 (see the manifest notes) */
        static const aw_path order[] = {AW_PATH_AMX, AW_PATH_INT16, AW_PATH_BF16, AW_PATH_FMA};
        for (size_t i = 0; i < sizeof order / sizeof order[0]; i++) {
            path = order[i];
            if (aw_missing_flag(flags, path) != NULL)
                continue;
            if (path == AW_PATH_AMX && pk_amx_permission(AW_NAME, err, err_len) != 0) {
                host->log(host->host_ctx, EDGERT_LOG_WARN, "%s; path auto goes on without AMX",
                          err != NULL && err_len != 0u ? err : AW_NAME ": AMX refused");
                if (err != NULL && err_len != 0u)
                    err[0] = '\0';
                continue;
            }
            break;
        }
    } else {
        const char *missing = aw_missing_flag(flags, path);
        if (missing != NULL) {
            edgert_errf(err, err_len,
                        AW_NAME ": init: path=%s needs the CPU flag %s, which this CPU "
                                "does not have (or the OS has not enabled)",
                        aw_paths[path].name, missing);
            return EDGERT_E_UNSUPPORTED;
        }
        if (path == AW_PATH_AMX && pk_amx_permission(AW_NAME, err, err_len) != 0)
            return EDGERT_E_UNSUPPORTED;
    }

    /* streams: the int16 GEMV's (paths int16 and amx); the others read one.
     * Asked of a forced path without it: refused; under auto, which may
     * land on such a path on another CPU: one stream, said at debug level. */
    const int int16_decode = path == AW_PATH_INT16 || path == AW_PATH_AMX;
    if (!int16_decode && tuning.streams > 1u) {
        const char *said = tuning.streams == PK_STREAMS_AUTO ? "auto"
                           : tuning.streams == 2u           ? "2"
                                                            : "4";
        if (!auto_path) {
            edgert_errf(err, err_len,
                        AW_NAME ": init: streams=%s applies to the int16 decode (paths int16 "
                                "and amx); path=%s reads one stream",
                        said, aw_paths[path].name);
            return EDGERT_E_USAGE;
        }
        host->log(host->host_ctx, EDGERT_LOG_DEBUG,
                  AW_NAME ": streams=%s: path auto chose %s, which reads one stream", said,
                  aw_paths[path].name);
    }

    aw_state *st = host->alloc(host->host_ctx, sizeof *st, AW_ALIGN);
    if (st == NULL) {
        edgert_errf(err, err_len, AW_NAME ": init: cannot allocate %zu bytes of instance state",
                    sizeof *st);
        return EDGERT_E_NOMEM;
    }
    st->host = host;
    st->path = path;
    st->kern = aw_paths[path].kern;
    aw_decode_defaults(&tuning, int16_decode, st);
    static const char *const pf_said[PK_PF_MODES] = {
        [PK_PF_FAR] = "L2 8 KiB ahead", [PK_PF_NEAR_TOO] = "L2 8 KiB and L1 512 B ahead",
        [PK_PF_NONE] = "none", [PK_PF_FAR_L1] = "L1 6 KiB ahead"};
    char pf[320];
    pk_decode_describe(pf, sizeof pf, pf_said, st->pf_near, st->pf_streams, st->streams,
                       &st->pf_auto);
    snprintf(st->describe, sizeof st->describe, "%s; decode prefetch: %s",
             aw_paths[path].describe, pf);
    *state = st;
    host->log(host->host_ctx, EDGERT_LOG_DEBUG, AW_NAME ": instance ready, path %s%s",
              aw_paths[path].name, auto_path ? " (auto)" : " (forced)");
    return EDGERT_OK;
}

static const char *aw_describe(void *state)
{
    const aw_state *st = state;
    return st != NULL ? st->describe : NULL;
}

/* ---- gemm ------------------------------------------------------------------------- */

/* x's rows copied into xp, kpad apart, zero past k: whole blocks for every
 * path when k is no multiple of 128 (aw_internal.h). */
static const float *aw_pad_x(const aw_packed *w, const edgert_gemm_args *args, float *xp)
{
    for (size_t i = 0; i < args->m; i++) {
        memcpy(xp + i * w->kpad, args->x + i * args->ldx, (size_t)w->k * sizeof(float));
        memset(xp + i * w->kpad + w->k, 0, (size_t)(w->kpad - w->k) * sizeof(float));
    }
    return xp;
}

static edgert_status aw_gemm(void *state, const void *packed, const edgert_gemm_args *args,
                             char *err, size_t err_len)
{
    aw_state *st = state;
    const aw_packed *w = packed;

    if (st == NULL || w == NULL || w->magic != AW_PACKED_MAGIC) {
        edgert_errf(err, err_len, AW_NAME ": gemm: NULL state or not an " AW_NAME " packed handle");
        return EDGERT_E_USAGE;
    }
    edgert_status ast = pk_check_gemm_args(AW_NAME, w->name, w->n, w->k, args, err, err_len);
    if (ast != EDGERT_OK)
        return ast;

    /* Per-call scratch: activations as the path needs them (rows padded to
     * the prefill kernel's row_pad), plus per (row, group) sums and per
     * (row, block) scales. Bounded by (m + row_pad - 1) * 2 kpad + m * (4
     * k / 32 + 4 kpad / 128) bytes; on path amx's prefill also
     * AW_AMX_SCRATCH (80 KiB) per thread of the pool; with k not a multiple
     * of 128, a copy of x zero-padded to kpad, 4 m kpad bytes, so that every
     * path reads whole blocks. */
    const edgert_host *host = st->host;
    const int decode = args->m <= AW_DECODE_MAX_M;
    const edgert_range_fn prep = decode ? st->kern.decode_prep : st->kern.prefill_prep;
    const edgert_range_fn gemm = decode ? st->kern.decode_gemm : st->kern.prefill_gemm;
    const size_t pad = decode ? 1u : st->kern.row_pad;
    const size_t rows = ((size_t)args->m + pad - 1u) / pad * pad;
    size_t row_bytes = st->path == AW_PATH_FMA ? 0u : aw_round64((size_t)w->kpad * 2u);
    size_t mg = (size_t)args->m * w->groups, act_bytes, sums_bytes, total;
    const int tiles = !decode && st->path == AW_PATH_AMX;
    const int xpad = w->kpad != w->k;
    size_t tile_bytes = 0, tile_off = 0, x_bytes = 0, x_off = 0;
    if (pk_mul(row_bytes, rows, &act_bytes) != 0 ||
        pk_mul(mg, (1u + w->sub) * sizeof(float), &sums_bytes) != 0 ||
        pk_add(act_bytes, aw_round64(sums_bytes), &tile_off) != 0 ||
        (tiles && pk_mul(host->thread_count(host->host_ctx), AW_AMX_SCRATCH, &tile_bytes) != 0) ||
        pk_add(tile_off, tile_bytes, &x_off) != 0 ||
        (xpad && pk_mul((size_t)args->m * sizeof(float), w->kpad, &x_bytes) != 0) ||
        pk_add(x_off, x_bytes, &total) != 0) {
        edgert_errf(err, err_len, AW_NAME ": gemm on '%s' [m=%u]: scratch size overflows size_t",
                    w->name, (unsigned)args->m);
        return EDGERT_E_NOMEM;
    }
    uint8_t *scratch = host->alloc(host->host_ctx, total, AW_ALIGN);
    if (scratch == NULL) {
        edgert_errf(err, err_len,
                    AW_NAME ": gemm on '%s' [m=%u n=%u k=%u]: cannot allocate %zu bytes "
                            "of activation scratch",
                    w->name, (unsigned)args->m, (unsigned)w->n, (unsigned)w->k, total);
        return EDGERT_E_NOMEM;
    }
    /* aw_internal.h: row-major, or group-major for the prefill of paths amx
     * (tiles), int16 and bf16 (their register tiles read 8 rows of one
     * group: k * 2 bytes apart row-major, the same few L1 sets for every k
     * that is a multiple of 2048) */
    const int gmajor = !decode && st->path != AW_PATH_FMA;
    const size_t group_bytes = gmajor ? rows * 2u * AW_GROUP : 2u * AW_GROUP;
    if (gmajor)
        row_bytes = 2u * AW_GROUP;
    if (rows > args->m) /* padding rows: zeros, computed but never stored */
        for (uint32_t g = 0; g < (gmajor ? w->groups : 1u); g++)
            memset(scratch + g * group_bytes + (size_t)args->m * row_bytes, 0,
                   (rows - args->m) * row_bytes);
    const float *x = xpad ? aw_pad_x(w, args, (float *)(void *)(scratch + x_off)) : args->x;
    aw_job job = {
        .w = w, .m = args->m, .x = x, .ldx = xpad ? w->kpad : args->ldx, .y = args->y,
        .ldy = args->ldy,
        .act = row_bytes != 0u ? scratch : NULL, .act_row_bytes = row_bytes,
        .act_group_bytes = group_bytes,
        .gscale = (float *)(void *)(scratch + act_bytes),
        .gsum = (float *)(void *)(scratch + act_bytes) + mg,
        .pf_near = st->pf_near,
        .pf_streams = st->pf_streams,
        .streams = st->streams,
        .tile_scratch = tiles ? scratch + tile_off : NULL,
    };

    /* prep is O(m k): run it on the caller for small m */
    if (args->m <= 8u)
        prep(&job, 0, args->m, 0);
    else
        host->parallel_for(host->host_ctx, args->m, 4u, prep, &job);

    if (decode) {
        /* about 64 KiB of codes per chunk at least: the hand-off costs
         * microseconds, streaming 64 KiB about as much. prefetch=auto's
         * record is the handle's own mutable part (pack and map made the
         * handle: never const memory). */
        size_t grain = (64u * 1024u + w->panel_bytes - 1u) / w->panel_bytes;
        pk_decode_run(host, AW_NAME, &st->pf_auto, (pk_pf_seen *)&w->pf_seen, args->m,
                      &job.pf_near, &job.pf_streams, &job.streams, w->panels, grain, gemm,
                      &job);
    } else {
        size_t items = (w->panels + st->kern.prefill_pb - 1u) / st->kern.prefill_pb;
        host->parallel_for(host->host_ctx, items, 1u, gemm, &job);
    }
    host->free(host->host_ctx, scratch);
    return EDGERT_OK;
}

/* ---- self-test --------------------------------------------------------------------- */

/*
 * Error bound of one output of `path` against the exact (double) sum, given
 * per input k: x_k, w_k = s (q - z), and the group maxima of |x|:
 *   activation rounding: bf16 2^-8 sum|x w| (8 significant bits, round to
 *     nearest); int16 sum_g 2^-13 max_g|x| sum_{k in g} |w_k|; fma none;
 *   scale stored with 20 significant bits: 2^-20 sum|x w| (2^-19 below);
 *   fp32 accumulation, including the zero-point correction whose two terms
 *   each reach 15 |x| |s| per input: 2^-14 * sum 15 |x s|.
 * Shared by the self-test and (in the same form) tests/plugins/test_avx512_w4a16.c.
 */
static double aw_bound(aw_path path, uint32_t m, double sum_xw, double sum_act, double sum_xs15)
{
    if (path == AW_PATH_AMX) /* int16 GEMV in decode, bf16 tiles in prefill */
        path = m <= AW_DECODE_MAX_M ? AW_PATH_INT16 : AW_PATH_BF16;
    double act = path == AW_PATH_BF16 ? ldexp(sum_xw, -8) : path == AW_PATH_INT16 ? sum_act : 0.0;
    return act + ldexp(sum_xs15, -14) + ldexp(sum_xw, -19) + 1e-30;
}

/* decode (m <= 4) and prefill (m > 4) kernels, panel tails (n % 16), 4
 * panels at m = 1 (2 or 4 streams, the last panel short), a partial block
 * of 3 panels, row tiles with tails; m = 40 and n = 87 (6
 * panels) give path amx two row blocks, the second partial, and an item of
 * 2 panels after a full one of 4 */
static const pk_case aw_cases[] = {
    {1u, 37u, 256u, AW_GROUP, 0},  {1u, 61u, 256u, AW_GROUP, 0}, {3u, 20u, 128u, AW_GROUP, 1},
    {7u, 37u, 256u, AW_GROUP, 0},  {10u, 50u, 128u, AW_GROUP, 0}, {40u, 87u, 256u, AW_GROUP, 0},
    /* groups of 64 and 32, k not a multiple of 128 (a last block half or a
     * quarter full), decode and prefill */
    {1u, 37u, 192u, 64u, 0},       {2u, 20u, 96u, 32u, 1},        {9u, 33u, 320u, 64u, 0},
    {40u, 21u, 160u, 32u, 0},
};

static double aw_self_test_bound(const void *state, uint32_t m, const pk_sums *s)
{
    const aw_state *st = state;
    return aw_bound(st->path, m, s->sum_xw, s->sum_grid, s->sum_xs15);
}

static edgert_status aw_self_test(void *state, char *err, size_t err_len)
{
    const aw_state *st = state;
    const pk_self_test t = {
        .plugin = AW_NAME, .path = st != NULL ? aw_paths[st->path].name : NULL, .state = state,
        .host = st != NULL ? st->host : NULL, .cases = aw_cases,
        .ncases = sizeof aw_cases / sizeof aw_cases[0], .seed = 0x9E3779B9u, .pack = aw_pack,
        .packed_free = pk_packed_free, .gemm = aw_gemm, .bound = aw_self_test_bound,
        .packed_data = aw_packed_data, .packed_map = aw_packed_map,
        .act_block = AW_GROUP, /* int16: one exponent per block of 128 */
    };
    return pk_run_self_test(&t, err, err_len);
}

/* ---- descriptor and entry ----------------------------------------------------------- */

/* ABI 1 and 2 share every ABI-1 field; ABI 2 adds the mappable packed form. */
#define AW_DESCRIPTOR_V1(abi)                                                                   \
    .struct_size = sizeof(edgert_plugin), .abi_version = (abi), .name = AW_NAME,                \
    .version = AW_VERSION, .caps = EDGERT_CAP_GEMM, .init = aw_init, .fini = pk_fini,           \
    .self_test = aw_self_test, .describe = aw_describe, .pack = aw_pack,                        \
    .packed_free = pk_packed_free, .gemm = aw_gemm, .export_graph = NULL

static const edgert_plugin aw_plugin_v1 = {AW_DESCRIPTOR_V1(1u)};

static const edgert_plugin aw_plugin_v2 = {
    AW_DESCRIPTOR_V1(2u),
    .packed_flags = EDGERT_PACKED_MAPPABLE,
    .packed_layout = AW_LAYOUT,
    .packed_data = aw_packed_data,
    .packed_map = aw_packed_map,
};

EDGERT_PLUGIN_EXPORT edgert_status edgert_plugin_entry(uint32_t abi_min, uint32_t abi_max,
                                                       const edgert_host *host,
                                                       const edgert_plugin **out, char *err,
                                                       size_t err_len)
{
    (void)host; /* the instance gets the host table again in init() */
    static const edgert_plugin *const by_abi[] = {&aw_plugin_v1, &aw_plugin_v2}; /* ABI 1, 2 */
    return EDGERT_PLUGIN_NEGOTIATE(abi_min, abi_max, by_abi, AW_NAME, out, err, err_len);
}
