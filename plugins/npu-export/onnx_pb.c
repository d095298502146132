/*
 * plugins/npu-export/onnx_pb.c — the protobuf wire format, and the few ONNX
 * messages the export needs, written from the public specifications.
 *
 * Wire format: a message is a sequence of fields, each a key varint
 * (field_number << 3 | wire_type) then the value: wire type 0 a base-128
 * varint (7 bits a byte, least significant group first, high bit = more),
 * wire type 2 a length varint then that many bytes (strings, bytes, nested
 * messages). Repeated fields are simply repeated; onnx.proto is proto2, whose
 * repeated scalars are unpacked by default, so dims are written one key each.
 * A nested message is built in its own buffer, then appended with its length.
 *
 * ONNX field numbers used (onnx.proto, IR version 10):
 *   ModelProto      ir_version 1, producer_name 2, producer_version 3,
 *                   graph 7, opset_import 8, metadata_props 14
 *   OperatorSetId   domain 1, version 2
 *   GraphProto      node 1, name 2, initializer 5, input 11, output 12
 *   NodeProto       input 1, output 2, name 3, op_type 4, attribute 5
 *   AttributeProto  name 1, i 3, type 20 (INT = 2)
 *   TensorProto     dims 1, data_type 2, name 8, raw_data 9,
 *                   external_data 13 (StringStringEntry key 1, value 2),
 *                   data_location 14 (EXTERNAL = 1)
 *   ValueInfoProto  name 1, type 2; TypeProto tensor_type 1;
 *   TypeProto.Tensor elem_type 1, shape 2; TensorShapeProto dim 1;
 *   Dimension       dim_value 1
 * raw_data is little-endian; INT4 packs two values a byte, the first in the
 * low nibble.
 */
#include <stdlib.h>
#include <string.h>

#include "ne.h"

void pb_free(pb *b)
{
    free(b->p);
    memset(b, 0, sizeof *b);
}

