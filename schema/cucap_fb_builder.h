/* cucap_fb_builder.h - a small back-to-front FlatBuffers builder (official wire
 * format), the writing half of cucap's own FlatBuffers runtime.
 *
 * Objects are written from the end of an internal buffer towards its start,
 * as the C++ FlatBuffers builder does; alignment is computed from the buffer
 * end, and cucap_fbb_finish pads so that the finished buffer's size is a
 * multiple of 8 (with the size prefix included), which keeps every record of a
 * chunk 8-aligned. Vtables identical to one already in the buffer are shared.
 *
 * Use it through the generated API (schema/generated/cucap_schema.h):
 *   cucap_fb_launch_start(b); cucap_fb_launch_add_kind(b, ...); ...
 *   ref = cucap_fb_launch_end(b);
 * Strings and vectors must be created while no table is open (as in every
 * FlatBuffers builder); one table may be open at a time.
 *
 * Fields added with add_* are always written, even when equal to the schema
 * default (so _is_present reflects what the producer set); omit the call to
 * leave a field absent.
 *
 * Errors: no call crashes or aborts on OOM or misuse; the builder sets a
 * sticky failure flag (cucap_fbb_failed), further calls are no-ops returning
 * 0, and cucap_fbb_finish returns NULL. cucap_fbb_reset clears it.
 *
 * Not thread-safe: one builder per thread. */
#ifndef CUCAP_FB_BUILDER_H
#define CUCAP_FB_BUILDER_H

#include <stddef.h>
#include <stdint.h>

#include "cucap_format.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "cucap's FlatBuffers runtime assumes a little-endian host"
#endif

/* Offset of a finished object counted from the buffer end; 0 = none. */
typedef uint32_t cucap_fb_ref;

typedef struct cucap_fbb cucap_fbb;

/* initial_capacity 0 = 1 KiB. Returns NULL on OOM. Free with destroy. */
cucap_fbb *cucap_fbb_create(size_t initial_capacity);
void cucap_fbb_destroy(cucap_fbb *b); /* accepts NULL */
/* Forgets everything built (and the failure flag); keeps the memory. */
void cucap_fbb_reset(cucap_fbb *b);
/* Nonzero once an allocation failed or the API was misused (sticky). */
int cucap_fbb_failed(const cucap_fbb *b);

/* s need not be NUL-terminated; len bytes are copied and a NUL appended. */
cucap_fb_ref cucap_fbb_string(cucap_fbb *b, const char *s, size_t len);
/* Vector of scalars or structs: count elements of elem_size bytes (already in
 * FlatBuffers layout, little-endian), aligned to `align` (power of 2, <= 16). */
cucap_fb_ref cucap_fbb_vector(cucap_fbb *b, const void *elems, size_t count,
                              size_t elem_size, size_t align);
/* Vector of tables or strings (refs returned by this builder, all nonzero). */
cucap_fb_ref cucap_fbb_vector_refs(cucap_fbb *b, const cucap_fb_ref *refs,
                                   size_t count);

/* Finishes with `root` as the root table; always writes the file identifier
 * CUCAP_FB_FILE_IDENTIFIER. Returns the finished buffer (owned by b, valid
 * until reset/destroy) and its size in *out_size (a multiple of 8; for a
 * size-prefixed buffer the prefix counts the bytes after it). NULL if the
 * builder failed. After finish only reset/destroy are valid. */
const uint8_t *cucap_fbb_finish(cucap_fbb *b, cucap_fb_ref root,
                                int size_prefixed, size_t *out_size);

/* ---- table primitives, used by the generated code ----------------------
 * nfields: number of vtable slots of the table (a union takes two). Field ids
 * are the FlatBuffers slot numbers (0-based). Limit: 256 slots. */
#define CUCAP_FBB_MAX_FIELDS 256
void cucap_fbb_table_start(cucap_fbb *b, unsigned nfields);
cucap_fb_ref cucap_fbb_table_end(cucap_fbb *b);
void cucap_fbb_add_u8(cucap_fbb *b, unsigned id, uint8_t v);
void cucap_fbb_add_u16(cucap_fbb *b, unsigned id, uint16_t v);
void cucap_fbb_add_u32(cucap_fbb *b, unsigned id, uint32_t v);
void cucap_fbb_add_u64(cucap_fbb *b, unsigned id, uint64_t v);
void cucap_fbb_add_f32(cucap_fbb *b, unsigned id, float v);
void cucap_fbb_add_f64(cucap_fbb *b, unsigned id, double v);
/* Inline struct of `size` bytes aligned to `align`. NULL v: nothing added. */
void cucap_fbb_add_struct(cucap_fbb *b, unsigned id, const void *v,
                          size_t size, size_t align);
/* Offset field (string, vector, table). ref 0: nothing added. */
void cucap_fbb_add_ref(cucap_fbb *b, unsigned id, cucap_fb_ref ref);

#ifdef __cplusplus
}
#endif
#endif
