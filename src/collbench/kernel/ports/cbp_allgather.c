/*
 * Allgather and allgatherv: ports of Open MPI 5.0.x coll/base (coll_base_allgather.c,
 * coll_base_allgatherv.c) as coll/tuned runs them when forced. None of them uses the segment
 * size or the fanout.
 *
 * Where Open MPI describes several blocks with one indexed datatype and sends them as one
 * message, the ports pack them into one contiguous message of the same size, and unpack it
 * on arrival.
 */
#include "cbp_internal.h"

#include <stdlib.h>
#include <string.h>

#define TAG CBP_TAG_ALLGATHER
#define VTAG CBP_TAG_ALLGATHERV

/* ------------------------------------------------------------------ allgather */

/* Mirrors ompi_coll_base_allgather_intra_basic_linear: the communicator's own gather to 0,
 * then its own bcast of the P blocks from 0 (both chosen by coll/tuned's fixed rules). */
static int allgather_linear(const void *sbuf, int scount, MPI_Datatype sdt, void *rbuf,
                            int rcount, MPI_Datatype rdt, MPI_Comm comm)
{
    int size;
    MPI_Comm_size(comm, &size);
    int rc = cbp_gather_fixed(sbuf, scount, sdt, rbuf, rcount, rdt, 0, comm);
    if (rc)
        return rc;
    return cbp_bcast_fixed(rbuf, rcount * size, rdt, 0, comm);
}

/* Mirrors ompi_coll_base_allgather_intra_bruck: own block first; at distance d = 1, 2,
 * 4, ... send the first min(d, P - d) blocks to rank - d and append as many from rank + d;
 * finally rotate so that block i is rank i's. */
static int allgather_bruck(const void *sbuf, int scount, MPI_Datatype sdt, void *rbuf,
                           int rcount, MPI_Datatype rdt, MPI_Comm comm)
{
    int rank, size, rc;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    char *r = rbuf;
    size_t blk = cbp_span(rdt, rcount);
    cbp_copy(r, sbuf, sdt, scount);
    for (int d = 1; d < size; d <<= 1) {
        int n = d <= size / 2 ? d : size - d;
        if ((rc = cbp_sendrecv(r, n * rcount, rdt, cbp_mod(rank - d, size), r + (size_t)d * blk,
                               n * rcount, rdt, (rank + d) % size, TAG, comm, NULL)))
            return rc;
    }
    if (rank == 0)
        return MPI_SUCCESS;
    /* r holds the blocks of ranks rank, rank + 1, ...: put block j at (rank + j) % size */
    char *tmp = cbp_alloc(rdt, rcount * size);
    if (tmp == NULL)
        return MPI_ERR_NO_MEM;
    memcpy(tmp, r, (size_t)size * blk);
    for (int j = 0; j < size; j++)
        memcpy(r + (size_t)((rank + j) % size) * blk, tmp + (size_t)j * blk, blk);
    free(tmp);
    return MPI_SUCCESS;
}

static int allgather_ring(const void *sbuf, int scount, MPI_Datatype sdt, void *rbuf,
                          int rcount, MPI_Datatype rdt, MPI_Comm comm);

/* Mirrors ompi_coll_base_allgather_intra_recursivedoubling: exchange with rank ^ d the d
 * blocks gathered so far, d = 1, 2, 4, ...; bruck on a P that is not a power of two. */
static int allgather_recursive_doubling(const void *sbuf, int scount, MPI_Datatype sdt,
                                        void *rbuf, int rcount, MPI_Datatype rdt,
                                        MPI_Comm comm)
{
    int rank, size, rc;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    if (size & (size - 1))
        return allgather_bruck(sbuf, scount, sdt, rbuf, rcount, rdt, comm);
    char *r = rbuf;
    size_t blk = cbp_span(rdt, rcount);
    cbp_copy(r + (size_t)rank * blk, sbuf, sdt, scount);
    int have = rank; /* first block of the run this rank holds */
    for (int d = 1; d < size; d <<= 1) {
        int peer = rank ^ d;
        int to = peer > rank ? have + d : have - d;
        if ((rc = cbp_sendrecv(r + (size_t)have * blk, d * rcount, rdt, peer,
                               r + (size_t)to * blk, d * rcount, rdt, peer, TAG, comm, NULL)))
            return rc;
        if (peer < rank)
            have -= d;
    }
    return MPI_SUCCESS;
}

