/*
 * port_driver: runs a collbench port of an Open MPI algorithm, or the MPI library's own
 * collective, on (a duplicate of) MPI_COMM_WORLD and checks every result.
 *
 *   port_driver <coll> <impl> <alg> <segsize> <fanout> <size_bytes> <iterations> [root]
 *               [+ <coll> <impl> ... (another group)]...
 *   port_driver decide <coll> <nprocs> <bytes> <commutative>
 *
 *   coll        bcast | gather | scatter | reduce | allreduce | barrier | allgather |
 *               allgatherv | alltoall | alltoallv | reduce_scatter | reduce_scatter_block
 *   impl        port   = cbp_<coll>(..., alg, segsize, fanout)
 *               han    = cbp_han_<coll>(...): coll/han 5.0's default hierarchy (bcast,
 *                        allreduce, reduce; alg, segsize and fanout 0), sub-communicators
 *                        from MPI_Comm_split_type(MPI_COMM_TYPE_SHARED), built before the
 *                        case's phase
 *               native = MPI_<Coll>(...); the caller forces the algorithm with
 *                        --mca coll_tuned_use_dynamic_rules 1
 *                        --mca coll_tuned_<coll>_algorithm <alg> [... segmentsize ...]
 *   alg, segsize, fanout, size_bytes
 *               a value or a comma-separated list; every combination is one "case", run
 *               in order. Lists of alg/segsize/fanout with impl=native need
 *               CBP_FORCE_MPIT=1, which makes the driver force each case's algorithm
 *               itself through coll/tuned's MPI_T control variables
 *               (coll_tuned_<coll>_algorithm, _algorithm_segmentsize,
 *               _algorithm_chain_fanout, _algorithm_tree_fanout,
 *               bcast_algorithm_knomial_radix, alltoall_algorithm_max_requests = fanout)
 *               before duplicating the communicator; every other collective's variables
 *               are first put back to their defaults (algorithm 0: the fixed rules), so
 *               that composite algorithms see the library's own choice for their inner
 *               collectives. alg 0 of bcast/gather/scatter/reduce is the fixed decision.
 *               Open MPI 5.0 registers allgatherv's variables with scope "constant": MPI_T
 *               cannot set them, so a native allgatherv case needs a launch with
 *               --mca coll_tuned_allgatherv_algorithm <alg> (the driver checks it).
 *   size_bytes  bcast, gather, scatter, allgather, alltoall: MPI_BYTE elements per rank
 *               (per block); allgatherv, alltoallv: the nominal block, each block's count
 *               varies around it (some are empty, see vcount_*); reduce, allreduce,
 *               reduce_scatter: MPI_INT elements (size / 4, at least 1) of the whole
 *               vector, MPI_SUM; reduce_scatter's counts are uneven (rs_count);
 *               reduce_scatter_block: size / 4 MPI_INTs per rank's block; barrier: ignored
 *   iterations  collectives per case (0 = none: an empty phase)
 *   root        root of rooted collectives (default 0)
 *   +           starts another group of cases in the same launch; case indices go on
 *
 * Environment:
 *   CBP_MONITOR=<prefix>  write, per case, the point-to-point messages every rank sent
 *       during exactly that case's `iterations` collectives to
 *       <prefix>.<case>.<world rank>.prof, in Open MPI's pml_monitoring format. Under
 *       Open MPI this uses the monitoring component's "pml_monitoring_flush" MPI_T
 *       performance variable (launch with --mca pml_monitoring_enable 2): before a case's
 *       first collective every rank flushes (and so discards) what it has sent so far
 *       (MPI_Init, communicator duplication, ...), right after its last collective it
 *       flushes to the case's file. No communication happens between those two points
 *       other than the collectives: results are checked locally, never exchanged. Built
 *       with -DCBP_COUNT_MESSAGES (e.g. under SimGrid SMPI, which has no MPI_T), the
 *       ports' own counters are written instead (native collectives are not counted).
 *   CBP_WARMUP=1  run each native case's collective once more before its phase (not
 *       counted, not checked), so that a component that builds state at its first call
 *       (coll/han's sub-communicators) does so outside the phase.
 *
 * Output: one line per case on rank 0's stdout:
 *   CASE <index> group=<g> coll=<coll> impl=<impl> alg=<a> segsize=<s> fanout=<f>
 *        size=<bytes> count=<elements> iterations=<n> root=<r> status=<ok|refused|failed>
 * "refused" is a collective that returned an error of class MPI_ERR_UNSUPPORTED_OPERATION
 * (Open MPI's two_proc algorithms on P != 2 do, before communicating): the driver goes on
 * with the next case. Any rank that sees a wrong result prints "WRONG case=<index> ..." on
 * stderr and goes on. Another error prints "FAILED case=<index> ..." and ends the run.
 * Exit status: 0 all right, 1 a wrong result or a failed collective, 2 usage, 3 a port
 * returned MPI_ERR_ARG (algorithm not ported), 4 nothing wrong but some case refused.
 *
 * "decide" prints, without MPI, one line per (nprocs, bytes) pair of the lists:
 *   DECIDE coll=<coll> nprocs=<p> bytes=<b> commutative=<c> alg=<id> fanout=<f>
 * i.e. cbp_decide(), the fixed decision the ports use for alg 0.
 */
