/* SPDX-License-Identifier: Apache-2.0 */
/* The parts this build has (build_info.h), from the GS_WITH_* definitions CMake passes. */
#include "core/build_info.h"

#ifdef GS_WITH_MPI
#define BUILD_MPI 1
#else
#define BUILD_MPI 0
#endif
#ifdef GS_WITH_CUDA
#define BUILD_CUDA 1
#else
#define BUILD_CUDA 0
#endif
#ifdef GS_WITH_NCCL
#define BUILD_NCCL 1
#else
#define BUILD_NCCL 0
#endif
#ifdef GS_WITH_ZSTD
#define BUILD_ZSTD 1
#else
#define BUILD_ZSTD 0
#endif
#ifdef GS_WITH_OPENSSL
#define BUILD_OPENSSL 1
#else
#define BUILD_OPENSSL 0
#endif

static const gs__build_part_t build_parts[] = {
    {"tcp", 1, 1, "the TCP transport (sockets; the rendezvous at GS_MASTER_ADDR)", ""},
    {"shm", 0, 1, "shared-memory rings between the ranks of one host, under tcp (GS_SHM)", ""},
    {"mpi", 1, BUILD_MPI,
     "the MPI transport and gs_comm_init_mpi; mpirun/srun jobs bootstrap through MPI",
     "install an MPI library (Debian: libopenmpi-dev) and configure with GS_WITH_MPI=AUTO or ON"},
    {"cuda", 0, BUILD_CUDA, "device buffers (CUDA kernels, the staged device path)",
     "install the CUDA toolkit and configure with GS_WITH_CUDA=AUTO or ON"},
    {"nccl", 0, BUILD_NCCL, "the NCCL engine for device buffers (GS_TRANSPORT=nccl)",
     "install NCCL (set NCCL_HOME) and configure with CUDA and GS_WITH_NCCL=AUTO or ON"},
    {"zstd", 0, BUILD_ZSTD, "the codecs' lossless zstd stage",
     "install libzstd (Debian: libzstd-dev) and configure with GS_WITH_ZSTD=AUTO or ON"},
    {"openssl", 0, BUILD_OPENSSL,
     "OpenSSL: connection authentication (GS_AUTH_TOKEN) and TLS (GS_TLS)",
     "install OpenSSL (Debian: libssl-dev) and configure with GS_WITH_OPENSSL=AUTO or ON"},
};

const gs__build_part_t *gs__build_parts(size_t *count_out)
{
    if (count_out != NULL) {
        *count_out = sizeof(build_parts) / sizeof(build_parts[0]);
    }
    return build_parts;
}
