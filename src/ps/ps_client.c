/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The worker side of the parameter server: gs_ps_push, gs_ps_pull and
 * gs_ps_clock (completion is in ps_request.c). Arguments are checked before
 * anything is sent, so a rejected call changes nothing. A push or pull is
 * one sub-request per shard of the key:
 * - a shard this rank serves: an op queued to the local server thread,
 *   completed through done_cv (no message, no copy of the gradient);
 * - another server: the sub goes into the table of answers due (its ACK or
 *   REPLY arrives on the control tag and rx hands it over), a pull first
 *   posts the receive of the values straight into the caller's buffer, then
 *   the request header leaves and, for a push, the payload from the
 *   caller's buffer (or the encoded copy, with a codec): at once when it is
 *   small, else when the server's CTS says its receive is posted (rx calls
 *   gs__ps_client_cts), so that a large payload lands in place.
 * A remote sub holds one of GS_PS_MAX_INFLIGHT slots of its server from
 * before anything is sent until its answer arrives (ps_limits.h): a
 * request that would take one past the limit is refused whole with
 * GS_ERR_NO_RESOURCE, so that a server never has to refuse an honest
 * worker.
 */
#include "ps/ps_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/clock.h"
#include "core/dtype.h"

/* ====================================================================== */
/* Helpers                                                                */
/* ====================================================================== */

static gs_status_t check_common(const char *fn, gs_ps_t ps, gs_ps_request_t *req_out)
{
    if (ps == GS_PS_NULL) {
        return gs__error_set(GS_ERR_INVALID_ARG, "%s: ps is NULL", fn);
    }
    if (req_out == NULL) {
        return gs__error_set(GS_ERR_INVALID_ARG, "%s: req_out is NULL", fn);
    }
    return GS_OK;
}

static gs_status_t check_worker(const char *fn, gs_ps_t ps)
{
    if (ps->worker < 0) {
        return gs__error_set(GS_ERR_INVALID_USAGE,
                             "%s: rank %d is a server-only rank (the last %d ranks serve); only "
                             "workers push, pull and clock",
                             fn, ps->rank, ps->roles.nservers);
    }
    return gs__ps_sticky(ps);
}

/* The key, checked against the caller's count and dtype. */
static gs_status_t lookup_key(const char *fn, gs_ps_t ps, uint64_t key, const void *buf,
                              size_t count, gs_dtype_t dtype, gs__ps_key_t **k_out)
{
    gs__ps_key_t *k = gs__ps_key_find(ps, key);

    if (k == NULL) {
        return gs__error_set(GS_ERR_INVALID_ARG,
                             "%s: key %llu is not registered (gs_ps_register() it on every rank "
                             "first)",
                             fn, (unsigned long long)key);
    }
    if ((count != k->count) || (dtype != k->dtype)) {
        return gs__error_set(GS_ERR_INVALID_ARG,
                             "%s: key %llu holds %zu elements of %s but the call passes %zu "
                             "elements of %s; nothing was sent",
                             fn, (unsigned long long)key, k->count, gs__dtype_name(k->dtype), count,
                             ((unsigned)dtype < GS_DTYPE_COUNT) ? gs__dtype_name(dtype) : "?");
    }
    if (buf == NULL) {
        return gs__error_set(GS_ERR_INVALID_ARG, "%s: the buffer of key %llu is NULL", fn,
                             (unsigned long long)key);
    }
    *k_out = k;
    return GS_OK;
}

static struct gs_ps_request *req_alloc(gs_ps_t ps, gs__ps_key_t *k, int is_pull)
{
    struct gs_ps_request *req = calloc(1, sizeof(*req));

    if (req == NULL) {
        return NULL;
    }
    req->subs = calloc(k->nshards, sizeof(*req->subs));
    if (req->subs == NULL) {
        free(req);
        return NULL;
    }
    req->ps = ps;
    req->key = k;
    req->is_pull = is_pull;
    return req;
}

