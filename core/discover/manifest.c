/*
 * core/discover/manifest.c — read and validate one backend manifest.
 *
 * A manifest is a small YAML file that tells the core, before any plugin code
 * runs, what a backend is, what it needs from the device and what it promises.
 * The core gates on it (architecture.md, Data flow) and ranks with it (Selection).
 *
 * The schema (manifest_version 1: every key, its type, default and meaning,
 * and an example) is documented in one place, docs/manifest.md; the key
 * lists below and the readers of this file implement it, and
 * tests/discover/test_manifest.c checks that every key appears in that page.
 *
 * Errors: a wrong type, a missing required field, a bad value or another
 * major version fail the whole manifest (EDGERT_E_PARSE). Every problem of the
 * file is reported, each as a diagnostic naming file, line and column, so the
 * author fixes them in one pass. Unknown keys are warnings.
 *
 * Length: every key of the schema read in one file, top to bottom, with the
 * typed readers they share; split, a key's rule would live apart from the
 * reader that reports its position.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/internal.h"
#include "formats/yamldoc.h"
#include "discover/manifest.h"

#define NAME_MAX_LEN 64
#define CHECKSUM_PREFIX "xxh3-64:"
#define ABI_LIMIT 65535

/* Reading state of one manifest: the document, where problems go, and how
 * many errors were found so far. Lives on the stack of er_manifest_load. */
typedef struct mreader {
    er_yaml y;
    er_diags *d;
    unsigned errors;
    int nomem;
    int library_misspelt; /* 'libary:' was reported: no check of "no library" follows */
} mreader;

/* Every key of the schema, per mapping (internal.h; docs/manifest.md lists
 * each, and tests/discover/test_manifest.c checks that it does). */
const char *const er_manifest_top_keys[] = {
    "manifest_version", "name", "version", "vendor", "library", "checksum", "abi", "arch",
    "device_classes", "requires", "uses_when_present", "processor", "reference", "layout",
    "runs_in_process", "verified", "rationale", "notes", "plugin_name", "plugin_options",
    "declared", NULL,
};
const char *const er_manifest_abi_keys[] = {"min", "max", NULL};
const char *const er_manifest_requires_keys[] = {"cpu_flags", NULL};
const char *const er_manifest_layout_keys[] = {
    "format", "weight_bits", "group_size", "symmetric", "activation_dtype", "activation_bits",
    "bits_per_weight", "fallback_dtype", "group_sizes", "partial_groups",
    "activation_group_size", NULL,
};
const char *const er_manifest_declared_keys[] = {
    "decode_tokens_per_s", "prefill_gflops", "top1_agreement", "kl_mean", "measured_on", NULL,
};

static const struct {
    const char *name;
    int bits;
} dtypes[] = {
    {"fp32", 32}, {"bf16", 16}, {"fp16", 16}, {"int16", 16}, {"int8", 8}, {"uint16", 16},
};
#define DTYPE_LIST "fp32, bf16, fp16, int16, int8 or uint16"
#define CLASS_LIST "x86_cpu, arm64_cpu, cuda_discrete, jetson or npu_phone"

/* ---- reporting ----------------------------------------------------------- */

