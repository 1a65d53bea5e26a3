/*
 * Completion time of a collective: clock offsets between rank 0 and every rank, and a
 * loop that starts every iteration at one common moment (docs/statistics.md, "Completion
 * time").
 *
 * Clocks. Each rank's global clock is its MPI_Wtime plus an offset to rank 0's clock,
 * estimated as SKaMPI and ReproMPI's simplest scheme do (Cristian's algorithm): rank 0 and
 * rank r exchange CS_ROUNDS ping-pongs, rank r answering with its own clock; the offset is
 * taken from the exchange with the shortest round trip, and the true offset lies within
 * half that round trip of it. A second, independent set of exchanges then measures the
 * residual offset of the corrected clocks; a rank's error is the smaller of the two bounds
 * (the first round trip / 2, and |residual| + the second round trip / 2), and sync_error is
 * the largest over ranks. Offsets only, no drift model: the clocks are synchronised again
 * at every point, so drift only matters within one point's loop. Under SMPI every rank
 * reads the simulation's one clock: no estimation, sync_error 0.
 *
 * Loop. Before each iteration every rank sends its global time to an MPI_Allreduce(MAX)
 * on MPI_COMM_WORLD (not timed); the common start is that maximum plus a slack, and each
 * rank waits for it on its global clock, enters the collective, and records its exit. A
 * rank that enters more than sync_error + 1 us after the start is late: the iteration is
 * kept (every rank waits for the start, so completion >= each rank's own call time holds
 * in every iteration) but counted, and the slack doubles (up to CS_MAX_SLACK_S) from the next iteration on; after
 * CS_SHRINK_AFTER iterations in a row on time it halves again (not below its start value),
 * so a loaded machine settles to a slack its ranks can meet. Waits are slept but for their
 * last 200 us, which are spun on the clock (yielding the core when the node has more
 * ranks than cores). Per iteration: completion = the last rank's exit minus the common
 * start; synced_avg = the ranks' own call times (exit - entry) averaged over ranks, OSU's
 * per-iteration figure without the barrier's exit skew. Medians over iterations. Where
 * many iterations are late (an oversubscribed node), completion is an upper bound. Per iteration: completion = the
 * last rank's exit minus the common start.
 */
#ifndef COLLBENCH_CLOCKSYNC_H
#define COLLBENCH_CLOCKSYNC_H

#include <mpi.h>

#define CS_ROUNDS 25
#define CS_MAX_SLACK_S 0.01

typedef struct {
    double offset;  /* add to this rank's MPI_Wtime to read rank 0's clock (seconds) */
    double skew;    /* tests only: an artificial offset added to every local clock read */
    double error;   /* sync_error: largest error bound over ranks (seconds, every rank) */
    int crowded;    /* more ranks than cores on this node: waits yield the core */
} cs_clock_t;

typedef struct {
    double median, ci_low, ci_high; /* completion time (microseconds), over all iterations */
    double synced_avg;  /* median over iterations of the rank-averaged own call time */
    int late;           /* iterations in which a rank entered late */
} cs_result_t;

/* One measured call of the collective; returns an MPI error code. */
typedef int (*cs_call_fn)(void *arg);

/* Estimate every rank's offset to rank 0 (collective over MPI_COMM_WORLD). skew_s > 0
 * (tests only) shifts rank r's clock by r * skew_s before the estimation. */
int cs_sync(double skew_s, cs_clock_t *clk);

/* This rank's reading of the global clock (seconds). */
double cs_now(const cs_clock_t *clk);

/* Run warmup + iters synchronised iterations of `call` (collective over MPI_COMM_WORLD);
 * rank 0 gets the median and 95% confidence interval of the completion time. Returns the
 * MPI error of `call` on this rank, if any: an error on any rank stops every rank's loop
 * at the next iteration's start (the error rides in the start's MPI_Allreduce). */
int cs_completion(int warmup, int iters, cs_call_fn call, void *arg, const cs_clock_t *clk,
                  cs_result_t *res);

/* The 95% confidence interval of the median of sorted v[0..n): order statistics around
 * n/2 (normal approximation of the binomial); [min, max] below 6 values. */
void cs_median_ci(const double *sorted, int n, double *lo, double *hi);

/* The 0-based positions of cs_median_ci's two bounds in a sorted array of n >= 1 values
 * (for callers that select order statistics instead of sorting). */
void cs_median_ci_ranks(int n, int *lo, int *hi);

#endif
