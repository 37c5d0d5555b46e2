/*
 * chakra._host_record: the fields of a host execution trace's node (grouped layout) that are read from
 * their JSON text in C, without an object per part (see chakra/pytorch/host.py).
 *
 * split_io(json, shared) -> (values, shapes, types, strides) or None. An `inputs`/`outputs` object's
 * lists, each its JSON text copied into bytes of its own ("[]", "[]", "[]", "null" for one that is
 * missing, and for a null object); shapes, types and strides, which repeat, are kept once in the dict
 * `shared` (text -> itself) and given from it. None for a form left to msgspec (an escaped or
 * repeated key, text that is not an object).
 *
 * The attrs list (a JSON list of {"name", "type", "value"} objects) is split into the core
 * attributes and the others:
 * split_attrs(json, core) -> (core values, other (name, value) pairs) or None. `core` maps each core
 * name to the value a missing one means; a core value must be of its default's type (int or str).
 * Only the common forms are read here: names without escapes, string values without \uXXXX escapes,
 * integer values that fit 64 bits. Anything else (escapes, floats, lists, booleans, nulls, other keys, a core value of
 * another type, text that is not JSON) returns None: the caller reads the list with msgspec, which
 * settles it (or names the error).
 *
 * host_nodes(records, core, extras, texts, strings, node_type, io_type) -> indices left: each grouped
 * record (msgspec's struct of a node, its attrs and IO objects kept as JSON text) replaced in place by
 * node_type(id=, name=, parent=, <core names>=, inputs=, outputs=, attrs=), its IO lists io_type(...)
 * from split_io and its attributes from split_attrs; names and other strings shared through `strings`,
 * IO texts through `texts`, the other attributes' (name, value) tuples through `extras` (each a dict of
 * a value to itself). The indices of the records of a form left to the Python path are returned.
 *
 * grouped_nodes (_host_scan.c) makes the same nodes straight from the trace's text.
 */
#include "_host_record.h"
#include "_slots.h"

/* A value read here: a str or an int (new reference); NULL with no error set for other forms. */
static PyObject *value(Scan *s) {
    skip_space(s);
    if (s->p >= s->end) return NULL;
    return *s->p == '"' ? string_value(s) : integer(s);
}

/* The index of the core attribute `name`, -1 for another. */
static Py_ssize_t core_index(const Core *core, const char *name, Py_ssize_t len) {
    for (Py_ssize_t k = 0; k < core->count; k++)
        if (core->len[k] == len && memcmp(core->utf8[k], name, (size_t)len) == 0) return k;
    return -1;
}

/* Appends [from, to) and a NUL to r->key: 0, or -1 (set). */
static int key_append(Records *r, const char *from, const char *to) {
    size_t n = (size_t)(to - from);
    if (r->key_len + n + 1 > r->key_cap) {
        size_t cap = 2 * (r->key_len + n + 1);
        char *key = PyMem_Realloc(r->key, cap);
        if (!key) {
            PyErr_NoMemory();
            return -1;
        }
        r->key = key;
        r->key_cap = cap;
    }
    memcpy(r->key + r->key_len, from, n);
    r->key[r->key_len + n] = '\0';
    r->key_len += n + 1;
    return 0;
}

/* One {"name", "type", "value"} object: 1 read (into core, marking it in `set`, or others), 0 a form
 * left to msgspec, -1 an error (set). With `r`, another attribute than a core one is not read but its
 * text appended to r->key (its value checked as JSON only: the caller reads the text where it is new),
 * and core strings are found by their text. */
