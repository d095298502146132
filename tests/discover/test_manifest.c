/*
 * tests/discover/test_manifest.c — manifest parsing and validation (core/discover/manifest.c).
 *
 * - every shipped manifest (manifests/ folder, *.yaml) loads cleanly, with its key facts;
 * - every good fixture loads; unknown keys are warnings at exact positions;
 * - every bad fixture fails with EDGERT_E_PARSE and exactly one error whose
 *   file, line, column and message are asserted; the multi-error fixture
 *   reports all of its problems;
 * - size limit, missing files, relative paths, argument checks; under
 *   -fsanitize=address,undefined nothing leaks;
 * - docs/manifest.md, the one description of the schema, documents every key.
 *
 * Length: over 700 lines because the table of bad fixtures, each with its
 * exact file:line:col and message, is data that reads best in one place.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/internal.h"
#include "test_util.h"
#include "discover/manifest.h"
#include "formats/yamldoc.h"

#define FIXTURES EDGERT_TEST_FIXTURES "/manifests"
#define GOOD FIXTURES "/good"
#define BAD FIXTURES "/bad"
#define SHIPPED EDGERT_TEST_FIXTURES "/../../manifests"

#define FLAG(x) (1ull << EDGERT_CPU_##x)
#define CLASS(x) (1u << EDGERT_CLASS_##x)

/* ---- helpers ------------------------------------------------------------- */

static void print_diags(const char *what, const er_diags *d)
{
    for (size_t i = 0; i < d->count; i++)
        fprintf(stderr, "  [%s] %s %s:%u:%u: %s\n", what,
                d->items[i].level == EDGERT_LOG_ERROR ? "error" : "warning",
                d->items[i].file ? d->items[i].file : "-", d->items[i].line, d->items[i].column,
                d->items[i].message);
}

static size_t count_level(const er_diags *d, edgert_log_level level)
{
    size_t n = 0;
    for (size_t i = 0; i < d->count; i++)
        n += d->items[i].level == level;
    return n;
}

/* The diagnostic of `level` whose message contains `needle`, or NULL. */
static const edgert_diag *find_diag(const er_diags *d, edgert_log_level level, const char *needle)
{
    for (size_t i = 0; i < d->count; i++)
        if (d->items[i].level == level && strstr(d->items[i].message, needle))
            return &d->items[i];
    return NULL;
}

