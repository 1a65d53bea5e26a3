/*
 * Ports of Open MPI 5.0.x coll/han's default hierarchical bcast, reduce, allreduce, gather,
 * scatter, allgather and barrier (ompi/mca/coll/han/coll_han_<coll>.c; sub-communicators as
 * coll_han_subcomms.c's mca_coll_han_comm_create(_new) build them: the same splits), written
 * from an understanding of that code on point-to-point calls.
 *
 * What han 5.0 runs by default on a communicator spanning several nodes (coll_han_dynamic.c:
 * global level "han", algorithm 0 "default", use_simple_<coll> false except for gather):
 * - bcast: mca_coll_han_bcast_intra, segments of coll_han_bcast_segsize (64 KiB): the node
 *   leaders (the ranks whose node-local rank is the root's) broadcast segment 0 with a
 *   blocking bcast on the "up" communicator (coll/tuned's fixed decision), then for every
 *   segment s: the leaders start a libnbc ibcast of segment s+1 on the up communicator while
 *   every node broadcasts segment s inside the node (coll/tuned's fixed decision), then wait.
 * - allreduce: mca_coll_han_allreduce_intra, segments of coll_han_allreduce_segsize (64 KiB)
 *   through four stages, pipelined as han's tasks t0..t3: node reduce to node rank 0
 *   (tuned), libnbc ireduce of the leaders to up rank 0, libnbc ibcast from up rank 0, node
 *   bcast (tuned).
 * - reduce: mca_coll_han_reduce_intra: the first two of allreduce's stages, to the root.
 * - gather ("simple"), scatter, allgather, barrier: tuned's blocking collectives on both
 *   levels (see each function).
 * - unequal ranks per node: allreduce and barrier keep their hierarchy; the others repeat
 *   han's topology probe at every call and run tuned's fixed decision on the whole
 *   communicator.
 * - one rank per node: han steps aside for the communicator (cbp_han_applies is 0).
 * Up communicators use libnbc for the non-blocking calls (coll_han_<coll>_up_module 0) and
 * coll/tuned for blocking ones (libnbc has none); low ones coll/tuned (_low_module 0).
 *
 * libnbc schedules ported (ompi/mca/coll/libnbc/nbc_ibcast.c, nbc_ireduce.c) with libnbc's
 * default choice for any up communicator size: ibcast "linear" up to 4 ranks, "binomial"
 * above; ireduce "redscat_gather" on more than 2 ranks when count >= the largest power of
 * two <= p, else "binomial" (below 64 KiB or above 4 ranks), else "chain" of 8 KiB
 * fragments (ported for p = 2, the only size han's types reach it at).
 *
 * A libnbc schedule progresses in the background while the rank sits in the node-level
 * collective; here its first round is posted before that collective and its other rounds
 * run when it is waited for. Messages and bytes per pair are the same; only the overlap of
 * the later rounds of a multi-round schedule differs.
 */
#include "cbp_internal.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#define HAN_SEGSIZE 65536         /* coll_han_bcast_segsize, coll_han_allreduce_segsize */
#define NBC_IREDUCE_FRAG 8192     /* libnbc ireduce chain: segsize = 16384 / 2 */
#define NBC_LINEAR_MAX 4          /* libnbc ibcast: linear up to 4 ranks */

struct cbp_han {
    MPI_Comm low, up;
    int low_rank, low_size, up_rank, up_size;
    int nodes;       /* size of the node leaders' up communicator */
    int *vranks;     /* per rank of comm: low_size * up_rank + low_rank, as han's cache */
    int imbalanced;  /* nodes hold different numbers of ranks */
    int most;        /* the most ranks on one node */
};

int cbp_han_init(MPI_Comm comm, int node, cbp_han_t **out)
{
    int rank, size, rc;
    *out = NULL;
    if (node < 0)
        return MPI_ERR_ARG;
    cbp_han_t *h = calloc(1, sizeof *h);
    if (h == NULL)
        return MPI_ERR_NO_MEM;
    h->low = h->up = MPI_COMM_NULL;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    /* low: MPI_Comm_split_type(SHARED, key 0) keeps comm's order; up: color = node-local
     * rank, key = rank (ompi_comm_split_with_info(comm, low_rank, w_rank)). */
    if ((rc = MPI_Comm_split(comm, node, rank, &h->low)) != MPI_SUCCESS)
        goto fail;
    MPI_Comm_rank(h->low, &h->low_rank);
    MPI_Comm_size(h->low, &h->low_size);
    if ((rc = MPI_Comm_split(comm, h->low_rank, rank, &h->up)) != MPI_SUCCESS)
        goto fail;
    MPI_Comm_rank(h->up, &h->up_rank);
    MPI_Comm_size(h->up, &h->up_size);
    h->vranks = malloc(sizeof(int) * (size_t)size);
    if (h->vranks == NULL) {
        rc = MPI_ERR_NO_MEM;
        goto fail;
    }
    int vrank = h->low_size * h->up_rank + h->low_rank;
    /* Bruck's log2(P) rounds, not the MPI's own allgather: under SMPI (no coll-selector
     * beside the ports) that posts P(P-1) messages at once, minutes at 512 ranks; this is
     * set-up, outside any timing, so its schedule changes no figure. */
    if ((rc = cbp_allgather(&vrank, 1, MPI_INT, h->vranks, 1, MPI_INT, comm,
                            CBP_ALLGATHER_BRUCK, 0, 0)) != MPI_SUCCESS)
        goto fail;
    int span[3] = {h->low_size, -h->low_size, h->up_size};
    if ((rc = MPI_Allreduce(MPI_IN_PLACE, span, 3, MPI_INT, MPI_MAX, comm)) != MPI_SUCCESS)
        goto fail;
    h->imbalanced = span[0] != -span[1];
    h->most = span[0];
    h->nodes = span[2];
    *out = h;
    return MPI_SUCCESS;
fail:
    cbp_han_free(h);
    return rc;
}

