/*
 * tests/weights/test_checkpoint_bad.c — the "bad input" corpus of checkpoints: every
 * malformed file (truncated, overlapping or lying offsets, shapes that
 * overflow, wrong dtypes, GPTQ tensors that disagree, a g_idx that is not a
 * permutation of the groups, a huge header, NaN/Inf scales, bad settings,
 * malformed packed files) yields its own error naming the file and the
 * tensor, and no crash, no out-of-bounds read (the ASan/UBSan build runs
 * this too), no output file and no temporary file.
 *
 * Each case is one cmocka test, built from a literal JSON header (single
 * quotes stand for double quotes, to keep the table readable) and data from
 * a builder, then checked three ways:
 *   - edgert_checkpoint_open returns the case's status (and, when it opens,
 *     edgert_checkpoint_layer_weights of layer 0 returns the case's status),
 *     with a message holding the file's path, the tensor and the case's own
 *     words;
 *   - `edgert quantize FILE OUT --asym` (only where quantize reads the file:
 *     dense cases, and container errors that fail before the GPTQ check) and
 *     `edgert pack FILE --backend ref-w4a16 -o OUT` exit with the case's
 *     code (4 for every input that cannot be taken: missing, malformed or
 *     refused; quantize's E_USAGE 2), say the same, show no sanitizer
 *     report, and leave the folder as it was: no OUT, no quantize_config.json,
 *     no "*.tmp.*" file.
 *
 * The valid GPTQ layer the cases mutate: W[N=16][K=256], group 128 (G = 2),
 *   P.qweight I32 [32][16] bytes [0, 2048)
 *   P.qzeros  I32 [2][2]   bytes [2048, 2064)   every stored zero 7 (z = 8)
 *   P.scales  F16 [2][16]  bytes [2064, 2128)   every scale 0.0625
 *   P.g_idx   I32 [256]    bytes [2128, 3152)   k / 128
 * followed by zero bytes up to 4096, where a case puts a tensor it replaces.
 */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <cmocka.h>

#include "common/internal.h"
#include "test_util.h"
#include "test_cli_util.h"

/* ---- data ------------------------------------------------------------------------------- */

#define DATA_MAX 32768
#define OFF_QZ 2048
#define OFF_SC 2064
#define OFF_GI 2128
#define GPTQ_BYTES 4096
#define DENSE_F32_BYTES (16 * 256 * 4)

typedef size_t (*builder)(unsigned char *d);

static void put16(unsigned char *p, uint16_t v)
{
    p[0] = (unsigned char)v, p[1] = (unsigned char)(v >> 8);
}

static void put32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static void put64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static size_t b_gptq(unsigned char *d)
{
    memset(d, 0, GPTQ_BYTES);
    for (uint32_t i = 0; i < 32 * 16; i++)
        put32(d + 4 * i, i * 2654435761u);
    for (int i = 0; i < 4; i++)
        put32(d + OFF_QZ + 4 * i, 0x77777777u);
    for (int i = 0; i < 2 * 16; i++)
        put16(d + OFF_SC + 2 * i, 0x2C00u); /* 0.0625 */
    for (uint32_t k = 0; k < 256; k++)
        put32(d + OFF_GI + 4 * k, k / 128);
    return GPTQ_BYTES;
}

static size_t b_short(unsigned char *d) /* ends inside P.g_idx */
{
    b_gptq(d);
    return 3000;
}

static size_t b_scale_nan(unsigned char *d) /* scales[1][3] */
{
    b_gptq(d);
    put16(d + OFF_SC + 2 * (1 * 16 + 3), 0x7E00u);
    return GPTQ_BYTES;
}

static size_t b_scale_inf(unsigned char *d) /* scales[0][15] */
{
    b_gptq(d);
    put16(d + OFF_SC + 2 * 15, 0x7C00u);
    return GPTQ_BYTES;
}

static size_t b_zero15(unsigned char *d) /* qzeros[1][0], nibble 2: group 1, row 2 */
{
    b_gptq(d);
    put32(d + OFF_QZ + 4 * 2, 0x77777F77u);
    return GPTQ_BYTES;
}

static size_t b_zero6(unsigned char *d) /* qzeros[0][1], nibble 3: group 0, row 11, z = 6 */
{
    b_gptq(d);
    put32(d + OFF_QZ + 4 * 1, 0x77775777u);
    return GPTQ_BYTES;
}

static size_t b_gidx_2(unsigned char *d) /* g_idx[5] = 2, with G = 2 */
{
    b_gptq(d);
    put32(d + OFF_GI + 4 * 5, 2);
    return GPTQ_BYTES;
}

