/*
 * plugins/amx-w4a8/amx_w4a8.c — entry, options, packing, dispatch and
 * self-test of the W4A8 backend: int4 weights (an fp16 scale per column and
 * group of 128; zero point 8, or the checkpoint's own per column and group,
 * a8_internal.h), int8 activations with a scale
 * per group of 128 (or per token), integer dot products, fp32 epilogue.
 * One library behind three manifests: `amx-w4a8` (plugin_options
 * path=amx), `avx512-w4a8` (path=vnni) and `avx2-w4a8` (path=avxvnni,avx2).
 *
 * Length: the plain-x86 side of one library behind three manifests (entry,
 * the options and flag checks of three paths, pack, map, dispatch and
 * self-test) in one file; the kernels are a8_kern_*.c.
 *
 * This file is compiled WITHOUT ISA flags (plain x86-64), so loading the
 * library and calling init on any x86-64 CPU is safe: AVX-512 and AMX code
 * lives only in a8_kern_*.c and is reached only after init checked the
 * host's usable CPU flags (and, for the tiles, Linux's permission).
 *
 * Code paths (chosen once per instance in init), on one packed layout
 * (a8_internal.h):
 *   path=amx   prefill (m > decode_max_m) on AMX-INT8 tiles (a8_kern_amx.c),
 *              decode as path vnni. Needs amx_tile, amx_int8 and the
 *              tile-data permission, asked for in init.
 *   path=vnni  AVX512_VNNI vpdpbusd for decode and prefill (a8_kern_vnni.c).
 *   path=avx2  AVX2 vpmaddubsw, one GEMV for every m (a8_kern_avx2.c), for
 *              CPUs without AVX-512; needs avx2, fma and f16c only.
 *   path=avxvnni  the same GEMV on AVX-VNNI's vpdpbusd on ymm
 *              (a8_kern_avxvnni.c); needs avx2, fma, f16c and avx_vnni.
 *   path=a,b,...  the first of the listed paths this CPU runs (avx2-w4a8's
 *              avxvnni,avx2: one manifest for every CPU without AVX-512).
 *   path=auto  (default, also for NULL or "") the first of amx (where the
 *              tiles are usable and granted), vnni, avxvnni, avx2.
 * Paths amx and vnni need avx512f, avx512bw, avx512vl and avx512_vnni.
 * Options (blank-separated): "path=<auto|amx|vnni|avxvnni|avx2>[,...]",
 * "prefetch=<far|near|none|far-l1|auto>" (decode's software prefetch,
 * a8_kern.h; auto: plugin_kit.h) and "streams=<1|2|4|auto>" (the panels the
 * m = 1 GEMV reads side by side; default 1. The default prefetch,
 * a8_decode_defaults: on Intel near for one stream and none beside several,
 * elsewhere auto for either, far-l1 or none, where m > 1 runs with far-l1;
 * with streams=auto fixed instead: near on Intel, else far-l1, for one
 * stream and none for 4),
 * "act_scale=<group|token>" (the activations' int8 scale: one per group of
 * 128 inputs, the default, or one per token, the form W4A8 had first, kept
 * to compare; a8_internal.h), "decode_max_m=<1..512>"
 * (the largest m that runs the streaming GEMV instead of the prefill
 * kernel; default: 16 on path vnni, 8 on path amx (a8_internal.h has
 * the measurements); an option so the crossover can be measured again with
 * `edgert bench --options`; path avx2 runs its GEMV for every m unless it
 * is given). Anything else is
 * refused with EDGERT_E_USAGE; a path whose CPU flag is missing with
 * EDGERT_E_UNSUPPORTED naming the flag.
 *
 * No global mutable state: the descriptor, tables and strings are const; an
 * instance is an a8_state allocated through host->alloc. No exit/abort.

 */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "a8_internal.h"
#include "plugin_kit_x86.h"

/* The packed bytes' layout (plugin_kit.h, pk_blob_header): one section. */
static const pk_blob_id a8_blob = {
    A8_NAME, A8_LAYOUT, A8_BLOB_MAGIC, A8_LAYOUT_VERSION, 1u, {"panels"},
};

typedef struct a8_state {
    const edgert_host *host; /* first: pk_fini and pk_packed_free find it */
    a8_path path;
    int act_group;           /* act_scale: per group (1, default) or per token (0) */
    uint32_t decode_max_m;
    edgert_range_fn prep;    /* the path's activation prep, GEMV and prefill */
    edgert_range_fn decode;
    edgert_range_fn prefill;
    int pf_near;             /* decode's prefetch (PK_PF_*) reading one stream */
    int pf_streams;          /* and reading `streams` at m = 1 */
    unsigned streams;        /* decode, m = 1: panels read side by side */
    pk_pf_auto pf_auto;      /* where one of them is PK_PF_AUTO (plugin_kit.h) */
    char describe[576];      /* the path's description, the prefetch and streams */
} a8_state;

typedef struct a8_flag {
    edgert_cpu_flag flag;
    const char *name;
} a8_flag;

/* The AVX-512 flags paths vnni and amx's kernel files are compiled for,
 * and avx2's (CMakeLists.txt). */
#define A8_FLAGS_512                                                                            \
    {EDGERT_CPU_AVX512F, "avx512f"}, {EDGERT_CPU_AVX512BW, "avx512bw"},                         \
        {EDGERT_CPU_AVX512VL, "avx512vl"}, {EDGERT_CPU_AVX512_VNNI, "avx512_vnni"}