static int attribute(Scan *s, Core *core, PyObject *others, int *set, Records *r) {
    skip_space(s);
    const char *from = s->p;
    if (!take(s, '{')) return 0;
    const char *name = NULL;
    Py_ssize_t name_len = 0, k = -1;
    PyObject *val = NULL;
    int seen_type = 0, seen_value = 0, rc = 0;
    do {
        const char *key;
        Py_ssize_t key_len;
        if (!string_span(s, &key, &key_len) || !take(s, ':')) goto other;
        if (key_is(key, key_len, "name") && !name) {
            if (!string_span(s, &name, &name_len)) goto other;
            k = core_index(core, name, name_len);
        } else if (key_is(key, key_len, "type") && !seen_type) {
            const char *unused;
            Py_ssize_t unused_len;
            if (!string_span(s, &unused, &unused_len) || !ascii_only(unused, unused_len)) goto other;
            seen_type = 1;
        } else if (key_is(key, key_len, "value") && !seen_value) {
            seen_value = 1;
            skip_space(s);
            if (r && name && k < 0) {
                if (skip_value(s, 0, 1) < 0) goto other;
            } else if (r && k >= 0 && PyUnicode_CheckExact(core->value[k]) && s->p < s->end && *s->p == '"') {
                if (!(val = shared_string_value(r, s))) goto other;
            } else if (!(val = value(s))) {
                goto other;
            }
        } else {
            goto other; /* another key, or one given twice */
        }
    } while (take(s, ','));
    if (!take(s, '}') || !name || !seen_value) goto other;
    if (k >= 0) {
        if (!val || Py_TYPE(val) != Py_TYPE(core->value[k])) goto other; /* msgspec names the wrong kind */
        if (set[k]) Py_DECREF(core->value[k]);
        core->value[k] = val;
        set[k] = 1;
        return 1;
    }
    if (r) {
        Py_XDECREF(val);
        return key_append(r, from, s->p) < 0 ? -1 : 1;
    }
    PyObject *key = PyUnicode_DecodeUTF8(name, name_len, NULL);
    if (!key) {
        PyErr_Clear();
        goto other;
    }
    PyObject *pair = PyTuple_Pack(2, key, val);
    Py_DECREF(key);
    Py_DECREF(val);
    if (!pair) return -1;
    rc = PyList_Append(others, pair);
    Py_DECREF(pair);
    return rc < 0 ? -1 : 1;
other:
    Py_XDECREF(val);
    return PyErr_Occurred() ? -1 : 0;
}

/* The core names of `defaults` (name -> the value a missing one means) into `core`: 0, or -1 (set). */
static int core_of(PyObject *defaults, Core *core) {
    PyObject *key, *fallback;
    Py_ssize_t pos = 0;
    core->count = 0;
    if (PyDict_GET_SIZE(defaults) > MAX_CORE) {
        PyErr_Format(PyExc_ValueError, "at most %d core attributes", MAX_CORE);
        return -1;
    }
    while (PyDict_Next(defaults, &pos, &key, &fallback)) {
        if (!PyUnicode_Check(key)) {
            PyErr_SetString(PyExc_TypeError, "core attribute names must be str");
            return -1;
        }
        core->utf8[core->count] = PyUnicode_AsUTF8AndSize(key, &core->len[core->count]);
        if (!core->utf8[core->count]) return -1;
        core->value[core->count++] = fallback;
    }
    return 0;
}

/* An attrs list at s->p read into `core` (values owned where marked in `set`; the caller releases them
 * with release_core, also after a failure) and `others` ((name, value) pairs), s->p moved past it: 1
 * read, 0 a form left to msgspec, -1 an error (set). */
static int scan_attrs(Scan *s, Core *core, int *set, PyObject *others, Records *r) {
    int rc = 1;
    if (!take(s, '[')) return 0;
    if (!take(s, ']')) {
        do {
            rc = attribute(s, core, others, set, r);
        } while (rc == 1 && take(s, ','));
        if (rc == 1 && !take(s, ']')) rc = 0;
    }
    return rc;
}

/* Whether only white space is left. */
static int at_end(Scan *s) {
    skip_space(s);
    return s->p == s->end;
}

/* scan_attrs over the whole of `text`. */
static int read_attrs(const char *text, Py_ssize_t len, Core *core, int *set, PyObject *others) {
    Scan s = {text, text + len};
    int rc = scan_attrs(&s, core, set, others, NULL);
    return rc == 1 && !at_end(&s) ? 0 : rc;
}

