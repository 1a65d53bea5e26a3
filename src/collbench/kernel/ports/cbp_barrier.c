/*
 * Barrier: ports of Open MPI 5.0.x coll/base barriers (coll_base_barrier.c). All messages
 * are empty; Open MPI's synchronous-mode sends are kept synchronous (MPI_Ssend).
 */
#include "cbp_internal.h"

#include <stdlib.h>

#define TAG CBP_TAG_BARRIER

static char g_nothing;

static int zsend(int dest, MPI_Comm comm)
{
    return cbp_send(&g_nothing, 0, MPI_BYTE, dest, TAG, comm);
}

static int zssend(int dest, MPI_Comm comm)
{
    return cbp_ssend(&g_nothing, 0, MPI_BYTE, dest, TAG, comm);
}

static int zrecv(int src, MPI_Comm comm)
{
    char b;
    return cbp_recv(&b, 0, MPI_BYTE, src, TAG, comm, MPI_STATUS_IGNORE);
}

/* Empty exchange: receive posted first, blocking send, wait. */
static int zexchange(int dest, int src, MPI_Comm comm)
{
    char b;
    MPI_Request req;
    int rc;
    if ((rc = cbp_irecv(&b, 0, MPI_BYTE, src, TAG, comm, &req)))
        return rc;
    if ((rc = zsend(dest, comm)))
        return rc;
    return MPI_Wait(&req, MPI_STATUS_IGNORE);
}

/* Mirrors ompi_coll_base_barrier_intra_basic_linear: everyone reports to 0 (received with
 * MPI_ANY_SOURCE), then 0 releases everyone. */
static int barrier_linear(MPI_Comm comm, int rank, int size)
{
    int rc;
    if (rank > 0) {
        if ((rc = zsend(0, comm)))
            return rc;
        return zrecv(0, comm);
    }
    MPI_Request *req = malloc(sizeof(MPI_Request) * (size_t)size);
    char *b = malloc((size_t)size);
    if (req == NULL || b == NULL) {
        free(req);
        free(b);
        return MPI_ERR_NO_MEM;
    }
    rc = MPI_SUCCESS;
    for (int i = 1; i < size && rc == MPI_SUCCESS; i++)
        rc = cbp_irecv(&b[i], 0, MPI_BYTE, MPI_ANY_SOURCE, TAG, comm, &req[i - 1]);
    if (rc == MPI_SUCCESS)
        rc = MPI_Waitall(size - 1, req, MPI_STATUSES_IGNORE);
    for (int i = 1; i < size && rc == MPI_SUCCESS; i++)
        rc = zsend(i, comm);
    free(req);
    free(b);
    return rc;
}

/* Mirrors ompi_coll_base_barrier_intra_doublering: a token goes around the ring twice
 * (the second round with synchronous sends). */
static int barrier_double_ring(MPI_Comm comm, int rank, int size)
{
    int rc;
    int left = (rank + size - 1) % size, right = (rank + 1) % size;
    for (int round = 0; round < 2; round++) {
        if (rank > 0 && (rc = zrecv(left, comm)))
            return rc;
        if ((rc = round == 0 ? zsend(right, comm) : zssend(right, comm)))
            return rc;
        if (rank == 0 && (rc = zrecv(left, comm)))
            return rc;
    }
    return MPI_SUCCESS;
}

/* Mirrors ompi_coll_base_barrier_intra_recursivedoubling: ranks above the largest power
 * of two p check in with rank - p, the p lower ranks exchange at doubling distances, then
 * release the upper ones (synchronous send). */
static int barrier_recursive_doubling(MPI_Comm comm, int rank, int size)
{
    int rc;
    int p2 = cbp_next_pow2_above(size) >> 1;
    if (p2 != size) {
        if (rank >= p2) {
            if ((rc = zexchange(rank - p2, rank - p2, comm)))
                return rc;
        } else if (rank < size - p2 && (rc = zrecv(rank + p2, comm))) {
            return rc;
        }
    }
    if (rank < p2) {
        for (int mask = 1; mask < p2; mask <<= 1) {
            int peer = rank ^ mask;
            if (peer < p2 && (rc = zexchange(peer, peer, comm)))
                return rc;
        }
    }
    if (p2 != size && rank < size - p2)
        return zssend(rank + p2, comm);
    return MPI_SUCCESS;
}

/* Mirrors ompi_coll_base_barrier_intra_bruck: at distances 1, 2, 4, ... send to
 * rank + d, receive from rank - d. */
static int barrier_bruck(MPI_Comm comm, int rank, int size)
{
    int rc;
    for (int d = 1; d < size; d <<= 1)
        if ((rc = zexchange((rank + d) % size, (rank + size - d) % size, comm)))
            return rc;
    return MPI_SUCCESS;
}

/* Mirrors ompi_coll_base_barrier_intra_two_procs: one exchange; an error on other sizes. */
static int barrier_two_procs(MPI_Comm comm, int rank, int size)
{
    if (size != 2)
        return MPI_ERR_UNSUPPORTED_OPERATION;
    int peer = (rank + 1) & 1;
    return zexchange(peer, peer, comm);
}

/* Mirrors ompi_coll_base_barrier_intra_tree: fan-in up a binomial tree (partner
 * rank ^ jump for growing jumps), then fan-out down the same tree. */
static int barrier_tree(MPI_Comm comm, int rank, int size)
{
    int rc;
    int depth = cbp_next_pow2_incl(size);
    for (int jump = 1; jump < depth; jump <<= 1) {
        int partner = rank ^ jump;
        if ((partner & (jump - 1)) || partner >= size)
            continue;
        if (partner > rank)
            rc = zrecv(partner, comm);
        else
            rc = zsend(partner, comm);
        if (rc)
            return rc;
    }
    for (int jump = depth >> 1; jump > 0; jump >>= 1) {
        int partner = rank ^ jump;
        if ((partner & (jump - 1)) || partner >= size)
            continue;
        if (partner > rank)
            rc = zsend(partner, comm);
        else
            rc = zrecv(partner, comm);
        if (rc)
            return rc;
    }
    return MPI_SUCCESS;
}

int cbp_barrier(MPI_Comm comm, int alg)
{
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    if (alg < CBP_BARRIER_LINEAR || alg > CBP_BARRIER_TREE)
        return MPI_ERR_ARG;
    if (size == 1)
        return MPI_SUCCESS;
    switch (alg) {
    case CBP_BARRIER_LINEAR: /* ompi_coll_base_barrier_intra_basic_linear */
        return barrier_linear(comm, rank, size);
    case CBP_BARRIER_DOUBLE_RING: /* ompi_coll_base_barrier_intra_doublering */
        return barrier_double_ring(comm, rank, size);
    case CBP_BARRIER_RECURSIVE_DOUBLING: /* ompi_coll_base_barrier_intra_recursivedoubling */
        return barrier_recursive_doubling(comm, rank, size);
    case CBP_BARRIER_BRUCK: /* ompi_coll_base_barrier_intra_bruck */
        return barrier_bruck(comm, rank, size);
    case CBP_BARRIER_TWO_PROC: /* ompi_coll_base_barrier_intra_two_procs */
        return barrier_two_procs(comm, rank, size);
    default: /* CBP_BARRIER_TREE: ompi_coll_base_barrier_intra_tree */
        return barrier_tree(comm, rank, size);
    }
}
