/* stacktab.c - symbolized host callstacks of a capture (cucap_stacktab.h).
 * Callstack records are kept by id in an open-addressing table; every
 * ModuleMap record is kept (they are few: one at start and one whenever a
 * frame fell outside the known objects) so a stack is symbolized with the
 * map that was current at its first use. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cucap_schema.h"
#include "cucap_stacktab.h"
#include "cucap_symbolize.h"
#include "cucap_vec.h"

#define ST_MAX_FRAMES 256 /* longer stacks are cut (the recorder keeps 32) */
#define ST_NO_GEN UINT32_MAX

typedef struct st_obj {
  char *path;
  uint8_t *build_id;
  size_t build_id_len;
  uint64_t base, start, end;
} st_obj;

typedef struct st_map {
  st_obj *objs;
  size_t n;
} st_map;

typedef struct st_ent {
  uint32_t id; /* 0 = empty slot */
  uint32_t nframes;
  uint32_t gen; /* map index at first use; ST_NO_GEN before */
  uint32_t first_app;
  uint64_t *frames;
  char **text; /* formatted lazily */
} st_ent;

struct cucap_stacktab {
  st_ent *slots;
  size_t cap, used;
  st_map *maps;
  size_t nmaps, capmaps;
  cucap_symbolizer *sym; /* NULL: no symbolization */
  uint32_t loaded;       /* map index loaded into sym; ST_NO_GEN none */
};

cucap_status cucap_stacktab_create(int symbolize, cucap_stacktab **out) {
  *out = NULL;
  cucap_stacktab *t = calloc(1, sizeof *t);
  if (!t)
    return CUCAP_ERR_NOMEM;
  t->loaded = ST_NO_GEN;
  if (symbolize && cucap_symbolizer_create(&t->sym) != CUCAP_OK) {
    free(t);
    return CUCAP_ERR_NOMEM;
  }
  *out = t;
  return CUCAP_OK;
}

static void ent_text_free(st_ent *e) {
  if (e->text)
    for (uint32_t i = 0; i < e->nframes; i++)
      free(e->text[i]);
  free(e->text);
  e->text = NULL;
}

void cucap_stacktab_destroy(cucap_stacktab *t) {
  if (!t)
    return;
  for (size_t i = 0; i < t->cap; i++) {
    ent_text_free(&t->slots[i]);
    free(t->slots[i].frames);
  }
  free(t->slots);
  for (size_t m = 0; m < t->nmaps; m++) {
    for (size_t i = 0; i < t->maps[m].n; i++) {
      free(t->maps[m].objs[i].path);
      free(t->maps[m].objs[i].build_id);
    }
    free(t->maps[m].objs);
  }
  free(t->maps);
  cucap_symbolizer_destroy(t->sym);
  free(t);
}

static st_ent *slot_of(const cucap_stacktab *t, uint32_t id) {
  if (!t->cap)
    return NULL;
  size_t m = t->cap - 1, i = (id * 2654435761u) & m;
  while (t->slots[i].id && t->slots[i].id != id)
    i = (i + 1) & m;
  return &t->slots[i];
}

static st_ent *find(const cucap_stacktab *t, uint32_t id) {
  st_ent *e = id ? slot_of(t, id) : NULL;
  return e && e->id == id ? e : NULL;
}

static int grow(cucap_stacktab *t) {
  size_t nc = t->cap ? t->cap * 2 : 64;
  st_ent *ns = calloc(nc, sizeof *ns);
  if (!ns)
    return 0;
  st_ent *old = t->slots;
  size_t oc = t->cap;
  t->slots = ns;
  t->cap = nc;
  for (size_t i = 0; i < oc; i++)
    if (old[i].id)
      *slot_of(t, old[i].id) = old[i];
  free(old);
  return 1;
}

static void add_stack(cucap_stacktab *t, const cucap_fb_callstack *cs) {
  uint32_t id = cucap_fb_callstack_id(cs);
  size_t n = 0;
  const uint64_t *fr = cucap_fb_callstack_frames(cs, &n);
  if (!id)
    return;
  if (!fr)
    n = 0;
  if (n > ST_MAX_FRAMES)
    n = ST_MAX_FRAMES;
  if ((t->used + 1) * 2 > t->cap && !grow(t))
    return;
  uint64_t *copy = malloc((n ? n : 1) * sizeof *copy);
  if (!copy)
    return;
  if (n)
    memcpy(copy, fr, n * sizeof *copy);
  st_ent *e = slot_of(t, id);
  if (e->id) { /* a repeated id replaces the frames */
    ent_text_free(e);
    free(e->frames);
  } else {
    t->used++;
  }
  *e = (st_ent){id, (uint32_t)n, ST_NO_GEN, 0, copy, NULL};
}

