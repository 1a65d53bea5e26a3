/*
 * Broadcast: ports of Open MPI 5.0.x coll/base bcast algorithms (coll_base_bcast.c), as
 * coll/tuned runs them when forced (coll_tuned_bcast_algorithm = id, segment size from
 * coll_tuned_bcast_algorithm_segmentsize, default 0; chain fanout from
 * coll_tuned_bcast_algorithm_chain_fanout, default 4; k-nomial radix from
 * coll_tuned_bcast_algorithm_knomial_radix, default 4).
 */
#include "cbp_internal.h"

#include <stdlib.h>

#define TAG CBP_TAG_BCAST

/* Segmented broadcast down a tree; mirrors ompi_coll_base_bcast_intra_generic.
 * The root sends each segment to all children (non-blocking) and waits for those sends
 * before the next segment; an inner node keeps one receive ahead (double buffering) and
 * forwards each segment once it has arrived; a leaf keeps one receive ahead. */
static int bcast_tree(char *buf, int count, MPI_Datatype dt, MPI_Comm comm,
                      int segcount, const cbp_tree_t *t)
{
    int rank, rc = MPI_SUCCESS;
    MPI_Comm_rank(comm, &rank);
    if (count <= 0)
        return MPI_SUCCESS;
    int nseg = (count + segcount - 1) / segcount;
    size_t seg_bytes = cbp_span(dt, segcount);
    int last = count - (nseg - 1) * segcount;
    MPI_Request sreq[CBP_MAX_CHILDREN];
    MPI_Request rreq[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};

    if (rank == t->root) {
        for (int s = 0; s < nseg; s++) {
            int n = s == nseg - 1 ? last : segcount;
            char *p = buf + (size_t)s * seg_bytes;
            for (int c = 0; c < t->nchildren; c++)
                if ((rc = cbp_isend(p, n, dt, t->children[c], TAG, comm, &sreq[c])))
                    return rc;
            if ((rc = MPI_Waitall(t->nchildren, sreq, MPI_STATUSES_IGNORE)))
                return rc;
        }
        return MPI_SUCCESS;
    }

    /* inner nodes and leaves: receive segment s + 1 while handling segment s */
    int cur = 0;
    if ((rc = cbp_irecv(buf, segcount, dt, t->parent, TAG, comm, &rreq[cur])))
        return rc;
    for (int s = 0; s < nseg; s++) {
        char *p = buf + (size_t)s * seg_bytes;
        if (s + 1 < nseg) {
            if ((rc = cbp_irecv(p + seg_bytes, segcount, dt, t->parent, TAG, comm,
                                &rreq[cur ^ 1])))
                return rc;
        }
        if ((rc = MPI_Wait(&rreq[cur], MPI_STATUS_IGNORE)))
            return rc;
        if (t->nchildren > 0) {
            int n = s == nseg - 1 ? last : segcount;
            for (int c = 0; c < t->nchildren; c++)
                if ((rc = cbp_isend(p, n, dt, t->children[c], TAG, comm, &sreq[c])))
                    return rc;
            if ((rc = MPI_Waitall(t->nchildren, sreq, MPI_STATUSES_IGNORE)))
                return rc;
        }
        cur ^= 1;
    }
    return MPI_SUCCESS;
}

/* Mirrors ompi_coll_base_bcast_intra_basic_linear: the root isends to every other rank. */
static int bcast_linear(void *buf, int count, MPI_Datatype dt, int root, MPI_Comm comm)
{
    int rank, size, rc;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    if (size == 1)
        return MPI_SUCCESS;
    if (rank != root)
        return cbp_recv(buf, count, dt, root, TAG, comm, MPI_STATUS_IGNORE);
    MPI_Request *req = malloc(sizeof(MPI_Request) * (size_t)size);
    if (req == NULL)
        return MPI_ERR_NO_MEM;
    int n = 0;
    for (int i = 0; i < size; i++) {
        if (i == rank)
            continue;
        if ((rc = cbp_isend(buf, count, dt, i, TAG, comm, &req[n++]))) {
            free(req);
            return rc;
        }
    }
    rc = MPI_Waitall(n, req, MPI_STATUSES_IGNORE);
    free(req);
    return rc;
}

static int bcast_chain(void *buf, int count, MPI_Datatype dt, int root, MPI_Comm comm,
                       int segsize, int fanout)
{
    int rank, size, rc;
    cbp_tree_t t;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    if ((rc = cbp_tree_chain(fanout, rank, size, root, &t)))
        return rc;
    return bcast_tree(buf, count, dt, comm, cbp_segcount(segsize, cbp_type_size(dt), count), &t);
}

