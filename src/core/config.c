/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Configuration resolver: built-in default < GS_* environment < explicit
 * gs_config_t field, with launcher variables (torchrun, Open MPI, PMIx,
 * Slurm, MPICH/Intel MPI) filling rank, world size, local rank and master address/port for
 * gs_comm_init_env(). Every knob comes from the X-macro in env_table.h; the
 * only other list here is the set of gs_config_t fields, which is checked
 * against the table at compile time. Parsing is strict: a value that does
 * not parse completely, or lies outside the table's range, is an error
 * naming the variable or field, never a silent fallback.
 *
 * Decisions worth knowing:
 * - An environment variable set to the empty string counts as unset, so
 *   `export GS_ALGO=` restores the default.
 * - local_rank stays -1 ("unknown") when nobody sets it; it is not guessed
 *   from the rank, because that is wrong on every host but the first.
 * - This file does not interpret GS_DEBUG* (log.c does) or GS_ALGO
 *   (algo_select.c does); it only records and range-checks them.
 */
#include "core/config.h"

#include "core/check.h"
#include "core/env_table.h"
#include "core/error.h"
#include "core/kvstore.h"
#include "core/log.h"
#include "core/msg_limit.h"
#include "core/shm_budget.h"
#include "core/socket.h"

#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

typedef struct knob {
    const char *env;   /* "GS_TCP_NSOCKS" */
    const char *field; /* "tcp_nsocks": gs__cfg_t field and, for COMM knobs, gs_config_t field */
    int kind;          /* GS_ENV_INT or GS_ENV_STR */
    int int_def;
    const char *str_def;
    long long min;
    long long max;
    int scope;
    const char *doc;
    size_t off; /* offsetof(gs__cfg_t, field) */
} knob_t;

#define KNOB_ROW(_env, _field, _kind, _idef, _sdef, _min, _max, _scope, _doc)                      \
    {(_env), #_field, (_kind),  (_idef), (_sdef),                                                  \
     (_min), (_max),  (_scope), (_doc),  offsetof(gs__cfg_t, _field)},

/* The test-only fault switches are knobs of the test variant only
 * (gradsync_testhooks, compiled with GS_TEST_HOOKS): the library users get
 * holds neither their names nor the code behind them. */
#ifdef GS_TEST_HOOKS
#define CFG_TEST_ROWS(X) GS_ENV_TEST_ROWS(X)
#else
#define CFG_TEST_ROWS(X)
#endif

static const knob_t knobs[] = {GS_ENV_TABLE(KNOB_ROW) CFG_TEST_ROWS(KNOB_ROW)};

#undef KNOB_ROW

#define NUM_KNOBS ((int)(sizeof(knobs) / sizeof(knobs[0])))

_Static_assert(sizeof(knobs) / sizeof(knobs[0]) <=
                   sizeof(((gs__cfg_t *)0)->source) / sizeof(gs__cfg_source_t),
               "gs__cfg_t.source has fewer slots than env_table.h has rows");

/* Each row's kind must match the type of its gs__cfg_t field. */
#define KNOB_KIND_CHECK(_env, _field, _kind, _idef, _sdef, _min, _max, _scope, _doc)               \
    _Static_assert(_Generic(((gs__cfg_t *)0)->_field, int : GS_ENV_INT, char * : GS_ENV_STR) == \
                       (_kind),                                                              \
                   "env_table.h kind does not match the gs__cfg_t field of " _env);
GS_ENV_TABLE(KNOB_KIND_CHECK)
CFG_TEST_ROWS(KNOB_KIND_CHECK)
#undef KNOB_KIND_CHECK

/*
 * The gs_config_t fields, in struct order. Every GS_ENV_COMM row of
 * env_table.h has one, with the same name (checked below and at run time);
 * some GS_ENV_PROC rows have one too (GS_CFG_USER_PROC_FIELDS, appended
 * later to the struct, so that an embedding framework needs no setenv).
 */
#define GS_CFG_USER_COMM_FIELDS(X)                                                                 \
    X(rank)                                                                                        \
    X(world_size)                                                                                  \
    X(local_rank)                                                                                  \
    X(master_addr)                                                                                 \
    X(master_port)                                                                                 \
    X(timeout_ms)                                                                                  \
    X(transport)                                                                                   \
    X(tcp_nsocks)                                                                                  \
    X(socket_ifname)                                                                               \
    X(socket_family)                                                                               \
    X(slice_bytes)                                                                                 \
    X(algo)                                                                                        \
    X(job_id)                                                                                      \
    X(heartbeat_ms)

#define GS_CFG_USER_PROC_FIELDS(X)                                                                 \
    X(shm)                                                                                         \
    X(tcp_spin_us)                                                                                 \
    X(tune)                                                                                        \
    X(debug)                                                                                       \
    X(debug_subsys)                                                                                \
    X(debug_file)                                                                                  \
    X(stats_file)                                                                                  \
    X(auth_token)                                                                                  \
    X(auth_token_file)                                                                             \
    X(tls)                                                                                         \
    X(tls_cert)                                                                                    \
    X(tls_key)                                                                                     \
    X(tls_ca)

/* Per-communicator knobs appended after the process-wide ones (the bootstrap through a
 * key-value store), in struct order. */
#define GS_CFG_USER_COMM_LATE_FIELDS(X)                                                            \
    X(store)                                                                                       \
    X(store_epoch)

#define GS_CFG_USER_FIELDS(X)                                                                      \
    GS_CFG_USER_COMM_FIELDS(X) GS_CFG_USER_PROC_FIELDS(X) GS_CFG_USER_COMM_LATE_FIELDS(X)

