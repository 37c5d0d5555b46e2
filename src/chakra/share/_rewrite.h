/*
 * The rewriter's parts, shared by _rewrite.c (nodes, the Python type) and _rewrite_attrs.c (attributes):
 * the rule kinds and transforms the plan gives, the counters, the Rewriter's state, and the encoders.
 */
#ifndef CHAKRA_SHARE_REWRITE_H
#define CHAKRA_SHARE_REWRITE_H

#include "_native.h"

enum { RULE_DROP = 0, RULE_INT = 1, RULE_CACHE = 2, RULE_CALL = 3 };
enum { T_NONE = 0, T_POW2 = 1, T_SCALE = 2, T_BOOL = 3 };
/* The events the rewriter counts itself; the plan gives their counter ids in this order. */
enum { C_IO_VALUES, C_IO_TYPES, C_DURATION, C_REPEATED, C_DOC, N_FIXED };

/* Node field tags: (field number << 3) | wire type. */
enum { T_ID = 0x08, T_NAME = 0x12, T_TYPE = 0x18, T_CTRL = 0x22, T_DATA = 0x2a, T_START = 0x30, T_DUR = 0x38,
       T_INPUTS = 0x42, T_OUTPUTS = 0x4a, T_ATTR = 0x52 };
enum { F_NAME_TAG = 0x0a, IO_VALUES_TAG = 0x0a, IO_SHAPES_TAG = 0x12 };
#define METADATA_NODE 1
/* rule cache: the i-th attribute of a node usually has the name and member of the i-th attribute of
 * the node before, so its key is compared to that before the rules dict is asked */
#define RULE_SLOTS 32
#define RULE_KEY_BYTES 48
/* memo slots per cache (a power of two) and the longest bytes a slot holds: names, shapes texts and
 * attributes of converted traces are mostly shorter */
#define MEMO_SLOTS 4096
#define MEMO_BYTES 64
/* 2^-53: a 53-bit integer times this is a double in [0, 1) */
#define UNIT_53 (1.0 / 9007199254740992.0)
/* splitmix64's increment and mixers */
#define SPLITMIX_STEP 0x9E3779B97F4A7C15ULL
#define SPLITMIX_MIX1 0xBF58476D1CE4E5B9ULL
#define SPLITMIX_MIX2 0x94D049BB133111EBULL
/* doubles at or beyond these do not convert to int64 / uint64 */
#define INT64_LIMIT 9223372036854775808.0
#define UINT64_LIMIT 18446744073709551616.0

typedef struct {
    int kind;
    int32_t name_id;
    int out_member;
    int transform;
    int32_t counter;
} Rule;

/* A memo in front of a cache dict: in each of MEMO_SLOTS slots (by hash) the last bytes seen there
 * and their value, so that a repeated name, shapes text or attribute is answered without building
 * a key object and asking the dict. */
typedef struct {
    uint64_t hash;
    uint32_t len;
    PyObject *value;
    uint8_t bytes[MEMO_BYTES];
} MemoSlot;

/* One attribute as read, and its payload. */
typedef struct {
    WireAttr wire;
    Span payload;
} Attr;

typedef struct {
    PyObject_HEAD
    PyObject *plan;
    Fingerprints *inputs;
    PyObject *names;  /* name key -> token: every distinct name */
    PyObject *shapes; /* shapes text -> entry */
    PyObject *attrs;  /* attribute payload -> entry, CACHE rules */
    PyObject *rules;  /* name + member byte -> rule tuple */
    Py_ssize_t cache_limit;
    uint64_t shift_us;
    double noise;
    uint64_t rng;
    int keep_kinds;
    int32_t fixed[N_FIXED];
    int64_t *counts;
    size_t counts_len;
    uint32_t *written; /* per attribute name id: the node (generation) that wrote one */
    size_t written_len;
    uint32_t generation;
    size_t slot_len[RULE_SLOTS];
    uint8_t slot_key[RULE_SLOTS][RULE_KEY_BYTES];
    Rule slot_rule[RULE_SLOTS];
    int slot_set[RULE_SLOTS];
    MemoSlot *memos[3]; /* before names, shapes, attrs */
    Buf payload, ctrl, data, attr_spans, key;
} Rewriter;

enum { MEMO_NAMES, MEMO_SHAPES, MEMO_ATTRS };

/* -- small helpers -------------------------------------------------------------------------------- */

static inline int varint_size(uint64_t v) {
    int n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

static inline int put_raw(Buf *b, const void *s, size_t n) {
    if (buf_reserve(b, n) < 0) return -1;
    if (n) memcpy(b->data + b->len, s, n);
    b->len += n;
    return 0;
}

static inline int put_u64(Buf *b, uint64_t v) {
    if (buf_reserve(b, MAX_VARINT_BYTES) < 0) return -1;
    b->len += put_varint((uint8_t *)b->data + b->len, v);
    return 0;
}

static inline int put_varint_field(Buf *b, uint64_t tag, uint64_t v) {
    return put_u64(b, tag) < 0 ? -1 : put_u64(b, v);
}

static inline int put_len_field(Buf *b, uint64_t tag, const void *s, size_t n) {
    if (put_u64(b, tag) < 0 || put_u64(b, n) < 0) return -1;
    return put_raw(b, s, n);
}

static inline int put_packed(Buf *b, uint64_t tag, const Buf *values) {
    const uint64_t *v = (const uint64_t *)values->data;
    size_t count = values->len / sizeof(uint64_t), bytes = 0;
    if (!count) return 0;
    for (size_t i = 0; i < count; i++) bytes += varint_size(v[i]);
    if (put_u64(b, tag) < 0 || put_u64(b, bytes) < 0) return -1;
    for (size_t i = 0; i < count; i++)
        if (put_u64(b, v[i]) < 0) return -1;
    return 0;
}

/* Defined in _rewrite.c. */
/* Count counter `id` once (a negative id counts nothing). 0, or -1 with MemoryError set. */
int count(Rewriter *rw, int64_t id);
/* An entry of the plan: (bytes or None, tuple of counter ids). Counts the ids; *out is borrowed. */
int apply_entry(Rewriter *rw, PyObject *entry, PyObject **out);
/* The plan's method called with Py_BuildValue's format and arguments. New reference. */
PyObject *call_plan(Rewriter *rw, const char *method, const char *format, ...);
/* The value for the bytes [s, s+n), from a memo, a cache, or the plan (see _rewrite.c). New reference. */
PyObject *cached_entry(Rewriter *rw, int which, PyObject *cache, const uint8_t *s, size_t n, const char *method,
                       const Attr *collect);

/* Defined in _rewrite_attrs.c. */
/* Add the texts of an attribute (doc string, string and bytes members, their lists) to the inputs. */
int collect_attr(Rewriter *rw, const Attr *a);
/* Rewrite one AttributeProto payload by its rule into `out`: 0, -1 on a wire error (c->error set), -2 on
 * a Python error. */
int rewrite_attr(Rewriter *rw, Cursor *c, const uint8_t *data, size_t len, int slot, double factor, Buf *out);

#endif /* CHAKRA_SHARE_REWRITE_H */
