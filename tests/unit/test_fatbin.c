/* test_fatbin.c - schema/fatbin.c on real nvcc-built images. Builds a tiny .cu into a fatbin (zstd PTX by default, LZ4
 * with --compress-mode=speed), a cubin and PTX in a temp dir; skips (77)
 * without nvcc. Also feeds damaged images (truncations, bit flips) and an
 * LZ4 round trip through the hand-written block decoder. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cucap_fatbin.h"
#include "testutil.h"

static int checks;
#define CHECK(c) do { checks++; TU_CHECK(c); } while (0)

static const char *kSrc =
    "struct S40 { long long v[5]; };\n"
    "extern \"C\" __global__ void k(char a, S40 s, float f, float *p)"
    " { if (p) p[0] = a + s.v[3] + f; }\n"
    "extern \"C\" __global__ void add(int n, float *x)"
    " { int i = threadIdx.x; if (i < n) x[i] += 1; }\n"
    "extern \"C\" __global__ void noargs() {}\n"
    "__device__ int g_count = 3;\n"
    "__constant__ float g_coef[4];\n"
    "extern \"C\" __global__ void usevars(float *x)"
    " { __shared__ float s[8]; s[threadIdx.x & 7] = g_coef[1];"
    " x[threadIdx.x] = s[threadIdx.x & 7] + atomicAdd(&g_count, 1); }\n";

static uint8_t *slurp(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return NULL;
  fseek(f, 0, SEEK_END);
  long sz = ftell(f);
  fseek(f, 0, SEEK_SET);
  /* +1 NUL so a PTX file reads as a C string, like the app would pass it */
  uint8_t *b = calloc(1, (size_t)sz + 1);
  if (b && fread(b, 1, (size_t)sz, f) != (size_t)sz) {
    free(b);
    b = NULL;
  }
  fclose(f);
  *n = (size_t)sz;
  return b;
}

typedef struct vars_seen {
  int count, coef, other;
} vars_seen;

static int on_var(const char *name, uint64_t size, void *user) {
  vars_seen *v = user;
  if (!strcmp(name, "g_count") && size == 4)
    v->count++;
  else if (!strcmp(name, "g_coef") && size == 16)
    v->coef++;
  else
    v->other++; /* shared memory or a kernel's parameter bank would be wrong */
  return 0;
}

/* Module variables (what the replayer restores when it keeps a module loaded
 * across passes): both, with their sizes, nothing else; PTX and an image
 * without SASS for the device are refused (the driver would JIT them). */
static void check_vars(const void *img, size_t size, int is_ptx) {
  vars_seen v = {0, 0, 0};
  cucap_status st = cucap_image_foreach_variable(img, size, 90, on_var, &v);
  if (is_ptx) {
    CHECK(st == CUCAP_ERR_UNSUPPORTED);
    return;
  }
  CHECK(st == CUCAP_OK);
  CHECK(v.count == 1 && v.coef == 1 && v.other == 0);
  vars_seen w = {0, 0, 0};
  st = cucap_image_foreach_variable(img, size, 80, on_var, &w);
  /* a cubin is what it is (the driver refuses it on sm_80); a fatbin with
   * only sm_90 SASS would be JIT-compiled from its PTX there */
  CHECK(st == CUCAP_OK || st == CUCAP_ERR_UNSUPPORTED);
}

static void check_k_layout(const void *img, size_t size) {
  cucap_param_layout p[8];
  size_t n = 0;
  uint32_t total = 0;
  cucap_status st = cucap_image_kernel_params(img, size, "k", p, 8, &n, &total);
  CHECK(st == CUCAP_OK);
  CHECK(n == 4);
  CHECK(total == 64);
  if (n == 4) {
    CHECK(p[0].offset == 0 && p[0].size == 1);
    CHECK(p[1].offset == 8 && p[1].size == 40);
    CHECK(p[2].offset == 48 && p[2].size == 4);
    CHECK(p[3].offset == 56 && p[3].size == 8);
  }
  st = cucap_image_kernel_params(img, size, "add", p, 8, &n, &total);
  CHECK(st == CUCAP_OK && n == 2 && total == 16);
  CHECK(p[0].offset == 0 && p[0].size == 4 && p[1].offset == 8 && p[1].size == 8);
  st = cucap_image_kernel_params(img, size, "noargs", p, 8, &n, &total);
  CHECK(st == CUCAP_OK && n == 0);
  CHECK(cucap_image_kernel_params(img, size, "nope", p, 8, &n, &total) ==
        CUCAP_ERR_NOT_FOUND);
  CHECK(cucap_image_kernel_params(img, size, "ad", p, 8, &n, &total) ==
        CUCAP_ERR_NOT_FOUND);
}