static size_t b_gidx_neg(unsigned char *d) /* g_idx[7] = -1 */
{
    b_gptq(d);
    put32(d + OFF_GI + 4 * 7, 0xFFFFFFFFu);
    return GPTQ_BYTES;
}

static size_t b_gidx_count(unsigned char *d) /* g_idx[200] = 0: group 0 gets 129 inputs */
{
    b_gptq(d);
    put32(d + OFF_GI + 4 * 200, 0);
    return GPTQ_BYTES;
}

static size_t b_gidx_act(unsigned char *d) /* inputs 0 and 255 swap groups: act order */
{
    b_gptq(d);
    put32(d + OFF_GI, 1);
    put32(d + OFF_GI + 4 * 255, 0);
    return GPTQ_BYTES;
}

static size_t b_zeros(unsigned char *d)
{
    memset(d, 0, 4096);
    return 4096;
}

static size_t b_zeros_8k(unsigned char *d) /* a packed layer, then its order (all 0) */
{
    memset(d, 0, 8192);
    return 8192;
}

/* W[16][256] F32, finite, and 16 spare bytes after it. */
static size_t b_dense(unsigned char *d)
{
    for (uint32_t i = 0; i < 16 * 256; i++) {
        float v = (float)((int)(i * 37u % 201u) - 100) / 1000.0f;
        memcpy(d + 4 * i, &v, 4);
    }
    memset(d + DENSE_F32_BYTES, 0, 16);
    return DENSE_F32_BYTES + 16;
}

static size_t b_dense_nan(unsigned char *d) /* W[3][100] = NaN */
{
    b_dense(d);
    put32(d + 4 * (3 * 256 + 100), 0x7FC00000u);
    return DENSE_F32_BYTES;
}

static size_t b_dense_huge(unsigned char *d) /* +-1e30: finite, but no fp16 scale holds it */
{
    for (uint32_t i = 0; i < 16 * 256; i++) {
        float v = i % 2 ? 1e30f : -1e30f;
        memcpy(d + 4 * i, &v, 4);
    }
    return DENSE_F32_BYTES;
}

static size_t b_f16_inf(unsigned char *d) /* W[16][256] F16 of 0.0625, W[7][0] = +Inf */
{
    for (uint32_t i = 0; i < 16 * 256; i++)
        put16(d + 2 * i, 0x2C00u);
    put16(d + 2 * (7 * 256), 0x7C00u);
    return 16 * 256 * 2;
}

/* Whole files (no header of ours): */
static size_t f_empty(unsigned char *d)
{
    (void)d;
    return 0;
}

static size_t f_seven(unsigned char *d)
{
    memcpy(d, "\x10\0\0\0\0\0\0", 7);
    return 7;
}

static size_t f_hlen_past(unsigned char *d) /* says 1000 bytes of header, has 2 */
{
    put64(d, 1000);
    memcpy(d + 8, "{}", 2);
    return 10;
}

static size_t f_hlen_huge(unsigned char *d) /* says 200 MB of header */
{
    put64(d, 200000000);
    return 8;
}

/* ---- the corpus ----------------------------------------------------------------------- */

/* The valid layer's entries ('...' is "..." in the file). */
#define QW "'P.qweight':{'dtype':'I32','shape':[32,16],'data_offsets':[0,2048]}"
#define QZ "'P.qzeros':{'dtype':'I32','shape':[2,2],'data_offsets':[2048,2064]}"
#define SC "'P.scales':{'dtype':'F16','shape':[2,16],'data_offsets':[2064,2128]}"
#define GI "'P.g_idx':{'dtype':'I32','shape':[256],'data_offsets':[2128,3152]}"
#define META_(bits, group, sym)                                                                   \
    "'__metadata__':{'checkpoint_format':'gptq','bits':'" bits "','group_size':'" group           \
    "','sym':'" sym "','desc_act':'false'}"
#define META META_("4", "128", "false")
#define GPTQ_WITH(qw, qz, sc, gi) "{" META "," qw "," qz "," sc "," gi "}"
#define GPTQ GPTQ_WITH(QW, QZ, SC, GI)
#define NOMETA_WITH(qw, qz, sc, gi) "{" qw "," qz "," sc "," gi "}"
#define DENSE "'P.weight':{'dtype':'F32','shape':[16,256],'data_offsets':[0,16384]}"
#define W22(b, e) "'P.weight':{'dtype':'F32','shape':[2,2],'data_offsets':[" #b "," #e "]}"
#define PACKED_META(v) "{'__metadata__':{'edgert_packed_format':'" v "'"
#define PACKED_T(name) "'" name "':{'dtype':'U8','shape':[4096],'data_offsets':[0,4096]}}"
/* A sound packed file of one layer P (the key then `tail`), its tensor
 * P.packed; the header's last '}' left to the case. */
