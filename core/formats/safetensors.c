/*
 * core/formats/safetensors.c — the safetensors reader (safetensors.h has the format,
 * what is checked and who compiles this file); the writer is in
 * safetensors_write.c. This half: the header's JSON (a small validating
 * parser: only what the format uses is accepted, every limit explicit),
 * the entries' checks, the mapping and the reads.
 *
 * Length: one validating parser read top to bottom, with the limits it
 * enforces beside the code that enforces them; split, a check and its limit
 * would live in different files.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "edgert/plugin.h"
#include "formats/safetensors.h"

#define ST_MAX_TENSORS 1000000u
#define ST_MAX_NAME 4096u
#define ST_MAX_DEPTH 32

typedef struct jcur {
    const char *p, *end;
    const char *path;
    char *err;
    size_t len;
    int failed;
} jcur;

static int jfail(jcur *c, const char *what)
{
    if (!c->failed)
        edgert_errf(c->err, c->len, "%s: bad safetensors header: %s", c->path, what);
    c->failed = 1;
    return -1;
}

static void jws(jcur *c)
{
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r'))
        c->p++;
}

static int jexpect(jcur *c, char ch, const char *what)
{
    jws(c);
    if (c->p >= c->end || *c->p != ch)
        return jfail(c, what);
    c->p++;
    return 0;
}

static int hexval(char ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    if (ch >= 'a' && ch <= 'f')
        return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F')
        return ch - 'A' + 10;
    return -1;
}

/* Append byte b to the string being decoded (*s NULL: only count it); on
 * failure *s is freed. Names are bounded: ST_MAX_NAME bytes. */
static int jput(jcur *c, char **s, size_t *n, size_t *cap, unsigned char b)
{
    if (*s && *n + 2 > *cap) {
        char *t = realloc(*s, *cap *= 2);
        if (!t) {
            free(*s);
            *s = NULL;
            return jfail(c, "out of memory");
        }
        *s = t;
    }
    if (*s)
        (*s)[*n] = (char)b;
    (*n)++;
    if (*n > ST_MAX_NAME) {
        free(*s);
        *s = NULL;
        return jfail(c, "string longer than 4096 bytes");
    }
    return 0;
}

