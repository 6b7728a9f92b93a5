/* fb_builder.c - back-to-front FlatBuffers builder (see cucap_fb_builder.h).
 *
 * Layout: data occupies the last `size` bytes of buf[0, cap). A ref is the
 * value of `size` just after the object was written, i.e. its distance from
 * the end, which does not change when the buffer grows (data is moved to the
 * end of the new allocation). */
#include "cucap_fb_builder.h"
#include "cucap_vec.h"

#include <stdlib.h>
#include <string.h>

/* FlatBuffers' own limit (offsets are 32-bit signed in places). */
#define FBB_MAX_SIZE ((size_t)0x7FFFFFF0u)
#define FBB_MAX_VTABLES 1024 /* remembered for sharing; more are just not shared */

struct cucap_fbb {
  uint8_t *buf;
  size_t cap;
  size_t size;
  size_t minalign;
  int failed;
  int finished;
  int in_table;
  unsigned nfields;    /* slots of the open table */
  unsigned max_id1;    /* highest used slot + 1 */
  size_t table_start;  /* size when the open table started */
  uint32_t *vtables;   /* refs of vtables written so far (for sharing) */
  size_t nvtables, vtables_cap;
  uint32_t field_loc[CUCAP_FBB_MAX_FIELDS]; /* ref of each field; 0 = absent */
};

static int fbb_grow(cucap_fbb *b, size_t need) {
  if (b->size + need > FBB_MAX_SIZE) {
    b->failed = 1;
    return 0;
  }
  size_t ncap = b->cap ? b->cap : 1024;
  while (ncap - b->size < need)
    ncap *= 2;
  ncap = (ncap + 15) & ~(size_t)15;
  uint8_t *nb = malloc(ncap);
  if (!nb) {
    b->failed = 1;
    return 0;
  }
  if (b->size)
    memcpy(nb + ncap - b->size, b->buf + b->cap - b->size, b->size);
  free(b->buf);
  b->buf = nb;
  b->cap = ncap;
  return 1;
}

static inline int fbb_ensure(cucap_fbb *b, size_t need) {
  if (__builtin_expect(b->cap - b->size >= need, 1))
    return 1;
  return fbb_grow(b, need);
}

/* Pads so that after writing `additional` bytes the size is a multiple of
 * `align`, and makes room for the padding plus `additional`. */
static inline int fbb_prep(cucap_fbb *b, size_t align, size_t additional) {
  if (align > b->minalign)
    b->minalign = align;
  size_t pad = (0 - (b->size + additional)) & (align - 1);
  if (!fbb_ensure(b, pad + additional))
    return 0;
  if (pad) {
    memset(b->buf + b->cap - b->size - pad, 0, pad);
    b->size += pad;
  }
  return 1;
}

static inline void fbb_put(cucap_fbb *b, const void *src, size_t n) {
  b->size += n;
  memcpy(b->buf + b->cap - b->size, src, n);
}

cucap_fbb *cucap_fbb_create(size_t initial_capacity) {
  cucap_fbb *b = calloc(1, sizeof(*b));
  if (!b)
    return NULL;
  if (initial_capacity == 0)
    initial_capacity = 1024;
  if (initial_capacity > FBB_MAX_SIZE)
    initial_capacity = FBB_MAX_SIZE;
  b->cap = (initial_capacity + 15) & ~(size_t)15;
  b->buf = malloc(b->cap);
  if (!b->buf) {
    free(b);
    return NULL;
  }
  b->minalign = 1;
  return b;
}

void cucap_fbb_destroy(cucap_fbb *b) {
  if (!b)
    return;
  free(b->buf);
  free(b->vtables);
  free(b);
}

void cucap_fbb_reset(cucap_fbb *b) {
  if (!b)
    return;
  b->size = 0;
  b->minalign = 1;
  b->failed = 0;
  b->finished = 0;
  b->in_table = 0;
  b->nvtables = 0;
}

int cucap_fbb_failed(const cucap_fbb *b) { return !b || b->failed; }

/* Common guard: usable, and (for objects other than fields) no table open. */
static inline int fbb_ok(cucap_fbb *b, int need_table) {
  if (__builtin_expect(b->failed, 0))
    return 0;
  if (__builtin_expect(b->finished || b->in_table != need_table, 0)) {
    b->failed = 1;
    return 0;
  }
  return 1;
}

