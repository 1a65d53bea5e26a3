/*
 * Alltoall and alltoallv: ports of Open MPI 5.0.x coll/base (coll_base_alltoall.c,
 * coll_base_alltoallv.c) as coll/tuned runs them when forced. Only alltoall's linear_sync
 * has a parameter: coll_tuned_alltoall_algorithm_max_requests (default 0: every request at
 * once), passed as the fanout.
 *
 * Open MPI's linear algorithms use persistent requests (isend_init/irecv_init + start);
 * the ports post the same messages with Isend/Irecv in the same order.
 */
#include "cbp_internal.h"

#include <stdlib.h>
#include <string.h>

#define TAG CBP_TAG_ALLTOALL
#define VTAG CBP_TAG_ALLTOALLV

/* ------------------------------------------------------------------ alltoall */

/* Mirrors ompi_coll_base_alltoall_intra_linear_sync (and, with every request at once,
 * ompi_coll_base_alltoall_intra_basic_linear): the own block is copied; receives are
 * posted from rank + 1 upwards, sends to rank - 1 downwards; at most max_requests of each
 * are in flight (0 or >= P - 1: all of them), a completed one is replaced by the next. */
static int alltoall_linear(const char *sbuf, int scount, MPI_Datatype sdt, char *rbuf,
                           int rcount, MPI_Datatype rdt, MPI_Comm comm, int max_requests)
{
    int rank, size, rc = MPI_SUCCESS;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    size_t sblk = cbp_span(sdt, scount), rblk = cbp_span(rdt, rcount);
    cbp_copy(rbuf + (size_t)rank * rblk, sbuf + (size_t)rank * sblk, sdt, scount);
    if (size == 1)
        return MPI_SUCCESS;
    int total = (max_requests <= 0 || max_requests > size - 1) ? size - 1 : max_requests;
    MPI_Request *req = malloc(sizeof(MPI_Request) * 2 * (size_t)total);
    if (req == NULL)
        return MPI_ERR_NO_MEM;
    int ri = (rank + 1) % size, si = cbp_mod(rank - 1, size), nr = 0, ns = 0;
    for (; nr < total; nr++, ri = (ri + 1) % size)
        if ((rc = cbp_irecv(rbuf + (size_t)ri * rblk, rcount, rdt, ri, TAG, comm, &req[nr])))
            goto out;
    for (; ns < total; ns++, si = cbp_mod(si - 1, size))
        if ((rc = cbp_isend(sbuf + (size_t)si * sblk, scount, sdt, si, TAG, comm,
                            &req[total + ns])))
            goto out;
    if (total == size - 1) {
        rc = MPI_Waitall(2 * total, req, MPI_STATUSES_IGNORE);
        goto out;
    }
    for (int done = 0; done < 2 * (size - 1); done++) {
        int k;
        if ((rc = MPI_Waitany(2 * total, req, &k, MPI_STATUS_IGNORE)))
            goto out;
        if (k < total) {
            if (nr < size - 1) {
                if ((rc = cbp_irecv(rbuf + (size_t)ri * rblk, rcount, rdt, ri, TAG, comm,
                                    &req[k])))
                    goto out;
                nr++;
                ri = (ri + 1) % size;
            }
        } else if (ns < size - 1) {
            if ((rc = cbp_isend(sbuf + (size_t)si * sblk, scount, sdt, si, TAG, comm, &req[k])))
                goto out;
            ns++;
            si = cbp_mod(si - 1, size);
        }
    }
out:
    free(req);
    return rc;
}

/* Mirrors ompi_coll_base_alltoall_intra_pairwise: steps 1 .. P, at step s send to rank + s
 * and receive from rank - s (step P is the local copy). */
static int alltoall_pairwise(const char *sbuf, int scount, MPI_Datatype sdt, char *rbuf,
                             int rcount, MPI_Datatype rdt, MPI_Comm comm)
{
    int rank, size, rc;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    size_t sblk = cbp_span(sdt, scount), rblk = cbp_span(rdt, rcount);
    for (int s = 1; s <= size; s++) {
        int to = (rank + s) % size, from = cbp_mod(rank - s, size);
        if ((rc = cbp_sendrecv(sbuf + (size_t)to * sblk, scount, sdt, to,
                               rbuf + (size_t)from * rblk, rcount, rdt, from, TAG, comm, NULL)))
            return rc;
    }
    return MPI_SUCCESS;
}

