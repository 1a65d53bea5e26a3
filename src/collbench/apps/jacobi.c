/*
 * jacobi: 3-D 7-point Jacobi sweeps on a Cartesian process grid, with halo exchange.
 *
 *   mpirun -np P jacobi [L=EDGE] [dims=PX,PY,PZ] [iterations=N] [warmup=W]
 *
 * Weak scaling: every process owns an L x L x L sub-domain (plus one ghost layer), so the
 * global interior is (L*PX) x (L*PY) x (L*PZ). dims as in MPI_Cart_create (non-periodic;
 * PX*PY*PZ must equal P, a 0 lets MPI_Dims_create choose that entry).
 *
 * One sweep: (1) halo exchange of u: in every direction with more than one process, two
 * MPI_Sendrecv calls (high face up / low ghost from below, low face down / high ghost
 * from above), faces only (a 7-point stencil needs no edges or corners), faces described
 * by MPI_Type_create_subarray; MPI_PROC_NULL at the physical boundary. (2) compute:
 * unew = (sum of the 6 neighbours of u) / 6 on the interior, then the physical-boundary
 * ghost faces of unew are set (see validation); swap u and unew.
 * `warmup` untimed sweeps, then `iterations` timed ones.
 *
 * Reported: k = directions with more than one process; ts_us = compute time per sweep and
 * tc_us = halo-exchange time per sweep (each the max over ranks of the rank's mean);
 * time_us = wall time per sweep (max over ranks, between two barriers);
 * mlups = L^3 * P * iterations / wall time / 1e6; halo_bytes = L^2 * k * 2 * 8, the bytes
 * one process sends per sweep in the model P(L,N) = L^3 N / (T_s + T_c) (N = processes);
 * max_dev = the largest finite |u - solution|, bad_points = interior points (all ranks)
 * whose deviation exceeds the tolerance or is NaN; valid = (bad_points == 0).
 *
 * Validation (known solution): u(x,y,z,t) = x^2 + 2y^2 + 3z^2 + x/2 - y/4 + z/8 + 2t on
 * global grid indices is an exact Jacobi iterate: the mean of the 6 neighbours of a
 * quadratic ax^2+by^2+cz^2 is the value plus (a+b+c)/3 = 2, and linear terms are fixed
 * points. The interior starts at t=0, the physical boundary is set to the solution at
 * every sweep, and ghost layers between processes start as NaN. So every sweep moves
 * every interior value by exactly 2, and a missing, stale, misplaced or mirrored halo
 * shows up as a deviation of at least 1/8 (or a NaN). All values are dyadic rationals
 * below 2^48 (each global extent is limited to 2^20) and the update divides by 6.0
 * (not multiplied by 1/6), so the arithmetic is exact: the check is max |u - solution|
 * <= 1e-10 over the interior after warm-up + timed sweeps (expected: exactly 0).
 * The division costs a little compute time compared with a multiplication.
 *
 * Output: rank 0 prints exactly one JSON line on stdout; errors are one line on stderr.
 * Exit status: 0 success (also "valid": false), 2 bad arguments, 1 out of memory.
 *
 * Limits: L 1..1024 and 2*(L+2)^3*8 bytes <= 1 GiB per process (so L <= 404),
 * L * dims[d] <= 2^20, iterations 1..100000, warmup 0..100000.
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

#define PROG "jacobi"
#define USAGE "usage: jacobi [L=EDGE(1..1024)] [dims=PX,PY,PZ(0..1048576)] " \
              "[iterations=N(1..100000)] [warmup=N(0..100000)]"
#define MAX_BYTES (1LL << 30)
#define MAX_EXTENT (1LL << 20)
#define TOLERANCE 1e-10

#include "app_args.h" /* key=value arguments, die() */

/* ---- the ring ---- */
/* ---- the solver ---- */

typedef struct {
    int L, n;                  /* n = L + 2 */
    long long sx, sy;          /* strides of dims 0 and 1 (dim 2 is contiguous) */
    int coords[3], dims[3];
    long long origin[3];       /* global index of local index 0 */
} grid_t;

static double solution(long long x, long long y, long long z, long long t)
{
    return (double)(x * x) + 2.0 * (double)(y * y) + 3.0 * (double)(z * z)
           + 0.5 * (double)x - 0.25 * (double)y + 0.125 * (double)z + 2.0 * (double)t;
}

static size_t at(const grid_t *g, long long i, long long j, long long k)
{
    return (size_t)(i * g->sx + j * g->sy + k);
}

