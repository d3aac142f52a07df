/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The shared-memory segment of one pair of ranks on the same host: a
 * header (who it belongs to), then two ring control blocks and two data
 * areas, one ring per direction (tcp_shm_ring.h). The lower rank creates it
 * with shm_open + ftruncate + posix_fallocate (so a full /dev/shm is an
 * error at creation, never a SIGBUS later) + mmap; the higher rank opens
 * and maps it, checks the header against what it expects, and unlinks the
 * name at once, so a crash afterwards leaves nothing in /dev/shm. Used by
 * the TCP transport for local peers (tcp_pipe_shm.c). No logging: failures are
 * explained in a caller buffer.
 */
#ifndef GS_TRANSPORT_TCP_TCP_SHM_SEG_H
#define GS_TRANSPORT_TCP_TCP_SHM_SEG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gradsync/status.h"
#include "transport/tcp/tcp_shm_ring.h"

/* Longest segment name, with the leading '/' and the NUL. */
#define GS_SHM_NAME_MAX 64
/* Bounds of the ring size per direction (GS_SHM_BYTES). */
#define GS_SHM_MIN_BYTES 1024ull
#define GS_SHM_MAX_BYTES (1ull << 30)
/* Header page + control blocks, before the two data areas. */
#define GS_SHM_SEG_OVERHEAD 8192ull
/* Where shm_open puts its files on Linux. */
#define GS_SHM_DIR "/dev/shm"

/* What a segment is for; the mapper checks every field. */
typedef struct gs__shm_seg_id {
    uint64_t job_id;
    uint64_t comm_id;
    uint32_t lo; /* the creating (lower) rank */
    uint32_t hi;
    uint64_t ring_bytes; /* per direction */
    uint64_t nonce;      /* random, chosen by the creator */
} gs__shm_seg_id_t;

typedef struct gs__shm_seg {
    void *base; /* NULL when not mapped */
    size_t len;
    char name[GS_SHM_NAME_MAX];
    bool named; /* the name still exists in /dev/shm (we must unlink it) */
} gs__shm_seg_t;

/* Bytes a segment with @p ring_bytes per direction occupies. */
uint64_t gs__shm_seg_bytes(uint64_t ring_bytes);

/*
 * Free bytes in /dev/shm: @p test_free when >= 0 (GS_SHM_TEST_FREE_BYTES),
 * else statvfs. Returns GS_OK or GS_ERR_SYSTEM (why filled).
 */
gs_status_t gs__shm_free_bytes(long long test_free, uint64_t *free_out, char *why, size_t whylen);

/*
 * Remove the segments in /dev/shm named by gradsync (gradsync-PID-...) whose
 * creating process is gone (kill(PID, 0) says ESRCH): what a rank killed
 * between creating a segment and its peer mapping it left behind. Names
 * of live processes, or of other users', are left alone. Returns how many
 * were removed.
 */
int gs__shm_seg_sweep(void);

/* The size of /dev/shm in bytes (statvfs), or 0 when it cannot be read. */
uint64_t gs__shm_total_bytes(void);

/*
 * Create, size, reserve and map a new segment for @p id (id->nonce is
 * chosen here), and write its header. Returns GS_OK, GS_ERR_NO_RESOURCE
 * (not enough room in /dev/shm, checked first with gs__shm_free_bytes and
 * then by posix_fallocate; why names the bytes needed and free), or
 * GS_ERR_SYSTEM. On failure nothing is left mapped or named.
 */
gs_status_t gs__shm_seg_create(gs__shm_seg_t *seg, gs__shm_seg_id_t *id, long long test_free,
                               char *why, size_t whylen);

/*
 * Open and map the segment @p name made by the peer, check its size and
 * header against @p id, and unlink the name. Returns GS_OK, GS_ERR_SYSTEM
 * (open/map failed) or GS_ERR_PROTOCOL (wrong size or header); on failure
 * nothing is left mapped.
 */
gs_status_t gs__shm_seg_open(gs__shm_seg_t *seg, const char *name, const gs__shm_seg_id_t *id,
                             char *why, size_t whylen);

/* Remove the name from /dev/shm if we still hold it (idempotent). */
void gs__shm_seg_unlink(gs__shm_seg_t *seg);

/* Unlink (if named) and unmap (idempotent). */
void gs__shm_seg_close(gs__shm_seg_t *seg);

/* Our views of the two rings: @p creator sends on the first one. */
void gs__shm_seg_rings(gs__shm_seg_t *seg, uint64_t ring_bytes, bool creator, gs__shm_ring_t *tx,
                       gs__shm_ring_t *rx);

/* 1 when @p name is a name gs__shm_seg_create could have made: '/', then
 * [A-Za-z0-9._-], NUL-terminated within GS_SHM_NAME_MAX. */
int gs__shm_name_ok(const char *name);

#endif /* GS_TRANSPORT_TCP_TCP_SHM_SEG_H */