/* Code point cp as UTF-8 into u; the number of bytes. */
static int utf8_encode(uint32_t cp, unsigned char u[4])
{
    if (cp < 0x80) {
        u[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        u[0] = (unsigned char)(0xC0 | cp >> 6);
        u[1] = (unsigned char)(0x80 | (cp & 63));
        return 2;
    }
    if (cp < 0x10000) {
        u[0] = (unsigned char)(0xE0 | cp >> 12);
        u[1] = (unsigned char)(0x80 | ((cp >> 6) & 63));
        u[2] = (unsigned char)(0x80 | (cp & 63));
        return 3;
    }
    u[0] = (unsigned char)(0xF0 | cp >> 18);
    u[1] = (unsigned char)(0x80 | ((cp >> 12) & 63));
    u[2] = (unsigned char)(0x80 | ((cp >> 6) & 63));
    u[3] = (unsigned char)(0x80 | (cp & 63));
    return 4;
}

/* The four hex digits after "\u" (c->p at the first), and a low surrogate
 * escape right after a high one, as one code point. A lone surrogate is kept
 * as it is (encoded like any other code point). */
static int junicode(jcur *c, uint32_t *out)
{
    if (c->end - c->p < 4)
        return jfail(c, "short \\u escape");
    uint32_t cp = 0;
    for (int i = 0; i < 4; i++) {
        int h = hexval(c->p[i]);
        if (h < 0)
            return jfail(c, "bad \\u escape");
        cp = cp * 16 + (uint32_t)h;
    }
    c->p += 4;
    if (cp >= 0xD800 && cp <= 0xDBFF && c->end - c->p >= 6 && c->p[0] == '\\' &&
        c->p[1] == 'u') {
        uint32_t lo = 0;
        int ok = 1;
        for (int i = 0; i < 4; i++) {
            int h = hexval(c->p[2 + i]);
            ok &= h >= 0;
            lo = lo * 16 + (uint32_t)(h < 0 ? 0 : h);
        }
        if (ok && lo >= 0xDC00 && lo <= 0xDFFF) {
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            c->p += 6;
        }
    }
    *out = cp;
    return 0;
}

/* The escape after a backslash (c->p just past it) as the bytes it stands
 * for; their number, or -1. */
static int jescape(jcur *c, unsigned char u[4])
{
    if (c->p >= c->end)
        return jfail(c, "unterminated escape");
    unsigned char ch = (unsigned char)*c->p++;
    uint32_t cp;
    switch (ch) {
    case '"': case '\\': case '/': u[0] = ch; return 1;
    case 'b': u[0] = '\b'; return 1;
    case 'f': u[0] = '\f'; return 1;
    case 'n': u[0] = '\n'; return 1;
    case 'r': u[0] = '\r'; return 1;
    case 't': u[0] = '\t'; return 1;
    case 'u':
        if (junicode(c, &cp))
            return -1;
        return utf8_encode(cp, u);
    default:
        return jfail(c, "unknown escape in a string");
    }
}

/* A JSON string into a malloc'd UTF-8 buffer (out may be NULL to skip). */
static int jstring(jcur *c, char **out)
{
    jws(c);
    if (c->p >= c->end || *c->p != '"')
        return jfail(c, "expected a string");
    c->p++;
    size_t cap = 64, n = 0;
    char *s = out ? malloc(cap) : NULL;
    if (out && !s)
        return jfail(c, "out of memory");
    for (;;) {
        if (c->p >= c->end) {
            free(s);
            return jfail(c, "unterminated string");
        }
        unsigned char ch = (unsigned char)*c->p++, u[4];
        if (ch == '"')
            break;
        if (ch < 0x20) {
            free(s);
            return jfail(c, "control character in a string");
        }
        int k = 1;
        u[0] = ch; /* UTF-8 bytes pass through */
        if (ch == '\\' && (k = jescape(c, u)) < 0) {
            free(s);
            return -1;
        }
        for (int i = 0; i < k; i++)
            if (jput(c, &s, &n, &cap, u[i]))
                return -1;
    }
    if (s) {
        s[n] = '\0';
        if (strlen(s) != n) {
            free(s);
            return jfail(c, "NUL character in a string");
        }
        *out = s;
    }
    return 0;
}

/* A non-negative integer without sign, fraction or exponent. */
static int juint(jcur *c, uint64_t *out)
{
    jws(c);
    if (c->p >= c->end || *c->p < '0' || *c->p > '9')
        return jfail(c, "expected a non-negative integer");
    uint64_t v = 0;
    while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
        unsigned d = (unsigned)(*c->p++ - '0');
        if (v > (UINT64_MAX - d) / 10)
            return jfail(c, "integer overflows 64 bits");
        v = v * 10 + d;
    }
    if (c->p < c->end && (*c->p == '.' || *c->p == 'e' || *c->p == 'E'))
        return jfail(c, "expected an integer, found a fraction or exponent");
    *out = v;
    return 0;
}

static int jskip(jcur *c, int depth)
{
    if (depth > ST_MAX_DEPTH)
        return jfail(c, "nesting deeper than 32 levels");
    jws(c);
    if (c->p >= c->end)
        return jfail(c, "unexpected end");
    char ch = *c->p;
    if (ch == '"')
        return jstring(c, NULL);
    if (ch == '{' || ch == '[') {
        char close = ch == '{' ? '}' : ']';
        c->p++;
        jws(c);
        if (c->p < c->end && *c->p == close) {
            c->p++;
            return 0;
        }
        for (;;) {
            if (ch == '{' && (jstring(c, NULL) || jexpect(c, ':', "expected ':'")))
                return -1;
            if (jskip(c, depth + 1))
                return -1;
            jws(c);
            if (c->p < c->end && *c->p == ',') {
                c->p++;
                continue;
            }
            return jexpect(c, close, "expected ',' or a closing bracket");
        }
    }
    static const char *const lits[] = {"true", "false", "null"};
    for (int i = 0; i < 3; i++) {
        size_t l = strlen(lits[i]);
        if ((size_t)(c->end - c->p) >= l && memcmp(c->p, lits[i], l) == 0) {
            c->p += l;
            return 0;
        }
    }
    if (ch == '-' || (ch >= '0' && ch <= '9')) {
        const char *s = c->p;
        while (c->p < c->end && strchr("+-.eE0123456789", *c->p))
            c->p++;
        if (c->p - s > 64)
            return jfail(c, "number longer than 64 characters");
        return 0;
    }
    return jfail(c, "unexpected character");
}

