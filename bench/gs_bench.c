/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gs-bench: collective benchmark for gradsync in the conventions of
 * nccl-tests (size, count, type, redop, root, time, algbw, busbw, #wrong),
 * so that its numbers read like everyone else's. Written against the public
 * API only. Launch one process per rank, e.g.
 *   gsrun -n 4 gs-bench allreduce -b 8 -e 256M -f 2 -w 5 -n 20 --check
 * For each size: warm-up iterations, a barrier, then every timed iteration
 * is measured on every rank; the reported time is the median over
 * iterations of the slowest rank's time (the per-iteration maximum across
 * ranks is taken with gs_allreduce(GS_OP_MAX) on f64). With --check the
 * inputs are refilled with integer-exact per-rank patterns after the timed
 * loop, the collective runs once more and every output element is compared
 * with a serial reference. Only rank 0 prints. Exit status: 0 success,
 * 1 a gradsync error or wrong results, 2 a usage error.
 * allreduce --codec NAME [--ef] [--ratio R] runs the compressed all-reduce
 * on normal f32 data and adds the bytes that crossed the wire (the
 * gs_comm_counters bytes_sent delta per call) and the relative error against
 * the exact result (gs_bench_codec.c; docs/bench.md, "Compressed all-reduce").
 * With --algo auto (the default) every row names the algorithm that ran
 * (gs_comm_stats' last_algo right after the timed loop, checked equal on
 * every rank). --stats prints, after the run, each rank's slowest link: the
 * peer it spent the most time blocked on (gs_comm_peer_stats, gathered to
 * rank 0), the most waited-on rank and the slowest link overall
 * (docs/stats.md explains how to read it).
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gs_bench_codec.h"

#include "gradsync/compress.h"
#include "gradsync/gradsync.h"

#define BENCH_EXIT_FAIL 1
#define BENCH_EXIT_USAGE 2
#define BENCH_TAG 0x6273u /* "bs": tag of the sendrecv benchmark */
#define BENCH_ALIGN 64

/* ===================================================================== */
/* Tables (names come from the public X-macro tables)                    */
/* ===================================================================== */

typedef struct dtype_info {
    gs_dtype_t dtype;
    size_t size;
    const char *name;
} dtype_info_t;

#define BENCH_DTYPE_ROW(_name, _value, _size, _str) {_name, _size, _str},
static const dtype_info_t dtype_table[] = {GS_DTYPE_MAP(BENCH_DTYPE_ROW)};
#undef BENCH_DTYPE_ROW

typedef struct name_info {
    int value;
    const char *name;
} name_info_t;

#define BENCH_NAME_ROW(_name, _value, _str) {_name, _str},
static const name_info_t op_table[] = {GS_OP_MAP(BENCH_NAME_ROW)};
static const name_info_t algo_table[] = {GS_ALGO_MAP(BENCH_NAME_ROW)};
#undef BENCH_NAME_ROW

#define BENCH_COUNTOF(_a) (sizeof(_a) / sizeof((_a)[0]))

/*
 * How the size column maps to the call, and the bus-bandwidth factor of
 * nccl-tests' PERFORMANCE.md. BLOCKED collectives take the size as the total
 * buffer (count per rank = size / nranks), as nccl-tests does.
 */
typedef enum coll_kind {
    COLL_ALLREDUCE,
    COLL_BROADCAST,
    COLL_REDUCE,
    COLL_ALLGATHER,
    COLL_REDUCE_SCATTER,
    COLL_ALLTOALL,
    COLL_SENDRECV,
    COLL_BARRIER
} coll_kind_t;

typedef struct coll_info {
    coll_kind_t kind;
    const char *name;
    bool blocked;   /* size = count * nranks elements */
    bool reduces;   /* uses --op */
    bool rooted;    /* uses --root */
} coll_info_t;

static const coll_info_t coll_table[] = {
    {COLL_ALLREDUCE, "allreduce", false, true, false},
    {COLL_BROADCAST, "broadcast", false, false, true},
    {COLL_REDUCE, "reduce", false, true, true},
    {COLL_ALLGATHER, "allgather", true, false, false},
    {COLL_REDUCE_SCATTER, "reduce_scatter", true, true, false},
    {COLL_ALLTOALL, "alltoall", true, false, false},
    {COLL_SENDRECV, "sendrecv", false, false, false},
    {COLL_BARRIER, "barrier", false, false, false},
};

#define BENCH_MAX_ALGOS GS_ALGO_COUNT /* names are unique in a list */

typedef enum out_format { OUT_TEXT, OUT_CSV, OUT_JSON } out_format_t;

typedef struct bench {
    const coll_info_t *coll;
    const dtype_info_t *dt;
    gs_op_t op;
    gs_algo_t algo;          /* the algorithm of the row being measured */
    gs_algo_t algos[BENCH_MAX_ALGOS]; /* --algo LIST: measured in turn at every size */
    int nalgos;
    int rounds;              /* --rounds: passes over the list per size, rows show medians */
    int root;
    size_t min_bytes;
    size_t max_bytes;
    size_t factor;
    int warmup;
    int iters;
    bool check;
    bool inplace;
    bool use_codec;          /* --codec given (allreduce only) */
    bool use_ef;             /* --ef: one gs_ef_t per size, reset before the error run */
    const char *codec_name;
    gs_codec_config_t codec;
    gs_ef_t ef;
    float *codec_input;      /* in-place --codec runs restore their input from here */
    out_format_t format;
    const char *out_path;
    const char *transport;   /* --transport NAME, or NULL for GS_TRANSPORT/default */
    bool stats;              /* --stats: print the slowest link per rank after the run */
    bool show_algo;          /* --algo auto: a column with the algorithm that ran */
    /* runtime */
    gs_comm_t comm;
    int rank;
    int nranks;
    FILE *out;
    unsigned char *sendbuf;
    unsigned char *recvbuf;
    double *times;
} bench_t;

/* ===================================================================== */
/* Errors and usage                                                      */
/* ===================================================================== */

static void usage(FILE *f)
{
    fprintf(f,
            "usage: gs-bench COLLECTIVE [options]   (launch with: gsrun -n N gs-bench ...)\n"
            "collectives: allreduce broadcast reduce allgather reduce_scatter alltoall\n"
            "             sendrecv (ring neighbour exchange) barrier\n"
            "       gs-bench codec [-e BYTES] [-w N] [-n N] [--zstd off|on|auto]  (codec throughput)\n"
            "  -b, --minbytes SIZE   smallest size in bytes (K/M/G suffixes), default 8\n"
            "  -e, --maxbytes SIZE   largest size in bytes, default 32M\n"
            "  -f, --stepfactor N    multiply the size by N (>= 2), default 2\n"
            "  -w, --warmup N        warm-up iterations per size, default 5\n"
            "  -n, --iters N         timed iterations per size, default 20\n"
            "  -r, --root R          root of broadcast/reduce, default 0\n"
            "      --algo LIST       allreduce algorithm, or a comma list measured in turn at\n"
            "                        every size (with auto: auto/best per size):");
    for (size_t i = 0; i < BENCH_COUNTOF(algo_table); i++) {
        fprintf(f, " %s", algo_table[i].name);
    }
    fprintf(f, "\n      --dtype NAME      ");
    for (size_t i = 0; i < BENCH_COUNTOF(dtype_table); i++) {
        fprintf(f, "%s%s", i ? "|" : "", dtype_table[i].name);
    }
    fprintf(f, ", default f32\n      --op NAME         ");
    for (size_t i = 0; i < BENCH_COUNTOF(op_table); i++) {
        fprintf(f, "%s%s", i ? "|" : "", op_table[i].name);
    }
    fprintf(f, ", default sum\n"
               "      --rounds N        passes over the --algo list per size, interleaved;\n"
               "                        rows show the median of the passes, default 1\n"
               "      --transport NAME  tcp|mpi (mpi: launch with mpirun), default GS_TRANSPORT\n"
               "  -c, --check           verify every size (exit 1 when any element is wrong)\n"
               "      --stats           after the run, print each rank's slowest link (the peer\n"
               "                        it waited on longest) and the most waited-on rank\n"
               "      --inplace         in-place buffers (default out-of-place)\n"
               "      --codec NAME      allreduce through a codec (f32, sum|avg):%s\n"
               "      --ef              with error feedback (one gs_ef_t per size)\n"
               "      --ratio R         topk/randk fraction kept, default 0.01\n"
               "      --csv | --json    machine-readable output (rank 0)\n"
               "  -o, --out FILE        write the output to FILE instead of stdout (rank 0)\n"
               "  -h, --help            this text\n"
               "sizes are total buffer bytes as in nccl-tests (allgather: receive buffer,\n"
               "reduce_scatter: send buffer, alltoall: either buffer).\n",
            gs_bench_codec_names());
}

