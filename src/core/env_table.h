/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Every GS_* environment knob, in one X-macro table. From it come the
 * defaults of the resolved configuration (gs__cfg_t), the environment
 * parser (which rejects bad values naming the variable), `gs_info --env`,
 * and docs/env.md (checked against this table by a test).
 *
 * GS_ENV_TABLE(X): X(env name, gs__cfg_t field, kind, int default,
 *                    string default, min, max, scope, doc)
 *   kind  GS_ENV_INT or GS_ENV_STR (min/max apply to INT only)
 *   scope GS_ENV_COMM (per communicator, also a gs_config_t field of the
 *         same name), GS_ENV_PROC (process-wide, read once; some are also a
 *         gs_config_t field, config.c's GS_CFG_USER_PROC_FIELDS, which
 *         applies from the gs_comm_init that sets it on, and whose doc here
 *         says so) or GS_ENV_TEST (test-only knob: GS_ENV_TEST_ROWS only)
 */
#ifndef GS_CORE_ENV_TABLE_H
#define GS_CORE_ENV_TABLE_H

#define GS_ENV_INT 0
#define GS_ENV_STR 1

#define GS_ENV_COMM 0
#define GS_ENV_PROC 1
#define GS_ENV_TEST 2

/* Defaults of the cost model (algo_select.c reads them too), measured on
 * loopback TCP; docs/bench.md ("Cost-model calibration sweeps") has the
 * measurement. */
#define GS_ALGO_ALPHA_US_DEFAULT 20
#define GS_ALGO_BETA_MBPS_DEFAULT 2000
#define GS_ALGO_GAMMA_MBPS_DEFAULT 800
/* Between ranks of one host over shared memory (the hierarchical
 * all-reduce's inner phases, and every algorithm when the whole job is on
 * one host with shared memory between every pair): fitted to the forced-
 * algorithm sweep on 4 ranks (docs/bench.md, "Cost-model calibration
 * sweeps"). */
#define GS_ALGO_INTRA_ALPHA_US_DEFAULT 10
#define GS_ALGO_INTRA_BETA_MBPS_DEFAULT 2000

/* The test-only fault switches (scope GS_ENV_TEST), rows of their own:
 * GS_ENV_TABLE below does not hold them. Only config.c expands them, and
 * only in the test variant of the library (gradsync_testhooks, compiled
 * with GS_TEST_HOOKS, built with the tests and never installed), so that
 * the library users build, install or load from Python has neither the
 * knobs' names nor the code behind them (tests/install checks every row
 * below; config.c warns when one is set in a library without them). The
 * rows stay in one form so that the install check can read the names. */
#define GS_ENV_TEST_ROWS(X)                                                                        \
    X("GS_SHM_TEST_FREE_BYTES", shm_test_free, GS_ENV_INT, -1, "", 0, 2147483647, GS_ENV_TEST,     \
      "pretend /dev/shm has this many bytes free (tests of the TCP fallback)")                     \
    X("GS_SHM_TEST_CMA_DENY", shm_test_cma_deny, GS_ENV_INT, -1, "", 0, 1, GS_ENV_TEST,            \
      "1: this rank's process_vm_readv probe acts as if the kernel refused it (EPERM), as "        \
      "Yama's ptrace_scope does (tests of the fallback)")                                          \
    X("GS_COMP_TEST_CORRUPT", comp_test_corrupt, GS_ENV_INT, -1, "", 0, 1073741824, GS_ENV_TEST,   \
      "flip byte N (modulo the size) of every compressed payload this rank sends (tests of the "   \
      "receivers' checks against a rogue peer)")

