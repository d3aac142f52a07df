/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests of config.c: defaults, GS_* environment, caller fields and
 * their precedence, strict parsing and range errors that name the variable,
 * launcher variables (torchrun, Open MPI, PMIx, Slurm), validation, old
 * (shorter) gs_config_t structs, describe and the knob accessors, and the
 * unknown-GS_* warning. Each test starts from an environment with every
 * knob and launcher variable removed.
 */
#include "core/bootstrap.h"
#include "core/config.h"

#include "core/env_table.h"
#include "core/error.h"
#include "core/log.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

static const char *const launcher_vars[] = {
    "RANK",
    "WORLD_SIZE",
    "LOCAL_RANK",
    "MASTER_ADDR",
    "MASTER_PORT",
    "OMPI_COMM_WORLD_RANK",
    "OMPI_COMM_WORLD_SIZE",
    "OMPI_COMM_WORLD_LOCAL_RANK",
    "PMIX_RANK",
    "SLURM_PROCID",
    "SLURM_NTASKS",
    "SLURM_LOCALID",
    "PMI_RANK",
    "PMI_SIZE",
    "MPI_LOCALRANKID",
    "GS_TCP_NSOCK",
};

#define COUNT_ROW(_env, _field, _kind, _idef, _sdef, _min, _max, _scope, _doc) +1
static const int table_rows = 0 GS_ENV_TABLE(COUNT_ROW);
#undef COUNT_ROW

static int clean_env(void **state)
{
    size_t i;
    int k;

    (void)state;
    for (k = 0; k < gs__cfg_num_knobs(); k++) {
        unsetenv(gs__cfg_knob_name(k));
    }
    for (i = 0; i < sizeof(launcher_vars) / sizeof(launcher_vars[0]); i++) {
        unsetenv(launcher_vars[i]);
    }
    gs__error_clear();
    return 0;
}

static int knob_index(const char *env)
{
    int k;

    for (k = 0; k < gs__cfg_num_knobs(); k++) {
        if (strcmp(gs__cfg_knob_name(k), env) == 0) {
            return k;
        }
    }
    fail_msg("no knob %s", env);
    return -1;
}

/* The source of a knob, read from the table and through gs__cfg_source_of,
 * which must agree (an unknown name: the default). */
static gs__cfg_source_t src_of(const gs__cfg_t *cfg, const char *env)
{
    const gs__cfg_source_t src = cfg->source[knob_index(env)];

    assert_int_equal(gs__cfg_source_of(cfg, env), src);
    assert_int_equal(gs__cfg_source_of(cfg, "GS_NO_SUCH_KNOB"), GS_CFG_SRC_DEFAULT);
    return src;
}

static void init_rank(gs_config_t *cfg, int rank, int world)
{
    assert_int_equal(gs_config_init(cfg), GS_OK);
    cfg->rank = rank;
    cfg->world_size = world;
}

static void test_config_defaults(void **state)
{
    gs_config_t user;
    gs__cfg_t cfg;

    (void)state;
    init_rank(&user, 0, 1);
    assert_int_equal(gs__cfg_resolve(&user, 0, &cfg), GS_OK);
    assert_int_equal(cfg.rank, 0);
    assert_int_equal(cfg.world_size, 1);
    assert_int_equal(cfg.local_rank, -1);
    assert_string_equal(cfg.master_addr, "127.0.0.1");
    assert_int_equal(cfg.master_port, 29500);
    assert_int_equal(cfg.timeout_ms, 300000);
    assert_string_equal(cfg.transport, "tcp");
    assert_int_equal(cfg.tcp_nsocks, 2);
    assert_string_equal(cfg.socket_ifname, "");
    assert_string_equal(cfg.socket_family, "any");
    assert_int_equal(cfg.slice_bytes, 262144);
    assert_string_equal(cfg.algo, "");
    assert_string_equal(cfg.debug, "WARN");
    assert_string_equal(cfg.debug_subsys, "INIT,BOOT,ENV");
    assert_int_equal(src_of(&cfg, "GS_RANK"), GS_CFG_SRC_CALLER);
    assert_int_equal(src_of(&cfg, "GS_TCP_NSOCKS"), GS_CFG_SRC_DEFAULT);
    assert_int_equal(src_of(&cfg, "GS_MASTER_ADDR"), GS_CFG_SRC_DEFAULT);
}

static void test_config_rank_required_without_launcher(void **state)
{
    gs__cfg_t cfg;

    (void)state;
    assert_int_equal(gs__cfg_resolve(NULL, 0, &cfg), GS_ERR_INVALID_ARG);
    assert_non_null(strstr(gs_last_error(), "rank not set"));
    assert_non_null(strstr(gs_last_error(), "GS_RANK"));

    setenv("GS_RANK", "0", 1);
    assert_int_equal(gs__cfg_resolve(NULL, 0, &cfg), GS_ERR_INVALID_ARG);
    assert_non_null(strstr(gs_last_error(), "world size not set"));

    /* Launcher variables are ignored without use_launcher_env. */
    unsetenv("GS_RANK");
    setenv("RANK", "0", 1);
    setenv("WORLD_SIZE", "2", 1);
    assert_int_equal(gs__cfg_resolve(NULL, 0, &cfg), GS_ERR_INVALID_ARG);
}

static void test_config_launcher_default_single_rank(void **state)
{
    gs__cfg_t cfg;

    (void)state;
    assert_int_equal(gs__cfg_resolve(NULL, 1, &cfg), GS_OK);
    assert_int_equal(cfg.rank, 0);
    assert_int_equal(cfg.world_size, 1);
    assert_int_equal(cfg.local_rank, -1);
}