static void fail(mreader *r, const yaml_node_t *at, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void fail(mreader *r, const yaml_node_t *at, const char *fmt, ...)
{
    char msg[900];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    er_diag_add(r->d, EDGERT_LOG_ERROR, r->y.path, er_yaml_line(at), er_yaml_col(at), "%s", msg);
    r->errors++;
}

/* An error about one field: "field 'layout.weight_bits': <reason>". */
static void fail_field(mreader *r, const yaml_node_t *at, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void fail_field(mreader *r, const yaml_node_t *at, const char *key, const char *fmt, ...)
{
    char reason[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(reason, sizeof reason, fmt, ap);
    va_end(ap);
    fail(r, at, "field '%s%s%s': %s", r->y.section ? r->y.section : "", r->y.section ? "." : "",
         key, reason);
}

static void out_of_memory(mreader *r)
{
    er_diag_add(r->d, EDGERT_LOG_ERROR, r->y.path, 0, 0, "out of memory reading the manifest");
    r->nomem = 1;
    r->errors++;
}

/* Count an error a yamldoc reader already reported (it returned -1). */
static int seen(mreader *r, int rc)
{
    if (rc < 0)
        r->errors++;
    return rc;
}

static const char *scalar_text(const yaml_node_t *n)
{
    return (n && n->type == YAML_SCALAR_NODE) ? (const char *)n->data.scalar.value : "";
}

/* ---- typed readers on top of yamldoc's: 0 read, 1 absent, -1 error ------- */

/* A string that, when given, is not empty. */
static int text(mreader *r, yaml_node_t *map, const char *key, int required, char **out)
{
    int rc = seen(r, er_yaml_str(&r->y, map, key, required, out, r->d));
    if (rc != 0)
        return rc;
    if (**out == '\0') {
        fail_field(r, er_yaml_get(&r->y, map, key), key, "must not be empty");
        free(*out);
        *out = NULL;
        return -1;
    }
    return 0;
}

static int integer(mreader *r, yaml_node_t *map, const char *key, int required, long long lo,
                   long long hi, long long *out)
{
    return seen(r, er_yaml_int(&r->y, map, key, required, lo, hi, out, r->d));
}

static int boolean(mreader *r, yaml_node_t *map, const char *key, int required, int *out)
{
    return seen(r, er_yaml_bool(&r->y, map, key, required, out, r->d));
}

/* A number in [lo, hi] (or (lo, hi] when lo_open); `want` words the range. */
static int number(mreader *r, yaml_node_t *map, const char *key, int required, double lo,
                  int lo_open, double hi, const char *want, double *out)
{
    double v = 0.0;
    int rc = seen(r, er_yaml_num(&r->y, map, key, required, &v, r->d));
    if (rc != 0)
        return rc;
    int low_ok = lo_open ? v > lo : v >= lo;
    if (!low_ok || v > hi) {
        yaml_node_t *n = er_yaml_get(&r->y, map, key);
        fail_field(r, n, key, "must be %s, got %s", want, scalar_text(n));
        return -1;
    }
    *out = v;
    return 0;
}

/* ---- value checks -------------------------------------------------------- */

static int valid_name(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > NAME_MAX_LEN)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        int alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
        if (!alnum && (i == 0 || (c != '.' && c != '_' && c != '-')))
            return 0;
    }
    return 1;
}

static int hex_digit(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* "xxh3-64:" followed by exactly 16 hex digits. */
static int parse_checksum(const char *s, uint64_t *out)
{
    size_t lp = strlen(CHECKSUM_PREFIX);
    if (strncmp(s, CHECKSUM_PREFIX, lp) != 0 || strlen(s) != lp + 16)
        return -1;
    uint64_t v = 0;
    for (const char *p = s + lp; *p; p++) {
        int x = hex_digit(*p);
        if (x < 0)
            return -1;
        v = (v << 4) | (uint64_t)x;
    }
    *out = v;
    return 0;
}

static int dtype_bits(const char *s)
{
    for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++)
        if (strcmp(dtypes[i].name, s) == 0)
            return dtypes[i].bits;
    return 0;
}

/* The arch a flag belongs to, from the one flag table (names.c). */
static edgert_arch flag_arch(edgert_cpu_flag f)
{
    return er_cpu_flag_info_of(f)->arch;
}

/* The folder of `path`: "." when it has none, "/" for a file in the root. */
static char *dir_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        return er_strdup(".");
    size_t n = (size_t)(slash - path);
    while (n > 0 && path[n - 1] == '/')
        n--;
    if (n == 0)
        return er_strdup("/");
    char *dir = malloc(n + 1);
    if (!dir)
        return NULL;
    memcpy(dir, path, n);
    dir[n] = '\0';
    return dir;
}

