/*
 * decision_probe: calls collectives the way the collbench kernel does, so that an
 * LD_PRELOAD trace (algtrace.c) can show what Open MPI's "default" runs for each one.
 *
 *   mpirun -np P decision_probe POINTS
 *
 * POINTS has one line per call: "<collective> <size> <commutative 0|1>". <size> is collbench's
 * size, OSU's bytes per rank (datatype MPI_UNSIGNED_CHAR, one byte): count for bcast, reduce
 * and allreduce; the block per rank for gather, scatter, allgather(v) and alltoall(v); the
 * whole vector for reduce_scatter (recvcounts size/P, one more for the first size%P ranks)
 * and reduce_scatter_block (recvcount size/P). Reductions use MPI_SUM, or with commutative 0
 * a user-defined op that Open MPI is told is not commutative.
 *
 * Line i (0-based) runs once on its own MPI_Comm_dup of MPI_COMM_WORLD, the (i+1)-th dup of
 * the program, which is how algtrace.c's epoch numbers identify it. Rank 0 prints
 * "done <n>" at the end.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void first_wins(void *in, void *inout, int *len, MPI_Datatype *type)
{
    (void)type;
    memcpy(inout, in, (size_t)*len); /* order-dependent: a non-commutative op */
}

static void *xmalloc(size_t n)
{
    void *p = calloc(n ? n : 1, 1);
    if (!p) {
        fprintf(stderr, "decision_probe: out of memory (%zu bytes)\n", n);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    return p;
}

static int run(const char *coll, long long size, MPI_Op op, MPI_Comm c, int P, int rank)
{
    const MPI_Datatype t = MPI_UNSIGNED_CHAR;
    const int n = (int)size;
    /* Buffers of size * P where a rank sends or receives a block per rank, else of size. */
    const int per_rank = !strcmp(coll, "gather") || !strcmp(coll, "scatter")
        || !strncmp(coll, "allgather", 9) || !strncmp(coll, "alltoall", 8);
    const size_t len = (size_t)size * (per_rank ? (size_t)P : 1);
    unsigned char *s = xmalloc(len), *r = xmalloc(len);
    int *counts = xmalloc(sizeof(int) * (size_t)P), *displs = xmalloc(sizeof(int) * (size_t)P);
    int rc = MPI_ERR_OTHER;
    for (int i = 0; i < P; i++) {
        counts[i] = n;
        displs[i] = i * n;
    }
    if (!strcmp(coll, "barrier"))
        rc = MPI_Barrier(c);
    else if (!strcmp(coll, "bcast"))
        rc = MPI_Bcast(s, n, t, 0, c);
    else if (!strcmp(coll, "gather"))
        rc = MPI_Gather(s, n, t, r, n, t, 0, c);
    else if (!strcmp(coll, "scatter"))
        rc = MPI_Scatter(s, n, t, r, n, t, 0, c);
    else if (!strcmp(coll, "reduce"))
        rc = MPI_Reduce(s, r, n, t, op, 0, c);
    else if (!strcmp(coll, "allreduce"))
        rc = MPI_Allreduce(s, r, n, t, op, c);
    else if (!strcmp(coll, "allgather"))
        rc = MPI_Allgather(s, n, t, r, n, t, c);
    else if (!strcmp(coll, "allgatherv"))
        rc = MPI_Allgatherv(s, n, t, r, counts, displs, t, c);
    else if (!strcmp(coll, "alltoall"))
        rc = MPI_Alltoall(s, n, t, r, n, t, c);
    else if (!strcmp(coll, "alltoallv"))
        rc = MPI_Alltoallv(s, counts, displs, t, r, counts, displs, t, c);
    else if (!strcmp(coll, "reduce_scatter")) {
        for (int i = 0; i < P; i++)
            counts[i] = size < P ? (i < size ? 1 : 0) : (int)(size / P) + (i < size % P);
        rc = MPI_Reduce_scatter(s, r, counts, t, op, c);
    } else if (!strcmp(coll, "reduce_scatter_block"))
        rc = MPI_Reduce_scatter_block(s, r, (int)(size / P), t, op, c);
    else if (rank == 0)
        fprintf(stderr, "decision_probe: unknown collective %s\n", coll);
    free(s);
    free(r);
    free(counts);
    free(displs);
    return rc;
}

int main(int argc, char **argv)
{
    int rank, P, commutative, n = 0;
    long long size;
    char coll[64];
    MPI_Op noncommutative;
    FILE *f;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &P);
    if (argc != 2 || !(f = fopen(argv[1], "r"))) {
        if (rank == 0)
            fprintf(stderr, "usage: decision_probe POINTS\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
        return 2;
    }
    MPI_Op_create(first_wins, 0, &noncommutative);
    while (fscanf(f, "%63s %lld %d", coll, &size, &commutative) == 3) {
        MPI_Comm c;
        MPI_Comm_dup(MPI_COMM_WORLD, &c);
        if (run(coll, size, commutative ? MPI_SUM : noncommutative, c, P, rank) != MPI_SUCCESS) {
            fprintf(stderr, "decision_probe: %s %lld failed\n", coll, size);
            MPI_Abort(MPI_COMM_WORLD, 3);
        }
        MPI_Comm_free(&c);
        n++;
    }
    fclose(f);
    MPI_Op_free(&noncommutative);
    if (rank == 0)
        printf("done %d\n", n);
    MPI_Finalize();
    return 0;
}
