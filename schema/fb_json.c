/* fb_json.c - the generic FlatBuffers -> JSON printer behind the generated
 * cucap_fb_<t>_to_json() functions (schema/generated/cucap_schema.h), on
 * top of common/'s JSON writer. What it prints is described in cucap_json.h. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cucap_json.h"
#include "cucap_schema.h"
#include "fb_verify.h"

/* ---- FlatBuffers printer ------------------------------------------------ */

/* Prints the scalar of `kind` at p (enum names when e knows the value). */
static void print_scalar(cucap_json *w, const uint8_t *p, unsigned kind,
                         const cucap_fb_enum_desc *e) {
  int64_t iv = 0;
  uint64_t uv = 0;
  int is_signed = 0;
  switch (kind) {
  case CUCAP_FB_K_BOOL:
    cucap_json_bool(w, p[0] != 0);
    return;
  case CUCAP_FB_K_I8: { int8_t v; memcpy(&v, p, 1); iv = v; is_signed = 1; break; }
  case CUCAP_FB_K_U8: uv = p[0]; break;
  case CUCAP_FB_K_I16: { int16_t v; memcpy(&v, p, 2); iv = v; is_signed = 1; break; }
  case CUCAP_FB_K_U16: { uint16_t v; memcpy(&v, p, 2); uv = v; break; }
  case CUCAP_FB_K_I32: { int32_t v; memcpy(&v, p, 4); iv = v; is_signed = 1; break; }
  case CUCAP_FB_K_U32: { uint32_t v; memcpy(&v, p, 4); uv = v; break; }
  case CUCAP_FB_K_I64: { int64_t v; memcpy(&v, p, 8); iv = v; is_signed = 1; break; }
  case CUCAP_FB_K_U64: { uint64_t v; memcpy(&v, p, 8); uv = v; break; }
  case CUCAP_FB_K_F32: { float v; memcpy(&v, p, 4); cucap_json_float(w, v); return; }
  case CUCAP_FB_K_F64: { double v; memcpy(&v, p, 8); cucap_json_double(w, v); return; }
  default:
    cucap_json_null(w);
    return;
  }
  if (e) {
    const char *name = NULL;
    if (is_signed)
      name = cucap_fb_enum_name(e, iv);
    else if (uv <= (uint64_t)INT64_MAX)
      name = cucap_fb_enum_name(e, (int64_t)uv);
    if (name) {
      cucap_json_string(w, name);
      return;
    }
  }
  if (is_signed)
    cucap_json_int(w, iv);
  else
    cucap_json_uint(w, uv);
}

static void print_struct(cucap_json *w, const uint8_t *p,
                         const cucap_fb_struct_desc *sd, unsigned flags) {
  if (sd->is_hash128 && (flags & CUCAP_JSON_HASH_HEX)) {
    uint64_t lo, hi;
    memcpy(&lo, p, 8);
    memcpy(&hi, p + 8, 8);
    char t[40];
    int n = snprintf(t, sizeof t, "%016llx%016llx", (unsigned long long)hi,
                     (unsigned long long)lo);
    cucap_json_string_n(w, t, (size_t)n);
    return;
  }
  cucap_json_object_begin(w);
  for (unsigned i = 0; i < sd->nfields; i++) {
    const cucap_fb_struct_field *f = &sd->fields[i];
    cucap_json_key(w, f->name);
    if (f->kind == CUCAP_FB_K_STRUCT)
      print_struct(w, p + f->offset, f->sub, flags);
    else
      print_scalar(w, p + f->offset, f->kind, f->enum_desc);
  }
  cucap_json_object_end(w);
}

static void print_string(cucap_json *w, const uint8_t *s) {
  cucap_json_string_n(w, (const char *)s + 4, cucap_fb__u32(s));
}

static void print_vector(cucap_json *w, const uint8_t *v,
                         const cucap_fb_field_desc *f, unsigned flags) {
  size_t n = cucap_fb__u32(v);
  const uint8_t *e = v + 4;
  if (f->elem_kind == CUCAP_FB_K_U8 && !f->enum_desc &&
      (flags & CUCAP_JSON_HEX_BYTES)) {
    cucap_json_hex(w, e, n);
    return;
  }
  cucap_json_array_begin(w);
  for (size_t i = 0; i < n && cucap_json_status(w) == CUCAP_OK; i++) {
    switch (f->elem_kind) {
    case CUCAP_FB_K_STRING:
      print_string(w, cucap_fb__deref(e + 4 * i));
      break;
    case CUCAP_FB_K_TABLE:
      cucap_fb_table_to_json(cucap_fb__deref(e + 4 * i), f->table_desc, w, flags);
      break;
    case CUCAP_FB_K_STRUCT:
      print_struct(w, e + i * f->struct_desc->size, f->struct_desc, flags);
      break;
    default:
      print_scalar(w, e + i * cucap_fb_kind_size(f->elem_kind), f->elem_kind,
                   f->enum_desc);
      break;
    }
  }
  cucap_json_array_end(w);
}

void cucap_fb_table_to_json(const void *t, const cucap_fb_table_desc *td,
                            cucap_json *w, unsigned flags) {
  if (!w)
    return;
  if (!t || !td) {
    cucap_json_null(w);
    return;
  }
  cucap_json_object_begin(w);
  for (unsigned i = 0; i < td->nfields; i++) {
    const cucap_fb_field_desc *f = &td->fields[i];
    const uint8_t *p = cucap_fb__field(t, f->id);
    if (f->kind == CUCAP_FB_K_UNION) {
      const uint8_t *tp = cucap_fb__field(t, f->id - 1u);
      if (!tp)
        continue;
      unsigned type = tp[0];
      const cucap_fb_union_desc *u = f->union_desc;
      size_t kl = strlen(f->name);
      char key[128];
      if (kl + 6 > sizeof key)
        continue;
      memcpy(key, f->name, kl);
      memcpy(key + kl, "_type", 6);
      cucap_json_key(w, key);
      print_scalar(w, tp, CUCAP_FB_K_U8, u->types);
      if (p && type < u->count && u->members[type]) {
        cucap_json_key(w, f->name);
        cucap_fb_table_to_json(cucap_fb__deref(p), u->members[type], w, flags);
      }
      continue;
    }
    if (!p)
      continue;
    cucap_json_key(w, f->name);
    switch (f->kind) {
    case CUCAP_FB_K_STRING:
      print_string(w, cucap_fb__deref(p));
      break;
    case CUCAP_FB_K_STRUCT:
      print_struct(w, p, f->struct_desc, flags);
      break;
    case CUCAP_FB_K_TABLE:
      cucap_fb_table_to_json(cucap_fb__deref(p), f->table_desc, w, flags);
      break;
    case CUCAP_FB_K_VECTOR:
      print_vector(w, cucap_fb__deref(p), f, flags);
      break;
    default:
      print_scalar(w, p, f->kind, f->enum_desc);
      break;
    }
  }
  cucap_json_object_end(w);
}