#include "ompi_ports.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if !defined(CBP_NO_MPIT)
#define CBP_HAVE_MPIT 1
#endif

enum coll {
    C_BCAST, C_GATHER, C_SCATTER, C_REDUCE, C_ALLREDUCE, C_BARRIER, C_ALLGATHER,
    C_ALLGATHERV, C_ALLTOALL, C_ALLTOALLV, C_REDUCE_SCATTER, C_REDUCE_SCATTER_BLOCK, C_NCOLL
};
static const char *const COLL_NAMES[] = {
    "bcast", "gather", "scatter", "reduce", "allreduce", "barrier", "allgather",
    "allgatherv", "alltoall", "alltoallv", "reduce_scatter", "reduce_scatter_block"};

/* Which coll/tuned control variables a collective has (ompi_info --level 9). V_CONST: Open
 * MPI 5.0 registers them with scope "constant" (allgatherv's), so MPI_T cannot write them:
 * only a launch-time --mca setting forces that collective. */
#ifdef CBP_HAVE_MPIT
enum { V_SEG = 1, V_TREE = 2, V_CHAIN = 4, V_KNOMIAL = 8, V_MAXREQ = 16, V_CONST = 32 };
static const int COLL_VARS[] = {
    V_SEG | V_TREE | V_CHAIN | V_KNOMIAL, V_SEG | V_TREE | V_CHAIN, V_SEG | V_TREE | V_CHAIN,
    V_SEG | V_TREE | V_CHAIN, V_SEG | V_TREE | V_CHAIN, 0, V_SEG | V_TREE | V_CHAIN,
    V_CONST, V_SEG | V_TREE | V_CHAIN | V_MAXREQ, 0, V_SEG | V_TREE | V_CHAIN, V_SEG | V_TREE};
#endif

typedef struct {
    int n;
    long *v;
} list_t;

static int parse_list(const char *s, list_t *out)
{
    int cap = 1;
    for (const char *p = s; *p; p++)
        cap += *p == ',';
    out->n = 0;
    out->v = malloc(sizeof(long) * (size_t)cap);
    if (out->v == NULL)
        return -1;
    const char *p = s;
    while (*p) {
        char *end;
        long x = strtol(p, &end, 10);
        if (end == p || out->n >= cap)
            return -1;
        out->v[out->n++] = x;
        p = end;
        if (*p == ',')
            p++;
        else if (*p)
            return -1;
    }
    return out->n > 0 ? 0 : -1;
}

static int coll_index(const char *name)
{
    for (int c = 0; c < C_NCOLL; c++)
        if (strcmp(name, COLL_NAMES[c]) == 0)
            return c;
    return -1;
}

/* ------------------------------------------------------------------ decide mode */
static int decide_main(int argc, char **argv)
{
    list_t procs, bytes;
    if (argc != 6 || parse_list(argv[3], &procs) || parse_list(argv[4], &bytes)) {
        fprintf(stderr, "usage: port_driver decide <coll> <nprocs,...> <bytes,...> <0|1>\n");
        return 2;
    }
    int commutative = atoi(argv[5]);
    for (int i = 0; i < procs.n; i++)
        for (int j = 0; j < bytes.n; j++) {
            int fanout = 0;
            int alg = cbp_decide(argv[2], (int)procs.v[i], bytes.v[j], commutative, &fanout);
            printf("DECIDE coll=%s nprocs=%ld bytes=%ld commutative=%d alg=%d fanout=%d\n",
                   argv[2], procs.v[i], bytes.v[j], commutative, alg, fanout);
        }
    free(procs.v);
    free(bytes.v);
    return 0;
}

/* ------------------------------------------------------------------ monitoring phases */
#ifdef CBP_HAVE_MPIT
static int g_mon_on;
static MPI_T_pvar_session g_session;
static MPI_T_pvar_handle g_flush;

static int mon_init(void)
{
    int provided, idx, count;
    MPI_Comm world = MPI_COMM_WORLD;
    if (MPI_T_init_thread(MPI_THREAD_SINGLE, &provided) != MPI_SUCCESS)
        return -1;
    if (MPI_T_pvar_get_index("pml_monitoring_flush", MPI_T_PVAR_CLASS_GENERIC, &idx) !=
        MPI_SUCCESS)
        return -1;
    if (MPI_T_pvar_session_create(&g_session) != MPI_SUCCESS)
        return -1;
    if (MPI_T_pvar_handle_alloc(g_session, idx, &world, &g_flush, &count) != MPI_SUCCESS)
        return -1;
    if (MPI_T_pvar_start(g_session, g_flush) != MPI_SUCCESS)
        return -1;
    g_mon_on = 1;
    return 0;
}

/* Everything this rank sent since the last flush goes to <name>.<rank>.prof; the
 * counters restart from zero. */
static int mon_flush(const char *name)
{
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", name);
    if (MPI_T_pvar_write(g_session, g_flush, buf) != MPI_SUCCESS)
        return -1;
    if (MPI_T_pvar_stop(g_session, g_flush) != MPI_SUCCESS)
        return -1;
    return MPI_T_pvar_start(g_session, g_flush) == MPI_SUCCESS ? 0 : -1;
}

