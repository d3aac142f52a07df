/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The host segment (ctx_shm.h): memory, seals, phases and waits.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* memfd_create, fallocate, F_ADD_SEALS, process_vm_readv */
#endif

#include "algo/ctx/ctx_shm.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/error.h"
#include "core/htab.h"

#define SHM_SEALS (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)

/* Spins on a counter before the first yield, when every member can have a
 * core of its own (else the member waited for may be waiting for this core:
 * yield at once); and yields between transport passes (a pass is a
 * non-blocking epoll_wait and a look at the peer). */
#define SHM_SPINS 256
#define SHM_YIELDS_PER_PASS 64
/* The longest a rank running collectives in the segment goes without a
 * transport pass: heartbeats tick every GS_HEARTBEAT_MS / 4 (250 ms by default). */
#define SHM_PASS_NS 10000000ull
/* The tag of the probe that asks the transport why a peer failed: a group-creation
 * tag with bits 32-45 set, which no message carries (group tags hold 32 bits). */
#define GS_SHM_PROBE_TAG (GS_TP_TAG_GROUP | 0x00003fff00000000ull)
/* A wait stalled this long lets diagnosis look for reports (as gs__algo_progress). */
#define SHM_DIAG_POLL_NS 1000000ull

static size_t shm_align(size_t x, size_t a)
{
    return (x + a - 1) / a * a;
}

static size_t shm_slots_off(int n)
{
    return shm_align(GS_SHM_PAGE + (size_t)n * GS_SHM_LINE_BYTES, GS_SHM_PAGE);
}

size_t gs__shm_seg_len(int n, size_t slot_bytes)
{
    return shm_slots_off(n) + (size_t)n * 2u * slot_bytes;
}

/* SHM_SPINS when @p n members fit the cores this process may run on, else 0:
 * with 4 ranks on 2 cores a spinning rank holds the core the rank it waits
 * for needs (measured: 4 KiB all-reduce 23 or 66 us from run to run with
 * spins, 17-30 us without). */
static unsigned shm_spins(int n)
{
    cpu_set_t set;

    if ((sched_getaffinity(0, sizeof(set), &set) == 0) && (CPU_COUNT(&set) >= n)) {
        return SHM_SPINS;
    }
    return 0;
}

static void shm_fill_line(gs__host_seg_t *s)
{
    gs__shm_line_t *l = gs__shm_line(s, s->me);

    s->probe = gs__mix64((uint64_t)getpid() ^ gs__now_ns() ^ (uint64_t)(uintptr_t)s);
    l->pid = (uint64_t)getpid();
    l->probe_addr = (uint64_t)(uintptr_t)&s->probe;
    l->probe_value = s->probe;
    s->phase = atomic_load_explicit(&l->phase, memory_order_relaxed);
    s->spins = shm_spins(s->n);
}

static gs_status_t shm_map(gs__host_seg_t *s, int fd, size_t len, char *why, size_t whylen)
{
    void *base = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);

    if (base == MAP_FAILED) {
        (void)snprintf(why, whylen, "mmap of %zu bytes failed: %s", len, strerror(errno));
        return GS_ERR_SYSTEM;
    }
    s->base = base;
    s->len = len;
    return GS_OK;
}

gs_status_t gs__host_seg_create(gs__host_seg_t *s, int n, size_t slot_bytes, uint64_t job_id,
                                uint64_t comm_id, char *why, size_t whylen)
{
    const size_t len = gs__shm_seg_len(n, slot_bytes);
    gs__shm_hdr_t *h;
    gs_status_t status;
    int fd;
    int ret;

    memset(s, 0, sizeof(*s));
    s->fd = -1;
    fd = memfd_create("gradsync-host", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0) {
        (void)snprintf(why, whylen, "memfd_create failed: %s", strerror(errno));
        return GS_ERR_SYSTEM;
    }
    if (ftruncate(fd, (off_t)len) != 0) {
        (void)snprintf(why, whylen, "ftruncate to %zu bytes failed: %s", len, strerror(errno));
        close(fd);
        return GS_ERR_SYSTEM;
    }
    ret = fallocate(fd, 0, 0, (off_t)len);
    if (ret != 0) {
        const int e = errno;
        (void)snprintf(why, whylen,
                       "reserving %zu bytes of shared memory failed: %s (lower GS_SHM_SLOT_BYTES)",
                       len, strerror(e));
        close(fd);
        return ((e == ENOSPC) || (e == ENOMEM)) ? GS_ERR_NO_RESOURCE : GS_ERR_SYSTEM;
    }
    if (fcntl(fd, F_ADD_SEALS, SHM_SEALS) != 0) {
        (void)snprintf(why, whylen, "sealing the segment failed: %s", strerror(errno));
        close(fd);
        return GS_ERR_SYSTEM;
    }
    status = shm_map(s, fd, len, why, whylen);
    if (status != GS_OK) {
        close(fd);
        return status;
    }
    h = (gs__shm_hdr_t *)(void *)s->base;
    h->magic = GS_SHM_HDR_MAGIC;
    h->version = GS_SHM_HDR_VERSION;
    h->nmemb = (uint32_t)n;
    h->job_id = job_id;
    h->comm_id = comm_id;
    h->nonce = gs__mix64(gs__now_ns() ^ ((uint64_t)getpid() << 32) ^ job_id ^ (comm_id << 1));
    h->slot_bytes = slot_bytes;
    h->total_bytes = len;
    s->n = n;
    s->me = 0;
    s->slot_bytes = slot_bytes;
    s->slots = s->base + shm_slots_off(n);
    s->fd = fd;
    shm_fill_line(s);
    return GS_OK;
}

