/* SPDX-License-Identifier: Apache-2.0 */
/*
 * How a pair's traffic is spread over its sockets and rails (docs/design.md,
 * "Several rails per peer"): pairing the rails from the peer's address,
 * cutting a send into runs of granules in proportion to each rail's
 * measured drain rate, the rate samples themselves, DATA frames kept until
 * the peer's kernel acknowledged them (multi-rail pairs only), and losing
 * a rail: its unacknowledged frames go again on the others as RESEND. The
 * receive side of a lost rail is in tcp_rx.c (it keeps reading what the
 * rail's socket still holds, and tolerates the repeats).
 */
#include "transport/tcp/tcp_conn.h"

#include "core/clock.h"
#include "core/counters.h"
#include "core/log.h"

#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <linux/tcp.h> /* struct tcp_info with tcpi_bytes_acked; TCP_USER_TIMEOUT */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

/* A rate sample needs at least this many bytes written while backlogged... */
#define RATE_MIN_BYTES (512u * 1024u)
/* ...and a busy period is cut into samples of at least this long. */
#define RATE_WINDOW_NS (300ull * 1000000ull)

/* --- pairing ------------------------------------------------------------ */

static void rail_names(const gs__tp_t *tp, const gs__tcp_peer_t *p, char *buf, size_t len)
{
    size_t off = 0;

    buf[0] = '\0';
    for (int k = 0; k < p->nrails; k++) {
        char a[GS_SOCK_ADDR_MAX];
        int n;

        if (gs__sock_format(&p->rails[k].raddr, a, sizeof(a)) != GS_OK) {
            snprintf(a, sizeof(a), "?");
        }
        n = snprintf(buf + off, len - off, "%s%s->%s", (k > 0) ? ", " : "",
                     (tp->nrails > 1) ? tp->rails[p->rails[k].local].ifname : "default", a);
        off += (n > 0) ? (size_t)n : 0;
        if (off >= len) {
            return;
        }
    }
}

void gs__tcp_rails_peer(gs__tp_t *tp, int peer, const char *text)
{
    gs__tcp_peer_t *p = &tp->peers[peer];
    gs__tcp_rail_t theirs[GS_TCP_MAX_RAILS];
    int pl[GS_TCP_MAX_RAILS];
    int ph[GS_TCP_MAX_RAILS];
    char why[GS_TCP_REASON_MAX];
    char names[160];
    bool matched;
    bool lower = (tp->rank < peer);
    int nt = 0;
    int np = 0;

    p->nrails = 1;
    p->nrails_up = 1;
    p->nconns = tp->nsocks;
    memset(p->rails, 0, sizeof(p->rails));
    p->rails[0].up = true;
    if ((text == NULL) || (text[0] == '\0')) {
        return;
    }
    if (gs__tcp_rails_parse(text, theirs, &nt, why, sizeof(why)) != GS_OK) {
        GS_WARN("tcp: rank %d's address \"%.80s\" does not parse (%s)", peer, text, why);
        return; /* its connect fails, naming the address */
    }
    p->rails[0].raddr = theirs[0].addr;
    if ((tp->nrails == 1) && (nt == 1)) {
        return;
    }
    matched = lower ? gs__tcp_rails_pair(tp->rails, tp->nrails, theirs, nt, pl, ph, &np)
                    : gs__tcp_rails_pair(theirs, nt, tp->rails, tp->nrails, pl, ph, &np);
    for (int k = 0; k < np; k++) {
        const int mine = lower ? pl[k] : ph[k];
        const int other = lower ? ph[k] : pl[k];

        p->rails[k].local = mine;
        p->rails[k].raddr = theirs[other].addr;
        p->rails[k].up = true;
        p->rails[k].bind = matched; /* unmatched: the kernel picks the source */
    }
    p->nrails = np;
    p->nrails_up = np;
    p->nconns = np * tp->nsocks;
    rail_names(tp, p, names, sizeof(names));
    if (!matched || (np < tp->nrails) || (np < nt)) {
        char out[96];
        size_t off = 0;

        /* Our interfaces no pair took, by name. */
        out[0] = '\0';
        for (int r = 0; (r < tp->nrails) && (off < sizeof(out)); r++) {
            bool used = false;

            for (int k = 0; k < np; k++) {
                used = used || (p->rails[k].local == r);
            }
            if (!used) {
                int n = snprintf(out + off, sizeof(out) - off, "%s%s", (off > 0) ? ", " : "",
                                 tp->rails[r].ifname);

                off += (n > 0) ? (size_t)n : 0;
            }
        }
        /* Once per rank: every peer of a host is likely to look the same. */
        if (!tp->rails_warned) {
            tp->rails_warned = true;
            GS_WARN("tcp: rank %d has %d rail%s, rank %d %d: paired %s%s; left out here: %s "
                    "(rails pair by subnet; GS_SOCKET_IFNAME picks them)",
                    tp->rank, tp->nrails, (tp->nrails > 1) ? "s" : "", peer, nt, names,
                    matched ? "" : " (no subnet in common: one rail, as the kernel routes it)",
                    (out[0] != '\0') ? out : "none");
        }
    } else {
        GS_INFO(NET, "tcp: rank %d to rank %d on %d rails: %s", tp->rank, peer, np, names);
    }
}