static void test_config_env_override(void **state)
{
    gs__cfg_t cfg;

    (void)state;
    setenv("GS_RANK", "1", 1);
    setenv("GS_WORLD_SIZE", "3", 1);
    setenv("GS_TCP_NSOCKS", "4", 1);
    setenv("GS_ALGO", "allreduce:ring", 1);
    setenv("GS_MASTER_PORT", "+1234", 1);
    setenv("GS_SOCKET_IFNAME", "", 1); /* empty counts as unset */
    assert_int_equal(gs__cfg_resolve(NULL, 0, &cfg), GS_OK);
    assert_int_equal(cfg.rank, 1);
    assert_int_equal(cfg.world_size, 3);
    assert_int_equal(cfg.tcp_nsocks, 4);
    assert_int_equal(cfg.master_port, 1234);
    assert_string_equal(cfg.algo, "allreduce:ring");
    assert_int_equal(src_of(&cfg, "GS_TCP_NSOCKS"), GS_CFG_SRC_ENV);
    assert_int_equal(src_of(&cfg, "GS_ALGO"), GS_CFG_SRC_ENV);
    assert_int_equal(src_of(&cfg, "GS_SOCKET_IFNAME"), GS_CFG_SRC_DEFAULT);
    assert_int_equal(src_of(&cfg, "GS_TIMEOUT_MS"), GS_CFG_SRC_DEFAULT);
}

/* GS_MAX_MESSAGE_BYTES is checked at init: a size with K/M/G/T from 1K to
 * 16T passes; anything else fails naming the variable. The token knob is
 * described without its value. */
static void test_config_max_message_and_secret(void **state)
{
    static const char *const good[] = {"64G", "1K", "16T", "1048576", "2MiB", "3GB"};
    static const char *const bad[] = {"12X", "0", "512", "17T", "-1", "1.5G", "G"};
    gs__cfg_t cfg;
    char line[256];

    (void)state;
    setenv("GS_RANK", "0", 1);
    setenv("GS_WORLD_SIZE", "1", 1);
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        setenv("GS_MAX_MESSAGE_BYTES", good[i], 1);
        assert_int_equal(gs__cfg_resolve(NULL, 0, &cfg), GS_OK);
    }
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        setenv("GS_MAX_MESSAGE_BYTES", bad[i], 1);
        assert_int_equal(gs__cfg_resolve(NULL, 0, &cfg), GS_ERR_INVALID_ARG);
        assert_non_null(strstr(gs__error_get(), "GS_MAX_MESSAGE_BYTES"));
    }
    unsetenv("GS_MAX_MESSAGE_BYTES");
    setenv("GS_AUTH_TOKEN", "hunter2-secret", 1);
    assert_int_equal(gs__cfg_resolve(NULL, 0, &cfg), GS_OK);
    for (int k = 0; k < gs__cfg_num_knobs(); k++) {
        assert_int_equal(gs__cfg_describe(&cfg, k, line, sizeof(line)), GS_OK);
        assert_null(strstr(line, "hunter2"));
    }
    unsetenv("GS_AUTH_TOKEN");
}

static void test_config_caller_beats_env(void **state)
{
    gs_config_t user;
    gs__cfg_t cfg;

    (void)state;
    setenv("GS_RANK", "2", 1);
    setenv("GS_WORLD_SIZE", "4", 1);
    setenv("GS_TCP_NSOCKS", "4", 1);
    setenv("GS_MASTER_ADDR", "10.1.2.3", 1);
    init_rank(&user, 1, GS_UNSET);
    user.tcp_nsocks = 8;
    user.master_addr = "::1";
    user.timeout_ms = 5;
    assert_int_equal(gs__cfg_resolve(&user, 0, &cfg), GS_OK);
    assert_int_equal(cfg.rank, 1);       /* caller */
    assert_int_equal(cfg.world_size, 4); /* env; caller left it unset */
    assert_int_equal(cfg.tcp_nsocks, 8);
    assert_string_equal(cfg.master_addr, "::1");
    assert_int_equal(cfg.timeout_ms, 5);
    assert_int_equal(src_of(&cfg, "GS_RANK"), GS_CFG_SRC_CALLER);
    assert_int_equal(src_of(&cfg, "GS_WORLD_SIZE"), GS_CFG_SRC_ENV);
    assert_int_equal(src_of(&cfg, "GS_TCP_NSOCKS"), GS_CFG_SRC_CALLER);
    assert_int_equal(src_of(&cfg, "GS_MASTER_ADDR"), GS_CFG_SRC_CALLER);
}

/* GS_STORE and GS_STORE_EPOCH: env and fields, a bad spec refused naming the variable and the
 * form, a negative epoch refused, the caller's field winning, a short struct leaving them unset. */