#define PACKED_SOUND(tail)                                                                        \
    PACKED_META("1") ",'backend':'b','layout':'l/1','plugin_xxh3':'0123456789abcdef',"           \
                     "'layer:P':'n=16 k=256 group=128 sym=0 bytes=4096 source=0123456789abcdef" \
        tail "'},'P.packed':{'dtype':'U8','shape':[4096],'data_offsets':[0,4096]}"
/* A layer's order after P.packed: I32 [n], ending at byte `end` = 4096 + 4 n. */
#define PERM_T(name, n, end)                                                                      \
    "'" name "':{'dtype':'I32','shape':[" #n "],'data_offsets':[4096," #end "]}"
#define B10 "[[[[[[[[[["
#define E10 "]]]]]]]]]]"

#define PARSE EDGERT_E_PARSE
#define UNSUP EDGERT_E_UNSUPPORTED

typedef struct ck_case {
    const char *name;
    const char *header;       /* '...' for "..."; NULL: `data` writes the whole file */
    builder data;             /* NULL (with header NULL): no file at all */
    unsigned align;           /* header padded so that the data start at a multiple of it */
    const char *cfg;          /* quantize_config.json beside the file (then its path is named) */
    edgert_status open_st;    /* edgert_checkpoint_open */
    edgert_status layer_st;   /* edgert_checkpoint_layer_weights of layer 0, when it opens */
    const char *tensor;       /* every message names it; NULL: no tensor is at fault */
    const char *want[3];      /* and says these */
    int quantize, pack;       /* exit codes of the commands; 0: not run */
    int folder;               /* the path is a folder (header and data NULL) */
} ck_case;

#define C(nm, hdr, dat) .name = nm, .header = hdr, .data = dat

