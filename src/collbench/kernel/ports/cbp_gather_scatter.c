/*
 * Gather and scatter: ports of Open MPI 5.0.x coll/base (coll_base_gather.c,
 * coll_base_scatter.c) as coll/tuned runs them when forced. Only gather's linear_sync uses
 * the segment size (coll_tuned_gather_algorithm_segmentsize, default 0: the "first
 * segment" is the whole block and the second one is empty).
 */
#include "cbp_internal.h"

#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ gather */

/* Mirrors ompi_coll_base_gather_intra_basic_linear: every rank sends its block to the
 * root, which receives them in rank order. */
static int gather_linear(const void *sbuf, int scount, MPI_Datatype sdt, void *rbuf,
                         int rcount, MPI_Datatype rdt, int root, MPI_Comm comm)
{
    int rank, size, rc;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    if (rank != root)
        return cbp_send(sbuf, scount, sdt, root, CBP_TAG_GATHER, comm);
    size_t blk = cbp_span(rdt, rcount);
    for (int i = 0; i < size; i++) {
        char *p = (char *)rbuf + (size_t)i * blk;
        if (i == rank) {
            cbp_copy(p, sbuf, sdt, scount);
            continue;
        }
        if ((rc = cbp_recv(p, rcount, rdt, i, CBP_TAG_GATHER, comm, MPI_STATUS_IGNORE)))
            return rc;
    }
    return MPI_SUCCESS;
}

/* Mirrors ompi_coll_base_gather_intra_binomial: up the in-order binomial tree; every
 * inner node collects its subtree's blocks (contiguous in virtual-rank order) and sends
 * them to its parent in one message; a root other than 0 rotates the result. */
static int gather_binomial(const void *sbuf, int scount, MPI_Datatype sdt, void *rbuf,
                           int rcount, MPI_Datatype rdt, int root, MPI_Comm comm)
{
    int rank, size, rc = MPI_SUCCESS;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    cbp_tree_t t;
    if ((rc = cbp_tree_in_order_binomial(rank, size, root, &t)))
        return rc;
    int v = (rank - root + size) % size;
    char *acc = NULL, *tmp = NULL;
    MPI_Datatype adt = sdt;
    int blkcount = scount, held;
    if (rank == root) {
        adt = rdt;
        blkcount = rcount;
        if (root == 0) {
            acc = rbuf;
        } else {
            tmp = malloc(cbp_span(rdt, rcount * size) + 1);
            if (tmp == NULL)
                return MPI_ERR_NO_MEM;
            acc = tmp;
        }
        cbp_copy(acc, sbuf, sdt, scount);
        held = rcount;
    } else if (v % 2 == 0) {
        tmp = malloc(cbp_span(sdt, scount * size) + 1);
        if (tmp == NULL)
            return MPI_ERR_NO_MEM;
        acc = tmp;
        cbp_copy(acc, sbuf, sdt, scount);
        held = scount;
    } else {
        acc = (char *)sbuf; /* a leaf sends its own block */
        held = scount;
    }
    if (v % 2 == 0) {
        for (int c = 0; c < t.nchildren; c++) {
            int vc = (t.children[c] - root + size) % size;
            int blocks = vc - v;
            if (blocks > size - vc)
                blocks = size - vc;
            rc = cbp_recv(acc + cbp_span(adt, held), blkcount * size - held, adt, t.children[c],
                          CBP_TAG_GATHER, comm, MPI_STATUS_IGNORE);
            if (rc)
                goto out;
            held += blocks * blkcount;
        }
    }
    if (rank != root) {
        rc = cbp_send(acc, held, sdt, t.parent, CBP_TAG_GATHER, comm);
    } else if (root != 0) {
        /* acc holds blocks root, root+1, ..., size-1, 0, ..., root-1 */
        size_t blk = cbp_span(rdt, rcount);
        memcpy((char *)rbuf + (size_t)root * blk, acc, (size_t)(size - root) * blk);
        memcpy(rbuf, acc + (size_t)(size - root) * blk, (size_t)root * blk);
    }
out:
    free(tmp);
    return rc;
}