void cbp_han_free(cbp_han_t *h)
{
    if (h == NULL)
        return;
    if (h->low != MPI_COMM_NULL)
        MPI_Comm_free(&h->low);
    if (h->up != MPI_COMM_NULL)
        MPI_Comm_free(&h->up);
    free(h->vranks);
    free(h);
}

int cbp_han_nodes(const cbp_han_t *h)
{
    return h->nodes;
}

int cbp_han_imbalanced(const cbp_han_t *h)
{
    return h->imbalanced;
}

int cbp_han_applies(const cbp_han_t *h, const char *coll, long long bytes)
{
    (void)bytes;
    /* one node, or one rank per node: han disqualifies itself (mca_coll_han_comm_create's
     * "local_procs == 1" test; the collectives then return MPI_ERR_UNSUPPORTED_OPERATION) */
    if (h->nodes < 2 || h->most < 2)
        return 0;
    /* every node count and layout han handles (unequal ranks per node: its probe, then
     * tuned on the whole communicator, except allreduce's and barrier's hierarchies) */
    static const char *const colls[] = {"bcast", "reduce", "allreduce", "gather", "scatter",
                                        "allgather", "barrier"};
    for (size_t c = 0; c < sizeof colls / sizeof colls[0]; c++)
        if (strcmp(coll, colls[c]) == 0)
            return 1;
    return 0;
}

/* ------------------------------------------------------------------ libnbc schedules */

/* libnbc's default algorithm choices (nbc_ibcast.c, nbc_ireduce.c, 5.0.x defaults:
 * coll_libnbc_ibcast_algorithm and _ireduce_algorithm 0, ibcast_skip_dt_decision true). */
enum {
    NBC_NONE, NBC_IBCAST_LINEAR, NBC_IREDUCE_TWO, /* posted at start */
    NBC_IBCAST_BINOMIAL, NBC_IREDUCE_BINOMIAL, NBC_IREDUCE_REDSCAT  /* run at the wait */
};

/* A started libnbc schedule on the up communicator. */
typedef struct {
    int kind;
    int n;
    MPI_Request req[NBC_LINEAR_MAX];
    void *buf, *tmp;
    int count, fragcount, nfrag, root_side, root;
    MPI_Datatype dt;
    MPI_Op op;
} nbc_t;

/* ibcast: skip_dt_decision (on by default) chooses by communicator size only: "linear" up
 * to 4 ranks, else "binomial" (the data-size branch to "chain" is never taken). */
static int nbc_ibcast_start(void *buf, int count, MPI_Datatype dt, int root, MPI_Comm comm,
                            nbc_t *r)
{
    int rank, p, rc;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &p);
    memset(r, 0, sizeof *r);
    if (p < 2)
        return MPI_SUCCESS;
    if (p > NBC_LINEAR_MAX) {  /* run at the wait: a receive precedes the sends */
        r->kind = NBC_IBCAST_BINOMIAL;
        r->buf = buf;
        r->count = count;
        r->dt = dt;
        r->root = root;
        return MPI_SUCCESS;
    }
    /* bcast_sched_linear: one round, the root sends to every other rank in rank order */
    r->kind = NBC_IBCAST_LINEAR;
    if (rank != root)
        return cbp_irecv(buf, count, dt, root, CBP_TAG_HAN_IBCAST, comm, &r->req[r->n++]);
    for (int peer = 0; peer < p; peer++) {
        if (peer == root)
            continue;
        rc = cbp_isend(buf, count, dt, peer, CBP_TAG_HAN_IBCAST, comm, &r->req[r->n++]);
        if (rc)
            return rc;
    }
    return MPI_SUCCESS;
}

/* libnbc's virtual ranks for its binomial trees: the root and rank 0 swap places. */
static int nbc_swap(int x, int root)
{
    return x == 0 ? root : x == root ? 0 : x;
}