const gs__shm_hdr_t *gs__host_seg_hdr(const gs__host_seg_t *s)
{
    return (const gs__shm_hdr_t *)(const void *)s->base;
}

gs_status_t gs__host_seg_attach(gs__host_seg_t *s, int me, uint64_t pid, int fd,
                                const gs__shm_hdr_t *expect, char *why, size_t whylen)
{
    char path[64];
    struct stat st;
    const gs__shm_hdr_t *h;
    gs_status_t status;
    int seals;
    int mfd;

    memset(s, 0, sizeof(*s));
    s->fd = -1;
    (void)snprintf(path, sizeof(path), "/proc/%" PRIu64 "/fd/%d", pid, fd);
    mfd = open(path, O_RDWR | O_CLOEXEC);
    if (mfd < 0) {
        (void)snprintf(why, whylen, "opening the segment as %s failed: %s", path, strerror(errno));
        return GS_ERR_SYSTEM;
    }
    seals = fcntl(mfd, F_GET_SEALS);
    if ((seals < 0) || ((seals & SHM_SEALS) != SHM_SEALS) || (fstat(mfd, &st) != 0) ||
        ((uint64_t)st.st_size != expect->total_bytes) ||
        (expect->total_bytes != gs__shm_seg_len((int)expect->nmemb, expect->slot_bytes))) {
        (void)snprintf(why, whylen,
                       "%s is not the sealed segment of %" PRIu64 " bytes that was announced "
                       "(seals 0x%x)",
                       path, expect->total_bytes, (unsigned)seals);
        close(mfd);
        return GS_ERR_PROTOCOL;
    }
    status = shm_map(s, mfd, (size_t)expect->total_bytes, why, whylen);
    close(mfd); /* the mapping keeps the memory */
    if (status != GS_OK) {
        return status;
    }
    h = gs__host_seg_hdr(s);
    if ((h->magic != GS_SHM_HDR_MAGIC) || (h->version != GS_SHM_HDR_VERSION) ||
        (h->nmemb != expect->nmemb) || (h->job_id != expect->job_id) ||
        (h->comm_id != expect->comm_id) || (h->nonce != expect->nonce) ||
        (h->slot_bytes != expect->slot_bytes) || (h->total_bytes != expect->total_bytes) ||
        (me <= 0) || ((uint32_t)me >= h->nmemb)) {
        (void)snprintf(why, whylen, "%s holds another segment (its header does not match)", path);
        gs__host_seg_close(s);
        return GS_ERR_PROTOCOL;
    }
    s->n = (int)h->nmemb;
    s->me = me;
    s->slot_bytes = (size_t)h->slot_bytes;
    s->slots = s->base + shm_slots_off(s->n);
    shm_fill_line(s);
    return GS_OK;
}

void gs__host_seg_setup_done(gs__host_seg_t *s)
{
    if (s->fd >= 0) {
        close(s->fd);
        s->fd = -1;
    }
}