static void mon_end(const char *junk)
{
    if (!g_mon_on)
        return;
    mon_flush(junk);
    MPI_T_pvar_stop(g_session, g_flush);
    MPI_T_pvar_handle_free(g_session, &g_flush);
    MPI_T_pvar_session_free(&g_session);
}

static int set_cvar(const char *name, int value)
{
    int idx, count;
    MPI_T_cvar_handle h;
    if (MPI_T_cvar_get_index(name, &idx) != MPI_SUCCESS)
        return -1;
    if (MPI_T_cvar_handle_alloc(idx, NULL, &h, &count) != MPI_SUCCESS)
        return -1;
    int rc = MPI_T_cvar_write(h, &value);
    MPI_T_cvar_handle_free(&h);
    return rc == MPI_SUCCESS ? 0 : -1;
}

static int get_cvar(const char *name, int *value)
{
    int idx, count;
    MPI_T_cvar_handle h;
    if (MPI_T_cvar_get_index(name, &idx) != MPI_SUCCESS)
        return -1;
    if (MPI_T_cvar_handle_alloc(idx, NULL, &h, &count) != MPI_SUCCESS)
        return -1;
    int rc = MPI_T_cvar_read(h, value);
    MPI_T_cvar_handle_free(&h);
    return rc == MPI_SUCCESS ? 0 : -1;
}

/* Sets coll/tuned's variables of collective c (those it has). A collective whose variables
 * MPI_T cannot write is left alone, unless alg is not 0: then its launch-time algorithm
 * must already be alg. */
static int set_coll_vars(int c, int alg, int segsize, int fanout, int max_requests)
{
    char name[256];
    const char *cn = COLL_NAMES[c];
    int vars = COLL_VARS[c];
    snprintf(name, sizeof name, "coll_tuned_%s_algorithm", cn);
    if (vars & V_CONST) {
        int now = -1;
        if (alg == 0)
            return 0;
        if (get_cvar(name, &now) == 0 && now == alg)
            return 0;
        fprintf(stderr, "port_driver: %s is %d; Open MPI does not let MPI_T change it: launch "
                        "with --mca %s %d\n", name, now, name, alg);
        return -1;
    }
    if (set_cvar(name, alg) != 0)
        return -1;
    snprintf(name, sizeof name, "coll_tuned_%s_algorithm_segmentsize", cn);
    if ((vars & V_SEG) && set_cvar(name, segsize) != 0)
        return -1;
    snprintf(name, sizeof name, "coll_tuned_%s_algorithm_tree_fanout", cn);
    if ((vars & V_TREE) && set_cvar(name, fanout) != 0)
        return -1;
    snprintf(name, sizeof name, "coll_tuned_%s_algorithm_chain_fanout", cn);
    if ((vars & V_CHAIN) && set_cvar(name, fanout) != 0)
        return -1;
    if ((vars & V_KNOMIAL) && set_cvar("coll_tuned_bcast_algorithm_knomial_radix", fanout) != 0)
        return -1;
    snprintf(name, sizeof name, "coll_tuned_%s_algorithm_max_requests", cn);
    if ((vars & V_MAXREQ) && set_cvar(name, max_requests) != 0)
        return -1;
    return 0;
}

/* Force coll/tuned's choice for communicators created from now on: every collective back
 * to its defaults (algorithm 0 = fixed rules, fanouts 4, segment size 0, max_requests 0),
 * then this case's collective forced. */
static int force_algorithm(enum coll c, int alg, int segsize, int fanout)
{
    for (int k = 0; k < C_NCOLL; k++)
        if (set_coll_vars(k, 0, 0, 4, 0) != 0)
            return -1;
    return set_coll_vars((int)c, alg, segsize, fanout > 0 ? fanout : 4, fanout);
}
#endif

static int g_count_mode; /* -DCBP_COUNT_MESSAGES: the ports count their own messages */

static int phase_begin(const char *junk)
{
    if (g_count_mode) {
        cbp_count_reset();
        return 0;
    }
#ifdef CBP_HAVE_MPIT
    if (g_mon_on)
        return mon_flush(junk);
#endif
    (void)junk;
    return 0;
}

static int phase_end(const char *name)
{
    if (g_count_mode)
        return cbp_count_dump(name);
#ifdef CBP_HAVE_MPIT
    if (g_mon_on)
        return mon_flush(name);
#endif
    (void)name;
    return 0;
}

/* ------------------------------------------------------------------ data */
static unsigned char pat(long i, int owner, int it)
{
    return (unsigned char)((i * 31 + owner * 101 + it * 7 + 11) & 0xff);
}

static int ival(int owner, long i, int it)
{
    return (owner + 1) * (int)(i % 97 + 1) + it;
}

/* allgatherv: rank r's block around the nominal n (every fourth rank's is empty) */
static int vcount_allgatherv(int n, int r)
{
    return r % 4 == 3 ? 0 : n + r % 3;
}

/* alltoallv: the block rank i sends to rank j (some are empty) */
static int vcount_alltoallv(int n, int i, int j)
{
    return (i + j) % 5 == 4 ? 0 : n + (i + 2 * j) % 3;
}