static void req_link(gs_ps_t ps, struct gs_ps_request *req)
{
    pthread_mutex_lock(&ps->cl.mu);
    req->next = ps->cl.reqs;
    req->prev = NULL;
    if (ps->cl.reqs != NULL) {
        ps->cl.reqs->prev = req;
    }
    ps->cl.reqs = req;
    pthread_mutex_unlock(&ps->cl.mu);
}

void gs__ps_req_unlink(struct gs_ps_request *req)
{
    gs_ps_t ps = req->ps;

    if (ps == NULL) {
        return;
    }
    pthread_mutex_lock(&ps->cl.mu);
    if (req->prev != NULL) {
        req->prev->next = req->next;
    } else if (ps->cl.reqs == req) {
        ps->cl.reqs = req->next;
    }
    if (req->next != NULL) {
        req->next->prev = req->prev;
    }
    req->next = NULL;
    req->prev = NULL;
    pthread_mutex_unlock(&ps->cl.mu);
}

static uint32_t next_seq(gs_ps_t ps)
{
    return atomic_fetch_add(&ps->cl.seq, 1u) & GS_PS_SEQ_MASK;
}

/* Record the first failure of a sub-request. */
void gs__ps_sub_error(gs__ps_sub_t *sub, gs_status_t status, const char *msg)
{
    if (sub->status == GS_OK) {
        sub->status = status;
        snprintf(sub->errmsg, sizeof(sub->errmsg), "%s", msg);
    }
}

/* Fire-and-forget control messages (clock): reap the finished ones. */
static void reap_client_sends(gs_ps_t ps)
{
    gs__ps_send_t **pp = &ps->cl.sends;

    while (*pp != NULL) {
        gs__ps_send_t *s = *pp;
        const gs_status_t status = gs_test(&s->req);

        if (status == GS_INPROGRESS) {
            pp = &s->next;
            continue;
        }
        *pp = s->next;
        free(s);
    }
}

static void reap_sends(gs_ps_t ps)
{
    pthread_mutex_lock(&ps->cl.mu);
    reap_client_sends(ps);
    pthread_mutex_unlock(&ps->cl.mu);
}

/* ====================================================================== */
/* Posting                                                                */
/* ====================================================================== */

static void fill_msg(gs_ps_t ps, const gs__ps_key_t *k, uint32_t shard, gs__ps_msg_t *m)
{
    memset(m, 0, sizeof(*m));
    m->src = ps->rank;
    m->dtype = (uint8_t)k->dtype;
    m->key = k->key;
    m->shard = shard;
    m->offset = k->ranges[shard].offset;
    m->count = k->ranges[shard].count;
}

/* Encode one shard of a push (codec, error feedback); *enc_out is malloc'd. */
static gs_status_t encode_shard(gs_ps_t ps, gs__ps_key_t *k, uint32_t i, const void *src,
                                void **enc_out, size_t *len_out)
{
    const size_t n = k->ranges[i].count;
    size_t cap = 0;
    size_t ssz = 0;
    void *enc;
    void *scratch = NULL;
    gs_status_t status;

    status = gs_codec_encoded_size(&ps->cfg.codec, n, k->dtype, &cap);
    if (status == GS_OK) {
        status = gs_codec_scratch_size(&ps->cfg.codec, n, k->dtype, &ssz);
    }
    if (status != GS_OK) {
        return status;
    }
    enc = malloc(cap);
    if (ssz > 0) {
        scratch = malloc(ssz);
    }
    if ((enc == NULL) || ((ssz > 0) && (scratch == NULL))) {
        free(enc);
        free(scratch);
        return gs__error_set(GS_ERR_NO_MEMORY, "gs_ps_push: out of memory encoding key %llu",
                             (unsigned long long)k->key);
    }
    pthread_mutex_lock(&k->mu); /* the residual is shared by the key's pushes */
    status = gs_codec_encode(&ps->cfg.codec, src, n, k->dtype, k->ef[i], scratch, ssz, enc, cap,
                             len_out);
    pthread_mutex_unlock(&k->mu);
    free(scratch);
    if (status != GS_OK) {
        free(enc);
        return status;
    }
    *enc_out = enc;
    return GS_OK;
}

