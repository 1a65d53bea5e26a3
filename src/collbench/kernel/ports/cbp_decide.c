/*
 * coll/tuned's fixed decision rules (Open MPI 4.1.0 to 5.0.x, coll_tuned_decision_fixed.c)
 * for the collectives Open MPI's composite algorithms call on their own communicator:
 * bcast, reduce, gather and scatter. allreduce nonoverlapping runs the communicator's
 * reduce + bcast, allgather linear its gather + bcast, allgatherv's default its gatherv +
 * bcast, reduce_scatter nonoverlapping its reduce + scatterv, reduce_scatter_block
 * basic_linear its reduce + scatter. With no algorithm forced for those inner collectives
 * and no rules file, coll/tuned answers them with these rules.
 *
 * The rules hand the algorithm segment size 0 and fan-in/out 0; coll/base turns a chain
 * fanout of 0 into 1 (a pipeline), k-nomial bcast uses coll_tuned_bcast_knomial_radix
 * (default 4).
 *
 * The same switch points, as tables, are in collbench.catalog.ompi_decisions; the tests
 * check that both agree.
 */
#include "cbp_internal.h"

#include <string.h>

#define KiB 1024L
#define MiB (1024L * 1024L)
#define ROW_END (-1L)
#define TABLE_END (-2L)

/*
 * A table is a list of rows ending with TABLE_END. A row is
 *     first_nprocs, alg, bound, alg, bound, alg, ..., ROW_END
 * and reads "from first_nprocs processes on (up to the next row): alg below bound bytes,
 * then the next alg from bound bytes on, ...". The last row applies to every larger P.
 */

/* bcast: 1 basic_linear, 2 chain, 3 pipeline, 4 split_binary_tree, 5 binary_tree,
 * 6 binomial, 7 knomial, 8 scatter_allgather (the decision input: count x type size) */
static const long BCAST[] = {
    2, 3, 32, 5, 256, 3, 512, 7, 1 * KiB, 1, 32 * KiB, 5, 128 * KiB, 2, 256 * KiB, 1,
    512 * KiB, 6, 1 * MiB, 5, ROW_END,
    4, 5, 64, 6, 128, 5, 2 * KiB, 6, 8 * KiB, 1, 1 * MiB, 2, ROW_END,
    8, 7, 8, 5, 64, 7, 4 * KiB, 5, 16 * KiB, 6, 32 * KiB, 1, ROW_END,
    16, 7, 4 * KiB, 6, 1 * MiB, 8, ROW_END,
    32, 6, 2 * KiB, 7, ROW_END,
    64, 7, ROW_END,
    128, 6, 2, 5, 16 * KiB, 1, 32 * KiB, 5, 64 * KiB, 7, ROW_END,
    256, 7, 16 * KiB, 4, 32 * KiB, 7, ROW_END,
    1024, 7, 512 * KiB, 8, ROW_END,
    2048, 7, 256 * KiB, 8, ROW_END,
    4096, 7, 8 * KiB, 5, 16 * KiB, 7, 256 * KiB, 8, ROW_END,
    TABLE_END};

/* reduce with a commutative op: 1 linear, 2 chain, 3 pipeline, 4 binary, 5 binomial,
 * 6 in-order_binary, 7 rabenseifner (input: count x type size) */
static const long REDUCE[] = {
    2, 7, 8, 4, 16, 3, 32, 1, 256 * KiB, 3, 512 * KiB, 2, 1 * MiB, 3, ROW_END,
    4, 4, 4 * KiB, 2, 64 * KiB, 5, 256 * KiB, 1, 512 * KiB, 5, 1 * MiB, 1, ROW_END,
    8, 4, 8 * KiB, 5, ROW_END,
    16, 4, 4 * KiB, 5, ROW_END,
    32, 5, ROW_END,
    256, 5, 8 * KiB, 6, 16 * KiB, 5, ROW_END,
    512, 5, ROW_END,
    2048, 5, 512, 6, 1 * KiB, 5, 8 * KiB, 6, 16 * KiB, 5, ROW_END,
    4096, 5, 16, 6, 32, 5, 1 * KiB, 6, 2 * KiB, 5, 8 * KiB, 6, 16 * KiB, 5, ROW_END,
    TABLE_END};

/* reduce with a non-commutative op: only linear (1) and in-order_binary (6) keep the
 * operand order */
