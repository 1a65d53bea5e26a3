/* Clock offsets and synchronised-start completion time: see clocksync.h. */
#define _POSIX_C_SOURCE 200809L
#include "clocksync.h"

#include <math.h>
#include <stdlib.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>

#define CS_TAG 31990
#define CS_MIN_SLACK_S 10e-6 /* covers the exit skew of the start's MPI_Allreduce */
#define CS_LATE_TOLERANCE_S 1e-6
#define CS_SPIN_S 200e-6     /* the last part of a wait is spun, not slept */
#define CS_SHRINK_AFTER 8    /* on-time iterations in a row before the slack halves */

static double local_now(const cs_clock_t *clk)
{
    return MPI_Wtime() + clk->skew;
}

double cs_now(const cs_clock_t *clk)
{
    return local_now(clk) + clk->offset;
}

/* Rank 0's side of CS_ROUNDS ping-pongs with `peer`: the peer's clock offset (rank 0's
 * clock minus the peer's global clock) from the exchange with the shortest round trip. */
static int probe_root(int peer, const cs_clock_t *clk, double *off, double *rtt)
{
    double best = INFINITY, est = 0.0, theirs = 0.0;
    int rc = MPI_SUCCESS;
    for (int k = 0; k < CS_ROUNDS && rc == MPI_SUCCESS; k++) {
        double t1 = cs_now(clk), t2;
        rc = MPI_Send(&t1, 1, MPI_DOUBLE, peer, CS_TAG, MPI_COMM_WORLD);
        if (rc == MPI_SUCCESS)
            rc = MPI_Recv(&theirs, 1, MPI_DOUBLE, peer, CS_TAG, MPI_COMM_WORLD,
                          MPI_STATUS_IGNORE);
        t2 = cs_now(clk);
        if (t2 - t1 < best) {
            best = t2 - t1;
            est = 0.5 * (t1 + t2) - theirs;
        }
    }
    *off = est;
    *rtt = best;
    return rc;
}

/* The peer's side: answer each ping with its global clock. */
static int probe_peer(const cs_clock_t *clk)
{
    double ping, mine;
    int rc = MPI_SUCCESS;
    for (int k = 0; k < CS_ROUNDS && rc == MPI_SUCCESS; k++) {
        rc = MPI_Recv(&ping, 1, MPI_DOUBLE, 0, CS_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        mine = cs_now(clk);
        if (rc == MPI_SUCCESS)
            rc = MPI_Send(&mine, 1, MPI_DOUBLE, 0, CS_TAG, MPI_COMM_WORLD);
    }
    return rc;
}

int cs_sync(double skew_s, cs_clock_t *clk)
{
    int rank, size, rc = MPI_SUCCESS;
    double worst = 0.0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    clk->offset = 0.0;
    clk->skew = rank * skew_s;
    clk->crowded = 0;
#ifdef COLLBENCH_SMPI_COMPAT_H
    /* a simulation has one clock: nothing to estimate, no error */
    clk->error = 0.0;
    if (skew_s == 0.0)
        return MPI_SUCCESS;
#else
    {
        MPI_Comm node;
        int local = 1;
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL,
                                &node) == MPI_SUCCESS) {
            MPI_Comm_size(node, &local);
            MPI_Comm_free(&node);
        }
        clk->crowded = cores > 0 && local > cores;
    }
#endif
    for (int r = 1; r < size && rc == MPI_SUCCESS; r++) {
        if (rank == 0) {
            double off1, rtt1, resid, rtt2;
            rc = probe_root(r, clk, &off1, &rtt1);
            if (rc == MPI_SUCCESS)
                rc = MPI_Send(&off1, 1, MPI_DOUBLE, r, CS_TAG, MPI_COMM_WORLD);
            if (rc == MPI_SUCCESS) /* the corrected clock, measured again */
                rc = probe_root(r, clk, &resid, &rtt2);
            worst = fmax(worst, fmin(0.5 * rtt1, fabs(resid) + 0.5 * rtt2));
        } else if (rank == r) {
            rc = probe_peer(clk);
            if (rc == MPI_SUCCESS)
                rc = MPI_Recv(&clk->offset, 1, MPI_DOUBLE, 0, CS_TAG, MPI_COMM_WORLD,
                              MPI_STATUS_IGNORE);
            if (rc == MPI_SUCCESS)
                rc = probe_peer(clk);
        }
    }
    if (rc == MPI_SUCCESS)
        rc = MPI_Bcast(&worst, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    clk->error = worst;
    return rc;
}

/* Wait until the global clock reads `start`. SMPI's clock only moves with simulated work,
 * so there the wait is injected as such. */