/* Mirrors ompi_coll_base_allgather_intra_ring: P - 1 steps; at step i send the block of
 * rank - i to rank + 1 and receive the block of rank - i - 1 from rank - 1. */
static int allgather_ring(const void *sbuf, int scount, MPI_Datatype sdt, void *rbuf,
                          int rcount, MPI_Datatype rdt, MPI_Comm comm)
{
    int rank, size, rc;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    char *r = rbuf;
    size_t blk = cbp_span(rdt, rcount);
    cbp_copy(r + (size_t)rank * blk, sbuf, sdt, scount);
    int right = (rank + 1) % size, left = cbp_mod(rank - 1, size);
    for (int i = 0; i < size - 1; i++) {
        int sblk = cbp_mod(rank - i, size), rblk = cbp_mod(rank - i - 1, size);
        if ((rc = cbp_sendrecv(r + (size_t)sblk * blk, rcount, rdt, right,
                               r + (size_t)rblk * blk, rcount, rdt, left, TAG, comm, NULL)))
            return rc;
    }
    return MPI_SUCCESS;
}

/* The neighbor-exchange schedule shared by allgather and allgatherv
 * (ompi_coll_base_allgather[v]_intra_neighborexchange), even P only: step 0 swaps the own
 * block with neighbor[0]; step i >= 1 swaps a pair of blocks (first index even) with
 * neighbor[i % 2], sending the pair received the step before. */
typedef struct {
    int neighbor[2];
    int recv_from[2];
    int offset[2];
    int send_from;
} nx_t;

static void nx_init(nx_t *s, int rank, int size)
{
    if (rank % 2 == 0) {
        s->neighbor[0] = (rank + 1) % size;
        s->neighbor[1] = cbp_mod(rank - 1, size);
        s->recv_from[0] = s->recv_from[1] = rank;
        s->offset[0] = 2;
        s->offset[1] = -2;
        s->send_from = rank;
    } else {
        s->neighbor[0] = cbp_mod(rank - 1, size);
        s->neighbor[1] = (rank + 1) % size;
        s->recv_from[0] = s->recv_from[1] = s->neighbor[0];
        s->offset[0] = -2;
        s->offset[1] = 2;
        s->send_from = s->neighbor[0];
    }
}

/* Step i >= 1: the first block of the pair to send and of the pair to receive. */
static void nx_step(nx_t *s, int i, int size, int *peer, int *send_first, int *recv_first)
{
    int par = i % 2;
    s->recv_from[par] = cbp_mod(s->recv_from[par] + s->offset[par], size);
    *peer = s->neighbor[par];
    *send_first = s->send_from;
    *recv_first = s->recv_from[par];
    s->send_from = s->recv_from[par];
}

/* Mirrors ompi_coll_base_allgather_intra_neighborexchange (ring on an odd P). */
static int allgather_neighbor(const void *sbuf, int scount, MPI_Datatype sdt, void *rbuf,
                              int rcount, MPI_Datatype rdt, MPI_Comm comm)
{
    int rank, size, rc;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    if (size % 2)
        return allgather_ring(sbuf, scount, sdt, rbuf, rcount, rdt, comm);
    char *r = rbuf;
    size_t blk = cbp_span(rdt, rcount);
    cbp_copy(r + (size_t)rank * blk, sbuf, sdt, scount);
    nx_t s;
    nx_init(&s, rank, size);
    if ((rc = cbp_sendrecv(r + (size_t)rank * blk, rcount, rdt, s.neighbor[0],
                           r + (size_t)s.neighbor[0] * blk, rcount, rdt, s.neighbor[0], TAG,
                           comm, NULL)))
        return rc;
    for (int i = 1; i < size / 2; i++) {
        int peer, sf, rf;
        nx_step(&s, i, size, &peer, &sf, &rf);
        /* pairs start at an even block, so both blocks are adjacent in rbuf */
        if ((rc = cbp_sendrecv(r + (size_t)sf * blk, 2 * rcount, rdt, peer, r + (size_t)rf * blk,
                               2 * rcount, rdt, peer, TAG, comm, NULL)))
            return rc;
    }
    return MPI_SUCCESS;
}