/* An absolute library path is kept; a relative one is taken from `dir`. */
static char *resolve_library(const char *dir, const char *library)
{
    if (library[0] == '/')
        return er_strdup(library);
    size_t ld = strlen(dir), ll = strlen(library);
    size_t sep = (ld > 0 && dir[ld - 1] != '/') ? 1 : 0;
    char *p = malloc(ld + sep + ll + 1);
    if (!p)
        return NULL;
    memcpy(p, dir, ld);
    if (sep)
        p[ld] = '/';
    memcpy(p + ld + sep, library, ll + 1);
    return p;
}

/* ---- sections ------------------------------------------------------------ */

/*
 * manifest_version: 0 supported, -1 missing or malformed (reported; the rest
 * is still read as 1.x so every other problem shows too), -2 another major
 * (reported; the caller stops: that schema is not this one).
 */
static int read_manifest_version(mreader *r, yaml_node_t *root)
{
    char *s = NULL;
    if (seen(r, er_yaml_str(&r->y, root, "manifest_version", 1, &s, r->d)) != 0)
        return -1;
    yaml_node_t *n = er_yaml_get(&r->y, root, "manifest_version");
    int rc = 0;
    const char *p = s;
    while (*p >= '0' && *p <= '9')
        p++;
    int has_major = p > s;
    if (has_major && *p == '.') {
        const char *minor = ++p;
        while (*p >= '0' && *p <= '9')
            p++;
        has_major = p > minor;
    }
    if (!has_major || *p != '\0') {
        fail_field(r, n, "manifest_version", "expected %d or a string \"%d.N\", got '%s'",
                   ER_MANIFEST_MAJOR, ER_MANIFEST_MAJOR, s);
        rc = -1;
        goto out;
    }
    errno = 0;
    unsigned long major = strtoul(s, NULL, 10);
    if (errno || major != ER_MANIFEST_MAJOR) {
        fail(r, n, "unsupported manifest_version %s (this edgert reads %d.x)", s,
             ER_MANIFEST_MAJOR);
        rc = -2;
    }
out:
    free(s);
    return rc;
}

/* A name field (name, plugin_name) that is not a valid backend name. */
static void fail_name(mreader *r, yaml_node_t *root, const char *key, const char *value)
{
    fail_field(r, er_yaml_get(&r->y, root, key), key,
               "'%s' is not a valid backend name: use 1 to %d characters from a-z, 0-9, "
               "'.', '_' and '-', starting with a letter or digit",
               value, NAME_MAX_LEN);
}

static void read_identity(mreader *r, yaml_node_t *root, er_manifest *m)
{
    if (text(r, root, "name", 1, &m->name) == 0 && !valid_name(m->name))
        fail_name(r, root, "name", m->name);
    text(r, root, "version", 1, &m->version);
    text(r, root, "vendor", 1, &m->vendor);
}

static void read_abi(mreader *r, yaml_node_t *abi, er_manifest *m)
{
    r->y.section = "abi";
    seen(r, er_yaml_check_keys(&r->y, abi, er_manifest_abi_keys, r->d));
    long long lo = 0, hi = 0;
    int rc_lo = integer(r, abi, "min", 1, 1, ABI_LIMIT, &lo);
    int rc_hi = integer(r, abi, "max", 1, 1, ABI_LIMIT, &hi);
    if (rc_lo == 0 && rc_hi == 0) {
        if (lo > hi)
            fail_field(r, er_yaml_get(&r->y, abi, "max"), "max",
                       "%lld is smaller than abi.min %lld; the range must be min <= max", hi, lo);
        m->abi_min = (uint32_t)lo;
        m->abi_max = (uint32_t)hi;
    }
    r->y.section = NULL;
}

/* plugin_name: the name the library's descriptor gives itself, when this
 * manifest reuses another backend's library (with other plugin_options).
 * `lib` is read_library's result for `library` (1: absent). */
