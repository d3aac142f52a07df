/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The cost model and its use in algo_select.c: knob conversion, costs
 * only for implemented (collective, algorithm) pairs, costs that grow with
 * the message, choices that move the way the formulas say (latency-bound
 * algorithms for small messages, bandwidth-bound ones for large, and the
 * crossover following alpha), GS_ALGO names of the new algorithms, and the
 * INFO line logged once per (collective, size class). Runs on one rank, so
 * gs__algo_run needs no transport.
 */
#include "algo/select/select.h"
#include "core/env_table.h"
#include "core/log.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#define KIB ((size_t)1024)
#define MIB ((size_t)1024 * 1024)
#define SLICE ((size_t)262144)

static void test_algo_model_init_converts_knobs(void **state)
{
    gs__algo_model_t m;

    (void)state;
    gs__algo_model_init(&m, 30, 1000, 4000);
    assert_true((m.alpha > 29.9e-6) && (m.alpha < 30.1e-6));
    assert_true((m.beta > 0.999e-9) && (m.beta < 1.001e-9));
    assert_true((m.gamma > 0.249e-9) && (m.gamma < 0.251e-9));
    gs__algo_model_init(&m, 0, 0, 0);
    assert_true((m.alpha > (GS_ALGO_ALPHA_US_DEFAULT - 0.1) * 1e-6) &&
                (m.alpha < (GS_ALGO_ALPHA_US_DEFAULT + 0.1) * 1e-6));
}

static void test_algo_model_cost_only_for_offered(void **state)
{
    (void)state;
    for (int k = 0; k < GS_COLL_KIND_COUNT; k++) {
        for (int a = 0; a < GS_ALGO_COUNT; a++) {
            const double c = gs__algo_cost(NULL, (gs__coll_kind_t)k, (gs_algo_t)a, 4, 4096, SLICE);
            const int modelled = (a == GS_ALGO_RING) || (a == GS_ALGO_CHAIN) ||
                                 (a == GS_ALGO_DIRECT) || (a == GS_ALGO_TREE) ||
                                 (a == GS_ALGO_RECURSIVE_DOUBLING) || (a == GS_ALGO_RABENSEIFNER) ||
                                 (a == GS_ALGO_BINOMIAL);
            /* Algorithms outside the model (forced only) have no cost either. */
            if (modelled && gs__algo_offers((gs__coll_kind_t)k, (gs_algo_t)a)) {
                assert_true(c > 0.0);
            } else {
                assert_true(c < 0.0);
            }
        }
    }
    assert_true(gs__algo_offers(GS_COLL_ALLREDUCE, GS_ALGO_TREE));
    assert_true(gs__algo_offers(GS_COLL_ALLREDUCE, GS_ALGO_RECURSIVE_DOUBLING));
    assert_true(gs__algo_offers(GS_COLL_ALLREDUCE, GS_ALGO_RABENSEIFNER));
    assert_true(gs__algo_offers(GS_COLL_BROADCAST, GS_ALGO_BINOMIAL));
    assert_true(gs__algo_offers(GS_COLL_REDUCE, GS_ALGO_BINOMIAL));
    assert_false(gs__algo_offers(GS_COLL_ALLREDUCE, GS_ALGO_BINOMIAL));
    assert_false(gs__algo_offers(GS_COLL_BROADCAST, GS_ALGO_TREE));
}

static void test_algo_model_cost_grows_with_size(void **state)
{
    (void)state;
    for (int n = 2; n <= 64; n++) {
        for (int a = 1; a < GS_ALGO_COUNT; a++) {
            for (int k = 0; k < 3; k++) {
                double prev = -1.0;
                for (size_t b = 0; b <= 256 * MIB; b = (b == 0) ? 1 : b * 4) {
                    const double c =
                        gs__algo_cost(NULL, (gs__coll_kind_t)k, (gs_algo_t)a, n, b, SLICE);
                    if (c < 0.0) {
                        break;
                    }
                    assert_true(c >= prev);
                    prev = c;
                }
            }
        }
    }
}