static _Noreturn void usage_error(const char *msg, const char *arg)
{
    fprintf(stderr, "gs-bench: %s%s%s\n", msg, arg ? ": " : "", arg ? arg : "");
    fprintf(stderr, "try 'gs-bench --help'\n");
    exit(BENCH_EXIT_USAGE);
}

static _Noreturn void die_gs(const bench_t *b, const char *what, gs_status_t status)
{
    fprintf(stderr, "gs-bench: rank %d: %s failed: %s (%d): %s\n", b ? b->rank : -1, what,
            gs_status_name(status), (int)status, gs_last_error());
    fflush(NULL);
    exit(BENCH_EXIT_FAIL);
}

/* Check a gradsync call; on error print gs_last_error() and exit 1. */
#define BENCH_CHECK(_b, _call)                  \
    do {                                        \
        gs_status_t st_ = (_call);              \
        if (st_ != GS_OK) {                     \
            die_gs((_b), #_call, st_);          \
        }                                       \
    } while (0)

/* ===================================================================== */
/* Argument parsing                                                      */
/* ===================================================================== */

/* Parse "123", "4K", "256M", "1G" (powers of 1024) into *out. */
static bool parse_size(const char *s, size_t *out)
{
    char *end = NULL;
    errno = 0;
    if (s[0] == '-' || s[0] == '\0') {
        return false;
    }
    unsigned long long v = strtoull(s, &end, 10);
    if (errno != 0 || end == s) {
        return false;
    }
    unsigned long long mult = 1;
    switch (*end) {
    case '\0':
        break;
    case 'k': case 'K':
        mult = 1ull << 10;
        end++;
        break;
    case 'm': case 'M':
        mult = 1ull << 20;
        end++;
        break;
    case 'g': case 'G':
        mult = 1ull << 30;
        end++;
        break;
    default:
        return false;
    }
    if (*end == 'B' || *end == 'b') {
        end++;
    }
    if (*end != '\0' || v > (unsigned long long)SIZE_MAX / mult) {
        return false;
    }
    *out = (size_t)(v * mult);
    return true;
}

static int parse_int(const char *s, int lo, int hi, const char *what)
{
    char *end = NULL;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi) {
        fprintf(stderr, "gs-bench: %s must be an integer in [%d, %d], got '%s'\n", what, lo, hi,
                s);
        exit(BENCH_EXIT_USAGE);
    }
    return (int)v;
}

static int lookup_name(const name_info_t *table, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++) {
        if (strcmp(table[i].name, name) == 0) {
            return table[i].value;
        }
    }
    return -1;
}

enum { OPT_ALGO = 256, OPT_DTYPE, OPT_OP, OPT_INPLACE, OPT_CSV, OPT_JSON, OPT_CODEC, OPT_EF,
       OPT_RATIO, OPT_TRANSPORT, OPT_STATS, OPT_ROUNDS };

/* --algo NAME[,NAME...]: each a known algorithm, at most BENCH_MAX_ALGOS, no repeats. */
static void parse_algo_list(bench_t *b, const char *text)
{
    char name[64];
    const char *s = text;

    b->nalgos = 0;
    for (;;) {
        const char *end = strchr(s, ',');
        const size_t len = (end != NULL) ? (size_t)(end - s) : strlen(s);
        int v;

        if ((len == 0) || (len >= sizeof(name))) {
            usage_error("--algo wants NAME or NAME,NAME,...", text);
        }
        memcpy(name, s, len);
        name[len] = '\0';
        v = lookup_name(algo_table, BENCH_COUNTOF(algo_table), name);
        if (v < 0) {
            usage_error("unknown --algo", name);
        }
        for (int i = 0; i < b->nalgos; i++) {
            if (b->algos[i] == (gs_algo_t)v) {
                usage_error("--algo names an algorithm twice", name);
            }
        }
        if (b->nalgos == BENCH_MAX_ALGOS) {
            usage_error("--algo names too many algorithms", text);
        }
        b->algos[b->nalgos++] = (gs_algo_t)v;
        if (end == NULL) {
            break;
        }
        s = end + 1;
    }
    b->algo = b->algos[0];
}

static void parse_args(bench_t *b, int argc, char **argv)
{
    static const struct option longopts[] = {
        {"minbytes", required_argument, NULL, 'b'},
        {"maxbytes", required_argument, NULL, 'e'},
        {"stepfactor", required_argument, NULL, 'f'},
        {"warmup", required_argument, NULL, 'w'},
        {"iters", required_argument, NULL, 'n'},
        {"root", required_argument, NULL, 'r'},
        {"check", no_argument, NULL, 'c'},
        {"out", required_argument, NULL, 'o'},
        {"help", no_argument, NULL, 'h'},
        {"algo", required_argument, NULL, OPT_ALGO},
        {"dtype", required_argument, NULL, OPT_DTYPE},
        {"op", required_argument, NULL, OPT_OP},
        {"inplace", no_argument, NULL, OPT_INPLACE},
        {"csv", no_argument, NULL, OPT_CSV},
        {"json", no_argument, NULL, OPT_JSON},
        {"codec", required_argument, NULL, OPT_CODEC},
        {"ef", no_argument, NULL, OPT_EF},
        {"ratio", required_argument, NULL, OPT_RATIO},
        {"transport", required_argument, NULL, OPT_TRANSPORT},
        {"stats", no_argument, NULL, OPT_STATS},
        {"rounds", required_argument, NULL, OPT_ROUNDS},
        {NULL, 0, NULL, 0},
    };
    bool algo_set = false, op_set = false, root_set = false, ratio_set = false;

    if (argc < 2) {
        usage(stderr);
        exit(BENCH_EXIT_USAGE);
    }
    if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
        usage(stdout);
        exit(0);
    }
    for (size_t i = 0; i < BENCH_COUNTOF(coll_table); i++) {
        if (strcmp(argv[1], coll_table[i].name) == 0) {
            b->coll = &coll_table[i];
        }
    }
    if (b->coll == NULL) {
        usage_error("unknown collective", argv[1]);
    }

    optind = 1;
    int c;
    while ((c = getopt_long(argc - 1, argv + 1, "b:e:f:w:n:r:co:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'b':
            if (!parse_size(optarg, &b->min_bytes)) {
                usage_error("bad -b size", optarg);
            }
            break;
        case 'e':
            if (!parse_size(optarg, &b->max_bytes)) {
                usage_error("bad -e size", optarg);
            }
            break;
        case 'f':
            b->factor = (size_t)parse_int(optarg, 2, 1 << 20, "-f");
            break;
        case 'w':
            b->warmup = parse_int(optarg, 0, 1000000, "-w");
            break;
        case 'n':
            b->iters = parse_int(optarg, 1, 1000000, "-n");
            break;
        case 'r':
            b->root = parse_int(optarg, 0, 16777215, "--root");
            root_set = true;
            break;
        case 'c':
            b->check = true;
            break;
        case 'o':
            b->out_path = optarg;
            break;
        case 'h':
            usage(stdout);
            exit(0);
        case OPT_ALGO:
            parse_algo_list(b, optarg);
            algo_set = true;
            break;
        case OPT_ROUNDS:
            b->rounds = parse_int(optarg, 1, 1000, "--rounds");
            break;
        case OPT_DTYPE:
            b->dt = NULL;
            for (size_t i = 0; i < BENCH_COUNTOF(dtype_table); i++) {
                if (strcmp(dtype_table[i].name, optarg) == 0) {
                    b->dt = &dtype_table[i];
                }
            }
            if (b->dt == NULL) {
                usage_error("unknown --dtype", optarg);
            }
            break;
        case OPT_OP: {
            int v = lookup_name(op_table, BENCH_COUNTOF(op_table), optarg);
            if (v < 0) {
                usage_error("unknown --op", optarg);
            }
            b->op = (gs_op_t)v;
            op_set = true;
            break;
        }
        case OPT_INPLACE:
            b->inplace = true;
            break;
        case OPT_CSV:
            b->format = OUT_CSV;
            break;
        case OPT_JSON:
            b->format = OUT_JSON;
            break;
        case OPT_CODEC:
            if (gs_bench_codec_lookup(optarg, &b->codec.kind) != 0) {
                usage_error("unknown --codec", optarg);
            }
            b->use_codec = true;
            b->codec_name = optarg;
            break;
        case OPT_EF:
            b->use_ef = true;
            break;
        case OPT_RATIO: {
            char *end = NULL;
            b->codec.ratio = strtod(optarg, &end);
            if (end == optarg || *end != '\0' || !(b->codec.ratio > 0.0) ||
                !(b->codec.ratio <= 1.0)) {
                usage_error("--ratio must be in (0, 1]", optarg);
            }
            ratio_set = true;
            break;
        }
        case OPT_TRANSPORT:
            if ((strcmp(optarg, "tcp") != 0) && (strcmp(optarg, "mpi") != 0)) {
                usage_error("unknown --transport (tcp or mpi)", optarg);
            }
            b->transport = optarg;
            break;
        case OPT_STATS:
            b->stats = true;
            break;
        default:
            usage_error("bad option", NULL);
        }
    }
    if (optind != argc - 1) {
        usage_error("unexpected argument", argv[optind + 1]);
    }
    if (b->min_bytes > b->max_bytes) {
        usage_error("-b is larger than -e", NULL);
    }
    if (algo_set && (b->nalgos > 1 || b->algo != GS_ALGO_AUTO) &&
        b->coll->kind != COLL_ALLREDUCE) {
        usage_error("--algo applies to allreduce only (set GS_ALGO for the others)", NULL);
    }
    if (op_set && !b->coll->reduces) {
        usage_error("--op applies to allreduce, reduce and reduce_scatter only", NULL);
    }
    if (root_set && !b->coll->rooted) {
        usage_error("--root applies to broadcast and reduce only", NULL);
    }
    if (b->op == GS_OP_AVG && b->coll->reduces &&
        (b->dt->dtype == GS_DTYPE_I8 || b->dt->dtype == GS_DTYPE_U8 ||
         b->dt->dtype == GS_DTYPE_I32 || b->dt->dtype == GS_DTYPE_I64)) {
        usage_error("--op avg needs a floating-point --dtype", NULL);
    }
    if (b->inplace && b->coll->kind == COLL_SENDRECV) {
        usage_error("--inplace does not apply to sendrecv", NULL);
    }
    if ((b->use_ef || ratio_set) && !b->use_codec) {
        usage_error("--ef and --ratio need --codec", NULL);
    }
    if (b->use_codec) {
        if (b->coll->kind != COLL_ALLREDUCE) {
            usage_error("--codec applies to allreduce only", NULL);
        }
        if (b->dt->dtype != GS_DTYPE_F32 || (b->op != GS_OP_SUM && b->op != GS_OP_AVG)) {
            usage_error("--codec needs --dtype f32 and --op sum or avg", NULL);
        }
        if (b->nalgos > 1 || b->algo != GS_ALGO_AUTO || b->check) {
            usage_error("--codec excludes --algo and --check (it reports rel.err instead)", NULL);
        }
    }
}