static void read_plugin_name(mreader *r, yaml_node_t *root, int lib, er_manifest *m)
{
    if (text(r, root, "plugin_name", 0, &m->plugin_name) != 0)
        return;
    if (!valid_name(m->plugin_name))
        fail_name(r, root, "plugin_name", m->plugin_name);
    else if (lib == 1 && !r->library_misspelt)
        fail_field(r, er_yaml_get(&r->y, root, "plugin_name"), "plugin_name",
                   "a plugin_name is only valid with a 'library' whose descriptor it names, "
                   "and this manifest names none");
}

/* library, checksum, plugin_name and abi: what the loader needs. */
static void read_library(mreader *r, yaml_node_t *root, er_manifest *m)
{
    int lib = text(r, root, "library", 0, &m->library);
    if (lib == 0) {
        m->library_path = resolve_library(m->dir, m->library);
        if (!m->library_path)
            out_of_memory(r);
    }
    read_plugin_name(r, root, lib, m);

    char *sum = NULL;
    if (text(r, root, "checksum", 0, &sum) == 0) {
        yaml_node_t *n = er_yaml_get(&r->y, root, "checksum");
        if (parse_checksum(sum, &m->checksum) != 0)
            fail_field(r, n, "checksum",
                       "expected \"" CHECKSUM_PREFIX "\" followed by 16 hex digits, got '%s'", sum);
        else if (lib == 1 && !r->library_misspelt)
            fail_field(r, n, "checksum",
                       "a checksum is only valid with a 'library' to check, and this manifest "
                       "names none");
        else
            m->has_checksum = 1;
        free(sum);
    }

    yaml_node_t *abi = NULL;
    int rc = seen(r, er_yaml_map(&r->y, root, "abi", 0, &abi, r->d));
    if (rc == 0)
        read_abi(r, abi, m);
    else if (rc == 1 && lib == 0)
        fail(r, root,
             "missing required field 'abi': a backend with a 'library' must declare the plugin "
             "ABI versions it implements, e.g. abi: {min: %u, max: %u}",
             EDGERT_PLUGIN_ABI_MIN, EDGERT_PLUGIN_ABI_MAX);
}

/*
 * A list of CPU flag names under `key` of `map` into a bit mask. Each flag
 * must be known (`lenient`: an unknown one is a warning and ignored) and
 * belong to `arch` (when arch is known); with `one_arch` (required flags
 * under arch: any) all must belong to the same architecture.
 */
static void read_flags(mreader *r, yaml_node_t *map, const char *key, edgert_arch arch,
                       int one_arch, int lenient, uint64_t *out)
{
    char **names = NULL;
    size_t count = 0;
    if (seen(r, er_yaml_strlist(&r->y, map, key, 0, &names, &count, r->d)) != 0)
        return;
    yaml_node_t *seq = er_yaml_get(&r->y, map, key);
    edgert_arch first = EDGERT_ARCH_UNKNOWN;
    for (size_t i = 0; i < count; i++) {
        yaml_node_t *item = er_yaml_node(&r->y, seq->data.sequence.items.start[i]);
        char what[96];
        snprintf(what, sizeof what, "%s[%zu]", key, i);
        edgert_cpu_flag f;
        if (edgert_cpu_flag_parse(names[i], &f) != 0) {
            char known[512] = "";
            const char *words[EDGERT_CPU_FLAG_COUNT + 1];
            size_t used = 0;
            for (int k = 0; k < EDGERT_CPU_FLAG_COUNT; k++) {
                words[k] = edgert_cpu_flag_name((edgert_cpu_flag)k);
                if (used < sizeof known)
                    used += (size_t)snprintf(known + used, sizeof known - used, "%s%s",
                                             k ? ", " : "", words[k]);
            }
            words[EDGERT_CPU_FLAG_COUNT] = NULL;
            /* a typo's likely flag first, as for a misspelt key */
            const char *meant = er_near_miss(names[i], words);
            char hint[64] = "";
            if (meant)
                snprintf(hint, sizeof hint, " (did you mean '%s'?)", meant);
            if (lenient) /* only a preference: a flag this edgert cannot probe is no gate */
                er_diag_add(r->d, EDGERT_LOG_WARN, r->y.path, er_yaml_line(item),
                            er_yaml_col(item), "field '%s': CPU flag '%s'%s is not one edgert "
                            "probes; ignored (known flags: %s)", what, names[i], hint, known);
            else /* a requirement that cannot be checked fails closed */
                fail_field(r, item, what, "unknown CPU flag '%s'%s (edgert cannot check it, so "
                           "cannot require it); known flags: %s", names[i], hint, known);
            continue;
        }
        edgert_arch fa = flag_arch(f);
        if (arch != EDGERT_ARCH_UNKNOWN && fa != arch) {
            fail_field(r, item, what, "'%s' is an %s flag, but this manifest says arch: %s",
                       names[i], edgert_arch_name(fa), edgert_arch_name(arch));
            continue;
        }
        if (one_arch && first != EDGERT_ARCH_UNKNOWN && fa != first) {
            fail_field(r, item, what,
                       "'%s' is an %s flag but the flags before it are %s ones; no CPU has both, "
                       "so with arch: any the required flags must belong to one architecture",
                       names[i], edgert_arch_name(fa), edgert_arch_name(first));
            continue;
        }
        if (first == EDGERT_ARCH_UNKNOWN)
            first = fa;
        *out |= 1ull << (unsigned)f;
    }
    er_strlist_free(names);
}