static int ceil_log2(int p)
{
    int k = 0;
    while ((1 << k) < p)
        k++;
    return k;
}

/* bcast_sched_binomial: virtual rank v (root and 0 swapped) receives from v minus its
 * highest set bit, then sends to v + 2^k for every 2^k above v (the root: every 2^k). */
static int nbc_ibcast_binomial(nbc_t *r, MPI_Comm comm)
{
    int rank, p, rc;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &p);
    int v = nbc_swap(rank, r->root), maxr = ceil_log2(p);
    if (v != 0) {
        int hi = 0;
        while ((2 << hi) <= v)
            hi++;
        if ((rc = cbp_recv(r->buf, r->count, r->dt, nbc_swap(v - (1 << hi), r->root),
                           CBP_TAG_HAN_IBCAST, comm, MPI_STATUS_IGNORE)))
            return rc;
    }
    for (int k = 0; k < maxr; k++)
        if (v < (1 << k) && v + (1 << k) < p &&
            (rc = cbp_send(r->buf, r->count, r->dt, nbc_swap(v + (1 << k), r->root),
                           CBP_TAG_HAN_IBCAST, comm)))
            return rc;
    return MPI_SUCCESS;
}

/* red_sched_binomial, commutative op (the tree rooted at the root, root and 0 swapped):
 * in round k, a virtual rank that is a multiple of 2^k receives the whole vector from
 * v + 2^(k-1) and reduces it into its own; the others send theirs to v - 2^(k-1) and
 * leave. */
static int nbc_ireduce_binomial(nbc_t *r, MPI_Comm comm)
{
    int rank, p, rc = MPI_SUCCESS;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &p);
    int v = nbc_swap(rank, r->root), maxr = ceil_log2(p);
    char *acc = r->buf, *tmp = cbp_alloc(r->dt, r->count), *own = NULL;
    if (rank != r->root)  /* non-roots leave the caller's buffer as it is */
        acc = own = cbp_alloc(r->dt, r->count);
    if (tmp == NULL || acc == NULL) {
        free(tmp);
        free(own);
        return MPI_ERR_NO_MEM;
    }
    if (own)
        cbp_copy(own, r->buf, r->dt, r->count);
    for (int k = 1; k <= maxr; k++) {
        int half = 1 << (k - 1);
        if (v % (1 << k) == 0) {
            int peer = nbc_swap(v + half, r->root);
            if (v + half >= p)
                continue;
            if ((rc = cbp_recv(tmp, r->count, r->dt, peer, CBP_TAG_HAN_IREDUCE, comm,
                               MPI_STATUS_IGNORE)))
                break;
            MPI_Reduce_local(tmp, acc, r->count, r->dt, r->op);
        } else {
            rc = cbp_send(acc, r->count, r->dt, nbc_swap(v - half, r->root),
                          CBP_TAG_HAN_IREDUCE, comm);
            break;
        }
    }
    free(tmp);
    free(own);
    return rc;
}

/* red_sched_redscat_gather: the same exchanges as coll/base's redscat_gather reduce (fold
 * to a power of two, recursive halving, binomial gather to the root), which the tuned
 * port implements; han passes the vector in place, so it is copied first. */
static int nbc_ireduce_redscat(nbc_t *r, MPI_Comm comm)
{
    void *src = cbp_alloc(r->dt, r->count);
    if (src == NULL)
        return MPI_ERR_NO_MEM;
    cbp_copy(src, r->buf, r->dt, r->count);
    int rc = cbp_reduce(src, r->buf, r->count, r->dt, r->op, r->root, comm,
                        CBP_REDUCE_RABENSEIFNER, 0, 0);
    free(src);
    return rc;
}

/* nbc_ireduce.c's choice for a commutative op (han only runs those), in place at every
 * rank (han passes the receive buffer as the send buffer): "redscat_gather" when p > 2 and
 * count >= the largest power of two <= p; else "binomial" below 64 KiB or on more than 4
 * ranks; else "chain" of 8 KiB fragments (count / nfrag elements, the last one the rest),
 * one schedule round each. Ported chain: p = 2 only (p = 3 or 4 reach it only with fewer
 * elements than ranks of 16 KiB or more each). On p = 2 the binomial and chain rounds are
 * posted here; the other schedules run at the wait. The root reduces
 * own (op) received into its buffer (NBC_Sched_op(sendbuf, recvbuf)). */
