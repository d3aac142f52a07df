/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gsrun: the launcher. It starts N ranks of one program on this host with the rank
 * environment set (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT and
 * the GS_ twins), prefixes every line the ranks print with "[rank] ", forwards SIGINT, SIGTERM
 * and SIGHUP to them, and stops all of them when one fails or a --timeout expires. Across hosts
 * it works as torchrun does: one gsrun per node, each given --nnodes, its --node-rank and the
 * same --master-addr/--master-port, starts that node's ranks (global rank = node rank * N +
 * local rank); a failed rank stops its node's ranks, and the others then fail on the lost peer.
 * It is a standalone C11 program on POSIX calls only: it does not link gradsync and it does not
 * reach other hosts itself. It is single-threaded: one poll() loop owns every pipe, every child
 * and every deadline, so each wait in it is bounded.
 * With --store it also hosts a key-value store for the life of the job (on node 0: the gs_store
 * program found beside gsrun, which links the library) and exports GS_STORE to the ranks, so
 * they bootstrap through it (docs/gsrun.md, "A key-value store for the job").
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* POSIX 2008 and SOCK_CLOEXEC under -std=c11 */
#endif
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>

#include "gradsync/version.h"

#define GSRUN_MAX_RANKS 1024 /* per node */
#define GSRUN_MAX_NODES 16384
#define GSRUN_MAX_LINE 16384 /* longer lines are split into several prefixed lines */
#define GSRUN_READ_CHUNK 65536
#define GSRUN_GRACE_NS 2000000000ULL /* SIGTERM -> SIGKILL, and SIGKILL -> give up */
#define GSRUN_MAX_TIMEOUT_S 1e7
#define GSRUN_MAX_ADDR 255
#define GSRUN_EXIT_USAGE 2
#define GSRUN_EXIT_INTERNAL 1
#define GSRUN_EXIT_TIMEOUT 124
#define GSRUN_EXIT_NOEXEC 127

/* One output stream (stdout or stderr) of one rank, read through a pipe. */
typedef struct {
    int fd;     /* read end, or -1 once closed */
    int out_fd; /* STDOUT_FILENO or STDERR_FILENO of gsrun */
    char *line; /* the partial line so far (lazily allocated, GSRUN_MAX_LINE bytes) */
    size_t len; /* bytes in line */
} gsrun_stream_t;

typedef struct {
    pid_t pid; /* also the id of the rank's process group; 0 if never started */
    bool reaped;
    gsrun_stream_t out;
    gsrun_stream_t err;
} gsrun_rank_t;

/* The phases of the main loop; each has at most one deadline. */
typedef enum {
    PHASE_RUNNING, /* deadline: --timeout */
    PHASE_DRAIN,   /* every rank exited 0; waiting for pipes held by descendants to close */
    PHASE_TERM,    /* SIGTERM (or the forwarded signal) sent; deadline: SIGKILL */
    PHASE_KILL     /* SIGKILL sent; deadline: give up waiting */
} gsrun_phase_t;

typedef struct {
    int nranks;    /* ranks on this node */
    int nnodes;    /* nodes of the job (1: this host only) */
    int node_rank; /* this node, 0..nnodes-1 */
    int port;      /* 0: not given */
    const char *addr;
    double timeout_s; /* 0: none */
    bool tag_output;
    bool verbose;
    const char *store; /* --store [HOST:]PORT, or NULL */
    char **argv;       /* the program and its arguments, NULL-terminated */
} gsrun_opts_t;

#define GSRUN_STORE_PREFIX "gsrun"
#define GSRUN_STORE_START_NS 10000000000ULL /* gs_store must listen within this */

/* The store gsrun hosts (--store on node 0). */
typedef struct {
    pid_t pid;                     /* 0: none */
    int stdin_fd;                  /* its stdin's write end: closing it stops the store */
    char env[GSRUN_MAX_ADDR + 32]; /* GS_STORE for the ranks, "" without --store */
} gsrun_store_t;

static gsrun_store_t g_store = {.pid = 0, .stdin_fd = -1, .env = ""};

/* Signal state. The handler only counts and writes one byte to the self-pipe. */
static volatile sig_atomic_t g_sig_count[3]; /* SIGINT, SIGTERM, SIGHUP */
static int g_wake_pipe[2] = {-1, -1};
static const int g_fwd_signals[3] = {SIGINT, SIGTERM, SIGHUP};
static struct sigaction g_orig_action[4]; /* the three above plus SIGPIPE, restored in children */
static struct rlimit g_orig_nofile;
static bool g_nofile_raised;
static bool g_out_broken[3]; /* indexed by fd 1 and 2: writes failed, drop further output */

static void usage(FILE *fp)
{
    fprintf(
        fp,
        "Usage: gsrun -n N [options] [--] program [args...]\n"
        "\n"
        "Launch N local ranks of program with the rank environment set:\n"
        "  RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR,\n"
        "  MASTER_PORT, GS_RANK, GS_WORLD_SIZE, GS_LOCAL_RANK, GS_MASTER_ADDR, GS_MASTER_PORT.\n"
        "Across hosts, run one gsrun per node with the same --nnodes, --master-addr and\n"
        "--master-port and its own --node-rank, as with torchrun.\n"
        "\n"
        "Options (a multi-word option may be spelt with '_' as torchrun does:\n"
        "--nproc_per_node, --node_rank, --master_addr, --master_port, --no_tag_output):\n"
        "  -n, --nranks, --nproc-per-node, --nproc_per_node N\n"
        "                     ranks on this node, 1..%d (required)\n"
        "  --nnodes M         nodes of the job (default 1); WORLD_SIZE = M * N\n"
        "  --node-rank, --node_rank K\n"
        "                     this node, 0..M-1 (default 0); its ranks are K*N .. K*N+N-1\n"
        "  --port, --master-port, --master_port P\n"
        "                     master port, 1..65535 (default: $GS_MASTER_PORT, else a free\n"
        "                     port on 127.0.0.1; required with --nnodes > 1)\n"
        "  --addr, --master-addr, --master_addr A\n"
        "                     master address: rank 0's host (default 127.0.0.1)\n"
        "  --timeout SEC      stop every rank after SEC seconds and exit 124\n"
        "  --store [HOST:]PORT\n"
        "                     host a key-value store (gs_store, torch's TCPStore protocol) on\n"
        "                     HOST:PORT for the job (node 0 hosts it; HOST default: the master\n"
        "                     address; PORT 0: a free one, one node only) and export\n"
        "                     GS_STORE=HOST:PORT/gsrun, so the ranks bootstrap through it\n"
        "  --tag-output, --tag_output\n"
        "                     prefix each output line with \"[rank] \" (default)\n"
        "  --no-tag-output, --no_tag_output\n"
        "                     let ranks write to gsrun's stdout and stderr directly\n"
        "  -v, --verbose      print the port and each rank's pid on stderr\n"
        "  -h, --help         print this help and exit\n"
        "  --version          print gsrun's version and exit\n"
        "\n"
        "Exit status: 0 when every rank exits 0; else the first failing rank's status\n"
        "(128+signal if it was killed); 128+signal when gsrun got SIGINT/SIGTERM/SIGHUP;\n"
        "124 on --timeout; 2 on a usage error; 1 when gsrun itself failed.\n",
        GSRUN_MAX_RANKS);
}

