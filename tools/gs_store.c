/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gs_store: host gradsync's key-value store (src/core/kvserver.h, torch's
 * TCPStore protocol) for the ranks of a job to bootstrap through
 * (GS_STORE=host:port/prefix). It prints "gs_store: listening on
 * HOST:PORT" on stdout once it listens, then serves until SIGINT or SIGTERM
 * (or, with --watch-stdin, until its stdin closes: gsrun --store hosts the
 * job's store this way, so that the store goes when gsrun goes, however it
 * ends). It does not daemonise and keeps nothing on disk.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "core/kvserver.h"

#include "core/error.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

static void usage(FILE *fp)
{
    fprintf(fp,
            "Usage: gs_store [--watch-stdin] [--max-conns N] [HOST:]PORT\n"
            "\n"
            "Serve a key-value store speaking torch's TCPStore protocol on HOST:PORT\n"
            "(HOST default 127.0.0.1; [v6addr]:PORT for IPv6; PORT 0: a free one) until\n"
            "SIGINT or SIGTERM. Ranks bootstrap through it with GS_STORE=HOST:PORT/prefix.\n"
            "It prints \"gs_store: listening on HOST:PORT\" once it listens.\n"
            "  --watch-stdin   also stop when stdin closes (as gsrun --store runs it)\n"
            "  --max-conns N   connections at once, 1..65536 (default 4096)\n"
            "Exit status: 0 when stopped; 2 on a usage error; 1 when the store cannot start.\n");
}

/* "[v6]:port", "host:port" or "port" into host and port. Returns 0 or -1. */
static int parse_listen(const char *s, char *host, size_t cap, int *port)
{
    const char *colon = strrchr(s, ':');
    const char *p = s;
    char *end = NULL;
    long v;

    (void)snprintf(host, cap, "127.0.0.1");
    if (colon != NULL) {
        size_t hlen = (size_t)(colon - s);

        if ((s[0] == '[') && (hlen >= 2) && (s[hlen - 1] == ']')) {
            s++;
            hlen -= 2;
        }
        if ((hlen == 0) || (hlen >= cap)) {
            return -1;
        }
        memcpy(host, s, hlen);
        host[hlen] = '\0';
        p = colon + 1;
    }
    errno = 0;
    v = strtol(p, &end, 10);
    if ((p[0] == '\0') || (errno != 0) || (*end != '\0') || (v < 0) || (v > 65535)) {
        return -1;
    }
    *port = (int)v;
    return 0;
}

int main(int argc, char **argv)
{
    gs__kvs_opts_t opts = {.max_conns = 0, .max_bytes = 0};
    const char *listen_at = NULL;
    int watch_stdin = 0;
    char host[256];
    int port = 0;
    gs__kvs_t *kvs = NULL;
    sigset_t mask;
    int sfd;

    for (int i = 1; i < argc; i++) {
        if ((strcmp(argv[i], "-h") == 0) || (strcmp(argv[i], "--help") == 0)) {
            usage(stdout);
            return 0;
        } else if (strcmp(argv[i], "--watch-stdin") == 0) {
            watch_stdin = 1;
        } else if ((strcmp(argv[i], "--max-conns") == 0) && (i + 1 < argc)) {
            char *end = NULL;
            long v = strtol(argv[++i], &end, 10);

            if ((*end != '\0') || (v < 1) || (v > 65536)) {
                fprintf(stderr, "gs_store: invalid --max-conns '%s' (expected 1..65536)\n",
                        argv[i]);
                return 2;
            }
            opts.max_conns = (int)v;
        } else if ((argv[i][0] != '-') && (listen_at == NULL)) {
            listen_at = argv[i];
        } else {
            fprintf(stderr, "gs_store: unknown option '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        }
    }
    if ((listen_at == NULL) || (parse_listen(listen_at, host, sizeof(host), &port) != 0)) {
        fprintf(stderr, "gs_store: expected [HOST:]PORT (PORT 0..65535), got '%s'\n",
                (listen_at != NULL) ? listen_at : "");
        return 2;
    }
    /* Signals arrive through a signalfd, blocked before the server's thread starts. */
    sigemptyset(&mask);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGHUP);
    (void)sigprocmask(SIG_BLOCK, &mask, NULL);
    (void)signal(SIGPIPE, SIG_IGN);
    sfd = signalfd(-1, &mask, SFD_CLOEXEC);
    if (sfd < 0) {
        fprintf(stderr, "gs_store: signalfd: %s\n", strerror(errno));
        return 1;
    }
    if (gs__kvs_start(host, port, "any", &opts, &kvs) != GS_OK) {
        fprintf(stderr, "gs_store: %s\n", gs__error_get());
        return 1;
    }
    printf("gs_store: listening on %s\n", gs__kvs_where(kvs));
    fflush(stdout);
    for (;;) {
        struct pollfd p[2] = {{.fd = sfd, .events = POLLIN},
                              {.fd = watch_stdin ? STDIN_FILENO : -1, .events = POLLIN}};

        if ((poll(p, 2, -1) < 0) && (errno != EINTR)) {
            fprintf(stderr, "gs_store: poll: %s\n", strerror(errno));
            break;
        }
        if (p[0].revents != 0) {
            break;
        }
        if (p[1].revents != 0) {
            char buf[256];

            if (read(STDIN_FILENO, buf, sizeof(buf)) <= 0) {
                break; /* stdin closed: the parent is gone */
            }
        }
    }
    gs__kvs_stop(kvs);
    (void)close(sfd);
    return 0;
}
