#!/usr/bin/env python3
"""gen_schema.py - generates schema/generated/cucap_schema.[ch] from cucap.fbs.

Owner: schema/. Python 3 standard library only; deterministic output.

Parses the subset of the FlatBuffers schema language that cucap.fbs uses
(namespace, file_identifier, file_extension, attribute, enum with an explicit
underlying type, union, struct, table with scalar/enum/bool/float/string/
struct/table/union fields and vectors of scalars/structs/tables/strings,
default values, metadata in parentheses (ignored), root_type, // comments)
and writes:

  * cucap_schema.h: enum constants, struct typedefs, opaque table types,
    static inline builders (cucap_fb_<t>_start/_add_<f>/_end), readers
    (cucap_fb_<t>_<f>, _is_present, _len, _at, _root, _root_sp, union
    _type/_as_<member>), and prototypes of verifiers and JSON printers;
  * cucap_schema.c: the static descriptors that drive the generic verifier
    (fb_verify.c) and JSON printer (cucap_json.c), enum name functions,
    cucap_fb_<t>_verify and cucap_fb_<t>_to_json.

Usage: gen_schema.py [--schema schema/cucap.fbs] [--out schema/generated]
"""
import argparse
import os
import re
import sys

SCALARS = {
    # fbs name: (kind, C type, size, builder suffix, reader suffix)
    'bool': ('BOOL', 'bool', 1, 'u8', 'u8'),
    'byte': ('I8', 'int8_t', 1, 'u8', 'i8'),
    'ubyte': ('U8', 'uint8_t', 1, 'u8', 'u8'),
    'short': ('I16', 'int16_t', 2, 'u16', 'i16'),
    'ushort': ('U16', 'uint16_t', 2, 'u16', 'u16'),
    'int': ('I32', 'int32_t', 4, 'u32', 'i32'),
    'uint': ('U32', 'uint32_t', 4, 'u32', 'u32'),
    'long': ('I64', 'int64_t', 8, 'u64', 'i64'),
    'ulong': ('U64', 'uint64_t', 8, 'u64', 'u64'),
    'float': ('F32', 'float', 4, 'f32', 'f32'),
    'double': ('F64', 'double', 8, 'f64', 'f64'),
}
ALIASES = {'int8': 'byte', 'uint8': 'ubyte', 'int16': 'short',
           'uint16': 'ushort', 'int32': 'int', 'uint32': 'uint',
           'int64': 'long', 'uint64': 'ulong', 'float32': 'float',
           'float64': 'double'}
UNSIGNED_OF = {'int8_t': 'uint8_t', 'int16_t': 'uint16_t',
               'int32_t': 'uint32_t', 'int64_t': 'uint64_t'}


class SchemaError(Exception):
    pass


def snake(name):
    s = re.sub(r'([A-Z]+)([A-Z][a-z])', r'\1_\2', name)
    s = re.sub(r'([a-z0-9])([A-Z])', r'\1_\2', s)
    return s.lower()


def tokenize(text):
    text = re.sub(r'//[^\n]*', '', text)
    text = re.sub(r'/\*.*?\*/', '', text, flags=re.S)
    tok_re = re.compile(r'\s*(?:("(?:[^"\\]|\\.)*")|([A-Za-z_][A-Za-z0-9_.]*)'
                        r'|([-+]?(?:0[xX][0-9a-fA-F]+|[0-9]+(?:\.[0-9]*)?'
                        r'(?:[eE][-+]?[0-9]+)?))|(\S))')
    toks = []
    pos = 0
    text = text.rstrip()
    while pos < len(text):
        m = tok_re.match(text, pos)
        if not m:
            raise SchemaError('cannot tokenize at %r' % text[pos:pos + 20])
        pos = m.end()
        if m.group(1) is not None:
            toks.append(('str', m.group(1)[1:-1]))
        elif m.group(2) is not None:
            toks.append(('id', m.group(2)))
        elif m.group(3) is not None:
            toks.append(('num', m.group(3)))
        else:
            toks.append(('p', m.group(4)))
    return toks


