/* Shared pieces of the collbench ports: point-to-point wrappers, trees, sizes. */
#ifndef COLLBENCH_CBP_INTERNAL_H
#define COLLBENCH_CBP_INTERNAL_H

#include "ompi_ports.h"

#include <stddef.h>

/* Tags: positive (user) tags, one per collective, so that Open MPI's filtered
 * monitoring reports the ports' traffic as "external" and coll/tuned's (negative tags)
 * as "internal". */
enum {
    CBP_TAG_BCAST = 0x7c01, CBP_TAG_GATHER, CBP_TAG_SCATTER, CBP_TAG_REDUCE,
    CBP_TAG_ALLREDUCE, CBP_TAG_BARRIER, CBP_TAG_ALLGATHER, CBP_TAG_ALLGATHERV,
    CBP_TAG_ALLTOALL, CBP_TAG_ALLTOALLV, CBP_TAG_REDUCE_SCATTER, CBP_TAG_REDUCE_SCATTER_BLOCK,
    CBP_TAG_GATHERV, CBP_TAG_SCATTERV,
    /* coll/han's up-level libnbc calls (cbp_han.c): an ibcast and an ireduce can be in
     * flight between the same two leaders at once */
    CBP_TAG_HAN_IBCAST, CBP_TAG_HAN_IREDUCE
};

#define CBP_MAX_CHILDREN 64

/* A node's view of a tree: its parent (-1 at the root) and its children, in the order
 * the algorithm serves them. Ranks are communicator ranks. */
typedef struct {
    int root;
    int parent;
    int nchildren;
    int children[CBP_MAX_CHILDREN];
} cbp_tree_t;

/* Trees (cbp_topo.c). Each returns MPI_SUCCESS or MPI_ERR_ARG. */
int cbp_tree_kary(int fanout, int rank, int size, int root, cbp_tree_t *t);
int cbp_tree_in_order_binary(int rank, int size, cbp_tree_t *t);
int cbp_tree_binomial(int rank, int size, int root, cbp_tree_t *t);
int cbp_tree_in_order_binomial(int rank, int size, int root, cbp_tree_t *t);
int cbp_tree_knomial(int radix, int rank, int size, int root, cbp_tree_t *t);
int cbp_tree_chain(int fanout, int rank, int size, int root, cbp_tree_t *t);

/* Point-to-point wrappers (cbp_util.c): every message the ports send goes through these,
 * which is where -DCBP_COUNT_MESSAGES counts them. */
int cbp_send(const void *buf, int count, MPI_Datatype dt, int dest, int tag, MPI_Comm comm);
int cbp_ssend(const void *buf, int count, MPI_Datatype dt, int dest, int tag, MPI_Comm comm);
int cbp_isend(const void *buf, int count, MPI_Datatype dt, int dest, int tag, MPI_Comm comm,
              MPI_Request *req);
int cbp_issend(const void *buf, int count, MPI_Datatype dt, int dest, int tag, MPI_Comm comm,
               MPI_Request *req);
int cbp_recv(void *buf, int count, MPI_Datatype dt, int src, int tag, MPI_Comm comm,
             MPI_Status *status);
int cbp_irecv(void *buf, int count, MPI_Datatype dt, int src, int tag, MPI_Comm comm,
              MPI_Request *req);
/* Exchange as coll/base does it: receive posted first, blocking send, then wait; a
 * "send to myself and receive from myself" is a local copy (no message). If rcount_out is
 * not NULL it receives the number of elements received. */
int cbp_sendrecv(const void *sbuf, int scount, MPI_Datatype sdt, int dest,
                 void *rbuf, int rcount, MPI_Datatype rdt, int src, int tag,
                 MPI_Comm comm, int *rcount_out);

/* Bytes of count elements (contiguous types: count * extent). */
size_t cbp_span(MPI_Datatype dt, int count);
void cbp_copy(void *dst, const void *src, MPI_Datatype dt, int count);
int cbp_type_size(MPI_Datatype dt);

/* Elements per segment for a segment size in bytes: unchanged unless
 * type_size <= segsize < type_size * count; then segsize / type_size, rounded to nearest
 * (the rule Open MPI's forced algorithms apply to their segment size). */
int cbp_segcount(int segsize, int type_size, int count);

/* Blocks of a vector split in nblocks: the first `split` blocks have `early` elements,
 * the others `late` = early - 1 (or all equal when split == 0). */
void cbp_blockcount(int count, int nblocks, int *split, int *early, int *late);

/* cbp_gatherv_linear and cbp_scatterv_linear (coll/basic) are declared in ompi_ports.h. */

/* The communicator's own MPI_Bcast / MPI_Reduce / MPI_Gather / MPI_Scatter as coll/tuned
 * runs it without a forced algorithm: its fixed decision (cbp_decide.c). */
int cbp_bcast_fixed(void *buf, int count, MPI_Datatype dt, int root, MPI_Comm comm);
int cbp_reduce_fixed(const void *sbuf, void *rbuf, int count, MPI_Datatype dt, MPI_Op op,
                     int root, MPI_Comm comm);
int cbp_gather_fixed(const void *sbuf, int scount, MPI_Datatype sdt, void *rbuf, int rcount,
                     MPI_Datatype rdt, int root, MPI_Comm comm);
int cbp_scatter_fixed(const void *sbuf, int scount, MPI_Datatype sdt, void *rbuf, int rcount,
                      MPI_Datatype rdt, int root, MPI_Comm comm);

/* Scratch buffer of count elements (at least one). */
void *cbp_alloc(MPI_Datatype dt, int count);
/* Bits 0..nbits-1 of x in reverse order. */
int cbp_mirror(int x, int nbits);
/* Non-negative x mod m. */
int cbp_mod(int x, int m);
/* 1 if op is commutative. */
int cbp_commutative(MPI_Op op);

/* Smallest power of two strictly greater than v (1 for v == 0). */
int cbp_next_pow2_above(int v);
/* Smallest power of two >= v. */
int cbp_next_pow2_incl(int v);
/* floor(log2(v)) for v >= 1. */
int cbp_floor_log2(int v);

#endif /* COLLBENCH_CBP_INTERNAL_H */