/* --- statistics ---------------------------------------------------------- */

void gs__tcp_rails_publish(gs__tp_t *tp, int peer)
{
    const gs__tcp_peer_t *p = &tp->peers[peer];
    gs__peer_counters_t *pc;

    if ((tp->counters == NULL) || (tp->counters->peers == NULL) || (peer >= tp->counters->npeers)) {
        return;
    }
    pc = &tp->counters->peers[peer];
    for (int k = 0; (k < p->nrails) && (k < GS__COUNTERS_RAILS_MAX); k++) {
        gs__rail_counters_t *rc = &pc->rails[k];

        atomic_store_explicit(&rc->bytes, p->rails[k].bytes, memory_order_relaxed);
        atomic_store_explicit(&rc->resent, p->rails[k].resent, memory_order_relaxed);
        atomic_store_explicit(&rc->rate_bps, p->rails[k].rate, memory_order_relaxed);
        atomic_store_explicit(&rc->share_ppm, p->rails[k].share_ppm, memory_order_relaxed);
        atomic_store_explicit(&rc->up, p->rails[k].up ? 1 : 0, memory_order_relaxed);
        if (atomic_load_explicit(&pc->nrails, memory_order_relaxed) == 0) {
            snprintf(rc->ifname, sizeof(rc->ifname), "%s",
                     (tp->nrails > 1) ? tp->rails[p->rails[k].local].ifname : "");
        }
    }
    atomic_store_explicit(&pc->nrails,
                          (p->nrails < GS__COUNTERS_RAILS_MAX) ? p->nrails : GS__COUNTERS_RAILS_MAX,
                          memory_order_release);
}

/* --- rates --------------------------------------------------------------- */

void gs__tcp_rail_wrote(gs__tp_t *tp, gs__tcp_conn_t *c, uint64_t bytes)
{
    tp->peers[c->peer].rails[c->rail].bytes += bytes;
}

/* Bytes the peers' kernels acknowledged on rail k's sockets so far
 * (TCP_INFO: on the wire, so with TLS its records, headers and all). */
static uint64_t rail_acked(const gs__tp_t *tp, const gs__tcp_peer_t *p, int k)
{
    uint64_t sum = 0;

    for (int i = k * tp->nsocks; i < (k + 1) * tp->nsocks; i++) {
        struct tcp_info ti;
        socklen_t len = sizeof(ti);

        memset(&ti, 0, sizeof(ti));
        if ((p->conns[i].fd >= 0) &&
            (getsockopt(p->conns[i].fd, IPPROTO_TCP, TCP_INFO, &ti, &len) == 0) &&
            (len >= offsetof(struct tcp_info, tcpi_bytes_acked) + sizeof(ti.tcpi_bytes_acked))) {
            sum += ti.tcpi_bytes_acked;
        }
    }
    return sum;
}

