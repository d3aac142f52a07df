/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Private types and calls of the TCP transport, shared by its files:
 * tcp_transport.c (the ops table and request calls), tcp_conn.c (request
 * completion, the posted, unexpected and started-message tables, a socket's
 * close and epoll interest), tcp_tx.c (per-socket send queues), tcp_rx.c
 * (matching and the receive state machine), tcp_fail.c (peer failure, DOWN
 * frames, going down, heartbeats), tcp_handshake.c (connection setup), and the
 * byte pipes under the connections (tcp_pipe.h: tcp_pipe_plain.c, tcp_pipe_tls.c,
 * and tcp_pipe_shm.c, shared-memory links to peers on the same host). Nothing outside
 * src/transport/tcp/ (and its tests) includes this header.
 *
 * Ordering: every message to a peer gets the next per-peer sequence number.
 * A large message is cut into chunks that travel on different sockets; the
 * receiver starts messages strictly in sequence order (a socket whose next
 * header belongs to a later message "parks" until the earlier one has
 * started), so matching sees messages in the order they were sent no matter
 * which socket carried them, and a chunk finds its message by (peer, seq).
 *
 * Failure propagation: a peer that fails for a remote cause (close without
 * BYE, reset, I/O error, protocol error) is reported to every other healthy
 * peer with one DOWN frame, and the instance goes "down": every posted and
 * later receive, from any peer, fails with GS_ERR_PEER_FAILED naming the
 * failed rank (a message still arriving from a live peer is drained). A
 * DOWN frame received does the same; it is passed on only without a full
 * mesh (GS_CONNECT=lazy), once, to the other links that are up. Sends to live
 * peers are left alone; one released mid-wire while down finishes from a
 * private copy, so the stream (and the DOWN frames behind it) stays intact.
 */
#ifndef GS_TRANSPORT_TCP_TCP_CONN_H
#define GS_TRANSPORT_TCP_TCP_CONN_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "core/auth.h"
#include "core/socket.h"
#include "transport/tcp/tcp_shm_seg.h"
#include "transport/tcp/tcp_pipe.h"
#include "transport/tcp/tcp_pipe_tls.h"
#include "transport/tcp/tcp_rail.h"
#include "core/htab.h"
#include "transport/match.h"
#include "transport/tcp/tcp_wire.h"
#include "transport/transport.h"

/* Per-socket receive staging buffer; payload left >= half of it is read in place. */
#define GS_TCP_RBUF_LEN (64u * 1024u)
/* Drain target for payloads nobody wants (mismatch, truncation, cancel). */
#define GS_TCP_SCRATCH_LEN (256u * 1024u)
/*
 * What a peer can make this rank hold (tcp_rx.c msg_start), all peers
 * together; past either bound the peer that sent the message is failed with
 * GS_ERR_PROTOCOL. Every message held, whatever its destination (bound to a
 * receive, unexpected, or being drained), costs GS_TCP_MSG_COST bytes (its
 * gs__tcp_inmsg_t and allocator overhead, rounded up), and an unexpected
 * one its payload too, against the byte budget (gs__tp_t.held.max_bytes,
 * default GS_TCP_UNEXP_MAX; transport/match.h's gs__match_budget_t): so zero-length and never-finished messages are not
 * free. No work per frame grows with what is held: a probe and an irecv
 * find the first matching message through the match index
 * (transport/match.h), a further chunk finds its message by (peer, seq) in
 * tp->active, and a finished message leaves its peer's doubly linked list
 * of started ones in O(1). The count bound (gs__tp_t.held.max_msgs,
 * default GS_TCP_UNEXP_MAX_MSGS) is a second, simpler bound on memory
 * (2^20 x GS_TCP_MSG_COST = 512 MiB) below what the byte budget alone
 * would allow (2^24 empty messages). Collectives hold a few messages per
 * peer, so only a sender that gets 2^20 messages ahead of its receiver's
 * receives meets the bound.
 */
#define GS_TCP_UNEXP_MAX (8ull << 30)
#define GS_TCP_UNEXP_MAX_MSGS (1ull << 20)
#define GS_TCP_MSG_COST 512u
/* iovec entries per sendmsg. */
#define GS_TCP_IOV_MAX 64
/* Syscalls one socket may make per progress pass (fairness between sockets). */
#define GS_TCP_IO_BUDGET 16
/* How long finalize tries to get its goodbye frames out. */
#define GS_TCP_BYE_TIMEOUT_MS 1000
#define GS_TCP_REASON_MAX 200
/* A peer from which nothing (data or heartbeat) arrived for this many
 * heartbeat intervals is failed (docs/design.md, "Heartbeats"), provided
 * that this limit is below GS_TIMEOUT_MS: otherwise the operation's
 * deadline comes first anyway, and reports GS_ERR_TIMEOUT as before. */
