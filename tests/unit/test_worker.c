/* SPDX-License-Identifier: Apache-2.0 */
/* The worker runs tasks in submission order and reports their status. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/error.h"
#include "core/worker.h"

typedef struct order_task {
    gs__task_t task;
    int id;
} order_task_t;

typedef struct order_log {
    int ids[64];
    int n;
} order_log_t;

static gs_status_t record_task(gs__task_t *task, void *ctx)
{
    order_log_t *log = (order_log_t *)ctx;
    order_task_t *t = (order_task_t *)task;

    log->ids[log->n++] = t->id;
    if (t->id == 3) {
        return gs__error_set(GS_ERR_TIMEOUT, "task %d timed out waiting for rank 2", t->id);
    }
    return GS_OK;
}

static void test_worker_fifo_order_and_status(void **state)
{
    gs__worker_t w;
    order_log_t log;
    order_task_t tasks[20];

    (void)state;
    memset(&log, 0, sizeof(log));
    assert_int_equal(gs__worker_start(&w, &log, NULL), GS_OK);
    for (int i = 0; i < 20; i++) {
        memset(&tasks[i], 0, sizeof(tasks[i]));
        tasks[i].id = i;
        tasks[i].task.run = record_task;
        assert_int_equal(gs__worker_submit(&w, &tasks[i].task), GS_OK);
    }
    assert_int_equal(gs__worker_wait(&w, &tasks[19].task), GS_OK);
    for (int i = 0; i < 20; i++) {
        assert_true(gs__task_done(&tasks[i].task));
        assert_int_equal(log.ids[i], i);
    }
    assert_int_equal(gs__worker_wait(&w, &tasks[3].task), GS_ERR_TIMEOUT);
    /* The worker thread's error text travels with the task. */
    assert_non_null(strstr(tasks[3].task.errmsg, "rank 2"));
    gs__worker_stop(&w);
}

static void test_worker_stop_drains_queue(void **state)
{
    gs__worker_t w;
    order_log_t log;
    order_task_t tasks[5];
    order_task_t late;

    (void)state;
    memset(&log, 0, sizeof(log));
    assert_int_equal(gs__worker_start(&w, &log, NULL), GS_OK);
    for (int i = 0; i < 5; i++) {
        memset(&tasks[i], 0, sizeof(tasks[i]));
        tasks[i].id = 10 + i;
        tasks[i].task.run = record_task;
        assert_int_equal(gs__worker_submit(&w, &tasks[i].task), GS_OK);
    }
    gs__worker_stop(&w);
    assert_int_equal(log.n, 5);
    /* After stop the struct is dead; a new start works again. */
    assert_int_equal(gs__worker_start(&w, &log, NULL), GS_OK);
    memset(&late, 0, sizeof(late));
    late.id = 99;
    late.task.run = record_task;
    assert_int_equal(gs__worker_submit(&w, &late.task), GS_OK);
    assert_int_equal(gs__worker_wait(&w, &late.task), GS_OK);
    gs__worker_stop(&w);
    assert_int_equal(log.ids[5], 99);
}

static atomic_int g_ticks;
static atomic_int g_idles;

static void count_tick(void *ctx)
{
    (void)ctx;
    atomic_fetch_add(&g_ticks, 1);
}

static void count_idle(void *ctx, uint64_t wait_ns)
{
    (void)ctx;
    (void)wait_ns;
    atomic_fetch_add(&g_idles, 1);
}

/* Wait up to 2 s for *counter to reach want; 1 when it did. */
static int reached(atomic_int *counter, int want)
{
    for (int i = 0; i < 400; i++) {
        if (atomic_load(counter) >= want) {
            return 1;
        }
        usleep(5000);
    }
    return 0;
}

/* gs__worker_poke: an idle worker whose next tick is far off runs it now (gs_comm_revoke
 * relies on it), and one without a tick drives idle() once instead. */
static void test_worker_poke_runs_a_pass_now(void **state)
{
    gs__worker_hooks_t hooks = {
        .idle = count_idle, .tick = count_tick, .tick_ns = 60ull * 1000000000ull};
    gs__worker_t w;

    (void)state;
    atomic_store(&g_ticks, 0);
    atomic_store(&g_idles, 0);
    assert_int_equal(gs__worker_start(&w, NULL, &hooks), GS_OK);
    usleep(20000);
    assert_int_equal(atomic_load(&g_ticks), 0);
    gs__worker_poke(&w);
    assert_true(reached(&g_ticks, 1));
    gs__worker_poke(&w);
    assert_true(reached(&g_ticks, 2));
    gs__worker_stop(&w);
    hooks.tick = NULL;
    hooks.tick_ns = 0;
    assert_int_equal(gs__worker_start(&w, NULL, &hooks), GS_OK);
    gs__worker_poke(&w);
    assert_true(reached(&g_idles, 1));
    gs__worker_stop(&w);
    assert_int_equal(atomic_load(&g_ticks), 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_worker_fifo_order_and_status),
        cmocka_unit_test(test_worker_poke_runs_a_pass_now),
        cmocka_unit_test(test_worker_stop_drains_queue),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