static gs_status_t post_local(gs_ps_t ps, gs__ps_key_t *k, gs__ps_sub_t *sub, int is_pull,
                              const void *data, size_t nbytes, int compressed, void *out,
                              int64_t clock, int pushed)
{
    gs__ps_op_t *op = calloc(1, sizeof(*op));

    if (op == NULL) {
        return gs__error_set(GS_ERR_NO_MEMORY, "out of memory");
    }
    op->type = is_pull ? GS_PS_OP_PULL : GS_PS_OP_PUSH;
    op->src = ps->rank;
    op->worker = ps->worker;
    op->shard = k->served[sub->shard];
    op->clock = clock;
    op->pushed = pushed;
    op->compressed = compressed;
    op->data = data;
    op->nbytes = nbytes;
    op->out = out;
    op->local = &sub->lc;
    gs__ps_enqueue(ps, op);
    return GS_OK;
}

void gs__ps_rndv_unlink_locked(gs_ps_t ps, gs__ps_sub_t *sub)
{
    for (gs__ps_sub_t **pp = &ps->cl.rndv; *pp != NULL; pp = &(*pp)->rnext) {
        if (*pp == sub) {
            *pp = sub->rnext;
            sub->rnext = NULL;
            return;
        }
    }
}

/* The table of answers due (pend_mu). */
static gs__ps_sub_t **pend_bucket(gs_ps_t ps, uint32_t seq)
{
    return &ps->cl.pend[seq & (GS_PS_PEND_BUCKETS - 1)];
}

static void pend_add(gs_ps_t ps, gs__ps_sub_t *sub)
{
    gs__ps_sub_t **b;

    pthread_mutex_lock(&ps->cl.pend_mu);
    b = pend_bucket(ps, sub->seq);
    sub->pnext = *b;
    *b = sub;
    pthread_mutex_unlock(&ps->cl.pend_mu);
}

void gs__ps_slot_release(gs_ps_t ps, gs__ps_sub_t *sub)
{
    if (sub->counted) {
        sub->counted = 0;
        (void)atomic_fetch_sub(&ps->cl.inflight[sub->server_rank], 1u);
    }
}

/* Remove @p sub when its answer has not come (pend_mu held); 1 when removed. */
int gs__ps_pend_unlink_locked(gs_ps_t ps, gs__ps_sub_t *sub)
{
    for (gs__ps_sub_t **pp = pend_bucket(ps, sub->seq); *pp != NULL; pp = &(*pp)->pnext) {
        if (*pp == sub) {
            *pp = sub->pnext;
            sub->pnext = NULL;
            gs__ps_slot_release(ps, sub);
            return 1;
        }
    }
    return 0;
}

gs_status_t gs__ps_client_answer(gs_ps_t ps, const uint8_t *raw, const gs__ps_msg_t *m, char *why,
                                 size_t whylen)
{
    gs__ps_sub_t **pp;
    gs__ps_sub_t *sub = NULL;

    pthread_mutex_lock(&ps->cl.pend_mu);
    for (pp = pend_bucket(ps, m->seq); *pp != NULL; pp = &(*pp)->pnext) {
        if (((*pp)->seq == m->seq) && ((*pp)->server_rank == m->src)) {
            sub = *pp;
            *pp = sub->pnext;
            sub->pnext = NULL;
            break;
        }
    }
    if (sub == NULL) {
        pthread_mutex_unlock(&ps->cl.pend_mu);
        return gs__error_explain(GS_ERR_PROTOCOL, why, whylen,
                                 "rank %d sent a %s for request %u, which no request of this rank "
                                 "waits for",
                                 (int)m->src, gs__ps_msg_type_name(m->type), (unsigned)m->seq);
    }
    memcpy(sub->rep, raw, GS_PS_MSG_BYTES); /* checked by the waiting thread */
    gs__ps_slot_release(ps, sub);
    pthread_mutex_unlock(&ps->cl.pend_mu);
    pthread_mutex_lock(&ps->done_mu);
    sub->lc.done = 1;
    pthread_cond_broadcast(&ps->done_cv);
    pthread_mutex_unlock(&ps->done_mu);
    return GS_OK;
}

