/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The MPI transport: gradsync's tagged point-to-point messages over MPI
 * point-to-point on a communicator of its own (a duplicate of the
 * application's, or one made with MPI_Comm_create_group), so gradsync
 * traffic never matches the application's receives. It does not implement
 * collectives (mpi_coll.c hands the native ones to MPI) and never blocks:
 * every MPI call is a non-blocking start or test, and progress loops over
 * them until something completes or the deadline.
 *
 * Why a header of our own: gradsync tags are 64 bits with a 49-bit match
 * part and 15 check bits (transport.h), MPI tags are only guaranteed up to
 * 32767, and the matching rules (mismatch and truncation detected before the
 * buffer is written, unexpected messages kept) need the full tag and length
 * before a message is received. So every message starts with a 32-byte
 * header on MPI tag GS_MPI_TAG_HDR, and this file does the matching:
 *
 *   header  (MPI tag 1): u32 magic "GSMP", u16 version, u16 flags,
 *                        u64 tag, u64 len, u32 seq, u32 nchunks   (little endian)
 *   inline  (flag 1):    the payload follows the header in the same message
 *                        (len <= MPI_INLINE_MAX; one copy at each end)
 *   chunks  (MPI tag 2): otherwise the payload follows as nchunks messages of
 *                        at most 1 GiB (MPI counts are int), sent straight
 *                        from the user's buffer
 *
 * The receiver probes headers with MPI_Improbe(MPI_ANY_SOURCE, tag 1) and
 * receives them with MPI_Imrecv, in order per sender. A header is matched
 * against the posted receives (oldest first); the payload is then received
 * with MPI_Irecv(sender, tag 2) straight into the user's buffer, or into a
 * heap copy when no receive is posted yet (the unexpected list). Because the
 * chunk receives from one sender are posted in header order, and MPI does
 * not let messages with the same source and tag overtake each other, the
 * k-th chunk receive always gets the k-th chunk: no sequence numbers are
 * needed in MPI tags (seq in the header is only checked). A mismatch or a
 * truncation drains the chunks with zero-length receives (MPI reports
 * MPI_ERR_TRUNCATE and drops the bytes), so the buffer is never written.
 *
 * Failures: the communicator uses MPI_ERRORS_RETURN; an MPI error on a
 * request fails it with GS_ERR_PEER_FAILED naming the peer. Open MPI
 * normally kills the whole job when a rank dies (docs/cluster.md); when it
 * does not, the algorithms' deadlines turn the silence into GS_ERR_TIMEOUT.
 */
#include "transport/mpi/mpi_transport.h"

#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/clock.h"
#include "core/error.h"
#include "core/log.h"

#define GS_MPI_TAG_HDR 1
#define GS_MPI_TAG_DATA 2
#define MPI_HDR_BYTES 32
#define MPI_HDR_MAGIC 0x504d5347u /* "GSMP" */
#define MPI_HDR_VERSION 1
#define MPI_FLAG_INLINE 1u
#define MPI_INLINE_MAX 8192
#define MPI_CHUNK_MAX ((size_t)1 << 30)
#define MPI_WHY_MAX 200
#define MPI_INLINE_REQS 4

typedef struct mpi_hdr {
    uint64_t tag;
    uint64_t len;
    uint32_t seq;
    uint32_t nchunks;
    uint16_t flags;
} mpi_hdr_t;

/* A set of MPI requests that completes as a whole. */
typedef struct mpi_reqset {
    MPI_Request *mr;
    int n;
    MPI_Request inline_mr[MPI_INLINE_REQS];
} mpi_reqset_t;

/* A message whose header arrived before any matching receive. */
typedef struct mpi_msg {
    struct mpi_msg *next;
    int src;
    mpi_hdr_t h;
    unsigned char *data; /* heap copy of the payload */
    mpi_reqset_t rs;     /* chunk receives into data (n == 0: data complete) */
    int orphan;          /* consumed by a failed receive: free when rs completes */
} mpi_msg_t;

typedef enum mpi_req_state {
    REQ_POSTED,  /* receive waiting for a header */
    REQ_ACTIVE,  /* MPI requests in flight (send, or chunk receive) */
    REQ_MSG,     /* receive bound to an unexpected message still arriving */
    REQ_DONE
} mpi_req_state_t;

struct gs_tp_req {
    struct gs_tp_req *next; /* posted list or active list */
    int is_send;
    int peer;
    uint64_t tag;
    void *buf;
    size_t len;
    mpi_req_state_t state;
    mpi_reqset_t rs;
    unsigned char *sbuf; /* send: header (+ inline payload) */
    mpi_msg_t *msg;      /* REQ_MSG */
    gs_tp_completion_t comp;
    char why[MPI_WHY_MAX];
};

/* A received header on its way in. */
typedef struct mpi_hdrq {
    struct mpi_hdrq *next;
    MPI_Request mr;
    int src;
    int count;
    unsigned char buf[];
} mpi_hdrq_t;

/* MPI requests nobody waits for any more (drains, released requests). */
typedef struct mpi_orphan {
    struct mpi_orphan *next;
    mpi_reqset_t rs;
    void *to_free;
} mpi_orphan_t;

struct gs_tp {
    int rank;
    int size;
    uint64_t comm_id;
    MPI_Comm comm;
    int connected;
    gs__counters_t *counters;
    atomic_int aborted;
    atomic_int woken;
    uint32_t *send_seq;    /* next chunk seq to each peer */
    uint32_t *recv_seq;    /* next chunk seq from each peer */
    gs_status_t *peer_err; /* GS_OK, or why every request with that peer fails */
    gs_tp_req_t *posted;   /* receives waiting for a header, in post order */
    gs_tp_req_t *active;   /* requests with MPI requests in flight */
    mpi_msg_t *unexp;      /* unexpected messages, in arrival order */
    mpi_hdrq_t *hdrq;      /* header receives, in probe order */
    mpi_orphan_t *orphans;
    int completions;       /* bumped by every completion (progress returns) */
};

/* ---------------------------------------------------------------------- */
/* Header encode/decode                                                   */
/* ---------------------------------------------------------------------- */

static void put_u16(unsigned char *p, uint16_t v)
{
    p[0] = (unsigned char)v;
    p[1] = (unsigned char)(v >> 8);
}

static void put_u32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) {
        p[i] = (unsigned char)(v >> (8 * i));
    }
}

