/*
 * collbench_kernel: measure MPI collectives with OSU micro-benchmark 7.x timing semantics
 * and write one JSON object per measured point.
 *
 *   mpirun ... collbench_kernel --jobs JOBFILE --output OUTFILE [--validate] [--samples]
 *              [--mpit] [--debug hang|crash|corrupt] [--debug-at N] [--clock-skew-us US]
 *
 * JOBFILE: one point per line, `collective algorithm_id segsize fanout size_bytes
 * iterations warmup [key=value ...]`; '#' lines and blank lines are ignored. Only rank 0
 * reads it. The key=value options are timing= (blocking collectives) and the
 * non-blocking collectives' options (see below).
 *
 * Timing (as osu_<coll>.c): `warmup` untimed then `iterations` timed calls, each timed on
 * its own with MPI_Wtime, MPI_Barrier on the measured communicator after each call (not
 * timed). avg/min/max are over ranks of each rank's mean; median_us is the median over
 * timed iterations of the rank-averaged per-iteration time. Datatype MPI_CHAR, MPI_SUM.
 * Buffers (as OSU's): per launch one send and one receive buffer for the collectives and
 * another pair for latency/bw, page-aligned, allocated once at the largest size any point
 * needs and reused by every point; the collectives' are touched whole when allocated (as
 * osu_<coll>), each point sets its own bytes before timing (as osu_latency per size).
 * With glibc they come from the heap at a fixed mmap threshold (main: where the buffers
 * land moved latency at 32/64 KiB by 3-4 % against osu_latency).
 *
 * size_bytes is OSU's per-rank message: count for bcast/reduce/allreduce, block per rank
 * for gather/scatter/allgather/alltoall and their v-variants (equal counts). Reductions
 * that scatter follow OSU 7.x, whose size is the *whole* reduced vector:
 *   reduce_scatter:       recvcounts[i] = size/P, plus one for i < size%P; if size < P,
 *                         1 for i < size and 0 for the rest (omb_init_irregular_args).
 *   reduce_scatter_block: recvcount = size/P (0 when size < P: the call moves nothing).
 *
 * Point-to-point (ranks 0 and 1; other ranks only take part in the bookkeeping):
 *   latency: osu_latency ping-pong; avg=min=max = the mean over timed iterations of each
 *            iteration's round trip / 2 (OSU 7.4 sums the per-iteration times), samples and
 *            median = per-iteration round trip / 2 (rank 0's clock).
 *   bw:      osu_bw; per iteration a window of 64 MPI_Isend then a 4-byte ack.
 *            bandwidth_mbs = size*iterations*64 / elapsed / 1e6; avg_us=min_us=max_us =
 *            elapsed / (iterations*64), the mean time per message in a full window;
 *            samples and median = each window's time / 64.
 *   mbw_mr:  osu_mbw_mr; every rank takes part: the P/2 senders (ranks 0..P/2-1) each
 *            stream windows of 64 MPI_Isend + a 4-byte ack to rank + P/2, all pairs at
 *            once, timed from a barrier after the warm-up. bandwidth_mbs = the pairs'
 *            aggregate, P/2 * size*iterations*64 / the senders' mean elapsed (OSU's);
 *            avg_us = that mean / (iterations*64), min_us/max_us the fastest/slowest
 *            sender's; samples and median = rank 0's windows / 64.
 *
 * Non-blocking collectives (as osu_i<coll>.c of OSU 7.4): ibarrier ibcast igather igatherv
 * iscatter iscatterv iallgather iallgatherv ialltoall ialltoallv ireduce iallreduce
 * ireduce_scatter ireduce_scatter_block, with the size conventions, buffers, root 0 and
 * validation of their blocking counterparts. Optional trailing fields, in any order, each
 * at most once:
 *   test_calls=N   MPI_Test calls in the compute phase (OSU -t N), 0..1000000, default 0.
 *   compute=C      the dummy compute of the overlapped run: `auto` (default; each rank
 *                  computes for its own mean pure-communication time, as OSU), `<v>us`
 *                  (a fixed time, 0 <= v <= 1e7 microseconds) or `<v>x` (v times the
 *                  rank's pure time, 0 < v <= 100). Plain decimals only.
 *   hide_steps=K   also run the max-hideable-compute sweep with K steps (1..100; 0 = off).
 * A bad option (unknown key, repeated key, negative or out-of-range value, factor <= 0, an
 * option on a blocking collective) refuses the job file like any malformed line: exit
 * status 2 and `JOBFILE:LINE: reason` on stderr, before anything runs.
 *   Timing per point: (1) pure communication: `warmup` + `iterations` of MPI_I<coll> +
 * MPI_Wait, each timed alone, MPI_Barrier after each (exactly the blocking loop);
 * (2) overlapped run, the same counts: t0, MPI_I<coll> (init), compute with the MPI_Test
 * calls interleaved (N rounds of compute C/N then one MPI_Test; without test calls one
 * compute of C), MPI_Wait, t1, MPI_Barrier. The compute busy-waits on MPI_Wtime (OSU
 * does the same), so a descheduled rank still stops at its target; under SMPI the time is
 * injected with smpi_execute_benched. Each rank's per-iteration means are averaged over
 * ranks, as OSU does. Extra output keys of a non-blocking point (after samples_us; microseconds
 * unless %; null when the point is not ok):
 *   test_calls, compute ("auto", "<v>us", "<v>x"), hide_steps: the job's options;
 *   overall_us   OSU "Overall": mean post-to-wait-return time of the overlapped run;
 *   compute_us   OSU "Compute": compute time, MPI_Test time excluded;
 *   init_us, test_us, wait_us   OSU "Coll. Init", "MPI_Test" (total per iteration), "MPI_Wait";
 *   pure_us, min_comm_us, max_comm_us   OSU "Pure Comm.", "Min Comm.", "Max Comm.": mean,
 *                min and max over ranks of each rank's mean pure-communication time;
 *   overlap_pct  OSU: max(0, 100 - (overall - compute) / pure * 100), the share of the pure
 *                time hidden behind compute (MPI_Test time counts as not hidden). Never
 *                above 100, as overall >= compute on every rank;
 *   overlap_raw_pct  the same without the clamp (negative: the overlapped run took longer
 *                than compute and communication back to back);
 *   slowdown_us  max(0, overall - compute - pure): that loss in microseconds;
 *   overlap_imb_pct  IMB-NBC (IMB 2021 IMB_output.c): 100 * max(0, min(1, (t_pure + t_CPU -
 *                t_ovrl) / max(t_pure, t_CPU))) with t_pure, t_ovrl (overall) and t_CPU
 *                (compute) of the rank with the largest t_ovrl. (IMB's user guide prints
 *                min(t_pure, t_CPU) in the denominator; its NBC code uses max.)
 *   max_hidden_us, max_hidden_pct, hide_bound_us  the sweep (null without hide_steps):
 *                overlapped runs (same counts and test calls) with each rank's compute at
 *                k/K of its own pure time, k = 1..K, stopping at the first step whose mean
 *                overall time exceeds hide_bound_us, the upper end of the 95% confidence
 *                interval (Student t) of the mean pure time (over the rank-averaged
 *                iterations; the mean itself with 1 iteration). max_hidden_us = the measured
 *                compute_us of the last step that passed (0 if none), max_hidden_pct = that
 *                in % of pure_us. Resolution: pure/K; it cannot exceed the bound.
 * For non-blocking points avg_us/min_us/max_us/median_us/samples_us describe the pure
 * communication (avg_us = pure_us, min_us = min_comm_us, max_us = max_comm_us), as
 * collbench's OSU ingest maps OSU's non-blocking tables, so rows from both sources and
 * from blocking points compare; OSU's "Overall" is overall_us. A non-blocking point costs
 * about (2 + K) times the iterations of a blocking one (plus the compute).
 *
 * timing=completion (optional trailing field of a blocking collective's line; timing=osu,
 * the default, changes nothing): after the OSU loop, the clocks are synchronised and the
 * point runs again, `warmup` + `iterations` calls each started on every rank at one common
 * moment (clocksync.h says how). Extra keys after samples_us (and the ports' keys), null
 * when the point is not ok: completion_us, the median over iterations of the last rank's
 * exit minus the common start; completion_ci, its 95% confidence interval [low, high];
 * completion_late, iterations in which a rank entered late (kept: completion is then an
 * upper bound); synced_avg_us, the median over iterations of the rank-averaged call time
 * in the same loop (<= completion_us by construction); sync_error_us, the measured bound
 * of the clock synchronisation error. --clock-skew-us US (tests only) adds
 * rank * US microseconds to every rank's clock before synchronisation.
 *
 * precision=F max_iterations=N max_seconds=S (optional trailing fields of a blocking
 * collective's line, precision required for the other two; 0 < F <= 1, N in [iterations,
 * 1000000] (default max(iterations, 100000)), 0 < S <= 3600 (default 10)): OSU's loop runs
 * in batches, the first of `iterations`, then growing the total by (reached / F)^2 (the
 * count at which a half-width shrinking as 1/sqrt(n) would meet F), at least 1.25 and at
 * most 2 times, until the 95% confidence
 * interval of the median of the rank-averaged iteration times is within +-F of it, or N
 * iterations or S seconds (rank 0's clock, from the first batch) are reached; rank 0
 * decides between batches (not timed). The output's `iterations` is the count run, and a
 * key `precision` (after samples_us, the ports' and the completion keys) the relative
 * half-width reached. The figures are OSU's over all the iterations run.
 *
 * --mpit: before a point whose (collective, algorithm, segsize, fanout) differs from the
 * previous point, every rank writes coll/tuned's control variables through MPI_T and
 * measures on a fresh MPI_Comm_dup(MPI_COMM_WORLD): coll/tuned reads its forced choices
 * when a communicator is created. A cvar that would have to change but cannot makes the
 * point "failed" instead of silently measuring the default. Non-blocking collectives use
 * libnbc's cvars the same way: coll_libnbc_i<coll>_algorithm (Open MPI 5.0: iallgather,
 * iallreduce, ibcast, ireduce; writable, read by libnbc at every call) and, for the fanout,
 * coll_libnbc_ibcast_knomial_radix (read-only through MPI_T: a fanout other than its
 * current value fails the point). libnbc has no segment-size cvars (segsize != 0 fails).
 * A forced coll/tuned algorithm (either selection) is measured on a communicator that
 * coll/han may not serve (MPI_Comm_dup_with_info, ompi_comm_coll_preference = "^han"),
 * and its output line has "coll_preference": "^han" after samples_us (new_measure_comm
 * says why).
 * libnbc silently runs its linear iallgather when recursive_doubling is forced on a
 * non-power-of-two communicator.
 *
 * Components (built with -DCOLLBENCH_PROBE and collprobe.c, a real MPI's build): after each
 * collective point, the coll component that served the measured communicator, as the probe
 * saw it, is written after coll_preference: "component": "han", "sub_components":
 * "libnbc,tuned" (those of coll/han's sub-communicator calls; "" for none), "sub_algorithms":
 * "bcast@3=1,bcast@2=6" (coll/tuned's algorithm id per sub-communicator size); the keys are
 * absent when the probe saw nothing (MPICH, hidden symbols) and on point-to-point points.
 * COLLBENCH_COMPONENT=NAME in the environment ([measure] components asked for NAME): any
 * name but tuned/default keeps coll/han on the measured communicator of a forced tuned
 * algorithm (the forcing then reaches han's sub-communicators, which is what was asked).
 *
 * --validate: after the timed loop, one untimed call with fresh send patterns (depending
 * on rank, byte index and iteration) and poisoned receive buffers; every received byte
 * on every rank is checked. Reductions use patterns whose sum never overflows a char
 * (see red_pat), and the expected sum is computed modulo 256. Non-blocking points validate
 * one MPI_I<coll> + test_calls MPI_Test + MPI_Wait after all their timed loops.
 *
 * --debug (tests only) at point N (--debug-at, 0-based): hang = rank 0 pauses forever;
 * crash = rank 1 (rank 0 alone) calls abort(); corrupt = the highest rank that receives
 * data flips one received byte before validation (no effect without --validate, nor on
 * barrier, which carries no data).
 *
 * Measured calls return errors (MPI_ERRORS_RETURN on the measured communicator), so an
 * algorithm that refuses a communicator size gives a "failed" point, not a dead launch.
 *
 * COLLBENCH_PORTS_TABLE=TABLE in the environment (SimGrid build only, where the kernel is
 * compiled with the ports of kernel/ports/ and -DCOLLBENCH_PORTS; an environment variable
 * so that the command line stays the same as a real MPI's): the measured blocking
 * collectives run collbench's
 * point-to-point ports of Open MPI's coll/tuned algorithms instead of SMPI's collectives.
 * A point with algorithm_id > 0 runs cbp_<coll>(..., algorithm_id, segsize, fanout) with
 * Open MPI's forced semantics (segsize 0 = unsegmented, fanout 0 = the default fanout or
 * radix). A point with algorithm_id 0 ("default") runs what TABLE says the fixed decision
 * rules pick for its collective and size: TABLE holds lines `collective size_bytes
 * algorithm_id fanout name` ('#' lines and blank lines ignored), written by collbench from
 * its Open MPI decision rules for the launch's process count; algorithm_id 0 there means an
 * algorithm without a coll/tuned id (gatherv and scatterv: coll/basic's linear one, what
 * Open MPI runs for them; "self" at one process). On one process every point runs SMPI's
 * collective (a local copy, as Open MPI's coll/self, which serves such communicators
 * whatever is forced). The `barrier 0 ...` line also gives the barrier the timed loops
 * run between iterations (a forced barrier point uses its own algorithm, as Open MPI does).
 * Non-blocking collectives and the point-to-point benchmarks stay SMPI's. In the SMPI
 * build every blocking collective point's output gets `"implementation": "port"` or
 * `"smpi"` (whose code ran), and a default point under a table `"resolved_algorithm_id"`
 * (null for coll/basic) and `"resolved_algorithm"` (what default ran), after samples_us;
 * TABLE lines `han collective divisor modulus name` (a simulated Open MPI 5.0 whose ranks
 * span several nodes; rank r is on node (r / divisor) % modulus) make that collective's
 * default points run the port of coll/han's hierarchy (cbp_han.c) where han would take
 * the call (`"component": "han"`, `"resolved_algorithm"`: han's algorithm name), else the
 * fixed decision on the whole communicator as above; with a `han barrier` line, han's
 * barrier also separates the iterations of every default point han's communicator serves;
 * non-blocking points keep their key list.
 *
 * SMPI (compiled with smpi_compat.h): SimGrid 3.32 runs all 14 non-blocking collectives
 * (checked with --validate at 2 and 4 ranks); SMPI_NB_UNSUPPORTED lists those a future or
 * older SMPI cannot run, which give a "failed" point "<coll> is not supported by SMPI".
 * Under SMPI the hide_steps sweep is not run (max_hidden_* stay null): SMPI's network
 * progresses without MPI calls, so what it would find is the model's, not the MPI's.
 * SMPI injects simulated time into every MPI_Test (--cfg=smpi/test, 1e-4 s by default,
 * growing with smpi/grow-injected-times), so test_calls > 0 shows that model's cost unless
 * the launch sets smpi/test:0.
 */
#define _POSIX_C_SOURCE 200809L

#include <mpi.h>

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#if defined(__GLIBC__) && !defined(COLLBENCH_SMPI_COMPAT_H) /* SMPI redefines malloc */
#include <malloc.h>
#endif

#include "clocksync.h"
#ifdef COLLBENCH_PROBE
#include "collprobe.h"
#endif

#define PROG "collbench_kernel"
#define BW_WINDOW 64
#define BW_ACK_BYTES 4
#define ERR_LEN 512

enum coll {
    C_BARRIER, C_BCAST, C_GATHER, C_GATHERV, C_SCATTER, C_SCATTERV, C_REDUCE, C_ALLREDUCE,
    C_ALLGATHER, C_ALLGATHERV, C_ALLTOALL, C_ALLTOALLV, C_REDUCE_SCATTER,
    C_REDUCE_SCATTER_BLOCK, C_LATENCY, C_BW, C_MBW_MR, C_COUNT
};

static const char *const COLL_NAMES[C_COUNT] = {
    "barrier", "bcast", "gather", "gatherv", "scatter", "scatterv", "reduce", "allreduce",
    "allgather", "allgatherv", "alltoall", "alltoallv", "reduce_scatter",
    "reduce_scatter_block", "latency", "bw", "mbw_mr"
};

/* Non-blocking names, indexed by the blocking counterpart (NULL: none). */
static const char *const NB_NAMES[C_COUNT] = {
    "ibarrier", "ibcast", "igather", "igatherv", "iscatter", "iscatterv", "ireduce",
    "iallreduce", "iallgather", "iallgatherv", "ialltoall", "ialltoallv", "ireduce_scatter",
    "ireduce_scatter_block", NULL, NULL, NULL
};