static gs_status_t post_push_remote(gs_ps_t ps, gs__ps_key_t *k, gs__ps_sub_t *sub,
                                    const void *data, size_t nbytes, int compressed, int64_t clock)
{
    gs__ps_msg_t m;
    gs_status_t status;

    sub->payload = data;
    sub->payload_len = nbytes;
    sub->rndv = nbytes > GS_PS_EAGER_BYTES;
    pend_add(ps, sub);
    fill_msg(ps, k, sub->shard, &m);
    m.type = GS_PS_MSG_PUSH;
    m.seq = sub->seq;
    m.flags =
        (uint8_t)((compressed ? GS_PS_MSGF_COMPRESSED : 0) | (sub->rndv ? GS_PS_MSGF_RNDV : 0));
    m.nbytes = nbytes;
    m.clock = clock;
    gs__ps_msg_encode(&m, sub->hdr);
    if (sub->rndv) {
        /* Before the header leaves: the CTS may come back at once. */
        pthread_mutex_lock(&ps->cl.rndv_mu);
        sub->rnext = ps->cl.rndv;
        ps->cl.rndv = sub;
        pthread_mutex_unlock(&ps->cl.rndv_mu);
    }
    status = gs_isend(ps->comm, sub->hdr, GS_PS_MSG_BYTES, GS_DTYPE_U8, sub->server_rank,
                      gs__ps_tag(GS_PS_TAG_KIND_CTRL, 0), &sub->hdr_req);
    if ((status == GS_OK) && !sub->rndv) {
        status = gs_isend(ps->comm, data, nbytes, GS_DTYPE_U8, sub->server_rank,
                          gs__ps_tag(GS_PS_TAG_KIND_PUSH_DATA, sub->seq), &sub->data_send);
    }
    return status;
}

gs_status_t gs__ps_client_cts(gs_ps_t ps, const gs__ps_msg_t *m, char *why, size_t whylen)
{
    gs__ps_sub_t *sub;
    gs_status_t status = GS_OK;

    pthread_mutex_lock(&ps->cl.rndv_mu);
    for (sub = ps->cl.rndv; sub != NULL; sub = sub->rnext) {
        if ((sub->seq == m->seq) && (sub->server_rank == m->src)) {
            break;
        }
    }
    if ((sub == NULL) || (sub->shard != m->shard) || (m->nbytes != sub->payload_len)) {
        pthread_mutex_unlock(&ps->cl.rndv_mu);
        return gs__error_explain(GS_ERR_PROTOCOL, why, whylen,
                                 "rank %d sent a clear-to-send (request %u, key %llu, %llu bytes) "
                                 "that no push of this rank waits for",
                                 (int)m->src, (unsigned)m->seq, (unsigned long long)m->key,
                                 (unsigned long long)m->nbytes);
    }
    gs__ps_rndv_unlink_locked(ps, sub);
    status = gs_isend(ps->comm, sub->payload, sub->payload_len, GS_DTYPE_U8, sub->server_rank,
                      gs__ps_tag(GS_PS_TAG_KIND_PUSH_DATA, sub->seq), &sub->data_send);
    pthread_mutex_unlock(&ps->cl.rndv_mu);
    if (status != GS_OK) {
        return gs__error_explain(status, why, whylen, "sending a push's payload to rank %d: %s",
                                 (int)m->src, gs__error_get());
    }
    return GS_OK;
}

