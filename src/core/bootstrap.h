/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Rendezvous: rank 0 listens on GS_MASTER_ADDR:GS_MASTER_PORT, every other
 * rank connects and sends a hello (job, rank, world size, its transport
 * address and host id, and the port of its bootstrap ring); when all have
 * arrived, rank 0 answers each with a random job nonce and the address of
 * the next rank's ring port only, then closes the port. The ranks connect
 * into a ring (rank r to rank r + 1) and pass every rank's row (transport
 * address, host id; core/host.h: ranks with equal ids share a machine)
 * both ways round it, about n/2 steps, so rank 0 sends O(1) per rank
 * instead of the whole table (docs/scale.md). With a job token rank 0
 * still sends the whole table (the ring's sockets have no authentication
 * of their own). Above GS_BOOT_STAGGER_RANKS ranks, rank r contacts rank 0
 * r / GS_BOOT_STAGGER_RATE seconds after the start, so that rank 0's
 * backlog is not flooded. Rank 0 validates every hello: connections with a
 * bad magic or version are logged and dropped without disturbing the job;
 * a different job id is refused; ranks that disagree on the world size, or
 * a rank that joins twice, fail the whole rendezvous with GS_ERR_MISMATCH
 * on every rank, and ranks that never join fail it with GS_ERR_TIMEOUT
 * naming them. A ring neighbour that presents another job's hash or nonce,
 * or the wrong rank, is dropped (WARN) and waited for again; one that
 * never comes fails the init with GS_ERR_TIMEOUT naming it.
 * With a job token (core/auth.h) the hello carries the client's nonce and
 * the AUTH flag; rank 0 answers with AUTH (its nonce and MAC) and the
 * client, having checked it, sends PROOF. Rank 0 takes the hello only when
 * the PROOF checks out: a connection that fails is logged and dropped
 * without disturbing the job, and a rank whose token is missing or
 * different is told so and fails with GS_ERR_AUTH.
 * The wire format is in docs/wire.md; the pure encode/decode functions are
 * exposed for tests and the fuzzer.
 */
#ifndef GS_CORE_BOOTSTRAP_H
#define GS_CORE_BOOTSTRAP_H

#include <stddef.h>
#include <stdint.h>

#include "core/auth.h"
#include "core/config.h"
#include "core/socket.h"

#define GS_BOOT_MAGIC_HELLO 0x48425347u /* "GSBH" */
#define GS_BOOT_MAGIC_TABLE 0x54425347u /* "GSBT" */
#define GS_BOOT_MAGIC_AUTH 0x41425347u  /* "GSBA": rank 0's nonce and MAC */
#define GS_BOOT_MAGIC_PROOF 0x50425347u /* "GSBP": the client's MAC */
#define GS_BOOT_MAGIC_RING 0x52425347u  /* "GSBR": a ring neighbour's hello */
/* 2: table entries carry the host id; 3: authentication; 4: the bootstrap ring (the hello's
 * ring port, the reply's ring mode, the ring's hello and rows). */
#define GS_BOOT_VERSION 4u
#define GS_BOOT_HELLO_BYTES 60
#define GS_BOOT_AUTH_BYTES 56  /* magic, 4 zero bytes, nonce, MAC */
#define GS_BOOT_PROOF_BYTES 40 /* magic, 4 zero bytes, MAC */
#define GS_BOOT_F_AUTH 1u      /* hello flag: this rank has a token; nonce is set */
#define GS_BOOT_AUTH_DOMAIN "rendezvous"
#define GS_BOOT_TABLE_HDR_BYTES 24
#define GS_BOOT_ENTRY_BYTES 12
#define GS_BOOT_MSG_MAX 256
#define GS_BOOT_RING_HELLO_BYTES 32 /* magic, version, job hash, job nonce, rank, world */
#define GS_BOOT_ROW_BYTES 16        /* rank, address length, host id; the address follows */
/* Above this many ranks, contact with rank 0 is staggered at this many ranks a second. */
#define GS_BOOT_STAGGER_RANKS 256
#define GS_BOOT_STAGGER_RATE 7000

typedef struct gs__boot_hello {
    uint32_t version;
    uint64_t job_hash;
    uint32_t rank;
    uint32_t world;
    uint64_t host_id;
    uint32_t addr_len;  /* bytes of address text that follow, < GS_SOCK_ADDR_MAX */
    uint32_t flags;     /* GS_BOOT_F_* */
    uint8_t nonce[16];  /* GS_BOOT_F_AUTH: the client's nonce */
    uint32_t ring_port; /* the port of its bootstrap ring (on its address's host); 0: none */
} gs__boot_hello_t;