#define A8_FLAGS_AVX2 {EDGERT_CPU_AVX2, "avx2"}, {EDGERT_CPU_FMA, "fma"}, {EDGERT_CPU_F16C, "f16c"}

/* The amx path's tiles: real AMX, or (test build) the tile model, which
 * needs no AMX flag. */
#ifdef EDGERT_AMX_EMULATE
#define A8_FLAGS_AMX A8_FLAGS_512
#define A8_AMX_TILES "the AMX tile MODEL (test build)"
#else
#define A8_FLAGS_AMX                                                                            \
    A8_FLAGS_512, {EDGERT_CPU_AMX_TILE, "amx_tile"}, { EDGERT_CPU_AMX_INT8, "amx_int8" }
#define A8_AMX_TILES "AMX-INT8 tiles"
#endif

/* Path avxvnni's vpdpbusd on ymm: AVX-VNNI (VEX), or in the test-only build
 * (A8_VNNI_EVEX, tests/CMakeLists.txt) the same instruction as EVEX. */
#ifdef A8_VNNI_EVEX
#define A8_FLAGS_AVXVNNI                                                                        \
    A8_FLAGS_AVX2, {EDGERT_CPU_AVX512VL, "avx512vl"}, { EDGERT_CPU_AVX512_VNNI, "avx512_vnni" }
#define A8_AVXVNNI_ISA "vpdpbusd on ymm (EVEX, test build)"
#else
#define A8_FLAGS_AVXVNNI A8_FLAGS_AVX2, {EDGERT_CPU_AVX_VNNI, "avx_vnni"}
#define A8_AVXVNNI_ISA "AVX-VNNI vpdpbusd"
#endif

/* One code path: the CPU flags its kernel files need (all of them usable),
 * what describe() says of it (%s: the activations' scale), its kernels and
 * the largest m its GEMV serves by default. */
typedef struct a8_path_def {
    const char *name;
    a8_flag flags[6];
    const char *describe;
    edgert_range_fn prep, decode, prefill;
    uint32_t decode_max_m;
} a8_path_def;

static const a8_path_def a8_paths[A8_PATH_COUNT] = {
    [A8_PATH_VNNI] = {"vnni", {A8_FLAGS_512},
                      "vnni: int8 activations %s, vpdpbusd GEMV and prefill, exact int32 group "
                      "sums",
                      a8_prep, a8_vnni_decode, a8_vnni_prefill, A8_VNNI_DECODE_MAX_M},
    [A8_PATH_AMX] = {"amx", {A8_FLAGS_AMX},
                     "amx: prefill on " A8_AMX_TILES " (TDPBSSD, int8 activations %s, exact "
                     "int32 group sums); decode as path vnni (vpdpbusd GEMV)",
                     a8_prep, a8_vnni_decode, a8_amx_prefill, A8_DECODE_MAX_M},
    /* the 256-bit paths: their GEMV for every m unless decode_max_m is given */
    [A8_PATH_AVX2] = {"avx2", {A8_FLAGS_AVX2},
                      "avx2: int8 activations %s, vpmaddubsw GEMV for every m, exact int32 "
                      "group sums (path vnni's bits)",
                      a8_avx2_prep, a8_avx2_decode, a8_avx2_prefill, UINT32_MAX},
    [A8_PATH_AVXVNNI] = {"avxvnni", {A8_FLAGS_AVXVNNI},
                         "avxvnni: int8 activations %s, " A8_AVXVNNI_ISA " GEMV for every m, "
                         "exact int32 group sums (path vnni's bits)",
                         a8_avx2_prep, a8_avxvnni_decode, a8_avxvnni_prefill, UINT32_MAX},
};

/* path=auto: the first of these this CPU runs (amx only where Linux grants
 * the tile data). */
static const a8_path a8_auto_paths[A8_PATH_COUNT] = {A8_PATH_AMX, A8_PATH_VNNI,
                                                     A8_PATH_AVXVNNI, A8_PATH_AVX2};

/* The paths an instance may take, in the order asked: path=a,b,... */
typedef struct a8_path_list {
    a8_path path[A8_PATH_COUNT];
    unsigned n; /* 0: path=auto (a8_auto_paths) */
} a8_path_list;

/* ---- init ------------------------------------------------------------------------------ */

/* "path=" 's value: auto, or one path or several, comma-separated. 0 on
 * success. */
static int a8_parse_paths(const char *v, size_t vl, a8_path_list *list, char *err,
                          size_t err_len)
{
    list->n = 0;
    if (vl == 4u && strncmp(v, "auto", 4u) == 0)
        return 0;
    for (size_t at = 0; at <= vl;) {
        const char *name = v + at;
        const char *comma = memchr(name, ',', vl - at);
        const size_t nl = comma != NULL ? (size_t)(comma - name) : vl - at;
        unsigned found = A8_PATH_COUNT;
        for (unsigned i = 0; i < A8_PATH_COUNT; i++)
            if (strlen(a8_paths[i].name) == nl && strncmp(a8_paths[i].name, name, nl) == 0)
                found = i;
        int dup = 0;
        for (unsigned i = 0; i < list->n; i++)
            dup |= list->path[i] == (a8_path)found;
        if (found == A8_PATH_COUNT || dup) {
            edgert_errf(err, err_len,
                        A8_NAME ": init: %s path '%.*s' in 'path=%.*s' (accepted: auto, or one "
                                "or more of amx, vnni, avxvnni, avx2, comma-separated: the first "
                                "this CPU runs)",
                        dup ? "repeated" : "unknown", (int)nl, name, (int)vl, v);
            return -1;
        }
        list->path[list->n++] = (a8_path)found;
        at += nl + 1u;
    }
    return 0;
}

