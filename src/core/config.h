/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Resolved configuration: built-in default < GS_* environment < explicit
 * gs_config_t field. Every knob comes from env_table.h. The resolver also
 * records where each value came from, for `gs_info --env` and INFO logs.
 */
#ifndef GS_CORE_CONFIG_H
#define GS_CORE_CONFIG_H

#include "gradsync/gradsync.h"

#define GS_CFG_STR_MAX 256

typedef enum gs__cfg_source {
    GS_CFG_SRC_DEFAULT = 0,
    GS_CFG_SRC_ENV = 1,      /* a GS_* variable */
    GS_CFG_SRC_LAUNCHER = 2, /* a launcher's variable (gs_comm_init_env) */
    GS_CFG_SRC_CALLER = 3
} gs__cfg_source_t;


/* One field per env_table.h row, plus the source of each. */
typedef struct gs__cfg {
    int rank;
    int world_size;
    int local_rank;
    char master_addr[GS_CFG_STR_MAX];
    int master_port;
    int timeout_ms;
    char transport[GS_CFG_STR_MAX];
    char cuda_path[GS_CFG_STR_MAX];
    int cuda_stage_bytes;
    char nccl_library[GS_CFG_STR_MAX];
    int mpi_cuda_aware;
    int ps_servers;
    int tcp_nsocks;
    int tcp_spin_us;
    char connect[GS_CFG_STR_MAX];
    char tcp_rail_balance[GS_CFG_STR_MAX];
    int shm;
    int shm_bytes;
    char shm_max_bytes[GS_CFG_STR_MAX];
    int shm_slot_bytes;
    int shm_cma;
    char shm_design[GS_CFG_STR_MAX];
    /* env_table.h's GS_ENV_TEST_ROWS: set only in the test variant of the
     * library (GS_TEST_HOOKS); present in every build, so that the struct
     * is the same in both and only config.c is compiled twice. Read them
     * through gs__cfg_shm_test_free() and gs__cfg_comp_test_corrupt(). */
    int shm_test_free;
    int shm_test_cma_deny;
    int comp_test_corrupt;
    char socket_ifname[GS_CFG_STR_MAX];
    char socket_family[GS_CFG_STR_MAX];
    int slice_bytes;
    char algo[GS_CFG_STR_MAX];
    int algo_alpha_us;
    int algo_beta_mbps;
    int algo_gamma_mbps;
    int algo_intra_alpha_us;
    int algo_intra_beta_mbps;
    char tune[GS_CFG_STR_MAX];
    char host_id[GS_CFG_STR_MAX];
    char auth_token[GS_CFG_STR_MAX];
    char auth_token_file[GS_CFG_STR_MAX];
    int tls;
    char tls_cert[GS_CFG_STR_MAX];
    char tls_key[GS_CFG_STR_MAX];
    char tls_ca[GS_CFG_STR_MAX];
    char job_id[GS_CFG_STR_MAX];
    int trace_size;
    char dump_signal[GS_CFG_STR_MAX];
    char debug[GS_CFG_STR_MAX];
    char debug_subsys[GS_CFG_STR_MAX];
    char debug_file[GS_CFG_STR_MAX];
    char stats_file[GS_CFG_STR_MAX];
    int stats_interval_ms;
    char max_message_bytes[GS_CFG_STR_MAX];
    int heartbeat_ms;
    char store[GS_CFG_STR_MAX];
    int store_epoch;
    gs__cfg_source_t source[64]; /* indexed by env_table.h row */
} gs__cfg_t;

/* Number of rows in env_table.h. */
int gs__cfg_num_knobs(void);

/*
 * Resolve @p user (may be NULL) over the environment and the defaults into
 * *out. With @p use_launcher_env, also read torchrun/Open MPI/Slurm variables
 * for rank, world size, local rank and master address/port when neither the
 * caller nor GS_* set them. Validates every value (range, known string) and
 * that rank < world_size.
 * Returns GS_OK or GS_ERR_INVALID_ARG naming the variable or field.
 */
