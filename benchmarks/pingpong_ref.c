/* Minimal blocking ping-pong between ranks 0 and 1, as osu_latency times it: a reference
 * measured on the same machine in the same run as the kernel, so a gap between collbench
 * and recorded OSU figures can be told apart from a gap between machines.
 * Usage: mpirun -np 2 pingpong_ref SIZE... ; prints "size one_way_us" per size. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    size_t max = 1;
    for (int a = 1; a < argc; a++) {
        size_t n = strtoull(argv[a], NULL, 10);
        if (n > max) max = n;
    }
    char *sbuf = NULL, *rbuf = NULL;
    if (posix_memalign((void **)&sbuf, 4096, max) || posix_memalign((void **)&rbuf, 4096, max))
        MPI_Abort(MPI_COMM_WORLD, 1);
    memset(sbuf, 'a', max);
    memset(rbuf, 'b', max);
    for (int a = 1; a < argc; a++) {
        int n = (int)strtoull(argv[a], NULL, 10);
        int iters = n > 8192 ? 1000 : 10000, skip = n > 8192 ? 10 : 100; /* OSU defaults */
        double start = 0;
        MPI_Barrier(MPI_COMM_WORLD);
        for (int i = 0; i < iters + skip; i++) {
            if (i == skip) start = MPI_Wtime();
            if (rank == 0) {
                MPI_Send(sbuf, n, MPI_CHAR, 1, 1, MPI_COMM_WORLD);
                MPI_Recv(rbuf, n, MPI_CHAR, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            } else if (rank == 1) {
                MPI_Recv(rbuf, n, MPI_CHAR, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                MPI_Send(sbuf, n, MPI_CHAR, 0, 1, MPI_COMM_WORLD);
            }
        }
        if (rank == 0) printf("%d %.3f\n", n, (MPI_Wtime() - start) * 1e6 / (2.0 * iters));
    }
    free(sbuf);
    free(rbuf);
    MPI_Finalize();
    return 0;
}