#define GS_TCP_HEARTBEAT_MISSES 3

typedef enum gs__tcp_req_kind { GS_TCP_REQ_SEND = 1, GS_TCP_REQ_RECV = 2 } gs__tcp_req_kind_t;

typedef enum gs__tcp_req_state {
    GS_TCP_REQ_POSTED = 1, /* recv: in the posted list; send: frames queued */
    GS_TCP_REQ_ACTIVE = 2, /* recv: bound to an arriving message */
    GS_TCP_REQ_DONE = 3
} gs__tcp_req_state_t;

/* Where the payload of an arriving message goes. */
typedef enum gs__tcp_dest {
    GS_TCP_DEST_USER = 1,  /* straight into the matched receive's buffer */
    GS_TCP_DEST_UNEXP = 2, /* into msg->buf (no receive yet, or one attached late) */
    GS_TCP_DEST_DRAIN = 3  /* discarded */
} gs__tcp_dest_t;

typedef enum gs__tcp_rstate {
    GS_TCP_RS_HDR = 1,     /* waiting for a frame header */
    GS_TCP_RS_PAYLOAD = 2, /* reading a chunk's payload */
    GS_TCP_RS_PARKED = 3   /* header read, its message may not start yet */
} gs__tcp_rstate_t;

/* One frame on a socket's send queue. */
typedef struct gs__tcp_frame {
    struct gs__tcp_frame *next;
    struct gs__tp_req *req; /* owning send; NULL for a control frame */
    const uint8_t *payload; /* chunk bytes in the user's buffer */
    uint64_t payload_len;
    uint64_t sent;     /* bytes of header + payload already written */
    uint64_t ack_mark; /* retained (multi-rail): the socket's written-byte count at its end */
    bool owned;        /* malloc'd control frame, freed once written */
    uint8_t hdr[GS_TCP_FRAME_HDR_LEN];
} gs__tcp_frame_t;

/* A message being received, or held because no receive matched it yet. */
typedef struct gs__tcp_inmsg {
    gs__match_entry_t ue;       /* first: held unexpected (tp->unexp, transport/match.h) */
    struct gs__tcp_inmsg *next; /* the peer's list of started messages */
    struct gs__tcp_inmsg *prev;
    gs__hnode_t anode;      /* started messages by (peer, seq): tp->active */
    struct gs__tp_req *req; /* bound receive, or NULL */
    uint8_t *buf;           /* malloc'd copy for DEST_UNEXP (NULL when total is 0) */
    uint64_t seq;
    uint64_t tag;
    uint64_t total;
    uint64_t claimed; /* chunk bytes announced so far */
    uint64_t got;     /* chunk bytes fully read */
    uint64_t charged; /* bytes of tp->held it holds (released by gs__tcp_msg_free) */
    uint64_t parts;   /* bit i: granule i of its granule plan (tcp_wire.h) has started */
    int peer;
    gs__tcp_dest_t dest;
    bool in_active; /* on its peer's list of started messages and in tp->active */
    bool complete;
} gs__tcp_inmsg_t;

/*
 * The shared-memory link of a peer on the same host (tcp_pipe_shm.c): the frame
 * stream of its socket 0 goes through two rings in a shared segment instead
 * of send()/recv(); the socket stays open for the doorbell (one byte when
 * the other side sleeps) and for failure detection (EOF when the process
 * dies). Frames, matching and failure handling are the TCP ones unchanged.
 */
typedef struct gs__tcp_shm {
    gs__shm_seg_t seg;
    gs__shm_ring_t tx;
    gs__shm_ring_t rx;
    uint64_t ring_bytes;
    bool sock_closed; /* the socket said EOF or failed: fail once the ring is drained */
    int sock_err;     /* its errno, 0 for EOF */
} gs__tcp_shm_t;

/* The byte a doorbell carries (anything else on a shared-memory link's socket
 * is a protocol error). */
#define GS_TCP_SHM_DOORBELL 0x47u