class Parser:
    def __init__(self, toks):
        self.t = toks
        self.i = 0
        self.namespace = ''
        self.file_identifier = None
        self.file_extension = None
        self.root_type = None
        self.enums = []      # dict(name, base, values[(name, val)], union, members)
        self.structs = []    # dict(name, fields[(name, type)])
        self.tables = []     # dict(name, fields[(name, type, default)])
        self.order = []      # (kind, name) in schema order

    def peek(self):
        return self.t[self.i] if self.i < len(self.t) else (None, None)

    def next(self):
        if self.i >= len(self.t):
            raise SchemaError('unexpected end of schema')
        tok = self.t[self.i]
        self.i += 1
        return tok

    def expect(self, val):
        tok = self.next()
        if tok[1] != val:
            raise SchemaError('expected %r, got %r' % (val, tok[1]))

    def ident(self):
        kind, val = self.next()
        if kind != 'id':
            raise SchemaError('expected identifier, got %r' % val)
        return val

    def metadata(self):
        if self.peek()[1] == '(':
            depth = 0
            while True:
                v = self.next()[1]
                if v == '(':
                    depth += 1
                elif v == ')':
                    depth -= 1
                    if depth == 0:
                        return

    def parse_type(self):
        if self.peek()[1] == '[':
            self.next()
            el = self.parse_type()
            self.expect(']')
            return ('vector', el)
        name = self.ident()
        name = ALIASES.get(name, name)
        if name in SCALARS:
            return ('scalar', name)
        if name == 'string':
            return ('string',)
        return ('named', name)

    def parse(self):
        while self.peek()[0] is not None:
            kw = self.ident()
            if kw == 'namespace':
                self.namespace = self.ident()
                self.expect(';')
            elif kw == 'file_identifier':
                self.file_identifier = self.next()[1]
                self.expect(';')
            elif kw == 'file_extension':
                self.file_extension = self.next()[1]
                self.expect(';')
            elif kw == 'root_type':
                self.root_type = self.ident()
                self.expect(';')
            elif kw == 'attribute':
                self.next()
                self.expect(';')
            elif kw == 'include':
                raise SchemaError('include is not supported')
            elif kw == 'enum':
                self.parse_enum(False)
            elif kw == 'union':
                self.parse_enum(True)
            elif kw in ('struct', 'table'):
                self.parse_struct(kw)
            else:
                raise SchemaError('unknown declaration %r' % kw)

    def parse_enum(self, is_union):
        name = self.ident()
        base = 'ubyte'
        if not is_union:
            self.expect(':')
            base = ALIASES.get(self.ident(), None) or self.t[self.i - 1][1]
            if base not in SCALARS or base in ('bool', 'float', 'double'):
                raise SchemaError('enum %s: bad underlying type %s' % (name, base))
        self.metadata()
        self.expect('{')
        values = [('NONE', 0)] if is_union else []
        members = [None] if is_union else []
        nextval = 1 if is_union else 0
        while self.peek()[1] != '}':
            vname = self.ident()
            member = vname
            if is_union and self.peek()[1] == ':':
                self.next()
                member = self.ident()
            if self.peek()[1] == '=':
                self.next()
                nextval = int(self.next()[1], 0)
            values.append((vname, nextval))
            members.append(member)
            nextval += 1
            self.metadata()
            if self.peek()[1] == ',':
                self.next()
        self.expect('}')
        vals = [v for _, v in values]
        if vals != sorted(vals) or len(set(vals)) != len(vals):
            raise SchemaError('enum %s: values must be ascending' % name)
        e = dict(name=name, base=base, values=values, union=is_union,
                 members=members)
        self.enums.append(e)
        self.order.append(('enum', name))

    def parse_struct(self, kw):
        name = self.ident()
        self.metadata()
        self.expect('{')
        fields = []
        while self.peek()[1] != '}':
            fname = self.ident()
            self.expect(':')
            ftype = self.parse_type()
            default = None
            if self.peek()[1] == '=':
                self.next()
                default = self.next()[1]
            self.metadata()
            self.expect(';')
            fields.append((fname, ftype, default))
        self.expect('}')
        d = dict(name=name, fields=fields, kind=kw)
        (self.structs if kw == 'struct' else self.tables).append(d)
        self.order.append((kw, name))


