/* fb_fill.h - test helper (header-only, static functions): builds any table of
 * the schema with EVERY field set to a deterministic value, driven by the
 * generated descriptors, and checks a buffer read back against the same
 * values. Used by tests/unit/test_schema.c and the flatc oracle helper
 * (tests/oracle/fb_oracle_gen.c). Not part of any library. */
#ifndef CUCAP_FB_FILL_H
#define CUCAP_FB_FILL_H

#include <stdio.h>
#include <string.h>

#include "cucap_schema.h"

#define FILL_MAX_DEPTH 6

/* Deterministic value bytes for a scalar of `kind` (little-endian). */
static void fill_scalar(unsigned kind, const cucap_fb_enum_desc *e,
                        unsigned seed, uint8_t out[8]) {
  memset(out, 0, 8);
  if (e) {
    int64_t v = e->vals[seed % e->count].value;
    memcpy(out, &v, 8); /* little-endian: low bytes first */
    return;
  }
  switch (kind) {
  case CUCAP_FB_K_BOOL: out[0] = 1; break;
  case CUCAP_FB_K_I8: { int8_t v = (int8_t)(-3 - (int)(seed % 50)); memcpy(out, &v, 1); break; }
  case CUCAP_FB_K_U8: out[0] = (uint8_t)(200 + seed % 50); break;
  case CUCAP_FB_K_I16: { int16_t v = (int16_t)(-1000 - (int)seed); memcpy(out, &v, 2); break; }
  case CUCAP_FB_K_U16: { uint16_t v = (uint16_t)(60000 + seed % 5000); memcpy(out, &v, 2); break; }
  case CUCAP_FB_K_I32: { int32_t v = -100000 - (int32_t)seed; memcpy(out, &v, 4); break; }
  case CUCAP_FB_K_U32: { uint32_t v = 4000000000u + seed; memcpy(out, &v, 4); break; }
  case CUCAP_FB_K_I64: { int64_t v = -(int64_t)0x123456789ABLL - seed; memcpy(out, &v, 8); break; }
  case CUCAP_FB_K_U64: { uint64_t v = 0xF00000000000000FULL + ((uint64_t)seed << 8); memcpy(out, &v, 8); break; }
  case CUCAP_FB_K_F32: { float v = 1.25f + (float)(seed % 100); memcpy(out, &v, 4); break; }
  case CUCAP_FB_K_F64: { double v = -2.5 + (double)(seed % 100); memcpy(out, &v, 8); break; }
  default: break;
  }
}

static void fill_struct(const cucap_fb_struct_desc *sd, unsigned seed,
                        uint8_t *out) {
  memset(out, 0, sd->size);
  for (unsigned i = 0; i < sd->nfields; i++) {
    const cucap_fb_struct_field *f = &sd->fields[i];
    if (f->kind == CUCAP_FB_K_STRUCT) {
      fill_struct(f->sub, seed + i, out + f->offset);
    } else {
      uint8_t v[8];
      fill_scalar(f->kind, f->enum_desc, seed + i, v);
      memcpy(out + f->offset, v, cucap_fb_kind_size(f->kind));
    }
  }
}

static void fill_string(unsigned seed, const char *field, char *out, size_t cap) {
  /* quotes, backslash, control chars and UTF-8 exercise JSON escaping */
  snprintf(out, cap, "%s-%u \"q\" \\ \t\n caf\xc3\xa9", field, seed);
}

#define FILL_VEC_N 3
#define FILL_BYTES_N 7

/* Union member chosen for union fields: FILL_UNION_FIRST or a type value. */
static cucap_fb_ref fill_table(cucap_fbb *b, const cucap_fb_table_desc *td,
                               unsigned seed, unsigned union_type, int depth);

static unsigned fill_union_type(const cucap_fb_union_desc *u, unsigned want) {
  if (want && want < u->count && u->members[want])
    return want;
  for (unsigned i = 1; i < u->count; i++)
    if (u->members[i])
      return i;
  return 0;
}