/* Mirrors ompi_coll_base_alltoall_intra_bruck (modified Bruck): rotate the blocks up by
 * rank; at distance d = 1, 2, 4, ... send every block whose index has bit d set to
 * rank + d, receive the same slots from rank - d (one message each way); finally block i
 * goes to slot rank - i. */
static int alltoall_bruck(const char *sbuf, int scount, MPI_Datatype sdt, char *rbuf,
                          int rcount, MPI_Datatype rdt, MPI_Comm comm)
{
    int rank, size, rc = MPI_SUCCESS;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    size_t sblk = cbp_span(sdt, scount), blk = cbp_span(rdt, rcount);
    char *tmp = cbp_alloc(rdt, rcount * size);
    char *out = cbp_alloc(rdt, rcount * size), *in = cbp_alloc(rdt, rcount * size);
    if (tmp == NULL || out == NULL || in == NULL) {
        rc = MPI_ERR_NO_MEM;
        goto done;
    }
    for (int j = 0; j < size; j++)
        cbp_copy(tmp + (size_t)j * blk, sbuf + (size_t)((rank + j) % size) * sblk, sdt, scount);
    for (int d = 1; d < size; d <<= 1) {
        int n = 0;
        for (int j = 0; j < size; j++)
            if (j & d)
                memcpy(out + (size_t)n++ * blk, tmp + (size_t)j * blk, blk);
        if ((rc = cbp_sendrecv(out, n * rcount, rdt, (rank + d) % size, in, n * rcount, rdt,
                               cbp_mod(rank - d, size), TAG, comm, NULL)))
            goto done;
        n = 0;
        for (int j = 0; j < size; j++)
            if (j & d)
                memcpy(tmp + (size_t)j * blk, in + (size_t)n++ * blk, blk);
    }
    for (int j = 0; j < size; j++)
        memcpy(rbuf + (size_t)cbp_mod(rank - j, size) * blk, tmp + (size_t)j * blk, blk);
done:
    free(tmp);
    free(out);
    free(in);
    return rc;
}

/* Mirrors ompi_coll_base_alltoall_intra_two_procs: refused unless P = 2. */
static int alltoall_two_procs(const char *sbuf, int scount, MPI_Datatype sdt, char *rbuf,
                              int rcount, MPI_Datatype rdt, MPI_Comm comm)
{
    int rank, size, rc;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    if (size != 2)
        return MPI_ERR_UNSUPPORTED_OPERATION;
    int peer = rank ^ 1;
    size_t sblk = cbp_span(sdt, scount), rblk = cbp_span(rdt, rcount);
    if ((rc = cbp_sendrecv(sbuf + (size_t)peer * sblk, scount, sdt, peer,
                           rbuf + (size_t)peer * rblk, rcount, rdt, peer, TAG, comm, NULL)))
        return rc;
    cbp_copy(rbuf + (size_t)rank * rblk, sbuf + (size_t)rank * sblk, sdt, scount);
    return MPI_SUCCESS;
}

int cbp_alltoall(const void *sbuf, int scount, MPI_Datatype sdt, void *rbuf, int rcount,
                 MPI_Datatype rdt, MPI_Comm comm, int alg, int segsize, int fanout)
{
    (void)segsize;
    const char *s = sbuf;
    char *r = rbuf;
    switch (alg) {
    case CBP_ALLTOALL_LINEAR: /* ompi_coll_base_alltoall_intra_basic_linear */
        return alltoall_linear(s, scount, sdt, r, rcount, rdt, comm, 0);
    case CBP_ALLTOALL_PAIRWISE: /* ompi_coll_base_alltoall_intra_pairwise */
        return alltoall_pairwise(s, scount, sdt, r, rcount, rdt, comm);
    case CBP_ALLTOALL_MODIFIED_BRUCK: /* ompi_coll_base_alltoall_intra_bruck */
        return alltoall_bruck(s, scount, sdt, r, rcount, rdt, comm);
    case CBP_ALLTOALL_LINEAR_SYNC: /* ompi_coll_base_alltoall_intra_linear_sync */
        return alltoall_linear(s, scount, sdt, r, rcount, rdt, comm, fanout);
    case CBP_ALLTOALL_TWO_PROC: /* ompi_coll_base_alltoall_intra_two_procs */
        return alltoall_two_procs(s, scount, sdt, r, rcount, rdt, comm);
    default:
        return MPI_ERR_ARG;
    }
}

