/*
 * impitrace: an LD_PRELOAD library that records which algorithm functions Intel MPI runs
 * inside each collective call.
 *
 * Intel MPI neither reports its choice (I_MPI_DEBUG names no algorithm) nor calls its
 * algorithms through a PLT, so they cannot be wrapped as algtrace.c wraps Open MPI's. Its
 * libmpi does keep a symbol table (.symtab, local symbols): after MPI_Init this library
 * reads it from the file, puts a breakpoint (int3) on the first byte of every function
 * whose name says it is an algorithm of a traced collective ("..._Bcast_intra_...",
 * "..._Bcast_inter_..."; not the "_auto" dispatchers, nor the "_check" tests) or a step of
 * its shared-memory collectives ("MPIDI_SHMGR_Gather...", "MPIDI_SHMGR_Release..."), counts
 * the hits in its SIGTRAP handler, which puts the byte back, single-steps it and sets the
 * breakpoint again. x86-64 Linux only. Slow (two signals a hit): for a few calls a point.
 *
 * The public MPI_<Coll> functions are wrapped to know the call a hit belongs to:
 * collective, bytes (count x type size, as Intel's tuning file counts msg_size) and the
 * communicator's size; a hit outside any wrapped call is not counted.
 * At MPI_Finalize each rank writes $COLLBENCH_IMPITRACE.<rank>:
 *   "<epoch> <W|D> <coll> <bytes> <comm size> <function> <hits>"
 *   "DUPS <n>" / "DROPPED <n>" / "TRAPS <functions with a breakpoint>"
 * epoch: MPI_Comm_dup calls so far (the kernel measures on a dup); W: MPI_COMM_WORLD.
 * $COLLBENCH_IMPITRACE_COLLS: the collectives to trace, as Intel spells them
 * ("Bcast,Allreduce"); all wrapped ones when unset.
 */
#define _GNU_SOURCE
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <mpi.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <ucontext.h>
#include <unistd.h>

#define MAX_TRAPS 4096
#define MAX_RECORDS 16384

struct trap {
    unsigned char *addr;
    unsigned char orig;
    char *name;
};

struct record {
    int epoch;
    char where;
    const char *coll;
    long long bytes;
    int size;
    int trap;
    long long hits;
};

static struct trap traps[MAX_TRAPS];
static int ntraps;
static struct record records[MAX_RECORDS];
static int nrecords;
static long long dropped;
static int epoch, written;
static __thread unsigned char *stepping;  /* the breakpoint to set again after one step */
/* the wrapped call in progress (one thread calls MPI in the kernel) */
static const char *cur_coll;
static long long cur_bytes;
static int cur_size;
static char cur_where;

static int find_trap(unsigned char *addr)
{
    int lo = 0, hi = ntraps - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (traps[mid].addr == addr)
            return mid;
        if (traps[mid].addr < addr)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return -1;
}

static void hit(int t)
{
    if (!cur_coll)
        return;
    for (int i = nrecords - 1; i >= 0 && records[i].epoch == epoch; i--) {
        struct record *r = &records[i];
        if (r->trap == t && r->coll == cur_coll && r->bytes == cur_bytes &&
            r->where == cur_where && r->size == cur_size) {
            r->hits++;
            return;
        }
    }
    if (nrecords == MAX_RECORDS) {
        dropped++;
        return;
    }
    records[nrecords++] = (struct record){epoch, cur_where, cur_coll, cur_bytes, cur_size, t,
                                          1};
}

static void on_trap(int sig, siginfo_t *si, void *ctx)
{
    ucontext_t *uc = ctx;
    greg_t *rip = &uc->uc_mcontext.gregs[REG_RIP];
    (void)sig;
    (void)si;
    if (stepping) {  /* the original instruction ran: set the breakpoint again */
        *stepping = 0xCC;
        stepping = NULL;
        uc->uc_mcontext.gregs[REG_EFL] &= ~(greg_t)0x100;
        return;
    }
    unsigned char *at = (unsigned char *)*rip - 1;
    int t = find_trap(at);
    if (t < 0) {  /* not ours: what SIGTRAP does by default */
        signal(SIGTRAP, SIG_DFL);
        raise(SIGTRAP);
        return;
    }
    hit(t);
    *at = traps[t].orig;
    *rip = (greg_t)at;
    uc->uc_mcontext.gregs[REG_EFL] |= 0x100;  /* trap after one instruction */
    stepping = at;
}