/* Parse the blank-separated options (a later one wins, as here always;
 * avx512-w4a16 takes each once). 0 on success. */
static int a8_parse_options(const char *options, a8_path_list *paths, int *act_group,
                            uint32_t *decode_max_m, pk_tuning *t, char *err, size_t err_len)
{
    paths->n = 0;
    *act_group = 1;
    *decode_max_m = 0; /* 0: the path's default */
    *t = (pk_tuning){-1, 0u}; /* not given: a8_decode_defaults */
    const char *s = options != NULL ? options : "";
    for (;;) {
        s += strspn(s, " \t");
        if (*s == '\0') {
            const char *conflict = pk_tuning_conflict(t);
            if (conflict != NULL)
                edgert_errf(err, err_len, A8_NAME ": init: %s", conflict);
            return conflict != NULL ? -1 : 0;
        }
        const size_t len = strcspn(s, " \t");
        pk_tuning later = {-1, 0u};
        if (pk_tuning_option(s, len, &later) == 1) {
            t->prefetch = later.prefetch >= 0 ? later.prefetch : t->prefetch;
            t->streams = later.streams != 0u ? later.streams : t->streams;
        } else if (len > 5u && strncmp(s, "path=", 5u) == 0) {
            if (a8_parse_paths(s + 5, len - 5u, paths, err, err_len) != 0)
                return -1;
        } else if (len > 10u && strncmp(s, "act_scale=", 10u) == 0) {
            const char *v = s + 10;
            const size_t vl = len - 10u;
            if (vl == 5u && strncmp(v, "group", 5u) == 0) {
                *act_group = 1;
            } else if (vl == 5u && strncmp(v, "token", 5u) == 0) {
                *act_group = 0;
            } else {
                edgert_errf(err, err_len,
                            A8_NAME ": init: unknown act_scale '%.*s' (accepted: group, token)",
                            (int)vl, v);
                return -1;
            }
        } else if (len > 13u && strncmp(s, "decode_max_m=", 13u) == 0) {
            char num[16] = {0};
            const size_t vl = len - 13u;
            char *endp = NULL;
            unsigned long v = 0;
            if (vl < sizeof num) {
                memcpy(num, s + 13, vl);
                v = strtoul(num, &endp, 10);
            }
            if (vl >= sizeof num || endp == num || *endp != '\0' || num[0] == '-' ||
                num[0] == '+' || v < 1u || v > 512u) {
                edgert_errf(err, err_len,
                            A8_NAME ": init: decode_max_m must be an integer in [1, 512], "
                                    "not '%.*s'",
                            (int)vl, s + 13);
                return -1;
            }
            *decode_max_m = (uint32_t)v;
        } else {
            edgert_errf(err, err_len,
                        A8_NAME ": init: unknown option '%.*s' (accepted: "
                                "path=auto|amx|vnni|avxvnni|avx2[,...], act_scale=group|token, "
                                "decode_max_m=N, prefetch=far|near|none|far-l1|auto, "
                                "streams=1|2|4|auto)",
                        (int)len, s);
            return -1;
        }
        s += len;
    }
}

/* Decode defaults per vendor (a8_kern.h; a tuning fact, not a capability:
 * every choice computes the same bits). One stream everywhere: unlike
 * avx512-w4a16's int16 GEMV (aw_decode_defaults), this one gained nothing
 * from more streams on AMD EPYC (Zen 5): spark-1.7b decode step, 2 threads,
 * 5 interleaved rounds, against streams=1 prefetch=far: streams=2
 * prefetch=none 1.068x its time, streams=4 prefetch=none 1.079x (median),
 * slower in every round; on a Zen 4 EPYC 1.05-1.35x in six paired runs
 * (16 pairs each) with the host busy. Its prefetch: on Intel near as well,
 * as measured there; elsewhere auto, far-l1 or none by the calls' times,
 * because on AMD EPYCs (Zen 4 and Zen 5) none was faster with the host's
 * memory busy and far with the weights served fast
 * (plugins/kit/x86/decode_tuning.c has the figures); far-l1 took 0.97 of
 * far's step time on Zen 5 (a8_kern.h), not measured on Zen 4.
 * Neither is yet measured on Intel: `edgert bench --options streams=4`,
 * `--options prefetch=auto` there. */
static void a8_decode_defaults(const pk_tuning *t, a8_state *st)
{
    const int intel = pk_cpu_is_intel();
    /* the prefetching mode; path avx2's: far on every CPU, as avx2-w4a16's
     * (a2_kern.h). On AMD EPYC Zen 3 (family 25, model 1), spark-1.7b
     * decode, 2 threads, bench --versus avx2-w4a16 (16 pairs each, one run
     * per mode, ceilings 26-45 GB/s): avx2-w4a16's step over this one's
     * 1.029 with far, 0.982 far-l1, 0.940 auto (far-l1 or none), 0.897
     * none. Not measured on Intel. */
    const int with = a8_is_256(st->path) ? PK_PF_FAR
                     : intel                  ? PK_PF_NEAR_TOO
                                              : PK_PF_FAR_L1;
    if (t->streams == PK_STREAMS_AUTO) { /* asked for: one against PK_STREAMS_MANY */
        pk_streams_settle(t->prefetch, with, PK_PF_NONE, &st->pf_near, &st->pf_streams,
                          &st->streams, &st->pf_auto);
        return;
    }
    st->streams = t->streams != 0u ? t->streams : 1u;
    const int given = t->prefetch >= 0                     ? t->prefetch
                      : intel || a8_is_256(st->path) ? -1 /* `with` */
                                                           : PK_PF_AUTO;
    pk_pf_settle(given, with, with, PK_PF_NONE, st->streams, &st->pf_near, &st->pf_streams,
                 &st->pf_auto);
}