/* ===================================================================== */
/* Element access (f16 / bf16 converted here: the public API has no helper) */
/* ===================================================================== */

static float bits_to_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof(f));
    return f;
}

static uint32_t f32_to_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof(u));
    return u;
}

/* IEEE binary16 from binary32, round to nearest even (F. Giesen's method). */
static uint16_t f32_to_f16(float f)
{
    const uint32_t f32_inf = 255u << 23;
    const uint32_t f16_max = (127u + 16u) << 23;
    const uint32_t denorm_magic = ((127u - 15u) + (23u - 10u) + 1u) << 23;
    uint32_t x = f32_to_bits(f);
    uint32_t sign = x & 0x80000000u;
    uint16_t o;

    x ^= sign;
    if (x >= f16_max) {
        o = (x > f32_inf) ? 0x7e00u : 0x7c00u;
    } else if (x < (113u << 23)) {
        float v = bits_to_f32(x) + bits_to_f32(denorm_magic);
        o = (uint16_t)(f32_to_bits(v) - denorm_magic);
    } else {
        uint32_t mant_odd = (x >> 13) & 1u;
        x += ((uint32_t)(15 - 127) << 23) + 0xfffu; /* rebias; wraps mod 2^32 */
        x += mant_odd;
        o = (uint16_t)(x >> 13);
    }
    return (uint16_t)(o | (sign >> 16));
}

static float f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t mant = h & 0x3ffu;

    if (exp == 0) {
        float v = ldexpf((float)mant, -24);
        return sign ? -v : v;
    }
    if (exp == 31) {
        return bits_to_f32(sign | 0x7f800000u | (mant << 13));
    }
    return bits_to_f32(sign | ((exp + 112u) << 23) | (mant << 13));
}

static uint16_t f32_to_bf16(float f)
{
    uint32_t x = f32_to_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) {
        return (uint16_t)((x >> 16) | 0x40u); /* quiet NaN */
    }
    x += 0x7fffu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
}

static double get_elem(const void *buf, size_t i, gs_dtype_t dt)
{
    const unsigned char *p = buf;
    switch (dt) {
    case GS_DTYPE_F32: { float v; memcpy(&v, p + 4 * i, 4); return v; }
    case GS_DTYPE_F64: { double v; memcpy(&v, p + 8 * i, 8); return v; }
    case GS_DTYPE_F16: { uint16_t v; memcpy(&v, p + 2 * i, 2); return f16_to_f32(v); }
    case GS_DTYPE_BF16: { uint16_t v; memcpy(&v, p + 2 * i, 2); return bits_to_f32((uint32_t)v << 16); }
    case GS_DTYPE_I8: return (double)(int8_t)p[i];
    case GS_DTYPE_U8: return (double)p[i];
    case GS_DTYPE_I32: { int32_t v; memcpy(&v, p + 4 * i, 4); return v; }
    case GS_DTYPE_I64: { int64_t v; memcpy(&v, p + 8 * i, 8); return (double)v; }
    default: return NAN;
    }
}

static void set_elem(void *buf, size_t i, gs_dtype_t dt, double x)
{
    unsigned char *p = buf;
    switch (dt) {
    case GS_DTYPE_F32: { float v = (float)x; memcpy(p + 4 * i, &v, 4); break; }
    case GS_DTYPE_F64: { memcpy(p + 8 * i, &x, 8); break; }
    case GS_DTYPE_F16: { uint16_t v = f32_to_f16((float)x); memcpy(p + 2 * i, &v, 2); break; }
    case GS_DTYPE_BF16: { uint16_t v = f32_to_bf16((float)x); memcpy(p + 2 * i, &v, 2); break; }
    case GS_DTYPE_I8: p[i] = (unsigned char)(int8_t)x; break;
    case GS_DTYPE_U8: p[i] = (unsigned char)x; break;
    case GS_DTYPE_I32: { int32_t v = (int32_t)x; memcpy(p + 4 * i, &v, 4); break; }
    case GS_DTYPE_I64: { int64_t v = (int64_t)x; memcpy(p + 8 * i, &v, 8); break; }
    default: break;
    }
}

/* ===================================================================== */
/* Deterministic integer-exact patterns and the serial reference        */
/* ===================================================================== */

/* Largest integer the type represents exactly and that every partial result fits in. */
static double exact_limit(gs_dtype_t dt)
{
    switch (dt) {
    case GS_DTYPE_F16: return 2048.0;
    case GS_DTYPE_BF16: return 256.0;
    case GS_DTYPE_I8: return 127.0;
    case GS_DTYPE_U8: return 255.0;
    default: return 16777216.0; /* f32 mantissa; ample for f64 and the wide integers */
    }
}

static uint32_t mix(uint64_t r, uint64_t i)
{
    uint64_t h = (i + 1) * 0x9E3779B97F4A7C15ull ^ (r + 1) * 0xC2B2AE3D27D4EB4Full;
    h ^= h >> 31;
    h *= 0xBF58476D1CE4E5B9ull;
    h ^= h >> 29;
    return (uint32_t)(h >> 16);
}

/*
 * Value of element i on rank r, chosen so that every partial reduction in
 * any order is an exactly representable integer: sums stay below the
 * type's exact limit, products are at most 9, min/max are below 100.
 */
