/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gloo-bench: the Gloo all-reduce (f32, sum) side of the gradsync
 * comparison, against Debian's libgloo (0.5). Same options subset, columns
 * and timing rule as gs-bench: warm-up, a barrier, then each timed iteration
 * measured on every rank; the reported time is the median over iterations of
 * the slowest rank. busbw = algbw * 2(n-1)/n as in nccl-tests.
 *
 * --algo default          gloo::allreduce(AllreduceOptions), the call and
 *                         default algorithm PyTorch's ProcessGroupGloo uses
 *                         (ring); out-of-place unless --inplace
 * --algo ring_chunked     gloo::AllreduceRingChunked<float> (in place)
 * --algo halving_doubling gloo::AllreduceHalvingDoubling<float> (in place)
 * The class-based algorithms are built once per size, outside the timing,
 * as Gloo's own benchmark does.
 *
 * Launch with gsrun (reads RANK/WORLD_SIZE, or GS_RANK/GS_WORLD_SIZE, or
 * OMPI_COMM_WORLD_RANK/SIZE). Rendezvous: a gloo::rendezvous::FileStore in
 * --store DIR (default /tmp/gloo-bench-<uid>-<MASTER_PORT or parent pid>),
 * emptied by rank 0 at the end; transport: gloo::transport::tcp on
 * 127.0.0.1 (GLOO_BENCH_HOST overrides). Every wait has Gloo's timeout
 * (GLOO_BENCH_TIMEOUT_S, default 60 s).
 * Exit status: 0 success, 1 a Gloo error or wrong results, 2 a usage error.
 */
#include <getopt.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include <dirent.h>

#include <gloo/allreduce.h>
#include <gloo/allreduce_halving_doubling.h>
#include <gloo/allreduce_ring_chunked.h>
#include <gloo/barrier.h>
#include <gloo/config.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>

#include "tc_clock.h"

namespace {

enum class Algo { Default, RingChunked, HalvingDoubling };

struct Options {
    size_t min_bytes = 8;
    size_t max_bytes = 32u << 20;
    size_t factor = 2;
    int warmup = 5;
    int iters = 20;
    bool csv = false;
    bool inplace = false;
    Algo algo = Algo::Default;
    std::string algo_name = "default";
    std::string out_path;
    std::string store_dir;
};

[[noreturn]] void usage_error(const char *msg, const char *arg)
{
    std::fprintf(stderr, "gloo-bench: %s%s%s\n", msg, arg ? ": " : "", arg ? arg : "");
    std::fprintf(stderr,
                 "usage: gloo-bench [-b MIN] [-e MAX] [-f N] [-w N] [-n N] "
                 "[--algo default|ring_chunked|halving_doubling] [--inplace] [--csv] [-o FILE] "
                 "[--store DIR]\n");
    std::exit(2);
}

bool parse_size(const char *s, size_t *out)
{
    char *end = nullptr;
    errno = 0;
    if (s[0] == '-' || s[0] == '\0') {
        return false;
    }
    unsigned long long v = std::strtoull(s, &end, 10);
    unsigned long long mult = 1;
    if (errno != 0 || end == s) {
        return false;
    }
    if (*end == 'k' || *end == 'K') {
        mult = 1ull << 10;
    } else if (*end == 'm' || *end == 'M') {
        mult = 1ull << 20;
    } else if (*end == 'g' || *end == 'G') {
        mult = 1ull << 30;
    }
    if (mult != 1) {
        end++;
    }
    if (*end == 'B' || *end == 'b') {
        end++;
    }
    if (*end != '\0' || v > SIZE_MAX / mult) {
        return false;
    }
    *out = static_cast<size_t>(v * mult);
    return true;
}

int parse_int(const char *s, int lo, int hi)
{
    char *end = nullptr;
    errno = 0;
    long v = std::strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi) {
        usage_error("bad number", s);
    }
    return static_cast<int>(v);
}