class Gen:
    def __init__(self, p):
        self.p = p
        self.enums = {e['name']: e for e in p.enums}
        self.structs = {s['name']: s for s in p.structs}
        self.tables = {t['name']: t for t in p.tables}
        self.names = set()
        for s in p.structs:
            self.layout_struct(s)
        for t in p.tables:
            self.resolve_table(t)

    # -- type resolution ---------------------------------------------------
    def resolve(self, ty):
        if ty[0] != 'named':
            if ty[0] == 'vector':
                return ('vector', self.resolve(ty[1]))
            return ty
        n = ty[1]
        if n.startswith(self.p.namespace + '.'):
            n = n[len(self.p.namespace) + 1:]
        if n in self.enums:
            return ('union', n) if self.enums[n]['union'] else ('enum', n)
        if n in self.structs:
            return ('struct', n)
        if n in self.tables:
            return ('table', n)
        raise SchemaError('unknown type %s' % n)

    def scalar_base(self, ty):
        if ty[0] == 'scalar':
            return ty[1]
        if ty[0] == 'enum':
            return self.enums[ty[1]]['base']
        return None

    def layout_struct(self, s):
        off = 0
        align = 1
        fields = []
        for fname, fty, _ in s['fields']:
            ty = self.resolve(fty)
            if ty[0] == 'struct':
                sub = self.structs[ty[1]]
                if 'size' not in sub:
                    raise SchemaError('struct %s used before definition' % ty[1])
                sz, al = sub['size'], sub['align']
            elif self.scalar_base(ty):
                sz = al = SCALARS[self.scalar_base(ty)][2]
            else:
                raise SchemaError('struct %s: field %s must be scalar/struct'
                                  % (s['name'], fname))
            off = (off + al - 1) // al * al
            fields.append((fname, ty, off))
            off += sz
            align = max(align, al)
        s['size'] = (off + align - 1) // align * align
        s['align'] = align
        s['rfields'] = fields

    def resolve_table(self, t):
        slot = 0
        out = []
        for fname, fty, default in t['fields']:
            ty = self.resolve(fty)
            if ty[0] == 'union':
                slot += 1  # the _type slot
            if ty[0] == 'vector' and ty[1][0] in ('vector', 'union'):
                raise SchemaError('%s.%s: unsupported vector type' % (t['name'], fname))
            out.append(dict(name=fname, ty=ty, id=slot,
                            default=self.default_of(ty, default, t, fname)))
            slot += 1
        t['rfields'] = out
        t['nslots'] = slot

    def default_of(self, ty, default, t, fname):
        base = self.scalar_base(ty)
        if base is None:
            if default is not None:
                raise SchemaError('%s.%s: default on non-scalar' % (t['name'], fname))
            return None
        if default is None:
            return '0.0f' if base == 'float' else '0.0' if base == 'double' \
                else 'false' if base == 'bool' else '0'
        if base == 'bool':
            return {'true': 'true', 'false': 'false', '1': 'true',
                    '0': 'false'}[default]
        if ty[0] == 'enum' and re.match(r'[A-Za-z_]', default):
            for n, v in self.enums[ty[1]]['values']:
                if n == default:
                    return str(v)
            raise SchemaError('%s.%s: unknown enum default' % (t['name'], fname))
        if base in ('float', 'double'):
            v = repr(float(default))
            return v + ('f' if base == 'float' else '')
        v = int(default, 0)
        if base in ('long',):
            return '(int64_t)%dLL' % v if v >= -(2**63) + 1 else 'INT64_MIN'
        if base == 'ulong':
            return '%dULL' % v
        return str(v)

    # -- naming ------------------------------------------------------------
    def name(self, n):
        if n in self.names:
            raise SchemaError('generated name collision: %s' % n)
        self.names.add(n)
        return n

    @staticmethod
    def enum_const(ename, vname):
        return 'CUCAP_FB_%s_%s' % (ename.upper(), vname.upper())

    # -- emission ----------------------------------------------------------
    def ctype(self, ty):
        if ty[0] == 'struct':
            return 'cucap_fb_%s' % snake(ty[1])
        return SCALARS[self.scalar_base(ty)][1]

    def kind_of(self, ty):
        base = self.scalar_base(ty)
        if base:
            return 'CUCAP_FB_K_' + SCALARS[base][0]
        return {'string': 'CUCAP_FB_K_STRING', 'struct': 'CUCAP_FB_K_STRUCT',
                'table': 'CUCAP_FB_K_TABLE', 'union': 'CUCAP_FB_K_UNION',
                'vector': 'CUCAP_FB_K_VECTOR'}[ty[0]]

    def header(self):
        p = self.p
        o = []
        w = o.append
        w(BANNER)
        w('/* cucap_schema.h - generated accessors for schema/cucap.fbs '
          '(namespace %s).' % p.namespace)
        w(' *')
        w(' * Builders: cucap_fb_<t>_start(b); cucap_fb_<t>_add_<f>(b, v)...; '
          'ref = cucap_fb_<t>_end(b).')
        w(' * Readers take tables inside a buffer that passed cucap_fb_<t>_verify'
          '(); every')
        w(' * returned pointer points into that buffer and stays valid as long as'
          ' it does')
        w(' * (nothing is allocated, nothing needs freeing). See cucap_fb_builder.h, '
          'fb_verify.h,')
        w(' * cucap_json.h and docs/design.md ("Generated FlatBuffers API"). */')
        w('#ifndef CUCAP_SCHEMA_H')
        w('#define CUCAP_SCHEMA_H')
        w('')
        w('#include <stdbool.h>')
        w('#include <stddef.h>')
        w('#include <stdint.h>')
        w('')
        w('#include "cucap_json.h"')
        w('#include "cucap_status.h"')
        w('#include "cucap_fb_builder.h"')
        w('#include "fb_verify.h"')
        w('')
        w('#ifdef __cplusplus')
        w('extern "C" {')
        w('#endif')
        w('')
        if p.file_identifier:
            w('#define CUCAP_FB_SCHEMA_FILE_IDENTIFIER "%s"' % p.file_identifier)
        if p.file_extension:
            w('#define CUCAP_FB_SCHEMA_FILE_EXTENSION "%s"' % p.file_extension)
        w('')
        for kind, nm in p.order:
            if kind == 'enum':
                self.h_enum(w, self.enums[nm])
            elif kind == 'struct':
                self.h_struct(w, self.structs[nm])
        w('/* ---- tables (opaque; point into a verified buffer) ---- */')
        for t in p.tables:
            w('typedef struct cucap_fb_%s cucap_fb_%s;' % (
                self.name_t(t), snake(t['name'])))
        w('')
        for t in p.tables:
            self.h_table(w, t)
        w('/* Every table descriptor, in schema order (tests, tools). */')
        w('#define CUCAP_FB_SCHEMA_NTABLES %d' % len(p.tables))
        w('extern const cucap_fb_table_desc *const %s[CUCAP_FB_SCHEMA_NTABLES];'
          % self.name('cucap_fb_schema_tables'))
        w('')
        w('#ifdef __cplusplus')
        w('}')
        w('#endif')
        w('#endif')
        return '\n'.join(o) + '\n'

    def name_t(self, t):
        return self.name('cucap_fb_' + snake(t['name']))[len('cucap_fb_'):]

    def h_enum(self, w, e):
        sn = snake(e['name'])
        w('/* %s %s%s */' % ('union' if e['union'] else 'enum', e['name'],
                             '' if e['union'] else ' : ' + e['base']))
        for vname, val in e['values']:
            w('#define %s %d' % (self.name(self.enum_const(e['name'], vname)), val))
        w('/* Name of value v ("Launch"), or NULL if v has no name. Static. */')
        w('const char *%s(int v);' % self.name('cucap_fb_%s_name' % sn))
        w('extern const cucap_fb_enum_desc %s;' % self.name('cucap_fb_enum_desc_%s' % sn))
        if e['union']:
            w('extern const cucap_fb_union_desc %s;' % self.name(
                'cucap_fb_union_desc_%s' % sn))
        w('')

    def h_struct(self, w, s):
        sn = snake(s['name'])
        tn = self.name('cucap_fb_%s' % sn)
        w('/* struct %s (%d bytes, align %d) */' % (s['name'], s['size'], s['align']))
        w('typedef struct %s {' % tn)
        for fname, ty, off in s['rfields']:
            w('  %s %s;' % (self.ctype(ty), fname))
        w('} %s;' % tn)
        w('_Static_assert(sizeof(%s) == %d, "FlatBuffers struct layout");' % (
            tn, s['size']))
        w('extern const cucap_fb_struct_desc %s;' % self.name(
            'cucap_fb_struct_desc_%s' % sn))
        w('')

    def h_table(self, w, t):
        sn = snake(t['name'])
        T = 'cucap_fb_%s' % sn
        n = self.name
        w('/* ---- table %s ---- */' % t['name'])
        w('extern const cucap_fb_table_desc %s;' % n('cucap_fb_table_desc_%s' % sn))
        w('static inline void %s(cucap_fbb *b) { cucap_fbb_table_start(b, %d); }'
          % (n(T + '_start'), t['nslots']))
        w('static inline cucap_fb_ref %s(cucap_fbb *b) { return cucap_fbb_table_end(b); }'
          % n(T + '_end'))
        for f in t['rfields']:
            self.h_field(w, t, T, f)
        w('/* Root table of a plain / size-prefixed buffer (verify first). */')
        w('static inline const %s *%s(const void *buf) {' % (T, n(T + '_root')))
        w('  return (const %s *)cucap_fb__root(buf);' % T)
        w('}')
        w('static inline const %s *%s(const void *buf) {' % (T, n(T + '_root_sp')))
        w('  return (const %s *)cucap_fb__root_sp(buf);' % T)
        w('}')
        w('/* CUCAP_OK if buf[0, len) is a valid buffer with a %s root. */'
          % t['name'])
        w('cucap_status %s(const void *buf, size_t len, int size_prefixed);'
          % n(T + '_verify'))
        w('void %s(const %s *t, cucap_json *w, unsigned flags);' % (
            n(T + '_to_json'), T))
        w('')

    def h_field(self, w, t, T, f):
        n = self.name
        fn = '%s_%s' % (T, f['name'])
        # A field named like a per-table function (LoadedObject.start/end)
        # would collide with the builder: its main reader gets a _get suffix.
        getter = fn + '_get' if f['name'] in RESERVED_FIELDS else fn
        ty = f['ty']
        fid = f['id']
        k = ty[0]
        if k in ('scalar', 'enum'):
            base = self.scalar_base(ty)
            ct = SCALARS[base][1]
            bs = SCALARS[base][3]
            rs = SCALARS[base][4]
            arg = 'v ? 1 : 0' if base == 'bool' else (
                '(%s)v' % UNSIGNED_OF[ct] if ct in UNSIGNED_OF else 'v')
            w('static inline void %s(cucap_fbb *b, %s v) { cucap_fbb_add_%s(b, %d, %s); }'
              % (n('%s_add_%s' % (T, f['name'])), ct, bs, fid, arg))
            if base == 'bool':
                w('static inline bool %s(const %s *t) { return cucap_fb__read_u8(t, %d, %s) != 0; }'
                  % (n(getter), T, fid, '1' if f['default'] == 'true' else '0'))
            else:
                w('static inline %s %s(const %s *t) { return cucap_fb__read_%s(t, %d, %s); }'
                  % (ct, n(getter), T, rs, fid, f['default']))
        elif k == 'struct':
            st = self.structs[ty[1]]
            ct = self.ctype(ty)
            w('static inline void %s(cucap_fbb *b, const %s *v) { cucap_fbb_add_struct(b, %d, v, %d, %d); }'
              % (n('%s_add_%s' % (T, f['name'])), ct, fid, st['size'], st['align']))
            w('static inline const %s *%s(const %s *t) { return (const %s *)cucap_fb__field(t, %d); }'
              % (ct, n(getter), T, ct, fid))
        elif k == 'union':
            e = self.enums[ty[1]]
            w('static inline void %s(cucap_fbb *b, uint8_t type, cucap_fb_ref v) {'
              % n('%s_add_%s' % (T, f['name'])))
            w('  cucap_fbb_add_u8(b, %d, type);' % (fid - 1))
            w('  cucap_fbb_add_ref(b, %d, v);' % fid)
            w('}')
            w('static inline uint8_t %s(const %s *t) { return cucap_fb__read_u8(t, %d, 0); }'
              % (n(fn + '_type'), T, fid - 1))
            w('static inline const void *%s(const %s *t) { return cucap_fb__ref(t, %d); }'
              % (n(fn), T, fid))
            for (vname, val), mem in zip(e['values'], e['members']):
                if mem is None:
                    continue
                ms = snake(mem)
                w('static inline const cucap_fb_%s *%s(const %s *t) {' % (
                    ms, n('%s_as_%s' % (fn, snake(vname))), T))
                w('  return %s(t) == %s ? (const cucap_fb_%s *)cucap_fb__ref(t, %d) : NULL;'
                  % (fn + '_type', self.enum_const(e['name'], vname), ms, fid))
                w('}')
        elif k == 'string':
            w('static inline void %s(cucap_fbb *b, cucap_fb_ref v) { cucap_fbb_add_ref(b, %d, v); }'
              % (n('%s_add_%s' % (T, f['name'])), fid))
            w('static inline const char *%s(const %s *t) {' % (n(getter), T))
            w('  const uint8_t *s = cucap_fb__ref(t, %d);' % fid)
            w('  return s ? (const char *)s + 4 : NULL;')
            w('}')
            w('static inline size_t %s(const %s *t) {' % (n(fn + '_len'), T))
            w('  const uint8_t *s = cucap_fb__ref(t, %d);' % fid)
            w('  return s ? cucap_fb__u32(s) : 0;')
            w('}')
        elif k == 'table':
            ms = snake(ty[1])
            w('static inline void %s(cucap_fbb *b, cucap_fb_ref v) { cucap_fbb_add_ref(b, %d, v); }'
              % (n('%s_add_%s' % (T, f['name'])), fid))
            w('static inline const cucap_fb_%s *%s(const %s *t) { return (const cucap_fb_%s *)cucap_fb__ref(t, %d); }'
              % (ms, n(getter), T, ms, fid))
        elif k == 'vector':
            el = ty[1]
            w('static inline void %s(cucap_fbb *b, cucap_fb_ref v) { cucap_fbb_add_ref(b, %d, v); }'
              % (n('%s_add_%s' % (T, f['name'])), fid))
            w('static inline size_t %s(const %s *t) { size_t c; cucap_fb__vec(t, %d, &c); return c; }'
              % (n(fn + '_len'), T, fid))
            if el[0] in ('scalar', 'enum', 'struct'):
                if el[0] == 'struct':
                    ct = self.ctype(el)
                    size = align = None
                    st = self.structs[el[1]]
                    size, align = st['size'], st['align']
                else:
                    base = self.scalar_base(el)
                    ct = 'uint8_t' if base == 'bool' else SCALARS[base][1]
                    size = align = SCALARS[base][2]
                w('static inline cucap_fb_ref %s(cucap_fbb *b, const %s *v, size_t n) {'
                  % (n('%s_create_%s' % (T, f['name'])), ct))
                w('  return cucap_fbb_vector(b, v, n, %d, %d);' % (size, align))
                w('}')
                w('static inline const %s *%s(const %s *t, size_t *count) {'
                  % (ct, n(getter), T))
                w('  return (const %s *)cucap_fb__vec(t, %d, count);' % (ct, fid))
                w('}')
            elif el[0] == 'table':
                ms = snake(el[1])
                w('static inline const cucap_fb_%s *%s(const %s *t, size_t i) {'
                  % (ms, n(fn + '_at'), T))
                w('  return (const cucap_fb_%s *)cucap_fb__vec_ref_at(t, %d, i);' % (ms, fid))
                w('}')
            elif el[0] == 'string':
                w('static inline const char *%s(const %s *t, size_t i) {' % (n(fn + '_at'), T))
                w('  const uint8_t *s = cucap_fb__vec_ref_at(t, %d, i);' % fid)
                w('  return s ? (const char *)s + 4 : NULL;')
                w('}')
                w('static inline size_t %s(const %s *t, size_t i) {' % (n(fn + '_at_len'), T))
                w('  const uint8_t *s = cucap_fb__vec_ref_at(t, %d, i);' % fid)
                w('  return s ? cucap_fb__u32(s) : 0;')
                w('}')
        w('static inline int %s(const %s *t) { return cucap_fb__field(t, %d) != NULL; }'
          % (n(fn + '_is_present'), T, fid))

    # -- .c ----------------------------------------------------------------
    def source(self):
        p = self.p
        o = []
        w = o.append
        w(BANNER)
        w('/* cucap_schema.c - descriptors, enum names, verifiers and JSON printers')
        w(' * generated from schema/cucap.fbs (see cucap_schema.h). */')
        w('#include "cucap_schema.h"')
        w('')
        for e in p.enums:
            sn = snake(e['name'])
            w('static const cucap_fb_enum_val cucap_fb__vals_%s[] = {' % sn)
            for vname, val in e['values']:
                w('  {%d, "%s"},' % (val, vname))
            w('};')
            w('const cucap_fb_enum_desc cucap_fb_enum_desc_%s = {"%s", %d, cucap_fb__vals_%s};'
              % (sn, e['name'], len(e['values']), sn))
            w('const char *cucap_fb_%s_name(int v) {' % sn)
            w('  return cucap_fb_enum_name(&cucap_fb_enum_desc_%s, v);' % sn)
            w('}')
            if e['union']:
                maxv = e['values'][-1][1]
                w('static const cucap_fb_table_desc *const cucap_fb__members_%s[%d] = {'
                  % (sn, maxv + 1))
                for (vname, val), mem in zip(e['values'], e['members']):
                    if mem is not None:
                        w('  [%d] = &cucap_fb_table_desc_%s,' % (val, snake(mem)))
                w('};')
                w('const cucap_fb_union_desc cucap_fb_union_desc_%s = {"%s", &cucap_fb_enum_desc_%s, %d, cucap_fb__members_%s};'
                  % (sn, e['name'], sn, maxv + 1, sn))
            w('')
        for s in p.structs:
            sn = snake(s['name'])
            w('static const cucap_fb_struct_field cucap_fb__sfields_%s[] = {' % sn)
            for fname, ty, off in s['rfields']:
                w('  {"%s", %s, %d, %s, %s},' % (
                    fname, self.kind_of(ty), off,
                    '&cucap_fb_enum_desc_%s' % snake(ty[1]) if ty[0] == 'enum' else 'NULL',
                    '&cucap_fb_struct_desc_%s' % snake(ty[1]) if ty[0] == 'struct' else 'NULL'))
            w('};')
            is_hash = 1 if s['name'] == 'Hash128' else 0
            w('const cucap_fb_struct_desc cucap_fb_struct_desc_%s = {"%s", %d, %d, %d, %d, cucap_fb__sfields_%s};'
              % (sn, s['name'], s['size'], s['align'], len(s['rfields']), is_hash, sn))
            w('')
        for t in p.tables:
            sn = snake(t['name'])
            w('static const cucap_fb_field_desc cucap_fb__fields_%s[] = {' % sn)
            for f in t['rfields']:
                ty = f['ty']
                el = ty[1] if ty[0] == 'vector' else None
                sub = el if el else ty
                elem_kind = self.kind_of(el) if el else '0'
                e_ = '&cucap_fb_enum_desc_%s' % snake(sub[1]) if sub[0] == 'enum' else 'NULL'
                s_ = '&cucap_fb_struct_desc_%s' % snake(sub[1]) if sub[0] == 'struct' else 'NULL'
                t_ = '&cucap_fb_table_desc_%s' % snake(sub[1]) if sub[0] == 'table' else 'NULL'
                u_ = '&cucap_fb_union_desc_%s' % snake(sub[1]) if sub[0] == 'union' else 'NULL'
                w('  {"%s", %d, %s, %s, %s, %s, %s, %s},' % (
                    f['name'], f['id'], self.kind_of(ty), elem_kind, e_, s_, t_, u_))
            w('};')
            w('const cucap_fb_table_desc cucap_fb_table_desc_%s = {"%s", %d, %d, cucap_fb__fields_%s};'
              % (sn, t['name'], len(t['rfields']), t['nslots'], sn))
            w('cucap_status cucap_fb_%s_verify(const void *buf, size_t len, int size_prefixed) {' % sn)
            w('  return cucap_fb_verify_table(buf, len, size_prefixed, &cucap_fb_table_desc_%s);' % sn)
            w('}')
            w('void cucap_fb_%s_to_json(const cucap_fb_%s *t, cucap_json *w, unsigned flags) {' % (sn, sn))
            w('  cucap_fb_table_to_json(t, &cucap_fb_table_desc_%s, w, flags);' % sn)
            w('}')
            w('')
        w('const cucap_fb_table_desc *const cucap_fb_schema_tables[CUCAP_FB_SCHEMA_NTABLES] = {')
        for t in p.tables:
            w('  &cucap_fb_table_desc_%s,' % snake(t['name']))
        w('};')
        return '\n'.join(o) + '\n'