static gs_status_t post_pull_remote(gs_ps_t ps, gs__ps_key_t *k, gs__ps_sub_t *sub, void *out,
                                    int64_t clock, int pushed)
{
    const size_t bytes = k->ranges[sub->shard].count * k->esize;
    gs__ps_msg_t m;
    gs_status_t status;

    status = gs_irecv(ps->comm, out, bytes, GS_DTYPE_U8, sub->server_rank,
                      gs__ps_tag(GS_PS_TAG_KIND_PULL_DATA, sub->seq), &sub->data_req);
    if (status != GS_OK) {
        return status;
    }
    pend_add(ps, sub);
    fill_msg(ps, k, sub->shard, &m);
    m.type = GS_PS_MSG_PULL;
    m.seq = sub->seq;
    m.flags = pushed ? GS_PS_MSGF_PUSHED : 0;
    m.nbytes = bytes;
    m.clock = clock;
    gs__ps_msg_encode(&m, sub->hdr);
    return gs_isend(ps->comm, sub->hdr, GS_PS_MSG_BYTES, GS_DTYPE_U8, sub->server_rank,
                    gs__ps_tag(GS_PS_TAG_KIND_CTRL, 0), &sub->hdr_req);
}

/* Give back the slots taken for every sub of @p req that holds one. */
static void slots_release_all(gs_ps_t ps, struct gs_ps_request *req)
{
    for (uint32_t i = 0; i < req->key->nshards; i++) {
        gs__ps_slot_release(ps, &req->subs[i]);
    }
}

/*
 * Take an in-flight slot of its server for every remote shard of @p req,
 * before anything is sent. GS_ERR_NO_RESOURCE, with every slot given back,
 * when a server has GS_PS_MAX_INFLIGHT of this worker's requests already.
 */
static gs_status_t slots_take(const char *fn, gs_ps_t ps, struct gs_ps_request *req)
{
    const gs__ps_key_t *k = req->key;

    for (uint32_t i = 0; i < k->nshards; i++) {
        gs__ps_sub_t *sub = &req->subs[i];
        unsigned had;

        if (k->served[i] != NULL) {
            continue; /* local: nothing is sent */
        }
        sub->server_rank = k->server_rank[i];
        had = atomic_fetch_add(&ps->cl.inflight[sub->server_rank], 1u);
        sub->counted = 1;
        if (had >= GS_PS_MAX_INFLIGHT) {
            slots_release_all(ps, req);
            return gs__error_set(GS_ERR_NO_RESOURCE,
                                 "%s: key %llu: this worker has %u requests waiting for the answer "
                                 "of server rank %d (limit %u); wait for some (gs_ps_wait) and try "
                                 "again; nothing was sent",
                                 fn, (unsigned long long)k->key, had, sub->server_rank,
                                 GS_PS_MAX_INFLIGHT);
        }
    }
    return GS_OK;
}

/* Post every shard of a push or pull (@p prev_push: the key's last_push
 * before a push). On failure the shards already posted are driven to
 * completion and the request freed. */