static void test_algo_model_choices_follow_size(void **state)
{
    (void)state;
    /* Small all-reduces are latency-bound: recursive doubling (fewest steps)
     * on powers of two; never the ring's 2(n-1) steps otherwise (the tree's
     * 2 floor(log2 n) steps beat the fold's two extra ones on some n). */
    for (int n = 2; n <= 64; n *= 2) {
        assert_int_equal(gs__algo_choose(NULL, GS_COLL_ALLREDUCE, n, 64, SLICE),
                         GS_ALGO_RECURSIVE_DOUBLING);
    }
    for (int n = 3; n <= 64; n++) {
        const gs_algo_t a = gs__algo_choose(NULL, GS_COLL_ALLREDUCE, n, 64, SLICE);
        assert_true((a == GS_ALGO_RECURSIVE_DOUBLING) || (a == GS_ALGO_TREE));
    }
    /* Large ones are bandwidth-bound: never recursive doubling or binomial
     * (with two ranks a binomial broadcast is one message, like the chain). */
    for (int n = 2; n <= 64; n++) {
        const gs_algo_t a = gs__algo_choose(NULL, GS_COLL_ALLREDUCE, n, 256 * MIB, SLICE);
        assert_true((a == GS_ALGO_RING) || (a == GS_ALGO_TREE) || (a == GS_ALGO_RABENSEIFNER));
    }
    for (int n = 3; n <= 64; n++) {
        assert_int_equal(gs__algo_choose(NULL, GS_COLL_BROADCAST, n, 256 * MIB, SLICE),
                         GS_ALGO_CHAIN);
        assert_int_equal(gs__algo_choose(NULL, GS_COLL_REDUCE, n, 256 * MIB, SLICE), GS_ALGO_CHAIN);
    }
    /* Rooted collectives: binomial for small messages once the chain is long. */
    for (int n = 4; n <= 64; n++) {
        assert_int_equal(gs__algo_choose(NULL, GS_COLL_BROADCAST, n, 64, SLICE), GS_ALGO_BINOMIAL);
        assert_int_equal(gs__algo_choose(NULL, GS_COLL_REDUCE, n, 64, SLICE), GS_ALGO_BINOMIAL);
    }
    /* Single-algorithm collectives and one rank. */
    assert_int_equal(gs__algo_choose(NULL, GS_COLL_ALLGATHER, 8, 64, SLICE), GS_ALGO_RING);
    assert_int_equal(gs__algo_choose(NULL, GS_COLL_ALLTOALL, 8, 64, SLICE), GS_ALGO_DIRECT);
    assert_int_equal(gs__algo_choose(NULL, GS_COLL_ALLREDUCE, 1, 64, SLICE), GS_ALGO_RING);
    assert_int_equal(gs__algo_choose(NULL, (gs__coll_kind_t)99, 4, 64, SLICE), GS_ALGO_AUTO);
}

static void test_algo_model_crossover_follows_alpha(void **state)
{
    gs__algo_model_t fast, slow;

    (void)state;
    /* A 1 MiB all-reduce on 12 ranks: with cheap messages the ring's
     * bandwidth wins; with 10 ms per message its 22 steps do not. */
    gs__algo_model_init(&fast, 1, 1000, 4000);
    gs__algo_model_init(&slow, 10000, 1000, 4000);
    assert_int_equal(gs__algo_choose(&fast, GS_COLL_ALLREDUCE, 12, MIB, SLICE), GS_ALGO_RING);
    assert_true(gs__algo_choose(&slow, GS_COLL_ALLREDUCE, 12, MIB, SLICE) != GS_ALGO_RING);
    /* On a power of two Rabenseifner has the ring's bandwidth in fewer steps. */
    assert_int_equal(gs__algo_choose(&fast, GS_COLL_ALLREDUCE, 16, MIB, SLICE),
                     GS_ALGO_RABENSEIFNER);
    /* The chosen algorithm is the cheapest one. */
    for (int n = 2; n <= 32; n++) {
        for (size_t b = 1; b <= 64 * MIB; b *= 2) {
            const gs_algo_t a = gs__algo_choose(&fast, GS_COLL_ALLREDUCE, n, b, SLICE);
            const double best = gs__algo_cost(&fast, GS_COLL_ALLREDUCE, a, n, b, SLICE);
            for (int o = 1; o < GS_ALGO_COUNT; o++) {
                const double c = gs__algo_cost(&fast, GS_COLL_ALLREDUCE, (gs_algo_t)o, n, b, SLICE);
                assert_true((c < 0.0) || (c >= best));
            }
        }
    }
}