typedef struct user_field {
    const char *field;
    size_t off;
    size_t len;
    int kind;
} user_field_t;

#define USER_ROW(_f)                                                                               \
    {#_f, offsetof(gs_config_t, _f), sizeof(((gs_config_t *)0)->_f),                        \
     _Generic(((gs_config_t *)0)->_f, int : GS_ENV_INT, const char * : GS_ENV_STR)},

static const user_field_t user_fields[] = {GS_CFG_USER_FIELDS(USER_ROW)};

#undef USER_ROW

#define NUM_USER_FIELDS ((int)(sizeof(user_fields) / sizeof(user_fields[0])))

#define COUNT_COMM_ROW(_env, _field, _kind, _idef, _sdef, _min, _max, _scope, _doc)                \
    +((_scope) == GS_ENV_COMM)
#define COUNT_ONE(_f) +1
_Static_assert((0 GS_ENV_TABLE(COUNT_COMM_ROW)) ==
                   (0 GS_CFG_USER_COMM_FIELDS(COUNT_ONE) GS_CFG_USER_COMM_LATE_FIELDS(COUNT_ONE)),
               "every GS_ENV_COMM row of env_table.h needs a gs_config_t field");
#undef COUNT_COMM_ROW
#undef COUNT_ONE

/* Launcher variables, in the order they are consulted for each knob. */
typedef struct launcher_map {
    const char *field;
    const char *vars[6];
} launcher_map_t;

