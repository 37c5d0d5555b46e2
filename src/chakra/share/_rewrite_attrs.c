/*
 * The rewriter's attributes (see _rewrite.c for the rules): each attribute read, its rule found (the
 * plan's, cached per name and member), and written by it: dropped, an integer rewritten here, or the
 * plan's bytes.
 */
#include <math.h>

#include "_rewrite.h"

/* -- reading -------------------------------------------------------------------------------------- */

/* Add the texts of an attribute (doc string, string and bytes members, their lists) to the inputs. */
int collect_attr(Rewriter *rw, const Attr *a) {
    Cursor c = {a->payload.p, a->payload.p + a->payload.n, NULL};
    while (c.p < c.end) {
        uint32_t field;
        int wt;
        const uint8_t *s;
        size_t n;
        if (read_tag(&c, &field, &wt) < 0) return 0; /* read_attr checked the bytes: not reached */
        if (wt != WT_LEN) {
            skip_field(&c, field, wt, 0);
            continue;
        }
        if (read_len(&c, &s, &n) < 0) return 0;
        if (field == 2 || field == A_STRING || field == A_BYTES) {
            if (fp_add_soon(rw->inputs, s, n) < 0) return -1;
        } else if (field == A_STRING_LIST || field == A_BYTES_LIST) {
            Cursor list = {s, s + n, NULL};
            while (list.p < list.end) {
                const uint8_t *item;
                size_t item_len;
                if (read_tag(&list, &field, &wt) < 0) break;
                if (wt != WT_LEN) {
                    skip_field(&list, field, wt, 0);
                    continue;
                }
                if (read_len(&list, &item, &item_len) < 0) break;
                if (field == 1 && fp_add_soon(rw->inputs, item, item_len) < 0) return -1;
            }
        }
    }
    return 0;
}

/* -- attributes ----------------------------------------------------------------------------------- */

static int parse_rule(PyObject *tuple, Rule *r) {
    long long v[5];
    if (!PyTuple_Check(tuple) || PyTuple_GET_SIZE(tuple) != 5) {
        PyErr_SetString(PyExc_TypeError, "a rule is (kind, name id, member, transform, counter)");
        return -1;
    }
    for (int i = 0; i < 5; i++) {
        v[i] = PyLong_AsLongLong(PyTuple_GET_ITEM(tuple, i));
        if (v[i] == -1 && PyErr_Occurred()) return -1;
    }
    if (v[0] < RULE_DROP || v[0] > RULE_CALL || v[1] < 0 || v[1] > INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "a rule's kind or name id is out of range");
        return -1;
    }
    *r = (Rule){(int)v[0], (int32_t)v[1], (int)v[2], (int)v[3], (int32_t)v[4]};
    return 0;
}

static int rule_for(Rewriter *rw, int slot, const Attr *a, Rule *r) {
    const Span *name = &a->wire.name;
    uint8_t member = (uint8_t)a->wire.member;
    size_t key_len = name->n + 1;
    int cacheable = slot < RULE_SLOTS && key_len <= RULE_KEY_BYTES;
    if (cacheable && rw->slot_set[slot] && rw->slot_len[slot] == key_len && rw->slot_key[slot][name->n] == member &&
        memcmp(rw->slot_key[slot], name->p, name->n) == 0) {
        *r = rw->slot_rule[slot];
        return 0;
    }
    rw->key.len = 0;
    if (put_raw(&rw->key, name->p, name->n) < 0 || put_raw(&rw->key, &member, 1) < 0) {
        PyErr_NoMemory();
        return -1;
    }
    PyObject *key = PyBytes_FromStringAndSize(rw->key.data, (Py_ssize_t)key_len);
    if (!key) return -1;
    PyObject *tuple = PyDict_GetItemWithError(rw->rules, key);
    if (tuple) {
        Py_INCREF(tuple);
    } else if (!PyErr_Occurred()) {
        tuple = call_plan(rw, "rule", "(y#i)", (const char *)name->p, (Py_ssize_t)name->n, a->wire.member);
        if (tuple && PyDict_SetItem(rw->rules, key, tuple) < 0) Py_CLEAR(tuple);
    }
    Py_DECREF(key);
    if (!tuple) return -1;
    int rc = parse_rule(tuple, r);
    Py_DECREF(tuple);
    if (rc < 0) return -1;
    if ((size_t)r->name_id >= rw->written_len) {
        size_t len = (size_t)r->name_id + 64;
        uint32_t *written = PyMem_Realloc(rw->written, len * sizeof(uint32_t));
        if (!written) {
            PyErr_NoMemory();
            return -1;
        }
        memset(written + rw->written_len, 0, (len - rw->written_len) * sizeof(uint32_t));
        rw->written = written;
        rw->written_len = len;
    }
    if (cacheable) {
        memcpy(rw->slot_key[slot], rw->key.data, key_len);
        rw->slot_len[slot] = key_len;
        rw->slot_rule[slot] = *r;
        rw->slot_set[slot] = 1;
    }
    return 0;
}