static void test_algo_model_cache_favours_sliced_ring(void **state)
{
    gs__algo_model_t m;

    (void)state;
    gs__algo_model_init(&m, 0, 0, 0);
    m.cache_bytes = 32.0 * MIB;
    /* Halves that fit the cache: Rabenseifner's fewer steps win on 4 ranks. */
    assert_int_equal(gs__algo_choose(&m, GS_COLL_ALLREDUCE, 4, 4 * MIB, SLICE),
                     GS_ALGO_RABENSEIFNER);
    /* Halves that do not: the sliced ring avoids the extra memory pass. */
    assert_int_equal(gs__algo_choose(&m, GS_COLL_ALLREDUCE, 4, 256 * MIB, SLICE), GS_ALGO_RING);
    assert_int_equal(gs__algo_choose(&m, GS_COLL_ALLREDUCE, 2, 256 * MIB, SLICE), GS_ALGO_RING);
    /* A huge cache takes the penalty away again. */
    m.cache_bytes = 4096.0 * MIB;
    assert_int_equal(gs__algo_choose(&m, GS_COLL_ALLREDUCE, 4, 256 * MIB, SLICE),
                     GS_ALGO_RABENSEIFNER);
}

/* Ranks of one host share its last-level cache: four of them push the
 * unsliced Rabenseifner out of it at a quarter of the size one rank does. */
static void test_algo_model_shared_cache_counts_local_ranks(void **state)
{
    gs__algo_model_t m;
    const gs__algo_shape_t one_host = {.n = 4, .nhosts = 1, .min_local = 4, .max_local = 4};
    const gs__algo_shape_t four_hosts = {.n = 4, .nhosts = 4, .min_local = 1, .max_local = 1};

    (void)state;
    gs__algo_model_init(&m, 0, 0, 0);
    m.cache_bytes = 32.0 * MIB;
    assert_int_equal(gs__algo_choose_shape(&m, GS_COLL_ALLREDUCE, &four_hosts, 8 * MIB, SLICE),
                     GS_ALGO_RABENSEIFNER);
    assert_int_equal(gs__algo_choose_shape(&m, GS_COLL_ALLREDUCE, &one_host, 8 * MIB, SLICE),
                     GS_ALGO_RING);
    assert_true(gs__algo_cost_shape(&m, GS_COLL_ALLREDUCE, GS_ALGO_RABENSEIFNER, &one_host, 8 * MIB,
                                    SLICE) > gs__algo_cost_shape(&m, GS_COLL_ALLREDUCE,
                                                                 GS_ALGO_RABENSEIFNER, &four_hosts,
                                                                 8 * MIB, SLICE));
}

/* flat_intra: every algorithm pays the intra-host alpha and beta, which
 * moves the recursive doubling / Rabenseifner crossover down; without it
 * the intra parameters do not touch the flat algorithms. */
