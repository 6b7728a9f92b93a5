/* fb_verify.c - generic FlatBuffers verifier driven by the descriptors that
 * schema/gen_schema.py emits (see fb_verify.h). All positions are offsets
 * from the buffer start held in 64-bit integers, and every read is preceded
 * by a bounds check against `end`, so no input can make it read outside
 * [buf, buf+len). */
#include "fb_verify.h"

typedef struct vctx {
  const uint8_t *buf;
  uint64_t end;      /* readable bytes: [0, end) */
  uint32_t tables;
  uint32_t elems;
} vctx;

size_t cucap_fb_kind_size(unsigned kind) {
  switch (kind) {
  case CUCAP_FB_K_BOOL:
  case CUCAP_FB_K_I8:
  case CUCAP_FB_K_U8:
    return 1;
  case CUCAP_FB_K_I16:
  case CUCAP_FB_K_U16:
    return 2;
  case CUCAP_FB_K_I32:
  case CUCAP_FB_K_U32:
  case CUCAP_FB_K_F32:
    return 4;
  case CUCAP_FB_K_I64:
  case CUCAP_FB_K_U64:
  case CUCAP_FB_K_F64:
    return 8;
  default:
    return 0;
  }
}

const char *cucap_fb_enum_name(const cucap_fb_enum_desc *e, int64_t v) {
  if (!e)
    return NULL;
  size_t lo = 0, hi = e->count;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (e->vals[mid].value == v)
      return e->vals[mid].name;
    if (e->vals[mid].value < v)
      lo = mid + 1;
    else
      hi = mid;
  }
  return NULL;
}

/* [pos, pos+size) inside the buffer and pos aligned to `align`. */
static inline int in_bounds(const vctx *c, uint64_t pos, uint64_t size,
                            uint64_t align) {
  return pos <= c->end && size <= c->end - pos && (pos & (align - 1)) == 0;
}

static inline uint32_t rd32(const vctx *c, uint64_t pos) {
  uint32_t v;
  memcpy(&v, c->buf + pos, 4);
  return v;
}
static inline uint16_t rd16(const vctx *c, uint64_t pos) {
  uint16_t v;
  memcpy(&v, c->buf + pos, 2);
  return v;
}

/* Follows the uoffset at pos; *target receives the referenced position. */
static int deref(const vctx *c, uint64_t pos, uint64_t *target) {
  if (!in_bounds(c, pos, 4, 4))
    return 0;
  uint64_t t = pos + rd32(c, pos);
  if (t >= c->end)
    return 0;
  *target = t;
  return 1;
}

static int verify_string(const vctx *c, uint64_t pos) {
  if (!in_bounds(c, pos, 4, 4))
    return 0;
  uint64_t n = rd32(c, pos);
  if (!in_bounds(c, pos + 4, n + 1, 1))
    return 0;
  return c->buf[pos + 4 + n] == 0;
}

/* Vector header at pos with elements of esize bytes aligned to ealign;
 * *count receives the element count. */
static int verify_vector_hdr(const vctx *c, uint64_t pos, uint64_t esize,
                             uint64_t ealign, uint64_t *count) {
  if (!in_bounds(c, pos, 4, 4))
    return 0;
  uint64_t n = rd32(c, pos);
  /* n < 2^32 and esize < 2^16: the product cannot overflow 64 bits. */
  if (!in_bounds(c, pos + 4, n * esize, ealign < 4 ? 4 : ealign))
    return 0;
  *count = n;
  return 1;
}

static int verify_table(vctx *c, uint64_t tpos, const cucap_fb_table_desc *td,
                        int depth);

static int verify_struct_at(const vctx *c, uint64_t pos,
                            const cucap_fb_struct_desc *sd) {
  return in_bounds(c, pos, sd->size, sd->align);
}

static int verify_vector(vctx *c, uint64_t pos, const cucap_fb_field_desc *f,
                         int depth) {
  uint64_t n;
  switch (f->elem_kind) {
  case CUCAP_FB_K_STRUCT:
    return verify_vector_hdr(c, pos, f->struct_desc->size,
                             f->struct_desc->align, &n);
  case CUCAP_FB_K_STRING:
  case CUCAP_FB_K_TABLE: {
    if (!verify_vector_hdr(c, pos, 4, 4, &n))
      return 0;
    if (n > CUCAP_FB_MAX_ELEMS - c->elems)
      return 0;
    c->elems += (uint32_t)n;
    for (uint64_t i = 0; i < n; i++) {
      uint64_t t;
      if (!deref(c, pos + 4 + 4 * i, &t))
        return 0;
      if (f->elem_kind == CUCAP_FB_K_STRING ? !verify_string(c, t)
                                            : !verify_table(c, t, f->table_desc,
                                                            depth + 1))
        return 0;
    }
    return 1;
  }
  default: {
    uint64_t s = cucap_fb_kind_size(f->elem_kind);
    if (!s)
      return 0; /* descriptor error */
    return verify_vector_hdr(c, pos, s, s, &n);
  }
  }
}