static void read_device_classes(mreader *r, yaml_node_t *root, er_manifest *m)
{
    char **names = NULL;
    size_t count = 0;
    if (seen(r, er_yaml_strlist(&r->y, root, "device_classes", 1, &names, &count, r->d)) != 0)
        return;
    yaml_node_t *seq = er_yaml_get(&r->y, root, "device_classes");
    if (count == 0)
        fail_field(r, seq, "device_classes", "the list is empty; name at least one of " CLASS_LIST);
    for (size_t i = 0; i < count; i++) {
        edgert_device_class c;
        if (edgert_device_class_parse(names[i], &c) == 0) {
            m->device_classes |= 1u << (unsigned)c;
            continue;
        }
        char what[64];
        snprintf(what, sizeof what, "device_classes[%zu]", i);
        fail_field(r, er_yaml_node(&r->y, seq->data.sequence.items.start[i]), what,
                   "unknown device class '%s'; expected " CLASS_LIST, names[i]);
    }
    er_strlist_free(names);
}

/* arch, device classes, CPU flags, processor, reference: what the gates use. */
static void read_target(mreader *r, yaml_node_t *root, er_manifest *m)
{
    char *arch = NULL;
    int arch_ok = 0;
    if (text(r, root, "arch", 1, &arch) == 0) {
        if (strcmp(arch, "any") == 0) {
            m->arch = EDGERT_ARCH_UNKNOWN;
            arch_ok = 1;
        } else if (edgert_arch_parse(arch, &m->arch) == 0) {
            arch_ok = 1;
        } else {
            fail_field(r, er_yaml_get(&r->y, root, "arch"), "arch",
                       "unknown architecture '%s'; expected x86_64, arm64 or any", arch);
        }
        free(arch);
    }
    /* Without a valid arch, flags are still checked by name, not by arch. */
    edgert_arch flags_arch = arch_ok ? m->arch : EDGERT_ARCH_UNKNOWN;

    read_device_classes(r, root, m);

    yaml_node_t *req = NULL;
    if (seen(r, er_yaml_map(&r->y, root, "requires", 0, &req, r->d)) == 0) {
        r->y.section = "requires";
        seen(r, er_yaml_check_keys(&r->y, req, er_manifest_requires_keys, r->d));
        read_flags(r, req, "cpu_flags", flags_arch, flags_arch == EDGERT_ARCH_UNKNOWN, 0,
                   &m->requires_flags);
        r->y.section = NULL;
    }
    read_flags(r, root, "uses_when_present", flags_arch, 0, 1, &m->uses_flags);

    int rc = text(r, root, "processor", 0, &m->processor);
    if (rc == 0 && strcmp(m->processor, "cpu") != 0 && strcmp(m->processor, "gpu") != 0 &&
        strcmp(m->processor, "npu") != 0)
        fail_field(r, er_yaml_get(&r->y, root, "processor"), "processor",
                   "expected cpu, gpu or npu, got '%s'", m->processor);
    if (rc == 1) {
        m->processor = er_strdup("cpu");
        if (!m->processor)
            out_of_memory(r);
    }
    boolean(r, root, "reference", 0, &m->reference);
}