/* reduce_scatter: rank r's share of n elements, by weights 1, 2, 3, 1, 2, 3, ... (small n
 * gives empty blocks) */
static int rs_count(int n, int size, int r)
{
    long w = 0, before = 0;
    for (int q = 0; q < size; q++) {
        if (q == r)
            before = w;
        w += 1 + q % 3;
    }
    long upto = before + 1 + r % 3;
    return (int)((long)n * upto / w - (long)n * before / w);
}

#define GAP_BYTE 0xa5

typedef struct {
    enum coll coll;
    int port, alg, segsize, fanout, root, rank, size, count, it;
    cbp_han_t *han; /* impl=han */
    unsigned char *a, *b; /* send / receive buffers */
    int *sc, *sd, *rc, *rd; /* per-rank counts and displacements (v collectives) */
} ctx_t;

/* Counts, displacements (in elements, one spare element after every block) and the
 * buffer sizes in bytes of a case. */
static void layout(ctx_t *x, size_t *abytes, size_t *bbytes)
{
    int n = x->count, P = x->size, me = x->rank;
    long s = 0, r = 0;
    switch (x->coll) {
    case C_ALLGATHERV:
        for (int q = 0; q < P; q++) {
            x->rc[q] = vcount_allgatherv(n, q);
            x->rd[q] = (int)r;
            r += x->rc[q] + 1;
        }
        *abytes = (size_t)x->rc[me];
        *bbytes = (size_t)r;
        break;
    case C_ALLTOALLV:
        for (int q = 0; q < P; q++) {
            x->sc[q] = vcount_alltoallv(n, me, q);
            x->sd[q] = (int)s;
            s += x->sc[q] + 1;
            x->rc[q] = vcount_alltoallv(n, q, me);
            x->rd[q] = (int)r;
            r += x->rc[q] + 1;
        }
        *abytes = (size_t)s;
        *bbytes = (size_t)r;
        break;
    case C_REDUCE_SCATTER:
        for (int q = 0; q < P; q++) {
            x->rc[q] = rs_count(n, P, q);
            x->rd[q] = (int)r;
            r += x->rc[q];
        }
        *abytes = (size_t)n * 4;
        *bbytes = (size_t)x->rc[me] * 4;
        break;
    case C_REDUCE_SCATTER_BLOCK:
        *abytes = (size_t)n * (size_t)P * 4;
        *bbytes = (size_t)n * 4;
        break;
    case C_REDUCE:
    case C_ALLREDUCE:
        *abytes = *bbytes = (size_t)n * 4;
        break;
    case C_SCATTER:
        *abytes = (size_t)n * (size_t)P;
        *bbytes = (size_t)n;
        break;
    case C_GATHER:
    case C_ALLGATHER:
        *abytes = (size_t)n;
        *bbytes = (size_t)n * (size_t)P;
        break;
    case C_ALLTOALL:
        *abytes = *bbytes = (size_t)n * (size_t)P;
        break;
    default:
        *abytes = *bbytes = (size_t)n;
        break;
    }
    *abytes += 16;
    *bbytes += 16;
}

static void fill_ints(ctx_t *x, long n, long m)
{
    int *s = (int *)(void *)x->a, *r = (int *)(void *)x->b;
    for (long i = 0; i < n; i++)
        s[i] = ival(x->rank, i, x->it);
    for (long i = 0; i < m; i++)
        r[i] = -12345;
}

static void fill(ctx_t *x, size_t bbytes)
{
    long n = x->count;
    int P = x->size, me = x->rank;
    switch (x->coll) {
    case C_BCAST:
        for (long i = 0; i < n; i++)
            x->a[i] = me == x->root ? pat(i, x->root, x->it) : (unsigned char)~pat(i, x->root, x->it);
        break;
    case C_GATHER:
    case C_ALLGATHER:
    case C_ALLGATHERV: {
        long mine = x->coll == C_ALLGATHERV ? x->rc[me] : n;
        for (long i = 0; i < mine; i++)
            x->a[i] = pat(i, me, x->it);
        memset(x->b, GAP_BYTE, bbytes);
        break;
    }
    case C_SCATTER:
        for (int r = 0; r < P; r++)
            for (long i = 0; i < n; i++)
                x->a[(long)r * n + i] = pat(i, r, x->it);
        memset(x->b, 0x5a, (size_t)n);
        break;
    case C_ALLTOALL:
        for (int j = 0; j < P; j++)
            for (long i = 0; i < n; i++)
                x->a[(long)j * n + i] = pat(i, me * P + j, x->it);
        memset(x->b, GAP_BYTE, bbytes);
        break;
    case C_ALLTOALLV:
        for (int j = 0; j < P; j++) {
            for (long i = 0; i < x->sc[j]; i++)
                x->a[x->sd[j] + i] = pat(i, me * P + j, x->it);
            x->a[x->sd[j] + x->sc[j]] = 0x11;
        }
        memset(x->b, GAP_BYTE, bbytes);
        break;
    case C_REDUCE:
    case C_ALLREDUCE:
        fill_ints(x, n, n);
        break;
    case C_REDUCE_SCATTER:
        fill_ints(x, n, x->rc[me]);
        break;
    case C_REDUCE_SCATTER_BLOCK:
        fill_ints(x, n * P, n);
        break;
    default:
        break;
    }
}