static void die_usage(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

static void die_usage(const char *fmt, ...)
{
    va_list ap;

    fputs("gsrun: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputs("\nTry 'gsrun --help' for more information.\n", stderr);
    exit(GSRUN_EXIT_USAGE);
}

static void msg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* One "gsrun: ..." line on stderr, written with one write() so it does not split. */
static void msg(const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    int n;
    size_t len;

    memcpy(buf, "gsrun: ", 7);
    va_start(ap, fmt);
    n = vsnprintf(buf + 7, sizeof(buf) - 8, fmt, ap);
    va_end(ap);
    if (n < 0) {
        return;
    }
    len = 7 + (((size_t)n < sizeof(buf) - 8) ? (size_t)n : sizeof(buf) - 9);
    buf[len++] = '\n';
    while (write(STDERR_FILENO, buf, len) < 0 && errno == EINTR) {
    }
}

static uint64_t now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static const char *signal_name(int sig)
{
    switch (sig) {
    case SIGHUP:
        return "SIGHUP";
    case SIGINT:
        return "SIGINT";
    case SIGQUIT:
        return "SIGQUIT";
    case SIGILL:
        return "SIGILL";
    case SIGTRAP:
        return "SIGTRAP";
    case SIGABRT:
        return "SIGABRT";
    case SIGBUS:
        return "SIGBUS";
    case SIGFPE:
        return "SIGFPE";
    case SIGKILL:
        return "SIGKILL";
    case SIGUSR1:
        return "SIGUSR1";
    case SIGSEGV:
        return "SIGSEGV";
    case SIGUSR2:
        return "SIGUSR2";
    case SIGPIPE:
        return "SIGPIPE";
    case SIGALRM:
        return "SIGALRM";
    case SIGTERM:
        return "SIGTERM";
    case SIGXCPU:
        return "SIGXCPU";
    case SIGXFSZ:
        return "SIGXFSZ";
    default:
        return "unknown signal";
    }
}

/* ---- argument parsing ------------------------------------------------------------------- */

static bool parse_long(const char *s, long lo, long hi, long *out)
{
    char *end = NULL;
    long v;

    if ((s == NULL) || (*s == '\0')) {
        return false;
    }
    errno = 0;
    v = strtol(s, &end, 10);
    if ((errno != 0) || (*end != '\0') || (v < lo) || (v > hi)) {
        return false;
    }
    *out = v;
    return true;
}

/*
 * Match a long option with a value, given as "--name V" or "--name=V". On a match, sets *val
 * and advances *i past what was consumed.
 */
/*
 * Whether the first @p len characters of @p arg spell the option @p name, reading '_' as
 * '-' past the leading "--": torchrun's spellings (--nproc_per_node, --node_rank,
 * --master_addr, --master_port) are accepted beside gsrun's, for every multi-word option.
 */
static bool opt_name_eq(const char *arg, const char *name, size_t len)
{
    for (size_t k = 0; k < len; k++) {
        const char a = ((k >= 2) && (arg[k] == '_')) ? '-' : arg[k];

        if (a != name[k]) {
            return false;
        }
    }
    return true;
}

/* A flag (no value), in either spelling (opt_name_eq). */
static bool match_flag(const char *arg, const char *name)
{
    const size_t len = strlen(name);

    return (strlen(arg) == len) && opt_name_eq(arg, name, len);
}

static bool match_value_opt(int argc, char **argv, int *i, const char *name, const char **val)
{
    const char *arg = argv[*i];
    size_t len = strlen(name);

    if ((strlen(arg) < len) || !opt_name_eq(arg, name, len)) {
        return false;
    }
    if (arg[len] == '=') {
        *val = arg + len + 1;
        return true;
    }
    if (arg[len] != '\0') {
        return false;
    }
    if (*i + 1 >= argc) {
        die_usage("option %s needs a value", name);
    }
    *i += 1;
    *val = argv[*i];
    return true;
}

static void parse_args(int argc, char **argv, gsrun_opts_t *opts)
{
    const char *val = NULL;
    long v = 0;
    int i;

    opts->nranks = 0;
    opts->nnodes = 1;
    opts->node_rank = 0;
    opts->port = 0;
    opts->addr = "127.0.0.1";
    opts->timeout_s = 0.0;
    opts->tag_output = true;
    opts->verbose = false;
    opts->store = NULL;
    opts->argv = NULL;

    for (i = 1; i < argc; i++) {
        const char *arg = argv[i];

        if (strcmp(arg, "--") == 0) {
            i++;
            break;
        }
        if ((arg[0] != '-') || (arg[1] == '\0')) {
            break;
        }
        if ((strcmp(arg, "-h") == 0) || (strcmp(arg, "--help") == 0)) {
            usage(stdout);
            exit(0);
        } else if (strcmp(arg, "--version") == 0) {
            printf("gsrun (gradsync) %s\n", GS_VERSION_STRING);
            exit(0);
        } else if ((strcmp(arg, "-v") == 0) || (strcmp(arg, "--verbose") == 0)) {
            opts->verbose = true;
        } else if (match_flag(arg, "--tag-output")) {
            opts->tag_output = true;
        } else if (match_flag(arg, "--no-tag-output")) {
            opts->tag_output = false;
        } else if ((strncmp(arg, "-n", 2) == 0) && (arg[2] != '\0') && (arg[2] != '-')) {
            val = (arg[2] == '=') ? arg + 3 : arg + 2;
            if (!parse_long(val, 1, GSRUN_MAX_RANKS, &v)) {
                die_usage("invalid number of ranks '%s' (expected 1..%d)", val, GSRUN_MAX_RANKS);
            }
            opts->nranks = (int)v;
        } else if (match_value_opt(argc, argv, &i, "-n", &val) ||
                   match_value_opt(argc, argv, &i, "--nranks", &val) ||
                   match_value_opt(argc, argv, &i, "--nproc-per-node", &val)) {
            if (!parse_long(val, 1, GSRUN_MAX_RANKS, &v)) {
                die_usage("invalid number of ranks '%s' (expected 1..%d)", val, GSRUN_MAX_RANKS);
            }
            opts->nranks = (int)v;
        } else if (match_value_opt(argc, argv, &i, "--nnodes", &val)) {
            if (!parse_long(val, 1, GSRUN_MAX_NODES, &v)) {
                die_usage("invalid number of nodes '%s' (expected 1..%d)", val, GSRUN_MAX_NODES);
            }
            opts->nnodes = (int)v;
        } else if (match_value_opt(argc, argv, &i, "--node-rank", &val)) {
            if (!parse_long(val, 0, GSRUN_MAX_NODES - 1, &v)) {
                die_usage("invalid node rank '%s' (expected 0..%d)", val, GSRUN_MAX_NODES - 1);
            }
            opts->node_rank = (int)v;
        } else if (match_value_opt(argc, argv, &i, "--port", &val) ||
                   match_value_opt(argc, argv, &i, "--master-port", &val)) {
            if (!parse_long(val, 1, 65535, &v)) {
                die_usage("invalid port '%s' (expected 1..65535)", val);
            }
            opts->port = (int)v;
        } else if (match_value_opt(argc, argv, &i, "--addr", &val) ||
                   match_value_opt(argc, argv, &i, "--master-addr", &val)) {
            if ((val[0] == '\0') || (strlen(val) > GSRUN_MAX_ADDR)) {
                die_usage("invalid master address '%s'", val);
            }
            opts->addr = val;
        } else if (match_value_opt(argc, argv, &i, "--store", &val)) {
            const char *colon = strrchr(val, ':');
            const char *pt = (colon != NULL) ? colon + 1 : val;

            if (!parse_long(pt, 0, 65535, &v) || ((colon != NULL) && (colon == val)) ||
                (strlen(val) > GSRUN_MAX_ADDR)) {
                die_usage("invalid --store '%s' (expected [HOST:]PORT, PORT 0..65535)", val);
            }
            opts->store = val;
        } else if (match_value_opt(argc, argv, &i, "--timeout", &val)) {
            char *end = NULL;
            double t;

            errno = 0;
            t = strtod(val, &end);
            if ((val[0] == '\0') || (errno != 0) || (*end != '\0') || !isfinite(t) || (t <= 0.0) ||
                (t > GSRUN_MAX_TIMEOUT_S)) {
                die_usage("invalid timeout '%s' (expected seconds > 0)", val);
            }
            opts->timeout_s = t;
        } else {
            die_usage("unknown option '%s'", arg);
        }
    }
    if (opts->nranks == 0) {
        die_usage("missing -n N");
    }
    if (opts->node_rank >= opts->nnodes) {
        die_usage("--node-rank %d is not below --nnodes %d", opts->node_rank, opts->nnodes);
    }
    if ((i >= argc) || (argv[i][0] == '\0')) {
        die_usage("missing program to run");
    }
    opts->argv = &argv[i];

    if (opts->port == 0) {
        const char *env = getenv("GS_MASTER_PORT");

        if ((env != NULL) && (env[0] != '\0')) {
            if (!parse_long(env, 1, 65535, &v)) {
                die_usage("invalid GS_MASTER_PORT '%s' (expected 1..65535)", env);
            }
            opts->port = (int)v;
        }
    }
    if ((opts->nnodes > 1) && (opts->store != NULL) &&
        (strcmp((strrchr(opts->store, ':') != NULL) ? strrchr(opts->store, ':') + 1 : opts->store,
                "0") == 0)) {
        die_usage("--nnodes %d needs a --store port other than 0: every node must name the "
                  "same store",
                  opts->nnodes);
    }
    if ((opts->nnodes > 1) && (opts->port == 0)) {
        die_usage("--nnodes %d needs --master-port (or GS_MASTER_PORT): every node must name "
                  "the same rendezvous port",
                  opts->nnodes);
    }
}

/* The job-wide rank of this node's rank @p local. */
static int global_rank(const gsrun_opts_t *opts, int local)
{
    return opts->node_rank * opts->nranks + local;
}

/* ---- setup ------------------------------------------------------------------------------ */

/* Lowest port gsrun picks for the rendezvous when none is given. */
#define GSRUN_PORT_MIN 20000
#define GSRUN_PORT_TRIES 64

/* 1 when nothing is bound to @p port on any address right now (port 0: the
 * kernel picks one, written back into *port). */
static int port_is_free(int *port)
{
    struct sockaddr_in sa;
    socklen_t salen = sizeof(sa);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int ok = 0;

    if (fd < 0) {
        msg("socket: %s", strerror(errno));
        return 0;
    }
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_ANY);
    sa.sin_port = htons((uint16_t)*port);
    if ((bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0) &&
        (getsockname(fd, (struct sockaddr *)&sa, &salen) == 0)) {
        *port = ntohs(sa.sin_port);
        ok = 1;
    }
    close(fd);
    return ok;
}

/*
 * A port that was free a moment ago, for rank 0's rendezvous listener. It is
 * picked at random below the kernel's ephemeral range
 * (/proc/sys/net/ipv4/ip_local_port_range): a port from that range, as
 * bind(port 0) gives, can be handed to any outgoing connection (another
 * job's, or this job's own ranks connecting to each other) before rank 0
 * binds it, which made a test fail with "Address already in use". Port 0
 * remains the fallback.
 */
static int find_free_port(void)
{
    unsigned lo = 32768, hi = 60999;
    unsigned seed = (unsigned)getpid() ^ (unsigned)time(NULL);
    FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
    int port;

    if (f != NULL) {
        /* NOLINTNEXTLINE(cert-err34-c): a range the kernel wrote, not user input. */
        if (fscanf(f, "%u %u", &lo, &hi) != 2) {
            lo = 32768;
        }
        fclose(f);
    }
    for (int i = 0; (lo > GSRUN_PORT_MIN + 1000) && (i < GSRUN_PORT_TRIES); i++) {
        port = GSRUN_PORT_MIN + (int)((unsigned)rand_r(&seed) % (lo - GSRUN_PORT_MIN));
        if (port_is_free(&port)) {
            return port;
        }
    }
    port = 0;
    if (!port_is_free(&port)) {
        msg("cannot find a free port: %s", strerror(errno));
        return -1;
    }
    return port;
}

/* Make sure fds 0, 1 and 2 exist, so no pipe we create lands on them. */
static void ensure_std_fds(void)
{
    int fd;

    for (fd = 0; fd <= 2; fd++) {
        if (fcntl(fd, F_GETFD) < 0) {
            int nfd = open("/dev/null", (fd == 0) ? O_RDONLY : O_WRONLY);

            if ((nfd >= 0) && (nfd != fd)) {
                /* Lower fds are open, so open() returned fd itself; this is just defensive. */
                dup2(nfd, fd);
                close(nfd);
            }
        }
    }
}

/* Each tagged rank costs two pipe fds here; raise the soft open-file limit if needed. */
static int ensure_fd_limit(int nranks)
{
    rlim_t need = (rlim_t)nranks * 2 + 64;
    struct rlimit rl;

    if (getrlimit(RLIMIT_NOFILE, &g_orig_nofile) != 0) {
        return 0; /* unknown; try anyway and report pipe() failures */
    }
    if ((g_orig_nofile.rlim_cur == RLIM_INFINITY) || (g_orig_nofile.rlim_cur >= need)) {
        return 0;
    }
    if ((g_orig_nofile.rlim_max != RLIM_INFINITY) && (g_orig_nofile.rlim_max < need)) {
        msg("%d tagged ranks need %lu open files but the limit is %lu; raise it (ulimit -n) or "
            "use --no-tag-output",
            nranks, (unsigned long)need, (unsigned long)g_orig_nofile.rlim_max);
        return -1;
    }
    rl = g_orig_nofile;
    rl.rlim_cur = need;
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0) {
        msg("setrlimit(RLIMIT_NOFILE, %lu): %s", (unsigned long)need, strerror(errno));
        return -1;
    }
    g_nofile_raised = true;
    return 0;
}