static double pattern(const bench_t *b, gs_op_t op, int r, size_t i)
{
    double limit = exact_limit(b->dt->dtype);
    int n = b->nranks;

    if (op == GS_OP_PROD) {
        if ((size_t)r == i % (size_t)n) {
            return (double)(1 + i % 3);
        }
        if (n > 1 && (size_t)r == (i + 1) % (size_t)n) {
            return (double)(1 + (i / 3) % 3);
        }
        return 1.0;
    }
    if (op == GS_OP_MIN || op == GS_OP_MAX) {
        return (double)(mix((uint64_t)r, i) % 100u);
    }
    /* sum, avg, and the pure data movers (which pass op = GS_OP_SUM). */
    double m = floor(limit / n);
    if (m > 1000.0) {
        m = 1000.0;
    }
    if (m < 1.0) {
        m = 1.0;
    }
    return (double)(mix((uint64_t)r, i) % (uint32_t)m);
}

static double reference(const bench_t *b, size_t i)
{
    double acc = pattern(b, b->op, 0, i);
    for (int r = 1; r < b->nranks; r++) {
        double v = pattern(b, b->op, r, i);
        switch (b->op) {
        case GS_OP_SUM: case GS_OP_AVG: acc += v; break;
        case GS_OP_PROD: acc *= v; break;
        case GS_OP_MIN: acc = v < acc ? v : acc; break;
        case GS_OP_MAX: acc = v > acc ? v : acc; break;
        default: break;
        }
    }
    return b->op == GS_OP_AVG ? acc / b->nranks : acc;
}

/* Exact for every op but avg, which is a sum then a scale in the element type. */
static bool value_ok(const bench_t *b, gs_op_t op, double got, double want)
{
    if (op != GS_OP_AVG) {
        return got == want;
    }
    double tol;
    switch (b->dt->dtype) {
    case GS_DTYPE_F16: tol = ldexp(1.0, -10); break;
    case GS_DTYPE_BF16: tol = ldexp(1.0, -7); break;
    case GS_DTYPE_F64: tol = 1e-12; break;
    default: tol = ldexp(1.0, -22); break;
    }
    return fabs(got - want) <= tol * fmax(1.0, fabs(want));
}

/* ===================================================================== */
/* Running one collective                                                */
/* ===================================================================== */

/* Elements passed as the count argument, and the bytes of the size column. */
static size_t count_for(const bench_t *b, size_t bytes)
{
    size_t per = b->dt->size * (b->coll->blocked ? (size_t)b->nranks : 1);
    return bytes / per;
}

static size_t bytes_for(const bench_t *b, size_t count)
{
    return count * b->dt->size * (b->coll->blocked ? (size_t)b->nranks : 1);
}

static double busbw_factor(const bench_t *b)
{
    double n = b->nranks;
    switch (b->coll->kind) {
    case COLL_ALLREDUCE: return 2.0 * (n - 1) / n;
    case COLL_ALLGATHER: case COLL_REDUCE_SCATTER: case COLL_ALLTOALL: return (n - 1) / n;
    case COLL_BROADCAST: case COLL_REDUCE: case COLL_SENDRECV: return 1.0;
    default: return 0.0;
    }
}

static gs_status_t run_once(bench_t *b, size_t count)
{
    size_t es = b->dt->size;
    gs_dtype_t dt = b->dt->dtype;
    unsigned char *send = b->sendbuf;
    unsigned char *recv = b->recvbuf;

    switch (b->coll->kind) {
    case COLL_ALLREDUCE: {
        gs_allreduce_opts_t opts = GS_ALLREDUCE_OPTS_INIT;
        opts.algo = b->algo;
        if (b->use_codec) {
            opts.codec = &b->codec;
            opts.ef = b->ef;
        }
        return gs_allreduce_ex(b->comm, b->inplace ? recv : send, recv, count, dt, b->op,
                               &opts);
    }
    case COLL_BROADCAST:
        return gs_broadcast(b->comm, recv, count, dt, b->root);
    case COLL_REDUCE:
        return gs_reduce(b->comm, b->inplace ? recv : send, recv, count, dt, b->op, b->root);
    case COLL_ALLGATHER:
        return gs_allgather(b->comm, b->inplace ? recv + (size_t)b->rank * count * es : send,
                            recv, count, dt);
    case COLL_REDUCE_SCATTER:
        if (b->inplace) {
            return gs_reduce_scatter(b->comm, send, send + (size_t)b->rank * count * es, count,
                                     dt, b->op);
        }
        return gs_reduce_scatter(b->comm, send, recv, count, dt, b->op);
    case COLL_ALLTOALL:
        return gs_alltoall(b->comm, b->inplace ? recv : send, recv, count, dt);
    case COLL_SENDRECV: {
        gs_request_t reqs[2] = {GS_REQUEST_NULL, GS_REQUEST_NULL};
        int next = (b->rank + 1) % b->nranks;
        int prev = (b->rank + b->nranks - 1) % b->nranks;
        gs_status_t status = gs_irecv(b->comm, recv, count, dt, prev, BENCH_TAG, &reqs[0]);
        if (status != GS_OK) {
            return status;
        }
        status = gs_isend(b->comm, send, count, dt, next, BENCH_TAG, &reqs[1]);
        if (status != GS_OK) {
            (void)gs_wait(&reqs[0]); /* the peer's send still completes it */
            return status;
        }
        return gs_waitall(2, reqs);
    }
    case COLL_BARRIER:
        return gs_barrier(b->comm);
    }
    return GS_ERR_INTERNAL;
}

/* run_once(), exiting with a message naming the collective and count on error. */
static void run_checked(bench_t *b, size_t count)
{
    gs_status_t status = run_once(b, count);
    if (status != GS_OK) {
        char what[128];
        snprintf(what, sizeof(what), "%s (count %zu, %s)", b->coll->name, count, b->dt->name);
        die_gs(b, what, status);
    }
}

/*
 * Fill the inputs for the check run: the buffer the collective reads holds
 * this rank's pattern, every output element holds a sentinel.
 */
static void fill_for_check(bench_t *b, size_t count)
{
    gs_dtype_t dt = b->dt->dtype;
    size_t es = b->dt->size;
    size_t n = (size_t)b->nranks;
    gs_op_t op = b->coll->reduces ? b->op : GS_OP_SUM;
    unsigned char *in;

    memset(b->recvbuf, 0xA5, bytes_for(b, count) + es);
    memset(b->sendbuf, 0xA5, bytes_for(b, count) + es);
    switch (b->coll->kind) {
    case COLL_ALLREDUCE: case COLL_REDUCE:
        in = b->inplace ? b->recvbuf : b->sendbuf;
        for (size_t i = 0; i < count; i++) {
            set_elem(in, i, dt, pattern(b, op, b->rank, i));
        }
        break;
    case COLL_BROADCAST:
        if (b->rank == b->root) {
            for (size_t i = 0; i < count; i++) {
                set_elem(b->recvbuf, i, dt, pattern(b, op, b->root, i));
            }
        }
        break;
    case COLL_ALLGATHER:
        in = b->inplace ? b->recvbuf + (size_t)b->rank * count * es : b->sendbuf;
        for (size_t i = 0; i < count; i++) {
            set_elem(in, i, dt, pattern(b, op, b->rank, i));
        }
        break;
    case COLL_REDUCE_SCATTER: case COLL_ALLTOALL:
        in = (b->inplace && b->coll->kind == COLL_ALLTOALL) ? b->recvbuf : b->sendbuf;
        for (size_t i = 0; i < count * n; i++) {
            set_elem(in, i, dt, pattern(b, op, b->rank, i));
        }
        break;
    case COLL_SENDRECV:
        for (size_t i = 0; i < count; i++) {
            set_elem(b->sendbuf, i, dt, pattern(b, op, b->rank, i));
        }
        break;
    case COLL_BARRIER:
        break;
    }
}

