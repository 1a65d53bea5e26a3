/* collprobe: which Open MPI coll component served a collective (collprobe.c). */
#ifndef COLLBENCH_COLLPROBE_H
#define COLLBENCH_COLLPROBE_H
#include <mpi.h>
#include <stddef.h>

/* Forget what was recorded (before a point). */
void cbk_probe_reset(void);
/* 1 and the component's name (and, comma-separated, the components of the sub-communicator
 * calls below it) when a call of `coll` ("bcast", "ibcast", ...) on `comm` was seen since the
 * reset; 0 when none was (not Open MPI, or its functions are not exported). */
int cbk_probe_served(MPI_Comm comm, const char *coll, char *component, size_t n, char *subs,
                     size_t m);
/* The coll/tuned algorithms run on sub-communicators below the call of `coll` on `comm`
 * since the reset: "<coll>@<communicator size>=<algorithm id>", comma-separated ("?": more
 * than the probe keeps); "" for none. */
int cbk_probe_algorithms(MPI_Comm comm, const char *coll, char *out, size_t n);
#endif
