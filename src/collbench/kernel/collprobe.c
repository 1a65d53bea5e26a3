/*
 * collprobe: which Open MPI coll component served each collective call, found out at run
 * time (docs/components.md).
 *
 * Open MPI picks a component per communicator and per collective (coll/base comm_select:
 * priorities, exclusions, the ompi_comm_coll_preference info key) and stores the chosen
 * component's functions in the communicator's table. Those functions are global symbols
 * of libmpi (or of a component's DSO), installed by taking their address, which goes
 * through the GOT: a function of the same name exported by the executable takes their
 * place (the kernel links with --dynamic-list=collprobe.list, which exports these names and
 * nothing else). Each wrapper below notes which component was entered, for which
 * communicator and collective, then calls the real function (dlsym RTLD_NEXT).
 *
 * Only the outermost call counts as "served by" (a thread-local depth): coll/tuned's
 * decision calls coll/base algorithms, coll/han calls the components of its intra- and
 * inter-node sub-communicators; those nested calls on another communicator are recorded
 * as the outer call's sub-components. coll/han's *_dynamic entries only dispatch (to han's
 * own algorithm or to another component, by its dynamic rules): a nested call of the same
 * collective on the same communicator below one says which component ran.
 *
 * coll/tuned's ompi_coll_tuned_<coll>_intra_do_this(..., algorithm, ...) runs the algorithm
 * its decision picked (forced, from a rules file or fixed): below an outermost call on
 * another communicator, the probe notes that communicator's size and the algorithm id, so
 * that a per-level forcing under coll/han is checked on each level (served.py). The size is
 * asked once per new (communicator, collective, algorithm): the timed loop pays a short
 * scan of the slot's list per do_this call, as for the other wrappers.
 *
 * Symbols a library does not export are simply never called (MPICH, Intel MPI, an Open MPI
 * built with hidden visibility): the kernel then reports no component.
 *
 * The wrappers forward 12 integer-class arguments whatever the function's own count (at
 * most 11: alltoallw's): every coll argument is a pointer or an int, and in the x86-64 and
 * AArch64 calling conventions a callee reads only the registers and stack slots of its
 * own parameters, which the caller (this wrapper) both fills and pops.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "collprobe.h"

typedef long A;
typedef int (*coll_fn)(A, A, A, A, A, A, A, A, A, A, A, A);

enum { TUNED, HAN, BASIC, SM, SELF, LIBNBC, ADAPT, UCC, HCOLL, XHC, ACOLL, NCOMPONENTS };
static const char *const NAMES[NCOMPONENTS] = {
    "tuned", "han", "basic", "sm", "self", "libnbc", "adapt", "ucc", "hcoll", "xhc", "acoll"};

#define SLOTS 64
#define ALGS 16
struct seen_alg { /* a coll/tuned algorithm run on a sub-communicator */
    void *comm;
    const char *coll;
    int size, alg;
};
struct slot {
    void *comm;
    const char *coll;
    int component; /* of the latest outermost call; -1: none yet */
    unsigned subs; /* bit per component seen on other communicators below it */
    struct seen_alg algs[ALGS];
    int nalgs; /* ALGS + 1: more than ALGS were seen */
};
static struct slot slots[SLOTS];
static int nslots;

static __thread int depth;
static __thread struct slot *outer; /* the outermost call's slot */
static __thread int outer_dispatch; /* the outermost call only dispatches (han dynamic) */

static struct slot *slot_of(void *comm, const char *coll)
{
    for (int i = 0; i < nslots; i++)
        if (slots[i].comm == comm && strcmp(slots[i].coll, coll) == 0)
            return &slots[i];
    if (nslots == SLOTS)
        return NULL;
    slots[nslots] = (struct slot){.comm = comm, .coll = coll, .component = -1};
    return &slots[nslots++];
}

static void enter(int component, int dispatch, const char *coll, void *comm)
{
    if (depth == 0) {
        outer = slot_of(comm, coll);
        outer_dispatch = dispatch;
        if (outer)
            outer->component = component;
    } else if (outer && !dispatch) {
        if (outer_dispatch && comm == outer->comm && strcmp(coll, outer->coll) == 0) {
            outer->component = component; /* what han's dispatcher handed the call to */
            outer_dispatch = 0;
        } else if (comm != outer->comm) {
            outer->subs |= 1u << component;
        }
    }
    depth++;
}

