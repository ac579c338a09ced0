/* C++ names as perf 6.1 prints them: libiberty's demangler (cp-demangle.c, from Debian's
 * libiberty-dev, the library Debian's perf is linked with), called as perf calls it
 * (cplus_demangle with DMGL_NO_OPTS: no parameters, no return types, no "verbose"
 * expansions), through the callback interface, which allocates nothing.
 *
 * Hostile names: libiberty keeps its recursion limits (DMGL_NO_RECURSE_LIMIT is not passed)
 * and refuses names over 1024 characters (they would not fit its stack arrays); but a short
 * name can still expand exponentially (each substitution naming the previous one twice:
 * 250 characters print 140 MB). The output goes into a fixed buffer, and when it is full
 * the demangling is abandoned with longjmp: the callback interface holds no heap memory and
 * no locks, so leaving it that way loses nothing. */

#include <setjmp.h>
#include <stddef.h>
#include <string.h>

/* From libiberty's demangle.h, declared here so that the build needs only libiberty.a. */
typedef void (*demangle_callbackref)(const char *, size_t, void *);
extern int cplus_demangle_v3_callback(const char *mangled, int options,
                                      demangle_callbackref callback, void *opaque);
#define DMGL_NO_OPTS 0

struct sink {
    char *buf;
    size_t cap;
    size_t len;
    jmp_buf full;
};

static void append(const char *s, size_t n, void *opaque)
{
    struct sink *sink = opaque;
    if (n > sink->cap - sink->len)
        longjmp(sink->full, 1);
    memcpy(sink->buf + sink->len, s, n);
    sink->len += n;
}

/* Demangles the NUL-terminated `mangled` into `buf` (`cap` bytes, not NUL-terminated).
 * Returns the demangled length, or -1 where libiberty does not demangle the name or its
 * demangling would not fit. */
long bpfperf_cplus_demangle(const char *mangled, char *buf, size_t cap)
{
    struct sink sink = {.buf = buf, .cap = cap, .len = 0};
    if (setjmp(sink.full))
        return -1;
    if (!cplus_demangle_v3_callback(mangled, DMGL_NO_OPTS, append, &sink))
        return -1;
    return (long)sink.len;
}