static void release_core(Core *core, int *set) {
    for (Py_ssize_t k = 0; k < core->count; k++)
        if (set[k]) {
            Py_DECREF(core->value[k]);
            set[k] = 0;
        }
}

/* The core values in order as a tuple, the read ones moved into it: NULL on error (set). */
static PyObject *core_tuple(Core *core, int *set) {
    PyObject *values = PyTuple_New(core->count);
    if (!values) return NULL;
    for (Py_ssize_t k = 0; k < core->count; k++) {
        PyTuple_SET_ITEM(values, k, set[k] ? core->value[k] : Py_NewRef(core->value[k]));
        set[k] = 0; /* the tuple owns it now */
    }
    return values;
}

static PyObject *split_attrs(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer view;
    PyObject *defaults;
    if (!PyArg_ParseTuple(args, "y*O!", &view, &PyDict_Type, &defaults)) return NULL;
    Core core = {.count = 0};
    int set[MAX_CORE] = {0};
    PyObject *others = NULL, *result = NULL;
    if (core_of(defaults, &core) < 0 || !(others = PyList_New(0))) goto done;
    int rc = read_attrs((const char *)view.buf, view.len, &core, set, others);
    if (rc == 1) {
        PyObject *values = core_tuple(&core, set);
        PyObject *pairs = values ? PyList_AsTuple(others) : NULL;
        if (values && pairs) {
            result = Py_BuildValue("NN", values, pairs);
        } else {
            Py_XDECREF(values);
            Py_XDECREF(pairs);
        }
    } else if (rc == 0) {
        result = Py_NewRef(Py_None);
    }
done:
    release_core(&core, set);
    Py_XDECREF(others);
    PyBuffer_Release(&view);
    return result;
}

/* The texts a missing list stands for (constants made once: "[]" is a fifth of the lists). */
static PyObject *EMPTY_LIST, *NULL_VALUE;
enum { IO_VALUES, IO_SHAPES, IO_TYPES, IO_STRIDES, IO_PARTS };
static const char *IO_KEYS[IO_PARTS] = {"values", "shapes", "types", "strides"};
static const Py_ssize_t IO_KEY_LENGTHS[IO_PARTS] = {6, 6, 5, 7};

/* An `inputs`/`outputs` object's lists at s->p as new bytes into `parts` (see split_io), s->p moved
 * past it: 1 read, 0 a form left to msgspec, -1 an error (set). */
static int scan_io(Scan *sc, PyObject *shared, PyObject *parts[IO_PARTS], int strict, TextCache *cache) {
    Scan s = *sc;
    const char *from[IO_PARTS] = {NULL};
    Py_ssize_t len[IO_PARTS] = {0};
    int ok = 1;
    skip_space(&s);
    if ((size_t)(s.end - s.p) >= 4 && memcmp(s.p, "null", 4) == 0) {
        s.p += 4; /* a null object: every list missing */
    } else if (!take(&s, '{')) {
        ok = 0;
    } else if (!take(&s, '}')) {
        do {
            const char *key;
            Py_ssize_t key_len;
            if (!string_span(&s, &key, &key_len) || (strict && !ascii_only(key, key_len)) || !take(&s, ':')) {
                ok = 0;
                break;
            }
            skip_space(&s);
            const char *start = s.p;
            if (skip_value(&s, 0, strict) < 0) {
                ok = 0;
                break;
            }
            for (int k = 0; k < IO_PARTS; k++) {
                if (key_len == IO_KEY_LENGTHS[k] && memcmp(key, IO_KEYS[k], (size_t)key_len) == 0) {
                    if (from[k]) ok = 0; /* given twice: msgspec settles which counts */
                    from[k] = start;
                    len[k] = s.p - start;
                }
            }
        } while (ok && take(&s, ','));
        if (ok && !take(&s, '}')) ok = 0;
    }
    if (!ok) return 0;
    sc->p = s.p;
    for (int k = 0; k < IO_PARTS; k++) {
        PyObject *part = NULL;
        uint64_t hash = 0;
        if (!from[k]) {
            part = Py_NewRef(k == IO_STRIDES ? NULL_VALUE : EMPTY_LIST);
        } else if (k == IO_VALUES) {
            part = PyBytes_FromStringAndSize(from[k], len[k]);
        } else { /* shapes, types, strides repeat: one object each */
            PyObject *known = NULL;
            if (cache) {
                hash = text_hash(from[k], len[k]);
                known = text_cache_get(cache, from[k], len[k], hash);
            }
            if (known) {
                part = Py_NewRef(known);
            } else if ((part = PyBytes_FromStringAndSize(from[k], len[k]))) {
                known = PyDict_SetDefault(shared, part, part);
                if (known) Py_SETREF(part, Py_NewRef(known));
                else Py_CLEAR(part);
                if (part && cache && text_cache_put(cache, from[k], len[k], hash, part) < 0) Py_CLEAR(part);
            }
        }
        if (!part) {
            for (int j = 0; j < k; j++) Py_CLEAR(parts[j]);
            return -1;
        }
        parts[k] = part;
    }
    return 1;
}