static void enter_algorithm(const char *coll, void *comm, A alg)
{
    if (depth > 0 && outer && comm != outer->comm && outer->nalgs <= ALGS) {
        int i = 0;
        while (i < outer->nalgs && !(outer->algs[i].comm == comm && outer->algs[i].alg == alg
                                     && strcmp(outer->algs[i].coll, coll) == 0))
            i++;
        if (i == outer->nalgs && i < ALGS) {
            int size = 0;
            PMPI_Comm_size((MPI_Comm)comm, &size);
            outer->algs[i] = (struct seen_alg){comm, coll, size, (int)alg};
        }
        if (i == outer->nalgs)
            outer->nalgs++; /* ALGS + 1 once the list is full */
    }
    depth++;
}

static int forward(const char *name, coll_fn *real, A a0, A a1, A a2, A a3, A a4, A a5, A a6,
                   A a7, A a8, A a9, A a10, A a11)
{
    int rc;
    if (!*real)
        *real = (coll_fn)dlsym(RTLD_NEXT, name);
    if (!*real) { /* cannot happen: only a library exporting `name` calls us */
        fprintf(stderr, "collprobe: %s not found\n", name);
        return MPI_ERR_INTERN;
    }
    rc = (*real)(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11);
    depth--;
    return rc;
}