/* The first flag of path p that `flags` lacks, or NULL. */
static const char *a8_lacks(uint64_t flags, a8_path p)
{
    const a8_flag *need = a8_paths[p].flags;
    for (size_t i = 0; i < sizeof a8_paths[p].flags / sizeof need[0] && need[i].name; i++)
        if (!EDGERT_HAS_FLAG(flags, need[i].flag))
            return need[i].name;
    return NULL;
}

/* The first path of the list (path=auto: a8_auto_paths) this CPU runs:
 * every flag of its kernel files usable and, for amx, Linux's tile-data
 * permission. A path passed over for the permission is logged when
 * another follows; when none runs, E_UNSUPPORTED names what each lacks. */
static edgert_status a8_choose_path(const edgert_host *host, const a8_path_list *asked,
                                    a8_path *out, char *err, size_t err_len)
{
    const a8_path *list = asked->n != 0u ? asked->path : a8_auto_paths;
    const unsigned n = asked->n != 0u ? asked->n : A8_PATH_COUNT;
    char why[384] = "";
    size_t used = 0;
    for (unsigned i = 0; i < n; i++) {
        const char *lacks = a8_lacks(host->cpu_flags, list[i]);
        if (lacks == NULL && list[i] == A8_PATH_AMX &&
            pk_amx_permission(A8_NAME, err, err_len) != 0) {
            if (i + 1u == n)
                return EDGERT_E_UNSUPPORTED; /* err says why */
            host->log(host->host_ctx, EDGERT_LOG_WARN, "%s; path %s goes on with the next",
                      err != NULL && err_len != 0u ? err : A8_NAME ": AMX refused",
                      asked->n != 0u ? "list" : "auto");
            if (err != NULL && err_len != 0u)
                err[0] = '\0';
            continue;
        }
        if (lacks == NULL) {
            *out = list[i];
            return EDGERT_OK;
        }
        if (used < sizeof why) {
            int w = snprintf(why + used, sizeof why - used, "%spath %s needs %s",
                             used != 0u ? "; " : "", a8_paths[list[i]].name, lacks);
            used += w > 0 ? (size_t)w : 0u;
        }
    }
    edgert_errf(err, err_len,
                A8_NAME ": init: no path asked for runs on this CPU: %s, which it lacks (or the "
                        "OS has not enabled)",
                why);
    return EDGERT_E_UNSUPPORTED;
}

static edgert_status a8_init(const edgert_host *host, const char *options, void **state,
                             char *err, size_t err_len)
{
    edgert_status rc = pk_check_init(A8_NAME, host, state, err, err_len);
    if (rc != EDGERT_OK)
        return rc;
    a8_path_list asked;
    int act_group = 1;
    uint32_t decode_max_m = 0;
    pk_tuning tuning;
    if (a8_parse_options(options, &asked, &act_group, &decode_max_m, &tuning, err, err_len) != 0)
        return EDGERT_E_USAGE;
    a8_path path = A8_PATH_VNNI;
    rc = a8_choose_path(host, &asked, &path, err, err_len);
    if (rc != EDGERT_OK)
        return rc;

    a8_state *st = host->alloc(host->host_ctx, sizeof *st, A8_ALIGN);
    if (st == NULL) {
        edgert_errf(err, err_len, A8_NAME ": init: cannot allocate %zu bytes of instance state",
                    sizeof *st);
        return EDGERT_E_NOMEM;
    }
    const a8_path_def *def = &a8_paths[path];
    st->host = host;
    st->path = path;
    st->act_group = act_group;
    st->decode_max_m = decode_max_m != 0u ? decode_max_m : def->decode_max_m;
    st->prep = def->prep;
    st->decode = def->decode;
    st->prefill = def->prefill;
    a8_decode_defaults(&tuning, st);
    static const char *const pf_said[PK_PF_MODES] = {
        [PK_PF_FAR] = "L2 8 KiB ahead", [PK_PF_NEAR_TOO] = "L2 4 KiB and L1 512 B ahead",
        [PK_PF_NONE] = "none", [PK_PF_FAR_L1] = "L1 6 KiB ahead"};
    char pf[320];
    pk_decode_describe(pf, sizeof pf, pf_said, st->pf_near, st->pf_streams, st->streams,
                       &st->pf_auto);
    char what[224];
    snprintf(what, sizeof what, def->describe,
             act_group ? "per group of 128" : "per token (act_scale=token)");
    snprintf(st->describe, sizeof st->describe, "%s; decode prefetch: %s", what, pf);
    *state = st;
    host->log(host->host_ctx, EDGERT_LOG_DEBUG, A8_NAME ": instance ready, path %s (%s)",
              def->name, asked.n == 0u ? "auto" : asked.n == 1u ? "forced" : "first of a list");
    return EDGERT_OK;
}

static const char *a8_describe(void *state)
{
    const a8_state *st = state;
    return st != NULL ? st->describe : NULL;
}

/* ---- pack ------------------------------------------------------------------------------- */

/* fp32 -> fp16 bits, round to nearest even (the caller refused non-finite
 * values and magnitudes that round to infinity). */
