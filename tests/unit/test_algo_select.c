/* SPDX-License-Identifier: Apache-2.0 */
/* GS_ALGO parsing, the algorithm table, tags, the balanced split, and the
 * planner: the one place that picks path, scheme and algorithm. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "algo/select/select.h"
#include "gradsync/compress.h"

static void test_algo_policy_bare_name(void **state)
{
    gs__algo_policy_t p;

    (void)state;
    assert_int_equal(gs__algo_policy_parse("ring", &p), GS_OK);
    assert_int_equal(p.forced[GS_COLL_ALLREDUCE], GS_ALGO_RING);
    assert_int_equal(p.forced[GS_COLL_ALLGATHER], GS_ALGO_RING);
    assert_int_equal(p.forced[GS_COLL_REDUCE_SCATTER], GS_ALGO_RING);
    /* Collectives without a ring keep the model's choice. */
    assert_int_equal(p.forced[GS_COLL_BROADCAST], GS_ALGO_AUTO);
    assert_int_equal(gs__algo_policy_parse("", &p), GS_OK);
    assert_int_equal(p.forced[GS_COLL_ALLREDUCE], GS_ALGO_AUTO);
}

static void test_algo_policy_per_collective(void **state)
{
    gs__algo_policy_t p;

    (void)state;
    assert_int_equal(gs__algo_policy_parse("allreduce:ring,broadcast:chain", &p), GS_OK);
    assert_int_equal(p.forced[GS_COLL_ALLREDUCE], GS_ALGO_RING);
    assert_int_equal(p.forced[GS_COLL_BROADCAST], GS_ALGO_CHAIN);
    assert_int_equal(p.forced[GS_COLL_REDUCE], GS_ALGO_AUTO);
    assert_int_equal(gs__algo_policy_parse("gather:direct,scatter:binomial,allgatherv:ring", &p),
                     GS_OK);
    assert_int_equal(p.forced[GS_COLL_GATHER], GS_ALGO_DIRECT);
    assert_int_equal(p.forced[GS_COLL_SCATTER], GS_ALGO_BINOMIAL);
    assert_int_equal(p.forced[GS_COLL_ALLGATHERV], GS_ALGO_RING);
    assert_int_equal(gs__algo_policy_parse("alltoallv:ring", &p), GS_ERR_INVALID_ARG);
}

static void test_algo_policy_rejects(void **state)
{
    gs__algo_policy_t p;

    (void)state;
    assert_int_equal(gs__algo_policy_parse("bogus", &p), GS_ERR_INVALID_ARG);
    assert_non_null(strstr(gs_last_error(), "bogus"));
    assert_int_equal(gs__algo_policy_parse("allreduce:chain", &p), GS_ERR_INVALID_ARG);
    assert_int_equal(gs__algo_policy_parse("allreduces:ring", &p), GS_ERR_INVALID_ARG);
    assert_int_equal(gs__algo_policy_parse("allreduce:", &p), GS_ERR_INVALID_ARG);
}

static void test_algo_policy_hier(void **state)
{
    gs__algo_policy_t p;

    (void)state;
    assert_int_equal(gs__algo_policy_parse("allreduce:hier", &p), GS_OK);
    assert_int_equal(p.forced[GS_COLL_ALLREDUCE], GS_ALGO_HIERARCHICAL);
    assert_int_equal(gs__algo_policy_parse("hier", &p), GS_OK); /* only the all-reduce has it */
    assert_int_equal(p.forced[GS_COLL_ALLREDUCE], GS_ALGO_HIERARCHICAL);
    assert_int_equal(p.forced[GS_COLL_BROADCAST], GS_ALGO_AUTO);
    assert_int_equal(gs__algo_policy_parse("broadcast:hier", &p), GS_ERR_INVALID_ARG);
    assert_string_equal(gs__algo_name(GS_ALGO_HIERARCHICAL), "hier");
    assert_true(gs__algo_offers(GS_COLL_ALLREDUCE, GS_ALGO_HIERARCHICAL));
    assert_false(gs__algo_offers(GS_COLL_REDUCE_SCATTER, GS_ALGO_HIERARCHICAL));
}