/* Number of wrong output elements on this rank after the check run. */
static int64_t count_wrong(const bench_t *b, size_t count)
{
    gs_dtype_t dt = b->dt->dtype;
    size_t es = b->dt->size;
    size_t n = (size_t)b->nranks;
    gs_op_t op = b->coll->reduces ? b->op : GS_OP_SUM;
    int64_t wrong = 0;

    switch (b->coll->kind) {
    case COLL_ALLREDUCE:
        for (size_t i = 0; i < count; i++) {
            wrong += !value_ok(b, op, get_elem(b->recvbuf, i, dt), reference(b, i));
        }
        break;
    case COLL_REDUCE:
        if (b->rank == b->root) {
            for (size_t i = 0; i < count; i++) {
                wrong += !value_ok(b, op, get_elem(b->recvbuf, i, dt), reference(b, i));
            }
        }
        break;
    case COLL_BROADCAST:
        for (size_t i = 0; i < count; i++) {
            wrong += get_elem(b->recvbuf, i, dt) != pattern(b, op, b->root, i);
        }
        break;
    case COLL_ALLGATHER:
        for (size_t r = 0; r < n; r++) {
            for (size_t i = 0; i < count; i++) {
                wrong += get_elem(b->recvbuf, r * count + i, dt) != pattern(b, op, (int)r, i);
            }
        }
        break;
    case COLL_REDUCE_SCATTER: {
        const unsigned char *out =
            b->inplace ? b->sendbuf + (size_t)b->rank * count * es : b->recvbuf;
        for (size_t i = 0; i < count; i++) {
            size_t gi = (size_t)b->rank * count + i;
            wrong += !value_ok(b, op, get_elem(out, i, dt), reference(b, gi));
        }
        break;
    }
    case COLL_ALLTOALL:
        for (size_t r = 0; r < n; r++) {
            for (size_t i = 0; i < count; i++) {
                double want = pattern(b, op, (int)r, (size_t)b->rank * count + i);
                wrong += get_elem(b->recvbuf, r * count + i, dt) != want;
            }
        }
        break;
    case COLL_SENDRECV: {
        int prev = (b->rank + b->nranks - 1) % b->nranks;
        for (size_t i = 0; i < count; i++) {
            wrong += get_elem(b->recvbuf, i, dt) != pattern(b, op, prev, i);
        }
        break;
    }
    case COLL_BARRIER:
        break;
    }
    return wrong;
}

/* ===================================================================== */
/* Timing and output                                                     */
/* ===================================================================== */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *c)
{
    double x = *(const double *)a, y = *(const double *)c;
    return (x > y) - (x < y);
}

typedef struct row {
    size_t bytes;
    size_t count;
    double time_us;      /* median over iterations of the slowest rank */
    double best_us;      /* fastest iteration (slowest rank) */
    double algbw;        /* GB/s */
    double busbw;        /* GB/s */
    int64_t wrong;       /* -1 when not checked */
    double wire_bytes;   /* --codec: bytes_sent per call, the largest over ranks */
    double wirebw;       /* --codec: wire_bytes / time, GB/s */
    double relerr;       /* --codec: ||out - exact|| / ||exact||, the largest over ranks */
    int algo_used;       /* gs_algo_t of the timed calls; ALGO_MIXED when ranks disagree */
} row_t;

#define ALGO_MIXED (-1)

static const char *op_name(gs_op_t op)
{
    for (size_t i = 0; i < BENCH_COUNTOF(op_table); i++) {
        if (op_table[i].value == (int)op) {
            return op_table[i].name;
        }
    }
    return "?";
}

static const char *algo_name(gs_algo_t algo)
{
    for (size_t i = 0; i < BENCH_COUNTOF(algo_table); i++) {
        if (algo_table[i].value == (int)algo) {
            return algo_table[i].name;
        }
    }
    return "?";
}

/* The algorithm that ran for a row ("mixed" when ranks disagreed: a bug). */
static const char *row_algo_name(const row_t *row)
{
    return (row->algo_used == ALGO_MIXED) ? "mixed" : algo_name((gs_algo_t)row->algo_used);
}

/* The --algo list as given ("auto,ring,rd"). */
static const char *algo_list_text(const bench_t *b, char *buf, size_t size)
{
    size_t used = 0;

    buf[0] = '\0';
    for (int i = 0; (i < b->nalgos) && (used < size); i++) {
        const int w = snprintf(buf + used, size - used, "%s%s", i ? "," : "",
                               algo_name(b->algos[i]));
        used += (w > 0) ? (size_t)w : 0;
    }
    return buf;
}

static void print_header(const bench_t *b)
{
    FILE *f = b->out;
    const char *redop = b->coll->reduces ? op_name(b->op) : "none";
    char algos[BENCH_MAX_ALGOS * 16];

    algo_list_text(b, algos, sizeof(algos));

    if (b->format == OUT_CSV) {
        fprintf(f, "coll,nranks,size,count,type,redop,root,algo,inplace,time_us,algbw_gbps,"
                   "busbw_gbps,wrong%s%s\n",
                b->show_algo ? ",algo_used" : "",
                b->use_codec ? ",codec,ef,wire_bytes,wirebw_gbps,rel_err" : "");
        return;
    }
    if (b->format == OUT_JSON) {
        fprintf(f,
                "{\"bench\": \"gs-bench\", \"coll\": \"%s\", \"nranks\": %d, \"dtype\": \"%s\", "
                "\"op\": \"%s\", \"root\": %d, \"algo\": \"%s\", \"inplace\": %s, "
                "\"warmup\": %d, \"iters\": %d, \"check\": %s, \"version\": \"%s\",\n",
                b->coll->name, b->nranks, b->dt->name, redop, b->coll->rooted ? b->root : -1,
                algos, b->inplace ? "true" : "false", b->warmup, b->iters,
                b->check ? "true" : "false", gs_version_string());
        if (b->use_codec) {
            fprintf(f, " \"codec\": \"%s\", \"ef\": %s,\n", b->codec_name,
                    b->use_ef ? "true" : "false");
        }
        fprintf(f, " \"rows\": [");
        return;
    }
    fprintf(f, "# gs-bench %s: nranks %d, dtype %s, op %s, algo %s, gradsync %s\n",
            b->coll->name, b->nranks, b->dt->name, redop, algos, gs_version_string());
    fprintf(f, "# %s, warmup %d, iters %d, check %s; time = median over iterations of the "
               "slowest rank\n",
            b->inplace ? "in-place" : "out-of-place", b->warmup, b->iters,
            b->check ? "on" : "off");
    if (b->rounds > 1) {
        fprintf(f, "# %d rounds over the algorithms, interleaved; a row is the median round\n",
                b->rounds);
    }
    fprintf(f, "#\n");
    if (b->use_codec) {
        const bool sparse = b->codec.kind == GS_CODEC_TOPK || b->codec.kind == GS_CODEC_RANDK;
        fprintf(f, "# codec %s%s", b->codec_name, b->use_ef ? "+ef" : " (no ef)");
        if (sparse) {
            fprintf(f, ", ratio %g", b->codec.ratio > 0 ? b->codec.ratio : 0.01);
        }
        fprintf(f, "; busbw on the uncompressed size (effective); wire = bytes sent per rank "
                   "and call; rel.err of one call vs the exact f32 result\n");
        fprintf(f, "# %12s %12s %8s %6s %6s %10s %8s %8s %12s %8s %9s\n", "size", "count", "type",
                "redop", "root", "time", "algbw", "busbw", "wire", "wirebw", "rel.err");
        fprintf(f, "# %12s %12s %8s %6s %6s %10s %8s %8s %12s %8s %9s\n", "(B)", "(elements)", "",
                "", "", "(us)", "(GB/s)", "(GB/s)", "(B)", "(GB/s)", "");
        return;
    }
    fprintf(f, "# %12s %12s %8s %6s %6s %10s %8s %8s %7s%s\n", "size", "count", "type", "redop",
            "root", "time", "algbw", "busbw", "#wrong", b->show_algo ? "  algo" : "");
    fprintf(f, "# %12s %12s %8s %6s %6s %10s %8s %8s %7s%s\n", "(B)", "(elements)", "", "", "",
            "(us)", "(GB/s)", "(GB/s)", "",
            !b->show_algo ? "" : (b->nalgos > 1) ? "  (asked->ran)" : "  (auto chose)");
}