static int nbc_ireduce_start(void *buf, int count, MPI_Datatype dt, MPI_Op op, int root,
                             MPI_Comm comm, nbc_t *r)
{
    int rank, p;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &p);
    memset(r, 0, sizeof *r);
    if (p < 2 || count == 0)
        return MPI_SUCCESS;
    if (!cbp_commutative(op))
        return MPI_ERR_ARG;  /* han never gets here: it hands such ops to tuned */
    long long bytes = (long long)count * cbp_type_size(dt);
    r->buf = buf;
    r->count = count;
    r->dt = dt;
    r->op = op;
    r->root = root;
    if (p > 2 && count >= (1 << cbp_floor_log2(p))) {
        r->kind = NBC_IREDUCE_REDSCAT;
        return MPI_SUCCESS;
    }
    if (p > 2 && (p > NBC_LINEAR_MAX || bytes < 65536)) {
        r->kind = NBC_IREDUCE_BINOMIAL;
        return MPI_SUCCESS;
    }
    if (p != 2)
        return MPI_ERR_ARG;  /* chain on 3 or 4 ranks: not ported */
    r->kind = NBC_IREDUCE_TWO;
    r->root_side = rank == root;
    if (bytes < 65536) {
        r->nfrag = 1;
        r->fragcount = count;
    } else {
        r->nfrag = (int)(bytes / NBC_IREDUCE_FRAG + (bytes % NBC_IREDUCE_FRAG != 0));
        r->fragcount = count / r->nfrag;
    }
    int first = r->nfrag == 1 ? count : r->fragcount;
    if (r->root_side) {
        r->tmp = cbp_alloc(dt, count);
        if (r->tmp == NULL)
            return MPI_ERR_NO_MEM;
        r->n = 1;
        return cbp_irecv(r->tmp, first, dt, 1 - rank, CBP_TAG_HAN_IREDUCE, comm, &r->req[0]);
    }
    r->n = 1;
    return cbp_isend(buf, first, dt, 1 - rank, CBP_TAG_HAN_IREDUCE, comm, &r->req[0]);
}

static int nbc_wait(nbc_t *r, MPI_Comm comm)
{
    int rc = MPI_SUCCESS, kind = r->kind;
    r->kind = NBC_NONE;
    if (r->n > 0)
        rc = MPI_Waitall(r->n, r->req, MPI_STATUSES_IGNORE);
    r->n = 0;
    if (rc)
        return rc;
    if (kind == NBC_IBCAST_BINOMIAL)
        return nbc_ibcast_binomial(r, comm);
    if (kind == NBC_IREDUCE_BINOMIAL)
        return nbc_ireduce_binomial(r, comm);
    if (kind == NBC_IREDUCE_REDSCAT)
        return nbc_ireduce_redscat(r, comm);
    if (kind != NBC_IREDUCE_TWO)
        return MPI_SUCCESS;
    size_t ext = cbp_span(r->dt, 1);
    int rank;
    MPI_Comm_rank(comm, &rank);
    for (int f = 0; f < r->nfrag; f++) {
        int n = f == r->nfrag - 1 ? r->count - r->fragcount * f : r->fragcount;
        char *at = (char *)r->buf + ext * (size_t)r->fragcount * (size_t)f;
        if (r->root_side) {
            if (f > 0 && (rc = cbp_recv(r->tmp, n, r->dt, 1 - rank, CBP_TAG_HAN_IREDUCE, comm,
                                        MPI_STATUS_IGNORE)))
                break;
            MPI_Reduce_local(r->tmp, at, n, r->dt, r->op);
        } else if (f > 0 &&
                   (rc = cbp_send(at, n, r->dt, 1 - rank, CBP_TAG_HAN_IREDUCE, comm))) {
            break;
        }
    }
    free(r->tmp);
    r->tmp = NULL;
    return rc;
}

/* ------------------------------------------------------------------ node level (tuned) */

static int low_bcast(cbp_han_t *h, void *buf, int count, MPI_Datatype dt, int root)
{
    if (h->low_size < 2)
        return MPI_SUCCESS;
    return cbp_bcast_fixed(buf, count, dt, root, h->low);
}

static int low_reduce(cbp_han_t *h, const void *sbuf, void *rbuf, int count, MPI_Datatype dt,
                      MPI_Op op, int root)
{
    if (h->low_size < 2) {
        cbp_copy(rbuf, sbuf, dt, count);
        return MPI_SUCCESS;
    }
    return cbp_reduce_fixed(sbuf, rbuf, count, dt, op, root, h->low);
}


/* ------------------------------------------------------------------ collectives */

/* Nodes holding different numbers of ranks: mca_coll_han_topo_init does not cache its
 * answer then, so every bcast asks again (node-local rank 0s: allreduce MAX of 3 ints on
 * their up communicator; then a bcast of 2 ints inside each node) before handing the call
 * to coll/tuned on the whole communicator. Tuned's fixed allreduce decision for 12 bytes,
 * commutative: recursive_doubling below 4 ranks and at 8-15 and 64-127; ring (4-7) and
 * segmented_ring (16-63, unsegmented: ring) fall back to recursive_doubling as count 3 is
 * below the size; nonoverlapping from 128 ranks. */
