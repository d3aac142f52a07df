/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gs-bench's command line: the name tables (from the public X-macro
 * tables), the usage text and the parser (gs_bench.h). Nothing here
 * communicates.
 */
#include "gs_bench.h"

#include <errno.h>
#include <getopt.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gs_bench_codec.h"

#define BENCH_DTYPE_ROW(_name, _value, _size, _str) {_name, _size, _str},
const dtype_info_t gs_bench_dtypes[GS_DTYPE_COUNT] = {GS_DTYPE_MAP(BENCH_DTYPE_ROW)};
#undef BENCH_DTYPE_ROW

#define BENCH_NAME_ROW(_name, _value, _str) {_name, _str},
const name_info_t gs_bench_ops[GS_OP_COUNT] = {GS_OP_MAP(BENCH_NAME_ROW)};
const name_info_t gs_bench_algos[GS_ALGO_COUNT] = {GS_ALGO_MAP(BENCH_NAME_ROW)};
#undef BENCH_NAME_ROW

const char *const gs_bench_agg_names[4] = {"rank 0's time", "the average over ranks",
                                           "the fastest rank's time", "the slowest rank's time"};

/* The transports --transport offers: only those this gradsync has (bench/CMakeLists.txt
 * passes GS_WITH_MPI as the library's build does). */
#ifdef GS_WITH_MPI
#define BENCH_HAS_MPI 1
#define BENCH_TRANSPORTS "tcp|mpi (mpi: launch with mpirun)"
#else
#define BENCH_HAS_MPI 0
#define BENCH_TRANSPORTS "tcp (this gradsync is built without the MPI transport)"
#endif

/* nccl-tests' -d names beside gradsync's own. */
static const struct {
    const char *nccl;
    const char *gs;
} dtype_aliases[] = {
    {"float", "f32"}, {"double", "f64"}, {"half", "f16"},  {"bfloat16", "bf16"},
    {"int8", "i8"},   {"uint8", "u8"},   {"int32", "i32"}, {"int64", "i64"},
};

static const coll_info_t coll_table[] = {
    {COLL_ALLREDUCE, GS_COLL_TYPE_ALLREDUCE, "allreduce", false, true, false, true, true},
    {COLL_BROADCAST, GS_COLL_TYPE_BROADCAST, "broadcast", false, false, true, false, false},
    {COLL_REDUCE, GS_COLL_TYPE_REDUCE, "reduce", false, true, true, false, false},
    {COLL_ALLGATHER, GS_COLL_TYPE_ALLGATHER, "allgather", true, false, false, true, false},
    {COLL_REDUCE_SCATTER, GS_COLL_TYPE_REDUCE_SCATTER, "reduce_scatter", true, true, false, true,
     true},
    {COLL_ALLTOALL, GS_COLL_TYPE_ALLTOALL, "alltoall", true, false, false, false, false},
    {COLL_SENDRECV, GS_COLL_TYPE_SEND, "sendrecv", false, false, false, false, false},
    {COLL_BARRIER, GS_COLL_TYPE_BARRIER, "barrier", false, false, false, false, false},
};

/* " allreduce, reduce_scatter and allgather": the collectives whose row says @p ef (true) or
 * codec (false), for the usage text and its errors. */
static const char *coll_list(bool ef)
{
    static char text[2][128];
    char *buf = text[ef ? 1 : 0];
    size_t used = 0, total = 0, k = 0;

    for (size_t c = 0; c < BENCH_COUNTOF(coll_table); c++) {
        total += ef ? coll_table[c].ef : coll_table[c].codec;
    }
    buf[0] = '\0';
    for (size_t c = 0; (c < BENCH_COUNTOF(coll_table)) && (used < sizeof(text[0])); c++) {
        if (ef ? coll_table[c].ef : coll_table[c].codec) {
            const char *sep = (k == 0) ? " " : (k + 1 == total) ? " and " : ", ";
            const int w =
                snprintf(buf + used, sizeof(text[0]) - used, "%s%s", sep, coll_table[c].name);

            used += (w > 0) ? (size_t)w : 0;
            k++;
        }
    }
    return buf;
}

/* ===================================================================== */
/* Errors and usage                                                      */
/* ===================================================================== */

/* The algorithms that implement @p coll (the library's table), auto first. */
static void usage_algos(FILE *f, gs_coll_type_t coll)
{
    for (size_t i = 0; i < BENCH_COUNTOF(gs_bench_algos); i++) {
        if (gs_algo_implements(coll, (gs_algo_t)gs_bench_algos[i].value)) {
            fprintf(f, " %s", gs_bench_algos[i].name);
        }
    }
}

