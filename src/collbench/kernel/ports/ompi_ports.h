/*
 * collbench ports of Open MPI 5.0's coll/tuned algorithms, written on point-to-point calls.
 *
 * Each entry point takes Open MPI 5.0.x's algorithm id for that collective (the ids
 * `ompi_info --param coll tuned --level 9` lists for coll_tuned_<coll>_algorithm), the
 * segment size in bytes (0 = what a forced algorithm uses when
 * coll_tuned_<coll>_algorithm_segmentsize is left at its default, i.e. unsegmented) and a
 * fanout (0 = Open MPI's default: chain fanout 4, k-nomial radix 4).
 *
 * Only MPI point-to-point calls (Send/Ssend/Recv/Isend/Issend/Irecv/Wait/Waitall/Waitany,
 * Get_count), MPI_Reduce_local and, for allgatherv's default algorithm, a contiguous
 * datatype (MPI_Type_contiguous) are used, so the same code runs under Open MPI and under
 * SimGrid's SMPI, where it makes the simulator replay the message sequence Open MPI's
 * forced algorithm sends. Ssend/Issend appear exactly where Open MPI sends in synchronous
 * mode.
 *
 * Limits: contiguous datatypes only (local copies are memcpy of count * extent bytes; blocks
 * Open MPI sends with an indexed datatype are packed into one contiguous message of the same
 * size), no MPI_IN_PLACE, intra-communicators only. An algorithm id that is not ported returns
 * MPI_ERR_ARG without communicating.
 *
 * Compile with -DCBP_COUNT_MESSAGES to have every point-to-point send recorded per
 * destination (count, bytes, size histogram), as Open MPI's pml/monitoring records them;
 * see cbp_count_*.
 */
#ifndef COLLBENCH_OMPI_PORTS_H
#define COLLBENCH_OMPI_PORTS_H

#include <mpi.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Open MPI 5.0.x algorithm ids (coll_tuned_<coll>_algorithm). */
enum cbp_bcast_alg {
    CBP_BCAST_BASIC_LINEAR = 1, CBP_BCAST_CHAIN = 2, CBP_BCAST_PIPELINE = 3,
    CBP_BCAST_SPLIT_BINARY_TREE = 4, CBP_BCAST_BINARY_TREE = 5, CBP_BCAST_BINOMIAL = 6,
    CBP_BCAST_KNOMIAL = 7, CBP_BCAST_SCATTER_ALLGATHER = 8,
    CBP_BCAST_SCATTER_ALLGATHER_RING = 9
};
enum cbp_gather_alg { CBP_GATHER_BASIC_LINEAR = 1, CBP_GATHER_BINOMIAL = 2,
                      CBP_GATHER_LINEAR_SYNC = 3 };
enum cbp_scatter_alg { CBP_SCATTER_BASIC_LINEAR = 1, CBP_SCATTER_BINOMIAL = 2,
                       CBP_SCATTER_LINEAR_NB = 3 };