static gs_status_t req_post(const char *fn, gs_ps_t ps, gs__ps_key_t *k, int is_pull,
                            const void *buf, int64_t clock, int pushed, int64_t prev_push,
                            gs_ps_request_t *req_out)
{
    struct gs_ps_request *req = req_alloc(ps, k, is_pull);
    gs_status_t status = GS_OK;
    char msg[GS_ERROR_MSG_MAX];

    if (req == NULL) {
        return gs__error_set(GS_ERR_NO_MEMORY, "%s: out of memory", fn);
    }
    req->clock = clock;
    req->prev_push = prev_push;
    status = slots_take(fn, ps, req);
    if (status != GS_OK) {
        free(req->subs);
        free(req);
        return status;
    }
    for (uint32_t i = 0; i < k->nshards; i++) {
        gs__ps_sub_t *sub = &req->subs[i];
        const size_t off = k->ranges[i].offset * k->esize;
        const size_t bytes = k->ranges[i].count * k->esize;
        const void *data = (const char *)buf + off;
        size_t nbytes = bytes;
        int compressed = 0;

        sub->shard = i;
        sub->server_rank = k->server_rank[i];
        sub->local = (k->served[i] != NULL);
        req->nsubs = i + 1;
        if (!is_pull && ps->cfg.has_codec) {
            status = encode_shard(ps, k, i, data, &sub->enc, &nbytes);
            if (status != GS_OK) {
                break;
            }
            data = sub->enc;
            compressed = 1;
        }
        if (sub->local) {
            status = post_local(ps, k, sub, is_pull, data, nbytes, compressed,
                                is_pull ? (char *)(uintptr_t)buf + off : NULL, clock, pushed);
        } else {
            sub->seq = next_seq(ps);
            status = is_pull
                         ? post_pull_remote(ps, k, sub, (char *)(uintptr_t)buf + off, clock, pushed)
                         : post_push_remote(ps, k, sub, data, nbytes, compressed, clock);
        }
        if (status != GS_OK) {
            if (sub->local) {
                sub->local = 0; /* nothing was queued: finished below, as remote */
            }
            break;
        }
    }
    if (status != GS_OK) {
        snprintf(msg, sizeof(msg), "%s: key %llu: %s", fn, (unsigned long long)k->key,
                 gs__error_get());
        /* Something may be posted or queued for a half-sent request: the
         * handle cannot go on; failing it ends every wait at once. */
        gs__ps_fail(ps, status, msg, 1);
        pthread_mutex_lock(&ps->cl.pend_mu);
        for (uint32_t i = 0; i < req->nsubs; i++) {
            gs__ps_sub_t *sub = &req->subs[i];

            if (!sub->local && (sub->hdr_req == GS_REQUEST_NULL)) {
                (void)gs__ps_pend_unlink_locked(ps, sub); /* its header never left */
                gs__ps_slot_release(ps, sub);             /* also when it never was in pend */
                sub->lc.done = 1;
                sub->lc.status = status;
                snprintf(sub->lc.errmsg, sizeof(sub->lc.errmsg), "%s", msg);
            }
        }
        for (uint32_t i = req->nsubs; i < k->nshards; i++) {
            gs__ps_slot_release(ps, &req->subs[i]); /* never posted */
        }
        pthread_mutex_unlock(&ps->cl.pend_mu);
        gs__ps_request_finish(req);
        free(req->subs);
        free(req);
        gs__error_copy_in(msg);
        return status;
    }
    req_link(ps, req);
    *req_out = req;
    return GS_OK;
}

/* ====================================================================== */
/* Public: push, pull, clock                                              */
/* ====================================================================== */

gs_status_t gs_ps_push(gs_ps_t ps, uint64_t key, const void *grad, size_t count, gs_dtype_t dtype,
                       gs_ps_request_t *req_out)
{
    static const char fn[] = "gs_ps_push";
    gs__ps_key_t *k = NULL;
    int64_t clock;
    int64_t prev;
    gs_status_t status;

    status = check_common(fn, ps, req_out);
    if (status == GS_OK) {
        status = check_worker(fn, ps);
    }
    if (status == GS_OK) {
        status = lookup_key(fn, ps, key, grad, count, dtype, &k);
    }
    if (status != GS_OK) {
        return status;
    }
    clock = (int64_t)atomic_load(&ps->cl.clock);
    pthread_mutex_lock(&k->mu);
    prev = k->last_push;
    if ((ps->cfg.consistency != GS_PS_ASP) && (prev == clock)) {
        pthread_mutex_unlock(&k->mu);
        return gs__error_set(GS_ERR_INVALID_USAGE,
                             "%s: key %llu was already pushed in clock %lld; under %s a worker "
                             "pushes a key once per clock (call gs_ps_clock() first)",
                             fn, (unsigned long long)key, (long long)clock,
                             (ps->cfg.consistency == GS_PS_BSP) ? "BSP" : "SSP");
    }
    k->last_push = clock;
    pthread_mutex_unlock(&k->mu);
    reap_sends(ps);
    status = req_post(fn, ps, k, 0, grad, clock, 0, prev, req_out);
    if (status != GS_OK) {
        pthread_mutex_lock(&k->mu);
        if (k->last_push == clock) {
            k->last_push = prev;
        }
        pthread_mutex_unlock(&k->mu);
    }
    return status;
}

