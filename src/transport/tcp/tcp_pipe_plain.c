/* SPDX-License-Identifier: Apache-2.0 */
/* The plain byte pipe (tcp_pipe.h): the connection's socket itself. */
#include "transport/tcp/tcp_conn.h"

#include <string.h>
#include <sys/socket.h>

static ssize_t plain_writev(gs__tp_t *tp, gs__tcp_conn_t *c, const struct iovec *iov, size_t niov,
                            gs__tcp_pipe_res_t *res)
{
    struct msghdr mh;
    ssize_t n;

    (void)tp;
    memset(&mh, 0, sizeof(mh));
    mh.msg_iov = (struct iovec *)iov;
    mh.msg_iovlen = niov;
    n = sendmsg(c->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
    return (n >= 0) ? n : gs__tcp_pipe_errno(res);
}

static ssize_t plain_read(gs__tp_t *tp, gs__tcp_conn_t *c, void *dst, size_t len,
                          gs__tcp_pipe_res_t *res)
{
    ssize_t n;

    (void)tp;
    do {
        n = recv(c->fd, dst, len, MSG_DONTWAIT);
    } while ((n < 0) && (errno == EINTR));
    if (n > 0) {
        return n;
    }
    return (n == 0) ? GS_TCP_PIPE_EOF : gs__tcp_pipe_errno(res);
}

const gs__tcp_pipe_ops_t gs__tcp_pipe_plain = {
    .name = "tcp",
    .writev = plain_writev,
    .read = plain_read,
    .poll_out = true,
    .short_read_drains = true, /* the kernel had no more; skip the EAGAIN call */
};