static void test_algo_offers(void **state)
{
    (void)state;
    assert_true(gs__algo_offers(GS_COLL_ALLREDUCE, GS_ALGO_RING));
    assert_true(gs__algo_offers(GS_COLL_ALLREDUCE, GS_ALGO_AUTO));
    assert_false(gs__algo_offers(GS_COLL_ALLREDUCE, GS_ALGO_CHAIN));
    assert_false(gs__algo_offers(GS_COLL_ALLREDUCE, (gs_algo_t)77));
    assert_string_equal(gs__coll_name(GS_COLL_REDUCE_SCATTER), "reduce_scatter");
    /* The rooted and v collectives: what each offers, and the names GS_ALGO parses. */
    assert_true(gs__algo_offers(GS_COLL_GATHER, GS_ALGO_BINOMIAL));
    assert_true(gs__algo_offers(GS_COLL_SCATTER, GS_ALGO_DIRECT));
    assert_false(gs__algo_offers(GS_COLL_GATHER, GS_ALGO_RING));
    assert_true(gs__algo_offers(GS_COLL_ALLGATHERV, GS_ALGO_RING));
    assert_false(gs__algo_offers(GS_COLL_ALLGATHERV, GS_ALGO_NATIVE));
    assert_true(gs__algo_offers(GS_COLL_ALLTOALLV, GS_ALGO_DIRECT));
    assert_true(gs__algo_offers(GS_COLL_REDUCE_SCATTERV, GS_ALGO_RING));
    assert_string_equal(gs__coll_name(GS_COLL_REDUCE_SCATTERV), "reduce_scatterv");
    assert_string_equal(gs__coll_name(GS_COLL_GATHER), "gather");
    /* Binomial for small blocks, direct for large (8 ranks, default model). */
    assert_int_equal(gs__algo_choose(NULL, GS_COLL_GATHER, 8, 64, 65536), GS_ALGO_BINOMIAL);
    assert_int_equal(gs__algo_choose(NULL, GS_COLL_SCATTER, 8, 64, 65536), GS_ALGO_BINOMIAL);
    assert_int_equal(gs__algo_choose(NULL, GS_COLL_GATHER, 8, 64u << 20, 65536), GS_ALGO_DIRECT);
    assert_int_equal(gs__algo_choose(NULL, GS_COLL_ALLGATHERV, 8, 4096, 65536), GS_ALGO_RING);
    assert_int_equal(gs__algo_choose(NULL, GS_COLL_ALLTOALLV, 8, 4096, 65536), GS_ALGO_DIRECT);
}

static void test_algo_split_covers_exactly(void **state)
{
    (void)state;
    for (size_t count = 0; count < 200; count++) {
        for (int parts = 1; parts <= 17; parts++) {
            size_t expect_off = 0;
            for (int i = 0; i < parts; i++) {
                size_t off, len;
                gs__algo_split(count, parts, i, &off, &len);
                assert_int_equal(off, expect_off);
                assert_true(len == count / (size_t)parts || len == count / (size_t)parts + 1);
                expect_off += len;
            }
            assert_int_equal(expect_off, count);
        }
    }
}

static void test_algo_tag_layout(void **state)
{
    gs__algo_ctx_t ctx;
    gs__coll_desc_t a = {.kind = GS_COLL_ALLREDUCE, .count = 10, .dtype = GS_DTYPE_F32};
    gs__coll_desc_t b = a;
    uint64_t ta, tb;

    (void)state;
    memset(&ctx, 0, sizeof(ctx));
    ctx.seq = 5;
    ta = gs__algo_tag(&ctx, &a, 7);
    assert_int_equal(ta & 0xffffff, 7);
    assert_int_equal((ta >> 24) & 0xffffff, 5);
    assert_int_equal(ta & GS_TP_TAG_P2P, 0);
    /* A different collective with the same sequence and index matches the
     * same receive but differs in the check bits. */
    b.kind = GS_COLL_BROADCAST;
    tb = gs__algo_tag(&ctx, &b, 7);
    assert_true((ta & GS_TP_TAG_MATCH_MASK) == (tb & GS_TP_TAG_MATCH_MASK));
    assert_true(ta != tb);
    b = a;
    b.count = 11;
    assert_true(gs__algo_tag(&ctx, &b, 7) != ta);
}

/* What selection keeps per communicator, for the plans below. */
static gs__algo_select_t sel;

/* A one-rank context the planner can price (no transport needed), and a
 * fresh selection state with the built-in model. */
static void plan_ctx(gs__algo_ctx_t *ctx, int size)
{
    memset(ctx, 0, sizeof(*ctx));
    ctx->size = size;
    ctx->slice_bytes = 262144;
    ctx->opname = "gs_allreduce";
    memset(&sel, 0, sizeof(sel));
    gs__algo_model_init(&sel.model, 0, 0, 0);
}