static void on_signal(int sig)
{
    int saved = errno;
    int k;

    /* SIGCHLD only needs the wake-up: the main loop reaps on every pass. */
    for (k = 0; k < 3; k++) {
        if (g_fwd_signals[k] == sig) {
            g_sig_count[k]++;
        }
    }
    /* Non-blocking: if the pipe is full, poll() is going to wake anyway. */
    (void)!write(g_wake_pipe[1], "x", 1);
    errno = saved;
}

static int install_signals(void)
{
    struct sigaction sa;
    struct sigaction ign;
    int k;

    if (pipe(g_wake_pipe) != 0) {
        msg("pipe: %s", strerror(errno));
        return -1;
    }
    for (k = 0; k < 2; k++) {
        fcntl(g_wake_pipe[k], F_SETFD, FD_CLOEXEC);
        fcntl(g_wake_pipe[k], F_SETFL, fcntl(g_wake_pipe[k], F_GETFL) | O_NONBLOCK);
    }
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    for (k = 0; k < 3; k++) {
        sigaddset(&sa.sa_mask, g_fwd_signals[k]);
    }
    sigaddset(&sa.sa_mask, SIGCHLD);
    sa.sa_flags = SA_RESTART;
    for (k = 0; k < 3; k++) {
        sigaction(g_fwd_signals[k], NULL, &g_orig_action[k]);
        /* Under nohup, SIGHUP stays ignored, for gsrun and (inherited) for the ranks. */
        if ((g_fwd_signals[k] == SIGHUP) && (g_orig_action[k].sa_handler == SIG_IGN)) {
            continue;
        }
        sigaction(g_fwd_signals[k], &sa, NULL);
    }
    sa.sa_flags = SA_RESTART | SA_NOCLDSTOP;
    sigaction(SIGCHLD, &sa, NULL);
    /* A closed stdout must not kill gsrun: we drop the output and keep supervising. */
    memset(&ign, 0, sizeof(ign));
    ign.sa_handler = SIG_IGN;
    sigemptyset(&ign.sa_mask);
    sigaction(SIGPIPE, &ign, &g_orig_action[3]);
    return 0;
}