static uint16_t a8_half(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    const uint32_t sign = (u >> 16) & 0x8000u, a = u & 0x7FFFFFFFu;
    if (a > 0x7F800000u)
        return (uint16_t)(sign | 0x7E00u); /* NaN stays NaN (pack refuses it today) */
    if (a < 0x38800000u) { /* below 2^-14: an fp16 subnormal, steps of 2^-24 */
        float v = fabsf(f) * 16777216.0f; /* exact: a power of two */
        return (uint16_t)(sign | (uint32_t)lrintf(v)); /* 1024 is the smallest normal */
    }
    uint32_t r = (a + 0xFFFu + ((a >> 13) & 1u)) >> 13; /* mantissa to 10 bits, ties even */
    return (uint16_t)(sign | (r - ((127u - 15u) << 10)));
}

/* The largest fp32 magnitude that rounds to a finite fp16 (65504). */
#define A8_HALF_LIMIT 65519.996f

typedef struct a8_pack_job {
    const edgert_qweights *w;
    uint8_t *data;
    size_t panel_bytes;
    uint32_t groups;
    int asym;
} a8_pack_job;

/* Pack panels [begin, end) straight from the canonical tensor into the
 * final allocation: no transient memory above the packed size. */
static void a8_pack_panels(void *arg, size_t begin, size_t end, unsigned worker)
{
    const a8_pack_job *pj = arg;
    const edgert_qweights *w = pj->w;
    const size_t stride = (size_t)w->k / 2u; /* k is a multiple of 128 */
    (void)worker;

    const int asym = pj->asym;
    for (size_t p = begin; p < end; p++) {
        uint8_t *panel = pj->data + p * pj->panel_bytes;
        if (pj->groups & 1u) /* the unused half of the last scale line */
            memset(panel + a8_scales_at(asym, pj->groups, pj->groups - 1u) + A8_SCALE_ROW, 0,
                   A8_SCALE_ROW);
        for (uint32_t g = 0; asym && g < pj->groups; g += 4u) /* zero lines, unused parts 0 */
            memset(panel + a8_zeros_at(pj->groups, g), 0, 64u);
        for (unsigned j = 0; j < A8_PANEL; j++) {
            const size_t col = p * A8_PANEL + j;
            for (uint32_t g = 0; g < pj->groups; g++) {
                uint8_t *blk = panel + a8_codes_at(asym, g);
                if (col >= w->n) { /* padding column: zero codes, scale 0 (zero point 0) */
                    for (unsigned t = 0; t < A8_OCTETS; t++)
                        memset(blk + 64u * t + 4u * j, 0, 4u);
                    memset(panel + a8_scales_at(asym, pj->groups, g) + 2u * j, 0, 2u);
                    continue;
                }
                if (asym)
                    panel[a8_zeros_at(pj->groups, g) + j] = w->zeros[col * pj->groups + g];
                const uint8_t *src = w->codes + col * stride + (size_t)g * (A8_GROUP / 2u);
                for (unsigned t = 0; t < A8_OCTETS; t++) {
                    const uint8_t *b = src + 4u * t; /* codes of inputs 8t .. 8t+7 */
                    uint8_t d[4];
                    for (unsigned i = 0; i < 4u; i++) {
                        const unsigned qi = pk_code(b, i), qi4 = pk_code(b, i + 4u);
                        d[i] = (uint8_t)(qi | (qi4 << 4));
                    }
                    memcpy(blk + 64u * t + 4u * j, d, 4u);
                }
                const uint16_t h = a8_half(w->scales[col * pj->groups + g]);
                memcpy(panel + a8_scales_at(asym, pj->groups, g) + 2u * j, &h, 2u);
            }
        }
    }
}

/* The header of the packed bytes of [n, k] (k a multiple of 128). 0, or -1
 * when a size overflows (or a panel would not fit the handle's 32 bits). */
static int a8_layout(uint32_t n, uint32_t k, uint32_t flags, pk_blob_header *h)
{
    const size_t panels = ((size_t)n + A8_PANEL - 1u) / A8_PANEL;
    const uint32_t groups = k / A8_GROUP;
    const size_t panel_bytes = a8_panel_bytes(groups, !(flags & PK_BLOB_SYMMETRIC));
    size_t bytes;
    if (panel_bytes > UINT32_MAX || pk_mul(panels, panel_bytes, &bytes) != 0)
        return -1;
    return pk_blob_layout(&a8_blob, n, k, A8_GROUP, flags, &bytes, h);
}

static void a8_handle(a8_packed *p, const pk_blob_header *h, const void *blob, const char *name)
{
    memset(p, 0, sizeof *p);
    p->magic = A8_PACKED_MAGIC;
    p->n = h->n;
    p->k = h->k;
    p->groups = h->k / A8_GROUP;
    p->panels = (uint32_t)(((size_t)h->n + A8_PANEL - 1u) / A8_PANEL);
    p->asym = !(h->flags & PK_BLOB_SYMMETRIC);
    p->panel_bytes = (uint32_t)a8_panel_bytes(p->groups, p->asym);
    p->last_quad = p->groups > 0u ? (p->groups - 1u) / 4u : 0u;
    p->zline_last = (uint32_t)(a8_zeros_at(p->groups, 4u * p->last_quad) -
                               (size_t)p->last_quad * A8_QUAD_BYTES);
    p->data = pk_blob_at(blob, h, 0);
    p->blob = blob;
    p->blob_bytes = (size_t)h->total;
    snprintf(p->name, sizeof p->name, "%s", name);
}

static size_t a8_round64(size_t a)
{
    return (a + (A8_ALIGN - 1u)) & ~(size_t)(A8_ALIGN - 1u);
}

