/* reader_open.c - opening a capture (see reader.c for the reader's rules):
 * the header, the trailer's index when it is valid and agrees with the
 * chunk headers, else a scan from the start that stops at the first
 * incomplete or corrupt chunk; destroy and the header accessors. */
#include "cucap_reader.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cucap_log.h"
#include "reader_internal.h"

/* ---------------------------------------------------------------- open */

static void recovery_totals(cucap_reader *r) {
  cucap_reader_recovery *rc = &r->rec;
  rc->chunks = r->nchunks;
  rc->record_chunks = rc->blob_chunks = rc->records = 0;
  rc->raw_bytes = rc->compressed_bytes = 0;
  for (size_t i = 0; i < r->nchunks; i++) {
    const rchunk *c = &r->chunks[i];
    if (c->kind == CUCAP_FB_CHUNKKIND_RECORDS) {
      rc->record_chunks++;
      rc->records += c->records;
    } else {
      rc->blob_chunks++;
    }
    rc->raw_bytes += c->raw;
    rc->compressed_bytes += c->csize;
  }
  rc->blobs = r->nblobs;
}

/* The trailer at the end of the file and the header of the index chunk it
 * points at, both checked against the file. */
static cucap_status read_trailer(cucap_reader *r, cucap_trailer *t, cucap_chunk_header *h) {
  if (r->size < r->data_start + sizeof *t) {
    rd_set_msg(r, "no trailer (file ends at %zu)", r->size);
    return CUCAP_ERR_TRUNCATED;
  }
  const cucap_trailer *tp = (const cucap_trailer *)(r->data + r->size - sizeof *t);
  memcpy(t, tp, sizeof *t);
  if (t->magic != CUCAP_TRAILER_MAGIC) {
    rd_set_msg(r, "no trailer (app killed or file cut short?)");
    return CUCAP_ERR_TRUNCATED;
  }
  if (cucap_check32(t, 24) != t->check || t->file_size != r->size ||
      t->index_offset < r->data_start || t->index_offset > r->size ||
      t->index_size != r->size - sizeof *t - t->index_offset) {
    rd_set_msg(r, "trailer is damaged or does not match the file size");
    return CUCAP_ERR_CORRUPT;
  }
  char why[160];
  if (rd_chunk_header_at(r, t->index_offset, h, why, sizeof why) != CH_OK ||
      h->kind != CUCAP_FB_CHUNKKIND_INDEX ||
      align8u(sizeof *h + h->compressed_size) != t->index_size) {
    rd_set_msg(r, "index chunk at offset %llu is damaged",
               (unsigned long long)t->index_offset);
    return CUCAP_ERR_CORRUPT;
  }
  return CUCAP_OK;
}

/* The index chunk decompressed into *ib_out (the caller frees it) and
 * verified as a ChunkIndex; *ib_out is left alone on failure. */
static cucap_status load_index(cucap_reader *r, const cucap_trailer *t,
                               const cucap_chunk_header *h, uint8_t **ib_out) {
  /* Decompress the index through the chunk machinery (temporary entry). */
  if (rd_chunk_add(r, t->index_offset, h, 0) != 0)
    return CUCAP_ERR_NOMEM;
  uint8_t *ib = NULL;
  size_t icap = 0, ilen = 0;
  cucap_status st = rd_load_chunk(r, r->nchunks - 1, &ib, &icap, &ilen);
  r->nchunks = 0;
  if (st != CUCAP_OK) {
    free(ib);
    if (st == CUCAP_ERR_NOMEM)
      return st;
    return CUCAP_ERR_CORRUPT; /* msg set */
  }
  if (ilen < 8 || cucap_fb_chunk_index_verify(ib, ilen, 1) != CUCAP_OK) {
    free(ib);
    rd_set_msg(r, "index failed FlatBuffers verification");
    return CUCAP_ERR_CORRUPT;
  }
  *ib_out = ib;
  return CUCAP_OK;
}

/* The index's chunk entries, each matched with the chunk header at its
 * offset; they must tile the file up to the index. */