/*
 * Whether execvp() can find an executable for prog, checked once up front so that a typo gives
 * one clear message instead of N. execvp() in the child still has the last word.
 */
static bool program_found(const char *prog)
{
    const char *path = getenv("PATH");
    char buf[4096];

    if (strchr(prog, '/') != NULL) {
        return access(prog, X_OK) == 0;
    }
    if (path == NULL) {
        path = "/bin:/usr/bin";
    }
    while (path != NULL) {
        const char *colon = strchr(path, ':');
        size_t dlen = (colon != NULL) ? (size_t)(colon - path) : strlen(path);
        int n =
            snprintf(buf, sizeof(buf), "%.*s%s%s", (int)dlen, path, (dlen > 0) ? "/" : "", prog);

        if ((n > 0) && ((size_t)n < sizeof(buf)) && (access(buf, X_OK) == 0)) {
            struct stat st;

            if ((stat(buf, &st) == 0) && S_ISREG(st.st_mode)) {
                return true;
            }
        }
        path = (colon != NULL) ? colon + 1 : NULL;
    }
    return false;
}

/* ---- launching -------------------------------------------------------------------------- */

static void set_env_int(const char *name, long v)
{
    char buf[32];

    snprintf(buf, sizeof(buf), "%ld", v);
    setenv(name, buf, 1);
}

/* In the child, between fork() and exec: runs single-threaded, so setenv() is safe here. */
static void child_exec(const gsrun_opts_t *opts, int rank, int out_fd, int err_fd)
{
    sigset_t empty;
    int devnull;
    int k;

    /* Own process group, so a kill of the group reaches the rank's own children too. */
    setpgid(0, 0);
    for (k = 0; k < 3; k++) {
        sigaction(g_fwd_signals[k], &g_orig_action[k], NULL);
    }
    sigaction(SIGPIPE, &g_orig_action[3], NULL);
    signal(SIGCHLD, SIG_DFL);
    sigemptyset(&empty);
    sigprocmask(SIG_SETMASK, &empty, NULL);
    if (g_nofile_raised) {
        setrlimit(RLIMIT_NOFILE, &g_orig_nofile);
    }

    /*
     * NOTE: ranks sit in background process groups, so reading a terminal would stop them
     * with SIGTTIN. stdin is /dev/null for every rank.
     */
    devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0) {
        dup2(devnull, STDIN_FILENO);
        if (devnull != STDIN_FILENO) {
            close(devnull);
        }
    }
    if (out_fd >= 0) {
        dup2(out_fd, STDOUT_FILENO);
        dup2(err_fd, STDERR_FILENO);
    }

    set_env_int("RANK", global_rank(opts, rank));
    set_env_int("WORLD_SIZE", opts->nnodes * opts->nranks);
    set_env_int("LOCAL_RANK", rank);
    set_env_int("LOCAL_WORLD_SIZE", opts->nranks);
    set_env_int("GROUP_RANK", opts->node_rank);
    setenv("MASTER_ADDR", opts->addr, 1);
    set_env_int("MASTER_PORT", opts->port);
    set_env_int("GS_RANK", global_rank(opts, rank));
    set_env_int("GS_WORLD_SIZE", opts->nnodes * opts->nranks);
    set_env_int("GS_LOCAL_RANK", rank);
    setenv("GS_MASTER_ADDR", opts->addr, 1);
    set_env_int("GS_MASTER_PORT", opts->port);
    if (g_store.env[0] != '\0') {
        setenv("GS_STORE", g_store.env, 1);
    }

    execvp(opts->argv[0], opts->argv);
    {
        char buf[512];
        int n = snprintf(buf, sizeof(buf), "gsrun: rank %d: cannot execute '%s': %s\n",
                         global_rank(opts, rank), opts->argv[0], strerror(errno));

        if (n > 0) {
            (void)!write(STDERR_FILENO, buf, ((size_t)n < sizeof(buf)) ? (size_t)n : sizeof(buf));
        }
    }
    _exit(GSRUN_EXIT_NOEXEC);
}

