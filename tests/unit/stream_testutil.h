/* stream_testutil.h - helpers shared by test_writer.c, test_reader.c and
 * test_corrupt.c. Header-only; each test is
 * its own program. */
#ifndef CUCAP_STREAM_TESTUTIL_H
#define CUCAP_STREAM_TESTUTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cucap_hash.h"
#include "cucap_reader.h"
#include "cucap_schema.h"
#include "cucap_writer.h"
#include "testutil.h"

/* Finished size-prefixed FileHeader copied into malloc'ed memory (caller
 * frees). */
static inline void *st_make_header(size_t *size) {
  cucap_fbb *b = cucap_fbb_create(0);
  TU_REQUIRE(b);
  cucap_fb_ref prod = cucap_fbb_string(b, "cucap-test", 10);
  cucap_fb_ref ver = cucap_fbb_string(b, CUCAP_VERSION_STRING,
                                      strlen(CUCAP_VERSION_STRING));
  cucap_fb_file_header_start(b);
  cucap_fb_file_header_add_format_major(b, CUCAP_FORMAT_MAJOR);
  cucap_fb_file_header_add_format_minor(b, CUCAP_FORMAT_MINOR);
  cucap_fb_file_header_add_cucap_version(b, ver);
  cucap_fb_file_header_add_pid(b, 1234);
  cucap_fb_file_header_add_start_mono_ns(b, 42);
  cucap_fb_file_header_add_producer(b, prod);
  cucap_fb_ref root = cucap_fb_file_header_end(b);
  const uint8_t *buf = cucap_fbb_finish(b, root, 1, size);
  TU_REQUIRE(buf);
  void *copy = malloc(*size);
  TU_REQUIRE(copy);
  memcpy(copy, buf, *size);
  cucap_fbb_destroy(b);
  return copy;
}

/* Builds a launch-like Record (seq, tid, args[6], Launch body with a 40-byte
 * argument block) in b (reset first). Returns the finished buffer (owned by
 * b). */
static inline const uint8_t *st_make_record(cucap_fbb *b, uint64_t seq,
                                            uint32_t tid, size_t *size) {
  cucap_fbb_reset(b);
  uint8_t argblk[40];
  for (int i = 0; i < 40; i++)
    argblk[i] = (uint8_t)(seq + (uint64_t)i);
  uint64_t args[6] = {seq, tid, 3, 4, 5, 6};
  cucap_fb_ref la = cucap_fb_launch_create_args(b, argblk, sizeof argblk);
  cucap_fb_dim3 grid = {(uint32_t)seq, 2, 3}, block = {128, 1, 1};
  cucap_fb_launch_start(b);
  cucap_fb_launch_add_function(b, 0xf00d);
  cucap_fb_launch_add_grid(b, &grid);
  cucap_fb_launch_add_block(b, &block);
  cucap_fb_launch_add_stream(b, 7);
  cucap_fb_launch_add_args(b, la);
  cucap_fb_ref launch = cucap_fb_launch_end(b);
  cucap_fb_ref ra = cucap_fb_record_create_args(b, args, 6);
  cucap_fb_record_start(b);
  cucap_fb_record_add_seq(b, seq);
  cucap_fb_record_add_tid(b, tid);
  cucap_fb_record_add_t_enter(b, seq * 10);
  cucap_fb_record_add_t_exit(b, seq * 10 + 5);
  cucap_fb_record_add_call(b, 307);
  cucap_fb_record_add_result(b, 0);
  cucap_fb_record_add_args(b, ra);
  cucap_fb_record_add_body(b, CUCAP_FB_BODY_LAUNCH, launch);
  cucap_fb_ref root = cucap_fb_record_end(b);
  const uint8_t *buf = cucap_fbb_finish(b, root, 1, size);
  TU_REQUIRE(buf);
  return buf;
}

/* Deterministic pseudo-random bytes. */
static inline void st_fill(void *dst, size_t n, uint64_t seed) {
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  uint8_t *p = dst;
  for (size_t i = 0; i < n; i++) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    p[i] = (uint8_t)x;
  }
}

static inline uint8_t *st_read_file(const char *path, size_t *size) {
  FILE *f = fopen(path, "rb");
  TU_REQUIRE(f);
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  uint8_t *b = malloc(n > 0 ? (size_t)n : 1);
  TU_REQUIRE(b);
  TU_REQUIRE(fread(b, 1, (size_t)n, f) == (size_t)n);
  fclose(f);
  *size = (size_t)n;
  return b;
}

static inline void st_write_file(const char *path, const void *d, size_t n) {
  FILE *f = fopen(path, "wb");
  TU_REQUIRE(f);
  TU_REQUIRE(fwrite(d, 1, n, f) == n);
  fclose(f);
}

/* Iterates all records; returns the count, CUCAP_END or error in *last. */
static inline uint64_t st_count_records(cucap_reader *r, cucap_status *last) {
  uint64_t n = 0;
  const void *rec, *buf;
  size_t sz;
  cucap_status st;
  cucap_reader_rewind(r);
  while ((st = cucap_reader_next(r, &rec, &buf, &sz)) == CUCAP_OK)
    n++;
  if (last)
    *last = st;
  return n;
}

#endif