/* Encode the fixed part of a hello into out[GS_BOOT_HELLO_BYTES]. */
void gs__boot_hello_encode(const gs__boot_hello_t *h, uint8_t *out);
/* Decode and validate the fixed part. Returns GS_OK, GS_ERR_PROTOCOL (bad
 * magic, address length or unknown flags) or GS_ERR_VERSION_MISMATCH; the
 * message says which. */
gs_status_t gs__boot_hello_decode(const uint8_t *in, size_t len, gs__boot_hello_t *out);

typedef struct gs__boot_table_hdr {
    int32_t status;   /* GS_OK, or the error every rank must report */
    uint64_t nonce;   /* random per job, checked in transport handshakes and by the ring */
    uint32_t world;   /* the world size */
    uint32_t msg_len; /* status != GS_OK: bytes of error text that follow; GS_OK: the mode,
                       * GS_BOOT_REPLY_TABLE (world entries follow) or GS_BOOT_REPLY_RING
                       * (one entry: the next rank's ring address and host id) */
} gs__boot_table_hdr_t;

#define GS_BOOT_REPLY_TABLE 0u
#define GS_BOOT_REPLY_RING 1u

void gs__boot_table_hdr_encode(const gs__boot_table_hdr_t *h, uint8_t *out);
gs_status_t gs__boot_table_hdr_decode(const uint8_t *in, size_t len, gs__boot_table_hdr_t *out);

/* One row of the table, before its address text: the address length and
 * the rank's host id. decode returns GS_OK or GS_ERR_PROTOCOL (address
 * length 0 or >= GS_SOCK_ADDR_MAX, host id 0); the message says which. */
void gs__boot_entry_encode(uint32_t addr_len, uint64_t host_id, uint8_t *out);
gs_status_t gs__boot_entry_decode(const uint8_t *in, size_t len, uint32_t *addr_len_out,
                                  uint64_t *host_id_out);

/* The ring: a neighbour's hello (rank r to rank r + 1, on the ring port)
 * and the rows passed round it. decode returns GS_OK or GS_ERR_PROTOCOL
 * (magic, version; a row's address length 0 or >= GS_SOCK_ADDR_MAX, host
 * id 0), the message saying which. */
typedef struct gs__boot_ring_hello {
    uint64_t job_hash;
    uint64_t nonce; /* the job nonce rank 0 handed out */
    uint32_t rank;
    uint32_t world;
} gs__boot_ring_hello_t;
void gs__boot_ring_hello_encode(const gs__boot_ring_hello_t *h, uint8_t *out);
gs_status_t gs__boot_ring_hello_decode(const uint8_t *in, size_t len, gs__boot_ring_hello_t *out);
void gs__boot_row_encode(uint32_t rank, uint32_t addr_len, uint64_t host_id, uint8_t *out);
gs_status_t gs__boot_row_decode(const uint8_t *in, size_t len, uint32_t *rank_out,
                                uint32_t *addr_len_out, uint64_t *host_id_out);

/* AUTH (rank 0's nonce and MAC) and PROOF (the client's MAC) records.
 * decode returns GS_OK or GS_ERR_PROTOCOL (magic, nonzero padding). */
void gs__boot_auth_encode(const uint8_t nonce[16], const uint8_t mac[32], uint8_t *out);
gs_status_t gs__boot_auth_decode(const uint8_t *in, size_t len, uint8_t nonce[16], uint8_t mac[32]);
void gs__boot_proof_encode(const uint8_t mac[32], uint8_t *out);
gs_status_t gs__boot_proof_decode(const uint8_t *in, size_t len, uint8_t mac[32]);

/* The endpoint exchange of a bootstrap provider (the table in
 * api/comm_boot.c): gs__bootstrap_exchange's contract, below. The
 * rendezvous's is gs__bootstrap_exchange. */
typedef gs_status_t (*gs__boot_exchange_fn_t)(const gs__cfg_t *cfg, const gs__auth_t *auth,
                                              const volatile int *abort_flag, const char *my_addr,
                                              char (*addrs_out)[GS_SOCK_ADDR_MAX],
                                              uint64_t *hosts_out, uint64_t *nonce_out);

