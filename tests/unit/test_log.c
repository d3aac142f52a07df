/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests of log.c: GS_DEBUG and GS_DEBUG_SUBSYS parsing, the warning
 * for a bad value, GS_DEBUG_FILE path expansion, the exact line prefix,
 * truncation of long lines, whole lines from concurrent threads, and errno
 * preservation. gs__log_reset_for_test() makes the next gs__log_init()
 * read the environment again; every test writes into its own temp dir.
 */
#include "core/config.h"
#include "core/log.h"

#include "gradsync/version.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cmocka.h>

#define TEST_FILE_MAX (1 << 20)

typedef struct log_fixture {
    char dir[64];
    char path[128];
} log_fixture_t;

static int log_setup(void **state)
{
    log_fixture_t *fx = calloc(1, sizeof(*fx));

    if (fx == NULL) {
        return -1;
    }
    (void)snprintf(fx->dir, sizeof(fx->dir), "/tmp/gs_test_log_XXXXXX");
    if (mkdtemp(fx->dir) == NULL) {
        free(fx);
        return -1;
    }
    (void)snprintf(fx->path, sizeof(fx->path), "%s/log.txt", fx->dir);
    unsetenv("GS_DEBUG");
    unsetenv("GS_DEBUG_SUBSYS");
    unsetenv("GS_DEBUG_FILE");
    unsetenv("GS_RANK");
    unsetenv("RANK");
    gs__log_reset_for_test();
    *state = fx;
    return 0;
}

static int log_teardown(void **state)
{
    log_fixture_t *fx = *state;
    char path[384];
    struct dirent *ent;
    DIR *d;

    unsetenv("GS_DEBUG");
    unsetenv("GS_DEBUG_SUBSYS");
    unsetenv("GS_DEBUG_FILE");
    unsetenv("GS_RANK");
    gs__log_reset_for_test();
    d = opendir(fx->dir);
    if (d != NULL) {
        while ((ent = readdir(d)) != NULL) {
            if (ent->d_name[0] != '.') {
                (void)snprintf(path, sizeof(path), "%s/%s", fx->dir, ent->d_name);
                (void)unlink(path);
            }
        }
        closedir(d);
    }
    (void)rmdir(fx->dir);
    free(fx);
    return 0;
}

/* Read a whole (small) file into a malloc'd string; the caller frees it. */
static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    char *buf;
    size_t n;

    assert_non_null(f);
    buf = malloc(TEST_FILE_MAX + 1);
    assert_non_null(buf);
    n = fread(buf, 1, TEST_FILE_MAX, f);
    fclose(f);
    buf[n] = '\0';
    return buf;
}

static int count_lines(const char *s)
{
    int n = 0;

    for (; *s != '\0'; s++) {
        n += (*s == '\n');
    }
    return n;
}

static void short_host(char *buf, size_t len)
{
    char *dot;

    assert_int_equal(gethostname(buf, len), 0);
    buf[len - 1] = '\0';
    dot = strchr(buf, '.');
    if (dot != NULL) {
        *dot = '\0';
    }
}

static void test_log_level_default_warn(void **state)
{
    (void)state;
    gs__log_init();
    assert_int_equal(atomic_load(&gs__log_level), GS_LOG_WARN);
    assert_int_equal(atomic_load(&gs__log_subsys_mask),
                     GS_SUBSYS_INIT | GS_SUBSYS_BOOT | GS_SUBSYS_ENV);
    assert_true(gs__log_enabled(GS_LOG_WARN, GS_SUBSYS_ALL));
    assert_false(gs__log_enabled(GS_LOG_INFO, GS_SUBSYS_INIT));
}