static int is_zeroed(const er_manifest *m)
{
    static const er_manifest zero;
    return memcmp(m, &zero, sizeof zero) == 0;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sorted, NULL-terminated list of the *.yaml file names in `dir`. */
static char **list_yaml(const char *dir, size_t *count)
{
    DIR *dp = opendir(dir);
    assert_non_null(dp);
    size_t n = 0, cap = 16;
    char **names = calloc(cap + 1, sizeof *names);
    assert_non_null(names);
    struct dirent *e;
    while ((e = readdir(dp)) != NULL) {
        size_t len = strlen(e->d_name);
        if (len < 6 || strcmp(e->d_name + len - 5, ".yaml") != 0)
            continue;
        if (n == cap) {
            cap *= 2;
            names = realloc(names, (cap + 1) * sizeof *names);
            assert_non_null(names);
        }
        names[n] = strdup(e->d_name);
        assert_non_null(names[n]);
        n++;
    }
    closedir(dp);
    names[n] = NULL;
    qsort(names, n, sizeof *names, by_name);
    *count = n;
    return names;
}

/* A fresh temporary folder (malloc'd path). */
static char *tu_tmpdir_local(void)
{
    const char *tmp = getenv("TMPDIR");
    char buf[PATH_MAX];
    snprintf(buf, sizeof buf, "%s/edgert-test-manifest-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    assert_non_null(mkdtemp(buf));
    return strdup(buf);
}

static char *join(const char *dir, const char *file)
{
    size_t len = strlen(dir) + 1 + strlen(file) + 1;
    char *p = malloc(len);
    assert_non_null(p);
    snprintf(p, len, "%s/%s", dir, file);
    return p;
}

/* Load a manifest that must be valid: OK and no error diagnostic. */
static void load_ok(const char *path, er_manifest *m, er_diags *d)
{
    edgert_status st = er_manifest_load(path, m, d);
    if (st != EDGERT_OK || count_level(d, EDGERT_LOG_ERROR) != 0)
        print_diags(path, d);
    assert_int_equal(st, EDGERT_OK);
    assert_int_equal(count_level(d, EDGERT_LOG_ERROR), 0);
    assert_string_equal(m->path, path);
}

/* ---- shipped manifests --------------------------------------------------- */

typedef struct shipped {
    const char *name;
    const char *library; /* NULL: declarative */
    edgert_arch arch;
    uint32_t classes;
    uint64_t requires_flags, uses_flags;
    const char *processor;
    const char *format;
    int weight_bits, group_size, symmetric;
    const char *activation_dtype;
    int activation_bits;
    double bits_per_weight;
    const char *fallback_dtype;
    int runs_in_process;
    double decode; /* NAN: none declared */
    uint32_t abi_max; /* the plugin ABI its library implements up to */
} shipped;

/* amx-w4a8 and avx512-w4a8 declare the one decode figure of their shared
 * VNNI GEMV (manifests/avx512-w4a8.yaml says where it was measured). */
#define A8_DECODE 39.75

static const shipped shipped_facts[] = {
    {"amx-w4a8", "libedgert-amx-w4a8.so", EDGERT_ARCH_X86_64, CLASS(X86_CPU),
     FLAG(AVX512F) | FLAG(AVX512BW) | FLAG(AVX512VL) | FLAG(AVX512_VNNI) | FLAG(AMX_TILE) |
         FLAG(AMX_INT8),
     0, "cpu", "int4-asym-g128", 4, 128, 0, "int8", 8, 4.1875, NULL, 1, A8_DECODE, 2},
    {"avx512-w4a8", "libedgert-amx-w4a8.so", EDGERT_ARCH_X86_64, CLASS(X86_CPU),
     FLAG(AVX512F) | FLAG(AVX512BW) | FLAG(AVX512VL) | FLAG(AVX512_VNNI), 0, "cpu",
     "int4-asym-g128", 4, 128, 0, "int8", 8, 4.1875, NULL, 1, A8_DECODE, 2},
    {"avx512-w4a16", "libedgert-avx512-w4a16.so", EDGERT_ARCH_X86_64, CLASS(X86_CPU),
     FLAG(AVX512F) | FLAG(AVX512BW) | FLAG(AVX512VL),
     FLAG(AMX_BF16) | FLAG(AMX_TILE) | FLAG(AVX512_BF16) | FLAG(AVX512_VNNI), "cpu",
     "int4-asym-g128", 4, 128, 0, "bf16", 16, 4.25, NULL, 1, 37.59, 2},
    {"neon-w4a16", "libedgert-neon-w4a16.so", EDGERT_ARCH_ARM64,
     CLASS(ARM64_CPU) | CLASS(JETSON) | CLASS(NPU_PHONE), FLAG(ASIMD),
     FLAG(ASIMDDP) | FLAG(I8MM) | FLAG(BF16), "cpu", "int4-asym-g128", 4, 128, 0, "fp16", 16,
     4.3125, NULL, 1, NAN, 2},
    {"npu-export", "libedgert-npu-export.so", EDGERT_ARCH_UNKNOWN, CLASS(NPU_PHONE), 0, 0, "npu",
     "w8a16-qdq", 8, 0, 1, "uint16", 16, 8.0, NULL, 0, NAN, 1},
    {"gpu-dense", NULL, EDGERT_ARCH_UNKNOWN, CLASS(CUDA_DISCRETE) | CLASS(JETSON), 0, 0, "gpu",
     "dense", 16, 0, 1, "bf16", 16, 16.0, "fp16", 0, NAN, 0},
};
#define SHIPPED_COUNT (sizeof shipped_facts / sizeof shipped_facts[0])

static void check_shipped_facts(const er_manifest *m, const shipped *f)
{
    if (f->library) {
        assert_non_null(m->library);
        assert_string_equal(m->library, f->library);
        assert_int_equal(m->abi_min, 1);
        assert_int_equal(m->abi_max, f->abi_max);
    } else {
        assert_null(m->library);
        assert_null(m->library_path);
    }
    assert_int_equal(m->arch, f->arch);
    assert_int_equal(m->device_classes, f->classes);
    assert_true(m->requires_flags == f->requires_flags);
    assert_true(m->uses_flags == f->uses_flags);
    assert_string_equal(m->processor, f->processor);
    assert_string_equal(m->layout_format, f->format);
    assert_int_equal(m->weight_bits, f->weight_bits);
    assert_int_equal(m->group_size, f->group_size);
    assert_int_equal(m->symmetric, f->symmetric);
    assert_string_equal(m->activation_dtype, f->activation_dtype);
    assert_int_equal(m->activation_bits, f->activation_bits);
    assert_true(m->bits_per_weight == f->bits_per_weight);
    if (f->fallback_dtype)
        assert_string_equal(m->fallback_dtype, f->fallback_dtype);
    else
        assert_null(m->fallback_dtype);
    assert_int_equal(m->runs_in_process, f->runs_in_process);
    /* Only figures edgert measured itself may be marked verified. */
    assert_int_equal(m->verified, strcmp(m->name, "avx512-w4a16") == 0 ||
                                      strcmp(m->name, "avx512-w4a8") == 0 ||
                                      strcmp(m->name, "amx-w4a8") == 0);
    assert_int_equal(m->reference, 0);
    assert_false(m->has_checksum);
    if (isnan(f->decode)) {
        assert_true(isnan(m->declared.decode_tokens_per_s));
        assert_null(m->declared.where);
    } else {
        assert_true(m->declared.decode_tokens_per_s == f->decode);
        assert_non_null(m->declared.where);
        /* A figure is either edgert's own measurement (verified) or says it is not. */
        assert_non_null(
            strstr(m->declared.where, m->verified ? "edgert bench" : "not measured by edgert"));
    }
    if (!m->verified) {
        assert_true(isnan(m->declared.prefill_gflops));
        assert_true(isnan(m->declared.top1_agreement));
    }
    assert_true(isnan(m->declared.kl_mean));
}

static void test_shipped_manifests(void **state)
{
    (void)state;
    size_t n = 0;
    char **files = list_yaml(SHIPPED, &n);
    int seen[SHIPPED_COUNT] = {0};
    int references = 0;
    for (size_t i = 0; i < n; i++) {
        char *path = join(SHIPPED, files[i]);
        er_diags d = {0};
        er_manifest m;
        load_ok(path, &m, &d);
        if (d.count)
            print_diags(path, &d);
        assert_int_equal(d.count, 0); /* not even a warning */

        /* The file is named after the backend. */
        size_t stem = strlen(files[i]) - strlen(".yaml");
        assert_int_equal(strlen(m.name), stem);
        assert_memory_equal(m.name, files[i], stem);
        assert_string_equal(m.dir, SHIPPED);
        assert_non_null(m.rationale);
        assert_true(m.rationale[0] != '\0');
        if (m.library) {
            char *want = join(SHIPPED, m.library);
            assert_string_equal(m.library_path, want);
            free(want);
        }
        references += m.reference;
        if (strcmp(m.name, "ref-w4a16") == 0) { /* written elsewhere: the essentials */
            assert_int_equal(m.reference, 1);
            assert_non_null(m.library);
            assert_int_equal(m.runs_in_process, 1);
        }
        for (size_t k = 0; k < SHIPPED_COUNT; k++) {
            if (strcmp(m.name, shipped_facts[k].name) != 0)
                continue;
            check_shipped_facts(&m, &shipped_facts[k]);
            seen[k] = 1;
        }
        er_manifest_free(&m);
        er_diags_free(&d);
        free(path);
    }
    for (size_t k = 0; k < SHIPPED_COUNT; k++) {
        if (!seen[k])
            fprintf(stderr, "shipped manifest %s.yaml not found\n", shipped_facts[k].name);
        assert_true(seen[k]);
    }
    assert_true(references <= 1);
    er_strlist_free(files);
}

/* ---- good fixtures ------------------------------------------------------- */

static void test_good_fixtures_load(void **state)
{
    (void)state;
    size_t n = 0;
    char **files = list_yaml(GOOD, &n);
    assert_true(n >= 5);
    for (size_t i = 0; i < n; i++) {
        char *path = join(GOOD, files[i]);
        er_diags d = {0};
        er_manifest m;
        load_ok(path, &m, &d);
        assert_string_equal(m.dir, GOOD);
        er_manifest_free(&m);
        er_diags_free(&d);
        free(path);
    }
    er_strlist_free(files);
}

static void test_minimal(void **state)
{
    (void)state;
    er_diags d = {0};
    er_manifest m;
    load_ok(GOOD "/minimal.yaml", &m, &d);
    assert_int_equal(d.count, 0);
    assert_string_equal(m.name, "minimal");
    assert_string_equal(m.version, "1"); /* a plain scalar read as text */
    assert_string_equal(m.vendor, "edgert-tests");
    assert_null(m.library);
    assert_null(m.library_path);
    assert_false(m.has_checksum);
    assert_int_equal(m.abi_min, 0);
    assert_int_equal(m.abi_max, 0);
    assert_int_equal(m.arch, EDGERT_ARCH_UNKNOWN);
    assert_int_equal(m.device_classes, CLASS(CUDA_DISCRETE));
    assert_true(m.requires_flags == 0);
    assert_true(m.uses_flags == 0);
    assert_string_equal(m.processor, "gpu");
    assert_int_equal(m.reference, 0);
    assert_string_equal(m.layout_format, "dense");
    assert_int_equal(m.weight_bits, 16);
    assert_int_equal(m.group_size, 0);
    assert_int_equal(m.symmetric, 1);
    assert_string_equal(m.activation_dtype, "fp32");
    assert_int_equal(m.activation_bits, 32); /* from the dtype */
    assert_true(m.bits_per_weight == 16.0);
    assert_null(m.fallback_dtype);
    assert_int_equal(m.runs_in_process, 0);
    assert_int_equal(m.verified, 0);
    assert_string_equal(m.rationale, "The smallest valid manifest.");
    assert_null(m.notes);
    assert_null(m.plugin_options);
    assert_null(m.plugin_name); /* the descriptor's name is `name` */
    assert_string_equal(er_manifest_plugin_name(&m), "minimal");
    assert_true(isnan(m.declared.decode_tokens_per_s));
    assert_true(isnan(m.declared.prefill_gflops));
    assert_true(isnan(m.declared.top1_agreement));
    assert_true(isnan(m.declared.kl_mean));
    assert_null(m.declared.where);
    assert_null(m.declared_where);
    er_manifest_free(&m);
    assert_true(is_zeroed(&m));
    er_manifest_free(&m); /* freeing twice is harmless */
    er_diags_free(&d);
}

static void test_all_fields(void **state)
{
    (void)state;
    er_diags d = {0};
    er_manifest m;
    load_ok(GOOD "/all-fields.yaml", &m, &d);
    assert_int_equal(d.count, 0);
    assert_string_equal(m.name, "all-fields.v2_x");
    assert_string_equal(m.version, "2.3.4");
    assert_string_equal(m.library, "libedgert-all-fields.so");
    assert_string_equal(m.library_path, GOOD "/libedgert-all-fields.so");
    assert_int_equal(m.has_checksum, 1);
    assert_true(m.checksum == 0x0123456789abcdefull);
    assert_int_equal(m.abi_min, 1);
    assert_int_equal(m.abi_max, 3);
    assert_int_equal(m.arch, EDGERT_ARCH_X86_64);
    assert_int_equal(m.device_classes, CLASS(X86_CPU) | CLASS(CUDA_DISCRETE));
    assert_true(m.requires_flags == (FLAG(AVX2) | FLAG(FMA)));
    assert_true(m.uses_flags == (FLAG(F16C) | FLAG(AVX512_BF16)));
    assert_string_equal(m.processor, "gpu");
    assert_int_equal(m.reference, 1);
    assert_string_equal(m.layout_format, "int4-asym-g64");
    assert_int_equal(m.weight_bits, 4);
    assert_int_equal(m.group_size, 64);
    assert_int_equal(m.symmetric, 0);
    assert_string_equal(m.activation_dtype, "bf16");
    assert_int_equal(m.activation_bits, 16);
    assert_true(m.bits_per_weight == 4.5);
    assert_string_equal(m.fallback_dtype, "fp16");
    assert_int_equal(m.runs_in_process, 1);
    assert_int_equal(m.verified, 1);
    assert_string_equal(m.rationale, "Exercises every field.");
    assert_string_equal(m.notes, "Free text for the operator.");
    assert_string_equal(m.plugin_options, "path=fma threads=2");
    assert_string_equal(m.plugin_name, "all-fields.base");
    assert_true(m.declared.decode_tokens_per_s == 12.5);
    assert_true(m.declared.prefill_gflops == 500.0);
    assert_true(m.declared.top1_agreement == 0.99);
    assert_true(m.declared.kl_mean == 0.01);
    assert_string_equal(m.declared_where, "a test fixture, not a measurement");
    assert_ptr_equal(m.declared.where, m.declared_where);
    er_manifest_free(&m);
    er_diags_free(&d);
}

static void test_version_string_and_subfolder(void **state)
{
    (void)state;
    er_diags d = {0};
    er_manifest m;
    load_ok(GOOD "/version-string.yaml", &m, &d);
    assert_int_equal(d.count, 0);
    assert_string_equal(m.version, "0.1.0");
    assert_string_equal(m.processor, "cpu"); /* the default */
    assert_string_equal(m.library_path, GOOD "/sub/libedgert-version-string.so");
    assert_int_equal(m.arch, EDGERT_ARCH_ARM64);
    assert_true(m.requires_flags == (FLAG(ASIMD) | FLAG(ASIMDDP)));
    assert_true(m.declared.top1_agreement == 1.0);
    assert_true(isnan(m.declared.decode_tokens_per_s));
    assert_string_equal(m.declared.where, "nowhere: a test fixture");
    er_manifest_free(&m);
    er_diags_free(&d);
}

/* A second backend on another backend's library: plugin_name is the
 * library's own name, plugin_options picks the path, name stays its own. */
static void test_plugin_name(void **state)
{
    (void)state;
    er_diags d = {0};
    er_manifest m;
    load_ok(GOOD "/plugin-name.yaml", &m, &d);
    assert_int_equal(d.count, 0);
    assert_string_equal(m.name, "avx512-w4a8");
    assert_string_equal(m.plugin_name, "amx-w4a8");
    assert_string_equal(er_manifest_plugin_name(&m), "amx-w4a8");
    assert_string_equal(m.plugin_options, "path=vnni");
    assert_string_equal(m.library_path, GOOD "/libedgert-amx-w4a8.so");
    er_manifest_free(&m);
    assert_true(is_zeroed(&m));
    er_diags_free(&d);
}

static void test_arch_any_flags_and_absolute_library(void **state)
{
    (void)state;
    er_diags d = {0};
    er_manifest m;
    load_ok(GOOD "/arch-any-flags.yaml", &m, &d);
    assert_int_equal(d.count, 0);
    assert_int_equal(m.arch, EDGERT_ARCH_UNKNOWN);
    assert_true(m.requires_flags == (FLAG(ASIMD) | FLAG(SVE)));
    assert_true(m.uses_flags == (FLAG(SVE2) | FLAG(AVX2)));
    /* An absolute library path is kept as written. */
    assert_string_equal(m.library_path, "/opt/edgert/backends/libedgert-arch-any.so");
    assert_int_equal(m.abi_min, 2);
    assert_int_equal(m.abi_max, 65535);
    assert_string_equal(m.processor, "npu");
    assert_int_equal(m.activation_bits, 8);
    er_manifest_free(&m);
    er_diags_free(&d);
}

static void test_unknown_keys_warn(void **state)
{
    (void)state;
    static const struct {
        unsigned line, col;
        const char *msg;
    } want[] = {
        {14, 1, "unknown key 'colour'"},
        {8, 23, "unknown key 'abi.preferred'"},
        {13, 3, "unknown key 'requires.os'"},
        {22, 3, "unknown key 'layout.packing'"},
        {29, 3, "unknown key 'declared.power_watts'"},
    };
    const char *path = GOOD "/unknown-keys.yaml";
    er_diags d = {0};
    er_manifest m;
    load_ok(path, &m, &d);
    assert_int_equal(count_level(&d, EDGERT_LOG_WARN), sizeof want / sizeof want[0]);
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const edgert_diag *g = find_diag(&d, EDGERT_LOG_WARN, want[i].msg);
        if (!g)
            print_diags(path, &d);
        assert_non_null(g);
        assert_string_equal(g->file, path);
        assert_int_equal(g->line, want[i].line);
        assert_int_equal(g->column, want[i].col);
    }
    /* The known fields around them were read. */
    assert_int_equal(m.abi_max, 1);
    assert_true(m.requires_flags == FLAG(AVX2));
    assert_true(m.bits_per_weight == 4.125);
    assert_true(m.declared.decode_tokens_per_s == 1.0);
    er_manifest_free(&m);
    er_diags_free(&d);
}

/* ---- bad fixtures --------------------------------------------------------- */

typedef struct bad_case {
    const char *file;
    unsigned line, col;
    const char *msg;
} bad_case;

/* One problem each: exactly one error, at exactly this place. */
static const bad_case bad_cases[] = {
    {"syntax-error.yaml", 8, 7, "YAML syntax: did not find expected ',' or ']'"},
    {"empty.yaml", 1, 1, "empty document"},
    {"top-level-list.yaml", 2, 1, "top level of a manifest must be a mapping of fields"},
    {"missing-name.yaml", 2, 1, "missing required field 'name'"},
    {"missing-layout.yaml", 2, 1, "missing required field 'layout'"},
    {"weight-bits-string.yaml", 12, 16,
     "field 'layout.weight_bits': expected an integer, got 'four'"},
    {"layout-string.yaml", 10, 9, "field 'layout': expected a mapping, got 'int4-asym-g128'"},
    {"unknown-device-class.yaml", 9, 27,
     "field 'device_classes[1]': unknown device class 'tpu_pod'"},
    {"unknown-cpu-flag.yaml", 11, 21, "field 'requires.cpu_flags[1]': unknown CPU flag 'avx1024'"},
    {"misspelt-cpu-flag.yaml", 11, 20,
     "field 'requires.cpu_flags[1]': unknown CPU flag 'avx2x' (did you mean 'avx2'?)"},
    {"arm-flag-on-x86.yaml", 13, 7,
     "field 'requires.cpu_flags[1]': 'asimd' is an arm64 flag, but this manifest says arch: "
     "x86_64"},
    {"version-2.yaml", 2, 19, "unsupported manifest_version 2 (this edgert reads 1.x)"},
    {"version-2-string.yaml", 2, 19, "unsupported manifest_version 2.0 (this edgert reads 1.x)"},
    {"version-malformed.yaml", 2, 19, "field 'manifest_version': expected 1 or a string \"1.N\""},
    {"version-missing.yaml", 2, 1, "missing required field 'manifest_version'"},
    {"abi-min-gt-max.yaml", 7, 20, "field 'abi.max': 2 is smaller than abi.min 3"},
    {"abi-out-of-range.yaml", 7, 20, "field 'abi.max': 70000 is out of range [1, 65535]"},
    {"abi-missing.yaml", 2, 1, "missing required field 'abi': a backend with a 'library'"},
    {"checksum-format.yaml", 8, 11,
     "field 'checksum': expected \"xxh3-64:\" followed by 16 hex digits"},
    {"checksum-no-library.yaml", 6, 11,
     "field 'checksum': a checksum is only valid with a 'library'"},
    {"library-empty.yaml", 6, 10, "field 'library': must not be empty"},
    {"library-nul.yaml", 6, 10, "field 'library': NUL character"},
    {"name-chars.yaml", 3, 7, "field 'name': 'Bad Example' is not a valid backend name"},
    {"plugin-name-empty.yaml", 7, 14, "field 'plugin_name': must not be empty"},
    {"plugin-name-chars.yaml", 8, 14,
     "field 'plugin_name': 'AMX W4A8' is not a valid backend name: use 1 to 64 characters"},
    {"plugin-name-no-library.yaml", 9, 14,
     "field 'plugin_name': a plugin_name is only valid with a 'library' whose descriptor it "
     "names, and this manifest names none"},
    {"arch-unknown.yaml", 8, 7, "field 'arch': unknown architecture 'riscv64'"},
    {"processor-unknown.yaml", 16, 12, "field 'processor': expected cpu, gpu or npu, got 'tpu'"},
    {"declarative-cpu.yaml", 9, 12,
     "a manifest without 'library' is a declarative backend for an accelerator: 'processor' "
     "must be gpu or npu (a CPU backend needs its library)"},
    {"bpw-zero.yaml", 15, 20,
     "field 'layout.bits_per_weight': must be greater than 0 and at most 32, got 0"},
    {"group-sizes-word.yaml", 14, 16,
     "field 'layout.group_sizes': expected 'any' or a list of group sizes, got 'some'"},
    {"group-sizes-zero.yaml", 14, 22,
     "field 'layout.group_sizes[1]': expected a whole number from 1 to 65536, got '0'"},
    {"group-sizes-without-own.yaml", 14, 16,
     "field 'layout.group_sizes': does not hold group_size 128, the layout's own group"},
    {"group-sizes-no-group-size.yaml", 13, 16,
     "field 'layout.group_sizes': needs 'group_size', the layout's own group, beside it"},
    {"activation-bits-mismatch.yaml", 15, 20,
     "field 'layout.activation_bits': 8 disagrees with activation_dtype bf16"},
    {"activation-group-not-int8.yaml", 15, 26,
     "field 'layout.activation_group_size': is the span of an int8 activation scale; "
     "activation_dtype bf16 is not int8"},
    {"activation-dtype-unknown.yaml", 14, 21,
     "field 'layout.activation_dtype': unknown dtype 'fp8'"},
    {"top1-out-of-range.yaml", 20, 19,
     "field 'declared.top1_agreement': must be between 0 and 1, got 1.5"},
    {"declared-no-measured-on.yaml", 20, 3, "missing required field 'declared.measured_on'"},
    {"measured-on-empty.yaml", 21, 16, "field 'declared.measured_on': must not be empty"},
    {"duplicate-key.yaml", 6, 1, "duplicate key 'vendor'"},
    {"runs-in-process-quoted.yaml", 16, 18,
     "field 'runs_in_process': expected true or false, got 'yes'"},
    {"device-classes-empty.yaml", 9, 17, "field 'device_classes': the list is empty"},
    {"mixed-arch-any.yaml", 10, 21,
     "field 'requires.cpu_flags[1]': 'asimd' is an arm64 flag but the flags before it are "
     "x86_64 ones"},
    {"uses-flag-other-arch.yaml", 9, 30,
     "field 'uses_when_present[1]': 'avx512_bf16' is an x86_64 flag, but this manifest says "
     "arch: arm64"},
};
#define BAD_COUNT (sizeof bad_cases / sizeof bad_cases[0])
#define MULTI_FILE "multiple-errors.yaml"

/* Every problem of multiple-errors.yaml, in no particular order. */
static const bad_case multi_errors[] = {
    {MULTI_FILE, 3, 7, "field 'name': 'Multiple_Errors' is not a valid backend name"},
    {MULTI_FILE, 7, 12, "field 'abi.min': 0 is out of range [1, 65535]"},
    {MULTI_FILE, 9, 27, "field 'device_classes[1]': unknown device class 'mainframe'"},
    {MULTI_FILE, 11, 21, "field 'requires.cpu_flags[1]': 'i8mm' is an arm64 flag"},
    {MULTI_FILE, 14, 16, "field 'layout.weight_bits': expected an integer, got 'four'"},
    {MULTI_FILE, 15, 14, "field 'layout.symmetric': expected true or false, got 'maybe'"},
    {MULTI_FILE, 17, 20, "field 'layout.bits_per_weight': must be greater than 0 and at most 32"},
    {MULTI_FILE, 2, 1, "missing required field 'runs_in_process'"},
    {MULTI_FILE, 21, 19, "field 'declared.top1_agreement': must be between 0 and 1, got 1.5"},
    {MULTI_FILE, 21, 3, "missing required field 'declared.measured_on'"},
};
#define MULTI_COUNT (sizeof multi_errors / sizeof multi_errors[0])

/* A check across fields (no library on the CPU) beside another error: it
 * once ran only on an otherwise clean file, so it came one fix later. */
#define MULTI_FILE2 "multiple-errors-declarative.yaml"
static const bad_case multi_errors2[] = {
    {MULTI_FILE2, 4, 7, "field 'name': 'Declarative_CPU' is not a valid backend name"},
    {MULTI_FILE2, 9, 12,
     "a manifest without 'library' is a declarative backend for an accelerator: 'processor' "
     "must be gpu or npu"},
};

/* Load a bad file: E_PARSE, *out zeroed, then every expected error present
 * at its exact place, and no other error. */
static void expect_errors(const bad_case *want, size_t n)
{
    char *path = join(BAD, want[0].file);
    er_diags d = {0};
    er_manifest m;
    memset(&m, 0xa5, sizeof m); /* the loader must zero it */
    edgert_status st = er_manifest_load(path, &m, &d);
    if (st != EDGERT_E_PARSE || count_level(&d, EDGERT_LOG_ERROR) != n)
        print_diags(path, &d);
    assert_int_equal(st, EDGERT_E_PARSE);
    assert_true(is_zeroed(&m));
    assert_int_equal(count_level(&d, EDGERT_LOG_ERROR), n);
    for (size_t i = 0; i < n; i++) {
        const edgert_diag *g = find_diag(&d, EDGERT_LOG_ERROR, want[i].msg);
        if (!g) {
            fprintf(stderr, "%s: no error containing \"%s\"\n", path, want[i].msg);
            print_diags(path, &d);
        }
        assert_non_null(g);
        assert_non_null(g->file);
        assert_string_equal(g->file, path);
        if (g->line != want[i].line || g->column != want[i].col)
            fprintf(stderr, "%s: \"%s\" at %u:%u, expected %u:%u\n", path, want[i].msg, g->line,
                    g->column, want[i].line, want[i].col);
        assert_int_equal(g->line, want[i].line);
        assert_int_equal(g->column, want[i].col);
    }
    er_manifest_free(&m);
    er_diags_free(&d);
    free(path);
}

static void test_bad_fixtures(void **state)
{
    (void)state;
    for (size_t i = 0; i < BAD_COUNT; i++)
        expect_errors(&bad_cases[i], 1);
}

static void test_multiple_errors_all_reported(void **state)
{
    (void)state;
    expect_errors(multi_errors, MULTI_COUNT);
    expect_errors(multi_errors2, sizeof multi_errors2 / sizeof multi_errors2[0]);
}

/* The table and the folder agree: no fixture goes untested. */
static void test_bad_table_covers_folder(void **state)
{
    (void)state;
    size_t n = 0;
    char **files = list_yaml(BAD, &n);
    assert_int_equal(n, BAD_COUNT + 2);
    for (size_t i = 0; i < n; i++) {
        int found = strcmp(files[i], MULTI_FILE) == 0 || strcmp(files[i], MULTI_FILE2) == 0;
        for (size_t k = 0; k < BAD_COUNT && !found; k++)
            found = strcmp(files[i], bad_cases[k].file) == 0;
        if (!found)
            fprintf(stderr, "bad fixture %s has no entry in bad_cases\n", files[i]);
        assert_true(found);
    }
    er_strlist_free(files);
}

/* Errors are counted even when the caller collects no diagnostics. */
static void test_bad_without_diags(void **state)
{
    (void)state;
    er_manifest m;
    assert_int_equal(er_manifest_load(BAD "/" MULTI_FILE, &m, NULL), EDGERT_E_PARSE);
    assert_true(is_zeroed(&m));
    assert_int_equal(er_manifest_load(BAD "/layout-string.yaml", &m, NULL), EDGERT_E_PARSE);
    assert_true(is_zeroed(&m));
    assert_int_equal(er_manifest_load(GOOD "/minimal.yaml", &m, NULL), EDGERT_OK);
    er_manifest_free(&m);
}

/* Write `text` as dir/name; the malloc'd path. */
static char *write_in(const char *dir, const char *name, const char *text)
{
    char *p = join(dir, name);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    return p;
}

/* A misspelt gate is an error, never a manifest without its gate; a flag
 * edgert does not probe fails closed in requires and is only a warning in
 * uses_when_present (a preference). */
static void test_typos_fail_closed(void **state)
{
    (void)state;
    char *dir = tu_tmpdir_local();
    const char *head = "manifest_version: 1\nname: t\nversion: \"1\"\nvendor: t\n"
                       "library: libt.so\nabi: {min: 1, max: 1}\narch: x86_64\n"
                       "device_classes: [x86_cpu]\nprocessor: cpu\n"
                       "layout: {format: f, weight_bits: 4, symmetric: true, "
                       "activation_dtype: fp32, bits_per_weight: 4.5}\n"
                       "runs_in_process: true\nverified: false\nrationale: \"t\"\n";
    struct {
        const char *tail;
        edgert_status st;
        edgert_log_level level;
        const char *says;
        unsigned line, column; /* the head is 13 lines */
    } cases[] = {
        {"require:\n  cpu_flags: [avx512f]\n", EDGERT_E_PARSE, EDGERT_LOG_ERROR,
         "unknown key 'require' (did you mean 'requires'?)", 14, 1},
        {"requires:\n  cpu_flags: [avx512f, bmi2]\n", EDGERT_E_PARSE, EDGERT_LOG_ERROR,
         "unknown CPU flag 'bmi2' (edgert cannot check it", 15, 24},
        {"uses_when_present: [avx512f, bmi2]\n", EDGERT_OK, EDGERT_LOG_WARN,
         "CPU flag 'bmi2' is not one edgert probes; ignored", 14, 30},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char text[2048];
        snprintf(text, sizeof text, "%s%s", head, cases[i].tail);
        char *p = write_in(dir, "t.yaml", text);
        er_diags d = {0};
        er_manifest m;
        assert_int_equal(er_manifest_load(p, &m, &d), cases[i].st);
        const edgert_diag *g = find_diag(&d, cases[i].level, cases[i].says);
        if (!g)
            fail_msg("case %zu: no diagnostic '%s'", i, cases[i].says);
        if (!g->file || strcmp(g->file, p) != 0 || g->line != cases[i].line ||
            g->column != cases[i].column)
            fail_msg("case %zu: '%s' at %s:%u:%u, not t.yaml:%u:%u", i, cases[i].says,
                     g->file ? g->file : "(no file)", g->line, g->column, cases[i].line,
                     cases[i].column);
        if (cases[i].st == EDGERT_OK) {
            assert_true(m.uses_flags & (1ull << EDGERT_CPU_AVX512F));
            er_manifest_free(&m);
        }
        er_diags_free(&d);
        unlink(p);
        free(p);
    }
    rmdir(dir);
    free(dir);
}

/* A misspelt key names the key it probably meant (the "missing required
 * field" error alone would not say why). */
static void test_typo_suggests_key(void **state)
{
    (void)state;
    char *dir = tu_tmpdir_local();
    char *p = write_in(dir, "typo.yaml",
                       "manifest_version: 1\nname: typo\nversion: \"1\"\nvendor: t\n"
                       "arch: any\ndevice_classes: [cuda_discrete]\nprocessor: gpu\n"
                       "layout: {format: f, weight_bits: 4, symmetric: true, "
                       "activaton_dtype: fp32,\n"
                       "         bits_per_weight: 4.5}\nruns_in_process: false\n"
                       "verified: false\nrationale: \"t\"\n");
    er_diags d = {0};
    er_manifest m;
    assert_int_equal(er_manifest_load(p, &m, &d), EDGERT_E_PARSE);
    /* a typo is an error (a misspelt `requires` must not drop the gate) */
    const edgert_diag *w = find_diag(&d, EDGERT_LOG_ERROR, "activaton_dtype");
    assert_non_null(w);
    assert_non_null(strstr(w->message, "did you mean 'activation_dtype'?"));
    assert_string_equal(w->file, p);
    assert_int_equal(w->line, 8);
    assert_int_equal(w->column, 54);
    er_diags_free(&d);
    unlink(p);
    rmdir(dir);
    free(p);
    free(dir);
}

/* A misspelt `library` is one error at the typo: not also "a checksum (or
 * plugin_name) needs a library" and "a CPU backend needs its library", which
 * a vendor's walkthrough found following it and pointing elsewhere. */
static void test_misspelt_library_one_error(void **state)
{
    (void)state;
    char *dir = tu_tmpdir_local();
    char *p = write_in(dir, "libary.yaml",
                       "manifest_version: 1\nname: typo\nversion: \"1\"\nvendor: t\n"
                       "libary: libtypo.so\nchecksum: \"xxh3-64:0123456789abcdef\"\n"
                       "plugin_name: other\nabi: {min: 1, max: 1}\n"
                       "arch: any\ndevice_classes: [x86_cpu]\n"
                       "layout: {format: f, weight_bits: 4, symmetric: true, "
                       "activation_dtype: fp32, bits_per_weight: 4.5}\nruns_in_process: true\n"
                       "verified: false\nrationale: \"t\"\n");
    er_diags d = {0};
    er_manifest m;
    assert_int_equal(er_manifest_load(p, &m, &d), EDGERT_E_PARSE);
    size_t errors = 0;
    for (size_t i = 0; i < d.count; i++)
        errors += d.items[i].level == EDGERT_LOG_ERROR;
    const edgert_diag *w = find_diag(&d, EDGERT_LOG_ERROR, "libary");
    if (errors != 1 || !w || !strstr(w->message, "did you mean 'library'?") || w->line != 5 ||
        w->column != 1)
        fail_msg("%zu errors; the first: %s", errors, d.count ? d.items[0].message : "-");
    er_diags_free(&d);
    unlink(p);
    rmdir(dir);
    free(p);
    free(dir);
}

/* ---- the schema's documentation --------------------------------------------- */

/* Every key core/discover/manifest.c reads appears in docs/manifest.md as `key` (top
 * level) or `section.key` (abi's min and max in its `{min: N, max: M}`). */
static void test_schema_documented(void **state)
{
    (void)state;
    char *doc = tu_doc("manifest.md");
    static const struct {
        const char *section;
        const char *const *keys;
    } maps[] = {
        {NULL, er_manifest_top_keys},          {"requires", er_manifest_requires_keys},
        {"layout", er_manifest_layout_keys},   {"declared", er_manifest_declared_keys},
    };
    char want[128];
    for (size_t m = 0; m < sizeof maps / sizeof maps[0]; m++)
        for (const char *const *k = maps[m].keys; *k; k++) {
            snprintf(want, sizeof want, "`%s%s%s`", maps[m].section ? maps[m].section : "",
                     maps[m].section ? "." : "", *k);
            if (!strstr(doc, want))
                fail_msg("docs/manifest.md does not document %s", want);
        }
    for (const char *const *k = er_manifest_abi_keys; *k; k++) {
        snprintf(want, sizeof want, "%s: ", *k);
        assert_non_null(strstr(doc, "`{min: N, max: M}`"));
        assert_non_null(strstr(doc, want));
    }
    /* the flags edgert probes, in requires.cpu_flags' row: the whole list,
     * each name as a word */
    const char *row = strstr(doc, "| `requires.cpu_flags` |");
    assert_non_null(row);
    const char *row_end = strchr(row, '\n');
    for (int i = 0; i < EDGERT_CPU_FLAG_COUNT; i++) {
        const char *name = edgert_cpu_flag_name((edgert_cpu_flag)i);
        int found = 0;
        for (const char *p = row; !found && (p = strstr(p, name)) && p < row_end; p++)
            found = strchr("` ", p[-1]) && strchr("` ", p[strlen(name)]);
        if (!found)
            fail_msg("docs/manifest.md's requires.cpu_flags row does not list '%s'", name);
    }
    free(doc);
}

/* ---- files and paths ------------------------------------------------------ */

/* Write `size` bytes: a valid manifest padded with comment lines. */
static void write_padded(const char *path, size_t size)
{
    static const char body[] = "manifest_version: 1\n"
                               "name: padded\n"
                               "version: \"0.1.0\"\n"
                               "vendor: edgert-tests\n"
                               "arch: any\n"
                               "device_classes: [cuda_discrete]\n"
                               "processor: gpu\n"
                               "layout: {format: dense, weight_bits: 16, symmetric: true,"
                               " activation_dtype: fp32, bits_per_weight: 16}\n"
                               "runs_in_process: false\n"
                               "verified: false\n"
                               "rationale: padded to a size\n";
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(body, 1, sizeof body - 1, f), sizeof body - 1);
    size_t left = size - (sizeof body - 1);
    char line[80];
    while (left > 0) {
        size_t len = left < sizeof line ? left : sizeof line;
        memset(line, 'x', len);
        line[0] = '#';
        line[len - 1] = '\n';
        assert_int_equal(fwrite(line, 1, len, f), len);
        left -= len;
    }
    assert_int_equal(fclose(f), 0);
    struct stat sb;
    assert_int_equal(stat(path, &sb), 0);
    assert_int_equal((size_t)sb.st_size, size);
}