enum cbp_reduce_alg {
    CBP_REDUCE_LINEAR = 1, CBP_REDUCE_CHAIN = 2, CBP_REDUCE_PIPELINE = 3,
    CBP_REDUCE_BINARY = 4, CBP_REDUCE_BINOMIAL = 5, CBP_REDUCE_IN_ORDER_BINARY = 6,
    CBP_REDUCE_RABENSEIFNER = 7
};
enum cbp_allreduce_alg {
    CBP_ALLREDUCE_BASIC_LINEAR = 1, CBP_ALLREDUCE_NONOVERLAPPING = 2,
    CBP_ALLREDUCE_RECURSIVE_DOUBLING = 3, CBP_ALLREDUCE_RING = 4,
    CBP_ALLREDUCE_SEGMENTED_RING = 5, CBP_ALLREDUCE_RABENSEIFNER = 6
};
enum cbp_barrier_alg {
    CBP_BARRIER_LINEAR = 1, CBP_BARRIER_DOUBLE_RING = 2, CBP_BARRIER_RECURSIVE_DOUBLING = 3,
    CBP_BARRIER_BRUCK = 4, CBP_BARRIER_TWO_PROC = 5, CBP_BARRIER_TREE = 6
};
enum cbp_allgather_alg {
    CBP_ALLGATHER_LINEAR = 1, CBP_ALLGATHER_BRUCK = 2, CBP_ALLGATHER_RECURSIVE_DOUBLING = 3,
    CBP_ALLGATHER_RING = 4, CBP_ALLGATHER_NEIGHBOR = 5, CBP_ALLGATHER_TWO_PROC = 6,
    CBP_ALLGATHER_SPARBIT = 7
};
enum cbp_allgatherv_alg {
    CBP_ALLGATHERV_DEFAULT = 1, CBP_ALLGATHERV_BRUCK = 2, CBP_ALLGATHERV_RING = 3,
    CBP_ALLGATHERV_NEIGHBOR = 4, CBP_ALLGATHERV_TWO_PROC = 5, CBP_ALLGATHERV_SPARBIT = 6
};
enum cbp_alltoall_alg {
    CBP_ALLTOALL_LINEAR = 1, CBP_ALLTOALL_PAIRWISE = 2, CBP_ALLTOALL_MODIFIED_BRUCK = 3,
    CBP_ALLTOALL_LINEAR_SYNC = 4, CBP_ALLTOALL_TWO_PROC = 5
};
enum cbp_alltoallv_alg { CBP_ALLTOALLV_BASIC_LINEAR = 1, CBP_ALLTOALLV_PAIRWISE = 2 };
enum cbp_reduce_scatter_alg {
    CBP_REDUCE_SCATTER_NONOVERLAPPING = 1, CBP_REDUCE_SCATTER_RECURSIVE_HALVING = 2,
    CBP_REDUCE_SCATTER_RING = 3, CBP_REDUCE_SCATTER_BUTTERFLY = 4
};
enum cbp_reduce_scatter_block_alg {
    CBP_REDUCE_SCATTER_BLOCK_BASIC_LINEAR = 1, CBP_REDUCE_SCATTER_BLOCK_RECURSIVE_DOUBLING = 2,
    CBP_REDUCE_SCATTER_BLOCK_RECURSIVE_HALVING = 3, CBP_REDUCE_SCATTER_BLOCK_BUTTERFLY = 4
};

/* Algorithm id 0 (bcast, reduce, gather and scatter only): what coll/tuned's fixed decision
 * rules of Open MPI 5.0 (coll_tuned_decision_fixed.c) pick for this communicator size and
 * message size, run the way those rules run it (unsegmented, chain fanout 1). This is what
 * Open MPI's composite algorithms get when they call the communicator's own collective. */
#define CBP_ALG_FIXED_DECISION 0

/* Open MPI's defaults for forced algorithms (coll_tuned_init_chain_fanout and
 * coll_tuned_bcast_algorithm_knomial_radix). */
#define CBP_DEFAULT_CHAIN_FANOUT 4
#define CBP_DEFAULT_KNOMIAL_RADIX 4

/* bcast: fanout is the chain fanout for alg 2 and the k-nomial radix for alg 7. */
int cbp_bcast(void *buf, int count, MPI_Datatype dt, int root, MPI_Comm comm,
              int alg, int segsize, int fanout);
/* gather: segsize is the first-segment size of linear_sync (alg 3); fanout is unused. */
int cbp_gather(const void *sbuf, int scount, MPI_Datatype sdt, void *rbuf, int rcount,
               MPI_Datatype rdt, int root, MPI_Comm comm, int alg, int segsize, int fanout);
/* scatter: segsize and fanout are unused (as in Open MPI 5.0). */
int cbp_scatter(const void *sbuf, int scount, MPI_Datatype sdt, void *rbuf, int rcount,
                MPI_Datatype rdt, int root, MPI_Comm comm, int alg, int segsize, int fanout);
/* reduce: fanout is the chain fanout for alg 2. */
int cbp_reduce(const void *sbuf, void *rbuf, int count, MPI_Datatype dt, MPI_Op op, int root,
               MPI_Comm comm, int alg, int segsize, int fanout);
/* allreduce: segsize is used by segmented_ring (alg 5) only. */
int cbp_allreduce(const void *sbuf, void *rbuf, int count, MPI_Datatype dt, MPI_Op op,
                  MPI_Comm comm, int alg, int segsize, int fanout);