static int topo_probe(cbp_han_t *h)
{
    int rc, vals[3] = {0, h->low_size, -h->low_size}, out[3], flags[2] = {1, 0};
    int alg = h->nodes < 128 ? CBP_ALLREDUCE_RECURSIVE_DOUBLING
                             : CBP_ALLREDUCE_NONOVERLAPPING;
    if (h->low_rank == 0 && (rc = cbp_allreduce(vals, out, 3, MPI_INT, MPI_MAX, h->up, alg,
                                                0, 0)))
        return rc;
    return low_bcast(h, flags, 2, MPI_INT, 0);
}

static int imbalanced_bcast(cbp_han_t *h, void *buf, int count, MPI_Datatype dt, int root,
                            MPI_Comm comm)
{
    int rc = topo_probe(h);
    return rc ? rc : cbp_bcast_fixed(buf, count, dt, root, comm);
}

/* mca_coll_han_bcast_intra */
int cbp_han_bcast(cbp_han_t *h, void *buf, int count, MPI_Datatype dt, int root,
                  MPI_Comm comm)
{
    int rc;
    if (h->nodes < 2 || h->most < 2)
        return MPI_ERR_UNSUPPORTED_OPERATION;
    if (count == 0)  /* MPI_Bcast returns before any coll component at count 0 */
        return MPI_SUCCESS;
    if (h->imbalanced)
        return imbalanced_bcast(h, buf, count, dt, root, comm);
    int seg = cbp_segcount(HAN_SEGSIZE, cbp_type_size(dt), count);
    int nseg = seg > 0 ? (count + seg - 1) / seg : 1;
    int last = count - (nseg - 1) * seg;
    int root_up = h->vranks[root] / h->low_size, root_low = h->vranks[root] % h->low_size;
    int leader = h->low_rank == root_low;
    size_t ext = cbp_span(dt, 1);
    char *p = buf;
    /* t0: the leaders' blocking bcast of segment 0 (tuned on the up communicator) */
    if (leader && (rc = cbp_bcast_fixed(p, seg, dt, root_up, h->up)))
        return rc;
    for (int s = 0; s < nseg; s++, p += ext * (size_t)seg) {
        nbc_t r = {0};
        if (leader && s <= nseg - 2) {  /* t1: ibcast of segment s+1 ... */
            rc = nbc_ibcast_start(p + ext * (size_t)seg, s == nseg - 2 ? last : seg, dt,
                                  root_up, h->up, &r);
            if (rc)
                return rc;
        }
        /* ... while segment s is broadcast inside the node */
        if ((rc = low_bcast(h, p, s == nseg - 1 ? last : seg, dt, root_low)))
            return rc;
        if ((rc = nbc_wait(&r, h->up)))
            return rc;
    }
    return MPI_SUCCESS;
}

/* mca_coll_han_allreduce_intra: four stages per segment (lr: node reduce, ur: up ireduce,
 * ub: up ibcast, lb: node bcast) as its tasks order them:
 *   t0: lr(0); t1: ur(0) | lr(1); t2: ub(0), ur(1) | lr(2);
 *   t3(c), c = 0..nseg-1: ub(c+1), ur(c+2) | lr(c+3), lb(c)
 * ("|": the non-blocking up calls are in flight during the node-level ones). */
int cbp_han_allreduce(cbp_han_t *h, const void *sbuf, void *rbuf, int count, MPI_Datatype dt,
                      MPI_Op op)
{
    int rc;
    if (h->nodes < 2 || h->most < 2 || !cbp_commutative(op))
        return MPI_ERR_UNSUPPORTED_OPERATION;
    if (count == 0)  /* MPI_Allreduce returns before any coll component at count 0 */
        return MPI_SUCCESS;
    int seg = cbp_segcount(HAN_SEGSIZE, cbp_type_size(dt), count);
    int nseg = seg > 0 ? (count + seg - 1) / seg : 1;
    int last = count - (nseg - 1) * seg;
    int leader = h->low_rank == 0; /* root_low_rank = root_up_rank = 0 */
    size_t ext = cbp_span(dt, 1);
    const char *sb = sbuf;
    char *rb = rbuf;
#define N(i) ((i) == nseg - 1 ? last : seg)
#define SB(i) (sb + ext * (size_t)seg * (size_t)(i))
#define RB(i) (rb + ext * (size_t)seg * (size_t)(i))
    nbc_t a = {0}, b = {0};
    /* t0 */
    if ((rc = low_reduce(h, SB(0), RB(0), N(0), dt, op, 0)))
        return rc;
    /* t1 (han's ur here uses the segment count even for a last, shorter segment: only
     * reachable with one segment, where both are count) */
    if (leader && (rc = nbc_ireduce_start(RB(0), seg, dt, op, 0, h->up, &a)))
        return rc;
    if (nseg >= 2 && (rc = low_reduce(h, SB(1), RB(1), N(1), dt, op, 0)))
        return rc;
    if ((rc = nbc_wait(&a, h->up)))
        return rc;
    /* t2 */
    if (leader) {
        if ((rc = nbc_ibcast_start(RB(0), seg, dt, 0, h->up, &a)))
            return rc;
        if (nseg >= 2 && (rc = nbc_ireduce_start(RB(1), N(1), dt, op, 0, h->up, &b)))
            return rc;
    }
    if (nseg >= 3 && (rc = low_reduce(h, SB(2), RB(2), N(2), dt, op, 0)))
        return rc;
    if ((rc = nbc_wait(&a, h->up)) || (rc = nbc_wait(&b, h->up)))
        return rc;
    /* t3 */
    for (int c = 0; c < nseg; c++) {
        if (leader) {
            if (c + 1 < nseg && (rc = nbc_ibcast_start(RB(c + 1), N(c + 1), dt, 0, h->up, &a)))
                return rc;
            if (c + 2 < nseg &&
                (rc = nbc_ireduce_start(RB(c + 2), N(c + 2), dt, op, 0, h->up, &b)))
                return rc;
        }
        if (c + 3 < nseg && (rc = low_reduce(h, SB(c + 3), RB(c + 3), N(c + 3), dt, op, 0)))
            return rc;
        if ((rc = low_bcast(h, RB(c), N(c), dt, 0)))
            return rc;
        if ((rc = nbc_wait(&a, h->up)) || (rc = nbc_wait(&b, h->up)))
            return rc;
    }
#undef N
#undef SB
#undef RB
    return MPI_SUCCESS;
}