cucap_fb_ref cucap_fbb_string(cucap_fbb *b, const char *s, size_t len) {
  if (!b || !fbb_ok(b, 0))
    return 0;
  if (len >= FBB_MAX_SIZE || (!s && len)) {
    b->failed = 1;
    return 0;
  }
  if (!fbb_prep(b, 4, len + 1) || !fbb_ensure(b, len + 1 + 4))
    return 0;
  b->size += len + 1;
  uint8_t *p = b->buf + b->cap - b->size;
  if (len)
    memcpy(p, s, len);
  p[len] = 0;
  uint32_t n = (uint32_t)len;
  fbb_put(b, &n, 4);
  return (cucap_fb_ref)b->size;
}

cucap_fb_ref cucap_fbb_vector(cucap_fbb *b, const void *elems, size_t count,
                              size_t elem_size, size_t align) {
  if (!b || !fbb_ok(b, 0))
    return 0;
  if (align == 0 || (align & (align - 1)) || align > 16 ||
      (count && (!elems || elem_size == 0)) ||
      (elem_size && count > FBB_MAX_SIZE / elem_size)) {
    b->failed = 1;
    return 0;
  }
  size_t bytes = count * elem_size;
  if (!fbb_prep(b, align < 4 ? 4 : align, bytes) || !fbb_ensure(b, bytes + 4))
    return 0;
  if (bytes)
    fbb_put(b, elems, bytes);
  uint32_t n = (uint32_t)count;
  fbb_put(b, &n, 4);
  return (cucap_fb_ref)b->size;
}

cucap_fb_ref cucap_fbb_vector_refs(cucap_fbb *b, const cucap_fb_ref *refs,
                                   size_t count) {
  if (!b || !fbb_ok(b, 0))
    return 0;
  if ((count && !refs) || count > FBB_MAX_SIZE / 4) {
    b->failed = 1;
    return 0;
  }
  for (size_t i = 0; i < count; i++) {
    if (refs[i] == 0 || refs[i] > b->size) {
      b->failed = 1;
      return 0;
    }
  }
  if (!fbb_prep(b, 4, count * 4) || !fbb_ensure(b, count * 4 + 4))
    return 0;
  for (size_t i = count; i-- > 0;) {
    b->size += 4;
    uint32_t off = (uint32_t)(b->size - refs[i]);
    memcpy(b->buf + b->cap - b->size, &off, 4);
  }
  uint32_t n = (uint32_t)count;
  fbb_put(b, &n, 4);
  return (cucap_fb_ref)b->size;
}

void cucap_fbb_table_start(cucap_fbb *b, unsigned nfields) {
  if (!b || !fbb_ok(b, 0))
    return;
  if (nfields > CUCAP_FBB_MAX_FIELDS) {
    b->failed = 1;
    return;
  }
  b->in_table = 1;
  b->nfields = nfields;
  b->max_id1 = 0;
  b->table_start = b->size;
  memset(b->field_loc, 0, nfields * sizeof(b->field_loc[0]));
}

static inline int fbb_field_ok(cucap_fbb *b, unsigned id) {
  if (__builtin_expect(b->failed, 0))
    return 0;
  if (__builtin_expect(!b->in_table || id >= b->nfields, 0)) {
    b->failed = 1;
    return 0;
  }
  return 1;
}

static inline void fbb_field_done(cucap_fbb *b, unsigned id) {
  b->field_loc[id] = (uint32_t)b->size;
  if (id + 1 > b->max_id1)
    b->max_id1 = id + 1;
}

#define FBB_ADD_SCALAR(suffix, type)                                           \
  void cucap_fbb_add_##suffix(cucap_fbb *b, unsigned id, type v) {             \
    if (!b || !fbb_field_ok(b, id) || !fbb_prep(b, sizeof(type), sizeof(type)))\
      return;                                                                  \
    fbb_put(b, &v, sizeof(type));                                              \
    fbb_field_done(b, id);                                                     \
  }
FBB_ADD_SCALAR(u8, uint8_t)
FBB_ADD_SCALAR(u16, uint16_t)
FBB_ADD_SCALAR(u32, uint32_t)
FBB_ADD_SCALAR(u64, uint64_t)
FBB_ADD_SCALAR(f32, float)
FBB_ADD_SCALAR(f64, double)

