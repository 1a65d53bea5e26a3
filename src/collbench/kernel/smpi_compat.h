/*
 * Included before the kernel source when it is compiled with SimGrid's smpicc
 * (collbench.launch.simgrid passes `-include` this file).
 *
 * SMPI 3.32 has no MPI_T interface. These stand-ins report every control variable as
 * absent; collbench never runs the kernel with --mpit under SMPI (algorithms are forced
 * per launch with --cfg=smpi/<collective>:<algorithm>).
 *
 * posix_memalign is routed to malloc, which smpicc intercepts: SMPI's
 * smpi/auto-shared-malloc-thresh can then let all simulated ranks share their large
 * buffers (alignment does not matter in a simulation).
 *
 * Bookkeeping collectives on MPI_COMM_WORLD are routed to point-to-point code (below).
 */
#ifndef COLLBENCH_SMPI_COMPAT_H
#define COLLBENCH_SMPI_COMPAT_H

#include <mpi.h>
#include <stdlib.h>
#include <string.h>

typedef int MPI_T_cvar_handle;
typedef int MPI_T_enum;
#define MPI_T_SCOPE_CONSTANT 0
#define MPI_T_SCOPE_READONLY 1

static inline int collbench_no_mpit(void)
{
    return MPI_ERR_OTHER;
}

#define MPI_T_init_thread(required, provided) (*(provided) = (required), collbench_no_mpit())
#define MPI_T_finalize() collbench_no_mpit()
#define MPI_T_cvar_get_index(name, index) ((void)(name), (void)(index), collbench_no_mpit())
#define MPI_T_cvar_get_info(i, n, nl, v, dt, en, d, dl, b, s) collbench_no_mpit()
#define MPI_T_cvar_handle_alloc(i, obj, handle, count) collbench_no_mpit()
#define MPI_T_cvar_handle_free(handle) collbench_no_mpit()
#define MPI_T_cvar_read(handle, buf) collbench_no_mpit()
#define MPI_T_cvar_write(handle, buf) collbench_no_mpit()

static inline int collbench_smpi_memalign(void **ptr, size_t size)
{
    *ptr = malloc(size ? size : 1);
    return *ptr ? 0 : 12; /* ENOMEM */
}
#define posix_memalign(ptr, alignment, size) collbench_smpi_memalign((ptr), (size))

/*
 * The kernel's bookkeeping (job file, verdicts, statistics) runs collectives on
 * MPI_COMM_WORLD; measurements run on a duplicate. SMPI forces an algorithm for the whole
 * process, not per communicator, so a forced algorithm would also run the bookkeeping,
 * where a broken one (seen: split_bintree's small-message fallback mixing up consecutive
 * broadcasts) kills the launch, and SMP-aware ones cost minutes of node detection at
 * hundreds of ranks. Bookkeeping on MPI_COMM_WORLD therefore goes through point-to-point
 * binomial trees; every other communicator calls SMPI's collectives unchanged.
 */
#define COLLBENCH_WORLD_TAG 31991

static inline int collbench_world_bcast(void *buf, int count, MPI_Datatype type, int root,
                                        MPI_Comm comm)
{
    int rank, size, rc = MPI_SUCCESS;
    if (comm != MPI_COMM_WORLD)
        return (MPI_Bcast)(buf, count, type, root, comm);
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    int vrank = (rank - root + size) % size, mask = 1;
    while (mask < size) { /* receive from the parent */
        if (vrank & mask) {
            rc = MPI_Recv(buf, count, type, (rank - mask + size) % size, COLLBENCH_WORLD_TAG,
                          comm, MPI_STATUS_IGNORE);
            break;
        }
        mask <<= 1;
    }
    for (mask >>= 1; rc == MPI_SUCCESS && mask > 0; mask >>= 1) /* send to children */
        if (vrank + mask < size)
            rc = MPI_Send(buf, count, type, (rank + mask) % size, COLLBENCH_WORLD_TAG, comm);
    return rc;
}

static inline int collbench_world_reduce(const void *sbuf, void *rbuf, int count,
                                         MPI_Datatype type, MPI_Op op, int root, MPI_Comm comm)
{
    int rank, size, tsize, rc = MPI_SUCCESS;
    if (comm != MPI_COMM_WORLD)
        return (MPI_Reduce)(sbuf, rbuf, count, type, op, root, comm);
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    MPI_Type_size(type, &tsize);
    size_t bytes = (size_t)count * (size_t)tsize;
    char *acc = malloc(bytes ? bytes : 1), *in = malloc(bytes ? bytes : 1);
    if (!acc || !in) {
        free(acc);
        free(in);
        return MPI_ERR_NO_MEM;
    }
    memcpy(acc, sbuf, bytes);
    int vrank = (rank - root + size) % size;
    for (int mask = 1; rc == MPI_SUCCESS && mask < size; mask <<= 1) {
        if (vrank & mask) { /* hand the partial result to the parent and stop */
            rc = MPI_Send(acc, count, type, (rank - mask + size) % size, COLLBENCH_WORLD_TAG,
                          comm);
            break;
        }
        if (vrank + mask < size) {
            rc = MPI_Recv(in, count, type, (rank + mask) % size, COLLBENCH_WORLD_TAG, comm,
                          MPI_STATUS_IGNORE);
            if (rc == MPI_SUCCESS) /* the kernel only uses commutative MIN/MAX/SUM */
                rc = MPI_Reduce_local(in, acc, count, type, op);
        }
    }
    if (rc == MPI_SUCCESS && rank == root)
        memcpy(rbuf, acc, bytes);
    free(acc);
    free(in);
    return rc;
}

static inline int collbench_world_allreduce(const void *sbuf, void *rbuf, int count,
                                            MPI_Datatype type, MPI_Op op, MPI_Comm comm)
{
    if (comm != MPI_COMM_WORLD)
        return (MPI_Allreduce)(sbuf, rbuf, count, type, op, comm);
    int rc = collbench_world_reduce(sbuf, rbuf, count, type, op, 0, comm);
    return rc == MPI_SUCCESS ? collbench_world_bcast(rbuf, count, type, 0, comm) : rc;
}

#define MPI_Bcast(b, c, t, r, comm) collbench_world_bcast((b), (c), (t), (r), (comm))
#define MPI_Reduce(s, r, c, t, o, root, comm) \
    collbench_world_reduce((s), (r), (c), (t), (o), (root), (comm))
#define MPI_Allreduce(s, r, c, t, o, comm) collbench_world_allreduce((s), (r), (c), (t), (o), (comm))

#endif