static void test_config_store(void **state)
{
    static const char *const bad[] = {"host", "host:29400",   "host:0/p", ":1/p",
                                      "h:1/", "[::1]29400/p", "h:1/a b"};
    gs_config_t user;
    gs__cfg_t cfg;

    (void)state;
    setenv("GS_RANK", "0", 1);
    setenv("GS_WORLD_SIZE", "2", 1);
    assert_int_equal(gs__cfg_resolve(NULL, 0, &cfg), GS_OK);
    assert_string_equal(cfg.store, "");
    assert_int_equal(cfg.store_epoch, 0);
    assert_false(gs__boot_kv_applies(&cfg));
    setenv("GS_STORE", "[::1]:29400/job/a", 1);
    setenv("GS_STORE_EPOCH", "7", 1);
    assert_int_equal(gs__cfg_resolve(NULL, 0, &cfg), GS_OK);
    assert_string_equal(cfg.store, "[::1]:29400/job/a");
    assert_int_equal(cfg.store_epoch, 7);
    assert_true(gs__boot_kv_applies(&cfg));
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        setenv("GS_STORE", bad[i], 1);
        assert_int_equal(gs__cfg_resolve(NULL, 0, &cfg), GS_ERR_INVALID_ARG);
        assert_non_null(strstr(gs__error_get(), "environment variable GS_STORE"));
        assert_non_null(strstr(gs__error_get(), "host:port/prefix"));
    }
    setenv("GS_STORE", "10.0.0.1:1/x", 1);
    setenv("GS_STORE_EPOCH", "-1", 1);
    assert_int_equal(gs__cfg_resolve(NULL, 0, &cfg), GS_ERR_INVALID_ARG);
    assert_non_null(strstr(gs__error_get(), "GS_STORE_EPOCH"));
    unsetenv("GS_STORE_EPOCH");
    init_rank(&user, 1, GS_UNSET);
    user.store = "node0:29400/job";
    user.store_epoch = 3;
    assert_int_equal(gs__cfg_resolve(&user, 0, &cfg), GS_OK);
    assert_string_equal(cfg.store, "node0:29400/job");
    assert_int_equal(cfg.store_epoch, 3);
    assert_int_equal(src_of(&cfg, "GS_STORE"), GS_CFG_SRC_CALLER);
    user.store_epoch = -2;
    assert_int_equal(gs__cfg_resolve(&user, 0, &cfg), GS_ERR_INVALID_ARG);
    assert_non_null(strstr(gs__error_get(), "cfg->store_epoch"));
    user.store_epoch = GS_UNSET;
    user.store = "node0:29400";
    assert_int_equal(gs__cfg_resolve(&user, 0, &cfg), GS_ERR_INVALID_ARG);
    assert_non_null(strstr(gs__error_get(), "cfg->store"));
    /* A caller built before the fields existed: they are not read (the env's value stays). */
    user.size = offsetof(gs_config_t, store);
    assert_int_equal(gs__cfg_resolve(&user, 0, &cfg), GS_OK);
    assert_string_equal(cfg.store, "10.0.0.1:1/x");
    assert_int_equal(src_of(&cfg, "GS_STORE"), GS_CFG_SRC_ENV);
}

static void test_config_bad_env_value_names_variable(void **state)
{
    static const char *const bad[] = {"4x", "abc", " 4", "4 ", "0x4", "", "-"};
    gs__cfg_t cfg;
    gs__cfg_t before;
    size_t i;

    (void)state;
    setenv("GS_RANK", "0", 1);
    setenv("GS_WORLD_SIZE", "1", 1);
    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        setenv("GS_TCP_NSOCKS", bad[i], 1);
        memset(&cfg, 0x33, sizeof(cfg));
        before = cfg;
        if (bad[i][0] == '\0') {
            assert_int_equal(gs__cfg_resolve(NULL, 0, &cfg), GS_OK); /* empty = unset */
            assert_int_equal(cfg.tcp_nsocks, 2);
            continue;
        }
        assert_int_equal(gs__cfg_resolve(NULL, 0, &cfg), GS_ERR_INVALID_ARG);
        assert_non_null(strstr(gs_last_error(), "GS_TCP_NSOCKS"));
        assert_non_null(strstr(gs_last_error(), bad[i]));
        assert_non_null(strstr(gs_last_error(), "[1, 16]"));
        assert_memory_equal(&cfg, &before, sizeof(cfg)); /* out written only on success */
    }
}

/* gs__cfg_env_int (ps_opts.c's reader) parses one knob as the resolver does. */
static void test_config_env_int_single_knob(void **state)
{
    static const char *const bad[] = {"4x", " 4", "-1", "16777216"};
    int v = -7;
    int set = -7;

    (void)state;
    assert_int_equal(gs__cfg_env_int("GS_PS_SERVERS", &v, &set), GS_OK);
    assert_int_equal(v, 0); /* unset: the table's default */
    assert_int_equal(set, 0);
    assert_int_equal(gs__cfg_env_int("GS_TIMEOUT_MS", &v, &set), GS_OK);
    assert_int_equal(v, 300000);
    setenv("GS_PS_SERVERS", "", 1); /* empty counts as unset */
    assert_int_equal(gs__cfg_env_int("GS_PS_SERVERS", &v, &set), GS_OK);
    assert_int_equal(set, 0);
    setenv("GS_PS_SERVERS", "3", 1);
    assert_int_equal(gs__cfg_env_int("GS_PS_SERVERS", &v, &set), GS_OK);
    assert_int_equal(v, 3);
    assert_int_equal(set, 1);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        setenv("GS_PS_SERVERS", bad[i], 1);
        assert_int_equal(gs__cfg_env_int("GS_PS_SERVERS", &v, &set), GS_ERR_INVALID_ARG);
        assert_int_equal(set, 0);
        assert_non_null(strstr(gs_last_error(), "GS_PS_SERVERS"));
        assert_non_null(strstr(gs_last_error(), "[0, 16777215]"));
    }
    assert_int_equal(gs__cfg_env_int("GS_ALGO", &v, &set), GS_ERR_INTERNAL); /* a string knob */
    assert_int_equal(gs__cfg_env_int("GS_NO_SUCH_KNOB", &v, &set), GS_ERR_INTERNAL);
}