static int verify_table(vctx *c, uint64_t tpos, const cucap_fb_table_desc *td,
                        int depth) {
  if (depth > CUCAP_FB_MAX_DEPTH || ++c->tables > CUCAP_FB_MAX_TABLES)
    return 0;
  if (!in_bounds(c, tpos, 4, 4))
    return 0;
  int32_t so = (int32_t)rd32(c, tpos);
  int64_t vpos = (int64_t)tpos - (int64_t)so;
  if (vpos < 0 || !in_bounds(c, (uint64_t)vpos, 4, 2))
    return 0;
  uint64_t vsize = rd16(c, (uint64_t)vpos);
  uint64_t osize = rd16(c, (uint64_t)vpos + 2);
  if (vsize < 4 || (vsize & 1) || !in_bounds(c, (uint64_t)vpos, vsize, 2))
    return 0;
  if (osize < 4 || !in_bounds(c, tpos, osize, 1))
    return 0;
  for (unsigned i = 0; i < td->nfields; i++) {
    const cucap_fb_field_desc *f = &td->fields[i];
    uint64_t slot = 4 + 2 * (uint64_t)f->id;
    if (f->kind == CUCAP_FB_K_UNION) {
      /* The type lives in slot id-1 and is checked even when the value is
       * absent (readers look at it). */
      if (slot > vsize)
        continue; /* neither slot present */
      uint64_t fo = slot + 2 <= vsize ? rd16(c, (uint64_t)vpos + slot) : 0;
      uint64_t tfo = rd16(c, (uint64_t)vpos + slot - 2);
      unsigned type = 0;
      if (tfo) {
        if (!in_bounds(c, tpos + tfo, 1, 1))
          return 0;
        type = c->buf[tpos + tfo];
      }
      const cucap_fb_union_desc *u = f->union_desc;
      if (!fo || type == 0 || type >= u->count || !u->members[type])
        continue; /* absent, NONE, or a member from a newer minor: skipped */
      uint64_t t;
      if (!deref(c, tpos + fo, &t) ||
          !verify_table(c, t, u->members[type], depth + 1))
        return 0;
      continue;
    }
    if (slot + 2 > vsize)
      continue; /* written by an older minor: absent */
    uint64_t fo = rd16(c, (uint64_t)vpos + slot);
    if (!fo)
      continue;
    uint64_t fpos = tpos + fo;
    uint64_t t;
    switch (f->kind) {
    case CUCAP_FB_K_STRING:
      if (!deref(c, fpos, &t) || !verify_string(c, t))
        return 0;
      break;
    case CUCAP_FB_K_STRUCT:
      if (!verify_struct_at(c, fpos, f->struct_desc))
        return 0;
      break;
    case CUCAP_FB_K_TABLE:
      if (!deref(c, fpos, &t) || !verify_table(c, t, f->table_desc, depth + 1))
        return 0;
      break;
    case CUCAP_FB_K_VECTOR:
      if (!deref(c, fpos, &t) || !verify_vector(c, t, f, depth))
        return 0;
      break;
    default: {
      uint64_t s = cucap_fb_kind_size(f->kind);
      if (!s || !in_bounds(c, fpos, s, s))
        return 0;
      /* a union's type slot is a u8 scalar: covered here too */
      break;
    }
    }
  }
  return 1;
}

cucap_status cucap_fb_verify_table(const void *buf, size_t len,
                                   int size_prefixed,
                                   const cucap_fb_table_desc *t) {
  if (!buf || !t)
    return CUCAP_ERR_INVALID_ARG;
  vctx c = {(const uint8_t *)buf, len, 0, 0};
  if (len > 0x7FFFFFFFu + (uint64_t)4)
    return CUCAP_ERR_VERIFY;
  uint64_t root_pos = 0;
  if (size_prefixed) {
    if (len < 4)
      return CUCAP_ERR_VERIFY;
    uint64_t n = rd32(&c, 0);
    if (n > len - 4)
      return CUCAP_ERR_VERIFY;
    c.end = 4 + n;
    root_pos = 4;
  }
  if (c.end > 0x7FFFFFFFu + (uint64_t)4)
    return CUCAP_ERR_VERIFY;
  uint64_t tpos;
  if (!deref(&c, root_pos, &tpos) || !verify_table(&c, tpos, t, 1))
    return CUCAP_ERR_VERIFY;
  return CUCAP_OK;
}