/* mca_coll_han_reduce_intra: per segment, a node reduce to the root's node-local rank
 * (tuned) and a libnbc ireduce of those leaders to the root's node, pipelined as han's
 * tasks (t0: lr(0); t1(c): ur(c) | lr(c+1)). Leaders other than the root reduce into two
 * scratch segments used in turn. Unequal ranks per node: han's topology probe, then tuned's
 * fixed decision on the whole communicator. */
int cbp_han_reduce(cbp_han_t *h, const void *sbuf, void *rbuf, int count, MPI_Datatype dt,
                   MPI_Op op, int root, MPI_Comm comm)
{
    int rc;
    if (h->nodes < 2 || h->most < 2 || !cbp_commutative(op))
        return MPI_ERR_UNSUPPORTED_OPERATION;
    if (count == 0)  /* MPI_Reduce returns before any coll component at count 0 */
        return MPI_SUCCESS;
    if (h->imbalanced) {
        rc = topo_probe(h);
        return rc ? rc : cbp_reduce_fixed(sbuf, rbuf, count, dt, op, root, comm);
    }
    int seg = cbp_segcount(HAN_SEGSIZE, cbp_type_size(dt), count);
    int nseg = (count + seg - 1) / seg;
    int last = count - (nseg - 1) * seg;
    int root_up = h->vranks[root] / h->low_size, root_low = h->vranks[root] % h->low_size;
    int leader = h->low_rank == root_low, at_root = leader && h->up_rank == root_up;
    size_t ext = cbp_span(dt, 1), segbytes = ext * (size_t)seg;
    char *tmp = NULL, *scratch = NULL;
    if (leader && !at_root) {
        tmp = malloc(2 * segbytes);
        if (tmp == NULL)
            return MPI_ERR_NO_MEM;
    } else if (!leader) {  /* the node reduce's receive buffer, unused off its root */
        scratch = cbp_alloc(dt, seg);
        if (scratch == NULL)
            return MPI_ERR_NO_MEM;
    }
#define N(i) ((i) == nseg - 1 ? last : seg)
#define RSEG(i) (at_root ? (char *)rbuf + segbytes * (size_t)(i) \
                 : tmp ? tmp + segbytes * (size_t)((i) % 2) : scratch)
    const char *sb = sbuf;
    rc = low_reduce(h, sb, RSEG(0), N(0), dt, op, root_low);
    for (int c = 0; rc == MPI_SUCCESS && c < nseg; c++) {
        nbc_t r = {0};
        if (leader)
            rc = nbc_ireduce_start(RSEG(c), N(c), dt, op, root_up, h->up, &r);
        if (rc == MPI_SUCCESS && c + 1 < nseg)
            rc = low_reduce(h, sb + segbytes * (size_t)(c + 1), RSEG(c + 1), N(c + 1), dt, op,
                            root_low);
        int rw = nbc_wait(&r, h->up);
        if (rc == MPI_SUCCESS)
            rc = rw;
    }
#undef N
#undef RSEG
    free(tmp);
    free(scratch);
    return rc;
}


/* ------------------------------------------------------------------ gather, scatter, allgather */

/* coll/tuned's fixed allgather decision (ompi_coll_tuned_allgather_intra_dec_fixed), which
 * han's up communicator runs: per communicator-size band, the algorithm below each total
 * block size threshold (bytes, exclusive), the last entry for everything larger. Ids:
 * 2 bruck, 3 recursive_doubling, 4 ring, 5 neighbor, 6 two_proc. */