static void usage(FILE *f)
{
    fprintf(
        f,
        "usage: gs-bench COLLECTIVE [options]   (launch with: gsrun -n N gs-bench ...)\n"
        "       gs-bench --version\n"
        "collectives: allreduce broadcast reduce allgather reduce_scatter alltoall\n"
        "             sendrecv (ring neighbour exchange) barrier\n"
        "       gs-bench codec [-e BYTES] [-w N] [-n N] [--zstd off|on|auto] [--list]\n"
        "                (codec throughput; --list: the codec names)\n"
        "       gs-bench kernels [-b MIN] [-e MAX] [-f N] [-w N] [-n N] [--csv|--json]\n"
        "                (CUDA builds: GB/s of every GPU kernel against a device copy)\n"
        "       gs-bench bucket --model resnet50|bert [options]  (bucketing against a plain\n"
        "                all-reduce after a simulated backward pass; gs-bench bucket --help)\n"
        "       gs-bench ps [options]  (parameter server push/pull latency and a BSP iteration\n"
        "                against an all-reduce of the same bytes; gs-bench ps --help)\n"
        "  -b, --minbytes SIZE   smallest size in bytes (K/M/G suffixes), default 8\n"
        "  -e, --maxbytes SIZE   largest size in bytes, default 32M\n"
        "  -f, --stepfactor N    multiply the size by N (>= 2), default 2\n"
        "  -w, --warmup N        warm-up iterations per size, default 5\n"
        "  -n, --iters N         timed iterations per size, default 20\n"
        "  -r, --root R          root of broadcast/reduce, default 0\n"
        "  -o, --op NAME         reduction op (below), default sum (as nccl-tests' -o)\n"
        "  -d, --dtype NAME      element type (below; nccl-tests' names float, double, half,\n"
        "                        bfloat16, int8, uint8, int32, int64 work too), default f32\n"
        "  -c 0|1, --check[=0|1] verify every size after timing it (exit 1 when any element\n"
        "                        is wrong), default 1 (0 with --codec); --no-check is -c 0\n"
        "  -a, --average N       combine each iteration's time over the ranks: 0 rank 0,\n"
        "                        1 average, 2 fastest, 3 slowest (default; nccl-tests' is 1)\n"
        "      --algo LIST       allreduce algorithm, or a comma list measured in turn at\n"
        "                        every size (with auto: auto/best per size), of:\n"
        "                          %-15s",
        "allreduce");
    usage_algos(f, GS_COLL_TYPE_ALLREDUCE);
    fprintf(f, "\n                        the others take GS_ALGO (GS_ALGO=broadcast:binomial):");
    for (size_t c = 0; c < BENCH_COUNTOF(coll_table); c++) {
        if (coll_table[c].kind != COLL_ALLREDUCE) {
            fprintf(f, "\n                          %-15s", coll_table[c].name);
            usage_algos(f, coll_table[c].type);
        }
    }
    fprintf(f, "\n      dtypes:           ");
    for (size_t i = 0; i < BENCH_COUNTOF(gs_bench_dtypes); i++) {
        fprintf(f, "%s%s", i ? "|" : "", gs_bench_dtypes[i].name);
    }
    fprintf(f, "\n      ops:              ");
    for (size_t i = 0; i < BENCH_COUNTOF(gs_bench_ops); i++) {
        fprintf(f, "%s%s", i ? "|" : "", gs_bench_ops[i].name);
    }
    fprintf(f,
            "\n"
            "      --rounds N        passes over the --algo list per size, interleaved;\n"
            "                        rows show the median of the passes, default 1\n"
            "      --transport NAME  " BENCH_TRANSPORTS ", default GS_TRANSPORT\n"
            "      --device KIND     host (default) or cuda (alias gpu: cudaMalloc'd buffers,\n"
            "                        GPU = local rank %% device count; CUDA builds only)\n"
            "      --tls-compare     every size over two communicators in turn, plain TCP and\n"
            "                        TLS (GS_TLS_CERT, GS_TLS_KEY, GS_TLS_CA; both without\n"
            "                        shared memory): rows per link and the tls/tcp time ratio\n"
            "      --stats           after the run, print each rank's slowest link (the peer\n"
            "                        it waited on longest) and the most waited-on rank\n"
            "      --inplace         in-place buffers (default out-of-place)\n"
            "      --codec NAME     %s through a codec\n"
            "                        (f32; sum|avg):%s\n"
            "      --ef              with error feedback (one gs_ef_t per size), for\n"
            "                       %s\n"
            "      --ratio R         topk/randk fraction kept, default 0.01\n"
            "      --csv | --json    machine-readable output (rank 0)\n"
            "      --out FILE        write the output to FILE instead of stdout (rank 0)\n"
            "  -h, --help            this text\n"
            "sizes are total buffer bytes as in nccl-tests (allgather: receive buffer,\n"
            "reduce_scatter: send buffer, alltoall: either buffer).\n",
            coll_list(false), gs_bench_codec_names(), coll_list(true));
}