static ck_case cases[] = {
    /* the container (core/formats/safetensors.c) */
    {C("empty_file", NULL, f_empty), .open_st = PARSE,
     .want = {"shorter than the 8-byte header length"}, .quantize = 4, .pack = 4},
    {C("seven_bytes", NULL, f_seven), .open_st = PARSE,
     .want = {"shorter than the 8-byte header length"}, .quantize = 4, .pack = 4},
    {C("header_length_past_end", NULL, f_hlen_past), .open_st = PARSE,
     .want = {"header length 1000 does not fit the file (10 bytes)"}, .quantize = 4, .pack = 4},
    {C("header_over_100MB", NULL, f_hlen_huge), .open_st = PARSE,
     .want = {"header length 200000000 exceeds the 100 MB limit"}, .quantize = 4, .pack = 4},
    {C("header_not_json", "this is not JSON", NULL), .open_st = PARSE,
     .want = {"bad safetensors header", "must be a JSON object"}, .quantize = 4, .pack = 4},
    {C("header_cut_short", "{'P.weight':{'dtype':'F32','shape':[16,256]", NULL), .open_st = PARSE,
     .tensor = "P.weight", .want = {"bad safetensors header", "expected ',' or '}'"},
     .quantize = 4, .pack = 4},
    {C("header_trailing_bytes", "{} x", NULL), .open_st = PARSE,
     .want = {"trailing bytes after the JSON object"}, .quantize = 4, .pack = 4},
    {C("data_truncated", GPTQ, b_short), .open_st = PARSE, .tensor = "P.g_idx",
     .want = {"data_offsets [2128, 3152] outside the data section (3000 bytes", "truncated"},
     .quantize = 4, .pack = 4},
    {C("tensors_overlap",
       GPTQ_WITH(QW, QZ, "'P.scales':{'dtype':'F16','shape':[2,16],'data_offsets':[2000,2064]}",
                 GI), b_gptq), .open_st = PARSE, .tensor = "P.scales",
     .want = {"'P.qweight' [0, 2048)", "[2000, 2064) overlap"}, .quantize = 4, .pack = 4},
    {C("offsets_lie",
       GPTQ_WITH(QW, QZ, "'P.scales':{'dtype':'F16','shape':[2,16],'data_offsets':[2064,2100]}",
                 GI), b_gptq), .open_st = PARSE, .tensor = "P.scales",
     .want = {"36 bytes of data for shape x F16 = 64 bytes"}, .quantize = 4, .pack = 4},
    {C("offsets_reversed",
       GPTQ_WITH(QW, "'P.qzeros':{'dtype':'I32','shape':[2,2],'data_offsets':[2064,2048]}", SC,
                 GI), b_gptq), .open_st = PARSE, .tensor = "P.qzeros",
     .want = {"data_offsets [2064, 2048] outside the data section"}, .quantize = 4, .pack = 4},
    {C("offset_negative",
       GPTQ_WITH(QW, "'P.qzeros':{'dtype':'I32','shape':[2,2],'data_offsets':[-1,15]}", SC, GI),
       b_gptq), .open_st = PARSE, .tensor = "P.qzeros",
     .want = {"expected a non-negative integer"}, .quantize = 4, .pack = 4},
    {C("shape_product_overflows",
       "{'P.weight':{'dtype':'F32','shape':[4294967296,4294967296,4],'data_offsets':[0,16]}}",
       b_zeros), .open_st = PARSE, .tensor = "P.weight",
     .want = {"shape too large (overflows)"}, .quantize = 4, .pack = 4},
    {C("shape_dim_over_64_bits",
       "{'P.weight':{'dtype':'F32','shape':[18446744073709551616],'data_offsets':[0,16]}}",
       b_zeros), .open_st = PARSE, .tensor = "P.weight",
     .want = {"integer overflows 64 bits"}, .quantize = 4, .pack = 4},
    {C("duplicate_name", "{" W22(0, 16) "," W22(16, 32) "}", b_zeros), .open_st = PARSE,
     .tensor = "P.weight", .want = {"appears twice"}, .quantize = 4, .pack = 4},
    {C("nesting_too_deep",
       "{'P.weight':{'dtype':'F32','shape':[2,2],'data_offsets':[0,16],'x':" B10 B10 B10 B10 "1"
       E10 E10 E10 E10 "}}", b_zeros), .open_st = PARSE, .tensor = "P.weight",
     .want = {"nesting deeper than 32 levels"}, .quantize = 4, .pack = 4},
    {C("metadata_twice", "{'__metadata__':{},'__metadata__':{}}", NULL), .open_st = PARSE,
     .want = {"\"__metadata__\" appears twice"}, .quantize = 4, .pack = 4},
    {C("metadata_key_twice",
       "{'__metadata__':{'checkpoint_format':'gptq','bits':'4','bits':'8'}," QW "," QZ "," SC "," GI
       "}", b_gptq), .open_st = PARSE, .want = {"metadata key 'bits' appears twice"},
     .quantize = 4, .pack = 4},
    {C("metadata_not_a_string", "{'__metadata__':{'bits':4}," QW "}", b_gptq), .open_st = PARSE,
     .want = {"value is not a string"}, .quantize = 4, .pack = 4},
    {C("no_linear_layer", "{}", NULL), .open_st = PARSE, .want = {"no linear layer"},
     .quantize = 4, .pack = 4},
    {C("missing_file", NULL, NULL), .open_st = EDGERT_E_IO,
     .want = {"No such file"}, .quantize = 4, .pack = 4},
    /* readable, yet no file: an I/O error, not a parse error (was E_PARSE) */
    {C("a_folder", NULL, NULL), .folder = 1, .open_st = EDGERT_E_IO,
     .want = {"not a regular file"}, .quantize = 4, .pack = 4},

    /* GPTQ tensors (core/weights/checkpoint.c) */
    {C("qweight_f32",
       GPTQ_WITH("'P.qweight':{'dtype':'F32','shape':[32,16],'data_offsets':[0,2048]}", QZ, SC,
                 GI), b_gptq), .open_st = PARSE, .tensor = "P.qweight",
     .want = {"is F32 [32][16]", "expected I32 [K/8][N]"}, .pack = 4},
    {C("qweight_1d",
       GPTQ_WITH("'P.qweight':{'dtype':'I32','shape':[512],'data_offsets':[0,2048]}", QZ, SC, GI),
       b_gptq), .open_st = PARSE, .tensor = "P.qweight",
     .want = {"is I32 [512]", "expected I32 [K/8][N]"}, .pack = 4},
    {C("qweight_unknown_dtype",
       GPTQ_WITH("'P.qweight':{'dtype':'Q4','shape':[32,16],'data_offsets':[0,2048]}", QZ, SC, GI),
       b_gptq), .open_st = PARSE, .tensor = "P.qweight",
     .want = {"is Q4 [32][16]", "expected I32 [K/8][N]"}, .pack = 4},
    {C("scales_n_plus_1",
       GPTQ_WITH(QW, QZ, "'P.scales':{'dtype':'F16','shape':[2,17],'data_offsets':[3152,3220]}",
                 GI), b_gptq), .open_st = PARSE, .tensor = "P.scales",
     .want = {"is F16 [2][17]", "N = 16 (from qweight)"}, .pack = 4},
    {C("scales_i32",
       GPTQ_WITH(QW, QZ, "'P.scales':{'dtype':'I32','shape':[2,16],'data_offsets':[3152,3280]}",
                 GI), b_gptq), .open_st = PARSE, .tensor = "P.scales",
     .want = {"is I32 [2][16]", "expected F16 [G][N]"}, .pack = 4},
    {C("qzeros_n8_plus_1",
       GPTQ_WITH(QW, "'P.qzeros':{'dtype':'I32','shape':[2,3],'data_offsets':[3152,3176]}", SC,
                 GI), b_gptq), .open_st = PARSE, .tensor = "P.qzeros",
     .want = {"is I32 [2][3]", "expected I32 [2][2]"}, .pack = 4},
    {C("qzeros_rows_disagree",
       GPTQ_WITH(QW, "'P.qzeros':{'dtype':'I32','shape':[3,2],'data_offsets':[3152,3176]}", SC,
                 GI), b_gptq), .open_st = PARSE, .tensor = "P.qzeros",
     .want = {"is I32 [3][2]", "G from scales"}, .pack = 4},
    {C("scales_rows_vs_group_size", "{" META_("4", "64", "false") "," QW "," QZ "," SC "," GI "}",
       b_gptq), .open_st = PARSE, .tensor = "P.scales",
     .want = {"has 2 groups (rows)", "group size 64 (metadata) gives 4 for K = 256"}, .pack = 4},
    {C("scales_rows_not_dividing_k",
       NOMETA_WITH(QW, "'P.qzeros':{'dtype':'I32','shape':[3,2],'data_offsets':[3152,3176]}",
                   "'P.scales':{'dtype':'F16','shape':[3,16],'data_offsets':[3176,3272]}", GI),
       b_gptq), .open_st = PARSE, .tensor = "P.scales",
     .want = {"K = 256 is not a multiple of its 3 groups", "inferred from the tensors"},
     .pack = 4},
    {C("qweight_alone", "{" META "," QW "," GI "}", b_gptq), .open_st = PARSE,
     .tensor = "P.qzeros", .want = {"P.qweight without P.qzeros"}, .pack = 4},
    {C("qweight_without_scales", "{" META "," QW "," QZ "," GI "}", b_gptq), .open_st = PARSE,
     .tensor = "P.scales", .want = {"P.qweight without P.scales"}, .pack = 4},
    {C("g_idx_shape",
       GPTQ_WITH(QW, QZ, SC, "'P.g_idx':{'dtype':'I32','shape':[255],'data_offsets':[2128,3148]}"),
       b_gptq), .open_st = PARSE, .tensor = "P.g_idx",
     .want = {"is I32 [255]", "expected I32 [256]"}, .pack = 4},
    {C("g_idx_value_is_G", GPTQ, b_gidx_2), .open_st = PARSE, .tensor = "P.g_idx",
     .want = {"[5] = 2: not a group (0..1)"}, .pack = 4},
    {C("g_idx_negative", GPTQ, b_gidx_neg), .open_st = PARSE, .tensor = "P.g_idx",
     .want = {"[7] = -1: not a group"}, .pack = 4},
    {C("g_idx_not_a_permutation", GPTQ, b_gidx_count), .open_st = PARSE, .tensor = "P.g_idx",
     .want = {"not a permutation of the groups", "group 0 has 129 inputs, not 128"}, .pack = 4},
    /* act order opens (test_checkpoint_act_order runs it); the version-1
     * call, whose codes would lack their order, refuses the layer */
    {C("g_idx_act_order", GPTQ, b_gidx_act), .open_st = EDGERT_OK, .layer_st = UNSUP,
     .tensor = "P.g_idx", .want = {"act-order", "edgert_checkpoint_layer_weights_v2"}},
    /* act-order said, with no g_idx to run it by (it ran as if in order) */
    {C("desc_act_without_g_idx",
       "{'__metadata__':{'checkpoint_format':'gptq','bits':'4','group_size':'128','sym':'false',"
       "'desc_act':'true'}," QW "," QZ "," SC "}", b_gptq), .open_st = UNSUP, .tensor = "P",
     .want = {"desc_act: true (act-order)", "no 'P.g_idx'"}, .pack = 4},
    {C("scale_nan", GPTQ, b_scale_nan), .open_st = PARSE, .tensor = "P.scales",
     .want = {"[1][3] is NaN"}, .pack = 4},
    {C("scale_inf", GPTQ, b_scale_inf), .open_st = PARSE, .tensor = "P.scales",
     .want = {"[0][15] is infinite"}, .pack = 4},
    {C("v1_zero_point_16", GPTQ, b_zero15), .open_st = PARSE, .tensor = "P.qzeros",
     .want = {"[1][0]: group 1, row 2 stores 15", "zero point of 16 in GPTQ v1"}, .pack = 4},
    {C("sym_with_zero_point_6", "{" META_("4", "128", "true") "," QW "," QZ "," SC "," GI "}",
       b_zero6), .open_st = PARSE, .tensor = "P.qzeros",
     .want = {"sym is true (metadata)", "group 0, row 11 is 6, not 8"}, .pack = 4},

    /* GPTQ settings */
    {C("metadata_bits_8", "{" META_("8", "128", "false") "," QW "," QZ "," SC "," GI "}",
       b_gptq), .open_st = UNSUP, .want = {"'bits' is '8'", "4-bit GPTQ"}, .pack = 4},
    {C("metadata_group_size_abc", "{" META_("4", "abc", "false") "," QW "," QZ "," SC "," GI "}",
       b_gptq), .open_st = PARSE, .want = {"'group_size' is 'abc'"}, .pack = 4},
    {C("metadata_sym_maybe", "{" META_("4", "128", "maybe") "," QW "," QZ "," SC "," GI "}",
       b_gptq), .open_st = PARSE, .want = {"'sym' is 'maybe', not true or false"}, .pack = 4},
    {C("metadata_format_v3",
       "{'__metadata__':{'checkpoint_format':'gptq_v3'}," QW "," QZ "," SC "," GI "}", b_gptq),
     .open_st = PARSE, .want = {"'checkpoint_format' is 'gptq_v3', not gptq or gptq_v2"},
     .pack = 4},
    {C("config_json_group_size_x", NOMETA_WITH(QW, QZ, SC, GI), b_gptq),
     .cfg = "{\"bits\": 4, \"group_size\": \"x\"}", .open_st = PARSE,
     .want = {"quantize_config.json:1:", "'group_size' is 'x'"}, .pack = 4},
    {C("config_json_cut_short", NOMETA_WITH(QW, QZ, SC, GI), b_gptq), .cfg = "{\"bits\": 4",
     .open_st = PARSE, .want = {"quantize_config.json:", "did not find expected"}, .pack = 4},

    /* dense: values are checked when converted (open succeeds) */
    {C("dense_nan_weight", "{" DENSE "}", b_dense_nan), .layer_st = PARSE, .tensor = "P.weight",
     .want = {"non-finite value"}, .quantize = 4, .pack = 4},
    {C("dense_f16_inf_weight",
       "{'P.weight':{'dtype':'F16','shape':[16,256],'data_offsets':[0,8192]}}", b_f16_inf),
     .layer_st = PARSE, .tensor = "P.weight", .want = {"non-finite value"}, .quantize = 4,
     .pack = 4},
    /* valid, but not for quantize (E_USAGE); pack takes them: a refusal, exit 1 */
    {C("dense_unknown_dtype_beside",
       "{" DENSE ",'x':{'dtype':'F4','shape':[4],'data_offsets':[16384,16386]}}", b_dense),
     .tensor = "'x'", .want = {"dtype 'F4'"}, .quantize = 1},
    {C("dense_beyond_fp16", "{" DENSE "}", b_dense_huge), .tensor = "P.weight",
     .want = {"does not fit fp16"}, .quantize = 1},
    {C("dense_f64_layer_beside", /* copied, it would stay dense unsaid */
       "{" DENSE ",'Q.weight':{'dtype':'F64','shape':[1,2],'data_offsets':[16384,16400]}}",
       b_dense), .tensor = "Q.weight", .want = {"F64"}, .quantize = 1},

    /* packed files (core/weights/packfile.c); quantize does not read them */
    {C("packed_layer_key_missing", PACKED_META("1") "}," PACKED_T("P.packed"), b_zeros),
     .align = 4096, .open_st = PARSE, .tensor = "P.packed",
     .want = {"metadata 'layer:P' is missing"}, .pack = 4},
    {C("packed_layer_key_malformed", PACKED_META("1") ",'layer:P':'n=16 k=abc'},"
       PACKED_T("P.packed"), b_zeros), .align = 4096, .open_st = PARSE, .tensor = "P.packed",
     .want = {"metadata 'layer:P' is 'n=16 k=abc'"}, .pack = 4},
    {C("packed_bytes_past_tensor", PACKED_META("1") ",'layer:P':'n=16 k=256 group=128 sym=0 "
       "bytes=4097 source=0123456789abcdef'}," PACKED_T("P.packed"), b_zeros), .align = 4096,
     .open_st = PARSE, .tensor = "P.packed", .want = {"bytes=4097", "B within the tensor"},
     .pack = 4},
    {C("packed_not_dot_packed", PACKED_META("1") "}," PACKED_T("P.weight"), b_zeros),
     .align = 4096, .open_st = PARSE, .tensor = "P.weight",
     .want = {"is not '<layer>.packed'"}, .pack = 4},
    {C("packed_unaligned", PACKED_META("1") "}," PACKED_T("P.packed"), b_zeros),
     .open_st = PARSE, .want = {"not at a 4096-byte boundary"}, .pack = 4},
    {C("packed_format_99", PACKED_META("99") "}," PACKED_T("P.packed"), b_zeros), .align = 4096,
     .open_st = UNSUP, .want = {"packed-file format '99'", "format 1"}, .pack = 4},
    /* a sound layer, but not what the gates compare: refused at open, not
     * at map time after every backend passed */
    {C("packed_no_backend", PACKED_META("1") ",'layer:P':'n=16 k=256 group=128 sym=0 "
       "bytes=4096 source=0123456789abcdef'}," PACKED_T("P.packed"), b_zeros), .align = 4096,
     .open_st = PARSE, .want = {"a packed file without 'backend' in its metadata"}, .pack = 4},
    {C("packed_bad_plugin_xxh3", PACKED_META("1") ",'backend':'b','layout':'l/1',"
       "'plugin_xxh3':'12345','layer:P':'n=16 k=256 group=128 sym=0 bytes=4096 "
       "source=0123456789abcdef'}," PACKED_T("P.packed"), b_zeros), .align = 4096,
     .open_st = PARSE, .want = {"metadata 'plugin_xxh3' is '12345', not 16 hex digits"},
     .pack = 4},
    /* act order in a packed file: "<P>.perm" and the key's act_order=1, both or neither */
    {C("packed_perm_without_act_order", PACKED_SOUND("") "," PERM_T("P.perm", 256, 5120)
       "}", b_zeros_8k), .align = 4096, .open_st = PARSE, .tensor = "P.perm",
     .want = {"whose metadata does not say act_order=1"}, .pack = 4},
    {C("packed_act_order_without_perm", PACKED_SOUND(" act_order=1") "}", b_zeros),
     .align = 4096, .open_st = PARSE, .tensor = "P.perm",
     .want = {"says act_order=1 but there is no tensor"}, .pack = 4},
    {C("packed_perm_not_a_permutation", PACKED_SOUND(" act_order=1") ","
       PERM_T("P.perm", 256, 5120) "}", b_zeros_8k), .align = 4096, .open_st = PARSE,
     .tensor = "P.perm", .want = {"[1] = 0: not a permutation of 0..255"}, .pack = 4},
    {C("packed_perm_short", PACKED_SOUND(" act_order=1") "," PERM_T("P.perm", 255, 5116)
       "}", b_zeros_8k), .align = 4096, .open_st = PARSE, .tensor = "P.perm",
     .want = {"expected I32 [256]"}, .pack = 4},
    {C("packed_perm_of_no_layer", PACKED_SOUND("") "," PERM_T("Q.perm", 256, 5120) "}",
       b_zeros_8k), .align = 4096, .open_st = PARSE, .tensor = "Q.perm",
     .want = {"the order of no layer"}, .pack = 4},
};

