/*
 * algtrace: an LD_PRELOAD library that records which coll/tuned algorithm Open MPI runs.
 *
 * libmpi calls ompi_coll_tuned_<coll>_intra_do_this through its PLT whenever coll/tuned
 * has decided (forced by MCA or MPI_T, picked by a dynamic rules file, or by the fixed
 * decision rules), so a preloaded function of the same name sees the algorithm id,
 * fan-in/out and segment size it receives, then forwards to the real one. Signatures follow
 * Open MPI v4.1/v5.0 (coll_tuned.h, coll_base_functions.h *_ARGS): the collective's
 * arguments, the communicator, the module, then algorithm, faninout, segsize (+ max
 * requests for alltoall and reduce; alltoallv has the algorithm only).
 *
 * Every call is counted in memory, keyed by (epoch, communicator, collective, bytes,
 * algorithm, faninout, segsize, communicator size); the epoch is the number of MPI_Comm_dup
 * and MPI_Comm_dup_with_info calls so far (the collbench kernel measures on a dup, one per
 * configuration under --mpit). The communicator's size tells the level a decision ran at:
 * the measured dup's size is the launch's, coll/han's sub-communicators are smaller. "bytes" is the
 * message size as Open MPI's dynamic rules count it (coll_tuned_decision_dynamic.c).
 * At MPI_Finalize each rank writes $COLLBENCH_ALGTRACE.<rank>:
 *   "<epoch> <W|D> <coll> <bytes> <alg> <faninout> <segsize> <calls> <size>"
 *                                                                 W: MPI_COMM_WORLD
 *   "DUPS <n>"                                                          D: another comm
 * faninout/segsize are not initialised by Open MPI for collectives without such cvars
 * (barrier, ...): compare them only where they mean something.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef void *P;

#define MAX_RECORDS 8192

struct record {
    int epoch;
    char where;
    const char *coll;
    long long bytes;
    int alg, fan, seg;
    long long calls;
    int size;  /* the communicator's */
};

static struct record records[MAX_RECORDS];
static int nrecords;
static long long dropped;
static int epoch;
static int written;

static long long csize(P comm);

static void count(P comm, const char *coll, long long bytes, int alg, int fan, int seg)
{
    char where = comm == (P)MPI_COMM_WORLD ? 'W' : 'D';
    int size = (int)csize(comm);
    for (int i = nrecords - 1; i >= 0 && records[i].epoch == epoch; i--) {
        struct record *r = &records[i];
        if (r->where == where && r->coll == coll && r->bytes == bytes && r->alg == alg &&
            r->fan == fan && r->seg == seg && r->size == size) {
            r->calls++;
            return;
        }
    }
    if (nrecords == MAX_RECORDS) {
        dropped++;
        return;
    }
    records[nrecords++] = (struct record){epoch, where, coll, bytes, alg, fan, seg, 1, size};
}

static void write_trace(int rank)
{
    const char *path = getenv("COLLBENCH_ALGTRACE");
    char name[4096];
    FILE *f;
    if (!path || written)
        return;
    written = 1;
    snprintf(name, sizeof name, "%s.%d", path, rank);
    f = fopen(name, "w");
    if (!f)
        return;
    for (int i = 0; i < nrecords; i++) {
        struct record *r = &records[i];
        fprintf(f, "%d %c %s %lld %d %d %d %lld %d\n", r->epoch, r->where, r->coll, r->bytes,
                r->alg, r->fan, r->seg, r->calls, r->size);
    }
    fprintf(f, "DUPS %d\n", epoch);
    if (dropped)
        fprintf(f, "DROPPED %lld\n", dropped);
    fclose(f);
}

static void write_at_exit(void)
{
    const char *rank = getenv("OMPI_COMM_WORLD_RANK");
    write_trace(rank ? atoi(rank) : -1);
}

int MPI_Init(int *argc, char ***argv)
{
    atexit(write_at_exit);
    return PMPI_Init(argc, argv);
}

int MPI_Init_thread(int *argc, char ***argv, int required, int *provided)
{
    atexit(write_at_exit);
    return PMPI_Init_thread(argc, argv, required, provided);
}

int MPI_Finalize(void)
{
    int rank = -1;
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    write_trace(rank);
    return PMPI_Finalize();
}

int MPI_Comm_dup(MPI_Comm comm, MPI_Comm *newcomm)
{
    int rc = PMPI_Comm_dup(comm, newcomm);
    epoch++;
    return rc;
}