/* 0 if the reduced element i of the whole vector is right at r[k]. */
static int sum_ok(const ctx_t *x, const int *r, long k, long i)
{
    long want = 0;
    for (int q = 0; q < x->size; q++)
        want += ival(q, i, x->it);
    return r[k] == (int)want;
}

/* 0 if this rank's result is right; otherwise the first wrong element's index + 1 (or
 * byte offset + 1 in the receive buffer). */
static long check(const ctx_t *x)
{
    long n = x->count;
    int P = x->size, me = x->rank;
    const int *ri = (const int *)(const void *)x->b;
    switch (x->coll) {
    case C_BCAST:
        for (long i = 0; i < n; i++)
            if (x->a[i] != pat(i, x->root, x->it))
                return i + 1;
        return 0;
    case C_GATHER:
    case C_ALLGATHER:
        if (x->coll == C_GATHER && me != x->root)
            return 0;
        for (int r = 0; r < P; r++)
            for (long i = 0; i < n; i++)
                if (x->b[(long)r * n + i] != pat(i, r, x->it))
                    return (long)r * n + i + 1;
        return 0;
    case C_ALLGATHERV:
        for (int r = 0; r < P; r++) {
            for (long i = 0; i < x->rc[r]; i++)
                if (x->b[x->rd[r] + i] != pat(i, r, x->it))
                    return x->rd[r] + i + 1;
            if (x->b[x->rd[r] + x->rc[r]] != GAP_BYTE)
                return x->rd[r] + x->rc[r] + 1;
        }
        return 0;
    case C_SCATTER:
        for (long i = 0; i < n; i++)
            if (x->b[i] != pat(i, me, x->it))
                return i + 1;
        return 0;
    case C_ALLTOALL:
        for (int j = 0; j < P; j++)
            for (long i = 0; i < n; i++)
                if (x->b[(long)j * n + i] != pat(i, j * P + me, x->it))
                    return (long)j * n + i + 1;
        return 0;
    case C_ALLTOALLV:
        for (int j = 0; j < P; j++) {
            for (long i = 0; i < x->rc[j]; i++)
                if (x->b[x->rd[j] + i] != pat(i, j * P + me, x->it))
                    return x->rd[j] + i + 1;
            if (x->b[x->rd[j] + x->rc[j]] != GAP_BYTE)
                return x->rd[j] + x->rc[j] + 1;
        }
        return 0;
    case C_REDUCE:
    case C_ALLREDUCE:
        if (x->coll == C_REDUCE && me != x->root)
            return 0;
        for (long i = 0; i < n; i++)
            if (!sum_ok(x, ri, i, i))
                return i + 1;
        return 0;
    case C_REDUCE_SCATTER:
        for (long k = 0; k < x->rc[me]; k++)
            if (!sum_ok(x, ri, k, x->rd[me] + k))
                return k + 1;
        return 0;
    case C_REDUCE_SCATTER_BLOCK:
        for (long k = 0; k < n; k++)
            if (!sum_ok(x, ri, k, (long)me * n + k))
                return k + 1;
        return 0;
    default:
        return 0;
    }
}

static int run_port(ctx_t *x, MPI_Comm comm)
{
    int n = x->count, a = x->alg, s = x->segsize, f = x->fanout;
    if (x->han != NULL) {
        if (x->coll == C_BCAST)
            return cbp_han_bcast(x->han, x->a, n, MPI_BYTE, x->root, comm);
        if (x->coll == C_ALLREDUCE)
            return cbp_han_allreduce(x->han, x->a, x->b, n, MPI_INT, MPI_SUM);
        if (x->coll == C_REDUCE)
            return cbp_han_reduce(x->han, x->a, x->b, n, MPI_INT, MPI_SUM, x->root, comm);
        if (x->coll == C_GATHER)
            return cbp_han_gather(x->han, x->a, x->b, n, MPI_BYTE, x->root, comm);
        if (x->coll == C_SCATTER)
            return cbp_han_scatter(x->han, x->a, x->b, n, MPI_BYTE, x->root, comm);
        if (x->coll == C_ALLGATHER)
            return cbp_han_allgather(x->han, x->a, x->b, n, MPI_BYTE, comm);
        if (x->coll == C_BARRIER)
            return cbp_han_barrier(x->han);
        return MPI_ERR_ARG;
    }
    switch (x->coll) {
    case C_BCAST:
        return cbp_bcast(x->a, n, MPI_BYTE, x->root, comm, a, s, f);
    case C_GATHER:
        return cbp_gather(x->a, n, MPI_BYTE, x->b, n, MPI_BYTE, x->root, comm, a, s, f);
    case C_SCATTER:
        return cbp_scatter(x->a, n, MPI_BYTE, x->b, n, MPI_BYTE, x->root, comm, a, s, f);
    case C_REDUCE:
        return cbp_reduce(x->a, x->b, n, MPI_INT, MPI_SUM, x->root, comm, a, s, f);
    case C_ALLREDUCE:
        return cbp_allreduce(x->a, x->b, n, MPI_INT, MPI_SUM, comm, a, s, f);
    case C_BARRIER:
        return cbp_barrier(comm, a);
    case C_ALLGATHER:
        return cbp_allgather(x->a, n, MPI_BYTE, x->b, n, MPI_BYTE, comm, a, s, f);
    case C_ALLGATHERV:
        return cbp_allgatherv(x->a, x->rc[x->rank], MPI_BYTE, x->b, x->rc, x->rd, MPI_BYTE,
                              comm, a, s, f);
    case C_ALLTOALL:
        return cbp_alltoall(x->a, n, MPI_BYTE, x->b, n, MPI_BYTE, comm, a, s, f);
    case C_ALLTOALLV:
        return cbp_alltoallv(x->a, x->sc, x->sd, MPI_BYTE, x->b, x->rc, x->rd, MPI_BYTE, comm,
                             a, s, f);
    case C_REDUCE_SCATTER:
        return cbp_reduce_scatter(x->a, x->b, x->rc, MPI_INT, MPI_SUM, comm, a, s, f);
    case C_REDUCE_SCATTER_BLOCK:
        return cbp_reduce_scatter_block(x->a, x->b, n, MPI_INT, MPI_SUM, comm, a, s, f);
    default:
        return MPI_ERR_ARG;
    }
}

