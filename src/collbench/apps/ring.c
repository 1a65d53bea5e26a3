/*
 * ring: pass messages both ways around a ring of MPI processes.
 *
 *   mpirun -np P ring [size=BYTES] [iterations=N] [warmup=W]
 *
 * One iteration = P steps. At every step each rank sends the message it holds for the
 * rightward trip to rank+1 and the one for the leftward trip to rank-1 (MPI_Irecv x2,
 * MPI_Isend x2, MPI_Waitall; tags tell the directions apart, which matters at P=1 and
 * P=2 where both neighbours are the same rank), then forwards what it received. After P
 * steps every message has visited every rank and is back at its origin.
 *
 * Each message is `size` bytes (>= 8): an int64 header holding the origin rank, then a
 * byte pattern depending on the origin. Validation:
 *   - every timed and warm-up iteration: the origins a rank receives over the P steps
 *     add up to P(P-1)/2 in each direction, and the last message is its own;
 *   - one extra untimed iteration: every received message comes from the expected origin
 *     ((rank - s - 1) mod P rightwards, (rank + s + 1) mod P leftwards at step s) and every
 *     payload byte matches that origin's pattern.
 *
 * Timing (OSU semantics): `warmup` untimed iterations, then `iterations` timed ones, each
 * timed on its own with MPI_Wtime between two MPI_Barrier calls (barriers not timed).
 * avg_us/min_us/max_us: over ranks, of each rank's mean time per iteration (P steps);
 * step_us = avg_us / P.
 *
 * Output: rank 0 prints exactly one JSON line on stdout; errors are one line on stderr.
 * Exit status: 0 success (also when validation fails: "valid": false), 2 bad arguments,
 * 1 out of memory or MPI failure.
 *
 * Limits: size <= 64 MiB (4 buffers of `size` bytes per process: at most 256 MiB),
 * iterations <= 10^6, warmup <= 10^6.
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

#define PROG "ring"
#define USAGE "usage: ring [size=BYTES(8..67108864)] [iterations=N(1..1000000)] " \
              "[warmup=N(0..1000000)]"
#define HEADER_BYTES 8
#define MAX_SIZE (64LL * 1024 * 1024)

#include "app_args.h" /* key=value arguments, die() */

/* ---- the ring ---- */

static unsigned char pattern(long long origin, size_t i)
{
    return (unsigned char)((origin * 131 + (long long)(i % 251) * 7 + 1) & 0xff);
}

static void fill(unsigned char *buf, size_t size, long long origin, int payload)
{
    int64_t h = origin;
    memcpy(buf, &h, HEADER_BYTES);
    if (payload)
        for (size_t i = HEADER_BYTES; i < size; ++i) buf[i] = pattern(origin, i);
}

static long long origin_of(const unsigned char *buf)
{
    int64_t h;
    memcpy(&h, buf, HEADER_BYTES);
    return (long long)h;
}

typedef struct {
    MPI_Comm comm;
    int rank, nprocs, left, right;
    size_t size;
    unsigned char *send_r, *send_l, *recv_r, *recv_l;
} ring_t;

/* One iteration of P steps; returns 1 when valid. check_all: check every byte. */
static int ring_iteration(ring_t *r, int check_all)
{
    const long long P = r->nprocs;
    long long sum_r = 0, sum_l = 0;
    int ok = 1;
    fill(r->send_r, r->size, r->rank, check_all);
    fill(r->send_l, r->size, r->rank, check_all);
    for (long long s = 0; s < P; ++s) {
        MPI_Request req[4];
        int cnt = (int)r->size;
        MPI_Irecv(r->recv_r, cnt, MPI_BYTE, r->left, 0, r->comm, &req[0]);
        MPI_Irecv(r->recv_l, cnt, MPI_BYTE, r->right, 1, r->comm, &req[1]);
        MPI_Isend(r->send_r, cnt, MPI_BYTE, r->right, 0, r->comm, &req[2]);
        MPI_Isend(r->send_l, cnt, MPI_BYTE, r->left, 1, r->comm, &req[3]);
        MPI_Waitall(4, req, MPI_STATUSES_IGNORE);
        long long o_r = origin_of(r->recv_r), o_l = origin_of(r->recv_l);
        sum_r += o_r;
        sum_l += o_l;
        if (check_all) {
            long long want_r = ((r->rank - s - 1) % P + P) % P;
            long long want_l = (r->rank + s + 1) % P;
            if (o_r != want_r || o_l != want_l) ok = 0;
            for (size_t i = HEADER_BYTES; ok && i < r->size; ++i)
                if (r->recv_r[i] != pattern(want_r, i) || r->recv_l[i] != pattern(want_l, i))
                    ok = 0;
        }
        unsigned char *t = r->send_r; r->send_r = r->recv_r; r->recv_r = t;
        t = r->send_l; r->send_l = r->recv_l; r->recv_l = t;
    }
    /* after P steps the message in hand is our own, in both directions */
    if (origin_of(r->send_r) != r->rank || origin_of(r->send_l) != r->rank) ok = 0;
    if (sum_r != P * (P - 1) / 2 || sum_l != P * (P - 1) / 2) ok = 0;
    return ok;
}

