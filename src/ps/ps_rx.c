/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The receive thread of the parameter server: one any-source receive of a
 * control message posted at a time on the private communicator. Each
 * message is decoded and checked as hostile bytes (ps_wire.c), against the
 * rank the transport says sent it (the sender field must name that rank),
 * and against the registry: the key must exist, this rank must serve the
 * named shard, the sender must be a worker, sizes and dtype must match. A
 * push's payload receive (into a staging buffer of what the header
 * announces) is posted here, at once, and a large push is then told to
 * send (CTS), so that its payload lands in place while the server thread
 * works; the op then goes to the server thread's queue. Past what a worker
 * may have staged (ps_limits.h) the op is queued without a buffer and the
 * server thread stages it when it gets to it. A worker with
 * GS_PS_MAX_INFLIGHT requests unanswered here is refused. On a worker, a
 * CTS for one of its own large pushes posts that payload's send. Anything
 * malformed fails the parameter server with GS_ERR_PROTOCOL naming the
 * sender.
 *
 * Liveness: every rank sends a heartbeat to every other rank at least
 * every second (or a quarter of the deadline), so the posted receive never
 * reaches its deadline while the job is alive. A rank that dies fails the
 * receive at once (the transport names it); a rank that stops sending
 * anything (stopped, cut off) is named here once it has been silent for a
 * whole deadline. The thread ends once this rank is leaving and every
 * other rank said BYE (a rank that gets a BYE echoes a heartbeat, so that
 * the last one to leave wakes up), or on the first error.
 */
#include "ps/ps_impl.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/log.h"

typedef struct rx_state {
    gs_ps_t ps;
    uint64_t *last_heard; /* per rank */
    uint8_t *left;        /* per rank: said BYE */
    int nbye;
    gs__ps_send_t *sends; /* CTS messages in flight */
} rx_state_t;