#define NCASES (sizeof cases / sizeof cases[0])

/* ---- the checks ------------------------------------------------------------------------- */

/* The case's file in dir (none for the missing-file case); its malloc'd path. */
static char *write_case(const char *dir, const ck_case *k)
{
    static unsigned char data[DATA_MAX];
    static char h[16384];
    char *path = NULL;
    assert_true(asprintf(&path, "%s/%s.safetensors", dir, k->name) > 0);
    if (k->cfg)
        free(tu_write(dir, "quantize_config.json", "%s\n", k->cfg));
    if (k->folder)
        assert_int_equal(mkdir(path, 0755), 0);
    if (!k->header && !k->data)
        return path;
    size_t n = k->data ? k->data(data) : 0;
    assert_true(n <= DATA_MAX);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    if (k->header) {
        size_t hl = strlen(k->header);
        assert_true(hl + 4096 < sizeof h);
        for (size_t i = 0; i < hl; i++)
            h[i] = k->header[i] == '\'' ? '"' : k->header[i];
        while (k->align && (8 + hl) % k->align)
            h[hl++] = ' ';
        unsigned char lb[8];
        put64(lb, hl);
        assert_int_equal(fwrite(lb, 1, 8, f), 8);
        assert_int_equal(fwrite(h, 1, hl, f), hl);
    }
    assert_int_equal(fwrite(data, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
    return path;
}

/* A message names `file` (the checkpoint, or quantize_config.json for the
 * cases about it), the tensor, and says the case's words. */
static void check_msg(const ck_case *k, const char *who, const char *msg, const char *file)
{
    if (!strstr(msg, file))
        fail_msg("%s: %s: the message does not name the file %s:\n%s", k->name, who, file, msg);
    if (k->tensor && !strstr(msg, k->tensor))
        fail_msg("%s: %s: the message does not name the tensor %s:\n%s", k->name, who,
                 k->tensor, msg);
    for (size_t i = 0; i < 3 && k->want[i]; i++)
        if (!strstr(msg, k->want[i]))
            fail_msg("%s: %s: the message does not say \"%s\":\n%s", k->name, who, k->want[i],
                     msg);
}

static void check_api(const ck_case *k, const char *path, const char *named)
{
    char err[4096] = "";
    edgert_checkpoint *c = NULL;
    edgert_status st = edgert_checkpoint_open(path, &c, err, sizeof err);
    if (st != k->open_st)
        fail_msg("%s: edgert_checkpoint_open: %s, expected %s: %s", k->name,
                 edgert_status_name(st), edgert_status_name(k->open_st), err);
    if (st != EDGERT_OK) {
        assert_null(c);
        check_msg(k, "edgert_checkpoint_open", err, named);
        return;
    }
    assert_true(edgert_checkpoint_layer_count(c) >= 1);
    edgert_qtensor q;
    err[0] = '\0';
    st = edgert_checkpoint_layer_weights(c, 0, &q, err, sizeof err);
    if (st != k->layer_st)
        fail_msg("%s: edgert_checkpoint_layer_weights: %s, expected %s: %s", k->name,
                 edgert_status_name(st), edgert_status_name(k->layer_st), err);
    if (st != EDGERT_OK)
        check_msg(k, "edgert_checkpoint_layer_weights", err, named);
    else
        edgert_qtensor_free(&q);
    edgert_checkpoint_close(c);
}

/* Nothing but the case's own files in dir: no output, no temporary file. */
static void check_dir(const ck_case *k, const char *dir, const char *cmd)
{
    char own[512];
    snprintf(own, sizeof own, "%s.safetensors", k->name);
    DIR *d = opendir(dir);
    assert_non_null(d);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        const char *n = e->d_name;
        if (strcmp(n, ".") && strcmp(n, "..") && strcmp(n, own) &&
            !(k->cfg && !strcmp(n, "quantize_config.json"))) {
            closedir(d);
            fail_msg("%s: `edgert %s` left '%s' in the folder", k->name, cmd, n);
        }
    }
    closedir(d);
}

/* `edgert cmd` exits `want`, saying what the API said, with no sanitizer
 * report, and leaves the folder as it was. */
static void check_cli(const ck_case *k, const char *dir, const char *named, int want,
                      const char *cmd)
{
    char *out = NULL;
    int rc = run_all(cmd, &out);
    if (strstr(out, "Sanitizer") || strstr(out, "runtime error"))
        fail_msg("%s: `edgert %s`: a sanitizer report:\n%s", k->name, cmd, out);
    if (rc != want)
        fail_msg("%s: `edgert %s` exited %d, expected %d:\n%s", k->name, cmd, rc, want, out);
    check_msg(k, cmd, out, named);
    free(out);
    check_dir(k, dir, cmd);
}

static void run_case(void **state)
{
    const ck_case *k = *state;
    char *dir = tu_tmpdir(), *cfg = NULL, cmd[8192];
    assert_non_null(dir);
    char *path = write_case(dir, k);
    assert_true(asprintf(&cfg, "%s/quantize_config.json", dir) > 0);
    const char *named = k->cfg ? cfg : path;
    check_api(k, path, named);
    if (k->quantize) {
        snprintf(cmd, sizeof cmd, "quantize %s %s/out.safetensors --asym", path, dir);
        check_cli(k, dir, named, k->quantize, cmd);
    }
    if (k->pack) {
        snprintf(cmd, sizeof cmd, "pack %s --backend ref-w4a16 -o %s/out.ept", path, dir);
        check_cli(k, dir, named, k->pack, cmd);
    }
    free(cfg);
    free(path);
    tu_rmrf(dir);
}

int main(void)
{
    static struct CMUnitTest tests[NCASES];
    for (size_t i = 0; i < NCASES; i++)
        tests[i] = (struct CMUnitTest){.name = cases[i].name, .test_func = run_case,
                                       .initial_state = &cases[i]};
    return tu_run_group("checkpoint_bad", tests, NULL, NULL);
}