static _Noreturn void usage_error(const char *msg, const char *arg)
{
    fprintf(stderr, "gs-bench: %s%s%s\n", msg, arg ? ": " : "", arg ? arg : "");
    fprintf(stderr, "try 'gs-bench --help'\n");
    exit(BENCH_EXIT_USAGE);
}

/* ===================================================================== */
/* Argument parsing                                                      */
/* ===================================================================== */

/* Parse "123", "4K", "256M", "1G" (powers of 1024) into *out. */
bool gs_bench_parse_size(const char *s, size_t *out)
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
    case 'k':
    case 'K':
        mult = 1ull << 10;
        end++;
        break;
    case 'm':
    case 'M':
        mult = 1ull << 20;
        end++;
        break;
    case 'g':
    case 'G':
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
        fprintf(stderr, "gs-bench: %s must be an integer in [%d, %d], got '%s'\n", what, lo, hi, s);
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

enum {
    OPT_ALGO = 256,
    OPT_INPLACE,
    OPT_CSV,
    OPT_JSON,
    OPT_CODEC,
    OPT_EF,
    OPT_RATIO,
    OPT_TRANSPORT,
    OPT_STATS,
    OPT_ROUNDS,
    OPT_DEVICE,
    OPT_OUT,
    OPT_NO_CHECK,
    OPT_TLS_COMPARE
};

/* -d / --dtype: gradsync's names or nccl-tests'. */
static const dtype_info_t *parse_dtype(const char *name)
{
    for (size_t i = 0; i < BENCH_COUNTOF(dtype_aliases); i++) {
        if (strcmp(dtype_aliases[i].nccl, name) == 0) {
            name = dtype_aliases[i].gs;
        }
    }
    for (size_t i = 0; i < BENCH_COUNTOF(gs_bench_dtypes); i++) {
        if (strcmp(gs_bench_dtypes[i].name, name) == 0) {
            return &gs_bench_dtypes[i];
        }
    }
    return NULL;
}