/* scan_io over the whole of `text`. */
static int read_io(const char *text, Py_ssize_t size, PyObject *shared, PyObject *parts[IO_PARTS], int strict) {
    Scan s = {text, text + size};
    int rc = scan_io(&s, shared, parts, strict, NULL);
    if (rc == 1 && !at_end(&s)) {
        for (int k = 0; k < IO_PARTS; k++) Py_CLEAR(parts[k]);
        rc = 0;
    }
    return rc;
}

static PyObject *split_io(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer view;
    PyObject *shared;
    if (!PyArg_ParseTuple(args, "y*O!", &view, &PyDict_Type, &shared)) return NULL;
    PyObject *parts[IO_PARTS] = {NULL};
    int rc = read_io((const char *)view.buf, view.len, shared, parts, 0);
    PyBuffer_Release(&view);
    if (rc < 0) return NULL;
    if (rc == 0) return Py_NewRef(Py_None);
    PyObject *result = PyTuple_New(IO_PARTS);
    for (int k = 0; k < IO_PARTS; k++) {
        if (result) PyTuple_SET_ITEM(result, k, parts[k]);
        else Py_DECREF(parts[k]);
    }
    return result;
}

static PyObject *s_id, *s_name, *s_ctrl_deps, *s_inputs, *s_outputs, *s_attrs;

/* The object equal to `text` kept in `strings` (text -> itself): new reference, NULL on error. */
static PyObject *shared_str(PyObject *strings, PyObject *text) {
    PyObject *known = PyDict_SetDefault(strings, text, text);
    return known ? Py_NewRef(known) : NULL;
}

PyObject *shared_string_value(Records *r, Scan *s) {
    skip_space(s);
    const char *start = s->p, *span;
    Py_ssize_t len;
    PyObject *str, *shared;
    if (string_span(s, &span, &len)) {
        uint64_t hash = text_hash(span, len);
        PyObject *known = text_cache_get(&r->tables->names, span, len, hash);
        if (known) return Py_NewRef(known);
        if (!(str = PyUnicode_DecodeUTF8(span, len, NULL))) {
            PyErr_Clear(); /* not UTF-8: msgspec names the error */
            return NULL;
        }
        shared = shared_str(r->strings, str);
        Py_DECREF(str);
        if (shared && text_cache_put(&r->tables->names, span, len, hash, shared) < 0) Py_CLEAR(shared);
        return shared;
    }
    s->p = start; /* escapes: read them */
    if (!(str = string_value(s))) return NULL;
    shared = shared_str(r->strings, str);
    Py_DECREF(str);
    return shared;
}