static void wait_until(const cs_clock_t *clk, double start)
{
#ifdef COLLBENCH_SMPI_COMPAT_H
    double d = start - cs_now(clk);
    if (d > 0.0)
        smpi_execute_benched(d);
#else
    /* Sleep through most of a long wait: a spinning rank would take the core an
     * oversubscribed peer needs to reach the start, and invites preemption at it. */
    double d = start - cs_now(clk) - CS_SPIN_S;
    if (d > 0.0) {
        struct timespec ts = {(time_t)d, (long)((d - (double)(time_t)d) * 1e9)};
        nanosleep(&ts, NULL);
    }
    while (cs_now(clk) < start)
        if (clk->crowded)
            sched_yield(); /* lets an oversubscribed peer reach the start too */
#endif
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

void cs_median_ci_ranks(int n, int *lo, int *hi)
{
    double h;
    int j, k;
    if (n < 6) {
        *lo = 0;
        *hi = n - 1;
        return;
    }
    /* 1-based ranks n/2 -+ 1.96 sqrt(n)/2 (and + 1 above): a 95% interval of the median */
    h = 0.98 * sqrt((double)n);
    j = (int)floor(0.5 * n - h);
    k = (int)ceil(0.5 * n + 1.0 + h);
    *lo = (j < 1 ? 1 : j) - 1;
    *hi = (k > n ? n : k) - 1;
}

void cs_median_ci(const double *v, int n, double *lo, double *hi)
{
    int j, k;
    if (n <= 0) {
        *lo = *hi = NAN;
        return;
    }
    cs_median_ci_ranks(n, &j, &k);
    *lo = v[j];
    *hi = v[k];
}

/* Median of v[0..n) (sorted in place) and its CI, in microseconds. */
static void median_and_ci(double *v, int n, double *median, double *lo, double *hi)
{
    for (int i = 0; i < n; i++)
        v[i] *= 1e6;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    *median = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
    cs_median_ci(v, n, lo, hi);
}

/* Per-iteration figures of one rank, reduced over ranks at the end of the loop. */
enum { CS_DONE, CS_OWN, CS_LATE, CS_FIGURES };

int cs_completion(int warmup, int iters, cs_call_fn call, void *arg, const cs_clock_t *clk,
                  cs_result_t *res)
{
    static const MPI_Op OPS[CS_FIGURES] = {MPI_MAX, MPI_SUM, MPI_MAX};
    int rank, size, rc = MPI_SUCCESS, brc = MPI_SUCCESS, late_prev = 0, on_time = 0;
    double floor_slack = CS_MIN_SLACK_S + 2.0 * clk->error, slack = floor_slack;
    double tol = clk->error + CS_LATE_TOLERANCE_S;
    double *mine[CS_FIGURES], *all[CS_FIGURES];
    int bad = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    for (int f = 0; f < CS_FIGURES; f++) {
        /* (calloc): past SMPI's shared-malloc macros (every rank needs its own arrays) */
        mine[f] = (calloc)((size_t)iters, sizeof(double));
        all[f] = rank == 0 ? (calloc)((size_t)iters, sizeof(double)) : NULL;
        bad |= !mine[f] || (rank == 0 && !all[f]);
    }
    for (int i = 0; !bad && i < warmup + iters; i++) {
        double in[3] = {cs_now(clk), late_prev, rc != MPI_SUCCESS}, out[3], start, entry, t_end;
        brc = MPI_Allreduce(in, out, 3, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        if (brc != MPI_SUCCESS || out[2] > 0.0)
            break;
        if (out[1] > 0.0) { /* somebody missed the last start: give every rank more time */
            slack = fmin(2.0 * slack, CS_MAX_SLACK_S);
            on_time = 0;
        } else if (++on_time >= CS_SHRINK_AFTER) { /* and take it back when all is calm */
            slack = fmax(0.5 * slack, floor_slack);
            on_time = 0;
        }
        start = out[0] + slack;
        wait_until(clk, start);
        entry = cs_now(clk);
        late_prev = entry - start > tol;
        rc = call(arg);
        t_end = cs_now(clk);
        if (i >= warmup) {
            mine[CS_DONE][i - warmup] = t_end - start;
            mine[CS_OWN][i - warmup] = t_end - entry;
            mine[CS_LATE][i - warmup] = late_prev;
        }
    }
    for (int f = 0; !bad && brc == MPI_SUCCESS && f < CS_FIGURES; f++)
        brc = MPI_Reduce(mine[f], all[f], iters, MPI_DOUBLE, OPS[f], 0, MPI_COMM_WORLD);
    if (rank == 0 && !bad && brc == MPI_SUCCESS) {
        double ignored;
        res->late = 0;
        for (int i = 0; i < iters; i++) {
            res->late += all[CS_LATE][i] > 0.0;
            all[CS_OWN][i] /= size;
        }
        median_and_ci(all[CS_DONE], iters, &res->median, &res->ci_low, &res->ci_high);
        median_and_ci(all[CS_OWN], iters, &res->synced_avg, &ignored, &ignored);
    }
    for (int f = 0; f < CS_FIGURES; f++) {
        (free)(mine[f]);
        (free)(all[f]);
    }
    if (bad)
        return MPI_ERR_NO_MEM;
    return rc != MPI_SUCCESS ? rc : brc;
}
