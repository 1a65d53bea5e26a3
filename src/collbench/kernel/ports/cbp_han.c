/*
 * Ports of Open MPI 5.0.x coll/han's default hierarchical bcast, reduce and allreduce
 * (ompi/mca/coll/han/coll_han_{bcast,reduce,allreduce}.c; sub-communicators as
 * coll_han_subcomms.c's mca_coll_han_comm_create builds them), written from an understanding
 * of that code on point-to-point calls.
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
 * - unequal ranks per node: allreduce keeps its hierarchy; bcast and reduce repeat han's
 *   topology probe at every call and run tuned's fixed decision on the whole communicator.
 * Up communicators use libnbc for the non-blocking calls (coll_han_<coll>_up_module 0) and
 * coll/tuned for blocking ones (libnbc has none); low ones coll/tuned (_low_module 0).
 *
 * libnbc schedules ported (ompi/mca/coll/libnbc/nbc_ibcast.c, nbc_ireduce.c), only for the
 * sizes these paths meet: ibcast "linear" (p <= 4: the root sends to every other rank);
 * ireduce on p = 2: "binomial" below 64 KiB (one message to the root) and "chain" from
 * 64 KiB (fragments of 8 KiB, one schedule round each). Larger up communicators would need
 * libnbc's binomial/chain ibcast and redscat_gather ireduce: not ported, MPI_ERR_ARG.
 *
 * A libnbc schedule progresses in the background while the rank sits in the node-level
 * collective; here its first round is posted before that collective and its other rounds
 * run when it is waited for. Messages and bytes per pair are the same; only the overlap of
 * the later rounds of a multi-round schedule differs.
 */
#include "cbp_internal.h"

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
    if ((rc = MPI_Allgather(&vrank, 1, MPI_INT, h->vranks, 1, MPI_INT, comm)) != MPI_SUCCESS)
        goto fail;
    int span[3] = {h->low_size, -h->low_size, h->up_size};
    if ((rc = MPI_Allreduce(MPI_IN_PLACE, span, 3, MPI_INT, MPI_MAX, comm)) != MPI_SUCCESS)
        goto fail;
    h->imbalanced = span[0] != -span[1];
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
    if (h->nodes < 2)  /* one node: han disqualifies itself */
        return 0;
    if (strcmp(coll, "bcast") == 0)
        return h->imbalanced ? h->nodes <= 3 : h->nodes <= NBC_LINEAR_MAX;
    if (strcmp(coll, "allreduce") == 0)
        return h->nodes == 2;
    if (strcmp(coll, "reduce") == 0)
        return h->imbalanced ? h->nodes <= 3 : h->nodes == 2;
    return 0;
}

/* ------------------------------------------------------------------ libnbc schedules */

/* A started libnbc schedule on the up communicator. */
typedef struct {
    int kind;  /* 0 none, 1 ibcast linear, 2 ireduce (p = 2) */
    int n;
    MPI_Request req[NBC_LINEAR_MAX];
    /* ireduce */
    void *buf, *tmp;
    int count, fragcount, nfrag, root_side;
    MPI_Datatype dt;
    MPI_Op op;
} nbc_t;

/* nbc_ibcast.c bcast_sched_linear: one round, the root sends to every other rank in rank
 * order. */
static int nbc_ibcast_start(void *buf, int count, MPI_Datatype dt, int root, MPI_Comm comm,
                            nbc_t *r)
{
    int rank, p, rc;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &p);
    memset(r, 0, sizeof *r);
    if (p < 2)
        return MPI_SUCCESS;
    if (p > NBC_LINEAR_MAX)
        return MPI_ERR_ARG;  /* libnbc binomial / chain: not ported */
    r->kind = 1;
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

/* nbc_ireduce.c on two ranks, commutative op, in place at both ends (han passes the
 * receive buffer as the send buffer): "binomial" below 64 KiB is one message of the whole
 * vector to the root; "chain" from 64 KiB sends fragments of 8 KiB (count / nfrag elements,
 * the last one the rest), one schedule round per fragment. The root reduces
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
    if (p != 2 || !cbp_commutative(op))
        return MPI_ERR_ARG;  /* redscat_gather, binomial on p > 2: not ported */
    long long bytes = (long long)count * cbp_type_size(dt);
    r->kind = 2;
    r->buf = buf;
    r->count = count;
    r->dt = dt;
    r->op = op;
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
    int rc = MPI_SUCCESS;
    if (r->n > 0)
        rc = MPI_Waitall(r->n, r->req, MPI_STATUSES_IGNORE);
    r->n = 0;
    if (rc || r->kind != 2)
        return rc;
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
    r->kind = 0;
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
 * their up communicator, tuned's fixed decision: recursive_doubling on 2 or 3 ranks; then a
 * bcast of 2 ints inside each node) before handing the call to coll/tuned on the whole
 * communicator. */
static int topo_probe(cbp_han_t *h)
{
    int rc, vals[3] = {0, h->low_size, -h->low_size}, out[3], flags[2] = {1, 0};
    if (h->low_rank == 0 &&
        (rc = cbp_allreduce(vals, out, 3, MPI_INT, MPI_MAX, h->up,
                            CBP_ALLREDUCE_RECURSIVE_DOUBLING, 0, 0)))
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
    if (h->nodes < 2)
        return MPI_ERR_UNSUPPORTED_OPERATION;
    if (count == 0)  /* MPI_Bcast returns before any coll component at count 0 */
        return MPI_SUCCESS;
    if (h->imbalanced)
        return h->nodes <= 3 ? imbalanced_bcast(h, buf, count, dt, root, comm) : MPI_ERR_ARG;
    if (h->nodes > NBC_LINEAR_MAX)
        return MPI_ERR_ARG;
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
    if (h->nodes < 2 || !cbp_commutative(op))
        return MPI_ERR_UNSUPPORTED_OPERATION;
    if (h->nodes != 2)
        return MPI_ERR_ARG;
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
    if (h->nodes < 2 || !cbp_commutative(op))
        return MPI_ERR_UNSUPPORTED_OPERATION;
    if (count == 0)  /* MPI_Reduce returns before any coll component at count 0 */
        return MPI_SUCCESS;
    if (h->imbalanced) {
        if (h->nodes > 3)
            return MPI_ERR_ARG;
        rc = topo_probe(h);
        return rc ? rc : cbp_reduce_fixed(sbuf, rbuf, count, dt, op, root, comm);
    }
    if (h->nodes != 2)
        return MPI_ERR_ARG;
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