static cucap_status index_chunks(cucap_reader *r, const cucap_fb_chunk_index *ix,
                                 uint64_t index_offset) {
  char why[160];
  size_t n = cucap_fb_chunk_index_chunks_len(ix);
  uint64_t expect = r->data_start, nrec = 0;
  cucap_status st = CUCAP_OK;
  for (size_t i = 0; i < n && st == CUCAP_OK; i++) {
    const cucap_fb_chunk_entry *e = cucap_fb_chunk_index_chunks_at(ix, i);
    cucap_chunk_header ch;
    if (!e || cucap_fb_chunk_entry_offset(e) != expect ||
        rd_chunk_header_at(r, expect, &ch, why, sizeof why) != CH_OK ||
        ch.kind != cucap_fb_chunk_entry_kind(e) ||
        ch.kind == CUCAP_FB_CHUNKKIND_INDEX ||
        ch.compressed_size != cucap_fb_chunk_entry_compressed_size(e) ||
        ch.raw_size != cucap_fb_chunk_entry_raw_size(e) ||
        ch.records != cucap_fb_chunk_entry_records(e) ||
        align8u(sizeof ch + ch.compressed_size) > index_offset - expect) {
      rd_set_msg(r, "index entry %zu does not match the chunk at offset %llu", i,
                 (unsigned long long)expect);
      st = CUCAP_ERR_CORRUPT;
      break;
    }
    if (rd_chunk_add(r, expect, &ch, 0) != 0)
      st = CUCAP_ERR_NOMEM;
    if (ch.kind == CUCAP_FB_CHUNKKIND_RECORDS)
      nrec += ch.records;
    expect += align8u(sizeof ch + ch.compressed_size);
  }
  if (st == CUCAP_OK && expect != index_offset) {
    rd_set_msg(r, "index does not cover the file (gap at offset %llu)",
               (unsigned long long)expect);
    st = CUCAP_ERR_CORRUPT;
  }
  if (st == CUCAP_OK && nrec != cucap_fb_chunk_index_records(ix)) {
    rd_set_msg(r, "index record count %llu disagrees with its chunks (%llu)",
               (unsigned long long)cucap_fb_chunk_index_records(ix),
               (unsigned long long)nrec);
    st = CUCAP_ERR_CORRUPT;
  }
  return st;
}

/* The index's blob entries, each checked against the blob chunks. */
static cucap_status index_blobs(cucap_reader *r, const cucap_fb_chunk_index *ix) {
  cucap_status st = CUCAP_OK;
  size_t nb = cucap_fb_chunk_index_blobs_len(ix);
  /* A blob cannot be larger than all blob chunks together (keeps a forged
   * index from making blob_map allocate absurd sizes). */
  uint64_t blob_raw = 0;
  for (size_t i = 0; i < r->nchunks; i++)
    if (r->chunks[i].kind == CUCAP_FB_CHUNKKIND_BLOBS)
      blob_raw += r->chunks[i].raw;
  for (size_t i = 0; i < nb && st == CUCAP_OK; i++) {
    const cucap_fb_blob_entry *e = cucap_fb_chunk_index_blobs_at(ix, i);
    const cucap_fb_hash128 *fh = e ? cucap_fb_blob_entry_hash(e) : NULL;
    uint64_t sz = e ? cucap_fb_blob_entry_size(e) : 0;
    uint32_t ci = e ? cucap_fb_blob_entry_chunk(e) : 0;
    uint64_t want = sz ? (sz + CUCAP_BLOB_PIECE_SIZE - 1) / CUCAP_BLOB_PIECE_SIZE
                       : 1;
    if (!fh || ci >= r->nchunks || sz > blob_raw ||
        r->chunks[ci].kind != CUCAP_FB_CHUNKKIND_BLOBS ||
        cucap_fb_blob_entry_pieces(e) != want) {
      rd_set_msg(r, "index blob entry %zu is inconsistent", i);
      st = CUCAP_ERR_CORRUPT;
      break;
    }
    rblob *b = rd_blob_add(r);
    if (!b) {
      st = CUCAP_ERR_NOMEM;
      break;
    }
    b->hash.lo = fh->lo;
    b->hash.hi = fh->hi;
    b->size = sz;
    b->chunk = ci;
    b->pieces = (uint32_t)want;
    b->seen = sz;
  }
  return st;
}

/* Tries the trailer + index. Returns CUCAP_OK when used; otherwise msg says
 * why and the caller scans (or fails in strict mode). */
