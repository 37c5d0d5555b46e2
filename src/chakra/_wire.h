/*
 * The protobuf wire format as the C parts of chakra read it: cursors, varints, tags, lengths, skipping
 * unknown fields, UTF-8 as upb validates it, the AttributeProto members of et_def.proto, and record
 * framing (a varint32 length prefix and a payload). Shared by chakra._columns (the node table's decoder),
 * chakra._encode (the producers' node encoder), chakra._xplane (the TensorFlow profile's reader),
 * chakra._tf_graph (the TensorFlow graphs' reader) and chakra.share._native (the anonymizer's rewriter and the leakage check), so that the readers accept
 * exactly what protobuf's own parser (upb) accepts and the writer writes what it writes.
 */
#ifndef CHAKRA_WIRE_H
#define CHAKRA_WIRE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* protobuf wire types */
enum { WT_VARINT = 0, WT_I64 = 1, WT_LEN = 2, WT_SGROUP = 3, WT_EGROUP = 4, WT_I32 = 5 };

/* upb's default nesting limit for groups and messages */
#define MAX_DEPTH 100
/* a record length prefix is a varint32 of at most 5 bytes (chakra.io reports longer ones) */
#define MAX_PREFIX_BYTES 5
#define MAX_VARINT_BYTES 10

/* AttributeProto oneof members (et_def.proto) */
enum {
    A_DOUBLE = 3, A_FLOAT = 5, A_INT32 = 7, A_INT64 = 9, A_UINT32 = 11, A_UINT64 = 13, A_SINT32 = 15,
    A_SINT64 = 17, A_FIXED32 = 19, A_FIXED64 = 21, A_SFIXED32 = 23, A_SFIXED64 = 25, A_BOOL = 27,
    A_STRING = 29, A_STRING_LIST = 30, A_BYTES = 31, A_BYTES_LIST = 32, A_FIRST_MEMBER = 3, A_LAST_MEMBER = 32
};

typedef struct {
    const uint8_t *p;
    const uint8_t *end;
    const char *error; /* set on the first error */
} Cursor;

/* Growable byte buffer for rows and dependency ids. */
typedef struct {
    char *data;
    size_t len;
    size_t cap;
} Buf;

static inline int buf_reserve(Buf *b, size_t more) {
    if (b->len + more <= b->cap) return 0;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + more) cap *= 2;
    char *data = PyMem_Realloc(b->data, cap);
    if (!data) return -1;
    b->data = data;
    b->cap = cap;
    return 0;
}

static inline void *buf_push(Buf *b, size_t size) {
    if (buf_reserve(b, size) < 0) return NULL;
    void *at = b->data + b->len;
    b->len += size;
    return at;
}

static inline int buf_put_byte(Buf *b, uint8_t byte) {
    uint8_t *at = buf_push(b, 1);
    if (!at) return -1;
    *at = byte;
    return 0;
}

static inline int buf_put_bytes(Buf *b, const void *data, size_t len) {
    if (!len) return 0;
    char *at = buf_push(b, len);
    if (!at) return -1;
    memcpy(at, data, len);
    return 0;
}

static inline PyObject *buf_to_bytes(Buf *b) {
    return PyBytes_FromStringAndSize(b->data ? b->data : "", (Py_ssize_t)b->len);
}

static inline int read_varint(Cursor *c, uint64_t *out) {
    if (c->p < c->end && *c->p < 0x80) { /* the common one-byte case */
        *out = *c->p++;
        return 0;
    }
    uint64_t value = 0;
    for (int i = 0; i < MAX_VARINT_BYTES; i++) {
        if (c->p >= c->end) {
            c->error = "varint runs past the end of its message";
            return -1;
        }
        uint8_t byte = *c->p++;
        if (i < 9 || byte <= 1) value |= (uint64_t)(byte & 0x7F) << (7 * i);
        else value |= (uint64_t)(byte & 0x01) << 63; /* bits beyond 64 are dropped, as upb does */
        if (byte < 0x80) {
            *out = value;
            return 0;
        }
    }
    c->error = "varint longer than 10 bytes";
    return -1;
}

static inline int read_tag(Cursor *c, uint32_t *field, int *wire_type) {
    if (c->p < c->end && *c->p < 0x80 && *c->p >= 8) { /* one byte: fields 1-15 */
        *field = *c->p >> 3;
        *wire_type = *c->p++ & 7;
        return 0;
    }
    uint64_t tag = 0;
    const uint8_t *start = c->p;
    if (read_varint(c, &tag) < 0) return -1;
    if (c->p - start > MAX_PREFIX_BYTES || tag > UINT32_MAX) {
        c->error = "field tag does not fit 32 bits";
        return -1;
    }
    *field = (uint32_t)(tag >> 3);
    *wire_type = (int)(tag & 7);
    if (*field == 0) {
        c->error = "field number 0";
        return -1;
    }
    return 0;
}

