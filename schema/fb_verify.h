/* fb_verify.h - the reading half of cucap's FlatBuffers runtime: schema descriptors emitted by schema/gen_schema.py, a generic
 * verifier driven by them, and the tiny inline field readers the generated
 * accessors (schema/generated/cucap_schema.h) are built from.
 *
 * Every reader path must verify a buffer first: the inline readers below do
 * no bounds checks. The verifier never reads outside [buf, buf+len) whatever
 * the input; it checks bounds, alignment (relative to buf, which callers keep
 * 8-aligned), vtable sanity, NUL-terminated strings, vector sizes, nested
 * tables and unions, a depth limit of 64 and a limit on tables and vector
 * elements per buffer. Unknown union types and vtable slots beyond the schema
 * (written by a newer minor) are accepted and skipped.
 *
 * Descriptors are static data (valid for the life of the process). */
#ifndef CUCAP_FB_VERIFY_H
#define CUCAP_FB_VERIFY_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "cucap_status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CUCAP_FB_MAX_DEPTH 64
#define CUCAP_FB_MAX_TABLES 1000000u
/* Elements of vectors of tables/strings visited per buffer. */
#define CUCAP_FB_MAX_ELEMS 16000000u

/* Field kinds (scalars first, in the order of FlatBuffers base types). */
typedef enum cucap_fb_kind {
  CUCAP_FB_K_NONE = 0,
  CUCAP_FB_K_BOOL,
  CUCAP_FB_K_I8,
  CUCAP_FB_K_U8,
  CUCAP_FB_K_I16,
  CUCAP_FB_K_U16,
  CUCAP_FB_K_I32,
  CUCAP_FB_K_U32,
  CUCAP_FB_K_I64,
  CUCAP_FB_K_U64,
  CUCAP_FB_K_F32,
  CUCAP_FB_K_F64,
  CUCAP_FB_K_STRING,
  CUCAP_FB_K_STRUCT,
  CUCAP_FB_K_TABLE,
  CUCAP_FB_K_UNION,  /* value slot; its type is the slot before (u8) */
  CUCAP_FB_K_VECTOR  /* element kind in elem_kind */
} cucap_fb_kind;

typedef struct cucap_fb_enum_val {
  int64_t value;
  const char *name;
} cucap_fb_enum_val;

typedef struct cucap_fb_enum_desc {
  const char *name;
  uint32_t count;
  const cucap_fb_enum_val *vals; /* sorted by value */
} cucap_fb_enum_desc;

struct cucap_fb_struct_desc;
struct cucap_fb_table_desc;

typedef struct cucap_fb_struct_field {
  const char *name;
  uint8_t kind;      /* scalar kind or CUCAP_FB_K_STRUCT */
  uint16_t offset;
  const cucap_fb_enum_desc *enum_desc;       /* enum-typed scalar, or NULL */
  const struct cucap_fb_struct_desc *sub;    /* nested struct, or NULL */
} cucap_fb_struct_field;

typedef struct cucap_fb_struct_desc {
  const char *name;
  uint16_t size, align, nfields;
  uint8_t is_hash128; /* printed as hex with CUCAP_JSON_HASH_HEX */
  const cucap_fb_struct_field *fields;
} cucap_fb_struct_desc;

typedef struct cucap_fb_union_desc {
  const char *name;
  const cucap_fb_enum_desc *types;            /* NONE = 0 included */
  uint32_t count;                             /* entries of members */
  const struct cucap_fb_table_desc *const *members; /* by type; NULL = none */
} cucap_fb_union_desc;

typedef struct cucap_fb_field_desc {
  const char *name;
  uint16_t id;          /* vtable slot */
  uint8_t kind;
  uint8_t elem_kind;    /* for CUCAP_FB_K_VECTOR */
  const cucap_fb_enum_desc *enum_desc;
  const cucap_fb_struct_desc *struct_desc;
  const struct cucap_fb_table_desc *table_desc;
  const cucap_fb_union_desc *union_desc;
} cucap_fb_field_desc;

typedef struct cucap_fb_table_desc {
  const char *name;
  uint16_t nfields;
  uint16_t nslots;
  const cucap_fb_field_desc *fields; /* in schema order */
} cucap_fb_table_desc;

/* Size in bytes of a scalar kind (0 for non-scalars). */
size_t cucap_fb_kind_size(unsigned kind);
/* Name of enum value v, or NULL when v has no name. */
const char *cucap_fb_enum_name(const cucap_fb_enum_desc *e, int64_t v);

