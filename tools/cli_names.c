/* cli_names.c - readable names for the CLI: demangled kernel names and host
 * frames as "function (file:line)" (cucap_cli.h).
 *
 * Demangling is symbols/'s (cucap_demangle.h), which finds __cxa_demangle
 * in the libsupc++ linked statically into the cucap tool. Source lines come
 * from the object files' DWARF through elfutils' libdw (Dwfl, offline
 * reporting of one ELF file per object at its link-time addresses), linked
 * statically into the cucap tool only - never into libcucap.so - so the GPU
 * machine needs no libdw. Objects and
 * symbols come from replay/'s symbolizer (cucap_symbolize.h), which also
 * checks the recorded build-id: a file whose build-id differs is not used
 * for lines either. Not thread-safe (one per command). */
#include <elfutils/libdwfl.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cucap_cli.h"
#include "cucap_demangle.h"
#include "cucap_schema.h"
#include "cucap_symbolize.h"
#include "cucap_vec.h"

const char *cucap_cli_demangle(const char *mangled, char *buf, size_t size) {
  if (!mangled || size == 0)
    return mangled;
  /* extern "C" names and those that do not demangle are what they are */
  return cucap_demangle(mangled, buf, size) ? buf : mangled;
}

/* The identifier of a demangled function name: "ns::k<4>(int)" -> "k". */
static void base_name(const char *d, char *out, size_t size) {
  const char *end = d + strlen(d), *p;
  int depth = 0;
  /* cut the parameter list: the last top-level '(' */
  for (p = end; p > d; p--) {
    char ch = p[-1];
    if (ch == ')')
      depth++;
    else if (ch == '(' && --depth == 0) {
      end = p - 1;
      break;
    }
  }
  /* cut trailing template arguments */
  if (end > d && end[-1] == '>') {
    depth = 0;
    for (p = end; p > d; p--) {
      if (p[-1] == '>')
        depth++;
      else if (p[-1] == '<' && --depth == 0) {
        end = p - 1;
        break;
      }
    }
  }
  /* the start: after the last "::" or space at depth 0 */
  const char *start = d;
  depth = 0;
  for (p = d; p < end; p++) {
    if (*p == '<' || *p == '(')
      depth++;
    else if ((*p == '>' || *p == ')') && depth)
      depth--;
    else if (!depth && (*p == ' ' || (*p == ':' && p + 1 < end && p[1] == ':')))
      start = *p == ' ' ? p + 1 : p + 2;
  }
  size_t n = (size_t)(end - start);
  if (n >= size)
    n = size - 1;
  memcpy(out, start, n);
  out[n] = 0;
}

int cucap_cli_kernel_match(void *user, const char *mangled, const char *pattern) {
  (void)user;
  if (!mangled || !pattern)
    return 0;
  if (!strcmp(mangled, pattern))
    return 1;
  char buf[4096], base[1024];
  const char *d = cucap_cli_demangle(mangled, buf, sizeof buf);
  if (!strcmp(d, pattern))
    return 1;
  base_name(d, base, sizeof base);
  return strcmp(base, pattern) == 0;
}

/* ------------------------------------------------------------ frames */

typedef struct dw_obj {
  char *path;
  Dwfl *dwfl;       /* NULL: no usable DWARF */
  Dwfl_Module *mod;
} dw_obj;

struct cucap_cli_frames {
  cucap_symbolizer *sym;
  int demangle;
  dw_obj *objs;
  size_t nobjs, capobjs;
};

static const Dwfl_Callbacks dw_callbacks = {
    .find_elf = dwfl_build_id_find_elf,
    .find_debuginfo = dwfl_standard_find_debuginfo,
    .section_address = dwfl_offline_section_address,
};

cucap_cli_frames *cucap_cli_frames_create(int demangle) {
  cucap_cli_frames *f = calloc(1, sizeof *f);
  if (!f)
    return NULL;
  if (cucap_symbolizer_create(&f->sym) != CUCAP_OK) {
    free(f);
    return NULL;
  }
  f->demangle = demangle;
  return f;
}

void cucap_cli_frames_destroy(cucap_cli_frames *f) {
  if (!f)
    return;
  for (size_t i = 0; i < f->nobjs; i++) {
    if (f->objs[i].dwfl)
      dwfl_end(f->objs[i].dwfl);
    free(f->objs[i].path);
  }
  free(f->objs);
  cucap_symbolizer_destroy(f->sym);
  free(f);
}

void cucap_cli_frames_clear(cucap_cli_frames *f) { cucap_symbolizer_clear(f->sym); }

void cucap_cli_frames_add(cucap_cli_frames *f, const char *path, const uint8_t *build_id,
                          size_t build_id_len, uint64_t base, uint64_t start, uint64_t end) {
  (void)cucap_symbolizer_add_object(f->sym, path, build_id, build_id_len, base, start, end);
}

