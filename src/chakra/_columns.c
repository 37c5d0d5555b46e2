/*
 * chakra._columns: framed Chakra ET records -> fixed-width rows, in one pass of C.
 *
 * This is the decoding half of chakra.table (the node table): it walks the protobuf wire format of
 * `Node` records (schema/protobuf/et_def.proto) and writes, per node, one NodeRow and, per attribute,
 * one AttrRow. What the rows mean -- which attribute is which, how a member is read -- is decided in
 * Python (chakra.attrs, chakra.table); this file only knows the wire format. It accepts exactly what
 * protobuf's own parser (upb) accepts, so that `chakra info` and `Trace.load` agree on every file:
 *
 *   - fields in any order, a scalar field given twice keeps the last value, repeated scalars packed or
 *     not, a oneof keeps the member set last, fields of a known number with another wire type and
 *     unknown fields are skipped (groups included, nested up to 100 deep);
 *   - varints of up to 10 bytes (bits beyond 64 dropped), tags below 2^32, field number 0, wire types
 *     6 and 7, a stray end-group tag, a length past its message and packed fixed-width data whose length
 *     is not a multiple of the width are errors;
 *   - proto3 `string` fields (node and attribute names, doc strings, string values and lists, IOInfo)
 *     must be valid UTF-8 (upb checks this too); bytes and unknown fields are not checked.
 *
 * decode(buf, pos, end, node_names, attr_names) decodes the complete records in buf[pos:end] (each a
 * varint length prefix and a payload). It stops before the first record that is not complete in the
 * window or whose prefix is not a plausible varint32 (the Python reader then explains or refills), or
 * at the first record whose payload does not parse. It returns
 *
 *   (stop, count, error, nodes, ctrl_deps, data_deps, attrs)
 *
 * stop: offset after the last decoded record; count: records decoded; error: None, or
 * (record index, prefix offset, message) of the record that does not parse (the records before it are
 * decoded); nodes: `count` NodeRow structs; ctrl_deps / data_deps: the dependency ids (uint64) of the
 * nodes, in node order; attrs: the AttrRow structs of every attribute, in node order and, within a node,
 * in record order, each marked when an earlier attribute of its node has the same name. node_names and attr_names are dicts bytes -> id, extended with the names first seen
 * here (ids in order of first appearance: list(d) is the name of each id).
 *
 * The struct layouts are mirrored by numpy dtypes in chakra/table.py (NODE_ROW, ATTR_ROW): change both.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* One decoded node. Unsigned protobuf fields are stored as their 64-bit pattern. */
typedef struct {
    int64_t rec_off;   /* offset of the payload in buf */
    uint64_t id;
    uint64_t start_us; /* start_time_micros */
    uint64_t dur_us;   /* duration_micros */
    int32_t rec_len;   /* payload length */
    int32_t type;      /* NodeType, an open enum: any int32 */
    int32_t name_id;   /* into node_names */
    int32_t n_ctrl;
    int32_t n_data;
    int32_t n_attr;
} NodeRow;

/* One decoded attribute. `value` holds an integer member's value (uint64/fixed64 as their bit pattern,
 * bool as 0/1), a float member's value as the bits of a double, and for a length-delimited member
 * (strings, bytes, lists) the offset in buf of the AttributeProto payload, whose length is `len`: those
 * are decoded on demand by protobuf itself. */
typedef struct {
    int64_t value;
    int32_t node;    /* index of the node in this call's rows */
    int32_t name_id; /* into attr_names */
    int32_t len;
    int16_t member;  /* field number of the oneof member set last, 0 when none */
    int16_t repeat;  /* 1 when an earlier attribute of the node has the same name (consumers read the first) */
} AttrRow;

/* protobuf wire types */
enum { WT_VARINT = 0, WT_I64 = 1, WT_LEN = 2, WT_SGROUP = 3, WT_EGROUP = 4, WT_I32 = 5 };

/* upb's default nesting limit for groups and messages */
#define MAX_DEPTH 100
/* a record length prefix is a varint32 of at most 5 bytes (chakra.io reports longer ones) */
#define MAX_PREFIX_BYTES 5
#define MAX_VARINT_BYTES 10
/* attribute name cache: the i-th attribute of a node usually has the name of the i-th attribute of the
 * node before, so a short name is compared to that before the dict is asked */