static int make_pipe(int fds[2])
{
    if (pipe(fds) != 0) {
        return -1;
    }
    fcntl(fds[0], F_SETFD, FD_CLOEXEC);
    fcntl(fds[1], F_SETFD, FD_CLOEXEC);
    return 0;
}

static int launch_rank(const gsrun_opts_t *opts, int rank, gsrun_rank_t *r)
{
    int outp[2] = {-1, -1};
    int errp[2] = {-1, -1};
    pid_t pid;

    if (opts->tag_output) {
        if (make_pipe(outp) != 0) {
            msg("pipe for rank %d: %s", rank, strerror(errno));
            return -1;
        }
        if (make_pipe(errp) != 0) {
            msg("pipe for rank %d: %s", rank, strerror(errno));
            close(outp[0]);
            close(outp[1]);
            return -1;
        }
    }
    pid = fork();
    if (pid < 0) {
        msg("fork for rank %d: %s", rank, strerror(errno));
        if (opts->tag_output) {
            close(outp[0]);
            close(outp[1]);
            close(errp[0]);
            close(errp[1]);
        }
        return -1;
    }
    if (pid == 0) {
        child_exec(opts, rank, outp[1], errp[1]);
    }
    /* Also from the parent, so the group exists before we might signal it (no race). */
    setpgid(pid, pid);
    r->pid = pid;
    if (opts->tag_output) {
        close(outp[1]);
        close(errp[1]);
        r->out.fd = outp[0];
        r->err.fd = errp[0];
    }
    if (opts->verbose) {
        msg("rank %d started, pid %ld", global_rank(opts, rank), (long)pid);
    }
    return 0;
}

/* ---- the store (--store) ---------------------------------------------------------------- */

/* gs_store beside this gsrun (the build tree and the install put them together), else PATH. */
static void store_program(char *path, size_t cap)
{
    ssize_t n = readlink("/proc/self/exe", path, cap - 1);
    char *slash;

    if (n > 0) {
        path[n] = '\0';
        slash = strrchr(path, '/');
        if ((slash != NULL) && ((size_t)(slash - path) + sizeof("/gs_store") <= cap)) {
            memcpy(slash, "/gs_store", sizeof("/gs_store"));
            if (access(path, X_OK) == 0) {
                return;
            }
        }
    }
    snprintf(path, cap, "gs_store");
}

/* Read gs_store's first line ("gs_store: listening on HOST:PORT") within the deadline. */
static int store_read_ready(int fd, char *line, size_t cap)
{
    const uint64_t deadline = now_ns() + GSRUN_STORE_START_NS;
    size_t len = 0;

    while (len + 1 < cap) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        const uint64_t now = now_ns();
        ssize_t got;

        if (now >= deadline) {
            msg("--store: gs_store did not report its address within %llu s",
                GSRUN_STORE_START_NS / 1000000000ULL);
            return -1;
        }
        if (poll(&p, 1, (int)((deadline - now) / 1000000ULL) + 1) < 0) {
            if (errno == EINTR) {
                continue;
            }
            return -1;
        }
        got = read(fd, line + len, cap - 1 - len);
        if (got <= 0) {
            if ((got < 0) && (errno == EINTR || errno == EAGAIN)) {
                continue;
            }
            msg("--store: gs_store exited before it listened (its message is above)");
            return -1;
        }
        len += (size_t)got;
        line[len] = '\0';
        if (strchr(line, '\n') != NULL) {
            *strchr(line, '\n') = '\0';
            return 0;
        }
    }
    return -1;
}

/* The HOST of --store (default: the master address), bracketed when it is an IPv6 address. */
static void store_host(const gsrun_opts_t *opts, char *host, size_t cap)
{
    const char *colon = strrchr(opts->store, ':');
    const char *h = opts->addr;
    size_t hlen = strlen(h);

    if (colon != NULL) {
        h = opts->store;
        hlen = (size_t)(colon - opts->store);
    }
    if ((memchr(h, ':', hlen) != NULL) && (h[0] != '[')) {
        snprintf(host, cap, "[%.*s]", (int)hlen, h);
    } else {
        snprintf(host, cap, "%.*s", (int)hlen, h);
    }
}

/* Node 0 starts gs_store and learns its address; every node sets GS_STORE for its ranks. */
static int store_start(const gsrun_opts_t *opts)
{
    const char *colon = strrchr(opts->store, ':');
    const char *port = (colon != NULL) ? colon + 1 : opts->store;
    char host[GSRUN_MAX_ADDR + 3];
    char listen_at[GSRUN_MAX_ADDR + 16];
    char prog[4096];
    char line[512];
    int inp[2] = {-1, -1};
    int outp[2] = {-1, -1};
    const char *where;
    pid_t pid;

    store_host(opts, host, sizeof(host));
    if (opts->node_rank != 0) {
        snprintf(g_store.env, sizeof(g_store.env), "%s:%s/%s", host, port, GSRUN_STORE_PREFIX);
        return 0;
    }
    snprintf(listen_at, sizeof(listen_at), "%s:%s", host, port);
    store_program(prog, sizeof(prog));
    if ((make_pipe(inp) != 0) || (make_pipe(outp) != 0)) {
        msg("--store: pipe: %s", strerror(errno));
        return -1;
    }
    pid = fork();
    if (pid < 0) {
        msg("--store: fork: %s", strerror(errno));
        return -1;
    }
    if (pid == 0) {
        char *args[] = {prog, "--watch-stdin", listen_at, NULL};

        setpgid(0, 0); /* a terminal's ^C reaches gsrun, which stops the store after the ranks */
        for (int k = 0; k < 3; k++) {
            sigaction(g_fwd_signals[k], &g_orig_action[k], NULL);
        }
        sigaction(SIGPIPE, &g_orig_action[3], NULL);
        dup2(inp[0], STDIN_FILENO);
        dup2(outp[1], STDOUT_FILENO);
        execvp(prog, args);
        fprintf(stderr, "gsrun: --store: cannot execute '%s': %s\n", prog, strerror(errno));
        _exit(GSRUN_EXIT_NOEXEC);
    }
    close(inp[0]);
    close(outp[1]);
    g_store.pid = pid;
    g_store.stdin_fd = inp[1];
    if (store_read_ready(outp[0], line, sizeof(line)) != 0) {
        close(outp[0]);
        return -1;
    }
    close(outp[0]);
    where = strstr(line, "listening on ");
    if (where == NULL) {
        msg("--store: gs_store said '%s', not its address", line);
        return -1;
    }
    where += strlen("listening on ");
    /* The port it chose (for PORT 0), on the host the ranks were told. */
    snprintf(g_store.env, sizeof(g_store.env), "%s:%s/%s", host, strrchr(where, ':') + 1,
             GSRUN_STORE_PREFIX);
    if (opts->verbose) {
        msg("store listening on %s (pid %ld); GS_STORE=%s", where, (long)pid, g_store.env);
    }
    return 0;
}

