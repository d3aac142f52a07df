/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Roles and key placement of the parameter server (ps_shard.h has the
 * rules). Pure arithmetic.
 */
#include "ps/ps_shard.h"

int gs__ps_roles_init(gs__ps_roles_t *r, int nranks, int servers)
{
    if ((nranks < 1) || (servers < 0) || ((servers > 0) && (servers >= nranks))) {
        return -1;
    }
    r->nranks = nranks;
    r->colocated = (servers == 0);
    r->nservers = r->colocated ? nranks : servers;
    r->nworkers = r->colocated ? nranks : nranks - servers;
    return 0;
}

int gs__ps_worker_of(const gs__ps_roles_t *r, int rank)
{
    if ((rank < 0) || (rank >= r->nranks)) {
        return -1;
    }
    return (rank < r->nworkers) ? rank : -1;
}

int gs__ps_server_of(const gs__ps_roles_t *r, int rank)
{
    if ((rank < 0) || (rank >= r->nranks)) {
        return -1;
    }
    if (r->colocated) {
        return rank;
    }
    return (rank >= r->nranks - r->nservers) ? rank - (r->nranks - r->nservers) : -1;
}

int gs__ps_server_rank(const gs__ps_roles_t *r, int s)
{
    return r->colocated ? s : r->nranks - r->nservers + s;
}

int gs__ps_worker_rank(const gs__ps_roles_t *r, int w)
{
    (void)r;
    return w; /* workers are always the first ranks */
}

size_t gs__ps_nshards(const gs__ps_placer_t *p, size_t count, size_t esize)
{
    const uint64_t bytes = (uint64_t)count * (uint64_t)esize;

    if ((p->nservers <= 1) || (count <= 1) || (bytes < p->split_bytes)) {
        return 1;
    }
    return (count < (size_t)p->nservers) ? count : (size_t)p->nservers;
}

size_t gs__ps_place(gs__ps_placer_t *p, size_t count, size_t esize, gs__ps_range_t *out)
{
    const size_t k = gs__ps_nshards(p, count, esize);
    size_t offset = 0;

    if (k == 1) {
        int best = 0;

        for (int s = 1; s < p->nservers; s++) {
            if (p->load[s] < p->load[best]) {
                best = s;
            }
        }
        out[0].offset = 0;
        out[0].count = count;
        out[0].server = best;
        p->load[best] += (uint64_t)count * esize;
        return 1;
    }
    for (size_t i = 0; i < k; i++) {
        const size_t n = count / k + ((i < count % k) ? 1 : 0);
        const int s = (int)((i + p->nsplit) % (uint64_t)p->nservers);

        out[i].offset = offset;
        out[i].count = n;
        out[i].server = s;
        p->load[s] += (uint64_t)n * esize;
        offset += n;
    }
    p->nsplit++;
    return k;
}