static cucap_status try_index(cucap_reader *r) {
  cucap_trailer t;
  cucap_chunk_header h;
  CUCAP_FORWARD(read_trailer(r, &t, &h));
  uint8_t *ib = NULL;
  CUCAP_FORWARD(load_index(r, &t, &h, &ib));
  const cucap_fb_chunk_index *ix = cucap_fb__root_sp(ib);
  cucap_status st = index_chunks(r, ix, t.index_offset);
  if (st == CUCAP_OK)
    st = index_blobs(r, ix);
  if (st == CUCAP_OK && rd_blob_rehash(r) != 0)
    st = CUCAP_ERR_NOMEM;
  if (st == CUCAP_OK) {
    r->rec.complete = cucap_fb_chunk_index_complete(ix) ? 1 : 0;
    r->rec.end_mono_ns = cucap_fb_chunk_index_end_mono_ns(ix);
    r->rec.used_index = 1;
    r->rec.good_bytes = r->size;
  }
  free(ib);
  if (st != CUCAP_OK) {
    r->nchunks = 0;
    r->nblobs = 0;
    free(r->bmap);
    r->bmap = NULL;
    r->bmap_cap = 0;
  }
  return st;
}

/* Scans chunks from the start; stops at the first bad one (recorded in
 * r->rec.problem). Returns an error only for OOM or, in strict mode, damage. */
static cucap_status scan(cucap_reader *r, const char *index_problem) {
  uint64_t off = r->data_start;
  char why[160];
  char problem[256] = "";
  int saw_index = 0;
  size_t idx = 0;
  while (off < r->size) {
    cucap_chunk_header h;
    if (saw_index) {
      /* What follows a valid index chunk is the (damaged) trailer. */
      break;
    }
    int res = rd_chunk_header_at(r, off, &h, why, sizeof why);
    if (res == CH_TRUNC) {
      snprintf(problem, sizeof problem,
               "file ends inside chunk %zu at offset %llu (app killed?)", idx,
               (unsigned long long)off);
      break;
    }
    if (res == CH_BAD) {
      snprintf(problem, sizeof problem, "chunk %zu at offset %llu is corrupt (%s)",
               idx, (unsigned long long)off, why);
      break;
    }
    rchunk tmp = {off, h.compressed_size, h.raw_size, h.records, h.kind, 0, 0};
    if (!rd_payload_ok(r, &tmp)) {
      snprintf(problem, sizeof problem,
               "chunk %zu at offset %llu is corrupt (payload checksum mismatch)",
               idx, (unsigned long long)off);
      break;
    }
    if (h.kind == CUCAP_FB_CHUNKKIND_INDEX) {
      saw_index = 1;
    } else if (rd_chunk_add(r, off, &h, 1) != 0) {
      return CUCAP_ERR_NOMEM;
    }
    idx++;
    uint64_t adv = align8u(sizeof h + h.compressed_size);
    off = adv > r->size - off ? r->size : off + adv;
  }
  /* Rebuild the blob table; a blob chunk that does not decode ends the
   * recovered part. */
  for (size_t ci = 0; ci < r->nchunks; ci++) {
    if (r->chunks[ci].kind != CUCAP_FB_CHUNKKIND_BLOBS)
      continue;
    int oom = 0;
    cucap_status st = rd_walk_pieces(r, ci, rd_scan_piece, &oom);
    if (oom || st == CUCAP_ERR_NOMEM)
      return CUCAP_ERR_NOMEM;
    if (st != CUCAP_OK) {
      snprintf(problem, sizeof problem, "%.200s", r->msg);
      r->nchunks = ci;
      /* Drop blobs that started in or after the bad chunk. */
      size_t k = 0;
      for (size_t i = 0; i < r->nblobs; i++)
        if (r->blobs[i].chunk < ci)
          r->blobs[k++] = r->blobs[i];
      r->nblobs = k;
      saw_index = 0;
      break;
    }
  }
  /* Keep only blobs whose bytes were all found. */
  size_t k = 0;
  for (size_t i = 0; i < r->nblobs; i++)
    if (r->blobs[i].seen == r->blobs[i].size)
      r->blobs[k++] = r->blobs[i];
  r->nblobs = k;
  if (rd_blob_rehash(r) != 0)
    return CUCAP_ERR_NOMEM;
  r->bc_chunk = SIZE_MAX;

  r->rec.used_index = 0;
  r->rec.complete = 0;
  r->rec.good_bytes = r->nchunks
                          ? r->chunks[r->nchunks - 1].offset +
                                align8u(sizeof(cucap_chunk_header) +
                                        r->chunks[r->nchunks - 1].csize)
                          : r->data_start;
  if (r->rec.good_bytes > r->size)
    r->rec.good_bytes = r->size;
  recovery_totals(r);
  if (!problem[0]) {
    if (saw_index)
      snprintf(problem, sizeof problem, "%.200s", index_problem);
    else
      snprintf(problem, sizeof problem, "no index (app killed?): %.200s",
               index_problem);
  }
  snprintf(r->rec.problem, sizeof r->rec.problem,
           "%.150s; recovered %llu chunks, %llu records", problem,
           (unsigned long long)r->rec.chunks,
           (unsigned long long)r->rec.records);
  return CUCAP_OK;
}

