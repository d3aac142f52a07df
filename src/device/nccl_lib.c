/* SPDX-License-Identifier: Apache-2.0 */
/*
 * NCCL loaded on first use (nccl_lib.h): dlopen of libnccl.so.2 (or of
 * what GS_NCCL_LIBRARY names) and a lookup of every function of
 * GS_NCCL_FN_MAP into one table, published once for the process.
 */
#include "device/nccl_lib.h"

#include "device/nccl_engine.h"

#include "core/config.h"
#include "core/error.h"
#include "core/log.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

/* The fix named by every "not found" sentence. */
#define GS_NCCL_LIB_HOWTO                                                                          \
    "install NCCL 2.18 or newer, or put the folder that holds libnccl.so.2 on LD_LIBRARY_PATH, "   \
    "or set GS_NCCL_LIBRARY to the library's path; GS_CUDA_PATH=staged runs device buffers "       \
    "without NCCL"

static pthread_mutex_t lib_mu = PTHREAD_MUTEX_INITIALIZER;
static gs__nccl_api_t lib_api; /* written once, under lib_mu, before lib_loaded */
static atomic_int lib_loaded;

/* gs__nccl_lib_open, the sentences naming the file @p shown ("file", or
 * "file (GS_NCCL_LIBRARY)" when the variable chose it). */
static gs_status_t lib_open(const char *file, const char *shown, gs__nccl_api_t *api_out, char *why,
                            size_t whylen)
{
    gs__nccl_api_t api;
    const char *dl_why;
    void *lib;

    if ((file == NULL) || (api_out == NULL)) {
        return gs__error_explain(GS_ERR_INVALID_ARG, why, whylen, "nccl: load: NULL argument");
    }
    lib = dlopen(file, RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        dl_why = dlerror();
        return gs__error_explain(GS_ERR_NO_RESOURCE, why, whylen,
                                 "NCCL was not found: %s could not be loaded (%s); %s", shown,
                                 (dl_why != NULL) ? dl_why : "no reason given", GS_NCCL_LIB_HOWTO);
    }
    memset(&api, 0, sizeof(api));
    /* dlsym's void * into a function pointer: POSIX allows it, ISO C has no
     * cast for it, so the pointer's bytes are copied. */
#define GS_NCCL_FN_LOOKUP(name)                                                                    \
    {                                                                                              \
        void *const sym = dlsym(lib, #name);                                                       \
                                                                                                   \
        if (sym == NULL) {                                                                         \
            (void)dlclose(lib);                                                                    \
            return gs__error_explain(GS_ERR_NO_RESOURCE, why, whylen,                              \
                                     "NCCL was not found: %s has no function %s (not NCCL, or "    \
                                     "older than 2.18); %s",                                       \
                                     shown, #name, GS_NCCL_LIB_HOWTO);                             \
        }                                                                                          \
        memcpy(&api.name, &sym, sizeof(api.name));                                                 \
    }
    GS_NCCL_FN_MAP(GS_NCCL_FN_LOOKUP)
#undef GS_NCCL_FN_LOOKUP
    *api_out = api;
    return GS_OK; /* never closed: the table points into it */
}

gs_status_t gs__nccl_lib_open(const char *file, gs__nccl_api_t *api_out, char *why, size_t whylen)
{
    return lib_open(file, file, api_out, why, whylen);
}

/* Load once; on failure the reason goes to @p why. */
static gs_status_t load(char *why, size_t whylen)
{
    char file[GS_CFG_STR_MAX];
    char shown[GS_CFG_STR_MAX + 24];
    gs_status_t status = GS_OK;
    int now = 0;

    if (atomic_load_explicit(&lib_loaded, memory_order_acquire)) {
        return GS_OK;
    }
    pthread_mutex_lock(&lib_mu);
    if (!atomic_load_explicit(&lib_loaded, memory_order_relaxed)) {
        int set = 0;

        /* GS_NCCL_LIBRARY, read at each try until one succeeds. */
        status = gs__cfg_env_str("GS_NCCL_LIBRARY", file, sizeof(file), &set);
        if (status != GS_OK) {
            if ((why != NULL) && (whylen > 0)) {
                (void)snprintf(why, whylen, "%s", gs__error_get());
            }
        } else {
            if (!set) {
                (void)snprintf(file, sizeof(file), "%s", GS_NCCL_LIB_FILE);
            }
            (void)snprintf(shown, sizeof(shown), set ? "%s (GS_NCCL_LIBRARY)" : "%s", file);
            status = lib_open(file, shown, &lib_api, why, whylen);
        }
        if (status == GS_OK) {
            atomic_store_explicit(&lib_loaded, 1, memory_order_release);
            now = 1;
        }
    }
    pthread_mutex_unlock(&lib_mu);
    if (now) {
        int version = 0;

        (void)lib_api.ncclGetVersion(&version);
        GS_INFO(CUDA, "NCCL %d loaded (%s)", version, shown);
    }
    return status;
}

gs_status_t gs__nccl_load(const char *who)
{
    char why[GS_ERROR_MSG_MAX];
    const gs_status_t status = load(why, sizeof(why));

    if (status != GS_OK) {
        return gs__error_set(status, "%s: %s", (who != NULL) ? who : "nccl", why);
    }
    return GS_OK;
}

int gs__nccl_loadable(char *why, size_t whylen)
{
    return load(why, whylen) == GS_OK;
}

const gs__nccl_api_t *gs__nccl_api(void)
{
    return atomic_load_explicit(&lib_loaded, memory_order_acquire) ? &lib_api : NULL;
}
