/*
 * collbench_plogp: PLogP parameters between ranks 0 and 1, by the method of
 *   T. Kielmann, H. E. Bal, K. Verstoep, "Fast Measurement of LogP Parameters for Message
 *   Passing Platforms", IPDPS 2000 Workshops, LNCS 1800, pp. 1176-1183.
 * Written for collbench from the paper's description; no code of the authors' MPI LogP
 * benchmark (logp_mpi) is used.
 *
 *   mpirun -np 2 collbench_plogp [min=0] [max=1048576] [reps=20] [warmup=5]
 *                                [nmin=4] [nmax=1024] [tol=0.05]
 *
 * Definitions (the parameterised LogP model, PLogP; all times in microseconds):
 *   L        end-to-end latency: L = RTT(0)/2 - g(0) (computed by the caller from the
 *            output: RTT(0) and g(0) at the smallest size measured).
 *   o_s(m)   send overhead: the time MPI_Send of m bytes keeps the sender busy, with the
 *            receiver already waiting in MPI_Recv and the network quiet.
 *   o_r(m)   receive overhead: the time MPI_Recv of m bytes takes when the message has
 *            already arrived: the receiver busy-waits delta > RTT(m) after the sender's
 *            start before it calls MPI_Recv.
 *   g(m)     gap: the time per message of a long series of m-byte MPI_Send calls
 *            (saturation): g(m) >= o_s(m) and >= o_r(m) in the model; 1/g(m) is the
 *            throughput in messages per second.
 *   RTT(m)   round trip of an m-byte message and an m-byte reply (MPI_Send/MPI_Recv),
 *            = 2 (L + g(m)) in the model.
 *
 * Procedure per message size m (OSU's MIN:MAX range: min, then 2 min, 4 min, ... up to max;
 * min=0 gives 0, 1, 2, 4, ...):
 *   1. RTT(m): `warmup` untimed then `reps` timed ping-pongs; the median and minimum.
 *   2. g(m): rank 0 sends a burst of n m-byte messages with MPI_Send, rank 1 receives them
 *      and answers with one 0-byte message; T(n) is rank 0's time from the first send to
 *      the answer. The estimate (T(n) - RTT(0)) / n removes the one round trip that every
 *      burst pays at its end (the paper takes T(n)/n, which converges to the same value,
 *      more slowly). n doubles from nmin until two successive estimates differ by at most
 *      `tol` (relative), or n reaches its limit (then "g_converged": false): nmax, and at
 *      most BURST_BYTES (8 MiB) per burst but never below 2 nmin (one large message alone
 *      fills the channel; long bursts of them only collect the scheduler's noise). Each
 *      estimate is the fastest of 3 bursts (noise only adds time).
 *   3. o_s(m): `reps` single MPI_Send calls timed at rank 0 (rank 1 waiting in MPI_Recv,
 *      then answering with 0 bytes); the median and minimum.
 *   4. o_r(m): `reps` times, rank 0 sends m bytes; rank 1 busy-waits delta = 2 RTT(m)
 *      (at least 5 us) and times its MPI_Recv; answer of 0 bytes; median and minimum.
 * Every sample starts with a 0-byte control round trip (rank 0 tells rank 1 what comes
 * next and the network is quiet), which is not timed. The paper uses averages over
 * repeated measurements; medians are used here because the machines collbench runs on may
 * be shared (a descheduled rank gives a few huge samples).
 * Not done: the paper's adaptive choice of extra message sizes where g(m) is not linear
 * between two measured sizes (the size grid here is fixed), and its stopping rule on
 * confidence intervals.
 *
 * Output: one JSON object per size on rank 0's stdout:
 *   {"size":m,"rtt_us":..,"rtt_min_us":..,"g_us":..,"g_n":n,"g_converged":true,
 *    "os_us":..,"os_min_us":..,"or_us":..,"or_min_us":..,"delta_us":..,"reps":r}
 * Arguments are key=value, each bounded (below); a bad one is one line on rank 0's stderr
 * and exit status 2 on every rank (before any communication). Ranks above 1 wait.
 */

#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PROG "collbench_plogp"
#define TAG_CTRL 1
#define TAG_DATA 2
#define TAG_ACK 3
#define GREPS 3
#define BURST_BYTES (8LL << 20)
#define MAX_SAMPLES 10000

