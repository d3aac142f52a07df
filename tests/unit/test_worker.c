/* SPDX-License-Identifier: Apache-2.0 */
/* The worker runs tasks in submission order and reports their status. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_worker_fifo_order_and_status),
        cmocka_unit_test(test_worker_stop_drains_queue),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