static cucap_fb_ref fill_field_ref(cucap_fbb *b, const cucap_fb_field_desc *f,
                                   unsigned seed, unsigned union_type,
                                   int depth) {
  char s[128];
  switch (f->kind) {
  case CUCAP_FB_K_STRING:
    fill_string(seed, f->name, s, sizeof s);
    return cucap_fbb_string(b, s, strlen(s));
  case CUCAP_FB_K_TABLE:
    return depth < FILL_MAX_DEPTH ? fill_table(b, f->table_desc, seed + 7, 0, depth + 1) : 0;
  case CUCAP_FB_K_UNION: {
    unsigned ty = fill_union_type(f->union_desc, union_type);
    return ty && depth < FILL_MAX_DEPTH
               ? fill_table(b, f->union_desc->members[ty], seed + 11, 0, depth + 1)
               : 0;
  }
  case CUCAP_FB_K_VECTOR: {
    cucap_fb_ref refs[FILL_VEC_N] = {0};
    uint8_t tmp[FILL_VEC_N * 64];
    switch (f->elem_kind) {
    case CUCAP_FB_K_STRING:
      for (unsigned i = 0; i < FILL_VEC_N; i++) {
        fill_string(seed + i, f->name, s, sizeof s);
        refs[i] = cucap_fbb_string(b, s, strlen(s));
      }
      return cucap_fbb_vector_refs(b, refs, FILL_VEC_N);
    case CUCAP_FB_K_TABLE:
      if (depth >= FILL_MAX_DEPTH)
        return cucap_fbb_vector_refs(b, refs, 0);
      for (unsigned i = 0; i < FILL_VEC_N; i++)
        refs[i] = fill_table(b, f->table_desc, seed + 100 * (i + 1), 0, depth + 1);
      return cucap_fbb_vector_refs(b, refs, FILL_VEC_N);
    case CUCAP_FB_K_STRUCT: {
      size_t sz = f->struct_desc->size;
      for (unsigned i = 0; i < FILL_VEC_N; i++)
        fill_struct(f->struct_desc, seed + i, tmp + i * sz);
      return cucap_fbb_vector(b, tmp, FILL_VEC_N, sz, f->struct_desc->align);
    }
    default: {
      size_t sz = cucap_fb_kind_size(f->elem_kind);
      unsigned n = sz == 1 ? FILL_BYTES_N : FILL_VEC_N;
      for (unsigned i = 0; i < n; i++) {
        uint8_t v[8];
        fill_scalar(f->elem_kind, f->enum_desc, seed + i, v);
        memcpy(tmp + i * sz, v, sz);
      }
      return cucap_fbb_vector(b, tmp, n, sz, sz);
    }
    }
  }
  default:
    return 0;
  }
}

static cucap_fb_ref fill_table(cucap_fbb *b, const cucap_fb_table_desc *td,
                               unsigned seed, unsigned union_type, int depth) {
  cucap_fb_ref refs[64] = {0};
  if (td->nfields > 64)
    return 0;
  for (unsigned i = 0; i < td->nfields; i++)
    refs[i] = fill_field_ref(b, &td->fields[i], seed + i, union_type, depth);
  cucap_fbb_table_start(b, td->nslots);
  for (unsigned i = 0; i < td->nfields; i++) {
    const cucap_fb_field_desc *f = &td->fields[i];
    uint8_t v[64];
    switch (f->kind) {
    case CUCAP_FB_K_STRING:
    case CUCAP_FB_K_TABLE:
    case CUCAP_FB_K_VECTOR:
      cucap_fbb_add_ref(b, f->id, refs[i]);
      break;
    case CUCAP_FB_K_UNION:
      if (refs[i]) {
        cucap_fbb_add_u8(b, f->id - 1u, (uint8_t)fill_union_type(f->union_desc, union_type));
        cucap_fbb_add_ref(b, f->id, refs[i]);
      }
      break;
    case CUCAP_FB_K_STRUCT:
      fill_struct(f->struct_desc, seed + i, v);
      cucap_fbb_add_struct(b, f->id, v, f->struct_desc->size, f->struct_desc->align);
      break;
    default: {
      fill_scalar(f->kind, f->enum_desc, seed + i, v);
      switch (cucap_fb_kind_size(f->kind)) {
      case 1: cucap_fbb_add_u8(b, f->id, v[0]); break;
      case 2: { uint16_t x; memcpy(&x, v, 2); cucap_fbb_add_u16(b, f->id, x); break; }
      case 4: { uint32_t x; memcpy(&x, v, 4); cucap_fbb_add_u32(b, f->id, x); break; }
      default: { uint64_t x; memcpy(&x, v, 8); cucap_fbb_add_u64(b, f->id, x); break; }
      }
    }
    }
  }
  return cucap_fbb_table_end(b);
}

/* ---- checker: returns the number of mismatches (printed to stderr) ---- */