static void print_num(const char *key, double v)
{
    if (isfinite(v)) printf(",\"%s\":%.6g", key, v);
    else printf(",\"%s\":null", key);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    ring_t r;
    r.comm = MPI_COMM_WORLD;
    MPI_Comm_rank(r.comm, &r.rank);
    MPI_Comm_size(r.comm, &r.nprocs);
    g_rank = r.rank;

    arg_spec specs[] = {
        {"size", 1, HEADER_BYTES, MAX_SIZE, {HEADER_BYTES, 0, 0}, 0},
        {"iterations", 1, 1, 1000000, {100, 0, 0}, 0},
        {"warmup", 1, 0, 1000000, {10, 0, 0}, 0},
    };
    char err[400];
    if (parse_args(argc, argv, specs, 3, err, sizeof err) != 0) die(2, "%s; %s", err, USAGE);
    r.size = (size_t)specs[0].val[0];
    const long long iterations = specs[1].val[0], warmup = specs[2].val[0];
    r.left = (r.rank - 1 + r.nprocs) % r.nprocs;
    r.right = (r.rank + 1) % r.nprocs;

    r.send_r = malloc(r.size);
    r.send_l = malloc(r.size);
    r.recv_r = malloc(r.size);
    r.recv_l = malloc(r.size);
    int have = r.send_r && r.send_l && r.recv_r && r.recv_l, all_have = 0;
    MPI_Allreduce(&have, &all_have, 1, MPI_INT, MPI_LAND, r.comm);
    if (!all_have) die(1, "out of memory for 4 buffers of %zu bytes", r.size);
    memset(r.recv_r, 0, r.size);
    memset(r.recv_l, 0, r.size);

    int ok = 1;
    for (long long it = 0; it < warmup; ++it) ok &= ring_iteration(&r, 0);
    double total = 0.0;
    for (long long it = 0; it < iterations; ++it) {
        MPI_Barrier(r.comm);
        double t0 = MPI_Wtime();
        ok &= ring_iteration(&r, 0);
        total += MPI_Wtime() - t0;
    }
    MPI_Barrier(r.comm);
    ok &= ring_iteration(&r, 1);

    double mean = total / (double)iterations, sum = 0, mn = 0, mx = 0;
    int all_ok = 0;
    MPI_Reduce(&mean, &sum, 1, MPI_DOUBLE, MPI_SUM, 0, r.comm);
    MPI_Reduce(&mean, &mn, 1, MPI_DOUBLE, MPI_MIN, 0, r.comm);
    MPI_Reduce(&mean, &mx, 1, MPI_DOUBLE, MPI_MAX, 0, r.comm);
    MPI_Reduce(&ok, &all_ok, 1, MPI_INT, MPI_LAND, 0, r.comm);
    if (r.rank == 0) {
        double avg_us = sum / r.nprocs * 1e6;
        printf("{\"app\":\"ring\",\"nprocs\":%d,\"size_bytes\":%zu,\"iterations\":%lld,"
               "\"warmup\":%lld", r.nprocs, r.size, iterations, warmup);
        print_num("avg_us", avg_us);
        print_num("min_us", mn * 1e6);
        print_num("max_us", mx * 1e6);
        print_num("step_us", avg_us / r.nprocs);
        printf(",\"valid\":%s}\n", all_ok ? "true" : "false");
        fflush(stdout);
    }
    free(r.send_r);
    free(r.send_l);
    free(r.recv_r);
    free(r.recv_l);
    MPI_Finalize();
    return 0;
}
