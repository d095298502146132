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

#endif /* EDGERT_CORE_DISCOVER_H */