static const struct {
    const char *name;
    st_dtype d;
    unsigned bits;
} dtypes[] = {
    {"F32", ST_F32, 32},   {"F16", ST_F16, 16},   {"BF16", ST_BF16, 16}, {"F64", ST_F64, 64},
    {"I8", ST_I8, 8},      {"U8", ST_U8, 8},      {"I16", ST_I16, 16},   {"U16", ST_U16, 16},
    {"I32", ST_I32, 32},   {"U32", ST_U32, 32},   {"I64", ST_I64, 64},   {"U64", ST_U64, 64},
    {"BOOL", ST_BOOL, 8},  {"I4", ST_I4, 4},      {"U4", ST_U4, 4},      {"F8_E4M3", ST_F8_E4M3, 8},
    {"F8_E5M2", ST_F8_E5M2, 8},
};

unsigned st_dtype_bits(st_dtype d)
{
    for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++)
        if (dtypes[i].d == d)
            return dtypes[i].bits;
    return 0;
}

const char *st_dtype_str(st_dtype d)
{
    for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++)
        if (dtypes[i].d == d)
            return dtypes[i].name;
    return "?";
}

int st_is_float(st_dtype d)
{
    return d == ST_F32 || d == ST_F16 || d == ST_BF16;
}

uint64_t st_numel(const st_tensor *t)
{
    uint64_t n = 1;
    for (uint32_t i = 0; i < t->ndim; i++)
        n *= t->shape[i]; /* overflow was ruled out at open */
    return n;
}

/* "shape": [d0, d1, ...], at most ST_MAX_DIMS non-negative integers. */
static int parse_shape(jcur *c, st_tensor *t)
{
    if (jexpect(c, '[', "shape must be an array"))
        return -1;
    jws(c);
    t->ndim = 0;
    if (c->p < c->end && *c->p == ']') {
        c->p++;
        return 0;
    }
    for (;;) {
        uint64_t d;
        if (t->ndim == ST_MAX_DIMS)
            return jfail(c, "more than 8 dimensions");
        if (juint(c, &d))
            return -1;
        t->shape[t->ndim++] = d;
        jws(c);
        if (c->p < c->end && *c->p == ',') {
            c->p++;
            continue;
        }
        return jexpect(c, ']', "expected ',' or ']' in shape");
    }
}

/* One tensor entry: {"dtype": .., "shape": [..], "data_offsets": [b, e]}. */
static int parse_entry(jcur *c, st_tensor *t)
{
    int have_dtype = 0, have_shape = 0, have_off = 0;
    if (jexpect(c, '{', "a tensor entry must be an object"))
        return -1;
    jws(c);
    if (c->p < c->end && *c->p == '}')
        return jfail(c, "empty tensor entry");
    for (;;) {
        char *key = NULL;
        if (jstring(c, &key) || jexpect(c, ':', "expected ':'")) {
            free(key);
            return -1;
        }
        if (strcmp(key, "dtype") == 0) {
            char *v = NULL;
            if (jstring(c, &v)) {
                free(key);
                return -1;
            }
            snprintf(t->dtype_name, sizeof t->dtype_name, "%s", v);
            t->dtype = ST_UNKNOWN;
            for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++)
                if (strcmp(v, dtypes[i].name) == 0)
                    t->dtype = dtypes[i].d;
            free(v);
            have_dtype = 1;
        } else if (strcmp(key, "shape") == 0) {
            if (parse_shape(c, t)) {
                free(key);
                return -1;
            }
            have_shape = 1;
        } else if (strcmp(key, "data_offsets") == 0) {
            if (jexpect(c, '[', "data_offsets must be an array") || juint(c, &t->begin) ||
                jexpect(c, ',', "data_offsets must have two integers") || juint(c, &t->end) ||
                jexpect(c, ']', "data_offsets must have exactly two integers")) {
                free(key);
                return -1;
            }
            have_off = 1;
        } else if (jskip(c, 2)) {
            free(key);
            return -1;
        }
        free(key);
        jws(c);
        if (c->p < c->end && *c->p == ',') {
            c->p++;
            continue;
        }
        if (jexpect(c, '}', "expected ',' or '}' in a tensor entry"))
            return -1;
        break;
    }
    if (!have_dtype || !have_shape || !have_off)
        return jfail(c, "a tensor entry lacks dtype, shape or data_offsets");
    return 0;
}