void gs__tcp_rate_start(gs__tp_t *tp, gs__tcp_conn_t *c)
{
    gs__tcp_peer_t *p = &tp->peers[c->peer];
    gs__tcp_prail_t *r = &p->rails[c->rail];

    if (!r->busy && (p->nrails > 1)) {
        r->busy = true; /* a busy period: from the first DATA queued to the last acknowledged */
        r->busy_t0 = gs__now_ns();
        r->busy_acked0 = rail_acked(tp, p, c->rail);
    }
}

/* No socket of rail k has anything queued or unacknowledged. */
static bool rail_idle(const gs__tp_t *tp, const gs__tcp_peer_t *p, int k)
{
    for (int i = k * tp->nsocks; i < (k + 1) * tp->nsocks; i++) {
        if ((p->conns[i].uq_head != NULL) || (p->conns[i].sq_head != NULL)) {
            return false;
        }
    }
    return true;
}

/*
 * Acknowledged bytes of a busy period over the time it took: the rail's
 * delivery rate, whatever the socket buffer absorbed on the way, with no
 * probe traffic. A sample when the socket is idle again, and every
 * RATE_WINDOW_NS of a long period (the socket stayed backlogged).
 */
static void rate_sample(gs__tp_t *tp, gs__tcp_peer_t *p, int peer, int k)
{
    gs__tcp_prail_t *r = &p->rails[k];
    uint64_t acked;
    uint64_t bytes;
    bool idle;
    uint64_t now;

    if (!r->busy) {
        return;
    }
    idle = rail_idle(tp, p, k);
    now = gs__now_ns();
    if (!idle && (now - r->busy_t0 < RATE_WINDOW_NS)) {
        return;
    }
    acked = rail_acked(tp, p, k);
    bytes = (acked > r->busy_acked0) ? acked - r->busy_acked0 : 0;
    /* A period shorter than RATE_MIN_BYTES says more about the round trip
     * and slow start than about the rail (counting them made a rail with a
     * small share look slower, and its share shrink further). */
    if ((bytes >= RATE_MIN_BYTES) && (now > r->busy_t0)) {
        const uint64_t sample = (uint64_t)((double)bytes * 1e9 / (double)(now - r->busy_t0));

        r->rate = (r->rate == 0) ? sample : (r->rate + sample) / 2u;
        gs__tcp_rails_publish(tp, peer);
    }
    if (idle) {
        r->busy = false;
    } else if (bytes >= RATE_MIN_BYTES) {
        r->busy_t0 = now; /* a long busy period: the next sample */
        r->busy_acked0 = acked;
    }
}

/* --- cutting a send ------------------------------------------------------ */

static bool conn_live(const gs__tcp_peer_t *p, const gs__tcp_conn_t *c)
{
    return (c->fd >= 0) && p->rails[c->rail].up;
}

/* The least loaded live socket of rail k (NULL: none). */
static gs__tcp_conn_t *rail_least(gs__tp_t *tp, gs__tcp_peer_t *p, int k)
{
    gs__tcp_conn_t *best = NULL;

    for (int i = k * tp->nsocks; i < (k + 1) * tp->nsocks; i++) {
        gs__tcp_conn_t *c = &p->conns[i];

        if (conn_live(p, c) && ((best == NULL) || (c->sq_bytes < best->sq_bytes))) {
            best = c;
        }
    }
    return best;
}

/* Where a one-frame message goes: socket 0 of a pair on shared memory; else
 * the least loaded socket of the fastest live rail. */
static gs__tcp_conn_t *single_conn(gs__tp_t *tp, gs__tcp_peer_t *p)
{
    int best = -1;
    uint64_t best_rate = 0;

    if (p->shm != NULL) {
        return &p->conns[0];
    }
    for (int k = 0; k < p->nrails; k++) {
        const uint64_t r = p->rails[k].rate;

        if (p->rails[k].up && (rail_least(tp, p, k) != NULL) && ((best < 0) || (r > best_rate))) {
            best = k;
            best_rate = r;
        }
    }
    return (best < 0) ? &p->conns[0] : rail_least(tp, p, best);
}

/* Granules per live rail, in proportion to the rails' rates (equal ones
 * with GS_TCP_RAIL_BALANCE=equal or before any is measured; an unmeasured
 * rail counts as the mean of the measured), every live rail at least one
 * when there are enough; largest remainders get the rest. */