/* One socket to a peer. */
typedef struct gs__tcp_conn {
    int fd; /* -1 once closed */
    int peer;
    int index;
    int rail;        /* the pair's rail it is on: index / nsocks */
    unsigned events; /* epoll interest currently registered */
    bool bye_rcvd;
    bool kicked; /* has buffered work that epoll will not report */
    bool drained;
    gs__tcp_frame_t *sq_head;
    gs__tcp_frame_t *sq_tail;
    uint64_t sq_bytes;
    gs__tcp_rstate_t rstate;
    gs__tcp_frame_hdr_t rhdr;
    gs__tcp_inmsg_t *rmsg;
    uint8_t *rdst; /* where the next payload byte goes; NULL drains */
    uint64_t rleft;
    uint8_t *rbuf;
    size_t rpos;
    size_t rlen;
    const gs__tcp_pipe_ops_t *pipe; /* where its bytes go: plain, TLS or shm (tcp_pipe.h) */
    gs__tcp_shm_t *shm;             /* socket 0 of a peer on the same host: frames go through it */
    struct ssl_st *ssl; /* GS_TLS: the session every byte goes through (tcp_pipe_tls.h) */
    /* DATA frames written and not yet acknowledged by the peer's kernel
     * (SIOCOUTQ): their sends complete when it has them, and they go
     * again on another rail when this one fails. */
    gs__tcp_frame_t *uq_head;
    gs__tcp_frame_t *uq_tail;
    uint64_t wbytes;        /* bytes written on the socket so far */
    uint64_t rx_chunk_mask; /* granules of the chunk being read (rolled back if the rail fails) */
} gs__tcp_conn_t;

/* One rail of a pair: a local interface and the peer's address on it. */
typedef struct gs__tcp_prail {
    int local; /* index in tp->rails */
    bool up;
    gs__sockaddr_t raddr; /* the peer's address on it */
    bool bind;            /* connect from the local rail's address (the subnets match) */
    uint64_t bytes;       /* written on it */
    uint64_t resent;      /* of them, frames sent again after another rail failed */
    uint32_t share_ppm;   /* its share of the last striped message */
    /* The delivery rate: over a busy period (from a DATA frame queued on
     * the idle rail until every frame of it is acknowledged), the bytes its
     * sockets' kernels saw acknowledged (TCP_INFO) over the time they
     * took; an EWMA of such samples. */
    bool busy;
    uint64_t busy_t0;
    uint64_t busy_acked0; /* its sockets' acknowledged bytes (TCP_INFO) when it began */
    uint64_t rate;        /* bytes per second, 0 until measured */
} gs__tcp_prail_t;

/*
 * Where the connection to a peer stands (tcp_handshake.c). With GS_CONNECT=lazy
 * a peer is connected when a send or receive first names it (or, at init,
 * when it is a neighbour on the bootstrap ring); with eager, every peer at
 * init. Either side may start: the one that needs the link connects its
 * nsocks sockets, and when both start at once the higher rank's sockets are
 * kept (the lower one's are refused with the CROSSED verdict). Sends posted
 * before the link is up wait on the peer (wait_head) and are cut into frames
 * when it comes up, since the chunk plan depends on whether the pair shares
 * memory.
 */
typedef enum gs__tcp_link {
    GS_TCP_LINK_NONE = 0, /* nothing yet */
    GS_TCP_LINK_OUT = 1,  /* we are connecting (or will, at the slots' retry time) */
    GS_TCP_LINK_IN = 2,   /* the peer connects to us (or we wait for it to) */
    GS_TCP_LINK_UP = 3    /* every socket handed over: frames flow */
} gs__tcp_link_t;

typedef struct gs__tcp_peer {
    gs__tcp_conn_t *conns; /* nconns of them (tp->max_conns allocated) */
    int nconns;            /* nrails x tp->nsocks: socket i is on rail i / nsocks */
    int nrails;            /* paired rails (1 unless both ranks have several) */
    int nrails_up;
    gs__tcp_prail_t rails[GS_TCP_MAX_RAILS];
    bool rail_failed;     /* a rail of the pair failed: RESEND frames are expected */
    uint64_t rails_hb_ns; /* last heartbeat on every rail (multi-rail pairs) */
    gs__tcp_link_t link;
    int nup;                      /* sockets handed over so far */
    struct gs__tp_req *wait_head; /* sends posted before the link was up, in order */
    struct gs__tp_req *wait_tail;
    gs__tcp_inmsg_t *active;
    uint64_t send_seq;
    uint64_t recv_seq;
    unsigned rot; /* first socket of the next striped message */
    int nparked;
    int nbye;
    bool reading_last;       /* reading what it sent before blaming it (tcp_fail.c) */
    uint64_t shm_ring;       /* ring bytes the budget gives this pair; 0: not local, TCP */
    bool shm_offered;        /* its handshake on socket 0 offered shared memory */
    bool rx_seen;            /* bytes arrived since the last heartbeat tick */
    bool tx_seen;            /* a frame was queued to it since the last heartbeat tick */
    uint64_t last_rx_ns;     /* heartbeat tick that last saw bytes from it */
    uint64_t last_tx_ns;     /* heartbeat tick that last saw a frame queued to it */
    gs__tcp_shm_t *shm;      /* owned shared-memory link (also conns[0].shm once set up) */
    gs_status_t fail_status; /* GS_OK while the peer is healthy */
    char reason[GS_TCP_REASON_MAX];
} gs__tcp_peer_t;

