/*
 * edgert/status.h — status codes shared by the public API and the plugin ABI.
 * Values are stable: new codes are only ever appended.
 */
#ifndef EDGERT_STATUS_H
#define EDGERT_STATUS_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum edgert_status {
    EDGERT_OK = 0,
    EDGERT_E_USAGE = 1,        /**< bad argument or option */
    EDGERT_E_NOMEM = 2,        /**< allocation failed */
    EDGERT_E_IO = 3,           /**< a file could not be read or written */
    EDGERT_E_PARSE = 4,        /**< malformed manifest, profile or other input */
    EDGERT_E_NOT_FOUND = 5,    /**< no such backend / file / item */
    EDGERT_E_NOT_ELIGIBLE = 6, /**< nothing eligible, or a forced backend is not */
    EDGERT_E_ABI = 7,          /**< plugin ABI range does not overlap the host's */
    EDGERT_E_UNSUPPORTED = 8,  /**< the backend cannot do this (layout, capability) */
    EDGERT_E_PLUGIN = 9,       /**< a plugin reported a failure */
    EDGERT_E_INTERNAL = 10     /**< a bug: please report */
} edgert_status;

#ifdef __cplusplus
}
#endif
#endif /* EDGERT_STATUS_H */