/* Mirrors ompi_coll_base_allgather_intra_two_procs: one exchange; refused unless P = 2. */
static int allgather_two_procs(const void *sbuf, int scount, MPI_Datatype sdt, void *rbuf,
                               int rcount, MPI_Datatype rdt, MPI_Comm comm)
{
    int rank, size, rc;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    if (size != 2)
        return MPI_ERR_UNSUPPORTED_OPERATION;
    int peer = rank ^ 1;
    size_t blk = cbp_span(rdt, rcount);
    if ((rc = cbp_sendrecv(sbuf, scount, sdt, peer, (char *)rbuf + (size_t)peer * blk, rcount,
                           rdt, peer, TAG, comm, NULL)))
        return rc;
    cbp_copy((char *)rbuf + (size_t)rank * blk, sbuf, sdt, scount);
    return MPI_SUCCESS;
}

/* The sparbit schedule (ompi_coll_base_allgather[v]_intra_sparbit): ceil(log2 P) steps at
 * distances 2^(k-1), ..., 2, 1; at each step every rank sends to rank + d and receives
 * from rank - d one message per block, the blocks 2t d and (2t + 1) d behind it. Distances
 * whose bit is "ignored" for this P drop the last transfer, so that P - 1 blocks arrive in
 * all. Every message carries one block. The callback moves one step's blocks. */
typedef int (*sparbit_step_fn)(void *ctx, int sendto, int recvfrom, const int *sblocks,
                               const int *rblocks, int n);

static int sparbit(int rank, int size, void *ctx, sparbit_step_fn step)
{
    if (size < 2)
        return MPI_SUCCESS;
    int log = 0;
    while ((1 << log) < size)
        log++;
    unsigned int dist = 1u << (log - 1);
    int tz = 0;
    while (!((unsigned int)size & (1u << tz)))
        tz++;
    unsigned int ignore = (~((unsigned int)size >> tz) | 1u) << tz;
    int expected = 1, rc = MPI_SUCCESS;
    int *sb = malloc(sizeof(int) * (size_t)size), *rb = malloc(sizeof(int) * (size_t)size);
    if (sb == NULL || rb == NULL) {
        rc = MPI_ERR_NO_MEM;
        goto out;
    }
    for (int i = 0; i < log; i++) {
        int d = (int)dist;
        int excl = (dist & ignore) == dist;
        int n = expected - excl;
        for (int t = 0; t < n; t++) {
            sb[t] = cbp_mod(rank - 2 * t * d, size);
            rb[t] = cbp_mod(rank - (2 * t + 1) * d, size);
        }
        if ((rc = step(ctx, (rank + d) % size, cbp_mod(rank - d, size), sb, rb, n)))
            goto out;
        dist >>= 1;
        expected = 2 * expected - excl;
    }
out:
    free(sb);
    free(rb);
    return rc;
}

typedef struct {
    char *buf;
    MPI_Datatype dt;
    const int *counts; /* NULL: every block has `count` elements at block * count */
    const int *displs;
    int count;
    int tag;
    MPI_Comm comm;
    MPI_Request *req;
} sparbit_ctx_t;

/* One step: per block an isend and an irecv, interleaved as Open MPI posts them (blocks of
 * allgatherv with a zero count are neither sent nor received), then wait for all. */
static int sparbit_exchange(void *vctx, int sendto, int recvfrom, const int *sblocks,
                            const int *rblocks, int n)
{
    sparbit_ctx_t *c = vctx;
    int nreq = 0, rc;
    for (int t = 0; t < n; t++) {
        int sn = c->counts ? c->counts[sblocks[t]] : c->count;
        int rn = c->counts ? c->counts[rblocks[t]] : c->count;
        long soff = c->counts ? c->displs[sblocks[t]] : (long)sblocks[t] * c->count;
        long roff = c->counts ? c->displs[rblocks[t]] : (long)rblocks[t] * c->count;
        if ((c->counts == NULL || sn > 0) &&
            (rc = cbp_isend(c->buf + cbp_span(c->dt, (int)soff), sn, c->dt, sendto, c->tag,
                            c->comm, &c->req[nreq++])))
            return rc;
        if ((c->counts == NULL || rn > 0) &&
            (rc = cbp_irecv(c->buf + cbp_span(c->dt, (int)roff), rn, c->dt, recvfrom, c->tag,
                            c->comm, &c->req[nreq++])))
            return rc;
    }
    return MPI_Waitall(nreq, c->req, MPI_STATUSES_IGNORE);
}

