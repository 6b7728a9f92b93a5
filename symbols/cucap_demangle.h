/* cucap_demangle.h - C++ (Itanium ABI) kernel and function names made
 * readable, for reports. Uses __cxa_demangle from the system's libstdc++
 * (dlopen'ed on first use; cucap itself is C and links no C++ runtime);
 * without it names stay mangled. Thread-safe. */
#ifndef CUCAP_DEMANGLE_H
#define CUCAP_DEMANGLE_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Writes the demangled name of `mangled` into out (NUL-terminated, cut to
 * size) and returns 1; returns 0 and copies `mangled` when it does not
 * demangle (C names, no libstdc++). */
int cucap_demangle(const char *mangled, char *out, size_t size);

/* A short display form of a demangled name: no parameter list, no leading
 * "void ", template arguments shown as "<...>" when the name is longer than
 * `width` characters; then cut to width with "...". */
void cucap_demangle_short(const char *demangled, char *out, size_t size, size_t width);

#ifdef __cplusplus
}
#endif
#endif