static void test_config_out_of_range(void **state)
{
    gs_config_t user;
    gs__cfg_t cfg;
    char longval[GS_CFG_STR_MAX + 10];

    (void)state;
    setenv("GS_RANK", "0", 1);
    setenv("GS_WORLD_SIZE", "1", 1);

    setenv("GS_TCP_NSOCKS", "17", 1);
    assert_int_equal(gs__cfg_resolve(NULL, 0, &cfg), GS_ERR_INVALID_ARG);
    assert_non_null(strstr(gs_last_error(), "GS_TCP_NSOCKS=17 is out of range"));
    setenv("GS_TCP_NSOCKS", "0", 1);
    assert_int_equal(gs__cfg_resolve(NULL, 0, &cfg), GS_ERR_INVALID_ARG);
    setenv("GS_TCP_NSOCKS", "99999999999999999999999", 1);
    assert_int_equal(gs__cfg_resolve(NULL, 0, &cfg), GS_ERR_INVALID_ARG);
    setenv("GS_TCP_NSOCKS", "16", 1);
    assert_int_equal(gs__cfg_resolve(NULL, 0, &cfg), GS_OK);
    assert_int_equal(cfg.tcp_nsocks, 16);
    setenv("GS_MASTER_PORT", "65536", 1);
    assert_int_equal(gs__cfg_resolve(NULL, 0, &cfg), GS_ERR_INVALID_ARG);
    assert_non_null(strstr(gs_last_error(), "GS_MASTER_PORT"));
    unsetenv("GS_MASTER_PORT");

    memset(longval, 'h', sizeof(longval) - 1);
    longval[sizeof(longval) - 1] = '\0';
    setenv("GS_JOB_ID", longval, 1);
    assert_int_equal(gs__cfg_resolve(NULL, 0, &cfg), GS_ERR_INVALID_ARG);
    assert_non_null(strstr(gs_last_error(), "GS_JOB_ID"));
    unsetenv("GS_JOB_ID");

    /* Caller fields: same ranges, message names the field. */
    init_rank(&user, 0, 1);
    user.tcp_nsocks = 0;
    assert_int_equal(gs__cfg_resolve(&user, 0, &cfg), GS_ERR_INVALID_ARG);
    assert_non_null(strstr(gs_last_error(), "cfg->tcp_nsocks"));
    user.tcp_nsocks = GS_UNSET;
    user.slice_bytes = 63;
    assert_int_equal(gs__cfg_resolve(&user, 0, &cfg), GS_ERR_INVALID_ARG);
    assert_non_null(strstr(gs_last_error(), "cfg->slice_bytes"));
    user.slice_bytes = GS_UNSET;
    user.job_id = longval;
    assert_int_equal(gs__cfg_resolve(&user, 0, &cfg), GS_ERR_INVALID_ARG);
    assert_non_null(strstr(gs_last_error(), "cfg->job_id"));
    user.job_id = NULL;
    user.rank = -1;
    assert_int_equal(gs__cfg_resolve(&user, 0, &cfg), GS_ERR_INVALID_ARG);
    assert_non_null(strstr(gs_last_error(), "cfg->rank"));
}

static void test_config_launcher_torchrun(void **state)
{
    gs__cfg_t cfg;

    (void)state;
    setenv("RANK", "1", 1);
    setenv("WORLD_SIZE", "3", 1);
    setenv("LOCAL_RANK", "1", 1);
    setenv("MASTER_ADDR", "10.0.0.1", 1);
    setenv("MASTER_PORT", "1234", 1);
    setenv("OMPI_COMM_WORLD_RANK", "2", 1); /* torchrun's variables come first */
    assert_int_equal(gs__cfg_resolve(NULL, 1, &cfg), GS_OK);
    assert_int_equal(cfg.rank, 1);
    assert_int_equal(cfg.world_size, 3);
    assert_int_equal(cfg.local_rank, 1);
    assert_string_equal(cfg.master_addr, "10.0.0.1");
    assert_int_equal(cfg.master_port, 1234);
    assert_int_equal(src_of(&cfg, "GS_RANK"), GS_CFG_SRC_LAUNCHER);
    assert_int_equal(src_of(&cfg, "GS_MASTER_ADDR"), GS_CFG_SRC_LAUNCHER);

    /* GS_* beats the launcher. */
    setenv("GS_RANK", "0", 1);
    assert_int_equal(gs__cfg_resolve(NULL, 1, &cfg), GS_OK);
    assert_int_equal(cfg.rank, 0);
    assert_int_equal(src_of(&cfg, "GS_RANK"), GS_CFG_SRC_ENV);

    /* A bad launcher value is an error naming it. */
    unsetenv("GS_RANK");
    setenv("RANK", "one", 1);
    assert_int_equal(gs__cfg_resolve(NULL, 1, &cfg), GS_ERR_INVALID_ARG);
    assert_non_null(strstr(gs_last_error(), "RANK=one"));
}

static void test_config_launcher_ompi(void **state)
{
    gs__cfg_t cfg;

    (void)state;
    setenv("OMPI_COMM_WORLD_RANK", "2", 1);
    setenv("OMPI_COMM_WORLD_SIZE", "4", 1);
    setenv("OMPI_COMM_WORLD_LOCAL_RANK", "0", 1);
    setenv("PMIX_RANK", "6", 1);    /* Open MPI comes before PMIx */
    setenv("SLURM_PROCID", "3", 1); /* and before Slurm */
#ifdef GS_WITH_MPI
    assert_int_equal(gs__cfg_resolve(NULL, 1, &cfg), GS_OK);
#else
    /* Without the MPI transport a master address is needed (test_config_launcher_no_mpi). */
    assert_int_equal(gs__cfg_resolve(NULL, 1, &cfg), GS_ERR_UNSUPPORTED);
    setenv("GS_MASTER_ADDR", "127.0.0.1", 1);
    assert_int_equal(gs__cfg_resolve(NULL, 1, &cfg), GS_OK);
#endif
    assert_int_equal(cfg.rank, 2);
    assert_int_equal(cfg.world_size, 4);
    assert_int_equal(cfg.local_rank, 0);
    assert_int_equal(src_of(&cfg, "GS_WORLD_SIZE"), GS_CFG_SRC_LAUNCHER);
    assert_string_equal(cfg.master_addr, "127.0.0.1");
}