static void add_map(cucap_stacktab *t, const cucap_fb_module_map *mm) {
  if (!CUCAP_VEC_RESERVE(t->maps, t->capmaps, t->nmaps + 1, 4))
    return;
  size_t n = cucap_fb_module_map_objects_len(mm);
  st_map m = {calloc(n ? n : 1, sizeof(st_obj)), 0};
  if (!m.objs)
    return;
  for (size_t i = 0; i < n; i++) {
    const cucap_fb_loaded_object *o = cucap_fb_module_map_objects_at(mm, i);
    const char *path = o ? cucap_fb_loaded_object_path(o) : NULL;
    if (!path)
      continue;
    st_obj *d = &m.objs[m.n];
    d->path = strdup(path);
    size_t bl = 0;
    const uint8_t *bid = cucap_fb_loaded_object_build_id(o, &bl);
    if (bid && bl) {
      d->build_id = malloc(bl);
      if (d->build_id) {
        memcpy(d->build_id, bid, bl);
        d->build_id_len = bl;
      }
    }
    d->base = cucap_fb_loaded_object_base(o);
    d->start = cucap_fb_loaded_object_start_get(o);
    d->end = cucap_fb_loaded_object_end_get(o);
    if (d->path)
      m.n++;
    else
      free(d->build_id);
  }
  t->maps[t->nmaps++] = m;
}

void cucap_stacktab_feed(cucap_stacktab *t, const void *record) {
  const cucap_fb_record *rec = record;
  switch (cucap_fb_record_body_type(rec)) {
  case CUCAP_FB_BODY_CALLSTACK: {
    const cucap_fb_callstack *cs = cucap_fb_record_body_as_callstack(rec);
    if (cs)
      add_stack(t, cs);
    break;
  }
  case CUCAP_FB_BODY_MODULEMAP: {
    const cucap_fb_module_map *mm = cucap_fb_record_body_as_module_map(rec);
    if (mm)
      add_map(t, mm);
    break;
  }
  default:
    break;
  }
}

void cucap_stacktab_use(cucap_stacktab *t, uint32_t id) {
  st_ent *e = find(t, id);
  if (e && e->gen == ST_NO_GEN && t->nmaps)
    e->gen = (uint32_t)(t->nmaps - 1);
}

int cucap_stacktab_known(const cucap_stacktab *t, uint32_t id) {
  return find(t, id) != NULL;
}

static void load_map(cucap_stacktab *t, uint32_t gen) {
  if (!t->sym || gen == t->loaded || gen >= t->nmaps)
    return;
  cucap_symbolizer_clear(t->sym);
  const st_map *m = &t->maps[gen];
  for (size_t i = 0; i < m->n; i++) /* NOMEM: that object's frames print as hex */
    (void)cucap_symbolizer_add_object(t->sym, m->objs[i].path, m->objs[i].build_id,
                                      m->objs[i].build_id_len, m->objs[i].base,
                                      m->objs[i].start, m->objs[i].end);
  t->loaded = gen;
}

/* Objects whose frames are the CUDA stack or cucap, not the program. */
static int runtime_object(const char *path) {
  if (!path)
    return 0;
  const char *b = strrchr(path, '/');
  b = b ? b + 1 : path;
  static const char *const pre[] = {"libcuda.", "libcudart", "libcupti", "libcucap",
                                    "libnvidia-", "libcuda-"};
  for (size_t i = 0; i < sizeof pre / sizeof pre[0]; i++)
    if (!strncmp(b, pre[i], strlen(pre[i])))
      return 1;
  return 0;
}

const char *const *cucap_stacktab_frames(cucap_stacktab *t, uint32_t id,
                                         size_t *n, size_t *first_app) {
  *n = 0;
  if (first_app)
    *first_app = 0;
  st_ent *e = find(t, id);
  if (!e)
    return NULL;
  if (!e->text) {
    e->text = calloc(e->nframes ? e->nframes : 1, sizeof *e->text);
    if (!e->text)
      return NULL;
    uint32_t gen = e->gen != ST_NO_GEN ? e->gen : (t->nmaps ? (uint32_t)t->nmaps - 1 : ST_NO_GEN);
    if (gen != ST_NO_GEN)
      load_map(t, gen);
    int usable = t->sym && gen != ST_NO_GEN;
    int app_found = 0;
    e->first_app = 0;
    for (uint32_t i = 0; i < e->nframes; i++) {
      char buf[512];
      int k = -1;
      if (usable) {
        k = cucap_symbolizer_format(t->sym, e->frames[i], buf, sizeof buf);
        cucap_symbol sy;
        if (!app_found && cucap_symbolizer_lookup(t->sym, e->frames[i], &sy) == CUCAP_OK &&
            !runtime_object(sy.object)) {
          e->first_app = i;
          app_found = 1;
        }
      }
      if (k < 0)
        k = snprintf(buf, sizeof buf, "0x%" PRIx64, e->frames[i]);
      char *s = malloc((size_t)k + 1);
      if (!s) {
        ent_text_free(e);
        return NULL;
      }
      if ((size_t)k < sizeof buf)
        memcpy(s, buf, (size_t)k + 1);
      else if (usable) /* a long (C++) name: format again at full length */
        cucap_symbolizer_format(t->sym, e->frames[i], s, (size_t)k + 1);
      else
        memcpy(s, buf, sizeof buf); /* hex never exceeds buf */
      e->text[i] = s;
    }
  }
  *n = e->nframes;
  if (first_app)
    *first_app = e->first_app;
  return (const char *const *)e->text;
}