static void allot(gs__tp_t *tp, gs__tcp_peer_t *p, unsigned g, unsigned *n)
{
    double w[GS_TCP_MAX_RAILS] = {0.0};
    double rem[GS_TCP_MAX_RAILS] = {0.0};
    const int nr = (p->nrails < GS_TCP_MAX_RAILS) ? p->nrails : GS_TCP_MAX_RAILS;
    double sum = 0.0;
    double mean = 0.0;
    unsigned given = 0;
    int live = 0;
    int measured = 0;

    for (int k = 0; k < nr; k++) {
        n[k] = 0;
        w[k] = 0.0;
        if (!p->rails[k].up || (rail_least(tp, p, k) == NULL)) {
            continue;
        }
        live++;
        w[k] = tp->balance_equal ? 1.0 : (double)p->rails[k].rate;
        if (w[k] > 0.0) {
            mean += w[k];
            measured++;
        }
    }
    mean = (measured > 0) ? mean / measured : 1.0;
    for (int k = 0; k < nr; k++) {
        if (p->rails[k].up && (rail_least(tp, p, k) != NULL) && (w[k] <= 0.0)) {
            w[k] = mean;
        }
        sum += w[k];
    }
    if ((live == 0) || (sum <= 0.0)) {
        return;
    }
    for (int k = 0; k < nr; k++) {
        const double exact = (double)g * w[k] / sum;

        rem[k] = -1.0;
        if (w[k] <= 0.0) {
            continue;
        }
        n[k] = (unsigned)exact;
        if ((n[k] == 0) && (g >= (unsigned)live)) {
            n[k] = 1; /* every live rail keeps being measured */
        }
        rem[k] = exact - (double)n[k];
        given += n[k];
    }
    while (given > g) { /* the minimum of one overshot: take from the largest */
        int big = 0;

        for (int k = 1; k < nr; k++) {
            big = (n[k] > n[big]) ? k : big;
        }
        n[big]--;
        given--;
    }
    /* Fewer than one granule per live rail is left: largest remainders. */
    while (given < g) {
        int best = -1;

        for (int k = 0; k < nr; k++) {
            if ((w[k] > 0.0) && ((best < 0) || (rem[k] > rem[best]))) {
                best = k;
            }
        }
        if (best < 0) {
            break; /* no live rail (not reached: sum > 0) */
        }
        n[best]++;
        rem[best] -= 1.0;
        given++;
    }
}

static void frame_set(struct gs__tp_req *req, int i, unsigned g, unsigned first, unsigned count)
{
    gs__tcp_frame_t *f = &req->frames[i];
    gs__tcp_frame_hdr_t hdr = {
        .type = GS_TCP_FRAME_DATA, .seq = req->seq, .tag = req->tag, .total_len = req->len};

    gs__tcp_granule_span(req->len, g, first, count, &hdr.offset, &hdr.chunk_len);
    gs__tcp_frame_encode(&hdr, f->hdr);
    f->req = req;
    f->payload = (const uint8_t *)req->buf + hdr.offset;
    f->payload_len = hdr.chunk_len;
}