/* The hash of cfg's job id that hellos carry, and a fresh random job nonce. */
uint64_t gs__boot_job_hash(const gs__cfg_t *cfg);
/* A hello of this protocol version for cfg's rank, world size, host and job, with an
 * address of @p addr_len bytes, no flags. */
void gs__boot_hello_init(gs__boot_hello_t *h, const gs__cfg_t *cfg, size_t addr_len);
uint64_t gs__boot_job_nonce(void);

/*
 * Exchange transport addresses with every rank. cfg gives rank, world size,
 * master address/port, timeout and job id. my_addr is this rank's transport
 * address. On success addrs_out[i] holds rank i's address and hosts_out[i]
 * its host id (world_size rows each; this rank's id is
 * gs__host_id(cfg->host_id)) and *nonce_out the job nonce. @p auth is the
 * job token (NULL or off: none). Blocking, bounded by cfg->timeout_ms; a
 * set @p abort_flag (gs_config_t.abort_flag; may be NULL) ends it within
 * about 20 ms with GS_ERR_ABORTED.
 * Returns GS_OK, GS_ERR_TIMEOUT, GS_ERR_MISMATCH, GS_ERR_AUTH,
 * GS_ERR_PROTOCOL, GS_ERR_SYSTEM, GS_ERR_NO_MEMORY.
 */
gs_status_t gs__bootstrap_exchange(const gs__cfg_t *cfg, const gs__auth_t *auth,
                                   const volatile int *abort_flag, const char *my_addr,
                                   char (*addrs_out)[GS_SOCK_ADDR_MAX], uint64_t *hosts_out,
                                   uint64_t *nonce_out);

/*
 * The same exchange through torchrun's store (bootstrap_store.c): under
 * torchrun (TORCHELASTIC_USE_AGENT_STORE=True) MASTER_ADDR:MASTER_PORT is
 * the TCPStore of torchrun's agent, so rank 0 cannot listen there; every
 * rank sets its hello in the store and rank 0 sets the table (the
 * rendezvous's encodings, docs/wire.md). The same checks, contract and
 * returns as gs__bootstrap_exchange, with GS_ERR_TIMEOUT naming the ranks
 * that did not publish. gs__boot_store_applies says whether it is the one
 * to use: torchrun's agent hosts the store and no GS_MASTER_PORT (or
 * caller's port) names a rendezvous port of gradsync's own.
 */
int gs__boot_store_applies(const gs__cfg_t *rcfg);
gs_status_t gs__bootstrap_store_exchange(const gs__cfg_t *cfg, const gs__auth_t *auth,
                                         const volatile int *abort_flag, const char *my_addr,
                                         char (*addrs_out)[GS_SOCK_ADDR_MAX], uint64_t *hosts_out,
                                         uint64_t *nonce_out);

/*
 * The same exchange through an explicit store, cfg->store (GS_STORE,
 * "host:port/prefix": torch's TCPStore or gradsync's own, core/kvserver.h),
 * under keys /<prefix>/<cfg->store_epoch>/... (docs/wire.md). The epoch
 * rule: every rank reads /<prefix>/epoch first; a rank whose epoch is below
 * it fails at once with GS_ERR_MISMATCH ("epoch E is stale: ... start this
 * rank with GS_STORE_EPOCH=M or later"), having written nothing; rank 0
 * raises it to its own (compare-set, never lowering it); a rank that times
 * out reads it again and reports "stale" (GS_ERR_MISMATCH) when the job
 * moved on. Otherwise gs__bootstrap_store_exchange's contract and returns.
 * gs__boot_kv_applies: 1 when cfg->store is set.
 */
int gs__boot_kv_applies(const gs__cfg_t *rcfg);
gs_status_t gs__bootstrap_kv_exchange(const gs__cfg_t *cfg, const gs__auth_t *auth,
                                      const volatile int *abort_flag, const char *my_addr,
                                      char (*addrs_out)[GS_SOCK_ADDR_MAX], uint64_t *hosts_out,
                                      uint64_t *nonce_out);
/* The store's epoch value (decimal text, @p len bytes, no NUL needed) as an
 * int >= 0. Pure. Returns GS_OK or GS_ERR_PROTOCOL (no message set). */
gs_status_t gs__boot_epoch_parse(const void *text, size_t len, int *epoch_out);

#endif /* GS_CORE_BOOTSTRAP_H */