static inline int read_len(Cursor *c, const uint8_t **data, size_t *len) {
    uint64_t n;
    if (read_varint(c, &n) < 0) return -1;
    if (n > (uint64_t)(c->end - c->p)) {
        c->error = "length-delimited field runs past the end of its message";
        return -1;
    }
    *data = c->p;
    *len = (size_t)n;
    c->p += n;
    return 0;
}

static inline int read_fixed(Cursor *c, int width, uint64_t *out) {
    if (c->end - c->p < width) {
        c->error = "fixed-width field runs past the end of its message";
        return -1;
    }
    uint64_t value = 0;
    for (int i = 0; i < width; i++) value |= (uint64_t)c->p[i] << (8 * i); /* little endian on the wire */
    c->p += width;
    *out = value;
    return 0;
}

/* Skip one field's value (its tag already read); groups up to their end tag. */
static inline int skip_field(Cursor *c, uint32_t field, int wire_type, int depth) {
    uint64_t ignored;
    const uint8_t *data;
    size_t len;
    switch (wire_type) {
    case WT_VARINT: return read_varint(c, &ignored);
    case WT_I64: return read_fixed(c, 8, &ignored);
    case WT_I32: return read_fixed(c, 4, &ignored);
    case WT_LEN: return read_len(c, &data, &len);
    case WT_SGROUP:
        if (depth >= MAX_DEPTH) {
            c->error = "groups nested too deeply";
            return -1;
        }
        for (;;) {
            uint32_t inner;
            int inner_wt;
            if (c->p >= c->end) {
                c->error = "group without its end tag";
                return -1;
            }
            if (read_tag(c, &inner, &inner_wt) < 0) return -1;
            if (inner_wt == WT_EGROUP) {
                if (inner != field) {
                    c->error = "end-group tag does not match its group";
                    return -1;
                }
                return 0;
            }
            if (skip_field(c, inner, inner_wt, depth + 1) < 0) return -1;
        }
    case WT_EGROUP: c->error = "end-group tag outside a group"; return -1;
    default: c->error = "invalid wire type"; return -1;
    }
}

/* Reads one field: its number, wire type, and its value (a varint, or the span of a length-delimited
 * one); fixed-width and group fields are skipped and read as "other". 0, or -1 with c->error set. */
typedef struct {
    uint32_t number;
    int wire_type;
    uint64_t varint;
    const uint8_t *data;
    size_t len;
} Field;

static inline int next_field(Cursor *c, Field *f) {
    if (read_tag(c, &f->number, &f->wire_type) < 0) return -1;
    if (f->wire_type == WT_VARINT) return read_varint(c, &f->varint);
    if (f->wire_type == WT_LEN) return read_len(c, &f->data, &f->len);
    return skip_field(c, f->number, f->wire_type, 0);
}

/* UTF-8 as upb validates it: no overlong forms, no surrogates, nothing above U+10FFFF. */
static inline int valid_utf8(const uint8_t *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        if (n - i >= 8) { /* eight ASCII bytes at a time */
            uint64_t word;
            memcpy(&word, s + i, sizeof word);
            if (!(word & 0x8080808080808080ULL)) {
                i += 8;
                continue;
            }
        }
        uint8_t b = s[i];
        if (b < 0x80) {
            i++;
            continue;
        }
        int extra;
        uint32_t cp;
        if (b >= 0xC2 && b <= 0xDF) { extra = 1; cp = b & 0x1F; }
        else if (b >= 0xE0 && b <= 0xEF) { extra = 2; cp = b & 0x0F; }
        else if (b >= 0xF0 && b <= 0xF4) { extra = 3; cp = b & 0x07; }
        else return 0;
        if (n - i <= (size_t)extra) return 0;
        for (int k = 1; k <= extra; k++) {
            uint8_t cont = s[i + k];
            if ((cont & 0xC0) != 0x80) return 0;
            cp = (cp << 6) | (cont & 0x3F);
        }
        if ((extra == 2 && cp < 0x800) || (extra == 3 && (cp < 0x10000 || cp > 0x10FFFF))) return 0;
        if (cp >= 0xD800 && cp <= 0xDFFF) return 0;
        i += extra + 1;
    }
    return 1;
}

static inline int check_string(Cursor *c, const uint8_t *s, size_t n) {
    if (!valid_utf8(s, n)) {
        c->error = "string field is not valid UTF-8";
        return -1;
    }
    return 0;
}

/* The wire type a known scalar member or list element uses. */
static inline int member_wire_type(int member) {
    switch (member) {
    case A_DOUBLE: case A_FIXED64: case A_SFIXED64: return WT_I64;
    case A_FLOAT: case A_FIXED32: case A_SFIXED32: return WT_I32;
    case A_STRING: case A_BYTES: return WT_LEN;
    default: return WT_VARINT;
    }
}

