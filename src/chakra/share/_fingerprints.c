/*
 * Fingerprints: the strings of an anonymizer's input, kept as 64-bit hashes, and the search for all of
 * them in the bytes of its output at once (the leakage check of chakra.share.leakage).
 *
 * A string is kept as (hash of its bytes, length), not as its bytes: two million distinct IO strings
 * of a converted trace take 16 bytes each instead of an automaton state per character. It is found
 * by its start: every string is indexed by its first eight bytes (all of it when shorter), and a
 * search looks, at every position of the buffer, for the starts of length 4 to 8 that begin there
 * (a bitmap of first-four-byte hashes passes few positions on); for each string length under a start
 * that matches, the hash of that many bytes is looked up. A string that is in the buffer is always
 * found; a hash collision can only report a string that is not there (a chance of about 2^-64 per
 * lookup), which the caller confirms by reading the field that holds it.
 *
 * search(buf, mark) -> [(offset, length)]: every string found in buf, once per mark.
 * search_records(buf, pos, eof, generated, mark) -> (stop, records, hits): buf[pos:] holds framed
 *   records (a GlobalMetadata first when the search starts at a file's beginning: record index 0). A
 *   string inside one text field whose whole bytes are a generated string (`generated`, an exact
 *   Fingerprints) is explained and not reported; any other is reported once per mark as
 *   (offset, length, record index, payload offset, payload length, in_text_field). Records are
 *   searched while the longest string fits after them, or to the end when eof.
 */
#include "_native.h"

/* Strings of this many bytes or fewer are not searched for (issue 19: "longer than 3"). */
#define MIN_BYTES 4
/* A string is indexed by this many of its first bytes. */
#define KEY_BYTES 8
/* The prefilter: a bit per hash of four bytes, 2^23 bits (1 MiB, within a cache level): with a few
 * hundred thousand distinct starts it passes a few percent of the positions that start no string. */
#define PREFILTER_LOG2 23
#define FIRST_CAPACITY 1024
/* golden-ratio and murmur3 constants: odd multipliers that spread bits */
#define GOLDEN64 0x9E3779B97F4A7C15ULL
#define GOLDEN32 0x9E3779B1U
#define MIX1 0xff51afd7ed558ccdULL
#define MIX2 0xc4ceb9fe1a85ec53ULL

static inline uint64_t fmix64(uint64_t k) {
    k ^= k >> 33;
    k *= MIX1;
    k ^= k >> 33;
    k *= MIX2;
    k ^= k >> 33;
    return k;
}

/* A multiply and a rotation per 8 bytes (each a bijection of the state, so strings that differ in one
 * word never collide), murmur3's finalizer at the end. */
uint64_t fp_hash(const uint8_t *s, size_t n) {
    uint64_t h = GOLDEN64 ^ ((uint64_t)n * MIX2);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, s + i, 8);
        h = (h ^ w) * MIX1;
        h = (h << 31) | (h >> 33);
    }
    if (i < n) {
        uint64_t w = 0;
        memcpy(&w, s + i, n - i);
        h = (h ^ w) * MIX1;
    }
    return fmix64(h);
}

static inline uint64_t first_bytes(const uint8_t *s, size_t n) {
    uint64_t w = 0;
    memcpy(&w, s, n);
    return w;
}

static inline uint32_t prefilter_bit(const uint8_t *s) {
    uint32_t w;
    memcpy(&w, s, 4);
    return (w * GOLDEN32) >> (32 - PREFILTER_LOG2);
}

/* The characters of numbers and lists of them ([0-9], white space, []().,+-eE): text made only of
 * these is a size or a shape, kept on purpose, not a name. */
static int numeric(const uint8_t *s, size_t n) {
    for (size_t i = 0; i < n; i++) {
        uint8_t c = s[i];
        if (!((c >= '0' && c <= '9') || c == ' ' || (c >= '\t' && c <= '\r') || c == '[' || c == ']' || c == '(' ||
              c == ')' || c == ',' || c == '.' || c == '+' || c == '-' || c == 'e' || c == 'E'))
            return 0;
    }
    return 1;
}

/* -- the tables ---------------------------------------------------------------------------------- */

/* Where a string's and a key's probes start. */
static inline size_t string_home(const Fingerprints *fp, uint64_t h, size_t n) {
    return (size_t)(h + (uint64_t)n * GOLDEN64) & (fp->strings_cap - 1);
}