/* WRAP(symbol, component, dispatch, collective, index of the communicator argument) */
#define WRAP(sym, comp, disp, coll, ci)                                                      \
    int sym(A, A, A, A, A, A, A, A, A, A, A, A);                                             \
    int sym(A a0, A a1, A a2, A a3, A a4, A a5, A a6, A a7, A a8, A a9, A a10, A a11)        \
    {                                                                                        \
        static coll_fn real;                                                                 \
        A args[12] = {a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11};                     \
        enter(comp, disp, coll, (void *)args[ci]);                                           \
        return forward(#sym, &real, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11);      \
    }

/* ompi_coll_tuned_<coll>_intra_do_this: the algorithm follows the communicator and the
 * module (coll_tuned.h, 4.1 and 5.0). */
#define DO_THIS(c)                                                                           \
    int ompi_coll_tuned_##c##_intra_do_this(A, A, A, A, A, A, A, A, A, A, A, A);             \
    int ompi_coll_tuned_##c##_intra_do_this(A a0, A a1, A a2, A a3, A a4, A a5, A a6, A a7,  \
                                            A a8, A a9, A a10, A a11)                        \
    {                                                                                        \
        static coll_fn real;                                                                 \
        A args[12] = {a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11};                     \
        enter_algorithm(#c, (void *)args[CI_##c], (int)args[CI_##c + 2]);                    \
        return forward("ompi_coll_tuned_" #c "_intra_do_this", &real, a0, a1, a2, a3, a4, a5, \
                       a6, a7, a8, a9, a10, a11);                                            \
    }

/* Communicator argument per collective (MPI's argument order, the module after it). */
#define CI_barrier 0
#define CI_bcast 4
#define CI_reduce 6
#define CI_allreduce 5
#define CI_gather 7
#define CI_scatter 7
#define CI_gatherv 8
#define CI_scatterv 8
#define CI_allgather 6
#define CI_alltoall 6
#define CI_allgatherv 7
#define CI_alltoallv 8
#define CI_reduce_scatter 5
#define CI_reduce_scatter_block 5
#define CI_scan 5
#define CI_exscan 5

#define TUNED_DEC(c)                                                                         \
    WRAP(ompi_coll_tuned_##c##_intra_dec_fixed, TUNED, 0, #c, CI_##c)                        \
    WRAP(ompi_coll_tuned_##c##_intra_dec_dynamic, TUNED, 0, #c, CI_##c)
TUNED_DEC(barrier)
TUNED_DEC(bcast)
TUNED_DEC(reduce)
TUNED_DEC(allreduce)
TUNED_DEC(gather)
TUNED_DEC(scatter)
TUNED_DEC(allgather)
TUNED_DEC(allgatherv)
TUNED_DEC(alltoall)
TUNED_DEC(alltoallv)
TUNED_DEC(reduce_scatter)
TUNED_DEC(reduce_scatter_block)
DO_THIS(barrier)
DO_THIS(bcast)
DO_THIS(reduce)
DO_THIS(allreduce)
DO_THIS(gather)
DO_THIS(scatter)
DO_THIS(allgather)
DO_THIS(allgatherv)
DO_THIS(alltoall)
DO_THIS(alltoallv)
DO_THIS(reduce_scatter)
DO_THIS(reduce_scatter_block)

#define HAN_ALL(c)                                                                           \
    WRAP(mca_coll_han_##c##_intra_dynamic, HAN, 1, #c, CI_##c)                               \
    WRAP(mca_coll_han_##c##_intra, HAN, 0, #c, CI_##c)                                       \
    WRAP(mca_coll_han_##c##_intra_simple, HAN, 0, #c, CI_##c)
HAN_ALL(bcast)
HAN_ALL(reduce)
HAN_ALL(allreduce)
HAN_ALL(gather)
HAN_ALL(scatter)
HAN_ALL(allgather)
WRAP(mca_coll_han_allreduce_reproducible, HAN, 0, "allreduce", CI_allreduce)
WRAP(mca_coll_han_reduce_reproducible, HAN, 0, "reduce", CI_reduce)
WRAP(mca_coll_han_barrier_intra_dynamic, HAN, 1, "barrier", CI_barrier)
WRAP(mca_coll_han_barrier_intra_simple, HAN, 0, "barrier", CI_barrier)
WRAP(mca_coll_han_allgatherv_intra_dynamic, HAN, 1, "allgatherv", CI_allgatherv)

/* coll/basic: its own functions and the coll/base linear ones it installs (also called by
 * tuned's decisions, but then below tuned's entry: not outermost). */
#define BASE_LINEAR(c) WRAP(ompi_coll_base_##c##_intra_basic_linear, BASIC, 0, #c, CI_##c)
BASE_LINEAR(barrier)
BASE_LINEAR(bcast)
BASE_LINEAR(reduce)
BASE_LINEAR(allreduce)
BASE_LINEAR(gather)
BASE_LINEAR(scatter)
BASE_LINEAR(allgather)
BASE_LINEAR(alltoall)
BASE_LINEAR(alltoallv)
WRAP(mca_coll_basic_barrier_intra_log, BASIC, 0, "barrier", CI_barrier)
WRAP(mca_coll_basic_bcast_log_intra, BASIC, 0, "bcast", CI_bcast)
WRAP(mca_coll_basic_reduce_log_intra, BASIC, 0, "reduce", CI_reduce)
WRAP(mca_coll_basic_allreduce_intra, BASIC, 0, "allreduce", CI_allreduce)
WRAP(mca_coll_basic_gatherv_intra, BASIC, 0, "gatherv", CI_gatherv)
WRAP(mca_coll_basic_scatterv_intra, BASIC, 0, "scatterv", CI_scatterv)
WRAP(mca_coll_basic_reduce_scatter_intra, BASIC, 0, "reduce_scatter", CI_reduce_scatter)
WRAP(mca_coll_basic_reduce_scatter_block_intra, BASIC, 0, "reduce_scatter_block",
     CI_reduce_scatter_block)

WRAP(mca_coll_sm_barrier_intra, SM, 0, "barrier", CI_barrier)
WRAP(mca_coll_sm_bcast_intra, SM, 0, "bcast", CI_bcast)
WRAP(mca_coll_sm_reduce_intra, SM, 0, "reduce", CI_reduce)
WRAP(mca_coll_sm_allreduce_intra, SM, 0, "allreduce", CI_allreduce)

#define SELF_ALL(c) WRAP(mca_coll_self_##c##_intra, SELF, 0, #c, CI_##c)
SELF_ALL(barrier)
SELF_ALL(bcast)
SELF_ALL(reduce)
SELF_ALL(allreduce)
SELF_ALL(gather)
SELF_ALL(scatter)
SELF_ALL(gatherv)
SELF_ALL(scatterv)
SELF_ALL(allgather)
SELF_ALL(allgatherv)
SELF_ALL(alltoall)
SELF_ALL(alltoallv)
SELF_ALL(reduce_scatter)

/* Non-blocking: the communicator sits where the blocking call has it (the request and the
 * module follow). */
#define NBC(c) WRAP(ompi_coll_libnbc_i##c, LIBNBC, 0, "i" #c, CI_##c)
NBC(barrier)
NBC(bcast)
NBC(reduce)
NBC(allreduce)
NBC(gather)
NBC(scatter)
NBC(gatherv)
NBC(scatterv)
NBC(allgather)
NBC(allgatherv)
NBC(alltoall)
NBC(alltoallv)
NBC(reduce_scatter)
NBC(reduce_scatter_block)
WRAP(ompi_coll_adapt_bcast, ADAPT, 0, "bcast", CI_bcast)
WRAP(ompi_coll_adapt_reduce, ADAPT, 0, "reduce", CI_reduce)
WRAP(ompi_coll_adapt_ibcast, ADAPT, 0, "ibcast", CI_bcast)
WRAP(ompi_coll_adapt_ireduce, ADAPT, 0, "ireduce", CI_reduce)

/* Components other builds have (coll/ucc, coll/hcoll; coll/xhc and coll/acoll in later
 * Open MPIs): their blocking entries. */
#define OTHER(p, comp, c) WRAP(mca_coll_##p##_##c, comp, 0, #c, CI_##c)
#define OTHERS(p, comp)                                                                      \
    OTHER(p, comp, barrier) OTHER(p, comp, bcast) OTHER(p, comp, reduce)                     \
    OTHER(p, comp, allreduce) OTHER(p, comp, gather) OTHER(p, comp, scatter)                 \
    OTHER(p, comp, allgather) OTHER(p, comp, alltoall)
OTHERS(ucc, UCC)
OTHERS(hcoll, HCOLL)
OTHERS(xhc, XHC)
OTHERS(acoll, ACOLL)

void cbk_probe_reset(void)
{
    for (int i = 0; i < nslots; i++) {
        slots[i].component = -1;
        slots[i].subs = 0;
        slots[i].nalgs = 0;
    }
}

int cbk_probe_served(MPI_Comm comm, const char *coll, char *component, size_t n, char *subs,
                     size_t m)
{
    void *c = (void *)(intptr_t)comm;
    size_t used = 0;
    for (int i = 0; i < nslots; i++) {
        struct slot *s = &slots[i];
        if (s->comm != c || strcmp(s->coll, coll) != 0 || s->component < 0)
            continue;
        snprintf(component, n, "%s", NAMES[s->component]);
        if (m)
            subs[0] = '\0';
        for (int k = 0; k < NCOMPONENTS && m; k++)
            if (s->subs & (1u << k)) {
                int w = snprintf(subs + used, m - used, "%s%s", used ? "," : "", NAMES[k]);
                if (w < 0 || (size_t)w >= m - used)
                    break;
                used += (size_t)w;
            }
        return 1;
    }
    return 0;
}

int cbk_probe_algorithms(MPI_Comm comm, const char *coll, char *out, size_t n)
{
    void *c = (void *)(intptr_t)comm;
    size_t used = 0;
    if (n)
        out[0] = '\0';
    for (int i = 0; i < nslots; i++) {
        struct slot *s = &slots[i];
        if (s->comm != c || strcmp(s->coll, coll) != 0 || s->component < 0)
            continue;
        for (int k = 0; k < s->nalgs; k++) {
            int w;
            if (k == ALGS) /* more than the list holds: say so, the check fails */
                w = snprintf(out + used, n - used, "%s?", used ? "," : "");
            else
                w = snprintf(out + used, n - used, "%s%s@%d=%d", used ? "," : "",
                             s->algs[k].coll, s->algs[k].size, s->algs[k].alg);
            if (w < 0 || (size_t)w >= n - used) {
                snprintf(out, n, "?"); /* cut short: unreadable, the check fails */
                return 1;
            }
            used += (size_t)w;
        }
        return 1;
    }
    return 0;
}