/* Mirrors ompi_coll_base_gather_intra_linear_sync: the root, rank by rank, posts the
 * receive of the first segment, sends an empty "go" message, posts the receive of the rest
 * and waits for the first segment; non-roots wait for "go", then send both parts. */
static int gather_linear_sync(const void *sbuf, int scount, MPI_Datatype sdt, void *rbuf,
                              int rcount, MPI_Datatype rdt, int root, MPI_Comm comm,
                              int first_segsize)
{
    int rank, size, rc;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    if (rank != root) {
        int first = cbp_segcount(first_segsize, cbp_type_size(sdt), scount);
        char dummy;
        if ((rc = cbp_recv(&dummy, 0, MPI_BYTE, root, CBP_TAG_GATHER, comm, MPI_STATUS_IGNORE)))
            return rc;
        if ((rc = cbp_send(sbuf, first, sdt, root, CBP_TAG_GATHER, comm)))
            return rc;
        return cbp_send((const char *)sbuf + cbp_span(sdt, first), scount - first, sdt, root,
                        CBP_TAG_GATHER, comm);
    }
    int first = cbp_segcount(first_segsize, cbp_type_size(rdt), rcount);
    MPI_Request *req = malloc(sizeof(MPI_Request) * (size_t)size);
    if (req == NULL)
        return MPI_ERR_NO_MEM;
    size_t blk = cbp_span(rdt, rcount);
    for (int i = 0; i < size; i++) {
        req[i] = MPI_REQUEST_NULL;
        if (i == rank)
            continue;
        char *p = (char *)rbuf + (size_t)i * blk;
        MPI_Request head;
        if ((rc = cbp_irecv(p, first, rdt, i, CBP_TAG_GATHER, comm, &head)))
            goto out;
        if ((rc = cbp_send(rbuf, 0, MPI_BYTE, i, CBP_TAG_GATHER, comm)))
            goto out;
        if ((rc = cbp_irecv(p + cbp_span(rdt, first), rcount - first, rdt, i, CBP_TAG_GATHER,
                            comm, &req[i])))
            goto out;
        if ((rc = MPI_Wait(&head, MPI_STATUS_IGNORE)))
            goto out;
    }
    cbp_copy((char *)rbuf + (size_t)rank * blk, sbuf, sdt, scount);
    rc = MPI_Waitall(size, req, MPI_STATUSES_IGNORE);
out:
    free(req);
    return rc;
}

int cbp_gather(const void *sbuf, int scount, MPI_Datatype sdt, void *rbuf, int rcount,
               MPI_Datatype rdt, int root, MPI_Comm comm, int alg, int segsize, int fanout)
{
    (void)fanout;
    if (segsize < 0)
        return MPI_ERR_ARG;
    if (alg == CBP_ALG_FIXED_DECISION) {
        /* the fixed rules look at this rank's block: the receive side at the root */
        int rank, size;
        MPI_Comm_rank(comm, &rank);
        MPI_Comm_size(comm, &size);
        long long bytes = rank == root ? (long long)rcount * cbp_type_size(rdt)
                                       : (long long)scount * cbp_type_size(sdt);
        alg = cbp_decide("gather", size, bytes, 1, NULL);
        segsize = 0;
    }
    switch (alg) {
    case CBP_GATHER_BASIC_LINEAR: /* ompi_coll_base_gather_intra_basic_linear */
        return gather_linear(sbuf, scount, sdt, rbuf, rcount, rdt, root, comm);
    case CBP_GATHER_BINOMIAL: /* ompi_coll_base_gather_intra_binomial */
        return gather_binomial(sbuf, scount, sdt, rbuf, rcount, rdt, root, comm);
    case CBP_GATHER_LINEAR_SYNC: /* ompi_coll_base_gather_intra_linear_sync */
        return gather_linear_sync(sbuf, scount, sdt, rbuf, rcount, rdt, root, comm, segsize);
    default:
        return MPI_ERR_ARG;
    }
}

/* ------------------------------------------------------------------ scatter */