static const pk_layout_needs a8_needs = {"int4-asym-g128", A8_GROUP, 1, 1};

static edgert_status a8_pack(void *state, const edgert_qweights *w, void **packed,
                             size_t *packed_bytes, char *err, size_t err_len)
{
    a8_state *st = state;
    const char *name = NULL;
    pk_blob_header h;
    edgert_status rc = pk_check_pack(A8_NAME, st, w, packed, packed_bytes, &a8_needs, &name, err,
                                     err_len);
    if (rc != EDGERT_OK)
        return rc;
    const size_t groups = (size_t)w->k / A8_GROUP;
    /* zero points all 8 (or none): the symmetric layout; else the zero
     * points ride along (a8_internal.h). Never re-quantized. */
    int asym = 0;
    for (size_t i = 0; w->zeros != NULL && i < (size_t)w->n * groups && !asym; i++)
        asym = w->zeros[i] != 8u;
    for (size_t i = 0; i < (size_t)w->n * groups; i++) {
        if (fabsf(w->scales[i]) > A8_HALF_LIMIT) {
            edgert_errf(err, err_len,
                        A8_NAME ": pack '%s' [n=%u k=%u]: scale %g at row %zu, group %zu is "
                                "beyond fp16's range (|s| <= 65504), which this layout stores",
                        name, (unsigned)w->n, (unsigned)w->k, (double)w->scales[i], i / groups,
                        i % groups);
            return EDGERT_E_UNSUPPORTED;
        }
    }

    size_t total;
    const size_t off = a8_round64(sizeof(a8_packed)); /* the handle, then the packed bytes */
    if (a8_layout(w->n, w->k, asym ? 0u : PK_BLOB_SYMMETRIC, &h) != 0 ||
        pk_add(off, (size_t)h.total, &total) != 0) {
        edgert_errf(err, err_len, A8_NAME ": pack '%s' [n=%u k=%u]: packed size overflows size_t",
                    name, (unsigned)w->n, (unsigned)w->k);
        return EDGERT_E_NOMEM;
    }
    const edgert_host *host = st->host;
    uint8_t *mem = host->alloc(host->host_ctx, total, A8_ALIGN);
    if (mem == NULL) {
        edgert_errf(err, err_len, A8_NAME ": pack '%s' [n=%u k=%u]: cannot allocate %zu bytes",
                    name, (unsigned)w->n, (unsigned)w->k, total);
        return EDGERT_E_NOMEM;
    }
    a8_packed *p = (a8_packed *)(void *)mem;
    pk_blob_write_header(mem + off, &h);
    a8_handle(p, &h, mem + off, name);
    a8_pack_job pj = {.w = w, .data = mem + off + h.section[0].offset,
                      .panel_bytes = p->panel_bytes, .groups = p->groups, .asym = asym};
    host->parallel_for(host->host_ctx, p->panels, 16u, a8_pack_panels, &pj);
    *packed = p;
    *packed_bytes = total;
    return EDGERT_OK;
}

/* ---- mappable packed bytes (plugin ABI 2) ---------------------------------------------- */

static edgert_status a8_packed_data(void *state, const void *packed, const void **data,
                                    size_t *size, char *err, size_t err_len)
{
    const a8_packed *p = packed;
    const int ok = p != NULL && p->magic == A8_PACKED_MAGIC;
    return pk_packed_data(A8_NAME, state, ok, ok ? p->blob : NULL, ok ? p->blob_bytes : 0u, data,
                          size, err, err_len);
}

static edgert_status a8_packed_map(void *state, const edgert_qweights *shape, const void *data,
                                   size_t size, void **packed, char *err, size_t err_len)
{
    static const pk_layout_needs needs = {"int4-asym-g128", A8_GROUP, 1, 0};
    a8_state *st = state;
    const char *name = NULL;
    pk_blob_header expect, h;
    edgert_status rc = pk_check_map(&a8_blob, st, shape, data, size, packed, &needs, &name, err,
                                    err_len);
    if (rc != EDGERT_OK)
        return rc;
    /* the data say which of the two layouts they hold: their size and every
     * section are then checked against that one */
    pk_blob_header peek;
    memcpy(&peek, data, sizeof peek);
    if (a8_layout(shape->n, shape->k, peek.flags & PK_BLOB_SYMMETRIC, &expect) != 0) {
        edgert_errf(err, err_len, A8_NAME ": map '%s' [n=%u k=%u]: packed size overflows size_t",
                    name, (unsigned)shape->n, (unsigned)shape->k);
        return EDGERT_E_UNSUPPORTED;
    }
    rc = pk_blob_check(&a8_blob, name, data, size, &expect, &h, err, err_len);
    if (rc != EDGERT_OK)
        return rc;
    const edgert_host *host = st->host;
    a8_packed *p = host->alloc(host->host_ctx, sizeof *p, A8_ALIGN);
    if (p == NULL) {
        edgert_errf(err, err_len, A8_NAME ": map '%s': cannot allocate %zu bytes of header", name,
                    sizeof *p);
        return EDGERT_E_NOMEM;
    }
    a8_handle(p, &h, data, name);
    *packed = p;
    return EDGERT_OK;
}

/* ---- gemm --------------------------------------------------------------------------------- */