static const char *wanted;  /* $COLLBENCH_IMPITRACE_COLLS */

static int traced(const char *name)
{
    static const char *colls[] = {"Allgather", "Allreduce", "Alltoall", "Barrier", "Bcast",
                                  "Gather", "Reduce", "Reduce_scatter_block", "Scatter", NULL};
    size_t n = strlen(name);
    if ((n > 6 && !strcmp(name + n - 6, "_check")) || strstr(name, "_auto") ||
        (n > 4 && !strcmp(name + n - 4, "_cnt")))
        return 0;
    /* Intel's shared-memory gather/release steps (barrier, bcast, reduce, allreduce on one
     * node), named by step rather than by collective: a call's own steps tell them apart */
    if (!strncmp(name, "MPIDI_SHMGR_Gather", 18) || !strncmp(name, "MPIDI_SHMGR_Release", 19))
        return 1;
    for (int i = 0; colls[i]; i++) {
        char pat[64];
        if (wanted) {
            size_t k = strlen(colls[i]);
            const char *p = strstr(wanted, colls[i]);
            if (!p || (p != wanted && p[-1] != ',') || (p[k] && p[k] != ','))
                continue;
        }
        snprintf(pat, sizeof pat, "_%s_intra_", colls[i]);
        if (strstr(name, pat))
            return 1;
        snprintf(pat, sizeof pat, "_%s_inter_", colls[i]);
        if (strstr(name, pat))
            return 1;
    }
    return 0;
}

static int by_addr(const void *a, const void *b)
{
    const struct trap *x = a, *y = b;
    return x->addr < y->addr ? -1 : x->addr > y->addr;
}

static int find_libmpi(struct dl_phdr_info *info, size_t size, void *data)
{
    const char *slash = strrchr(info->dlpi_name, '/');
    const char *base = slash ? slash + 1 : info->dlpi_name;
    (void)size;
    if (!strncmp(base, "libmpi.so", 9)) {
        *(struct dl_phdr_info *)data = *info;
        return 1;
    }
    return 0;
}

static void set_traps(void)
{
    struct dl_phdr_info lib = {0};
    struct stat st;
    if (!dl_iterate_phdr(find_libmpi, &lib))
        return;
    int fd = open(lib.dlpi_name, O_RDONLY);
    if (fd < 0 || fstat(fd, &st) != 0)
        return;
    unsigned char *file = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (file == MAP_FAILED)
        return;
    Elf64_Ehdr *eh = (Elf64_Ehdr *)file;
    Elf64_Shdr *sh = (Elf64_Shdr *)(file + eh->e_shoff);
    wanted = getenv("COLLBENCH_IMPITRACE_COLLS");
    for (int s = 0; s < eh->e_shnum && ntraps < MAX_TRAPS; s++) {
        if (sh[s].sh_type != SHT_SYMTAB)
            continue;
        Elf64_Sym *sym = (Elf64_Sym *)(file + sh[s].sh_offset);
        const char *names = (const char *)(file + sh[sh[s].sh_link].sh_offset);
        size_t count = sh[s].sh_size / sizeof(Elf64_Sym);
        for (size_t i = 0; i < count && ntraps < MAX_TRAPS; i++) {
            if (ELF64_ST_TYPE(sym[i].st_info) != STT_FUNC || !sym[i].st_value ||
                !traced(names + sym[i].st_name))
                continue;
            traps[ntraps].addr = (unsigned char *)(lib.dlpi_addr + sym[i].st_value);
            traps[ntraps].name = strdup(names + sym[i].st_name);
            ntraps++;
        }
    }
    munmap(file, (size_t)st.st_size);
    qsort(traps, (size_t)ntraps, sizeof traps[0], by_addr);
    struct sigaction sa = {0};
    sa.sa_sigaction = on_trap;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTRAP, &sa, NULL);
    long page = sysconf(_SC_PAGESIZE);
    for (int t = 0; t < ntraps; t++) {
        uintptr_t p = (uintptr_t)traps[t].addr & ~(uintptr_t)(page - 1);
        if (mprotect((void *)p, (size_t)page * 2, PROT_READ | PROT_WRITE | PROT_EXEC) != 0) {
            traps[t].orig = 0;
            continue;
        }
        traps[t].orig = *traps[t].addr;
        *traps[t].addr = 0xCC;
    }
}