RESERVED_FIELDS = ('start', 'end', 'verify', 'root', 'root_sp', 'to_json')

BANNER = ('/* DO NOT EDIT: generated by schema/gen_schema.py from schema/cucap.fbs.\n'
          ' * Regenerate with `python3 schema/gen_schema.py` (or the regen_schema\n'
          ' * target); tools/check_generated.sh fails when this file is stale. */')


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--schema', default=os.path.join(here, 'cucap.fbs'))
    ap.add_argument('--out', default=os.path.join(here, 'generated'))
    a = ap.parse_args()
    try:
        with open(a.schema, encoding='utf-8') as f:
            p = Parser(tokenize(f.read()))
        p.parse()
        g = Gen(p)
        h = g.header()
        c = g.source()
    except SchemaError as e:
        print('gen_schema.py: %s: %s' % (a.schema, e), file=sys.stderr)
        return 1
    os.makedirs(a.out, exist_ok=True)
    for name, text in (('cucap_schema.h', h), ('cucap_schema.c', c)):
        path = os.path.join(a.out, name)
        old = None
        if os.path.exists(path):
            with open(path, encoding='utf-8') as f:
                old = f.read()
        if old != text:  # keep mtimes stable when nothing changed
            with open(path, 'w', encoding='utf-8', newline='\n') as f:
                f.write(text)
    return 0


if __name__ == '__main__':
    sys.exit(main())
