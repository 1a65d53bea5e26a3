/* A user's MPI program for examples/program.toml: times MPI_Allreduce of `count` doubles
 * and prints one JSON line from rank 0 (any program works; see docs/workloads.md). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, nprocs;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    int count = argc > 1 ? atoi(argv[1]) : 1024, reps = argc > 2 ? atoi(argv[2]) : 100;
    if (count < 1 || reps < 1) {
        if (rank == 0) fprintf(stderr, "usage: allreduce_timer COUNT REPS\n");
        MPI_Finalize();
        return 2;
    }
    double *in = malloc(sizeof(double) * (size_t)count), *out = malloc(sizeof(double) * (size_t)count);
    for (int i = 0; i < count; ++i) in[i] = rank + i;
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int r = 0; r < reps; ++r)
        MPI_Allreduce(in, out, count, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    double mine = (MPI_Wtime() - t0) / reps, slowest = 0;
    MPI_Reduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    /* out[i] = sum over ranks of (rank + i) */
    int ok = out[count - 1] == (double)nprocs * (count - 1) + nprocs * (nprocs - 1) / 2.0;
    if (rank == 0)
        printf("{\"count\":%d,\"size_bytes\":%d,\"iterations\":%d,\"time_us\":%.4f,"
               "\"valid\":%s}\n", count, count * 8, reps, slowest * 1e6, ok ? "true" : "false");
    free(in);
    free(out);
    MPI_Finalize();
    return 0;
}
