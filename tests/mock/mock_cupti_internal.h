/* mock_cupti_internal.h - what the three files of the stand-in libcupti
 * (mock_cupti.c, mock_cupti_pcs.c, mock_cupti_rp.c) share. Test code
 * only. */
#ifndef MOCK_CUPTI_INTERNAL_H
#define MOCK_CUPTI_INTERNAL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

extern pthread_mutex_t mcu_mu;   /* guards the state both files change */
extern int mcu_rp_enabled;       /* the range profiler is set up */
int mcu_env_on(const char *name);
extern int mcu_detached;         /* MOCK_CUPTI_PCS_DETACH tripped */
void mcu_detach(void);           /* CUPTI tears itself down */
void mcu_alive_or_die(const char *fn); /* aborts once detached */
uint64_t mcu_fnv64(const void *p, size_t n);

/* CUPTI's context ids: one per CUcontext, in the order first seen */
uint32_t mcu_ctx_id(const void *ctx);

/* mock_cupti_pcs.c; the kernel hooks run under mcu_mu. PC sampling and
 * SASS metrics are enabled for one context: kernels of others are not
 * seen (as with CUPTI). */
void mcu_pcs_kernel(const void *ctx, uint32_t corr, uint64_t crc, const char *fn);
void mcu_sass_kernel(const void *ctx, uint32_t crc, const char *fn);
int mcu_pcs_busy(void);      /* PC sampling enabled or SASS metrics set up */

/* mock_cupti_rp.c, under mcu_mu: a kernel (graph: of a graph launch) or a
 * memset of dur ns ran in ctx; ranges form while the range profiler
 * measures that context */
void mcu_rp_kernel(const void *ctx, double dur, int graph);
void mcu_rp_memset(const void *ctx, double dur);

#endif