static int cmp_begin(const void *a, const void *b)
{
    const st_tensor *x = *(const st_tensor *const *)a, *y = *(const st_tensor *const *)b;
    if (x->begin != y->begin)
        return x->begin < y->begin ? -1 : 1;
    return x->end < y->end ? -1 : x->end > y->end;
}

static int cmp_name(const void *a, const void *b)
{
    return strcmp((*(const st_tensor *const *)a)->name, (*(const st_tensor *const *)b)->name);
}

/* Offsets, sizes, overlaps and duplicate names, once the header parsed. */
static int validate(st_file *sf, char *err, size_t len)
{
    uint64_t data_size = sf->file_size - sf->data_start;
    for (size_t i = 0; i < sf->n; i++) {
        st_tensor *t = &sf->t[i];
        uint64_t numel = 1;
        for (uint32_t d = 0; d < t->ndim; d++) {
            if (t->shape[d] && numel > UINT64_MAX / 8 / t->shape[d]) {
                edgert_errf(err, len, "%s: tensor '%s': shape too large (overflows)", sf->path,
                            t->name);
                return -1;
            }
            numel *= t->shape[d];
        }
        if (t->begin > t->end || t->end > data_size) {
            edgert_errf(err, len, "%s: tensor '%s': data_offsets [%llu, %llu] outside the data "
                                  "section (%llu bytes after the header; truncated file?)",
                        sf->path, t->name, (unsigned long long)t->begin,
                        (unsigned long long)t->end, (unsigned long long)data_size);
            return -1;
        }
        unsigned bits = st_dtype_bits(t->dtype);
        if (bits && t->end - t->begin != (numel * bits + 7) / 8) {
            edgert_errf(err, len, "%s: tensor '%s': %llu bytes of data for shape x %s = %llu bytes",
                        sf->path, t->name, (unsigned long long)(t->end - t->begin), t->dtype_name,
                        (unsigned long long)((numel * bits + 7) / 8));
            return -1;
        }
    }
    if (sf->n < 2)
        return 0;
    st_tensor **v = malloc(sf->n * sizeof *v);
    if (!v) {
        edgert_errf(err, len, "%s: out of memory", sf->path);
        return -1;
    }
    for (size_t i = 0; i < sf->n; i++)
        v[i] = &sf->t[i];
    int rc = 0;
    qsort(v, sf->n, sizeof *v, cmp_begin);
    for (size_t i = 1; i < sf->n && !rc; i++)
        if (v[i]->begin < v[i - 1]->end) {
            edgert_errf(err, len, "%s: tensors '%s' [%llu, %llu) and '%s' [%llu, %llu) overlap",
                        sf->path, v[i - 1]->name, (unsigned long long)v[i - 1]->begin,
                        (unsigned long long)v[i - 1]->end, v[i]->name,
                        (unsigned long long)v[i]->begin, (unsigned long long)v[i]->end);
            rc = -1;
        }
    qsort(v, sf->n, sizeof *v, cmp_name);
    for (size_t i = 1; i < sf->n && !rc; i++)
        if (strcmp(v[i]->name, v[i - 1]->name) == 0) {
            edgert_errf(err, len, "%s: tensor '%s' appears twice", sf->path, v[i]->name);
            rc = -1;
        }
    free(v);
    return rc;
}