typedef struct ecount {
  int elf, ptx, lz4, zstd, decoded_ok;
} ecount;

static int count_entry(const cucap_fatbin_entry *e, void *user) {
  ecount *c = user;
  if (e->kind == CUCAP_FATBIN_ENTRY_ELF)
    c->elf++;
  if (e->kind == CUCAP_FATBIN_ENTRY_PTX)
    c->ptx++;
  if (e->codec == CUCAP_FATBIN_CODEC_LZ4)
    c->lz4++;
  if (e->codec == CUCAP_FATBIN_CODEC_ZSTD)
    c->zstd++;
  void *d;
  size_t n;
  if (cucap_fatbin_entry_data(e, &d, &n) == CUCAP_OK) {
    if (e->kind == CUCAP_FATBIN_ENTRY_ELF && n >= 4 && memcmp(d, "\x7f" "ELF", 4) == 0)
      c->decoded_ok++;
    /* the PTX text is NUL-terminated inside the entry (memchr before strstr:
     * with kSrc's variables the text filled the entry to its last byte) */
    if (e->kind == CUCAP_FATBIN_ENTRY_PTX && memchr(d, 0, n) &&
        strstr((char *)d, ".entry"))
      c->decoded_ok++;
    free(d);
  }
  return 0;
}

static int kcount(const char *name, void *user) {
  (void)name;
  (*(int *)user)++;
  return 0;
}

/* Damaged copies must never crash (ASan run) and must not claim success with
 * a size beyond the buffer. */
static void mangle(const uint8_t *img, size_t size) {
  uint8_t *b = malloc(size);
  for (size_t cut = 0; cut < size; cut += (cut < 256 ? 1 : 97)) {
    memcpy(b, img, cut);
    cucap_image_info info;
    if (cucap_image_detect(b, cut, &info) == CUCAP_OK)
      CHECK(info.size <= cut);
    cucap_param_layout p[8];
    size_t n;
    uint32_t t;
    (void)cucap_image_kernel_params(b, cut, "k", p, 8, &n, &t);
    (void)cucap_image_has_code_for(b, cut, 90);
  }
  srand(1);
  for (int i = 0; i < 300; i++) {
    memcpy(b, img, size);
    for (int j = 0; j < 4; j++)
      b[(size_t)rand() % size] ^= (uint8_t)(1u << (rand() % 8));
    cucap_param_layout p[8];
    size_t n;
    uint32_t t;
    (void)cucap_image_kernel_params(b, size, "k", p, 8, &n, &t);
    (void)cucap_image_has_code_for(b, size, 90);
    ecount c = {0};
    (void)cucap_fatbin_foreach(b, size, count_entry, &c);
  }
  free(b);
}

static void test_lz4(void) {
  /* literals "abcd", match off 4 len 8, then literals "xyz" (last) */
  const uint8_t src[] = {0x44, 'a', 'b', 'c', 'd', 4, 0, 0x30, 'x', 'y', 'z'};
  uint8_t dst[15];
  CHECK(cucap_lz4_block_decode(src, sizeof src, dst, 15) == CUCAP_OK);
  CHECK(memcmp(dst, "abcdabcdabcdxyz", 15) == 0);
  CHECK(cucap_lz4_block_decode(src, sizeof src, dst, 14) == CUCAP_ERR_DECOMPRESS);
  const uint8_t bad[] = {0x04, 'a', 9, 0}; /* offset beyond output */
  CHECK(cucap_lz4_block_decode(bad, sizeof bad, dst, 15) == CUCAP_ERR_DECOMPRESS);
}

/* What cucap_fatbin_select keeps of one image, as "E90 P90" (ELF/PTX and
 * arch, in image order). */
typedef struct sel_desc {
  char s[128];
} sel_desc;