static void test_log_level_parse(void **state)
{
    static const struct {
        const char *text;
        int level;
    } cases[] = {{"NONE", GS_LOG_NONE},   {"none", GS_LOG_NONE}, {"VERSION", GS_LOG_VERSION},
                 {"Warn", GS_LOG_WARN},   {"info", GS_LOG_INFO}, {"INFO", GS_LOG_INFO},
                 {"TrAcE", GS_LOG_TRACE}, {"", GS_LOG_WARN}};
    const log_fixture_t *fx = *state;
    size_t i;

    setenv("GS_DEBUG_FILE", fx->path, 1); /* keep version lines off the test output */
    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        setenv("GS_DEBUG", cases[i].text, 1);
        gs__log_reset_for_test();
        assert_int_equal(atomic_load(&gs__log_level), -1);
        gs__log_init();
        assert_int_equal(atomic_load(&gs__log_level), cases[i].level);
    }
    /* The lazy path: gs__log_enabled() initialises on first use. */
    setenv("GS_DEBUG", "INFO", 1);
    gs__log_reset_for_test();
    assert_true(gs__log_enabled(GS_LOG_INFO, GS_SUBSYS_ENV));
    assert_false(gs__log_enabled(GS_LOG_INFO, GS_SUBSYS_NET));
    assert_false(gs__log_enabled(GS_LOG_TRACE, GS_SUBSYS_ENV));
}

static void test_log_bad_level_warns_once(void **state)
{
    log_fixture_t *fx = *state;
    char *text;

    setenv("GS_DEBUG", "loud", 1);
    setenv("GS_DEBUG_FILE", fx->path, 1);
    gs__log_reset_for_test();
    gs__log_init();
    assert_int_equal(atomic_load(&gs__log_level), GS_LOG_WARN);
    gs__log_reset_for_test();
    text = slurp(fx->path);
    assert_int_equal(count_lines(text), 1);
    assert_non_null(strstr(text, " GS WARN - GS_DEBUG=loud is not a log level"));
    free(text);
}

static void test_log_subsys_mask(void **state)
{
    static const struct {
        const char *text;
        unsigned mask;
    } cases[] = {
        {"NET,COLL", GS_SUBSYS_NET | GS_SUBSYS_COLL},
        {"net, coll", GS_SUBSYS_NET | GS_SUBSYS_COLL},
        {"^NET", GS_SUBSYS_ALL & ~(unsigned)GS_SUBSYS_NET},
        {"^NET,ENV", GS_SUBSYS_ALL & ~(unsigned)(GS_SUBSYS_NET | GS_SUBSYS_ENV)},
        {"ALL", GS_SUBSYS_ALL},
        {"p2p,ALLOC,cuda", GS_SUBSYS_P2P | GS_SUBSYS_ALLOC | GS_SUBSYS_CUDA},
        {"INIT,BOOT,NET,COLL,ALGO,COMP,PS,CUDA,ENV,ALLOC,P2P", (1u << GS_SUBSYS_NUM) - 1},
        {"", GS_SUBSYS_INIT | GS_SUBSYS_BOOT | GS_SUBSYS_ENV},
        {"INIT,BOGUS", GS_SUBSYS_INIT},
        {"NETWORK", 0},
    };
    const log_fixture_t *fx = *state;
    size_t i;

    setenv("GS_DEBUG_FILE", fx->path, 1); /* keep warnings off the test output */
    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        setenv("GS_DEBUG_SUBSYS", cases[i].text, 1);
        gs__log_reset_for_test();
        gs__log_init();
        assert_int_equal(atomic_load(&gs__log_subsys_mask), cases[i].mask);
    }
}

static void test_log_bad_subsys_warns(void **state)
{
    log_fixture_t *fx = *state;
    char *text;

    setenv("GS_DEBUG_SUBSYS", "INIT,BOGUS", 1);
    setenv("GS_DEBUG_FILE", fx->path, 1);
    gs__log_reset_for_test();
    gs__log_init();
    gs__log_reset_for_test();
    text = slurp(fx->path);
    assert_int_equal(count_lines(text), 1);
    assert_non_null(strstr(text, "GS_DEBUG_SUBSYS: unknown subsystem BOGUS ignored"));
    free(text);
}