Options parse_args(int argc, char **argv)
{
    enum { OPT_CSV = 256, OPT_INPLACE, OPT_ALGO, OPT_STORE };
    static const struct option longopts[] = {
        {"minbytes", required_argument, nullptr, 'b'},
        {"maxbytes", required_argument, nullptr, 'e'},
        {"stepfactor", required_argument, nullptr, 'f'},
        {"warmup", required_argument, nullptr, 'w'},
        {"iters", required_argument, nullptr, 'n'},
        {"out", required_argument, nullptr, 'o'},
        {"csv", no_argument, nullptr, OPT_CSV},
        {"inplace", no_argument, nullptr, OPT_INPLACE},
        {"algo", required_argument, nullptr, OPT_ALGO},
        {"store", required_argument, nullptr, OPT_STORE},
        {nullptr, 0, nullptr, 0},
    };
    Options o;
    int c;
    while ((c = getopt_long(argc, argv, "b:e:f:w:n:o:", longopts, nullptr)) != -1) {
        switch (c) {
        case 'b':
            if (!parse_size(optarg, &o.min_bytes)) {
                usage_error("bad -b size", optarg);
            }
            break;
        case 'e':
            if (!parse_size(optarg, &o.max_bytes)) {
                usage_error("bad -e size", optarg);
            }
            break;
        case 'f':
            o.factor = static_cast<size_t>(parse_int(optarg, 2, 1 << 20));
            break;
        case 'w':
            o.warmup = parse_int(optarg, 0, 1000000);
            break;
        case 'n':
            o.iters = parse_int(optarg, 1, 1000000);
            break;
        case 'o':
            o.out_path = optarg;
            break;
        case OPT_CSV:
            o.csv = true;
            break;
        case OPT_INPLACE:
            o.inplace = true;
            break;
        case OPT_STORE:
            o.store_dir = optarg;
            break;
        case OPT_ALGO:
            o.algo_name = optarg;
            if (o.algo_name == "default") {
                o.algo = Algo::Default;
            } else if (o.algo_name == "ring_chunked") {
                o.algo = Algo::RingChunked;
            } else if (o.algo_name == "halving_doubling") {
                o.algo = Algo::HalvingDoubling;
            } else {
                usage_error("unknown --algo", optarg);
            }
            break;
        default:
            usage_error("bad option", nullptr);
        }
    }
    if (optind != argc) {
        usage_error("unexpected argument", argv[optind]);
    }
    if (o.min_bytes > o.max_bytes) {
        usage_error("-b is larger than -e", nullptr);
    }
    if (o.max_bytes / sizeof(float) > static_cast<size_t>(INT32_MAX)) {
        usage_error("-e is larger than Gloo's int counts allow", nullptr);
    }
    if (o.algo != Algo::Default) {
        o.inplace = true; /* the class-based algorithms only reduce in place */
    }
    return o;
}

int env_int(const char *const *names, int fallback)
{
    for (const char *const *n = names; *n != nullptr; n++) {
        const char *v = std::getenv(*n);
        if (v != nullptr && *v != '\0') {
            return parse_int(v, 0, 1 << 24);
        }
    }
    return fallback;
}

/* Remove the store's key files (flat directory), then the directory if empty. */
void clean_store(const std::string &dir)
{
    DIR *d = opendir(dir.c_str());
    if (d == nullptr) {
        return;
    }
    while (struct dirent *e = readdir(d)) {
        std::string name = e->d_name;
        if (name != "." && name != "..") {
            (void)unlink((dir + "/" + name).c_str());
        }
    }
    closedir(d);
    (void)rmdir(dir.c_str());
}

class Bench {
  public:
    Bench(const Options &o, std::shared_ptr<gloo::Context> ctx) : o_(o), ctx_(std::move(ctx)) {}

    void barrier()
    {
        gloo::BarrierOptions opts(ctx_);
        opts.setTag(nextTag());
        gloo::barrier(opts);
    }

    /* In place: element-wise max of v across ranks. */
    template <typename T> void allreduce_max(T *v, size_t n)
    {
        gloo::AllreduceOptions opts(ctx_);
        opts.setOutput(v, n);
        opts.setReduceFunction(
            [](void *c, const void *a, const void *b, size_t k) { gloo::max<T>(c, a, b, k); });
        opts.setTag(nextTag());
        gloo::allreduce(opts);
    }

    template <typename T> void allreduce_sum(T *v, size_t n)
    {
        gloo::AllreduceOptions opts(ctx_);
        opts.setOutput(v, n);
        opts.setReduceFunction(
            [](void *c, const void *a, const void *b, size_t k) { gloo::sum<T>(c, a, b, k); });
        opts.setTag(nextTag());
        gloo::allreduce(opts);
    }