void pb_raw(pb *b, const void *d, size_t n)
{
    if (b->oom)
        return;
    if (b->n + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n)
            cap *= 2;
        uint8_t *p = realloc(b->p, cap);
        if (!p) {
            b->oom = 1;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    if (n)
        memcpy(b->p + b->n, d, n);
    b->n += n;
}

void pb_varint(pb *b, uint64_t v)
{
    uint8_t tmp[10];
    size_t n = 0;
    do {
        tmp[n] = (uint8_t)(v & 0x7F);
        v >>= 7;
        if (v)
            tmp[n] |= 0x80;
        n++;
    } while (v);
    pb_raw(b, tmp, n);
}

void pb_uint(pb *b, unsigned field, uint64_t v)
{
    pb_varint(b, (uint64_t)field << 3 | 0);
    pb_varint(b, v);
}

void pb_bytes(pb *b, unsigned field, const void *d, size_t n)
{
    pb_varint(b, (uint64_t)field << 3 | 2);
    pb_varint(b, n);
    pb_raw(b, d, n);
}

void pb_str(pb *b, unsigned field, const char *s)
{
    pb_bytes(b, field, s, strlen(s));
}

void pb_msg(pb *b, unsigned field, const pb *sub)
{
    if (sub->oom)
        b->oom = 1;
    pb_bytes(b, field, sub->p, sub->n);
}

static void tensor_head(pb *t, const char *name, int dtype, const int64_t *dims, int ndim)
{
    for (int i = 0; i < ndim; i++)
        pb_uint(t, 1, (uint64_t)dims[i]);
    pb_uint(t, 2, (uint64_t)dtype);
    pb_str(t, 8, name);
}

void onnx_init_inline(pb *graph, const char *name, int dtype, const int64_t *dims, int ndim,
                      const void *raw, size_t raw_len)
{
    pb t = {0};
    tensor_head(&t, name, dtype, dims, ndim);
    pb_bytes(&t, 9, raw, raw_len);
    pb_msg(graph, 5, &t);
    pb_free(&t);
}

static void kv(pb *t, unsigned field, const char *k, const char *v)
{
    pb e = {0};
    pb_str(&e, 1, k);
    pb_str(&e, 2, v);
    pb_msg(t, field, &e);
    pb_free(&e);
}

void onnx_init_external(pb *graph, const char *name, int dtype, const int64_t *dims, int ndim,
                        const char *location, uint64_t offset, uint64_t length)
{
    pb t = {0};
    char num[32];
    tensor_head(&t, name, dtype, dims, ndim);
    kv(&t, 13, "location", location);
    snprintf(num, sizeof num, "%llu", (unsigned long long)offset);
    kv(&t, 13, "offset", num);
    snprintf(num, sizeof num, "%llu", (unsigned long long)length);
    kv(&t, 13, "length", num);
    pb_uint(&t, 14, 1);
    pb_msg(graph, 5, &t);
    pb_free(&t);
}

void onnx_value_info(pb *graph, unsigned field, const char *name, int dtype, const int64_t *dims,
                     int ndim)
{
    pb shape = {0}, tt = {0}, type = {0}, vi = {0};
    for (int i = 0; i < ndim; i++) {
        pb d = {0};
        pb_uint(&d, 1, (uint64_t)dims[i]);
        pb_msg(&shape, 1, &d);
        pb_free(&d);
    }
    pb_uint(&tt, 1, (uint64_t)dtype);
    pb_msg(&tt, 2, &shape);
    pb_msg(&type, 1, &tt);
    pb_str(&vi, 1, name);
    pb_msg(&vi, 2, &type);
    pb_msg(graph, field, &vi);
    pb_free(&shape);
    pb_free(&tt);
    pb_free(&type);
    pb_free(&vi);
}

void onnx_node(pb *graph, const char *op, const char *const *in, int nin, const char *out,
               const char *name, int64_t axis)
{
    pb n = {0};
    for (int i = 0; i < nin; i++)
        pb_str(&n, 1, in[i]);
    pb_str(&n, 2, out);
    pb_str(&n, 3, name);
    pb_str(&n, 4, op);
    if (axis >= 0) {
        pb a = {0};
        pb_str(&a, 1, "axis");
        pb_uint(&a, 3, (uint64_t)axis);
        pb_uint(&a, 20, 2); /* AttributeType INT */
        pb_msg(&n, 5, &a);
        pb_free(&a);
    }
    pb_msg(graph, 1, &n);
    pb_free(&n);
}

void onnx_model(pb *model, const pb *graph_body, const char *graph_name,
                const char *producer_version, const char *const *meta_kv, int nmeta)
{
    pb g = {0}, op = {0};
    pb_raw(&g, graph_body->p, graph_body->n);
    if (graph_body->oom)
        g.oom = 1;
    pb_str(&g, 2, graph_name);
    pb_uint(model, 1, 10); /* IR version 10 (ONNX 1.16: opset 21) */
    pb_str(model, 2, "edgert npu-export");
    pb_str(model, 3, producer_version);
    pb_msg(model, 7, &g);
    pb_str(&op, 1, "");
    pb_uint(&op, 2, 21);
    pb_msg(model, 8, &op);
    for (int i = 0; i + 1 < 2 * nmeta; i += 2)
        kv(model, 14, meta_kv[i], meta_kv[i + 1]);
    pb_free(&g);
    pb_free(&op);
}

int pb_self_test(char *err, size_t len)
{
    /* Encodings worked out by hand from the wire-format rules. */
    pb b = {0};
    pb_varint(&b, 300);                  /* 0xAC 0x02 */
    pb_uint(&b, 20, 2);                  /* key 20<<3|0 = 160 = 0xA0 0x01, then 0x02 */
    pb_str(&b, 4, "Q");                  /* key 0x22, len 1, 'Q' */
    pb_varint(&b, 1ull << 63);           /* ten bytes: nine 0x80 then 0x01 */
    static const uint8_t want[] = {0xAC, 0x02, 0xA0, 0x01, 0x02, 0x22, 0x01, 'Q',
                                   0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01};
    int ok = !b.oom && b.n == sizeof want && memcmp(b.p, want, sizeof want) == 0;
    pb_free(&b);
    if (!ok)
        edgert_errf(err, len, NE_NAME ": self-test: protobuf varint/key encoding is wrong");
    return ok ? 0 : -1;
}