static void test_log_file_line_prefix(void **state)
{
    log_fixture_t *fx = *state;
    char tmpl[160];
    char path[192];
    char host[64];
    char expect[1024];
    char *text;
    const long tid = (long)syscall(SYS_gettid);

    (void)snprintf(tmpl, sizeof(tmpl), "%s/log_%%h_%%p_%%r_%%%%.txt", fx->dir);
    short_host(host, sizeof(host));
    (void)snprintf(path, sizeof(path), "%s/log_%s_%ld_7_%%.txt", fx->dir, host, (long)getpid());
    setenv("GS_DEBUG", "INFO", 1);
    setenv("GS_DEBUG_SUBSYS", "INIT", 1);
    setenv("GS_DEBUG_FILE", tmpl, 1);
    setenv("GS_RANK", "7", 1); /* the rank known at init names the file */
    gs__log_reset_for_test();

    GS_INFO(INIT, "hello %d", 42);
    GS_INFO(NET, "hidden %d", 1); /* NET is not in the mask */
    gs__log_set_rank(3);
    GS_INFO(INIT, "ranked\n");
    GS_WARN("warned %s", "x");
    gs__log_set_rank(-1);
    GS_INFO(INIT, "no rank");
    gs__log_reset_for_test();

    text = slurp(path);
    (void)snprintf(expect, sizeof(expect),
                   "%s:%ld:%ld [7] GS VERSION INIT gradsync version %s\n"
                   "%s:%ld:%ld [7] GS INFO INIT hello 42\n"
                   "%s:%ld:%ld [3] GS INFO INIT ranked\n"
                   "%s:%ld:%ld [3] GS WARN - warned x\n"
                   "%s:%ld:%ld [-] GS INFO INIT no rank\n",
                   host, (long)getpid(), tid, GS_VERSION_STRING, host, (long)getpid(), tid, host,
                   (long)getpid(), tid, host, (long)getpid(), tid, host, (long)getpid(), tid);
    assert_string_equal(text, expect);
    free(text);
}

static void test_log_file_fallback_to_stderr(void **state)
{
    log_fixture_t *fx = *state;
    char bad[192];

    (void)snprintf(bad, sizeof(bad), "%s/no/such/dir/log.txt", fx->dir);
    setenv("GS_DEBUG_FILE", bad, 1);
    setenv("GS_DEBUG", "NONE", 1); /* keep the fallback warning off the test output */
    gs__log_reset_for_test();
    gs__log_init();
    assert_int_equal(atomic_load(&gs__log_level), GS_LOG_NONE);
    assert_false(gs__log_enabled(GS_LOG_WARN, GS_SUBSYS_ALL));
    assert_int_equal(access(bad, F_OK), -1);
}

static void test_log_long_line_truncated(void **state)
{
    log_fixture_t *fx = *state;
    char *msg = malloc(5001);
    char *text;
    size_t len;

    assert_non_null(msg);
    memset(msg, 'm', 5000);
    msg[5000] = '\0';
    setenv("GS_DEBUG_FILE", fx->path, 1);
    gs__log_reset_for_test();
    GS_WARN("%s", msg);
    gs__log_reset_for_test();
    text = slurp(fx->path);
    len = strlen(text);
    assert_int_equal(count_lines(text), 1);
    assert_true(len <= 2048);
    assert_true(len > 1000);
    assert_int_equal(text[len - 1], '\n');
    assert_memory_equal(text + len - 4, "...", 3);
    free(text);
    free(msg);
}

#define THREADS 4
#define LINES_PER_THREAD 200

static void *log_thread(void *arg)
{
    const int id = (int)(intptr_t)arg;
    int i;

    for (i = 0; i < LINES_PER_THREAD; i++) {
        GS_WARN("thread %d line %d padding-padding-padding-padding-padding-padding-end", id, i);
    }
    return NULL;
}