static void test_config_launcher_pmix(void **state)
{
    gs__cfg_t cfg;

    (void)state;
    setenv("PMIX_RANK", "5", 1);
    setenv("SLURM_PROCID", "3", 1);
    setenv("SLURM_NTASKS", "8", 1);
    setenv("MASTER_ADDR", "10.0.0.1", 1); /* a build without MPI needs one */
    assert_int_equal(gs__cfg_resolve(NULL, 1, &cfg), GS_OK);
    assert_int_equal(cfg.rank, 5);
    assert_int_equal(cfg.world_size, 8);
}

/* MPICH's and Intel MPI's mpiexec (Hydra): PMI_RANK, PMI_SIZE, MPI_LOCALRANKID, consulted
 * after every other launcher's. */
static void test_config_launcher_hydra(void **state)
{
    gs__cfg_t cfg;

    (void)state;
    setenv("PMI_RANK", "5", 1);
    setenv("PMI_SIZE", "8", 1);
    setenv("MPI_LOCALRANKID", "1", 1);
    setenv("GS_MASTER_ADDR", "10.0.0.1", 1); /* a build without MPI needs one */
    assert_int_equal(gs__cfg_resolve(NULL, 1, &cfg), GS_OK);
    assert_int_equal(cfg.rank, 5);
    assert_int_equal(cfg.world_size, 8);
    assert_int_equal(cfg.local_rank, 1);
    assert_int_equal(src_of(&cfg, "GS_RANK"), GS_CFG_SRC_LAUNCHER);
    assert_int_equal(src_of(&cfg, "GS_LOCAL_RANK"), GS_CFG_SRC_LAUNCHER);
    setenv("SLURM_PROCID", "3", 1);
    assert_int_equal(gs__cfg_resolve(NULL, 1, &cfg), GS_OK);
    assert_int_equal(cfg.rank, 3);

    /* A rank without a world size names every launcher variable that gives one. */
    unsetenv("PMI_SIZE");
    assert_int_equal(gs__cfg_resolve(NULL, 1, &cfg), GS_ERR_INVALID_ARG);
    assert_non_null(strstr(gs_last_error(), "world size not set"));
    assert_non_null(strstr(gs_last_error(), "PMI_SIZE"));
    assert_non_null(strstr(gs_last_error(), "SLURM_NTASKS"));
}

/* A string knob from the environment alone (gs__cfg_env_str, what the NCCL
 * loader reads GS_NCCL_LIBRARY with). */