    /* One all-reduce of count floats with the selected algorithm. */
    void run(float *send, float *recv, size_t count)
    {
        if (o_.algo == Algo::Default) {
            gloo::AllreduceOptions opts(ctx_);
            if (!o_.inplace) {
                opts.setInput(send, count);
            }
            opts.setOutput(recv, count);
            opts.setReduceFunction([](void *c, const void *a, const void *b, size_t k) {
                gloo::sum<float>(c, a, b, k);
            });
            opts.setTag(nextTag());
            gloo::allreduce(opts);
        } else {
            algo_->run();
        }
    }

    /* Build the class-based algorithm for this buffer and count (untimed). */
    void prepare(float *recv, size_t count)
    {
        std::vector<float *> ptrs{recv};
        int n = static_cast<int>(count);
        if (o_.algo == Algo::RingChunked) {
            algo_ = std::make_unique<gloo::AllreduceRingChunked<float>>(ctx_, ptrs, n);
        } else if (o_.algo == Algo::HalvingDoubling) {
            algo_ = std::make_unique<gloo::AllreduceHalvingDoubling<float>>(ctx_, ptrs, n);
        }
    }

    void release() { algo_.reset(); }

  private:
    uint32_t nextTag() { return tag_++; }

    const Options &o_;
    std::shared_ptr<gloo::Context> ctx_;
    std::unique_ptr<gloo::Algorithm> algo_;
    uint32_t tag_ = 1;
};

