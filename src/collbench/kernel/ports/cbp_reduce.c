/*
 * Reduce and allreduce: ports of Open MPI 5.0.x coll/base (coll_base_reduce.c,
 * coll_base_allreduce.c) as coll/tuned runs them when forced: segment size from
 * coll_tuned_<coll>_algorithm_segmentsize (default 0 = unsegmented), reduce's chain fanout
 * from coll_tuned_reduce_algorithm_chain_fanout (default 4) and
 * coll_tuned_reduce_algorithm_max_requests at its default 0 (leaves send with blocking
 * standard sends).
 *
 * Reductions use MPI_Reduce_local(in, inout), i.e. inout = in (op) inout, the operand
 * order of Open MPI's ompi_op_reduce(op, source, target).
 */
#include "cbp_internal.h"

#include <stdlib.h>
#include <string.h>

static int is_commutative(MPI_Op op)
{
    int c = 1;
    MPI_Op_commutative(op, &c);
    return c;
}

static void *alloc_elems(MPI_Datatype dt, int count)
{
    return malloc(cbp_span(dt, count > 0 ? count : 1));
}

/* Segmented reduction up a tree; mirrors ompi_coll_base_reduce_generic.
 * Inner nodes: for each segment, one receive per child (overlapped with the reduction of
 * the previous child's data, two receive buffers); once all children of segment s are
 * in, segment s is reduced with the local data and sent up while segment s + 1 arrives.
 * With a commutative op the first child's segment is received straight into the
 * accumulator. Leaves send their segments up with blocking sends (or, when
 * max_outstanding > 0 and there are more segments than that, with at most max_outstanding
 * synchronous isends in flight). */