/* The smallest power of two at or above v (v in [1, 2^62]). */
static int64_t pow2_ceil(int64_t v) { return v <= 1 ? 1 : (int64_t)1 << (64 - __builtin_clzll((uint64_t)(v - 1))); }

/* An INT rule: 1 when written to `out`, 0 when the value is for the plan (out of what this writes). */
static int int_attr(Rewriter *rw, const Attr *a, const Rule *r, double factor, Buf *out) {
    int member = a->wire.member;
    if (!(member >= A_INT32 && member <= A_BOOL && member % 2 == 1)) return 0; /* not an integer or a flag */
    int64_t v = member_int(member, a->wire.raw);
    if ((member == A_UINT64 || member == A_FIXED64) && v < 0) return 0; /* beyond int64: unreadable */
    int coarsened = 0;
    switch (r->transform) {
    case T_BOOL: v = v != 0; break;
    case T_POW2:
        if (v > ((int64_t)1 << 62)) return 0;
        if (v > 0 && pow2_ceil(v) != v) {
            v = pow2_ceil(v);
            coarsened = 1;
        }
        break;
    case T_SCALE: {
        double d = nearbyint((double)v * factor);
        if (!(d > -INT64_LIMIT && d < INT64_LIMIT)) return 0;
        v = (int64_t)d;
        break;
    }
    default: break;
    }
    switch (r->out_member) {
    case A_INT64: break;
    case A_INT32: if (v < INT32_MIN || v > INT32_MAX) return 0; break;
    case A_UINT64: if (v < 0) return 0; break;
    case A_UINT32: if (v < 0 || v > (int64_t)UINT32_MAX) return 0; break;
    case A_BOOL: v = v != 0; break;
    default: return 0;
    }
    uint64_t tag = (uint64_t)r->out_member << 3;
    const Span *name = &a->wire.name;
    size_t len = 1 + varint_size(name->n) + name->n + varint_size(tag) + varint_size((uint64_t)v);
    if (put_u64(out, T_ATTR) < 0 || put_u64(out, len) < 0 || put_len_field(out, F_NAME_TAG, name->p, name->n) < 0 ||
        put_varint_field(out, tag, (uint64_t)v) < 0) {
        PyErr_NoMemory();
        return -1;
    }
    if (coarsened && count(rw, r->counter) < 0) return -1;
    return 1;
}

static int write_entry_attr(Rewriter *rw, PyObject *entry, const Rule *r, Buf *out) {
    PyObject *payload;
    if (apply_entry(rw, entry, &payload) < 0) return -1;
    if (!payload) return 0;
    if (put_len_field(out, T_ATTR, PyBytes_AS_STRING(payload), (size_t)PyBytes_GET_SIZE(payload)) < 0) {
        PyErr_NoMemory();
        return -1;
    }
    rw->written[r->name_id] = rw->generation;
    return 0;
}

int rewrite_attr(Rewriter *rw, Cursor *c, const uint8_t *data, size_t len, int slot, double factor, Buf *out) {
    Attr a = {.payload = {data, len}};
    Rule r;
    if (read_attr(c, data, len, &a.wire) < 0) return -1;
    if (rule_for(rw, slot, &a, &r) < 0) return -2;
    if (rw->written[r.name_id] == rw->generation) {
        if (collect_attr(rw, &a) < 0 || count(rw, rw->fixed[C_REPEATED]) < 0) return -2;
        return 0;
    }
    if (a.wire.doc_len && count(rw, rw->fixed[C_DOC]) < 0) return -2;
    PyObject *entry = NULL;
    switch (r.kind) {
    case RULE_DROP:
        if (collect_attr(rw, &a) < 0 || count(rw, r.counter) < 0) return -2;
        return 0;
    case RULE_INT: {
        if (a.wire.doc_len && collect_attr(rw, &a) < 0) return -2;
        int done = int_attr(rw, &a, &r, factor, out);
        if (done < 0) return -2;
        if (done) {
            rw->written[r.name_id] = rw->generation;
            return 0;
        }
        entry = call_plan(rw, "attr", "(y#d)", (const char *)data, (Py_ssize_t)len, factor);
        break;
    }
    case RULE_CACHE: entry = cached_entry(rw, MEMO_ATTRS, rw->attrs, data, len, "attr", &a); break;
    default:
        if (collect_attr(rw, &a) < 0) return -2;
        entry = call_plan(rw, "attr", "(y#d)", (const char *)data, (Py_ssize_t)len, factor);
    }
    if (!entry) return -2;
    int rc = write_entry_attr(rw, entry, &r, out);
    Py_DECREF(entry);
    return rc < 0 ? -2 : 0;
}