static void print_row(const bench_t *b, const row_t *row, bool first)
{
    FILE *f = b->out;
    const char *redop = b->coll->reduces ? op_name(b->op) : "none";
    int root = b->coll->rooted ? b->root : -1;

    if (b->format == OUT_CSV) {
        fprintf(f, "%s,%d,%zu,%zu,%s,%s,%d,%s,%d,%.3f,%.4f,%.4f,%" PRId64, b->coll->name,
                b->nranks, row->bytes, row->count, b->dt->name, redop, root, algo_name(b->algo),
                b->inplace ? 1 : 0, row->time_us, row->algbw, row->busbw, row->wrong);
        if (b->show_algo) {
            fprintf(f, ",%s", row_algo_name(row));
        }
        if (b->use_codec) {
            fprintf(f, ",%s,%d,%.0f,%.4f,%.4e", b->codec_name, b->use_ef ? 1 : 0,
                    row->wire_bytes, row->wirebw, row->relerr);
        }
        fprintf(f, "\n");
    } else if (b->format == OUT_JSON) {
        fprintf(f,
                "%s\n  {\"size\": %zu, \"count\": %zu, \"time_us\": %.3f, \"best_us\": %.3f, "
                "\"algbw_gbps\": %.4f, \"busbw_gbps\": %.4f, \"wrong\": %" PRId64,
                first ? "" : ",", row->bytes, row->count, row->time_us, row->best_us, row->algbw,
                row->busbw, row->wrong);
        if (b->nalgos > 1) {
            fprintf(f, ", \"algo\": \"%s\"", algo_name(b->algo));
        }
        if (b->show_algo) {
            fprintf(f, ", \"algo_used\": \"%s\"", row_algo_name(row));
        }
        if (b->use_codec) {
            fprintf(f, ", \"wire_bytes\": %.0f, \"wirebw_gbps\": %.4f, \"rel_err\": %.4e",
                    row->wire_bytes, row->wirebw, row->relerr);
        }
        fprintf(f, "}");
    } else if (b->use_codec) {
        fprintf(f, "  %12zu %12zu %8s %6s %6d %10.2f %8.3f %8.3f %12.0f %8.3f %9.2e\n", row->bytes,
                row->count, b->dt->name, redop, root, row->time_us, row->algbw, row->busbw,
                row->wire_bytes, row->wirebw, row->relerr);
    } else {
        char wrong[32];
        if (row->wrong < 0) {
            snprintf(wrong, sizeof(wrong), "N/A");
        } else {
            snprintf(wrong, sizeof(wrong), "%" PRId64, row->wrong);
        }
        char ran[40] = "";
        if (b->show_algo) {
            snprintf(ran, sizeof(ran), "  %s%s", (b->nalgos > 1 && b->algo == GS_ALGO_AUTO) ?
                     "auto->" : "", row_algo_name(row));
        }
        fprintf(f, "  %12zu %12zu %8s %6s %6d %10.2f %8.3f %8.3f %7s%s\n", row->bytes,
                row->count, b->dt->name, redop, root, row->time_us, row->algbw, row->busbw, wrong,
                ran);
    }
    fflush(f);
}

/* --codec, in place: every call starts from the same input (outside the timer). */
static void codec_restore(bench_t *b, size_t count)
{
    if (b->use_codec && b->inplace) {
        memcpy(b->recvbuf, b->codec_input, count * sizeof(float));
    }
}

/* The statistics row (gs_coll_type_t) of a benchmarked collective. */
static gs_coll_type_t coll_type_of(coll_kind_t kind)
{
    switch (kind) {
    case COLL_ALLREDUCE: return GS_COLL_TYPE_ALLREDUCE;
    case COLL_BROADCAST: return GS_COLL_TYPE_BROADCAST;
    case COLL_REDUCE: return GS_COLL_TYPE_REDUCE;
    case COLL_ALLGATHER: return GS_COLL_TYPE_ALLGATHER;
    case COLL_REDUCE_SCATTER: return GS_COLL_TYPE_REDUCE_SCATTER;
    case COLL_ALLTOALL: return GS_COLL_TYPE_ALLTOALL;
    case COLL_SENDRECV: return GS_COLL_TYPE_SEND;
    case COLL_BARRIER: return GS_COLL_TYPE_BARRIER;
    }
    return GS_COLL_TYPE_ALLREDUCE;
}

/* The algorithm the last call of the benchmarked collective ran on this rank. */
static int last_algo(const bench_t *b)
{
    gs_comm_stats_t st = GS_COMM_STATS_INIT;

    BENCH_CHECK(b, gs_comm_stats(b->comm, &st));
    return (int)st.coll[coll_type_of(b->coll->kind)].last_algo;
}

/* @p algo if every rank reports it, ALGO_MIXED otherwise (collective). */
static int agreed_algo(const bench_t *b, int algo)
{
    int32_t v[2] = {algo, -algo}; /* max of both: the largest and minus the smallest */

    BENCH_CHECK(b, gs_allreduce(b->comm, v, v, 2, GS_DTYPE_I32, GS_OP_MAX));
    return (v[0] == -v[1]) ? v[0] : ALGO_MIXED;
}

/* Index of @p algo in the --algo list, or -1. */
static int algo_index(const bench_t *b, gs_algo_t algo)
{
    for (int i = 0; i < b->nalgos; i++) {
        if (b->algos[i] == algo) {
            return i;
        }
    }
    return -1;
}

static int cmp_row_time(const void *a, const void *b)
{
    const double x = ((const row_t *)a)->time_us, y = ((const row_t *)b)->time_us;
    return (x > y) - (x < y);
}

/* The median of @p n rounds of one algorithm at one size (rounds reordered). */
static void row_median(row_t *rounds, int n, row_t *out)
{
    const double bus_per_alg = (rounds[0].algbw > 0.0) ? rounds[0].busbw / rounds[0].algbw : 0.0;
    double best = rounds[0].best_us;
    int64_t wrong = -1;

    for (int r = 0; r < n; r++) {
        best = (rounds[r].best_us < best) ? rounds[r].best_us : best;
        wrong = (rounds[r].wrong > wrong) ? rounds[r].wrong : wrong;
    }
    qsort(rounds, (size_t)n, sizeof(row_t), cmp_row_time);
    *out = rounds[(n - 1) / 2];
    out->time_us = (n % 2) ? rounds[n / 2].time_us
                           : 0.5 * (rounds[n / 2 - 1].time_us + rounds[n / 2].time_us);
    out->best_us = best;
    out->wrong = wrong;
    out->algbw = (out->time_us > 0.0) ? (double)out->bytes / out->time_us / 1e3 : 0.0;
    out->busbw = out->algbw * bus_per_alg;
}

/*
 * With auto and forced algorithms in the --algo list: auto's median time over
 * the best forced one's at this size, printed under the rows (text) or to
 * stderr (csv, json), and returned; 0 when the list has no such pair.
 */
static double print_auto_ratio(const bench_t *b, const row_t *rows)
{
    const int ai = algo_index(b, GS_ALGO_AUTO);
    int best = -1;
    double ratio;

    for (int i = 0; i < b->nalgos; i++) {
        if ((i != ai) && ((best < 0) || (rows[i].time_us < rows[best].time_us))) {
            best = i;
        }
    }
    if ((ai < 0) || (best < 0) || (rows[best].time_us <= 0.0)) {
        return 0.0;
    }
    ratio = rows[ai].time_us / rows[best].time_us;
    fprintf((b->format == OUT_TEXT) ? b->out : stderr,
            "#  %zu bytes: auto (%s) / best forced (%s) = %.2f\n", rows[ai].bytes,
            row_algo_name(&rows[ai]), algo_name(b->algos[best]), ratio);
    return ratio;
}

static void bench_size(bench_t *b, size_t count, row_t *row)
{
    int iters = b->iters;
    gs_counters_t c0 = {.size = sizeof(gs_counters_t)}, c1 = {.size = sizeof(gs_counters_t)};

    if (b->use_ef) {
        BENCH_CHECK(b, gs_ef_destroy(b->ef));
        b->ef = GS_EF_NULL;
        BENCH_CHECK(b, gs_ef_create(count, GS_DTYPE_F32, &b->ef));
    }
    BENCH_CHECK(b, gs_barrier(b->comm));
    for (int k = 0; k < b->warmup; k++) {
        codec_restore(b, count);
        run_checked(b, count);
    }
    BENCH_CHECK(b, gs_barrier(b->comm));
    double wire = 0.0;
    for (int k = 0; k < iters; k++) {
        codec_restore(b, count);
        if (b->use_codec && b->inplace) {
            /* Meet after the copy: on shared cores one rank's memcpy would
             * otherwise show up as the others' wait inside the timed call. */
            BENCH_CHECK(b, gs_barrier(b->comm));
        }
        BENCH_CHECK(b, gs_comm_counters(b->comm, &c0));
        double t0 = now_s();
        run_checked(b, count);
        b->times[k] = now_s() - t0;
        BENCH_CHECK(b, gs_comm_counters(b->comm, &c1));
        wire += (double)(c1.bytes_sent - c0.bytes_sent);
    }
    /* Read before the bookkeeping all-reduces below choose their own algorithm. */
    const int algo_used = b->show_algo ? last_algo(b) : (int)b->algo;
    BENCH_CHECK(b, gs_allreduce(b->comm, b->times, b->times, (size_t)iters, GS_DTYPE_F64,
                                GS_OP_MAX));
    qsort(b->times, (size_t)iters, sizeof(double), cmp_double);
    double median = (iters % 2) ? b->times[iters / 2]
                                : 0.5 * (b->times[iters / 2 - 1] + b->times[iters / 2]);

    row->count = count;
    row->bytes = b->coll->kind == COLL_BARRIER ? 0 : bytes_for(b, count);
    row->time_us = median * 1e6;
    row->best_us = b->times[0] * 1e6;
    row->algbw = median > 0 ? (double)row->bytes / median / 1e9 : 0.0;
    row->busbw = row->algbw * busbw_factor(b);
    row->wrong = -1;
    row->wire_bytes = 0.0;
    row->wirebw = 0.0;
    row->relerr = 0.0;
    row->algo_used = b->show_algo ? agreed_algo(b, algo_used) : algo_used;

    if (b->use_codec) {
        /* The bytes of one call on the busiest rank, and the error of one call from a zero
         * residual, the largest over ranks (every rank checks the whole output). */
        double v[2] = {wire / iters, 0.0};
        if (b->use_ef) {
            BENCH_CHECK(b, gs_ef_reset(b->ef));
        }
        codec_restore(b, count);
        run_checked(b, count);
        v[1] = gs_bench_codec_relerr((const float *)b->recvbuf, count, b->nranks,
                                     b->op == GS_OP_AVG);
        BENCH_CHECK(b, gs_allreduce(b->comm, v, v, 2, GS_DTYPE_F64, GS_OP_MAX));
        row->wire_bytes = v[0];
        row->wirebw = median > 0 ? v[0] / median / 1e9 : 0.0;
        row->relerr = v[1];
    }

    if (b->check) {
        int64_t wrong;
        fill_for_check(b, count);
        run_checked(b, count);
        wrong = count_wrong(b, count);
        BENCH_CHECK(b, gs_allreduce(b->comm, &wrong, &wrong, 1, GS_DTYPE_I64, GS_OP_SUM));
        row->wrong = wrong;
    }
}

