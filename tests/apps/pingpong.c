/*
 * pingpong (test data): half round-trip time between ranks 0 and 1, for calibrating the
 * Jacobi model (tests/apps/test_apps.py and by hand).
 *
 *   mpirun -np 2 pingpong [size=BYTES] [iterations=N]
 *
 * Measures t(8 B) = latency and t(size) with MPI_Send/MPI_Recv ping-pongs (10 warm-up
 * round trips, then `iterations` timed), and prints one JSON line on rank 0:
 * latency_us = t(8), time_us = t(size), bandwidth_Bps = size / (t(size) - t(8)) (Hockney:
 * t(m) = lambda + m / B). Bad arguments: one line on stderr, exit 2.
 */
#include <mpi.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static double half_rtt(int rank, char *buf, int size, int iterations)
{
    double start = 0.0;
    for (int it = -10; it < iterations; ++it) {
        if (it == 0) start = MPI_Wtime();
        if (rank == 0) {
            MPI_Send(buf, size, MPI_BYTE, 1, 0, MPI_COMM_WORLD);
            MPI_Recv(buf, size, MPI_BYTE, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else if (rank == 1) {
            MPI_Recv(buf, size, MPI_BYTE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(buf, size, MPI_BYTE, 0, 0, MPI_COMM_WORLD);
        }
    }
    return (MPI_Wtime() - start) / (2.0 * iterations);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, nprocs;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    long size = 65536, iterations = 1000;
    for (int a = 1; a < argc; ++a) {
        char *end = NULL;
        long *dst = strncmp(argv[a], "size=", 5) == 0 ? &size
                    : strncmp(argv[a], "iterations=", 11) == 0 ? &iterations : NULL;
        long v = dst ? strtol(strchr(argv[a], '=') + 1, &end, 10) : -1;
        if (dst == NULL || *end != '\0' || v < 8 || v > (1L << 26)) {
            if (rank == 0)
                fprintf(stderr, "pingpong: bad argument (size=8..2^26 iterations=8..2^26)\n");
            MPI_Finalize();
            return 2;
        }
        *dst = v;
    }
    if (nprocs < 2) {
        if (rank == 0) fprintf(stderr, "pingpong: needs 2 processes\n");
        MPI_Finalize();
        return 2;
    }
    char *buf = calloc((size_t)size, 1);
    if (buf == NULL) MPI_Abort(MPI_COMM_WORLD, 1);
    double lat = half_rtt(rank, buf, 8, (int)iterations);
    double t = half_rtt(rank, buf, (int)size, (int)iterations);
    if (rank == 0) {
        double bw = t > lat ? (double)size / (t - lat) : (double)size / t;
        printf("{\"size_bytes\":%ld,\"iterations\":%ld,\"latency_us\":%.6g,\"time_us\":%.6g,"
               "\"bandwidth_Bps\":%.6g}\n", size, iterations, lat * 1e6, t * 1e6, bw);
    }
    free(buf);
    MPI_Finalize();
    return 0;
}