int gs__host_seg_cma_probe(const gs__host_seg_t *s, int deny, char *why, size_t whylen)
{
    for (int m = 0; m < s->n; m++) {
        const gs__shm_line_t *l = gs__shm_line(s, m);
        uint64_t v = 0;
        struct iovec local = {.iov_base = &v, .iov_len = sizeof(v)};
        struct iovec remote = {.iov_base = (void *)(uintptr_t)l->probe_addr, .iov_len = sizeof(v)};
        ssize_t got;

        if (m == s->me) {
            continue;
        }
        if (deny) {
            (void)snprintf(why, whylen,
                           "process_vm_readv from member %d: %s (denied by a test switch)", m,
                           strerror(EPERM));
            return 0;
        }
        got = process_vm_readv((pid_t)l->pid, &local, 1, &remote, 1, 0);
        if ((got != (ssize_t)sizeof(v)) || (v != l->probe_value)) {
            (void)snprintf(why, whylen, "process_vm_readv from member %d (pid %" PRIu64 "): %s", m,
                           l->pid, (got < 0) ? strerror(errno) : "read the wrong bytes");
            return 0;
        }
    }
    return 1;
}

void gs__host_seg_close(gs__host_seg_t *s)
{
    gs__host_seg_setup_done(s);
    if (s->base != NULL) {
        (void)munmap(s->base, s->len);
        s->base = NULL;
        s->len = 0;
    }
}

void gs__shm_publish_op(gs__host_seg_t *s, uint64_t word)
{
    atomic_store_explicit(&gs__shm_line(s, s->me)->op, word, memory_order_release);
}

uint64_t gs__shm_peer_op(const gs__host_seg_t *s, int m)
{
    return atomic_load_explicit(&gs__shm_line(s, m)->op, memory_order_acquire);
}

uint64_t gs__shm_arrive(gs__host_seg_t *s)
{
    gs__shm_line(s, s->me)->sig[(s->phase + 1) & 1u] = s->sig;
    s->phase++;
    atomic_store_explicit(&gs__shm_line(s, s->me)->phase, s->phase, memory_order_release);
    return s->phase;
}