static inline size_t key_home(const Fingerprints *fp, uint64_t key, uint32_t klen) {
    return (size_t)fmix64(key ^ ((uint64_t)klen * GOLDEN64)) & (fp->keys_cap - 1);
}

static size_t string_slot(const Fingerprints *fp, uint64_t h, uint32_t n) {
    size_t mask = fp->strings_cap - 1, i = string_home(fp, h, n);
    while (fp->strings[i].len && !(fp->strings[i].hash == h && fp->strings[i].len == n)) i = (i + 1) & mask;
    return i;
}

static size_t key_slot(const Fingerprints *fp, uint64_t key, uint32_t klen) {
    size_t mask = fp->keys_cap - 1, i = key_home(fp, key, klen);
    while (fp->keys[i].klen && !(fp->keys[i].key == key && fp->keys[i].klen == klen)) i = (i + 1) & mask;
    return i;
}

/* Keep the load under a half: grow (double) the strings table when one more would pass it. */
static int grow_strings(Fingerprints *fp) {
    if (fp->strings && (fp->count + 1) * 2 <= fp->strings_cap) return 0;
    size_t cap = fp->strings_cap ? fp->strings_cap * 2 : FIRST_CAPACITY;
    StringSlot *old = fp->strings;
    size_t old_cap = fp->strings_cap;
    fp->strings = PyMem_Calloc(cap, sizeof(StringSlot));
    if (!fp->strings) {
        fp->strings = old;
        PyErr_NoMemory();
        return -1;
    }
    fp->strings_cap = cap;
    for (size_t i = 0; i < old_cap; i++)
        if (old[i].len) fp->strings[string_slot(fp, old[i].hash, old[i].len)] = old[i];
    PyMem_Free(old);
    return 0;
}

static int grow_keys(Fingerprints *fp) {
    if (fp->keys && (fp->keys_count + 1) * 2 <= fp->keys_cap) return 0;
    size_t cap = fp->keys_cap ? fp->keys_cap * 2 : FIRST_CAPACITY;
    KeySlot *old = fp->keys;
    size_t old_cap = fp->keys_cap;
    fp->keys = PyMem_Calloc(cap, sizeof(KeySlot));
    if (!fp->keys) {
        fp->keys = old;
        PyErr_NoMemory();
        return -1;
    }
    fp->keys_cap = cap;
    for (size_t i = 0; i < old_cap; i++)
        if (old[i].klen) fp->keys[key_slot(fp, old[i].key, old[i].klen)] = old[i];
    PyMem_Free(old);
    return 0;
}

/* Index a new string of n bytes by its start. */
static int add_key(Fingerprints *fp, const uint8_t *s, size_t n) {
    if (!fp->prefilter) {
        fp->prefilter = PyMem_Calloc((1u << PREFILTER_LOG2) / 64, sizeof(uint64_t));
        if (!fp->prefilter) {
            PyErr_NoMemory();
            return -1;
        }
    }
    uint32_t bit = prefilter_bit(s);
    fp->prefilter[bit / 64] |= (uint64_t)1 << (bit % 64);
    uint32_t klen = n < KEY_BYTES ? (uint32_t)n : KEY_BYTES;
    uint64_t key = first_bytes(s, klen);
    if (grow_keys(fp) < 0) return -1;
    size_t at = key_slot(fp, key, klen);
    KeySlot *slot = &fp->keys[at];
    if (!slot->klen) {
        slot->key = key;
        slot->klen = klen;
        slot->head = -1;
        fp->keys_count++;
        fp->klens |= 1u << klen;
    }
    for (int32_t l = slot->head; l >= 0; l = fp->links[l].next)
        if (fp->links[l].len == n) return 0;
    if (fp->links_len == fp->links_cap) {
        size_t cap = fp->links_cap ? fp->links_cap * 2 : FIRST_CAPACITY;
        Link *links = PyMem_Realloc(fp->links, cap * sizeof(Link));
        if (!links) {
            PyErr_NoMemory();
            return -1;
        }
        fp->links = links;
        fp->links_cap = cap;
    }
    fp->links[fp->links_len] = (Link){(uint32_t)n, slot->head};
    slot->head = (int32_t)fp->links_len++;
    return 0;
}

static int skipped(const Fingerprints *fp, const uint8_t *s, size_t n) {
    return !fp->exact && (n < MIN_BYTES || numeric(s, n));
}