struct gs__tp_req {
    struct gs__tp_req *next; /* posted receives, in post order */
    struct gs__tp_req *prev;
    struct gs__tp_req *all_next; /* every live request of the instance */
    struct gs__tp_req *all_prev;
    gs__tcp_inmsg_t *msg; /* recv bound to an arriving message */
    void *buf;
    size_t len;
    uint64_t tag;
    uint64_t seq; /* send: the message's sequence number */
    int peer;
    gs__tcp_req_kind_t kind;
    gs__tcp_req_state_t state;
    bool on_wire; /* send: at least one byte written */
    bool waiting; /* send: on its peer's wait list, not cut into frames yet (link not up) */
    int nframes;
    int frames_left;
    gs__tp_completion_t comp;
    const char *reason; /* failure sentence (points at reason_buf or a peer's reason) */
    char *reason_buf;
    gs__tcp_frame_t frames[]; /* sends only */
};

struct gs__tp {
    int rank;
    int size;
    int nsocks;                             /* GS_TCP_NSOCKS: sockets per rail of a pair */
    int max_conns;                          /* nsocks x nrails: the most sockets a pair may have */
    gs__tcp_rail_t rails[GS_TCP_MAX_RAILS]; /* the local rails (GS_SOCKET_IFNAME) */
    int nrails;
    bool balance_equal;       /* GS_TCP_RAIL_BALANCE=equal: rails get equal shares */
    uint64_t rail_timeout_ms; /* TCP_USER_TIMEOUT of a multi-rail pair's sockets */
    int nretained;            /* sockets with DATA frames waiting for their ack */
    bool rails_warned;        /* said once what a rail pairing left out */
    bool rails_published;     /* the links made before the statistics existed were published */
    uint64_t job_id;
    uint64_t comm_id;
    gs__counters_t *counters;
    int listen_fd;
    gs__sockaddr_t listen_addr;
    int epfd;
    int evfd;
    atomic_int aborted;
    atomic_int revoke_asked; /* gs_comm_revoke on this rank (any thread): progress acts on it */
    int revoked_by;          /* -1, or the rank that revoked the communicator */
    bool abort_done;
    bool connected;
    gs__tcp_peer_t *peers;
    struct gs__tp_req *posted_head;
    struct gs__tp_req *posted_tail;
    struct gs__tp_req *all;
    gs__match_index_t unexp; /* held unexpected messages, by arrival and by match key */
    gs__htab_t active;       /* every peer's started messages, by (peer, seq) */
    /* What peers make this rank hold (tcp_rx.c msg_start): held.bytes
     * charged (GS_TCP_MSG_COST per message plus the payload of unexpected
     * ones) and held.msgs, counting every message started and not yet
     * freed, whatever its destination; and their bounds held.max_bytes
     * (GS_TCP_UNEXP_MAX) and held.max_msgs (GS_TCP_UNEXP_MAX_MSGS), which
     * tests lower. */
    gs__match_budget_t held;
    uint64_t max_msg; /* GS_MAX_MESSAGE_BYTES: a peer announcing more is failed */
    uint64_t nevents; /* completions and peer failures so far */
    int spin_us;      /* GS_TCP_SPIN_US as given: -1 auto, 0 off, > 0 microseconds */
    uint64_t spin_ns; /* progress polls this long before sleeping (set at connect) */
    bool spin_rings;  /* every peer is local: spin passes read the rings, not epoll */
    int nkicked;
    int nfailed;
    bool leaving;             /* finalize queued BYE: nothing may follow it */
    bool lazy;                /* GS_CONNECT=lazy: peers connect on first use */
    int nup;                  /* peers whose link is up */
    struct gs__tcp_setup *hs; /* connection setup (tcp_handshake.c): listening, slots */
    uint64_t *hosts;          /* every rank's host id (0: unknown), from connect */
    uint64_t link_timeout_ns; /* how long a lazy connection may take (GS_TIMEOUT_MS) */
    gs_status_t down_status;  /* GS_OK until a peer failure makes every receive fail */
    int down_rank;            /* the failed rank named in down_reason */
    char down_reason[GS_TCP_REASON_MAX];
    uint8_t *scratch;
    bool shm_offer; /* we offer shared memory to peers (GS_SHM and a host id) */
    uint64_t host_id;
    uint64_t shm_bytes;         /* ring bytes per direction we ask for */
    int shm_test_free;          /* GS_SHM_TEST_FREE_BYTES, -1 when unset */
    int shm_max_auto;           /* GS_SHM_MAX_BYTES is auto */
    uint64_t shm_max;           /* else its value (core/shm_budget.h) */
    uint64_t shm_reserve;       /* per local rank, the host segment's 2 slots */
    gs__tcp_conn_t **shm_conns; /* the conns with a shared-memory link */
    int nshm;
    gs__auth_t auth;            /* the job token: every connection authenticates when on */
    uint64_t hb_ns;             /* heartbeat interval (GS_HEARTBEAT_MS); 0: off */
    bool hb_judge;              /* fail silent peers (the limit is below GS_TIMEOUT_MS) */
    uint64_t hb_next_ns;        /* next heartbeat tick */
    uint64_t hb_tick_ns;        /* last heartbeat tick (0: none since connect) */
    struct ssl_ctx_st *tls_ctx; /* GS_TLS: certificate, key and CA; NULL: plain TCP */
    unsigned char *tls_stage;   /* GS_TCP_TLS_STAGE_LEN bytes: small frames gathered per record */
};