static edgert_status a8_gemm(void *state, const void *packed, const edgert_gemm_args *args,
                             char *err, size_t err_len)
{
    a8_state *st = state;
    const a8_packed *w = packed;
    if (st == NULL || w == NULL || w->magic != A8_PACKED_MAGIC) {
        edgert_errf(err, err_len, A8_NAME ": gemm: NULL state or not an " A8_NAME " packed handle");
        return EDGERT_E_USAGE;
    }
    edgert_status ast = pk_check_gemm_args(A8_NAME, w->name, w->n, w->k, args, err, err_len);
    if (ast != EDGERT_OK)
        return ast;

    /* Per-call scratch: the tokens' int8 codes (rows padded with zero rows
     * to the AMX token block in prefill), 8 * their group sums, their
     * group scales (padding rows too: 0) and token scales: (m + 31) k +
     * (2 m + 31) 4 k / 128 + 4 m bytes at most; on path amx's prefill also
     * A8_AMX_SCRATCH (72 KiB) per thread of the pool. */
    const edgert_host *host = st->host;
    const int decode = args->m <= st->decode_max_m;
    const size_t pad = decode ? 1u : A8_AMX_ROW_PAD;
    const size_t rows = ((size_t)args->m + pad - 1u) / pad * pad;
    /* path amx's prefill: group-major codes, its accumulators and tiles */
    const int tiles = !decode && st->path == A8_PATH_AMX;
    const size_t kb = a8_round64(w->k);
    size_t act_bytes, sums_bytes, sg_bytes, sx_off, total;
    if (pk_mul(kb, rows, &act_bytes) != 0 ||
        pk_mul((size_t)args->m, (size_t)w->groups * 4u, &sums_bytes) != 0 ||
        pk_mul(rows, (size_t)w->groups * 4u, &sg_bytes) != 0 ||
        pk_add(act_bytes, sums_bytes, &sx_off) != 0 || pk_add(sx_off, sg_bytes, &sx_off) != 0 ||
        pk_add(sx_off, (size_t)args->m * 4u, &total) != 0) {
        edgert_errf(err, err_len, A8_NAME ": gemm on '%s' [m=%u]: scratch size overflows size_t",
                    w->name, (unsigned)args->m);
        return EDGERT_E_NOMEM;
    }
    size_t tile_off = 0;
    if (tiles) {
        size_t tb;
        tile_off = a8_round64(total);
        if (pk_mul((size_t)host->thread_count(host->host_ctx), A8_AMX_SCRATCH, &tb) != 0 ||
            pk_add(tile_off, tb, &total) != 0) {
            edgert_errf(err, err_len,
                        A8_NAME ": gemm on '%s' [m=%u]: scratch size overflows size_t", w->name,
                        (unsigned)args->m);
            return EDGERT_E_NOMEM;
        }
    }
    uint8_t *scratch = host->alloc(host->host_ctx, total, A8_ALIGN);
    if (scratch == NULL) {
        edgert_errf(err, err_len,
                    A8_NAME ": gemm on '%s' [m=%u n=%u k=%u]: cannot allocate %zu bytes of "
                            "activation scratch",
                    w->name, (unsigned)args->m, (unsigned)w->n, (unsigned)w->k, total);
        return EDGERT_E_NOMEM;
    }
    /* a8_internal.h: row-major for decode, group-major for every prefill
     * (the tiles', and path vnni's register tile, which reads 8 tokens of
     * one group: k bytes apart row-major, the same few L1 sets) */
    const int gmajor = !decode;
    const size_t row_bytes = gmajor ? A8_GROUP : kb;
    const size_t group_bytes = gmajor ? rows * A8_GROUP : A8_GROUP;
    if (rows > args->m) { /* padding tokens: zeros, computed but never stored */
        for (uint32_t g = 0; g < (gmajor ? w->groups : 1u); g++)
            memset(scratch + g * group_bytes + (size_t)args->m * row_bytes, 0,
                   (rows - args->m) * row_bytes);
        memset(scratch + act_bytes + sums_bytes + (size_t)args->m * w->groups * 4u, 0,
               (rows - args->m) * w->groups * 4u);
    }
    a8_job job = {
        .w = w, .m = args->m, .x = args->x, .ldx = args->ldx, .y = args->y, .ldy = args->ldy,
        .act = (int8_t *)scratch, .act_row_bytes = row_bytes, .act_group_bytes = group_bytes,
        .asum8 = (int32_t *)(void *)(scratch + act_bytes),
        .sg = (float *)(void *)(scratch + act_bytes + sums_bytes),
        .sx = (float *)(void *)(scratch + sx_off),
        .act_group = st->act_group,
        .tile_scratch = tiles ? scratch + tile_off : NULL,
        .pf_near = st->pf_near,
        .pf_streams = st->pf_streams,
        .streams = st->streams,
    };

    /* prep is O(m k): on the caller for small m */
    if (args->m <= 8u)
        st->prep(&job, 0, args->m, 0);
    else
        host->parallel_for(host->host_ctx, args->m, 4u, st->prep, &job);

    if (decode) {
        /* about 64 KiB of codes per chunk at least: the hand-off costs
         * microseconds, streaming 64 KiB about as much. prefetch=auto's
         * record is the handle's own mutable part (pack and map made the
         * handle: never const memory). */
        size_t grain = (64u * 1024u + w->panel_bytes - 1u) / w->panel_bytes;
        pk_decode_run(host, A8_NAME, &st->pf_auto, (pk_pf_seen *)&w->pf_seen, args->m,
                      &job.pf_near, &job.pf_streams, &job.streams, w->panels, grain,
                      st->decode, &job);
    } else {
        const size_t pb = st->path == A8_PATH_AMX ? A8_AMX_PB : A8_PREFILL_PB;
        host->parallel_for(host->host_ctx, (w->panels + pb - 1u) / pb, 1u, st->prefill, &job);
    }
    host->free(host->host_ctx, scratch);
    return EDGERT_OK;
}