void gs__tcp_stripe(gs__tp_t *tp, struct gs__tp_req *req)
{
    gs__tcp_peer_t *p = &tp->peers[req->peer];
    gs__tcp_conn_t *dst[GS_TCP_MAX_SOCKS];
    unsigned per_rail[GS_TCP_MAX_RAILS] = {0};
    int nf = 0;
    unsigned g;
    unsigned next = 0;

    /* The plan the receiver checks: from the pair's sockets, not the live ones. */
    g = gs__tcp_granules(req->len, (p->shm == NULL) && (p->nconns > 1));
    req->seq = p->send_seq++;
    if (g > 1) {
        allot(tp, p, g, per_rail);
        for (int k = 0; k < p->nrails; k++) {
            int ns = 0;
            gs__tcp_conn_t *socks[GS_TCP_MAX_SOCKS];

            p->rails[k].share_ppm = (uint32_t)((uint64_t)per_rail[k] * 1000000u / g);
            if (per_rail[k] == 0) {
                continue;
            }
            for (int j = 0; j < tp->nsocks; j++) {
                gs__tcp_conn_t *c = &p->conns[k * tp->nsocks +
                                              (int)((p->rot + (unsigned)j) % (unsigned)tp->nsocks)];

                if (conn_live(p, c)) {
                    socks[ns++] = c;
                }
            }
            /* The rail's run, cut evenly over its sockets. */
            for (int j = 0; (j < ns) && (per_rail[k] > 0); j++) {
                const unsigned cnt = per_rail[k] / (unsigned)ns +
                                     ((unsigned)j < per_rail[k] % (unsigned)ns ? 1u : 0u);

                if (cnt == 0) {
                    continue;
                }
                frame_set(req, nf, g, next, cnt);
                dst[nf++] = socks[j];
                next += cnt;
            }
        }
        p->rot = (p->rot + 1u) % (unsigned)tp->nsocks;
    }
    if (nf == 0) {
        /* One frame, the whole message (a run of every granule when g > 1: no
         * live rail, socket 0, whose failure fails the send). */
        frame_set(req, 0, 1, 0, 1);
        dst[nf++] = single_conn(tp, p);
    }
    req->nframes = nf;
    req->frames_left = nf;
    gs__tcp_rails_publish(tp, req->peer);
    for (int i = 0; (i < nf) && (p->fail_status == GS_OK); i++) {
        gs__tcp_conn_queue(tp, dst[i], &req->frames[i]);
    }
    if (p->fail_status != GS_OK) {
        gs__tcp_req_fail_ref(tp, req, p->fail_status, gs__tcp_peer_why(tp, p));
    }
}

/* --- frames kept until acknowledged --------------------------------------- */

bool gs__tcp_retain(gs__tp_t *tp, gs__tcp_conn_t *c, gs__tcp_frame_t *f, uint64_t mark)
{
    bool keep = true;

    if ((f->req == NULL) || f->owned || (tp->peers[c->peer].nrails < 2) || (c->shm != NULL)) {
        return false; /* one rail (or a shared-memory ring): nothing to send again */
    }
    if (f->payload_len < GS_TCP_STRIPE_MIN) {
        /* A small frame: its send completes now (no wait for the ack on the
         * latency path); a copy stays for the resend. */
        gs__tcp_frame_t *copy = gs__tcp_frame_copy(f);

        if (copy == NULL) {
            return false; /* no resend for this one if its rail fails */
        }
        f = copy;
        keep = false;
    }
    f->ack_mark = mark;
    f->next = NULL;
    if (c->uq_tail != NULL) {
        c->uq_tail->next = f;
    } else {
        c->uq_head = f;
        tp->nretained++;
    }
    c->uq_tail = f;
    return keep;
}

/* A retained frame's bytes reached the peer: its send is one frame closer. */
static void frame_acked(gs__tp_t *tp, gs__tcp_frame_t *f)
{
    struct gs__tp_req *req = f->req;

    if (f->owned) {
        free(f); /* a small frame's copy */
        return;
    }
    if ((req != NULL) && (req->state != GS_TCP_REQ_DONE) && (--req->frames_left == 0)) {
        gs__tcp_req_complete(tp, req, GS_OK, NULL);
    }
}

void gs__tcp_unretain_conn(gs__tp_t *tp, gs__tcp_conn_t *c)
{
    if (c->uq_head != NULL) {
        tp->nretained--;
    }
    while (c->uq_head != NULL) {
        gs__tcp_frame_t *f = c->uq_head;

        c->uq_head = f->next;
        if (f->owned) {
            free(f);
        }
    }
    c->uq_head = NULL;
    c->uq_tail = NULL;
}