static void test_size_limit(void **state)
{
    (void)state;
    const char *tmp = getenv("TMPDIR");
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s/edgert-test-manifest-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    assert_non_null(mkdtemp(dir));
    char *at_limit = join(dir, "at-limit.yaml");
    char *over = join(dir, "over-limit.yaml");

    /* Exactly the limit: parsed. */
    write_padded(at_limit, ER_MANIFEST_MAX_BYTES);
    er_diags d = {0};
    er_manifest m;
    load_ok(at_limit, &m, &d);
    assert_string_equal(m.name, "padded");
    er_manifest_free(&m);
    er_diags_free(&d);

    /* One byte more: refused before parsing. */
    write_padded(over, ER_MANIFEST_MAX_BYTES + 1);
    memset(&m, 0xa5, sizeof m);
    assert_int_equal(er_manifest_load(over, &m, &d), EDGERT_E_PARSE);
    assert_true(is_zeroed(&m));
    assert_int_equal(d.count, 1);
    assert_int_equal(d.items[0].level, EDGERT_LOG_ERROR);
    assert_string_equal(d.items[0].file, over);
    assert_non_null(strstr(d.items[0].message, "larger than the 65536-byte limit"));
    er_diags_free(&d);

    assert_int_equal(unlink(at_limit), 0);
    assert_int_equal(unlink(over), 0);
    assert_int_equal(rmdir(dir), 0);
    free(at_limit);
    free(over);
}

