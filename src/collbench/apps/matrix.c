/*
 * matrix: C = A + B for 3-D double arrays distributed with MPI_Scatterv / MPI_Gatherv
 * over an MPI_Cart_create process grid.
 *
 *   mpirun -np P matrix [shape=NX,NY,NZ] [dims=PX,PY,PZ] [iterations=N] [warmup=W]
 *
 * The global arrays (row-major, z fastest) live on rank 0 of the Cartesian communicator.
 * dims are the process grid (PX*PY*PZ must equal P; a 0 lets MPI_Dims_create choose that
 * entry). Each dimension n split over p processes gives blocks of n/p or n/p+1 elements
 * (the first n%p blocks are the larger), so uneven shapes work; a block may be empty
 * when n < p.
 *
 * Why explicit packing rather than subarray datatypes: MPI_Scatterv/MPI_Gatherv take ONE
 * send (resp. receive) datatype on the root, so blocks of different shapes cannot each
 * get their own subarray type (that would need MPI_Alltoallw or point-to-point). The
 * root therefore packs every rank's block contiguously (in rank order) and the
 * collectives move plain MPI_DOUBLE counts with displacements. The pack and unpack copies
 * are timed separately (pack_us, unpack_us) so scatter_us and gather_us are the
 * collectives alone.
 *
 * One iteration, each phase separated by an untimed MPI_Barrier:
 *   pack (root) | scatterv A, scatterv B | compute c = a + b | gatherv c | unpack (root)
 * `warmup` untimed iterations, then `iterations` timed ones. Reported *_us: the max over
 * ranks of each rank's mean time per iteration for that phase; total_us likewise for the
 * whole iteration including the barriers.
 *
 * Values: A = linear index + 0.25, B = -(3i + 5j + 7k)/2 - 1 (i, j, k global indices);
 * every sum is exact in double. Validation: every rank checks its received a and b
 * against the formulas for its block (placement of the scatter), and the root checks
 * C == A + B bit for bit after the last iteration, C having been filled with NaN before it
 * (so an element the gather missed cannot pass).
 *
 * Output: rank 0 prints exactly one JSON line on stdout; errors are one line on stderr.
 * Exit status: 0 success (also "valid": false), 2 bad arguments (including dims whose
 * product is not P), 1 out of memory.
 *
 * Limits: each shape entry 1..1048576, each dims entry 0..1048576, iterations 1..100000,
 * warmup 0..100000; the root needs 5*NX*NY*NZ*8 bytes (A, B, C and two pack buffers)
 * plus 3 blocks, and this must stay <= 1 GiB.
 */
#define _POSIX_C_SOURCE 200809L

#include <mpi.h>

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PROG "matrix"
#define USAGE "usage: matrix [shape=NX,NY,NZ(1..1048576)] [dims=PX,PY,PZ(0..1048576)] " \
              "[iterations=N(1..100000)] [warmup=N(0..100000)]"
#define MAX_BYTES (1LL << 30)

#include "app_args.h" /* key=value arguments, die() */

/* ---- the ring ---- */
/* ---- the sum ---- */

static void block(long long n, int p, int c, long long *start, long long *len)
{
    long long q = n / p, rem = n % p;
    *len = q + (c < rem ? 1 : 0);
    *start = (long long)c * q + (c < rem ? c : rem);
}

static double val_a(long long i, long long j, long long k, const long long *shape)
{
    return (double)((i * shape[1] + j) * shape[2] + k) + 0.25;
}

static double val_b(long long i, long long j, long long k)
{
    return -0.5 * (double)(3 * i + 5 * j + 7 * k) - 1.0;
}

/* Copy rank q's block between the global array and its packed slice. */
static void copy_block(double *global, double *packed, const long long *shape,
                       const long long *st, const long long *len, int to_packed)
{
    size_t idx = 0;
    for (long long i = 0; i < len[0]; ++i)
        for (long long j = 0; j < len[1]; ++j) {
            double *row = global + ((st[0] + i) * shape[1] + st[1] + j) * shape[2] + st[2];
            if (to_packed) memcpy(packed + idx, row, (size_t)len[2] * sizeof(double));
            else memcpy(row, packed + idx, (size_t)len[2] * sizeof(double));
            idx += (size_t)len[2];
        }
}

