/* Point-to-point wrappers, message counting and size helpers of the collbench ports. */
#include "cbp_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ counting */
#ifdef CBP_COUNT_MESSAGES
static int g_world_size = -1;
static unsigned long long *g_count, *g_bytes, *g_hist;

static int count_init(void)
{
    if (g_world_size > 0)
        return 0;
    int n;
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    g_count = calloc((size_t)n, sizeof(*g_count));
    g_bytes = calloc((size_t)n, sizeof(*g_bytes));
    g_hist = calloc((size_t)n * CBP_HISTOGRAM_BINS, sizeof(*g_hist));
    if (g_count == NULL || g_bytes == NULL || g_hist == NULL)
        return -1;
    g_world_size = n;
    return 0;
}

static void count_record(int dest, int count, MPI_Datatype dt, MPI_Comm comm)
{
    if (count_init() != 0)
        return;
    MPI_Group group, world;
    int wdest = dest;
    MPI_Comm_group(comm, &group);
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    MPI_Group_translate_ranks(group, 1, &dest, world, &wdest);
    MPI_Group_free(&group);
    MPI_Group_free(&world);
    if (wdest < 0 || wdest >= g_world_size)
        return;
    unsigned long long bytes = (unsigned long long)count * (unsigned long long)cbp_type_size(dt);
    int bin = 0;
    if (bytes > 0) {
        unsigned long long b = bytes;
        while (b > 1) {
            b >>= 1;
            bin++;
        }
        bin += 1;
        if (bin > CBP_HISTOGRAM_BINS - 1)
            bin = CBP_HISTOGRAM_BINS - 1;
    }
    g_count[wdest] += 1;
    g_bytes[wdest] += bytes;
    g_hist[(size_t)wdest * CBP_HISTOGRAM_BINS + (size_t)bin] += 1;
}
#define COUNT(dest, count, dt, comm) count_record((dest), (count), (dt), (comm))

int cbp_count_enabled(void)
{
    return 1;
}

void cbp_count_reset(void)
{
    if (count_init() != 0)
        return;
    memset(g_count, 0, (size_t)g_world_size * sizeof(*g_count));
    memset(g_bytes, 0, (size_t)g_world_size * sizeof(*g_bytes));
    memset(g_hist, 0, (size_t)g_world_size * CBP_HISTOGRAM_BINS * sizeof(*g_hist));
}

int cbp_count_dump(const char *prefix)
{
    if (count_init() != 0)
        return -1;
    int me;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    char path[4096];
    snprintf(path, sizeof path, "%s.%d.prof", prefix, me);
    FILE *f = fopen(path, "w");
    if (f == NULL)
        return -1;
    fprintf(f, "# POINT TO POINT\n");
    for (int d = 0; d < g_world_size; d++) {
        if (g_count[d] == 0)
            continue;
        fprintf(f, "E\t%d\t%d\t%llu bytes\t%llu msgs sent\t", me, d, g_bytes[d], g_count[d]);
        for (int k = 0; k < CBP_HISTOGRAM_BINS; k++)
            fprintf(f, "%llu%s", g_hist[(size_t)d * CBP_HISTOGRAM_BINS + (size_t)k],
                    k + 1 < CBP_HISTOGRAM_BINS ? "," : "\n");
    }
    return fclose(f) == 0 ? 0 : -1;
}
#else
#define COUNT(dest, count, dt, comm) ((void)0)

int cbp_count_enabled(void)
{
    return 0;
}

void cbp_count_reset(void)
{
}

int cbp_count_dump(const char *prefix)
{
    (void)prefix;
    return -1;
}
#endif

/* ------------------------------------------------------------------ point-to-point */
int cbp_send(const void *buf, int count, MPI_Datatype dt, int dest, int tag, MPI_Comm comm)
{
    COUNT(dest, count, dt, comm);
    return MPI_Send(buf, count, dt, dest, tag, comm);
}

int cbp_ssend(const void *buf, int count, MPI_Datatype dt, int dest, int tag, MPI_Comm comm)
{
    COUNT(dest, count, dt, comm);
    return MPI_Ssend(buf, count, dt, dest, tag, comm);
}

int cbp_isend(const void *buf, int count, MPI_Datatype dt, int dest, int tag, MPI_Comm comm,
              MPI_Request *req)
{
    COUNT(dest, count, dt, comm);
    return MPI_Isend(buf, count, dt, dest, tag, comm, req);
}

int cbp_issend(const void *buf, int count, MPI_Datatype dt, int dest, int tag, MPI_Comm comm,
               MPI_Request *req)
{
    COUNT(dest, count, dt, comm);
    return MPI_Issend(buf, count, dt, dest, tag, comm, req);
}