gs_status_t gs__cfg_resolve(const gs_config_t *user, int use_launcher_env, gs__cfg_t *out);

/*
 * One integer knob of env_table.h (@p env, e.g. "GS_PS_SERVERS") from the
 * environment alone, parsed as gs__cfg_resolve parses it: strict, within
 * the table's range, empty counts as unset. Local, reentrant, no logging.
 * Sets *value_out (the table's default when unset) and *set_out (1 when
 * the variable gave the value). Returns GS_OK, GS_ERR_INVALID_ARG naming
 * the variable and the allowed range, or GS_ERR_INTERNAL when @p env is no
 * integer row of the table.
 */
gs_status_t gs__cfg_env_int(const char *env, int *value_out, int *set_out);

/*
 * One string knob of env_table.h (@p env, e.g. "GS_NCCL_LIBRARY") from the
 * environment alone, as gs__cfg_env_int reads an integer one: empty counts
 * as unset. Writes the value (the table's default when unset) into @p buf
 * of @p len bytes and *set_out (1 when the variable gave it). Returns
 * GS_OK, GS_ERR_INVALID_ARG naming the variable when the value does not
 * fit (GS_CFG_STR_MAX - 1 bytes, or @p len - 1), or GS_ERR_INTERNAL when
 * @p env is no string row of the table.
 */
gs_status_t gs__cfg_env_str(const char *env, char *buf, size_t len, int *set_out);

/*
 * Write "NAME=value (source)" for knob @p idx of @p cfg into buf.
 * Returns GS_OK or GS_ERR_INVALID_ARG for an index out of range.
 */
gs_status_t gs__cfg_describe(const gs__cfg_t *cfg, int idx, char *buf, size_t len);

/* Name, doc string and scope of knob @p idx (NULL / -1 when out of range). */
const char *gs__cfg_knob_name(int idx);

/* Where cfg's value of the knob named @p env came from (GS_CFG_SRC_DEFAULT
 * for a name the table does not have). Pure. */
gs__cfg_source_t gs__cfg_source_of(const gs__cfg_t *cfg, const char *env);
/* The MPI-style launcher (Open MPI's mpirun, PMIx, Slurm's srun, Hydra's mpiexec) whose
 * rank variable is set in this process's environment, in words, or NULL (none, or
 * torchrun's RANK). One table (config.c) for this and the launcher variables. */
const char *gs__cfg_mpi_launcher(void);
const char *gs__cfg_knob_doc(int idx);
int gs__cfg_knob_scope(int idx);

/* The test-only fault switches (env_table.h's GS_ENV_TEST_ROWS): their
 * values in the test variant of the library (gradsync_testhooks, compiled
 * with GS_TEST_HOOKS), and "unset" (-1) in the library users get, where the
 * knobs and the code behind them are absent. */
int gs__cfg_shm_test_free(const gs__cfg_t *cfg);
/* GS_SHM_TEST_CMA_DENY in the test variant, else -1 (unset). */
int gs__cfg_shm_test_cma_deny(const gs__cfg_t *cfg);
int gs__cfg_comp_test_corrupt(const gs__cfg_t *cfg);

/* Whether this library has the test hooks compiled in (1: the test variant)
 * or not (0). */
int gs__cfg_test_hooks(void);

/* Warn once per process about GS_* variables that are not in the table
 * (a GS_*_TEST_* one in a build without test hooks: says so). */
void gs__cfg_warn_unknown_env(void);

/* Set every gs_config_t field that lies within the first @p nbytes of @p cfg
 * to "unset" (GS_UNSET or NULL). The one list of gs_config_t fields lives in
 * config.c; gs_config_init_v() uses this. */
void gs__cfg_unset_fields(gs_config_t *cfg, size_t nbytes);

#endif /* GS_CORE_CONFIG_H */