static int reduce_tree(const void *sbuf, void *rbuf, int count, MPI_Datatype dt, MPI_Op op,
                       int root, MPI_Comm comm, const cbp_tree_t *t, int segcount,
                       int max_outstanding)
{
    int rank, rc = MPI_SUCCESS;
    MPI_Comm_rank(comm, &rank);
    if (count <= 0)
        return MPI_SUCCESS;
    int nseg = (count + segcount - 1) / segcount;
    size_t inc = cbp_span(dt, segcount);
    const char *mine = sbuf;

    if (t->nchildren == 0) {
        if (max_outstanding == 0 || nseg <= max_outstanding) {
            int left = count, n = segcount;
            for (int s = 0; left > 0; s++) {
                if (left < n)
                    n = left;
                if ((rc = cbp_send(mine + (size_t)s * inc, n, dt, t->parent, CBP_TAG_REDUCE,
                                   comm)))
                    return rc;
                left -= n;
            }
            return MPI_SUCCESS;
        }
        MPI_Request *req = malloc(sizeof(MPI_Request) * (size_t)max_outstanding);
        if (req == NULL)
            return MPI_ERR_NO_MEM;
        int left = count, n = segcount, s = 0;
        for (; s < max_outstanding; s++) {
            if ((rc = cbp_issend(mine + (size_t)s * inc, n, dt, t->parent, CBP_TAG_REDUCE, comm,
                                 &req[s])))
                goto leaf_out;
            left -= n;
        }
        for (int slot = 0; left > 0; slot = (slot + 1) % max_outstanding, s++) {
            if ((rc = MPI_Wait(&req[slot], MPI_STATUS_IGNORE)))
                goto leaf_out;
            if (left < n)
                n = left;
            if ((rc = cbp_issend(mine + (size_t)s * inc, n, dt, t->parent, CBP_TAG_REDUCE, comm,
                                 &req[slot])))
                goto leaf_out;
            left -= n;
        }
        rc = MPI_Waitall(max_outstanding, req, MPI_STATUSES_IGNORE);
    leaf_out:
        free(req);
        return rc;
    }

    int commute = is_commutative(op);
    char *acc_free = NULL, *in[2] = {NULL, NULL};
    char *acc = rbuf;
    if (acc == NULL || rank != root) {
        acc = acc_free = alloc_elems(dt, count);
        if (acc == NULL)
            return MPI_ERR_NO_MEM;
    }
    if (!commute)
        cbp_copy(acc, mine, dt, count);
    in[0] = alloc_elems(dt, segcount);
    if (nseg > 1 || t->nchildren > 1)
        in[1] = alloc_elems(dt, segcount);
    if (in[0] == NULL || ((nseg > 1 || t->nchildren > 1) && in[1] == NULL)) {
        rc = MPI_ERR_NO_MEM;
        goto out;
    }
    MPI_Request req[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
    int b = 0, n = 0, prev_n;
    for (int s = 0; s <= nseg; s++) {
        prev_n = n;
        n = s == nseg - 1 ? count - segcount * s : segcount;
        for (int c = 0; c < t->nchildren; c++) {
            if (s < nseg) {
                void *dst = in[b];
                if (c == 0 && commute)
                    dst = acc + (size_t)s * inc;
                if ((rc = cbp_irecv(dst, n, dt, t->children[c], CBP_TAG_REDUCE, comm, &req[b])))
                    goto out;
            }
            /* the previous receive (previous child, or last child of the previous segment) */
            if ((rc = MPI_Wait(&req[b ^ 1], MPI_STATUS_IGNORE)))
                goto out;
            const void *src = in[b ^ 1];
            if (c > 0) {
                if (c == 1 && commute)
                    src = mine + (size_t)s * inc;
                MPI_Reduce_local(src, acc + (size_t)s * inc, n, dt, op);
            } else if (s > 0) {
                char *done = acc + (size_t)(s - 1) * inc;
                if (t->nchildren <= 1 && commute)
                    src = mine + (size_t)(s - 1) * inc;
                MPI_Reduce_local(src, done, prev_n, dt, op);
                if (rank != t->root &&
                    (rc = cbp_send(done, prev_n, dt, t->parent, CBP_TAG_REDUCE, comm)))
                    goto out;
                if (s == nseg)
                    break;
            }
            b ^= 1;
        }
    }
out:
    free(in[0]);
    free(in[1]);
    free(acc_free);
    return rc;
}

/* Mirrors ompi_coll_base_reduce_intra_basic_linear: the root receives from size - 1 down
 * to 0 and folds each contribution in, in that order. */
static int reduce_linear(const void *sbuf, void *rbuf, int count, MPI_Datatype dt, MPI_Op op,
                         int root, MPI_Comm comm)
{
    int rank, size, rc = MPI_SUCCESS;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    if (rank != root)
        return cbp_send(sbuf, count, dt, root, CBP_TAG_REDUCE, comm);
    char *tmp = NULL;
    if (size > 1 && (tmp = alloc_elems(dt, count)) == NULL)
        return MPI_ERR_NO_MEM;
    if (rank == size - 1)
        cbp_copy(rbuf, sbuf, dt, count);
    else if ((rc = cbp_recv(rbuf, count, dt, size - 1, CBP_TAG_REDUCE, comm,
                            MPI_STATUS_IGNORE)))
        goto out;
    for (int i = size - 2; i >= 0; i--) {
        const void *src = sbuf;
        if (i != rank) {
            if ((rc = cbp_recv(tmp, count, dt, i, CBP_TAG_REDUCE, comm, MPI_STATUS_IGNORE)))
                goto out;
            src = tmp;
        }
        MPI_Reduce_local(src, rbuf, count, dt, op);
    }
out:
    free(tmp);
    return rc;
}

/* Mirrors ompi_coll_base_reduce_intra_in_order_binary: reduce_tree on the in-order binary
 * tree, whose root is size - 1; that rank then sends the result to the real root. */
static int reduce_in_order_binary(const void *sbuf, void *rbuf, int count, MPI_Datatype dt,
                                  MPI_Op op, int root, MPI_Comm comm, int segcount)
{
    int rank, size, rc;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    cbp_tree_t t;
    if ((rc = cbp_tree_in_order_binary(rank, size, &t)))
        return rc;
    int io_root = size - 1;
    void *res = rbuf;
    char *tmp = NULL;
    if (io_root != root && rank == io_root) {
        if ((tmp = alloc_elems(dt, count)) == NULL)
            return MPI_ERR_NO_MEM;
        res = tmp;
    }
    rc = reduce_tree(sbuf, res, count, dt, op, io_root, comm, &t, segcount, 0);
    if (rc == MPI_SUCCESS && io_root != root) {
        if (rank == root)
            rc = cbp_recv(rbuf, count, dt, io_root, CBP_TAG_REDUCE, comm, MPI_STATUS_IGNORE);
        else if (rank == io_root)
            rc = cbp_send(res, count, dt, root, CBP_TAG_REDUCE, comm);
    }
    free(tmp);
    return rc;
}

/* Real rank of virtual rank w in the "fold the first 2r ranks in pairs" numbering used by
 * the Rabenseifner algorithms (r = size - largest power of two <= size). */
static int fold_real(int w, int rem)
{
    return w < rem ? 2 * w : w + rem;
}

/* Mirrors ompi_coll_base_reduce_intra_redscat_gather (Rabenseifner): fold to a power of
 * two, reduce-scatter by recursive halving, binomial gather to the root. Basic linear
 * when count < that power of two or the op is not commutative. */
static int reduce_rabenseifner(const void *sbuf, void *rbuf, int count, MPI_Datatype dt,
                               MPI_Op op, int root, MPI_Comm comm)
{
    int rank, size, rc = MPI_SUCCESS;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    int nsteps = cbp_floor_log2(size);
    int p2 = 1 << nsteps;
    if (p2 < 2 || count < p2 || !is_commutative(op))
        return reduce_linear(sbuf, rbuf, count, dt, op, root, comm);
    int rem = size - p2;
    char *tmp = alloc_elems(dt, count), *own = NULL;
    int *ri = malloc(sizeof(int) * (size_t)nsteps), *si = malloc(sizeof(int) * (size_t)nsteps);
    int *rn = malloc(sizeof(int) * (size_t)nsteps), *sn = malloc(sizeof(int) * (size_t)nsteps);
    char *res = rbuf;
    if (rank != root)
        res = own = alloc_elems(dt, count);
    if (tmp == NULL || ri == NULL || si == NULL || rn == NULL || sn == NULL || res == NULL) {
        rc = MPI_ERR_NO_MEM;
        goto out;
    }
    cbp_copy(res, sbuf, dt, count);

    /* step 1: the first 2r ranks fold in pairs onto the even one */
    int v;
    if (rank < 2 * rem) {
        int lo = count / 2, hi = count - lo;
        if (rank % 2 != 0) {
            if ((rc = cbp_sendrecv(res, lo, dt, rank - 1, tmp + cbp_span(dt, lo), hi, dt,
                                   rank - 1, CBP_TAG_REDUCE, comm, NULL)))
                goto out;
            MPI_Reduce_local(tmp + cbp_span(dt, lo), res + cbp_span(dt, lo), hi, dt, op);
            if ((rc = cbp_send(res + cbp_span(dt, lo), hi, dt, rank - 1, CBP_TAG_REDUCE, comm)))
                goto out;
            v = -1;
        } else {
            if ((rc = cbp_sendrecv(res + cbp_span(dt, lo), hi, dt, rank + 1, tmp, lo, dt,
                                   rank + 1, CBP_TAG_REDUCE, comm, NULL)))
                goto out;
            MPI_Reduce_local(tmp, res, lo, dt, op);
            if ((rc = cbp_recv(res + cbp_span(dt, lo), hi, dt, rank + 1, CBP_TAG_REDUCE, comm,
                               MPI_STATUS_IGNORE)))
                goto out;
            v = rank / 2;
        }
    } else {
        v = rank - rem;
    }

    /* step 2: reduce-scatter by recursive vector halving, distance doubling */
    if (v != -1) {
        int step = 0, w = count;
        si[0] = ri[0] = 0;
        for (int mask = 1; mask < p2; mask <<= 1) {
            int peer = fold_real(v ^ mask, rem);
            if (rank < peer) { /* keep the lower half */
                rn[step] = w / 2;
                sn[step] = w - rn[step];
                si[step] = ri[step] + rn[step];
            } else { /* keep the upper half */
                sn[step] = w / 2;
                rn[step] = w - sn[step];
                ri[step] = si[step] + sn[step];
            }
            if ((rc = cbp_sendrecv(res + cbp_span(dt, si[step]), sn[step], dt, peer,
                                   tmp + cbp_span(dt, ri[step]), rn[step], dt, peer,
                                   CBP_TAG_REDUCE, comm, NULL)))
                goto out;
            MPI_Reduce_local(tmp + cbp_span(dt, ri[step]), res + cbp_span(dt, ri[step]),
                             rn[step], dt, op);
            if (step + 1 < nsteps) {
                ri[step + 1] = ri[step];
                si[step + 1] = ri[step];
                w = rn[step];
                step++;
            }
        }
    }

    /* place the root: an odd root among the first 2r was folded away and gets virtual
     * rank 0's block directly */
    int vroot;
    if (root < 2 * rem) {
        if (root % 2 != 0) {
            vroot = 0;
            if (rank == root) {
                int w = count;
                for (int step = 0, mask = 1; mask < p2; mask <<= 1, step++) {
                    rn[step] = w / 2;
                    sn[step] = w - rn[step];
                    ri[step] = 0;
                    si[step] = rn[step];
                    w /= 2;
                }
                if ((rc = cbp_recv(res, rn[nsteps - 1], dt, 0, CBP_TAG_REDUCE, comm,
                                   MPI_STATUS_IGNORE)))
                    goto out;
                v = 0;
            } else if (v == 0) {
                if ((rc = cbp_send(res, rn[nsteps - 1], dt, root, CBP_TAG_REDUCE, comm)))
                    goto out;
                v = -1;
            }
        } else {
            vroot = root / 2;
        }
    } else {
        vroot = root - rem;
    }

    /* step 3: binomial gather to vroot, the halving steps in reverse */
    if (v != -1) {
        int step = nsteps - 1;
        for (int mask = p2 >> 1; mask > 0; mask >>= 1, step--) {
            int vpeer = v ^ mask;
            int peer = fold_real(vpeer, rem);
            if (vpeer == 0 && root < 2 * rem && root % 2 != 0)
                peer = root;
            if ((vpeer >> step) == (vroot >> step)) {
                rc = cbp_send(res + cbp_span(dt, ri[step]), rn[step], dt, peer, CBP_TAG_REDUCE,
                              comm);
                break;
            }
            if ((rc = cbp_recv(res + cbp_span(dt, si[step]), sn[step], dt, peer,
                               CBP_TAG_REDUCE, comm, MPI_STATUS_IGNORE)))
                goto out;
        }
    }
out:
    free(tmp);
    free(own);
    free(ri);
    free(si);
    free(rn);
    free(sn);
    return rc;
}

int cbp_reduce(const void *sbuf, void *rbuf, int count, MPI_Datatype dt, MPI_Op op, int root,
               MPI_Comm comm, int alg, int segsize, int fanout)
{
    int rank, size, rc;
    cbp_tree_t t;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    if (segsize < 0)
        return MPI_ERR_ARG;
    if (alg == CBP_ALG_FIXED_DECISION) {
        alg = cbp_decide("reduce", size, (long long)count * cbp_type_size(dt),
                         is_commutative(op), &fanout);
        segsize = 0;
    }
    int seg = cbp_segcount(segsize, cbp_type_size(dt), count);
    switch (alg) {
    case CBP_REDUCE_LINEAR: /* ompi_coll_base_reduce_intra_basic_linear */
        return reduce_linear(sbuf, rbuf, count, dt, op, root, comm);
    case CBP_REDUCE_CHAIN: /* ompi_coll_base_reduce_intra_chain */
        rc = cbp_tree_chain(fanout > 0 ? fanout : CBP_DEFAULT_CHAIN_FANOUT, rank, size, root, &t);
        break;
    case CBP_REDUCE_PIPELINE: /* ompi_coll_base_reduce_intra_pipeline */
        rc = cbp_tree_chain(1, rank, size, root, &t);
        break;
    case CBP_REDUCE_BINARY: /* ompi_coll_base_reduce_intra_binary */
        rc = cbp_tree_kary(2, rank, size, root, &t);
        break;
    case CBP_REDUCE_BINOMIAL: /* ompi_coll_base_reduce_intra_binomial */
        rc = cbp_tree_in_order_binomial(rank, size, root, &t);
        break;
    case CBP_REDUCE_IN_ORDER_BINARY: /* ompi_coll_base_reduce_intra_in_order_binary */
        return reduce_in_order_binary(sbuf, rbuf, count, dt, op, root, comm, seg);
    case CBP_REDUCE_RABENSEIFNER: /* ompi_coll_base_reduce_intra_redscat_gather */
        return reduce_rabenseifner(sbuf, rbuf, count, dt, op, root, comm);
    default:
        return MPI_ERR_ARG;
    }
    if (rc)
        return rc;
    return reduce_tree(sbuf, rbuf, count, dt, op, root, comm, &t, seg, 0);
}

/* ------------------------------------------------------------------ allreduce */

/* Mirrors ompi_coll_base_allreduce_intra_recursivedoubling: the first 2r ranks fold in
 * pairs (even sends to odd), the power-of-two others exchange whole vectors at doubling
 * distances, then the odd ones hand the result back. */
static int allreduce_recursive_doubling(const void *sbuf, void *rbuf, int count,
                                        MPI_Datatype dt, MPI_Op op, MPI_Comm comm)
{
    int rank, size, rc = MPI_SUCCESS;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    if (size == 1) {
        cbp_copy(rbuf, sbuf, dt, count);
        return MPI_SUCCESS;
    }
    char *work = alloc_elems(dt, count);
    if (work == NULL)
        return MPI_ERR_NO_MEM;
    cbp_copy(work, sbuf, dt, count);
    char *acc = work, *other = rbuf;
    int p2 = cbp_next_pow2_above(size) >> 1;
    int extra = size - p2;
    int v;
    if (rank < 2 * extra) {
        if (rank % 2 == 0) {
            if ((rc = cbp_send(acc, count, dt, rank + 1, CBP_TAG_ALLREDUCE, comm)))
                goto out;
            v = -1;
        } else {
            if ((rc = cbp_recv(other, count, dt, rank - 1, CBP_TAG_ALLREDUCE, comm,
                               MPI_STATUS_IGNORE)))
                goto out;
            MPI_Reduce_local(other, acc, count, dt, op);
            v = rank / 2;
        }
    } else {
        v = rank - extra;
    }
    for (int d = 1; d < p2 && v >= 0; d <<= 1) {
        int vp = v ^ d;
        int peer = vp < extra ? 2 * vp + 1 : vp + extra;
        MPI_Request req;
        if ((rc = cbp_irecv(other, count, dt, peer, CBP_TAG_ALLREDUCE, comm, &req)) ||
            (rc = cbp_send(acc, count, dt, peer, CBP_TAG_ALLREDUCE, comm)) ||
            (rc = MPI_Wait(&req, MPI_STATUS_IGNORE)))
            goto out;
        if (rank < peer) {
            /* lower rank's data goes first: other = acc (op) other, then swap roles */
            MPI_Reduce_local(acc, other, count, dt, op);
            char *x = acc;
            acc = other;
            other = x;
        } else {
            MPI_Reduce_local(other, acc, count, dt, op);
        }
    }
    if (rank < 2 * extra) {
        if (rank % 2 == 0) {
            if ((rc = cbp_recv(rbuf, count, dt, rank + 1, CBP_TAG_ALLREDUCE, comm,
                               MPI_STATUS_IGNORE)))
                goto out;
            acc = rbuf;
        } else if ((rc = cbp_send(acc, count, dt, rank - 1, CBP_TAG_ALLREDUCE, comm))) {
            goto out;
        }
    }
    if (acc != (char *)rbuf)
        cbp_copy(rbuf, acc, dt, count);
out:
    free(work);
    return rc;
}

/* Offset and length of block b of a vector split in size blocks (early blocks first). */
static void ring_block(int b, int split, int early, int late, int *off, int *len)
{
    *off = b < split ? b * early : b * late + split;
    *len = b < split ? early : late;
}

/* Mirrors ompi_coll_base_allreduce_intra_ring (nphases == 1) and
 * ompi_coll_base_allreduce_intra_ring_segmented: a ring reduce-scatter (each block split
 * in nphases pieces, one ring pass per piece) followed by a ring allgather of the whole
 * blocks. */
static int allreduce_ring_phases(const void *sbuf, void *rbuf, int count, MPI_Datatype dt,
                                 MPI_Op op, MPI_Comm comm, int nphases, int max_piece)
{
    int rank, size, rc = MPI_SUCCESS;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    int split, early, late;
    cbp_blockcount(count, size, &split, &early, &late);
    char *in[2] = {alloc_elems(dt, max_piece), NULL};
    if (size > 2)
        in[1] = alloc_elems(dt, max_piece);
    if (in[0] == NULL || (size > 2 && in[1] == NULL)) {
        rc = MPI_ERR_NO_MEM;
        goto out;
    }
    cbp_copy(rbuf, sbuf, dt, count);
    char *r = rbuf;
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    for (int ph = 0; ph < nphases; ph++) {
        MPI_Request req[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
        int b = 0, off, len, psplit, pearly, plate;
        /* piece ph of block blk */
#define PIECE(blk, poff, plen)                                                        \
        do {                                                                          \
            ring_block((blk), split, early, late, &off, &len);                        \
            cbp_blockcount(len, nphases, &psplit, &pearly, &plate);                    \
            (plen) = ph < psplit ? pearly : plate;                                     \
            (poff) = off + (ph < psplit ? ph * pearly : ph * plate + psplit);          \
        } while (0)
        int poff, plen;
        if ((rc = cbp_irecv(in[b], max_piece, dt, left, CBP_TAG_ALLREDUCE, comm, &req[b])))
            goto out;
        PIECE(rank, poff, plen);
        if ((rc = cbp_send(r + cbp_span(dt, poff), plen, dt, right, CBP_TAG_ALLREDUCE, comm)))
            goto out;
        for (int k = 2; k < size; k++) {
            int blk = (rank + size - k + 1) % size;
            b ^= 1;
            if ((rc = cbp_irecv(in[b], max_piece, dt, left, CBP_TAG_ALLREDUCE, comm, &req[b])) ||
                (rc = MPI_Wait(&req[b ^ 1], MPI_STATUS_IGNORE)))
                goto out;
            PIECE(blk, poff, plen);
            MPI_Reduce_local(in[b ^ 1], r + cbp_span(dt, poff), plen, dt, op);
            if ((rc = cbp_send(r + cbp_span(dt, poff), plen, dt, right, CBP_TAG_ALLREDUCE,
                               comm)))
                goto out;
        }
        if ((rc = MPI_Wait(&req[b], MPI_STATUS_IGNORE)))
            goto out;
        PIECE((rank + 1) % size, poff, plen);
        MPI_Reduce_local(in[b], r + cbp_span(dt, poff), plen, dt, op);
#undef PIECE
    }
    /* allgather: pass the completed blocks around the ring */
    for (int k = 0; k < size - 1; k++) {
        int rblk = (rank + size - k) % size, sblk = (rank + 1 + size - k) % size;
        int soff, slen, roff, rlen;
        ring_block(sblk, split, early, late, &soff, &slen);
        ring_block(rblk, split, early, late, &roff, &rlen);
        (void)rlen;
        if ((rc = cbp_sendrecv(r + cbp_span(dt, soff), slen, dt, right, r + cbp_span(dt, roff),
                               early, dt, left, CBP_TAG_ALLREDUCE, comm, NULL)))
            goto out;
    }
out:
    free(in[0]);
    free(in[1]);
    return rc;
}

/* Mirrors ompi_coll_base_allreduce_intra_ring: recursive doubling when count < size. */
static int allreduce_ring(const void *sbuf, void *rbuf, int count, MPI_Datatype dt, MPI_Op op,
                          MPI_Comm comm)
{
    int size;
    MPI_Comm_size(comm, &size);
    if (size == 1) {
        cbp_copy(rbuf, sbuf, dt, count);
        return MPI_SUCCESS;
    }
    if (count < size)
        return allreduce_recursive_doubling(sbuf, rbuf, count, dt, op, comm);
    int split, early, late;
    cbp_blockcount(count, size, &split, &early, &late);
    return allreduce_ring_phases(sbuf, rbuf, count, dt, op, comm, 1, early);
}

/* Mirrors ompi_coll_base_allreduce_intra_ring_segmented: plain ring when
 * count < size * segcount (always the case with the forced default segment size 0). */
static int allreduce_ring_segmented(const void *sbuf, void *rbuf, int count, MPI_Datatype dt,
                                    MPI_Op op, MPI_Comm comm, int segsize)
{
    int size;
    MPI_Comm_size(comm, &size);
    if (size == 1) {
        cbp_copy(rbuf, sbuf, dt, count);
        return MPI_SUCCESS;
    }
    int seg = cbp_segcount(segsize, cbp_type_size(dt), count);
    if ((long long)count < (long long)size * seg)
        return allreduce_ring(sbuf, rbuf, count, dt, op, comm);
    int nphases = count / (size * seg);
    int rest = count % (size * seg);
    if (rest >= size && rest > (size * seg) / 2)
        nphases++;
    int split, early, late, psplit, pearly, plate;
    cbp_blockcount(count, size, &split, &early, &late);
    cbp_blockcount(early, nphases, &psplit, &pearly, &plate);
    return allreduce_ring_phases(sbuf, rbuf, count, dt, op, comm, nphases, pearly);
}

/* Mirrors ompi_coll_base_allreduce_intra_redscat_allgather (Rabenseifner): fold to a
 * power of two, reduce-scatter by recursive halving, allgather by recursive doubling,
 * unfold. Basic linear when count < that power of two or the op is not commutative. */
static int allreduce_rabenseifner(const void *sbuf, void *rbuf, int count, MPI_Datatype dt,
                                  MPI_Op op, MPI_Comm comm);

/* Mirrors ompi_coll_base_allreduce_intra_basic_linear: linear reduce to 0, then linear
 * bcast from 0. */
static int allreduce_linear(const void *sbuf, void *rbuf, int count, MPI_Datatype dt,
                            MPI_Op op, MPI_Comm comm)
{
    int rc = reduce_linear(sbuf, rbuf, count, dt, op, 0, comm);
    if (rc)
        return rc;
    return cbp_bcast(rbuf, count, dt, 0, comm, CBP_BCAST_BASIC_LINEAR, 0, 0);
}

static int allreduce_rabenseifner(const void *sbuf, void *rbuf, int count, MPI_Datatype dt,
                                  MPI_Op op, MPI_Comm comm)
{
    int rank, size, rc = MPI_SUCCESS;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    int nsteps = cbp_floor_log2(size);
    int p2 = 1 << nsteps;
    if (count < p2 || !is_commutative(op))
        return allreduce_linear(sbuf, rbuf, count, dt, op, comm);
    int rem = size - p2;
    char *res = rbuf;
    char *tmp = alloc_elems(dt, count);
    int *ri = malloc(sizeof(int) * (size_t)(nsteps + 1)), *si = malloc(sizeof(int) * (size_t)(nsteps + 1));
    int *rn = malloc(sizeof(int) * (size_t)(nsteps + 1)), *sn = malloc(sizeof(int) * (size_t)(nsteps + 1));
    if (tmp == NULL || ri == NULL || si == NULL || rn == NULL || sn == NULL) {
        rc = MPI_ERR_NO_MEM;
        goto out;
    }
    cbp_copy(res, sbuf, dt, count);
    int v;
    if (rank < 2 * rem) {
        int lo = count / 2, hi = count - lo;
        if (rank % 2 != 0) {
            if ((rc = cbp_sendrecv(res, lo, dt, rank - 1, tmp + cbp_span(dt, lo), hi, dt,
                                   rank - 1, CBP_TAG_ALLREDUCE, comm, NULL)))
                goto out;
            MPI_Reduce_local(tmp + cbp_span(dt, lo), res + cbp_span(dt, lo), hi, dt, op);
            if ((rc = cbp_send(res + cbp_span(dt, lo), hi, dt, rank - 1, CBP_TAG_ALLREDUCE,
                               comm)))
                goto out;
            v = -1;
        } else {
            if ((rc = cbp_sendrecv(res + cbp_span(dt, lo), hi, dt, rank + 1, tmp, lo, dt,
                                   rank + 1, CBP_TAG_ALLREDUCE, comm, NULL)))
                goto out;
            MPI_Reduce_local(tmp, res, lo, dt, op);
            if ((rc = cbp_recv(res + cbp_span(dt, lo), hi, dt, rank + 1, CBP_TAG_ALLREDUCE,
                               comm, MPI_STATUS_IGNORE)))
                goto out;
            v = rank / 2;
        }
    } else {
        v = rank - rem;
    }
    if (v != -1) {
        int step = 0, w = count;
        si[0] = ri[0] = 0;
        for (int mask = 1; mask < p2; mask <<= 1) {
            int peer = fold_real(v ^ mask, rem);
            if (rank < peer) {
                rn[step] = w / 2;
                sn[step] = w - rn[step];
                si[step] = ri[step] + rn[step];
            } else {
                sn[step] = w / 2;
                rn[step] = w - sn[step];
                ri[step] = si[step] + sn[step];
            }
            if ((rc = cbp_sendrecv(res + cbp_span(dt, si[step]), sn[step], dt, peer,
                                   tmp + cbp_span(dt, ri[step]), rn[step], dt, peer,
                                   CBP_TAG_ALLREDUCE, comm, NULL)))
                goto out;
            MPI_Reduce_local(tmp + cbp_span(dt, ri[step]), res + cbp_span(dt, ri[step]),
                             rn[step], dt, op);
            if (step + 1 < nsteps) {
                ri[step + 1] = ri[step];
                si[step + 1] = ri[step];
                w = rn[step];
                step++;
            }
        }
        /* allgather: the halving steps in reverse, each rank sends what it reduced */
        step = nsteps - 1;
        for (int mask = p2 >> 1; mask > 0; mask >>= 1, step--) {
            int peer = fold_real(v ^ mask, rem);
            if ((rc = cbp_sendrecv(res + cbp_span(dt, ri[step]), rn[step], dt, peer,
                                   res + cbp_span(dt, si[step]), sn[step], dt, peer,
                                   CBP_TAG_ALLREDUCE, comm, NULL)))
                goto out;
        }
    }
    if (rank < 2 * rem) {
        if (rank % 2 != 0)
            rc = cbp_recv(res, count, dt, rank - 1, CBP_TAG_ALLREDUCE, comm, MPI_STATUS_IGNORE);
        else
            rc = cbp_send(res, count, dt, rank + 1, CBP_TAG_ALLREDUCE, comm);
    }
out:
    free(tmp);
    free(ri);
    free(si);
    free(rn);
    free(sn);
    return rc;
}

int cbp_allreduce(const void *sbuf, void *rbuf, int count, MPI_Datatype dt, MPI_Op op,
                  MPI_Comm comm, int alg, int segsize, int fanout)
{
    (void)fanout;
    if (segsize < 0)
        return MPI_ERR_ARG;
    switch (alg) {
    case CBP_ALLREDUCE_BASIC_LINEAR: /* ompi_coll_base_allreduce_intra_basic_linear */
        return allreduce_linear(sbuf, rbuf, count, dt, op, comm);
    case CBP_ALLREDUCE_RECURSIVE_DOUBLING:
        /* ompi_coll_base_allreduce_intra_recursivedoubling */
        return allreduce_recursive_doubling(sbuf, rbuf, count, dt, op, comm);
    case CBP_ALLREDUCE_RING: /* ompi_coll_base_allreduce_intra_ring */
        return allreduce_ring(sbuf, rbuf, count, dt, op, comm);
    case CBP_ALLREDUCE_SEGMENTED_RING: /* ompi_coll_base_allreduce_intra_ring_segmented */
        return allreduce_ring_segmented(sbuf, rbuf, count, dt, op, comm, segsize);
    case CBP_ALLREDUCE_RABENSEIFNER: /* ompi_coll_base_allreduce_intra_redscat_allgather */
        return allreduce_rabenseifner(sbuf, rbuf, count, dt, op, comm);
    case CBP_ALLREDUCE_NONOVERLAPPING:
        /* ompi_coll_base_allreduce_intra_nonoverlapping: the communicator's own MPI_Reduce
         * to 0 and MPI_Bcast from 0, i.e. what coll/tuned's fixed rules pick for them */
        {
            int rc = cbp_reduce_fixed(sbuf, rbuf, count, dt, op, 0, comm);
            if (rc)
                return rc;
            return cbp_bcast_fixed(rbuf, count, dt, 0, comm);
        }
    default:
        return MPI_ERR_ARG;
    }
}
