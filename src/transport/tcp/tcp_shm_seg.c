/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Shared-memory segments for a pair of local ranks (contract in tcp_shm_seg.h).
 *
 * Layout (offsets in bytes):
 *   0      header: magic u64, version u32, 0 u32, job u64, comm u64,
 *          lo u32, hi u32, ring_bytes u64, nonce u64 (native byte order:
 *          both sides run on the same host)
 *   4096   control block of the lo -> hi ring
 *   4352   control block of the hi -> lo ring
 *   8192   data of the lo -> hi ring (ring_bytes)
 *   8192 + ring_bytes  data of the hi -> lo ring (ring_bytes)
 */
#include "transport/tcp/tcp_shm_seg.h"

#include "core/clock.h"
#include "core/error.h"
#include "core/htab.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

/* Map every page at once: otherwise the first pass of small messages
 * through a fresh ring takes a page fault per 4 KiB on each side (a 4-rank
 * 4 KiB all-reduce ran 2-3x slower for its first ~250 calls). */
#define SEG_MAP_FLAGS (MAP_SHARED | MAP_POPULATE)

#define SEG_MAGIC 0x314d485343475347ull /* "GSGCSHM1" */
#define SEG_VERSION 1u
#define SEG_CTL_OFF 4096u

typedef struct seg_hdr {
    uint64_t magic;
    uint32_t version;
    uint32_t zero;
    uint64_t job_id;
    uint64_t comm_id;
    uint32_t lo;
    uint32_t hi;
    uint64_t ring_bytes;
    uint64_t nonce;
} seg_hdr_t;

_Static_assert(sizeof(seg_hdr_t) <= SEG_CTL_OFF, "segment header fits its page");
_Static_assert(SEG_CTL_OFF + 2 * sizeof(gs__shm_ring_ctl_t) <= GS_SHM_SEG_OVERHEAD,
               "segment control blocks fit before the data");

uint64_t gs__shm_seg_bytes(uint64_t ring_bytes)
{
    return GS_SHM_SEG_OVERHEAD + 2 * ring_bytes;
}

gs_status_t gs__shm_free_bytes(long long test_free, uint64_t *free_out, char *why, size_t whylen)
{
    struct statvfs sv;

    if (test_free >= 0) {
        *free_out = (uint64_t)test_free;
        return GS_OK;
    }
    if (statvfs(GS_SHM_DIR, &sv) != 0) {
        return gs__error_explain(GS_ERR_SYSTEM, why, whylen, "statvfs(%s) failed: %s", GS_SHM_DIR,
                                 strerror(errno));
    }
    *free_out = (uint64_t)sv.f_bavail * (uint64_t)sv.f_frsize;
    return GS_OK;
}

int gs__shm_seg_sweep(void)
{
    DIR *d = opendir(GS_SHM_DIR);
    const struct dirent *e;
    int removed = 0;

    if (d == NULL) {
        return 0;
    }
    /* Bounded by the directory's entries; unlinking while reading is allowed. */
    while ((e = readdir(d)) != NULL) {
        char name[GS_SHM_NAME_MAX + 1];
        char *end = NULL;
        long pid;

        if (strncmp(e->d_name, "gradsync-", 9) != 0) {
            continue;
        }
        errno = 0;
        pid = strtol(e->d_name + 9, &end, 10);
        if ((errno != 0) || (end == e->d_name + 9) || (*end != '-') || (pid <= 0) ||
            (pid > INT_MAX)) {
            continue;
        }
        if ((kill((pid_t)pid, 0) == 0) || (errno != ESRCH)) {
            continue; /* alive, or not ours to judge */
        }
        if ((snprintf(name, sizeof(name), "/%s", e->d_name) < (int)sizeof(name)) &&
            (shm_unlink(name) == 0)) {
            removed++;
        }
    }
    (void)closedir(d);
    return removed;
}

uint64_t gs__shm_total_bytes(void)
{
    struct statvfs sv;

    if (statvfs(GS_SHM_DIR, &sv) != 0) {
        return 0;
    }
    return (uint64_t)sv.f_blocks * (uint64_t)sv.f_frsize;
}