/* ===================================================================== */
/* --stats: the slowest link of every rank                               */
/* ===================================================================== */

/* What each rank contributes: its slowest peer, then its wait on every peer. */
enum {
    ST_PEER,       /* the peer this rank waited on longest, -1 when none */
    ST_RECV_WAIT,  /* ns blocked until a message from it arrived */
    ST_SEND_WAIT,  /* ns blocked until a send to it finished */
    ST_SENT,       /* bytes sent to it */
    ST_RECEIVED,   /* bytes received from it */
    ST_BUSY,       /* ns this rank spent in collectives */
    ST_WAIT,       /* ns this rank spent blocked on any peer */
    ST_FIXED       /* then one wait (ns) per peer */
};

/* Gather every rank's row (ST_FIXED + nranks int64) into a new array (collective). */
static int64_t *stats_gather(const bench_t *b)
{
    const size_t n = (size_t)b->nranks;
    const size_t width = ST_FIXED + n;
    int64_t *mine = calloc(width, sizeof(int64_t));
    int64_t *all = calloc(width * n, sizeof(int64_t));
    gs_comm_stats_t cs = GS_COMM_STATS_INIT;

    if ((mine == NULL) || (all == NULL)) {
        fprintf(stderr, "gs-bench: out of memory for --stats\n");
        exit(BENCH_EXIT_FAIL);
    }
    mine[ST_PEER] = -1;
    for (int p = 0; p < b->nranks; p++) {
        gs_peer_stats_t ps = GS_PEER_STATS_INIT;
        BENCH_CHECK(b, gs_comm_peer_stats(b->comm, p, &ps));
        mine[ST_FIXED + p] = (int64_t)(ps.recv_wait_ns + ps.send_wait_ns);
        if ((p != b->rank) && ((mine[ST_PEER] < 0) ||
                               (mine[ST_FIXED + p] > mine[ST_FIXED + mine[ST_PEER]]))) {
            mine[ST_PEER] = p;
            mine[ST_RECV_WAIT] = (int64_t)ps.recv_wait_ns;
            mine[ST_SEND_WAIT] = (int64_t)ps.send_wait_ns;
            mine[ST_SENT] = (int64_t)ps.bytes_sent;
            mine[ST_RECEIVED] = (int64_t)ps.bytes_received;
        }
    }
    BENCH_CHECK(b, gs_comm_stats(b->comm, &cs));
    mine[ST_BUSY] = (int64_t)cs.busy_ns;
    mine[ST_WAIT] = (int64_t)cs.wait_ns;
    BENCH_CHECK(b, gs_allgather(b->comm, mine, all, width, GS_DTYPE_I64));
    free(mine);
    return all;
}

/* The rank the others waited on longest in total, and that total (ns). */
static int most_waited_on(const bench_t *b, const int64_t *all, int64_t *total_out)
{
    const size_t width = ST_FIXED + (size_t)b->nranks;
    int best = -1;
    int64_t best_total = 0;

    for (int p = 0; p < b->nranks; p++) {
        int64_t total = 0;
        for (int r = 0; r < b->nranks; r++) {
            total += (r != p) ? all[(size_t)r * width + ST_FIXED + (size_t)p] : 0;
        }
        if ((best < 0) || (total > best_total)) {
            best = p;
            best_total = total;
        }
    }
    *total_out = best_total;
    return best;
}

static void print_stats_text(const bench_t *b, const int64_t *all, FILE *f)
{
    const size_t width = ST_FIXED + (size_t)b->nranks;
    int worst = -1;
    int64_t worst_wait = -1;
    int64_t waited_total = 0;
    int waited_rank = most_waited_on(b, all, &waited_total);

    fprintf(f, "#\n# --stats: time each rank spent blocked waiting on one peer, whole run "
               "(docs/stats.md)\n");
    fprintf(f, "# %5s %5s %10s %10s %10s %7s %12s %12s\n", "rank", "peer", "wait", "recv-wait",
            "send-wait", "of busy", "sent", "received");
    fprintf(f, "# %5s %5s %10s %10s %10s %7s %12s %12s\n", "", "", "(ms)", "(ms)", "(ms)", "",
            "(MB)", "(MB)");
    for (int r = 0; r < b->nranks; r++) {
        const int64_t *row = &all[(size_t)r * width];
        const double wait = (double)(row[ST_RECV_WAIT] + row[ST_SEND_WAIT]);
        if (row[ST_PEER] < 0) {
            fprintf(f, "# %5d %5s\n", r, "-");
            continue;
        }
        fprintf(f, "# %5d %5d %10.2f %10.2f %10.2f %6.1f%% %12.2f %12.2f\n", r,
                (int)row[ST_PEER], wait / 1e6, (double)row[ST_RECV_WAIT] / 1e6,
                (double)row[ST_SEND_WAIT] / 1e6,
                row[ST_BUSY] > 0 ? 100.0 * wait / (double)row[ST_BUSY] : 0.0,
                (double)row[ST_SENT] / 1e6, (double)row[ST_RECEIVED] / 1e6);
        if (wait > (double)worst_wait) {
            worst = r;
            worst_wait = row[ST_RECV_WAIT] + row[ST_SEND_WAIT];
        }
    }
    if ((worst < 0) || (waited_rank < 0)) {
        fprintf(f, "# slowest link: none (one rank)\n#\n");
        return;
    }
    {
        const int64_t *row = &all[(size_t)worst * width];
        const bool recv = row[ST_RECV_WAIT] >= row[ST_SEND_WAIT];
        fprintf(f, "# slowest link: rank %d waited %.2f ms on rank %d (mostly %s)\n", worst,
                (double)worst_wait / 1e6, (int)row[ST_PEER],
                recv ? "for its data: that rank or the link into this one is slow"
                     : "for sends to finish: that rank reads slowly or the link is slow");
    }
    fprintf(f, "# most waited-on rank: %d (the other ranks waited %.2f ms on it in total; one "
               "rank waited on by all is a straggler, a single pair is a slow link)\n#\n",
            waited_rank, (double)waited_total / 1e6);
}

static void print_stats_json(const bench_t *b, const int64_t *all, FILE *f)
{
    const size_t width = ST_FIXED + (size_t)b->nranks;
    int64_t waited_total = 0;
    const int waited_rank = most_waited_on(b, all, &waited_total);

    fprintf(f, ",\n \"stats\": {\"most_waited_on\": %d, \"most_waited_on_ms\": %.3f, "
               "\"slowest_links\": [",
            waited_rank, (double)waited_total / 1e6);
    for (int r = 0; r < b->nranks; r++) {
        const int64_t *row = &all[(size_t)r * width];
        fprintf(f,
                "%s\n  {\"rank\": %d, \"peer\": %d, \"recv_wait_ms\": %.3f, \"send_wait_ms\": %.3f, "
                "\"sent_bytes\": %" PRId64 ", \"received_bytes\": %" PRId64 ", \"busy_ms\": %.3f, "
                "\"wait_ms\": %.3f}",
                r ? "," : "", r, (int)row[ST_PEER], (double)row[ST_RECV_WAIT] / 1e6,
                (double)row[ST_SEND_WAIT] / 1e6, row[ST_SENT], row[ST_RECEIVED],
                (double)row[ST_BUSY] / 1e6, (double)row[ST_WAIT] / 1e6);
    }
    fprintf(f, "\n ]}");
}