/* Mirrors ompi_coll_base_bcast_intra_split_bintree: the two halves of the buffer go down
 * the two subtrees of the binary tree (segmented, blocking sends), then every rank swaps
 * halves with its counterpart in the other subtree. Falls back to a pipeline (chain of
 * fanout 1) when the message cannot be split (fewer than 2 elements, or a segment larger
 * than a half). */
static int bcast_split_bintree(char *buf, int count, MPI_Datatype dt, int root,
                               MPI_Comm comm, int segsize)
{
    int rank, size, rc;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    if (size == 1)
        return MPI_SUCCESS;
    cbp_tree_t t;
    if ((rc = cbp_tree_kary(2, rank, size, root, &t)))
        return rc;
    int tsize = cbp_type_size(dt);
    int half[2], segc[2], nseg[2];
    half[0] = count - count / 2; /* the first half gets the odd element */
    half[1] = count - half[0];
    if (segsize > 0) {
        if (segsize < tsize)
            segsize = tsize;
        segc[0] = segc[1] = segsize / tsize;
        for (int h = 0; h < 2; h++)
            nseg[h] = (half[h] + segc[h] - 1) / segc[h];
    } else {
        segc[0] = half[0];
        segc[1] = half[1];
        nseg[0] = nseg[1] = 1;
    }
    if (half[0] == 0 || half[1] == 0 || (long long)segsize > (long long)half[0] * tsize ||
        (long long)segsize > (long long)half[1] * tsize)
        return bcast_chain(buf, count, dt, root, comm, segsize, 1);

    size_t segb[2] = {cbp_span(dt, segc[0]), cbp_span(dt, segc[1])};
    char *base[2] = {buf, buf + cbp_span(dt, half[0])};
    /* left subtree (odd virtual ranks) carries half 0, right subtree (even) half 1 */
    int v = (rank - root + size) % size;
    int side = (v + 1) % 2;

    if (rank == root) {
        for (int s = 0; s < nseg[0]; s++) {
            for (int c = 0; c < t.nchildren && c < 2; c++) {
                if (s >= nseg[c])
                    continue;
                int n = s == nseg[c] - 1 ? half[c] - s * segc[c] : segc[c];
                if ((rc = cbp_send(base[c] + (size_t)s * segb[c], n, dt, t.children[c], TAG,
                                   comm)))
                    return rc;
            }
        }
    } else if (t.nchildren > 0) {
        /* inner node: one receive ahead, forward each segment to both children */
        MPI_Request cur, next = MPI_REQUEST_NULL;
        char *p = base[side];
        int n = segc[side];
        if ((rc = cbp_irecv(p, n, dt, t.parent, TAG, comm, &cur)))
            return rc;
        for (int s = 1; s < nseg[side]; s++) {
            if (s == nseg[side] - 1)
                n = half[side] - s * segc[side];
            if ((rc = cbp_irecv(p + segb[side], n, dt, t.parent, TAG, comm, &next)))
                return rc;
            if ((rc = MPI_Wait(&cur, MPI_STATUS_IGNORE)))
                return rc;
            for (int c = 0; c < t.nchildren; c++)
                if ((rc = cbp_send(p, segc[side], dt, t.children[c], TAG, comm)))
                    return rc;
            cur = next;
            p += segb[side];
        }
        if ((rc = MPI_Wait(&cur, MPI_STATUS_IGNORE)))
            return rc;
        for (int c = 0; c < t.nchildren; c++)
            if ((rc = cbp_send(p, n, dt, t.children[c], TAG, comm)))
                return rc;
    } else {
        char *p = base[side];
        for (int s = 0; s < nseg[side]; s++) {
            int n = s == nseg[side] - 1 ? half[side] - s * segc[side] : segc[side];
            if ((rc = cbp_recv(p, n, dt, t.parent, TAG, comm, MPI_STATUS_IGNORE)))
                return rc;
            p += segb[side];
        }
    }

    /* exchange halves: partner is the next rank for the left side, the previous for the
     * right side; with an even size the last virtual rank gets half 1 from the root */
    int partner = side == 0 ? (rank + 1) % size : (rank + size - 1) % size;
    int other = side ^ 1;
    if (size % 2 != 0) {
        if (rank != root)
            return cbp_sendrecv(base[side], half[side], dt, partner, base[other], half[other],
                                dt, partner, TAG, comm, NULL);
        return MPI_SUCCESS;
    }
    int lastv = (root + size - 1) % size;
    if (rank == root)
        return cbp_send(base[1], half[1], dt, lastv, TAG, comm);
    if (rank == lastv)
        return cbp_recv(base[1], half[1], dt, root, TAG, comm, MPI_STATUS_IGNORE);
    return cbp_sendrecv(base[side], half[side], dt, partner, base[other], half[other], dt,
                        partner, TAG, comm, NULL);
}