/* Put a string of hash h in the tables. */
static int insert(Fingerprints *fp, const uint8_t *s, size_t n, uint64_t h) {
    if (n > UINT32_MAX) {
        PyErr_SetString(PyExc_OverflowError, "a string of 4 GiB or more");
        return -1;
    }
    if (grow_strings(fp) < 0) return -1;
    size_t at = string_slot(fp, h, (uint32_t)n);
    if (fp->strings[at].len) return 0;
    fp->strings[at] = (StringSlot){h, (uint32_t)n, 0};
    fp->count++;
    if (n > fp->max_len) fp->max_len = n;
    return fp->exact ? 0 : add_key(fp, s, n);
}

int fp_add(Fingerprints *fp, const uint8_t *s, size_t n) {
    return skipped(fp, s, n) ? 0 : insert(fp, s, n, fp_hash(s, n));
}

int fp_add_soon(Fingerprints *fp, const uint8_t *s, size_t n) {
    if (skipped(fp, s, n)) return 0;
    if (fp->pending_count == PENDING_STRINGS && fp_flush(fp) < 0) return -1;
    uint64_t h = fp_hash(s, n);
    if (fp->strings) __builtin_prefetch(&fp->strings[string_home(fp, h, n)]);
    if (fp->keys) {
        uint32_t klen = n < KEY_BYTES ? (uint32_t)n : KEY_BYTES;
        __builtin_prefetch(&fp->keys[key_home(fp, first_bytes(s, klen), klen)]);
    }
    fp->pending[fp->pending_count++] = (Pending){s, n, h};
    return 0;
}

int fp_flush(Fingerprints *fp) {
    int rc = 0;
    for (int i = 0; i < fp->pending_count && rc == 0; i++)
        rc = insert(fp, fp->pending[i].s, fp->pending[i].n, fp->pending[i].hash);
    fp->pending_count = 0;
    return rc;
}

int fp_contains(const Fingerprints *fp, const uint8_t *s, size_t n) {
    if (!fp->strings || n > UINT32_MAX) return 0;
    return fp->strings[string_slot(fp, fp_hash(s, n), (uint32_t)n)].len != 0;
}

/* -- searching ----------------------------------------------------------------------------------- */

/* What a search does with each string found at p. Returns 0, or -1 with a Python error set. */
typedef int (*OnFound)(void *ctx, const uint8_t *p, StringSlot *slot);

/* Every string of the set that starts at buf[i] for i in [from, to), the bytes up to end readable. */
static int search_span(Fingerprints *fp, const uint8_t *from, const uint8_t *to, const uint8_t *end, OnFound on_found,
                       void *ctx) {
    if (!fp->prefilter || !fp->count) return 0;
    const uint64_t *bits = fp->prefilter;
    for (const uint8_t *p = from; p < to && end - p >= MIN_BYTES; p++) {
        uint32_t bit = prefilter_bit(p);
        if (!((bits[bit / 64] >> (bit % 64)) & 1)) continue;
        size_t avail = (size_t)(end - p);
        uint64_t window = first_bytes(p, avail < KEY_BYTES ? avail : KEY_BYTES);
        for (uint32_t klen = MIN_BYTES; klen <= KEY_BYTES && klen <= avail; klen++) {
            if (!((fp->klens >> klen) & 1)) continue;
            uint64_t key = klen == KEY_BYTES ? window : window & (((uint64_t)1 << (8 * klen)) - 1);
            KeySlot *slot = &fp->keys[key_slot(fp, key, klen)];
            if (!slot->klen) continue;
            for (int32_t l = slot->head; l >= 0; l = fp->links[l].next) {
                uint32_t n = fp->links[l].len;
                if (n > avail) continue;
                StringSlot *found = &fp->strings[string_slot(fp, fp_hash(p, n), n)];
                if (found->len && on_found(ctx, p, found) < 0) return -1;
            }
        }
    }
    return 0;
}

typedef struct {
    const uint8_t *base;
    uint32_t mark;
    PyObject *hits;
} RawSearch;

static int found_raw(void *ctx, const uint8_t *p, StringSlot *slot) {
    RawSearch *s = ctx;
    if (slot->mark == s->mark) return 0;
    slot->mark = s->mark;
    PyObject *hit = Py_BuildValue("(nI)", (Py_ssize_t)(p - s->base), slot->len);
    if (!hit) return -1;
    int rc = PyList_Append(s->hits, hit);
    Py_DECREF(hit);
    return rc;
}