static int allgather_fixed_alg(int p, long long bytes)
{
    static const struct { int below; long long thr[8]; int alg[8]; } band[] = {
        {32, {-1}, {3}},
        {64, {1024, 65536, -1}, {3, 5, 4}},
        {128, {512, 65536, -1}, {3, 5, 4}},
        {256, {512, 131072, 524288, 1048576, -1}, {3, 5, 4, 5, 4}},
        {512, {32, 128, 1024, 131072, 524288, 1048576, -1}, {3, 2, 3, 5, 4, 5, 4}},
        {1024, {64, 256, 2048, -1}, {3, 2, 3, 5}},
        {2048, {4, 8, 16, 32, 256, 512, 4096, -1}, {3, 2, 3, 2, 3, 2, 3, 5}},
        {4096, {32, 128, 512, 4096, -1}, {2, 3, 2, 3, 5}},
        {INT_MAX, {2, 8, 16, 512, 4096, -1}, {3, 2, 3, 2, 3, 5}},
    };
    if (p == 2)
        return 6;
    for (size_t b = 0; b < sizeof band / sizeof band[0]; b++) {
        if (p >= band[b].below)
            continue;
        int k = 0;
        while (band[b].thr[k] >= 0 && bytes >= band[b].thr[k])
            k++;
        return band[b].alg[k];
    }
    return 3;
}

static int allgather_fixed(const void *sbuf, int count, MPI_Datatype dt, void *rbuf,
                           MPI_Comm comm)
{
    int p;
    MPI_Comm_size(comm, &p);
    int alg = allgather_fixed_alg(p, (long long)count * cbp_type_size(dt));
    return cbp_allgather(sbuf, count, dt, rbuf, count, dt, comm, alg, 0, 0);
}

/* Unequal ranks per node: han's gather, scatter and allgather hand the call to coll/tuned on
 * the whole communicator after the topology probe (repeated at every call, as for bcast:
 * the test on native Open MPI 5.0.11 shows it). */
static int imbalanced_probe(cbp_han_t *h)
{
    return topo_probe(h);
}

/* The two levels of han's rooted gather and scatter: the root's node (up rank) and its
 * node-local rank, whose ranks are the leaders; a leader's buffer of its node's blocks and
 * the root's buffer of every block (in han's virtual-rank order). */
typedef struct {
    int rank, size, root_up, root_low, leader;
    size_t block;
    char *node, *all;
} han_rooted_t;

static int rooted_begin(cbp_han_t *h, han_rooted_t *r, int count, MPI_Datatype dt, int root,
                        MPI_Comm comm)
{
    MPI_Comm_rank(comm, &r->rank);
    MPI_Comm_size(comm, &r->size);
    r->root_up = h->vranks[root] / h->low_size;
    r->root_low = h->vranks[root] % h->low_size;
    r->leader = h->low_rank == r->root_low;
    r->block = cbp_span(dt, count);
    r->node = r->all = NULL;
    if (r->leader && (r->node = malloc(r->block * (size_t)h->low_size + 1)) == NULL)
        return MPI_ERR_NO_MEM;
    if (r->rank == root && (r->all = malloc(r->block * (size_t)r->size + 1)) == NULL) {
        free(r->node);
        return MPI_ERR_NO_MEM;
    }
    return MPI_SUCCESS;
}

static int rooted_end(han_rooted_t *r, int rc)
{
    free(r->node);
    free(r->all);
    return rc;
}

/* mca_coll_han_gather_intra_simple (han's default gather: use_simple_gather is on): a node
 * gather to the root's node-local rank (tuned), then the leaders' gather of low_size blocks
 * each to the root's node (tuned on the up communicator); the root receives the blocks in
 * han's virtual-rank order (node by node) and puts each at its rank's place. */
int cbp_han_gather(cbp_han_t *h, const void *sbuf, void *rbuf, int count, MPI_Datatype dt,
                   int root, MPI_Comm comm)
{
    int rc;
    han_rooted_t r;
    if (h->nodes < 2 || h->most < 2)
        return MPI_ERR_UNSUPPORTED_OPERATION;
    if (h->imbalanced)
        return (rc = imbalanced_probe(h)) ? rc
               : cbp_gather_fixed(sbuf, count, dt, rbuf, count, dt, root, comm);
    if ((rc = rooted_begin(h, &r, count, dt, root, comm)) != MPI_SUCCESS)
        return rc;
    rc = cbp_gather_fixed(sbuf, count, dt, r.node, count, dt, r.root_low, h->low);
    if (rc == MPI_SUCCESS && r.leader)
        rc = cbp_gather_fixed(r.node, count * h->low_size, dt, r.all, count * h->low_size, dt,
                              r.root_up, h->up);
    if (rc == MPI_SUCCESS && r.rank == root)
        for (int i = 0; i < r.size; i++)  /* ompi_coll_han_reorder_gather */
            memcpy((char *)rbuf + r.block * (size_t)i,
                   r.all + r.block * (size_t)h->vranks[i], r.block);
    return rooted_end(&r, rc);
}