static const long REDUCE_NONCOMMUTATIVE[] = {
    2, 6, 8, 1, ROW_END,
    4, 1, ROW_END,
    8, 6, 1 * KiB, 1, 8 * KiB, 6, 16 * KiB, 1, 256 * KiB, 6, ROW_END,
    16, 6, ROW_END,
    128, 6, 512, 1, 1 * KiB, 6, ROW_END,
    256, 6, ROW_END,
    TABLE_END};

/* gather: 1 basic_linear, 2 binomial, 3 linear_sync (input: one rank's block) */
static const long GATHER[] = {
    2, 3, 2, 1, 4, 2, 32 * KiB, 1, 64 * KiB, 2, 128 * KiB, 3, ROW_END,
    4, 2, 1 * KiB, 1, 8 * KiB, 2, 32 * KiB, 1, 256 * KiB, 3, ROW_END,
    8, 2, ROW_END,
    256, 2, 2 * KiB, 1, 8 * KiB, 2, ROW_END,
    512, 2, ROW_END,
    TABLE_END};

/* scatter: 1 basic_linear, 2 binomial, 3 linear_nb (input: one rank's block) */
static const long SCATTER[] = {
    2, 3, 2, 1, 128 * KiB, 3, 256 * KiB, 1, ROW_END,
    4, 2, 2 * KiB, 1, 4 * KiB, 2, 8 * KiB, 1, 32 * KiB, 3, 1 * MiB, 1, ROW_END,
    8, 2, 16 * KiB, 3, 1 * MiB, 1, ROW_END,
    16, 2, 16 * KiB, 1, 32 * KiB, 3, ROW_END,
    32, 2, 512, 3, 8 * KiB, 2, 16 * KiB, 3, ROW_END,
    64, 2, 512, 3, ROW_END,
    TABLE_END};

/* The algorithm of table t for nprocs processes and a decision input of bytes. */
static int lookup(const long *t, int nprocs, long long bytes)
{
    const long *row = NULL;
    for (const long *p = t; *p != TABLE_END;) {
        if (*p <= nprocs || row == NULL)
            row = p;
        while (*p != ROW_END)
            p++;
        p++;
    }
    if (row == NULL)
        return 0;
    int alg = (int)row[1];
    for (const long *p = row + 2; *p != ROW_END; p += 2) {
        if (bytes < *p)
            break;
        alg = (int)p[1];
    }
    return alg;
}

int cbp_decide(const char *coll, int nprocs, long long bytes, int commutative, int *fanout)
{
    const long *t = NULL;
    int chain = 0;
    if (fanout != NULL)
        *fanout = 0;
    if (coll == NULL || nprocs < 2)
        return 0;
    if (strcmp(coll, "bcast") == 0) {
        t = BCAST;
        chain = CBP_BCAST_CHAIN;
    } else if (strcmp(coll, "reduce") == 0) {
        t = commutative ? REDUCE : REDUCE_NONCOMMUTATIVE;
        chain = CBP_REDUCE_CHAIN;
    } else if (strcmp(coll, "gather") == 0) {
        t = GATHER;
    } else if (strcmp(coll, "scatter") == 0) {
        t = SCATTER;
    } else {
        return 0;
    }
    int alg = lookup(t, nprocs, bytes);
    if (alg == chain && fanout != NULL)
        *fanout = 1;
    return alg;
}

/* ------------------------------------------------------------------ composite helpers */

int cbp_bcast_fixed(void *buf, int count, MPI_Datatype dt, int root, MPI_Comm comm)
{
    return cbp_bcast(buf, count, dt, root, comm, CBP_ALG_FIXED_DECISION, 0, 0);
}

int cbp_reduce_fixed(const void *sbuf, void *rbuf, int count, MPI_Datatype dt, MPI_Op op,
                     int root, MPI_Comm comm)
{
    return cbp_reduce(sbuf, rbuf, count, dt, op, root, comm, CBP_ALG_FIXED_DECISION, 0, 0);
}

int cbp_gather_fixed(const void *sbuf, int scount, MPI_Datatype sdt, void *rbuf, int rcount,
                     MPI_Datatype rdt, int root, MPI_Comm comm)
{
    return cbp_gather(sbuf, scount, sdt, rbuf, rcount, rdt, root, comm,
                      CBP_ALG_FIXED_DECISION, 0, 0);
}

int cbp_scatter_fixed(const void *sbuf, int scount, MPI_Datatype sdt, void *rbuf, int rcount,
                      MPI_Datatype rdt, int root, MPI_Comm comm)
{
    return cbp_scatter(sbuf, scount, sdt, rbuf, rcount, rdt, root, comm,
                       CBP_ALG_FIXED_DECISION, 0, 0);
}