int cbp_barrier(MPI_Comm comm, int alg);

/* The collectives below ignore segsize and fanout, except alltoall linear_sync (alg 4), whose
 * fanout is coll_tuned_alltoall_algorithm_max_requests (0 = all requests at once). Algorithms
 * that refuse a communicator size (two_proc on P != 2) return MPI_ERR_UNSUPPORTED_OPERATION
 * without communicating, as Open MPI does. */
int cbp_allgather(const void *sbuf, int scount, MPI_Datatype sdt, void *rbuf, int rcount,
                  MPI_Datatype rdt, MPI_Comm comm, int alg, int segsize, int fanout);
int cbp_allgatherv(const void *sbuf, int scount, MPI_Datatype sdt, void *rbuf,
                   const int *rcounts, const int *displs, MPI_Datatype rdt, MPI_Comm comm,
                   int alg, int segsize, int fanout);
int cbp_alltoall(const void *sbuf, int scount, MPI_Datatype sdt, void *rbuf, int rcount,
                 MPI_Datatype rdt, MPI_Comm comm, int alg, int segsize, int fanout);
int cbp_alltoallv(const void *sbuf, const int *scounts, const int *sdispls, MPI_Datatype sdt,
                  void *rbuf, const int *rcounts, const int *rdispls, MPI_Datatype rdt,
                  MPI_Comm comm, int alg, int segsize, int fanout);
int cbp_reduce_scatter(const void *sbuf, void *rbuf, const int *rcounts, MPI_Datatype dt,
                       MPI_Op op, MPI_Comm comm, int alg, int segsize, int fanout);
int cbp_reduce_scatter_block(const void *sbuf, void *rbuf, int rcount, MPI_Datatype dt,
                             MPI_Op op, MPI_Comm comm, int alg, int segsize, int fanout);

/* coll/basic's linear gatherv and scatterv (mca_coll_basic_gatherv_intra,
 * mca_coll_basic_scatterv_intra): what Open MPI 5.0 runs for MPI_Gatherv / MPI_Scatterv on
 * a communicator coll/tuned serves (coll/tuned has neither), and what its composite
 * algorithms get when they call them. Zero-size blocks are not sent. (cbp_gather_scatter.c;
 * public so that the SimGrid kernel can run them as gatherv's and scatterv's default.) */
int cbp_gatherv_linear(const void *sbuf, int scount, MPI_Datatype sdt, void *rbuf,
                       const int *rcounts, const int *displs, MPI_Datatype rdt, int root,
                       MPI_Comm comm);
int cbp_scatterv_linear(const void *sbuf, const int *scounts, const int *displs,
                        MPI_Datatype sdt, void *rbuf, int rcount, MPI_Datatype rdt, int root,
                        MPI_Comm comm);

/* coll/tuned's fixed decision (Open MPI 4.1.0-5.0.x) for "bcast", "reduce", "gather" or
 * "scatter" on nprocs processes; bytes is the decision input (bcast, reduce: the whole
 * buffer; gather, scatter: one rank's block); commutative matters for reduce only.
 * Returns the algorithm id (0 for an unknown collective or nprocs < 2) and, in *fanout, the
 * fanout the rules hand it (1 for a chain: coll/base turns fan-out 0 into 1; else 0). The
 * rules always pass segment size 0. */
int cbp_decide(const char *coll, int nprocs, long long bytes, int commutative, int *fanout);

/* 1 if (collective, algorithm id) is ported, else 0. coll: "bcast", "gather", ...; id 0 is
 * "ported" for the collectives whose fixed decision is (bcast, reduce, gather, scatter). */
int cbp_is_ported(const char *coll, int alg);

