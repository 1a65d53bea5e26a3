/*
 * port_driver: runs a collbench port of an Open MPI algorithm, or the MPI library's own
 * collective, on (a duplicate of) MPI_COMM_WORLD and checks every result.
 *
 *   port_driver <coll> <impl> <alg> <segsize> <fanout> <size_bytes> <iterations> [root]
 *
 *   coll        bcast | gather | scatter | reduce | allreduce | barrier
 *   impl        port   = cbp_<coll>(..., alg, segsize, fanout)
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
 *               bcast_algorithm_knomial_radix) before duplicating the communicator.
 *   size_bytes  per-rank message size: MPI_BYTE elements for bcast/gather/scatter,
 *               MPI_INT elements (size / 4, at least 1) with MPI_SUM for reduce/allreduce;
 *               ignored by barrier
 *   iterations  collectives per case (0 = none: an empty phase)
 *   root        root of rooted collectives (default 0)
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
 *
 * Output: one line per case on rank 0's stdout:
 *   CASE <index> coll=<coll> impl=<impl> alg=<a> segsize=<s> fanout=<f> size=<bytes>
 *        count=<elements> iterations=<n> root=<r>
 * Any rank that sees a wrong result prints "WRONG ..." on stderr; the exit status is then
 * 1 (2 for usage errors, 3 when a port returns MPI_ERR_ARG: algorithm not ported).
 */
#include "ompi_ports.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if !defined(CBP_NO_MPIT)
#define CBP_HAVE_MPIT 1
#endif

enum coll { C_BCAST, C_GATHER, C_SCATTER, C_REDUCE, C_ALLREDUCE, C_BARRIER };
static const char *const COLL_NAMES[] = {"bcast", "gather", "scatter", "reduce",
                                         "allreduce", "barrier"};

#define MAX_LIST 64

typedef struct {
    int n;
    long v[MAX_LIST];
} list_t;

