/*
 * LD_PRELOAD shim for tests: logs which coll/tuned algorithm Open MPI runs.
 *
 * libmpi calls ompi_coll_tuned_<coll>_intra_do_this through its PLT whenever an algorithm
 * is forced (or picked by a rules file), so a preloaded function of the same name sees
 * the algorithm id, fan-in/out and segment size, then forwards to the real one.
 * Signatures follow Open MPI v5.0.x (coll_tuned.h, coll_base_functions.h *_ARGS):
 * the collective's arguments, the communicator, the module, then algorithm, faninout,
 * segsize (+ max_requests for alltoall and reduce; alltoallv has the algorithm only).
 * Pointers are opaque here; only the argument count and int/pointer classes matter.
 *
 * Each rank appends lines to $COLLBENCH_ALGTRACE.<rank>:
 *   "<W|D> coll algorithm faninout segsize"  W: on MPI_COMM_WORLD, D: on another comm
 *   "DUP"                                     each MPI_Comm_dup (the kernel's measured comm)
 * Open MPI's fixed decisions call do_this too, so default choices are logged as well.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

typedef void *P;

static void log_line(const char *line)
{
    const char *path = getenv("COLLBENCH_ALGTRACE");
    const char *rank = getenv("OMPI_COMM_WORLD_RANK");
    char name[4096];
    FILE *f;
    if (!path)
        return;
    snprintf(name, sizeof name, "%s.%s", path, rank ? rank : "unknown");
    f = fopen(name, "a");
    if (!f)
        return;
    fprintf(f, "%s\n", line);
    fclose(f);
}

static void trace_comm(P comm, const char *coll, int alg, int faninout, int segsize)
{
    char line[128];
    snprintf(line, sizeof line, "%c %s %d %d %d", comm == (P)MPI_COMM_WORLD ? 'W' : 'D', coll,
             alg, faninout, segsize);
    log_line(line);
}

#define trace(coll, a, f, s) trace_comm(c, coll, a, f, s)

int MPI_Comm_dup(MPI_Comm comm, MPI_Comm *newcomm)
{
    int rc = PMPI_Comm_dup(comm, newcomm);
    log_line("DUP");
    return rc;
}

static void *next_symbol(const char *name)
{
    void *f = dlsym(RTLD_NEXT, name);
    if (!f) {
        fprintf(stderr, "algtrace: %s not found\n", name);
        abort();
    }
    return f;
}

#define FORWARD(type, name) \
    static type real; \
    if (!real) \
        real = (type)next_symbol(name)

typedef int (*bcast_fn)(P, int, P, int, P, P, int, int, int);
int ompi_coll_tuned_bcast_intra_do_this(P b, int n, P dt, int root, P c, P m, int a, int f,
                                        int s)
{
    FORWARD(bcast_fn, "ompi_coll_tuned_bcast_intra_do_this");
    trace("bcast", a, f, s);
    return real(b, n, dt, root, c, m, a, f, s);
}

typedef int (*allgather_fn)(P, int, P, P, int, P, P, P, int, int, int);
int ompi_coll_tuned_allgather_intra_do_this(P sb, int sn, P sd, P rb, int rn, P rd, P c, P m,
                                            int a, int f, int s)
{
    FORWARD(allgather_fn, "ompi_coll_tuned_allgather_intra_do_this");
    trace("allgather", a, f, s);
    return real(sb, sn, sd, rb, rn, rd, c, m, a, f, s);
}

typedef int (*allgatherv_fn)(P, int, P, P, P, P, P, P, P, int, int, int);
int ompi_coll_tuned_allgatherv_intra_do_this(P sb, int sn, P sd, P rb, P rn, P dis, P rd, P c,
                                             P m, int a, int f, int s)
{
    FORWARD(allgatherv_fn, "ompi_coll_tuned_allgatherv_intra_do_this");
    trace("allgatherv", a, f, s);
    return real(sb, sn, sd, rb, rn, dis, rd, c, m, a, f, s);
}

typedef int (*allreduce_fn)(P, P, int, P, P, P, P, int, int, int);
int ompi_coll_tuned_allreduce_intra_do_this(P sb, P rb, int n, P dt, P op, P c, P m, int a,
                                            int f, int s)
{
    FORWARD(allreduce_fn, "ompi_coll_tuned_allreduce_intra_do_this");
    trace("allreduce", a, f, s);
    return real(sb, rb, n, dt, op, c, m, a, f, s);
}

typedef int (*alltoall_fn)(P, int, P, P, int, P, P, P, int, int, int, int);
int ompi_coll_tuned_alltoall_intra_do_this(P sb, int sn, P sd, P rb, int rn, P rd, P c, P m,
                                           int a, int f, int s, int req)
{
    FORWARD(alltoall_fn, "ompi_coll_tuned_alltoall_intra_do_this");
    trace("alltoall", a, f, s);
    return real(sb, sn, sd, rb, rn, rd, c, m, a, f, s, req);
}

typedef int (*alltoallv_fn)(P, P, P, P, P, P, P, P, P, P, int);
int ompi_coll_tuned_alltoallv_intra_do_this(P sb, P sn, P sdis, P sd, P rb, P rn, P rdis, P rd,
                                            P c, P m, int a)
{
    FORWARD(alltoallv_fn, "ompi_coll_tuned_alltoallv_intra_do_this");
    trace("alltoallv", a, 0, 0);
    return real(sb, sn, sdis, sd, rb, rn, rdis, rd, c, m, a);
}

typedef int (*barrier_fn)(P, P, int, int, int);
int ompi_coll_tuned_barrier_intra_do_this(P c, P m, int a, int f, int s)
{
    FORWARD(barrier_fn, "ompi_coll_tuned_barrier_intra_do_this");
    trace("barrier", a, f, s);
    return real(c, m, a, f, s);
}

typedef int (*rooted_fn)(P, int, P, P, int, P, int, P, P, int, int, int);
int ompi_coll_tuned_gather_intra_do_this(P sb, int sn, P sd, P rb, int rn, P rd, int root, P c,
                                         P m, int a, int f, int s)
{
    FORWARD(rooted_fn, "ompi_coll_tuned_gather_intra_do_this");
    trace("gather", a, f, s);
    return real(sb, sn, sd, rb, rn, rd, root, c, m, a, f, s);
}

int ompi_coll_tuned_scatter_intra_do_this(P sb, int sn, P sd, P rb, int rn, P rd, int root,
                                          P c, P m, int a, int f, int s)
{
    FORWARD(rooted_fn, "ompi_coll_tuned_scatter_intra_do_this");
    trace("scatter", a, f, s);
    return real(sb, sn, sd, rb, rn, rd, root, c, m, a, f, s);
}

typedef int (*reduce_fn)(P, P, int, P, P, int, P, P, int, int, int, int);
int ompi_coll_tuned_reduce_intra_do_this(P sb, P rb, int n, P dt, P op, int root, P c, P m,
                                         int a, int f, int s, int req)
{
    FORWARD(reduce_fn, "ompi_coll_tuned_reduce_intra_do_this");
    trace("reduce", a, f, s);
    return real(sb, rb, n, dt, op, root, c, m, a, f, s, req);
}

typedef int (*reduce_scatter_fn)(P, P, P, P, P, P, P, int, int, int);
int ompi_coll_tuned_reduce_scatter_intra_do_this(P sb, P rb, P rn, P dt, P op, P c, P m, int a,
                                                 int f, int s)
{
    FORWARD(reduce_scatter_fn, "ompi_coll_tuned_reduce_scatter_intra_do_this");
    trace("reduce_scatter", a, f, s);
    return real(sb, rb, rn, dt, op, c, m, a, f, s);
}

typedef int (*reduce_scatter_block_fn)(P, P, int, P, P, P, P, int, int, int);
int ompi_coll_tuned_reduce_scatter_block_intra_do_this(P sb, P rb, int n, P dt, P op, P c, P m,
                                                       int a, int f, int s)
{
    FORWARD(reduce_scatter_block_fn, "ompi_coll_tuned_reduce_scatter_block_intra_do_this");
    trace("reduce_scatter_block", a, f, s);
    return real(sb, rb, n, dt, op, c, m, a, f, s);
}