static int run_native(ctx_t *x, MPI_Comm comm)
{
    int n = x->count;
    switch (x->coll) {
    case C_BCAST:
        return MPI_Bcast(x->a, n, MPI_BYTE, x->root, comm);
    case C_GATHER:
        return MPI_Gather(x->a, n, MPI_BYTE, x->b, n, MPI_BYTE, x->root, comm);
    case C_SCATTER:
        return MPI_Scatter(x->a, n, MPI_BYTE, x->b, n, MPI_BYTE, x->root, comm);
    case C_REDUCE:
        return MPI_Reduce(x->a, x->b, n, MPI_INT, MPI_SUM, x->root, comm);
    case C_ALLREDUCE:
        return MPI_Allreduce(x->a, x->b, n, MPI_INT, MPI_SUM, comm);
    case C_BARRIER:
        return MPI_Barrier(comm);
    case C_ALLGATHER:
        return MPI_Allgather(x->a, n, MPI_BYTE, x->b, n, MPI_BYTE, comm);
    case C_ALLGATHERV:
        return MPI_Allgatherv(x->a, x->rc[x->rank], MPI_BYTE, x->b, x->rc, x->rd, MPI_BYTE,
                              comm);
    case C_ALLTOALL:
        return MPI_Alltoall(x->a, n, MPI_BYTE, x->b, n, MPI_BYTE, comm);
    case C_ALLTOALLV:
        return MPI_Alltoallv(x->a, x->sc, x->sd, MPI_BYTE, x->b, x->rc, x->rd, MPI_BYTE, comm);
    case C_REDUCE_SCATTER:
        return MPI_Reduce_scatter(x->a, x->b, x->rc, MPI_INT, MPI_SUM, comm);
    case C_REDUCE_SCATTER_BLOCK:
        return MPI_Reduce_scatter_block(x->a, x->b, n, MPI_INT, MPI_SUM, comm);
    default:
        return MPI_ERR_ARG;
    }
}

/* Elements a case's size stands for. */
static int case_count(enum coll c, long bytes)
{
    switch (c) {
    case C_REDUCE:
    case C_ALLREDUCE:
    case C_REDUCE_SCATTER:
    case C_REDUCE_SCATTER_BLOCK:
        return bytes / 4 > 0 ? (int)(bytes / 4) : 1;
    case C_BARRIER:
        return 0;
    default:
        return (int)bytes;
    }
}

typedef struct {
    enum coll coll;
    int port, han;
    const char *impl;
    list_t algs, segs, fans, sizes;
    int iterations, root;
} group_t;

static void usage(void)
{
    fprintf(stderr, "usage: port_driver <coll> <port|han|native> <alg> <segsize> <fanout> "
                    "<size_bytes> <iterations> [root] [+ <coll> ...]...\n"
                    "       port_driver decide <coll> <nprocs,...> <bytes,...> <0|1>\n"
                    "coll: bcast gather scatter reduce allreduce barrier allgather allgatherv "
                    "alltoall alltoallv reduce_scatter reduce_scatter_block\n");
}