static void write_trace(void)
{
    const char *path = getenv("COLLBENCH_IMPITRACE");
    char name[4096];
    int rank = 0;
    if (!path || written)
        return;
    written = 1;
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    snprintf(name, sizeof name, "%s.%d", path, rank);
    FILE *f = fopen(name, "w");
    if (!f)
        return;
    for (int i = 0; i < nrecords; i++) {
        struct record *r = &records[i];
        fprintf(f, "%d %c %s %lld %d %s %lld\n", r->epoch, r->where, r->coll, r->bytes,
                r->size, traps[r->trap].name, r->hits);
    }
    fprintf(f, "DUPS %d\nDROPPED %lld\nTRAPS %d\n", epoch, dropped, ntraps);
    fclose(f);
}

int MPI_Init(int *argc, char ***argv)
{
    int rc = PMPI_Init(argc, argv);
    set_traps();
    return rc;
}

int MPI_Init_thread(int *argc, char ***argv, int required, int *provided)
{
    int rc = PMPI_Init_thread(argc, argv, required, provided);
    set_traps();
    return rc;
}

int MPI_Finalize(void)
{
    write_trace();
    return PMPI_Finalize();
}

int MPI_Comm_dup(MPI_Comm comm, MPI_Comm *out)
{
    epoch++;
    return PMPI_Comm_dup(comm, out);
}

static void enter(const char *coll, int count, MPI_Datatype type, MPI_Comm comm)
{
    int tsize = 0;
    if (count > 0 && type != MPI_DATATYPE_NULL)
        PMPI_Type_size(type, &tsize);
    cur_bytes = (long long)count * tsize;
    PMPI_Comm_size(comm, &cur_size);
    cur_where = comm == MPI_COMM_WORLD ? 'W' : 'D';
    cur_coll = coll;
}

#define LEAVE(call) do { int rc_ = (call); cur_coll = NULL; return rc_; } while (0)

int MPI_Bcast(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm)
{
    enter("bcast", count, type, comm);
    LEAVE(PMPI_Bcast(buf, count, type, root, comm));
}

int MPI_Allreduce(const void *s, void *r, int count, MPI_Datatype type, MPI_Op op,
                  MPI_Comm comm)
{
    enter("allreduce", count, type, comm);
    LEAVE(PMPI_Allreduce(s, r, count, type, op, comm));
}

int MPI_Reduce(const void *s, void *r, int count, MPI_Datatype type, MPI_Op op, int root,
               MPI_Comm comm)
{
    enter("reduce", count, type, comm);
    LEAVE(PMPI_Reduce(s, r, count, type, op, root, comm));
}

int MPI_Allgather(const void *s, int sc, MPI_Datatype st, void *r, int rc, MPI_Datatype rt,
                  MPI_Comm comm)
{
    enter("allgather", sc, st, comm);
    LEAVE(PMPI_Allgather(s, sc, st, r, rc, rt, comm));
}

int MPI_Alltoall(const void *s, int sc, MPI_Datatype st, void *r, int rc, MPI_Datatype rt,
                 MPI_Comm comm)
{
    enter("alltoall", sc, st, comm);
    LEAVE(PMPI_Alltoall(s, sc, st, r, rc, rt, comm));
}

int MPI_Gather(const void *s, int sc, MPI_Datatype st, void *r, int rc, MPI_Datatype rt,
               int root, MPI_Comm comm)
{
    enter("gather", sc, st, comm);
    LEAVE(PMPI_Gather(s, sc, st, r, rc, rt, root, comm));
}

int MPI_Scatter(const void *s, int sc, MPI_Datatype st, void *r, int rc, MPI_Datatype rt,
                int root, MPI_Comm comm)
{
    enter("scatter", rc, rt, comm);
    LEAVE(PMPI_Scatter(s, sc, st, r, rc, rt, root, comm));
}

int MPI_Reduce_scatter_block(const void *s, void *r, int count, MPI_Datatype type,
                             MPI_Op op, MPI_Comm comm)
{
    enter("reduce_scatter_block", count, type, comm);
    LEAVE(PMPI_Reduce_scatter_block(s, r, count, type, op, comm));
}

int MPI_Barrier(MPI_Comm comm)
{
    enter("barrier", 0, MPI_DATATYPE_NULL, comm);
    LEAVE(PMPI_Barrier(comm));
}