/* coll/han 5.0.x's default hierarchical collectives (cbp_han.c): what Open MPI 5.0 runs
 * for MPI_Bcast, MPI_Reduce, MPI_Allreduce, MPI_Gather, MPI_Scatter and MPI_Allgather on a
 * communicator spanning several nodes
 * (han's priority 35 beats tuned's 30; 4.1 ships han at priority 0). cbp_han_init builds
 * the node-level ("low") and node-leader ("up") communicators from `node`, this rank's node
 * id (any non-negative number equal on the ranks of one node: natively from
 * MPI_Comm_split_type(MPI_COMM_TYPE_SHARED), under SimGrid the simulated node); it
 * communicates (split, allgather, allreduce), the collectives afterwards use point-to-point
 * calls only. The node level runs
 * coll/tuned's fixed decisions (cbp_bcast/cbp_reduce alg 0), the up level tuned's fixed
 * bcast (blocking) and ported libnbc schedules (non-blocking), with han's 64 KiB segments.
 * Return MPI_ERR_UNSUPPORTED_OPERATION where han hands the call back to the previous
 * component without communicating (one node or one rank per node; a non-commutative
 * reduction), also without communicating. Any number of nodes and any layout han handles
 * run (libnbc's default ibcast and ireduce schedules for every up communicator size). */
typedef struct cbp_han cbp_han_t;
int cbp_han_init(MPI_Comm comm, int node, cbp_han_t **out);
void cbp_han_free(cbp_han_t *h);
/* Number of nodes (size of the node leaders' up communicator); whether they hold different
 * numbers of ranks (1: han's bcast and reduce then probe the topology and hand the call to
 * tuned on the whole communicator, its allreduce keeps the hierarchy). */
int cbp_han_nodes(const cbp_han_t *h);
int cbp_han_imbalanced(const cbp_han_t *h);
/* 1 if cbp_han_<coll> runs han's hierarchy for this communicator, else 0 (then the caller
 * runs what Open MPI would: tuned on the whole communicator, or an unported case). */
int cbp_han_applies(const cbp_han_t *h, const char *coll, long long bytes);
/* comm: the communicator cbp_han_init was given (bcast and reduce fall back to tuned on it
 * when nodes hold different numbers of ranks, after han's topology probe). */
int cbp_han_bcast(cbp_han_t *h, void *buf, int count, MPI_Datatype dt, int root,
                  MPI_Comm comm);
int cbp_han_allreduce(cbp_han_t *h, const void *sbuf, void *rbuf, int count,
                      MPI_Datatype dt, MPI_Op op);
int cbp_han_reduce(cbp_han_t *h, const void *sbuf, void *rbuf, int count, MPI_Datatype dt,
                   MPI_Op op, int root, MPI_Comm comm);
/* han's default gather ("simple"), scatter and allgather: tuned's fixed decisions on both
 * levels (gather, scatter; allgather: gather and bcast in the node, allgather between node
 * rank 0s), the root's or leaders' blocks reordered when a node's ranks are not
 * consecutive; unequal ranks per node: the topology probe, then tuned on comm. Same count
 * and datatype on both sides. */
int cbp_han_gather(cbp_han_t *h, const void *sbuf, void *rbuf, int count, MPI_Datatype dt,
                   int root, MPI_Comm comm);
int cbp_han_scatter(cbp_han_t *h, const void *sbuf, void *rbuf, int count, MPI_Datatype dt,
                    int root, MPI_Comm comm);
int cbp_han_allgather(cbp_han_t *h, const void *sbuf, void *rbuf, int count, MPI_Datatype dt,
                      MPI_Comm comm);
/* han's barrier ("simple"): node barrier, node rank 0s' barrier, node barrier (tuned's fixed
 * decisions), on any layout. */
int cbp_han_barrier(cbp_han_t *h);

/* Message counting (only with -DCBP_COUNT_MESSAGES; otherwise these do nothing and
 * cbp_count_enabled() returns 0). Counters are indexed by the destination's rank in
 * MPI_COMM_WORLD. The histogram has CBP_HISTOGRAM_BINS bins: bin 0 counts empty messages,
 * bin k >= 1 messages of [2^(k-1), 2^k) bytes, as Open MPI's monitoring does. */
#define CBP_HISTOGRAM_BINS 66
int cbp_count_enabled(void);
void cbp_count_reset(void);
/* Writes the counters in the format of Open MPI's pml_monitoring output ("E" lines only)
 * to <prefix>.<world rank>.prof; returns 0 on success. */
int cbp_count_dump(const char *prefix);

#ifdef __cplusplus
}
#endif

#endif /* COLLBENCH_OMPI_PORTS_H */