/* The dict of `pairs` ((name, value) tuples), the one kept in `extras` for equal pairs: new reference. */
static PyObject *shared_extras(PyObject *extras, PyObject *pairs) {
    PyObject *known = PyDict_GetItemWithError(extras, pairs);
    if (known) return Py_NewRef(known);
    if (PyErr_Occurred()) return NULL;
    PyObject *dict = PyDict_New();
    for (Py_ssize_t i = 0; dict && i < PyTuple_GET_SIZE(pairs); i++) {
        PyObject *pair = PyTuple_GET_ITEM(pairs, i);
        if (PyDict_SetItem(dict, PyTuple_GET_ITEM(pair, 0), PyTuple_GET_ITEM(pair, 1)) < 0) Py_CLEAR(dict);
    }
    if (dict && PyDict_SetItem(extras, pairs, dict) < 0) Py_CLEAR(dict);
    return dict;
}

int parts_begin(NodeParts *n, Records *r) {
    memset(n, 0, sizeof *n);
    n->r = r;
    memcpy(r->core.value, r->fallback, sizeof r->fallback);
    return (n->others = PyList_New(0)) ? 0 : -1;
}

int parts_attrs(NodeParts *n, Scan *s) {
    Records *r = n->r;
    r->key_len = 0;
    int rc = scan_attrs(s, &r->core, n->set, n->others, r);
    if (rc != 1 || r->key_len == 0) return rc;
    n->key_hash = text_hash(r->key, (Py_ssize_t)r->key_len);
    PyObject *known = text_cache_get(&r->tables->extras_by_text, r->key, (Py_ssize_t)r->key_len, n->key_hash);
    if (known) {
        n->extras = Py_NewRef(known);
        return 1;
    }
    n->keyed = 1; /* new text: its attributes read one by one */
    for (const char *at = r->key; rc == 1 && at < r->key + r->key_len; at += strlen(at) + 1) {
        Scan one = {at, at + strlen(at)};
        rc = attribute(&one, &r->core, n->others, n->set, NULL);
        if (rc == 1 && !at_end(&one)) rc = 0;
    }
    return rc;
}

int parts_io(NodeParts *n, int which, Scan *s, int strict) {
    PyObject *parts[IO_PARTS] = {NULL};
    int rc = scan_io(s, n->r->texts, parts, strict, &n->r->tables->io_texts);
    if (rc <= 0) return rc;
    Py_XSETREF(n->io[which], PyObject_Vectorcall(n->r->io_type, parts, IO_PARTS, NULL));
    for (int k = 0; k < IO_PARTS; k++) Py_DECREF(parts[k]);
    return n->io[which] ? 1 : -1;
}

PyObject *parts_node(NodeParts *n, PyObject *id, PyObject *name, PyObject *parent) {
    enum { ID, NAME, PARENT, CORE };
    Records *r = n->r;
    PyObject *args[CORE + MAX_CORE + 3] = {NULL};
    Py_ssize_t n_args = CORE + r->core.count + 3, at = CORE + r->core.count;
    PyObject *node = NULL, *pairs = NULL;
    for (Py_ssize_t k = 0; k < r->core.count; k++) {
        PyObject *value = n->set[k] ? r->core.value[k] : Py_NewRef(r->core.value[k]);
        n->set[k] = 0;
        args[CORE + k] = PyUnicode_CheckExact(value) ? shared_str(r->strings, value) : Py_NewRef(value);
        Py_DECREF(value);
        if (!args[CORE + k]) goto done;
    }
    for (int k = 0; k < 2; k++) {
        if (n->io[k]) {
            args[at + k] = Py_NewRef(n->io[k]);
        } else { /* missing: every list missing */
            PyObject *missing[IO_PARTS] = {EMPTY_LIST, EMPTY_LIST, EMPTY_LIST, NULL_VALUE};
            if (!(args[at + k] = PyObject_Vectorcall(r->io_type, missing, IO_PARTS, NULL))) goto done;
        }
    }
    if (n->extras) {
        args[at + 2] = Py_NewRef(n->extras);
    } else if (!(pairs = PyList_AsTuple(n->others)) || !(args[at + 2] = shared_extras(r->extras, pairs))) {
        goto done;
    } else if (n->keyed && text_cache_put(&r->tables->extras_by_text, r->key, (Py_ssize_t)r->key_len, n->key_hash,
                                          args[at + 2]) < 0) {
        goto done;
    }
    if (!(args[NAME] = shared_str(r->strings, name))) goto done;
    args[ID] = Py_NewRef(id);
    args[PARENT] = Py_NewRef(parent);
    node = PyObject_Vectorcall(r->node_type, args, 0, r->kwnames);
done:
    for (Py_ssize_t k = 0; k < n_args; k++) Py_XDECREF(args[k]);
    Py_XDECREF(pairs);
    return node;
}