/* Set the ghost face (dim d, local plane p) to the solution at time t (interior range). */
static void set_face(const grid_t *g, double *u, int d, long long p, long long t)
{
    for (long long a = 1; a <= g->L; ++a)
        for (long long b = 1; b <= g->L; ++b) {
            long long idx[3];
            idx[d] = p;
            idx[d == 0 ? 1 : 0] = a;
            idx[d == 2 ? 1 : 2] = b;
            u[at(g, idx[0], idx[1], idx[2])] =
                solution(g->origin[0] + idx[0], g->origin[1] + idx[1], g->origin[2] + idx[2], t);
        }
}

/* The ghost faces on the physical boundary, at time t. */
static void set_boundary(const grid_t *g, double *u, long long t)
{
    for (int d = 0; d < 3; ++d) {
        if (g->coords[d] == 0) set_face(g, u, d, 0, t);
        if (g->coords[d] == g->dims[d] - 1) set_face(g, u, d, g->L + 1, t);
    }
}

static void sweep(const grid_t *g, const double *restrict u, double *restrict un)
{
    const long long L = g->L, sx = g->sx, sy = g->sy;
    for (long long i = 1; i <= L; ++i)
        for (long long j = 1; j <= L; ++j) {
            const double *c = u + at(g, i, j, 0);
            double *o = un + at(g, i, j, 0);
            for (long long k = 1; k <= L; ++k)
                o[k] = (c[k - sx] + c[k + sx] + c[k - sy] + c[k + sy] + c[k - 1] + c[k + 1])
                       / 6.0;
        }
}

typedef struct {
    MPI_Comm comm;
    int active[3], lo[3], hi[3];
    MPI_Datatype face[3];
} halo_t;