static inline void shm_pause(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* The error of a wait on rank @p m that saw it fail. */
static gs_status_t shm_peer_failed(gs__algo_ctx_t *ctx, int m, uint64_t target, const char *what)
{
    if ((ctx->cur != NULL) && (ctx->diag != NULL)) {
        const gs_status_t better = ctx->diag->explain(ctx);
        if (better != GS_OK) {
            return better;
        }
    }
    return gs__shm_peer_gone(ctx, m, "waiting in shared memory for", what, target);
}

gs_status_t gs__shm_peer_gone(gs__algo_ctx_t *ctx, int m, const char *doing, const char *what,
                              uint64_t phase)
{
    char why[GS_ERROR_MSG_MAX];
    int found = 0;
    gs__tp_completion_t comp;

    /* The transport's sentence (EOF, "no heartbeat ...", "rank R failed (...)" once
     * another rank's failure took it down): the failure a receive from rank m
     * posted now would complete with. */
    if (gs__tp_has_probe(ctx->tr) &&
        (gs__tp_probe(ctx->tr, m, GS_SHM_PROBE_TAG, &found, &comp) == GS_ERR_PEER_FAILED)) {
        (void)snprintf(why, sizeof(why), "%s", gs__error_get());
        return gs__error_set(GS_ERR_PEER_FAILED,
                             "%s: %s (rank %d saw it %s rank %d: %s, phase %" PRIu64
                             "); the communicator cannot continue: shrink it (gs_comm_shrink) "
                             "or destroy it",
                             ctx->opname, why, ctx->rank, doing, m, what, phase);
    }
    return gs__error_set(GS_ERR_PEER_FAILED,
                         "%s: rank %d failed or left (rank %d saw it %s rank %d: %s, phase "
                         "%" PRIu64 "); the communicator cannot continue: shrink it "
                         "(gs_comm_shrink) or destroy it",
                         ctx->opname, m, ctx->rank, doing, m, what, phase);
}

gs_status_t gs__shm_wait(gs__algo_ctx_t *ctx, gs__host_seg_t *s, int m, uint64_t target,
                         const char *what)
{
    _Atomic uint64_t *ph = &gs__shm_line(s, m)->phase;
    const int rank = gs__shm_rank(s, m);
    uint64_t seen = atomic_load_explicit(ph, memory_order_acquire);
    uint64_t t0 = 0;
    uint64_t deadline = 0;
    unsigned yields = 0;

    {
        /* Collectives back to back in the segment, each wait short, would
         * never reach a pass below: heartbeats would stop going out and the
         * peers would fail this rank as frozen. A pass at least every
         * SHM_PASS_NS, whatever the waits. */
        const uint64_t now = gs__now_ns();

        if (now - s->pass_ns >= SHM_PASS_NS) {
            const gs_status_t status = gs__tp_progress(ctx->tr, 0);

            s->pass_ns = now;
            if (status != GS_OK) {
                return gs__error_wrap(status, "%s: %s", ctx->opname, gs__error_get());
            }
        }
    }
    for (unsigned i = 0; (i < s->spins) && (seen < target); i++) {
        shm_pause();
        seen = atomic_load_explicit(ph, memory_order_acquire);
    }
    uint64_t last = seen; /* the counter at the last transport pass */

    while (seen < target) {
        (void)sched_yield();
        seen = atomic_load_explicit(ph, memory_order_acquire);
        if (seen >= target) {
            break;
        }
        /* A pass every SHM_YIELDS_PER_PASS yields, or SHM_PASS_NS, whichever comes first:
         * on a loaded host a yield can take milliseconds, and a revoke or a peer's death
         * must not wait for 64 of them. */
        if (((++yields % SHM_YIELDS_PER_PASS) != 0) && (gs__now_ns() - s->pass_ns < SHM_PASS_NS)) {
            continue;
        }
        {
            const uint64_t now = gs__now_ns();
            gs_status_t status;

            if ((deadline == 0) || (seen != last)) { /* it moved: renew the deadline */
                t0 = now;
                deadline = now + ctx->timeout_ns;
                last = seen;
            }
            status = gs__tp_progress(ctx->tr, 0); /* one non-blocking pass */
            s->pass_ns = now;
            if (status != GS_OK) {
                return gs__error_wrap(status, "%s: %s", ctx->opname, gs__error_get());
            }
            if (gs__tp_has_peer_failed(ctx->tr)) {
                /* The member waited on, or any other: one that failed leaves the others'
                 * phases unfinished (a member that saw it left the collective), and this
                 * rank may have no link to the member it waits on to see it leave. */
                for (int k = -1; k < s->n; k++) {
                    const int q = (k < 0) ? rank : gs__shm_rank(s, k);

                    if ((q != ctx->rank) && gs__tp_peer_failed(ctx->tr, q)) {
                        return shm_peer_failed(ctx, q, target, what);
                    }
                }
            }
            if ((ctx->cur != NULL) && (ctx->diag != NULL) && (now - t0 >= SHM_DIAG_POLL_NS)) {
                /* Stalled: diagnosis looks for another rank's report of a mismatch. */
                status = ctx->diag->poll(ctx, now - t0);
                if (status != GS_OK) {
                    return status;
                }
            }
            if ((now >= deadline) && (ctx->cur != NULL) && (ctx->diag != NULL)) {
                const gs__algo_req_t r = {.req = NULL, .peer = rank, .is_send = 0};
                return ctx->diag->timeout(ctx, &r);
            }
            if (now >= deadline) {
                return gs__error_set(GS_ERR_TIMEOUT,
                                     "%s: rank %d timed out after %llu ms waiting for rank %d in "
                                     "shared memory (%s, phase %" PRIu64 " of which it finished "
                                     "%" PRIu64 ")",
                                     ctx->opname, ctx->rank,
                                     (unsigned long long)((now - t0) / 1000000ull), rank, what,
                                     target, seen);
            }
        }
    }
    {
        const uint64_t theirs = gs__shm_line(s, m)->sig[target & 1u];
        if (theirs != s->sig) {
            if ((ctx->cur != NULL) && (ctx->diag != NULL)) {
                /* Their fingerprint in a tag's check bits, as a receive would see it. */
                return ctx->diag->mismatch(ctx, rank, ((theirs >> 1) & 0x7fffull) << 48);
            }
            return gs__error_set(GS_ERR_MISMATCH,
                                 "%s: rank %d runs another collective or call (signature "
                                 "0x%llx) than rank %d (0x%llx) in shared memory; every rank must "
                                 "call the same collectives with the same arguments in the same "
                                 "order",
                                 ctx->opname, rank, (unsigned long long)theirs, ctx->rank,
                                 (unsigned long long)s->sig);
        }
    }
    return GS_OK;
}

gs_status_t gs__shm_wait_all(gs__algo_ctx_t *ctx, gs__host_seg_t *s, uint64_t target,
                             const char *what)
{
    for (int m = 0; m < s->n; m++) {
        if (m != s->me) {
            const gs_status_t status = gs__shm_wait(ctx, s, m, target, what);
            if (status != GS_OK) {
                return status;
            }
        }
    }
    return GS_OK;
}