/* A dtype field of the layout: 0 read (bits in *bits), 1 absent, -1 error. */
static int read_dtype(mreader *r, yaml_node_t *layout, const char *key, int required, char **out,
                      int *bits)
{
    int rc = text(r, layout, key, required, out);
    if (rc != 0)
        return rc;
    *bits = dtype_bits(*out);
    if (*bits == 0) {
        fail_field(r, er_yaml_get(&r->y, layout, key), key,
                   "unknown dtype '%s'; expected " DTYPE_LIST, *out);
        return -1;
    }
    return 0;
}

/* layout.group_sizes: `any`, or a list of whole numbers that holds
 * group_size (a layout packs its own group); absent, group_size alone. */
static void read_group_sizes(mreader *r, yaml_node_t *layout, er_manifest *m)
{
    yaml_node_t *n = er_yaml_get(&r->y, layout, "group_sizes");
    if (!n)
        return;
    if (m->group_size <= 0) { /* no own group to extend */
        fail_field(r, n, "group_sizes", "needs 'group_size', the layout's own group, beside it");
        return;
    }
    if (n->type == YAML_SCALAR_NODE) {
        if (strcmp(scalar_text(n), "any") == 0)
            m->group_sizes_any = 1;
        else
            fail_field(r, n, "group_sizes", "expected 'any' or a list of group sizes, got '%s'",
                       scalar_text(n));
        return;
    }
    char **v = NULL;
    size_t count = 0;
    if (seen(r, er_yaml_strlist(&r->y, layout, "group_sizes", 1, &v, &count, r->d)) != 0)
        return;
    if (count == 0 || count > ER_MANIFEST_MAX_GROUP_SIZES)
        fail_field(r, n, "group_sizes", "%s; list from 1 to %d group sizes, or write 'any'",
                   count ? "too many" : "the list is empty", ER_MANIFEST_MAX_GROUP_SIZES);
    for (size_t i = 0; i < count && count <= ER_MANIFEST_MAX_GROUP_SIZES; i++) {
        char *end = NULL;
        errno = 0;
        unsigned long g = strtoul(v[i], &end, 10);
        if (v[i][0] < '1' || v[i][0] > '9' || *end || errno || g > 65536) {
            char what[48];
            snprintf(what, sizeof what, "group_sizes[%zu]", i);
            fail_field(r, er_yaml_node(&r->y, n->data.sequence.items.start[i]), what,
                       "expected a whole number from 1 to 65536, got '%s'", v[i]);
            continue;
        }
        m->group_sizes[m->n_group_sizes++] = (uint32_t)g;
    }
    er_strlist_free(v);
    int has_own = 0;
    for (unsigned i = 0; i < m->n_group_sizes; i++)
        has_own |= m->group_sizes[i] == (uint32_t)m->group_size;
    if (!has_own && count > 0 && m->n_group_sizes == count)
        fail_field(r, n, "group_sizes", "does not hold group_size %d, the layout's own group",
                   m->group_size);
}