static cucap_status open_common(cucap_reader *r, const cucap_reader_options *o) {
  r->strict = o ? o->strict : 0;
  r->decode_threads = o && o->decode_threads > 0 ? o->decode_threads : 0;
  if (r->decode_threads > RA_MAX_THREADS)
    r->decode_threads = RA_MAX_THREADS;
  r->bc_chunk = SIZE_MAX;
  r->it_chunk = SIZE_MAX;
  r->rec.file_size = r->size;
  cucap_preamble pre;
  if (r->size < CUCAP_MAGIC_LEN ||
      memcmp(r->data, CUCAP_MAGIC, CUCAP_MAGIC_LEN) != 0) {
    rd_set_msg(r, "not a cucap capture (bad magic)");
    return CUCAP_ERR_BAD_MAGIC;
  }
  if (r->size < sizeof pre) {
    rd_set_msg(r, "capture is truncated inside the preamble (%zu bytes)", r->size);
    return CUCAP_ERR_TRUNCATED;
  }
  memcpy(&pre, r->data, sizeof pre);
  r->major = pre.major;
  r->minor = pre.minor;
  if (pre.major != CUCAP_FORMAT_MAJOR) {
    rd_set_msg(r,
               "capture format version %u.%u is not supported by this cucap "
               "(reads format %u.x, writes %u.%u)",
               pre.major, pre.minor, CUCAP_FORMAT_MAJOR, CUCAP_FORMAT_MAJOR,
               CUCAP_FORMAT_MINOR);
    return CUCAP_ERR_VERSION;
  }
  if (pre.header_size < 8 || pre.header_size > CUCAP_MAX_HEADER_SIZE) {
    rd_set_msg(r, "file header size %u is impossible", pre.header_size);
    return CUCAP_ERR_CORRUPT;
  }
  if (r->size - sizeof pre < pre.header_size) {
    rd_set_msg(r, "capture is truncated inside the file header");
    return CUCAP_ERR_TRUNCATED;
  }
  r->hdr_buf = r->data + sizeof pre;
  r->hdr_size = pre.header_size;
  if (cucap_check32(r->hdr_buf, r->hdr_size) != pre.header_check) {
    rd_set_msg(r, "file header checksum mismatch");
    return CUCAP_ERR_CORRUPT;
  }
  if (cucap_fb_file_header_verify(r->hdr_buf, r->hdr_size, 1) != CUCAP_OK) {
    rd_set_msg(r, "file header failed FlatBuffers verification");
    return CUCAP_ERR_CORRUPT;
  }
  r->data_start = align8u(sizeof pre + (uint64_t)pre.header_size);

  cucap_status st = try_index(r);
  if (st == CUCAP_ERR_NOMEM)
    return st;
  if (st == CUCAP_OK && r->strict) {
    for (size_t i = 0; i < r->nchunks; i++) {
      if (!rd_payload_ok(r, &r->chunks[i])) {
        rd_set_msg(r, "chunk %zu at offset %llu: payload checksum mismatch", i,
                   (unsigned long long)r->chunks[i].offset);
        return CUCAP_ERR_CORRUPT;
      }
      r->chunks[i].payload_ok = 1;
    }
  }
  if (st == CUCAP_OK) {
    recovery_totals(r);
    if (!r->rec.complete)
      snprintf(r->rec.problem, sizeof r->rec.problem,
               "index marks the capture incomplete");
    return CUCAP_OK;
  }
  if (r->strict)
    return st; /* msg says why */
  char iprob[256];
  snprintf(iprob, sizeof iprob, "%.200s", r->msg);
  CUCAP_FORWARD(scan(r, iprob));
  CUCAP_INFO("reader: recovering: %s", r->rec.problem);
  return CUCAP_OK;
}