/* MPICH's and Intel MPI's mpiexec (Hydra) set PMI_RANK, PMI_SIZE and MPI_LOCALRANKID. */
static const launcher_map_t launcher_maps[] = {
    {"rank", {"RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "SLURM_PROCID", "PMI_RANK", NULL}},
    {"world_size", {"WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "SLURM_NTASKS", "PMI_SIZE", NULL}},
    {"local_rank",
     {"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "MPI_LOCALRANKID", NULL}},
    {"master_addr", {"MASTER_ADDR", NULL}},
    {"master_port", {"MASTER_PORT", NULL}},
};

/*
 * The launchers whose variables say "started by an MPI-style launcher", by the
 * prefix of the variable that gave the rank or world size: such a job has no
 * master address of its own and bootstraps through MPI, which a build without
 * the MPI transport cannot do (check_launcher_without_mpi). torchrun's
 * variables (RANK, WORLD_SIZE) come with MASTER_ADDR and are not here.
 */
typedef struct mpi_launcher {
    const char *prefix;
    const char *name;
} mpi_launcher_t;

static const mpi_launcher_t mpi_launchers[] = {
    {"OMPI_", "Open MPI's mpirun"},
    {"PMIX_", "a PMIx launcher (mpirun, prterun or srun)"},
    {"SLURM_", "Slurm's srun"},
    {"PMI_", "MPICH's or Intel MPI's mpiexec (Hydra)"},
};

static const mpi_launcher_t *mpi_launcher_named(const char *var)
{
    for (size_t i = 0; i < sizeof(mpi_launchers) / sizeof(mpi_launchers[0]); i++) {
        if (strncmp(var, mpi_launchers[i].prefix, strlen(mpi_launchers[i].prefix)) == 0) {
            return &mpi_launchers[i];
        }
    }
    return NULL;
}

const char *gs__cfg_mpi_launcher(void)
{
    const launcher_map_t *m = &launcher_maps[0]; /* the rank's row */

    for (int i = 0; m->vars[i] != NULL; i++) {
        const char *v = getenv(m->vars[i]);
        const mpi_launcher_t *l = mpi_launcher_named(m->vars[i]);

        if ((l != NULL) && (v != NULL) && (v[0] != '\0')) {
            return l->name;
        }
    }
    return NULL;
}

static const char *const known_transports[] = {"tcp", "mpi", "nccl"};
static const char *const known_cuda_paths[] = {"auto", "nccl", "staged", ""};
static const char *const known_families[] = {"any", "ipv4", "ipv6"};
static const char *const known_tunes[] = {"auto", "probe", "off", ""};
static const char *const known_connects[] = {"lazy", "eager"};
static const char *const known_balances[] = {"rate", "equal"};

/* Resolution in progress: the values plus who set each one (for messages). */
typedef struct resolve_ctx {
    gs__cfg_t cfg;
    const char *origin[sizeof(knobs) / sizeof(knobs[0])];
} resolve_ctx_t;

static int *knob_int(gs__cfg_t *cfg, int idx)
{
    return (int *)(void *)((char *)cfg + knobs[idx].off);
}

static char *knob_str(gs__cfg_t *cfg, int idx)
{
    return (char *)cfg + knobs[idx].off;
}

static const int *knob_int_c(const gs__cfg_t *cfg, int idx)
{
    return (const int *)(const void *)((const char *)cfg + knobs[idx].off);
}

static const char *knob_str_c(const gs__cfg_t *cfg, int idx)
{
    return (const char *)cfg + knobs[idx].off;
}

/* The value of string knob @p idx as logs and gs_info may show it: a secret
 * (the job token) is never shown, only that it is set and its length. */
static const char *knob_shown(const gs__cfg_t *cfg, int idx, char shown[GS_CFG_STR_MAX])
{
    const char *v = knob_str_c(cfg, idx);

    if ((v[0] != '\0') && (strcmp(knobs[idx].field, "auth_token") == 0)) {
        (void)snprintf(shown, GS_CFG_STR_MAX, "(set, %zu bytes, not shown)", strlen(v));
        return shown;
    }
    return v;
}

static int find_knob(const char *field)
{
    int i;

    for (i = 0; i < NUM_KNOBS; i++) {
        if (strcmp(knobs[i].field, field) == 0) {
            return i;
        }
    }
    return -1;
}

/* Strict parse: the whole string is one decimal integer. Returns 0 or -1. */
static int parse_ll(const char *s, long long *out)
{
    char *end = NULL;
    long long v;

    if (isspace((unsigned char)s[0])) {
        return -1; /* strtoll would skip it; a strict parser does not */
    }
    errno = 0;
    v = strtoll(s, &end, 10);
    if ((errno != 0) || (end == s) || (*end != '\0')) {
        return -1;
    }
    *out = v;
    return 0;
}

static const char *source_name(gs__cfg_source_t src)
{
    switch (src) {
    case GS_CFG_SRC_ENV:
        return "environment";
    case GS_CFG_SRC_LAUNCHER:
        return "launcher";
    case GS_CFG_SRC_CALLER:
        return "caller";
    case GS_CFG_SRC_DEFAULT:
    default:
        return "default";
    }
}

/* "environment variable GS_RANK", "launcher variable RANK", "cfg->rank" or "the default". */
static void origin_text(const resolve_ctx_t *ctx, int idx, char *buf, size_t len)
{
    switch (ctx->cfg.source[idx]) {
    case GS_CFG_SRC_ENV:
        (void)snprintf(buf, len, "environment variable %s", knobs[idx].env);
        break;
    case GS_CFG_SRC_LAUNCHER:
        (void)snprintf(buf, len, "launcher variable %s", ctx->origin[idx]);
        break;
    case GS_CFG_SRC_CALLER:
        (void)snprintf(buf, len, "cfg->%s", knobs[idx].field);
        break;
    case GS_CFG_SRC_DEFAULT:
    default:
        (void)snprintf(buf, len, "the default");
        break;
    }
}

static void apply_defaults(resolve_ctx_t *ctx)
{
    int i;

    memset(ctx, 0, sizeof(*ctx));
    for (i = 0; i < NUM_KNOBS; i++) {
        if (knobs[i].kind == GS_ENV_INT) {
            *knob_int(&ctx->cfg, i) = knobs[i].int_def;
        } else {
            (void)snprintf(knob_str(&ctx->cfg, i), GS_CFG_STR_MAX, "%s", knobs[i].str_def);
        }
        ctx->cfg.source[i] = GS_CFG_SRC_DEFAULT;
        ctx->origin[i] = NULL;
    }
}

/*
 * The integer knob @p k from the text @p value of variable @p var (a GS_*
 * or a launcher name, @p src says which): strict, within the table's range;
 * errors name the variable and the allowed range.
 */
static gs_status_t parse_int_knob(const knob_t *k, const char *var, const char *value,
                                  gs__cfg_source_t src, int *out)
{
    const char *via = (src == GS_CFG_SRC_LAUNCHER) ? " (launcher variable for " : "";
    const char *via_end = (src == GS_CFG_SRC_LAUNCHER) ? ")" : "";
    const char *via_name = (src == GS_CFG_SRC_LAUNCHER) ? k->env : "";
    long long v;

    if (parse_ll(value, &v) != 0) {
        return gs__error_set(GS_ERR_INVALID_ARG,
                             "%s=%.64s%s%s%s is not an integer (allowed range [%lld, %lld])", var,
                             value, via, via_name, via_end, k->min, k->max);
    }
    if ((v < k->min) || (v > k->max)) {
        return gs__error_set(GS_ERR_INVALID_ARG,
                             "%s=%.64s%s%s%s is out of range (allowed range [%lld, %lld])", var,
                             value, via, via_name, via_end, k->min, k->max);
    }
    *out = (int)v;
    return GS_OK;
}

/*
 * Set knob @p idx from the text @p value of variable @p var (a GS_* or a
 * launcher name); errors name the variable and the allowed range.
 */
static gs_status_t set_from_text(resolve_ctx_t *ctx, int idx, const char *var, const char *value,
                                 gs__cfg_source_t src)
{
    const knob_t *k = &knobs[idx];
    const char *via = (src == GS_CFG_SRC_LAUNCHER) ? " (launcher variable for " : "";
    const char *via_end = (src == GS_CFG_SRC_LAUNCHER) ? ")" : "";
    const char *via_name = (src == GS_CFG_SRC_LAUNCHER) ? k->env : "";

    if (k->kind == GS_ENV_INT) {
        const gs_status_t status = parse_int_knob(k, var, value, src, knob_int(&ctx->cfg, idx));

        if (status != GS_OK) {
            return status;
        }
    } else {
        const size_t len = strlen(value);

        if (len >= GS_CFG_STR_MAX) {
            return gs__error_set(GS_ERR_INVALID_ARG,
                                 "%s%s%s%s is %zu bytes long; at most %d bytes are allowed", var,
                                 via, via_name, via_end, len, GS_CFG_STR_MAX - 1);
        }
        memcpy(knob_str(&ctx->cfg, idx), value, len + 1);
    }
    ctx->cfg.source[idx] = src;
    ctx->origin[idx] = var;
    return GS_OK;
}

static gs_status_t apply_env(resolve_ctx_t *ctx)
{
    const char *value;
    gs_status_t status;
    int i;

    for (i = 0; i < NUM_KNOBS; i++) {
        value = getenv(knobs[i].env);
        if ((value == NULL) || (value[0] == '\0')) {
            continue;
        }
        status = set_from_text(ctx, i, knobs[i].env, value, GS_CFG_SRC_ENV);
        if (status != GS_OK) {
            return status;
        }
    }
    return GS_OK;
}

static gs_status_t check_user_header(const gs_config_t *user)
{
    const size_t header = offsetof(gs_config_t, version) + sizeof(user->version);
    const unsigned major = user->version / 10000u;

    if (user->size < header) {
        return gs__error_set(GS_ERR_INVALID_ARG,
                             "cfg->size is %zu, smaller than any gs_config_t: initialise the "
                             "config with gs_config_init()",
                             user->size);
    }
    if (major != (unsigned)GS_VERSION_MAJOR) {
        return gs__error_set(GS_ERR_VERSION_MISMATCH,
                             "cfg was initialised by gradsync headers of major version %u, but "
                             "the library is %s",
                             major, GS_VERSION_STRING);
    }
    return GS_OK;
}

static gs_status_t apply_user(resolve_ctx_t *ctx, const gs_config_t *user)
{
    const char *base = (const char *)user;
    int i;

    for (i = 0; i < NUM_USER_FIELDS; i++) {
        const user_field_t *uf = &user_fields[i];
        const int idx = find_knob(uf->field);

        /* Old binaries pass a shorter struct: fields past its size do not exist. */
        if ((uf->off + uf->len) > user->size) {
            continue;
        }
        if ((idx < 0) || (knobs[idx].kind != uf->kind)) {
            return gs__error_set(GS_ERR_INTERNAL,
                                 "gs_config_t field %s has no matching row in env_table.h",
                                 uf->field);
        }
        if (uf->kind == GS_ENV_INT) {
            int v;

            memcpy(&v, base + uf->off, sizeof(v));
            if (v == GS_UNSET) {
                continue;
            }
            if ((v < knobs[idx].min) || (v > knobs[idx].max)) {
                return gs__error_set(GS_ERR_INVALID_ARG,
                                     "cfg->%s = %d is out of range (allowed range [%lld, %lld])",
                                     uf->field, v, knobs[idx].min, knobs[idx].max);
            }
            *knob_int(&ctx->cfg, idx) = v;
        } else {
            const char *s;
            size_t len;

            memcpy(&s, base + uf->off, sizeof(s));
            if (s == NULL) {
                continue;
            }
            len = strnlen(s, GS_CFG_STR_MAX);
            if (len >= GS_CFG_STR_MAX) {
                return gs__error_set(GS_ERR_INVALID_ARG,
                                     "cfg->%s is too long; at most %d bytes are allowed", uf->field,
                                     GS_CFG_STR_MAX - 1);
            }
            memcpy(knob_str(&ctx->cfg, idx), s, len + 1);
        }
        ctx->cfg.source[idx] = GS_CFG_SRC_CALLER;
        ctx->origin[idx] = NULL;
    }
    return GS_OK;
}

/* The launcher variables for @p field, comma-separated, into @p buf (for messages). */
static void launcher_vars_text(const char *field, char *buf, size_t len)
{
    size_t used = 0;

    buf[0] = '\0';
    for (size_t m = 0; m < sizeof(launcher_maps) / sizeof(launcher_maps[0]); m++) {
        if (strcmp(launcher_maps[m].field, field) != 0) {
            continue;
        }
        for (int v = 0; (launcher_maps[m].vars[v] != NULL) && (used < len); v++) {
            const int w = snprintf(buf + used, len - used, "%s%s", (v > 0) ? ", " : "",
                                   launcher_maps[m].vars[v]);

            if (w < 0) {
                return;
            }
            used += (size_t)w;
        }
    }
}

static gs_status_t apply_launcher(resolve_ctx_t *ctx)
{
    size_t m;
    int v;

    for (m = 0; m < sizeof(launcher_maps) / sizeof(launcher_maps[0]); m++) {
        const int idx = find_knob(launcher_maps[m].field);

        if ((idx < 0) || (ctx->cfg.source[idx] != GS_CFG_SRC_DEFAULT)) {
            continue;
        }
        for (v = 0; launcher_maps[m].vars[v] != NULL; v++) {
            const char *var = launcher_maps[m].vars[v];
            const char *value = getenv(var);
            gs_status_t status;

            if ((value == NULL) || (value[0] == '\0')) {
                continue;
            }
            status = set_from_text(ctx, idx, var, value, GS_CFG_SRC_LAUNCHER);
            if (status != GS_OK) {
                return status;
            }
            break;
        }
    }
    return GS_OK;
}

/* Case-insensitive match against @p names; on a match, store the canonical spelling. */
static int normalise_choice(char *value, const char *const *names, size_t n)
{
    size_t i;

    for (i = 0; i < n; i++) {
        if (strcasecmp(value, names[i]) == 0) {
            (void)snprintf(value, GS_CFG_STR_MAX, "%s", names[i]);
            return 0;
        }
    }
    return -1;
}

#ifndef GS_WITH_MPI
/* The MPI-style launcher that gave knob @p idx, or NULL (not set by a launcher variable,
 * or by torchrun's). */
static const mpi_launcher_t *mpi_launcher_of(const resolve_ctx_t *ctx, int idx)
{
    if ((ctx->cfg.source[idx] != GS_CFG_SRC_LAUNCHER) || (ctx->origin[idx] == NULL)) {
        return NULL;
    }
    return mpi_launcher_named(ctx->origin[idx]);
}

#endif

/*
 * A job started by mpirun or srun with no master address bootstraps through MPI
 * (api/comm_mpi.c). A build without the MPI transport would instead have every rank
 * meet at the default master address, 127.0.0.1 on each host: across hosts that
 * waits until the deadline. Refuse it at once, saying why and what to do. An explicit
 * master address (GS_MASTER_ADDR, MASTER_ADDR, cfg->master_addr) is used as given.
 */
static gs_status_t check_launcher_without_mpi(const resolve_ctx_t *ctx, int i_rank, int i_world,
                                              int i_addr)
{
#ifdef GS_WITH_MPI
    (void)ctx;
    (void)i_rank;
    (void)i_world;
    (void)i_addr;
    return GS_OK;
#else
    const mpi_launcher_t *l = mpi_launcher_of(ctx, i_rank);
    const int idx = (l != NULL) ? i_rank : i_world;

    if (l == NULL) {
        l = mpi_launcher_of(ctx, i_world);
    }
    if ((l == NULL) || (ctx->cfg.source[i_addr] != GS_CFG_SRC_DEFAULT) ||
        (ctx->cfg.store[0] != '\0')) {
        return GS_OK; /* an address, or a store (GS_STORE), to bootstrap through */
    }
    return gs__error_set(GS_ERR_UNSUPPORTED,
                         "this process was started by %s (%s=%d is set) with no master address, "
                         "but this build of gradsync has no MPI transport, so it cannot "
                         "bootstrap through MPI, and every rank would wait for rank 0 at the "
                         "default %s:%d on its own host: rebuild gradsync with MPI (install the "
                         "development package of the MPI that launches it, Debian: "
                         "libopenmpi-dev or libmpich-dev, and configure with GS_WITH_MPI=AUTO "
                         "or ON), or set GS_MASTER_ADDR and GS_MASTER_PORT "
                         "to an address and port on rank 0's host that every rank can reach",
                         l->name, ctx->origin[idx], *knob_int_c(&ctx->cfg, idx),
                         ctx->cfg.master_addr, ctx->cfg.master_port);
#endif
}

/*
 * GS_SOCKET_IFNAME takes NCCL's NCCL_SOCKET_IFNAME syntax (core/socket.h: a
 * comma-separated list of name prefixes, '=' for an exact name, a leading '^'
 * to exclude). A malformed value is refused here, at once, saying what is
 * accepted; which interfaces it selects is known only where the sockets are.
 */
static gs_status_t check_ifname(const resolve_ctx_t *ctx, int i_if)
{
    const char *v = ctx->cfg.socket_ifname;
    char why[160];
    char o1[96];

    if ((v[0] == '\0') || (gs__sock_ifspec_check(v, why, sizeof(why)) == GS_OK)) {
        return GS_OK;
    }
    origin_text(ctx, i_if, o1, sizeof(o1));
    return gs__error_set(GS_ERR_INVALID_ARG,
                         "socket interface \"%.64s\" (from %s) is not a valid GS_SOCKET_IFNAME: "
                         "it %s; GS_SOCKET_IFNAME takes " GS_SOCK_IFSPEC_SYNTAX
                         ", names as `ip link` shows them",
                         v, o1, why);
}

/* GS_STORE: "host:port/prefix" or "[v6addr]:port/prefix" (core/kvstore.h), checked here so
 * that a typo fails the init at once, saying what is accepted. */
static gs_status_t check_store(const resolve_ctx_t *ctx)
{
    const char *v = ctx->cfg.store;
    char host[GS_KV_HOST_MAX], prefix[GS_KV_PREFIX_MAX], why[128], o1[96];
    int port = 0;

    if ((v[0] == '\0') || (gs__kv_parse_spec(v, host, &port, prefix, why, sizeof(why)) == GS_OK)) {
        return GS_OK;
    }
    origin_text(ctx, find_knob("store"), o1, sizeof(o1));
    return gs__error_set(GS_ERR_INVALID_ARG,
                         "store \"%.64s\" (from %s) %s: write GS_STORE as host:port/prefix "
                         "(e.g. 10.0.0.1:29400/myjob, or [fd00::1]:29400/myjob for IPv6), the "
                         "address of a running store (gsrun --store, or torch's TCPStore)",
                         v, o1, why);
}

static gs_status_t validate(resolve_ctx_t *ctx, int use_launcher_env)
{
    const int i_rank = find_knob("rank");
    const int i_world = find_knob("world_size");
    const int i_local = find_knob("local_rank");
    const int i_addr = find_knob("master_addr");
    const int i_tp = find_knob("transport");
    const int i_fam = find_knob("socket_family");
    const int i_if = find_knob("socket_ifname");
    gs__cfg_t *cfg = &ctx->cfg;
    gs_status_t status;
    int single = 0;
    uint64_t max_msg = 0;
    uint64_t shm_max = 0;
    int shm_auto = 0;
    char o1[96];
    char o2[96];

    if ((i_rank < 0) || (i_world < 0) || (i_local < 0) || (i_addr < 0) || (i_tp < 0) ||
        (i_fam < 0) || (i_if < 0)) {
        return gs__error_set(GS_ERR_INTERNAL, "env_table.h lacks a knob the resolver needs");
    }

    if (use_launcher_env && (cfg->source[i_rank] == GS_CFG_SRC_DEFAULT) &&
        (cfg->source[i_world] == GS_CFG_SRC_DEFAULT)) {
        cfg->rank = 0;
        cfg->world_size = 1;
        single = 1;
        GS_INFO(ENV, "no rank or world size in cfg, GS_* or launcher variables: running as a "
                     "single rank");
    }
    if (!single && (cfg->source[i_rank] == GS_CFG_SRC_DEFAULT)) {
        if (!use_launcher_env) {
            return gs__error_set(GS_ERR_INVALID_ARG, "rank not set: set cfg->rank or GS_RANK (or "
                                                     "use gs_comm_init_env)");
        }
        launcher_vars_text("rank", o1, sizeof(o1));
        return gs__error_set(GS_ERR_INVALID_ARG,
                             "rank not set: set cfg->rank, GS_RANK or a launcher variable (%s)",
                             o1);
    }
    if (!single && (cfg->source[i_world] == GS_CFG_SRC_DEFAULT)) {
        if (!use_launcher_env) {
            return gs__error_set(GS_ERR_INVALID_ARG, "world size not set: set cfg->world_size or "
                                                     "GS_WORLD_SIZE (or use gs_comm_init_env)");
        }
        launcher_vars_text("world_size", o1, sizeof(o1));
        return gs__error_set(GS_ERR_INVALID_ARG,
                             "world size not set: set cfg->world_size, GS_WORLD_SIZE or a "
                             "launcher variable (%s)",
                             o1);
    }
    if (cfg->rank >= cfg->world_size) {
        origin_text(ctx, i_rank, o1, sizeof(o1));
        origin_text(ctx, i_world, o2, sizeof(o2));
        return gs__error_set(GS_ERR_INVALID_ARG,
                             "rank %d is not below the world size %d (rank from %s, world size "
                             "from %s)",
                             cfg->rank, cfg->world_size, o1, o2);
    }
    if ((cfg->local_rank >= 0) && (cfg->local_rank >= cfg->world_size)) {
        origin_text(ctx, i_local, o1, sizeof(o1));
        return gs__error_set(GS_ERR_INVALID_ARG,
                             "local rank %d (from %s) is not below the world size %d",
                             cfg->local_rank, o1, cfg->world_size);
    }
    if (cfg->master_addr[0] == '\0') {
        origin_text(ctx, i_addr, o1, sizeof(o1));
        return gs__error_set(GS_ERR_INVALID_ARG, "master address (from %s) is empty", o1);
    }
    if (normalise_choice(cfg->transport, known_transports,
                         sizeof(known_transports) / sizeof(known_transports[0])) != 0) {
        origin_text(ctx, i_tp, o1, sizeof(o1));
        return gs__error_set(
            GS_ERR_INVALID_ARG,
            "transport \"%.64s\" (from %s) is not known; known transports: tcp, mpi, "
            "nccl",
            cfg->transport, o1);
    }
    if (normalise_choice(cfg->cuda_path, known_cuda_paths,
                         sizeof(known_cuda_paths) / sizeof(known_cuda_paths[0])) != 0) {
        return gs__error_set(GS_ERR_INVALID_ARG,
                             "GS_CUDA_PATH=\"%.64s\" is not known; use auto (the default), nccl "
                             "or staged",
                             cfg->cuda_path);
    }
    if (cfg->cuda_path[0] == '\0') {
        (void)snprintf(cfg->cuda_path, GS_CFG_STR_MAX, "auto");
    }
    if (normalise_choice(cfg->tune, known_tunes, sizeof(known_tunes) / sizeof(known_tunes[0])) !=
        0) {
        return gs__error_set(GS_ERR_INVALID_ARG,
                             "GS_TUNE=\"%.64s\" is not known; use auto (the default), probe or off",
                             cfg->tune);
    }
    if (cfg->tune[0] == '\0') { /* GS_TUNE= (empty) means the default */
        (void)snprintf(cfg->tune, GS_CFG_STR_MAX, "auto");
    }
    if (gs__max_message_parse(cfg->max_message_bytes, &max_msg) != 0) {
        return gs__error_set(GS_ERR_INVALID_ARG,
                             "GS_MAX_MESSAGE_BYTES=\"%.64s\" is not a size from 1K to 16T (bytes, "
                             "or a number with K, M, G or T)",
                             cfg->max_message_bytes);
    }
    if (gs__shm_budget_parse(cfg->shm_max_bytes, &shm_auto, &shm_max) != 0) {
        return gs__error_set(GS_ERR_INVALID_ARG,
                             "GS_SHM_MAX_BYTES=\"%.64s\" is not auto or a size from 64K to 16T "
                             "(bytes, or a number with K, M, G or T)",
                             cfg->shm_max_bytes);
    }
    if (normalise_choice(cfg->connect, known_connects,
                         sizeof(known_connects) / sizeof(known_connects[0])) != 0) {
        return gs__error_set(GS_ERR_INVALID_ARG,
                             "GS_CONNECT=\"%.64s\" is not known; use lazy (the default: each pair "
                             "connects when it first talks) or eager (every pair at init)",
                             cfg->connect);
    }
    if (normalise_choice(cfg->tcp_rail_balance, known_balances,
                         sizeof(known_balances) / sizeof(known_balances[0])) != 0) {
        return gs__error_set(GS_ERR_INVALID_ARG,
                             "GS_TCP_RAIL_BALANCE=\"%.64s\" is not known; use rate (the default: "
                             "a large message is split in proportion to each rail's measured "
                             "rate) or equal (equal shares)",
                             cfg->tcp_rail_balance);
    }
    if (normalise_choice(cfg->socket_family, known_families,
                         sizeof(known_families) / sizeof(known_families[0])) != 0) {
        origin_text(ctx, i_fam, o1, sizeof(o1));
        return gs__error_set(GS_ERR_INVALID_ARG,
                             "socket family \"%.64s\" (from %s) is not known; use any, ipv4 or "
                             "ipv6",
                             cfg->socket_family, o1);
    }
    status = check_ifname(ctx, i_if);
    if (status != GS_OK) {
        return status;
    }
    status = check_store(ctx);
    if (status != GS_OK) {
        return status;
    }
    if (use_launcher_env) {
        status = check_launcher_without_mpi(ctx, i_rank, i_world, i_addr);
        if (status != GS_OK) {
            return status;
        }
    }
    return GS_OK;
}

static void log_choices(const resolve_ctx_t *ctx)
{
    int i;

    for (i = 0; i < NUM_KNOBS; i++) {
        const gs__cfg_source_t src = ctx->cfg.source[i];
        char by[96];

        if (src == GS_CFG_SRC_DEFAULT) {
            continue;
        }
        if (src == GS_CFG_SRC_LAUNCHER) {
            (void)snprintf(by, sizeof(by), "launcher (%s)", ctx->origin[i]);
        } else if (src == GS_CFG_SRC_CALLER) {
            (void)snprintf(by, sizeof(by), "caller (cfg->%s)", knobs[i].field);
        } else {
            (void)snprintf(by, sizeof(by), "environment");
        }
        if (knobs[i].kind == GS_ENV_INT) {
            GS_INFO(ENV, "%s set to %d by %s", knobs[i].env, *knob_int_c(&ctx->cfg, i), by);
        } else {
            char shown[GS_CFG_STR_MAX];

            GS_INFO(ENV, "%s set to \"%s\" by %s", knobs[i].env, knob_shown(&ctx->cfg, i, shown),
                    by);
        }
    }
}

gs_status_t gs__cfg_resolve(const gs_config_t *user, int use_launcher_env, gs__cfg_t *out)
{
    resolve_ctx_t ctx;
    gs_status_t status;

    if (out == NULL) {
        return gs__error_set(GS_ERR_INVALID_ARG, "gs__cfg_resolve: out is NULL");
    }
    if (user != NULL) {
        status = check_user_header(user);
        if (status != GS_OK) {
            return status;
        }
    }
    apply_defaults(&ctx);
    status = apply_env(&ctx);
    if (status != GS_OK) {
        return status;
    }
    if (user != NULL) {
        status = apply_user(&ctx, user);
        if (status != GS_OK) {
            return status;
        }
    }
    if (use_launcher_env) {
        status = apply_launcher(&ctx);
        if (status != GS_OK) {
            return status;
        }
    }
    status = validate(&ctx, use_launcher_env);
    if (status != GS_OK) {
        return status;
    }
    log_choices(&ctx);
    *out = ctx.cfg;
    return GS_OK;
}

int gs__cfg_shm_test_free(const gs__cfg_t *cfg)
{
#ifdef GS_TEST_HOOKS
    return cfg->shm_test_free;
#else
    (void)cfg;
    return -1;
#endif
}

int gs__cfg_shm_test_cma_deny(const gs__cfg_t *cfg)
{
#ifdef GS_TEST_HOOKS
    return cfg->shm_test_cma_deny;
#else
    (void)cfg;
    return -1;
#endif
}

int gs__cfg_comp_test_corrupt(const gs__cfg_t *cfg)
{
#ifdef GS_TEST_HOOKS
    return cfg->comp_test_corrupt;
#else
    (void)cfg;
    return -1;
#endif
}

int gs__cfg_test_hooks(void)
{
#ifdef GS_TEST_HOOKS
    return 1;
#else
    return 0;
#endif
}

int gs__cfg_num_knobs(void)
{
    return NUM_KNOBS;
}

gs_status_t gs__cfg_env_int(const char *env, int *value_out, int *set_out)
{
    const char *value;
    int idx = -1;

    for (int i = 0; i < NUM_KNOBS; i++) {
        if (strcmp(knobs[i].env, env) == 0) {
            idx = i;
            break;
        }
    }
    *set_out = 0;
    if ((idx < 0) || (knobs[idx].kind != GS_ENV_INT)) {
        return gs__error_set(GS_ERR_INTERNAL, "gs__cfg_env_int: %s is not an integer knob", env);
    }
    value = getenv(env);
    if ((value == NULL) || (value[0] == '\0')) {
        *value_out = knobs[idx].int_def;
        return GS_OK;
    }
    GS_CHECK(parse_int_knob(&knobs[idx], env, value, GS_CFG_SRC_ENV, value_out));
    *set_out = 1;
    return GS_OK;
}

gs_status_t gs__cfg_env_str(const char *env, char *buf, size_t len, int *set_out)
{
    const char *value;
    size_t vlen;
    int idx = -1;

    for (int i = 0; i < NUM_KNOBS; i++) {
        if (strcmp(knobs[i].env, env) == 0) {
            idx = i;
            break;
        }
    }
    *set_out = 0;
    if ((idx < 0) || (knobs[idx].kind != GS_ENV_STR) || (buf == NULL) || (len == 0)) {
        return gs__error_set(GS_ERR_INTERNAL, "gs__cfg_env_str: %s is not a string knob", env);
    }
    value = getenv(env);
    if ((value == NULL) || (value[0] == '\0')) {
        (void)snprintf(buf, len, "%s", knobs[idx].str_def);
        return GS_OK;
    }
    vlen = strlen(value);
    if ((vlen >= GS_CFG_STR_MAX) || (vlen >= len)) {
        return gs__error_set(GS_ERR_INVALID_ARG,
                             "%s is %zu bytes long; at most %zu bytes are allowed", env, vlen,
                             ((len < GS_CFG_STR_MAX) ? len : GS_CFG_STR_MAX) - 1);
    }
    memcpy(buf, value, vlen + 1);
    *set_out = 1;
    return GS_OK;
}

gs_status_t gs__cfg_describe(const gs__cfg_t *cfg, int idx, char *buf, size_t len)
{
    if ((cfg == NULL) || (buf == NULL) || (len == 0)) {
        return gs__error_set(GS_ERR_INVALID_ARG, "gs__cfg_describe: NULL argument");
    }
    if ((idx < 0) || (idx >= NUM_KNOBS)) {
        return gs__error_set(GS_ERR_INVALID_ARG, "gs__cfg_describe: knob %d out of range [0, %d)",
                             idx, NUM_KNOBS);
    }
    if (knobs[idx].kind == GS_ENV_INT) {
        (void)snprintf(buf, len, "%s=%d (%s)", knobs[idx].env, *knob_int_c(cfg, idx),
                       source_name(cfg->source[idx]));
    } else {
        char shown[GS_CFG_STR_MAX];

        (void)snprintf(buf, len, "%s=%s (%s)", knobs[idx].env, knob_shown(cfg, idx, shown),
                       source_name(cfg->source[idx]));
    }
    return GS_OK;
}

const char *gs__cfg_knob_name(int idx)
{
    return ((idx >= 0) && (idx < NUM_KNOBS)) ? knobs[idx].env : NULL;
}

gs__cfg_source_t gs__cfg_source_of(const gs__cfg_t *cfg, const char *env)
{
    for (int i = 0; i < NUM_KNOBS; i++) {
        if (strcmp(knobs[i].env, env) == 0) {
            return cfg->source[i];
        }
    }
    return GS_CFG_SRC_DEFAULT;
}

const char *gs__cfg_knob_doc(int idx)
{
    return ((idx >= 0) && (idx < NUM_KNOBS)) ? knobs[idx].doc : NULL;
}

int gs__cfg_knob_scope(int idx)
{
    return ((idx >= 0) && (idx < NUM_KNOBS)) ? knobs[idx].scope : -1;
}

void gs__cfg_unset_fields(gs_config_t *cfg, size_t nbytes)
{
    char *base = (char *)cfg;
    const char *null_str = NULL;
    const int unset = GS_UNSET;
    int i;

    for (i = 0; i < NUM_USER_FIELDS; i++) {
        const user_field_t *uf = &user_fields[i];

        if ((uf->off + uf->len) > nbytes) {
            continue;
        }
        if (uf->kind == GS_ENV_INT) {
            memcpy(base + uf->off, &unset, sizeof(unset));
        } else {
            memcpy(base + uf->off, &null_str, sizeof(null_str));
        }
    }
}

/* Edit distance of two short names (both under 64 bytes), for "did you mean". */
static size_t edit_distance(const char *a, size_t la, const char *b, size_t lb)
{
    size_t prev[64];
    size_t cur[64];
    size_t i;
    size_t j;

    for (j = 0; j <= lb; j++) {
        prev[j] = j;
    }
    for (i = 1; i <= la; i++) {
        cur[0] = i;
        for (j = 1; j <= lb; j++) {
            const size_t sub =
                prev[j - 1] +
                ((toupper((unsigned char)a[i - 1]) == toupper((unsigned char)b[j - 1])) ? 0 : 1);
            const size_t del = prev[j] + 1;
            const size_t ins = cur[j - 1] + 1;
            size_t best = (sub < del) ? sub : del;

            cur[j] = (best < ins) ? best : ins;
        }
        memcpy(prev, cur, (lb + 1) * sizeof(prev[0]));
    }
    return prev[lb];
}

static void warn_unknown_env_once(void)
{
    char **env;

    for (env = environ; (env != NULL) && (*env != NULL); env++) {
        const char *entry = *env;
        const char *eq = strchr(entry, '=');
        const size_t len = (eq != NULL) ? (size_t)(eq - entry) : strlen(entry);
        const char *best = NULL;
        size_t best_dist = 4; /* suggest only names at most 3 edits away */
        int known = 0;
        int i;

        if (strncmp(entry, "GS_", 3) != 0) {
            continue;
        }
        for (i = 0; i < NUM_KNOBS; i++) {
            const size_t klen = strlen(knobs[i].env);

            if ((klen == len) && (strncmp(entry, knobs[i].env, len) == 0)) {
                known = 1;
                break;
            }
            if ((len < 64) && (klen < 64)) {
                const size_t d = edit_distance(entry, len, knobs[i].env, klen);

                if (d < best_dist) {
                    best_dist = d;
                    best = knobs[i].env;
                }
            }
        }
        if (known) {
            continue;
        }
        if (!gs__cfg_test_hooks() && (strstr(entry, "_TEST_") != NULL) &&
            (strstr(entry, "_TEST_") < entry + len)) {
            GS_WARN("%.*s ignored: test switches exist only in the test build of the library "
                    "(gradsync_testhooks, linked by gradsync's own tests), never in this one",
                    (int)((len < 128) ? len : 128), entry);
        } else if (best != NULL) {
            GS_WARN("unknown environment variable %.*s ignored (did you mean %s?)",
                    (int)((len < 128) ? len : 128), entry, best);
        } else {
            GS_WARN("unknown environment variable %.*s ignored (gs_info --env lists every knob)",
                    (int)((len < 128) ? len : 128), entry);
        }
    }
}

void gs__cfg_warn_unknown_env(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;

    (void)pthread_once(&once, warn_unknown_env_once);
}
