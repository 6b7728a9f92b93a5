/* share_util.c - the helpers of share_internal.h. */
#include <stdlib.h>
#include <string.h>

#include "share_internal.h"

static size_t slot_of(uint64_t k, size_t cap) {
  return (size_t)((k * 0x9E3779B97F4A7C15ull) >> 17) & (cap - 1);
}

static int map_grow(sh_map *m) {
  size_t nc = m->cap ? m->cap * 2 : 64;
  uint64_t *nk = calloc(nc, sizeof *nk), *nv = calloc(nc, sizeof *nv);
  if (!nk || !nv) {
    free(nk);
    free(nv);
    return 0;
  }
  for (size_t i = 0; i < m->cap; i++) {
    if (!m->keys[i])
      continue;
    size_t j = slot_of(m->keys[i], nc);
    while (nk[j])
      j = (j + 1) & (nc - 1);
    nk[j] = m->keys[i];
    nv[j] = m->vals[i];
  }
  free(m->keys);
  free(m->vals);
  m->keys = nk;
  m->vals = nv;
  m->cap = nc;
  return 1;
}

int sh_map_put(sh_map *m, uint64_t k, uint64_t v) {
  if (!k)
    return 1; /* not storable; callers never use 0 */
  if ((m->count + 1) * 4 > m->cap * 3 && !map_grow(m))
    return 0;
  size_t i = slot_of(k, m->cap);
  while (m->keys[i] && m->keys[i] != k)
    i = (i + 1) & (m->cap - 1);
  if (!m->keys[i])
    m->count++;
  m->keys[i] = k;
  m->vals[i] = v;
  return 1;
}

int sh_map_get(const sh_map *m, uint64_t k, uint64_t *v) {
  if (!m->cap || !k)
    return 0;
  size_t i = slot_of(k, m->cap);
  while (m->keys[i]) {
    if (m->keys[i] == k) {
      if (v)
        *v = m->vals[i];
      return 1;
    }
    i = (i + 1) & (m->cap - 1);
  }
  return 0;
}

int sh_map_del(sh_map *m, uint64_t k, uint64_t *old) {
  if (!m->cap || !k)
    return 0;
  size_t mask = m->cap - 1, i = slot_of(k, m->cap);
  while (m->keys[i] && m->keys[i] != k)
    i = (i + 1) & mask;
  if (!m->keys[i])
    return 0;
  if (old)
    *old = m->vals[i];
  /* backward-shift deletion keeps every probe chain intact */
  size_t j = i;
  for (;;) {
    j = (j + 1) & mask;
    if (!m->keys[j])
      break;
    size_t h = slot_of(m->keys[j], m->cap);
    /* move j to i when its home h is not in (i, j] (cyclically) */
    int in = i <= j ? (h > i && h <= j) : (h > i || h <= j);
    if (!in) {
      m->keys[i] = m->keys[j];
      m->vals[i] = m->vals[j];
      i = j;
    }
  }
  m->keys[i] = 0;
  m->vals[i] = 0;
  m->count--;
  return 1;
}

void sh_map_free(sh_map *m) {
  free(m->keys);
  free(m->vals);
  memset(m, 0, sizeof *m);
}

void sh_vec_init(sh_vec *v, size_t elem) {
  memset(v, 0, sizeof *v);
  v->elem = elem;
}

void *sh_vec_push(sh_vec *v) {
  if (v->n == v->cap) {
    size_t nc = v->cap ? v->cap * 2 : 16;
    void *nd = realloc(v->data, nc * v->elem);
    if (!nd)
      return NULL;
    v->data = nd;
    v->cap = nc;
  }
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
  if (*len + n > *cap) {
    size_t nc = *cap ? *cap * 2 : 4096;
    while (nc < *len + n)
      nc *= 2;
    char *ns = realloc(*buf, nc);
    if (!ns)
      return 0;
    *buf = ns;
    *cap = nc;
  }
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