void parts_end(NodeParts *n) {
    if (n->r) release_core(&n->r->core, n->set);
    Py_CLEAR(n->others);
    Py_CLEAR(n->extras);
    Py_CLEAR(n->io[0]);
    Py_CLEAR(n->io[1]);
}

/* The node of a record's parts given as JSON texts (msgspec's views): see parts_node; Py_None (new) for
 * a form left to Python. */
static PyObject *record_node(Records *r, PyObject *id, PyObject *name, PyObject *parent, Text attrs, Text inputs,
                             Text outputs) {
    NodeParts n;
    PyObject *node = NULL;
    int rc = parts_begin(&n, r);
    if (rc == 0) {
        Scan s = {attrs.p, attrs.p + attrs.len};
        rc = parts_attrs(&n, &s);
        if (rc == 1 && !at_end(&s)) rc = 0;
    }
    for (int k = 0; k < 2 && rc == 1; k++) {
        Text text = k == 0 ? inputs : outputs;
        Scan s = {text.p, text.p + text.len};
        rc = parts_io(&n, k, &s, 0);
        if (rc == 1 && !at_end(&s)) rc = 0;
    }
    if (rc == 1) node = parts_node(&n, id, name, parent);
    else if (rc == 0) node = Py_NewRef(Py_None);
    parts_end(&n);
    return node;
}

/* The JSON text of a record's field (msgspec.Raw or bytes) into `view` and `text`: 0, or -1 (set). */
static int field_text(PyObject *raw, PyObject *name, Py_buffer *view, Text *text) {
    PyObject *value = field(raw, name);
    if (!value) return -1;
    int rc = PyObject_GetBuffer(value, view, PyBUF_SIMPLE);
    Py_DECREF(value);
    if (rc == 0) *text = (Text){(const char *)view->buf, view->len};
    return rc;
}

/* Record `raw` (msgspec's struct) as a node: see record_node. */
static PyObject *node_of(Records *r, PyObject *raw) {
    enum { ATTRS, INPUTS, OUTPUTS, PARTS };
    PyObject *const names[PARTS] = {s_attrs, s_inputs, s_outputs};
    Py_buffer views[PARTS] = {{0}};
    Text texts[PARTS];
    PyObject *id = NULL, *name = NULL, *parent = NULL, *node = NULL;
    int k = 0;
    while (k < PARTS && field_text(raw, names[k], &views[k], &texts[k]) == 0) k++;
    if (k == PARTS && (id = field(raw, s_id)) && (name = field(raw, s_name)) && (parent = field(raw, s_ctrl_deps)))
        node = record_node(r, id, name, parent, texts[ATTRS], texts[INPUTS], texts[OUTPUTS]);
    while (k-- > 0) PyBuffer_Release(&views[k]);
    Py_XDECREF(id);
    Py_XDECREF(name);
    Py_XDECREF(parent);
    return node;
}

int records_open(Records *r) {
    r->kwnames = NULL;
    if (!r->tables) r->tables = &r->own;
    if (core_of(r->defaults, &r->core) < 0) return -1;
    memcpy(r->fallback, r->core.value, sizeof r->fallback);
    /* keywords: id, name, parent, the core names in the defaults' order, inputs, outputs, attrs */
    if (!(r->kwnames = PyTuple_New(3 + r->core.count + 3))) return -1;
    const char *fixed[] = {"id", "name", "parent", "inputs", "outputs", "attrs"};
    PyObject *key, *unused;
    Py_ssize_t pos = 0, at = 3;
    for (int k = 0; k < 6; k++) {
        PyObject *word = PyUnicode_InternFromString(fixed[k]);
        if (!word) return -1;
        PyTuple_SET_ITEM(r->kwnames, k < 3 ? k : 3 + r->core.count + (k - 3), word);
    }
    while (PyDict_Next(r->defaults, &pos, &key, &unused)) PyTuple_SET_ITEM(r->kwnames, at++, Py_NewRef(key));
    return 0;
}