int cbp_recv(void *buf, int count, MPI_Datatype dt, int src, int tag, MPI_Comm comm,
             MPI_Status *status)
{
    return MPI_Recv(buf, count, dt, src, tag, comm, status);
}

int cbp_irecv(void *buf, int count, MPI_Datatype dt, int src, int tag, MPI_Comm comm,
              MPI_Request *req)
{
    return MPI_Irecv(buf, count, dt, src, tag, comm, req);
}

int cbp_sendrecv(const void *sbuf, int scount, MPI_Datatype sdt, int dest,
                 void *rbuf, int rcount, MPI_Datatype rdt, int src, int tag,
                 MPI_Comm comm, int *rcount_out)
{
    int me, rc;
    MPI_Comm_rank(comm, &me);
    if (dest == me && src == me) {
        int n = scount < rcount ? scount : rcount;
        cbp_copy(rbuf, sbuf, sdt, n);
        if (rcount_out != NULL)
            *rcount_out = n;
        return MPI_SUCCESS;
    }
    MPI_Request req;
    MPI_Status st;
    rc = cbp_irecv(rbuf, rcount, rdt, src, tag, comm, &req);
    if (rc != MPI_SUCCESS)
        return rc;
    rc = cbp_send(sbuf, scount, sdt, dest, tag, comm);
    if (rc != MPI_SUCCESS)
        return rc;
    rc = MPI_Wait(&req, &st);
    if (rc == MPI_SUCCESS && rcount_out != NULL)
        rc = MPI_Get_count(&st, rdt, rcount_out);
    return rc;
}

/* ------------------------------------------------------------------ sizes */
int cbp_type_size(MPI_Datatype dt)
{
    int s = 0;
    MPI_Type_size(dt, &s);
    return s;
}

size_t cbp_span(MPI_Datatype dt, int count)
{
    MPI_Aint lb = 0, extent = 0;
    MPI_Type_get_extent(dt, &lb, &extent);
    return count > 0 ? (size_t)count * (size_t)extent : 0;
}

void cbp_copy(void *dst, const void *src, MPI_Datatype dt, int count)
{
    size_t n = cbp_span(dt, count);
    if (n > 0 && dst != src)
        memmove(dst, src, n);
}

int cbp_segcount(int segsize, int type_size, int count)
{
    if (type_size <= 0 || segsize < type_size)
        return count;
    if ((long long)segsize >= (long long)type_size * (long long)count)
        return count;
    int n = segsize / type_size;
    int rest = segsize - n * type_size;
    if (rest > type_size / 2)
        n++;
    return n;
}

void cbp_blockcount(int count, int nblocks, int *split, int *early, int *late)
{
    *late = count / nblocks;
    *split = count % nblocks;
    *early = *late + (*split != 0 ? 1 : 0);
}

int cbp_next_pow2_above(int v)
{
    int p = 1;
    while (p <= v)
        p <<= 1;
    return p;
}

int cbp_next_pow2_incl(int v)
{
    int p = 1;
    while (p < v)
        p <<= 1;
    return p;
}

int cbp_floor_log2(int v)
{
    int k = -1;
    while (v > 0) {
        v >>= 1;
        k++;
    }
    return k;
}

void *cbp_alloc(MPI_Datatype dt, int count)
{
    return malloc(cbp_span(dt, count > 0 ? count : 1));
}

int cbp_mirror(int x, int nbits)
{
    int r = 0;
    for (int i = 0; i < nbits; i++)
        if (x & (1 << i))
            r |= 1 << (nbits - 1 - i);
    return r;
}

int cbp_mod(int x, int m)
{
    int r = x % m;
    return r < 0 ? r + m : r;
}

int cbp_commutative(MPI_Op op)
{
    int c = 1;
    MPI_Op_commutative(op, &c);
    return c;
}

int cbp_is_ported(const char *coll, int alg)
{
    static const struct {
        const char *name;
        int first, last;
    } ported[] = {
        {"bcast", 0, 9},          {"gather", 0, 3},          {"scatter", 0, 3},
        {"reduce", 0, 7},         {"allreduce", 1, 6},       {"barrier", 1, 6},
        {"allgather", 1, 7},      {"allgatherv", 1, 6},      {"alltoall", 1, 5},
        {"alltoallv", 1, 2},      {"reduce_scatter", 1, 4},  {"reduce_scatter_block", 1, 4},
    };
    if (coll == NULL)
        return 0;
    for (size_t i = 0; i < sizeof ported / sizeof ported[0]; i++)
        if (strcmp(coll, ported[i].name) == 0)
            return alg >= ported[i].first && alg <= ported[i].last;
    return 0;
}