static void test_config_env_str(void **state)
{
    char buf[GS_CFG_STR_MAX];
    char big[GS_CFG_STR_MAX + 8];
    int set = -1;

    (void)state;
    unsetenv("GS_NCCL_LIBRARY");
    assert_int_equal(gs__cfg_env_str("GS_NCCL_LIBRARY", buf, sizeof(buf), &set), GS_OK);
    assert_int_equal(set, 0);
    assert_string_equal(buf, "");
    setenv("GS_NCCL_LIBRARY", "/opt/nccl/lib/libnccl.so.2", 1);
    assert_int_equal(gs__cfg_env_str("GS_NCCL_LIBRARY", buf, sizeof(buf), &set), GS_OK);
    assert_int_equal(set, 1);
    assert_string_equal(buf, "/opt/nccl/lib/libnccl.so.2");
    assert_int_equal(gs__cfg_env_str("GS_NCCL_LIBRARY", buf, 8, &set), GS_ERR_INVALID_ARG);
    assert_non_null(strstr(gs_last_error(), "GS_NCCL_LIBRARY"));
    memset(big, 'a', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    setenv("GS_NCCL_LIBRARY", big, 1);
    assert_int_equal(gs__cfg_env_str("GS_NCCL_LIBRARY", buf, sizeof(buf), &set),
                     GS_ERR_INVALID_ARG);
    assert_int_equal(set, 0);
    unsetenv("GS_NCCL_LIBRARY");
    assert_int_equal(gs__cfg_env_str("GS_TCP_NSOCKS", buf, sizeof(buf), &set), GS_ERR_INTERNAL);
}

static void test_config_launcher_slurm(void **state)
{
    gs__cfg_t cfg;

    (void)state;
    setenv("SLURM_PROCID", "5", 1);
    setenv("SLURM_NTASKS", "8", 1);
    setenv("SLURM_LOCALID", "1", 1);
    setenv("GS_MASTER_ADDR", "10.0.0.1", 1); /* a build without MPI needs one */
    assert_int_equal(gs__cfg_resolve(NULL, 1, &cfg), GS_OK);
    assert_int_equal(cfg.rank, 5);
    assert_int_equal(cfg.world_size, 8);
    assert_int_equal(cfg.local_rank, 1);

    /* A rank without a world size is an error, not a single-rank job. */
    unsetenv("SLURM_NTASKS");
    assert_int_equal(gs__cfg_resolve(NULL, 1, &cfg), GS_ERR_INVALID_ARG);
    assert_non_null(strstr(gs_last_error(), "world size not set"));
}

/* Under mpirun/srun with no master address, a build without the MPI transport fails at
 * once in resolution, naming the launcher and the two ways out (issue 25); a build with
 * it resolves (comm_mpi.c bootstraps through MPI). An explicit master address works in
 * both. */
static void test_config_launcher_no_mpi(void **state)
{
    static const char *const launchers[][3] = {
        {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "Open MPI's mpirun"},
        {"PMIX_RANK", "SLURM_NTASKS", "PMIx"},
        {"SLURM_PROCID", "SLURM_NTASKS", "Slurm's srun"},
        {"PMI_RANK", "PMI_SIZE", "MPICH's or Intel MPI's mpiexec (Hydra)"},
    };
    gs_config_t user;
    gs__cfg_t cfg;

    (void)state;
    for (size_t i = 0; i < sizeof(launchers) / sizeof(launchers[0]); i++) {
        clean_env(NULL);
        setenv(launchers[i][0], "1", 1);
        setenv(launchers[i][1], "2", 1);
#ifdef GS_WITH_MPI
        assert_int_equal(gs__cfg_resolve(NULL, 1, &cfg), GS_OK);
#else
        assert_int_equal(gs__cfg_resolve(NULL, 1, &cfg), GS_ERR_UNSUPPORTED);
        assert_non_null(strstr(gs_last_error(), launchers[i][2]));
        assert_non_null(strstr(gs_last_error(), launchers[i][0]));
        assert_non_null(strstr(gs_last_error(), "no MPI transport"));
        assert_non_null(strstr(gs_last_error(), "GS_WITH_MPI"));
        assert_non_null(strstr(gs_last_error(), "GS_MASTER_ADDR and GS_MASTER_PORT"));
#endif
        /* Not a launcher check when the caller gave rank and size (gs_comm_init). */
        assert_int_equal(gs__cfg_resolve(NULL, 0, &cfg), GS_ERR_INVALID_ARG);
        /* An explicit master address, by any of its three ways, is used as given. */
        setenv("GS_MASTER_ADDR", "127.0.0.1", 1);
        assert_int_equal(gs__cfg_resolve(NULL, 1, &cfg), GS_OK);
        assert_int_equal(cfg.rank, 1);
        unsetenv("GS_MASTER_ADDR");
        setenv("MASTER_ADDR", "127.0.0.1", 1);
        assert_int_equal(gs__cfg_resolve(NULL, 1, &cfg), GS_OK);
        unsetenv("MASTER_ADDR");
        gs_config_init(&user);
        user.master_addr = "127.0.0.1";
        assert_int_equal(gs__cfg_resolve(&user, 1, &cfg), GS_OK);
    }
    /* torchrun's variables are not an MPI launcher's. */
    clean_env(NULL);
    setenv("RANK", "1", 1);
    setenv("WORLD_SIZE", "2", 1);
    setenv("OMPI_COMM_WORLD_SIZE", "2", 1);
    assert_int_equal(gs__cfg_resolve(NULL, 1, &cfg), GS_OK);
}

/* GS_SOCKET_IFNAME takes NCCL's syntax (prefixes, '=' exact, a leading '^' to exclude, comma
 * lists); a malformed value is refused at once, saying what is accepted (issue 25). The name
 * keeps the old one so that the history reads. */
/* GS_TCP_RAIL_BALANCE: rate (the default) or equal; anything else is refused at once. */
static void test_config_rail_balance(void **state)
{
    gs__cfg_t cfg;

    (void)state;
    assert_int_equal(gs__cfg_resolve(NULL, 1, &cfg), GS_OK);
    assert_string_equal(cfg.tcp_rail_balance, "rate");
    setenv("GS_TCP_RAIL_BALANCE", "equal", 1);
    assert_int_equal(gs__cfg_resolve(NULL, 1, &cfg), GS_OK);
    assert_string_equal(cfg.tcp_rail_balance, "equal");
    setenv("GS_TCP_RAIL_BALANCE", "fastest", 1);
    assert_int_equal(gs__cfg_resolve(NULL, 1, &cfg), GS_ERR_INVALID_ARG);
    assert_non_null(strstr(gs_last_error(), "GS_TCP_RAIL_BALANCE=\"fastest\""));
}

static void test_config_ifname_nccl_style_refused(void **state)
{
    static const char *const good[] = {"^lo", "=eth0", "eth0,eth1", "^docker,lo", "eth", "eth0"};
    static const char *const bad[] = {"eth0 ", "eth0,,eth1", ",",     "^",
                                      "=",     "eth0,^lo",   "eth0,", "averyveryverylongname0"};
    gs__cfg_t cfg;

    (void)state;
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        setenv("GS_SOCKET_IFNAME", good[i], 1);
        assert_int_equal(gs__cfg_resolve(NULL, 1, &cfg), GS_OK);
        assert_string_equal(cfg.socket_ifname, good[i]);
    }
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        setenv("GS_SOCKET_IFNAME", bad[i], 1);
        assert_int_equal(gs__cfg_resolve(NULL, 1, &cfg), GS_ERR_INVALID_ARG);
        assert_non_null(strstr(gs_last_error(), bad[i]));
        assert_non_null(strstr(gs_last_error(), "GS_SOCKET_IFNAME takes"));
        assert_non_null(strstr(gs_last_error(), "comma-separated list of interface-name prefixes"));
        assert_non_null(strstr(gs_last_error(), "^docker,lo"));
    }
}