static void test_algo_model_flat_intra_uses_intra_parameters(void **state)
{
    gs__algo_model_t m;
    const gs__algo_shape_t one_host = {.n = 4, .nhosts = 1, .min_local = 4, .max_local = 4};
    double net, intra;

    (void)state;
    gs__algo_model_init(&m, 20, 2000, 800);
    gs__algo_model_set_intra(&m, 10, 2000);
    assert_int_equal(m.flat_intra, 0);
    net = gs__algo_cost_shape(&m, GS_COLL_ALLREDUCE, GS_ALGO_RECURSIVE_DOUBLING, &one_host,
                              16 * KIB, SLICE);
    assert_int_equal(gs__algo_choose_shape(&m, GS_COLL_ALLREDUCE, &one_host, 16 * KIB, SLICE),
                     GS_ALGO_RECURSIVE_DOUBLING);
    gs__algo_model_set_intra(&m, 1000, 1); /* unused while flat_intra is 0 */
    assert_true(gs__algo_cost_shape(&m, GS_COLL_ALLREDUCE, GS_ALGO_RECURSIVE_DOUBLING, &one_host,
                                    16 * KIB, SLICE) == net);
    gs__algo_model_set_intra(&m, 10, 2000);
    m.flat_intra = 1;
    intra = gs__algo_cost_shape(&m, GS_COLL_ALLREDUCE, GS_ALGO_RECURSIVE_DOUBLING, &one_host,
                                16 * KIB, SLICE);
    /* Two steps of rd: 2 * (20 - 10) us less. */
    assert_true((net - intra > 19.9e-6) && (net - intra < 20.1e-6));
    assert_int_equal(gs__algo_choose_shape(&m, GS_COLL_ALLREDUCE, &one_host, 16 * KIB, SLICE),
                     GS_ALGO_RABENSEIFNER);
    assert_int_equal(gs__algo_choose_shape(&m, GS_COLL_ALLREDUCE, &one_host, 2 * KIB, SLICE),
                     GS_ALGO_RECURSIVE_DOUBLING);
}

/* The host segment's designs by size on 4 ranks with 1 MiB slots: one round
 * for small messages (one phase), chunks in the middle (2 phases, 5 S of
 * traffic against n + 3), a single copy for large ones where it works; one
 * round never past a slot; none offered without a segment. */
static void test_algo_model_shm_designs_follow_size(void **state)
{
    gs__algo_model_t m;
    gs__algo_shape_t sh = {
        .n = 4, .nhosts = 1, .min_local = 4, .max_local = 4, .shm = 1, .shm_slot = 1024 * KIB};
    double c = 0.0;

    (void)state;
    gs__algo_model_init(&m, 20, 2000, 800);
    gs__algo_model_set_intra(&m, 10, 2000);
    assert_int_equal(gs__algo_shm_design(&m, &sh, 4 * KIB, &c), GS_SHM_ONE_ROUND);
    assert_true(c > 0.0);
    assert_int_equal(gs__algo_shm_design(&m, &sh, 1024 * KIB, &c), GS_SHM_CHUNKED);
    assert_int_equal(gs__algo_shm_design(&m, &sh, 64 * 1024 * KIB, &c), GS_SHM_CHUNKED);
    assert_true(gs__algo_cost_shm(&m, &sh, 2048 * KIB, GS_SHM_ONE_ROUND) < 0.0);   /* > a slot */
    assert_true(gs__algo_cost_shm(&m, &sh, 2048 * KIB, GS_SHM_SINGLE_COPY) < 0.0); /* no CMA */
    sh.shm = 2;
    assert_int_equal(gs__algo_shm_design(&m, &sh, 64 * 1024 * KIB, &c), GS_SHM_SINGLE_COPY);
    assert_int_equal(gs__algo_shm_design(&m, &sh, 4 * KIB, &c), GS_SHM_ONE_ROUND);
    /* The phase's alpha decides the small end: a dearer phase keeps one round longer. */
    gs__algo_model_set_intra(&m, 1000, 2000);
    assert_int_equal(gs__algo_shm_design(&m, &sh, 256 * KIB, &c), GS_SHM_ONE_ROUND);
    sh.shm = 0;
    assert_true(gs__algo_cost_shm(&m, &sh, 4 * KIB, GS_SHM_ONE_ROUND) < 0.0);
    assert_true(gs__algo_cost_shape(&m, GS_COLL_ALLREDUCE, GS_ALGO_SHM, &sh, 4 * KIB, SLICE) < 0.0);
}

/* On shared memory, an unsliced message that fills a ring stalls its sender:
 * Rabenseifner's first message is b/2, so with 1 MiB rings it keeps 1 MiB
 * and gives 2 MiB to the ring; without the ring limit it keeps both. */