/* The object's DWARF (opened once per path); NULL when it has none. */
static dw_obj *dw_open(cucap_cli_frames *f, const char *path) {
  for (size_t i = 0; i < f->nobjs; i++)
    if (!strcmp(f->objs[i].path, path))
      return &f->objs[i];
  if (!CUCAP_VEC_RESERVE(f->objs, f->capobjs, f->nobjs + 1, 16))
    return NULL;
  dw_obj *o = &f->objs[f->nobjs];
  memset(o, 0, sizeof *o);
  o->path = strdup(path);
  if (!o->path)
    return NULL;
  f->nobjs++;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return o;
  o->dwfl = dwfl_begin(&dw_callbacks);
  if (!o->dwfl) {
    close(fd);
    return o;
  }
  /* at link-time addresses (bias 0): the symbolizer's object offsets */
  o->mod = dwfl_report_elf(o->dwfl, path, path, fd, 0, false); /* takes fd */
  dwfl_report_end(o->dwfl, NULL, NULL);
  if (!o->mod) {
    dwfl_end(o->dwfl);
    o->dwfl = NULL;
  }
  return o;
}

static const char *base_of(const char *path) {
  const char *s = strrchr(path, '/');
  return s ? s + 1 : path;
}

int cucap_cli_frames_format(cucap_cli_frames *f, uint64_t addr, char *buf, size_t size) {
  cucap_symbol s;
  if (cucap_symbolizer_lookup(f->sym, addr, &s) != CUCAP_OK || !s.object)
    return snprintf(buf, size, "0x%" PRIx64, addr);
  const char *obj = base_of(s.object);
  char dem[2048];
  const char *fn = s.function;
  if (fn && f->demangle)
    fn = cucap_cli_demangle(fn, dem, sizeof dem);
  if (s.build_id_mismatch)
    return snprintf(buf, size, "%s+0x%" PRIx64 " (build-id mismatch, no debug info)", obj,
                    s.object_offset);
  dw_obj *o = dw_open(f, s.object);
  if (o && o->mod && s.object_offset) {
    /* a return address: the line of the call instruction before it */
    Dwarf_Addr pc = s.object_offset - 1;
    Dwfl_Line *ln = dwfl_module_getsrc(o->mod, pc);
    int line = 0;
    const char *file = ln ? dwfl_lineinfo(ln, NULL, &line, NULL, NULL, NULL) : NULL;
    if (file && line > 0) {
      if (!fn) {
        const char *an = dwfl_module_addrname(o->mod, pc);
        fn = an && f->demangle ? cucap_cli_demangle(an, dem, sizeof dem) : an;
      }
      return snprintf(buf, size, "%s (%s:%d)", fn ? fn : obj, base_of(file), line);
    }
  }
  if (fn)
    return snprintf(buf, size, "%s+0x%" PRIx64 " (%s+0x%" PRIx64 ", no debug info)", fn,
                    s.function_offset, obj, s.object_offset);
  return snprintf(buf, size, "%s+0x%" PRIx64 " (no debug info)", obj, s.object_offset);
}

/* ------------------------------------------------------------ kernels */

typedef struct fn_ent {
  uint64_t handle;
  char *name;
} fn_ent;

struct cucap_cli_fnames {
  fn_ent *slots;
  size_t cap, used;
};

cucap_cli_fnames *cucap_cli_fnames_create(void) { return calloc(1, sizeof(cucap_cli_fnames)); }

void cucap_cli_fnames_destroy(cucap_cli_fnames *t) {
  if (!t)
    return;
  for (size_t i = 0; i < t->cap; i++)
    free(t->slots[i].name);
  free(t->slots);
  free(t);
}

static fn_ent *fn_slot(cucap_cli_fnames *t, uint64_t h) {
  size_t m = t->cap - 1, i = (size_t)((h * 0x9E3779B97F4A7C15ull) >> 20) & m;
  while (t->slots[i].handle && t->slots[i].handle != h)
    i = (i + 1) & m;
  return &t->slots[i];
}

const char *cucap_cli_fnames_get(const cucap_cli_fnames *t, uint64_t handle) {
  if (!t || !t->cap || !handle)
    return NULL;
  fn_ent *e = fn_slot((cucap_cli_fnames *)t, handle);
  return e->handle ? e->name : NULL;
}

static void fn_put(cucap_cli_fnames *t, uint64_t h, const char *name) {
  if (!h || !name)
    return;
  if ((t->used + 1) * 2 > t->cap) {
    size_t nc = t->cap ? t->cap * 2 : 64;
    fn_ent *ns = calloc(nc, sizeof *ns);
    if (!ns)
      return;
    cucap_cli_fnames old = *t;
    t->slots = ns;
    t->cap = nc;
    for (size_t i = 0; i < old.cap; i++)
      if (old.slots[i].handle)
        *fn_slot(t, old.slots[i].handle) = old.slots[i];
    free(old.slots);
  }
  fn_ent *e = fn_slot(t, h);
  char *copy = strdup(name);
  if (!copy)
    return;
  if (e->handle)
    free(e->name);
  else
    t->used++;
  e->handle = h;
  e->name = copy;
}

void cucap_cli_fnames_feed(cucap_cli_fnames *t, const void *record) {
  const cucap_fb_record *rec = record;
  if (!t || cucap_fb_record_body_type(rec) != CUCAP_FB_BODY_FUNCTION)
    return;
  const cucap_fb_function *f = cucap_fb_record_body_as_function(rec);
  const char *nm = cucap_fb_function_name(f);
  if (!nm) /* a CUfunction of a CUkernel: the kernel's name */
    nm = cucap_cli_fnames_get(t, cucap_fb_function_module(f));
  fn_put(t, cucap_fb_function_handle(f), nm);
}
