/* share_util.c - the helpers of share_internal.h. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cucap_vec.h"
#include "share_internal.h"

void sh_vec_init(sh_vec *v, size_t elem) {
  memset(v, 0, sizeof *v);
  v->elem = elem;
}

void *sh_vec_push(sh_vec *v) {
  if (!cucap_vec_reserve(&v->data, &v->cap, v->n + 1, v->elem, 16))
    return NULL;
  void *p = (char *)v->data + v->n * v->elem;
  memset(p, 0, v->elem);
  v->n++;
  return p;
}

void *sh_vec_at(const sh_vec *v, size_t i) {
  return i < v->n ? (char *)v->data + i * v->elem : NULL;
}

void sh_vec_free(sh_vec *v) {
  free(v->data);
  size_t e = v->elem;
  memset(v, 0, sizeof *v);
  v->elem = e;
}

int sh_rec_copy_make(sh_rec_copy *c, const void *buf, size_t size, const void *rec) {
  c->buf = malloc(size ? size : 1);
  if (!c->buf)
    return 0;
  memcpy(c->buf, buf, size);
  c->size = size;
  c->rec = (const cucap_fb_record *)(c->buf + ((const uint8_t *)rec - (const uint8_t *)buf));
  return 1;
}

cucap_hash128 sh_h(const cucap_fb_hash128 *h) {
  cucap_hash128 x = {0, 0};
  if (h) {
    x.lo = h->lo;
    x.hi = h->hi;
  }
  return x;
}

static void launch_blobs(const cucap_fb_launch *l, sh_blob_fn fn, void *user) {
  if (l && cucap_fb_launch_has_args_blob(l) && cucap_fb_launch_args_blob(l))
    fn(user, sh_h(cucap_fb_launch_args_blob(l)));
}

static void memcpy_blobs(const cucap_fb_memcpy *m, sh_blob_fn fn, void *user) {
  if (m && cucap_fb_memcpy_has_payload(m) && cucap_fb_memcpy_payload(m))
    fn(user, sh_h(cucap_fb_memcpy_payload(m)));
}

void sh_record_blobs(const cucap_fb_record *rec, sh_blob_fn fn, void *user) {
  switch (cucap_fb_record_body_type(rec)) {
  case CUCAP_FB_BODY_MODULE: {
    const cucap_fb_module *m = cucap_fb_record_body_as_module(rec);
    if (m && cucap_fb_module_image(m))
      fn(user, sh_h(cucap_fb_module_image(m)));
    break;
  }
  case CUCAP_FB_BODY_MEMCPY:
    memcpy_blobs(cucap_fb_record_body_as_memcpy(rec), fn, user);
    break;
  case CUCAP_FB_BODY_LAUNCH:
    launch_blobs(cucap_fb_record_body_as_launch(rec), fn, user);
    break;
  case CUCAP_FB_BODY_SNAPSHOT: {
    const cucap_fb_snapshot *s = cucap_fb_record_body_as_snapshot(rec);
    size_t n = s ? cucap_fb_snapshot_regions_len(s) : 0;
    for (size_t i = 0; i < n; i++) {
      const cucap_fb_mem_region *g = cucap_fb_snapshot_regions_at(s, i);
      if (g && cucap_fb_mem_region_data(g))
        fn(user, sh_h(cucap_fb_mem_region_data(g)));
    }
    break;
  }
  case CUCAP_FB_BODY_GRAPH: {
    const cucap_fb_graph *g = cucap_fb_record_body_as_graph(rec);
    size_t n = g ? cucap_fb_graph_nodes_len(g) : 0;
    for (size_t i = 0; i < n; i++) {
      const cucap_fb_graph_node *nd = cucap_fb_graph_nodes_at(g, i);
      if (!nd)
        continue;
      launch_blobs(cucap_fb_graph_node_launch(nd), fn, user);
      memcpy_blobs(cucap_fb_graph_node_memcpy(nd), fn, user);
    }
    break;
  }
  default:
    break;
  }
}

uint64_t sh_strings_add(char **buf, size_t *len, size_t *cap, const char *s) {
  size_t n = strlen(s) + 1;
  if (!CUCAP_VEC_RESERVE(*buf, *cap, *len + n, 4096))
    return 0;
  memcpy(*buf + *len, s, n);
  *len += n;
  return *len - n + 1;
}

int sh_alloc_is_device(int k) {
  return k == CUCAP_FB_ALLOCKIND_DEVICE || k == CUCAP_FB_ALLOCKIND_PITCH ||
         k == CUCAP_FB_ALLOCKIND_MANAGED || k == CUCAP_FB_ALLOCKIND_ASYNC ||
         k == CUCAP_FB_ALLOCKIND_FROMPOOL || k == CUCAP_FB_ALLOCKIND_VMMMAP;
}

uint64_t sh_alloc_size(const cucap_fb_alloc *a) {
  uint64_t s = cucap_fb_alloc_size(a);
  if (cucap_fb_alloc_kind(a) == CUCAP_FB_ALLOCKIND_PITCH) {
    uint64_t ps = cucap_fb_alloc_pitch(a) * cucap_fb_alloc_height(a);
    if (ps > s)
      s = ps;
  }
  return s;
}

uint64_t sh_fnv1a(uint64_t h, const void *p, size_t n) {
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++)
    h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