static void test_log_threads_whole_lines(void **state)
{
    log_fixture_t *fx = *state;
    pthread_t threads[THREADS];
    int seen[THREADS] = {0};
    char *text;
    char *line;
    char *save = NULL;
    int i;

    setenv("GS_DEBUG_FILE", fx->path, 1);
    gs__log_reset_for_test();
    for (i = 0; i < THREADS; i++) {
        assert_int_equal(pthread_create(&threads[i], NULL, log_thread, (void *)(intptr_t)i), 0);
    }
    for (i = 0; i < THREADS; i++) {
        assert_int_equal(pthread_join(threads[i], NULL), 0);
    }
    gs__log_reset_for_test();

    text = slurp(fx->path);
    assert_int_equal(count_lines(text), THREADS * LINES_PER_THREAD);
    for (line = strtok_r(text, "\n", &save); line != NULL; line = strtok_r(NULL, "\n", &save)) {
        const char *body = strstr(line, " GS WARN - thread ");
        int id = -1;
        int n = -1;

        assert_non_null(body);
        assert_null(strstr(body + 1, " GS WARN ")); /* exactly one prefix per line */
        assert_int_equal(sscanf(body, " GS WARN - thread %d line %d", &id, &n), 2);
        assert_true((id >= 0) && (id < THREADS));
        assert_int_equal(n, seen[id]); /* each thread's lines arrive in order */
        seen[id]++;
        assert_non_null(strstr(body, "-padding-end"));
    }
    for (i = 0; i < THREADS; i++) {
        assert_int_equal(seen[i], LINES_PER_THREAD);
    }
    free(text);
}

static void test_log_none_writes_nothing_and_keeps_errno(void **state)
{
    log_fixture_t *fx = *state;
    char *text;

    setenv("GS_DEBUG", "NONE", 1);
    setenv("GS_DEBUG_FILE", fx->path, 1);
    gs__log_reset_for_test();
    errno = EBADF;
    GS_WARN("not written");
    assert_int_equal(errno, EBADF);
    setenv("GS_DEBUG", "WARN", 1);
    gs__log_reset_for_test();
    errno = ECONNRESET;
    GS_WARN("written");
    assert_int_equal(errno, ECONNRESET);
    gs__log_reset_for_test();
    text = slurp(fx->path);
    assert_null(strstr(text, "not written"));
    assert_non_null(strstr(text, "GS WARN - written\n"));
    assert_int_equal(count_lines(text), 1);
    free(text);
}

/* The one table of subsystems (GS_SUBSYS_MAP): distinct bits, a count that
 * matches, and every name in the GS_DEBUG_SUBSYS documentation (env.md). */
static void test_log_subsys_table(void **state)
{
    static const struct {
        unsigned bit;
        const char *name;
    } rows[] = {
#define ROW(_name, _bit, _str) {_name, _str},
        GS_SUBSYS_MAP(ROW)
#undef ROW
    };
    const char *doc = NULL;
    unsigned seen = 0;

    (void)state;
    assert_int_equal(sizeof(rows) / sizeof(rows[0]), GS_SUBSYS_NUM);
    for (int k = 0; k < gs__cfg_num_knobs(); k++) {
        if (strcmp(gs__cfg_knob_name(k), "GS_DEBUG_SUBSYS") == 0) {
            doc = gs__cfg_knob_doc(k);
        }
    }
    assert_non_null(doc);
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        assert_int_equal(rows[i].bit & seen, 0);
        seen |= rows[i].bit;
        assert_non_null(strstr(doc, rows[i].name));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_log_level_default_warn, log_setup, log_teardown),
        cmocka_unit_test_setup_teardown(test_log_level_parse, log_setup, log_teardown),
        cmocka_unit_test_setup_teardown(test_log_bad_level_warns_once, log_setup, log_teardown),
        cmocka_unit_test_setup_teardown(test_log_subsys_mask, log_setup, log_teardown),
        cmocka_unit_test(test_log_subsys_table),
        cmocka_unit_test_setup_teardown(test_log_bad_subsys_warns, log_setup, log_teardown),
        cmocka_unit_test_setup_teardown(test_log_file_line_prefix, log_setup, log_teardown),
        cmocka_unit_test_setup_teardown(test_log_file_fallback_to_stderr, log_setup, log_teardown),
        cmocka_unit_test_setup_teardown(test_log_long_line_truncated, log_setup, log_teardown),
        cmocka_unit_test_setup_teardown(test_log_threads_whole_lines, log_setup, log_teardown),
        cmocka_unit_test_setup_teardown(test_log_none_writes_nothing_and_keeps_errno, log_setup,
                                        log_teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