/* Stop the store: close its stdin (it stops), then wait, bounded, and kill if need be. */
static void store_stop(void)
{
    uint64_t deadline = now_ns() + GSRUN_GRACE_NS;
    bool killed = false;

    if (g_store.stdin_fd >= 0) {
        close(g_store.stdin_fd);
        g_store.stdin_fd = -1;
    }
    while (g_store.pid > 0) {
        int status = 0;
        pid_t r = waitpid(g_store.pid, &status, WNOHANG);

        if ((r == g_store.pid) || ((r < 0) && (errno != EINTR))) {
            break; /* gone (ECHILD: reaped with the ranks already) */
        }
        if (now_ns() >= deadline) {
            if (killed) {
                msg("--store: gs_store (pid %ld) did not exit; leaving it", (long)g_store.pid);
                break;
            }
            kill(g_store.pid, SIGKILL);
            killed = true;
            deadline = now_ns() + GSRUN_GRACE_NS;
        }
        poll(NULL, 0, 10);
    }
    g_store.pid = 0;
}

/* ---- output ----------------------------------------------------------------------------- */

/* Write every iovec fully; on a broken stream, remember it and drop the rest silently. */
static void write_all_iov(int fd, struct iovec *iov, int cnt)
{
    while ((cnt > 0) && !g_out_broken[fd]) {
        ssize_t n = writev(fd, iov, cnt);

        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            g_out_broken[fd] = true;
            return;
        }
        while ((cnt > 0) && ((size_t)n >= iov->iov_len)) {
            n -= (ssize_t)iov->iov_len;
            iov++;
            cnt--;
        }
        if (cnt > 0) {
            iov->iov_base = (char *)iov->iov_base + n;
            iov->iov_len -= (size_t)n;
        }
    }
}

/* One prefixed line: prefix, the buffered start of the line, the rest, and a newline. */
static void emit_line(int fd, const char *prefix, const char *a, size_t alen, const char *b,
                      size_t blen)
{
    struct iovec iov[4];

    iov[0].iov_base = (void *)prefix;
    iov[0].iov_len = strlen(prefix);
    iov[1].iov_base = (void *)a;
    iov[1].iov_len = alen;
    iov[2].iov_base = (void *)b;
    iov[2].iov_len = blen;
    iov[3].iov_base = (void *)"\n";
    iov[3].iov_len = 1;
    write_all_iov(fd, iov, 4);
}

/*
 * Feed bytes read from a rank into its line assembler. Complete lines go out at once; a
 * partial line waits in s->line; a line reaching GSRUN_MAX_LINE bytes goes out as it is and
 * the rest of it continues on a new prefixed line, so one rank cannot hold the others back.
 */
static int stream_feed(gsrun_stream_t *s, const char *prefix, const char *data, size_t len)
{
    while (len > 0) {
        const char *nl = memchr(data, '\n', len);
        size_t seg = (nl != NULL) ? (size_t)(nl - data) : len;
        size_t room = GSRUN_MAX_LINE - s->len;

        if ((nl != NULL) && (seg <= room)) {
            emit_line(s->out_fd, prefix, s->line, s->len, data, seg);
            s->len = 0;
            data += seg + 1;
            len -= seg + 1;
            continue;
        }
        if (seg > room) {
            /* Too long: emit a full-size piece and continue the line on a new one. */
            emit_line(s->out_fd, prefix, s->line, s->len, data, room);
            s->len = 0;
            data += room;
            len -= room;
            continue;
        }
        /* No newline and it fits: keep it for later. */
        if (s->line == NULL) {
            s->line = malloc(GSRUN_MAX_LINE);
            if (s->line == NULL) {
                msg("out of memory for an output line buffer");
                return -1;
            }
        }
        memcpy(s->line + s->len, data, seg);
        s->len += seg;
        len = 0;
    }
    return 0;
}

/* EOF or error on a stream: flush a final line that had no newline, and close. */
static void stream_close(gsrun_stream_t *s, const char *prefix)
{
    if (s->len > 0) {
        emit_line(s->out_fd, prefix, s->line, s->len, "", 0);
        s->len = 0;
    }
    free(s->line);
    s->line = NULL;
    if (s->fd >= 0) {
        close(s->fd);
        s->fd = -1;
    }
}

/* Read what is there (one chunk), then hand it to the assembler. */
static void stream_read(gsrun_stream_t *s, const char *prefix, char *buf)
{
    ssize_t n = read(s->fd, buf, GSRUN_READ_CHUNK);

    if (n > 0) {
        /*
         * NOTE: once gsrun's own stdout (or stderr) is gone, close the rank's pipe too, so the
         * rank gets EPIPE/SIGPIPE as it would writing there directly (think "gsrun ... | head").
         */
        if ((stream_feed(s, prefix, buf, (size_t)n) != 0) || g_out_broken[s->out_fd]) {
            stream_close(s, prefix);
        }
    } else if ((n == 0) || ((errno != EINTR) && (errno != EAGAIN))) {
        stream_close(s, prefix);
    }
}

/* ---- supervision ------------------------------------------------------------------------ */

