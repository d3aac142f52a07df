/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gs_info: what this gradsync build is and how it is configured, in the
 * manner of ucc_info and ompi_info. With no argument it prints the version,
 * the CPU reduction code path, the device support, whether the zstd stage
 * is built in, whether test hooks are, the transports and every optional
 * part (core/build_info.h) with how to build in one that is off; --env prints every knob with the value it
 * resolves to here and where that value came from; --env-md prints the
 * markdown table that is checked in as docs/env.md (tools/gen_env_doc.sh).
 * It reads internal headers and links the static library; it does not open
 * sockets or create a communicator.
 */
#include "compress/codec.h"
#include "core/build_info.h"
#include "core/config.h"
#include "core/env_table.h"
#include "device/memkind.h"
#include "core/reduce_cpu.h"
#include "gradsync/gradsync.h"

#include <stdio.h>
#include <string.h>

static void usage(FILE *out)
{
    fprintf(out, "usage: gs_info [--env | --env-md | --help]\n"
                 "  (no option)  print the gradsync version, the CPU reduction code path, the\n"
                 "               transports and the optional parts built in\n"
                 "  --env        print every GS_* knob, its resolved value and its source\n"
                 "  --env-md     print the knob table as markdown (docs/env.md)\n");
}

/* The transports built in, on one line, then every part (core/build_info.h): on or off,
 * what it is, and for one that is off how to build it in. */
static void print_parts(void)
{
    size_t n = 0;
    const gs__build_part_t *parts = gs__build_parts(&n);
    const char *sep = "";

    printf("transports:");
    for (size_t i = 0; i < n; i++) {
        if (parts[i].transport && parts[i].on) {
            printf("%s %s", sep, parts[i].name);
            sep = ",";
        }
    }
    printf("\nbuilt in:\n");
    for (size_t i = 0; i < n; i++) {
        printf("  %-8s %-4s %s", parts[i].name, parts[i].on ? "on" : "off", parts[i].what);
        if (!parts[i].on && (parts[i].rebuild[0] != '\0')) {
            printf(" (not built: %s)", parts[i].rebuild);
        }
        printf("\n");
    }
}

static int print_version(void)
{
    char zstd[160];

    gs__zstd_summary(zstd, sizeof(zstd));
    printf("gradsync %s (version number %u, built with headers %s)\n", gs_version_string(),
           gs_version(), GS_VERSION_STRING);
    printf("reduce isa: %s\n", gs__reduce_isa());
    printf("device buffers: %s\n", gs__device_summary());
    /* The codecs' lossless stage (CMake GS_WITH_ZSTD): "on (libzstd ...)" or "off (...)". */
    printf("zstd: %s\n", zstd);
    /* "yes" only when linked with the test variant of the library
     * (gradsync_testhooks: env_table.h's GS_ENV_TEST_ROWS compiled in); the
     * gs_info that is built and installed always says "no". */
    printf("test hooks: %s\n", gs__cfg_test_hooks() ? "yes" : "no");
    print_parts();
    return 0;
}

static int print_env(void)
{
    gs__cfg_t cfg;
    char line[GS_CFG_STR_MAX + 128];
    gs_status_t status;
    int i;

    gs__cfg_warn_unknown_env();
    status = gs__cfg_resolve(NULL, 1, &cfg);
    if (status != GS_OK) {
        fprintf(stderr, "gs_info: cannot resolve the configuration: %s (%s)\n", gs_last_error(),
                gs_status_name(status));
        return 1;
    }
    for (i = 0; i < gs__cfg_num_knobs(); i++) {
        status = gs__cfg_describe(&cfg, i, line, sizeof(line));
        if (status != GS_OK) {
            fprintf(stderr, "gs_info: %s\n", gs_last_error());
            return 1;
        }
        printf("%s\n", line);
    }
    return 0;
}

/* Print @p s for a markdown table cell: '|' would end the cell, so escape it. */
static void md_cell(const char *s)
{
    for (; *s != '\0'; s++) {
        if (*s == '|') {
            fputs("\\|", stdout);
        } else {
            putchar(*s);
        }
    }
}

static const char *scope_name(int scope)
{
    switch (scope) {
    case GS_ENV_COMM:
        return "comm";
    case GS_ENV_PROC:
        return "process";
    case GS_ENV_TEST:
        return "test";
    default:
        return "?";
    }
}