/* gs__algo_plan under @p policy (NULL: none), the model and log bits kept. */
static gs_status_t plan_with(const gs__algo_policy_t *policy, const gs__algo_ctx_t *ctx,
                             const gs__coll_desc_t *d, gs__algo_plan_t *plan)
{
    if (policy != NULL) {
        sel.policy = *policy;
    } else {
        memset(&sel.policy, 0, sizeof(sel.policy));
    }
    return gs__algo_plan(&sel, ctx, d, plan);
}

static gs__coll_desc_t plan_desc(gs__coll_kind_t kind, size_t count)
{
    gs__coll_desc_t d;

    memset(&d, 0, sizeof(d));
    d.kind = kind;
    d.count = count;
    d.dtype = GS_DTYPE_F32;
    d.op = GS_OP_SUM;
    d.algo = GS_ALGO_AUTO;
    return d;
}

/* Host buffers: the plain scheme takes the cost model's (or the forced)
 * algorithm; a codec decides the scheme by the density rule and never
 * keeps an algorithm. */
static void test_algo_plan_host_schemes(void **state)
{
    gs_codec_config_t cfg = GS_CODEC_CONFIG_INIT;
    gs__algo_policy_t policy;
    gs__algo_ctx_t ctx;
    gs__coll_desc_t d = plan_desc(GS_COLL_ALLREDUCE, 1 << 20);
    gs__algo_plan_t plan;

    (void)state;
    plan_ctx(&ctx, 4);
    assert_int_equal(plan_with(NULL, &ctx, &d, &plan), GS_OK);
    assert_int_equal(plan.path, GS_PATH_HOST);
    assert_int_equal(plan.scheme, GS_SCHEME_PLAIN);
    assert_int_equal(plan.algo,
                     gs__algo_choose(&sel.model, GS_COLL_ALLREDUCE, 4, 4u << 20, ctx.slice_bytes));
    assert_string_equal(plan.why, "cost model");

    assert_int_equal(gs__algo_policy_parse("allreduce:tree", &policy), GS_OK);
    assert_int_equal(plan_with(&policy, &ctx, &d, &plan), GS_OK);
    assert_int_equal(plan.algo, GS_ALGO_TREE);
    assert_string_equal(plan.why, "GS_ALGO");
    d.algo = GS_ALGO_RING; /* the caller wins over GS_ALGO */
    assert_int_equal(plan_with(&policy, &ctx, &d, &plan), GS_OK);
    assert_int_equal(plan.algo, GS_ALGO_RING);
    assert_string_equal(plan.why, "caller");
    d.algo = GS_ALGO_BINOMIAL;
    assert_int_equal(plan_with(NULL, &ctx, &d, &plan), GS_ERR_UNSUPPORTED);
    d.algo = GS_ALGO_AUTO;

    d.codec = &cfg;
    cfg.kind = GS_CODEC_INT8;
    assert_int_equal(plan_with(&policy, &ctx, &d, &plan), GS_OK);
    assert_int_equal(plan.scheme, GS_SCHEME_TWO_PHASE);
    assert_int_equal(plan.algo, GS_ALGO_AUTO);
    assert_string_equal(plan.why, "codec");
    cfg.kind = GS_CODEC_TOPK;
    cfg.ratio = 0.01; /* 4 ranks x 8 bytes x 1% of the elements < 4 bytes each */
    assert_int_equal(plan_with(NULL, &ctx, &d, &plan), GS_OK);
    assert_int_equal(plan.scheme, GS_SCHEME_SPARSE_GATHER);
    cfg.ratio = 0.2; /* 4 x 8 x 20% >= 4: as dense as the tensor */
    assert_int_equal(plan_with(NULL, &ctx, &d, &plan), GS_OK);
    assert_int_equal(plan.scheme, GS_SCHEME_TWO_PHASE);
    cfg.kind = GS_CODEC_RANDK;
    cfg.ratio = 0.5;
    assert_int_equal(plan_with(NULL, &ctx, &d, &plan), GS_OK);
    assert_int_equal(plan.scheme, GS_SCHEME_SPARSE_SHARED);
    /* Other collectives have no scheme but plain. */
    d = plan_desc(GS_COLL_BROADCAST, 100);
    assert_int_equal(plan_with(NULL, &ctx, &d, &plan), GS_OK);
    assert_int_equal(plan.scheme, GS_SCHEME_PLAIN);
    assert_true((plan.algo == GS_ALGO_CHAIN) || (plan.algo == GS_ALGO_BINOMIAL));
}