int gs__tcp_unretain_req(gs__tp_t *tp, struct gs__tp_req *req)
{
    gs__tcp_peer_t *p = &tp->peers[req->peer];
    int removed = 0;

    for (int i = 0; i < p->nconns; i++) {
        gs__tcp_conn_t *c = &p->conns[i];
        gs__tcp_frame_t **pp = &c->uq_head;

        if (c->uq_head == NULL) {
            continue;
        }
        c->uq_tail = NULL;
        while (*pp != NULL) {
            gs__tcp_frame_t *f = *pp;

            if (f->req == req) {
                *pp = f->next;
                removed++;
            } else {
                c->uq_tail = f;
                pp = &f->next;
            }
        }
        if (c->uq_head == NULL) {
            tp->nretained--;
        }
    }
    return removed;
}

void gs__tcp_acks_poll_peer(gs__tp_t *tp, int q)
{
    gs__tcp_peer_t *p = &tp->peers[q];

    if ((q == tp->rank) || (p->nrails < 2)) {
        return;
    }
    for (int i = 0; i < p->nconns; i++) {
        gs__tcp_conn_t *c = &p->conns[i];
        int outq = 0;
        uint64_t acked;

        if ((c->uq_head == NULL) || (c->fd < 0) || (ioctl(c->fd, SIOCOUTQ, &outq) != 0) ||
            (outq < 0)) {
            continue;
        }
        /* TLS: the socket carries more bytes than we counted; only an
             * empty queue says which are through. */
        acked = (c->ssl != NULL) ? ((outq == 0) ? c->wbytes : 0) : c->wbytes - (uint64_t)outq;
        while ((c->uq_head != NULL) && (c->uq_head->ack_mark <= acked)) {
            gs__tcp_frame_t *f = c->uq_head;

            c->uq_head = f->next;
            if (c->uq_head == NULL) {
                c->uq_tail = NULL;
                tp->nretained--;
            }
            frame_acked(tp, f);
        }
    }
    for (int k = 0; k < p->nrails; k++) {
        rate_sample(tp, p, q, k);
    }
}

void gs__tcp_acks_poll(gs__tp_t *tp)
{
    for (int q = 0; (q < tp->size) && (tp->nretained > 0); q++) {
        gs__tcp_acks_poll_peer(tp, q);
    }
}

/* --- losing a rail ------------------------------------------------------- */

void gs__tcp_rails_tune(gs__tp_t *tp, int peer)
{
    gs__tcp_peer_t *p = &tp->peers[peer];
    const unsigned int ms = (unsigned int)tp->rail_timeout_ms;

    if (p->nrails < 2) {
        return;
    }
    for (int i = 0; i < p->nconns; i++) {
        /* Unacknowledged bytes older than this fail the socket (ETIMEDOUT):
         * how a rail whose link went down shows. */
        if ((p->conns[i].fd >= 0) &&
            (setsockopt(p->conns[i].fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &ms, sizeof(ms)) != 0)) {
            GS_WARN("tcp: TCP_USER_TIMEOUT on a socket to rank %d: %s", peer, strerror(errno));
        }
    }
}

/* Put a frame taken off a lost rail on the least loaded live socket. */
static void requeue(gs__tp_t *tp, gs__tcp_peer_t *p, gs__tcp_frame_t *f, uint64_t *bytes)
{
    gs__tcp_conn_t *best = NULL;

    for (int i = 0; i < p->nconns; i++) {
        gs__tcp_conn_t *c = &p->conns[i];

        if (conn_live(p, c) && ((best == NULL) || (c->sq_bytes < best->sq_bytes))) {
            best = c;
        }
    }
    if (best == NULL) {
        if (f->owned) {
            free(f);
        }
        return;
    }
    if (gs__tcp_frame_type(f->hdr) == GS_TCP_FRAME_DATA) {
        gs__tcp_frame_mark_resend(f->hdr);
        p->rails[best->rail].resent += f->payload_len;
        *bytes += f->payload_len;
    }
    gs__tcp_conn_queue(tp, best, f);
}

static void queue_rail_down(gs__tp_t *tp, gs__tcp_conn_t *c, int k)
{
    /* Out of memory: the peer learns it from its own socket. */
    (void)gs__tcp_queue_control(tp, c, GS_TCP_FRAME_RAIL_DOWN, 0, (uint64_t)k);
}

/* Rail k of @p peer is lost: stop writing on it (a FIN follows what its
 * kernel holds; its sockets keep being read, tcp_rx.c), tell the peer on
 * every socket left (@p tell), and send its unacknowledged frames again. */
