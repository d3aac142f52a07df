/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ps_hostile_check: a hostile worker against a real parameter server, run
 * under gsrun. Linked with gradsync_static: the attacker writes control
 * messages with the library's own encoder (ps/ps_wire.h) and sends them on
 * the parameter server's private communicator, as a broken or malicious
 * build of gradsync would. Rank 0 is the victim; it polls its handle's
 * sticky error (gs_ps_info) and its VmData, and prints
 *   RESULT status=NAME vmdata_growth_kb=N err=SENTENCE
 * The key (7) is 2^20 f32 split over the servers, so rank 0 serves a 2 MiB
 * shard of it.
 *
 *   ps_hostile_check flood   2 ranks, fp16 codec: rank 1 sends
 *                            GS_PS_MAX_INFLIGHT + 64 bare PUSH headers for
 *                            rank 0's shard, each announcing a 64-byte
 *                            compressed payload that never comes. Rank 0
 *                            must fail with GS_ERR_PROTOCOL naming rank 1,
 *                            its VmData grown by less than --vmdata-mb.
 *                            (Before the fix: a whole-shard buffer per
 *                            header, 128 GiB of address space, or
 *                            GS_ERR_NO_MEMORY.)
 *   ps_hostile_check rndv    the same with rendezvous headers announcing a
 *                            whole shard each: only what the staging budget
 *                            allows is allocated (at clear-to-send time).
 *   ps_hostile_check spoof   3 ranks: rank 1 sends rank 0 a BYE that claims
 *                            to come from rank 2. Rank 0 must fail with
 *                            GS_ERR_PROTOCOL naming both ranks, not take
 *                            rank 2 for gone. (Before: rank 2 was marked as
 *                            left, and nothing failed.)
 *
 * --wait-s S: how long the victim waits for its error (default 20). The
 * attacker's own parameter-server threads are stopped first (flood, rndv),
 * so that the clear-to-send messages the victim sends back do not fail it.
 * Exit status 0 when the victim's check held (the other ranks: 0 unless
 * their setup failed).
 */
#include <gradsync/compress.h>
#include <gradsync/gradsync.h>
#include <gradsync/ps.h>

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "ps/ps_impl.h"
#include "ps/ps_limits.h"
#include "ps/ps_wire.h"
#include "tc_clock.h"

#define KEY 7u
#define COUNT ((size_t)1 << 20)

static struct {
    const char *mode;
    double wait_s;
    long vmdata_mb;
} g_opt = {NULL, 20.0, 256};

/* A "Key:   N kB" line of /proc/self/status, in kB; -1 when missing. */
static long status_kb(const char *key)
{
    char line[256];
    long kb = -1;
    FILE *f = fopen("/proc/self/status", "r");

    while ((f != NULL) && (fgets(line, sizeof(line), f) != NULL)) {
        if (strncmp(line, key, strlen(key)) == 0) {
            kb = atol(line + strlen(key));
        }
    }
    if (f != NULL) {
        fclose(f);
    }
    return kb;
}

/* True when @p msg contains "rank N" with N == want. */
static int names_rank(const char *msg, int want)
{
    for (const char *p = msg; *p != '\0'; p++) {
        if ((strncasecmp(p, "rank ", 5) == 0) && isdigit((unsigned char)p[5]) &&
            (strtol(p + 5, NULL, 10) == want)) {
            return 1;
        }
    }
    return 0;
}

/* Stop this rank's own parameter-server threads without failing its
 * communicator: the receive thread ends at the next message it gets (a
 * heartbeat, within a second), the service thread idles until destroy. */
static void attacker_stop_threads(gs_ps_t ps)
{
    gs__ps_fail(ps, GS_ERR_INTERNAL, "ps_hostile_check: this rank's threads are stopped", 0);
    if (ps->rx_started) {
        pthread_join(ps->rx_thread, NULL);
        ps->rx_started = 0;
    }
}

/* Send @p n control messages @p msg (with seq = seq0 + i) to rank 0. */
static long send_headers(gs_ps_t ps, gs__ps_msg_t *m, long n)
{
    enum { BATCH = 256 };
    static uint8_t bufs[BATCH][GS_PS_MSG_BYTES];
    gs_request_t reqs[BATCH];
    long sent = 0;

    while (sent < n) {
        size_t b = 0;

        for (; (b < BATCH) && (sent + (long)b < n); b++) {
            m->seq = (uint32_t)(1000 + sent + (long)b) & GS_PS_SEQ_MASK;
            gs__ps_msg_encode(m, bufs[b]);
            if (gs_isend(ps->comm, bufs[b], GS_PS_MSG_BYTES, GS_DTYPE_U8, 0,
                         gs__ps_tag(GS_PS_TAG_KIND_CTRL, 0), &reqs[b]) != GS_OK) {
                break;
            }
        }
        if ((b == 0) || (gs_waitall(b, reqs) != GS_OK)) {
            break; /* the victim failed and closed its side: enough */
        }
        sent += (long)b;
    }
    return sent;
}

/* The attacker (rank 1): bare PUSH headers for the shard rank 0 serves. */
static void attack_push(gs_ps_t ps, int rndv)
{
    gs__ps_key_t *k = gs__ps_key_find(ps, KEY);
    gs__ps_msg_t m;
    uint32_t sh = 0;
    long sent;

    while ((sh < k->nshards) && (k->server_rank[sh] != 0)) {
        sh++;
    }
    attacker_stop_threads(ps);
    memset(&m, 0, sizeof(m));
    m.type = GS_PS_MSG_PUSH;
    m.dtype = (uint8_t)GS_DTYPE_F32;
    m.src = 1;
    m.key = KEY;
    m.shard = sh;
    m.offset = k->ranges[sh].offset;
    m.count = k->ranges[sh].count;
    m.clock = 0;
    if (rndv) {
        m.flags = GS_PS_MSGF_RNDV;
        m.nbytes = k->ranges[sh].count * sizeof(float); /* the whole shard, uncompressed */
    } else {
        m.flags = GS_PS_MSGF_COMPRESSED; /* eager: no clear-to-send comes back */
        m.nbytes = 64;
    }
    sent = send_headers(ps, &m, (long)GS_PS_MAX_INFLIGHT + 64);
    printf("ATTACKER sent %ld %s push headers (%llu payload bytes announced each, none sent)\n",
           sent, rndv ? "rendezvous" : "eager", (unsigned long long)m.nbytes);
}