static __attribute__((unused)) int check_table(const void *t, const cucap_fb_table_desc *td,
                       unsigned seed, unsigned union_type, int depth);

static __attribute__((unused)) int check_string(const uint8_t *s, unsigned seed, const char *field) {
  char e[128];
  fill_string(seed, field, e, sizeof e);
  if (!s || cucap_fb__u32(s) != strlen(e) || memcmp(s + 4, e, strlen(e) + 1)) {
    fprintf(stderr, "string %s mismatch\n", field);
    return 1;
  }
  return 0;
}

static __attribute__((unused)) int check_table(const void *t, const cucap_fb_table_desc *td,
                       unsigned seed, unsigned union_type, int depth) {
  int bad = 0;
  for (unsigned i = 0; i < td->nfields; i++) {
    const cucap_fb_field_desc *f = &td->fields[i];
    unsigned fs = seed + i;
    const uint8_t *p = cucap_fb__field(t, f->id);
    if (!p) {
      if (f->kind == CUCAP_FB_K_TABLE && depth >= FILL_MAX_DEPTH)
        continue;
      fprintf(stderr, "%s.%s absent\n", td->name, f->name);
      bad++;
      continue;
    }
    uint8_t v[64];
    switch (f->kind) {
    case CUCAP_FB_K_STRING:
      bad += check_string(cucap_fb__deref(p), fs, f->name);
      break;
    case CUCAP_FB_K_STRUCT:
      fill_struct(f->struct_desc, fs, v);
      if (memcmp(v, p, f->struct_desc->size)) {
        fprintf(stderr, "%s.%s struct mismatch\n", td->name, f->name);
        bad++;
      }
      break;
    case CUCAP_FB_K_TABLE:
      bad += check_table(cucap_fb__deref(p), f->table_desc, fs + 7, 0, depth + 1);
      break;
    case CUCAP_FB_K_UNION: {
      unsigned ty = fill_union_type(f->union_desc, union_type);
      const uint8_t *tp = cucap_fb__field(t, f->id - 1u);
      if (!tp || *tp != ty) {
        fprintf(stderr, "%s.%s union type mismatch\n", td->name, f->name);
        bad++;
        break;
      }
      bad += check_table(cucap_fb__deref(p), f->union_desc->members[ty], fs + 11, 0, depth + 1);
      break;
    }
    case CUCAP_FB_K_VECTOR: {
      const uint8_t *vec = cucap_fb__deref(p);
      size_t n = cucap_fb__u32(vec);
      const uint8_t *e = vec + 4;
      size_t sz = f->elem_kind == CUCAP_FB_K_STRUCT ? f->struct_desc->size
                                                    : cucap_fb_kind_size(f->elem_kind);
      size_t want = f->elem_kind == CUCAP_FB_K_TABLE && depth >= FILL_MAX_DEPTH ? 0
                    : sz == 1 ? FILL_BYTES_N : FILL_VEC_N;
      if (n != want) {
        fprintf(stderr, "%s.%s count %zu != %zu\n", td->name, f->name, n, want);
        bad++;
        break;
      }
      for (size_t k = 0; k < n; k++) {
        if (f->elem_kind == CUCAP_FB_K_STRING) {
          bad += check_string(cucap_fb__deref(e + 4 * k), fs + (unsigned)k, f->name);
        } else if (f->elem_kind == CUCAP_FB_K_TABLE) {
          bad += check_table(cucap_fb__deref(e + 4 * k), f->table_desc,
                             fs + 100 * (unsigned)(k + 1), 0, depth + 1);
        } else {
          if (f->elem_kind == CUCAP_FB_K_STRUCT)
            fill_struct(f->struct_desc, fs + (unsigned)k, v);
          else
            fill_scalar(f->elem_kind, f->enum_desc, fs + (unsigned)k, v);
          if (memcmp(v, e + k * sz, sz)) {
            fprintf(stderr, "%s.%s[%zu] mismatch\n", td->name, f->name, k);
            bad++;
          }
        }
      }
      break;
    }
    default:
      fill_scalar(f->kind, f->enum_desc, fs, v);
      if (memcmp(v, p, cucap_fb_kind_size(f->kind))) {
        fprintf(stderr, "%s.%s scalar mismatch\n", td->name, f->name);
        bad++;
      }
    }
  }
  return bad;
}

#define fill_all_tables cucap_fb_schema_tables
#define FILL_NTABLES CUCAP_FB_SCHEMA_NTABLES

#endif