int gs__shm_name_ok(const char *name)
{
    size_t n = strnlen(name, GS_SHM_NAME_MAX);

    if ((n < 2) || (n == GS_SHM_NAME_MAX) || (name[0] != '/')) {
        return 0;
    }
    for (size_t i = 1; i < n; i++) {
        char ch = name[i];

        if (!(((ch >= 'a') && (ch <= 'z')) || ((ch >= 'A') && (ch <= 'Z')) ||
              ((ch >= '0') && (ch <= '9')) || (ch == '.') || (ch == '_') || (ch == '-'))) {
            return 0;
        }
    }
    return 1;
}

/* A nonce that differs between processes, communicators and calls. */
static uint64_t make_nonce(const gs__shm_seg_id_t *id)
{
    static _Atomic uint64_t counter;
    uint64_t x = gs__now_ns() ^ ((uint64_t)getpid() << 32) ^ id->job_id ^ (id->comm_id << 1) ^
                 (atomic_fetch_add(&counter, 1) * 0x9e3779b97f4a7c15ull);

    return gs__mix64(x);
}

gs_status_t gs__shm_seg_create(gs__shm_seg_t *seg, gs__shm_seg_id_t *id, long long test_free,
                               char *why, size_t whylen)
{
    uint64_t need = gs__shm_seg_bytes(id->ring_bytes);
    uint64_t avail = 0;
    gs_status_t status;
    seg_hdr_t *hdr;
    void *base;
    int fd;
    int ret;

    memset(seg, 0, sizeof(*seg));
    status = gs__shm_free_bytes(test_free, &avail, why, whylen);
    if (status != GS_OK) {
        return status;
    }
    if (avail < need) {
        return gs__error_explain(GS_ERR_NO_RESOURCE, why, whylen,
                                 "%s has %" PRIu64
                                 " bytes free, the segment for ranks %u and %u needs %" PRIu64
                                 " bytes (GS_SHM_BYTES=%" PRIu64 " per direction)",
                                 GS_SHM_DIR, avail, id->lo, id->hi, need, id->ring_bytes);
    }
    id->nonce = make_nonce(id);
    snprintf(seg->name, sizeof(seg->name), "/gradsync-%d-%u-%u-%016" PRIx64, (int)getpid(), id->lo,
             id->hi, id->nonce);
    fd = shm_open(seg->name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
        return gs__error_explain(GS_ERR_SYSTEM, why, whylen, "shm_open(%s) failed: %s", seg->name,
                                 strerror(errno));
    }
    seg->named = true;
    if (ftruncate(fd, (off_t)need) != 0) {
        status = gs__error_explain(GS_ERR_SYSTEM, why, whylen,
                                   "ftruncate of %s to %" PRIu64 " bytes failed: %s", seg->name,
                                   need, strerror(errno));
        goto err_close;
    }
    /* Reserve the pages now: on tmpfs a later write past the free space is a SIGBUS. */
    ret = posix_fallocate(fd, 0, (off_t)need);
    if ((ret == ENOSPC) || (ret == EFBIG)) {
        status = gs__error_explain(GS_ERR_NO_RESOURCE, why, whylen,
                                   "%s is too small: reserving %" PRIu64
                                   " bytes for the segment of ranks %u and %u failed (%s)",
                                   GS_SHM_DIR, need, id->lo, id->hi, strerror(ret));
        goto err_close;
    }
    if ((ret != 0) && (ret != EOPNOTSUPP) && (ret != EINVAL)) {
        status = gs__error_explain(GS_ERR_SYSTEM, why, whylen, "posix_fallocate of %s failed: %s",
                                   seg->name, strerror(ret));
        goto err_close;
    }
    base = mmap(NULL, (size_t)need, PROT_READ | PROT_WRITE, SEG_MAP_FLAGS, fd, 0);
    if (base == MAP_FAILED) {
        status = gs__error_explain(GS_ERR_SYSTEM, why, whylen,
                                   "mmap of %s (%" PRIu64 " bytes) failed: %s", seg->name, need,
                                   strerror(errno));
        goto err_close;
    }
    close(fd);
    seg->base = base;
    seg->len = (size_t)need;
    hdr = (seg_hdr_t *)base;
    hdr->magic = SEG_MAGIC;
    hdr->version = SEG_VERSION;
    hdr->zero = 0;
    hdr->job_id = id->job_id;
    hdr->comm_id = id->comm_id;
    hdr->lo = id->lo;
    hdr->hi = id->hi;
    hdr->ring_bytes = id->ring_bytes;
    hdr->nonce = id->nonce;
    gs__shm_ring_ctl_init((gs__shm_ring_ctl_t *)((uint8_t *)base + SEG_CTL_OFF));
    gs__shm_ring_ctl_init((gs__shm_ring_ctl_t *)((uint8_t *)base + SEG_CTL_OFF) + 1);
    atomic_thread_fence(memory_order_release);
    return GS_OK;
err_close:
    close(fd);
    gs__shm_seg_unlink(seg);
    return status;
}