#ifdef COLLBENCH_SMPI_COMPAT_H
/* Non-blocking collectives SMPI 3.32 does not run (see the header comment). */
static const int SMPI_NB_UNSUPPORTED[C_COUNT] = {0};
#endif

#ifdef COLLBENCH_PORTS
#include "ompi_ports.h"

#define PORT_NAME_LEN 48
#define PORTS_ENV "COLLBENCH_PORTS_TABLE"

/* One line of the ports table: what "default" runs for (collective, size). */
typedef struct {
    int coll;
    long long size;
    int alg, fanout;
    char name[PORT_NAME_LEN];
} decision_t;

/* How the current point runs under the ports table (identical on every rank). */
typedef struct {
    int use;          /* 1: the port runs the measured collective */
    int han;          /* 1: a default point run by the port of coll/han (g_han) */
    int alg, segsize, fanout;
    const decision_t *resolved; /* a default point: the table line it ran */
    int barrier_alg;  /* the measured communicator's barrier; 0: MPI_Barrier */
    int han_barrier;  /* 1: coll/han's barrier (g_han) separates the iterations instead */
} port_run_t;

static decision_t *g_dec;
static int g_ndec, g_ports;
static port_run_t g_run;

/* coll/han (TABLE's `han` lines): its collectives, their han algorithm names, the node
 * map, and the sub-communicators of the measured communicator. */
static int g_han_coll[C_COUNT], g_han_div, g_han_mod;
static char g_han_name[C_COUNT][PORT_NAME_LEN];
static cbp_han_t *g_han;
static MPI_Comm g_han_comm = MPI_COMM_NULL;
#endif

enum debug_mode { DBG_NONE, DBG_HANG, DBG_CRASH, DBG_CORRUPT };
enum status { ST_OK, ST_INVALID, ST_FAILED };
enum compute_kind { CMP_AUTO, CMP_US, CMP_FACTOR };

/* Limits of the precision options (see the header comment). */
#define PREC_MAX_ITERS 1000000
#define PREC_DEFAULT_ITERS 100000
#define PREC_MAX_SECONDS 3600.0
#define PREC_DEFAULT_SECONDS 10.0

/* Limits of the non-blocking options (see the header comment). */
#define NB_MAX_TESTS 1000000
#define NB_MAX_FACTOR 100.0
#define NB_MAX_COMPUTE_US 1e7
#define NB_MAX_HIDE_STEPS 100

typedef struct {
    int coll;      /* the blocking counterpart for non-blocking points */
    int nb;        /* 1: the non-blocking MPI_I<coll> */
    int alg;
    long long segsize;
    int fanout;
    long long size;
    int iters;
    int warmup;
    int tests;                 /* test_calls=N: MPI_Test calls in the compute phase */
    enum compute_kind ckind;   /* compute=auto | <v>us | <v>x */
    double cval;               /* microseconds (CMP_US) or factor (CMP_FACTOR) */
    int hide;                  /* hide_steps=K: max-hideable-compute sweep, 0 = off */
    int completion;            /* timing=completion: also the synchronised-start loop */
    double precision;          /* precision=F: iterate until the median's CI is +-F (0: off) */
    int max_iters;             /* max_iterations=N (precision mode) */
    double max_seconds;        /* max_seconds=S (precision mode) */
} job_t;

typedef struct {
    const char *jobs_path;
    const char *out_path;
    int validate, samples, mpit;
    const char *monitor; /* --monitor DIR: per-point pml/monitoring files (run.monitoring) */
    enum debug_mode debug;
    long long debug_at;
    double clock_skew; /* --clock-skew-us (tests only), seconds per rank */
} opts_t;

/* Non-blocking figures (rank 0, microseconds or percent; NAN = null). */
typedef struct {
    double overall, compute, init, test, wait, pure, min_comm, max_comm;
    double overlap, overlap_imb, overlap_raw, slowdown;
    double max_hidden, max_hidden_pct, hide_bound;
} nbres_t;

typedef struct {
    enum status status;
    char error[ERR_LEN];
    int validated;
    double avg, min, max, median, bw; /* NAN = null */
    double *samples;                  /* rank 0, iterations entries, or NULL */
    nbres_t nb;
    cs_result_t cpl;                  /* timing=completion */
    double sync_error;                /* seconds */
    int iters;                        /* timed iterations run (precision mode: as many
                                       * as it took) */
    double precision;                 /* achieved relative CI half-width; NAN: off */
    int han_excluded;                 /* measured on a communicator without coll/han */
    char component[32];               /* the coll component that served it ("": not known) */
    char subs[128];                   /* components of its sub-communicators, comma-separated */
    char sub_algs[256];               /* coll/tuned algorithms run on them (collprobe.h) */
} result_t;

/* Buffers and arguments of one point on this rank. */
typedef struct {
    const job_t *job;
    MPI_Comm comm;
    int rank, nprocs;
    int count;                 /* per-rank count (block size) */
    int block;                 /* reduce_scatter_block recvcount */
    int *counts, *displs;      /* v-variants and reduce_scatter */
    unsigned char *sbuf, *rbuf;
    size_t slen;               /* bytes of sbuf filled with this rank's pattern */
    size_t rlen;               /* bytes of rbuf this rank receives and checks */
} point_t;

static int g_rank, g_nprocs;
static double g_clock_skew; /* --clock-skew-us, seconds */

/* ------------------------------------------------------------------ small utilities */

static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, PROG ": rank %d: ", g_rank);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    MPI_Abort(MPI_COMM_WORLD, 3);
    exit(3); /* not reached */
}

static void check_mpi(int rc, const char *what)
{
    if (rc != MPI_SUCCESS) {
        char msg[MPI_MAX_ERROR_STRING];
        int len = 0;
        MPI_Error_string(rc, msg, &len);
        die("%s failed: %s", what, msg);
    }
}

static void *xalloc(size_t n)
{
    void *p = NULL;
    /* Page-aligned like OSU, so alignment does not vary between points. */
    if (posix_memalign(&p, 4096, n ? n : 1) != 0)
        return NULL;
    return p;
}

/* Deterministic byte for (rank, index, iteration): a 32-bit mix, so misplaced blocks and
 * stale data from another iteration do not match by accident. */
static unsigned char pat(int rank, size_t index, int iter)
{
    uint32_t h = (uint32_t)rank * 0x9E3779B1u;
    h ^= (uint32_t)index * 0x85EBCA77u + (uint32_t)((uint64_t)index >> 32) * 0x27D4EB2Fu;
    h ^= (uint32_t)iter * 0xC2B2AE3Du;
    h ^= h >> 15;
    h *= 0x2C1B3C6Du;
    h ^= h >> 12;
    h *= 0x297A2D39u;
    h ^= h >> 15;
    return (unsigned char)h;
}

static int is_reduction(int coll)
{
    return coll == C_REDUCE || coll == C_ALLREDUCE || coll == C_REDUCE_SCATTER
        || coll == C_REDUCE_SCATTER_BLOCK;
}

/* Send byte for reductions. MPI_SUM on MPI_CHAR is outside the MPI standard and overflow
 * differs between code paths: Open MPI's op/avx saturates from 16 elements on
 * (open-mpi/ompi#8045, wontfix) while the scalar loop wraps. So no sum may overflow: at
 * most 16 ranks feed any byte (rank r feeds bytes i with r % G == i % G), each with a
 * value in [0, 127 / feeders]. */
static unsigned char red_pat(int rank, size_t index, int iter, int P)
{
    int groups = (P + 15) / 16, feeders = (P + groups - 1) / groups;
    if ((size_t)(rank % groups) != index % (size_t)groups)
        return 0;
    return (unsigned char)(pat(rank, index, iter) % (127 / feeders + 1));
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median_of(const double *v, int n)
{
    double *c, m;
    if (n <= 0)
        return NAN;
    c = malloc((size_t)n * sizeof *c);
    if (!c)
        die("out of memory");
    memcpy(c, v, (size_t)n * sizeof *c);
    qsort(c, (size_t)n, sizeof *c, cmp_double);
    m = n % 2 ? c[n / 2] : 0.5 * (c[n / 2 - 1] + c[n / 2]);
    free(c);
    return m;
}

static void set_error(result_t *r, enum status st, const char *fmt, ...)
{
    va_list ap;
    r->status = st;
    va_start(ap, fmt);
    vsnprintf(r->error, sizeof r->error, fmt, ap);
    va_end(ap);
}

static void mpi_error_text(int rc, char *buf, size_t n)
{
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS)
        snprintf(msg, sizeof msg, "error code %d", rc);
    snprintf(buf, n, "%s", msg);
}

/* ----------------------------------------------------------------- growable string */

typedef struct {
    char *p;
    size_t len, cap;
} strbuf_t;

static void sb_printf(strbuf_t *sb, const char *fmt, ...)
{
    for (;;) {
        va_list ap;
        int n;
        size_t room = sb->cap - sb->len;
        va_start(ap, fmt);
        n = vsnprintf(sb->p ? sb->p + sb->len : NULL, sb->p ? room : 0, fmt, ap);
        va_end(ap);
        if (n < 0)
            die("formatting output failed");
        if (sb->p && (size_t)n < room) {
            sb->len += (size_t)n;
            return;
        }
        sb->cap = (sb->cap + (size_t)n + 1) * 2;
        sb->p = realloc(sb->p, sb->cap);
        if (!sb->p)
            die("out of memory");
    }
}

static void sb_number(strbuf_t *sb, double v)
{
    if (isfinite(v))
        sb_printf(sb, "%.9g", v);
    else
        sb_printf(sb, "null");
}

static void sb_json_string(strbuf_t *sb, const char *s)
{
    sb_printf(sb, "\"");
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            sb_printf(sb, "\\%c", c);
        else if (c < 0x20)
            sb_printf(sb, "\\u%04x", c);
        else
            sb_printf(sb, "%c", c);
    }
    sb_printf(sb, "\"");
}

/* ------------------------------------------------------------------ argument parsing */

