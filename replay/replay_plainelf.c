/* replay_plainelf.c - module images handed to the driver as the plain ELF
 * the GPU runs (rp_plainelf_*, replay_state.h).
 *
 * Libraries ship compressed fatbins (cuBLAS, cuDNN, PyTorch's kernels): a
 * cuModuleLoadData of one decompresses the entry it picks, every time. A
 * profile loads every module of its window in the timeline pass and again
 * in the PC-sampling and SASS passes (which must see the loads); a replay
 * with --loop in every loop. Here the one ELF the driver would pick is
 * decompressed once per run, on a thread of its own that starts as soon
 * as the images are mapped and works ahead of the replay in record order,
 * and that ELF is what the driver gets. Same SASS, same symbols and
 * globals: the driver loads the same code either way; an image where the
 * choice is not certain (cucap_fatbin_device_elf) is loaded as recorded.
 * The images' plain ELFs are kept until the end of the run, at most
 * PE_CAP_BYTES of them (a program's fatbins decompress to 3-5 times their
 * size, over a hundred MiB for a training step with cuDNN); images past
 * that load as recorded. CUCAP_REPLAY_PLAIN_ELF=0 (or CUDA_FORCE_PTX_JIT
 * set): every image as recorded.
 *
 * What it saves is the decompression in every pass that loads modules;
 * the cubins (CRCs), SASS text, PC samples and metrics are the same either
 * way, and replay --verify matches. To measure it: `cucap cupti profile
 * --metrics=full --sass` with CUCAP_REPLAY_PLAIN_ELF=0 and =1, comparing
 * the per-pass times of the timing breakdown (CUCAP_LOG_LEVEL=info);
 * figures in docs/bench-log.md ("Plain ELF"). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cucap_clock.h"
#include "cucap_fatbin.h"
#include "cucap_knobs.h"
#include "cucap_log.h"
#include "replay_state.h"

#define PE_CAP_BYTES ((uint64_t)1 << 30)

typedef struct pe_ent {
  const void *img;  /* mapped image (the reader's) */
  uint64_t size;
  void *elf;        /* plain ELF or NULL (load img as it is) */
  int done;         /* the thread is past this entry */
} pe_ent;

struct rp_plainelf {
  pthread_t th;
  int started;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int stop;
  unsigned sm;
  pe_ent *e;        /* one per distinct image, in first-load order */
  size_t n;
  size_t plain;     /* entries given a plain ELF */
  size_t capped;    /* entries left as recorded: PE_CAP_BYTES reached */
  uint64_t in_bytes, out_bytes;
  double busy_s;    /* the thread's time */
};

static void *pe_main(void *u) {
  struct rp_plainelf *P = u;
  double t0 = cucap_clock_now_s();
  for (size_t i = 0; i < P->n; i++) {
    pthread_mutex_lock(&P->mu);
    int stop = P->stop;
    pthread_mutex_unlock(&P->mu);
    void *elf = NULL;
    size_t sz = 0;
    if (!stop && cucap_fatbin_device_elf(P->e[i].img, (size_t)P->e[i].size, P->sm,
                                         &elf, &sz) != CUCAP_OK)
      elf = NULL;
    int over = elf && P->out_bytes + sz > PE_CAP_BYTES; /* only this thread writes it */
    if (over) {
      free(elf);
      elf = NULL;
    }
    pthread_mutex_lock(&P->mu);
    P->capped += (size_t)over;
    P->e[i].elf = elf;
    P->e[i].done = 1;
    if (elf) {
      P->plain++;
      P->in_bytes += P->e[i].size;
      P->out_bytes += sz;
    }
    pthread_cond_broadcast(&P->cv);
    pthread_mutex_unlock(&P->mu);
  }
  P->busy_s = cucap_clock_now_s() - t0;
  return NULL;
}

void rp_plainelf_start(rp_state *R) {
  /* CUDA_FORCE_PTX_JIT makes the driver JIT a fatbin's PTX instead of
   * loading its SASS: the fatbin must reach it whole */
  const char *jit = getenv("CUDA_FORCE_PTX_JIT");
  if (!cucap_knob_flag(CUCAP_KNOB(CUCAP_REPLAY_PLAIN_ELF)) ||
      (jit && *jit && strcmp(jit, "0")) || !R->code.nimages ||
      R->cc <= 0 || R->code.pe)
    return;
  struct rp_plainelf *P = calloc(1, sizeof *P);
  if (!P || !(P->e = calloc(R->code.nimages, sizeof *P->e))) {
    free(P);
    return; /* the images load as they are */
  }
  P->sm = (unsigned)R->cc;
  for (size_t i = 0; i < R->code.nimages; i++) {
    const rp_image_ref *ir = &R->code.images[i]; /* mapped by rp_check_images */
    if (!ir->data || ir->format != CUCAP_IMAGE_FATBIN)
      continue;
    int seen = 0; /* the same image loaded again: one entry */
    for (size_t j = 0; j < P->n && !seen; j++)
      seen = P->e[j].img == ir->data;
    if (!seen)
      P->e[P->n++] = (pe_ent){ir->data, ir->size, NULL, 0};
  }
  pthread_mutex_init(&P->mu, NULL);
  pthread_cond_init(&P->cv, NULL);
  R->code.pe = P;
  if (P->n && pthread_create(&P->th, NULL, pe_main, P) == 0)
    P->started = 1;
  else
    for (size_t i = 0; i < P->n; i++)
      P->e[i].done = 1; /* no thread: every image loads as it is */
}

const void *rp_plainelf_get(rp_state *R, const void *img) {
  struct rp_plainelf *P = R->code.pe;
  if (!P || R->cc != (int)P->sm)
    return NULL;
  for (size_t i = 0; i < P->n; i++) {
    if (P->e[i].img != img)
      continue;
    pthread_mutex_lock(&P->mu);
    while (!P->e[i].done)
      pthread_cond_wait(&P->cv, &P->mu);
    void *elf = P->e[i].elf;
    pthread_mutex_unlock(&P->mu);
    return elf;
  }
  return NULL;
}

void rp_plainelf_free(rp_state *R) {
  struct rp_plainelf *P = R->code.pe;
  if (!P)
    return;
  if (P->started) {
    pthread_mutex_lock(&P->mu);
    P->stop = 1;
    pthread_mutex_unlock(&P->mu);
    pthread_join(P->th, NULL);
  }
  if (P->plain)
    CUCAP_INFO("replay: %zu of %zu fatbin image(s) loaded as their sm_%u ELF, "
               "decompressed once (%.1f MiB from %.1f MiB; %.3f s on a thread "
               "of its own)%s", P->plain, P->n, P->sm, (double)P->out_bytes / 1048576.0,
               (double)P->in_bytes / 1048576.0, P->busy_s,
               P->capped ? "; the rest as recorded: 1 GiB of ELF reached" : "");
  for (size_t i = 0; i < P->n; i++)
    free(P->e[i].elf);
  pthread_mutex_destroy(&P->mu);
  pthread_cond_destroy(&P->cv);
  free(P->e);
  free(P);
  R->code.pe = NULL;
}