static void *alloc_buf(size_t bytes)
{
    size_t rounded = (bytes + BENCH_ALIGN) / BENCH_ALIGN * BENCH_ALIGN; /* +1 element slack */
    void *p = aligned_alloc(BENCH_ALIGN, rounded);
    if (p == NULL) {
        fprintf(stderr, "gs-bench: cannot allocate %zu bytes\n", rounded);
        exit(BENCH_EXIT_FAIL);
    }
    memset(p, 0, rounded);
    return p;
}

int main(int argc, char **argv)
{
    bench_t b = {
        .dt = &dtype_table[0],
        .op = GS_OP_SUM,
        .algo = GS_ALGO_AUTO,
        .algos = {GS_ALGO_AUTO},
        .nalgos = 1,
        .rounds = 1,
        .min_bytes = 8,
        .max_bytes = 32u << 20,
        .factor = 2,
        .warmup = 5,
        .iters = 20,
        .codec = GS_CODEC_CONFIG_INIT,
        .format = OUT_TEXT,
    };

    if ((argc > 1) && (strcmp(argv[1], "codec") == 0)) {
        return gs_bench_codec_main(argc - 1, argv + 1);
    }
    int status_exit = 0;

    parse_args(&b, argc, argv);
    b.show_algo = ((b.nalgos > 1) || (b.algo == GS_ALGO_AUTO)) && !b.use_codec &&
                  (b.coll->kind != COLL_SENDRECV);

    gs_config_t cfg;
    BENCH_CHECK(NULL, gs_config_init(&cfg));
    cfg.transport = b.transport; /* NULL: GS_TRANSPORT or the default */
    BENCH_CHECK(NULL, gs_comm_init_env(&b.comm, &cfg));
    BENCH_CHECK(&b, gs_comm_rank(b.comm, &b.rank));
    BENCH_CHECK(&b, gs_comm_size(b.comm, &b.nranks));
    if (b.coll->rooted && b.root >= b.nranks) {
        fprintf(stderr, "gs-bench: --root %d is not a rank (nranks %d)\n", b.root, b.nranks);
        return BENCH_EXIT_USAGE;
    }
    if (b.coll->kind == COLL_SENDRECV && b.nranks < 2) {
        fprintf(stderr, "gs-bench: sendrecv needs at least 2 ranks\n");
        return BENCH_EXIT_USAGE;
    }

    b.out = stdout;
    if (b.rank == 0 && b.out_path != NULL) {
        b.out = fopen(b.out_path, "w");
        if (b.out == NULL) {
            fprintf(stderr, "gs-bench: cannot open %s: %s\n", b.out_path, strerror(errno));
            return BENCH_EXIT_FAIL;
        }
    }
    size_t max_count = count_for(&b, b.max_bytes);
    size_t buf_bytes = bytes_for(&b, max_count > 0 ? max_count : 1) + b.dt->size;
    b.sendbuf = alloc_buf(buf_bytes);
    b.recvbuf = alloc_buf(buf_bytes);
    b.times = calloc((size_t)b.iters, sizeof(double));
    if (b.use_codec && b.inplace) {
        b.codec_input = alloc_buf(buf_bytes);
    }
    if (b.times == NULL) {
        fprintf(stderr, "gs-bench: out of memory\n");
        return BENCH_EXIT_FAIL;
    }
    if (b.rank == 0) {
        print_header(&b);
    }

    double busbw_sum = 0.0;
    int nrows = 0;
    int64_t wrong_total = 0;
    size_t bytes = b.min_bytes;
    size_t worst_bytes = 0;
    double worst_ratio = 0.0;
    row_t *hist = calloc((size_t)b.rounds * BENCH_MAX_ALGOS, sizeof(row_t));
    if (hist == NULL) {
        fprintf(stderr, "gs-bench: out of memory\n");
        return BENCH_EXIT_FAIL;
    }
    for (;;) {
        row_t rows[BENCH_MAX_ALGOS];
        size_t count = b.coll->kind == COLL_BARRIER ? 0 : count_for(&b, bytes);
        /*
         * Timed runs read the check pattern; in-place reductions read zeros
         * instead (a fixed point of every op), so that repeating them can
         * neither overflow integers nor drift floats to infinity.
         */
        fill_for_check(&b, count);
        if (b.inplace && b.coll->reduces) {
            memset(b.sendbuf, 0, buf_bytes);
            memset(b.recvbuf, 0, buf_bytes);
        }
        if (b.use_codec) { /* normal data: the codecs' error depends on the values */
            gs_bench_codec_fill(b.inplace ? b.codec_input : (float *)b.sendbuf, count, b.rank);
        }
        /* Rounds outside, algorithms inside, each round starting one later
         * (A B C, B C A, C A B, ...): a noisy moment of the machine hits every
         * algorithm alike, and none is always the first after a size change
         * (measured: the first one ran up to 1.5x slower). */
        for (int r = 0; r < b.rounds; r++) {
            for (int j = 0; j < b.nalgos; j++) {
                const int i = (j + r) % b.nalgos;
                b.algo = b.algos[i];
                bench_size(&b, count, &hist[i * b.rounds + r]);
            }
        }
        for (int i = 0; i < b.nalgos; i++) {
            row_median(&hist[i * b.rounds], b.rounds, &rows[i]);
            b.algo = b.algos[i];
            if (b.rank == 0) {
                print_row(&b, &rows[i], nrows == 0);
            }
            busbw_sum += rows[i].busbw;
            nrows++;
            if (rows[i].wrong > 0) {
                wrong_total += rows[i].wrong;
            }
        }
        if (b.rank == 0) {
            double ratio = print_auto_ratio(&b, rows);
            if (ratio > worst_ratio) {
                worst_ratio = ratio;
                worst_bytes = rows[0].bytes;
            }
        }
        if (b.coll->kind == COLL_BARRIER || bytes >= b.max_bytes ||
            (bytes > 0 && bytes > b.max_bytes / b.factor)) {
            break;
        }
        bytes = bytes > 0 ? bytes * b.factor : 1;
    }

    int64_t *stats = b.stats ? stats_gather(&b) : NULL;
    if (b.rank == 0) {
        if (b.format == OUT_JSON) {
            fprintf(b.out, "\n ], \"avg_busbw_gbps\": %.4f, \"wrong_total\": %" PRId64,
                    busbw_sum / nrows, b.check ? wrong_total : (int64_t)-1);
            if (stats != NULL) {
                print_stats_json(&b, stats, b.out);
            }
            fprintf(b.out, "}\n");
        } else if (b.format == OUT_TEXT) {
            fprintf(b.out, "# Out of bounds values : %" PRId64 " %s\n", wrong_total,
                    !b.check ? "(not checked)" : wrong_total ? "FAILED" : "OK");
            fprintf(b.out, "# Avg bus bandwidth    : %.4f\n", busbw_sum / nrows);
            if (worst_ratio > 0.0) {
                fprintf(b.out, "# Worst auto/best      : %.2f at %zu bytes\n", worst_ratio,
                        worst_bytes);
            }
            fprintf(b.out, "#\n");
        }
        if (stats != NULL && b.format != OUT_JSON) {
            /* CSV stays machine-readable: the table goes to stderr. */
            print_stats_text(&b, stats, b.format == OUT_TEXT ? b.out : stderr);
        }
        fflush(b.out);
        if (b.out != stdout) {
            fclose(b.out);
        }
    }
    if (wrong_total > 0) {
        if (b.rank == 0) {
            fprintf(stderr, "gs-bench: %" PRId64 " wrong elements\n", wrong_total);
        }
        status_exit = BENCH_EXIT_FAIL;
    }
    free(stats);
    free(hist);
    free(b.times);
    free(b.codec_input);
    BENCH_CHECK(&b, gs_ef_destroy(b.ef));
    free(b.sendbuf);
    free(b.recvbuf);
    BENCH_CHECK(&b, gs_comm_destroy(b.comm));
    return status_exit;
}