static int describe_entry(const cucap_fatbin_entry *e, void *user) {
  sel_desc *d = user;
  size_t l = strlen(d->s);
  snprintf(d->s + l, sizeof d->s - l, "%s%c%u", l ? " " : "",
           e->kind == CUCAP_FATBIN_ENTRY_ELF ? 'E' : e->kind == CUCAP_FATBIN_ENTRY_PTX ? 'P' : '?',
           e->arch);
  return 0;
}

static void check_select(const uint8_t *img, size_t n, const unsigned *sms, size_t nsms,
                         const char *want) {
  void *o = NULL;
  size_t on = 0;
  cucap_fatbin_select_stats st;
  CHECK(cucap_fatbin_select(img, n, sms, nsms, &o, &on, &st) == CUCAP_OK);
  CHECK(st.entries == 5);
  if (!want) { /* the image stays whole */
    CHECK(o == NULL && st.kept == 5);
    return;
  }
  CHECK(o != NULL);
  if (!o)
    return;
  sel_desc d = {""};
  CHECK(cucap_fatbin_foreach(o, on, describe_entry, &d) == CUCAP_OK);
  if (strcmp(d.s, want) != 0)
    fprintf(stderr, "select: kept \"%s\", expected \"%s\"\n", d.s, want);
  CHECK(strcmp(d.s, want) == 0);
  cucap_image_info info;
  CHECK(cucap_image_detect(o, on, &info) == CUCAP_OK && info.size == on && on < n);
  CHECK(on % 8 == 0);
  for (size_t i = 0; i < nsms; i++)
    CHECK(cucap_image_has_code_for(o, on, sms[i]) == 1);
  if (strchr(d.s, 'E'))
    check_k_layout(o, on); /* the kernels' parameter layouts are still there */
  /* the selection of a selection keeps it */
  void *o2 = NULL;
  size_t on2 = 0;
  CHECK(cucap_fatbin_select(o, on, sms, nsms, &o2, &on2, NULL) == CUCAP_OK && o2 == NULL);
  free(o);
}

/* A fatbin with SASS for sm_75/80/90 and PTX for compute_80/90 (what
 * frameworks ship, smaller), reduced for various devices. */
/* The entry cucap_fatbin_device_elf should give for sm: the highest SASS
 * arch that runs there, when it is the only ELF of that arch and compressed. */
typedef struct want_elf {
  unsigned sm, best, nbest;
  int compressed;
} want_elf;

static int want_entry(const cucap_fatbin_entry *e, void *user) {
  want_elf *w = user;
  if (e->kind != CUCAP_FATBIN_ENTRY_ELF || e->arch / 10 != w->sm / 10 ||
      e->arch % 10 > w->sm % 10)
    return 0;
  if (!w->nbest || e->arch > w->best) {
    w->best = e->arch;
    w->nbest = 0;
  }
  if (e->arch == w->best) {
    w->nbest++;
    w->compressed = e->codec != CUCAP_FATBIN_CODEC_NONE;
  }
  return 0;
}

static void check_device_elf(const uint8_t *img, size_t n, unsigned sm) {
  want_elf w = {sm, 0, 0, 0};
  CHECK(cucap_fatbin_foreach(img, n, want_entry, &w) == CUCAP_OK);
  void *o = NULL;
  size_t on = 0;
  CHECK(cucap_fatbin_device_elf(img, n, sm, &o, &on) == CUCAP_OK);
  int expect = w.nbest == 1 && w.compressed;
  CHECK(!!o == expect);
  if (o) {
    cucap_image_info info;
    unsigned arch = 0;
    int kc = 0;
    CHECK(cucap_image_detect(o, on, &info) == CUCAP_OK && info.format == CUCAP_IMAGE_CUBIN);
    CHECK(cucap_cubin_arch(o, on, &arch) == CUCAP_OK && arch == w.best);
    CHECK(cucap_cubin_foreach_kernel(o, on, kcount, &kc) == CUCAP_OK && kc == 4);
    check_k_layout(o, on);
    free(o);
  }
  /* cut short: an error, nothing allocated */
  o = NULL;
  CHECK(cucap_fatbin_device_elf(img, n / 2, sm, &o, &on) != CUCAP_OK && o == NULL);
}

