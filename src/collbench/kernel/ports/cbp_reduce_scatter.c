/*
 * Reduce_scatter and reduce_scatter_block: ports of Open MPI 5.0.x coll/base
 * (coll_base_reduce_scatter.c, coll_base_reduce_scatter_block.c) as coll/tuned runs them
 * when forced. None of them uses the segment size or the fanout.
 *
 * Reductions use MPI_Reduce_local(in, inout), i.e. inout = in (op) inout, the operand order
 * of Open MPI's ompi_op_reduce(op, source, target). Blocks that Open MPI sends with an
 * indexed datatype are packed into one contiguous message of the same size.
 */
#include "cbp_internal.h"

#include <stdlib.h>
#include <string.h>

#define TAG CBP_TAG_REDUCE_SCATTER
#define BTAG CBP_TAG_REDUCE_SCATTER_BLOCK

/* Real rank of virtual rank v when the first 2r ranks are folded in pairs onto the odd one
 * (r = P - largest power of two <= P). */
static int odd_fold_real(int v, int rem)
{
    return v < rem ? 2 * v + 1 : v + rem;
}

/* ------------------------------------------------------------------ reduce_scatter */

/* Mirrors ompi_coll_base_reduce_scatter_intra_nonoverlapping: the communicator's own
 * MPI_Reduce of the whole vector to 0 (fixed rules), then its MPI_Scatterv (coll/basic's
 * linear one). */
static int rs_nonoverlapping(const void *sbuf, void *rbuf, const int *rcounts,
                             MPI_Datatype dt, MPI_Op op, MPI_Comm comm)
{
    int rank, size, rc;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    int total = 0;
    int *displs = malloc(sizeof(int) * (size_t)size);
    if (displs == NULL)
        return MPI_ERR_NO_MEM;
    for (int i = 0; i < size; i++) {
        displs[i] = total;
        total += rcounts[i];
    }
    char *tmp = NULL;
    if (rank == 0 && (tmp = cbp_alloc(dt, total)) == NULL) {
        free(displs);
        return MPI_ERR_NO_MEM;
    }
    rc = cbp_reduce_fixed(sbuf, tmp, total, dt, op, 0, comm);
    if (rc == MPI_SUCCESS)
        rc = cbp_scatterv_linear(tmp, rcounts, displs, dt, rbuf, rcounts[rank], dt, 0, comm);
    free(tmp);
    free(displs);
    return rc;
}

/* Mirrors ompi_coll_base_reduce_scatter_intra_basic_recursivehalving: the first 2r ranks
 * fold in pairs (even sends its whole vector to odd); the 2^k others halve the vector
 * recursively (largest distance first, blocks of folded pairs counted together, empty
 * halves not sent); the odd ranks finally hand the even ones their blocks. */
