/* collbench's rank guard: runs one rank of a workload's program and leaves nothing behind.
 *
 *   rankguard LIMIT PROGRAM [ARG...]
 *
 * mpirun (prterun, orted, Hydra's proxy) gives each rank pipes for stdout and stderr and
 * counts the rank as ended only when both reach end-of-file. A program that leaves a child
 * behind (a daemon: setsid, a double fork) keeps them open: mpirun waits for it until the
 * launch times out, and the child outlives the launch in a session of its own, where
 * collbench's sweep of the launch's session does not look. Between mpirun and the program:
 *  - the guard is a child subreaper (PR_SET_CHILD_SUBREAPER), so whatever the program leaves
 *    behind is re-parented to it, whatever session or environment it has, and it kills all
 *    of it when the program has ended;
 *  - the program writes into the guard's own pipes, which the guard copies on to mpirun's:
 *    once the program has ended, nothing of it holds mpirun's pipes, and the rank ends then;
 *  - it copies at most LIMIT bytes (stdout and stderr together): prterun keeps a rank's
 *    output in memory without bound, so a rank printing more is stopped, with one line
 *    on stderr that collbench turns into the point's reason;
 *  - a signal that ends the rank (TERM, INT, HUP, QUIT) ends the program and everything
 *    under it at once; USR1 and USR2 are passed on.
 * It runs where the rank runs (this machine or a remote host), which collbench cannot reach.
 * The exit status is the program's (a program killed by a signal: the guard dies of it).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define LIMIT_MARK "collbench: output limit:" /* process.OUTPUT_MARK */
#define SWEEP_ROUNDS 5000                     /* of 2 ms: a process stuck in the kernel */

static pid_t program = -1;
static int program_status = 0, program_done = 0;
static long long room;   /* bytes the rank may still print */
static int overflowed = 0, mpirun_gone = 0;

struct stream { int from, to, open; };

static void reap(void) {
    int status;
    pid_t pid;
    while ((pid = waitpid(-1, &status, WNOHANG)) > 0)
        if (pid == program) { program_status = status; program_done = 1; }
}

/* SIGKILL every live child; how many. Killed children's own children come to the guard
 * (the subreaper), so repeating this until none is found ends the whole tree. */
static int kill_children(void) {
    DIR *proc = opendir("/proc");
    if (proc == NULL) return 0;
    pid_t self = getpid();
    int killed = 0;
    struct dirent *e;
    while ((e = readdir(proc)) != NULL) {
        char *end, path[64], buf[512], state;
        long pid = strtol(e->d_name, &end, 10), ppid;
        if (*end != '\0' || pid <= 0) continue;
        snprintf(path, sizeof path, "/proc/%ld/stat", pid);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0) continue;
        ssize_t n = read(fd, buf, sizeof buf - 1);
        close(fd);
        if (n <= 0) continue;
        buf[n] = '\0';
        char *after = strrchr(buf, ')');  /* the command name may hold anything */
        if (after == NULL || sscanf(after + 1, " %c %ld", &state, &ppid) != 2) continue;
        if (ppid == self && state != 'Z' && kill((pid_t)pid, SIGKILL) == 0) killed++;
    }
    closedir(proc);
    return killed;
}

static void sweep(void) {
    struct timespec pause = {0, 2000000};
    for (int round = 0; round < SWEEP_ROUNDS; round++) {
        int killed = kill_children();
        reap();
        if (killed == 0 && waitpid(-1, NULL, WNOHANG) < 0 && errno == ECHILD) return;
        nanosleep(&pause, NULL);
    }
}

static void write_all(int fd, const char *buf, size_t len) {
    while (len > 0 && !mpirun_gone) {
        ssize_t n = write(fd, buf, len);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) { mpirun_gone = 1; return; }  /* EPIPE: nobody reads the rank any more */
        buf += n;
        len -= (size_t)n;
    }
}

/* Copy what the pipe holds now (one read); 0 once it is closed. */
static int pump(struct stream *s) {
    static char buf[1 << 16];
    ssize_t n = read(s->from, buf, sizeof buf);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) return 0;
    if (n <= 0) { close(s->from); s->open = 0; return 0; }
    long long keep = n < room ? n : room;
    write_all(s->to, buf, (size_t)keep);
    room -= keep;
    if (keep < n) overflowed = 1;
    return 1;
}

/* End as the program ended: by its signal (so that mpirun reports it) or its exit status. */
static void die_of(int sig) {
    struct rlimit none = {0, 0};
    setrlimit(RLIMIT_CORE, &none);  /* the program's core, if any, is the program's */
    signal(sig, SIG_DFL);
    sigset_t one;
    sigemptyset(&one);
    sigaddset(&one, sig);
    sigprocmask(SIG_UNBLOCK, &one, NULL);
    raise(sig);
    exit(128 + sig);
}

static void stopped(long long limit) {
    dprintf(2, "\n" LIMIT_MARK " a rank printed more than %lld bytes (its share of the "
               "launch's limit); it was stopped\n", limit);
    exit(1);
}

/* The guard's child is a keeper (see keep): asked with SIGTERM, it ends the program and
 * what the program left, then dies; SIGKILL only if it has not within a second. */
static void end_everything(void) {
    struct timespec pause = {0, 2000000};
    if (!program_done) kill(program, SIGTERM);
    for (int i = 0; i < 500 && !program_done; i++) {
        nanosleep(&pause, NULL);
        reap();
    }
    if (!program_done) kill(program, SIGKILL);
    sweep();
}