static void test_config_rank_not_below_world_rejected(void **state)
{
    gs_config_t user;
    gs__cfg_t cfg;

    (void)state;
    setenv("GS_RANK", "4", 1);
    setenv("GS_WORLD_SIZE", "4", 1);
    assert_int_equal(gs__cfg_resolve(NULL, 0, &cfg), GS_ERR_INVALID_ARG);
    assert_non_null(strstr(gs_last_error(), "rank 4"));
    assert_non_null(strstr(gs_last_error(), "world size 4"));
    assert_non_null(strstr(gs_last_error(), "GS_RANK"));

    init_rank(&user, 3, GS_UNSET);
    assert_int_equal(gs__cfg_resolve(&user, 0, &cfg), GS_OK);
    assert_int_equal(cfg.rank, 3);

    user.local_rank = 4;
    assert_int_equal(gs__cfg_resolve(&user, 0, &cfg), GS_ERR_INVALID_ARG);
    assert_non_null(strstr(gs_last_error(), "local rank 4"));
}

static void test_config_transport_and_family_checked(void **state)
{
    gs_config_t user;
    gs__cfg_t cfg;

    (void)state;
    init_rank(&user, 0, 2);
    user.transport = "udp";
    assert_int_equal(gs__cfg_resolve(&user, 0, &cfg), GS_ERR_INVALID_ARG);
    assert_non_null(strstr(gs_last_error(), "udp"));
    assert_non_null(strstr(gs_last_error(), "tcp"));
    user.transport = "TCP";
    user.socket_family = "IPv6";
    assert_int_equal(gs__cfg_resolve(&user, 0, &cfg), GS_OK);
    assert_string_equal(cfg.transport, "tcp");
    assert_string_equal(cfg.socket_family, "ipv6");
    user.socket_family = NULL;
    setenv("GS_SOCKET_FAMILY", "ipv5", 1);
    assert_int_equal(gs__cfg_resolve(&user, 0, &cfg), GS_ERR_INVALID_ARG);
    assert_non_null(strstr(gs_last_error(), "ipv5"));
    assert_non_null(strstr(gs_last_error(), "GS_SOCKET_FAMILY"));
    unsetenv("GS_SOCKET_FAMILY");
    user.master_addr = "";
    assert_int_equal(gs__cfg_resolve(&user, 0, &cfg), GS_ERR_INVALID_ARG);
    assert_non_null(strstr(gs_last_error(), "cfg->master_addr"));
}

static void test_config_short_caller_struct_ignores_tail(void **state)
{
    gs_config_t user;
    gs__cfg_t cfg;

    (void)state;
    init_rank(&user, 1, 2);
    user.tcp_nsocks = 8; /* past the old struct's end: must not be read */
    user.job_id = "should-not-be-read";
    user.timeout_ms = 77; /* inside */
    user.size = offsetof(gs_config_t, tcp_nsocks);
    assert_int_equal(gs__cfg_resolve(&user, 0, &cfg), GS_OK);
    assert_int_equal(cfg.rank, 1);
    assert_int_equal(cfg.timeout_ms, 77);
    assert_int_equal(cfg.tcp_nsocks, 2);
    assert_string_equal(cfg.job_id, "");
    assert_int_equal(src_of(&cfg, "GS_TCP_NSOCKS"), GS_CFG_SRC_DEFAULT);

    user.size = 0; /* never initialised */
    assert_int_equal(gs__cfg_resolve(&user, 0, &cfg), GS_ERR_INVALID_ARG);
    assert_non_null(strstr(gs_last_error(), "gs_config_init"));

    user.size = sizeof(user);
    user.version = (GS_VERSION_MAJOR + 1) * 10000u;
    assert_int_equal(gs__cfg_resolve(&user, 0, &cfg), GS_ERR_VERSION_MISMATCH);
}

static void test_config_describe_and_knobs(void **state)
{
    gs__cfg_t cfg;
    char buf[GS_CFG_STR_MAX + 64];
    int k;

    (void)state;
    setenv("GS_TCP_NSOCKS", "4", 1);
    setenv("RANK", "1", 1);
    setenv("WORLD_SIZE", "2", 1);
    assert_int_equal(gs__cfg_resolve(NULL, 1, &cfg), GS_OK);

    assert_int_equal(gs__cfg_num_knobs(), table_rows);
    assert_int_equal(gs__cfg_describe(&cfg, knob_index("GS_TCP_NSOCKS"), buf, sizeof(buf)), GS_OK);
    assert_string_equal(buf, "GS_TCP_NSOCKS=4 (environment)");
    assert_int_equal(gs__cfg_describe(&cfg, knob_index("GS_RANK"), buf, sizeof(buf)), GS_OK);
    assert_string_equal(buf, "GS_RANK=1 (launcher)");
    assert_int_equal(gs__cfg_describe(&cfg, knob_index("GS_TRANSPORT"), buf, sizeof(buf)), GS_OK);
    assert_string_equal(buf, "GS_TRANSPORT=tcp (default)");
    assert_int_equal(gs__cfg_describe(&cfg, table_rows, buf, sizeof(buf)), GS_ERR_INVALID_ARG);
    assert_int_equal(gs__cfg_describe(&cfg, -1, buf, sizeof(buf)), GS_ERR_INVALID_ARG);

    assert_string_equal(gs__cfg_knob_name(0), "GS_RANK");
    assert_int_equal(gs__cfg_knob_scope(knob_index("GS_DEBUG")), GS_ENV_PROC);
    assert_int_equal(gs__cfg_knob_scope(knob_index("GS_TCP_NSOCKS")), GS_ENV_COMM);
    for (k = 0; k < table_rows; k++) {
        assert_non_null(gs__cfg_knob_name(k));
        assert_int_equal(strncmp(gs__cfg_knob_name(k), "GS_", 3), 0);
        assert_true(strlen(gs__cfg_knob_doc(k)) > 0);
        assert_true(gs__cfg_knob_scope(k) >= GS_ENV_COMM);
        assert_true(gs__cfg_knob_scope(k) <= GS_ENV_TEST);
    }
    assert_null(gs__cfg_knob_name(table_rows));
    assert_null(gs__cfg_knob_doc(-1));
    assert_int_equal(gs__cfg_knob_scope(table_rows), -1);
}

