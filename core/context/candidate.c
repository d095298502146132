/*
 * core/context/candidate.c — one manifest found, and what the core decided about it.
 *
 * A candidate (er_cand, context.h) is born in discovery from a manifest and
 * carries its verdict through the data flow: every gate it fails adds a
 * stable reason code (gate.c, load.c, evidence.c, export.c), the first
 * failure also a human detail. Here live the few things every step needs:
 * the public view of a candidate, recording a reason, finding a candidate by
 * name (the one lookup), and the one "why not" sentence that every refusal
 * to use a candidate quotes.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "context/context.h"
#include "load/load.h"

static void nan_figures(edgert_figures *f)
{
    f->decode_tokens_per_s = NAN;
    f->prefill_gflops = NAN;
    f->top1_agreement = NAN;
    f->kl_mean = NAN;
    f->where = NULL;
}

void er_cand_publish(struct edgert_ctx *ctx, er_cand *c)
{
    edgert_candidate *p = &c->pub;
    const er_manifest *m = &c->m;
    p->name = m->name;
    p->version = m->version;
    p->vendor = m->vendor;
    p->manifest_path = m->path;
    p->library_path = m->library_path;
    p->plugin_name = m->plugin_name;
    p->processor = m->processor ? m->processor : "cpu";
    p->rationale = m->rationale ? m->rationale : "";
    p->notes = m->notes ? m->notes : "";
    p->layout.format = m->layout_format;
    p->layout.weight_bits = m->weight_bits;
    p->layout.group_size = m->group_size;
    p->layout.symmetric = m->symmetric;
    p->layout.activation_dtype = m->activation_dtype;
    p->layout.activation_bits = m->activation_bits;
    p->layout.bits_per_weight = m->bits_per_weight;
    p->layout.fallback_dtype = m->fallback_dtype;
    p->effective_activation_dtype =
        (m->fallback_dtype && !ctx->dev.bf16 && m->activation_dtype &&
         strcmp(m->activation_dtype, "bf16") == 0)
            ? m->fallback_dtype
            : m->activation_dtype;
    p->activation_group_size = m->activation_group_size;
    p->runs_in_process = m->runs_in_process;
    p->verified = m->verified;
    p->reference = m->reference;
    p->abi_min = m->abi_min;
    p->abi_max = m->abi_max;
    p->declared = m->declared;
    p->declared.where = m->declared_where;
    nan_figures(&p->measured);
    p->measured_decode_min = p->measured_decode_max = NAN;
    p->first_contact_decode_tokens_per_s = NAN;
    p->first_contact_decode_min = p->first_contact_decode_max = NAN;
    p->first_contact_prefill_gflops = NAN;
    p->first_contact_read_gbs = NAN;
    p->first_contact_wait_share = NAN;
    p->detail = "";
    p->reasons = NULL;
    p->reason_count = 0;
    if (m->has_checksum) {
        snprintf(c->checksum, sizeof c->checksum, "xxh3-64:%016llx",
                 (unsigned long long)m->checksum);
        p->checksum = c->checksum;
    }
    p->checksum_verified = 0;
}

void er_cand_free(er_cand *c)
{
    if (!c)
        return;
    er_unload(c);
    if (c->lib_fd >= 0)
        close(c->lib_fd);
    if (c->reasons)
        for (size_t i = 0; c->reasons[i]; i++)
            free(c->reasons[i]);
    free(c->reasons);
    free(c->detail);
    free(c->path_chosen);
    free(c->series);
    free(c->workload);
    free(c->fidelity_source);
    er_manifest_free(&c->m);
    free(c);
}

er_cand *er_cand_find(const struct edgert_ctx *ctx, const char *name)
{
    for (size_t i = 0; ctx && name && i < ctx->ncands; i++)
        if (strcmp(ctx->cands[i]->m.name, name) == 0)
            return ctx->cands[i];
    return NULL;
}

void er_cand_reason(er_cand *c, er_gate_id gate, const char *fmt, ...)
{
    c->failed |= 1u << gate; /* first: the verdict must not depend on memory */
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    size_t n = c->pub.reason_count;
    if (n + 2 > c->reason_cap) {
        size_t cap = c->reason_cap ? c->reason_cap * 2 : 8;
        char **r = realloc(c->reasons, cap * sizeof *r);
        if (!r)
            return;
        c->reasons = r;
        c->reason_cap = cap;
    }
    c->reasons[n] = er_strdup(buf);
    if (!c->reasons[n])
        return;
    c->reasons[n + 1] = NULL;
    c->pub.reason_count = n + 1;
    c->pub.reasons = (const char *const *)c->reasons;
}

void er_cand_detail(er_cand *c, const char *fmt, ...)
{
    if (c->detail && *c->detail)
        return; /* keep the first failure's explanation */
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    free(c->detail);
    c->detail = er_strdup(buf);
    c->pub.detail = c->detail ? c->detail : "";
}

/* Append to buf[*used..len), truncating; *used stays < len. */
__attribute__((format(printf, 4, 5))) static void append(char *buf, size_t len, size_t *used,
                                                         const char *fmt, ...)
{
    if (*used + 1 >= len)
        return;
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(buf + *used, len - *used, fmt, ap);
    va_end(ap);
    if (w > 0)
        *used += (size_t)w < len - *used ? (size_t)w : len - *used - 1;
}

/* Gate names by er_gate_id: the reason codes without their arguments, for a
 * verdict whose reason strings could not be allocated. */
static const char *const gate_names[ER_GATE_COUNT] = {
    "DISABLED_BY_USER", "WRONG_ARCH", "WRONG_DEVICE_CLASS", "MISSING_CPU_FLAG",
    "OS_STATE_DISABLED", "ABI_UNSUPPORTED", "STRICT_MODE", "LIBRARY_MISSING",
    "CHECKSUM_MISMATCH", "DLOPEN_FAILED", "NO_ENTRY_SYMBOL", "INVALID_DESCRIPTOR",
    "NAME_MISMATCH", "MISSING_CAPABILITY", "INIT_FAILED", "SELF_TEST_FAILED", "FAILED_VERIFY",
    "PLUGIN_CRASHED", "PLUGIN_TIMEOUT", "PLUGIN_EXITED", "UNSAFE_FILE", "LAYOUT_MISMATCH",
    "SANDBOX_UNAVAILABLE", "LIBRARY_REWRITTEN", "WRONG_RESULTS",
};
_Static_assert(sizeof gate_names / sizeof gate_names[0] == ER_GATE_COUNT,
               "every gate needs its name");

void er_cand_why_not(const er_cand *c, char *buf, size_t len)
{
    if (!buf || len == 0)
        return;
    buf[0] = '\0';
    size_t used = 0;
    for (size_t i = 0; i < c->pub.reason_count; i++)
        append(buf, len, &used, "%s%s", i ? " " : "", c->pub.reasons[i]);
    for (unsigned g = 0; c->pub.reason_count == 0 && g < ER_GATE_COUNT; g++)
        if (c->failed & (1u << g))
            append(buf, len, &used, "%s%s", used ? " " : "", gate_names[g]);
    if (used == 0)
        append(buf, len, &used, "%s",
               c->m.library ? "not loaded" : "no library (declarative backend)");
    if (c->pub.detail && *c->pub.detail)
        append(buf, len, &used, " — %s", c->pub.detail);
}