static void test_algo_model_ring_limit_on_shared_memory(void **state)
{
    gs__algo_model_t m;
    const gs__algo_shape_t one_host = {.n = 4, .nhosts = 1, .min_local = 4, .max_local = 4};

    (void)state;
    gs__algo_model_init(&m, 20, 2000, 800);
    gs__algo_model_set_intra(&m, 10, 2000);
    m.cache_bytes = 4096.0 * MIB; /* no cache term */
    m.flat_intra = 1;
    assert_int_equal(gs__algo_choose_shape(&m, GS_COLL_ALLREDUCE, &one_host, 2 * MIB, SLICE),
                     GS_ALGO_RABENSEIFNER);
    m.ring_bytes = 1.0 * MIB;
    assert_int_equal(gs__algo_choose_shape(&m, GS_COLL_ALLREDUCE, &one_host, 1 * MIB, SLICE),
                     GS_ALGO_RABENSEIFNER);
    assert_int_equal(gs__algo_choose_shape(&m, GS_COLL_ALLREDUCE, &one_host, 2 * MIB, SLICE),
                     GS_ALGO_RING);
    m.ring_bytes = 4.0 * MIB;
    assert_int_equal(gs__algo_choose_shape(&m, GS_COLL_ALLREDUCE, &one_host, 2 * MIB, SLICE),
                     GS_ALGO_RABENSEIFNER);
}

static void test_algo_model_slow_link_hides_reduce_in_ring(void **state)
{
    gs__algo_model_t lan;

    (void)state;
    /* 1 Gbit/s links (118 MB/s) and an 800 MB/s reduction: the ring's
     * pipeline hides the reduction, Rabenseifner's unsliced steps cannot. */
    gs__algo_model_init(&lan, 20, 118, 800);
    lan.cache_bytes = 32.0 * MIB;
    assert_int_equal(gs__algo_choose(&lan, GS_COLL_ALLREDUCE, 4, 8 * MIB, SLICE), GS_ALGO_RING);
    assert_int_equal(gs__algo_choose(&lan, GS_COLL_ALLREDUCE, 4, 2 * MIB, SLICE), GS_ALGO_RING);
    /* Small messages stay latency-bound. */
    assert_int_equal(gs__algo_choose(&lan, GS_COLL_ALLREDUCE, 4, 4096, SLICE),
                     GS_ALGO_RECURSIVE_DOUBLING);
}

static void test_algo_model_policy_names(void **state)
{
    gs__algo_policy_t p;

    (void)state;
    assert_string_equal(gs__algo_name(GS_ALGO_RECURSIVE_DOUBLING), "rd");
    assert_string_equal(gs__algo_name((gs_algo_t)99), "unknown");
    assert_int_equal(gs__algo_policy_parse("allreduce:tree,broadcast:binomial", &p), GS_OK);
    assert_int_equal(p.forced[GS_COLL_ALLREDUCE], GS_ALGO_TREE);
    assert_int_equal(p.forced[GS_COLL_BROADCAST], GS_ALGO_BINOMIAL);
    assert_int_equal(p.forced[GS_COLL_REDUCE], GS_ALGO_AUTO);
    assert_int_equal(gs__algo_policy_parse("allreduce:rd", &p), GS_OK);
    assert_int_equal(p.forced[GS_COLL_ALLREDUCE], GS_ALGO_RECURSIVE_DOUBLING);
    assert_int_equal(gs__algo_policy_parse("rabenseifner", &p), GS_OK);
    assert_int_equal(p.forced[GS_COLL_ALLREDUCE], GS_ALGO_RABENSEIFNER);
    assert_int_equal(p.forced[GS_COLL_BROADCAST], GS_ALGO_AUTO);
    assert_int_equal(gs__algo_policy_parse("binomial", &p), GS_OK);
    assert_int_equal(p.forced[GS_COLL_REDUCE], GS_ALGO_BINOMIAL);
    assert_int_equal(p.forced[GS_COLL_ALLREDUCE], GS_ALGO_AUTO);
    assert_int_equal(gs__algo_policy_parse("allreduce:binomial", &p), GS_ERR_INVALID_ARG);
    assert_int_equal(gs__algo_policy_parse("broadcast:tree", &p), GS_ERR_INVALID_ARG);
}