static int rs_recursive_halving(const void *sbuf, void *rbuf, const int *rcounts,
                                MPI_Datatype dt, MPI_Op op, MPI_Comm comm)
{
    int rank, size, rc = MPI_SUCCESS;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    int *disps = malloc(sizeof(int) * (size_t)size);
    if (disps == NULL)
        return MPI_ERR_NO_MEM;
    int count = 0;
    for (int i = 0; i < size; i++) {
        disps[i] = count;
        count += rcounts[i];
    }
    char *recv = NULL, *res = NULL;
    int *vcounts = NULL, *vdisps = NULL;
    if (count == 0)
        goto out;
    recv = cbp_alloc(dt, count);
    res = cbp_alloc(dt, count);
    if (recv == NULL || res == NULL) {
        rc = MPI_ERR_NO_MEM;
        goto out;
    }
    cbp_copy(res, sbuf, dt, count);
    int p2 = cbp_next_pow2_above(size) >> 1, rem = size - p2, v;
    if (rank < 2 * rem) {
        if (rank % 2 == 0) {
            if ((rc = cbp_send(res, count, dt, rank + 1, TAG, comm)))
                goto out;
            v = -1;
        } else {
            if ((rc = cbp_recv(recv, count, dt, rank - 1, TAG, comm, MPI_STATUS_IGNORE)))
                goto out;
            MPI_Reduce_local(recv, res, count, dt, op);
            v = rank / 2;
        }
    } else {
        v = rank - rem;
    }
    if (v >= 0) {
        vcounts = malloc(sizeof(int) * (size_t)p2);
        vdisps = malloc(sizeof(int) * (size_t)p2);
        if (vcounts == NULL || vdisps == NULL) {
            rc = MPI_ERR_NO_MEM;
            goto out;
        }
        for (int i = 0; i < p2; i++)
            vcounts[i] = i < rem ? rcounts[2 * i] + rcounts[2 * i + 1] : rcounts[i + rem];
        vdisps[0] = 0;
        for (int i = 1; i < p2; i++)
            vdisps[i] = vdisps[i - 1] + vcounts[i - 1];
        int sidx = 0, ridx = 0, last = p2;
        for (int mask = p2 >> 1; mask > 0; mask >>= 1) {
            int vpeer = v ^ mask, peer = odd_fold_real(vpeer, rem);
            int sn = 0, rn = 0;
            if (v < vpeer) {
                sidx = ridx + mask;
                for (int i = sidx; i < last; i++)
                    sn += vcounts[i];
                for (int i = ridx; i < sidx; i++)
                    rn += vcounts[i];
            } else {
                ridx = sidx + mask;
                for (int i = sidx; i < ridx; i++)
                    sn += vcounts[i];
                for (int i = ridx; i < last; i++)
                    rn += vcounts[i];
            }
            MPI_Request req = MPI_REQUEST_NULL;
            if (rn > 0 && (rc = cbp_irecv(recv + cbp_span(dt, vdisps[ridx]), rn, dt, peer, TAG,
                                          comm, &req)))
                goto out;
            if (sn > 0 &&
                (rc = cbp_send(res + cbp_span(dt, vdisps[sidx]), sn, dt, peer, TAG, comm)))
                goto out;
            if (rn > 0) {
                if ((rc = MPI_Wait(&req, MPI_STATUS_IGNORE)))
                    goto out;
                MPI_Reduce_local(recv + cbp_span(dt, vdisps[ridx]),
                                 res + cbp_span(dt, vdisps[ridx]), rn, dt, op);
            }
            sidx = ridx;
            last = ridx + mask;
        }
        if (rcounts[rank] != 0)
            cbp_copy(rbuf, res + cbp_span(dt, disps[rank]), dt, rcounts[rank]);
    }
    if (rank < 2 * rem) {
        if (rank % 2 == 0) {
            if (rcounts[rank])
                rc = cbp_recv(rbuf, rcounts[rank], dt, rank + 1, TAG, comm, MPI_STATUS_IGNORE);
        } else if (rcounts[rank - 1]) {
            rc = cbp_send(res + cbp_span(dt, disps[rank - 1]), rcounts[rank - 1], dt, rank - 1,
                          TAG, comm);
        }
    }
out:
    free(disps);
    free(recv);
    free(res);
    free(vcounts);
    free(vdisps);
    return rc;
}

/* Mirrors ompi_coll_base_reduce_scatter_intra_ring: P - 1 steps around the ring; at step k
 * the partial sum of block rank - k is received from the left (into a buffer of the largest
 * block), combined with the own contribution and passed to the right, overlapped with the
 * next receive; the last block to arrive is the own one. */