/* Mirrors ompi_coll_base_scatter_intra_basic_linear: blocking sends in rank order. */
static int scatter_linear(const void *sbuf, int scount, MPI_Datatype sdt, void *rbuf,
                          int rcount, MPI_Datatype rdt, int root, MPI_Comm comm, int nonblocking)
{
    int rank, size, rc = MPI_SUCCESS;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    if (rank != root)
        return cbp_recv(rbuf, rcount, rdt, root, CBP_TAG_SCATTER, comm, MPI_STATUS_IGNORE);
    size_t blk = cbp_span(sdt, scount);
    MPI_Request *req = NULL;
    int n = 0;
    if (nonblocking) {
        req = malloc(sizeof(MPI_Request) * (size_t)size);
        if (req == NULL)
            return MPI_ERR_NO_MEM;
    }
    for (int i = 0; i < size; i++) {
        const char *p = (const char *)sbuf + (size_t)i * blk;
        if (i == rank) {
            cbp_copy(rbuf, p, sdt, scount);
            continue;
        }
        rc = nonblocking ? cbp_isend(p, scount, sdt, i, CBP_TAG_SCATTER, comm, &req[n++])
                         : cbp_send(p, scount, sdt, i, CBP_TAG_SCATTER, comm);
        if (rc)
            break;
    }
    if (nonblocking) {
        int rc2 = MPI_Waitall(n, req, MPI_STATUSES_IGNORE);
        free(req);
        if (rc == MPI_SUCCESS)
            rc = rc2;
    }
    return rc;
}

/* Mirrors ompi_coll_base_scatter_intra_binomial: down the in-order binomial tree; every
 * inner node receives its subtree's blocks in one message and passes each child its
 * part, the largest subtree first. A root other than 0 rotates the blocks first. */
static int scatter_binomial(const void *sbuf, int scount, MPI_Datatype sdt, void *rbuf,
                            int rcount, MPI_Datatype rdt, int root, MPI_Comm comm)
{
    int rank, size, rc = MPI_SUCCESS;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    cbp_tree_t t;
    if ((rc = cbp_tree_in_order_binomial(rank, size, root, &t)))
        return rc;
    int v = (rank - root + size) % size;
    if (v % 2 == 1)
        return cbp_recv(rbuf, rcount, rdt, t.parent, CBP_TAG_SCATTER, comm, MPI_STATUS_IGNORE);
    /* inner nodes work in bytes (Open MPI packs to MPI_PACKED; for contiguous data the
     * message sizes are the same) */
    char *tmp = NULL;
    const char *data;
    int blkbytes, held;
    if (rank == root) {
        blkbytes = (int)cbp_span(sdt, scount);
        data = sbuf;
        if (root != 0) {
            tmp = malloc((size_t)blkbytes * (size_t)size + 1);
            if (tmp == NULL)
                return MPI_ERR_NO_MEM;
            memcpy(tmp + (size_t)(size - root) * (size_t)blkbytes, sbuf,
                   (size_t)root * (size_t)blkbytes);
            memcpy(tmp, (const char *)sbuf + (size_t)root * (size_t)blkbytes,
                   (size_t)(size - root) * (size_t)blkbytes);
            data = tmp;
        }
        held = blkbytes * size;
    } else {
        blkbytes = (int)cbp_span(rdt, rcount);
        int vparent = (t.parent - root + size) % size;
        int blocks = v - vparent;
        if (size - v < blocks)
            blocks = size - v;
        tmp = malloc((size_t)blkbytes * (size_t)blocks + 1);
        if (tmp == NULL)
            return MPI_ERR_NO_MEM;
        MPI_Status st;
        if ((rc = cbp_recv(tmp, blkbytes * blocks, MPI_BYTE, t.parent, CBP_TAG_SCATTER, comm,
                           &st)))
            goto out;
        MPI_Get_count(&st, MPI_BYTE, &held);
        data = tmp;
    }
    memcpy(rbuf, data, (size_t)blkbytes);
    for (int c = t.nchildren - 1; c >= 0; c--) {
        int vc = (t.children[c] - root + size) % size;
        int blocks = vc - v;
        if (blocks > size - vc)
            blocks = size - vc;
        int n = blocks * blkbytes;
        if ((rc = cbp_send(data + held - n, n, MPI_BYTE, t.children[c], CBP_TAG_SCATTER, comm)))
            goto out;
        held -= n;
    }
out:
    free(tmp);
    return rc;
}

