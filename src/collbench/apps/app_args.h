/*
 * app_args.h: what the mini-apps (ring.c, matrix.c, jacobi.c) share: bounded key=value
 * arguments, and a one-line error from rank 0 that ends the run with a given exit status.
 * Header-only (static functions) so each app still builds from its own one source file;
 * the including file defines PROG first and includes the C and MPI headers it needs.
 */
#ifndef COLLBENCH_APP_ARGS_H
#define COLLBENCH_APP_ARGS_H


typedef struct {
    const char *key;
    int count;          /* 1 = a number, 3 = three comma-separated numbers */
    long long lo, hi;   /* inclusive bounds of every number */
    long long val[3];   /* defaults on entry */
    int seen;
} arg_spec;

/* Copy at most 40 characters of untrusted text, escaping anything not printable, so an
 * error message stays on one line. */
static void quote(char *out, size_t outlen, const char *text)
{
    size_t o = 0;
    int n = 0;
    for (const unsigned char *p = (const unsigned char *)text; *p && o + 6 < outlen; ++p) {
        if (++n > 40) {
            o += (size_t)snprintf(out + o, outlen - o, "...");
            break;
        }
        if (isprint(*p) && *p != '\\' && *p != '\'') {
            out[o++] = (char)*p;
        } else {
            o += (size_t)snprintf(out + o, outlen - o, "\\x%02x", *p);
        }
    }
    out[o < outlen ? o : outlen - 1] = '\0';
}

/* One decimal integer, all of `text`, within [lo, hi]. */
static int parse_number(const char *text, long long lo, long long hi, long long *out)
{
    if (!(isdigit((unsigned char)text[0]) || (text[0] == '-' && isdigit((unsigned char)text[1]))))
        return -1;
    errno = 0;
    char *end = NULL;
    long long v = strtoll(text, &end, 10);
    if (errno != 0 || end == text || *end != '\0' || v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

static int parse_value(arg_spec *spec, const char *value)
{
    char buf[128];
    if (strlen(value) >= sizeof buf) return -1;
    strcpy(buf, value);
    char *p = buf;
    for (int i = 0; i < spec->count; ++i) {
        char *comma = strchr(p, ',');
        if (i < spec->count - 1) {
            if (comma == NULL) return -1;
            *comma = '\0';
        } else if (comma != NULL) {
            return -1;
        }
        if (parse_number(p, spec->lo, spec->hi, &spec->val[i]) != 0) return -1;
        p = comma ? comma + 1 : p;
    }
    return 0;
}

/* 0 on success; otherwise -1 with a one-line message in err. */
static int parse_args(int argc, char **argv, arg_spec *specs, int nspecs, char *err,
                      size_t errlen)
{
    for (int a = 1; a < argc; ++a) {
        char shown[256];
        quote(shown, sizeof shown, argv[a]);
        const char *eq = strchr(argv[a], '=');
        if (eq == NULL || eq == argv[a]) {
            snprintf(err, errlen, "argument '%s' is not key=value", shown);
            return -1;
        }
        size_t klen = (size_t)(eq - argv[a]);
        arg_spec *spec = NULL;
        for (int s = 0; s < nspecs; ++s)
            if (strlen(specs[s].key) == klen && strncmp(specs[s].key, argv[a], klen) == 0)
                spec = &specs[s];
        if (spec == NULL) {
            snprintf(err, errlen, "unknown key in '%s'", shown);
            return -1;
        }
        if (spec->seen) {
            snprintf(err, errlen, "%s given twice", spec->key);
            return -1;
        }
        spec->seen = 1;
        if (parse_value(spec, eq + 1) != 0) {
            if (spec->count == 1)
                snprintf(err, errlen, "'%s': %s must be an integer in %lld..%lld", shown,
                         spec->key, spec->lo, spec->hi);
            else
                snprintf(err, errlen, "'%s': %s must be %d comma-separated integers in "
                         "%lld..%lld", shown, spec->key, spec->count, spec->lo, spec->hi);
            return -1;
        }
    }
    return 0;
}

static int g_rank;

/* Every rank reaches the same verdict on the same argv; only rank 0 speaks. */
static void die(int code, const char *fmt, ...)
{
    if (g_rank == 0) {
        char msg[512];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        fprintf(stderr, "%s: %s\n", PROG, msg);
        fflush(stderr);
    }
    MPI_Finalize();
    exit(code);
}

#endif
