/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A one-line progress indicator for long runs (gs-bench sweeps, the soak,
 * the training example): "label  45%  size 4M  12 s, about 15 s left",
 * redrawn in place on stderr at most a few times a second when stderr is a
 * terminal, and nothing at all otherwise (a log, a pipe, gsrun's tagged
 * output), so that files and CI logs stay clean. Header-only, for the
 * programs of the tree (not part of the library).
 *
 *   gs_progress_t p;
 *   gs_progress_start(&p, "allreduce", total_work, rank == 0);
 *   ... gs_progress_show(&p, work_done, "size 4M");
 *   gs_progress_clear(&p);   before printing a result line on the terminal
 *   gs_progress_end(&p);     at the end
 *
 * Work is any additive measure (bytes, steps, seconds); the estimate of the
 * time left assumes the rest goes at the average rate so far.
 */
#ifndef GS_TOOLS_PROGRESS_H
#define GS_TOOLS_PROGRESS_H

#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct gs_progress {
    int on;       /* drawing: asked for and stderr is a terminal */
    int drawn;    /* a line is on the screen now */
    double t0;    /* start, seconds */
    double last;  /* last redraw, seconds */
    double total; /* work of the whole run */
    char label[48];
} gs_progress_t;

static inline double gs_progress_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static inline void gs_progress_start(gs_progress_t *p, const char *label, double total, int want)
{
    memset(p, 0, sizeof(*p));
    p->on = want && (total > 0.0) && isatty(STDERR_FILENO);
    p->t0 = gs_progress_now();
    p->total = total;
    snprintf(p->label, sizeof(p->label), "%s", label);
}

static inline void gs_progress_clear(gs_progress_t *p)
{
    if (p->on && p->drawn) {
        fputs("\r\033[K", stderr);
        fflush(stderr);
        p->drawn = 0;
    }
}

/* Redraw with @p done of the total finished; @p what says where (may be ""). */
static inline void gs_progress_show(gs_progress_t *p, double done, const char *what)
{
    const double now = gs_progress_now();
    const double elapsed = now - p->t0;
    double frac;

    if (!p->on || (p->drawn && (now - p->last < 0.2))) {
        return;
    }
    frac = (done <= 0.0) ? 0.0 : (done >= p->total) ? 1.0 : done / p->total;
    fprintf(stderr, "\r\033[K%s  %3.0f%%  %s  %.0f s", p->label, frac * 100.0, what, elapsed);
    if ((frac > 0.0) && (frac < 1.0)) {
        fprintf(stderr, ", about %.0f s left", elapsed * (1.0 - frac) / frac);
    }
    fflush(stderr);
    p->drawn = 1;
    p->last = now;
}

static inline void gs_progress_end(gs_progress_t *p)
{
    gs_progress_clear(p);
    p->on = 0;
}

#endif /* GS_TOOLS_PROGRESS_H */