/* Between the guard and the program: a subreaper in a process group of its own. mpirun
 * may SIGKILL the rank's process group (the guard's) right after its SIGTERM, before the
 * guard has ended what the program left behind; the keeper is not in that group, and the
 * guard's death reaches it as SIGTERM (PR_SET_PDEATHSIG). It ends the program and every
 * process the program left (re-parented to it), then ends as the program ended. */
static int keep(char **args, const sigset_t *old, int sigfd) {
    pid_t keeper = getpid();
    program = fork();
    if (program < 0) {
        fprintf(stderr, "rankguard: fork: %s\n", strerror(errno));
        return 127;
    }
    if (program == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);  /* a SIGKILLed keeper takes the program along */
        if (getppid() != keeper) _exit(127);
        signal(SIGPIPE, SIG_DFL);
        sigprocmask(SIG_SETMASK, old, NULL);
        execvp(args[0], args);
        fprintf(stderr, "rankguard: cannot start %s: %s\n", args[0], strerror(errno));
        _exit(127);
    }
    for (;;) {
        struct pollfd fd = {sigfd, POLLIN, 0};
        if (poll(&fd, 1, -1) < 0 && errno != EINTR) break;
        struct signalfd_siginfo info;
        while (read(sigfd, &info, sizeof info) == sizeof info) {
            int sig = (int)info.ssi_signo;
            if (sig == SIGCHLD) {
                reap();
                if (program_done) {
                    sweep();
                    if (WIFSIGNALED(program_status)) die_of(WTERMSIG(program_status));
                    return WIFEXITED(program_status) ? WEXITSTATUS(program_status) : 1;
                }
            } else if (sig == SIGUSR1 || sig == SIGUSR2) {
                kill(program, sig);
            } else {
                if (!program_done) kill(program, SIGKILL);
                sweep();
                die_of(sig);
            }
        }
    }
    kill(program, SIGKILL);
    sweep();
    return 1;
}

int main(int argc, char **argv) {
    char *end;
    if (argc < 3 || (room = strtoll(argv[1], &end, 10)) < 0 || *end != '\0') {
        fprintf(stderr, "usage: rankguard LIMIT PROGRAM [ARG...]\n");
        return 2;
    }
    long long limit = room;
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    const int handled[] = {SIGCHLD, SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};
    sigset_t mask, old;
    sigemptyset(&mask);
    for (size_t i = 0; i < sizeof handled / sizeof *handled; i++) sigaddset(&mask, handled[i]);
    sigprocmask(SIG_BLOCK, &mask, &old);
    int sigfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
    int out[2], err[2];
    if (sigfd < 0 || pipe2(out, O_CLOEXEC) < 0 || pipe2(err, O_CLOEXEC) < 0) {
        fprintf(stderr, "rankguard: %s\n", strerror(errno));
        return 127;
    }
    signal(SIGPIPE, SIG_IGN);
    pid_t guard = getpid();
    program = fork();
    if (program < 0) {
        fprintf(stderr, "rankguard: fork: %s\n", strerror(errno));
        return 127;
    }
    if (program == 0) {  /* the keeper */
        prctl(PR_SET_PDEATHSIG, SIGTERM);  /* a SIGKILLed guard: the keeper ends it all */
        if (getppid() != guard) _exit(127);
        setpgid(0, 0);
        prctl(PR_SET_CHILD_SUBREAPER, 1);
        dup2(out[1], 1);
        dup2(err[1], 2);
        close(out[0]);
        close(err[0]);
        exit(keep(argv + 2, &old, sigfd));
    }
    close(out[1]);
    close(err[1]);
    struct stream streams[2] = {{out[0], 1, 1}, {err[0], 2, 1}};
    for (int i = 0; i < 2; i++) fcntl(streams[i].from, F_SETFL, O_NONBLOCK);
    while (!program_done && !overflowed && !mpirun_gone) {
        struct pollfd fds[3] = {{sigfd, POLLIN, 0}, {streams[0].from, POLLIN, 0},
                                {streams[1].from, POLLIN, 0}};
        for (int i = 0; i < 2; i++) if (!streams[i].open) fds[i + 1].fd = -1;
        if (poll(fds, 3, -1) < 0 && errno != EINTR) break;
        for (int i = 0; i < 2; i++)
            if (streams[i].open && fds[i + 1].revents) pump(&streams[i]);
        struct signalfd_siginfo info;
        while (read(sigfd, &info, sizeof info) == sizeof info) {
            int sig = (int)info.ssi_signo;
            if (sig == SIGCHLD) {
                reap();
            } else if (sig == SIGUSR1 || sig == SIGUSR2) {
                if (getpgid(program) != getpgrp()) kill(program, sig);  /* else it has it */
            } else {
                end_everything();
                die_of(sig);  /* as if the rank itself died of it */
            }
        }
    }
    if (overflowed) {
        end_everything();
        stopped(limit);
    }
    if (!program_done) {  /* mpirun stopped reading: the launch is over */
        end_everything();
        return 1;
    }
    sweep();  /* what the program left behind; then its last output, up to the limit */
    for (int i = 0; i < 2; i++)
        while (streams[i].open && !overflowed && !mpirun_gone && pump(&streams[i])) {}
    if (overflowed) stopped(limit);
    if (WIFSIGNALED(program_status)) die_of(WTERMSIG(program_status));
    return WIFEXITED(program_status) ? WEXITSTATUS(program_status) : 1;
}