/* Mirrors ompi_coll_base_allgather_intra_sparbit. */
static int allgather_sparbit(const void *sbuf, int scount, MPI_Datatype sdt, void *rbuf,
                             int rcount, MPI_Datatype rdt, MPI_Comm comm)
{
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    cbp_copy((char *)rbuf + cbp_span(rdt, rank * rcount), sbuf, sdt, scount);
    MPI_Request *req = malloc(sizeof(MPI_Request) * 2 * (size_t)size);
    if (req == NULL)
        return MPI_ERR_NO_MEM;
    sparbit_ctx_t c = {rbuf, rdt, NULL, NULL, rcount, TAG, comm, req};
    int rc = sparbit(rank, size, &c, sparbit_exchange);
    free(req);
    return rc;
}

int cbp_allgather(const void *sbuf, int scount, MPI_Datatype sdt, void *rbuf, int rcount,
                  MPI_Datatype rdt, MPI_Comm comm, int alg, int segsize, int fanout)
{
    (void)segsize;
    (void)fanout;
    switch (alg) {
    case CBP_ALLGATHER_LINEAR: /* ompi_coll_base_allgather_intra_basic_linear */
        return allgather_linear(sbuf, scount, sdt, rbuf, rcount, rdt, comm);
    case CBP_ALLGATHER_BRUCK: /* ompi_coll_base_allgather_intra_bruck */
        return allgather_bruck(sbuf, scount, sdt, rbuf, rcount, rdt, comm);
    case CBP_ALLGATHER_RECURSIVE_DOUBLING: /* ompi_coll_base_allgather_intra_recursivedoubling */
        return allgather_recursive_doubling(sbuf, scount, sdt, rbuf, rcount, rdt, comm);
    case CBP_ALLGATHER_RING: /* ompi_coll_base_allgather_intra_ring */
        return allgather_ring(sbuf, scount, sdt, rbuf, rcount, rdt, comm);
    case CBP_ALLGATHER_NEIGHBOR: /* ompi_coll_base_allgather_intra_neighborexchange */
        return allgather_neighbor(sbuf, scount, sdt, rbuf, rcount, rdt, comm);
    case CBP_ALLGATHER_TWO_PROC: /* ompi_coll_base_allgather_intra_two_procs */
        return allgather_two_procs(sbuf, scount, sdt, rbuf, rcount, rdt, comm);
    case CBP_ALLGATHER_SPARBIT: /* ompi_coll_base_allgather_intra_sparbit */
        return allgather_sparbit(sbuf, scount, sdt, rbuf, rcount, rdt, comm);
    default:
        return MPI_ERR_ARG;
    }
}

/* ------------------------------------------------------------------ allgatherv */

/* Packs blocks blocks[0..n) (counts, displs in elements) into out; returns the elements. */
static int pack_blocks(char *out, const char *buf, MPI_Datatype dt, const int *counts,
                       const int *displs, const int *blocks, int n)
{
    int total = 0;
    for (int i = 0; i < n; i++) {
        int b = blocks[i];
        cbp_copy(out + cbp_span(dt, total), buf + cbp_span(dt, displs[b]), dt, counts[b]);
        total += counts[b];
    }
    return total;
}

static void unpack_blocks(char *buf, const char *in, MPI_Datatype dt, const int *counts,
                          const int *displs, const int *blocks, int n)
{
    int total = 0;
    for (int i = 0; i < n; i++) {
        int b = blocks[i];
        cbp_copy(buf + cbp_span(dt, displs[b]), in + cbp_span(dt, total), dt, counts[b]);
        total += counts[b];
    }
}

/* Sends the blocks sblocks to dest and receives the blocks rblocks from src, each set as
 * one message (an indexed datatype in Open MPI), through packing buffers. */
static int sendrecv_blocks(char *buf, MPI_Datatype dt, const int *counts, const int *displs,
                           const int *sblocks, int ns, int dest, const int *rblocks, int nr,
                           int src, MPI_Comm comm)
{
    long sn = 0, rn = 0;
    for (int i = 0; i < ns; i++)
        sn += counts[sblocks[i]];
    for (int i = 0; i < nr; i++)
        rn += counts[rblocks[i]];
    char *sp = cbp_alloc(dt, (int)sn), *rp = cbp_alloc(dt, (int)rn);
    int rc = MPI_ERR_NO_MEM;
    if (sp != NULL && rp != NULL) {
        pack_blocks(sp, buf, dt, counts, displs, sblocks, ns);
        rc = cbp_sendrecv(sp, (int)sn, dt, dest, rp, (int)rn, dt, src, VTAG, comm, NULL);
        if (rc == MPI_SUCCESS)
            unpack_blocks(buf, rp, dt, counts, displs, rblocks, nr);
    }
    free(sp);
    free(rp);
    return rc;
}