static void rail_lose(gs__tp_t *tp, int peer, int k, const char *why, bool tell)
{
    gs__tcp_peer_t *p = &tp->peers[peer];
    gs__tcp_frame_t *head = NULL;
    gs__tcp_frame_t **tail = &head;
    uint64_t bytes = 0;
    int nframes = 0;

    p->rails[k].up = false;
    p->nrails_up--;
    p->rail_failed = true;
    for (int i = k * tp->nsocks; i < (k + 1) * tp->nsocks; i++) {
        gs__tcp_conn_t *c = &p->conns[i];

        /* Retained first (they were written first), then the queue. */
        *tail = c->uq_head;
        while (*tail != NULL) {
            tail = &(*tail)->next;
        }
        if (c->uq_head != NULL) {
            tp->nretained--;
        }
        c->uq_head = NULL;
        c->uq_tail = NULL;
        *tail = c->sq_head;
        while (*tail != NULL) {
            tail = &(*tail)->next;
        }
        c->sq_head = NULL;
        c->sq_tail = NULL;
        c->sq_bytes = 0;
        if (c->fd >= 0) {
            (void)shutdown(c->fd, SHUT_WR);
            gs__tcp_conn_update_events(tp, c);
        }
    }
    for (gs__tcp_frame_t *f = head; f != NULL; f = f->next) {
        nframes += (gs__tcp_frame_type(f->hdr) == GS_TCP_FRAME_DATA) ? 1 : 0;
    }
    GS_WARN("tcp: rail %d (%s) to rank %d failed: %s; %d frames go again on the other %d rail%s", k,
            (tp->nrails > 1) ? tp->rails[p->rails[k].local].ifname : "default", peer, why, nframes,
            p->nrails_up, (p->nrails_up == 1) ? "" : "s");
    for (int i = 0; tell && (i < p->nconns); i++) {
        if (conn_live(p, &p->conns[i])) {
            queue_rail_down(tp, &p->conns[i], k);
        }
    }
    while ((head != NULL) && (p->fail_status == GS_OK)) {
        gs__tcp_frame_t *f = head;

        head = f->next;
        if (f->owned && (f->req == NULL) &&
            (gs__tcp_frame_type(f->hdr) == GS_TCP_FRAME_HEARTBEAT)) {
            free(f);
            continue;
        }
        requeue(tp, p, f, &bytes);
    }
    gs__tcp_rails_publish(tp, peer);
    tp->nevents++;
}

bool gs__tcp_rail_fail(gs__tp_t *tp, gs__tcp_conn_t *c, const char *why)
{
    gs__tcp_peer_t *p = &tp->peers[c->peer];

    if ((p->nrails < 2) || (p->link != GS_TCP_LINK_UP) || (p->fail_status != GS_OK) ||
        tp->leaving) {
        return false;
    }
    if (p->rails[c->rail].up) {
        if (p->nrails_up < 2) {
            return false; /* the last rail: the peer is gone */
        }
        rail_lose(tp, c->peer, c->rail, why, true);
    }
    gs__tcp_dead_conn_close(tp, c);
    return true;
}

void gs__tcp_rail_down_heard(gs__tp_t *tp, gs__tcp_conn_t *c, uint64_t k)
{
    gs__tcp_peer_t *p = &tp->peers[c->peer];
    char why[96];

    if (k >= (uint64_t)p->nrails) {
        gs__tcp_peer_fail(tp, c->peer, GS_ERR_PROTOCOL,
                          "peer %d sent a bad frame header: rail-down names rail %" PRIu64 " of %d",
                          c->peer, k, p->nrails);
        return;
    }
    if (!p->rails[k].up) {
        return;
    }
    if (p->nrails_up < 2) {
        gs__tcp_peer_fail(tp, c->peer, GS_ERR_PROTOCOL,
                          "peer %d says rail %" PRIu64 " failed, and it is our last", c->peer, k);
        return;
    }
    snprintf(why, sizeof(why), "rank %d says so", c->peer);
    rail_lose(tp, c->peer, (int)k, why, false);
}