static void rx_fail(rx_state_t *rx, gs_status_t status, int abort_comm, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void rx_fail(rx_state_t *rx, gs_status_t status, int abort_comm, const char *fmt, ...)
{
    char msg[GS_ERROR_MSG_MAX];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (status != GS_ERR_PEER_FAILED) {
        GS_WARN("%s", msg);
    }
    gs__ps_fail(rx->ps, status, msg, abort_comm);
}

/* Name the ranks silent for a whole deadline; 1 when there is one. */
static int check_silent(rx_state_t *rx, uint64_t now)
{
    gs_ps_t ps = rx->ps;

    for (int r = 0; r < ps->nranks; r++) {
        if ((r == ps->rank) || rx->left[r]) {
            continue;
        }
        if (now - rx->last_heard[r] > ps->cfg.timeout_ns) {
            rx_fail(rx, GS_ERR_TIMEOUT, 1,
                    "parameter server rank %d: rank %d sent nothing, not even a heartbeat, for "
                    "%llu ms (deadline %d ms): it is stopped or cut off",
                    ps->rank, r, (unsigned long long)((now - rx->last_heard[r]) / 1000000ull),
                    ps->cfg.timeout_ms);
            return 1;
        }
    }
    return 0;
}

/* The shard a push or pull names, checked; NULL (failed) when not ours. */
static gs__ps_shard_t *rx_shard(rx_state_t *rx, const gs__ps_msg_t *m)
{
    gs_ps_t ps = rx->ps;
    gs__ps_key_t *k = gs__ps_key_find(ps, m->key);
    gs__ps_shard_t *sh;
    gs__ps_shard_expect_t e;
    char why[200];

    if (gs__ps_worker_of(&ps->roles, m->src) < 0) {
        rx_fail(rx, GS_ERR_PROTOCOL, 1,
                "parameter server rank %d: rank %d, which is not a worker, sent a %s", ps->rank,
                (int)m->src, gs__ps_msg_type_name(m->type));
        return NULL;
    }
    if (k == NULL) {
        rx_fail(rx, GS_ERR_PROTOCOL, 1,
                "parameter server rank %d: rank %d sent a %s of key %llu, which is not registered",
                ps->rank, (int)m->src, gs__ps_msg_type_name(m->type), (unsigned long long)m->key);
        return NULL;
    }
    if ((m->shard >= k->nshards) || (k->served[m->shard] == NULL)) {
        rx_fail(rx, GS_ERR_PROTOCOL, 1,
                "parameter server rank %d: rank %d sent a %s of key %llu shard %u, which this rank "
                "does not serve",
                ps->rank, (int)m->src, gs__ps_msg_type_name(m->type), (unsigned long long)m->key,
                (unsigned)m->shard);
        return NULL;
    }
    sh = k->served[m->shard];
    e.offset = sh->offset;
    e.count = sh->count;
    e.dtype = k->dtype;
    e.value_bytes = sh->bytes;
    e.max_encoded = sh->max_encoded;
    if (gs__ps_msg_check_shard(m, &e, why, sizeof(why)) != GS_OK) {
        rx_fail(rx, GS_ERR_PROTOCOL, 1, "parameter server rank %d: rank %d: %s", ps->rank,
                (int)m->src, why);
        return NULL;
    }
    return sh;
}

/* An answer or clear-to-send for this rank's client. A send that fails
 * because a peer failed stays GS_ERR_PEER_FAILED; only a message that does
 * not fit is a protocol error. */
static void rx_to_client(rx_state_t *rx, const uint8_t *raw, const gs__ps_msg_t *m)
{
    gs_ps_t ps = rx->ps;
    const int cts = (m->type == GS_PS_MSG_CTS);
    const char *what = cts ? "a clear-to-send" : "an answer";
    gs_status_t st = GS_ERR_PROTOCOL;
    char why[200];

    if (ps->worker < 0) {
        snprintf(why, sizeof(why), "%s reached a server-only rank", what);
    } else if (gs__ps_server_of(&ps->roles, m->src) < 0) {
        snprintf(why, sizeof(why), "rank %d, which is not a server, sent %s", (int)m->src, what);
    } else {
        st = cts ? gs__ps_client_cts(ps, m, why, sizeof(why))
                 : gs__ps_client_answer(ps, raw, m, why, sizeof(why));
    }
    if (st != GS_OK) {
        rx_fail(rx, st, 1, "parameter server rank %d: %s", ps->rank, why);
    }
}

static gs__ps_op_t *op_new(rx_state_t *rx, gs__ps_op_type_t type, const gs__ps_msg_t *m)
{
    gs__ps_op_t *op = calloc(1, sizeof(*op));

    if (op == NULL) {
        rx_fail(rx, GS_ERR_NO_MEMORY, 1, "parameter server rank %d: out of memory", rx->ps->rank);
        return NULL;
    }
    op->type = type;
    op->src = m->src;
    op->worker = gs__ps_worker_of(&rx->ps->roles, m->src);
    op->seq = m->seq;
    op->clock = m->clock;
    return op;
}

/* Tell a large push's worker to send (its receive is posted). */
static void rx_send_cts(rx_state_t *rx, const gs__ps_msg_t *req)
{
    gs_ps_t ps = rx->ps;
    gs__ps_send_t *s = calloc(1, sizeof(*s));
    gs__ps_msg_t m = *req;
    gs_status_t status;

    if (s == NULL) {
        rx_fail(rx, GS_ERR_NO_MEMORY, 1, "parameter server rank %d: out of memory", ps->rank);
        return;
    }
    m.type = GS_PS_MSG_CTS;
    m.src = ps->rank;
    m.flags = 0;
    m.clock = 0;
    gs__ps_msg_encode(&m, s->msg);
    status = gs_isend(ps->comm, s->msg, GS_PS_MSG_BYTES, GS_DTYPE_U8, req->src,
                      gs__ps_tag(GS_PS_TAG_KIND_CTRL, 0), &s->req);
    if (status != GS_OK) {
        free(s);
        rx_fail(rx, status, status != GS_ERR_PEER_FAILED,
                "parameter server rank %d: clearing a push of rank %d to send: %s", ps->rank,
                (int)req->src, gs__error_get());
        return;
    }
    s->next = rx->sends;
    rx->sends = s;
}

static void rx_send_echo(rx_state_t *rx, int dst)
{
    gs_ps_t ps = rx->ps;
    gs__ps_send_t *s = calloc(1, sizeof(*s));
    gs_status_t status;

    if (s == NULL) {
        rx_fail(rx, GS_ERR_NO_MEMORY, 1, "parameter server rank %d: out of memory", ps->rank);
        return;
    }
    memcpy(s->msg, ps->srv.hb_msg, GS_PS_MSG_BYTES); /* constant after create */
    status = gs_isend(ps->comm, s->msg, GS_PS_MSG_BYTES, GS_DTYPE_U8, dst,
                      gs__ps_tag(GS_PS_TAG_KIND_CTRL, 0), &s->req);
    if (status != GS_OK) {
        free(s);
        rx_fail(rx, status, status != GS_ERR_PEER_FAILED,
                "parameter server rank %d: answering the bye of rank %d: %s", ps->rank, dst,
                gs__error_get());
        return;
    }
    s->next = rx->sends;
    rx->sends = s;
}

/*
 * A push or pull of a worker: one more request this server holds until it
 * answers. NULL (the parameter server failed, naming the worker) past
 * GS_PS_MAX_INFLIGHT: an honest worker's client refuses its own request
 * before that (GS_ERR_NO_RESOURCE), so this one is not honest.
 */
static gs__ps_op_t *op_request(rx_state_t *rx, gs__ps_op_type_t type, const gs__ps_msg_t *m,
                               gs__ps_shard_t *sh)
{
    gs_ps_t ps = rx->ps;
    const int w = gs__ps_worker_of(&ps->roles, m->src); /* >= 0: rx_shard checked */
    const unsigned held = atomic_load(&ps->held.reqs[w]);
    gs__ps_op_t *op;

    if (held >= GS_PS_MAX_INFLIGHT) {
        rx_fail(rx, GS_ERR_PROTOCOL, 1,
                "parameter server rank %d: rank %d sent a %s with %u of its requests unanswered "
                "here already (limit %u per worker, which its client enforces)",
                ps->rank, (int)m->src, gs__ps_msg_type_name(m->type), held, GS_PS_MAX_INFLIGHT);
        return NULL;
    }
    op = op_new(rx, type, m);
    if (op == NULL) {
        return NULL;
    }
    op->shard = sh;
    op->counted = 1;
    (void)atomic_fetch_add(&ps->held.reqs[w], 1u);
    return op;
}

/* A push: take a staging buffer of what it announces, post the payload's
 * receive (and clear a large one to send), queue it; or, past what its
 * worker may have staged, queue it for the server thread to stage. */
static void rx_push(rx_state_t *rx, const gs__ps_msg_t *m)
{
    gs_ps_t ps = rx->ps;
    gs__ps_shard_t *sh = rx_shard(rx, m);
    gs__ps_op_t *op;
    gs_status_t status;
    size_t budget;
    size_t charge;

    if (sh == NULL) {
        return;
    }
    op = op_request(rx, GS_PS_OP_PUSH, m, sh);
    if (op == NULL) {
        return;
    }
    op->compressed = (m->flags & GS_PS_MSGF_COMPRESSED) != 0;
    op->rndv = (m->flags & GS_PS_MSGF_RNDV) != 0;
    op->nbytes = (size_t)m->nbytes; /* <= sh->wire_cap: rx_shard checked */
    pthread_rwlock_rdlock(&ps->reg.lock);
    budget = gs__ps_stage_budget(ps->reg.served_wire);
    pthread_rwlock_unlock(&ps->reg.lock);
    charge = gs__ps_stage_cap(op->nbytes, sh->wire_cap);
    if (!gs__ps_stage_admit(atomic_load(&ps->held.staged_ops[op->worker]),
                            atomic_load(&ps->held.staged_bytes[op->worker]), charge, budget)) {
        gs__ps_enqueue(ps, op); /* the server thread stages it in its turn */
        return;
    }
    op->buf = gs__ps_buf_get(ps, sh, op->nbytes);
    if (op->buf == NULL) {
        free(op);
        rx_fail(rx, GS_ERR_NO_MEMORY, 1,
                "parameter server rank %d: out of memory for a push of %zu bytes", ps->rank,
                (size_t)m->nbytes);
        return;
    }
    status = gs_irecv(ps->comm, op->buf->data, op->nbytes, GS_DTYPE_U8, m->src,
                      gs__ps_tag(GS_PS_TAG_KIND_PUSH_DATA, m->seq), &op->data_req);
    if (status != GS_OK) {
        gs__ps_buf_put(ps, sh, op->buf);
        free(op);
        rx_fail(rx, status, 1,
                "parameter server rank %d: posting the receive of a push from rank %d: %s",
                ps->rank, (int)m->src, gs__error_get());
        return;
    }
    op->charge = op->buf->cap;
    (void)atomic_fetch_add(&ps->held.staged_bytes[op->worker], op->charge);
    (void)atomic_fetch_add(&ps->held.staged_ops[op->worker], 1u);
    if (op->rndv) {
        rx_send_cts(rx, m);
    }
    gs__ps_enqueue(ps, op);
}

static void rx_message(rx_state_t *rx, const gs__ps_msg_t *m, const uint8_t *raw)
{
    gs_ps_t ps = rx->ps;
    gs__ps_op_t *op;

    if (rx->left[m->src] && ((m->type == GS_PS_MSG_PUSH) || (m->type == GS_PS_MSG_PULL) ||
                             (m->type == GS_PS_MSG_CLOCK) || (m->type == GS_PS_MSG_BYE))) {
        rx_fail(rx, GS_ERR_PROTOCOL, 1,
                "parameter server rank %d: rank %d sent a %s after its bye (it makes no more "
                "requests)",
                ps->rank, (int)m->src, gs__ps_msg_type_name(m->type));
        return;
    }
    switch (m->type) {
    case GS_PS_MSG_HEARTBEAT:
        return;
    case GS_PS_MSG_BYE:
        rx->left[m->src] = 1;
        rx->nbye++;
        op = op_new(rx, GS_PS_OP_BYE, m);
        gs__ps_enqueue(ps, op);
        /* An echo, so that the leaving rank's receive wakes up even when it
         * had every other bye already: it ends once it has all of them and
         * leaves itself. */
        rx_send_echo(rx, m->src);
        return;
    case GS_PS_MSG_PUSH:
        rx_push(rx, m);
        return;
    case GS_PS_MSG_PULL: {
        gs__ps_shard_t *sh = rx_shard(rx, m);

        if (sh != NULL) {
            op = op_request(rx, GS_PS_OP_PULL, m, sh);
            if (op != NULL) {
                op->pushed = (m->flags & GS_PS_MSGF_PUSHED) != 0;
                gs__ps_enqueue(ps, op);
            }
        }
        return;
    }
    case GS_PS_MSG_ACK:
    case GS_PS_MSG_REPLY:
    case GS_PS_MSG_CTS:
        rx_to_client(rx, raw, m);
        return;
    case GS_PS_MSG_CLOCK:
        if ((ps->server < 0) || (gs__ps_worker_of(&ps->roles, m->src) < 0)) {
            rx_fail(rx, GS_ERR_PROTOCOL, 1,
                    "parameter server rank %d: unexpected clock message from rank %d", ps->rank,
                    (int)m->src);
            return;
        }
        op = op_new(rx, GS_PS_OP_CLOCK, m);
        gs__ps_enqueue(ps, op);
        return;
    default:
        rx_fail(rx, GS_ERR_PROTOCOL, 1,
                "parameter server rank %d: rank %d sent a %s on the request tag", ps->rank,
                (int)m->src, gs__ps_msg_type_name(m->type));
        return;
    }
}

void *gs__ps_rx_main(void *arg)
{
    rx_state_t rx = {.ps = (gs_ps_t)arg};
    gs_ps_t ps = rx.ps;
    uint8_t buf[GS_PS_MSG_BYTES];
    const uint64_t t0 = gs__now_ns();

    gs__log_set_rank(ps->rank);
    rx.last_heard = calloc((size_t)ps->nranks, sizeof(uint64_t));
    rx.left = calloc((size_t)ps->nranks, 1);
    if ((rx.last_heard == NULL) || (rx.left == NULL)) {
        rx_fail(&rx, GS_ERR_NO_MEMORY, 1, "parameter server rank %d: out of memory", ps->rank);
        goto out;
    }
    for (int r = 0; r < ps->nranks; r++) {
        rx.last_heard[r] = t0;
    }
    /* No request comes once every other rank said bye, and no answer is due
     * once this rank is leaving (its requests are complete by then). */
    while (((rx.nbye < ps->nranks - 1) || !atomic_load(&ps->leaving)) &&
           (atomic_load(&ps->error) == GS_OK)) {
        gs_request_t req = GS_REQUEST_NULL;
        gs_p2p_status_t from = {.source = -1};
        gs__ps_msg_t m;
        char why[200];
        gs_status_t status;
        uint64_t now;

        /* With a status: who really sent it (the transport knows). */
        status = gs_irecv_status(ps->comm, buf, sizeof(buf), GS_DTYPE_U8, GS_ANY_SOURCE,
                                 gs__ps_tag(GS_PS_TAG_KIND_CTRL, 0), &from, &req);
        if (status == GS_OK) {
            status = gs_wait(&req);
        }
        now = gs__now_ns();
        if (status != GS_OK) {
            if ((status == GS_ERR_TIMEOUT) && check_silent(&rx, now)) {
                break;
            }
            rx_fail(&rx, status, status != GS_ERR_PEER_FAILED, "parameter server rank %d: %s",
                    ps->rank, gs__error_get());
            break;
        }
        status = gs__ps_msg_decode(buf, from.count, ps->nranks, &m, why, sizeof(why));
        if (status != GS_OK) {
            rx_fail(&rx, GS_ERR_PROTOCOL, 1,
                    "parameter server rank %d: bad control message from rank %d: %s", ps->rank,
                    from.source, why);
            break;
        }
        if (m.src != from.source) {
            rx_fail(&rx, GS_ERR_PROTOCOL, 1,
                    "parameter server rank %d: a %s message from rank %d claims to come from "
                    "rank %d",
                    ps->rank, gs__ps_msg_type_name(m.type), from.source, (int)m.src);
            break;
        }
        if (m.src == ps->rank) {
            rx_fail(&rx, GS_ERR_PROTOCOL, 1,
                    "parameter server rank %d: a control message claims to come from this rank",
                    ps->rank);
            break;
        }
        rx.last_heard[m.src] = now;
        rx_message(&rx, &m, buf);
        while ((rx.sends != NULL) && (gs_test(&rx.sends->req) != GS_INPROGRESS)) {
            gs__ps_send_t *done = rx.sends;

            rx.sends = done->next; /* a failed send fails the receive above too */
            free(done);
        }
        if (check_silent(&rx, now)) {
            break;
        }
    }
out:
    (void)gs__ps_sends_wait(&rx.sends);
    free(rx.last_heard);
    free(rx.left);
    return NULL;
}