static int round_down(int x, int m)
{
    return x / m * m;
}

/* The binomial scatter shared by scatter_allgather and scatter_allgather_ring (the first
 * phase of ompi_coll_base_bcast_intra_scatter_allgather[_ring]): block b (chunk elements)
 * ends up at virtual rank b. On return *have is the element count this rank holds. */
static int bcast_binomial_scatter(char *buf, int count, MPI_Datatype dt, int root,
                                  MPI_Comm comm, int chunk, int *have)
{
    int rank, size, rc;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    int v = (rank - root + size) % size;
    int cur = rank == root ? count : 0;
    int mask = 1;
    for (; mask < size; mask <<= 1) {
        if (v & mask) {
            int upper = count - v * chunk;
            if (upper <= 0) {
                cur = 0;
            } else {
                MPI_Status st;
                if ((rc = cbp_recv(buf + cbp_span(dt, v * chunk), upper, dt,
                                   (rank - mask + size) % size, TAG, comm, &st)))
                    return rc;
                MPI_Get_count(&st, dt, &cur);
            }
            break;
        }
    }
    for (mask >>= 1; mask > 0; mask >>= 1) {
        if (v + mask >= size)
            continue;
        int n = cur - chunk * mask;
        if (n > 0) {
            if ((rc = cbp_send(buf + cbp_span(dt, chunk * (v + mask)), n, dt,
                               (rank + mask) % size, TAG, comm)))
                return rc;
            cur -= n;
        }
    }
    *have = cur;
    return MPI_SUCCESS;
}

/* Mirrors ompi_coll_base_bcast_intra_scatter_allgather: binomial scatter, then a
 * recursive-doubling allgather of the blocks (with the non-power-of-two fix-up sends).
 * Basic linear when count < size. */
static int bcast_scatter_allgather(char *buf, int count, MPI_Datatype dt, int root,
                                   MPI_Comm comm)
{
    int rank, size, rc;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    if (size < 2 || cbp_type_size(dt) == 0)
        return MPI_SUCCESS;
    if (count < size)
        return bcast_linear(buf, count, dt, root, comm);
    int chunk = (count + size - 1) / size;
    int v = (rank - root + size) % size;
    int got = 0;
    if ((rc = bcast_binomial_scatter(buf, count, dt, root, comm, chunk, &got)))
        return rc;
    (void)got;
    /* recvd: elements received by the latest exchange; the recursive-halving fix-up
     * forwards exactly that many */
    int recvd = 0;
    int mine = count - v * chunk;
    int cur = chunk < mine ? chunk : mine;
    if (cur < 0)
        cur = 0;
    for (int mask = 1; mask < size; mask <<= 1) {
        int vpeer = v ^ mask;
        int peer = (vpeer + root) % size;
        int my_root = round_down(v, mask), peer_root = round_down(vpeer, mask);
        if (vpeer < size) {
            int upper = count - peer_root * chunk;
            if (upper < 0)
                upper = 0;
            if ((rc = cbp_sendrecv(buf + cbp_span(dt, my_root * chunk), cur, dt, peer,
                                   buf + cbp_span(dt, peer_root * chunk), upper, dt, peer,
                                   TAG, comm, &recvd)))
                return rc;
            cur += recvd;
        }
        if (peer_root + mask > size) {
            /* the peer subtree is (partly) missing: forward the blocks this subtree got
             * to the ranks that have no partner, by recursive halving */
            int nfull = size - my_root - mask;
            int off = chunk * (my_root + mask);
            for (int h = mask >> 1; h > 0; h >>= 1) {
                int vq = v ^ h;
                int q = (vq + root) % size;
                int troot = round_down(v, h << 1);
                if (vq > v && v < troot + nfull && vq >= troot + nfull) {
                    if ((rc = cbp_send(buf + cbp_span(dt, off), recvd, dt, q, TAG, comm)))
                        return rc;
                } else if (vq < v && vq < troot + nfull && v >= troot + nfull) {
                    MPI_Status st;
                    if ((rc = cbp_recv(buf + cbp_span(dt, off), count, dt, q, TAG, comm, &st)))
                        return rc;
                    MPI_Get_count(&st, dt, &recvd);
                    cur += recvd;
                }
            }
        }
    }
    return MPI_SUCCESS;
}