static void put_u64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) {
        p[i] = (unsigned char)(v >> (8 * i));
    }
}

static uint64_t get_le(const unsigned char *p, int n)
{
    uint64_t v = 0;

    for (int i = n - 1; i >= 0; i--) {
        v = (v << 8) | p[i];
    }
    return v;
}

static void hdr_encode(unsigned char *p, const mpi_hdr_t *h)
{
    put_u32(p, MPI_HDR_MAGIC);
    put_u16(p + 4, MPI_HDR_VERSION);
    put_u16(p + 6, h->flags);
    put_u64(p + 8, h->tag);
    put_u64(p + 16, h->len);
    put_u32(p + 24, h->seq);
    put_u32(p + 28, h->nchunks);
}

static size_t chunk_count(size_t len)
{
    return (len + MPI_CHUNK_MAX - 1) / MPI_CHUNK_MAX;
}

/* Decode and validate @p count bytes from a peer. Returns GS_OK or
 * GS_ERR_PROTOCOL with @p why filled. */
static gs_status_t hdr_decode(const unsigned char *p, int count, uint32_t expect_seq,
                              mpi_hdr_t *h, char *why, size_t whylen)
{
    if (count < MPI_HDR_BYTES) {
        (void)snprintf(why, whylen, "a %d-byte header", count);
        return GS_ERR_PROTOCOL;
    }
    if ((uint32_t)get_le(p, 4) != MPI_HDR_MAGIC) {
        (void)snprintf(why, whylen, "bad magic 0x%08x", (unsigned)get_le(p, 4));
        return GS_ERR_PROTOCOL;
    }
    if (get_le(p + 4, 2) != MPI_HDR_VERSION) {
        (void)snprintf(why, whylen, "header version %u, expected %u", (unsigned)get_le(p + 4, 2),
                       MPI_HDR_VERSION);
        return GS_ERR_PROTOCOL;
    }
    h->flags = (uint16_t)get_le(p + 6, 2);
    h->tag = get_le(p + 8, 8);
    h->len = get_le(p + 16, 8);
    h->seq = (uint32_t)get_le(p + 24, 4);
    h->nchunks = (uint32_t)get_le(p + 28, 4);
    if ((h->flags & ~MPI_FLAG_INLINE) != 0) {
        (void)snprintf(why, whylen, "unknown flags 0x%x", (unsigned)h->flags);
        return GS_ERR_PROTOCOL;
    }
    if (h->flags & MPI_FLAG_INLINE) {
        if ((h->len > MPI_INLINE_MAX) || ((uint64_t)count != MPI_HDR_BYTES + h->len) ||
            (h->nchunks != 0)) {
            (void)snprintf(why, whylen, "inline message of %d bytes claims %llu payload bytes",
                           count, (unsigned long long)h->len);
            return GS_ERR_PROTOCOL;
        }
        return GS_OK;
    }
    if ((count != MPI_HDR_BYTES) || (h->len >= ((uint64_t)1 << 62)) ||
        ((uint64_t)h->nchunks != chunk_count((size_t)h->len)) || (h->seq != expect_seq)) {
        (void)snprintf(why, whylen,
                       "header of %d bytes for %llu bytes in %u chunks at seq %u (expected %u)",
                       count, (unsigned long long)h->len, (unsigned)h->nchunks,
                       (unsigned)h->seq, (unsigned)expect_seq);
        return GS_ERR_PROTOCOL;
    }
    return GS_OK;
}

/* ---------------------------------------------------------------------- */
/* Request sets and lists                                                 */
/* ---------------------------------------------------------------------- */

static int reqset_alloc(mpi_reqset_t *rs, size_t n)
{
    rs->n = 0;
    rs->mr = rs->inline_mr;
    if (n > MPI_INLINE_REQS) {
        rs->mr = malloc(n * sizeof(MPI_Request));
        if (rs->mr == NULL) {
            return -1;
        }
    }
    for (size_t i = 0; i < n; i++) {
        rs->mr[i] = MPI_REQUEST_NULL;
    }
    rs->n = (int)n;
    return 0;
}

static void reqset_free(mpi_reqset_t *rs)
{
    if ((rs->mr != NULL) && (rs->mr != rs->inline_mr)) {
        free(rs->mr);
    }
    rs->mr = rs->inline_mr;
    rs->n = 0;
}

/* Test every request of rs. Returns 1 when all are done; *err_out gets the
 * first MPI error (MPI_ERR_TRUNCATE is ignored when @p drain). */
static int reqset_test(mpi_reqset_t *rs, int drain, int *err_out)
{
    int all = 1;

    for (int i = 0; i < rs->n; i++) {
        MPI_Status st;
        int flag = 0;
        int ret;

        if (rs->mr[i] == MPI_REQUEST_NULL) {
            continue;
        }
        ret = MPI_Test(&rs->mr[i], &flag, &st);
        if (ret != MPI_SUCCESS) {
            int cls = MPI_ERR_OTHER;

            MPI_Error_class(ret, &cls);
            if (!(drain && (cls == MPI_ERR_TRUNCATE)) && (*err_out == MPI_SUCCESS)) {
                *err_out = ret;
            }
            rs->mr[i] = MPI_REQUEST_NULL;
            continue;
        }
        if (!flag) {
            all = 0;
        }
    }
    return all;
}