typedef struct {
    const gsrun_opts_t *opts;
    gsrun_rank_t *ranks;
    int live;      /* ranks not yet reaped */
    int exit_code; /* decided by the first event that stops the job; -1 while none */
    gsrun_phase_t phase;
    int stop_signal;   /* what PHASE_TERM sent: SIGTERM or the forwarded signal */
    uint64_t deadline; /* of the current phase; 0 for none */
} gsrun_job_t;

static bool rank_has_pipes(const gsrun_rank_t *r)
{
    return (r->out.fd >= 0) || (r->err.fd >= 0);
}

/*
 * Signal every rank's process group. A reaped rank's group is signalled only while its pipes
 * are still open: then a descendant, most likely still in that group, holds them; once they are
 * closed the group id may be reused by an unrelated process and is left alone.
 */
static void signal_all(gsrun_job_t *job, int sig)
{
    int i;

    for (i = 0; i < job->opts->nranks; i++) {
        gsrun_rank_t *r = &job->ranks[i];

        if ((r->pid <= 0) || (r->reaped && !rank_has_pipes(r))) {
            continue;
        }
        if ((kill(-r->pid, sig) != 0) && !r->reaped) {
            /* The group does not exist (both setpgid calls failed): signal the rank alone. */
            kill(r->pid, sig);
        }
    }
}

static void start_stop(gsrun_job_t *job, int sig, int exit_code)
{
    if (job->exit_code < 0) {
        job->exit_code = exit_code;
    }
    signal_all(job, sig);
    job->stop_signal = sig;
    job->phase = PHASE_TERM;
    job->deadline = now_ns() + GSRUN_GRACE_NS;
}

static void escalate_kill(gsrun_job_t *job)
{
    signal_all(job, SIGKILL);
    job->phase = PHASE_KILL;
    job->deadline = now_ns() + GSRUN_GRACE_NS;
}

static bool core_dumped(int status)
{
#ifdef WCOREDUMP
    return WCOREDUMP(status) != 0;
#else
    (void)status;
    return false;
#endif
}

static void handle_exit(gsrun_job_t *job, int rank, int status)
{
    int code = 0;

    job->ranks[rank].reaped = true;
    job->live--;
    if (WIFEXITED(status)) {
        code = WEXITSTATUS(status);
        if ((code != 0) && (job->exit_code < 0)) {
            msg("rank %d exited with status %d", global_rank(job->opts, rank), code);
        }
    } else if (WIFSIGNALED(status)) {
        int sig = WTERMSIG(status);

        code = 128 + sig;
        if (job->exit_code < 0) {
            msg("rank %d killed by signal %d (%s)%s", global_rank(job->opts, rank), sig,
                signal_name(sig), core_dumped(status) ? ", core dumped" : "");
        }
    }
    if ((code != 0) && (job->exit_code < 0)) {
        start_stop(job, SIGTERM, code);
    } else if (job->opts->verbose) {
        msg("rank %d exited with status %d", global_rank(job->opts, rank), code);
    }
}

static void reap(gsrun_job_t *job)
{
    int guard;

    /* Bounded: at most one reap per rank. */
    for (guard = 0; (guard < job->opts->nranks) && (job->live > 0); guard++) {
        int status = 0;
        pid_t pid = waitpid(-1, &status, WNOHANG);
        int i;

        if (pid <= 0) {
            if ((pid < 0) && (errno == EINTR)) {
                continue;
            }
            break;
        }
        for (i = 0; i < job->opts->nranks; i++) {
            if (job->ranks[i].pid == pid) {
                handle_exit(job, i, status);
                break;
            }
        }
    }
}

static void handle_signals(gsrun_job_t *job)
{
    sigset_t block;
    sigset_t old;
    int counts[3];
    char drain[64];
    int k;

    while (read(g_wake_pipe[0], drain, sizeof(drain)) > 0) {
    }
    sigemptyset(&block);
    for (k = 0; k < 3; k++) {
        sigaddset(&block, g_fwd_signals[k]);
    }
    sigaddset(&block, SIGCHLD);
    sigprocmask(SIG_BLOCK, &block, &old);
    for (k = 0; k < 3; k++) {
        counts[k] = g_sig_count[k];
        g_sig_count[k] = 0;
    }
    sigprocmask(SIG_SETMASK, &old, NULL);

    for (k = 0; k < 3; k++) {
        int sig = g_fwd_signals[k];

        if (counts[k] == 0) {
            continue;
        }
        if ((job->phase == PHASE_TERM) || (job->phase == PHASE_KILL)) {
            if (job->phase == PHASE_TERM) {
                msg("got %s again, killing all ranks", signal_name(sig));
                escalate_kill(job);
            }
            continue;
        }
        msg("got %s, forwarding it to all ranks", signal_name(sig));
        start_stop(job, sig, 128 + sig);
        if (counts[k] > 1) {
            escalate_kill(job);
        }
    }
}

/* The current phase's deadline passed. Returns true when gsrun should stop waiting. */
static bool handle_deadline(gsrun_job_t *job)
{
    int i;

    switch (job->phase) {
    case PHASE_RUNNING:
        msg("timeout after %g s, stopping all ranks", job->opts->timeout_s);
        start_stop(job, SIGTERM, GSRUN_EXIT_TIMEOUT);
        return false;
    case PHASE_DRAIN:
        if (job->opts->verbose) {
            msg("descendants of finished ranks still hold their output open; killing them");
        }
        escalate_kill(job);
        return false;
    case PHASE_TERM:
        if (job->live > 0) {
            msg("%d rank(s) still running %llu s after %s, sending SIGKILL", job->live,
                GSRUN_GRACE_NS / 1000000000ULL, signal_name(job->stop_signal));
        }
        escalate_kill(job);
        return false;
    case PHASE_KILL:
        /* Give up: a process stuck in the kernel cannot be waited for forever. */
        for (i = 0; i < job->opts->nranks; i++) {
            if (!job->ranks[i].reaped) {
                msg("rank %d (pid %ld) did not exit after SIGKILL; not waiting for it",
                    global_rank(job->opts, i), (long)job->ranks[i].pid);
            }
        }
        return true;
    }
    return true;
}

static int poll_timeout_ms(const gsrun_job_t *job)
{
    uint64_t now = now_ns();
    uint64_t left;

    if (job->deadline == 0) {
        return -1;
    }
    if (job->deadline <= now) {
        return 0;
    }
    left = (job->deadline - now + 999999) / 1000000;
    return (left > INT_MAX) ? INT_MAX : (int)left;
}

static bool any_pipes(const gsrun_job_t *job)
{
    int i;

    for (i = 0; i < job->opts->nranks; i++) {
        if (rank_has_pipes(&job->ranks[i])) {
            return true;
        }
    }
    return false;
}