gs_status_t gs__shm_seg_open(gs__shm_seg_t *seg, const char *name, const gs__shm_seg_id_t *id,
                             char *why, size_t whylen)
{
    uint64_t need = gs__shm_seg_bytes(id->ring_bytes);
    seg_hdr_t hdr;
    struct stat st;
    gs_status_t status;
    void *base;
    int fd;

    memset(seg, 0, sizeof(*seg));
    if (!gs__shm_name_ok(name)) {
        return gs__error_explain(GS_ERR_PROTOCOL, why, whylen, "bad segment name");
    }
    snprintf(seg->name, sizeof(seg->name), "%s", name);
    fd = shm_open(name, O_RDWR | O_CLOEXEC, 0);
    if (fd < 0) {
        return gs__error_explain(GS_ERR_SYSTEM, why, whylen, "shm_open(%s) failed: %s", name,
                                 strerror(errno));
    }
    if (fstat(fd, &st) != 0) {
        status = gs__error_explain(GS_ERR_SYSTEM, why, whylen, "fstat of %s failed: %s", name,
                                   strerror(errno));
        goto err_close;
    }
    if ((uint64_t)st.st_size != need) {
        status = gs__error_explain(GS_ERR_PROTOCOL, why, whylen,
                                   "segment %s has %lld bytes, expected %" PRIu64, name,
                                   (long long)st.st_size, need);
        goto err_close;
    }
    base = mmap(NULL, (size_t)need, PROT_READ | PROT_WRITE, SEG_MAP_FLAGS, fd, 0);
    if (base == MAP_FAILED) {
        status = gs__error_explain(GS_ERR_SYSTEM, why, whylen, "mmap of %s failed: %s", name,
                                   strerror(errno));
        goto err_close;
    }
    close(fd);
    atomic_thread_fence(memory_order_acquire);
    memcpy(&hdr, base, sizeof(hdr)); /* one snapshot, then checks on the copy */
    if ((hdr.magic != SEG_MAGIC) || (hdr.version != SEG_VERSION) || (hdr.zero != 0) ||
        (hdr.job_id != id->job_id) || (hdr.comm_id != id->comm_id) || (hdr.lo != id->lo) ||
        (hdr.hi != id->hi) || (hdr.ring_bytes != id->ring_bytes) || (hdr.nonce != id->nonce)) {
        munmap(base, (size_t)need);
        return gs__error_explain(
            GS_ERR_PROTOCOL, why, whylen,
            "segment %s does not belong to ranks %u and %u of this communicator", name, id->lo,
            id->hi);
    }
    seg->base = base;
    seg->len = (size_t)need;
    /* Both sides have it mapped now (the creator before it sent the name). */
    (void)shm_unlink(name);
    return GS_OK;
err_close:
    close(fd);
    return status;
}

void gs__shm_seg_unlink(gs__shm_seg_t *seg)
{
    if (seg->named) {
        (void)shm_unlink(seg->name); /* ENOENT: the peer unlinked it first */
        seg->named = false;
    }
}

void gs__shm_seg_close(gs__shm_seg_t *seg)
{
    gs__shm_seg_unlink(seg);
    if (seg->base != NULL) {
        munmap(seg->base, seg->len);
        seg->base = NULL;
        seg->len = 0;
    }
}

void gs__shm_seg_rings(gs__shm_seg_t *seg, uint64_t ring_bytes, bool creator, gs__shm_ring_t *tx,
                       gs__shm_ring_t *rx)
{
    uint8_t *base = (uint8_t *)seg->base;
    gs__shm_ring_ctl_t *ctl = (gs__shm_ring_ctl_t *)(base + SEG_CTL_OFF);
    uint8_t *data = base + GS_SHM_SEG_OVERHEAD;
    int t = creator ? 0 : 1;

    gs__shm_ring_attach(tx, &ctl[t], data + (uint64_t)t * ring_bytes, ring_bytes);
    gs__shm_ring_attach(rx, &ctl[1 - t], data + (uint64_t)(1 - t) * ring_bytes, ring_bytes);
}
