/*
 * core/gate/gate.h — step 3, what the gates share with later steps: the layout
 * a manifest packs (gate.c) and library checksums (checksum.c).
 * Not installed.
 */
#ifndef EDGERT_CORE_GATE_H
#define EDGERT_CORE_GATE_H

#include <stdint.h>
#include "context/context.h"
#include "discover/manifest.h"

/* ---- layout (gate.c) --------------------------------------------------------- */
/** Whether layout m packs weights in groups of g: layout.group_sizes, or
 *  group_size alone when it lists none (fails closed). K not a multiple of
 *  g needs layout.partial_groups besides. */
int er_layout_packs_group(const er_manifest *m, uint32_t g);
/** The layout's own group: group_size, or 128 when the manifest gives none
 *  (as edgert verify and bench generate its weights). */
uint32_t er_layout_group(const er_manifest *m);

/* ---- checksum (gate.c; evidence.c keys measurements by it too) ------------ */
/** XXH3-64 of a file; 0 on success, -1 if unreadable. */
int er_file_xxh3(const char *path, uint64_t *out);

/* gate.c: declarative gates (every mode), then the file gates (live mode). */
void er_gate(struct edgert_ctx *ctx, er_cand *c);
void er_gate_file(struct edgert_ctx *ctx, er_cand *c);

/** 0 when the library behind c->lib_fd is as the file gate hashed it (same
 *  size and modification time) and this process has not mapped the same
 *  file with other bytes; else -1 with LIBRARY_REWRITTEN: a file rewritten
 *  in place keeps its inode, and dlopen would return the old mapping, or
 *  map bytes that were not checked. The file gate, first contact and the
 *  load each ask. */
int er_lib_unchanged(er_cand *c);

#endif /* EDGERT_CORE_GATE_H */