void cucap_fbb_add_struct(cucap_fbb *b, unsigned id, const void *v,
                          size_t size, size_t align) {
  if (!v || !b || !fbb_field_ok(b, id))
    return;
  if (align == 0 || (align & (align - 1)) || align > 16 || size > 0xFFFF) {
    b->failed = 1;
    return;
  }
  if (!fbb_prep(b, align, size))
    return;
  fbb_put(b, v, size);
  fbb_field_done(b, id);
}

void cucap_fbb_add_ref(cucap_fbb *b, unsigned id, cucap_fb_ref ref) {
  if (!ref || !b || !fbb_field_ok(b, id))
    return;
  if (ref > b->size) {
    b->failed = 1;
    return;
  }
  if (!fbb_prep(b, 4, 4))
    return;
  uint32_t off = (uint32_t)(b->size + 4 - ref);
  fbb_put(b, &off, 4);
  fbb_field_done(b, id);
}

cucap_fb_ref cucap_fbb_table_end(cucap_fbb *b) {
  if (!b || !fbb_ok(b, 1))
    return 0;
  b->in_table = 0;
  if (!fbb_prep(b, 4, 4))
    return 0;
  int32_t zero = 0;
  fbb_put(b, &zero, 4);
  size_t table_off = b->size;
  size_t obj_size = table_off - b->table_start;
  unsigned n = b->max_id1;
  size_t vsize = 4 + 2 * (size_t)n;
  if (obj_size > 0xFFFF) {
    b->failed = 1;
    return 0;
  }
  uint16_t vt[2 + CUCAP_FBB_MAX_FIELDS];
  vt[0] = (uint16_t)vsize;
  vt[1] = (uint16_t)obj_size;
  for (unsigned i = 0; i < n; i++)
    vt[2 + i] = b->field_loc[i] ? (uint16_t)(table_off - b->field_loc[i]) : 0;

  /* Share an identical vtable written earlier in this buffer. */
  size_t vt_ref = 0;
  for (size_t i = b->nvtables; i-- > 0;) {
    const uint8_t *p = b->buf + b->cap - b->vtables[i];
    uint16_t psize;
    memcpy(&psize, p, 2);
    if (psize == vsize && memcmp(p, vt, vsize) == 0) {
      vt_ref = b->vtables[i];
      break;
    }
  }
  if (!vt_ref) {
    if (!fbb_ensure(b, vsize))
      return 0;
    fbb_put(b, vt, vsize);
    vt_ref = b->size;
    if (b->nvtables == b->vtables_cap && b->vtables_cap < FBB_MAX_VTABLES)
      (void)CUCAP_VEC_RESERVE(b->vtables, b->vtables_cap, b->nvtables + 1, 16);
    if (b->nvtables < b->vtables_cap)
      b->vtables[b->nvtables++] = (uint32_t)vt_ref;
  }
  /* vtable address = table address - soffset. */
  int32_t soff = (int32_t)((int64_t)vt_ref - (int64_t)table_off);
  memcpy(b->buf + b->cap - table_off, &soff, 4);
  return (cucap_fb_ref)table_off;
}

const uint8_t *cucap_fbb_finish(cucap_fbb *b, cucap_fb_ref root,
                                int size_prefixed, size_t *out_size) {
  if (out_size)
    *out_size = 0;
  if (!b || !fbb_ok(b, 0))
    return NULL;
  if (root == 0 || root > b->size) {
    b->failed = 1;
    return NULL;
  }
  size_t align = b->minalign < 8 ? 8 : b->minalign;
  size_t extra = 8 + (size_prefixed ? 4 : 0);
  if (!fbb_prep(b, align, extra))
    return NULL;
  fbb_put(b, CUCAP_FB_FILE_IDENTIFIER, 4);
  uint32_t off = (uint32_t)(b->size + 4 - root);
  fbb_put(b, &off, 4);
  if (size_prefixed) {
    uint32_t n = (uint32_t)b->size;
    fbb_put(b, &n, 4);
  }
  b->finished = 1;
  if (out_size)
    *out_size = b->size;
  return b->buf + b->cap - b->size;
}