/* Mirrors ompi_coll_base_allgatherv_intra_basic_default: the communicator's MPI_Gatherv to
 * 0 (coll/basic's linear one), then its own MPI_Bcast from 0 of one element of an indexed
 * datatype covering every block (chosen by the fixed rules on the total size). The port
 * broadcasts the packed blocks as one element of a contiguous type of that size. */
static int allgatherv_default(const void *sbuf, int scount, MPI_Datatype sdt, char *rbuf,
                              const int *rcounts, const int *displs, MPI_Datatype rdt,
                              MPI_Comm comm)
{
    int rank, size, rc;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    if ((rc = cbp_gatherv_linear(sbuf, scount, sdt, rbuf, rcounts, displs, rdt, 0, comm)))
        return rc;
    long total = 0;
    for (int i = 0; i < size; i++)
        total += rcounts[i];
    int *all = malloc(sizeof(int) * (size_t)size);
    char *packed = cbp_alloc(rdt, (int)total);
    MPI_Datatype whole = MPI_DATATYPE_NULL;
    if (all == NULL || packed == NULL) {
        rc = MPI_ERR_NO_MEM;
        goto out;
    }
    for (int i = 0; i < size; i++)
        all[i] = i;
    if (rank == 0)
        pack_blocks(packed, rbuf, rdt, rcounts, displs, all, size);
    if ((rc = MPI_Type_contiguous((int)total, rdt, &whole)) || (rc = MPI_Type_commit(&whole)))
        goto out;
    if ((rc = cbp_bcast_fixed(packed, 1, whole, 0, comm)))
        goto out;
    if (rank != 0)
        unpack_blocks(rbuf, packed, rdt, rcounts, displs, all, size);
out:
    if (whole != MPI_DATATYPE_NULL)
        MPI_Type_free(&whole);
    free(all);
    free(packed);
    return rc;
}

/* Mirrors ompi_coll_base_allgatherv_intra_bruck: at distance d = 1, 2, 4, ... send the
 * blocks of ranks rank .. rank + n - 1 to rank - d and receive those of rank + d ..
 * rank + d + n - 1 from rank + d (n = min(d, P - d)), in place: no final rotation. */
static int allgatherv_bruck(char *rbuf, const int *rcounts, const int *displs,
                            MPI_Datatype rdt, MPI_Comm comm)
{
    int rank, size, rc = MPI_SUCCESS;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    int *sb = malloc(sizeof(int) * (size_t)size), *rb = malloc(sizeof(int) * (size_t)size);
    if (sb == NULL || rb == NULL) {
        rc = MPI_ERR_NO_MEM;
        goto out;
    }
    for (int d = 1; d < size; d <<= 1) {
        int n = d <= size / 2 ? d : size - d;
        int from = (rank + d) % size;
        for (int i = 0; i < n; i++) {
            sb[i] = (rank + i) % size;
            rb[i] = (from + i) % size;
        }
        if ((rc = sendrecv_blocks(rbuf, rdt, rcounts, displs, sb, n, cbp_mod(rank - d, size),
                                  rb, n, from, comm)))
            goto out;
    }
out:
    free(sb);
    free(rb);
    return rc;
}

/* Mirrors ompi_coll_base_allgatherv_intra_ring. */
static int allgatherv_ring(char *rbuf, const int *rcounts, const int *displs,
                           MPI_Datatype rdt, MPI_Comm comm)
{
    int rank, size, rc;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    int right = (rank + 1) % size, left = cbp_mod(rank - 1, size);
    for (int i = 0; i < size - 1; i++) {
        int sblk = cbp_mod(rank - i, size), rblk = cbp_mod(rank - i - 1, size);
        if ((rc = cbp_sendrecv(rbuf + cbp_span(rdt, displs[sblk]), rcounts[sblk], rdt, right,
                               rbuf + cbp_span(rdt, displs[rblk]), rcounts[rblk], rdt, left,
                               VTAG, comm, NULL)))
            return rc;
    }
    return MPI_SUCCESS;
}