/* Fill pfds with the wake pipe and every open stream; owner[] maps entries to ranks. */
static int build_pollfds(const gsrun_job_t *job, struct pollfd *pfds, gsrun_stream_t **streams,
                         int *owner)
{
    int npfd = 0;
    int i;
    int k;

    pfds[npfd].fd = g_wake_pipe[0];
    pfds[npfd].events = POLLIN;
    pfds[npfd].revents = 0;
    streams[npfd] = NULL;
    owner[npfd] = -1;
    npfd++;
    for (i = 0; i < job->opts->nranks; i++) {
        gsrun_stream_t *pair[2] = {&job->ranks[i].out, &job->ranks[i].err};

        for (k = 0; k < 2; k++) {
            if (pair[k]->fd >= 0) {
                pfds[npfd].fd = pair[k]->fd;
                pfds[npfd].events = POLLIN;
                pfds[npfd].revents = 0;
                streams[npfd] = pair[k];
                owner[npfd] = i;
                npfd++;
            }
        }
    }
    return npfd;
}

/*
 * The main loop: relay output, reap ranks, react to signals and deadlines. It ends when every
 * rank is reaped and every pipe is closed, or when the SIGKILL phase's deadline passes.
 */
static int supervise(gsrun_job_t *job)
{
    const int n = job->opts->nranks;
    const size_t cap = (size_t)n * 2 + 1;
    struct pollfd *pfds = calloc(cap, sizeof(*pfds));
    gsrun_stream_t **streams = calloc(cap, sizeof(*streams));
    int *owner = calloc(cap, sizeof(*owner));
    char(*prefixes)[16] = calloc((size_t)n, sizeof(*prefixes));
    char *buf = malloc(GSRUN_READ_CHUNK);
    int rc = 0;
    int i;

    if ((pfds == NULL) || (streams == NULL) || (owner == NULL) || (prefixes == NULL) ||
        (buf == NULL)) {
        msg("out of memory");
        signal_all(job, SIGKILL);
        rc = -1;
        goto out_free;
    }
    for (i = 0; i < n; i++) {
        snprintf(prefixes[i], sizeof(prefixes[i]), "[%d] ", global_rank(job->opts, i));
    }

    for (;;) {
        int npfd;
        int ret;

        if ((job->live == 0) && !any_pipes(job)) {
            break;
        }
        if ((job->live == 0) && (job->phase == PHASE_RUNNING)) {
            /* Every rank exited 0; give descendants holding the pipes a grace period. */
            job->phase = PHASE_DRAIN;
            job->deadline = now_ns() + GSRUN_GRACE_NS;
        }
        npfd = build_pollfds(job, pfds, streams, owner);
        ret = poll(pfds, (nfds_t)npfd, poll_timeout_ms(job));
        if ((ret < 0) && (errno != EINTR)) {
            msg("poll: %s", strerror(errno));
            signal_all(job, SIGKILL);
            rc = -1;
            break;
        }
        for (i = 1; (ret > 0) && (i < npfd); i++) {
            if (pfds[i].revents != 0) {
                stream_read(streams[i], prefixes[owner[i]], buf);
            }
        }
        handle_signals(job);
        reap(job);
        if ((job->deadline != 0) && (now_ns() >= job->deadline) && handle_deadline(job)) {
            break;
        }
    }

out_free:
    if (prefixes != NULL) {
        /* Flush whatever partial lines are left and close every pipe. */
        for (i = 0; i < n; i++) {
            stream_close(&job->ranks[i].out, prefixes[i]);
            stream_close(&job->ranks[i].err, prefixes[i]);
        }
    }
    free(pfds);
    free(streams);
    free(owner);
    free(prefixes);
    free(buf);
    return rc;
}

int main(int argc, char **argv)
{
    gsrun_opts_t opts;
    gsrun_job_t job;
    gsrun_rank_t *ranks;
    int i;

    parse_args(argc, argv, &opts);
    ensure_std_fds();
    if (!program_found(opts.argv[0])) {
        msg("cannot execute '%s': %s", opts.argv[0],
            (strchr(opts.argv[0], '/') != NULL) ? strerror(errno) : "not found in PATH");
        return GSRUN_EXIT_NOEXEC;
    }
    if (opts.port == 0) {
        opts.port = find_free_port();
        if (opts.port <= 0) {
            return GSRUN_EXIT_INTERNAL;
        }
    }
    if (opts.verbose) {
        msg("launching %d rank(s) (node %d of %d), master %s:%d", opts.nranks, opts.node_rank,
            opts.nnodes, opts.addr, opts.port);
    }
    if (opts.tag_output && (ensure_fd_limit(opts.nranks) != 0)) {
        return GSRUN_EXIT_INTERNAL;
    }
    ranks = calloc((size_t)opts.nranks, sizeof(*ranks));
    if (ranks == NULL) {
        msg("out of memory");
        return GSRUN_EXIT_INTERNAL;
    }
    for (i = 0; i < opts.nranks; i++) {
        ranks[i].out.fd = -1;
        ranks[i].out.out_fd = STDOUT_FILENO;
        ranks[i].err.fd = -1;
        ranks[i].err.out_fd = STDERR_FILENO;
    }
    if (install_signals() != 0) {
        free(ranks);
        return GSRUN_EXIT_INTERNAL;
    }
    fflush(NULL); /* nothing buffered may be written twice by the children */
    if ((opts.store != NULL) && (store_start(&opts) != 0)) {
        store_stop();
        free(ranks);
        return GSRUN_EXIT_INTERNAL;
    }

    memset(&job, 0, sizeof(job));
    job.opts = &opts;
    job.ranks = ranks;
    job.exit_code = -1;
    job.phase = PHASE_RUNNING;
    if (opts.timeout_s > 0.0) {
        job.deadline = now_ns() + (uint64_t)(opts.timeout_s * 1e9);
    }
    for (i = 0; i < opts.nranks; i++) {
        if (launch_rank(&opts, i, &ranks[i]) != 0) {
            /* Stop the ranks already started; the loop below reaps them. */
            job.exit_code = GSRUN_EXIT_INTERNAL;
            start_stop(&job, SIGTERM, GSRUN_EXIT_INTERNAL);
            break;
        }
        job.live++;
        if ((g_sig_count[0] != 0) || (g_sig_count[1] != 0) || (g_sig_count[2] != 0)) {
            break; /* interrupted while launching: the loop below forwards it to those started */
        }
    }
    if ((supervise(&job) != 0) && (job.exit_code < 0)) {
        job.exit_code = GSRUN_EXIT_INTERNAL;
    }
    store_stop();
    free(ranks);
    return (job.exit_code < 0) ? 0 : job.exit_code;
}