static void test_missing_file_is_io(void **state)
{
    (void)state;
    const char *path = FIXTURES "/no-such-manifest.yaml";
    er_diags d = {0};
    er_manifest m;
    memset(&m, 0xa5, sizeof m);
    assert_int_equal(er_manifest_load(path, &m, &d), EDGERT_E_IO);
    assert_true(is_zeroed(&m));
    assert_int_equal(d.count, 1);
    assert_int_equal(d.items[0].level, EDGERT_LOG_ERROR);
    assert_string_equal(d.items[0].file, path);
    assert_non_null(strstr(d.items[0].message, "cannot read"));
    er_diags_free(&d);

    /* A folder is not a manifest either. */
    assert_int_equal(er_manifest_load(GOOD, &m, &d), EDGERT_E_IO);
    assert_true(is_zeroed(&m));
    assert_non_null(find_diag(&d, EDGERT_LOG_ERROR, "not a regular file"));
    er_diags_free(&d);
}

/* A path without a folder: dir is "." and the library is "./<library>". */
static void test_relative_path(void **state)
{
    (void)state;
    char cwd[PATH_MAX];
    assert_non_null(getcwd(cwd, sizeof cwd));
    assert_int_equal(chdir(GOOD), 0);
    er_diags d = {0};
    er_manifest m;
    edgert_status st = er_manifest_load("all-fields.yaml", &m, &d);
    char dir[8] = "", lib[64] = "";
    if (st == EDGERT_OK) {
        snprintf(dir, sizeof dir, "%s", m.dir);
        snprintf(lib, sizeof lib, "%s", m.library_path);
    }
    er_manifest_free(&m);
    er_diags_free(&d);
    assert_int_equal(chdir(cwd), 0); /* restore before asserting */
    assert_int_equal(st, EDGERT_OK);
    assert_string_equal(dir, ".");
    assert_string_equal(lib, "./libedgert-all-fields.so");

    /* Repeated slashes before the file name do not end up in dir. */
    load_ok(GOOD "//all-fields.yaml", &m, &d);
    assert_string_equal(m.dir, GOOD);
    assert_string_equal(m.library_path, GOOD "/libedgert-all-fields.so");
    er_manifest_free(&m);
    er_diags_free(&d);
}