int cbp_scatter(const void *sbuf, int scount, MPI_Datatype sdt, void *rbuf, int rcount,
                MPI_Datatype rdt, int root, MPI_Comm comm, int alg, int segsize, int fanout)
{
    (void)segsize;
    (void)fanout;
    if (alg == CBP_ALG_FIXED_DECISION) {
        /* the fixed rules look at this rank's block: the send side at the root */
        int rank, size;
        MPI_Comm_rank(comm, &rank);
        MPI_Comm_size(comm, &size);
        long long bytes = rank == root ? (long long)scount * cbp_type_size(sdt)
                                       : (long long)rcount * cbp_type_size(rdt);
        alg = cbp_decide("scatter", size, bytes, 1, NULL);
    }
    switch (alg) {
    case CBP_SCATTER_BASIC_LINEAR: /* ompi_coll_base_scatter_intra_basic_linear */
        return scatter_linear(sbuf, scount, sdt, rbuf, rcount, rdt, root, comm, 0);
    case CBP_SCATTER_BINOMIAL: /* ompi_coll_base_scatter_intra_binomial */
        return scatter_binomial(sbuf, scount, sdt, rbuf, rcount, rdt, root, comm);
    case CBP_SCATTER_LINEAR_NB:
        /* ompi_coll_base_scatter_intra_linear_nb with coll_tuned_scatter_algorithm_max_requests
         * at its default 0: all isends, then one waitall */
        return scatter_linear(sbuf, scount, sdt, rbuf, rcount, rdt, root, comm, 1);
    default:
        return MPI_ERR_ARG;
    }
}

/* ------------------------------------------------------------------ gatherv, scatterv */

/* Mirrors mca_coll_basic_gatherv_intra: non-roots send their block (if not empty), the root
 * receives the non-empty blocks in rank order. */
int cbp_gatherv_linear(const void *sbuf, int scount, MPI_Datatype sdt, void *rbuf,
                       const int *rcounts, const int *displs, MPI_Datatype rdt, int root,
                       MPI_Comm comm)
{
    int rank, size, rc;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    if (rank != root) {
        if (scount > 0 && cbp_type_size(sdt) > 0)
            return cbp_send(sbuf, scount, sdt, root, CBP_TAG_GATHERV, comm);
        return MPI_SUCCESS;
    }
    if (cbp_type_size(rdt) == 0)
        return MPI_SUCCESS;
    for (int i = 0; i < size; i++) {
        char *p = (char *)rbuf + cbp_span(rdt, displs[i]);
        if (i == rank) {
            if (scount > 0 && rcounts[i] > 0)
                cbp_copy(p, sbuf, sdt, scount);
        } else if (rcounts[i] > 0 &&
                   (rc = cbp_recv(p, rcounts[i], rdt, i, CBP_TAG_GATHERV, comm,
                                  MPI_STATUS_IGNORE))) {
            return rc;
        }
    }
    return MPI_SUCCESS;
}

/* Mirrors mca_coll_basic_scatterv_intra: the root sends the non-empty blocks in rank order
 * with blocking sends; non-roots receive theirs (if not empty). */
int cbp_scatterv_linear(const void *sbuf, const int *scounts, const int *displs,
                        MPI_Datatype sdt, void *rbuf, int rcount, MPI_Datatype rdt, int root,
                        MPI_Comm comm)
{
    int rank, size, rc;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    if (rank != root) {
        if (rcount > 0 && cbp_type_size(rdt) > 0)
            return cbp_recv(rbuf, rcount, rdt, root, CBP_TAG_SCATTERV, comm,
                            MPI_STATUS_IGNORE);
        return MPI_SUCCESS;
    }
    if (cbp_type_size(sdt) == 0)
        return MPI_SUCCESS;
    for (int i = 0; i < size; i++) {
        const char *p = (const char *)sbuf + cbp_span(sdt, displs[i]);
        if (i == rank) {
            if (scounts[i] > 0)
                cbp_copy(rbuf, p, sdt, scounts[i]);
        } else if (scounts[i] > 0 &&
                   (rc = cbp_send(p, scounts[i], sdt, i, CBP_TAG_SCATTERV, comm))) {
            return rc;
        }
    }
    return MPI_SUCCESS;
}
