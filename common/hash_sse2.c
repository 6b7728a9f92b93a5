/* hash_sse2.c - baseline x86-64 build of XXH3 (see hash_impl.h). */
#define XXH_VECTOR XXH_SSE2
#define HASH_SUFFIX sse2
#include "hash_impl.h"