#define NAME_CACHE_SLOTS 32
#define NAME_CACHE_BYTES 48

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

static int buf_reserve(Buf *b, size_t more) {
    if (b->len + more <= b->cap) return 0;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + more) cap *= 2;
    char *data = PyMem_Realloc(b->data, cap);
    if (!data) return -1;
    b->data = data;
    b->cap = cap;
    return 0;
}

static void *buf_push(Buf *b, size_t size) {
    if (buf_reserve(b, size) < 0) return NULL;
    void *at = b->data + b->len;
    b->len += size;
    return at;
}

static PyObject *buf_to_bytes(Buf *b) { return PyBytes_FromStringAndSize(b->data ? b->data : "", (Py_ssize_t)b->len); }

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

static int read_len(Cursor *c, const uint8_t **data, size_t *len) {
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

static int read_fixed(Cursor *c, int width, uint64_t *out) {
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
static int skip_field(Cursor *c, uint32_t field, int wire_type, int depth) {
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

/* UTF-8 as upb validates it: no overlong forms, no surrogates, nothing above U+10FFFF. */
static int valid_utf8(const uint8_t *s, size_t n) {
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

static int check_string(Cursor *c, const uint8_t *s, size_t n) {
    if (!valid_utf8(s, n)) {
        c->error = "string field is not valid UTF-8";
        return -1;
    }
    return 0;
}

/* The wire type a known scalar member or list element uses. */
static int member_wire_type(int member) {
    switch (member) {
    case A_DOUBLE: case A_FIXED64: case A_SFIXED64: return WT_I64;
    case A_FLOAT: case A_FIXED32: case A_SFIXED32: return WT_I32;
    case A_STRING: case A_BYTES: return WT_LEN;
    default: return WT_VARINT;
    }
}

/* Pass an error of a nested message's cursor to the cursor of the message around it. */
static int within(Cursor *outer, const Cursor *inner, int rc) {
    if (rc < 0) outer->error = inner->error;
    return rc;
}

/* Check a list member's fields (`message XList { repeated X values = 1; }`): packed or not. */
static int check_list_fields(Cursor *c, int list_member) {
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

static int check_list(Cursor *outer, const uint8_t *data, size_t len, int list_member) {
    Cursor c = {data, data + len, NULL};
    return within(outer, &c, check_list_fields(&c, list_member));
}

/* Check an IOInfo payload: three strings, unknown fields skipped. */
static int check_io(Cursor *outer, const uint8_t *data, size_t len) {
    Cursor c = {data, data + len, NULL};
    while (c.p < c.end) {
        uint32_t field;
        int wt;
        if (read_tag(&c, &field, &wt) < 0) return within(outer, &c, -1);
        if (field >= 1 && field <= 3 && wt == WT_LEN) {
            const uint8_t *s;
            size_t n;
            if (read_len(&c, &s, &n) < 0 || check_string(&c, s, n) < 0) return within(outer, &c, -1);
        } else if (skip_field(&c, field, wt, 0) < 0) {
            return within(outer, &c, -1);
        }
    }
    return 0;
}

static int64_t zigzag32(uint64_t raw) {
    uint32_t n = (uint32_t)raw;
    return (int64_t)(int32_t)((n >> 1) ^ (~(n & 1) + 1));
}

static int64_t zigzag64(uint64_t n) { return (int64_t)((n >> 1) ^ (~(n & 1) + 1)); }

/* The integer member `member` holds for the wire value `raw`, as an int64 (bit pattern for uint64). */
static int64_t member_int(int member, uint64_t raw) {
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

typedef struct {
    PyObject *node_names;
    PyObject *attr_names;
    const uint8_t *base; /* buf[0] */
    Buf nodes, ctrl, data, attrs;
    /* the attribute name cache */
    size_t cached_len[NAME_CACHE_SLOTS];
    uint8_t cached[NAME_CACHE_SLOTS][NAME_CACHE_BYTES];
    int32_t cached_id[NAME_CACHE_SLOTS];
} State;

/* The id of `name` in `names` (added when new); -1 with a Python error set on failure. */
static int32_t intern(PyObject *names, const uint8_t *name, size_t len) {
    PyObject *key = PyBytes_FromStringAndSize((const char *)name, (Py_ssize_t)len);
    if (!key) return -1;
    PyObject *found = PyDict_GetItemWithError(names, key);
    int32_t id;
    if (found) {
        id = (int32_t)PyLong_AsLong(found);
    } else if (PyErr_Occurred()) {
        id = -1;
    } else {
        Py_ssize_t next = PyDict_Size(names);
        PyObject *value = PyLong_FromSsize_t(next);
        id = (value && PyDict_SetItem(names, key, value) == 0) ? (int32_t)next : -1;
        Py_XDECREF(value);
    }
    Py_DECREF(key);
    return id;
}

static int32_t attr_name_id(State *st, int slot, const uint8_t *name, size_t len) {
    int cacheable = slot < NAME_CACHE_SLOTS && len <= NAME_CACHE_BYTES;
    if (cacheable && st->cached_id[slot] >= 0 && st->cached_len[slot] == len && memcmp(st->cached[slot], name, len) == 0)
        return st->cached_id[slot];
    int32_t id = intern(st->attr_names, name, len);
    if (cacheable && id >= 0) {
        memcpy(st->cached[slot], name, len);
        st->cached_len[slot] = len;
        st->cached_id[slot] = id;
    }
    return id;
}

/* Decode one AttributeProto payload into an AttrRow. Returns -1 on a wire error (c->error set) and -2
 * on a Python error. */
static int decode_attr(State *st, Cursor *outer, const uint8_t *data, size_t len, int32_t node, int slot) {
    Cursor c = {data, data + len, NULL};
    const uint8_t *name = (const uint8_t *)"";
    size_t name_len = 0;
    int member = 0;
    int64_t value = 0;
    while (c.p < c.end) {
        uint32_t field;
        int wt;
        if (read_tag(&c, &field, &wt) < 0) goto fail;
        if ((field == 1 || field == 2) && wt == WT_LEN) {
            const uint8_t *s;
            size_t n;
            if (read_len(&c, &s, &n) < 0 || check_string(&c, s, n) < 0) goto fail;
            if (field == 1) {
                name = s;
                name_len = n;
            }
        } else if (field >= A_FIRST_MEMBER && field <= A_LAST_MEMBER && field % 2 == 0 && wt == WT_LEN) {
            const uint8_t *s;
            size_t n;
            if (read_len(&c, &s, &n) < 0 || check_list(&c, s, n, (int)field) < 0) goto fail;
            member = (int)field;
        } else if (field >= A_FIRST_MEMBER && field <= A_LAST_MEMBER && field % 2 == 1 &&
                   wt == member_wire_type((int)field)) {
            uint64_t raw;
            if (wt == WT_LEN) {
                const uint8_t *s;
                size_t n;
                if (read_len(&c, &s, &n) < 0) goto fail;
                if (field == A_STRING && check_string(&c, s, n) < 0) goto fail;
            } else if (wt == WT_VARINT) {
                if (read_varint(&c, &raw) < 0) goto fail;
                value = member_int((int)field, raw);
            } else if (field == A_FLOAT) {
                if (read_fixed(&c, 4, &raw) < 0) goto fail;
                uint32_t bits = (uint32_t)raw;
                float f;
                memcpy(&f, &bits, sizeof f);
                double d = (double)f;
                memcpy(&value, &d, sizeof value);
            } else {
                if (read_fixed(&c, wt == WT_I64 ? 8 : 4, &raw) < 0) goto fail;
                value = field == A_DOUBLE ? (int64_t)raw : member_int((int)field, raw);
            }
            member = (int)field;
        } else if (skip_field(&c, field, wt, 0) < 0) {
            goto fail;
        }
    }
    AttrRow *row = buf_push(&st->attrs, sizeof(AttrRow));
    if (!row) {
        PyErr_NoMemory();
        return -2;
    }
    int32_t name_id = attr_name_id(st, slot, name, name_len);
    if (name_id < 0) return -2;
    row->node = node;
    row->name_id = name_id;
    row->member = (int16_t)member;
    row->repeat = 0;
    if (member % 2 == 0 || member == A_STRING || member == A_BYTES) { /* decoded on demand */
        row->value = (int64_t)(data - st->base);
        row->len = (int32_t)len;
    } else {
        row->value = value;
        row->len = 0;
    }
    return 0;
fail:
    outer->error = c.error;
    return -1;
}

/* Append a repeated uint64 field's values (one varint, or a packed run) to `out`; counts into *count. */
static int read_deps(Cursor *c, int wt, Buf *out, int32_t *count) {
    uint64_t id;
    if (wt == WT_VARINT) {
        if (read_varint(c, &id) < 0) return -1;
        uint64_t *slot = buf_push(out, sizeof id);
        if (!slot) return -2;
        *slot = id;
        (*count)++;
        return 0;
    }
    const uint8_t *s;
    size_t n;
    if (read_len(c, &s, &n) < 0) return -1;
    Cursor packed = {s, s + n, NULL};
    while (packed.p < packed.end) {
        if (read_varint(&packed, &id) < 0) {
            c->error = packed.error;
            return -1;
        }
        uint64_t *slot = buf_push(out, sizeof id);
        if (!slot) return -2;
        *slot = id;
        (*count)++;
    }
    return 0;
}

/* Decode one Node payload. Returns 0, -1 on a wire error (c->error set) or -2 on a Python error. The
 * rows it appended are rolled back by the caller on failure. */
static int decode_node(State *st, Cursor *c, int64_t rec_off, int32_t index) {
    NodeRow row = {0};
    row.rec_off = rec_off;
    row.rec_len = (int32_t)(c->end - c->p);
    const uint8_t *name = (const uint8_t *)"";
    size_t name_len = 0;
    while (c->p < c->end) {
        uint32_t field;
        int wt;
        uint64_t v;
        int rc;
        if (read_tag(c, &field, &wt) < 0) return -1;
        if (wt == WT_VARINT && (field == 1 || field == 3 || field == 6 || field == 7)) {
            if (read_varint(c, &v) < 0) return -1;
            if (field == 1) row.id = v;
            else if (field == 3) row.type = (int32_t)(uint32_t)v;
            else if (field == 6) row.start_us = v;
            else row.dur_us = v;
        } else if ((field == 4 || field == 5) && (wt == WT_VARINT || wt == WT_LEN)) {
            rc = field == 4 ? read_deps(c, wt, &st->ctrl, &row.n_ctrl) : read_deps(c, wt, &st->data, &row.n_data);
            if (rc == -2) {
                PyErr_NoMemory();
                return -2;
            }
            if (rc < 0) return -1;
        } else if (field == 2 && wt == WT_LEN) {
            if (read_len(c, &name, &name_len) < 0 || check_string(c, name, name_len) < 0) return -1;
        } else if ((field == 8 || field == 9) && wt == WT_LEN) {
            const uint8_t *s;
            size_t n;
            if (read_len(c, &s, &n) < 0 || check_io(c, s, n) < 0) return -1;
        } else if (field == 10 && wt == WT_LEN) {
            const uint8_t *s;
            size_t n;
            if (read_len(c, &s, &n) < 0) return -1;
            rc = decode_attr(st, c, s, n, index, row.n_attr);
            if (rc < 0) return rc;
            row.n_attr++;
        } else if (skip_field(c, field, wt, 0) < 0) {
            return -1;
        }
    }
    if (row.n_attr > 1) { /* mark repeated names: a bit per small name id, a scan for the others */
        AttrRow *first = (AttrRow *)(st->attrs.data + st->attrs.len) - row.n_attr;
        uint64_t seen = 0;
        for (int32_t i = 0; i < row.n_attr; i++) {
            int32_t id = first[i].name_id;
            if (id < 64) {
                first[i].repeat = (seen >> id) & 1;
                seen |= (uint64_t)1 << id;
            } else {
                for (int32_t j = 0; j < i && !first[i].repeat; j++) first[i].repeat = first[j].name_id == id;
            }
        }
    }
    row.name_id = intern(st->node_names, name, name_len);
    if (row.name_id < 0) return -2;
    NodeRow *out = buf_push(&st->nodes, sizeof row);
    if (!out) {
        PyErr_NoMemory();
        return -2;
    }
    *out = row;
    return 0;
}

/* The payload bounds of the record whose prefix starts at p, or 0 when it is not complete before end or
 * its prefix is not a plausible varint32 (the caller's framing code explains those). */
static int frame(const uint8_t *p, const uint8_t *end, const uint8_t **payload, size_t *len) {
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

static PyObject *decode(PyObject *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t pos, end;
    PyObject *node_names, *attr_names;
    if (!PyArg_ParseTuple(args, "y*nnO!O!", &view, &pos, &end, &PyDict_Type, &node_names, &PyDict_Type, &attr_names))
        return NULL;
    PyObject *result = NULL;
    if (pos < 0 || end > view.len || pos > end) {
        PyErr_SetString(PyExc_ValueError, "window outside the buffer");
        PyBuffer_Release(&view);
        return NULL;
    }
    State st;
    memset(&st, 0, sizeof st);
    st.node_names = node_names;
    st.attr_names = attr_names;
    st.base = view.buf;
    for (int i = 0; i < NAME_CACHE_SLOTS; i++) st.cached_id[i] = -1;
    const uint8_t *p = (const uint8_t *)view.buf + pos;
    const uint8_t *stop_at = (const uint8_t *)view.buf + end;
    Py_ssize_t count = 0;
    PyObject *error = Py_None;
    Py_INCREF(error);
    for (;;) {
        const uint8_t *payload;
        size_t len;
        if (!frame(p, stop_at, &payload, &len)) break;
        size_t nodes_len = st.nodes.len, ctrl_len = st.ctrl.len, data_len = st.data.len, attrs_len = st.attrs.len;
        Cursor c = {payload, payload + len, NULL};
        int rc = decode_node(&st, &c, (int64_t)(payload - st.base), (int32_t)count);
        if (rc == -2) goto done;
        if (rc < 0) {
            st.nodes.len = nodes_len;
            st.ctrl.len = ctrl_len;
            st.data.len = data_len;
            st.attrs.len = attrs_len;
            Py_DECREF(error);
            error = Py_BuildValue("(nns)", count, (Py_ssize_t)(p - (const uint8_t *)view.buf), c.error);
            if (!error) goto done;
            break;
        }
        count++;
        p = payload + len;
    }
    PyObject *nodes = buf_to_bytes(&st.nodes), *ctrl = buf_to_bytes(&st.ctrl), *data = buf_to_bytes(&st.data),
             *attrs = buf_to_bytes(&st.attrs);
    if (nodes && ctrl && data && attrs)
        result = Py_BuildValue("(nnOOOOO)", (Py_ssize_t)(p - (const uint8_t *)view.buf), count, error, nodes, ctrl,
                               data, attrs);
    Py_XDECREF(nodes);
    Py_XDECREF(ctrl);
    Py_XDECREF(data);
    Py_XDECREF(attrs);
done:
    Py_XDECREF(error);
    PyMem_Free(st.nodes.data);
    PyMem_Free(st.ctrl.data);
    PyMem_Free(st.data.data);
    PyMem_Free(st.attrs.data);
    PyBuffer_Release(&view);
    return result;
}

static PyObject *row_sizes(PyObject *self, PyObject *unused) {
    return Py_BuildValue("(nn)", (Py_ssize_t)sizeof(NodeRow), (Py_ssize_t)sizeof(AttrRow));
}

static PyMethodDef methods[] = {
    {"decode", decode, METH_VARARGS, "decode(buf, pos, end, node_names, attr_names) -> rows (see the module source)"},
    {"row_sizes", row_sizes, METH_NOARGS, "(sizeof NodeRow, sizeof AttrRow), to check the numpy dtypes"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_columns", "Framed Chakra ET records -> rows.", -1, methods};

PyMODINIT_FUNC PyInit__columns(void) { return PyModule_Create(&module); }