/* Mirrors ompi_coll_base_bcast_intra_scatter_allgather_ring: binomial scatter, then a
 * ring allgather of the blocks (size - 1 exchanges). Basic linear when count < size. */
static int bcast_scatter_allgather_ring(char *buf, int count, MPI_Datatype dt, int root,
                                        MPI_Comm comm)
{
    int rank, size, rc;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    if (size < 2 || cbp_type_size(dt) == 0)
        return MPI_SUCCESS;
    if (count < size)
        return bcast_linear(buf, count, dt, root, comm);
    int chunk = (count + size - 1) / size;
    int v = (rank - root + size) % size;
    int got;
    if ((rc = bcast_binomial_scatter(buf, count, dt, root, comm, chunk, &got)))
        return rc;
    int left = (rank + size - 1) % size, right = (rank + 1) % size;
    int sblock = v, rblock = (v + size - 1) % size;
    for (int i = 1; i < size; i++) {
        int rn = count - rblock * chunk;
        rn = rn < chunk ? rn : chunk;
        if (rn < 0)
            rn = 0;
        int sn = count - sblock * chunk;
        sn = sn < chunk ? sn : chunk;
        if (sn < 0)
            sn = 0;
        if ((rc = cbp_sendrecv(buf + cbp_span(dt, sblock * chunk), sn, dt, right,
                               buf + cbp_span(dt, rblock * chunk), rn, dt, left, TAG, comm,
                               NULL)))
            return rc;
        sblock = rblock;
        rblock = (rblock + size - 1) % size;
    }
    return MPI_SUCCESS;
}

int cbp_bcast(void *buf, int count, MPI_Datatype dt, int root, MPI_Comm comm,
              int alg, int segsize, int fanout)
{
    int rank, size, rc;
    cbp_tree_t t;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    if (segsize < 0)
        return MPI_ERR_ARG;
    if (alg == CBP_ALG_FIXED_DECISION) {
        alg = cbp_decide("bcast", size, (long long)count * cbp_type_size(dt), 1, &fanout);
        segsize = 0;
    }
    int seg = cbp_segcount(segsize, cbp_type_size(dt), count);
    switch (alg) {
    case CBP_BCAST_BASIC_LINEAR: /* ompi_coll_base_bcast_intra_basic_linear */
        return bcast_linear(buf, count, dt, root, comm);
    case CBP_BCAST_CHAIN: /* ompi_coll_base_bcast_intra_chain */
        return bcast_chain(buf, count, dt, root, comm, segsize,
                           fanout > 0 ? fanout : CBP_DEFAULT_CHAIN_FANOUT);
    case CBP_BCAST_PIPELINE: /* ompi_coll_base_bcast_intra_pipeline */
        return bcast_chain(buf, count, dt, root, comm, segsize, 1);
    case CBP_BCAST_SPLIT_BINARY_TREE: /* ompi_coll_base_bcast_intra_split_bintree */
        return bcast_split_bintree(buf, count, dt, root, comm, segsize);
    case CBP_BCAST_BINARY_TREE: /* ompi_coll_base_bcast_intra_bintree */
        if ((rc = cbp_tree_kary(2, rank, size, root, &t)))
            return rc;
        return bcast_tree(buf, count, dt, comm, seg, &t);
    case CBP_BCAST_BINOMIAL: /* ompi_coll_base_bcast_intra_binomial */
        if ((rc = cbp_tree_binomial(rank, size, root, &t)))
            return rc;
        return bcast_tree(buf, count, dt, comm, seg, &t);
    case CBP_BCAST_KNOMIAL: /* ompi_coll_base_bcast_intra_knomial */
        if ((rc = cbp_tree_knomial(fanout > 0 ? fanout : CBP_DEFAULT_KNOMIAL_RADIX, rank, size,
                                   root, &t)))
            return rc;
        return bcast_tree(buf, count, dt, comm, seg, &t);
    case CBP_BCAST_SCATTER_ALLGATHER: /* ompi_coll_base_bcast_intra_scatter_allgather */
        return bcast_scatter_allgather(buf, count, dt, root, comm);
    case CBP_BCAST_SCATTER_ALLGATHER_RING:
        /* ompi_coll_base_bcast_intra_scatter_allgather_ring */
        return bcast_scatter_allgather_ring(buf, count, dt, root, comm);
    default:
        return MPI_ERR_ARG;
    }
}