/* Count the lines of @p path that contain @p needle. */
static int count_lines(const char *path, const char *needle)
{
    char line[1024];
    int n = 0;
    FILE *f = fopen(path, "r");

    if (f == NULL) {
        return -1;
    }
    while (fgets(line, sizeof(line), f) != NULL) {
        n += (strstr(line, needle) != NULL);
    }
    fclose(f);
    return n;
}

static void test_algo_model_logs_once_per_size_class(void **state)
{
    char path[] = "/tmp/gs_algo_model_XXXXXX";
    const int fd = mkstemp(path);
    gs__algo_ctx_t ctx;
    gs__algo_select_t sel;
    float src[4096];
    float dst[4096];
    gs__coll_desc_t d;

    (void)state;
    assert_true(fd >= 0);
    close(fd);
    setenv("GS_DEBUG", "INFO", 1);
    setenv("GS_DEBUG_SUBSYS", "ALGO", 1);
    setenv("GS_DEBUG_FILE", path, 1);
    gs__log_reset_for_test();
    gs__log_init();

    memset(&ctx, 0, sizeof(ctx));
    memset(&sel, 0, sizeof(sel));
    memset(src, 0, sizeof(src));
    ctx.size = 1;
    ctx.slice_bytes = SLICE;
    ctx.opname = "gs_allreduce";
    memset(&d, 0, sizeof(d));
    d.kind = GS_COLL_ALLREDUCE;
    d.sendbuf = src;
    d.recvbuf = dst;
    d.dtype = GS_DTYPE_F32;
    d.op = GS_OP_SUM;
    /* 1000 and 1020 floats share a size class (2048..4095 bytes); 4096 does not. */
    d.count = 1000;
    assert_int_equal(gs__algo_run(&sel, &ctx, &d), GS_OK);
    d.algo = GS_ALGO_AUTO;
    d.count = 1020;
    assert_int_equal(gs__algo_run(&sel, &ctx, &d), GS_OK);
    d.algo = GS_ALGO_AUTO;
    d.count = 4096;
    assert_int_equal(gs__algo_run(&sel, &ctx, &d), GS_OK);
    /* A forced choice runs that algorithm; a wrong one is refused. */
    sel.policy.forced[GS_COLL_ALLREDUCE] = GS_ALGO_TREE;
    d.algo = GS_ALGO_AUTO;
    assert_int_equal(gs__algo_run(&sel, &ctx, &d), GS_OK);
    assert_int_equal(d.algo, GS_ALGO_TREE);
    d.algo = GS_ALGO_BINOMIAL;
    assert_int_equal(gs__algo_run(&sel, &ctx, &d), GS_ERR_UNSUPPORTED);

    unsetenv("GS_DEBUG");
    unsetenv("GS_DEBUG_SUBSYS");
    unsetenv("GS_DEBUG_FILE");
    gs__log_reset_for_test();
    assert_int_equal(count_lines(path, "ALGO allreduce of"), 2);
    assert_int_equal(count_lines(path, "allreduce of 4000 bytes"), 1);
    assert_int_equal(count_lines(path, "allreduce of 4080 bytes"), 0);
    assert_int_equal(count_lines(path, "allreduce of 16384 bytes"), 1);
    unlink(path);
}

/* The hierarchical all-reduce: offered only with several hosts and several
 * ranks on some host; chosen when the links between hosts are slow and the
 * message large; never for one rank per host (where the flat shape keeps
 * every earlier choice). */