/* The sentence a request involving failed peer p fails with: once the
 * instance is down, the failure that took it down (later peer failures are
 * most likely its echoes), else the peer's own reason. */
static inline const char *gs__tcp_peer_why(const gs__tp_t *tp, const gs__tcp_peer_t *p)
{
    return ((tp->down_status != GS_OK) && (p->fail_status != GS_ERR_ABORTED)) ? tp->down_reason
                                                                              : p->reason;
}

/* --- tcp_conn.c ------------------------------------------------------- */

/* Close one socket and take it out of the poller. */
void gs__tcp_conn_close(gs__tp_t *tp, gs__tcp_conn_t *c);
/* Register the socket's interest (EPOLLIN unless parked, EPOLLOUT while queued). */
void gs__tcp_conn_update_events(gs__tp_t *tp, gs__tcp_conn_t *c);
/* Unlink a request from a doubly linked list of requests (next/prev) with
 * the given head and tail: the posted receives, a peer's waiting sends. */
void gs__tcp_req_unlink(struct gs__tp_req **head, struct gs__tp_req **tail, struct gs__tp_req *r);
/* Unlink a receive from the posted list. */
void gs__tcp_posted_unlink(gs__tp_t *tp, struct gs__tp_req *r);
/* Unlink a message from the unexpected index (no-op when not in it). */
void gs__tcp_unexp_unlink(gs__tp_t *tp, gs__tcp_inmsg_t *m);
/* Put a started message on its peer's list of started messages and in
 * tp->active. @return GS_OK; GS_ERR_NO_MEMORY (nothing changed). */
gs_status_t gs__tcp_active_add(gs__tp_t *tp, gs__tcp_inmsg_t *m);
/* Take a message off them (no-op when it is not on them), in O(1). */
void gs__tcp_active_unlink(gs__tp_t *tp, gs__tcp_inmsg_t *m);
/* The started message @p seq of @p peer, or NULL. */
gs__tcp_inmsg_t *gs__tcp_active_find(gs__tp_t *tp, int peer, uint64_t seq);
/* Free a held message's payload copy and release its charge (the message
 * itself stays, charged GS_TCP_MSG_COST; no-op without a copy). */
void gs__tcp_msg_free_buf(gs__tp_t *tp, gs__tcp_inmsg_t *m);
/* Unlink a message from everything it is on and free it and its held bytes,
 * releasing all it was charged. */
void gs__tcp_msg_free(gs__tp_t *tp, gs__tcp_inmsg_t *m);
/* Finish a request with a status; reason (copied) may be NULL for GS_OK. */
void gs__tcp_req_complete(gs__tp_t *tp, struct gs__tp_req *req, gs_status_t status,
                          const char *reason);
/* Like gs__tcp_req_complete, pointing at a reason that outlives the request. */
void gs__tcp_req_fail_ref(gs__tp_t *tp, struct gs__tp_req *req, gs_status_t status,
                          const char *reason);

/* --- tcp_tx.c --------------------------------------------------------- */

/* Append a frame to a socket's queue and write at once if it was empty. */
void gs__tcp_conn_queue(gs__tp_t *tp, gs__tcp_conn_t *c, gs__tcp_frame_t *f);
/* Write queued frames until EAGAIN or the budget; fails the peer on error. */
void gs__tcp_conn_flush(gs__tp_t *tp, gs__tcp_conn_t *c);
/* Take an unfinished send's frames off the queues (cancel). */
void gs__tcp_send_cancel(gs__tp_t *tp, struct gs__tp_req *req);
/* Queue an owned control frame (BYE, SKIP with @p seq, DOWN or RAIL_DOWN
 * with @p tag, HEARTBEAT) on c. Returns false when out of memory. */