/* ---- self-test ------------------------------------------------------------------------------ */

/* The activations the kernels multiply with, x_e = s_x a (a8_kern_vnni.c's
 * prep, in the same fp32 operations: the same codes). */
static void a8_effective_x(const void *state, const float *x, uint32_t k, uint32_t group,
                           double *out)
{
    const a8_state *st = state;
    (void)group; /* the weights' group, 128 here: the scale's span is A8_GROUP or k */
    const uint32_t span = st != NULL && st->act_group ? A8_GROUP : k;
    for (uint32_t c0 = 0; c0 < k; c0 += span) {
        float m = 0.0f;
        for (uint32_t c = c0; c < c0 + span; c++)
            m = fabsf(x[c]) > m ? fabsf(x[c]) : m;
        const float inv = m != 0.0f ? 127.0f / m : 0.0f, s = m / 127.0f;
        for (uint32_t c = c0; c < c0 + span; c++) {
            float q = rintf(x[c] * inv);
            q = q > 127.0f ? 127.0f : q < -127.0f ? -127.0f : q;
            out[c] = (double)q * (double)s;
        }
    }
}

/*
 * Error bound of one output against the exact sum over x_e (the int8
 * activations as the kernel has them) and the canonical weights:
 *   scales stored as fp16 (11 significant bits, round to nearest): 2^-11 sum|x_e w|;
 *   the integer dot products are exact; per group one fp32 conversion
 *   (exact, |d| < 2^18), the product s_w s_g and one multiply-add, over at
 *   most K / 128 groups, plus the final multiply: (2 K / 128 + 3) 2^-24
 *   sum|x_e w| relative to the terms, covered for K <= 2^12 by 2^-16
 *   sum|x_e w| (67 < 256).
 */
static double a8_self_test_bound(const void *state, uint32_t m, const pk_sums *s)
{
    (void)state;
    (void)m;
    return ldexp(s->sum_xw, -11) + ldexp(s->sum_xw, -16) + 1e-30;
}

/* decode (m <= 4) and prefill (m > 4) kernels, panel tails (n % 16), 4
 * panels at m = 1 (2 or 4 streams, the last panel short), a partial item
 * of 3 (vnni) or 4 (amx) panels, token blocks with tails;
 * m = 40, n = 87 (6 panels) give path amx two token blocks, the second
 * partial, and an item of 2 panels after a full one of 4 */
static const pk_case a8_cases[] = {
    {1u, 37u, 256u, A8_GROUP, 1},  {1u, 61u, 256u, A8_GROUP, 1}, {3u, 20u, 128u, A8_GROUP, 1},
    {7u, 37u, 256u, A8_GROUP, 1},  {10u, 50u, 128u, A8_GROUP, 1}, {40u, 87u, 256u, A8_GROUP, 1},
    /* asymmetric: a whole quad of groups, a partial one, one and a partial */
    {1u, 37u, 512u, A8_GROUP, 0},  {3u, 20u, 384u, A8_GROUP, 0}, {40u, 87u, 640u, A8_GROUP, 0},
};

static edgert_status a8_self_test(void *state, char *err, size_t err_len)
{
    const a8_state *st = state;
    const pk_self_test t = {
        .plugin = A8_NAME, .path = st != NULL ? a8_paths[st->path].name : NULL, .state = state,
        .host = st != NULL ? st->host : NULL, .cases = a8_cases,
        .ncases = sizeof a8_cases / sizeof a8_cases[0], .seed = 0x7F4A7C15u, .pack = a8_pack,
        .packed_free = pk_packed_free, .gemm = a8_gemm, .effective_x = a8_effective_x,
        .bound = a8_self_test_bound, .packed_data = a8_packed_data,
        .packed_map = a8_packed_map,
    };
    return pk_run_self_test(&t, err, err_len);
}

/* ---- descriptor and entry --------------------------------------------------------------- */

/* ABI 1 and 2 share every ABI-1 field; ABI 2 adds the mappable packed form. */
#define A8_DESCRIPTOR_V1(abi)                                                                   \
    .struct_size = sizeof(edgert_plugin), .abi_version = (abi), .name = A8_NAME,                \
    .version = A8_VERSION, .caps = EDGERT_CAP_GEMM, .init = a8_init, .fini = pk_fini,           \
    .self_test = a8_self_test, .describe = a8_describe, .pack = a8_pack,                        \
    .packed_free = pk_packed_free, .gemm = a8_gemm, .export_graph = NULL

static const edgert_plugin a8_plugin_v1 = {A8_DESCRIPTOR_V1(1u)};

static const edgert_plugin a8_plugin_v2 = {
    A8_DESCRIPTOR_V1(2u),
    .packed_flags = EDGERT_PACKED_MAPPABLE,
    .packed_layout = A8_LAYOUT,
    .packed_data = a8_packed_data,
    .packed_map = a8_packed_map,
};

EDGERT_PLUGIN_EXPORT edgert_status edgert_plugin_entry(uint32_t abi_min, uint32_t abi_max,
                                                       const edgert_host *host,
                                                       const edgert_plugin **out, char *err,
                                                       size_t err_len)
{
    (void)host; /* the instance gets the host table again in init() */
    static const edgert_plugin *const by_abi[] = {&a8_plugin_v1, &a8_plugin_v2}; /* ABI 1, 2 */
    return EDGERT_PLUGIN_NEGOTIATE(abi_min, abi_max, by_abi, A8_NAME, out, err, err_len);
}