/* mca_coll_han_scatter_intra (han's default scatter): the root orders the blocks by han's
 * virtual ranks (node by node), the leaders (ranks of the root's node-local rank) scatter
 * low_size blocks each from the root's node (tuned on the up communicator), then every node
 * scatters its blocks from its leader (tuned). */
int cbp_han_scatter(cbp_han_t *h, const void *sbuf, void *rbuf, int count, MPI_Datatype dt,
                    int root, MPI_Comm comm)
{
    int rc;
    han_rooted_t r;
    if (h->nodes < 2 || h->most < 2)
        return MPI_ERR_UNSUPPORTED_OPERATION;
    if (h->imbalanced)
        return (rc = imbalanced_probe(h)) ? rc
               : cbp_scatter_fixed(sbuf, count, dt, rbuf, count, dt, root, comm);
    if ((rc = rooted_begin(h, &r, count, dt, root, comm)) != MPI_SUCCESS)
        return rc;
    if (r.rank == root)
        for (int i = 0; i < r.size; i++)
            memcpy(r.all + r.block * (size_t)h->vranks[i],
                   (const char *)sbuf + r.block * (size_t)i, r.block);
    if (r.leader)
        rc = cbp_scatter_fixed(r.all, count * h->low_size, dt, r.node, count * h->low_size, dt,
                               r.root_up, h->up);
    if (rc == MPI_SUCCESS)
        rc = cbp_scatter_fixed(r.node, count, dt, rbuf, count, dt, r.root_low, h->low);
    return rooted_end(&r, rc);
}

/* mca_coll_han_allgather_intra (han's default allgather): a node gather to node rank 0
 * (tuned), the node rank 0s' allgather of low_size blocks each (tuned's fixed allgather on
 * the up communicator), which put the blocks at their ranks' places, then a node bcast of
 * the whole result from node rank 0 (tuned). */
int cbp_han_allgather(cbp_han_t *h, const void *sbuf, void *rbuf, int count, MPI_Datatype dt,
                      MPI_Comm comm)
{
    int rc, size;
    if (h->nodes < 2 || h->most < 2)
        return MPI_ERR_UNSUPPORTED_OPERATION;
    MPI_Comm_size(comm, &size);
    if (h->imbalanced) {
        if ((rc = imbalanced_probe(h)))
            return rc;
        return allgather_fixed(sbuf, count, dt, rbuf, comm);
    }
    int leader = h->low_rank == 0;
    size_t block = cbp_span(dt, count);
    char *node = NULL, *all = NULL;
    if (leader && ((node = malloc(block * (size_t)h->low_size + 1)) == NULL ||
                   (all = malloc(block * (size_t)size + 1)) == NULL)) {
        free(node);
        return MPI_ERR_NO_MEM;
    }
    rc = cbp_gather_fixed(sbuf, count, dt, node, count, dt, 0, h->low);
    if (rc == MPI_SUCCESS && leader &&
        (rc = allgather_fixed(node, count * h->low_size, dt, all, h->up)) == MPI_SUCCESS)
        for (int r = 0; r < size; r++)
            memcpy((char *)rbuf + block * (size_t)r, all + block * (size_t)h->vranks[r],
                   block);
    if (rc == MPI_SUCCESS)
        rc = cbp_bcast_fixed(rbuf, count * size, dt, 0, h->low);
    free(node);
    free(all);
    return rc;
}

/* coll/tuned's fixed barrier decision (ompi_coll_tuned_barrier_intra_dec_fixed): by
 * communicator size only. Ids: 1 linear, 3 recursive_doubling, 4 bruck, 6 tree. */
static int barrier_fixed(MPI_Comm comm)
{
    static const int below[] = {4, 8, 64, 256, 512, 1024, 4096, INT_MAX};
    static const int alg[] = {3, 1, 3, 4, 6, 4, 6, 4};
    int p, k = 0;
    MPI_Comm_size(comm, &p);
    if (p < 2)
        return MPI_SUCCESS;  /* coll/self */
    while (p >= below[k])
        k++;
    return cbp_barrier(comm, alg[k]);
}

/* mca_coll_han_barrier_intra_simple (han's only barrier): a node barrier, the node rank 0s'
 * barrier (both tuned's fixed decision), a node barrier again. It never checks the
 * topology, so unequal ranks per node keep the hierarchy. */
int cbp_han_barrier(cbp_han_t *h)
{
    int rc;
    if (h->nodes < 2 || h->most < 2)
        return MPI_ERR_UNSUPPORTED_OPERATION;
    if ((rc = barrier_fixed(h->low)))
        return rc;
    if (h->low_rank == 0 && (rc = barrier_fixed(h->up)))
        return rc;
    return barrier_fixed(h->low);
}