gs_status_t gs_ps_pull(gs_ps_t ps, uint64_t key, void *out, size_t count, gs_dtype_t dtype,
                       gs_ps_request_t *req_out)
{
    static const char fn[] = "gs_ps_pull";
    gs__ps_key_t *k = NULL;
    int64_t clock;
    int pushed;
    gs_status_t status;

    status = check_common(fn, ps, req_out);
    if (status == GS_OK) {
        status = check_worker(fn, ps);
    }
    if (status == GS_OK) {
        status = lookup_key(fn, ps, key, out, count, dtype, &k);
    }
    if (status != GS_OK) {
        return status;
    }
    clock = (int64_t)atomic_load(&ps->cl.clock);
    pthread_mutex_lock(&k->mu);
    pushed = (k->last_push == clock);
    pthread_mutex_unlock(&k->mu);
    reap_sends(ps);
    return req_post(fn, ps, k, 1, out, clock, pushed, -1, req_out);
}

gs_status_t gs_ps_clock(gs_ps_t ps)
{
    gs_status_t status;
    int64_t next;

    if (ps == GS_PS_NULL) {
        return gs__error_set(GS_ERR_INVALID_ARG, "gs_ps_clock: ps is NULL");
    }
    status = check_worker("gs_ps_clock", ps);
    if (status != GS_OK) {
        return status;
    }
    next = (int64_t)atomic_fetch_add(&ps->cl.clock, 1) + 1;
    if (ps->server >= 0) {
        gs__ps_op_t *op = calloc(1, sizeof(*op));

        if (op == NULL) {
            status = gs__error_set(GS_ERR_NO_MEMORY, "gs_ps_clock: out of memory");
            gs__ps_fail(ps, status, gs__error_get(), 1);
            return status;
        }
        op->type = GS_PS_OP_CLOCK;
        op->src = ps->rank;
        op->worker = ps->worker;
        op->clock = next;
        gs__ps_enqueue(ps, op);
    }
    pthread_mutex_lock(&ps->cl.mu);
    reap_client_sends(ps);
    for (int s = 0; (s < ps->roles.nservers) && (status == GS_OK); s++) {
        const int rank = gs__ps_server_rank(&ps->roles, s);
        gs__ps_send_t *snd;
        gs__ps_msg_t m;

        if (rank == ps->rank) {
            continue;
        }
        snd = calloc(1, sizeof(*snd));
        if (snd == NULL) {
            status = gs__error_set(GS_ERR_NO_MEMORY, "gs_ps_clock: out of memory");
            break;
        }
        memset(&m, 0, sizeof(m));
        m.type = GS_PS_MSG_CLOCK;
        m.src = ps->rank;
        m.clock = next;
        gs__ps_msg_encode(&m, snd->msg);
        status = gs_isend(ps->comm, snd->msg, GS_PS_MSG_BYTES, GS_DTYPE_U8, rank,
                          gs__ps_tag(GS_PS_TAG_KIND_CTRL, 0), &snd->req);
        if (status != GS_OK) {
            free(snd);
            break;
        }
        snd->next = ps->cl.sends;
        ps->cl.sends = snd;
    }
    pthread_mutex_unlock(&ps->cl.mu);
    if (status != GS_OK) {
        /* A server that misses a clock would hold BSP and SSP pulls forever. */
        gs__ps_fail(ps, status, gs__error_get(), 1);
    }
    return status;
}
