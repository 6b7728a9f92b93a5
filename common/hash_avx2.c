/* hash_avx2.c - AVX2 build of XXH3, compiled with -mavx2 (see hash_impl.h). */
#define XXH_VECTOR XXH_AVX2
#define HASH_SUFFIX avx2
#include "hash_impl.h"