static int cmp_meta(const void *a, const void *b)
{
    return strcmp(((const st_meta *)a)->key, ((const st_meta *)b)->key);
}

/* No metadata key twice: readers disagree on which value of a repeated key
 * counts (st_meta_get takes the first, Python's json the last), so a file
 * could say one thing to edgert and another to the tools beside it. Sorted
 * (O(n log n): a 100 MB header holds millions of keys); the order of the
 * keys is no part of the format. */
static int meta_unique(st_file *sf, char *err, size_t len)
{
    if (sf->nmeta < 2)
        return 0;
    qsort(sf->meta, sf->nmeta, sizeof *sf->meta, cmp_meta);
    for (size_t i = 1; i < sf->nmeta; i++)
        if (strcmp(sf->meta[i].key, sf->meta[i - 1].key) == 0) {
            edgert_errf(err, len, "%s: metadata key '%.200s' appears twice", sf->path,
                        sf->meta[i].key);
            return -1;
        }
    return 0;
}

/* One "<name>": {entry} member of the header (key: the name, now owned by
 * the new tensor); a failing entry's message gets the tensor's name. */
static int add_tensor(st_file *sf, jcur *c, char *key, size_t *cap)
{
    if (sf->n == ST_MAX_TENSORS) {
        free(key);
        return jfail(c, "more than a million tensors");
    }
    if (sf->n == *cap) {
        size_t nc = *cap ? *cap * 2 : 64;
        st_tensor *t = realloc(sf->t, nc * sizeof *t);
        if (!t) {
            free(key);
            return jfail(c, "out of memory");
        }
        sf->t = t;
        *cap = nc;
    }
    st_tensor *t = &sf->t[sf->n];
    memset(t, 0, sizeof *t);
    t->name = key;
    sf->n++;
    if (parse_entry(c, t)) {
        char msg[256];
        snprintf(msg, sizeof msg, "%s", c->err);
        edgert_errf(c->err, c->len, "%s (in tensor '%.200s')", msg, key);
        return -1;
    }
    return 0;
}

/* "__metadata__": {"key": "value", ...}, strings only (the format's
 * definition), at most once (*seen: it was already read; sf->meta is not
 * that sign, since an empty object allocates nothing). */
static int parse_meta(st_file *sf, jcur *c, int *seen)
{
    if (*seen)
        return jfail(c, "\"__metadata__\" appears twice");
    *seen = 1;
    if (jexpect(c, '{', "\"__metadata__\" must be an object"))
        return -1;
    size_t cap = 0;
    jws(c);
    if (c->p < c->end && *c->p == '}') {
        c->p++;
        return 0;
    }
    for (;;) {
        if (sf->nmeta == cap) {
            size_t nc = cap ? cap * 2 : 16;
            st_meta *m = nc <= ST_MAX_TENSORS ? realloc(sf->meta, nc * sizeof *m) : NULL;
            if (!m)
                return jfail(c, nc <= ST_MAX_TENSORS ? "out of memory" : "too many metadata keys");
            sf->meta = m;
            cap = nc;
        }
        st_meta *m = &sf->meta[sf->nmeta];
        m->key = m->value = NULL;
        sf->nmeta++;
        if (jstring(c, &m->key) || jexpect(c, ':', "expected ':'"))
            return -1;
        jws(c);
        if (c->p >= c->end || *c->p != '"')
            return jfail(c, "a \"__metadata__\" value is not a string");
        if (jstring(c, &m->value))
            return -1;
        jws(c);
        if (c->p < c->end && *c->p == ',') {
            c->p++;
            continue;
        }
        return jexpect(c, '}', "expected ',' or '}' in \"__metadata__\"");
    }
}

/* The header's JSON object: tensor entries and "__metadata__", nothing
 * after it but whitespace. */