/* The library the unit tests link (gradsync_static, as built and installed)
 * has none of the test-only fault switches: no knob, and a switch set in the
 * environment changes nothing. Only gradsync_testhooks has them. */
static void test_config_no_test_switches(void **state)
{
#define TEST_ROW_NAME(_env, _field, _kind, _idef, _sdef, _min, _max, _scope, _doc) (_env),
    static const char *const test_rows[] = {GS_ENV_TEST_ROWS(TEST_ROW_NAME)};
#undef TEST_ROW_NAME
    gs__cfg_t cfg;
    size_t i;
    int k;

    (void)state;
    assert_int_equal(gs__cfg_test_hooks(), 0);
    for (i = 0; i < sizeof(test_rows) / sizeof(test_rows[0]); i++) {
        for (k = 0; k < gs__cfg_num_knobs(); k++) {
            assert_string_not_equal(gs__cfg_knob_name(k), test_rows[i]);
        }
        setenv(test_rows[i], "5", 1);
    }
    assert_int_equal(gs__cfg_resolve(NULL, 1, &cfg), GS_OK); /* one rank */
    assert_int_equal(gs__cfg_shm_test_free(&cfg), -1);
    assert_int_equal(gs__cfg_comp_test_corrupt(&cfg), -1);
    for (i = 0; i < sizeof(test_rows) / sizeof(test_rows[0]); i++) {
        unsetenv(test_rows[i]);
    }
}

static void test_config_unset_fields_respects_size(void **state)
{
    gs_config_t user;

    (void)state;
    memset(&user, 0, sizeof(user));
    gs__cfg_unset_fields(&user, offsetof(gs_config_t, master_addr));
    assert_int_equal(user.rank, GS_UNSET);
    assert_int_equal(user.local_rank, GS_UNSET);
    assert_int_equal(user.master_port, 0);
    gs__cfg_unset_fields(&user, sizeof(user));
    assert_int_equal(user.master_port, GS_UNSET);
    assert_int_equal(user.slice_bytes, GS_UNSET);
}

static void test_config_warn_unknown_env(void **state)
{
    char dir[] = "/tmp/gs_test_config_XXXXXX";
    char path[128];
    char text[4096];
    FILE *f;
    size_t n;

    (void)state;
    assert_non_null(mkdtemp(dir));
    (void)snprintf(path, sizeof(path), "%s/log.txt", dir);
    setenv("GS_DEBUG_FILE", path, 1);
    setenv("GS_TCP_NSOCK", "3", 1);
    gs__log_reset_for_test();
    gs__cfg_warn_unknown_env();
    gs__cfg_warn_unknown_env(); /* once per process */
    unsetenv("GS_DEBUG_FILE");
    gs__log_reset_for_test(); /* closes the file */

    f = fopen(path, "r");
    assert_non_null(f);
    n = fread(text, 1, sizeof(text) - 1, f);
    fclose(f);
    text[n] = '\0';
    assert_non_null(strstr(text, "unknown environment variable GS_TCP_NSOCK ignored (did you "
                                 "mean GS_TCP_NSOCKS?)"));
    assert_null(strstr(strstr(text, "GS_TCP_NSOCK ignored") + 1, "GS_TCP_NSOCK ignored"));
    assert_null(strstr(text, "GS_DEBUG_FILE ignored"));
    unlink(path);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_config_defaults, clean_env),
        cmocka_unit_test_setup(test_config_launcher_no_mpi, clean_env),
        cmocka_unit_test_setup(test_config_rail_balance, clean_env),
        cmocka_unit_test_setup(test_config_ifname_nccl_style_refused, clean_env),
        cmocka_unit_test_setup(test_config_rank_required_without_launcher, clean_env),
        cmocka_unit_test_setup(test_config_launcher_default_single_rank, clean_env),
        cmocka_unit_test_setup(test_config_env_override, clean_env),
        cmocka_unit_test_setup(test_config_caller_beats_env, clean_env),
        cmocka_unit_test_setup(test_config_bad_env_value_names_variable, clean_env),
        cmocka_unit_test_setup(test_config_env_int_single_knob, clean_env),
        cmocka_unit_test_setup(test_config_out_of_range, clean_env),
        cmocka_unit_test_setup(test_config_launcher_torchrun, clean_env),
        cmocka_unit_test_setup(test_config_launcher_ompi, clean_env),
        cmocka_unit_test_setup(test_config_launcher_pmix, clean_env),
        cmocka_unit_test_setup(test_config_launcher_hydra, clean_env),
        cmocka_unit_test_setup(test_config_env_str, clean_env),
        cmocka_unit_test_setup(test_config_launcher_slurm, clean_env),
        cmocka_unit_test_setup(test_config_rank_not_below_world_rejected, clean_env),
        cmocka_unit_test_setup(test_config_transport_and_family_checked, clean_env),
        cmocka_unit_test_setup(test_config_short_caller_struct_ignores_tail, clean_env),
        cmocka_unit_test_setup(test_config_describe_and_knobs, clean_env),
        cmocka_unit_test_setup(test_config_no_test_switches, clean_env),
        cmocka_unit_test_setup(test_config_unset_fields_respects_size, clean_env),
        cmocka_unit_test_setup(test_config_warn_unknown_env, clean_env),
        cmocka_unit_test_setup(test_config_max_message_and_secret, clean_env),
        cmocka_unit_test_setup(test_config_store, clean_env),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