static void print_num(const char *key, double v)
{
    if (isfinite(v)) printf(",\"%s\":%.6g", key, v);
    else printf(",\"%s\":null", key);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int wrank, nprocs;
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    g_rank = wrank;

    arg_spec specs[] = {
        {"shape", 3, 1, 1048576, {64, 64, 64}, 0},
        {"dims", 3, 0, 1048576, {0, 0, 0}, 0},
        {"iterations", 1, 1, 100000, {10, 0, 0}, 0},
        {"warmup", 1, 0, 100000, {2, 0, 0}, 0},
    };
    char err[400];
    if (parse_args(argc, argv, specs, 4, err, sizeof err) != 0) die(2, "%s; %s", err, USAGE);
    const long long *shape = specs[0].val;
    const long long iterations = specs[2].val[0], warmup = specs[3].val[0];

    /* the process grid */
    long long fixed = 1;
    int zeros = 0;
    for (int d = 0; d < 3; ++d) {
        if (specs[1].val[d] == 0) ++zeros;
        else fixed *= specs[1].val[d];
    }
    const long long *dv = specs[1].val;
    if ((zeros == 0 && fixed != nprocs) || (zeros > 0 && nprocs % fixed != 0))
        die(2, "dims=%lld,%lld,%lld cannot make a grid of %d processes (the product of the "
            "non-zero entries must %s %d)", dv[0], dv[1], dv[2], nprocs,
            zeros ? "divide" : "equal", nprocs);
    int dims[3] = {(int)dv[0], (int)dv[1], (int)dv[2]}, periods[3] = {0, 0, 0};
    MPI_Dims_create(nprocs, 3, dims);
    MPI_Comm cart;
    MPI_Cart_create(MPI_COMM_WORLD, 3, dims, periods, 1, &cart);
    int rank, coords[3];
    MPI_Comm_rank(cart, &rank);
    g_rank = rank;
    MPI_Cart_coords(cart, rank, 3, coords);

    /* memory: checked before any allocation */
    const long long total = shape[0] * shape[1] * shape[2];   /* <= 2^60: no overflow */
    if (total > MAX_BYTES / 40)   /* keeps 5*total*8 below the limit and every count an int */
        die(2, "shape=%lld,%lld,%lld has %lld elements; at most %lld fit in the limit of "
            "%lld bytes", shape[0], shape[1], shape[2], total, MAX_BYTES / 40, MAX_BYTES);
    long long st[3], len[3], blk = 1;
    for (int d = 0; d < 3; ++d) {
        block(shape[d], dims[d], coords[d], &st[d], &len[d]);
        blk *= len[d];
    }
    long long need = 3 * blk * 8 + (rank == 0 ? 5 * total * 8 : 0), worst = 0;
    MPI_Allreduce(&need, &worst, 1, MPI_LONG_LONG, MPI_MAX, cart);
    if (worst > MAX_BYTES)
        die(2, "shape=%lld,%lld,%lld needs %lld bytes on one process; the limit is %lld",
            shape[0], shape[1], shape[2], worst, MAX_BYTES);

    double *a = malloc((size_t)(blk ? blk : 1) * sizeof(double));
    double *b = malloc((size_t)(blk ? blk : 1) * sizeof(double));
    double *c = malloc((size_t)(blk ? blk : 1) * sizeof(double));
    double *A = NULL, *B = NULL, *C = NULL, *pa = NULL, *pb = NULL;
    int *counts = NULL, *displs = NULL;
    long long (*starts)[3] = NULL, (*lens)[3] = NULL;
    int have = a && b && c;
    if (rank == 0) {
        A = malloc((size_t)total * sizeof(double));
        B = malloc((size_t)total * sizeof(double));
        C = malloc((size_t)total * sizeof(double));
        pa = malloc((size_t)total * sizeof(double));
        pb = malloc((size_t)total * sizeof(double));
        counts = malloc((size_t)nprocs * sizeof(int));
        displs = malloc((size_t)nprocs * sizeof(int));
        starts = malloc((size_t)nprocs * sizeof *starts);
        lens = malloc((size_t)nprocs * sizeof *lens);
        have = have && A && B && C && pa && pb && counts && displs && starts && lens;
    }
    int all_have = 0;
    MPI_Allreduce(&have, &all_have, 1, MPI_INT, MPI_LAND, cart);
    if (!all_have) die(1, "out of memory");

    if (rank == 0) {
        long long off = 0;
        for (int q = 0; q < nprocs; ++q) {
            int qc[3];
            long long n = 1;
            MPI_Cart_coords(cart, q, 3, qc);
            for (int d = 0; d < 3; ++d) {
                block(shape[d], dims[d], qc[d], &starts[q][d], &lens[q][d]);
                n *= lens[q][d];
            }
            counts[q] = (int)n;   /* n <= total <= 2^27: fits */
            displs[q] = (int)off;
            off += n;
        }
        for (long long i = 0; i < shape[0]; ++i)
            for (long long j = 0; j < shape[1]; ++j)
                for (long long k = 0; k < shape[2]; ++k) {
                    size_t g = (size_t)((i * shape[1] + j) * shape[2] + k);
                    A[g] = val_a(i, j, k, shape);
                    B[g] = val_b(i, j, k);
                }
    }

    enum { T_PACK, T_SCATTER, T_COMPUTE, T_GATHER, T_UNPACK, T_TOTAL, T_N };
    double t[T_N] = {0};
    const int n = (int)blk;
    for (long long it = -warmup; it < iterations; ++it) {
        if (it == iterations - 1 && rank == 0)
            for (long long g = 0; g < total; ++g) C[g] = NAN;
        double t0, t1, ts[T_N] = {0};
        MPI_Barrier(cart);
        double start = t0 = MPI_Wtime();
        if (rank == 0)
            for (int q = 0; q < nprocs; ++q) {
                copy_block(A, pa + displs[q], shape, starts[q], lens[q], 1);
                copy_block(B, pb + displs[q], shape, starts[q], lens[q], 1);
            }
        ts[T_PACK] = MPI_Wtime() - t0;
        MPI_Barrier(cart);
        t0 = MPI_Wtime();
        MPI_Scatterv(pa, counts, displs, MPI_DOUBLE, a, n, MPI_DOUBLE, 0, cart);
        MPI_Scatterv(pb, counts, displs, MPI_DOUBLE, b, n, MPI_DOUBLE, 0, cart);
        t1 = MPI_Wtime();
        ts[T_SCATTER] = t1 - t0;
        for (int e = 0; e < n; ++e) c[e] = a[e] + b[e];
        ts[T_COMPUTE] = MPI_Wtime() - t1;
        MPI_Barrier(cart);
        t0 = MPI_Wtime();
        MPI_Gatherv(c, n, MPI_DOUBLE, pa, counts, displs, MPI_DOUBLE, 0, cart);
        t1 = MPI_Wtime();
        ts[T_GATHER] = t1 - t0;
        if (rank == 0)
            for (int q = 0; q < nprocs; ++q)
                copy_block(C, pa + displs[q], shape, starts[q], lens[q], 0);
        t0 = MPI_Wtime();
        ts[T_UNPACK] = t0 - t1;
        ts[T_TOTAL] = t0 - start;
        if (it >= 0)
            for (int p = 0; p < T_N; ++p) t[p] += ts[p];
    }

    /* validation */
    int ok = 1;
    long long e = 0;
    for (long long i = 0; i < len[0]; ++i)
        for (long long j = 0; j < len[1]; ++j)
            for (long long k = 0; k < len[2]; ++k, ++e) {
                long long gi = st[0] + i, gj = st[1] + j, gk = st[2] + k;
                if (a[e] != val_a(gi, gj, gk, shape) || b[e] != val_b(gi, gj, gk)) ok = 0;
            }
    if (rank == 0)
        for (long long g = 0; g < total; ++g)
            if (!(C[g] == A[g] + B[g])) ok = 0;

    double tmax[T_N];
    for (int p = 0; p < T_N; ++p) t[p] /= (double)iterations;
    MPI_Reduce(t, tmax, T_N, MPI_DOUBLE, MPI_MAX, 0, cart);
    int all_ok = 0;
    MPI_Reduce(&ok, &all_ok, 1, MPI_INT, MPI_LAND, 0, cart);
    if (rank == 0) {
        printf("{\"app\":\"matrix\",\"nprocs\":%d,\"dims\":[%d,%d,%d],\"shape\":[%lld,%lld,%lld],"
               "\"iterations\":%lld,\"warmup\":%lld", nprocs, dims[0], dims[1], dims[2],
               shape[0], shape[1], shape[2], iterations, warmup);
        printf(",\"block_min\":[%lld,%lld,%lld],\"block_max\":[%lld,%lld,%lld]",
               shape[0] / dims[0], shape[1] / dims[1], shape[2] / dims[2],
               (shape[0] + dims[0] - 1) / dims[0], (shape[1] + dims[1] - 1) / dims[1],
               (shape[2] + dims[2] - 1) / dims[2]);
        print_num("pack_us", tmax[T_PACK] * 1e6);
        print_num("scatter_us", tmax[T_SCATTER] * 1e6);
        print_num("compute_us", tmax[T_COMPUTE] * 1e6);
        print_num("gather_us", tmax[T_GATHER] * 1e6);
        print_num("unpack_us", tmax[T_UNPACK] * 1e6);
        print_num("total_us", tmax[T_TOTAL] * 1e6);
        printf(",\"valid\":%s}\n", all_ok ? "true" : "false");
        fflush(stdout);
    }
    free(a); free(b); free(c);
    free(A); free(B); free(C); free(pa); free(pb);
    free(counts); free(displs); free(starts); free(lens);
    MPI_Comm_free(&cart);
    MPI_Finalize();
    return 0;
}