static void read_layout(mreader *r, yaml_node_t *root, er_manifest *m)
{
    yaml_node_t *layout = NULL;
    if (seen(r, er_yaml_map(&r->y, root, "layout", 1, &layout, r->d)) != 0)
        return;
    r->y.section = "layout";
    seen(r, er_yaml_check_keys(&r->y, layout, er_manifest_layout_keys, r->d));
    long long v = 0;

    text(r, layout, "format", 1, &m->layout_format);
    if (integer(r, layout, "weight_bits", 1, 1, 32, &v) == 0)
        m->weight_bits = (int)v;
    if (integer(r, layout, "group_size", 0, 0, 65536, &v) == 0)
        m->group_size = (int)v;
    boolean(r, layout, "symmetric", 1, &m->symmetric);
    read_group_sizes(r, layout, m);
    boolean(r, layout, "partial_groups", 0, &m->partial_groups);

    int dtype_width = 0;
    int dtype_rc = read_dtype(r, layout, "activation_dtype", 1, &m->activation_dtype, &dtype_width);
    if (integer(r, layout, "activation_bits", 0, 1, 32, &v) == 0) {
        if (dtype_rc == 0 && v != dtype_width)
            fail_field(r, er_yaml_get(&r->y, layout, "activation_bits"), "activation_bits",
                       "%lld disagrees with activation_dtype %s, which has %d bits; give %d or "
                       "leave the field out",
                       v, m->activation_dtype, dtype_width, dtype_width);
        m->activation_bits = (int)v;
    } else if (dtype_rc == 0) {
        m->activation_bits = dtype_width;
    }
    if (integer(r, layout, "activation_group_size", 0, 0, 65536, &v) == 0) {
        if (dtype_rc == 0 && m->activation_bits != 8)
            fail_field(r, er_yaml_get(&r->y, layout, "activation_group_size"),
                       "activation_group_size",
                       "is the span of an int8 activation scale; activation_dtype %s is not "
                       "int8: leave the field out",
                       m->activation_dtype);
        m->activation_group_size = (int)v;
    }

    number(r, layout, "bits_per_weight", 1, 0.0, 1, 32.0, "greater than 0 and at most 32",
           &m->bits_per_weight);
    int unused = 0;
    read_dtype(r, layout, "fallback_dtype", 0, &m->fallback_dtype, &unused);
    r->y.section = NULL;
}

static void read_declared(mreader *r, yaml_node_t *root, er_manifest *m)
{
    yaml_node_t *dec = NULL;
    if (seen(r, er_yaml_map(&r->y, root, "declared", 0, &dec, r->d)) != 0)
        return;
    r->y.section = "declared";
    seen(r, er_yaml_check_keys(&r->y, dec, er_manifest_declared_keys, r->d));
    edgert_figures *f = &m->declared;
    int given = 0;
    given += number(r, dec, "decode_tokens_per_s", 0, 0.0, 0, INFINITY, "0 or more",
                    &f->decode_tokens_per_s) != 1;
    given += number(r, dec, "prefill_gflops", 0, 0.0, 0, INFINITY, "0 or more",
                    &f->prefill_gflops) != 1;
    given += number(r, dec, "top1_agreement", 0, 0.0, 0, 1.0, "between 0 and 1",
                    &f->top1_agreement) != 1;
    given += number(r, dec, "kl_mean", 0, 0.0, 0, INFINITY, "0 or more", &f->kl_mean) != 1;
    if (text(r, dec, "measured_on", 0, &m->declared_where) == 1 && given)
        fail(r, dec,
             "missing required field 'declared.measured_on': declared figures must say where "
             "and how they were measured");
    r->y.section = NULL;
}

/* ---- entry points -------------------------------------------------------- */

void er_manifest_free(er_manifest *m)
{
    if (!m)
        return;
    char *owned[] = {
        m->path,       m->dir,           m->name,           m->version,
        m->vendor,     m->library,       m->library_path,   m->processor,
        m->layout_format, m->activation_dtype, m->fallback_dtype, m->plugin_options,
        m->plugin_name, m->rationale,    m->notes,          m->declared_where,
    };
    for (size_t i = 0; i < sizeof owned / sizeof owned[0]; i++)
        free(owned[i]);
    memset(m, 0, sizeof *m);
}