/* Kinds of message a text field can sit in. */
enum { MSG_NODE, MSG_METADATA, MSG_IO, MSG_ATTR, MSG_TEXT_LIST };

/* The text field of message `kind` (payload [p, end)) that holds all of [a, b): 1 and its bytes, or 0
 * when [a, b) crosses a field's bounds, a tag or a length, or lies in a field that is not text. */
static int text_field(int kind, const uint8_t *p, const uint8_t *end, const uint8_t *a, const uint8_t *b,
                      const uint8_t **text, size_t *text_len) {
    Cursor c = {p, end, NULL};
    while (c.p < c.end) {
        uint32_t field;
        int wt;
        const uint8_t *field_start = c.p;
        if (read_tag(&c, &field, &wt) < 0) return 0;
        if (wt != WT_LEN) {
            if (skip_field(&c, field, wt, 0) < 0) return 0;
            if (a < c.p && b > field_start) return 0;
            continue;
        }
        const uint8_t *s;
        size_t n;
        if (read_len(&c, &s, &n) < 0) return 0;
        if (b <= field_start) return 0;
        if (a >= s + n) continue;
        if (a < s || b > s + n) return 0;
        int leaf = 0, inner = -1;
        switch (kind) {
        case MSG_NODE:
            leaf = field == 2;
            inner = field == 8 || field == 9 ? MSG_IO : field == 10 ? MSG_ATTR : -1;
            break;
        case MSG_METADATA:
            leaf = field == 1;
            inner = field == 2 ? MSG_ATTR : -1;
            break;
        case MSG_IO: leaf = field >= 1 && field <= 3; break;
        case MSG_ATTR:
            leaf = field == 1 || field == 2 || field == A_STRING || field == A_BYTES;
            inner = field == A_STRING_LIST || field == A_BYTES_LIST ? MSG_TEXT_LIST : -1;
            break;
        default: leaf = field == 1;
        }
        if (leaf) {
            *text = s;
            *text_len = n;
            return 1;
        }
        return inner >= 0 ? text_field(inner, s, s + n, a, b, text, text_len) : 0;
    }
    return 0;
}

typedef struct {
    const uint8_t *base;
    uint32_t mark;
    PyObject *hits;
    Fingerprints *generated;
    Py_ssize_t record;
    const uint8_t *payload;
    size_t payload_len;
} RecordSearch;

static int found_in_record(void *ctx, const uint8_t *p, StringSlot *slot) {
    RecordSearch *s = ctx;
    if (slot->mark == s->mark) return 0;
    const uint8_t *text = NULL;
    size_t text_len = 0;
    int in_text = text_field(s->record == 0 ? MSG_METADATA : MSG_NODE, s->payload, s->payload + s->payload_len, p,
                             p + slot->len, &text, &text_len);
    if (in_text && s->generated && fp_contains(s->generated, text, text_len)) return 0;
    slot->mark = s->mark;
    PyObject *hit = Py_BuildValue("(nInnnO)", (Py_ssize_t)(p - s->base), slot->len, s->record,
                                  (Py_ssize_t)(s->payload - s->base), (Py_ssize_t)s->payload_len,
                                  in_text ? Py_True : Py_False);
    if (!hit) return -1;
    int rc = PyList_Append(s->hits, hit);
    Py_DECREF(hit);
    return rc;
}

/* -- the Python type ------------------------------------------------------------------------------ */

static int Fingerprints_init(Fingerprints *self, PyObject *args, PyObject *kwargs) {
    static char *keywords[] = {"exact", NULL};
    int exact = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|p", keywords, &exact)) return -1;
    self->exact = exact;
    return 0;
}

static void Fingerprints_dealloc(Fingerprints *self) {
    PyMem_Free(self->strings);
    PyMem_Free(self->keys);
    PyMem_Free(self->links);
    PyMem_Free(self->prefilter);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *Fingerprints_add(Fingerprints *self, PyObject *arg) {
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) return NULL;
    int rc = fp_add(self, view.buf, (size_t)view.len);
    PyBuffer_Release(&view);
    if (rc < 0) return NULL;
    Py_RETURN_NONE;
}

static int Fingerprints_contains(Fingerprints *self, PyObject *arg) {
    if (fp_flush(self) < 0) return -1;
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) return -1;
    int found = fp_contains(self, view.buf, (size_t)view.len);
    PyBuffer_Release(&view);
    return found;
}