/* --algo NAME[,NAME...]: each a known algorithm that implements allreduce, at most
 * BENCH_MAX_ALGOS, no repeats. */
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
        v = lookup_name(gs_bench_algos, BENCH_COUNTOF(gs_bench_algos), name);
        if (v < 0) {
            usage_error("unknown --algo", name);
        }
        if ((b->coll->kind == COLL_ALLREDUCE) && !gs_algo_implements(b->coll->type, (gs_algo_t)v)) {
            usage_error("--algo names an algorithm that does not implement allreduce (gs-bench "
                        "--help lists those that do)",
                        name);
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

void gs_bench_parse_args(bench_t *b, int argc, char **argv)
{
    static const struct option longopts[] = {
        {"minbytes", required_argument, NULL, 'b'},
        {"maxbytes", required_argument, NULL, 'e'},
        {"stepfactor", required_argument, NULL, 'f'},
        {"warmup", required_argument, NULL, 'w'},
        {"iters", required_argument, NULL, 'n'},
        {"root", required_argument, NULL, 'r'},
        {"check", optional_argument, NULL, 'c'},
        {"no-check", no_argument, NULL, OPT_NO_CHECK},
        {"average", required_argument, NULL, 'a'},
        {"out", required_argument, NULL, OPT_OUT},
        {"help", no_argument, NULL, 'h'},
        {"algo", required_argument, NULL, OPT_ALGO},
        {"dtype", required_argument, NULL, 'd'},
        {"op", required_argument, NULL, 'o'},
        {"inplace", no_argument, NULL, OPT_INPLACE},
        {"csv", no_argument, NULL, OPT_CSV},
        {"json", no_argument, NULL, OPT_JSON},
        {"codec", required_argument, NULL, OPT_CODEC},
        {"ef", no_argument, NULL, OPT_EF},
        {"ratio", required_argument, NULL, OPT_RATIO},
        {"transport", required_argument, NULL, OPT_TRANSPORT},
        {"stats", no_argument, NULL, OPT_STATS},
        {"rounds", required_argument, NULL, OPT_ROUNDS},
        {"device", required_argument, NULL, OPT_DEVICE},
        {"tls-compare", no_argument, NULL, OPT_TLS_COMPARE},
        {NULL, 0, NULL, 0},
    };
    bool algo_set = false, op_set = false, root_set = false, ratio_set = false, check_set = false;

    if (argc < 2) {
        usage(stderr);
        exit(BENCH_EXIT_USAGE);
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("gs-bench (gradsync) %s\n", gs_version_string());
        exit(0);
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
    while ((c = getopt_long(argc - 1, argv + 1, "b:e:f:w:n:r:c:o:d:a:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'b':
            if (!gs_bench_parse_size(optarg, &b->min_bytes)) {
                usage_error("bad -b size", optarg);
            }
            break;
        case 'e':
            if (!gs_bench_parse_size(optarg, &b->max_bytes)) {
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
            /* -c 0|1 as nccl-tests; the long --check alone means 1. */
            b->check = (optarg == NULL) ? true : (parse_int(optarg, 0, 1, "-c / --check") == 1);
            check_set = true;
            break;
        case OPT_NO_CHECK:
            b->check = false;
            check_set = true;
            break;
        case 'a':
            b->agg = parse_int(optarg, 0, 3, "-a / --average");
            break;
        case OPT_OUT:
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
        case 'd':
            b->dt = parse_dtype(optarg);
            if (b->dt == NULL) {
                usage_error("unknown -d / --dtype", optarg);
            }
            break;
        case 'o': {
            int v = lookup_name(gs_bench_ops, BENCH_COUNTOF(gs_bench_ops), optarg);
            if (v < 0) {
                usage_error("unknown -o / --op (-o is the reduction op, as in nccl-tests; "
                            "--out FILE names an output file)",
                            optarg);
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
            if ((strcmp(optarg, "tcp") != 0) && (!BENCH_HAS_MPI || (strcmp(optarg, "mpi") != 0))) {
                usage_error("unknown --transport (" BENCH_TRANSPORTS ")", optarg);
            }
            b->transport = optarg;
            break;
        case OPT_STATS:
            b->stats = true;
            break;
        case OPT_DEVICE:
            if ((strcmp(optarg, "cuda") == 0) || (strcmp(optarg, "gpu") == 0)) {
                b->device = true;
            } else if (strcmp(optarg, "host") != 0) {
                usage_error("unknown --device (host, cuda or gpu)", optarg);
            }
            break;
        case OPT_TLS_COMPARE:
            b->tls_compare = true;
            break;
        default:
            usage_error("bad option", NULL);
        }
    }
    if (optind != argc - 1) {
        usage_error("unexpected argument", argv[optind + 1]);
    }
    if (b->device && !gs_bench_cuda_built()) {
        usage_error("--device cuda needs a gs-bench built with CUDA (GS_WITH_CUDA); this one "
                    "was built without it",
                    NULL);
    }
    if (b->min_bytes > b->max_bytes) {
        usage_error("-b is larger than -e", NULL);
    }
    if (b->tls_compare &&
        (b->device || ((b->transport != NULL) && (strcmp(b->transport, "tcp") != 0)))) {
        usage_error("--tls-compare measures the TCP transport on host buffers (no --device, "
                    "--transport tcp)",
                    NULL);
    }
    if (algo_set && (b->nalgos > 1 || b->algo != GS_ALGO_AUTO) && b->coll->kind != COLL_ALLREDUCE) {
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
    if ((b->op == GS_OP_BAND || b->op == GS_OP_BOR || b->op == GS_OP_BXOR) && b->coll->reduces &&
        !(b->dt->dtype == GS_DTYPE_I8 || b->dt->dtype == GS_DTYPE_U8 ||
          b->dt->dtype == GS_DTYPE_I32 || b->dt->dtype == GS_DTYPE_I64)) {
        usage_error("--op band/bor/bxor needs an integer --dtype (i8, u8, i32, i64)", NULL);
    }
    if (b->inplace && b->coll->kind == COLL_SENDRECV) {
        usage_error("--inplace does not apply to sendrecv", NULL);
    }
    if (b->use_codec && !check_set) {
        b->check = false; /* a codec's result is approximate: rel.err is reported instead */
    }
    if ((b->use_ef || ratio_set) && !b->use_codec) {
        usage_error("--ef and --ratio need --codec", NULL);
    }
    if (b->use_codec) {
        char msg[192];

        if (!b->coll->codec) {
            snprintf(msg, sizeof(msg), "--codec applies to%s only", coll_list(false));
            usage_error(msg, b->coll->name);
        }
        if (b->use_ef && !b->coll->ef) {
            snprintf(msg, sizeof(msg),
                     "--ef applies to%s only (error feedback of a summed "
                     "send buffer)",
                     coll_list(true));
            usage_error(msg, b->coll->name);
        }
        if (b->dt->dtype != GS_DTYPE_F32 || (b->op != GS_OP_SUM && b->op != GS_OP_AVG)) {
            usage_error("--codec needs --dtype f32 and --op sum or avg", NULL);
        }
        if (b->nalgos > 1 || b->algo != GS_ALGO_AUTO || b->check) {
            usage_error("--codec excludes --algo and --check (it reports rel.err instead)", NULL);
        }
    }
}