/* One group from argv[0..argc); 0 on success. */
static int parse_group(int argc, char **argv, int size, group_t *g)
{
    if (argc < 7 || argc > 8)
        return -1;
    int c = coll_index(argv[0]);
    g->han = strcmp(argv[1], "han") == 0;
    g->port = g->han || strcmp(argv[1], "port") == 0;
    g->impl = argv[1];
    g->iterations = atoi(argv[6]);
    g->root = argc > 7 ? atoi(argv[7]) : 0;
    if (c < 0 || (!g->port && strcmp(argv[1], "native") != 0) || parse_list(argv[2], &g->algs) ||
        parse_list(argv[3], &g->segs) || parse_list(argv[4], &g->fans) ||
        parse_list(argv[5], &g->sizes) || g->iterations < 0 || g->root < 0 || g->root >= size)
        return -1;
    if (g->han && (g->algs.n != 1 || g->algs.v[0] != 0 || g->segs.n != 1 || g->segs.v[0] != 0 ||
                   g->fans.n != 1 || g->fans.v[0] != 0))
        return -1;
    g->coll = (enum coll)c;
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "decide") == 0)
        return decide_main(argc, argv);
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    group_t *groups = calloc((size_t)argc, sizeof(group_t));
    int ngroups = 0, bad = groups == NULL;
    for (int i = 1; !bad && i < argc;) {
        int j = i;
        while (j < argc && strcmp(argv[j], "+") != 0)
            j++;
        bad = parse_group(j - i, argv + i, size, &groups[ngroups++]) != 0;
        i = j + 1;
    }
    if (bad || ngroups == 0) {
        if (rank == 0)
            usage();
        MPI_Finalize();
        return 2;
    }
    const char *force_env = getenv("CBP_FORCE_MPIT");
    int force = force_env != NULL && strcmp(force_env, "1") == 0;
    int any_native = 0;
    for (int k = 0; k < ngroups; k++) {
        group_t *g = &groups[k];
        any_native |= !g->port;
        if (!g->port && !force && (g->algs.n > 1 || g->segs.n > 1 || g->fans.n > 1)) {
            if (rank == 0)
                fprintf(stderr, "port_driver: lists of algorithms with impl=native need "
                                "CBP_FORCE_MPIT=1\n");
            MPI_Finalize();
            return 2;
        }
    }
    force = force && any_native;
    const char *prefix = getenv("CBP_MONITOR");
    char junk[4096];
    snprintf(junk, sizeof junk, "%s.junk", prefix ? prefix : "cbp");
    g_count_mode = cbp_count_enabled() && prefix != NULL;
