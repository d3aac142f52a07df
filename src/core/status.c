/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Status codes, versions and gs_config_init_v(). The name and message tables
 * are generated from GS_STATUS_MAP in status.h, so a new row there needs no
 * edit here. This file does not resolve configuration (config.c does that);
 * it only puts a caller's gs_config_t into its "everything unset" state.
 */
#include "gradsync/gradsync.h"

#include "core/config.h"
#include "core/error.h"

#include <stddef.h>
#include <string.h>

#define GS_STATUS_INFO_ROW(_name, _value, _msg) {(_value), #_name, (_msg)},

typedef struct status_info {
    int value;
    const char *name;
    const char *msg;
} status_info_t;

static const status_info_t status_table[] = {GS_STATUS_MAP(GS_STATUS_INFO_ROW)};

#undef GS_STATUS_INFO_ROW

#define STATUS_TABLE_LEN (sizeof(status_table) / sizeof(status_table[0]))

/* Bytes of gs_config_t that every version carries: size and version. */
#define CFG_HEADER_BYTES (offsetof(gs_config_t, version) + sizeof(unsigned))

static const status_info_t *status_lookup(gs_status_t status)
{
    size_t i;

    for (i = 0; i < STATUS_TABLE_LEN; i++) {
        if (status_table[i].value == (int)status) {
            return &status_table[i];
        }
    }
    return NULL;
}

GS_API const char *gs_strerror(gs_status_t status)
{
    const status_info_t *info = status_lookup(status);

    return (info != NULL) ? info->msg : "unknown status";
}

GS_API const char *gs_status_name(gs_status_t status)
{
    const status_info_t *info = status_lookup(status);

    return (info != NULL) ? info->name : "GS_UNKNOWN_STATUS";
}

GS_API gs_status_scope_t gs_status_scope(gs_status_t status)
{
    const int v = (int)status;

    /* Bands as documented in status.h; values between bands (and anything
     * below -79) are treated as bugs, since no published code lives there. */
    if (v >= 0) {
        return GS_SCOPE_NONE;
    }
    if (v >= -19) {
        return GS_SCOPE_ARGUMENT;
    }
    if (v >= -39) {
        return GS_SCOPE_RESOURCE;
    }
    if (v >= -59) {
        return GS_SCOPE_PEER;
    }
    if (v >= -79) {
        return GS_SCOPE_COMM;
    }
    return GS_SCOPE_INTERNAL;
}

GS_API unsigned gs_version(void)
{
    return (unsigned)GS_VERSION_NUMBER;
}

GS_API const char *gs_version_string(void)
{
    return GS_VERSION_STRING;
}

GS_API gs_status_t gs_config_init_v(gs_config_t *cfg, unsigned header_version, size_t cfg_size)
{
    const unsigned header_major = header_version / 10000u;
    size_t nbytes;

    if (cfg == NULL) {
        return gs__error_set(GS_ERR_INVALID_ARG, "gs_config_init: cfg is NULL");
    }
    if (header_major != (unsigned)GS_VERSION_MAJOR) {
        return gs__error_set(GS_ERR_VERSION_MISMATCH,
                             "gs_config_init: program was built with gradsync headers %u.%u.%u "
                             "but the library is %s (major versions differ)",
                             header_major, (header_version / 100u) % 100u, header_version % 100u,
                             GS_VERSION_STRING);
    }
    if (cfg_size < CFG_HEADER_BYTES) {
        return gs__error_set(GS_ERR_INVALID_ARG,
                             "gs_config_init: struct size %zu is smaller than the %zu bytes "
                             "every gs_config_t version has",
                             cfg_size, (size_t)CFG_HEADER_BYTES);
    }

    /* NOTE: bytes past our sizeof belong to fields of a newer header that
     * this library does not know; it never reads them, so they stay as they are. */
    nbytes = (cfg_size < sizeof(gs_config_t)) ? cfg_size : sizeof(gs_config_t);
    memset(cfg, 0, nbytes);
    cfg->size = cfg_size;
    cfg->version = header_version;

    gs__cfg_unset_fields(cfg, nbytes);

    return GS_OK;
}