/* Pass an error of a nested message's cursor to the cursor of the message around it. */
static inline int within(Cursor *outer, const Cursor *inner, int rc) {
    if (rc < 0) outer->error = inner->error;
    return rc;
}

/* Check a list member's fields (`message XList { repeated X values = 1; }`): packed or not. */
static inline int check_list_fields(Cursor *c, int list_member) {
    int element = list_member - 1; /* DoubleList (4) holds doubles (3), ... */
    int element_wt = member_wire_type(element);
    while (c->p < c->end) {
        uint32_t field;
        int wt;
        if (read_tag(c, &field, &wt) < 0) return -1;
        if (field == 1 && wt == element_wt) {
            uint64_t ignored;
            const uint8_t *s;
            size_t n;
            if (wt == WT_LEN) {
                if (read_len(c, &s, &n) < 0) return -1;
                if (element == A_STRING && check_string(c, s, n) < 0) return -1;
            } else if (wt == WT_VARINT) {
                if (read_varint(c, &ignored) < 0) return -1;
            } else if (read_fixed(c, wt == WT_I64 ? 8 : 4, &ignored) < 0) {
                return -1;
            }
        } else if (field == 1 && wt == WT_LEN && element_wt != WT_LEN) { /* packed */
            const uint8_t *s;
            size_t n;
            if (read_len(c, &s, &n) < 0) return -1;
            if (element_wt == WT_VARINT) {
                Cursor packed = {s, s + n, NULL};
                uint64_t ignored;
                while (packed.p < packed.end)
                    if (within(c, &packed, read_varint(&packed, &ignored)) < 0) return -1;
            } else if (n % (element_wt == WT_I64 ? 8 : 4)) {
                c->error = "packed fixed-width list whose length is not a multiple of its width";
                return -1;
            }
        } else if (skip_field(c, field, wt, 0) < 0) {
            return -1;
        }
    }
    return 0;
}

static inline int check_list(Cursor *outer, const uint8_t *data, size_t len, int list_member) {
    Cursor c = {data, data + len, NULL};
    return within(outer, &c, check_list_fields(&c, list_member));
}

/* A run of bytes inside a buffer. */
typedef struct {
    const uint8_t *p;
    size_t n;
} Span;

/* An IOInfo as read: the last of each of its three strings (a later field replaces an earlier one, as
 * protobuf merges messages). */
typedef struct {
    Span values, shapes, types;
} IoTexts;

/* Read an IOInfo payload: three strings (UTF-8), unknown fields skipped. */
static inline int read_io(Cursor *outer, const uint8_t *data, size_t len, IoTexts *io) {
    Cursor c = {data, data + len, NULL};
    while (c.p < c.end) {
        uint32_t field;
        int wt;
        if (read_tag(&c, &field, &wt) < 0) return within(outer, &c, -1);
        if (field >= 1 && field <= 3 && wt == WT_LEN) {
            const uint8_t *s;
            size_t n;
            if (read_len(&c, &s, &n) < 0 || check_string(&c, s, n) < 0) return within(outer, &c, -1);
            Span *text = field == 1 ? &io->values : field == 2 ? &io->shapes : &io->types;
            *text = (Span){s, n};
        } else if (skip_field(&c, field, wt, 0) < 0) {
            return within(outer, &c, -1);
        }
    }
    return 0;
}

/* An AttributeProto as read: its name, the length of its doc string, the oneof member set last (0:
 * none) and, for a scalar member, its wire value (a varint, or the bits of a fixed-width value). */
typedef struct {
    Span name;
    size_t doc_len;
    int member;
    uint64_t raw;
} WireAttr;

/* Read an AttributeProto payload as upb does: strings UTF-8, lists well formed, members of another
 * wire type and unknown fields skipped. */
static inline int read_attr(Cursor *outer, const uint8_t *data, size_t len, WireAttr *a) {
    Cursor c = {data, data + len, NULL};
    memset(a, 0, sizeof *a);
    a->name.p = (const uint8_t *)"";
    while (c.p < c.end) {
        uint32_t field;
        int wt;
        const uint8_t *s;
        size_t n;
        if (read_tag(&c, &field, &wt) < 0) return within(outer, &c, -1);
        if ((field == 1 || field == 2) && wt == WT_LEN) {
            if (read_len(&c, &s, &n) < 0 || check_string(&c, s, n) < 0) return within(outer, &c, -1);
            if (field == 1) a->name = (Span){s, n};
            else a->doc_len = n;
        } else if (field >= A_FIRST_MEMBER && field <= A_LAST_MEMBER && field % 2 == 0 && wt == WT_LEN) {
            if (read_len(&c, &s, &n) < 0 || check_list(&c, s, n, (int)field) < 0) return within(outer, &c, -1);
            a->member = (int)field;
        } else if (field >= A_FIRST_MEMBER && field <= A_LAST_MEMBER && wt == member_wire_type((int)field)) {
            if (wt == WT_LEN) {
                if (read_len(&c, &s, &n) < 0) return within(outer, &c, -1);
                if (field == A_STRING && check_string(&c, s, n) < 0) return within(outer, &c, -1);
            } else if (wt == WT_VARINT) {
                if (read_varint(&c, &a->raw) < 0) return within(outer, &c, -1);
            } else if (read_fixed(&c, wt == WT_I64 ? 8 : 4, &a->raw) < 0) {
                return within(outer, &c, -1);
            }
            a->member = (int)field;
        } else if (skip_field(&c, field, wt, 0) < 0) {
            return within(outer, &c, -1);
        }
    }
    return 0;
}