#ifdef CBP_HAVE_MPIT
    if ((prefix != NULL && !g_count_mode) || force) {
        int provided;
        if (prefix != NULL && !g_count_mode) {
            if (mon_init() != 0) {
                if (rank == 0)
                    fprintf(stderr, "port_driver: no pml_monitoring_flush MPI_T variable "
                                    "(launch with --mca pml_monitoring_enable 2)\n");
                MPI_Abort(MPI_COMM_WORLD, 2);
            }
        } else if (MPI_T_init_thread(MPI_THREAD_SINGLE, &provided) != MPI_SUCCESS) {
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
#else
    if (force) {
        if (rank == 0)
            fprintf(stderr, "port_driver: built without MPI_T, CBP_FORCE_MPIT unsupported\n");
        MPI_Finalize();
        return 2;
    }
#endif

    /* Communicators are freed only after the last monitoring flush: Open MPI 5.0.11's
     * monitoring keeps a pointer into a freed communicator and may crash when it flushes
     * after MPI_Comm_free. */
    long ncases = 0;
    for (int k = 0; k < ngroups; k++)
        ncases += (long)groups[k].algs.n * groups[k].segs.n * groups[k].fans.n *
                  groups[k].sizes.n;
    MPI_Comm *comms = calloc((size_t)ncases, sizeof(MPI_Comm));
    cbp_han_t **hans = calloc((size_t)ncases, sizeof(cbp_han_t *));
    const char *warm_env = getenv("CBP_WARMUP");
    int warmup = warm_env != NULL && strcmp(warm_env, "1") == 0, node = -1, any_han = 0;
    for (int k = 0; k < ngroups; k++)
        any_han |= groups[k].han;
    if (any_han) { /* this rank's node: the lowest world rank sharing its memory */
        MPI_Comm shm;
        MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &shm);
        MPI_Allreduce(&rank, &node, 1, MPI_INT, MPI_MIN, shm);
        MPI_Comm_free(&shm);
    }
    int *counts = malloc(sizeof(int) * 4 * (size_t)size);
    if (comms == NULL || counts == NULL || hans == NULL)
        MPI_Abort(MPI_COMM_WORLD, 2);
    int wrong = 0, unported = 0, failed = 0, refused = 0, index = 0, ndup = 0;
    for (int k = 0; k < ngroups; k++) {
        group_t *g = &groups[k];
        const char *cn = COLL_NAMES[g->coll];
        for (int ia = 0; ia < g->algs.n; ia++)
            for (int is = 0; is < g->segs.n; is++)
                for (int jf = 0; jf < g->fans.n; jf++)
                    for (int iz = 0; iz < g->sizes.n; iz++, index++) {
                        ctx_t x;
                        memset(&x, 0, sizeof x);
                        x.coll = g->coll;
                        x.port = g->port;
                        x.alg = (int)g->algs.v[ia];
                        x.segsize = (int)g->segs.v[is];
                        x.fanout = (int)g->fans.v[jf];
                        x.root = g->root;
                        x.rank = rank;
                        x.size = size;
                        long bytes = g->sizes.v[iz];
                        x.count = case_count(g->coll, bytes);
                        x.sc = counts;
                        x.sd = counts + size;
                        x.rc = counts + 2 * size;
                        x.rd = counts + 3 * size;
                        size_t abytes, bbytes;
                        layout(&x, &abytes, &bbytes);
                        x.a = malloc(abytes);
                        x.b = malloc(bbytes);
                        if (x.a == NULL || x.b == NULL) {
                            fprintf(stderr, "port_driver: out of memory\n");
                            MPI_Abort(MPI_COMM_WORLD, 2);
                        }
#ifdef CBP_HAVE_MPIT
                        if (force && !g->port &&
                            force_algorithm(x.coll, x.alg, x.segsize, x.fanout) != 0) {
                            fprintf(stderr, "port_driver: cannot force %s algorithm %d "
                                            "through MPI_T (launch with --mca "
                                            "coll_tuned_use_dynamic_rules 1)\n",
                                    cn, x.alg);
                            MPI_Abort(MPI_COMM_WORLD, 2);
                        }
#endif
                        /* With CBP_WARMUP, every case shares one communicator (and one
                         * cbp_han handle): see the end of main. */
                        MPI_Comm comm;
                        if (!warmup || ndup == 0) {
                            MPI_Comm_dup(MPI_COMM_WORLD, &comm);
                            comms[ndup++] = comm;
                            MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
                        }
                        comm = comms[ndup - 1];
                        int hi = warmup ? 0 : index;
                        if (g->han && hans[hi] == NULL &&
                            cbp_han_init(comm, node, &hans[hi]) != MPI_SUCCESS) {
                            fprintf(stderr, "port_driver: cbp_han_init failed\n");
                            MPI_Abort(MPI_COMM_WORLD, 2);
                        }
                        x.han = g->han ? hans[hi] : NULL;
                        if (warmup && !g->port && g->iterations > 0) {
                            fill(&x, bbytes);
                            (void)run_native(&x, comm);
                        }
                        char name[4096];
                        snprintf(name, sizeof name, "%s.%d", prefix ? prefix : "cbp", index);
                        if (phase_begin(junk) != 0) {
                            fprintf(stderr, "port_driver: monitoring flush failed\n");
                            MPI_Abort(MPI_COMM_WORLD, 2);
                        }
                        const char *status = "ok";
                        for (int it = 0; it < g->iterations; it++) {
                            x.it = it;
                            fill(&x, bbytes);
                            int rc = x.port ? run_port(&x, comm) : run_native(&x, comm);
                            int cls = MPI_SUCCESS;
                            if (rc != MPI_SUCCESS)
                                MPI_Error_class(rc, &cls);
                            if (rc == MPI_ERR_ARG && x.port) {
                                unported = 1;
                                status = "unported";
                                break;
                            }
                            if (cls == MPI_ERR_UNSUPPORTED_OPERATION) {
                                refused = 1;
                                status = "refused";
                                break;
                            }
                            if (rc != MPI_SUCCESS) {
                                fprintf(stderr, "FAILED case=%d rank=%d rc=%d\n", index, rank,
                                        rc);
                                failed = 1;
                                status = "failed";
                                break;
                            }
                            long badpos = check(&x);
                            if (badpos != 0) {
                                fprintf(stderr, "WRONG case=%d coll=%s impl=%s alg=%d size=%ld "
                                                "rank=%d iteration=%d element=%ld\n",
                                        index, cn, g->impl, x.alg, bytes, rank, it, badpos - 1);
                                wrong = 1;
                            }
                        }
                        if (phase_end(name) != 0) {
                            fprintf(stderr, "port_driver: monitoring flush failed\n");
                            MPI_Abort(MPI_COMM_WORLD, 2);
                        }
                        if (rank == 0)
                            printf("CASE %d group=%d coll=%s impl=%s alg=%d segsize=%d "
                                   "fanout=%d size=%ld count=%d iterations=%d root=%d "
                                   "status=%s\n",
                                   index, k, cn, g->impl, x.alg, x.segsize, x.fanout, bytes,
                                   x.count, g->iterations, g->root, status);
                        free(x.a);
                        free(x.b);
                        if (unported || failed)
                            goto done;
                    }
    }
done:
    fflush(stdout);
#ifdef CBP_HAVE_MPIT
    /* With CBP_WARMUP (coll/han runs on several hosts), Open MPI 5.0.11 with
     * pml_monitoring_enable crashed at the end (SIGSEGV in mca_coll_base_comm_unselect, in
     * MPI_Comm_free or MPI_Finalize) once two han communicators had run a segmented
     * allreduce, also with no flush; one shared communicator, left with the MPI_T session
     * to MPI_Finalize, ends cleanly. */
    if (g_mon_on && !warmup)
        mon_end(junk);
#endif
    for (int i = 0; i < ncases; i++)
        cbp_han_free(hans[i]);
    free(hans);
    for (int i = 0; i < ndup && !warmup; i++)
        MPI_Comm_free(&comms[i]);
    free(comms);
    free(counts);
    for (int k = 0; k < ngroups; k++) {
        free(groups[k].algs.v);
        free(groups[k].segs.v);
        free(groups[k].fans.v);
        free(groups[k].sizes.v);
    }
    free(groups);
#ifdef CBP_HAVE_MPIT
    if ((g_mon_on || force) && !warmup)
        MPI_T_finalize();
#endif
    MPI_Finalize();
    if (unported) {
        if (rank == 0)
            fprintf(stderr, "UNPORTED case=%d\n", index);
        return 3;
    }
    if (wrong || failed)
        return 1;
    return refused ? 4 : 0;
}