/* Verifies that buf[0, len) holds a FlatBuffer whose root is a table `t`.
 * size_prefixed: the buffer starts with a u32 size (bytes after it, at most
 * len - 4). The file identifier is not required. Returns CUCAP_OK or
 * CUCAP_ERR_VERIFY (CUCAP_ERR_INVALID_ARG for NULL arguments). */
cucap_status cucap_fb_verify_table(const void *buf, size_t len,
                                   int size_prefixed,
                                   const cucap_fb_table_desc *t);

/* ---- inline readers (no checks: only on verified buffers) ------------- */

/* A NULL table reads as a table with every field absent: a verified record
 * may lack a nested table (a union member whose value is missing, an absent
 * sub-table), and every accessor then returns its default instead of
 * crashing the reader's user. */
static inline const uint8_t *cucap_fb__field(const void *table, unsigned id) {
  const uint8_t *t = (const uint8_t *)table;
  if (!t)
    return NULL;
  int32_t so;
  uint16_t vsize, fo;
  memcpy(&so, t, 4);
  const uint8_t *vt = t - so;
  memcpy(&vsize, vt, 2);
  if (4u + 2u * id >= vsize)
    return NULL;
  memcpy(&fo, vt + 4 + 2 * id, 2);
  return fo ? t + fo : NULL;
}

static inline const uint8_t *cucap_fb__deref(const uint8_t *p) {
  uint32_t o;
  memcpy(&o, p, 4);
  return p + o;
}

/* Target of an offset field (string/vector/table), or NULL when absent. */
static inline const uint8_t *cucap_fb__ref(const void *table, unsigned id) {
  const uint8_t *p = cucap_fb__field(table, id);
  return p ? cucap_fb__deref(p) : NULL;
}

static inline uint32_t cucap_fb__u32(const uint8_t *p) {
  uint32_t v;
  memcpy(&v, p, 4);
  return v;
}

#define CUCAP_FB__READ(name, type)                                             \
  static inline type cucap_fb__read_##name(const void *t, unsigned id,         \
                                           type def) {                         \
    const uint8_t *p = cucap_fb__field(t, id);                                 \
    type v = def;                                                              \
    if (p)                                                                     \
      memcpy(&v, p, sizeof(type));                                             \
    return v;                                                                  \
  }
CUCAP_FB__READ(u8, uint8_t)
CUCAP_FB__READ(i8, int8_t)
CUCAP_FB__READ(u16, uint16_t)
CUCAP_FB__READ(i16, int16_t)
CUCAP_FB__READ(u32, uint32_t)
CUCAP_FB__READ(i32, int32_t)
CUCAP_FB__READ(u64, uint64_t)
CUCAP_FB__READ(i64, int64_t)
CUCAP_FB__READ(f32, float)
CUCAP_FB__READ(f64, double)
#undef CUCAP_FB__READ

/* Vector at slot id: elements pointer and count (NULL, 0 if absent). */
static inline const uint8_t *cucap_fb__vec(const void *t, unsigned id,
                                           size_t *count) {
  const uint8_t *v = cucap_fb__ref(t, id);
  if (count)
    *count = v ? cucap_fb__u32(v) : 0;
  return v ? v + 4 : NULL;
}

/* i-th element of a vector of offsets (tables/strings); NULL if out of range. */
static inline const uint8_t *cucap_fb__vec_ref_at(const void *t, unsigned id,
                                                  size_t i) {
  size_t n;
  const uint8_t *e = cucap_fb__vec(t, id, &n);
  return (e && i < n) ? cucap_fb__deref(e + 4 * i) : NULL;
}

/* Root table of a plain / size-prefixed buffer (no checks). */
static inline const void *cucap_fb__root(const void *buf) {
  return buf ? cucap_fb__deref((const uint8_t *)buf) : NULL;
}
static inline const void *cucap_fb__root_sp(const void *buf) {
  return buf ? cucap_fb__deref((const uint8_t *)buf + 4) : NULL;
}

typedef struct cucap_json cucap_json;
/* Prints the table `t` (inside a verified buffer) described by td. Use the
 * generated cucap_fb_<t>_to_json() wrappers instead of calling this. */
void cucap_fb_table_to_json(const void *t, const cucap_fb_table_desc *td,
                            cucap_json *w, unsigned flags);

#ifdef __cplusplus
}
#endif
#endif