static int parse_ll(const char *s, long long lo, long long hi, long long *out)
{
    char *end;
    long long v;
    errno = 0;
    v = strtoll(s, &end, 10);
    if (errno || end == s || *end != '\0' || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

static const char USAGE[] =
    "usage: " PROG " --jobs JOBFILE --output OUTFILE [--validate] [--samples] [--mpit]\n"
    "       [--monitor DIR] [--debug hang|crash|corrupt] [--debug-at N] [--clock-skew-us US]";

/* Returns 0, or writes a message to err and returns -1. */
static int parse_args(int argc, char **argv, opts_t *o, char *err, size_t n)
{
    memset(o, 0, sizeof *o);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int has_value = i + 1 < argc;
        if (!strcmp(a, "--validate"))
            o->validate = 1;
        else if (!strcmp(a, "--samples"))
            o->samples = 1;
        else if (!strcmp(a, "--mpit"))
            o->mpit = 1;
        else if (!strcmp(a, "--jobs") && has_value)
            o->jobs_path = argv[++i];
        else if (!strcmp(a, "--monitor") && has_value)
            o->monitor = argv[++i];
        else if (!strcmp(a, "--output") && has_value)
            o->out_path = argv[++i];
        else if (!strcmp(a, "--debug") && has_value) {
            const char *m = argv[++i];
            if (!strcmp(m, "hang"))
                o->debug = DBG_HANG;
            else if (!strcmp(m, "crash"))
                o->debug = DBG_CRASH;
            else if (!strcmp(m, "corrupt"))
                o->debug = DBG_CORRUPT;
            else {
                snprintf(err, n, "--debug: unknown mode '%s' (hang, crash, corrupt)", m);
                return -1;
            }
        } else if (!strcmp(a, "--clock-skew-us") && has_value) {
            long long us;
            if (parse_ll(argv[++i], 0, 10000000, &us)) {
                snprintf(err, n, "--clock-skew-us: not an integer in [0, 10000000]: '%s'",
                         argv[i]);
                return -1;
            }
            o->clock_skew = (double)us * 1e-6;
        } else if (!strcmp(a, "--debug-at") && has_value) {
            if (parse_ll(argv[++i], 0, LLONG_MAX, &o->debug_at)) {
                snprintf(err, n, "--debug-at: not a non-negative integer: '%s'", argv[i]);
                return -1;
            }
        } else {
            snprintf(err, n, "unknown or incomplete argument '%s'", a);
            return -1;
        }
    }
    if (!o->jobs_path || !o->out_path) {
        snprintf(err, n, "--jobs and --output are required");
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------------- job file parsing */

/* The blocking index for a name; *nb = 1 when it names the non-blocking variant. */
static int coll_from_name(const char *s, int *nb)
{
    for (int c = 0; c < C_COUNT; c++) {
        if (!strcmp(s, COLL_NAMES[c])) {
            *nb = 0;
            return c;
        }
        if (NB_NAMES[c] && !strcmp(s, NB_NAMES[c])) {
            *nb = 1;
            return c;
        }
    }
    return -1;
}

static const char *coll_name(const job_t *j)
{
    return j->nb ? NB_NAMES[j->coll] : COLL_NAMES[j->coll];
}

/* A finite number with an optional unit suffix `unit` ("" for none); 0 or -1. */
static int parse_num_unit(const char *s, const char *unit, double *out)
{
    char *end;
    double v;
    errno = 0;
    v = strtod(s, &end);
    if (errno || end == s || strcmp(end, unit) != 0 || !isfinite(v))
        return -1;
    /* strtod accepts hex floats and "infinity"; only plain decimals are allowed */
    for (const char *c = s; c < end; c++)
        if (!strchr("0123456789.+-eE", *c))
            return -1;
    *out = v;
    return 0;
}

static int is_p2p(int coll);

/* precision=F (0 < F <= 1), max_iterations=N (1..PREC_MAX_ITERS), max_seconds=S
 * (0 < S <= PREC_MAX_SECONDS); which: 0, 1, 2. 0 or -1 with err. */
static int parse_precision_option(int which, const char *key, const char *val, job_t *j,
                                  char *err, size_t n)
{
    double d;
    long long v;
    if (which == 1) {
        if (parse_ll(val, 1, PREC_MAX_ITERS, &v)) {
            snprintf(err, n, "%s must be an integer in [1, %d], got '%s'", key,
                     PREC_MAX_ITERS, val);
            return -1;
        }
        j->max_iters = (int)v;
        return 0;
    }
    if (parse_num_unit(val, "", &d) || d <= 0
        || d > (which == 0 ? 1.0 : PREC_MAX_SECONDS)) {
        snprintf(err, n, "%s must be a number in (0, %g], got '%s'", key,
                 which == 0 ? 1.0 : PREC_MAX_SECONDS, val);
        return -1;
    }
    if (which == 0)
        j->precision = d;
    else
        j->max_seconds = d;
    return 0;
}

/* Optional key=value field of a job line; 0 or -1 with err. */
static int parse_option(char *tok, job_t *j, unsigned *seen, char *err, size_t n)
{
    static const char *const KEYS[7] = {"test_calls", "compute", "hide_steps", "timing",
                                        "precision", "max_iterations", "max_seconds"};
    char *eq = strchr(tok, '=');
    const char *val;
    long long v;
    double d;
    int k;
    if (!eq) {
        snprintf(err, n, "field '%s': expected key=value (test_calls=N, compute=auto|<us>us|"
                         "<factor>x, hide_steps=K, timing=osu|completion) after the 7 fields",
                 tok);
        return -1;
    }
    *eq = '\0';
    val = eq + 1;
    for (k = 0; k < 7 && strcmp(tok, KEYS[k]); k++)
        ;
    if (k == 7) {
        snprintf(err, n, "unknown option '%s' (valid: test_calls, compute, hide_steps, "
                         "timing, precision, max_iterations, max_seconds)", tok);
        return -1;
    }
    if (*seen & (1u << k)) {
        snprintf(err, n, "option %s given twice", tok);
        return -1;
    }
    *seen |= 1u << k;
    if (k >= 3 && (j->nb || is_p2p(j->coll))) {
        snprintf(err, n, "%s= is for blocking collectives only, not %s", tok, coll_name(j));
        return -1;
    }
    if (k >= 4)
        return parse_precision_option(k - 4, tok, val, j, err, n);
    if (k == 3) {
        if (strcmp(val, "osu") && strcmp(val, "completion")) {
            snprintf(err, n, "timing must be osu or completion, got '%s'", val);
            return -1;
        }
        j->completion = !strcmp(val, "completion");
        return 0;
    }
    if (!j->nb) {
        snprintf(err, n, "option %s is for non-blocking collectives only", tok);
        return -1;
    }
    if (k == 0 || k == 2) {
        long long hi = k == 0 ? NB_MAX_TESTS : NB_MAX_HIDE_STEPS;
        if (parse_ll(val, 0, hi, &v)) {
            snprintf(err, n, "%s must be an integer in [0, %lld], got '%s'", tok, hi, val);
            return -1;
        }
        if (k == 0)
            j->tests = (int)v;
        else
            j->hide = (int)v;
        return 0;
    }
    if (!strcmp(val, "auto")) {
        j->ckind = CMP_AUTO;
    } else if (!parse_num_unit(val, "us", &d)) {
        if (d < 0 || d > NB_MAX_COMPUTE_US) {
            snprintf(err, n, "compute: fixed time must be in [0, %.0f] us, got '%s'",
                     NB_MAX_COMPUTE_US, val);
            return -1;
        }
        j->ckind = CMP_US;
        j->cval = d;
    } else if (!parse_num_unit(val, "x", &d)) {
        if (d <= 0 || d > NB_MAX_FACTOR) {
            snprintf(err, n, "compute: factor of the pure time must be in (0, %g], got '%s'",
                     NB_MAX_FACTOR, val);
            return -1;
        }
        j->ckind = CMP_FACTOR;
        j->cval = d;
    } else {
        snprintf(err, n, "compute must be auto, <microseconds>us or <factor>x, got '%s'", val);
        return -1;
    }
    return 0;
}

#define MAX_FIELDS 16

/* Parse one non-comment line into a job; returns 0 or writes err. */
static int parse_job_line(char *line, job_t *j, char *err, size_t n)
{
    char *tok[MAX_FIELDS + 1], *save = NULL;
    int nt = 0;
    unsigned seen = 0;
    long long v[6];
    static const char *const FIELD[6] = {
        "algorithm_id", "segsize", "fanout", "size_bytes", "iterations", "warmup"
    };
    static const long long LO[6] = {0, 0, 0, 0, 1, 0};
    static const long long HI[6] = {INT_MAX, LLONG_MAX, INT_MAX, INT_MAX, INT_MAX, INT_MAX};

    memset(j, 0, sizeof *j);
    for (char *t = strtok_r(line, " \t\r\v\f", &save); t && nt < MAX_FIELDS + 1;
         t = strtok_r(NULL, " \t\r\v\f", &save))
        tok[nt++] = t;
    if (nt < 7) {
        snprintf(err, n, "expected 7 fields (collective algorithm_id segsize fanout "
                         "size_bytes iterations warmup), got %d", nt);
        return -1;
    }
    j->coll = coll_from_name(tok[0], &j->nb);
    if (j->coll < 0) {
        snprintf(err, n, "unknown collective '%s'", tok[0]);
        return -1;
    }
    if (nt > MAX_FIELDS) {
        snprintf(err, n, "too many fields (at most %d)", MAX_FIELDS);
        return -1;
    }
    for (int i = 0; i < 6; i++) {
        if (parse_ll(tok[i + 1], LO[i], HI[i], &v[i])) {
            snprintf(err, n, "%s must be an integer in [%lld, %lld], got '%s'", FIELD[i],
                     LO[i], HI[i], tok[i + 1]);
            return -1;
        }
    }
    j->alg = (int)v[0];
    j->segsize = v[1];
    j->fanout = (int)v[2];
    j->size = v[3];
    j->iters = (int)v[4];
    j->warmup = (int)v[5];
    if (j->coll == C_BARRIER && j->size != 0) {
        snprintf(err, n, "%s carries no data: size_bytes must be 0", coll_name(j));
        return -1;
    }
    for (int i = 7; i < nt; i++)
        if (parse_option(tok[i], j, &seen, err, n))
            return -1;
    if (!j->precision && (j->max_iters || j->max_seconds)) {
        snprintf(err, n, "max_iterations= and max_seconds= need precision=");
        return -1;
    }
    if (j->precision) {
        if (!j->max_iters)
            j->max_iters = j->iters > PREC_DEFAULT_ITERS ? j->iters : PREC_DEFAULT_ITERS;
        if (!j->max_seconds)
            j->max_seconds = PREC_DEFAULT_SECONDS;
        if (j->max_iters < j->iters) {
            snprintf(err, n, "max_iterations (%d) is below iterations (%d), the minimum",
                     j->max_iters, j->iters);
            return -1;
        }
    }
    return 0;
}

/* Parse the whole job text (identical on all ranks). Returns the job count, or -1 with
 * the offending line number in *bad_line and the reason in err. */
static int parse_jobs(char *text, job_t **out, int *bad_line, char *err, size_t n)
{
    int cap = 16, nj = 0, lineno = 0;
    job_t *jobs = malloc((size_t)cap * sizeof *jobs);
    char *line = text;
    if (!jobs)
        die("out of memory");
    while (line && *line) {
        char *next = strchr(line, '\n'), *p = line;
        if (next)
            *next++ = '\0';
        lineno++;
        while (*p == ' ' || *p == '\t' || *p == '\r')
            p++;
        if (*p && *p != '#') {
            if (nj == cap) {
                cap *= 2;
                jobs = realloc(jobs, (size_t)cap * sizeof *jobs);
                if (!jobs)
                    die("out of memory");
            }
            if (parse_job_line(p, &jobs[nj], err, n)) {
                *bad_line = lineno;
                free(jobs);
                return -1;
            }
            nj++;
        }
        line = next;
    }
    *out = jobs;
    return nj;
}

/* Rank 0 reads the file and broadcasts it: only rank 0's filesystem matters. */
static char *read_and_bcast(const char *path, char *err, size_t n)
{
    long long len = -1;
    char *buf = NULL;
    if (g_rank == 0) {
        FILE *f = fopen(path, "rb");
        if (f && fseek(f, 0, SEEK_END) == 0) {
            long l = ftell(f);
            if (l >= 0 && l < INT_MAX && fseek(f, 0, SEEK_SET) == 0) {
                buf = malloc((size_t)l + 1);
                if (buf && fread(buf, 1, (size_t)l, f) == (size_t)l)
                    len = l;
            }
        }
        if (len < 0)
            snprintf(err, n, "cannot read job file: %s", strerror(errno ? errno : EIO));
        if (f)
            fclose(f);
    }
    check_mpi(MPI_Bcast(&len, 1, MPI_LONG_LONG, 0, MPI_COMM_WORLD), "MPI_Bcast");
    if (len < 0) {
        free(buf);
        return NULL;
    }
    if (g_rank != 0 && !(buf = malloc((size_t)len + 1)))
        die("out of memory");
    check_mpi(MPI_Bcast(buf, (int)len, MPI_CHAR, 0, MPI_COMM_WORLD), "MPI_Bcast");
    buf[len] = '\0';
    if (memchr(buf, '\0', (size_t)len)) {
        snprintf(err, n, "job file contains a NUL byte");
        free(buf);
        return NULL;
    }
    return buf;
}

/* ------------------------------------------------------------------- MPI_T control */

/* A cached coll/tuned control variable, with its value at start-up as the default. */
typedef struct {
    char name[128];
    int exists, writable, is_bool, width; /* width: 4 or 8 bytes for integers */
    MPI_T_cvar_handle handle;
    long long dflt;
} cvar_t;

#define MAX_CVARS 160
static cvar_t g_cvars[MAX_CVARS];
static int g_ncvars;

static int cvar_read(const cvar_t *cv, long long *v)
{
    int rc;
    if (cv->is_bool) {
        _Bool b = 0;
        rc = MPI_T_cvar_read(cv->handle, &b);
        *v = b;
    } else if (cv->width == 4) {
        int32_t x = 0;
        rc = MPI_T_cvar_read(cv->handle, &x);
        *v = x;
    } else {
        int64_t x = 0;
        rc = MPI_T_cvar_read(cv->handle, &x);
        *v = x;
    }
    return rc;
}

static int cvar_write(const cvar_t *cv, long long v)
{
    if (cv->is_bool) {
        _Bool b = v != 0;
        return MPI_T_cvar_write(cv->handle, &b);
    }
    if (cv->width == 4) {
        int32_t x = (int32_t)v;
        return MPI_T_cvar_write(cv->handle, &x);
    }
    int64_t x = v;
    return MPI_T_cvar_write(cv->handle, &x);
}

static cvar_t *cvar_lookup(const char *name)
{
    cvar_t *cv;
    int idx, verb, bind, scope, nlen, dlen, count, tsize = 0;
    char nbuf[256], dbuf[16];
    MPI_Datatype dt;
    MPI_T_enum en;

    for (int i = 0; i < g_ncvars; i++)
        if (!strcmp(g_cvars[i].name, name))
            return &g_cvars[i];
    if (g_ncvars == MAX_CVARS)
        die("too many control variables");
    cv = &g_cvars[g_ncvars++];
    memset(cv, 0, sizeof *cv);
    snprintf(cv->name, sizeof cv->name, "%s", name);
    if (MPI_T_cvar_get_index(name, &idx) != MPI_SUCCESS)
        return cv;
    nlen = sizeof nbuf;
    dlen = sizeof dbuf;
    if (MPI_T_cvar_get_info(idx, nbuf, &nlen, &verb, &dt, &en, dbuf, &dlen, &bind, &scope)
        != MPI_SUCCESS)
        return cv;
    cv->is_bool = dt == MPI_C_BOOL;
    if (!cv->is_bool) {
        /* Integers only: Open MPI maps MCA ints to MPI_INT/UNSIGNED/LONG/... types. */
        if (dt == MPI_CHAR || dt == MPI_DOUBLE || dt == MPI_FLOAT
            || MPI_Type_size(dt, &tsize) != MPI_SUCCESS || (tsize != 4 && tsize != 8))
            return cv;
        cv->width = tsize;
    }
    if (MPI_T_cvar_handle_alloc(idx, NULL, &cv->handle, &count) != MPI_SUCCESS || count != 1)
        return cv;
    cv->exists = 1;
    cv->writable = scope != MPI_T_SCOPE_CONSTANT && scope != MPI_T_SCOPE_READONLY;
    if (cvar_read(cv, &cv->dflt) != MPI_SUCCESS)
        die("cannot read control variable %s", name);
    return cv;
}

/* Make cvar `name` hold `value`. A cvar already holding it needs no write (so read-only
 * cvars at the wanted value are fine). Failures only count when `required`. */
static int cvar_set(const char *name, long long value, int required, char *err, size_t n)
{
    cvar_t *cv = cvar_lookup(name);
    long long cur;
    int rc;
    if (!cv->exists) {
        if (required)
            snprintf(err, n, "mpit: cvar %s not found", name);
        return required ? -1 : 0;
    }
    if (cvar_read(cv, &cur) == MPI_SUCCESS && cur == value)
        return 0;
    if (!cv->is_bool && cv->width == 4 && (value < INT32_MIN || value > INT32_MAX)) {
        if (required)
            snprintf(err, n, "mpit: value %lld out of range for cvar %s", value, name);
        return required ? -1 : 0;
    }
    if (!cv->writable) {
        if (required)
            snprintf(err, n, "mpit: cvar %s not writable", name);
        return required ? -1 : 0;
    }
    rc = cvar_write(cv, value);
    if (rc == MPI_SUCCESS)
        return 0;
    if (required)  /* the scope said writable: the value itself was refused */
        snprintf(err, n, "mpit: cvar %s rejected value %lld (MPI_T error %d)", name, value,
                 rc);
    return required ? -1 : 0;
}

static int cvar_reset(const char *name)
{
    cvar_t *cv = cvar_lookup(name);
    char ignored[8];
    return cv->exists ? cvar_set(name, cv->dflt, 0, ignored, sizeof ignored) : 0;
}

/* Fanout/radix cvar suffixes: coll/tuned's, and libnbc's for the non-blocking ones. */
static const char *const FANOUT_SUFFIX[3] = {
    "algorithm_tree_fanout", "algorithm_chain_fanout", "algorithm_knomial_radix"
};
static const char *const NB_FANOUT_SUFFIX[1] = {"knomial_radix"};

/* coll/tuned's cvar for blocking collectives, libnbc's (coll_libnbc_i<coll>_...) for the
 * non-blocking ones. */
static void cvar_name(char *buf, size_t n, int coll, int nb, const char *suffix)
{
    if (nb)
        snprintf(buf, n, "coll_libnbc_%s_%s", NB_NAMES[coll], suffix);
    else
        snprintf(buf, n, "coll_tuned_%s_%s", COLL_NAMES[coll], suffix);
}

static int fanout_suffixes(int nb, const char *const **list)
{
    *list = nb ? NB_FANOUT_SUFFIX : FANOUT_SUFFIX;
    return nb ? 1 : 3;
}

/* Put a collective's forcing cvars back to their start-up values, so the inter-iteration
 * barrier of later points runs as in a launch that forces one collective only. */
static void mpit_reset(int coll, int nb)
{
    char name[128];
    const char *const *fan;
    int nfs = fanout_suffixes(nb, &fan);
    cvar_name(name, sizeof name, coll, nb, "algorithm");
    cvar_reset(name);
    cvar_name(name, sizeof name, coll, nb, "algorithm_segmentsize");
    cvar_reset(name);
    for (int i = 0; i < nfs; i++) {
        cvar_name(name, sizeof name, coll, nb, fan[i]);
        cvar_reset(name);
    }
}

/* Write this rank's cvars for job j; 0 or -1 with err. libnbc has no segment-size cvars
 * (a segsize makes the point fail: cvar not found) and its only radix cvar,
 * coll_libnbc_ibcast_knomial_radix, is read-only through MPI_T in Open MPI 5.0. */
static int mpit_write(const job_t *j, char *err, size_t n)
{
    char name[128];
    const char *const *fan;
    int nfan = 0, nfs = fanout_suffixes(j->nb, &fan);
    if (!j->nb) /* else the launcher sets it */
        cvar_set("coll_tuned_use_dynamic_rules", 1, 0, err, n);
    cvar_name(name, sizeof name, j->coll, j->nb, "algorithm");
    if (cvar_set(name, j->alg, j->alg != 0, err, n))
        return -1;
    cvar_name(name, sizeof name, j->coll, j->nb, "algorithm_segmentsize");
    if (j->segsize ? cvar_set(name, j->segsize, 1, err, n) : cvar_reset(name))
        return -1;
    for (int i = 0; i < nfs; i++) {
        cvar_name(name, sizeof name, j->coll, j->nb, fan[i]);
        if (!j->fanout) {
            cvar_reset(name);
            continue;
        }
        if (!cvar_lookup(name)->exists)
            continue;
        nfan++;
        if (cvar_set(name, j->fanout, 1, err, n))
            return -1;
    }
    if (j->fanout && !nfan) {
        cvar_name(name, sizeof name, j->coll, j->nb, fan[0]);
        snprintf(err, n, "mpit: cvar %s not found", name);
        return -1;
    }
    return 0;
}

#ifdef COLLBENCH_SMPI_COMPAT_H
#define HAN_EXCLUDABLE 0
#else
#define HAN_EXCLUDABLE 1
#endif

/* A forced coll/tuned algorithm (a blocking collective with an algorithm id) is measured
 * on a communicator that coll/han may not serve. Open MPI 5.0 gives han (priority 35) every
 * communicator that spans nodes; han then runs its own hierarchy and hands coll/tuned only
 * its intra- and inter-node sub-communicators, so a forced tuned algorithm would run there,
 * not at the top level its row names (seen on two emulated hosts with an LD_PRELOAD trace:
 * the forced do_this on 2-rank sub-communicators, han's bcast on the 4-rank dup). The
 * per-communicator info key ompi_comm_coll_preference (coll/base comm_select, Open MPI 4.1.0
 * and 5.0.0 on) with "^han" leaves tuned at the top level; on one node han steps aside
 * anyway, 4.1 ships it at priority 0, and other MPIs ignore the key. SMPI has no han. */
static int g_keep_han; /* COLLBENCH_COMPONENT names a component other than tuned */

static int forces_tuned(const job_t *j)
{
    return j->alg != 0 && !j->nb && !is_p2p(j->coll) && !g_keep_han;
}

static MPI_Comm new_measure_comm(int exclude_han)
{
    MPI_Comm c;
#ifndef COLLBENCH_SMPI_COMPAT_H
    if (exclude_han) {
        MPI_Info info;
        check_mpi(MPI_Info_create(&info), "MPI_Info_create");
        check_mpi(MPI_Info_set(info, "ompi_comm_coll_preference", "^han"), "MPI_Info_set");
        check_mpi(MPI_Comm_dup_with_info(MPI_COMM_WORLD, info, &c), "MPI_Comm_dup_with_info");
        check_mpi(MPI_Info_free(&info), "MPI_Info_free");
    } else
#endif
        check_mpi(MPI_Comm_dup(MPI_COMM_WORLD, &c), "MPI_Comm_dup");
    (void)exclude_han;
    check_mpi(MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
    return c;
}

/* Per-launch MPI_T state: the configuration the current communicator was made for. */
typedef struct {
    int valid, failed, dirty_coll, dirty_nb, han_excluded;
    job_t cfg;
    char error[ERR_LEN];
} mpit_state_t;

static int same_config(const job_t *a, const job_t *b)
{
    return a->coll == b->coll && a->nb == b->nb && a->alg == b->alg
        && a->segsize == b->segsize && a->fanout == b->fanout;
}

/* Switch the measured communicator to job j's algorithm. 0, or -1 with err (all ranks). */
static int mpit_configure(mpit_state_t *st, const job_t *j, MPI_Comm *comm, char *err,
                          size_t n)
{
    int bad, any_bad = 0;
    if (st->valid && same_config(&st->cfg, j)) {
        if (st->failed)
            snprintf(err, n, "%s", st->error);
        return st->failed ? -1 : 0;
    }
    if (st->dirty_coll >= 0 && (st->dirty_coll != j->coll || st->dirty_nb != j->nb))
        mpit_reset(st->dirty_coll, st->dirty_nb);
    st->dirty_coll = j->coll;
    st->dirty_nb = j->nb;
    st->cfg = *j;
    st->valid = 1;
    st->error[0] = '\0';
    bad = mpit_write(j, st->error, sizeof st->error) != 0;
    check_mpi(MPI_Allreduce(&bad, &any_bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD),
              "MPI_Allreduce");
    st->failed = any_bad;
    if (any_bad) {
        if (!bad)
            snprintf(st->error, sizeof st->error, "mpit: cvar write failed on another rank");
        snprintf(err, n, "%s", st->error);
        return -1;
    }
    if (*comm != MPI_COMM_NULL)
        check_mpi(MPI_Comm_free(comm), "MPI_Comm_free");
    st->han_excluded = HAN_EXCLUDABLE && forces_tuned(j);
    *comm = new_measure_comm(st->han_excluded);
    return 0;
}

/* ------------------------------------------------------------------- point buffers */

static int is_p2p(int coll)
{
    return coll == C_LATENCY || coll == C_BW || coll == C_MBW_MR;
}

/* osu_mbw_mr's pairs: ranks 0..P/2-1 send to rank + P/2 (an odd last rank idles). */
static int mbw_pairs(int P)
{
    return P / 2;
}

/* OSU 7.x reduce_scatter recvcounts (see header comment). */
static int rs_count(long long size, int P, int r)
{
    if (size < P)
        return r < size ? 1 : 0;
    return (int)(size / P) + (r < size % P ? 1 : 0);
}

/* Bytes rank r receives (and validation checks) for this collective. */
static size_t recv_len_for(int coll, int r, int P, long long size)
{
    size_t s = (size_t)size, all = s * (size_t)P;
    switch (coll) {
    case C_BARRIER: return 0;
    case C_GATHER: case C_GATHERV: return r == 0 ? all : 0;
    case C_REDUCE: return r == 0 ? s : 0;
    case C_ALLGATHER: case C_ALLGATHERV: case C_ALLTOALL: case C_ALLTOALLV: return all;
    case C_REDUCE_SCATTER: return (size_t)rs_count(size, P, r);
    case C_REDUCE_SCATTER_BLOCK: return s / (size_t)P;
    case C_LATENCY: return r <= 1 ? s : 0;
    case C_BW: return r == 1 ? s : 0;
    case C_MBW_MR: return r >= mbw_pairs(P) && r < 2 * mbw_pairs(P) ? s : 0;
    default: return s; /* bcast (root checks its own buffer), scatter(v), allreduce */
    }
}

/* The rank --debug corrupt acts on: the highest rank that receives data, or -1. */
static int corrupter_rank(const job_t *j, int P)
{
    for (int r = P - 1; r >= 0; r--)
        if (recv_len_for(j->coll, r, P, j->size) > 0)
            return r;
    return -1;
}

/* The launch's buffers, as OSU's: a send and a receive buffer for the collectives
 * (osu_<coll>: allocated once at the largest size and touched whole) and another pair for
 * latency and bw (osu_latency / osu_bw: allocated once at the largest size, each size
 * touching only its own bytes), reserved before the first point (pool_reserve) and reused
 * by every point. Measured beside OSU 7.4 at 2 ranks (docs/performance.md, kernel
 * fidelity): fresh buffers per point made bcast up to 11 % slower from 4 KiB to 512 KiB
 * (depending on the allocator's state), and ping-pong buffers touched whole made latency
 * 4-8 % faster from 2 KiB to 64 KiB.
 * A point needing more than the reserve (which could not be had) grows its buffer. */
enum { POOL_SEND, POOL_RECV, POOL_P2P_SEND, POOL_P2P_RECV, POOLS };
static unsigned char *g_pool[POOLS];
static size_t g_pool_len[POOLS];

static int pool_touched(int which)
{
    return which == POOL_SEND || which == POOL_RECV;
}

/* Pool buffer `which` with at least n bytes, or NULL (out of memory; the old one stays). */
static unsigned char *pool_get(int which, size_t n)
{
    unsigned char *b;
    if (n <= g_pool_len[which] && g_pool[which])
        return g_pool[which];
    b = xalloc(n);
    if (!b)
        return NULL;
    if (pool_touched(which))
        memset(b, 1, n ? n : 1);
    free(g_pool[which]);
    g_pool[which] = b;
    g_pool_len[which] = n;
    return b;
}

static void pool_free(void)
{
    for (int w = 0; w < POOLS; w++) {
        free(g_pool[w]);
        g_pool[w] = NULL;
        g_pool_len[w] = 0;
    }
}

static void point_free(point_t *p)
{
    free(p->counts);
    free(p->displs);
    memset(p, 0, sizeof *p);
}

/* Bytes rank r's send and receive buffers hold for job j (bcast: the send buffer only). */
static void buffer_bytes(const job_t *j, int r, int P, size_t *salloc, size_t *ralloc)
{
    size_t s = (size_t)j->size, all = s * (size_t)P;
    *salloc = s;
    *ralloc = 0;
    switch (j->coll) {
    case C_BARRIER: *salloc = 0; break;
    case C_GATHER: case C_GATHERV: *ralloc = r == 0 ? all : 0; break;
    case C_SCATTER: case C_SCATTERV:
        *salloc = r == 0 ? all : 0;
        *ralloc = s;
        break;
    case C_REDUCE: case C_ALLREDUCE: *ralloc = s; break; /* OSU: recv buffer everywhere */
    case C_ALLGATHER: case C_ALLGATHERV: *ralloc = all; break;
    case C_ALLTOALL: case C_ALLTOALLV: *ralloc = all; *salloc = all; break;
    case C_REDUCE_SCATTER: case C_REDUCE_SCATTER_BLOCK:
        *ralloc = recv_len_for(j->coll, r, P, j->size);
        break;
    case C_LATENCY: case C_BW: case C_MBW_MR:
        *salloc = *ralloc = s > BW_ACK_BYTES ? s : BW_ACK_BYTES;
        break;
    default: break; /* bcast: the send buffer is the receive buffer */
    }
}

/* Set this rank's buffers and arguments for job j; returns 0 or -1 (out of memory). */
static int point_alloc(point_t *p, const job_t *j, MPI_Comm comm)
{
    int P = g_nprocs, r = g_rank, c = j->coll;
    size_t s = (size_t)j->size, salloc, ralloc;
    memset(p, 0, sizeof *p);
    p->job = j;
    p->comm = comm;
    p->rank = r;
    p->nprocs = P;
    p->count = (int)j->size;
    p->rlen = recv_len_for(c, r, P, j->size);
    buffer_bytes(j, r, P, &salloc, &ralloc);
    p->slen = salloc; /* the bytes this rank's pattern fills */
    if (c == C_LATENCY || c == C_BW)
        p->slen = r <= 1 ? s : 0;
    else if (c == C_MBW_MR)
        p->slen = r < mbw_pairs(P) ? s : 0;
    else if (c == C_REDUCE_SCATTER_BLOCK)
        p->block = (int)(s / (size_t)P);
    if (c == C_GATHERV || c == C_SCATTERV || c == C_ALLGATHERV || c == C_ALLTOALLV
        || c == C_REDUCE_SCATTER) {
        p->counts = malloc((size_t)P * sizeof(int));
        p->displs = malloc((size_t)P * sizeof(int));
        if (!p->counts || !p->displs)
            return -1;
        for (int i = 0, d = 0; i < P; i++) {
            p->counts[i] = c == C_REDUCE_SCATTER ? rs_count(j->size, P, i) : (int)j->size;
            p->displs[i] = d;
            d += p->counts[i];
        }
    }
    p->sbuf = pool_get(is_p2p(c) ? POOL_P2P_SEND : POOL_SEND, salloc);
    p->rbuf = c == C_BCAST ? p->sbuf : pool_get(is_p2p(c) ? POOL_P2P_RECV : POOL_RECV, ralloc);
    if (!p->sbuf || !p->rbuf)
        return -1;
    /* Set the point's bytes before timing, as OSU's set_buffer does per size. */
    memset(p->sbuf, 1, salloc);
    if (p->rbuf != p->sbuf)
        memset(p->rbuf, 0, ralloc);
    return 0;
}

/* Does the job's buffer arithmetic fit MPI's int counts? The collectives whose buffers
 * hold every rank's block (and the v-variants' displacements) need P * size to fit; the
 * others only size, which the job parser already bounds. */
static int fits_int(const job_t *j, int P)
{
    switch (j->coll) {
    case C_GATHER: case C_GATHERV: case C_SCATTER: case C_SCATTERV: case C_ALLGATHER:
    case C_ALLGATHERV: case C_ALLTOALL: case C_ALLTOALLV:
        return (long long)P * j->size <= INT_MAX;
    default:
        return j->size <= INT_MAX;
    }
}

/* Reserve the pools for every point this launch will measure (failures are left to the
 * point that needs the memory, which then fails alone). */
static void pool_reserve(const job_t *jobs, int nj)
{
    size_t most[POOLS] = {0}, b[2];
    for (int i = 0; i < nj; i++) {
        int base = is_p2p(jobs[i].coll) ? POOL_P2P_SEND : POOL_SEND;
        if (!fits_int(&jobs[i], g_nprocs))
            continue;
        buffer_bytes(&jobs[i], g_rank, g_nprocs, &b[0], &b[1]);
        for (int w = 0; w < 2; w++)
            most[base + w] = b[w] > most[base + w] ? b[w] : most[base + w];
    }
    for (int w = 0; w < POOLS; w++)
        if (most[w])
            pool_get(w, most[w]);
}

#ifdef COLLBENCH_PORTS
/* ------------------------------------------------------------------- the ports (SimGrid) */

/* Parse the ports table (identical on all ranks); 0, or -1 with the line and reason. */
static int parse_decisions(char *text, int *bad_line, char *err, size_t n)
{
    int cap = 16, lineno = 0;
    char *line = text;
    g_dec = malloc((size_t)cap * sizeof *g_dec);
    if (!g_dec)
        die("out of memory");
    while (line && *line) {
        char *next = strchr(line, '\n'), *p = line, *tok[6], *save = NULL;
        int nt = 0, nb = 0;
        long long v[3];
        decision_t *d;
        if (next)
            *next++ = '\0';
        lineno++;
        line = next;
        while (*p == ' ' || *p == '\t' || *p == '\r')
            p++;
        if (!*p || *p == '#')
            continue;
        *bad_line = lineno;
        for (char *t = strtok_r(p, " \t\r\v\f", &save); t && nt < 6;
             t = strtok_r(NULL, " \t\r\v\f", &save))
            tok[nt++] = t;
        if (nt != 5) {
            snprintf(err, n, "expected 5 fields (collective size_bytes algorithm_id fanout "
                             "name, or han collective divisor modulus name)");
            return -1;
        }
        if (!strcmp(tok[0], "han")) {
            int hc = coll_from_name(tok[1], &nb);
            if ((hc != C_BCAST && hc != C_REDUCE && hc != C_ALLREDUCE && hc != C_GATHER &&
                 hc != C_SCATTER && hc != C_ALLGATHER && hc != C_BARRIER) || nb) {
                snprintf(err, n, "han: '%s' has no port of coll/han (bcast, reduce, "
                                 "allreduce, gather, scatter, allgather, barrier)", tok[1]);
                return -1;
            }
            if (parse_ll(tok[2], 1, INT_MAX, &v[0]) || parse_ll(tok[3], 1, INT_MAX, &v[1])) {
                snprintf(err, n, "han: divisor and modulus must be integers in [1, %d]",
                         INT_MAX);
                return -1;
            }
            if (strlen(tok[4]) >= PORT_NAME_LEN) {
                snprintf(err, n, "name longer than %d characters", PORT_NAME_LEN - 1);
                return -1;
            }
            if ((g_han_div && (g_han_div != v[0] || g_han_mod != v[1]))) {
                snprintf(err, n, "han: every han line must give the same divisor and modulus");
                return -1;
            }
            g_han_coll[hc] = 1;
            g_han_div = (int)v[0];
            g_han_mod = (int)v[1];
            snprintf(g_han_name[hc], PORT_NAME_LEN, "%s", tok[4]);
            continue;
        }
        if (g_ndec == cap) {
            cap *= 2;
            g_dec = realloc(g_dec, (size_t)cap * sizeof *g_dec);
            if (!g_dec)
                die("out of memory");
        }
        d = &g_dec[g_ndec];
        d->coll = coll_from_name(tok[0], &nb);
        if (d->coll < 0 || nb || is_p2p(d->coll)) {
            snprintf(err, n, "'%s' is not a blocking collective", tok[0]);
            return -1;
        }
        if (parse_ll(tok[1], 0, INT_MAX, &v[0]) || parse_ll(tok[2], 0, INT_MAX, &v[1])
            || parse_ll(tok[3], 0, INT_MAX, &v[2])) {
            snprintf(err, n, "size_bytes, algorithm_id and fanout must be integers in "
                             "[0, %d]", INT_MAX);
            return -1;
        }
        if (strlen(tok[4]) >= PORT_NAME_LEN) {
            snprintf(err, n, "name longer than %d characters", PORT_NAME_LEN - 1);
            return -1;
        }
        d->size = v[0];
        d->alg = (int)v[1];
        d->fanout = (int)v[2];
        snprintf(d->name, sizeof d->name, "%s", tok[4]);
        g_ndec++;
    }
    return 0;
}

static const decision_t *decision_for(int coll, long long size)
{
    for (int i = 0; i < g_ndec; i++)
        if (g_dec[i].coll == coll && g_dec[i].size == size)
            return &g_dec[i];
    return NULL;
}

/* Whether coll/han takes default point j on comm (collective over comm: han's
 * sub-communicators are built at the first such point, outside any timing, and rebuilt if
 * the measured communicator changes). */
static int han_takes(int coll, long long size, MPI_Comm comm, char *err, size_t n)
{
    if (!g_han_coll[coll] || comm == MPI_COMM_NULL || g_nprocs < 2)
        return 0;
    if (g_han_comm != comm) {
        cbp_han_free(g_han);
        g_han = NULL;
        int node = (g_rank / g_han_div) % g_han_mod;
        if (cbp_han_init(comm, node, &g_han) != MPI_SUCCESS) {
            snprintf(err, n, "ports: building coll/han's sub-communicators failed");
            return -1;
        }
        g_han_comm = comm;
    }
    return cbp_han_applies(g_han, COLL_NAMES[coll], size);
}

/* Decide how job j runs under the ports table (g_run); 0, or -1 with err (the same on
 * every rank). */
static int port_resolve(const job_t *j, MPI_Comm comm, char *err, size_t n)
{
    const decision_t *barrier = decision_for(C_BARRIER, 0);
    memset(&g_run, 0, sizeof g_run);
    if (!g_ports)
        return 0;
    g_run.barrier_alg = barrier ? barrier->alg : 0;
    if (is_p2p(j->coll))
        return 0; /* point-to-point needs no port */
    if (j->nb) {
        /* SMPI's own non-blocking collectives; where coll/han serves the communicator, its
         * barrier separates the iterations, as MPI_Barrier does natively */
        int han_barrier = han_takes(C_BARRIER, 0, comm, err, n);
        if (han_barrier < 0)
            return -1;
        g_run.han_barrier = han_barrier;
        return 0;
    }
    /* One process: Open MPI runs coll/self (a local copy, whatever is forced), as SMPI's
     * own collectives do; the table names it "self". */
    g_run.use = g_nprocs > 1;
    if (j->alg == 0) {
        const decision_t *d = decision_for(j->coll, j->size);
        if (!d) {
            snprintf(err, n, "%s: no decision for %s at %lld bytes", PORTS_ENV,
                     coll_name(j), j->size);
            return -1;
        }
        g_run.resolved = d;
        g_run.alg = d->alg;
        g_run.fanout = d->fanout; /* the fixed rules pass segment size 0 */
        int han = han_takes(j->coll, j->size, comm, err, n);
        /* han serves the measured communicator of a default point: its barrier also
         * separates the iterations (a forced algorithm's is measured without han) */
        int han_barrier = han < 0 ? 0 : han_takes(C_BARRIER, 0, comm, err, n);
        if (han < 0 || han_barrier < 0)
            return -1;
        g_run.han = han;
        g_run.han_barrier = han_barrier;
    } else {
        if (j->coll == C_GATHERV || j->coll == C_SCATTERV || j->segsize > INT_MAX) {
            snprintf(err, n, "ports: %s", j->segsize > INT_MAX ? "segsize exceeds an int"
                     : "gatherv and scatterv have one algorithm only (algorithm_id 0)");
            return -1;
        }
        g_run.alg = j->alg;
        g_run.segsize = (int)j->segsize;
        g_run.fanout = j->fanout;
    }
    if (j->coll == C_BARRIER && g_run.use)
        g_run.barrier_alg = g_run.alg; /* a forced barrier also separates the iterations */
    return 0;
}

/* The measured collective through the ports (same buffers and arguments as call_coll). */
static int call_port(point_t *p)
{
    MPI_Comm c = p->comm;
    int n = p->count, a = g_run.alg, s = g_run.segsize, f = g_run.fanout;
    if (g_run.han) {
        switch (p->job->coll) {
        case C_BCAST:
            return cbp_han_bcast(g_han, p->sbuf, n, MPI_CHAR, 0, c);
        case C_REDUCE:
            return cbp_han_reduce(g_han, p->sbuf, p->rbuf, n, MPI_CHAR, MPI_SUM, 0, c);
        case C_ALLREDUCE:
            return cbp_han_allreduce(g_han, p->sbuf, p->rbuf, n, MPI_CHAR, MPI_SUM);
        case C_GATHER:
            return cbp_han_gather(g_han, p->sbuf, p->rbuf, n, MPI_CHAR, 0, c);
        case C_SCATTER:
            return cbp_han_scatter(g_han, p->sbuf, p->rbuf, n, MPI_CHAR, 0, c);
        case C_ALLGATHER:
            return cbp_han_allgather(g_han, p->sbuf, p->rbuf, n, MPI_CHAR, c);
        case C_BARRIER:
            return cbp_han_barrier(g_han);
        default:
            return MPI_ERR_OTHER;
        }
    }
    switch (p->job->coll) {
    case C_BARRIER:
        return cbp_barrier(c, a);
    case C_BCAST:
        return cbp_bcast(p->sbuf, n, MPI_CHAR, 0, c, a, s, f);
    case C_GATHER:
        return cbp_gather(p->sbuf, n, MPI_CHAR, p->rbuf, n, MPI_CHAR, 0, c, a, s, f);
    case C_GATHERV:
        return cbp_gatherv_linear(p->sbuf, n, MPI_CHAR, p->rbuf, p->counts, p->displs,
                                  MPI_CHAR, 0, c);
    case C_SCATTER:
        return cbp_scatter(p->sbuf, n, MPI_CHAR, p->rbuf, n, MPI_CHAR, 0, c, a, s, f);
    case C_SCATTERV:
        return cbp_scatterv_linear(p->sbuf, p->counts, p->displs, MPI_CHAR, p->rbuf, n,
                                   MPI_CHAR, 0, c);
    case C_REDUCE:
        return cbp_reduce(p->sbuf, p->rbuf, n, MPI_CHAR, MPI_SUM, 0, c, a, s, f);
    case C_ALLREDUCE:
        return cbp_allreduce(p->sbuf, p->rbuf, n, MPI_CHAR, MPI_SUM, c, a, s, f);
    case C_ALLGATHER:
        return cbp_allgather(p->sbuf, n, MPI_CHAR, p->rbuf, n, MPI_CHAR, c, a, s, f);
    case C_ALLGATHERV:
        return cbp_allgatherv(p->sbuf, n, MPI_CHAR, p->rbuf, p->counts, p->displs, MPI_CHAR,
                              c, a, s, f);
    case C_ALLTOALL:
        return cbp_alltoall(p->sbuf, n, MPI_CHAR, p->rbuf, n, MPI_CHAR, c, a, s, f);
    case C_ALLTOALLV:
        return cbp_alltoallv(p->sbuf, p->counts, p->displs, MPI_CHAR, p->rbuf, p->counts,
                             p->displs, MPI_CHAR, c, a, s, f);
    case C_REDUCE_SCATTER:
        return cbp_reduce_scatter(p->sbuf, p->rbuf, p->counts, MPI_CHAR, MPI_SUM, c, a, s, f);
    case C_REDUCE_SCATTER_BLOCK:
        return cbp_reduce_scatter_block(p->sbuf, p->rbuf, p->block, MPI_CHAR, MPI_SUM, c, a,
                                        s, f);
    default:
        return MPI_ERR_OTHER;
    }
}

/* After samples_us: whose code ran, and what a default point resolved to. */
static void write_port_fields(strbuf_t *sb, const job_t *j)
{
    const decision_t *d = g_run.resolved;
    if (is_p2p(j->coll) || j->nb) /* non-blocking points keep their key list (SMPI's) */
        return;
    sb_printf(sb, ", \"implementation\": \"%s\"", g_run.use ? "port" : "smpi");
    if (g_run.han) {
        sb_printf(sb, ", \"component\": \"han\"");
        /* unequal ranks per node: han (but its allreduce and barrier) hands the call to
         * tuned's fixed decision */
        if (!(d && j->coll != C_ALLREDUCE && j->coll != C_BARRIER &&
              cbp_han_imbalanced(g_han))) {
            sb_printf(sb, ", \"resolved_algorithm_id\": null, \"resolved_algorithm\": ");
            sb_json_string(sb, g_han_name[j->coll]);
            return;
        }
    }
    if (!d)
        return;
    if (d->alg > 0)
        sb_printf(sb, ", \"resolved_algorithm_id\": %d, \"resolved_algorithm\": ", d->alg);
    else
        sb_printf(sb, ", \"resolved_algorithm_id\": null, \"resolved_algorithm\": ");
    sb_json_string(sb, d->name);
}
#endif

/* The barrier that separates timed iterations on the measured communicator: with a ports
 * table, the one Open MPI would run there (the fixed rules' barrier, or a forced one). */
static int comm_barrier(MPI_Comm c)
{
#ifdef COLLBENCH_PORTS
    if (g_run.han_barrier)
        return cbp_han_barrier(g_han);
    if (g_run.barrier_alg > 0)
        return cbp_barrier(c, g_run.barrier_alg);
#endif
    return MPI_Barrier(c);
}

/* ------------------------------------------------------------------- one collective call */

static int call_coll(point_t *p)
{
    MPI_Comm c = p->comm;
    int n = p->count;
#ifdef COLLBENCH_PORTS
    if (g_run.use)
        return call_port(p);
#endif
    switch (p->job->coll) {
    case C_BARRIER:
        return MPI_Barrier(c);
    case C_BCAST:
        return MPI_Bcast(p->sbuf, n, MPI_CHAR, 0, c);
    case C_GATHER:
        return MPI_Gather(p->sbuf, n, MPI_CHAR, p->rbuf, n, MPI_CHAR, 0, c);
    case C_GATHERV:
        return MPI_Gatherv(p->sbuf, n, MPI_CHAR, p->rbuf, p->counts, p->displs, MPI_CHAR, 0,
                           c);
    case C_SCATTER:
        return MPI_Scatter(p->sbuf, n, MPI_CHAR, p->rbuf, n, MPI_CHAR, 0, c);
    case C_SCATTERV:
        return MPI_Scatterv(p->sbuf, p->counts, p->displs, MPI_CHAR, p->rbuf, n, MPI_CHAR, 0,
                            c);
    case C_REDUCE:
        return MPI_Reduce(p->sbuf, p->rbuf, n, MPI_CHAR, MPI_SUM, 0, c);
    case C_ALLREDUCE:
        return MPI_Allreduce(p->sbuf, p->rbuf, n, MPI_CHAR, MPI_SUM, c);
    case C_ALLGATHER:
        return MPI_Allgather(p->sbuf, n, MPI_CHAR, p->rbuf, n, MPI_CHAR, c);
    case C_ALLGATHERV:
        return MPI_Allgatherv(p->sbuf, n, MPI_CHAR, p->rbuf, p->counts, p->displs, MPI_CHAR,
                              c);
    case C_ALLTOALL:
        return MPI_Alltoall(p->sbuf, n, MPI_CHAR, p->rbuf, n, MPI_CHAR, c);
    case C_ALLTOALLV:
        return MPI_Alltoallv(p->sbuf, p->counts, p->displs, MPI_CHAR, p->rbuf, p->counts,
                             p->displs, MPI_CHAR, c);
    case C_REDUCE_SCATTER:
        return MPI_Reduce_scatter(p->sbuf, p->rbuf, p->counts, MPI_CHAR, MPI_SUM, c);
    case C_REDUCE_SCATTER_BLOCK:
        return MPI_Reduce_scatter_block(p->sbuf, p->rbuf, p->block, MPI_CHAR, MPI_SUM, c);
    default:
        return MPI_ERR_OTHER;
    }
}

/* Post the non-blocking counterpart of call_coll (same buffers and arguments). */
static int start_coll(point_t *p, MPI_Request *req)
{
    MPI_Comm c = p->comm;
    int n = p->count;
    switch (p->job->coll) {
    case C_BARRIER:
        return MPI_Ibarrier(c, req);
    case C_BCAST:
        return MPI_Ibcast(p->sbuf, n, MPI_CHAR, 0, c, req);
    case C_GATHER:
        return MPI_Igather(p->sbuf, n, MPI_CHAR, p->rbuf, n, MPI_CHAR, 0, c, req);
    case C_GATHERV:
        return MPI_Igatherv(p->sbuf, n, MPI_CHAR, p->rbuf, p->counts, p->displs, MPI_CHAR, 0,
                            c, req);
    case C_SCATTER:
        return MPI_Iscatter(p->sbuf, n, MPI_CHAR, p->rbuf, n, MPI_CHAR, 0, c, req);
    case C_SCATTERV:
        return MPI_Iscatterv(p->sbuf, p->counts, p->displs, MPI_CHAR, p->rbuf, n, MPI_CHAR, 0,
                             c, req);
    case C_REDUCE:
        return MPI_Ireduce(p->sbuf, p->rbuf, n, MPI_CHAR, MPI_SUM, 0, c, req);
    case C_ALLREDUCE:
        return MPI_Iallreduce(p->sbuf, p->rbuf, n, MPI_CHAR, MPI_SUM, c, req);
    case C_ALLGATHER:
        return MPI_Iallgather(p->sbuf, n, MPI_CHAR, p->rbuf, n, MPI_CHAR, c, req);
    case C_ALLGATHERV:
        return MPI_Iallgatherv(p->sbuf, n, MPI_CHAR, p->rbuf, p->counts, p->displs, MPI_CHAR,
                               c, req);
    case C_ALLTOALL:
        return MPI_Ialltoall(p->sbuf, n, MPI_CHAR, p->rbuf, n, MPI_CHAR, c, req);
    case C_ALLTOALLV:
        return MPI_Ialltoallv(p->sbuf, p->counts, p->displs, MPI_CHAR, p->rbuf, p->counts,
                              p->displs, MPI_CHAR, c, req);
    case C_REDUCE_SCATTER:
        return MPI_Ireduce_scatter(p->sbuf, p->rbuf, p->counts, MPI_CHAR, MPI_SUM, c, req);
    case C_REDUCE_SCATTER_BLOCK:
        return MPI_Ireduce_scatter_block(p->sbuf, p->rbuf, p->block, MPI_CHAR, MPI_SUM, c,
                                         req);
    default:
        return MPI_ERR_OTHER;
    }
}

/* ------------------------------------------------------------------- dummy compute */

static volatile double g_sink; /* keeps the compute loop from being optimised away */

/* Busy computation for `seconds` of wall-clock time, in chunks of a few tens of
 * nanoseconds (OSU's dummy compute also runs until the clock says so). Under SMPI the
 * clock only moves with simulated work, so the time is injected with
 * smpi_execute_benched (plain smpi_execute is a no-op outside a benchmarked region). */
static void busy_compute(double seconds)
{
    if (seconds <= 0.0)
        return;
#ifdef COLLBENCH_SMPI_COMPAT_H
    smpi_execute_benched(seconds);
#else
    {
        double x = g_sink, t0 = MPI_Wtime();
        do {
            for (int k = 0; k < 32; k++)
                x = x * 0.999999 + 1e-3;
        } while (MPI_Wtime() - t0 < seconds);
        g_sink = x;
    }
#endif
}

/* OSU's compute phase: without test calls one compute of `seconds`; with N test calls,
 * N rounds of (compute seconds/N, MPI_Test). *test_time = time inside MPI_Test. */
static int compute_and_test(double seconds, int tests, MPI_Request *req, double *test_time)
{
    int rc = MPI_SUCCESS, flag = 0;
    *test_time = 0.0;
    if (tests == 0) {
        busy_compute(seconds);
        return rc;
    }
    for (int k = 0; k < tests && rc == MPI_SUCCESS; k++) {
        double t0;
        busy_compute(seconds / tests);
        t0 = MPI_Wtime();
        rc = MPI_Test(req, &flag, MPI_STATUS_IGNORE);
        *test_time += MPI_Wtime() - t0;
    }
    return rc;
}

/* One collective as measured: the blocking call, or post + (test calls) + wait. */
static int run_once(point_t *p, int with_tests)
{
    MPI_Request req = MPI_REQUEST_NULL;
    double ignored;
    int rc;
    if (!p->job->nb)
        return call_coll(p);
    rc = start_coll(p, &req);
    if (rc == MPI_SUCCESS && with_tests)
        rc = compute_and_test(0.0, p->job->tests, &req, &ignored);
    if (rc == MPI_SUCCESS)
        rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
    return rc;
}

/* ------------------------------------------------------------------- validation */

static unsigned char sum_pat(int P, size_t index, int iter)
{
    int groups = (P + 15) / 16;
    unsigned s = 0;
    for (int q = (int)(index % (size_t)groups); q < P; q += groups) /* the feeders only */
        s += red_pat(q, index, iter, P);
    return (unsigned char)s; /* modulo 256, though red_pat keeps it below 128 */
}

/* Expected received bytes of this rank for iteration `iter` (p->rlen bytes). */
static void expected_recv(const point_t *p, int iter, unsigned char *e)
{
    int P = p->nprocs, r = p->rank;
    size_t s = (size_t)p->job->size;
    for (size_t i = 0; i < p->rlen; i++) {
        switch (p->job->coll) {
        case C_BCAST: e[i] = pat(0, i, iter); break;
        case C_GATHER: case C_GATHERV: case C_ALLGATHER: case C_ALLGATHERV:
            e[i] = pat((int)(i / s), i % s, iter);
            break;
        case C_SCATTER: case C_SCATTERV: e[i] = pat(0, (size_t)r * s + i, iter); break;
        case C_ALLTOALL: case C_ALLTOALLV:
            e[i] = pat((int)(i / s), (size_t)r * s + i % s, iter);
            break;
        case C_REDUCE: case C_ALLREDUCE: e[i] = sum_pat(P, i, iter); break;
        case C_REDUCE_SCATTER: e[i] = sum_pat(P, (size_t)p->displs[r] + i, iter); break;
        case C_REDUCE_SCATTER_BLOCK:
            e[i] = sum_pat(P, (size_t)r * (size_t)p->block + i, iter);
            break;
        case C_LATENCY: case C_BW: e[i] = pat(1 - r, i, iter); break;
        case C_MBW_MR: e[i] = pat(r - mbw_pairs(P), i, iter); break;
        default: e[i] = 0; break;
        }
    }
}

typedef struct {
    int bad;
    long long index, expected, got;
} verdict_t;

static void fill_send(point_t *p, int iter)
{
    if (p->job->coll == C_BCAST && p->rank != 0)
        return;
    if (is_reduction(p->job->coll))
        for (size_t i = 0; i < p->slen; i++)
            p->sbuf[i] = red_pat(p->rank, i, iter, p->nprocs);
    else
        for (size_t i = 0; i < p->slen; i++)
            p->sbuf[i] = pat(p->rank, i, iter);
}

static void check_recv(const point_t *p, const unsigned char *e, verdict_t *v)
{
    for (size_t i = 0; i < p->rlen && !v->bad; i++) {
        if (p->rbuf[i] != e[i]) {
            v->bad = 1;
            v->index = (long long)i;
            v->expected = e[i];
            v->got = p->rbuf[i];
        }
    }
}

/* Prepare expected data and poison receive buffers (bcast root keeps its data). */
static unsigned char *validation_prepare(point_t *p, int iter)
{
    unsigned char *e = malloc(p->rlen ? p->rlen : 1);
    if (!e)
        die("out of memory");
    fill_send(p, iter);
    expected_recv(p, iter, e);
    if (!(p->job->coll == C_BCAST && p->rank == 0))
        for (size_t i = 0; i < p->rlen; i++)
            p->rbuf[i] = (unsigned char)(e[i] ^ 0xFF);
    return e;
}

static void maybe_corrupt(point_t *p, int corrupt)
{
    if (corrupt && p->rank == corrupter_rank(p->job, p->nprocs) && p->rlen > 0)
        p->rbuf[p->rlen / 2] ^= 0x01;
}

/* One untimed collective with fresh patterns; returns an MPI error code. */
static int validate_coll(point_t *p, int corrupt, verdict_t *v)
{
    const int iter = 1; /* the timed loop used iteration 0's pattern or constants */
    unsigned char *e = validation_prepare(p, iter);
    int rc = comm_barrier(p->comm);
    if (rc == MPI_SUCCESS)
        rc = run_once(p, 1);
    if (rc == MPI_SUCCESS) {
        maybe_corrupt(p, corrupt);
        check_recv(p, e, v);
    }
    free(e);
    return rc;
}

/* One message from each mbw_mr sender to its partner, checked there. */
static int validate_mbw(point_t *p, int corrupt, verdict_t *v)
{
    int pairs = mbw_pairs(p->nprocs), n = p->count, rc = MPI_SUCCESS;
    unsigned char *e = validation_prepare(p, 1);
    if (p->rank < pairs)
        rc = MPI_Send(p->sbuf, n, MPI_CHAR, p->rank + pairs, 1, p->comm);
    else if (p->rank < 2 * pairs)
        rc = MPI_Recv(p->rbuf, n, MPI_CHAR, p->rank - pairs, 1, p->comm, MPI_STATUS_IGNORE);
    if (rc == MPI_SUCCESS && p->rlen > 0) {
        maybe_corrupt(p, corrupt);
        check_recv(p, e, v);
    }
    free(e);
    return rc;
}

static int validate_p2p(point_t *p, int corrupt, verdict_t *v)
{
    const int iter = 1;
    int n = p->count, rc = MPI_SUCCESS;
    unsigned char *e = validation_prepare(p, iter);
    MPI_Comm c = p->comm;
    if (p->rank == 0) {
        rc = MPI_Send(p->sbuf, n, MPI_CHAR, 1, 1, c);
        if (rc == MPI_SUCCESS && p->job->coll == C_LATENCY)
            rc = MPI_Recv(p->rbuf, n, MPI_CHAR, 1, 1, c, MPI_STATUS_IGNORE);
        else if (rc == MPI_SUCCESS)
            rc = MPI_Recv(p->rbuf, BW_ACK_BYTES, MPI_CHAR, 1, 2, c, MPI_STATUS_IGNORE);
    } else if (p->rank == 1) {
        rc = MPI_Recv(p->rbuf, n, MPI_CHAR, 0, 1, c, MPI_STATUS_IGNORE);
        if (rc == MPI_SUCCESS && p->job->coll == C_LATENCY)
            rc = MPI_Send(p->sbuf, n, MPI_CHAR, 0, 1, c);
        else if (rc == MPI_SUCCESS)
            rc = MPI_Send(p->sbuf, BW_ACK_BYTES, MPI_CHAR, 0, 2, c);
    }
    if (rc == MPI_SUCCESS && p->rank <= 1) {
        maybe_corrupt(p, corrupt);
        if (p->rank == 1 || p->job->coll == C_LATENCY)
            check_recv(p, e, v);
    }
    free(e);
    return rc;
}

/* Agree on the verdict; rank 0 gets the first bad rank's details. */
static void exchange_verdict(const verdict_t *v, result_t *res)
{
    int cand = v->bad ? g_rank : g_nprocs, first = g_nprocs;
    long long info[3] = {v->index, v->expected, v->got};
    check_mpi(MPI_Allreduce(&cand, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD),
              "MPI_Allreduce");
    if (first == g_nprocs) {
        res->validated = 1;
        return;
    }
    check_mpi(MPI_Bcast(info, 3, MPI_LONG_LONG, first, MPI_COMM_WORLD), "MPI_Bcast");
    set_error(res, ST_INVALID,
              "validation failed on rank %d at received byte %lld: expected %lld, got %lld",
              first, info[0], info[1], info[2]);
}

/* ------------------------------------------------------------------- timed loops */

/* OSU collective loop (for non-blocking points: the pure-communication loop, post + wait);
 * t[k] = this rank's time of timed iteration k (seconds). On error,
 * *what names the failed call (the barriers can fail too when barrier is forced). */
/* ------------------------------------------------------------------- monitoring */
/* --monitor DIR (run.monitoring; Open MPI launched with pml_monitoring_enable=2): every rank
 * flushes what it has sent through pml/monitoring's MPI_T variable "pml_monitoring_flush"
 * right before a point's timed loop (to DIR/prof.skip, discarded) and right after it (to
 * DIR/prof.<point>.coll.<rank>.prof), then runs the loop's barriers alone, as many as the
 * loop ran, into DIR/prof.<point>.barrier.<rank>.prof, so the reader can subtract them.
 * Each rank also writes DIR/prof.place.<rank>: its host and the socket it runs on. Nothing
 * here runs, and the timed path is unchanged, without --monitor. */
#ifndef COLLBENCH_SMPI_COMPAT_H
static const char *g_mon_dir;
static MPI_T_pvar_session g_mon_session;
static MPI_T_pvar_handle g_mon_flush;

static int mon_flush(const char *name)
{
    char buf[4096];
    snprintf(buf, sizeof buf, "%s/prof.%s", g_mon_dir, name);
    if (MPI_T_pvar_write(g_mon_session, g_mon_flush, buf) != MPI_SUCCESS)
        return -1;
    if (MPI_T_pvar_stop(g_mon_session, g_mon_flush) != MPI_SUCCESS)
        return -1;
    return MPI_T_pvar_start(g_mon_session, g_mon_flush) == MPI_SUCCESS ? 0 : -1;
}

/* The socket of the CPU this rank runs on (Linux; -1 when unknown). */
static int mon_socket(void)
{
    char line[4096], path[128];
    int cpu = -1, pkg = -1;
    FILE *f = fopen("/proc/self/stat", "r");
    if (f) {
        char *end = fgets(line, sizeof line, f) ? strrchr(line, ')') : NULL;
        char *tok = end ? strtok(end + 1, " ") : NULL;
        for (int field = 3; tok && field < 39; field++) /* field 39: the last CPU */
            tok = strtok(NULL, " ");
        if (tok)
            cpu = atoi(tok);
        fclose(f);
    }
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/topology/physical_package_id",
             cpu);
    f = cpu >= 0 ? fopen(path, "r") : NULL;
    if (f) {
        if (fscanf(f, "%d", &pkg) != 1)
            pkg = -1;
        fclose(f);
    }
    return pkg;
}

static int mon_init(const char *dir)
{
    int provided, idx, count;
    char path[4096], host[256] = "";
    MPI_Comm world = MPI_COMM_WORLD;
    g_mon_dir = dir;
    if (MPI_T_init_thread(MPI_THREAD_SINGLE, &provided) != MPI_SUCCESS
        || MPI_T_pvar_get_index("pml_monitoring_flush", MPI_T_PVAR_CLASS_GENERIC, &idx)
               != MPI_SUCCESS
        || MPI_T_pvar_session_create(&g_mon_session) != MPI_SUCCESS
        || MPI_T_pvar_handle_alloc(g_mon_session, idx, &world, &g_mon_flush, &count)
               != MPI_SUCCESS
        || MPI_T_pvar_start(g_mon_session, g_mon_flush) != MPI_SUCCESS)
        return -1;
    gethostname(host, sizeof host - 1);
    snprintf(path, sizeof path, "%s/prof.place.%d", dir, g_rank);
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    fprintf(f, "host %s\nsocket %d\n", host, mon_socket());
    return fclose(f) == 0 ? 0 : -1;
}

/* No last flush or pvar stop: Open MPI 5.0.11 crashes in one (common_monitoring_coll.c)
 * once the measured communicator is freed; MPI_Finalize ends the session. */
static void mon_end(void)
{
    if (g_mon_dir)
        MPI_T_finalize();
}
#endif

static int coll_loop(point_t *p, double *t, int warmup, int iters, const char **what)
{
    const job_t *j = p->job;
    int rc = comm_barrier(p->comm);
    *what = "MPI_Barrier";
    for (int i = 0; rc == MPI_SUCCESS && i < warmup + iters; i++) {
        double t0 = MPI_Wtime();
        rc = run_once(p, 0); /* non-blocking: OSU's pure communication, post + wait */
        double t1 = MPI_Wtime();
        *what = coll_name(j);
        if (rc == MPI_SUCCESS) {
            rc = comm_barrier(p->comm);
            *what = "MPI_Barrier";
        }
        if (i >= warmup)
            t[i - warmup] = t1 - t0;
    }
    return rc;
}

static int timed_coll(point_t *p, double *t, const char **what)
{
    return coll_loop(p, t, p->job->warmup, p->job->iters, what);
}

/* The k-th smallest of v[0..n) (0-based), by quickselect: v is reordered so that it sits
 * at v[k] with no larger value before it and no smaller one after. */
static double select_nth(double *v, int n, int k)
{
    int lo = 0, hi = n - 1;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2, i = lo, j = hi;
        double a = v[lo], b = v[mid], c = v[hi], pivot, tmp;
        /* median of three: sorted or reversed data stay linear */
        pivot = a < b ? (b < c ? b : (a < c ? c : a)) : (a < c ? a : (b < c ? c : b));
        while (i <= j) {
            while (v[i] < pivot)
                i++;
            while (v[j] > pivot)
                j--;
            if (i <= j) {
                tmp = v[i];
                v[i++] = v[j];
                v[j--] = tmp;
            }
        }
        if (k <= j)
            hi = j;
        else if (k >= i)
            lo = i;
        else
            break; /* between the halves: equal to the pivot */
    }
    return v[k];
}

/* Relative half-width of the 95% CI of the median of v[0..n) (v is reordered). Called
 * after every batch of a precision-mode point on up to max_iterations values: selecting
 * the four order statistics is linear, where sorting cost 10 % of a precision sweep. */
static double relative_halfwidth(double *v, int n)
{
    int jl, kh;
    double m, lo, hi;
    cs_median_ci_ranks(n, &jl, &kh);
    lo = select_nth(v, n, jl);
    hi = select_nth(v, n, kh);
    m = select_nth(v, n, n / 2);
    if (n % 2 == 0)
        m = 0.5 * (m + select_nth(v, n, n / 2 - 1));
    return m > 0 ? 0.5 * (hi - lo) / m : INFINITY;
}

/* The total count after a batch ended at n iterations with relative half-width h, short of
 * target F: the n at which a half-width shrinking as 1/sqrt(n) would meet F, at least 1.25 n
 * (a batch costs a reduction) and at most 2 n (a rough estimate must not overshoot more
 * than doubling did). tune/adaptive/precise.py next_total is the same arithmetic. */
static long long precise_next_total(int n, double h, double target)
{
    double grow = h / target;
    grow *= grow;
    if (!(grow <= 2.0)) /* also inf and nan */
        grow = 2.0;
    if (grow < 1.25)
        grow = 1.25;
    return (long long)ceil((double)n * grow);
}

/* precision=F: OSU's loop in batches (the first of `iterations`, then precise_next_total)
 * until the 95% CI of the median of the rank-averaged iteration times is within +-F of
 * it, or max_iterations or max_seconds is reached; rank 0 decides between batches (not
 * timed) and tells the others. t holds max_iters entries; run->iters becomes the count
 * run, and *achieved (rank 0) the relative half-width reached. */
static int timed_precise(point_t *p, double *t, job_t *run, double *achieved,
                         const char **what)
{
    int n = 0, batch = run->iters, warmup = run->warmup, rc = MPI_SUCCESS;
    double begin = MPI_Wtime();
    double *acc = g_rank == 0 ? malloc((size_t)run->max_iters * sizeof *acc) : NULL;
    if (g_rank == 0 && !acc)
        die("out of memory");
    for (;;) {
        int bad, any_bad = 0, next = 0;
        rc = coll_loop(p, t + n, warmup, batch, what);
        warmup = 0;
        n += batch;
        bad = rc != MPI_SUCCESS;
        check_mpi(MPI_Allreduce(&bad, &any_bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD),
                  "MPI_Allreduce");
        if (any_bad)
            break;
        check_mpi(MPI_Reduce(t, acc, n, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD),
                  "MPI_Reduce");
        if (g_rank == 0) {
            *achieved = relative_halfwidth(acc, n);
            if (!(*achieved <= run->precision) && n < run->max_iters
                && MPI_Wtime() - begin < run->max_seconds) {
                long long total = precise_next_total(n, *achieved, run->precision);
                next = (int)((total < run->max_iters ? total : run->max_iters) - n);
            }
        }
        check_mpi(MPI_Bcast(&next, 1, MPI_INT, 0, MPI_COMM_WORLD), "MPI_Bcast");
        if (!next)
            break;
        batch = next;
    }
    run->iters = n;
    free(acc);
    return rc;
}

/* osu_latency; rank 0: t[k] = round trip / 2 of iteration k, *total = whole timed loop. */
static int timed_latency(point_t *p, double *t, double *total)
{
    const job_t *j = p->job;
    MPI_Comm c = p->comm;
    int n = p->count, rc = comm_barrier(c);
    double start = 0.0;
    for (int i = 0; rc == MPI_SUCCESS && p->rank <= 1 && i < j->warmup + j->iters; i++) {
        if (i == j->warmup)
            start = MPI_Wtime();
        if (p->rank == 0) {
            double t0 = MPI_Wtime();
            rc = MPI_Send(p->sbuf, n, MPI_CHAR, 1, 1, c);
            if (rc == MPI_SUCCESS)
                rc = MPI_Recv(p->rbuf, n, MPI_CHAR, 1, 1, c, MPI_STATUS_IGNORE);
            if (i >= j->warmup)
                t[i - j->warmup] = (MPI_Wtime() - t0) / 2.0;
        } else {
            rc = MPI_Recv(p->rbuf, n, MPI_CHAR, 0, 1, c, MPI_STATUS_IGNORE);
            if (rc == MPI_SUCCESS)
                rc = MPI_Send(p->sbuf, n, MPI_CHAR, 0, 1, c);
        }
    }
    *total = MPI_Wtime() - start;
    return rc;
}

/* osu_bw; rank 0: t[k] = window k's time / window, *total = whole timed loop. */
static int timed_bw(point_t *p, double *t, double *total)
{
    const job_t *j = p->job;
    MPI_Comm c = p->comm;
    MPI_Request req[BW_WINDOW];
    int n = p->count, rc = comm_barrier(c);
    double start = 0.0;
    for (int i = 0; rc == MPI_SUCCESS && p->rank <= 1 && i < j->warmup + j->iters; i++) {
        double t0;
        if (i == j->warmup)
            start = MPI_Wtime();
        t0 = MPI_Wtime();
        for (int w = 0; rc == MPI_SUCCESS && w < BW_WINDOW; w++)
            rc = p->rank == 0 ? MPI_Isend(p->sbuf, n, MPI_CHAR, 1, 100, c, &req[w])
                              : MPI_Irecv(p->rbuf, n, MPI_CHAR, 0, 100, c, &req[w]);
        if (rc == MPI_SUCCESS)
            rc = MPI_Waitall(BW_WINDOW, req, MPI_STATUSES_IGNORE);
        if (rc == MPI_SUCCESS)
            rc = p->rank == 0
                ? MPI_Recv(p->rbuf, BW_ACK_BYTES, MPI_CHAR, 1, 101, c, MPI_STATUS_IGNORE)
                : MPI_Send(p->sbuf, BW_ACK_BYTES, MPI_CHAR, 0, 101, c);
        if (p->rank == 0 && i >= j->warmup)
            t[i - j->warmup] = (MPI_Wtime() - t0) / BW_WINDOW;
    }
    *total = MPI_Wtime() - start;
    return rc;
}

/* osu_mbw_mr: each of the P/2 senders streams windows to its partner (rank + P/2), all
 * pairs at once, after one barrier that ends the warm-up; a sender's t[k] = window k's
 * time / window and *total = its timed loop; other ranks' *total = 0. */
static int timed_mbw(point_t *p, double *t, double *total)
{
    const job_t *j = p->job;
    MPI_Comm c = p->comm;
    MPI_Request req[BW_WINDOW];
    int pairs = mbw_pairs(p->nprocs), n = p->count, rc = comm_barrier(c);
    int sender = p->rank < pairs, receiver = !sender && p->rank < 2 * pairs;
    int peer = sender ? p->rank + pairs : p->rank - pairs;
    double start = 0.0;
    *total = 0.0;
    for (int i = 0; rc == MPI_SUCCESS && i < j->warmup + j->iters; i++) {
        double t0;
        if (i == j->warmup) {
            rc = comm_barrier(c);
            start = MPI_Wtime();
        }
        if (!sender && !receiver)
            continue;
        t0 = MPI_Wtime();
        for (int w = 0; rc == MPI_SUCCESS && w < BW_WINDOW; w++)
            rc = sender ? MPI_Isend(p->sbuf, n, MPI_CHAR, peer, 100, c, &req[w])
                        : MPI_Irecv(p->rbuf, n, MPI_CHAR, peer, 100, c, &req[w]);
        if (rc == MPI_SUCCESS)
            rc = MPI_Waitall(BW_WINDOW, req, MPI_STATUSES_IGNORE);
        if (rc == MPI_SUCCESS)
            rc = sender
                ? MPI_Recv(p->rbuf, BW_ACK_BYTES, MPI_CHAR, peer, 101, c, MPI_STATUS_IGNORE)
                : MPI_Send(p->sbuf, BW_ACK_BYTES, MPI_CHAR, peer, 101, c);
        if (sender && i >= j->warmup)
            t[i - j->warmup] = (MPI_Wtime() - t0) / BW_WINDOW;
    }
    if (sender)
        *total = MPI_Wtime() - start;
    return rc;
}

/* Per-rank totals over the timed iterations of one overlapped loop (seconds). */
typedef struct {
    double overall, comp, test, wait, init; /* comp includes the MPI_Test calls */
} ovl_t;

/* osu_i<coll>'s overlapped loop: per iteration post (init), compute `target` seconds with
 * the job's MPI_Test calls, wait; the iteration runs from before the post to after the
 * wait; MPI_Barrier after each iteration (not timed). */
static int timed_overlap(point_t *p, double target, ovl_t *o, const char **what)
{
    const job_t *j = p->job;
    int rc = comm_barrier(p->comm);
    memset(o, 0, sizeof *o);
    *what = "MPI_Barrier";
    for (int i = 0; rc == MPI_SUCCESS && i < j->warmup + j->iters; i++) {
        MPI_Request req = MPI_REQUEST_NULL;
        double t0, t1, t2, t3, tt = 0.0;
        *what = coll_name(j);
        t0 = MPI_Wtime();
        rc = start_coll(p, &req);
        t1 = MPI_Wtime();
        if (rc == MPI_SUCCESS) {
            *what = "MPI_Test";
            rc = compute_and_test(target, j->tests, &req, &tt);
        }
        t2 = MPI_Wtime();
        if (rc == MPI_SUCCESS) {
            *what = "MPI_Wait";
            rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
        }
        t3 = MPI_Wtime();
        if (rc == MPI_SUCCESS) {
            *what = "MPI_Barrier";
            rc = comm_barrier(p->comm);
        }
        if (i >= j->warmup) {
            o->overall += t3 - t0;
            o->init += t1 - t0;
            o->comp += t2 - t1;
            o->test += tt;
            o->wait += t3 - t2;
        }
    }
    return rc;
}

/* ------------------------------------------------------------------- one point */

/* Agree on the first MPI error of the measured loop; 0 when every rank succeeded. */
static int agree_on_error(int rc, const char *what, result_t *res)
{
    int bad = rc != MPI_SUCCESS, cand = bad ? g_rank : g_nprocs, first = g_nprocs;
    char msg[MPI_MAX_ERROR_STRING + 1];
    check_mpi(MPI_Allreduce(&cand, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD),
              "MPI_Allreduce");
    if (first == g_nprocs)
        return 0;
    if (g_rank == 0) {
        if (bad)
            mpi_error_text(rc, msg, sizeof msg);
        else
            snprintf(msg, sizeof msg, "(see rank %d's error)", first);
        set_error(res, ST_FAILED, "MPI error in %s on rank %d: %s", what, first, msg);
    } else {
        res->status = ST_FAILED;
    }
    return -1;
}

/* Rank 0 gets avg/min/max of per-rank means and the rank-averaged samples. */
static void collective_stats(const job_t *j, const double *t, result_t *res)
{
    double sum = 0.0, mean, lo = 0.0, hi = 0.0, tot = 0.0;
    double *acc = g_rank == 0 ? malloc((size_t)j->iters * sizeof *acc) : NULL;
    if (g_rank == 0 && !acc)
        die("out of memory");
    for (int k = 0; k < j->iters; k++)
        sum += t[k];
    mean = sum / j->iters;
    check_mpi(MPI_Reduce(&mean, &lo, 1, MPI_DOUBLE, MPI_MIN, 0, MPI_COMM_WORLD), "MPI_Reduce");
    check_mpi(MPI_Reduce(&mean, &hi, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD), "MPI_Reduce");
    check_mpi(MPI_Reduce(&mean, &tot, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD), "MPI_Reduce");
    check_mpi(MPI_Reduce(t, acc, j->iters, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD),
              "MPI_Reduce");
    if (g_rank != 0)
        return;
    for (int k = 0; k < j->iters; k++)
        acc[k] = acc[k] / g_nprocs * 1e6;
    res->avg = tot / g_nprocs * 1e6;
    res->min = lo * 1e6;
    res->max = hi * 1e6;
    res->median = median_of(acc, j->iters);
    res->samples = acc;
}

/* osu_mbw_mr's figures (every rank calls: reductions over the senders): bandwidth_mbs =
 * pairs * size * iterations * window / the senders' mean loop time, as OSU's aggregate;
 * avg_us = that mean / (iterations * window), one pair's time per message, min/max_us
 * the fastest and slowest sender's; samples and median = rank 0's windows. */
static void mbw_stats(const job_t *j, double *t, double total, result_t *res)
{
    int pairs = mbw_pairs(g_nprocs), sender = g_rank < pairs;
    double sum = 0.0, lo = 0.0, hi = 0.0;
    double mine_lo = sender ? total : INFINITY, mine_hi = sender ? total : -INFINITY;
    check_mpi(MPI_Reduce(&total, &sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD),
              "MPI_Reduce");
    check_mpi(MPI_Reduce(&mine_lo, &lo, 1, MPI_DOUBLE, MPI_MIN, 0, MPI_COMM_WORLD),
              "MPI_Reduce");
    check_mpi(MPI_Reduce(&mine_hi, &hi, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD),
              "MPI_Reduce");
    if (g_rank != 0)
        return;
    double mean = sum / pairs, msgs = (double)j->iters * BW_WINDOW;
    for (int k = 0; k < j->iters; k++)
        t[k] *= 1e6;
    res->avg = mean * 1e6 / msgs;
    res->min = lo * 1e6 / msgs;
    res->max = hi * 1e6 / msgs;
    res->bw = mean > 0 ? (double)j->size * pairs * msgs / mean / 1e6 : NAN;
    res->median = median_of(t, j->iters);
    res->samples = malloc((size_t)j->iters * sizeof(double));
    if (!res->samples)
        die("out of memory");
    memcpy(res->samples, t, (size_t)j->iters * sizeof(double));
}

/* Rank 0's own view for latency and bw. */
static void p2p_stats(const job_t *j, double *t, double total, result_t *res)
{
    double per;
    if (g_rank != 0)
        return;
    for (int k = 0; k < j->iters; k++)
        t[k] *= 1e6;
    if (j->coll == C_LATENCY) { /* as osu_latency 7.4: the sum of the timed round trips,
                                  * not the whole loop (which adds the loop's own time) */
        per = 0.0;
        for (int k = 0; k < j->iters; k++)
            per += t[k];
        per /= j->iters;
    } else {
        per = total * 1e6 / ((double)j->iters * BW_WINDOW);
        res->bw = total > 0 ? (double)j->size * j->iters * BW_WINDOW / total / 1e6 : NAN;
    }
    res->avg = res->min = res->max = per;
    res->median = median_of(t, j->iters);
    res->samples = malloc((size_t)j->iters * sizeof(double));
    if (!res->samples)
        die("out of memory");
    memcpy(res->samples, t, (size_t)j->iters * sizeof(double));
}

static void nbres_clear(nbres_t *r)
{
    r->overall = r->compute = r->init = r->test = r->wait = r->pure = NAN;
    r->min_comm = r->max_comm = r->overlap = r->overlap_imb = r->overlap_raw = NAN;
    r->slowdown = r->max_hidden = r->max_hidden_pct = r->hide_bound = NAN;
}

/* This rank's compute time (seconds) for the overlapped loop; pure = its own mean pure
 * communication time (OSU sizes each rank's compute to that rank's own latency). */
static double compute_target(const job_t *j, double pure)
{
    switch (j->ckind) {
    case CMP_US: return j->cval * 1e-6;
    case CMP_FACTOR: return j->cval * pure;
    default: return pure;
    }
}

/* Two-sided 95% Student quantile t(0.975, df): table to 30, then the Cornish-Fisher
 * expansion around the normal quantile (error < 1e-3). */
static double t975(int df)
{
    static const double T[30] = {
        12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
        2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
        2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042
    };
    const double z = 1.959964, d = df;
    if (df <= 30)
        return T[df - 1];
    return z + (z * z * z + z) / (4 * d)
        + (5 * pow(z, 5) + 16 * z * z * z + 3 * z) / (96 * d * d);
}

/* Upper end of the 95% confidence interval of the mean of v[0..n); the mean if n == 1. */
static double ci_upper(const double *v, int n)
{
    double m = 0.0, ss = 0.0;
    for (int k = 0; k < n; k++)
        m += v[k];
    m /= n;
    if (n < 2)
        return m;
    for (int k = 0; k < n; k++)
        ss += (v[k] - m) * (v[k] - m);
    return m + t975(n - 1) * sqrt(ss / (n - 1)) / sqrt((double)n);
}

/* Rank 0 gets OSU's columns and both overlap figures from this rank's loop totals. */
static void overlap_stats(const job_t *j, double pure, const ovl_t *o, result_t *res)
{
    double it = j->iters, top = 0.0, trip[3];
    double mine[5] = {o->overall / it, (o->comp - o->test) / it, o->test / it, o->wait / it,
                      o->init / it};
    double sum[5] = {0, 0, 0, 0, 0};
    int cand, first = g_nprocs;
    nbres_t *r = &res->nb;
    check_mpi(MPI_Reduce(mine, sum, 5, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD), "MPI_Reduce");
    /* IMB-NBC takes t_pure, t_ovrl, t_CPU of the rank with the largest t_ovrl. */
    check_mpi(MPI_Allreduce(&mine[0], &top, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD),
              "MPI_Allreduce");
    cand = mine[0] == top ? g_rank : g_nprocs;
    check_mpi(MPI_Allreduce(&cand, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD),
              "MPI_Allreduce");
    trip[0] = pure;
    trip[1] = mine[0];
    trip[2] = mine[1];
    check_mpi(MPI_Bcast(trip, 3, MPI_DOUBLE, first, MPI_COMM_WORLD), "MPI_Bcast");
    if (g_rank != 0)
        return;
    r->overall = sum[0] / g_nprocs * 1e6;
    r->compute = sum[1] / g_nprocs * 1e6;
    r->test = sum[2] / g_nprocs * 1e6;
    r->wait = sum[3] / g_nprocs * 1e6;
    r->init = sum[4] / g_nprocs * 1e6;
    r->pure = res->avg;
    r->min_comm = res->min;
    r->max_comm = res->max;
    if (r->pure > 0) {
        r->overlap_raw = 100.0 - (r->overall - r->compute) / r->pure * 100.0;
        r->overlap = r->overlap_raw > 0 ? r->overlap_raw : 0.0; /* OSU: MAX(0, ...) */
    }
    r->slowdown = r->overall - r->compute - r->pure;
    if (r->slowdown < 0)
        r->slowdown = 0.0;
    {
        double tp = trip[0] * 1e6, to = trip[1] * 1e6, tc = trip[2] * 1e6;
        double den = tp > tc ? tp : tc, f;
        if (den > 0) {
            f = (tp + tc - to) / den;
            r->overlap_imb = 100.0 * (f < 0 ? 0.0 : f > 1 ? 1.0 : f);
        }
    }
}

/* Max hideable compute (OpenHPCA's idea): overlapped loops with this rank's compute at
 * k/K of its pure time, k = 1..K, until the mean overall time exceeds the upper end of the
 * pure time's 95% confidence interval. 0, or -1 with res failed. */
static int hide_sweep(point_t *p, double pure, result_t *res, const char **what)
{
    const job_t *j = p->job;
    double bound = 0.0, best = 0.0;
    int go = 1;
    if (g_rank == 0)
        bound = ci_upper(res->samples, j->iters);
    for (int k = 1; k <= j->hide && go; k++) {
        ovl_t o;
        double mine[2], sum[2] = {0, 0};
        int rc = timed_overlap(p, pure * k / j->hide, &o, what);
        if (agree_on_error(rc, *what, res))
            return -1;
        mine[0] = o.overall / j->iters;
        mine[1] = (o.comp - o.test) / j->iters;
        check_mpi(MPI_Reduce(mine, sum, 2, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD),
                  "MPI_Reduce");
        if (g_rank == 0) {
            if (sum[0] / g_nprocs * 1e6 <= bound)
                best = sum[1] / g_nprocs * 1e6;
            else
                go = 0;
        }
        check_mpi(MPI_Bcast(&go, 1, MPI_INT, 0, MPI_COMM_WORLD), "MPI_Bcast");
    }
    if (g_rank == 0) {
        res->nb.max_hidden = best;
        res->nb.max_hidden_pct = res->avg > 0 ? best / res->avg * 100.0 : NAN;
        res->nb.hide_bound = bound;
    }
    return 0;
}

static int completion_call(void *arg)
{
    return run_once((point_t *)arg, 0);
}

/* timing=completion: synchronise the clocks, then the synchronised-start loop with the
 * point's own counts (clocksync.h). */
static int timed_completion(point_t *p, result_t *res)
{
    cs_clock_t clk;
    check_mpi(cs_sync(g_clock_skew, &clk), "clock synchronisation");
    res->sync_error = clk.error;
    return cs_completion(p->job->warmup, p->job->iters, completion_call, p, &clk, &res->cpl);
}

static void cpl_clear(result_t *r)
{
    r->cpl.median = r->cpl.ci_low = r->cpl.ci_high = r->cpl.synced_avg = r->sync_error = NAN;
    r->cpl.late = 0;
}

static void measure(const job_t *job, MPI_Comm comm, int validate, int corrupt,
                    int index, result_t *res)
{
    point_t p;
    double *t, total = 0.0;
    int rc, bad, any_bad = 0;
    job_t run = *job; /* precision mode changes its iteration count */
    const job_t *j = &run;
    const char *what = coll_name(j);
    verdict_t v = {0, 0, 0, 0};

    (void)index; /* --monitor's file names only */
    memset(&p, 0, sizeof p);
    /* (calloc)/(free): past SMPI's shared-malloc macros, which would give every simulated
     * rank the same timing array once it reaches 64 KiB (precision mode, long loops) */
    t = (calloc)((size_t)(j->precision ? j->max_iters : j->iters), sizeof *t);
    bad = !t || point_alloc(&p, j, comm) != 0;
    check_mpi(MPI_Allreduce(&bad, &any_bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD),
              "MPI_Allreduce");
    if (any_bad) {
        set_error(res, ST_FAILED, "out of memory for %lld-byte buffers", j->size);
        goto out;
    }
    if (validate) /* patterns make the timed data realistic as well as checkable */
        fill_send(&p, 0);
    if (j->coll == C_LATENCY)
        rc = timed_latency(&p, t, &total);
    else if (j->coll == C_BW)
        rc = timed_bw(&p, t, &total);
    else if (j->coll == C_MBW_MR)
        rc = timed_mbw(&p, t, &total);
    else if (j->precision)
        rc = timed_precise(&p, t, &run, &res->precision, &what);
#ifndef COLLBENCH_SMPI_COMPAT_H
    else if (g_mon_dir) { /* see mon_init: the loop's own traffic, then its barriers' */
        char name[64];
        rc = mon_flush("skip") ? MPI_ERR_OTHER : MPI_SUCCESS;
        what = "pml_monitoring_flush";
        if (rc == MPI_SUCCESS)
            rc = timed_coll(&p, t, &what);
        snprintf(name, sizeof name, "%d.coll", index);
        if (rc == MPI_SUCCESS && mon_flush(name)) {
            rc = MPI_ERR_OTHER;
            what = "pml_monitoring_flush";
        }
        for (int k = 0; rc == MPI_SUCCESS && k <= j->warmup + j->iters; k++)
            rc = comm_barrier(p.comm);
        snprintf(name, sizeof name, "%d.barrier", index);
        if (rc == MPI_SUCCESS && mon_flush(name)) {
            rc = MPI_ERR_OTHER;
            what = "pml_monitoring_flush";
        }
    }
#endif
    else
        rc = timed_coll(&p, t, &what);
    res->iters = run.iters;
    if (agree_on_error(rc, what, res))
        goto out;
    if (j->coll == C_MBW_MR)
        mbw_stats(j, t, total, res);
    else if (is_p2p(j->coll))
        p2p_stats(j, t, total, res);
    else
        collective_stats(j, t, res);
    if (j->completion && agree_on_error(timed_completion(&p, res), coll_name(j), res))
        goto out;
    if (j->nb) { /* then OSU's overlapped run, sized from this rank's pure time */
        double pure = 0.0;
        ovl_t o;
        for (int k = 0; k < j->iters; k++)
            pure += t[k];
        pure /= j->iters;
        rc = timed_overlap(&p, compute_target(j, pure), &o, &what);
        if (agree_on_error(rc, what, res))
            goto out;
        overlap_stats(j, pure, &o, res);
#ifdef COLLBENCH_SMPI_COMPAT_H
        /* Under SMPI the network progresses on its own: any compute up to the pure time
         * hides it all, so the sweep would only measure that model (and took most of a
         * simulated launch's wall time). Its figures stay null: not modelled. */
        (void)hide_sweep;
#else
        if (j->hide && hide_sweep(&p, pure, res, &what))
            goto out;
#endif
    }
    if (validate) {
        rc = j->coll == C_MBW_MR ? validate_mbw(&p, corrupt, &v)
             : is_p2p(j->coll) ? validate_p2p(&p, corrupt, &v) : validate_coll(&p, corrupt, &v);
        if (agree_on_error(rc, "validation", res))
            goto out;
        exchange_verdict(&v, res);
    }
out:
    if (res->status != ST_OK) {
        res->avg = res->min = res->max = res->median = res->bw = NAN;
        nbres_clear(&res->nb);
        cpl_clear(res);
        res->precision = NAN;
        free(res->samples);
        res->samples = NULL;
    }
    point_free(&p);
    (free)(t);
}

/* ------------------------------------------------------------------- output */

/* The non-blocking keys, after samples_us (blocking points keep their exact key list). */
static void write_nb_fields(strbuf_t *sb, const job_t *j, const nbres_t *r)
{
    static const char *const KEYS[15] = {
        "overall_us", "compute_us", "init_us", "test_us", "wait_us", "pure_us",
        "min_comm_us", "max_comm_us", "overlap_pct", "overlap_imb_pct", "overlap_raw_pct",
        "slowdown_us", "max_hidden_us", "max_hidden_pct", "hide_bound_us"
    };
    const double v[15] = {
        r->overall, r->compute, r->init, r->test, r->wait, r->pure, r->min_comm, r->max_comm,
        r->overlap, r->overlap_imb, r->overlap_raw, r->slowdown, r->max_hidden,
        r->max_hidden_pct, r->hide_bound
    };
    sb_printf(sb, ", \"test_calls\": %d, \"compute\": ", j->tests);
    if (j->ckind == CMP_US)
        sb_printf(sb, "\"%.9gus\"", j->cval);
    else if (j->ckind == CMP_FACTOR)
        sb_printf(sb, "\"%.9gx\"", j->cval);
    else
        sb_printf(sb, "\"auto\"");
    sb_printf(sb, ", \"hide_steps\": %d", j->hide);
    for (int k = 0; k < 15; k++) {
        sb_printf(sb, ", \"%s\": ", KEYS[k]);
        sb_number(sb, v[k]);
    }
}

/* The timing=completion keys, after samples_us (and the ports' keys). */
static void write_completion_fields(strbuf_t *sb, const result_t *r)
{
    sb_printf(sb, ", \"completion_us\": ");
    sb_number(sb, r->cpl.median);
    sb_printf(sb, ", \"completion_ci\": ");
    if (isfinite(r->cpl.ci_low) && isfinite(r->cpl.ci_high)) {
        sb_printf(sb, "[");
        sb_number(sb, r->cpl.ci_low);
        sb_printf(sb, ", ");
        sb_number(sb, r->cpl.ci_high);
        sb_printf(sb, "]");
    } else {
        sb_printf(sb, "null");
    }
    sb_printf(sb, ", \"completion_late\": %d, \"synced_avg_us\": ", r->cpl.late);
    sb_number(sb, r->cpl.synced_avg);
    sb_printf(sb, ", \"sync_error_us\": ");
    sb_number(sb, r->sync_error * 1e6);
}

#define SYNC_EVERY_S 1.0

/* fsync the output when SYNC_EVERY_S has passed since the last one (or always: force). */
static void sync_now_and_then(FILE *out, int force)
{
    static double last = -1.0;
    struct timespec ts;
    double now;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    now = (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
    if (force || last < 0.0 || now - last >= SYNC_EVERY_S) {
        fsync(fileno(out));
        last = now;
    }
}

static void write_result(FILE *out, const job_t *j, const result_t *r, int with_samples)
{
    static const char *const ST[] = {"ok", "invalid", "failed"};
    strbuf_t sb = {NULL, 0, 0};
    sb_printf(&sb, "{\"collective\": \"%s\", \"algorithm_id\": %d, \"segsize\": %lld, "
                   "\"fanout\": %d, \"nprocs\": %d, \"size_bytes\": %lld, "
                   "\"iterations\": %d, \"warmup\": %d, \"avg_us\": ",
              coll_name(j), j->alg, j->segsize, j->fanout, g_nprocs, j->size, r->iters,
              j->warmup);
    sb_number(&sb, r->avg);
    sb_printf(&sb, ", \"min_us\": ");
    sb_number(&sb, r->min);
    sb_printf(&sb, ", \"max_us\": ");
    sb_number(&sb, r->max);
    sb_printf(&sb, ", \"median_us\": ");
    sb_number(&sb, r->median);
    sb_printf(&sb, ", \"bandwidth_mbs\": ");
    sb_number(&sb, r->bw);
    sb_printf(&sb, ", \"validated\": %s, \"status\": \"%s\", \"error\": ",
              r->validated && r->status == ST_OK ? "true" : "false", ST[r->status]);
    if (r->status == ST_OK)
        sb_printf(&sb, "null");
    else
        sb_json_string(&sb, r->error);
    sb_printf(&sb, ", \"samples_us\": ");
    if (with_samples && r->samples) {
        sb_printf(&sb, "[");
        for (int k = 0; k < r->iters; k++) {
            sb_printf(&sb, k ? ", " : "");
            sb_number(&sb, r->samples[k]);
        }
        sb_printf(&sb, "]");
    } else {
        sb_printf(&sb, "null");
    }
    if (r->han_excluded)  /* before the optional trailing groups, which tests find last */
        sb_printf(&sb, ", \"coll_preference\": \"^han\"");
    if (r->component[0]) {
        sb_printf(&sb, ", \"component\": ");
        sb_json_string(&sb, r->component);
        sb_printf(&sb, ", \"sub_components\": ");
        sb_json_string(&sb, r->subs);
        sb_printf(&sb, ", \"sub_algorithms\": ");
        sb_json_string(&sb, r->sub_algs);
    }
#ifdef COLLBENCH_PORTS
    write_port_fields(&sb, j);
#endif
    if (j->completion)
        write_completion_fields(&sb, r);
    if (j->precision) {
        sb_printf(&sb, ", \"precision\": ");
        sb_number(&sb, r->precision);
    }
    if (j->nb)
        write_nb_fields(&sb, j, &r->nb);
    sb_printf(&sb, "}\n");
    /* One write per line, flushed: a killed launch leaves whole lines behind (the kernel
     * keeps what the process wrote). To disk at most once per SYNC_EVERY_S and at the
     * end: a crashed node loses at most that much, and a short point does not pay for an
     * fsync (5-15 ms each on a VM, more than a 20-iteration point takes). */
    if (fwrite(sb.p, 1, sb.len, out) != sb.len || fflush(out) != 0)
        die("writing the output file failed: %s", strerror(errno));
    sync_now_and_then(out, 0);
    free(sb.p);
}

/* ------------------------------------------------------------------- main */

static void debug_hook(const opts_t *o, long long index)
{
    if (o->debug == DBG_NONE || index != o->debug_at)
        return;
    if (o->debug == DBG_HANG && g_rank == 0)
        for (;;)
            pause();
    if (o->debug == DBG_CRASH && g_rank == (g_nprocs > 1 ? 1 : 0))
        abort();
}

/* Rank 0 reports a usage/job-file problem; every rank exits with status 2. */
static int fail_setup(const char *msg)
{
    if (g_rank == 0)
        fprintf(stderr, PROG ": %s\n", msg);
    MPI_Finalize();
    return 2;
}

/* A non-blocking collective this SMPI cannot run (always 0 with a real MPI). */
static int smpi_unsupported(const job_t *j)
{
#ifdef COLLBENCH_SMPI_COMPAT_H
    return j->nb && SMPI_NB_UNSUPPORTED[j->coll];
#else
    (void)j;
    return 0;
#endif
}

static void run_all(const opts_t *o, const job_t *jobs, int nj, FILE *out)
{
    /* Without --mpit the algorithm is forced for the whole launch (MCA or environment at
     * launch): one communicator, without han when a job forces a tuned algorithm. */
    int launch_excl = 0;
    for (int i = 0; i < nj && HAN_EXCLUDABLE && !o->mpit; i++)
        launch_excl |= forces_tuned(&jobs[i]);
    MPI_Comm comm = o->mpit ? MPI_COMM_NULL : new_measure_comm(launch_excl);
    mpit_state_t st;
    pool_reserve(jobs, nj);
    memset(&st, 0, sizeof st);
    st.dirty_coll = -1;
    for (int i = 0; i < nj; i++) {
        const job_t *j = &jobs[i];
        result_t res;
        memset(&res, 0, sizeof res);
        res.avg = res.min = res.max = res.median = res.bw = NAN;
        nbres_clear(&res.nb);
        cpl_clear(&res);
        res.iters = j->iters;
        res.precision = NAN;
        debug_hook(o, i);
#ifdef COLLBENCH_PORTS
        char port_err[ERR_LEN] = "";
        int port_bad = port_resolve(j, comm, port_err, sizeof port_err);
#endif
        if (is_p2p(j->coll) && g_nprocs < 2)
            set_error(&res, ST_FAILED, "needs at least 2 ranks");
        else if (smpi_unsupported(j))
            set_error(&res, ST_FAILED, "%s is not supported by SMPI", coll_name(j));
        else if (!fits_int(j, g_nprocs))
            set_error(&res, ST_FAILED, "size_bytes * nprocs exceeds MPI's int counts");
        else if (o->mpit && mpit_configure(&st, j, &comm, res.error, sizeof res.error))
            res.status = ST_FAILED;
#ifdef COLLBENCH_PORTS
        else if (port_bad)
            set_error(&res, ST_FAILED, "%s", port_err);
#endif
        else {
#ifdef COLLBENCH_PROBE
            cbk_probe_reset();
#endif
            measure(j, comm, o->validate, o->debug == DBG_CORRUPT && i == o->debug_at, i,
                    &res);
#ifdef COLLBENCH_PROBE
            if (!is_p2p(j->coll))
                cbk_probe_served(comm, coll_name(j), res.component, sizeof res.component,
                                 res.subs, sizeof res.subs);
            if (!is_p2p(j->coll))
                cbk_probe_algorithms(comm, coll_name(j), res.sub_algs, sizeof res.sub_algs);
#endif
        }
        res.han_excluded = o->mpit ? st.han_excluded : launch_excl;
        if (g_rank == 0)
            write_result(out, j, &res, o->samples);
        free(res.samples);
    }
    if (comm != MPI_COMM_NULL)
        check_mpi(MPI_Comm_free(&comm), "MPI_Comm_free");
    pool_free();
}

int main(int argc, char **argv)
{
    opts_t o;
    char err[ERR_LEN + 64] = "", msg[2 * ERR_LEN];
    job_t *jobs = NULL;
    char *text;
    int nj, provided, bad_line = 0, out_ok = 1;
    FILE *out = NULL;

    if (MPI_Init(&argc, &argv) != MPI_SUCCESS)
        return 3;
#if defined(__GLIBC__) && !defined(COLLBENCH_SMPI_COMPAT_H)
    /* The kernel's own blocks up to 32 MiB (the buffer pools, timing arrays) from the
     * heap at a fixed threshold, not glibc's default: per-block mmap from 128 KiB, a
     * threshold that then moves with what was freed, so where the pools land depended on
     * the points before. Beside osu_latency 7.4 at 2 ranks (100-360 interleaved rounds,
     * paired ratios) the default read 3 % below OSU at 32 KiB and 4 % above at 64 KiB;
     * this reads within 1 % at both, and OSU itself does not move with it. Why placement
     * matters there (CMA single-copy from 32 KiB) is not known. After MPI_Init, so MPI's
     * own allocations stay as in OSU's programs. */
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
#endif
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_nprocs);
    {
        const char *want = getenv("COLLBENCH_COMPONENT");
        g_keep_han = want && *want && strcmp(want, "tuned") != 0 && strcmp(want, "default") != 0;
    }
    if (parse_args(argc, argv, &o, err, sizeof err)) {
        snprintf(msg, sizeof msg, "%s\n%s", err, USAGE);
        return fail_setup(msg);
    }
    text = read_and_bcast(o.jobs_path, err, sizeof err);
    if (!text) {
        snprintf(msg, sizeof msg, "%s: %s", o.jobs_path, err);
        return fail_setup(msg);
    }
    nj = parse_jobs(text, &jobs, &bad_line, err, sizeof err);
    free(text);
    if (nj < 0) {
        snprintf(msg, sizeof msg, "%s:%d: %s", o.jobs_path, bad_line, err);
        return fail_setup(msg);
    }
#ifdef COLLBENCH_PORTS
    {
        const char *ports_path = getenv(PORTS_ENV);
        if (ports_path && *ports_path) {
            text = read_and_bcast(ports_path, err, sizeof err);
            if (!text) {
                snprintf(msg, sizeof msg, "%s=%s: %s", PORTS_ENV, ports_path, err);
                return fail_setup(msg);
            }
            if (parse_decisions(text, &bad_line, err, sizeof err)) {
                free(text);
                snprintf(msg, sizeof msg, "%s:%d: %s", ports_path, bad_line, err);
                return fail_setup(msg);
            }
            free(text);
            g_ports = 1;
        }
    }
#endif
    if (g_rank == 0) {
        out = fopen(o.out_path, "w");
        out_ok = out != NULL;
        if (!out_ok)
            snprintf(err, sizeof err, "cannot open output file %s: %s", o.out_path,
                     strerror(errno));
    }
    check_mpi(MPI_Bcast(&out_ok, 1, MPI_INT, 0, MPI_COMM_WORLD), "MPI_Bcast");
    if (!out_ok)
        return fail_setup(err);
    g_clock_skew = o.clock_skew;
    if (o.mpit)
        check_mpi(MPI_T_init_thread(MPI_THREAD_SINGLE, &provided), "MPI_T_init_thread");
    if (o.monitor) {
#ifndef COLLBENCH_SMPI_COMPAT_H
        int bad = mon_init(o.monitor) != 0, any = 0;
        check_mpi(MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD),
                  "MPI_Allreduce");
        if (any)
#endif
            return fail_setup("--monitor: Open MPI's pml_monitoring_flush MPI_T variable is "
                              "not available or the folder is not writable (launch Open MPI "
                              "with --mca pml_monitoring_enable 2)");
    }

    /* No closing MPI_Barrier: under --mca forcing of a barrier algorithm that refuses this
     * communicator size it would abort a launch whose points were all written. */
    run_all(&o, jobs, nj, out);
#ifndef COLLBENCH_SMPI_COMPAT_H
    mon_end();
#endif
    if (o.mpit) {
        for (int i = 0; i < g_ncvars; i++)
            if (g_cvars[i].exists)
                MPI_T_cvar_handle_free(&g_cvars[i].handle);
        MPI_T_finalize();
    }
    if (out)
        sync_now_and_then(out, 1);
    if (out && fclose(out) != 0)
        die("closing the output file failed: %s", strerror(errno));
    free(jobs);
#ifdef COLLBENCH_PORTS
    free(g_dec);
    cbp_han_free(g_han);
#endif
    MPI_Finalize();
    return 0;
}