/* ------------------------------------------------------------------ alltoallv */

/* Mirrors ompi_coll_base_alltoallv_intra_basic_linear: the own block is copied; receives
 * from every other rank in rank order, then sends likewise; empty blocks are skipped. */
static int alltoallv_linear(const char *sbuf, const int *scounts, const int *sdispls,
                            MPI_Datatype sdt, char *rbuf, const int *rcounts,
                            const int *rdispls, MPI_Datatype rdt, MPI_Comm comm)
{
    int rank, size, rc = MPI_SUCCESS;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    if (scounts[rank] > 0 && cbp_type_size(sdt) > 0)
        cbp_copy(rbuf + cbp_span(rdt, rdispls[rank]), sbuf + cbp_span(sdt, sdispls[rank]), sdt,
                 scounts[rank]);
    if (size == 1)
        return MPI_SUCCESS;
    MPI_Request *req = malloc(sizeof(MPI_Request) * 2 * (size_t)size);
    if (req == NULL)
        return MPI_ERR_NO_MEM;
    int n = 0;
    for (int i = 0; i < size; i++)
        if (i != rank && rcounts[i] > 0 && cbp_type_size(rdt) > 0 &&
            (rc = cbp_irecv(rbuf + cbp_span(rdt, rdispls[i]), rcounts[i], rdt, i, VTAG, comm,
                            &req[n++])))
            goto out;
    for (int i = 0; i < size; i++)
        if (i != rank && scounts[i] > 0 && cbp_type_size(sdt) > 0 &&
            (rc = cbp_isend(sbuf + cbp_span(sdt, sdispls[i]), scounts[i], sdt, i, VTAG, comm,
                            &req[n++])))
            goto out;
    rc = MPI_Waitall(n, req, MPI_STATUSES_IGNORE);
out:
    free(req);
    return rc;
}

/* Mirrors ompi_coll_base_alltoallv_intra_pairwise: steps 0 .. P - 1, at step s receive
 * from rank - s and send to rank + s; step 0 is a real message to itself; empty blocks are
 * skipped. */
static int alltoallv_pairwise(const char *sbuf, const int *scounts, const int *sdispls,
                              MPI_Datatype sdt, char *rbuf, const int *rcounts,
                              const int *rdispls, MPI_Datatype rdt, MPI_Comm comm)
{
    int rank, size, rc;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    for (int s = 0; s < size; s++) {
        int to = (rank + s) % size, from = cbp_mod(rank - s, size);
        MPI_Request req = MPI_REQUEST_NULL;
        if (rcounts[from] > 0 && cbp_type_size(rdt) > 0 &&
            (rc = cbp_irecv(rbuf + cbp_span(rdt, rdispls[from]), rcounts[from], rdt, from, VTAG,
                            comm, &req)))
            return rc;
        if (scounts[to] > 0 && cbp_type_size(sdt) > 0 &&
            (rc = cbp_send(sbuf + cbp_span(sdt, sdispls[to]), scounts[to], sdt, to, VTAG, comm)))
            return rc;
        if (req != MPI_REQUEST_NULL && (rc = MPI_Wait(&req, MPI_STATUS_IGNORE)))
            return rc;
    }
    return MPI_SUCCESS;
}

int cbp_alltoallv(const void *sbuf, const int *scounts, const int *sdispls, MPI_Datatype sdt,
                  void *rbuf, const int *rcounts, const int *rdispls, MPI_Datatype rdt,
                  MPI_Comm comm, int alg, int segsize, int fanout)
{
    (void)segsize;
    (void)fanout;
    switch (alg) {
    case CBP_ALLTOALLV_BASIC_LINEAR: /* ompi_coll_base_alltoallv_intra_basic_linear */
        return alltoallv_linear(sbuf, scounts, sdispls, sdt, rbuf, rcounts, rdispls, rdt, comm);
    case CBP_ALLTOALLV_PAIRWISE: /* ompi_coll_base_alltoallv_intra_pairwise */
        return alltoallv_pairwise(sbuf, scounts, sdispls, sdt, rbuf, rcounts, rdispls, rdt,
                                  comm);
    default:
        return MPI_ERR_ARG;
    }
}