static void exchange(const grid_t *g, const halo_t *h, double *u)
{
    const long long stride[3] = {g->sx, g->sy, 1};
    for (int d = 0; d < 3; ++d) {
        if (!h->active[d]) continue;
        MPI_Sendrecv(u + g->L * stride[d], 1, h->face[d], h->hi[d], 2 * d,
                     u, 1, h->face[d], h->lo[d], 2 * d, h->comm, MPI_STATUS_IGNORE);
        MPI_Sendrecv(u + stride[d], 1, h->face[d], h->lo[d], 2 * d + 1,
                     u + (g->L + 1) * stride[d], 1, h->face[d], h->hi[d], 2 * d + 1,
                     h->comm, MPI_STATUS_IGNORE);
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
        {"L", 1, 1, 1024, {32, 0, 0}, 0},
        {"dims", 3, 0, 1048576, {0, 0, 0}, 0},
        {"iterations", 1, 1, 100000, {50, 0, 0}, 0},
        {"warmup", 1, 0, 100000, {5, 0, 0}, 0},
    };
    char err[400];
    if (parse_args(argc, argv, specs, 4, err, sizeof err) != 0) die(2, "%s; %s", err, USAGE);
    const long long L = specs[0].val[0];
    const long long iterations = specs[2].val[0], warmup = specs[3].val[0];
    const long long n = L + 2, bytes = 2 * n * n * n * 8;
    if (bytes > MAX_BYTES)
        die(2, "L=%lld needs %lld bytes per process; the limit is %lld (L <= 404)", L, bytes,
            MAX_BYTES);

    long long fixed = 1;
    int zeros = 0;
    const long long *dv = specs[1].val;
    for (int d = 0; d < 3; ++d) {
        if (dv[d] == 0) ++zeros;
        else fixed *= dv[d];
    }
    if ((zeros == 0 && fixed != nprocs) || (zeros > 0 && nprocs % fixed != 0))
        die(2, "dims=%lld,%lld,%lld cannot make a grid of %d processes (the product of the "
            "non-zero entries must %s %d)", dv[0], dv[1], dv[2], nprocs,
            zeros ? "divide" : "equal", nprocs);
    grid_t g;
    int periods[3] = {0, 0, 0};
    for (int d = 0; d < 3; ++d) g.dims[d] = (int)dv[d];
    MPI_Dims_create(nprocs, 3, g.dims);
    for (int d = 0; d < 3; ++d)
        if (L * g.dims[d] > MAX_EXTENT)
            die(2, "L=%lld times %d processes in direction %d exceeds the global extent "
                "limit %lld", L, g.dims[d], d, MAX_EXTENT);
    halo_t h;
    MPI_Cart_create(MPI_COMM_WORLD, 3, g.dims, periods, 1, &h.comm);
    int rank;
    MPI_Comm_rank(h.comm, &rank);
    g_rank = rank;
    MPI_Cart_coords(h.comm, rank, 3, g.coords);
    g.L = (int)L;
    g.n = (int)n;
    g.sx = n * n;
    g.sy = n;
    int k = 0;
    for (int d = 0; d < 3; ++d) {
        g.origin[d] = (long long)g.coords[d] * L;
        h.active[d] = g.dims[d] > 1;
        k += h.active[d];
        MPI_Cart_shift(h.comm, d, 1, &h.lo[d], &h.hi[d]);
        int sizes[3] = {g.n, g.n, g.n}, sub[3] = {g.L, g.L, g.L}, starts[3] = {1, 1, 1};
        sub[d] = 1;
        starts[d] = 0;
        MPI_Type_create_subarray(3, sizes, sub, starts, MPI_ORDER_C, MPI_DOUBLE, &h.face[d]);
        MPI_Type_commit(&h.face[d]);
    }

    const size_t cells = (size_t)(n * n * n);
    double *u = malloc(cells * sizeof(double)), *un = malloc(cells * sizeof(double));
    int have = u && un, all_have = 0;
    MPI_Allreduce(&have, &all_have, 1, MPI_INT, MPI_LAND, h.comm);
    if (!all_have) die(1, "out of memory for 2 arrays of %zu doubles", cells);

    /* NaN everywhere (ghosts between processes stay NaN until a halo arrives), the
     * solution at t=0 in the interior and on the physical boundary */
    for (size_t c = 0; c < cells; ++c) u[c] = un[c] = NAN;
    for (long long i = 1; i <= L; ++i)
        for (long long j = 1; j <= L; ++j)
            for (long long z = 1; z <= L; ++z)
                u[at(&g, i, j, z)] = solution(g.origin[0] + i, g.origin[1] + j,
                                              g.origin[2] + z, 0);
    set_boundary(&g, u, 0);

    long long t = 0;
    for (; t < warmup; ++t) {
        exchange(&g, &h, u);
        sweep(&g, u, un);
        set_boundary(&g, un, t + 1);
        double *tmp = u; u = un; un = tmp;
    }
    double comm = 0.0, comp = 0.0;
    MPI_Barrier(h.comm);
    const double start = MPI_Wtime();
    for (long long it = 0; it < iterations; ++it, ++t) {
        double t0 = MPI_Wtime();
        exchange(&g, &h, u);
        double t1 = MPI_Wtime();
        sweep(&g, u, un);
        set_boundary(&g, un, t + 1);
        double t2 = MPI_Wtime();
        comm += t1 - t0;
        comp += t2 - t1;
        double *tmp = u; u = un; un = tmp;
    }
    MPI_Barrier(h.comm);
    double elapsed = MPI_Wtime() - start;

    double dev = 0.0;
    long long bad = 0;
    for (long long i = 1; i <= L; ++i)
        for (long long j = 1; j <= L; ++j)
            for (long long z = 1; z <= L; ++z) {
                double d = fabs(u[at(&g, i, j, z)]
                                - solution(g.origin[0] + i, g.origin[1] + j, g.origin[2] + z, t));
                if (!(d <= TOLERANCE)) ++bad;
                if (isfinite(d) && d > dev) dev = d;
            }

    double mine[3] = {comp / (double)iterations, comm / (double)iterations, elapsed}, mx[3];
    long long all_bad = 0;
    double all_dev = 0.0;
    MPI_Reduce(mine, mx, 3, MPI_DOUBLE, MPI_MAX, 0, h.comm);
    MPI_Reduce(&bad, &all_bad, 1, MPI_LONG_LONG, MPI_SUM, 0, h.comm);
    MPI_Reduce(&dev, &all_dev, 1, MPI_DOUBLE, MPI_MAX, 0, h.comm);
    if (rank == 0) {
        double wall = mx[2] > MPI_Wtick() ? mx[2] : MPI_Wtick();
        double lups = (double)L * (double)L * (double)L * nprocs * (double)iterations;
        printf("{\"app\":\"jacobi\",\"nprocs\":%d,\"dims\":[%d,%d,%d],\"L\":%lld,"
               "\"global\":[%lld,%lld,%lld],\"iterations\":%lld,\"warmup\":%lld,\"k\":%d",
               nprocs, g.dims[0], g.dims[1], g.dims[2], L, L * g.dims[0], L * g.dims[1],
               L * g.dims[2], iterations, warmup, k);
        print_num("mlups", lups / wall / 1e6);
        print_num("time_us", wall / (double)iterations * 1e6);
        print_num("ts_us", mx[0] * 1e6);
        print_num("tc_us", mx[1] * 1e6);
        printf(",\"halo_bytes\":%lld", L * L * k * 2 * 8);
        print_num("max_dev", all_dev);
        printf(",\"bad_points\":%lld,\"valid\":%s}\n", all_bad, all_bad == 0 ? "true" : "false");
        fflush(stdout);
    }
    for (int d = 0; d < 3; ++d) MPI_Type_free(&h.face[d]);
    free(u);
    free(un);
    MPI_Comm_free(&h.comm);
    MPI_Finalize();
    return 0;
}