static void test_bad_arguments(void **state)
{
    (void)state;
    er_diags d = {0};
    er_manifest m;
    assert_int_equal(er_manifest_load(NULL, &m, &d), EDGERT_E_USAGE);
    assert_true(is_zeroed(&m));
    assert_int_equal(er_manifest_load("", &m, &d), EDGERT_E_USAGE);
    assert_int_equal(er_manifest_load(GOOD "/minimal.yaml", NULL, &d), EDGERT_E_USAGE);
    er_diags_free(&d);
    er_manifest_free(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shipped_manifests),
        cmocka_unit_test(test_good_fixtures_load),
        cmocka_unit_test(test_minimal),
        cmocka_unit_test(test_all_fields),
        cmocka_unit_test(test_version_string_and_subfolder),
        cmocka_unit_test(test_plugin_name),
        cmocka_unit_test(test_arch_any_flags_and_absolute_library),
        cmocka_unit_test(test_unknown_keys_warn),
        cmocka_unit_test(test_bad_fixtures),
        cmocka_unit_test(test_multiple_errors_all_reported),
        cmocka_unit_test(test_bad_table_covers_folder),
        cmocka_unit_test(test_bad_without_diags),
        cmocka_unit_test(test_size_limit),
        cmocka_unit_test(test_missing_file_is_io),
        cmocka_unit_test(test_relative_path),
        cmocka_unit_test(test_bad_arguments),
        cmocka_unit_test(test_schema_documented),
        cmocka_unit_test(test_typo_suggests_key),
        cmocka_unit_test(test_misspelt_library_one_error),
        cmocka_unit_test(test_typos_fail_closed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
