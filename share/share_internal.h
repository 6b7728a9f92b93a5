/* share_internal.h - helpers shared by the files of share/ (trim, extract,
 * export, diff). Internal: nothing outside share/ includes it.
 *
 * Maps are cucap_map (cucap_map.h). sh_vec: a growable array of fixed-size
 * elements; it owns its memory, sh_vec_free releases it and leaves an empty
 * value. */
#ifndef CUCAP_SHARE_INTERNAL_H
#define CUCAP_SHARE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "cucap_format.h"
#include "cucap_map.h"
#include "cucap_reader.h"
#include "cucap_schema.h"
#include "cucap_status.h"

/* cucap_map_put for share/'s maps, whose keys are handles, addresses and
 * ids where 0 means none: key 0 is not stored (returns 1), so a NULL
 * handle never names anything and a lookup of 0 finds nothing. Callers
 * that need 0 as a key add 1. 0 on OOM. */
static inline int sh_map_put(cucap_map *m, uint64_t k, uint64_t v) {
  return !k || cucap_map_put(m, k, v);
}

typedef struct sh_vec {
  void *data;
  size_t n, cap, elem;
} sh_vec;

void sh_vec_init(sh_vec *v, size_t elem);
void *sh_vec_push(sh_vec *v);             /* zeroed new element; NULL on OOM */
void *sh_vec_at(const sh_vec *v, size_t i);
void sh_vec_free(sh_vec *v);

/* Appends s and its NUL to a string arena (*buf: *len bytes used of *cap,
 * grown by doubling). Returns the copy's offset + 1, so that id 0 stays
 * free for "no string"; 0 on OOM (the arena unchanged). */
uint64_t sh_strings_add(char **buf, size_t *len, size_t *cap, const char *s);

/* A private copy of a record buffer (size-prefixed) and the Record in it;
 * the copy is 8-aligned like the reader's. NULL on OOM. Free with free(). */
typedef struct sh_rec_copy {
  uint8_t *buf;
  size_t size;
  const cucap_fb_record *rec;
} sh_rec_copy;
int sh_rec_copy_make(sh_rec_copy *c, const void *buf, size_t size, const void *rec);

/* Blob hashes a record refers to (module images, copy payloads, large
 * argument blocks, snapshot contents, graph node payloads), handed to fn
 * one by one (duplicates possible). */
typedef void (*sh_blob_fn)(void *user, cucap_hash128 h);
void sh_record_blobs(const cucap_fb_record *rec, sh_blob_fn fn, void *user);

/* Allocation kinds whose [address, address + size) holds device data (the
 * replayer places these): Device, Pitch, Managed, Async, FromPool, VmmMap. */
int sh_alloc_is_device(int kind);
/* Bytes an allocation covers (Pitch: pitch * height when larger). */
uint64_t sh_alloc_size(const cucap_fb_alloc *a);

cucap_hash128 sh_h(const cucap_fb_hash128 *h);

/* FNV-1a 64 over bytes, continuing from h (start: SH_FNV_INIT). The
 * checksum of an extracted launch's result and of its emitted C program. */
#define SH_FNV_INIT 1469598103934665603ull
uint64_t sh_fnv1a(uint64_t h, const void *p, size_t n);

#endif