static int parse_header(st_file *sf, jcur *c)
{
    if (jexpect(c, '{', "the header must be a JSON object"))
        return -1;
    size_t cap = 0;
    int seen_meta = 0;
    jws(c);
    if (c->p < c->end && *c->p == '}') {
        c->p++;
    } else {
        for (;;) {
            char *key = NULL;
            if (jstring(c, &key) || jexpect(c, ':', "expected ':'")) {
                free(key);
                return -1;
            }
            if (strcmp(key, "__metadata__") == 0) {
                free(key);
                if (parse_meta(sf, c, &seen_meta))
                    return -1;
            } else if (add_tensor(sf, c, key, &cap)) {
                return -1;
            }
            jws(c);
            if (c->p < c->end && *c->p == ',') {
                c->p++;
                continue;
            }
            if (jexpect(c, '}', "expected ',' or '}' after a tensor"))
                return -1;
            break;
        }
    }
    jws(c);
    if (c->p != c->end)
        return jfail(c, "trailing bytes after the JSON object");
    return 0;
}

/* The 8-byte length and the header's bounds, on the mapping. */
static int check_length(st_file *sf, uint64_t *h, char *err, size_t len)
{
    const char *path = sf->path;
    if (sf->file_size < 8) {
        edgert_errf(err, len, "%s: not a safetensors file (shorter than the 8-byte header "
                              "length)", path);
        return -1;
    }
    *h = 0;
    for (int i = 7; i >= 0; i--)
        *h = *h << 8 | sf->map[i];
    if (*h > ST_MAX_HEADER) {
        edgert_errf(err, len, "%s: header length %llu exceeds the 100 MB limit (not a "
                              "safetensors file, or a hostile one)", path, (unsigned long long)*h);
        return -1;
    }
    if (*h < 2 || *h > sf->file_size - 8) {
        edgert_errf(err, len, "%s: header length %llu does not fit the file (%llu bytes)", path,
                    (unsigned long long)*h, (unsigned long long)sf->file_size);
        return -1;
    }
    return 0;
}

edgert_status st_open(st_file *sf, const char *path, char *err, size_t len)
{
    memset(sf, 0, sizeof *sf);
    sf->path = strdup(path ? path : "");
    if (!sf->path) {
        edgert_errf(err, len, "%s: out of memory", path);
        return EDGERT_E_NOMEM;
    }
    struct stat st;
    edgert_status rc = EDGERT_E_IO; /* until the file is mapped */
    /* O_NONBLOCK: a FIFO named as a checkpoint must not block the open (it
     * is refused below, as not a regular file). Not er_open_regular: this
     * file is also compiled into npu-export, which links nothing of the
     * core's. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        edgert_errf(err, len, "%s: cannot open: %s", path,
                    fd >= 0 ? "not a regular file" : strerror(errno));
        goto fail;
    }
    sf->file_size = (uint64_t)st.st_size;
    if (sf->file_size > 0 && (uint64_t)(size_t)sf->file_size == sf->file_size) {
        void *m = mmap(NULL, (size_t)sf->file_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m == MAP_FAILED) {
            edgert_errf(err, len, "%s: cannot map: %s", path, strerror(errno));
            goto fail;
        }
        sf->map = m;
    }
    close(fd);
    fd = -1;
    rc = EDGERT_E_PARSE; /* from here on, the bytes are at fault */
    uint64_t h;
    if (check_length(sf, &h, err, len))
        goto fail;
    sf->data_start = 8 + h;
    jcur c = {(const char *)sf->map + 8, (const char *)sf->map + 8 + h, path, err, len, 0};
    if (parse_header(sf, &c) || validate(sf, err, len) || meta_unique(sf, err, len))
        goto fail;
    return EDGERT_OK;
fail:
    if (fd >= 0)
        close(fd);
    st_close(sf);
    return rc;
}

void st_close(st_file *sf)
{
    for (size_t i = 0; i < sf->n; i++)
        free(sf->t[i].name);
    for (size_t i = 0; i < sf->nmeta; i++) {
        free(sf->meta[i].key);
        free(sf->meta[i].value);
    }
    if (sf->map)
        munmap((void *)(uintptr_t)sf->map, (size_t)sf->file_size);
    free(sf->t);
    free(sf->meta);
    free(sf->path);
    memset(sf, 0, sizeof *sf);
}