int run_bench(const Options &o, int rank, int nranks)
{
    static const char *const timeout_env[] = {"GLOO_BENCH_TIMEOUT_S", nullptr};
    const char *host = std::getenv("GLOO_BENCH_HOST");
    gloo::transport::tcp::attr attr;
    attr.hostname = host != nullptr ? host : "127.0.0.1";
    auto dev = gloo::transport::tcp::CreateDevice(attr);

    std::string dir = o.store_dir;
    if (dir.empty()) {
        const char *port = std::getenv("MASTER_PORT");
        if (port == nullptr) {
            port = std::getenv("GS_MASTER_PORT");
        }
        dir = "/tmp/gloo-bench-" + std::to_string(getuid()) + "-" +
              (port != nullptr ? std::string(port) : std::to_string(getppid()));
    }
    if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
        std::fprintf(stderr, "gloo-bench: cannot create store dir %s: %s\n", dir.c_str(),
                     std::strerror(errno));
        return 1;
    }
    gloo::rendezvous::FileStore store(dir);
    auto ctx = std::make_shared<gloo::rendezvous::Context>(rank, nranks);
    ctx->setTimeout(std::chrono::seconds(env_int(timeout_env, 60)));
    ctx->connectFullMesh(store, dev);

    Bench bench(o, ctx);
    size_t max_count = o.max_bytes / sizeof(float);
    std::vector<float> send(max_count + 1), recv(max_count + 1);
    std::vector<double> times(static_cast<size_t>(o.iters));
    FILE *out = stdout;
    if (rank == 0 && !o.out_path.empty()) {
        out = std::fopen(o.out_path.c_str(), "w");
        if (out == nullptr) {
            std::fprintf(stderr, "gloo-bench: cannot open %s: %s\n", o.out_path.c_str(),
                         std::strerror(errno));
            return 1;
        }
    }
    if (rank == 0) {
        if (o.csv) {
            std::fprintf(out, "coll,nranks,size,count,type,redop,root,algo,inplace,time_us,"
                              "algbw_gbps,busbw_gbps,wrong\n");
        } else {
            std::fprintf(out, "# gloo-bench allreduce: nranks %d, dtype f32, op sum, algo %s, "
                              "gloo %d.%d.%d, transport tcp\n",
                         nranks, o.algo_name.c_str(), GLOO_VERSION_MAJOR, GLOO_VERSION_MINOR,
                         GLOO_VERSION_PATCH);
            std::fprintf(out, "# %s, warmup %d, iters %d; time = median over iterations of the "
                              "slowest rank\n#\n",
                         o.inplace ? "in-place" : "out-of-place", o.warmup, o.iters);
            std::fprintf(out, "# %12s %12s %8s %6s %6s %10s %8s %8s %7s\n", "size", "count",
                         "type", "redop", "root", "time", "algbw", "busbw", "#wrong");
            std::fprintf(out, "# %12s %12s %8s %6s %6s %10s %8s %8s %7s\n", "(B)", "(elements)",
                         "", "", "", "(us)", "(GB/s)", "(GB/s)", "");
        }
    }

    long long failed = 0;
    for (size_t bytes = o.min_bytes;;) {
        size_t count = bytes / sizeof(float);
        /* Timed runs: in place on zeros (stay finite); out of place on rank + 1. */
        std::fill(send.begin(), send.begin() + count, static_cast<float>(rank + 1));
        std::fill(recv.begin(), recv.begin() + count, o.inplace ? 0.0f : 1.0f);
        bench.prepare(recv.data(), count);
        bench.barrier();
        for (int k = 0; k < o.warmup; k++) {
            bench.run(send.data(), recv.data(), count);
        }
        bench.barrier();
        for (int k = 0; k < o.iters; k++) {
            double t0 = tc_now_s();
            bench.run(send.data(), recv.data(), count);
            times[static_cast<size_t>(k)] = tc_now_s() - t0;
        }
        bench.allreduce_max(times.data(), times.size());
        std::sort(times.begin(), times.end());
        size_t h = times.size() / 2;
        double med = (times.size() % 2) ? times[h] : 0.5 * (times[h - 1] + times[h]);
        double algbw = med > 0 ? static_cast<double>(count * sizeof(float)) / med / 1e9 : 0.0;
        double busbw = algbw * 2.0 * (nranks - 1) / nranks;

        /* Check run: every rank contributes rank + 1; the sum is n(n+1)/2 exactly. */
        std::fill(send.begin(), send.begin() + count, static_cast<float>(rank + 1));
        std::fill(recv.begin(), recv.begin() + count,
                  o.inplace ? static_cast<float>(rank + 1) : -1.0f);
        bench.run(send.data(), recv.data(), count);
        bench.release();
        float want = static_cast<float>(nranks) * static_cast<float>(nranks + 1) / 2.0f;
        int64_t wrong = 0;
        for (size_t i = 0; i < count; i++) {
            wrong += recv[i] != want;
        }
        bench.allreduce_sum(&wrong, 1);
        failed += wrong;
        if (rank == 0) {
            if (o.csv) {
                std::fprintf(out, "allreduce,%d,%zu,%zu,f32,sum,-1,gloo_%s,%d,%.3f,%.4f,%.4f,%lld\n",
                             nranks, count * sizeof(float), count, o.algo_name.c_str(),
                             o.inplace ? 1 : 0, med * 1e6, algbw, busbw,
                             static_cast<long long>(wrong));
            } else {
                std::fprintf(out, "  %12zu %12zu %8s %6s %6d %10.2f %8.3f %8.3f %7lld\n",
                             count * sizeof(float), count, "f32", "sum", -1, med * 1e6, algbw,
                             busbw, static_cast<long long>(wrong));
            }
            std::fflush(out);
        }
        if (bytes >= o.max_bytes || (bytes > 0 && bytes > o.max_bytes / o.factor)) {
            break;
        }
        bytes = bytes > 0 ? bytes * o.factor : 1;
    }
    bench.barrier(); /* every rank is past the rendezvous before the store goes */
    if (rank == 0) {
        if (out != stdout) {
            std::fclose(out);
        }
        clean_store(dir);
    }
    return failed != 0 ? 1 : 0;
}

} // namespace

int main(int argc, char **argv)
{
    static const char *const rank_env[] = {"RANK", "GS_RANK", "OMPI_COMM_WORLD_RANK", nullptr};
    static const char *const size_env[] = {"WORLD_SIZE", "GS_WORLD_SIZE", "OMPI_COMM_WORLD_SIZE",
                                           nullptr};
    Options o = parse_args(argc, argv);
    int rank = env_int(rank_env, 0);
    int nranks = env_int(size_env, 1);
    if (nranks < 1 || rank >= nranks) {
        std::fprintf(stderr, "gloo-bench: rank %d is not below world size %d\n", rank, nranks);
        return 2;
    }
    try {
        return run_bench(o, rank, nranks);
    } catch (const std::exception &e) {
        std::fprintf(stderr, "gloo-bench: rank %d: %s\n", rank, e.what());
        std::fflush(nullptr);
        return 1;
    }
}