static void list_remove(gs_tp_req_t **head, gs_tp_req_t *r)
{
    for (gs_tp_req_t **p = head; *p != NULL; p = &(*p)->next) {
        if (*p == r) {
            *p = r->next;
            r->next = NULL;
            return;
        }
    }
}

static void list_append(gs_tp_req_t **head, gs_tp_req_t *r)
{
    gs_tp_req_t **p = head;

    while (*p != NULL) {
        p = &(*p)->next;
    }
    r->next = NULL;
    *p = r;
}

static int masked_equal(uint64_t a, uint64_t b)
{
    return (a & GS_TP_TAG_MATCH_MASK) == (b & GS_TP_TAG_MATCH_MASK);
}

static void req_complete(gs_tp_t *tp, gs_tp_req_t *r, gs_status_t status, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void req_complete(gs_tp_t *tp, gs_tp_req_t *r, gs_status_t status, const char *fmt, ...)
{
    r->state = REQ_DONE;
    r->comp.status = status;
    if ((status != GS_OK) && (fmt != NULL)) {
        va_list ap;

        va_start(ap, fmt);
        (void)vsnprintf(r->why, sizeof(r->why), fmt, ap);
        va_end(ap);
    }
    if ((status == GS_OK) && (tp->counters != NULL)) {
        if (r->is_send) {
            gs__counter_add(&tp->counters->bytes_sent, r->comp.nbytes);
            gs__counter_add(&tp->counters->msgs_sent, 1);
        } else {
            gs__counter_add(&tp->counters->bytes_received, r->comp.nbytes);
            gs__counter_add(&tp->counters->msgs_received, 1);
        }
    }
    tp->completions++;
}

static void orphan_add(gs_tp_t *tp, mpi_reqset_t *rs, void *to_free)
{
    mpi_orphan_t *o = calloc(1, sizeof(*o));

    if (o == NULL) {
        /* Nobody can wait for them: let MPI finish them on its own. */
        for (int i = 0; i < rs->n; i++) {
            if (rs->mr[i] != MPI_REQUEST_NULL) {
                MPI_Request_free(&rs->mr[i]);
            }
        }
        reqset_free(rs);
        free(to_free);
        return;
    }
    o->rs = *rs;
    if (rs->mr == rs->inline_mr) {
        o->rs.mr = o->rs.inline_mr;
    }
    rs->mr = rs->inline_mr;
    rs->n = 0;
    o->to_free = to_free;
    o->next = tp->orphans;
    tp->orphans = o;
}

/* Post zero-length receives for the n chunks that follow a refused header:
 * MPI drops their bytes (MPI_ERR_TRUNCATE, ignored) and the order of the
 * sender's later chunks is kept. */
static void drain_chunks(gs_tp_t *tp, int src, uint32_t n)
{
    mpi_reqset_t rs;

    if (n == 0) {
        return;
    }
    if (reqset_alloc(&rs, n) != 0) {
        gs__error_set(GS_ERR_NO_MEMORY, "mpi: out of memory draining a message from rank %d",
                      src);
        tp->peer_err[src] = GS_ERR_NO_MEMORY;
        return;
    }
    for (uint32_t i = 0; i < n; i++) {
        MPI_Irecv(NULL, 0, MPI_BYTE, src, GS_MPI_TAG_DATA, tp->comm, &rs.mr[i]);
    }
    orphan_add(tp, &rs, NULL);
}

/* Post the chunk receives of a len-byte payload from src into dst. */
static int post_chunks(gs_tp_t *tp, int src, void *dst, size_t len, mpi_reqset_t *rs)
{
    const size_t n = chunk_count(len);

    if (reqset_alloc(rs, n) != 0) {
        return MPI_ERR_NO_MEM;
    }
    for (size_t i = 0; i < n; i++) {
        const size_t off = i * MPI_CHUNK_MAX;
        const size_t part = (len - off < MPI_CHUNK_MAX) ? len - off : MPI_CHUNK_MAX;
        const int ret = MPI_Irecv((char *)dst + off, (int)part, MPI_BYTE, src, GS_MPI_TAG_DATA,
                                  tp->comm, &rs->mr[i]);
        if (ret != MPI_SUCCESS) {
            return ret;
        }
    }
    tp->recv_seq[src] += (uint32_t)n;
    return MPI_SUCCESS;
}

/* ---------------------------------------------------------------------- */
/* Matching                                                               */
/* ---------------------------------------------------------------------- */

/* Apply the mismatch and truncation rules to receive r and a message with
 * header h from src. Returns 1 when r was completed with an error. */
static int refuse(gs_tp_t *tp, gs_tp_req_t *r, int src, const mpi_hdr_t *h)
{
    r->comp.peer = src;
    r->comp.tag = h->tag;
    if (h->tag != r->tag) {
        req_complete(tp, r, GS_ERR_MISMATCH,
                     "rank %d sent a message with tag 0x%016llx where tag 0x%016llx was "
                     "expected (the ranks are running different operations)",
                     src, (unsigned long long)h->tag, (unsigned long long)r->tag);
        return 1;
    }
    if (h->len > r->len) {
        req_complete(tp, r, GS_ERR_TRUNCATED,
                     "rank %d sent %llu bytes to a receive of %zu bytes", src,
                     (unsigned long long)h->len, r->len);
        return 1;
    }
    return 0;
}

/* A header from src arrived (payload inline at data, or chunks to follow). */
static void deliver_header(gs_tp_t *tp, int src, const mpi_hdr_t *h, const unsigned char *data)
{
    const uint32_t nchunks = (h->flags & MPI_FLAG_INLINE) ? 0 : h->nchunks;
    gs_tp_req_t *r = tp->posted;
    mpi_msg_t *m;
    int ret;

    while ((r != NULL) &&
           !(((r->peer == src) || (r->peer == GS_ANY_SOURCE)) && masked_equal(r->tag, h->tag))) {
        r = r->next;
    }
    if (r != NULL) {
        list_remove(&tp->posted, r);
        if (refuse(tp, r, src, h)) {
            drain_chunks(tp, src, nchunks);
            tp->recv_seq[src] += nchunks;
            return;
        }
        r->comp.nbytes = (size_t)h->len;
        if (nchunks == 0) {
            if (h->len > 0) {
                memcpy(r->buf, data, (size_t)h->len);
            }
            req_complete(tp, r, GS_OK, NULL);
            return;
        }
        ret = post_chunks(tp, src, r->buf, (size_t)h->len, &r->rs);
        if (ret != MPI_SUCCESS) {
            tp->peer_err[src] = GS_ERR_PEER_FAILED;
            req_complete(tp, r, GS_ERR_PEER_FAILED, "receiving from rank %d failed: %s", src,
                         gs__mpi_errstr(ret));
            return;
        }
        r->state = REQ_ACTIVE;
        list_append(&tp->active, r);
        return;
    }
    /* Unexpected: keep a copy until a receive matches. */
    m = calloc(1, sizeof(*m));
    if ((m != NULL) && (h->len > 0)) {
        m->data = malloc((size_t)h->len);
    }
    if ((m == NULL) || ((h->len > 0) && (m->data == NULL))) {
        free(m);
        tp->peer_err[src] = GS_ERR_NO_MEMORY;
        gs__error_set(GS_ERR_NO_MEMORY, "mpi: no memory for a %llu-byte message from rank %d",
                      (unsigned long long)h->len, src);
        drain_chunks(tp, src, nchunks);
        tp->recv_seq[src] += nchunks;
        return;
    }
    m->src = src;
    m->h = *h;
    m->rs.mr = m->rs.inline_mr;
    if (nchunks == 0) {
        if (h->len > 0) {
            memcpy(m->data, data, (size_t)h->len);
        }
    } else {
        ret = post_chunks(tp, src, m->data, (size_t)h->len, &m->rs);
        if (ret != MPI_SUCCESS) {
            tp->peer_err[src] = GS_ERR_PEER_FAILED;
        }
    }
    {
        mpi_msg_t **p = &tp->unexp;
        while (*p != NULL) {
            p = &(*p)->next;
        }
        *p = m;
    }
}

static void msg_free(mpi_msg_t *m)
{
    reqset_free(&m->rs);
    free(m->data);
    free(m);
}

/* Fail a peer: every posted or later request involving it fails. */
static void peer_fail(gs_tp_t *tp, int src, gs_status_t status, const char *why)
{
    if (tp->peer_err[src] == GS_OK) {
        tp->peer_err[src] = status;
        GS_WARN("mpi: rank %d failed: %s", src, why);
    }
    for (gs_tp_req_t *r = tp->posted; r != NULL;) {
        gs_tp_req_t *next = r->next;
        if (r->peer == src) {
            list_remove(&tp->posted, r);
            r->comp.peer = src;
            req_complete(tp, r, status, "rank %d: %s", src, why);
        }
        r = next;
    }
}

/* ---------------------------------------------------------------------- */
/* Polling                                                                */
/* ---------------------------------------------------------------------- */

static void poll_headers(gs_tp_t *tp)
{
    /* Probe new headers (bounded, so one busy sender cannot starve the rest). */
    for (int i = 0; i < 64; i++) {
        MPI_Message msg;
        MPI_Status st;
        mpi_hdrq_t *q;
        int flag = 0;
        int count = 0;

        if (MPI_Improbe(MPI_ANY_SOURCE, GS_MPI_TAG_HDR, tp->comm, &flag, &msg, &st) !=
            MPI_SUCCESS) {
            break;
        }
        if (!flag) {
            break;
        }
        MPI_Get_count(&st, MPI_BYTE, &count);
        if ((count < 0) || (count > MPI_HDR_BYTES + MPI_INLINE_MAX)) {
            count = 0; /* hostile size: receive nothing (MPI_ERR_TRUNCATE), then fail */
        }
        q = malloc(sizeof(*q) + (size_t)(count > 0 ? count : 1));
        if (q == NULL) {
            MPI_Request drop;
            MPI_Imrecv(NULL, 0, MPI_BYTE, &msg, &drop);
            MPI_Request_free(&drop);
            peer_fail(tp, st.MPI_SOURCE, GS_ERR_NO_MEMORY, "out of memory for a header");
            continue;
        }
        q->next = NULL;
        q->src = st.MPI_SOURCE;
        q->count = count;
        MPI_Imrecv(q->buf, count, MPI_BYTE, &msg, &q->mr);
        {
            mpi_hdrq_t **p = &tp->hdrq;
            while (*p != NULL) {
                p = &(*p)->next;
            }
            *p = q;
        }
    }
    /* Handle arrived headers in probe order. */
    while (tp->hdrq != NULL) {
        mpi_hdrq_t *q = tp->hdrq;
        char why[MPI_WHY_MAX];
        mpi_hdr_t h;
        MPI_Status st;
        int flag = 0;
        int ret = MPI_Test(&q->mr, &flag, &st);

        if ((ret == MPI_SUCCESS) && !flag) {
            break;
        }
        tp->hdrq = q->next;
        if (tp->peer_err[q->src] != GS_OK) {
            free(q);
            continue;
        }
        if (ret != MPI_SUCCESS) {
            peer_fail(tp, q->src, GS_ERR_PEER_FAILED, gs__mpi_errstr(ret));
        } else if (hdr_decode(q->buf, q->count, tp->recv_seq[q->src], &h, why, sizeof(why)) !=
                   GS_OK) {
            char msg[MPI_WHY_MAX + 40];
            (void)snprintf(msg, sizeof(msg), "protocol error: %s", why);
            peer_fail(tp, q->src, GS_ERR_PROTOCOL, msg);
        } else {
            deliver_header(tp, q->src, &h, q->buf + MPI_HDR_BYTES);
        }
        free(q);
    }
}

static void poll_active(gs_tp_t *tp)
{
    for (gs_tp_req_t *r = tp->active; r != NULL;) {
        gs_tp_req_t *next = r->next;
        int err = MPI_SUCCESS;

        /* Receives bound to an unexpected message are polled with it. */
        if ((r->state == REQ_ACTIVE) && reqset_test(&r->rs, 0, &err)) {
            list_remove(&tp->active, r);
            reqset_free(&r->rs);
            if (err != MPI_SUCCESS) {
                req_complete(tp, r, GS_ERR_PEER_FAILED, "%s rank %d failed in MPI: %s",
                             r->is_send ? "sending to" : "receiving from", r->peer,
                             gs__mpi_errstr(err));
            } else {
                req_complete(tp, r, GS_OK, NULL);
            }
        }
        r = next;
    }
}

static void poll_messages(gs_tp_t *tp)
{
    /* Unexpected payloads still arriving, and receives bound to them. */
    for (mpi_msg_t *m = tp->unexp; m != NULL; m = m->next) {
        int err = MPI_SUCCESS;
        if ((m->rs.n > 0) && reqset_test(&m->rs, 0, &err)) {
            reqset_free(&m->rs);
            if (err != MPI_SUCCESS) {
                peer_fail(tp, m->src, GS_ERR_PEER_FAILED, gs__mpi_errstr(err));
            }
        }
    }
    for (gs_tp_req_t *r = tp->active; r != NULL;) {
        gs_tp_req_t *next = r->next;
        if (r->state == REQ_MSG) {
            mpi_msg_t *m = r->msg;
            int err = MPI_SUCCESS;
            if ((m->rs.n == 0) || reqset_test(&m->rs, 0, &err)) {
                list_remove(&tp->active, r);
                r->msg = NULL;
                if (err != MPI_SUCCESS) {
                    req_complete(tp, r, GS_ERR_PEER_FAILED, "receiving from rank %d failed: %s",
                                 m->src, gs__mpi_errstr(err));
                } else {
                    if (m->h.len > 0) {
                        memcpy(r->buf, m->data, (size_t)m->h.len);
                    }
                    req_complete(tp, r, GS_OK, NULL);
                }
                msg_free(m);
            }
        }
        r = next;
    }
    for (mpi_orphan_t **p = &tp->orphans; *p != NULL;) {
        mpi_orphan_t *o = *p;
        int err = MPI_SUCCESS;
        if (reqset_test(&o->rs, 1, &err)) {
            *p = o->next;
            reqset_free(&o->rs);
            free(o->to_free);
            free(o);
        } else {
            p = &o->next;
        }
    }
}

static void poll_once(gs_tp_t *tp)
{
    poll_headers(tp);
    poll_active(tp);
    poll_messages(tp);
}

/* ---------------------------------------------------------------------- */
/* Ops                                                                    */
/* ---------------------------------------------------------------------- */

static gs_status_t mpi_tp_init(const gs_tp_params_t *params, gs_tp_t **tp_out)
{
    gs_tp_t *tp;
    gs_status_t status;

    if ((params == NULL) || (tp_out == NULL) || (params->size < 1) || (params->rank < 0) ||
        (params->rank >= params->size)) {
        return gs__error_set(GS_ERR_INVALID_ARG, "mpi: bad transport parameters");
    }
    status = gs__mpi_env_acquire();
    if (status != GS_OK) {
        return status;
    }
    tp = calloc(1, sizeof(*tp));
    if (tp != NULL) {
        tp->send_seq = calloc((size_t)params->size, sizeof(*tp->send_seq));
        tp->recv_seq = calloc((size_t)params->size, sizeof(*tp->recv_seq));
        tp->peer_err = calloc((size_t)params->size, sizeof(*tp->peer_err));
    }
    if ((tp == NULL) || (tp->send_seq == NULL) || (tp->recv_seq == NULL) ||
        (tp->peer_err == NULL)) {
        if (tp != NULL) {
            free(tp->send_seq);
            free(tp->recv_seq);
            free(tp->peer_err);
            free(tp);
        }
        gs__mpi_env_release();
        return gs__error_set(GS_ERR_NO_MEMORY, "mpi: out of memory for %d ranks", params->size);
    }
    tp->rank = params->rank;
    tp->size = params->size;
    tp->comm_id = params->comm_id;
    tp->comm = MPI_COMM_NULL;
    tp->counters = params->counters;
    atomic_init(&tp->aborted, 0);
    atomic_init(&tp->woken, 0);
    *tp_out = tp;
    return GS_OK;
}

static gs_status_t mpi_tp_get_address(gs_tp_t *tp, char *buf, size_t len)
{
    int wrank = 0;
    int n;

    (void)tp;
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    n = snprintf(buf, len, "mpi:%d", wrank);
    if ((n < 0) || ((size_t)n >= len)) {
        return gs__error_set(GS_ERR_INVALID_ARG, "mpi: address buffer of %zu bytes is too small",
                             len);
    }
    return GS_OK;
}

gs_status_t gs__mpi_tp_adopt_comm(gs_tp_t *tp, MPI_Comm comm)
{
    int rank = -1;
    int size = 0;

    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    if ((rank != tp->rank) || (size != tp->size)) {
        return gs__error_set(GS_ERR_INVALID_ARG,
                             "mpi: communicator has rank %d of %d, gradsync expected %d of %d",
                             rank, size, tp->rank, tp->size);
    }
    tp->comm = comm;
    return GS_OK;
}

MPI_Comm gs__mpi_tp_comm(const gs_tp_t *tp)
{
    return tp->comm;
}

/* Build the communicator from the members' MPI_COMM_WORLD ranks. Collective
 * over the members only (MPI_Comm_create_group), blocking. */
static gs_status_t create_comm(gs_tp_t *tp, char (*addrs)[GS_TP_ADDR_MAX])
{
    MPI_Group world_group;
    MPI_Group group;
    MPI_Comm comm = MPI_COMM_NULL;
    int wsize = 0;
    int *wranks;
    int ret;

    MPI_Comm_size(MPI_COMM_WORLD, &wsize);
    wranks = malloc((size_t)tp->size * sizeof(int));
    if (wranks == NULL) {
        return gs__error_set(GS_ERR_NO_MEMORY, "mpi: out of memory");
    }
    for (int i = 0; i < tp->size; i++) {
        char *end = NULL;
        long v;

        addrs[i][GS_TP_ADDR_MAX - 1] = '\0';
        v = (strncmp(addrs[i], "mpi:", 4) == 0) ? strtol(addrs[i] + 4, &end, 10) : -1;
        if ((end == NULL) || (*end != '\0') || (v < 0) || (v >= wsize)) {
            free(wranks);
            return gs__error_set(GS_ERR_INVALID_ARG,
                                 "mpi: rank %d published the address \"%.40s\", not an MPI "
                                 "endpoint (do all ranks use GS_TRANSPORT=mpi?)",
                                 i, addrs[i]);
        }
        wranks[i] = (int)v;
    }
    MPI_Comm_group(MPI_COMM_WORLD, &world_group);
    ret = MPI_Group_incl(world_group, tp->size, wranks, &group);
    free(wranks);
    MPI_Group_free(&world_group);
    if (ret != MPI_SUCCESS) {
        return gs__error_set(GS_ERR_INVALID_ARG, "mpi: MPI_Group_incl failed: %s",
                             gs__mpi_errstr(ret));
    }
    /* The tag only has to differ between concurrent creations over
     * overlapping groups; every member derives the same one. */
    ret = MPI_Comm_create_group(MPI_COMM_WORLD, group, (int)(tp->comm_id & 0x3fff), &comm);
    MPI_Group_free(&group);
    if ((ret != MPI_SUCCESS) || (comm == MPI_COMM_NULL)) {
        return gs__error_set(GS_ERR_PEER_FAILED, "mpi: MPI_Comm_create_group failed: %s",
                             gs__mpi_errstr(ret));
    }
    return gs__mpi_tp_adopt_comm(tp, comm);
}

static gs_status_t mpi_tp_connect(gs_tp_t *tp, char (*addrs)[GS_TP_ADDR_MAX], uint64_t deadline_ns)
{
    gs_status_t status;

    (void)deadline_ns; /* MPI communicator creation is blocking (see docs/cluster.md) */
    if (tp->comm == MPI_COMM_NULL) {
        status = create_comm(tp, addrs);
        if (status != GS_OK) {
            return status;
        }
    }
    MPI_Comm_set_errhandler(tp->comm, MPI_ERRORS_RETURN);
    tp->connected = 1;
    GS_INFO(NET, "mpi: rank %d of %d connected", tp->rank, tp->size);
    return GS_OK;
}

static gs_status_t req_new(gs_tp_t *tp, int is_send, int peer, uint64_t tag, void *buf,
                           size_t len, gs_tp_req_t **req_out)
{
    gs_tp_req_t *r = NULL;

    if ((peer >= tp->size) || (peer < (is_send ? 0 : GS_ANY_SOURCE)) ||
        ((buf == NULL) && (len > 0))) {
        return gs__error_set(GS_ERR_INVALID_ARG, "mpi: %s rank %d of %d with %zu bytes",
                             is_send ? "send to" : "receive from", peer, tp->size, len);
    }
    r = calloc(1, sizeof(*r));
    if (r == NULL) {
        return gs__error_set(GS_ERR_NO_MEMORY, "mpi: out of memory for a request");
    }
    r->is_send = is_send;
    r->peer = peer;
    r->tag = tag;
    r->buf = buf;
    r->len = len;
    r->rs.mr = r->rs.inline_mr;
    r->comp.peer = peer;
    r->comp.tag = tag;
    *req_out = r;
    return GS_OK;
}

/* Fail r at once when the transport or its peer already failed. */
static int req_precheck(gs_tp_t *tp, gs_tp_req_t *r)
{
    if (atomic_load(&tp->aborted)) {
        req_complete(tp, r, GS_ERR_ABORTED, "the transport was aborted");
        return 1;
    }
    if ((r->peer >= 0) && (tp->peer_err[r->peer] != GS_OK)) {
        req_complete(tp, r, tp->peer_err[r->peer], "rank %d failed earlier", r->peer);
        return 1;
    }
    if (!tp->connected) {
        req_complete(tp, r, GS_ERR_INVALID_USAGE, "the transport is not connected");
        return 1;
    }
    return 0;
}

static gs_status_t mpi_tp_isend(gs_tp_t *tp, int peer, uint64_t tag, const void *buf, size_t len,
                                gs_tp_req_t **req_out)
{
    mpi_hdr_t h;
    gs_tp_req_t *r = NULL;
    gs_status_t status;
    const int inl = (len <= MPI_INLINE_MAX);
    int ret;

    status = req_new(tp, 1, peer, tag, (void *)buf, len, &r);
    if (status != GS_OK) {
        return status;
    }
    *req_out = r;
    r->comp.nbytes = len;
    if (req_precheck(tp, r)) {
        return GS_OK;
    }
    memset(&h, 0, sizeof(h));
    h.tag = tag;
    h.len = len;
    h.flags = inl ? MPI_FLAG_INLINE : 0;
    h.nchunks = inl ? 0 : (uint32_t)chunk_count(len);
    h.seq = inl ? 0 : tp->send_seq[peer];
    r->sbuf = malloc(MPI_HDR_BYTES + (inl ? len : 0));
    if ((r->sbuf == NULL) || (reqset_alloc(&r->rs, 1 + (size_t)h.nchunks) != 0)) {
        req_complete(tp, r, GS_ERR_NO_MEMORY, "out of memory for a %zu-byte send", len);
        return GS_OK;
    }
    hdr_encode(r->sbuf, &h);
    if (inl && (len > 0)) {
        memcpy(r->sbuf + MPI_HDR_BYTES, buf, len);
    }
    ret = MPI_Isend(r->sbuf, MPI_HDR_BYTES + (inl ? (int)len : 0), MPI_BYTE, peer, GS_MPI_TAG_HDR,
                    tp->comm, &r->rs.mr[0]);
    for (uint32_t i = 0; (ret == MPI_SUCCESS) && (i < h.nchunks); i++) {
        const size_t off = (size_t)i * MPI_CHUNK_MAX;
        const size_t part = (len - off < MPI_CHUNK_MAX) ? len - off : MPI_CHUNK_MAX;
        ret = MPI_Isend((const char *)buf + off, (int)part, MPI_BYTE, peer, GS_MPI_TAG_DATA,
                        tp->comm, &r->rs.mr[1 + i]);
    }
    tp->send_seq[peer] += h.nchunks;
    if (ret != MPI_SUCCESS) {
        /* Requests already started finish on their own. */
        orphan_add(tp, &r->rs, NULL);
        tp->peer_err[peer] = GS_ERR_PEER_FAILED;
        req_complete(tp, r, GS_ERR_PEER_FAILED, "MPI_Isend to rank %d failed: %s", peer,
                     gs__mpi_errstr(ret));
        return GS_OK;
    }
    r->state = REQ_ACTIVE;
    list_append(&tp->active, r);
    return GS_OK;
}

static gs_status_t mpi_tp_irecv(gs_tp_t *tp, int peer, uint64_t tag, void *buf, size_t len,
                                gs_tp_req_t **req_out)
{
    gs_tp_req_t *r = NULL;
    gs_status_t status;

    status = req_new(tp, 0, peer, tag, buf, len, &r);
    if (status != GS_OK) {
        return status;
    }
    *req_out = r;
    if (req_precheck(tp, r)) {
        return GS_OK;
    }
    /* The oldest unexpected message that matches. */
    for (mpi_msg_t **p = &tp->unexp; *p != NULL; p = &(*p)->next) {
        mpi_msg_t *m = *p;

        if (!(((peer == GS_ANY_SOURCE) || (peer == m->src)) && masked_equal(m->h.tag, tag))) {
            continue;
        }
        *p = m->next;
        m->next = NULL;
        if (refuse(tp, r, m->src, &m->h)) {
            if (m->rs.n > 0) {
                orphan_add(tp, &m->rs, m->data);
                m->data = NULL;
            }
            msg_free(m);
            return GS_OK;
        }
        r->comp.nbytes = (size_t)m->h.len;
        if (m->rs.n == 0) {
            if (m->h.len > 0) {
                memcpy(buf, m->data, (size_t)m->h.len);
            }
            msg_free(m);
            req_complete(tp, r, GS_OK, NULL);
            return GS_OK;
        }
        r->msg = m;
        r->state = REQ_MSG;
        list_append(&tp->active, r);
        return GS_OK;
    }
    if ((peer == GS_ANY_SOURCE) && (tp->size > 0)) {
        /* An any-source receive fails only when every peer has. */
        int alive = 0;
        for (int i = 0; i < tp->size; i++) {
            alive += (tp->peer_err[i] == GS_OK);
        }
        if (alive == 0) {
            req_complete(tp, r, GS_ERR_PEER_FAILED, "every rank failed");
            return GS_OK;
        }
    }
    r->state = REQ_POSTED;
    list_append(&tp->posted, r);
    return GS_OK;
}

static gs_status_t mpi_tp_test(gs_tp_t *tp, gs_tp_req_t *req, int *done_out,
                               gs_tp_completion_t *comp_out)
{
    if ((req->state != REQ_DONE) && atomic_load(&tp->aborted)) {
        /* Leave the MPI requests to MPI; the buffers are the caller's. */
        if (req->state == REQ_POSTED) {
            list_remove(&tp->posted, req);
        } else if (req->state == REQ_ACTIVE) {
            list_remove(&tp->active, req);
            orphan_add(tp, &req->rs, NULL);
        } else if (req->state == REQ_MSG) {
            list_remove(&tp->active, req);
            if (req->msg->rs.n > 0) {
                orphan_add(tp, &req->msg->rs, req->msg->data);
                req->msg->data = NULL;
            }
            msg_free(req->msg);
            req->msg = NULL;
        }
        req_complete(tp, req, GS_ERR_ABORTED, "the transport was aborted");
    }
    if (req->state != REQ_DONE) {
        *done_out = 0;
        return GS_OK;
    }
    *done_out = 1;
    if (comp_out != NULL) {
        *comp_out = req->comp;
    }
    if (req->comp.status != GS_OK) {
        gs__error_copy_in(req->why);
    }
    return GS_OK;
}

static void nap(uint64_t idle_ns)
{
    struct timespec ts;

    if (idle_ns < 50000) {
        sched_yield();
        return;
    }
    ts.tv_sec = 0;
    ts.tv_nsec = (idle_ns < 5000000) ? 20000 : 200000;
    nanosleep(&ts, NULL);
}

static gs_status_t mpi_tp_progress(gs_tp_t *tp, uint64_t deadline_ns)
{
    const uint64_t start = gs__now_ns();
    const int before = tp->completions;

    for (;;) {
        uint64_t now;

        if (atomic_load(&tp->aborted)) {
            return gs__error_set(GS_ERR_ABORTED, "mpi: the transport was aborted");
        }
        if (tp->connected) {
            poll_once(tp);
        }
        if (tp->completions != before) {
            return GS_OK;
        }
        if (atomic_exchange(&tp->woken, 0)) {
            return GS_OK;
        }
        now = gs__now_ns();
        if (now >= deadline_ns) {
            return GS_OK;
        }
        nap(now - start);
    }
}

gs_status_t gs__mpi_tp_wait(gs_tp_t *tp, MPI_Request *mreq, uint64_t deadline_ns,
                            const char *what)
{
    const uint64_t start = gs__now_ns();

    for (;;) {
        MPI_Status st;
        int flag = 0;
        int ret;
        uint64_t now;

        ret = MPI_Test(mreq, &flag, &st);
        if (ret != MPI_SUCCESS) {
            return gs__error_set(GS_ERR_PEER_FAILED, "mpi: %s failed: %s", what,
                                 gs__mpi_errstr(ret));
        }
        if (flag) {
            return GS_OK;
        }
        if (atomic_load(&tp->aborted)) {
            MPI_Request_free(mreq);
            return gs__error_set(GS_ERR_ABORTED, "mpi: %s: the transport was aborted", what);
        }
        now = gs__now_ns();
        if (now >= deadline_ns) {
            MPI_Request_free(mreq);
            return gs__error_set(GS_ERR_TIMEOUT,
                                 "mpi: %s on rank %d did not complete before the deadline "
                                 "(a rank is missing or slow)",
                                 what, tp->rank);
        }
        nap(now - start);
    }
}

static void req_free(gs_tp_req_t *r)
{
    reqset_free(&r->rs);
    free(r->sbuf);
    free(r);
}

static gs_status_t mpi_tp_req_release(gs_tp_t *tp, gs_tp_req_t *req)
{
    if (req == NULL) {
        return GS_OK;
    }
    switch (req->state) {
    case REQ_POSTED:
        list_remove(&tp->posted, req);
        break;
    case REQ_ACTIVE:
        /* NOTE: MPI cannot take back a matched receive or a started send;
         * they finish in the background into/from the caller's buffer. */
        list_remove(&tp->active, req);
        for (int i = 0; i < req->rs.n; i++) {
            if ((req->rs.mr[i] != MPI_REQUEST_NULL) && !req->is_send) {
                MPI_Cancel(&req->rs.mr[i]);
            }
        }
        orphan_add(tp, &req->rs, req->sbuf);
        req->sbuf = NULL;
        break;
    case REQ_MSG:
        list_remove(&tp->active, req);
        orphan_add(tp, &req->msg->rs, req->msg->data);
        req->msg->data = NULL;
        msg_free(req->msg);
        break;
    case REQ_DONE:
        break;
    }
    req_free(req);
    return GS_OK;
}

static gs_status_t mpi_tp_abort(gs_tp_t *tp)
{
    atomic_store(&tp->aborted, 1);
    return GS_OK;
}

static gs_status_t mpi_tp_wake(gs_tp_t *tp)
{
    atomic_store(&tp->woken, 1);
    return GS_OK;
}

static gs_status_t mpi_tp_finalize(gs_tp_t *tp)
{
    const uint64_t deadline = gs__now_ns() + 2000000000ull;

    if (tp == NULL) {
        return GS_OK;
    }
    /* Let headers and orphaned requests finish briefly, then hand the rest
     * to MPI (MPI_Request_free) so that the communicator can be freed. */
    while (tp->connected && ((tp->hdrq != NULL) || (tp->orphans != NULL)) &&
           (gs__now_ns() < deadline) && !atomic_load(&tp->aborted)) {
        poll_messages(tp);
        while (tp->hdrq != NULL) {
            int flag = 0;
            MPI_Status st;
            mpi_hdrq_t *q = tp->hdrq;
            MPI_Test(&q->mr, &flag, &st);
            if (!flag) {
                break;
            }
            tp->hdrq = q->next;
            free(q);
        }
        nap(1000000);
    }
    while (tp->hdrq != NULL) {
        mpi_hdrq_t *q = tp->hdrq;
        tp->hdrq = q->next;
        if (q->mr != MPI_REQUEST_NULL) {
            MPI_Request_free(&q->mr);
        }
        free(q); /* NOTE: an unfinished header receive may still write here (bounded wait above) */
    }
    while (tp->orphans != NULL) {
        mpi_orphan_t *o = tp->orphans;
        tp->orphans = o->next;
        for (int i = 0; i < o->rs.n; i++) {
            if (o->rs.mr[i] != MPI_REQUEST_NULL) {
                MPI_Request_free(&o->rs.mr[i]);
            }
        }
        reqset_free(&o->rs);
        free(o->to_free);
        free(o);
    }
    while (tp->unexp != NULL) {
        mpi_msg_t *m = tp->unexp;
        tp->unexp = m->next;
        for (int i = 0; i < m->rs.n; i++) {
            if (m->rs.mr[i] != MPI_REQUEST_NULL) {
                MPI_Request_free(&m->rs.mr[i]);
            }
        }
        msg_free(m);
    }
    if (tp->comm != MPI_COMM_NULL) {
        MPI_Comm_free(&tp->comm);
    }
    free(tp->send_seq);
    free(tp->recv_seq);
    free(tp->peer_err);
    free(tp);
    gs__mpi_env_release();
    return GS_OK;
}

const gs_transport_ops_t gs__mpi_ops = {
    .name = "mpi",
    .abi_size = sizeof(gs_transport_ops_t),
    .caps = GS_TP_CAP_HOST_MEM | GS_TP_CAP_ANY_SOURCE | GS_TP_CAP_NATIVE_COLL |
            GS_TP_CAP_ORDERED,
    .init = mpi_tp_init,
    .get_address = mpi_tp_get_address,
    .connect = mpi_tp_connect,
    .isend = mpi_tp_isend,
    .irecv = mpi_tp_irecv,
    .test = mpi_tp_test,
    .progress = mpi_tp_progress,
    .req_release = mpi_tp_req_release,
    .abort = mpi_tp_abort,
    .finalize = mpi_tp_finalize,
    .wake = mpi_tp_wake,
    .coll_allreduce = gs__mpi_coll_allreduce,
    .coll_bcast = gs__mpi_coll_bcast,
    .coll_allgather = gs__mpi_coll_allgather,
    .coll_reduce_scatter = gs__mpi_coll_reduce_scatter,
};