static void test_algo_model_hier_follows_hosts(void **state)
{
    const gs__algo_shape_t h4x2 = {.n = 8, .nhosts = 4, .min_local = 2, .max_local = 2};
    const gs__algo_shape_t one_host = {.n = 8, .nhosts = 1, .min_local = 8, .max_local = 8};
    const gs__algo_shape_t each = {.n = 8, .nhosts = 8, .min_local = 1, .max_local = 1};
    const gs__algo_shape_t uneven = {.n = 6, .nhosts = 3, .min_local = 1, .max_local = 3};
    gs__algo_model_t lan;
    gs__algo_model_t same;

    (void)state;
    gs__algo_model_init(&lan, 50, 119, 0); /* 1 Gbit/s between hosts */
    gs__algo_model_set_intra(&lan, 20, 2000);
    gs__algo_model_init(&same, 0, 0, 0); /* between hosts as fast as inside one */

    assert_true(gs__algo_cost(&lan, GS_COLL_ALLREDUCE, GS_ALGO_HIERARCHICAL, 8, MIB, SLICE) < 0.0);
    assert_true(gs__algo_cost_shape(&lan, GS_COLL_ALLREDUCE, GS_ALGO_HIERARCHICAL, &one_host, MIB,
                                    SLICE) < 0.0);
    assert_true(gs__algo_cost_shape(&lan, GS_COLL_ALLREDUCE, GS_ALGO_HIERARCHICAL, &each, MIB,
                                    SLICE) < 0.0);
    assert_true(gs__algo_cost_shape(&lan, GS_COLL_BROADCAST, GS_ALGO_HIERARCHICAL, &h4x2, MIB,
                                    SLICE) < 0.0);
    assert_true(gs__algo_cost_shape(&lan, GS_COLL_ALLREDUCE, GS_ALGO_HIERARCHICAL, &uneven, MIB,
                                    SLICE) > 0.0);

    /* Slow links between hosts: hier for large messages, not for tiny ones. */
    for (size_t b = 4 * MIB; b <= 256 * MIB; b *= 4) {
        assert_int_equal(gs__algo_choose_shape(&lan, GS_COLL_ALLREDUCE, &h4x2, b, SLICE),
                         GS_ALGO_HIERARCHICAL);
    }
    assert_int_not_equal(gs__algo_choose_shape(&lan, GS_COLL_ALLREDUCE, &h4x2, 4 * KIB, SLICE),
                         GS_ALGO_HIERARCHICAL);
    /* Equal links: the extra intra-host phases never pay. */
    for (size_t b = 4 * KIB; b <= 256 * MIB; b *= 4) {
        assert_int_not_equal(gs__algo_choose_shape(&same, GS_COLL_ALLREDUCE, &h4x2, b, SLICE),
                             GS_ALGO_HIERARCHICAL);
    }
    /* A slower inside of the host makes hier dearer. */
    {
        gs__algo_model_t slow_intra = lan;
        gs__algo_model_set_intra(&slow_intra, 20, 200);
        assert_true(gs__algo_cost_shape(&slow_intra, GS_COLL_ALLREDUCE, GS_ALGO_HIERARCHICAL, &h4x2,
                                        64 * MIB, SLICE) >
                    gs__algo_cost_shape(&lan, GS_COLL_ALLREDUCE, GS_ALGO_HIERARCHICAL, &h4x2,
                                        64 * MIB, SLICE));
    }
    /* The flat shape is exactly the old model for every collective and size. */
    for (int k = 0; k < GS_COLL_KIND_COUNT; k++) {
        for (size_t b = 1; b <= 256 * MIB; b *= 8) {
            assert_int_equal(gs__algo_choose_shape(&lan, (gs__coll_kind_t)k, &each, b, SLICE),
                             gs__algo_choose(&lan, (gs__coll_kind_t)k, 8, b, SLICE));
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_algo_model_init_converts_knobs),
        cmocka_unit_test(test_algo_model_cost_only_for_offered),
        cmocka_unit_test(test_algo_model_cost_grows_with_size),
        cmocka_unit_test(test_algo_model_choices_follow_size),
        cmocka_unit_test(test_algo_model_crossover_follows_alpha),
        cmocka_unit_test(test_algo_model_cache_favours_sliced_ring),
        cmocka_unit_test(test_algo_model_shared_cache_counts_local_ranks),
        cmocka_unit_test(test_algo_model_flat_intra_uses_intra_parameters),
        cmocka_unit_test(test_algo_model_ring_limit_on_shared_memory),
        cmocka_unit_test(test_algo_model_slow_link_hides_reduce_in_ring),
        cmocka_unit_test(test_algo_model_policy_names),
        cmocka_unit_test(test_algo_model_logs_once_per_size_class),
        cmocka_unit_test(test_algo_model_hier_follows_hosts),
        cmocka_unit_test(test_algo_model_shm_designs_follow_size),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