#define GS_ENV_TABLE(X)                                                                            \
    X("GS_RANK", rank, GS_ENV_INT, -1, "", 0, 16777215, GS_ENV_COMM,                               \
      "rank of this process (launchers set RANK, OMPI_COMM_WORLD_RANK or SLURM_PROCID instead)")   \
    X("GS_WORLD_SIZE", world_size, GS_ENV_INT, -1, "", 1, 16777216, GS_ENV_COMM,                   \
      "number of ranks")                                                                           \
    X("GS_LOCAL_RANK", local_rank, GS_ENV_INT, -1, "", 0, 16777215, GS_ENV_COMM,                   \
      "rank among the ranks of this host")                                                         \
    X("GS_MASTER_ADDR", master_addr, GS_ENV_STR, 0, "127.0.0.1", 0, 0, GS_ENV_COMM,                \
      "host name or address of rank 0, which hosts the rendezvous")                                \
    X("GS_MASTER_PORT", master_port, GS_ENV_INT, 29500, "", 1, 65535, GS_ENV_COMM,                 \
      "TCP port of the rendezvous on rank 0")                                                      \
    X("GS_TIMEOUT_MS", timeout_ms, GS_ENV_INT, 300000, "", 1, 2147483647, GS_ENV_COMM,             \
      "deadline of every wait: an operation with no progress for this long fails with "            \
      "GS_ERR_TIMEOUT naming the rank")                                                            \
    X("GS_TRANSPORT", transport, GS_ENV_STR, 0, "tcp", 0, 0, GS_ENV_COMM,                          \
      "transport: tcp, or mpi (builds with GS_WITH_MPI; also chosen under mpirun/srun when no "    \
      "master address is set), or nccl (tcp for host buffers, NCCL required for device buffers: "  \
      "GS_CUDA_PATH=nccl)")                                                                        \
    X("GS_CUDA_PATH", cuda_path, GS_ENV_STR, 0, "auto", 0, 0, GS_ENV_PROC,                         \
      "device buffers (builds with GS_WITH_CUDA): auto (NCCL when built in and no two ranks "      \
      "share "                                                                                     \
      "a GPU, else staged through pinned host memory), nccl (NCCL or an error) or staged")         \
    X("GS_CUDA_STAGE_BYTES", cuda_stage_bytes, GS_ENV_INT, 4194304, "", 4096, 1073741824,          \
      GS_ENV_PROC,                                                                                 \
      "device buffers staged through host memory move in slices of this many bytes, the copy of "  \
      "one slice overlapping the collective of the previous one")                                  \
    X("GS_NCCL_LIBRARY", nccl_library, GS_ENV_STR, 0, "", 0, 0, GS_ENV_PROC,                       \
      "NCCL to load for device buffers (builds with GS_WITH_NCCL), loaded on first use: a path, "  \
      "or a file name the loader looks for on its path; unset: libnccl.so.2")                      \
    X("GS_MPI_CUDA_AWARE", mpi_cuda_aware, GS_ENV_INT, 0, "", 0, 1, GS_ENV_PROC,                   \
      "1: the MPI library is CUDA-aware, so with GS_TRANSPORT=mpi and no NCCL, plain "             \
      "all-reduce, broadcast, all-gather and reduce-scatter of device buffers go to MPI directly " \
      "(dtypes MPI has, no avg) instead of being staged; every rank must agree")                   \
    X("GS_PS_SERVERS", ps_servers, GS_ENV_INT, 0, "", 0, 16777215, GS_ENV_PROC,                    \
      "parameter server (gradsync/ps.h): the last S ranks serve only; 0 (default): every rank "    \
      "is a worker and the server of a shard; opts.servers wins")                                  \
    X("GS_TCP_NSOCKS", tcp_nsocks, GS_ENV_INT, 2, "", 1, 16, GS_ENV_COMM,                          \
      "TCP sockets per peer; large messages are striped over them")                                \
    X("GS_TCP_SPIN_US", tcp_spin_us, GS_ENV_INT, -1, "", -1, 100000, GS_ENV_PROC,                  \
      "poll (yielding the core) this many microseconds before sleeping in epoll; trades CPU for "  \
      "latency. -1: 100 when every peer is on shared memory (polling reads the rings, no "         \
      "syscall), else 0; also gs_config_t.tcp_spin_us")                                            \
    X("GS_CONNECT", connect, GS_ENV_STR, 0, "lazy", 0, 0, GS_ENV_PROC,                             \
      "TCP connections: lazy (each pair when it first talks; the ring's neighbours at init) or "   \
      "eager (every pair at init, so that a rank that cannot be reached fails the init)")          \
    X("GS_TCP_RAIL_BALANCE", tcp_rail_balance, GS_ENV_STR, 0, "rate", 0, 0, GS_ENV_PROC,           \
      "several rails (GS_SOCKET_IFNAME lists): rate (a large message is split in proportion to "   \
      "each rail's measured rate) or equal (equal shares, as NCCL and MPICH stripe)")              \
    X("GS_SHM", shm, GS_ENV_INT, 1, "", 0, 1, GS_ENV_PROC,                                         \
      "carry the traffic between ranks on the same host through shared memory (1) or TCP (0); "    \
      "also gs_config_t.shm")                                                                      \
    X("GS_SHM_BYTES", shm_bytes, GS_ENV_INT, 1048576, "", 1024, 1073741824, GS_ENV_PROC,           \
      "shared-memory ring size per direction and pair of local ranks; /dev/shm needs "             \
      "2 x this + 8 KiB per pair")                                                                 \
    X("GS_SHM_MAX_BYTES", shm_max_bytes, GS_ENV_STR, 0, "auto", 0, 0, GS_ENV_PROC,                 \
      "shared memory the L ranks of a communicator on one host may take together, in bytes or "    \
      "with a K, M, G or T suffix: its host segment (L x 2 x GS_SHM_SLOT_BYTES) first, then the "  \
      "pair rings, at most GS_SHM_BYTES and down to 64 KiB per direction; when even those do not " \
      "fit every pair, the nearest pairs (in rank order around the host) keep shared memory and "  \
      "the rest talk TCP (one WARN says so). auto: 32 MiB per local rank, at most half of "        \
      "/dev/shm")                                                                                  \
    X("GS_SHM_SLOT_BYTES", shm_slot_bytes, GS_ENV_INT, 1048576, "", 4096, 1073741824, GS_ENV_PROC, \
      "each rank's slot in the host segment of a communicator whose ranks share one host (two "    \
      "of them, double-buffered): the one-round collectives fit a message in it, the larger "      \
      "ones move through it in chunks of this size")                                               \
    X("GS_SHM_CMA", shm_cma, GS_ENV_INT, 1, "", 0, 1, GS_ENV_PROC,                                 \
      "let large collectives on one host read the peers' buffers with process_vm_readv (a "        \
      "single copy) where the kernel allows it (1), or never (0)")                                 \
    X("GS_SHM_DESIGN", shm_design, GS_ENV_STR, 0, "auto", 0, 0, GS_ENV_PROC,                       \
      "how a collective in the host segment runs: auto (the cost model chooses per size), "        \
      "one-round, chunked or single-copy (falls back to chunked where process_vm_readv is "        \
      "refused)")                                                                                  \
    X("GS_SOCKET_IFNAME", socket_ifname, GS_ENV_STR, 0, "", 0, 0, GS_ENV_COMM,                     \
      "network interfaces to use, NCCL's syntax: a comma-separated list of name prefixes "         \
      "(eth0,eth1 or eth), =NAME for an exact name, a leading ^ to exclude the list "              \
      "(^docker,lo; loopback only when an entry names it). The rendezvous listens on the first "   \
      "selected; several selected become rails of every TCP pair (at most 4). Default: the "       \
      "interface that routes to the master address")                                               \
    X("GS_SOCKET_FAMILY", socket_family, GS_ENV_STR, 0, "any", 0, 0, GS_ENV_COMM,                  \
      "address family: any, ipv4 or ipv6")                                                         \
    X("GS_SLICE_BYTES", slice_bytes, GS_ENV_INT, 262144, "", 64, 1073741824, GS_ENV_COMM,          \
      "pipeline slice size of the ring, the chain and the compressed all-reduce, in input bytes "  \
      "(small values are for tests)")                                                              \
    X("GS_ALGO", algo, GS_ENV_STR, 0, "", 0, 0, GS_ENV_COMM,                                       \
      "force an algorithm: NAME for every collective, or COLL:NAME,... (e.g. allreduce:ring)")     \
    X("GS_ALGO_ALPHA_US", algo_alpha_us, GS_ENV_INT, GS_ALGO_ALPHA_US_DEFAULT, "", 1, 10000000,    \
      GS_ENV_PROC, "cost model: latency of one message in microseconds (alpha)")                   \
    X("GS_ALGO_BETA_MBPS", algo_beta_mbps, GS_ENV_INT, GS_ALGO_BETA_MBPS_DEFAULT, "", 1,           \
      100000000, GS_ENV_PROC,                                                                      \
      "cost model: bandwidth of one link in MB/s (1/beta; 1 Gbit/s is 125)")                       \
    X("GS_ALGO_GAMMA_MBPS", algo_gamma_mbps, GS_ENV_INT, GS_ALGO_GAMMA_MBPS_DEFAULT, "", 1,        \
      100000000, GS_ENV_PROC, "cost model: reduction speed of one rank in MB/s (1/gamma)")         \
    X("GS_ALGO_INTRA_ALPHA_US", algo_intra_alpha_us, GS_ENV_INT, GS_ALGO_INTRA_ALPHA_US_DEFAULT,   \
      "", 1, 10000000, GS_ENV_PROC,                                                                \
      "cost model: latency of one message between ranks of one host over shared memory (the "      \
      "alpha of the hierarchical all-reduce's intra-host phases, and of every algorithm when all " \
      "ranks share one host and shared memory; GS_ALGO_ALPHA_US is the one between hosts)")        \
    X("GS_ALGO_INTRA_BETA_MBPS", algo_intra_beta_mbps, GS_ENV_INT,                                 \
      GS_ALGO_INTRA_BETA_MBPS_DEFAULT, "", 1, 100000000, GS_ENV_PROC,                              \
      "cost model: bandwidth between ranks of one host in MB/s; with several hosts, "              \
      "GS_ALGO_BETA_MBPS is the link between hosts and the hierarchical all-reduce is chosen "     \
      "when it is slow enough")                                                                    \
    X("GS_TUNE", tune, GS_ENV_STR, 0, "auto", 0, 0, GS_ENV_PROC,                                   \
      "probe: measure link latency, bandwidth and reduction speed at init (under 0.1 s on one "    \
      "host, 0.13-0.2 s across hosts whatever the link rate: its large messages are sized from "   \
      "a pilot) and feed the cost model the slowest rank's numbers; GS_ALGO_* "                    \
      "values set explicitly still win. auto: probe when the ranks span several hosts (the "       \
      "defaults describe one machine), not on one host. off: never; also gs_config_t.tune")        \
    X("GS_HOST_ID", host_id, GS_ENV_STR, 0, "", 0, 0, GS_ENV_PROC,                                 \
      "name of this rank's host; ranks with equal names share memory (default: hostname, boot id " \
      "and network namespace; set it to pretend one machine is several hosts)")                    \
    X("GS_AUTH_TOKEN", auth_token, GS_ENV_STR, 0, "", 0, 0, GS_ENV_PROC,                           \
      "shared secret of the job: every connection (rendezvous and transport) starts with a "       \
      "mutual HMAC-SHA256 challenge over fresh nonces, and a peer without it is dropped before "   \
      "any payload is read (docs/security.md); never logged; GS_AUTH_TOKEN_FILE keeps it out of "  \
      "the environment; also gs_config_t.auth_token")                                              \
    X("GS_AUTH_TOKEN_FILE", auth_token_file, GS_ENV_STR, 0, "", 0, 0, GS_ENV_PROC,                 \
      "file holding the job's token (one trailing newline is ignored); GS_AUTH_TOKEN wins; also "  \
      "gs_config_t.auth_token_file")                                                               \
    X("GS_TLS", tls, GS_ENV_INT, 0, "", 0, 1, GS_ENV_PROC,                                         \
      "1: every TCP transport connection is TLS 1.3 (OpenSSL), both peers presenting a "           \
      "certificate that chains to GS_TLS_CA; a peer without one is dropped before its HELLO is "   \
      "read; same-host shared memory is off; the rendezvous stays plain, authenticated by "        \
      "GS_AUTH_TOKEN (docs/security.md); also gs_config_t.tls")                                    \
    X("GS_TLS_CERT", tls_cert, GS_ENV_STR, 0, "", 0, 0, GS_ENV_PROC,                               \
      "with GS_TLS=1: PEM file with this rank's certificate (and chain); also "                    \
      "gs_config_t.tls_cert")                                                                      \
    X("GS_TLS_KEY", tls_key, GS_ENV_STR, 0, "", 0, 0, GS_ENV_PROC,                                 \
      "with GS_TLS=1: PEM file with the private key of GS_TLS_CERT; also gs_config_t.tls_key")     \
    X("GS_TLS_CA", tls_ca, GS_ENV_STR, 0, "", 0, 0, GS_ENV_PROC,                                   \
      "with GS_TLS=1: PEM file with the CA certificate(s) every peer's certificate must chain "    \
      "to; also gs_config_t.tls_ca")                                                               \
    X("GS_JOB_ID", job_id, GS_ENV_STR, 0, "", 0, 0, GS_ENV_COMM,                                   \
      "job name checked in every handshake, so ranks of another job are rejected")                 \
    X("GS_STORE", store, GS_ENV_STR, 0, "", 0, 0, GS_ENV_COMM,                                     \
      "bootstrap through a key-value store speaking torch's TCPStore protocol (torch's TCPStore, " \
      "or gradsync's own: gsrun --store) at host:port, under keys /prefix/epoch/...: "             \
      "host:port/prefix, [v6addr]:port/prefix; wins over torchrun's store and the rendezvous "     \
      "(docs/gsrun.md, docs/wire.md); also gs_config_t.store")                                     \
    X("GS_STORE_EPOCH", store_epoch, GS_ENV_INT, 0, "", 0, 2147483647, GS_ENV_COMM,                \
      "with GS_STORE: this configuration of the job; every new one (an elastic restart) takes a "  \
      "higher epoch, and a rank of an epoch below the highest begun under the prefix fails its "   \
      "init at once with GS_ERR_MISMATCH; also gs_config_t.store_epoch")                           \
    X("GS_STATS_FILE", stats_file, GS_ENV_STR, 0, "", 0, 0, GS_ENV_PROC,                           \
      "write each communicator's traffic statistics (totals, per collective, per peer) to this "   \
      "file as JSON lines at gs_comm_destroy; %h host, %p pid, %r rank (docs/stats.md); also "     \
      "gs_config_t.stats_file")                                                                    \
    X("GS_STATS_INTERVAL_MS", stats_interval_ms, GS_ENV_INT, 0, "", 0, 86400000, GS_ENV_PROC,      \
      "with GS_STATS_FILE: also write a line every this many milliseconds while operations run "   \
      "(0: only at destroy)")                                                                      \
    X("GS_MAX_MESSAGE_BYTES", max_message_bytes, GS_ENV_STR, 0, "64G", 0, 0, GS_ENV_PROC,          \
      "longest message accepted from a peer, in bytes or with a K, M, G or T suffix (binary), "    \
      "1K .. 16T: a peer announcing a longer one is failed with GS_ERR_PROTOCOL naming it and "    \
      "the limit, before anything is allocated for it (TCP and MPI transports; "                   \
      "docs/reliability.md); unexpected messages held are also bounded, 8 GiB over all peers")     \
    X("GS_HEARTBEAT_MS", heartbeat_ms, GS_ENV_INT, 1000, "", 0, 3600000, GS_ENV_COMM,              \
      "TCP: send a heartbeat on every connection idle this long, and fail with "                   \
      "GS_ERR_PEER_FAILED (\"no heartbeat from rank R for N ms\") a peer from which nothing "      \
      "arrived for 3 intervals (when that is below GS_TIMEOUT_MS): a frozen host or a pulled "     \
      "cable is found in seconds, not at "                                                         \
      "GS_TIMEOUT_MS; the worker thread beats while the application computes; 0: off "             \
      "(docs/design.md, \"Heartbeats\")")                                                          \
    X("GS_TRACE_SIZE", trace_size, GS_ENV_INT, 64, "", 1, 65536, GS_ENV_PROC,                      \
      "operations kept by each communicator's flight recorder (sequence number, collective, "      \
      "bytes, algorithm, times, status, peers waited on), printed by gs_comm_dump and "            \
      "GS_DUMP_SIGNAL; the same table decodes a peer's fingerprint on GS_ERR_MISMATCH")            \
    X("GS_DUMP_SIGNAL", dump_signal, GS_ENV_STR, 0, "", 0, 0, GS_ENV_PROC,                         \
      "signal (USR1, USR2, HUP, QUIT, PWR, WINCH or a number) that makes a live process print "    \
      "every communicator's flight recorder to the log at WARN, e.g. kill -USR1 PID; empty: no "   \
      "handler is installed")                                                                      \
    X("GS_DEBUG", debug, GS_ENV_STR, 0, "WARN", 0, 0, GS_ENV_PROC,                                 \
      "log level: NONE, VERSION, WARN, INFO or TRACE; also gs_config_t.debug (process-wide "       \
      "from the gs_comm_init that sets it)")                                                       \
    X("GS_DEBUG_SUBSYS", debug_subsys, GS_ENV_STR, 0, "INIT,BOOT,ENV", 0, 0, GS_ENV_PROC,          \
      "comma list of subsystems logged at INFO/TRACE: INIT,BOOT,NET,COLL,ALGO,COMP,PS,CUDA,ENV,"   \
      "ALLOC,P2P or ALL; also gs_config_t.debug_subsys")                                           \
    X("GS_DEBUG_FILE", debug_file, GS_ENV_STR, 0, "", 0, 0, GS_ENV_PROC,                           \
      "write the log to this file instead of stderr; %h host, %p pid, %r rank; also "              \
      "gs_config_t.debug_file")

#endif /* GS_CORE_ENV_TABLE_H */
