/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Replays fuzz corpora as ordinary tests, so every build runs them even
 * without libFuzzer (zstd's regression driver idea). Usage:
 *   <target>_replay FILE_OR_DIR...
 * Each file's bytes are passed once to LLVMFuzzerTestOneInput; a crash or
 * sanitizer report fails the test.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int replay_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    uint8_t *buf;
    long len;

    if (f == NULL) {
        fprintf(stderr, "cannot open %s\n", path);
        return 1;
    }
    fseek(f, 0, SEEK_END);
    len = ftell(f);
    fseek(f, 0, SEEK_SET);
    buf = malloc(len > 0 ? (size_t)len : 1);
    if ((buf == NULL) || (fread(buf, 1, (size_t)len, f) != (size_t)len)) {
        fprintf(stderr, "cannot read %s\n", path);
        fclose(f);
        free(buf);
        return 1;
    }
    fclose(f);
    LLVMFuzzerTestOneInput(buf, (size_t)len);
    free(buf);
    return 0;
}

int main(int argc, char **argv)
{
    int files = 0;
    int errors = 0;

    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0) {
            fprintf(stderr, "no such file or directory: %s\n", argv[i]);
            return 1;
        }
        if (S_ISDIR(st.st_mode)) {
            DIR *d = opendir(argv[i]);
            struct dirent *e;
            while ((d != NULL) && ((e = readdir(d)) != NULL)) {
                char path[4096];
                if (e->d_name[0] == '.') {
                    continue;
                }
                snprintf(path, sizeof(path), "%s/%s", argv[i], e->d_name);
                errors += replay_file(path);
                files++;
            }
            if (d != NULL) {
                closedir(d);
            }
        } else {
            errors += replay_file(argv[i]);
            files++;
        }
    }
    printf("%d passed, %d failed\n", files - errors, errors);
    return (errors == 0 && files > 0) ? 0 : 1;
}
