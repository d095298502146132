/*
 * core/evidence/evidence.h — what core/evidence/evidence.c (the file's format, reading) and
 * core/evidence/evidence_store.c (writing) share. Internal to the core.
 */
#ifndef EDGERT_CORE_EVIDENCE_H
#define EDGERT_CORE_EVIDENCE_H

#include "context/context.h"
#include "formats/yamldoc.h"

#define ER_EVIDENCE_VERSION 1

/* A number or string field of an entry (NaN / NULL when absent). */
double ev_num(er_yaml *y, yaml_node_t *map, const char *key);
const char *ev_str(er_yaml *y, yaml_node_t *map, const char *key);
/* The file at path, checked for the shape of evidence: its entries, or NULL
 * (with a diagnostic). *unreadable: 1 a file was there but is no usable
 * evidence file (corrupt), 2 a file was there that cannot be read now, -1
 * the path names something other than a regular file, else 0. */
yaml_node_t *ev_load(struct edgert_ctx *ctx, er_yaml *y, const char *path, int quiet_missing,
                     int *unreadable);
/* The hex XXH3 of c's library into out; -1 when it cannot be read. */
int ev_library_hash(const er_cand *c, char out[17]);
/* Figures that mean something: NaN (not measured) or a rate > 0, a share in
 * [0, 1], a value >= 0 (finite where it must be). */
int ev_rate_ok(double v);
int ev_unit_ok(double v);
int ev_nonneg_ok(double v);

/* evidence.c: figures measured on this device. */
void er_evidence_init(struct edgert_ctx *ctx, const edgert_options *o);
void er_evidence_apply(struct edgert_ctx *ctx);

#endif