static void md_row(const char *env, int kind, int int_def, const char *str_def, long long min,
                   long long max, int scope, const char *doc)
{
    printf("| `%s` | ", env);
    if (kind == GS_ENV_INT) {
        /* A default below the minimum is the "not set" marker (e.g. GS_RANK). */
        if (int_def < min) {
            printf("unset");
        } else {
            printf("`%d`", int_def);
        }
        printf(" | %lld to %lld | ", min, max);
    } else {
        if (str_def[0] == '\0') {
            printf("(empty)");
        } else {
            printf("`");
            md_cell(str_def);
            printf("`");
        }
        printf(" | string | ");
    }
    printf("%s | ", scope_name(scope));
    md_cell(doc);
    printf(" |\n");
}

static int print_env_md(void)
{
    printf("# gradsync environment variables\n"
           "\n"
           "<!-- Generated from src/core/env_table.h by tools/gen_env_doc.sh "
           "(gs_info --env-md). Do not edit by hand. -->\n"
           "\n"
           "Precedence: built-in default < `GS_*` environment variable < the field of\n"
           "the same name in `gs_config_t` (comm-scope knobs, and the process knobs\n"
           "whose description names a field). A variable set to\n"
           "the empty string counts as unset. Values are parsed strictly: a number\n"
           "that does not parse completely, or lies outside its range, fails\n"
           "communicator creation with `GS_ERR_INVALID_ARG` naming the variable.\n"
           "`gs_info --env` prints the value each knob resolves to and its source.\n"
           "Unknown `GS_*` variables are reported once with a warning.\n"
           "\n"
           "Scopes: **comm** is per communicator and also a `gs_config_t` field;\n"
           "**process** is read once per process (a `gs_config_t` field, where there\n"
           "is one, applies from the `gs_comm_init*` that sets it on). The test-only\n"
           "fault switches are not listed: they exist only in the test variant of the\n"
           "library that gradsync's own tests link, never in one that is built by\n"
           "default, installed or loaded from Python (CONTRIBUTING.md, \"Test\n"
           "switches\").\n"
           "\n"
           "`gs_comm_init_env()` also reads the launcher variables for rank, world\n"
           "size, local rank and master address and port when neither the caller\n"
           "nor `GS_*` set them, in this order: torchrun's `RANK`, `WORLD_SIZE`,\n"
           "`LOCAL_RANK`, `MASTER_ADDR`, `MASTER_PORT`; Open MPI's\n"
           "`OMPI_COMM_WORLD_RANK`, `OMPI_COMM_WORLD_SIZE`,\n"
           "`OMPI_COMM_WORLD_LOCAL_RANK`; PMIx's `PMIX_RANK`; Slurm's\n"
           "`SLURM_PROCID`, `SLURM_NTASKS`, `SLURM_LOCALID`; MPICH's and Intel MPI's\n"
           "(Hydra) `PMI_RANK`, `PMI_SIZE`, `MPI_LOCALRANKID`. With none of them set it\n"
           "runs as a single rank. The local rank stays unset (-1) when nothing\n"
           "gives it.\n"
           "\n"
           "| Variable | Default | Range | Scope | Description |\n"
           "| --- | --- | --- | --- | --- |\n");
#define MD_ROW(_env, _field, _kind, _idef, _sdef, _min, _max, _scope, _doc)                        \
    md_row((_env), (_kind), (_idef), (_sdef), (_min), (_max), (_scope), (_doc));
    GS_ENV_TABLE(MD_ROW)
#undef MD_ROW
    return (fflush(stdout) == 0) ? 0 : 1;
}

int main(int argc, char **argv)
{
    if (argc == 1) {
        return print_version();
    }
    if (argc == 2) {
        if (strcmp(argv[1], "--env") == 0) {
            return print_env();
        }
        if (strcmp(argv[1], "--env-md") == 0) {
            return print_env_md();
        }
        if (strcmp(argv[1], "--version") == 0) {
            printf("gs_info (gradsync) %s\n", gs_version_string());
            return 0;
        }
        if ((strcmp(argv[1], "--help") == 0) || (strcmp(argv[1], "-h") == 0)) {
            usage(stdout);
            return 0;
        }
    }
    fprintf(stderr, "gs_info: unknown arguments\n");
    usage(stderr);
    return 1;
}