enum phase { PH_DONE = 0, PH_RTT = 1, PH_BURST = 2, PH_OS = 3, PH_OR = 4 };

struct options {
    long long min, max, reps, warmup, nmin, nmax;
    double tol;
};

struct bound {
    const char *key;
    long long lo, hi;
    long long *dest;
};

static int parse_ll(const char *s, long long lo, long long hi, long long *out)
{
    char *end = NULL;
    long long v;
    if (*s == '\0' || strlen(s) > 20)
        return -1;
    errno = 0;
    v = strtoll(s, &end, 10);
    if (errno != 0 || *end != '\0' || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

/* 0 on success; else writes one line describing the problem into msg. */
static int parse_args(int argc, char **argv, struct options *o, char *msg, size_t len)
{
    struct bound b[] = {
        {"min", 0, 1LL << 26, &o->min},    {"max", 0, 1LL << 26, &o->max},
        {"reps", 1, MAX_SAMPLES, &o->reps}, {"warmup", 0, 1000, &o->warmup},
        {"nmin", 2, 1LL << 16, &o->nmin},  {"nmax", 2, 1LL << 16, &o->nmax},
    };
    const size_t nb = sizeof b / sizeof b[0];
    int seen[8] = {0};
    o->min = 0;
    o->max = 1 << 20;
    o->reps = 20;
    o->warmup = 5;
    o->nmin = 4;
    o->nmax = 1024;
    o->tol = 0.05;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        const char *eq = strchr(arg, '=');
        size_t klen;
        int matched = 0;
        if (eq == NULL || strlen(arg) > 64) {
            snprintf(msg, len, "argument %d is not key=value; valid: min=, max=, reps=, "
                     "warmup=, nmin=, nmax=, tol=", i);
            return -1;
        }
        klen = (size_t)(eq - arg);
        for (size_t k = 0; k < nb; k++) {
            if (strlen(b[k].key) == klen && strncmp(arg, b[k].key, klen) == 0) {
                matched = 1;
                if (seen[k]++ || parse_ll(eq + 1, b[k].lo, b[k].hi, b[k].dest) != 0) {
                    snprintf(msg, len, "%s: bad or repeated value; valid: a whole number "
                             "%lld to %lld, given once", b[k].key, b[k].lo, b[k].hi);
                    return -1;
                }
            }
        }
        if (!matched && klen == 3 && strncmp(arg, "tol", 3) == 0) {
            char *end = NULL;
            double v;
            matched = 1;
            errno = 0;
            v = strtod(eq + 1, &end);
            if (seen[7]++ || errno != 0 || end == eq + 1 || *end != '\0' || !isfinite(v)
                || v < 0.001 || v > 1.0) {
                snprintf(msg, len, "tol: bad or repeated value; valid: a number 0.001 to 1, "
                         "given once");
                return -1;
            }
            o->tol = v;
        }
        if (!matched) {
            snprintf(msg, len, "argument %d: unknown key; valid: min, max, reps, warmup, "
                     "nmin, nmax, tol", i);
            return -1;
        }
    }
    if (o->min > o->max) {
        snprintf(msg, len, "min=%lld is above max=%lld; valid: min <= max", o->min, o->max);
        return -1;
    }
    if (o->nmin > o->nmax) {
        snprintf(msg, len, "nmin=%lld is above nmax=%lld; valid: nmin <= nmax", o->nmin,
                 o->nmax);
        return -1;
    }
    return 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, long long n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static double minimum(const double *v, long long n)
{
    double m = v[0];
    for (long long i = 1; i < n; i++)
        m = v[i] < m ? v[i] : m;
    return m;
}

/* The control message: what rank 1 does next. */
struct ctrl {
    double phase, size, count, delta;
};

static void ctrl_send(const struct ctrl *c)
{
    double buf[4] = {c->phase, c->size, c->count, c->delta};
    MPI_Send(buf, 4, MPI_DOUBLE, 1, TAG_CTRL, MPI_COMM_WORLD);
    MPI_Recv(NULL, 0, MPI_BYTE, 1, TAG_ACK, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
}

/* Rank 0: one timed sample of `phase` at size m; returns seconds. */
static double sample(enum phase ph, int m, long long n, double delta, char *sbuf, char *rbuf)
{
    struct ctrl c = {(double)ph, (double)m, (double)n, delta};
    double t0, t1;
    ctrl_send(&c);
    switch (ph) {
    case PH_RTT:
        t0 = MPI_Wtime();
        MPI_Send(sbuf, m, MPI_BYTE, 1, TAG_DATA, MPI_COMM_WORLD);
        MPI_Recv(rbuf, m, MPI_BYTE, 1, TAG_DATA, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        t1 = MPI_Wtime();
        return t1 - t0;
    case PH_BURST:
        t0 = MPI_Wtime();
        for (long long i = 0; i < n; i++)
            MPI_Send(sbuf, m, MPI_BYTE, 1, TAG_DATA, MPI_COMM_WORLD);
        MPI_Recv(NULL, 0, MPI_BYTE, 1, TAG_ACK, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        t1 = MPI_Wtime();
        return t1 - t0;
    case PH_OS:
        t0 = MPI_Wtime();
        MPI_Send(sbuf, m, MPI_BYTE, 1, TAG_DATA, MPI_COMM_WORLD);
        t1 = MPI_Wtime();
        MPI_Recv(NULL, 0, MPI_BYTE, 1, TAG_ACK, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        return t1 - t0;
    case PH_OR: {
        double took;
        MPI_Send(sbuf, m, MPI_BYTE, 1, TAG_DATA, MPI_COMM_WORLD);
        MPI_Recv(&took, 1, MPI_DOUBLE, 1, TAG_ACK, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        return took;
    }
    case PH_DONE:
        break;
    }
    return 0.0;
}

/* Rank 1: follow rank 0's control messages until PH_DONE. */
static void serve(char *rbuf, char *sbuf)
{
    for (;;) {
        double buf[4];
        int m;
        long long n;
        MPI_Recv(buf, 4, MPI_DOUBLE, 0, TAG_CTRL, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Send(NULL, 0, MPI_BYTE, 0, TAG_ACK, MPI_COMM_WORLD);
        m = (int)buf[1];
        n = (long long)buf[2];
        switch ((enum phase)(int)buf[0]) {
        case PH_DONE:
            return;
        case PH_RTT:
            MPI_Recv(rbuf, m, MPI_BYTE, 0, TAG_DATA, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(sbuf, m, MPI_BYTE, 0, TAG_DATA, MPI_COMM_WORLD);
            break;
        case PH_BURST:
            for (long long i = 0; i < n; i++)
                MPI_Recv(rbuf, m, MPI_BYTE, 0, TAG_DATA, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(NULL, 0, MPI_BYTE, 0, TAG_ACK, MPI_COMM_WORLD);
            break;
        case PH_OS:
            MPI_Recv(rbuf, m, MPI_BYTE, 0, TAG_DATA, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(NULL, 0, MPI_BYTE, 0, TAG_ACK, MPI_COMM_WORLD);
            break;
        case PH_OR: {
            /* the control round trip just ended: the data message left rank 0 at most
             * about now; wait until it has surely arrived, then time the receive */
            double start = MPI_Wtime(), t0, took;
            while (MPI_Wtime() - start < buf[3])
                ;
            t0 = MPI_Wtime();
            MPI_Recv(rbuf, m, MPI_BYTE, 0, TAG_DATA, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            took = MPI_Wtime() - t0;
            MPI_Send(&took, 1, MPI_DOUBLE, 0, TAG_ACK, MPI_COMM_WORLD);
            break;
        }
        }
    }
}

static void series(enum phase ph, int m, long long reps, long long warmup, double delta,
                   char *sbuf, char *rbuf, double *v, double *med, double *lo)
{
    for (long long i = 0; i < warmup; i++)
        (void)sample(ph, m, 1, delta, sbuf, rbuf);
    for (long long i = 0; i < reps; i++)
        v[i] = sample(ph, m, 1, delta, sbuf, rbuf) * 1e6;
    *lo = minimum(v, reps);
    *med = median(v, reps);
}

/* g(m) in us: bursts of doubling length until the estimate settles. */
static double gap(int m, const struct options *o, double rtt0_us, char *sbuf, char *rbuf,
                  long long *n_used, int *converged)
{
    double prev = -1.0, est = 0.0, v[GREPS];
    long long n, limit = o->nmax;
    *converged = 0;
    if (m > 0 && limit * m > BURST_BYTES)
        limit = BURST_BYTES / m > 2 * o->nmin ? BURST_BYTES / m : 2 * o->nmin;
    if (limit > o->nmax)
        limit = o->nmax;
    (void)sample(PH_BURST, m, o->nmin, 0.0, sbuf, rbuf); /* warm-up */
    for (n = o->nmin; n <= limit; n *= 2) {
        for (int k = 0; k < GREPS; k++)
            v[k] = (sample(PH_BURST, m, n, 0.0, sbuf, rbuf) * 1e6 - rtt0_us) / (double)n;
        est = minimum(v, GREPS);
        *n_used = n;
        if (prev > 0.0 && fabs(est - prev) <= o->tol * fabs(est)) {
            *converged = 1;
            break;
        }
        prev = est;
    }
    return est;
}

/* The next size after s (OSU's MIN:MAX range: 0, then max(1,min) doubling up to max). */
static int next_size(long long s, long long min, long long max, long long *out)
{
    long long next = s == 0 ? (min > 1 ? min : 1) : 2 * s;
    if (next > max)
        return 0;
    *out = next;
    return 1;
}

int main(int argc, char **argv)
{
    struct options o;
    char msg[256];
    int rank, size, bad;
    char *sbuf, *rbuf;
    double *v;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    bad = parse_args(argc, argv, &o, msg, sizeof msg);
    if (!bad && size < 2) {
        snprintf(msg, sizeof msg, "%d rank(s); valid: at least 2 (ranks 0 and 1 measure)",
                 size);
        bad = 1;
    }
    if (bad) {
        if (rank == 0)
            fprintf(stderr, PROG ": %s\n", msg);
        MPI_Finalize();
        return 2;
    }
    sbuf = malloc((size_t)o.max + 1);
    rbuf = malloc((size_t)o.max + 1);
    v = malloc(sizeof(double) * (size_t)o.reps);
    if (sbuf == NULL || rbuf == NULL || v == NULL) {
        fprintf(stderr, PROG ": rank %d: cannot allocate %lld bytes\n", rank, 2 * o.max);
        MPI_Abort(MPI_COMM_WORLD, 1);
        return 1;
    }
    memset(sbuf, 'a', (size_t)o.max + 1);
    memset(rbuf, 0, (size_t)o.max + 1);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 1) {
        serve(rbuf, sbuf);
    } else if (rank == 0) {
        double rtt0 = 0.0, lo;
        long long s = o.min;
        int first = 1;
        for (;;) {
            double rtt, rtt_min, g, os, os_min, orr, or_min, delta;
            long long n_used = 0;
            int converged, m = (int)s;
            series(PH_RTT, m, o.reps, o.warmup, 0.0, sbuf, rbuf, v, &rtt, &rtt_min);
            if (first) {
                /* the burst's closing round trip is one of 0 bytes: measure it once */
                if (s == 0)
                    rtt0 = rtt;
                else
                    series(PH_RTT, 0, o.reps, o.warmup, 0.0, sbuf, rbuf, v, &rtt0, &lo);
                first = 0;
            }
            g = gap(m, &o, rtt0, sbuf, rbuf, &n_used, &converged);
            series(PH_OS, m, o.reps, o.warmup, 0.0, sbuf, rbuf, v, &os, &os_min);
            delta = 2.0 * rtt > 5.0 ? 2.0 * rtt : 5.0;
            series(PH_OR, m, o.reps, o.warmup, delta * 1e-6, sbuf, rbuf, v, &orr, &or_min);
            printf("{\"size\":%d,\"rtt_us\":%.9g,\"rtt_min_us\":%.9g,\"g_us\":%.9g,"
                   "\"g_n\":%lld,\"g_converged\":%s,\"os_us\":%.9g,\"os_min_us\":%.9g,"
                   "\"or_us\":%.9g,\"or_min_us\":%.9g,\"delta_us\":%.9g,\"reps\":%lld}\n",
                   m, rtt, rtt_min, g, n_used, converged ? "true" : "false", os, os_min,
                   orr, or_min, delta, o.reps);
            fflush(stdout);
            if (!next_size(s, o.min, o.max, &s))
                break;
        }
        {
            struct ctrl done = {(double)PH_DONE, 0.0, 0.0, 0.0};
            ctrl_send(&done);
        }
    }
    free(v);
    free(rbuf);
    free(sbuf);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    return 0;
}