edgert_status er_manifest_load(const char *path, er_manifest *out, er_diags *d)
{
    if (!out)
        return EDGERT_E_USAGE;
    memset(out, 0, sizeof *out);
    if (!path || !*path) {
        er_diag_add(d, EDGERT_LOG_ERROR, NULL, 0, 0, "manifest path is empty");
        return EDGERT_E_USAGE;
    }

    mreader r;
    memset(&r, 0, sizeof r);
    r.d = d;
    er_manifest m;
    memset(&m, 0, sizeof m);
    m.declared.decode_tokens_per_s = NAN;
    m.declared.prefill_gflops = NAN;
    m.declared.top1_agreement = NAN;
    m.declared.kl_mean = NAN;

    edgert_status st = er_yaml_load_max(&r.y, path, ER_MANIFEST_MAX_BYTES, d);
    if (st != EDGERT_OK)
        return st; /* reported; er_yaml_load keeps nothing on failure */

    m.path = er_strdup(path);
    /* `library` is relative to the folder the manifest file really is in:
     * a manifest that is a symlink (published into a backends folder) is
     * read next to its library, and stamping reads it the same way
     * (checksum.c); a folder that is a link already is that folder */
    struct stat ls;
    char *real = lstat(path, &ls) == 0 && S_ISLNK(ls.st_mode) ? realpath(path, NULL) : NULL;
    m.dir = dir_of(real ? real : path);
    free(real);
    if (!m.path || !m.dir) {
        out_of_memory(&r);
        goto out;
    }
    yaml_node_t *root = er_yaml_root(&r.y);
    if (root->type != YAML_MAPPING_NODE) {
        fail(&r, root,
             "the top level of a manifest must be a mapping of fields (name: value, ...), got %s",
             root->type == YAML_SEQUENCE_NODE ? "a list" : "a single value");
        goto out;
    }
    if (read_manifest_version(&r, root) == -2)
        goto out;
    seen(&r, er_yaml_check_keys(&r.y, root, er_manifest_top_keys, d));
    r.library_misspelt = er_yaml_misspelt(&r.y, root, er_manifest_top_keys, "library");

    read_identity(&r, root, &m);
    read_library(&r, root, &m);
    read_target(&r, root, &m);
    read_layout(&r, root, &m);
    boolean(&r, root, "runs_in_process", 1, &m.runs_in_process);
    boolean(&r, root, "verified", 1, &m.verified);
    text(&r, root, "rationale", 1, &m.rationale);
    seen(&r, er_yaml_str(&r.y, root, "notes", 0, &m.notes, d));
    seen(&r, er_yaml_str(&r.y, root, "plugin_options", 0, &m.plugin_options, d));
    read_declared(&r, root, &m);
    /* A backend with no code is a recommendation for the device's
     * accelerator (gpu-dense: keep the model dtype on a GPU); it can never
     * run "live" on the CPU, so a CPU manifest without a library is a
     * mistake, not a backend. Checked whatever else is wrong (every error
     * in one pass), but only when 'library' is absent: a 'library' with an
     * error of its own has that error. */
    if (!er_yaml_get(&r.y, root, "library") && !r.library_misspelt && m.processor &&
        strcmp(m.processor, "cpu") == 0) {
        yaml_node_t *at = er_yaml_get(&r.y, root, "processor");
        fail(&r, at ? at : root,
             "a manifest without 'library' is a declarative backend for an accelerator: "
             "'processor' must be gpu or npu (a CPU backend needs its library)");
    }

out:
    er_yaml_free(&r.y);
    if (r.nomem)
        st = EDGERT_E_NOMEM;
    else if (r.errors)
        st = EDGERT_E_PARSE;
    if (st != EDGERT_OK) {
        er_manifest_free(&m);
        return st;
    }
    m.declared.where = m.declared_where;
    *out = m;
    return EDGERT_OK;
}