static void test_select(const char *dir, const char *nvcc) {
  char cmd[4096];
  snprintf(cmd, sizeof cmd,
           "cd %s && %s -fatbin -gencode arch=compute_75,code=sm_75 "
           "-gencode arch=compute_80,code=[sm_80,compute_80] "
           "-gencode arch=compute_90,code=[sm_90,compute_90] -o multi.fatbin k.cu",
           dir, nvcc);
  TU_REQUIRE(system(cmd) == 0);
  char path[1024];
  snprintf(path, sizeof path, "%s/multi.fatbin", dir);
  size_t n;
  uint8_t *img = slurp(path, &n);
  TU_REQUIRE(img);
  sel_desc all = {""};
  CHECK(cucap_fatbin_foreach(img, n, describe_entry, &all) == CUCAP_OK);
  /* nvcc's order of entries is its own: compare sets through the selection */
  const unsigned h100[] = {90}, a10[] = {86}, b200[] = {100}, v100[] = {70}, mixed[] = {86, 90};
  char w90[64], w86[64], wmix[64];
  /* expected strings follow the image's entry order */
  w90[0] = w86[0] = wmix[0] = 0;
  {
    const char *tok = all.s;
    while (*tok) {
      char t[8] = "";
      size_t k = 0;
      while (tok[k] && tok[k] != ' ' && k < sizeof t - 1) {
        t[k] = tok[k];
        k++;
      }
      t[k] = 0;
      tok += k + (tok[k] == ' ');
      int is90 = !strcmp(t, "E90") || !strcmp(t, "P90");
      int is80 = !strcmp(t, "E80") || !strcmp(t, "P80");
      if (is90)
        snprintf(w90 + strlen(w90), sizeof w90 - strlen(w90), "%s%s", w90[0] ? " " : "", t);
      if (is80)
        snprintf(w86 + strlen(w86), sizeof w86 - strlen(w86), "%s%s", w86[0] ? " " : "", t);
      if (is80 || is90)
        snprintf(wmix + strlen(wmix), sizeof wmix - strlen(wmix), "%s%s", wmix[0] ? " " : "", t);
    }
  }
  CHECK(strlen(w90) == 7 && strlen(w86) == 7 && strlen(wmix) == 15);
  check_device_elf(img, n, 90);
  check_device_elf(img, n, 86); /* the sm_80 ELF */
  check_device_elf(img, n, 100); /* no SASS runs there: none */
  check_select(img, n, h100, 1, w90);  /* sm_90 SASS + compute_90 PTX */
  check_select(img, n, a10, 1, w86);   /* sm_86: sm_80 SASS + compute_80 PTX */
  check_select(img, n, mixed, 2, wmix);
  check_select(img, n, b200, 1, "P90"); /* no SASS runs there: the PTX JITs */
  check_select(img, n, v100, 1, NULL); /* nothing runs there: kept whole */
  check_select(img, n, h100, 0, NULL); /* no device known: kept whole */
  /* damaged copies: an error or a valid smaller fatbin, never a crash */
  uint8_t *b = malloc(n);
  for (size_t cut = 0; cut < n; cut += (cut < 256 ? 1 : 97)) {
    memcpy(b, img, cut);
    void *o = NULL;
    size_t on;
    if (cucap_fatbin_select(b, cut, h100, 1, &o, &on, NULL) == CUCAP_OK && o) {
      CHECK(on <= cut);
      free(o);
    }
  }
  srand(2);
  for (int i = 0; i < 300; i++) {
    memcpy(b, img, n);
    for (int j = 0; j < 4; j++)
      b[(size_t)rand() % n] ^= (uint8_t)(1u << (rand() % 8));
    void *o = NULL;
    size_t on;
    if (cucap_fatbin_select(b, n, mixed, 2, &o, &on, NULL) == CUCAP_OK && o) {
      CHECK(on <= n);
      free(o);
    }
  }
  free(b);
  free(img);
}