static void put_msg(char *msg, size_t msg_size, const char *text) {
  if (msg && msg_size)
    snprintf(msg, msg_size, "%s", text);
}

static cucap_status finish_open(cucap_reader *r, const cucap_reader_options *o,
                                cucap_reader **out, char *msg,
                                size_t msg_size) {
  cucap_status st = open_common(r, o);
  if (st != CUCAP_OK) {
    if (!r->msg[0])
      rd_set_msg(r, "%s", cucap_status_str(st));
    put_msg(msg, msg_size, r->msg);
    cucap_reader_destroy(r);
    return st;
  }
  r->msg[0] = 0;
  *out = r;
  return CUCAP_OK;
}

cucap_status cucap_reader_open(const char *path,
                               const cucap_reader_options *opts,
                               cucap_reader **out, char *msg, size_t msg_size) {
  char buf[512];
  if (!out || !path) {
    put_msg(msg, msg_size, "invalid argument");
    return CUCAP_ERR_INVALID_ARG;
  }
  *out = NULL;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    snprintf(buf, sizeof buf, "cannot open %s: %s", path, strerror(errno));
    put_msg(msg, msg_size, buf);
    return CUCAP_ERR_IO;
  }
  struct stat sb;
  if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
    snprintf(buf, sizeof buf, "%s is not a regular file", path);
    close(fd);
    put_msg(msg, msg_size, buf);
    return CUCAP_ERR_IO;
  }
  cucap_reader *r = calloc(1, sizeof *r);
  if (!r) {
    close(fd);
    put_msg(msg, msg_size, "out of memory");
    return CUCAP_ERR_NOMEM;
  }
  r->size = (size_t)sb.st_size;
  if (r->size > 0) {
    void *m = mmap(NULL, r->size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m == MAP_FAILED) {
      snprintf(buf, sizeof buf, "cannot map %s: %s", path, strerror(errno));
      close(fd);
      free(r);
      put_msg(msg, msg_size, buf);
      return CUCAP_ERR_IO;
    }
    r->data = m;
    r->is_mmap = 1;
  } else {
    r->data = (const uint8_t *)"";
  }
  close(fd);
  return finish_open(r, opts, out, msg, msg_size);
}

cucap_status cucap_reader_open_memory(const void *data, size_t size,
                                      const cucap_reader_options *opts,
                                      cucap_reader **out, char *msg,
                                      size_t msg_size) {
  if (!out || (!data && size)) {
    put_msg(msg, msg_size, "invalid argument");
    return CUCAP_ERR_INVALID_ARG;
  }
  *out = NULL;
  cucap_reader *r = calloc(1, sizeof *r);
  uint8_t *copy = malloc(size ? size : 1);
  if (!r || !copy) {
    free(r);
    free(copy);
    put_msg(msg, msg_size, "out of memory");
    return CUCAP_ERR_NOMEM;
  }
  if (size)
    memcpy(copy, data, size);
  r->data = copy;
  r->owns_copy = 1;
  r->size = size;
  return finish_open(r, opts, out, msg, msg_size);
}

void cucap_reader_destroy(cucap_reader *r) {
  if (!r)
    return;
  rd_ra_destroy(r->ra); /* first: its workers read r->data */
  if (r->is_mmap)
    munmap((void *)r->data, r->size);
  else if (r->owns_copy)
    free((void *)r->data);
  for (size_t i = 0; i < r->nblobs; i++)
    free(r->blobs[i].mapped);
  free(r->blobs);
  free(r->bmap);
  free(r->chunks);
  free(r->it_buf);
  free(r->bc_buf);
  free(r->px);
  rd_put_dctx(r->dctx);
  free(r);
}

const char *cucap_reader_last_error(const cucap_reader *r) {
  return r ? r->msg : "";
}

void cucap_reader_version(const cucap_reader *r, unsigned *major,
                          unsigned *minor) {
  if (major)
    *major = r ? r->major : 0;
  if (minor)
    *minor = r ? r->minor : 0;
}

const void *cucap_reader_header(const cucap_reader *r) {
  return r ? cucap_fb__root_sp(r->hdr_buf) : NULL;
}

const void *cucap_reader_header_buffer(const cucap_reader *r, size_t *size) {
  if (size)
    *size = r ? r->hdr_size : 0;
  return r ? r->hdr_buf : NULL;
}
