/* cucap_json.h - a small streaming JSON writer; schema/fb_json.c prints
 * FlatBuffers tables with it (the generated cucap_fb_<t>_to_json()
 * functions, declared in schema/generated/cucap_schema.h).
 *
 * Output matches what `flatc --json --strict-json --raw-binary` prints for the
 * same buffer as data (not byte for byte): keys in schema order, absent fields
 * omitted, enums by name (unknown values as numbers), unions as
 * "<field>_type" then "<field>", structs as objects, 64-bit integers as
 * integers, floats in the shortest form that round-trips (NaN/Inf, which
 * JSON cannot express, are printed as the strings "nan", "inf", "-inf").
 * Strings are escaped; bytes that are not valid UTF-8 print as \u00XX.
 *
 * Writer errors (I/O, OOM, misuse such as nesting deeper than 256) are sticky:
 * later calls do nothing and cucap_json_status() reports the first one. */
#ifndef CUCAP_JSON_H
#define CUCAP_JSON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "cucap_status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Writer flags (create) and printer flags (to_json) share one space. */
#define CUCAP_JSON_PRETTY 0x1u     /* writer: indented, one field per line */
#define CUCAP_JSON_HEX_BYTES 0x2u  /* printer: [ubyte] vectors as hex strings */
#define CUCAP_JSON_HASH_HEX 0x4u   /* printer: Hash128 as 32 hex chars (hi, lo) */

typedef struct cucap_json cucap_json;

/* Writes to f (buffered; flushed by cucap_json_flush and destroy). The
 * caller keeps ownership of f and closes it after destroy. NULL on OOM. */
cucap_json *cucap_json_create_file(FILE *f, unsigned flags);
/* Writes into a growable memory buffer. NULL on OOM. */
cucap_json *cucap_json_create_mem(unsigned flags);
/* Flushes (file mode) and frees. Accepts NULL. */
void cucap_json_destroy(cucap_json *w);
cucap_status cucap_json_flush(cucap_json *w);
/* First error seen (CUCAP_OK if none). */
cucap_status cucap_json_status(const cucap_json *w);
/* Memory mode: the NUL-terminated text so far (owned by w; valid until the
 * next write, clear or destroy). File mode: NULL. */
const char *cucap_json_mem_data(const cucap_json *w, size_t *len);
/* Memory mode: forget the text (keeps memory); also resets nesting/errors. */
void cucap_json_mem_clear(cucap_json *w);

/* Structure. Commas, colons and indentation are inserted automatically;
 * consecutive top-level values are separated by a newline. */
void cucap_json_object_begin(cucap_json *w);
void cucap_json_object_end(cucap_json *w);
void cucap_json_array_begin(cucap_json *w);
void cucap_json_array_end(cucap_json *w);
void cucap_json_key(cucap_json *w, const char *key);
void cucap_json_string(cucap_json *w, const char *s);           /* NULL -> null */
void cucap_json_string_n(cucap_json *w, const char *s, size_t len);
void cucap_json_int(cucap_json *w, int64_t v);
void cucap_json_uint(cucap_json *w, uint64_t v);
void cucap_json_double(cucap_json *w, double v);
void cucap_json_float(cucap_json *w, float v);
void cucap_json_bool(cucap_json *w, int v);
void cucap_json_null(cucap_json *w);
/* len bytes as one lowercase hex string. */
void cucap_json_hex(cucap_json *w, const void *data, size_t len);
/* Ends the current line (after a complete top-level value). */
void cucap_json_newline(cucap_json *w);

/* Writes s to f as a JSON string, quotes included, without a writer: '"'
 * and '\\' escaped with a backslash, bytes below 0x20 as \u00XX, every
 * other byte as it is (UTF-8 passes through). For printers that build
 * their JSON with fprintf (the replay and verify reports, the Chrome trace). */
void cucap_json_fputs_string(FILE *f, const char *s);

#ifdef __cplusplus
}
#endif


#endif