void records_close(Records *r) {
    Py_CLEAR(r->kwnames);
    text_cache_clear(&r->own.io_texts);
    text_cache_clear(&r->own.names);
    text_cache_clear(&r->own.extras_by_text);
    PyMem_Free(r->key);
    r->key = NULL;
    r->key_len = r->key_cap = 0;
}

static PyObject *host_nodes(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *records, *left = NULL;
    Records r = {.kwnames = NULL};
    if (!PyArg_ParseTuple(args, "O!O!O!O!O!OO", &PyList_Type, &records, &PyDict_Type, &r.defaults, &PyDict_Type,
                          &r.extras, &PyDict_Type, &r.texts, &PyDict_Type, &r.strings, &r.node_type, &r.io_type))
        return NULL;
    if (records_open(&r) < 0 || !(left = PyList_New(0))) goto done;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(records); i++) {
        PyObject *node = node_of(&r, PyList_GET_ITEM(records, i));
        if (!node) {
            Py_CLEAR(left);
            goto done;
        }
        if (node == Py_None) {
            Py_DECREF(node);
            PyObject *index = PyLong_FromSsize_t(i);
            int rc = index ? PyList_Append(left, index) : -1;
            Py_XDECREF(index);
            if (rc < 0) {
                Py_CLEAR(left);
                goto done;
            }
        } else {
            PyList_SetItem(records, i, node); /* frees the record: the peak holds one form at a time */
        }
    }
done:
    records_close(&r);
    return left;
}

static PyMethodDef methods[] = {
    {"split_io", split_io, METH_VARARGS,
     "split_io(json, shared) -> (values, shapes, types, strides) as bytes of JSON text (shapes, types and strides "
     "equal to one in the dict shared are that one), or None for a form left to msgspec"},
    {"host_nodes", host_nodes, METH_VARARGS,
     "host_nodes(records, core, extras, texts, strings, node_type, io_type) -> indices left: each grouped record "
     "replaced in place by its node, but those of a form left to Python"},
    {"grouped_nodes", grouped_nodes, METH_VARARGS,
     "grouped_nodes(text, start, first, core, extras, texts, strings, node_type, io_type[, tables]) -> (nodes, left, "
     "end, closed) or None: the nodes of the complete records of a piece of the array of records from offset start "
     "(with first, the array's '['), read from the text; tables (text_tables()) kept from one call to the next"},
    {"text_tables", text_tables, METH_NOARGS,
     "text_tables() -> the tables of values by their text that grouped_nodes keeps from one call to the next"},
    {"split_attrs", split_attrs, METH_VARARGS,
     "split_attrs(json, core) -> (core values in core's order, other (name, value) pairs), or None for a "
     "form left to msgspec"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "chakra._host_record", NULL, -1, methods, NULL, NULL, NULL,
                                    NULL};

PyMODINIT_FUNC PyInit__host_record(void) {
    EMPTY_LIST = PyBytes_FromStringAndSize("[]", 2);
    NULL_VALUE = PyBytes_FromStringAndSize("null", 4);
    if (!EMPTY_LIST || !NULL_VALUE) return NULL;
    static const Interned names[] = {{&s_id, "id"},         {&s_name, "name"},       {&s_ctrl_deps, "ctrl_deps"},
                                     {&s_inputs, "inputs"}, {&s_outputs, "outputs"}, {&s_attrs, "attrs"}};
    if (intern_all(names, sizeof names / sizeof names[0]) < 0) return NULL;
    return PyModule_Create(&module);
}