static inline int64_t zigzag32(uint64_t raw) {
    uint32_t n = (uint32_t)raw;
    return (int64_t)(int32_t)((n >> 1) ^ (~(n & 1) + 1));
}

static inline int64_t zigzag64(uint64_t n) { return (int64_t)((n >> 1) ^ (~(n & 1) + 1)); }

/* The integer member `member` holds for the wire value `raw`, as an int64 (bit pattern for uint64). */
static inline int64_t member_int(int member, uint64_t raw) {
    switch (member) {
    case A_INT32: return (int64_t)(int32_t)(uint32_t)raw;
    case A_UINT32: case A_FIXED32: return (int64_t)(uint32_t)raw;
    case A_SINT32: return zigzag32(raw);
    case A_SINT64: return zigzag64(raw);
    case A_SFIXED32: return (int64_t)(int32_t)(uint32_t)raw;
    case A_BOOL: return raw != 0;
    default: return (int64_t)raw; /* int64, uint64, fixed64, sfixed64 */
    }
}

/* The payload bounds of the record whose prefix starts at p, or 0 when it is not complete before end or
 * its prefix is not a plausible varint32 (the caller's framing code explains those). */
static inline int frame(const uint8_t *p, const uint8_t *end, const uint8_t **payload, size_t *len) {
    uint64_t n = 0;
    for (int i = 0; i < MAX_PREFIX_BYTES; i++) {
        if (p + i >= end) return 0;
        uint8_t byte = p[i];
        n |= (uint64_t)(byte & 0x7F) << (7 * i);
        if (byte < 0x80) {
            if (n > INT32_MAX || n > (uint64_t)(end - (p + i + 1))) return 0;
            *payload = p + i + 1;
            *len = (size_t)n;
            return 1;
        }
    }
    return 0;
}

/* One record handed on by walk_records: 0, -1 on a wire error (c->error set), or -2 on a Python error;
 * on an error it has undone what it added for the record itself. */
typedef int (*EachRecord)(void *ctx, Cursor *c, Py_ssize_t index);

/* Where a walk over a window of records stopped. */
typedef struct {
    Py_ssize_t stop;  /* offset after the last record handed on */
    Py_ssize_t count; /* records handed on */
    PyObject *error;  /* None, or (record index, prefix offset, message) of the record that does not parse */
} Walk;

/* Hand each complete record of buf[pos:end] to `each` in order, until one is not complete (the Python
 * reader refills or explains) or does not parse. 0, or -1 with a Python error set; walk->error is a
 * new reference when it returns 0. */
static inline int walk_records(const Py_buffer *view, Py_ssize_t pos, Py_ssize_t end, EachRecord each, void *ctx,
                               Walk *walk) {
    if (pos < 0 || end > view->len || pos > end) {
        PyErr_SetString(PyExc_ValueError, "window outside the buffer");
        return -1;
    }
    const uint8_t *base = view->buf, *p = base + pos, *stop_at = base + end;
    walk->count = 0;
    walk->error = NULL;
    for (;;) {
        const uint8_t *payload;
        size_t len;
        if (!frame(p, stop_at, &payload, &len)) break;
        Cursor c = {payload, payload + len, NULL};
        int rc = each(ctx, &c, walk->count);
        if (rc == -2) return -1;
        if (rc < 0) {
            walk->error = Py_BuildValue("(nns)", walk->count, (Py_ssize_t)(p - base), c.error);
            if (!walk->error) return -1;
            break;
        }
        walk->count++;
        p = payload + len;
    }
    if (!walk->error) {
        Py_INCREF(Py_None);
        walk->error = Py_None;
    }
    walk->stop = p - base;
    return 0;
}

/* Write varint `v` at `out` (room for MAX_VARINT_BYTES); returns the bytes written. */
static inline int put_varint(uint8_t *out, uint64_t v) {
    int n = 0;
    while (v >= 0x80) {
        out[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    out[n++] = (uint8_t)v;
    return n;
}

#endif /* CHAKRA_WIRE_H */