/* The attacker (rank 1): a BYE that claims to come from rank 2. */
static void attack_spoof(gs_ps_t ps)
{
    gs__ps_msg_t m;
    uint8_t buf[GS_PS_MSG_BYTES];
    gs_status_t st;

    memset(&m, 0, sizeof(m));
    m.type = GS_PS_MSG_BYE;
    m.src = 2;
    gs__ps_msg_encode(&m, buf);
    st =
        gs_send(ps->comm, buf, GS_PS_MSG_BYTES, GS_DTYPE_U8, 0, gs__ps_tag(GS_PS_TAG_KIND_CTRL, 0));
    printf("ATTACKER sent a bye as rank 2: %s\n", gs_status_name(st));
}

/* The victim (rank 0): wait for the handle's error; 0 when it is as expected. */
static int victim_judge(gs_ps_t ps, long vmdata0, int spoof)
{
    const double end = tc_now_s() + g_opt.wait_s;
    gs_ps_info_t info = GS_PS_INFO_INIT;
    long peak = vmdata0;
    char err[GS_ERROR_MSG_MAX] = "";
    int ok;

    do {
        const long v = status_kb("VmData:");

        peak = (v > peak) ? v : peak;
        (void)gs_ps_info(ps, &info);
        if (info.error != GS_OK) {
            break;
        }
        usleep(10000);
    } while (tc_now_s() < end);
    if (info.error != GS_OK) {
        (void)gs_ps_clock(ps); /* returns the sticky error with its sentence */
        snprintf(err, sizeof(err), "%s", gs_last_error());
    }
    {
        const long v = status_kb("VmData:");

        peak = (v > peak) ? v : peak;
    }
    printf("RESULT status=%s vmdata_growth_kb=%ld err=%s\n", gs_status_name(info.error),
           peak - vmdata0, err);
    ok = (info.error == GS_ERR_PROTOCOL) && names_rank(err, 1) &&
         (peak - vmdata0 <= g_opt.vmdata_mb * 1024);
    if (spoof) {
        ok = ok && names_rank(err, 2) && (strstr(err, "claims") != NULL);
    }
    printf("%s %s: the parameter server %s\n", ok ? "PASS" : "FAIL", g_opt.mode,
           ok ? "refused the hostile rank with GS_ERR_PROTOCOL naming it, memory bounded"
              : "did not fail as required (GS_ERR_PROTOCOL naming rank 1, bounded VmData)");
    return ok ? 0 : 1;
}

int main(int argc, char **argv)
{
    gs_comm_t comm;
    gs_ps_t ps = GS_PS_NULL;
    gs_ps_opts_t o = GS_PS_OPTS_INIT;
    gs_codec_config_t cc = GS_CODEC_CONFIG_INIT;
    int rank = -1;
    int rc = 0;
    long vmdata0;
    int spoof;

    if (argc < 2) {
        fprintf(stderr, "usage: ps_hostile_check flood|rndv|spoof [--wait-s S] [--vmdata-mb M]\n");
        return 2;
    }
    g_opt.mode = argv[1];
    for (int i = 2; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--wait-s") == 0) {
            g_opt.wait_s = atof(argv[i + 1]);
        } else if (strcmp(argv[i], "--vmdata-mb") == 0) {
            g_opt.vmdata_mb = atol(argv[i + 1]);
        } else {
            fprintf(stderr, "ps_hostile_check: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    spoof = (strcmp(g_opt.mode, "spoof") == 0);
    if (!spoof && (strcmp(g_opt.mode, "flood") != 0) && (strcmp(g_opt.mode, "rndv") != 0)) {
        fprintf(stderr, "ps_hostile_check: unknown mode %s\n", g_opt.mode);
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (gs_comm_init_env(&comm, NULL) != GS_OK) {
        printf("FAIL init: %s\n", gs_last_error());
        return 1;
    }
    (void)gs_comm_rank(comm, &rank);
    cc.kind = GS_CODEC_FP16;
    o.codec = &cc;
    o.consistency = GS_PS_BSP;
    o.split_bytes = 4096;
    if ((gs_ps_create(comm, &o, &ps) != GS_OK) ||
        (gs_ps_register(ps, KEY, COUNT, GS_DTYPE_F32, NULL) != GS_OK)) {
        printf("FAIL setup on rank %d: %s\n", rank, gs_last_error());
        return 1;
    }
    vmdata0 = status_kb("VmData:");
    if (gs_barrier(comm) != GS_OK) {
        printf("FAIL barrier on rank %d: %s\n", rank, gs_last_error());
        return 1;
    }
    if (rank == 1) {
        if (spoof) {
            attack_spoof(ps);
        } else {
            attack_push(ps, strcmp(g_opt.mode, "rndv") == 0);
        }
    } else if (rank == 0) {
        rc = victim_judge(ps, vmdata0, spoof);
    }
    /* The attacker stays until the victim has judged: its leaving would
     * fail the victim with GS_ERR_PEER_FAILED first. */
    (void)gs_barrier(comm);
    (void)gs_ps_destroy(ps);
    (void)gs_comm_destroy(comm);
    return rc;
}
