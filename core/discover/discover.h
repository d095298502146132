/*
 * core/discover/discover.h — step 2: the folders searched and the manifests in
 * them, one candidate each (discovery.c). Not installed.
 */
#ifndef EDGERT_CORE_DISCOVER_H
#define EDGERT_CORE_DISCOVER_H

#include "context/context.h"

/* discovery.c: folders, then the manifests in them. */
edgert_status er_discover(struct edgert_ctx *ctx, const edgert_options *o, char *err,
                          size_t err_len);

/* Why no backend named `name` was found, for a "no backend named" message:
 * "; folders searched: ..." and, when a manifest file of that name (its
 * stem: name.yaml or name.yml) was skipped in this run, "; skipped in this
 * run: file:line:col: its first error". Appended to buf (len bytes). */
void er_discover_why_missing(const struct edgert_ctx *ctx, const char *name, char *buf,
                             size_t len);

#endif /* EDGERT_CORE_DISCOVER_H */