static int rs_ring(const void *sbuf, void *rbuf, const int *rcounts, MPI_Datatype dt,
                   MPI_Op op, MPI_Comm comm)
{
    int rank, size, rc = MPI_SUCCESS;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    int *displs = malloc(sizeof(int) * (size_t)size);
    if (displs == NULL)
        return MPI_ERR_NO_MEM;
    int total = 0, maxb = 0;
    for (int i = 0; i < size; i++) {
        displs[i] = total;
        total += rcounts[i];
        if (rcounts[i] > maxb)
            maxb = rcounts[i];
    }
    char *acc = NULL, *in[2] = {NULL, NULL};
    if (size == 1) {
        cbp_copy(rbuf, sbuf, dt, total);
        goto out;
    }
    acc = cbp_alloc(dt, total);
    in[0] = cbp_alloc(dt, maxb);
    if (size > 2)
        in[1] = cbp_alloc(dt, maxb);
    if (acc == NULL || in[0] == NULL || (size > 2 && in[1] == NULL)) {
        rc = MPI_ERR_NO_MEM;
        goto out;
    }
    cbp_copy(acc, sbuf, dt, total);
    int right = (rank + 1) % size, left = cbp_mod(rank - 1, size), b = 0;
    MPI_Request req[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
    if ((rc = cbp_irecv(in[b], maxb, dt, left, TAG, comm, &req[b])) ||
        (rc = cbp_send(acc + cbp_span(dt, displs[left]), rcounts[left], dt, right, TAG, comm)))
        goto out;
    for (int k = 2; k < size; k++) {
        int blk = cbp_mod(rank - k, size);
        b ^= 1;
        if ((rc = cbp_irecv(in[b], maxb, dt, left, TAG, comm, &req[b])) ||
            (rc = MPI_Wait(&req[b ^ 1], MPI_STATUS_IGNORE)))
            goto out;
        char *p = acc + cbp_span(dt, displs[blk]);
        MPI_Reduce_local(in[b ^ 1], p, rcounts[blk], dt, op);
        if ((rc = cbp_send(p, rcounts[blk], dt, right, TAG, comm)))
            goto out;
    }
    if ((rc = MPI_Wait(&req[b], MPI_STATUS_IGNORE)))
        goto out;
    MPI_Reduce_local(in[b], acc + cbp_span(dt, displs[rank]), rcounts[rank], dt, op);
    cbp_copy(rbuf, acc + cbp_span(dt, displs[rank]), dt, rcounts[rank]);
out:
    free(displs);
    free(acc);
    free(in[0]);
    free(in[1]);
    return rc;
}

/* Elements of the blocks of virtual ranks lo..hi (a folded pair counts both blocks). */
static int fold_sum(const int *counts, const int *displs, int rem, int lo, int hi)
{
    lo = lo < rem ? 2 * lo : lo + rem;
    hi = hi < rem ? 2 * hi + 1 : hi + rem;
    return displs[hi] + counts[hi] - displs[lo];
}

/* Mirrors ompi_coll_base_reduce_scatter_intra_butterfly: the first 2r ranks fold in pairs
 * onto the odd one; the 2^k others run a butterfly (distance 1, 2, 4, ...) on halves of the
 * vector, swapping the roles of the two buffers so that the lower rank's data stays on the
 * left of the op; then each sends its result block(s) to the rank given by the mirror
 * permutation of its virtual rank (and the folded even rank its block). */
static int rs_butterfly(const void *sbuf, void *rbuf, const int *rcounts, MPI_Datatype dt,
                        MPI_Op op, MPI_Comm comm)
{
    int rank, size, rc = MPI_SUCCESS;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    if (size < 2)
        return MPI_SUCCESS;
    int *displs = malloc(sizeof(int) * (size_t)size);
    if (displs == NULL)
        return MPI_ERR_NO_MEM;
    int total = 0;
    for (int i = 0; i < size; i++) {
        displs[i] = total;
        total += rcounts[i];
    }
    char *buf[2] = {cbp_alloc(dt, total), cbp_alloc(dt, total)};
    char *psend = buf[0], *precv = buf[1];
    if (psend == NULL || precv == NULL) {
        rc = MPI_ERR_NO_MEM;
        goto out;
    }
    cbp_copy(psend, sbuf, dt, total);
    int p2 = cbp_next_pow2_above(size) >> 1, rem = size - p2, log2 = cbp_floor_log2(p2), v;
    if (rank < 2 * rem) {
        if (rank % 2 == 0) {
            if ((rc = cbp_send(psend, total, dt, rank + 1, TAG, comm)))
                goto out;
            v = -1;
        } else {
            if ((rc = cbp_recv(precv, total, dt, rank - 1, TAG, comm, MPI_STATUS_IGNORE)))
                goto out;
            MPI_Reduce_local(precv, psend, total, dt, op);
            v = rank / 2;
        }
    } else {
        v = rank - rem;
    }
    if (v != -1) {
        int nblocks = p2, sidx = 0, ridx = 0;
        for (int mask = 1; mask < p2; mask <<= 1) {
            int vpeer = v ^ mask, peer = odd_fold_real(vpeer, rem);
            nblocks /= 2;
            if ((v & mask) == 0)
                sidx += nblocks;
            else
                ridx += nblocks;
            int sn = fold_sum(rcounts, displs, rem, sidx, sidx + nblocks - 1);
            int soff = displs[sidx < rem ? 2 * sidx : rem + sidx];
            int rn = fold_sum(rcounts, displs, rem, ridx, ridx + nblocks - 1);
            int roff = displs[ridx < rem ? 2 * ridx : rem + ridx];
            if ((rc = cbp_sendrecv(psend + cbp_span(dt, soff), sn, dt, peer,
                                   precv + cbp_span(dt, roff), rn, dt, peer, TAG, comm, NULL)))
                goto out;
            if (v < vpeer) {
                MPI_Reduce_local(psend + cbp_span(dt, roff), precv + cbp_span(dt, roff), rn, dt,
                                 op);
                char *x = psend;
                psend = precv;
                precv = x;
            } else {
                MPI_Reduce_local(precv + cbp_span(dt, roff), psend + cbp_span(dt, roff), rn, dt,
                                 op);
            }
            sidx = ridx;
        }
        int vpeer = cbp_mirror(v, log2), peer = odd_fold_real(vpeer, rem);
        int idx = sidx < rem ? 2 * sidx : rem + sidx;
        if (vpeer < rem) {
            /* two blocks: the folded even rank's first, then the odd one's */
            if ((rc = cbp_send(psend + cbp_span(dt, displs[idx]), rcounts[idx], dt, peer - 1,
                               TAG, comm)))
                goto out;
            idx++;
        }
        if (vpeer != v)
            rc = cbp_sendrecv(psend + cbp_span(dt, displs[idx]), rcounts[idx], dt, peer, rbuf,
                              rcounts[rank], dt, peer, TAG, comm, NULL);
        else
            cbp_copy(rbuf, psend + cbp_span(dt, displs[rank]), dt, rcounts[rank]);
    } else {
        int vpeer = cbp_mirror((rank + 1) / 2, log2), peer = odd_fold_real(vpeer, rem);
        rc = cbp_recv(rbuf, rcounts[rank], dt, peer, TAG, comm, MPI_STATUS_IGNORE);
    }
out:
    free(displs);
    free(buf[0]);
    free(buf[1]);
    return rc;
}

int cbp_reduce_scatter(const void *sbuf, void *rbuf, const int *rcounts, MPI_Datatype dt,
                       MPI_Op op, MPI_Comm comm, int alg, int segsize, int fanout)
{
    (void)segsize;
    (void)fanout;
    switch (alg) {
    case CBP_REDUCE_SCATTER_NONOVERLAPPING:
        /* ompi_coll_base_reduce_scatter_intra_nonoverlapping */
        return rs_nonoverlapping(sbuf, rbuf, rcounts, dt, op, comm);
    case CBP_REDUCE_SCATTER_RECURSIVE_HALVING:
        /* ompi_coll_base_reduce_scatter_intra_basic_recursivehalving */
        return rs_recursive_halving(sbuf, rbuf, rcounts, dt, op, comm);
    case CBP_REDUCE_SCATTER_RING: /* ompi_coll_base_reduce_scatter_intra_ring */
        return rs_ring(sbuf, rbuf, rcounts, dt, op, comm);
    case CBP_REDUCE_SCATTER_BUTTERFLY: /* ompi_coll_base_reduce_scatter_intra_butterfly */
        return rs_butterfly(sbuf, rbuf, rcounts, dt, op, comm);
    default:
        return MPI_ERR_ARG;
    }
}

/* ------------------------------------------------------------------ reduce_scatter_block */

/* Mirrors ompi_coll_base_reduce_scatter_block_basic_linear: the communicator's own
 * MPI_Reduce of the P blocks to 0, then its own MPI_Scatter from 0 (both by the fixed
 * rules). */
static int rsb_linear(const void *sbuf, void *rbuf, int rcount, MPI_Datatype dt, MPI_Op op,
                      MPI_Comm comm)
{
    int rank, size, rc;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    int count = rcount * size;
    if (count == 0)
        return MPI_SUCCESS;
    char *tmp = NULL;
    if (rank == 0 && (tmp = cbp_alloc(dt, count)) == NULL)
        return MPI_ERR_NO_MEM;
    rc = cbp_reduce_fixed(sbuf, tmp, count, dt, op, 0, comm);
    if (rc == MPI_SUCCESS)
        rc = cbp_scatter_fixed(tmp, rcount, dt, rbuf, rcount, dt, 0, comm);
    free(tmp);
    return rc;
}

/* The blocks 0 .. root - 1 and root + mask .. P - 1 of a vector of P blocks of rcount
 * elements: (first length, second offset, second length) in elements. */
static void rd_span(int root, int mask, int size, int rcount, int *len0, int *off1, int *len1)
{
    *len0 = rcount * root;
    *len1 = size >= root + mask ? rcount * (size - root - mask) : 0;
    *off1 = size * rcount - *len1;
}

static void pack2(char *out, const char *buf, MPI_Datatype dt, int len0, int off1, int len1)
{
    cbp_copy(out, buf, dt, len0);
    cbp_copy(out + cbp_span(dt, len0), buf + cbp_span(dt, off1), dt, len1);
}

static void unpack2(char *buf, const char *in, MPI_Datatype dt, int len0, int off1, int len1)
{
    cbp_copy(buf, in, dt, len0);
    cbp_copy(buf + cbp_span(dt, off1), in + cbp_span(dt, len0), dt, len1);
}

/* Mirrors ompi_coll_base_reduce_scatter_block_intra_recursivedoubling: at distance
 * mask = 1, 2, 4, ... exchange with rank ^ mask every block outside the partner subtree's
 * range [root, root + mask) (one message of two runs); when P is not a power of two, the
 * ranks whose partner does not exist get the received blocks from a rank of the other
 * half by recursive halving. Received blocks are reduced keeping the lower subtree's data
 * on the left of the op. */
static int rsb_recursive_doubling(const void *sbuf, void *rbuf, int rcount, MPI_Datatype dt,
                                  MPI_Op op, MPI_Comm comm)
{
    int rank, size, rc = MPI_SUCCESS;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    if (rcount == 0 || size < 2)
        return MPI_SUCCESS;
    int total = size * rcount;
    char *tmpbuf = cbp_alloc(dt, total), *tmprecv = cbp_alloc(dt, total);
    char *out = cbp_alloc(dt, total), *in = cbp_alloc(dt, total);
    if (tmpbuf == NULL || tmprecv == NULL || out == NULL || in == NULL) {
        rc = MPI_ERR_NO_MEM;
        goto done;
    }
    cbp_copy(tmpbuf, sbuf, dt, total);
    int commute = cbp_commutative(op);
    for (int mask = 1; mask < size; mask <<= 1) {
        int remote = rank ^ mask;
        int cur_root = rank & ~(mask - 1), remote_root = remote & ~(mask - 1);
        int s0, s1off, s1, r0, r1off, r1;
        rd_span(cur_root, mask, size, rcount, &s0, &s1off, &s1);
        rd_span(remote_root, mask, size, rcount, &r0, &r1off, &r1);
        int received = 0;
        if (remote < size) {
            pack2(out, tmpbuf, dt, s0, s1off, s1);
            if ((rc = cbp_sendrecv(out, s0 + s1, dt, remote, in, r0 + r1, dt, remote, BTAG, comm,
                                   NULL)))
                goto done;
            unpack2(tmprecv, in, dt, r0, r1off, r1);
            received = 1;
        }
        if (remote_root + mask > size) {
            /* ranks [cur_root + mask .. ] of the partner subtree do not all exist: the ones
             * that do pass what they received on to the ones without data */
            int have = size - cur_root - mask;
            for (int hm = mask >> 1; hm > 0; hm >>= 1) {
                int peer = rank ^ hm;
                int troot = rank & ~((hm << 1) - 1);
                if (peer > rank && rank < troot + have && peer >= troot + have) {
                    pack2(out, tmprecv, dt, r0, r1off, r1);
                    if ((rc = cbp_send(out, r0 + r1, dt, peer, BTAG, comm)))
                        goto done;
                } else if (peer < rank && peer < troot + have && rank >= troot + have) {
                    if ((rc = cbp_recv(in, r0 + r1, dt, peer, BTAG, comm, MPI_STATUS_IGNORE)))
                        goto done;
                    unpack2(tmprecv, in, dt, r0, r1off, r1);
                    received = 1;
                }
            }
        }
        if (received) {
            if (commute || remote_root < cur_root) {
                MPI_Reduce_local(tmprecv, tmpbuf, r0, dt, op);
                MPI_Reduce_local(tmprecv + cbp_span(dt, r1off), tmpbuf + cbp_span(dt, r1off), r1,
                                 dt, op);
            } else {
                MPI_Reduce_local(tmpbuf, tmprecv, r0, dt, op);
                MPI_Reduce_local(tmpbuf + cbp_span(dt, r1off), tmprecv + cbp_span(dt, r1off), r1,
                                 dt, op);
                cbp_copy(tmpbuf, tmprecv, dt, r0);
                cbp_copy(tmpbuf + cbp_span(dt, r1off), tmprecv + cbp_span(dt, r1off), dt, r1);
            }
        }
    }
    cbp_copy(rbuf, tmpbuf + cbp_span(dt, rank * rcount), dt, rcount);
done:
    free(tmpbuf);
    free(tmprecv);
    free(out);
    free(in);
    return rc;
}

/* Blocks of virtual ranks a..b counted in rcount units, folded pairs (v <= r) counting
 * two. */
static int range_sum(int a, int b, int r)
{
    if (r < a)
        return b - a + 1;
    if (r > b)
        return 2 * (b - a + 1);
    return 2 * (r - a + 1) + b - r;
}

/* Offset (in blocks) of virtual block i when the first rem are double. */
static int vblock_off(int i, int rem)
{
    return i <= rem - 1 ? 2 * i : rem + i;
}

/* Mirrors ompi_coll_base_reduce_scatter_block_intra_recursivehalving (basic_linear for a
 * non-commutative op): fold the first 2r ranks (even sends to odd), halve the vector
 * recursively among the 2^k others (largest distance first), hand the even ranks their
 * blocks. */
static int rsb_recursive_halving(const void *sbuf, void *rbuf, int rcount, MPI_Datatype dt,
                                 MPI_Op op, MPI_Comm comm)
{
    int rank, size, rc = MPI_SUCCESS;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    if (rcount == 0 || size < 2)
        return MPI_SUCCESS;
    if (!cbp_commutative(op))
        return rsb_linear(sbuf, rbuf, rcount, dt, op, comm);
    int total = size * rcount;
    char *tmpbuf = cbp_alloc(dt, total), *tmprecv = cbp_alloc(dt, total);
    if (tmpbuf == NULL || tmprecv == NULL) {
        rc = MPI_ERR_NO_MEM;
        goto done;
    }
    cbp_copy(tmpbuf, sbuf, dt, total);
    int p2 = cbp_next_pow2_above(size) >> 1, rem = size - p2, v;
    if (rank < 2 * rem) {
        if (rank % 2 == 0) {
            if ((rc = cbp_send(tmpbuf, total, dt, rank + 1, BTAG, comm)))
                goto done;
            v = -1;
        } else {
            if ((rc = cbp_recv(tmprecv, total, dt, rank - 1, BTAG, comm, MPI_STATUS_IGNORE)))
                goto done;
            MPI_Reduce_local(tmprecv, tmpbuf, total, dt, op);
            v = rank / 2;
        }
    } else {
        v = rank - rem;
    }
    if (v != -1) {
        int sidx = 0, ridx = 0, last = p2;
        for (int mask = p2 >> 1; mask > 0; mask >>= 1) {
            int vpeer = v ^ mask, peer = odd_fold_real(vpeer, rem);
            int sn, rn;
            if (v < vpeer) {
                sidx = ridx + mask;
                sn = rcount * range_sum(sidx, last - 1, rem - 1);
                rn = rcount * range_sum(ridx, sidx - 1, rem - 1);
            } else {
                ridx = sidx + mask;
                sn = rcount * range_sum(sidx, ridx - 1, rem - 1);
                rn = rcount * range_sum(ridx, last - 1, rem - 1);
            }
            int roff = rcount * vblock_off(ridx, rem), soff = rcount * vblock_off(sidx, rem);
            MPI_Request req = MPI_REQUEST_NULL;
            if (rn > 0 && (rc = cbp_irecv(tmprecv + cbp_span(dt, roff), rn, dt, peer, BTAG, comm,
                                          &req)))
                goto done;
            if (sn > 0 &&
                (rc = cbp_send(tmpbuf + cbp_span(dt, soff), sn, dt, peer, BTAG, comm)))
                goto done;
            if (rn > 0) {
                if ((rc = MPI_Wait(&req, MPI_STATUS_IGNORE)))
                    goto done;
                MPI_Reduce_local(tmprecv + cbp_span(dt, roff), tmpbuf + cbp_span(dt, roff), rn,
                                 dt, op);
            }
            sidx = ridx;
            last = ridx + mask;
        }
        cbp_copy(rbuf, tmpbuf + cbp_span(dt, rank * rcount), dt, rcount);
    }
    if (rank < 2 * rem) {
        if (rank % 2 == 0)
            rc = cbp_recv(rbuf, rcount, dt, rank + 1, BTAG, comm, MPI_STATUS_IGNORE);
        else
            rc = cbp_send(tmpbuf + cbp_span(dt, (rank - 1) * rcount), rcount, dt, rank - 1, BTAG,
                          comm);
    }
done:
    free(tmpbuf);
    free(tmprecv);
    return rc;
}

/* Mirrors ompi_coll_base_reduce_scatter_block_intra_butterfly_pof2 (P a power of two):
 * blocks permuted by the mirror permutation, then a butterfly on halves of the vector. */
static int rsb_butterfly_pof2(const void *sbuf, void *rbuf, int rcount, MPI_Datatype dt,
                              MPI_Op op, MPI_Comm comm)
{
    int rank, size, rc = MPI_SUCCESS;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    int total = size * rcount;
    char *buf[2] = {cbp_alloc(dt, total), cbp_alloc(dt, total)};
    char *psend = buf[0], *precv = buf[1];
    if (psend == NULL || precv == NULL) {
        rc = MPI_ERR_NO_MEM;
        goto done;
    }
    int log2 = cbp_floor_log2(size);
    for (int i = 0; i < size; i++)
        cbp_copy(psend + cbp_span(dt, cbp_mirror(i, log2) * rcount),
                 (const char *)sbuf + cbp_span(dt, i * rcount), dt, rcount);
    int n = total, sidx = 0, ridx = 0;
    for (int mask = 1; mask < size; mask <<= 1) {
        int peer = rank ^ mask;
        n /= 2;
        if ((rank & mask) == 0)
            sidx += n;
        else
            ridx += n;
        if ((rc = cbp_sendrecv(psend + cbp_span(dt, sidx), n, dt, peer, precv + cbp_span(dt, ridx),
                               n, dt, peer, BTAG, comm, NULL)))
            goto done;
        if (rank < peer) {
            MPI_Reduce_local(psend + cbp_span(dt, ridx), precv + cbp_span(dt, ridx), n, dt, op);
            char *x = psend;
            psend = precv;
            precv = x;
        } else {
            MPI_Reduce_local(precv + cbp_span(dt, ridx), psend + cbp_span(dt, ridx), n, dt, op);
        }
        sidx = ridx;
    }
    cbp_copy(rbuf, psend + cbp_span(dt, ridx), dt, rcount);
done:
    free(buf[0]);
    free(buf[1]);
    return rc;
}

/* Mirrors ompi_coll_base_reduce_scatter_block_intra_butterfly: the power-of-two version
 * when P is one; otherwise fold the first 2r ranks onto the odd ones, butterfly on halves
 * (folded pairs' blocks counted double), then send results by the mirror permutation. */
static int rsb_butterfly(const void *sbuf, void *rbuf, int rcount, MPI_Datatype dt,
                         MPI_Op op, MPI_Comm comm)
{
    int rank, size, rc = MPI_SUCCESS;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    if (rcount == 0 || size < 2)
        return MPI_SUCCESS;
    if (!(size & (size - 1)))
        return rsb_butterfly_pof2(sbuf, rbuf, rcount, dt, op, comm);
    int total = size * rcount;
    char *buf[2] = {cbp_alloc(dt, total), cbp_alloc(dt, total)};
    char *psend = buf[0], *precv = buf[1];
    if (psend == NULL || precv == NULL) {
        rc = MPI_ERR_NO_MEM;
        goto done;
    }
    cbp_copy(psend, sbuf, dt, total);
    int p2 = cbp_next_pow2_above(size) >> 1, rem = size - p2, log2 = cbp_floor_log2(p2), v;
    if (rank < 2 * rem) {
        if (rank % 2 == 0) {
            if ((rc = cbp_send(psend, total, dt, rank + 1, BTAG, comm)))
                goto done;
            v = -1;
        } else {
            if ((rc = cbp_recv(precv, total, dt, rank - 1, BTAG, comm, MPI_STATUS_IGNORE)))
                goto done;
            MPI_Reduce_local(precv, psend, total, dt, op);
            v = rank / 2;
        }
    } else {
        v = rank - rem;
    }
    if (v != -1) {
        int nblocks = p2, sidx = 0, ridx = 0;
        for (int mask = 1; mask < p2; mask <<= 1) {
            int vpeer = v ^ mask, peer = odd_fold_real(vpeer, rem);
            nblocks /= 2;
            if ((v & mask) == 0)
                sidx += nblocks;
            else
                ridx += nblocks;
            int sn = rcount * range_sum(sidx, sidx + nblocks - 1, rem - 1);
            int rn = rcount * range_sum(ridx, ridx + nblocks - 1, rem - 1);
            int soff = rcount * vblock_off(sidx, rem), roff = rcount * vblock_off(ridx, rem);
            if ((rc = cbp_sendrecv(psend + cbp_span(dt, soff), sn, dt, peer,
                                   precv + cbp_span(dt, roff), rn, dt, peer, BTAG, comm, NULL)))
                goto done;
            if (v < vpeer) {
                MPI_Reduce_local(psend + cbp_span(dt, roff), precv + cbp_span(dt, roff), rn, dt,
                                 op);
                char *x = psend;
                psend = precv;
                precv = x;
            } else {
                MPI_Reduce_local(precv + cbp_span(dt, roff), psend + cbp_span(dt, roff), rn, dt,
                                 op);
            }
            sidx = ridx;
        }
        int vpeer = cbp_mirror(v, log2), peer = odd_fold_real(vpeer, rem);
        int soff = rcount * vblock_off(sidx, rem);
        if (vpeer < rem) {
            if ((rc = cbp_send(psend + cbp_span(dt, soff), rcount, dt, peer - 1, BTAG, comm)))
                goto done;
            soff += rcount;
        }
        if (vpeer != v)
            rc = cbp_sendrecv(psend + cbp_span(dt, soff), rcount, dt, peer, rbuf, rcount, dt,
                              peer, BTAG, comm, NULL);
        else
            cbp_copy(rbuf, psend + cbp_span(dt, soff), dt, rcount);
    } else {
        int vpeer = cbp_mirror((rank + 1) / 2, log2), peer = odd_fold_real(vpeer, rem);
        rc = cbp_recv(rbuf, rcount, dt, peer, BTAG, comm, MPI_STATUS_IGNORE);
    }
done:
    free(buf[0]);
    free(buf[1]);
    return rc;
}

int cbp_reduce_scatter_block(const void *sbuf, void *rbuf, int rcount, MPI_Datatype dt,
                             MPI_Op op, MPI_Comm comm, int alg, int segsize, int fanout)
{
    (void)segsize;
    (void)fanout;
    switch (alg) {
    case CBP_REDUCE_SCATTER_BLOCK_BASIC_LINEAR:
        /* ompi_coll_base_reduce_scatter_block_basic_linear */
        return rsb_linear(sbuf, rbuf, rcount, dt, op, comm);
    case CBP_REDUCE_SCATTER_BLOCK_RECURSIVE_DOUBLING:
        /* ompi_coll_base_reduce_scatter_block_intra_recursivedoubling */
        return rsb_recursive_doubling(sbuf, rbuf, rcount, dt, op, comm);
    case CBP_REDUCE_SCATTER_BLOCK_RECURSIVE_HALVING:
        /* ompi_coll_base_reduce_scatter_block_intra_recursivehalving */
        return rsb_recursive_halving(sbuf, rbuf, rcount, dt, op, comm);
    case CBP_REDUCE_SCATTER_BLOCK_BUTTERFLY:
        /* ompi_coll_base_reduce_scatter_block_intra_butterfly */
        return rsb_butterfly(sbuf, rbuf, rcount, dt, op, comm);
    default:
        return MPI_ERR_ARG;
    }
}