static int parse_list(const char *s, list_t *out)
{
    out->n = 0;
    const char *p = s;
    while (*p) {
        char *end;
        long x = strtol(p, &end, 10);
        if (end == p || out->n >= MAX_LIST)
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

/* Force coll/tuned's choice for communicators created from now on. */
static int force_algorithm(enum coll c, int alg, int segsize, int fanout)
{
    char name[256];
    const char *cn = COLL_NAMES[c];
    int f = fanout > 0 ? fanout : 4;
    snprintf(name, sizeof name, "coll_tuned_%s_algorithm", cn);
    if (set_cvar(name, alg) != 0)
        return -1;
    if (c == C_BARRIER)
        return 0;
    snprintf(name, sizeof name, "coll_tuned_%s_algorithm_segmentsize", cn);
    if (set_cvar(name, segsize) != 0)
        return -1;
    snprintf(name, sizeof name, "coll_tuned_%s_algorithm_tree_fanout", cn);
    if (set_cvar(name, f) != 0)
        return -1;
    snprintf(name, sizeof name, "coll_tuned_%s_algorithm_chain_fanout", cn);
    if (set_cvar(name, f) != 0)
        return -1;
    if (c == C_BCAST && set_cvar("coll_tuned_bcast_algorithm_knomial_radix", f) != 0)
        return -1;
    return 0;
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

typedef struct {
    enum coll coll;
    int port, alg, segsize, fanout, root, rank, size, count, it;
    unsigned char *a, *b; /* send / receive buffers */
} ctx_t;

static void fill(ctx_t *x)
{
    long n = x->count;
    switch (x->coll) {
    case C_BCAST:
        for (long i = 0; i < n; i++)
            x->a[i] = x->rank == x->root ? pat(i, x->root, x->it)
                                         : (unsigned char)~pat(i, x->root, x->it);
        break;
    case C_GATHER:
        for (long i = 0; i < n; i++)
            x->a[i] = pat(i, x->rank, x->it);
        memset(x->b, 0xa5, (size_t)n * (size_t)x->size);
        break;
    case C_SCATTER:
        for (int r = 0; r < x->size; r++)
            for (long i = 0; i < n; i++)
                x->a[(long)r * n + i] = pat(i, r, x->it);
        memset(x->b, 0x5a, (size_t)n);
        break;
    case C_REDUCE:
    case C_ALLREDUCE: {
        int *s = (int *)(void *)x->a, *r = (int *)(void *)x->b;
        for (long i = 0; i < n; i++) {
            s[i] = ival(x->rank, i, x->it);
            r[i] = -12345;
        }
        break;
    }
    case C_BARRIER:
        break;
    }
}

/* 0 if this rank's result is right; otherwise the first wrong element's index + 1. */
static long check(const ctx_t *x)
{
    long n = x->count;
    switch (x->coll) {
    case C_BCAST:
        for (long i = 0; i < n; i++)
            if (x->a[i] != pat(i, x->root, x->it))
                return i + 1;
        return 0;
    case C_GATHER:
        if (x->rank != x->root)
            return 0;
        for (int r = 0; r < x->size; r++)
            for (long i = 0; i < n; i++)
                if (x->b[(long)r * n + i] != pat(i, r, x->it))
                    return (long)r * n + i + 1;
        return 0;
    case C_SCATTER:
        for (long i = 0; i < n; i++)
            if (x->b[i] != pat(i, x->rank, x->it))
                return i + 1;
        return 0;
    case C_REDUCE:
    case C_ALLREDUCE: {
        if (x->coll == C_REDUCE && x->rank != x->root)
            return 0;
        const int *r = (const int *)(const void *)x->b;
        for (long i = 0; i < n; i++) {
            long want = 0;
            for (int q = 0; q < x->size; q++)
                want += ival(q, i, x->it);
            if (r[i] != (int)want)
                return i + 1;
        }
        return 0;
    }
    case C_BARRIER:
        return 0;
    }
    return 0;
}

static int run_one(ctx_t *x, MPI_Comm comm)
{
    int n = x->count;
    if (x->port) {
        switch (x->coll) {
        case C_BCAST:
            return cbp_bcast(x->a, n, MPI_BYTE, x->root, comm, x->alg, x->segsize, x->fanout);
        case C_GATHER:
            return cbp_gather(x->a, n, MPI_BYTE, x->b, n, MPI_BYTE, x->root, comm, x->alg,
                              x->segsize, x->fanout);
        case C_SCATTER:
            return cbp_scatter(x->a, n, MPI_BYTE, x->b, n, MPI_BYTE, x->root, comm, x->alg,
                               x->segsize, x->fanout);
        case C_REDUCE:
            return cbp_reduce(x->a, x->b, n, MPI_INT, MPI_SUM, x->root, comm, x->alg,
                              x->segsize, x->fanout);
        case C_ALLREDUCE:
            return cbp_allreduce(x->a, x->b, n, MPI_INT, MPI_SUM, comm, x->alg, x->segsize,
                                 x->fanout);
        case C_BARRIER:
            return cbp_barrier(comm, x->alg);
        }
        return MPI_ERR_ARG;
    }
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
    }
    return MPI_ERR_ARG;
}

static void usage(void)
{
    fprintf(stderr, "usage: port_driver <bcast|gather|scatter|reduce|allreduce|barrier> "
                    "<port|native> <alg> <segsize> <fanout> <size_bytes> <iterations> "
                    "[root]\n");
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc < 8 || argc > 9) {
        if (rank == 0)
            usage();
        MPI_Finalize();
        return 2;
    }
    int coll = -1;
    for (int c = 0; c <= C_BARRIER; c++)
        if (strcmp(argv[1], COLL_NAMES[c]) == 0)
            coll = c;
    int port = strcmp(argv[2], "port") == 0;
    list_t algs, segs, fans, sizes;
    int iterations = atoi(argv[7]);
    int root = argc > 8 ? atoi(argv[8]) : 0;
    if (coll < 0 || (!port && strcmp(argv[2], "native") != 0) || parse_list(argv[3], &algs) ||
        parse_list(argv[4], &segs) || parse_list(argv[5], &fans) ||
        parse_list(argv[6], &sizes) || iterations < 0 || root < 0 || root >= size) {
        if (rank == 0)
            usage();
        MPI_Finalize();
        return 2;
    }
    const char *force_env = getenv("CBP_FORCE_MPIT");
    int force = !port && force_env != NULL && strcmp(force_env, "1") == 0;
    if (!port && !force && (algs.n > 1 || segs.n > 1 || fans.n > 1)) {
        if (rank == 0)
            fprintf(stderr, "port_driver: lists of algorithms with impl=native need "
                            "CBP_FORCE_MPIT=1\n");
        MPI_Finalize();
        return 2;
    }
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
    int ncases = algs.n * segs.n * fans.n * sizes.n;
    MPI_Comm *comms = calloc((size_t)ncases, sizeof(MPI_Comm));
    if (comms == NULL)
        MPI_Abort(MPI_COMM_WORLD, 2);
    int wrong = 0, unported = 0, failed = 0, index = 0, ndup = 0;
    for (int ia = 0; ia < algs.n; ia++)
        for (int is = 0; is < segs.n; is++)
            for (int jf = 0; jf < fans.n; jf++)
                for (int iz = 0; iz < sizes.n; iz++, index++) {
                    ctx_t x;
                    memset(&x, 0, sizeof x);
                    x.coll = (enum coll)coll;
                    x.port = port;
                    x.alg = (int)algs.v[ia];
                    x.segsize = (int)segs.v[is];
                    x.fanout = (int)fans.v[jf];
                    x.root = root;
                    x.rank = rank;
                    x.size = size;
                    long bytes = sizes.v[iz];
                    if (coll == C_REDUCE || coll == C_ALLREDUCE)
                        x.count = bytes / 4 > 0 ? (int)(bytes / 4) : 1;
                    else if (coll == C_BARRIER)
                        x.count = 0;
                    else
                        x.count = (int)bytes;
                    size_t n = (size_t)x.count;
                    size_t abytes = n * 4 * (coll == C_SCATTER ? (size_t)size : 1) + 16;
                    size_t bbytes = n * 4 * (coll == C_GATHER ? (size_t)size : 1) + 16;
                    x.a = malloc(abytes);
                    x.b = malloc(bbytes);
                    if (x.a == NULL || x.b == NULL) {
                        fprintf(stderr, "port_driver: out of memory\n");
                        MPI_Abort(MPI_COMM_WORLD, 2);
                    }
#ifdef CBP_HAVE_MPIT
                    if (force && force_algorithm(x.coll, x.alg, x.segsize, x.fanout) != 0) {
                        fprintf(stderr, "port_driver: cannot force %s algorithm %d through "
                                        "MPI_T (launch with --mca "
                                        "coll_tuned_use_dynamic_rules 1)\n",
                                COLL_NAMES[coll], x.alg);
                        MPI_Abort(MPI_COMM_WORLD, 2);
                    }
#endif
                    MPI_Comm comm;
                    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
                    comms[ndup++] = comm;
                    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
                    char name[4096];
                    snprintf(name, sizeof name, "%s.%d", prefix ? prefix : "cbp", index);
                    if (phase_begin(junk) != 0) {
                        fprintf(stderr, "port_driver: monitoring flush failed\n");
                        MPI_Abort(MPI_COMM_WORLD, 2);
                    }
                    for (int it = 0; it < iterations; it++) {
                        x.it = it;
                        fill(&x);
                        int rc = run_one(&x, comm);
                        if (rc == MPI_ERR_ARG && port) {
                            unported = 1;
                            break;
                        }
                        if (rc != MPI_SUCCESS) {
                            fprintf(stderr, "FAILED case=%d rank=%d rc=%d\n", index, rank, rc);
                            failed = 1;
                            break;
                        }
                        long bad = check(&x);
                        if (bad != 0) {
                            fprintf(stderr, "WRONG case=%d coll=%s impl=%s alg=%d size=%ld "
                                            "rank=%d iteration=%d element=%ld\n",
                                    index, COLL_NAMES[coll], argv[2], x.alg, bytes, rank, it,
                                    bad - 1);
                            wrong = 1;
                        }
                    }
                    if (phase_end(name) != 0) {
                        fprintf(stderr, "port_driver: monitoring flush failed\n");
                        MPI_Abort(MPI_COMM_WORLD, 2);
                    }
                    if (rank == 0)
                        printf("CASE %d coll=%s impl=%s alg=%d segsize=%d fanout=%d size=%ld "
                               "count=%d iterations=%d root=%d\n",
                               index, COLL_NAMES[coll], argv[2], x.alg, x.segsize, x.fanout,
                               bytes, x.count, iterations, root);
                    free(x.a);
                    free(x.b);
                    if (unported || failed)
                        goto done;
                }
done:
    fflush(stdout);
#ifdef CBP_HAVE_MPIT
    if (g_mon_on)
        mon_end(junk);
#endif
    for (int i = 0; i < ndup; i++)
        MPI_Comm_free(&comms[i]);
    free(comms);
#ifdef CBP_HAVE_MPIT
    if (g_mon_on || force)
        MPI_T_finalize();
#endif
    MPI_Finalize();
    if (unported) {
        if (rank == 0)
            fprintf(stderr, "UNPORTED coll=%s\n", COLL_NAMES[coll]);
        return 3;
    }
    return (wrong || failed) ? 1 : 0;
}