/* Device buffers: NCCL for plain calls with nothing forced when the
 * context has it; staged for a forced gradsync algorithm, a codec, or a
 * context without NCCL; refused when the build has no device path. */
static void test_algo_plan_device_paths(void **state)
{
    gs_codec_config_t cfg = GS_CODEC_CONFIG_INIT;
    gs__algo_policy_t policy;
    gs__algo_ctx_t ctx;
    gs__coll_desc_t d = plan_desc(GS_COLL_ALLREDUCE, 1 << 20);
    gs__algo_plan_t plan;
    gs_status_t status;

    (void)state;
    plan_ctx(&ctx, 4);
    d.mem = GS_MEM_DEVICE;
    ctx.dev_caps = GS_DEV_CAP_NCCL;
    status = plan_with(NULL, &ctx, &d, &plan);
#if defined(GS_WITH_NCCL)
    assert_int_equal(status, GS_OK);
    assert_int_equal(plan.path, GS_PATH_NCCL);
    assert_int_equal(plan.algo, GS_ALGO_NATIVE);
    d.algo = GS_ALGO_NATIVE;
    assert_int_equal(plan_with(NULL, &ctx, &d, &plan), GS_OK);
    assert_int_equal(plan.path, GS_PATH_NCCL);
    d.algo = GS_ALGO_AUTO;
#elif defined(GS_WITH_CUDA)
    /* A capability without its runner in the build counts as none: staged. */
    assert_int_equal(status, GS_OK);
    assert_int_equal(plan.path, GS_PATH_STAGED);
#else
    assert_int_equal(status, GS_ERR_UNSUPPORTED);
#endif
#if defined(GS_WITH_CUDA)
    d.algo = GS_ALGO_RING;
    assert_int_equal(plan_with(NULL, &ctx, &d, &plan), GS_OK);
    assert_int_equal(plan.path, GS_PATH_STAGED);
    assert_int_equal(plan.algo, GS_ALGO_RING);
    d.algo = GS_ALGO_AUTO;
    assert_int_equal(gs__algo_policy_parse("allreduce:rabenseifner", &policy), GS_OK);
    assert_int_equal(plan_with(&policy, &ctx, &d, &plan), GS_OK);
    assert_int_equal(plan.path, GS_PATH_STAGED);
    assert_int_equal(plan.algo, GS_ALGO_RABENSEIFNER);
    /* A two-phase codec on f32 without zstd: the codec kernels, over NCCL
     * when there is NCCL; other float types or zstd: CPU codecs, staged. */
    d.codec = &cfg;
    cfg.kind = GS_CODEC_INT8;
    assert_int_equal(plan_with(NULL, &ctx, &d, &plan), GS_OK);
    assert_int_equal(plan.scheme, GS_SCHEME_TWO_PHASE);
    assert_int_equal(plan.device_codec, 1);
#if defined(GS_WITH_NCCL)
    assert_int_equal(plan.path, GS_PATH_NCCL);
#endif
    d.dtype = GS_DTYPE_F16;
    assert_int_equal(plan_with(NULL, &ctx, &d, &plan), GS_OK);
    assert_int_equal(plan.path, GS_PATH_STAGED);
    assert_int_equal(plan.device_codec, 0);
    d.dtype = GS_DTYPE_F32;
    cfg.zstd = GS_CODEC_ZSTD_ON;
    assert_int_equal(plan_with(NULL, &ctx, &d, &plan), GS_OK);
    assert_int_equal(plan.path, GS_PATH_STAGED);
    assert_int_equal(plan.device_codec, 0);
    cfg.zstd = GS_CODEC_ZSTD_OFF;
    cfg.kind = GS_CODEC_TOPK; /* sparse gather: staged, CPU codecs */
    cfg.ratio = 0.01;
    assert_int_equal(plan_with(NULL, &ctx, &d, &plan), GS_OK);
    assert_int_equal(plan.scheme, GS_SCHEME_SPARSE_GATHER);
    assert_int_equal(plan.path, GS_PATH_STAGED);
    assert_int_equal(plan.device_codec, 0);
    cfg.kind = GS_CODEC_INT8;
    ctx.dev_caps = 0; /* ranks share a GPU: kernels, host exchange */
    assert_int_equal(plan_with(NULL, &ctx, &d, &plan), GS_OK);
    assert_int_equal(plan.path, GS_PATH_STAGED);
    assert_int_equal(plan.device_codec, 1);
    d.codec = NULL;
    assert_int_equal(plan_with(NULL, &ctx, &d, &plan), GS_OK);
    assert_int_equal(plan.path, GS_PATH_STAGED);
    assert_int_not_equal(plan.algo, GS_ALGO_NATIVE);
    /* A CUDA-aware MPI takes what its native collectives take with no host
     * work; NCCL, when there, still comes first. */
    ctx.dev_caps = GS_DEV_CAP_MPI_CUDA;
    assert_int_equal(plan_with(NULL, &ctx, &d, &plan), GS_OK);
    assert_int_equal(plan.path, GS_PATH_MPI_CUDA);
    assert_int_equal(plan.algo, GS_ALGO_NATIVE);
    d.op = GS_OP_AVG; /* a host-side scale in the MPI transport */
    assert_int_equal(plan_with(NULL, &ctx, &d, &plan), GS_OK);
    assert_int_equal(plan.path, GS_PATH_STAGED);
    d.op = GS_OP_SUM;
    d.dtype = GS_DTYPE_BF16; /* MPI has no bf16 */
    assert_int_equal(plan_with(NULL, &ctx, &d, &plan), GS_OK);
    assert_int_equal(plan.path, GS_PATH_STAGED);
    d.dtype = GS_DTYPE_F32;
    d.kind = GS_COLL_ALLTOALL; /* no native all-to-all */
    assert_int_equal(plan_with(NULL, &ctx, &d, &plan), GS_OK);
    assert_int_equal(plan.path, GS_PATH_STAGED);
    d.kind = GS_COLL_ALLREDUCE;
    d.algo = GS_ALGO_TREE;
    assert_int_equal(plan_with(NULL, &ctx, &d, &plan), GS_OK);
    assert_int_equal(plan.path, GS_PATH_STAGED);
    d.algo = GS_ALGO_AUTO;
#if defined(GS_WITH_NCCL)
    ctx.dev_caps |= GS_DEV_CAP_NCCL;
    assert_int_equal(plan_with(NULL, &ctx, &d, &plan), GS_OK);
    assert_int_equal(plan.path, GS_PATH_NCCL);
    /* NCCL has no bitwise reduction: staged, a gradsync algorithm on host
     * copies; a CUDA-aware MPI has (MPI_BXOR) and takes it. */
    d.dtype = GS_DTYPE_I32;
    d.op = GS_OP_BXOR;
    ctx.dev_caps = GS_DEV_CAP_NCCL;
    assert_int_equal(plan_with(NULL, &ctx, &d, &plan), GS_OK);
    assert_int_equal(plan.path, GS_PATH_STAGED);
    assert_int_not_equal(plan.algo, GS_ALGO_NATIVE);
    ctx.dev_caps = GS_DEV_CAP_NCCL | GS_DEV_CAP_MPI_CUDA;
    assert_int_equal(plan_with(NULL, &ctx, &d, &plan), GS_OK);
    assert_int_equal(plan.path, GS_PATH_MPI_CUDA);
    d.op = GS_OP_SUM;
    d.dtype = GS_DTYPE_F32;
#endif
#else
    (void)policy;
    (void)cfg;
    d.algo = GS_ALGO_RING;
    assert_int_equal(plan_with(NULL, &ctx, &d, &plan), GS_ERR_UNSUPPORTED);
#endif
    /* Host buffers never leave the host path, whatever the context has. */
    d = plan_desc(GS_COLL_ALLREDUCE, 1000);
    assert_int_equal(plan_with(NULL, &ctx, &d, &plan), GS_OK);
    assert_int_equal(plan.path, GS_PATH_HOST);
    assert_string_equal(gs__path_name(GS_PATH_NCCL), "nccl");
    assert_string_equal(gs__scheme_name(GS_SCHEME_SPARSE_GATHER), "sparse gather");
    assert_string_equal(gs__path_name((gs__path_t)99), "unknown");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_algo_policy_bare_name),
        cmocka_unit_test(test_algo_policy_per_collective),
        cmocka_unit_test(test_algo_policy_rejects),
        cmocka_unit_test(test_algo_policy_hier),
        cmocka_unit_test(test_algo_offers),
        cmocka_unit_test(test_algo_split_covers_exactly),
        cmocka_unit_test(test_algo_tag_layout),
        cmocka_unit_test(test_algo_plan_host_schemes),
        cmocka_unit_test(test_algo_plan_device_paths),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
