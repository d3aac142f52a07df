/* SPDX-License-Identifier: Apache-2.0 */
#include "core/host.h"

#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/socket.h"

/* Mix the contents of a small file (boot id) into @p h; absent files add nothing. */
static uint64_t host_mix_file(uint64_t h, const char *path)
{
    char buf[128];
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return h;
    }
    ssize_t n = read(fd, buf, sizeof(buf));
    close(fd);
    return n > 0 ? gs__hash64(buf, (size_t)n, h) : h;
}

/* Mix the identity (device, inode) of a namespace link into @p h. */
static uint64_t host_mix_ns(uint64_t h, const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0) {
        return h;
    }
    uint64_t id[2] = {(uint64_t)st.st_dev, (uint64_t)st.st_ino};
    return gs__hash64(id, sizeof(id), h);
}

uint64_t gs__host_id(const char *override)
{
    uint64_t h;
    if (override != NULL && override[0] != '\0') {
        h = gs__hash64(override, strlen(override), 0x9e3779b97f4a7c15ull);
    } else {
        char name[256] = {0};
        (void)gethostname(name, sizeof(name) - 1);
        h = gs__hash64(name, strlen(name), 0x9e3779b97f4a7c15ull);
        h = host_mix_file(h, "/proc/sys/kernel/random/boot_id");
        h = host_mix_ns(h, "/proc/self/ns/net");
        h = host_mix_ns(h, "/proc/self/ns/ipc");
    }
    return h != 0 ? h : 1;
}