/* Mirrors ompi_coll_base_allgatherv_intra_neighborexchange (ring on an odd P). */
static int allgatherv_neighbor(char *rbuf, const int *rcounts, const int *displs,
                               MPI_Datatype rdt, MPI_Comm comm)
{
    int rank, size, rc;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    if (size % 2)
        return allgatherv_ring(rbuf, rcounts, displs, rdt, comm);
    nx_t s;
    nx_init(&s, rank, size);
    int nb = s.neighbor[0];
    if ((rc = cbp_sendrecv(rbuf + cbp_span(rdt, displs[rank]), rcounts[rank], rdt, nb,
                           rbuf + cbp_span(rdt, displs[nb]), rcounts[nb], rdt, nb, VTAG, comm,
                           NULL)))
        return rc;
    for (int i = 1; i < size / 2; i++) {
        int peer, sf, rf;
        nx_step(&s, i, size, &peer, &sf, &rf);
        int sb[2] = {sf, sf + 1}, rb[2] = {rf, rf + 1};
        if ((rc = sendrecv_blocks(rbuf, rdt, rcounts, displs, sb, 2, peer, rb, 2, peer, comm)))
            return rc;
    }
    return MPI_SUCCESS;
}

/* Mirrors ompi_coll_base_allgatherv_intra_two_procs: refused unless P = 2. */
static int allgatherv_two_procs(const void *sbuf, int scount, MPI_Datatype sdt, char *rbuf,
                                const int *rcounts, const int *displs, MPI_Datatype rdt,
                                MPI_Comm comm)
{
    int rank, size, rc;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    if (size != 2)
        return MPI_ERR_UNSUPPORTED_OPERATION;
    int peer = rank ^ 1;
    if ((rc = cbp_sendrecv(sbuf, scount, sdt, peer, rbuf + cbp_span(rdt, displs[peer]),
                           rcounts[peer], rdt, peer, VTAG, comm, NULL)))
        return rc;
    cbp_copy(rbuf + cbp_span(rdt, displs[rank]), sbuf, sdt, scount);
    return MPI_SUCCESS;
}

int cbp_allgatherv(const void *sbuf, int scount, MPI_Datatype sdt, void *rbuf,
                   const int *rcounts, const int *displs, MPI_Datatype rdt, MPI_Comm comm,
                   int alg, int segsize, int fanout)
{
    int rank, size;
    (void)segsize;
    (void)fanout;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    char *r = rbuf;
    switch (alg) {
    case CBP_ALLGATHERV_DEFAULT: /* ompi_coll_base_allgatherv_intra_basic_default */
        return allgatherv_default(sbuf, scount, sdt, r, rcounts, displs, rdt, comm);
    case CBP_ALLGATHERV_TWO_PROC: /* ompi_coll_base_allgatherv_intra_two_procs */
        return allgatherv_two_procs(sbuf, scount, sdt, r, rcounts, displs, rdt, comm);
    case CBP_ALLGATHERV_BRUCK:
    case CBP_ALLGATHERV_RING:
    case CBP_ALLGATHERV_NEIGHBOR:
    case CBP_ALLGATHERV_SPARBIT:
        break;
    default:
        return MPI_ERR_ARG;
    }
    cbp_copy(r + cbp_span(rdt, displs[rank]), sbuf, sdt, scount);
    switch (alg) {
    case CBP_ALLGATHERV_BRUCK: /* ompi_coll_base_allgatherv_intra_bruck */
        return allgatherv_bruck(r, rcounts, displs, rdt, comm);
    case CBP_ALLGATHERV_RING: /* ompi_coll_base_allgatherv_intra_ring */
        return allgatherv_ring(r, rcounts, displs, rdt, comm);
    case CBP_ALLGATHERV_NEIGHBOR: /* ompi_coll_base_allgatherv_intra_neighborexchange */
        return allgatherv_neighbor(r, rcounts, displs, rdt, comm);
    default: { /* CBP_ALLGATHERV_SPARBIT: ompi_coll_base_allgatherv_intra_sparbit */
        MPI_Request *req = malloc(sizeof(MPI_Request) * 2 * (size_t)size);
        if (req == NULL)
            return MPI_ERR_NO_MEM;
        sparbit_ctx_t c = {r, rdt, rcounts, displs, 0, VTAG, comm, req};
        int rc = sparbit(rank, size, &c, sparbit_exchange);
        free(req);
        return rc;
    }
    }
}