static Py_ssize_t Fingerprints_len(Fingerprints *self) {
    if (fp_flush(self) < 0) return -1;
    return (Py_ssize_t)self->count;
}

static PyObject *Fingerprints_search(Fingerprints *self, PyObject *args) {
    Py_buffer view;
    unsigned int mark;
    if (fp_flush(self) < 0 || !PyArg_ParseTuple(args, "y*I", &view, &mark)) return NULL;
    RawSearch s = {view.buf, mark, PyList_New(0)};
    if (s.hits) {
        const uint8_t *buf = view.buf;
        if (search_span(self, buf, buf + view.len, buf + view.len, found_raw, &s) < 0) Py_CLEAR(s.hits);
    }
    PyBuffer_Release(&view);
    return s.hits;
}

static PyObject *Fingerprints_search_records(Fingerprints *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t pos, first_record;
    int eof;
    PyObject *generated;
    unsigned int mark;
    if (fp_flush(self) < 0 || !PyArg_ParseTuple(args, "y*nnpOI", &view, &pos, &first_record, &eof, &generated, &mark))
        return NULL;
    if (generated != Py_None && !PyObject_TypeCheck(generated, &FingerprintsType)) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_TypeError, "generated must be a Fingerprints or None");
        return NULL;
    }
    if (pos < 0 || pos > view.len) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "position outside the buffer");
        return NULL;
    }
    const uint8_t *buf = view.buf, *end = buf + view.len, *p = buf + pos;
    RecordSearch s = {buf, mark, PyList_New(0), generated == Py_None ? NULL : (Fingerprints *)generated,
                      first_record, NULL, 0};
    PyObject *result = NULL;
    if (!s.hits) goto done;
    size_t lookahead = self->max_len ? self->max_len - 1 : 0;
    while (p < end) {
        const uint8_t *payload;
        size_t len;
        if (!frame(p, end, &payload, &len)) {
            if (!eof) break;
            /* bytes no record frames (the output is the anonymizer's own: never, but searched all the same) */
            s.payload = p;
            s.payload_len = 0;
            if (search_span(self, p, end, end, found_in_record, &s) < 0) goto done;
            p = end;
            break;
        }
        const uint8_t *record_end = payload + len;
        if (!eof && (size_t)(end - record_end) < lookahead) break;
        s.payload = payload;
        s.payload_len = len;
        if (search_span(self, p, record_end, end, found_in_record, &s) < 0) goto done;
        s.record++;
        p = record_end;
    }
    result = Py_BuildValue("(nnO)", (Py_ssize_t)(p - buf), s.record - first_record, s.hits);
done:
    Py_XDECREF(s.hits);
    PyBuffer_Release(&view);
    return result;
}

static PyObject *Fingerprints_max_len(Fingerprints *self, void *closure) {
    if (fp_flush(self) < 0) return NULL;
    return PyLong_FromSize_t(self->max_len);
}

static PyMethodDef Fingerprints_methods[] = {
    {"add", (PyCFunction)Fingerprints_add, METH_O,
     "add(data): keep this string (bytes), unless 3 bytes or shorter or numeric in a set that is not exact"},
    {"search", (PyCFunction)Fingerprints_search, METH_VARARGS,
     "search(buf, mark) -> [(offset, length)]: every kept string found in buf, once per mark"},
    {"search_records", (PyCFunction)Fingerprints_search_records, METH_VARARGS,
     "search_records(buf, pos, first_record, eof, generated, mark) -> (stop, records, hits) (see the source)"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Fingerprints_getset[] = {
    {"max_len", (getter)Fingerprints_max_len, NULL, "the length of the longest string kept (bytes)", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PySequenceMethods Fingerprints_sequence = {
    .sq_length = (lenfunc)Fingerprints_len,
    .sq_contains = (objobjproc)Fingerprints_contains,
};

PyTypeObject FingerprintsType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "chakra.share._native.Fingerprints",
    .tp_doc = "Fingerprints(exact=False): a set of strings kept as hashes, searched for in buffers at once.",
    .tp_basicsize = sizeof(Fingerprints),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Fingerprints_init,
    .tp_dealloc = (destructor)Fingerprints_dealloc,
    .tp_methods = Fingerprints_methods,
    .tp_getset = Fingerprints_getset,
    .tp_as_sequence = &Fingerprints_sequence,
};