bool gs__tcp_queue_control(gs__tp_t *tp, gs__tcp_conn_t *c, uint32_t type, uint64_t seq,
                           uint64_t tag);
/* An owned copy of frame f and its payload (no request), or NULL when out
 * of memory. */
gs__tcp_frame_t *gs__tcp_frame_copy(const gs__tcp_frame_t *f);

/* --- tcp_fail.c ------------------------------------------------------- */

/* Mark a peer failed with a reason, close its sockets and fail every request
 * involving it (and every GS_ANY_SOURCE receive). Idempotent. For a remote
 * cause (status GS_ERR_PEER_FAILED or GS_ERR_PROTOCOL, once connected and
 * before finalize) also report the peer to every other healthy peer with a
 * DOWN frame and take the instance down (gs__tcp_go_down). */
void gs__tcp_peer_fail(gs__tp_t *tp, int peer, gs_status_t status, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Like gs__tcp_peer_fail for a local cause (a cancelled send cut a stream,
 * epoll_ctl failed, or a DOWN frame reported the peer): never reports the
 * peer and never takes the instance down. Idempotent. */
void gs__tcp_peer_drop(gs__tp_t *tp, int peer, gs_status_t status, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Take the instance down: rank @p failed has failed, for @p reason
 * (copied; the first call wins): every posted, bound and later receive
 * fails with GS_ERR_PEER_FAILED, held unexpected messages are freed, and
 * messages still arriving are drained. Sends are not touched. */
void gs__tcp_go_down(gs__tp_t *tp, int failed, const char *reason);
/* Tell every healthy peer whose link is up, but @p skip (-1: none), that
 * rank @p x failed: a DOWN frame on each of its sockets. */
void gs__tcp_report_down(gs__tp_t *tp, int x, int skip);
/* Peer @p from reported that rank @p x failed (a DOWN frame): fail x here
 * too without reporting it back, go down, and (GS_CONNECT=lazy, where the
 * reporter reaches only its own links) pass the report on to every other
 * link that is up, the first time only. */
void gs__tcp_down_heard(gs__tp_t *tp, int x, int from);
/* The communicator was revoked by rank @p by (gs_comm_revoke), asked here
 * (@p from -1) or told by peer @p from (a REVOKE frame): the first time,
 * take the instance down with GS_ERR_REVOKED (as gs__tcp_go_down, the
 * first reason wins; recovery tags still work), make progress return
 * GS_ERR_REVOKED from now on, and pass REVOKE(by) to every other peer whose
 * link is up, so that it floods the graph of links. Idempotent. */
void gs__tcp_revoke(gs__tp_t *tp, int by, int from);
/* REVOKE(revoked_by) on every socket of peer @p q whose rail is up, when its link is up. */
void gs__tcp_queue_revoke(gs__tp_t *tp, int q);
/* GS_OK, or GS_ERR_REVOKED with its reason as this thread's error once revoked. */
gs_status_t gs__tcp_revoked_status(const gs__tp_t *tp);
/* The receive half of gs__tcp_go_down (down_status and down_reason are set). */
void gs__tcp_recv_go_down(gs__tp_t *tp);
/* Queue a DOWN(failed) frame on socket c (owned; dropped when out of memory). */
void gs__tcp_queue_down(gs__tp_t *tp, gs__tcp_conn_t *c, int failed);
/* The peer said goodbye on every socket: fail it quietly (INFO, not WARN). */
void gs__tcp_peer_left(gs__tp_t *tp, int peer);
/* The heartbeat (docs/design.md, "Heartbeats"), called by progress once
 * now >= tp->hb_next_ns: queue a HEARTBEAT frame on socket 0 of every
 * healthy peer to which nothing was queued for an interval, and fail with
 * GS_ERR_PEER_FAILED every peer from which nothing arrived for
 * GS_TCP_HEARTBEAT_MISSES intervals of watching (a gap between ticks longer
 * than an interval means this side was not looking: the silence is not
 * counted). */
void gs__tcp_heartbeat_tick(gs__tp_t *tp, uint64_t now);

/* --- tcp_rx.c --------------------------------------------------------- */

/* Read and dispatch frames until EAGAIN or the budget; fails the peer on error.
 * The pipe first takes what the socket carries for itself (shm: doorbells). */
void gs__tcp_conn_read(gs__tp_t *tp, gs__tcp_conn_t *c);
/* The frames only, leaving the socket alone (the shared-memory sweep: no
 * recv that would find nothing), then the pipe's read_done. */
void gs__tcp_conn_read_ring(gs__tp_t *tp, gs__tcp_conn_t *c);
/* Match a new receive against held unexpected messages, else post it. */
void gs__tcp_recv_post(gs__tp_t *tp, struct gs__tp_req *req);
/* The probe slot (transport.h): the held message an irecv from @p peer (or
 * GS_ANY_SOURCE) with @p tag would match now, else the failure it would
 * complete with. */
gs_status_t gs__tcp_recv_probe(gs__tp_t *tp, int peer, uint64_t tag, int *found_out,
                               gs__tp_completion_t *comp_out);
/* Detach an unfinished receive from whatever it is bound to (cancel). */
void gs__tcp_recv_cancel(gs__tp_t *tp, struct gs__tp_req *req);
/* Free every held message (finalize). */
void gs__tcp_free_messages(gs__tp_t *tp);
/* A socket of a lost rail has nothing more to give (EOF, an error): undo
 * the chunk it was reading (it comes again as RESEND) and close it. */
void gs__tcp_dead_conn_close(gs__tp_t *tp, gs__tcp_conn_t *c);

/* --- tcp_handshake.c ------------------------------------------------- */

/* Connection setup (tcp_handshake.c's comment): keep the listening socket
 * and a set of handshakes in progress, in the transport's epoll set. @p
 * addrs are every rank's address ("" where not known yet; copied).
 * Returns GS_OK, GS_ERR_NO_MEMORY, GS_ERR_SYSTEM, GS_ERR_INVALID_ARG. */
gs_status_t gs__tcp_hs_open(gs__tp_t *tp, char (*addrs)[GS_TP_ADDR_MAX]);
/* Close every handshake in progress and the set (finalize). */
void gs__tcp_hs_close(gs__tp_t *tp);
/* Whether an epoll event's pointer is the setup set's. */
bool gs__tcp_hs_is(const gs__tp_t *tp, const void *ptr);
/* Record rank @p peer's address (learnt after open). */
void gs__tcp_hs_learn(gs__tp_t *tp, int peer, const char *addr);
/* The link to @p peer is needed: connect to it (@p initiate; lazily to a
 * higher rank after HS_DEFER_MS) or wait for it to connect. No-op unless
 * the link is NONE and the peer healthy. Failures fail the peer. */
void gs__tcp_hs_want(gs__tp_t *tp, int peer, bool initiate);
/* Drop the handshakes of a failed peer. */
void gs__tcp_hs_forget(gs__tp_t *tp, int peer);
/* Advance every handshake that can (non-blocking). */
void gs__tcp_hs_poll(gs__tp_t *tp);
/* The next time an outgoing connect is due (UINT64_MAX: none), and the
 * call that starts those due at @p now. */
uint64_t gs__tcp_hs_next_ns(const gs__tp_t *tp);
void gs__tcp_hs_tick(gs__tp_t *tp, uint64_t now);
/* Block until the links to the @p n ranks in @p peers are up (after
 * gs__tcp_hs_want on each). Returns GS_OK; the failure of one of them
 * (GS_ERR_PEER_FAILED naming it, GS_ERR_MISMATCH, GS_ERR_AUTH,
 * GS_ERR_VERSION_MISMATCH, GS_ERR_PROTOCOL, GS_ERR_SYSTEM, ...);
 * GS_ERR_TIMEOUT naming the missing ranks; GS_ERR_ABORTED. */
gs_status_t gs__tcp_hs_wait(gs__tp_t *tp, const int *peers, int n, uint64_t deadline_ns);

/* --- tcp_transport.c ---------------------------------------------- */

/* Every socket of @p peer is through its handshake: register them for
 * progress, switch socket 0 to shared memory when the pair set it up,
 * and send what waited for the link. */
void gs__tcp_link_up(gs__tp_t *tp, int peer);
/* Take a send off its peer's wait list (no-op when it is not on it). */
void gs__tcp_send_unwait(gs__tp_t *tp, struct gs__tp_req *req);

/* --- tcp_stripe.c ---------------------------------------------------- */

/* Pair @p peer's rails from its address text (tcp_rail.h): nrails, nconns
 * and each rail's local interface and peer address. Says (once) what a
 * pairing left out. */
void gs__tcp_rails_peer(gs__tp_t *tp, int peer, const char *text);
/* Copy a peer's rail figures into the statistics counters. */
void gs__tcp_rails_publish(gs__tp_t *tp, int peer);
/* A multi-rail pair's link is up: TCP_USER_TIMEOUT on its sockets. */
void gs__tcp_rails_tune(gs__tp_t *tp, int peer);
/* The flush wrote @p bytes on c: the rail's count. */
void gs__tcp_rail_wrote(gs__tp_t *tp, gs__tcp_conn_t *c, uint64_t bytes);
/* A DATA frame is queued on c: a busy period starts if none runs (multi-rail
 * pairs; the rate is sampled as its frames are acknowledged). */
void gs__tcp_rate_start(gs__tp_t *tp, gs__tcp_conn_t *c);
/* Cut a send into frames on the pair's sockets and rails and queue them
 * (the link is up): takes its sequence number. */
void gs__tcp_stripe(gs__tp_t *tp, struct gs__tp_req *req);
/* Frame f was written on c, its last byte at the socket's byte count
 * @p mark: a multi-rail pair keeps it until acknowledged (true), else the
 * caller completes it (false). */
bool gs__tcp_retain(gs__tp_t *tp, gs__tcp_conn_t *c, gs__tcp_frame_t *f, uint64_t mark);
/* Complete the retained frames the peers' kernels have acknowledged (of
 * every peer, or of one: before it is failed, what reached it completes). */
void gs__tcp_acks_poll(gs__tp_t *tp);
void gs__tcp_acks_poll_peer(gs__tp_t *tp, int peer);
/* Forget what c retains (its socket closes, or its frames moved). */
void gs__tcp_unretain_conn(gs__tp_t *tp, gs__tcp_conn_t *c);
/* Take a send's frames off the retained lists; returns how many there were. */
int gs__tcp_unretain_req(gs__tp_t *tp, struct gs__tp_req *req);
/* Socket c failed for a remote cause (@p why): when its pair has another
 * rail up, lose c's rail and go on (true); false: the caller fails the peer. */
bool gs__tcp_rail_fail(gs__tp_t *tp, gs__tcp_conn_t *c, const char *why);
/* RAIL_DOWN(k) arrived on c: the peer lost rail k; lose it here too. */
void gs__tcp_rail_down_heard(gs__tp_t *tp, gs__tcp_conn_t *c, uint64_t k);

/* --- tcp_pipe_shm.c ------------------------------------------------- */

/* GS_SHM_MAX_BYTES (core/shm_budget.h) from the bootstrap's host ids
 * (tp->hosts): set peers[q].shm_ring for every peer on this host (0 where
 * the budget leaves the pair to TCP), say what the budget left out, and
 * sweep what killed jobs left in /dev/shm. Every rank of a host plans the
 * same from the same table. Returns GS_OK or GS_ERR_NO_MEMORY. */
gs_status_t gs__tcp_shm_plan(gs__tp_t *tp);
/* Socket 0 of a local pair, lower rank: make the segment (peers[peer].shm;
 * none when it cannot, with a WARN) and write the CREATE record into
 * rec[GS_TCP_SHM_LEN] ("not ok" without a segment). */
void gs__tcp_shm_pair_create(gs__tp_t *tp, int peer, uint8_t *rec);
/* Higher rank: the CREATE record in @p rec; map the segment and write the
 * MAPPED answer over it (*reply: false when CREATE said "not ok", nothing
 * to answer). Returns GS_OK or GS_ERR_PROTOCOL (a bad record). */
gs_status_t gs__tcp_shm_pair_map(gs__tp_t *tp, int peer, uint8_t *rec, bool *reply);
/* Lower rank: the MAPPED answer; keep the segment or give it up. Returns
 * GS_OK or GS_ERR_PROTOCOL. */
gs_status_t gs__tcp_shm_pair_mapped(gs__tp_t *tp, int peer, const uint8_t *rec);
/* The link is up: socket 0 of a pair with a segment goes through it. */
void gs__tcp_shm_link_on(gs__tp_t *tp, int peer);
/* Ring the peer's doorbell if it sleeps on bytes we wrote. */
void gs__tcp_shm_wake_reader(gs__tp_t *tp, gs__tcp_conn_t *c);
/* Ring the peer's doorbell if it waits for space we freed. */
void gs__tcp_shm_wake_writer(gs__tp_t *tp, gs__tcp_conn_t *c);
/* Consume doorbell bytes on c's socket; notes EOF/errors in c->shm. */
void gs__tcp_shm_drain_doorbell(gs__tp_t *tp, gs__tcp_conn_t *c);
/* Before sleeping in epoll: arm every link's sleep flags; true when one of
 * them has work already (do not sleep). */
bool gs__tcp_shm_arm(gs__tp_t *tp);
/* After epoll: clear the flags. */
void gs__tcp_shm_disarm(gs__tp_t *tp);
/* Read every link with bytes waiting and flush every one with room. */
void gs__tcp_shm_sweep(gs__tp_t *tp);
/* Unmap and unlink every segment (finalize, error paths). */
void gs__tcp_shm_free(gs__tp_t *tp);

#endif /* GS_TRANSPORT_TCP_TCP_CONN_H */