int main(void) {
  test_lz4();
  char nvcc[512];
  if (!tu_nvcc(nvcc, sizeof nvcc)) {
    printf("no nvcc at %s: skipping image tests\n", nvcc);
    tu_finish("test_fatbin", checks);
    return 77;
  }
  char *dir = tu_tmp_dir_with("fatbin", "k.cu", kSrc);
  char cmd[4096];
  snprintf(cmd, sizeof cmd,
           "cd %s && %s -fatbin -arch=sm_90 -o k.fatbin k.cu && "
           "%s -fatbin -arch=sm_90 --compress-mode=speed -Xfatbin -compress-all "
           "-o k_lz4.fatbin k.cu && %s -cubin -arch=sm_90 -o k.cubin k.cu && "
           "%s -ptx -arch=sm_90 -o k.ptx k.cu",
           dir, nvcc, nvcc, nvcc, nvcc);
  TU_REQUIRE(system(cmd) == 0);

  const char *names[] = {"k.fatbin", "k_lz4.fatbin", "k.cubin", "k.ptx"};
  const cucap_image_format fmts[] = {CUCAP_IMAGE_FATBIN, CUCAP_IMAGE_FATBIN,
                                     CUCAP_IMAGE_CUBIN, CUCAP_IMAGE_PTX};
  for (int i = 0; i < 4; i++) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, names[i]);
    size_t n;
    uint8_t *img = slurp(path, &n);
    TU_REQUIRE(img);
    cucap_image_info info;
    /* unknown extent, as in the interposer */
    CHECK(cucap_image_detect(img, SIZE_MAX, &info) == CUCAP_OK);
    CHECK(info.format == fmts[i]);
    /* PTX: strlen + 1 (the NUL the app passes) */
    CHECK(info.size == (fmts[i] == CUCAP_IMAGE_PTX ? n + 1 : n));
    CHECK(info.data == img && info.data_size == info.size);
    CHECK(cucap_image_has_code_for(img, info.size, 90) == 1);
    CHECK(cucap_image_has_code_for(img, info.size, 100) ==
          (fmts[i] != CUCAP_IMAGE_CUBIN)); /* PTX JITs forward, SASS does not */
    CHECK(cucap_image_has_code_for(img, info.size, 80) == 0);
    if (fmts[i] != CUCAP_IMAGE_PTX)
      check_k_layout(img, info.size);
    check_vars(img, info.size, fmts[i] == CUCAP_IMAGE_PTX);
    if (fmts[i] == CUCAP_IMAGE_FATBIN) {
      check_device_elf(img, n, 90); /* LZ4: the ELF; zstd PTX only: none */
      check_device_elf(img, n, 80);
      ecount c = {0};
      CHECK(cucap_fatbin_foreach(img, n, count_entry, &c) == CUCAP_OK);
      CHECK(c.elf == 1 && c.ptx == 1 && c.decoded_ok == 2);
      if (i == 1)
        CHECK(c.lz4 == 2);
      else
        CHECK(c.zstd >= 1);
      /* fatbinary wrapper pointing at it */
      struct { uint32_t magic, version; uint64_t data, fn; } w = {
          CUCAP_FATBINARY_MAGIC, 1, (uint64_t)(uintptr_t)img, 0};
      CHECK(cucap_image_detect(&w, SIZE_MAX, &info) == CUCAP_OK);
      CHECK(info.format == CUCAP_IMAGE_FATBINARY && info.size == 24);
      CHECK(info.data == img && info.data_size == n &&
            info.data_format == CUCAP_IMAGE_FATBIN);
      CHECK(cucap_image_detect(&w, sizeof w, &info) == CUCAP_OK &&
            info.data == NULL);
      /* trailing garbage after the fatbin is not part of it */
      uint8_t *big = calloc(1, n + 100);
      memcpy(big, img, n);
      CHECK(cucap_image_detect(big, n + 100, &info) == CUCAP_OK && info.size == n);
      free(big);
    }
    if (fmts[i] == CUCAP_IMAGE_CUBIN) {
      int kc = 0;
      CHECK(cucap_cubin_foreach_kernel(img, n, kcount, &kc) == CUCAP_OK);
      CHECK(kc == 4);
      unsigned sm = 0;
      CHECK(cucap_cubin_arch(img, n, &sm) == CUCAP_OK && sm == 90);
    }
    if (fmts[i] != CUCAP_IMAGE_PTX)
      mangle(img, n);
    free(img);
  }
  test_select(dir, nvcc);
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  if (system(cmd) != 0)
    fprintf(stderr, "could not remove %s\n", dir);
  free(dir);
  /* garbage */
  const uint8_t junk[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  cucap_image_info info;
  CHECK(cucap_image_detect(junk, sizeof junk, &info) == CUCAP_ERR_UNSUPPORTED);
  CHECK(cucap_image_detect(NULL, 8, &info) == CUCAP_ERR_INVALID_ARG);
  return tu_finish("test_fatbin", checks);
}