const st_tensor *st_find(const st_file *sf, const char *name)
{
    for (size_t i = 0; i < sf->n; i++)
        if (strcmp(sf->t[i].name, name) == 0)
            return &sf->t[i];
    return NULL;
}

const char *st_meta_get(const st_file *sf, const char *key)
{
    for (size_t i = 0; i < sf->nmeta; i++)
        if (sf->meta[i].key && sf->meta[i].value && strcmp(sf->meta[i].key, key) == 0)
            return sf->meta[i].value;
    return NULL;
}

const void *st_data(const st_file *sf, const st_tensor *t)
{
    return sf->map + sf->data_start + t->begin;
}

void st_release(const st_file *sf, const st_tensor *t)
{
    long pg = sysconf(_SC_PAGESIZE);
    if (!sf->map || !t || pg <= 0)
        return;
    uintptr_t a = (uintptr_t)(sf->map + sf->data_start + t->begin);
    uintptr_t e = (uintptr_t)(sf->map + sf->data_start + t->end);
    a = (a + (uintptr_t)pg - 1) & ~((uintptr_t)pg - 1);
    e &= ~((uintptr_t)pg - 1);
    if (e > a)
        madvise((void *)a, e - a, MADV_DONTNEED);
}

void st_release_near(const st_file *sf, const st_tensor *t)
{
    long pg = sysconf(_SC_PAGESIZE);
    if (!sf->map || !t || pg <= 0)
        return;
    uint64_t a = (sf->data_start + t->begin) & ~(ST_FOLIO_BYTES - 1);
    uint64_t e = (sf->data_start + t->end + ST_FOLIO_BYTES - 1) & ~(ST_FOLIO_BYTES - 1);
    uint64_t mapped = (sf->file_size + (uint64_t)pg - 1) & ~((uint64_t)pg - 1);
    if (e > mapped)
        e = mapped;
    if (e > a)
        madvise((void *)(sf->map + a), e - a, MADV_DONTNEED);
}

float st_f16_to_f32(uint16_t h)
{
    uint32_t s = (uint32_t)(h >> 15) << 31, e = (h >> 10) & 31, m = h & 1023, bits;
    if (e == 31) {
        bits = s | 0x7F800000u | (m << 13);
    } else if (e == 0) {
        if (m == 0) {
            bits = s;
        } else { /* subnormal: normalise */
            e = 113;
            while (!(m & 1024)) {
                m <<= 1;
                e--;
            }
            bits = s | (e << 23) | ((m & 1023) << 13);
        }
    } else {
        bits = s | ((e + 112) << 23) | (m << 13);
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

float st_bf16_to_f32(uint16_t h)
{
    uint32_t b = (uint32_t)h << 16;
    float f;
    memcpy(&f, &b, 4);
    return f;
}

int st_read_f32(const st_file *sf, const st_tensor *t, uint64_t first, uint64_t count, float *out,
                char *err, size_t len)
{
    if (!st_is_float(t->dtype)) {
        edgert_errf(err, len, "%s: tensor '%s' is %s; expected F32, F16 or BF16", sf->path, t->name,
                    t->dtype_name);
        return -1;
    }
    uint64_t numel = st_numel(t);
    if (first > numel || count > numel - first) {
        edgert_errf(err, len, "%s: tensor '%s': elements [%llu, +%llu) outside its %llu",
                    sf->path, t->name, (unsigned long long)first, (unsigned long long)count,
                    (unsigned long long)numel);
        return -1;
    }
    const unsigned char *p = st_data(sf, t);
    if (t->dtype == ST_F32) {
        memcpy(out, p + first * 4, (size_t)count * 4);
        return 0;
    }
    p += first * 2;
    for (uint64_t i = 0; i < count; i++) {
        uint16_t h = (uint16_t)(p[2 * i] | p[2 * i + 1] << 8);
        out[i] = t->dtype == ST_F16 ? st_f16_to_f32(h) : st_bf16_to_f32(h);
    }
    return 0;
}