int MPI_Comm_dup_with_info(MPI_Comm comm, MPI_Info info, MPI_Comm *newcomm)
{
    int rc = PMPI_Comm_dup_with_info(comm, info, newcomm);
    epoch++;
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

static long long tsize(P dt)
{
    int s = 0;
    PMPI_Type_size((MPI_Datatype)dt, &s);
    return s;
}

static long long csize(P comm)
{
    int n = 0;
    PMPI_Comm_size((MPI_Comm)comm, &n);
    return n;
}

static long long sum(P counts, P comm)
{
    long long total = 0, n = csize(comm);
    for (long long i = 0; i < n; i++)
        total += ((const int *)counts)[i];
    return total;
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
    count(c, "bcast", n * tsize(dt), a, f, s);
    return real(b, n, dt, root, c, m, a, f, s);
}

typedef int (*allgather_fn)(P, int, P, P, int, P, P, P, int, int, int);
int ompi_coll_tuned_allgather_intra_do_this(P sb, int sn, P sd, P rb, int rn, P rd, P c, P m,
                                            int a, int f, int s)
{
    FORWARD(allgather_fn, "ompi_coll_tuned_allgather_intra_do_this");
    count(c, "allgather", sn * tsize(sd) * csize(c), a, f, s);
    return real(sb, sn, sd, rb, rn, rd, c, m, a, f, s);
}

typedef int (*allgatherv_fn)(P, int, P, P, P, P, P, P, P, int, int, int);
int ompi_coll_tuned_allgatherv_intra_do_this(P sb, int sn, P sd, P rb, P rn, P dis, P rd, P c,
                                             P m, int a, int f, int s)
{
    FORWARD(allgatherv_fn, "ompi_coll_tuned_allgatherv_intra_do_this");
    count(c, "allgatherv", sum(rn, c) * tsize(rd), a, f, s);
    return real(sb, sn, sd, rb, rn, dis, rd, c, m, a, f, s);
}

typedef int (*allreduce_fn)(P, P, int, P, P, P, P, int, int, int);
int ompi_coll_tuned_allreduce_intra_do_this(P sb, P rb, int n, P dt, P op, P c, P m, int a,
                                            int f, int s)
{
    FORWARD(allreduce_fn, "ompi_coll_tuned_allreduce_intra_do_this");
    count(c, "allreduce", n * tsize(dt), a, f, s);
    return real(sb, rb, n, dt, op, c, m, a, f, s);
}

typedef int (*alltoall_fn)(P, int, P, P, int, P, P, P, int, int, int, int);
int ompi_coll_tuned_alltoall_intra_do_this(P sb, int sn, P sd, P rb, int rn, P rd, P c, P m,
                                           int a, int f, int s, int req)
{
    FORWARD(alltoall_fn, "ompi_coll_tuned_alltoall_intra_do_this");
    count(c, "alltoall", sn * tsize(sd) * csize(c), a, f, s);
    return real(sb, sn, sd, rb, rn, rd, c, m, a, f, s, req);
}

typedef int (*alltoallv_fn)(P, P, P, P, P, P, P, P, P, P, int);
int ompi_coll_tuned_alltoallv_intra_do_this(P sb, P sn, P sdis, P sd, P rb, P rn, P rdis, P rd,
                                            P c, P m, int a)
{
    FORWARD(alltoallv_fn, "ompi_coll_tuned_alltoallv_intra_do_this");
    count(c, "alltoallv", 0, a, 0, 0);
    return real(sb, sn, sdis, sd, rb, rn, rdis, rd, c, m, a);
}

typedef int (*barrier_fn)(P, P, int, int, int);
int ompi_coll_tuned_barrier_intra_do_this(P c, P m, int a, int f, int s)
{
    FORWARD(barrier_fn, "ompi_coll_tuned_barrier_intra_do_this");
    count(c, "barrier", 0, a, f, s);
    return real(c, m, a, f, s);
}

typedef int (*rooted_fn)(P, int, P, P, int, P, int, P, P, int, int, int);
static long long rooted_bytes(int sn, P sd, int rn, P rd, int root, P c)
{
    int rank = 0;
    PMPI_Comm_rank((MPI_Comm)c, &rank);
    /* The root's send side (scatter) or every rank's send side (gather) is significant. */
    return (rank == root ? sn * tsize(sd) : rn * tsize(rd)) * csize(c);
}

int ompi_coll_tuned_gather_intra_do_this(P sb, int sn, P sd, P rb, int rn, P rd, int root, P c,
                                         P m, int a, int f, int s)
{
    FORWARD(rooted_fn, "ompi_coll_tuned_gather_intra_do_this");
    count(c, "gather", sn * tsize(sd) * csize(c), a, f, s);
    return real(sb, sn, sd, rb, rn, rd, root, c, m, a, f, s);
}

int ompi_coll_tuned_scatter_intra_do_this(P sb, int sn, P sd, P rb, int rn, P rd, int root,
                                          P c, P m, int a, int f, int s)
{
    FORWARD(rooted_fn, "ompi_coll_tuned_scatter_intra_do_this");
    count(c, "scatter", rooted_bytes(sn, sd, rn, rd, root, c), a, f, s);
    return real(sb, sn, sd, rb, rn, rd, root, c, m, a, f, s);
}

typedef int (*reduce_fn)(P, P, int, P, P, int, P, P, int, int, int, int);
int ompi_coll_tuned_reduce_intra_do_this(P sb, P rb, int n, P dt, P op, int root, P c, P m,
                                         int a, int f, int s, int req)
{
    FORWARD(reduce_fn, "ompi_coll_tuned_reduce_intra_do_this");
    count(c, "reduce", n * tsize(dt), a, f, s);
    return real(sb, rb, n, dt, op, root, c, m, a, f, s, req);
}

typedef int (*reduce_scatter_fn)(P, P, P, P, P, P, P, int, int, int);
int ompi_coll_tuned_reduce_scatter_intra_do_this(P sb, P rb, P rn, P dt, P op, P c, P m, int a,
                                                 int f, int s)
{
    FORWARD(reduce_scatter_fn, "ompi_coll_tuned_reduce_scatter_intra_do_this");
    count(c, "reduce_scatter", sum(rn, c) * tsize(dt), a, f, s);
    return real(sb, rb, rn, dt, op, c, m, a, f, s);
}

typedef int (*reduce_scatter_block_fn)(P, P, int, P, P, P, P, int, int, int);
int ompi_coll_tuned_reduce_scatter_block_intra_do_this(P sb, P rb, int n, P dt, P op, P c, P m,
                                                       int a, int f, int s)
{
    FORWARD(reduce_scatter_block_fn, "ompi_coll_tuned_reduce_scatter_block_intra_do_this");
    count(c, "reduce_scatter_block", n * tsize(dt) * csize(c), a, f, s);
    return real(sb, rb, n, dt, op, c, m, a, f, s);
}
