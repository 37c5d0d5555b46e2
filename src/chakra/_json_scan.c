/*
 * chakra._json_scan: where things are in JSON text, found without decoding it, so that one big array of a
 * file can be decoded a piece at a time (see chakra/pytorch/jsonfile.py).
 *
 * find_array(text, key) -> (key_start, items_start) or None: in a JSON object `text`, the top-level key
 * `key` (bytes, compared as written: a key with escapes is not found) whose value is an array; key_start
 * is the offset of the key's opening quote, items_start the offset just after the array's '['. None
 * when the text ends first (more may follow), when the key is not there, or the text is not an object.
 *
 * items_end(text, start) -> (end, closed): from `start`, inside an array between two of its items, the
 * end of the complete items: closed is True when the array's ']' was met (end is its offset), else end
 * is the offset of the last ',' between items (-1 if none: no complete item yet). A '}' closing the
 * array is a ValueError; other text that is not JSON is not checked here: the decoder of the pieces
 * refuses it.
 *
 * object_items_end(text) -> int: the offset of the last ',' between a '}' and a '{' (whitespace aside),
 * searched from the end, or -1: where an array of objects likely has an item boundary. A guess, found
 * without reading the text before it (a string may hold those bytes): the caller checks it by
 * decoding the items before it, and reads with items_end where that fails.
 *
 * without_flows(piece, categories) -> (piece, counts) or None: the JSON array `piece` (bytes-like: a piece of
 * the event list, as ArrayPieces decodes it) without its flow events, and how many it left out by
 * (cat, ph) as str. A flow is left out only where the event decoder would take its text: a flat object
 * of an event's own keys (name, cat, ph, pid, tid, ts, dur, id, bp), each once, `ph` "s", "f" or "t",
 * `cat` one of `categories` (bytes; absent reads as ""), its strings printable ASCII without escapes, its
 * numbers of the types those keys take (an integer of at most 18 digits for pid and tid); every other
 * item stays, for the decoder to read or refuse. `piece` itself where none is left out, else a new
 * bytearray. None where the text is not an array of complete items (a piece cut at a wrong guess).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

static int is_space(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

/* The offset just past the string starting at `p` (its opening quote), or -1 if the text ends first. */
static Py_ssize_t skip_string(const char *text, Py_ssize_t p, Py_ssize_t size) {
    for (p++; p < size; p++) {
        if (text[p] == '\\')
            p++;
        else if (text[p] == '"')
            return p + 1;
    }
    return -1;
}

/* The offset just past the value starting at `p`, or -1 if the text ends first. */
static Py_ssize_t skip_value(const char *text, Py_ssize_t p, Py_ssize_t size) {
    Py_ssize_t depth = 0;
    while (p < size) {
        char c = text[p];
        if (c == '"') {
            p = skip_string(text, p, size);
            if (p < 0) return -1;
            if (depth == 0) return p;
            continue;
        }
        if (c == '{' || c == '[') {
            depth++;
        } else if (c == '}' || c == ']') {
            if (depth == 0) return p; /* the end of the enclosing object: an empty value */
            if (--depth == 0) return p + 1;
        } else if (depth == 0 && (c == ',')) {
            return p;
        }
        p++;
    }
    return -1;
}

static PyObject *find_array(PyObject *self, PyObject *args) {
    Py_buffer text, key;
    if (!PyArg_ParseTuple(args, "y*y*", &text, &key)) return NULL;
    const char *s = text.buf;
    Py_ssize_t size = text.len, p = 0;
    PyObject *found = NULL;
    while (p < size && is_space(s[p])) p++;
    if (p >= size || s[p] != '{') goto none;
    p++;
    for (;;) {
        while (p < size && (is_space(s[p]) || s[p] == ',')) p++;
        if (p >= size || s[p] != '"') goto none;
        Py_ssize_t key_start = p;
        p = skip_string(s, p, size);
        if (p < 0) goto none;
        int match = p - key_start - 2 == key.len && memcmp(s + key_start + 1, key.buf, key.len) == 0;
        while (p < size && is_space(s[p])) p++;
        if (p >= size || s[p] != ':') goto none;
        p++;
        while (p < size && is_space(s[p])) p++;
        if (p >= size) goto none;
        if (match && s[p] == '[') {
            found = Py_BuildValue("(nn)", key_start, p + 1);
            break;
        }
        p = skip_value(s, p, size);
        if (p < 0) goto none;
    }
    PyBuffer_Release(&text);
    PyBuffer_Release(&key);
    return found;
none:
    PyBuffer_Release(&text);
    PyBuffer_Release(&key);
    Py_RETURN_NONE;
}

static PyObject *items_end(PyObject *self, PyObject *args) {
    Py_buffer text;
    Py_ssize_t p;
    if (!PyArg_ParseTuple(args, "y*n", &text, &p)) return NULL;
    const char *s = text.buf;
    Py_ssize_t size = text.len, depth = 0, last_comma = -1;
    int closed = 0, misclosed = 0;
    if (p < 0) p = 0;
    Py_BEGIN_ALLOW_THREADS;
    while (p < size) {
        char c = s[p];
        if (c == '"') {
            /* a string cut by the end of the text: the items before it are complete */
            for (p++; p < size && s[p] != '"'; p++)
                if (s[p] == '\\') p++;
        } else if (c == '{' || c == '[') {
            depth++;
        } else if (c == '}' || c == ']') {
            if (depth == 0) {
                closed = c == ']';
                misclosed = !closed;
                break;
            }
            depth--;
        } else if (c == ',' && depth == 0) {
            last_comma = p;
        }
        p++;
    }
    Py_END_ALLOW_THREADS;
    PyBuffer_Release(&text);
    if (misclosed) {
        PyErr_Format(PyExc_ValueError, "'}' closes the array at offset %zd", p);
        return NULL;
    }
    return Py_BuildValue("(nO)", closed ? p : last_comma, closed ? Py_True : Py_False);
}

static PyObject *object_items_end(PyObject *self, PyObject *arg) {
    Py_buffer text;
    if (PyObject_GetBuffer(arg, &text, PyBUF_SIMPLE) < 0) return NULL;
    const char *s = text.buf;
    Py_ssize_t found = -1;
    for (Py_ssize_t p = text.len - 1; p > 0 && found < 0; p--) {
        if (s[p] != '{') continue;
        Py_ssize_t q = p - 1;
        while (q > 0 && is_space(s[q])) q--;
        if (s[q] != ',') continue;
        Py_ssize_t comma = q--;
        while (q >= 0 && is_space(s[q])) q--;
        if (q >= 0 && s[q] == '}') found = comma;
    }
    PyBuffer_Release(&text);
    return PyLong_FromSsize_t(found);
}

/* What a byte is to a scan of JSON text outside strings: 1 for a quote or a bracket, else 0. */
static unsigned char structural[256];
/* Inside a string: 1 for a quote or a backslash. */
static unsigned char string_stop[256];

/* The offset just past the item (any JSON value) at `p`, its strings and brackets matched (a '{' or '['
 * opens, a '}' or ']' closes: the decoder checks which), or -1 where the text ends first or closes an
 * item it did not open. */
static Py_ssize_t item_end(const char *text, Py_ssize_t p, Py_ssize_t size) {
    const unsigned char *s = (const unsigned char *)text;
    Py_ssize_t depth = 0;
    if (s[p] != '{' && s[p] != '[' && s[p] != '"') { /* a number or a literal: up to what follows it */
        while (p < size && s[p] != ',' && s[p] != ']' && s[p] != '}' && !is_space(s[p])) p++;
        return p < size ? p : -1;
    }
    while (p < size) {
        while (p < size && !structural[s[p]]) p++;
        if (p >= size) return -1;
        unsigned char c = s[p++];
        if (c == '"') {
            for (;;) {
                while (p < size && !string_stop[s[p]]) p++;
                if (p >= size) return -1;
                if (s[p++] == '"') break;
                p++; /* the escaped character */
            }
        } else if (c == '{' || c == '[') {
            depth++;
            continue;
        } else if (--depth < 0) {
            return -1;
        }
        if (depth == 0) return p;
    }
    return -1;
}

/* The keys of an event the decoder reads (KinetoEvent's fields but args). */
enum { K_NAME, K_CAT, K_PH, K_PID, K_TID, K_TS, K_DUR, K_ID, K_BP, KEY_COUNT };

/* Which of the event's keys the text `k` (`size` bytes) is, KEY_COUNT for none. */
static int event_key(const char *k, Py_ssize_t size) {
    if (size == 2) {
        if (k[0] == 'p' && k[1] == 'h') return K_PH;
        if (k[0] == 't' && k[1] == 's') return K_TS;
        if (k[0] == 'i' && k[1] == 'd') return K_ID;
        if (k[0] == 'b' && k[1] == 'p') return K_BP;
    } else if (size == 3) {
        if (k[0] == 'c' && k[1] == 'a' && k[2] == 't') return K_CAT;
        if (k[0] == 'p' && k[1] == 'i' && k[2] == 'd') return K_PID;
        if (k[0] == 't' && k[1] == 'i' && k[2] == 'd') return K_TID;
        if (k[0] == 'd' && k[1] == 'u' && k[2] == 'r') return K_DUR;
    } else if (size == 4 && memcmp(k, "name", 4) == 0) {
        return K_NAME;
    }
    return KEY_COUNT;
}

/* What a value's text is: which of these the key's type takes is what flow_object checks. */
enum { V_STRING = 1, V_INTEGER = 2, V_NUMBER = 4, V_NULL = 8, V_BOOL = 16 };
static const int key_takes[KEY_COUNT] = {
    V_STRING, V_STRING, V_STRING, V_STRING | V_INTEGER, V_STRING | V_INTEGER, V_INTEGER | V_NUMBER,
    V_INTEGER | V_NUMBER, V_STRING | V_INTEGER | V_NUMBER | V_NULL | V_BOOL, V_STRING | V_NULL,
};

/* The offset past the string at `p` (its opening quote) where it holds printable ASCII only, no escape;
 * else -1. */
static Py_ssize_t plain_string(const char *s, Py_ssize_t p, Py_ssize_t size) {
    for (p++; p < size; p++) {
        unsigned char c = (unsigned char)s[p];
        if (c == '"') return p + 1;
        if (c < 0x20 || c > 0x7e || c == '\\') return -1;
    }
    return -1;
}

static int is_digit(char c) { return c >= '0' && c <= '9'; }

/* The offset past the JSON number at `p`, -1 where there is none or it is long enough to need care (more
 * than 18 digits for an integer, 30 for others, an exponent of more than two digits); *integer is 1
 * where it has no fraction and no exponent. */
static Py_ssize_t plain_number(const char *s, Py_ssize_t p, Py_ssize_t size, int *integer) {
    Py_ssize_t digits = 0;
    if (p < size && s[p] == '-') p++;
    if (p >= size || !is_digit(s[p])) return -1;
    if (s[p] == '0') {
        p++;
        digits = 1;
    } else {
        for (; p < size && is_digit(s[p]); p++) digits++;
    }
    *integer = 1;
    if (p < size && s[p] == '.') {
        Py_ssize_t fraction = 0;
        for (p++; p < size && is_digit(s[p]); p++) fraction++;
        if (fraction == 0) return -1;
        digits += fraction;
        *integer = 0;
    }
    if (p < size && (s[p] == 'e' || s[p] == 'E')) {
        Py_ssize_t exponent = 0;
        p++;
        if (p < size && (s[p] == '+' || s[p] == '-')) p++;
        for (; p < size && is_digit(s[p]); p++) exponent++;
        if (exponent == 0 || exponent > 2) return -1;
        *integer = 0;
    }
    return digits > (*integer ? 18 : 30) ? -1 : p;
}

/* 1 where the object at `p` (its '{') is a flow whose text the decoder takes, its category aside (its end
 * in *end, its cat and ph in *cat and *ph, *cat_size and *ph_size long), else 0. */
static int flow_object(const char *s, Py_ssize_t p, Py_ssize_t size, Py_ssize_t *end,
                       const char **cat, Py_ssize_t *cat_size, const char **ph, Py_ssize_t *ph_size) {
    int seen = 0;
    *cat = "";
    *cat_size = 0;
    *ph = NULL;
    for (p++;;) {
        while (p < size && is_space(s[p])) p++;
        if (p >= size || s[p] != '"') return 0; /* an empty object has no ph: not a flow */
        Py_ssize_t key_end = plain_string(s, p, size);
        if (key_end < 0) return 0;
        int key = event_key(s + p + 1, key_end - p - 2);
        if (key == KEY_COUNT || seen & (1 << key)) return 0;
        seen |= 1 << key;
        for (p = key_end; p < size && is_space(s[p]); p++) {}
        if (p >= size || s[p] != ':') return 0;
        for (p++; p < size && is_space(s[p]); p++) {}
        if (p >= size) return 0;
        Py_ssize_t value = p;
        int kind, integer = 0;
        if (s[p] == '"') {
            p = plain_string(s, p, size);
            kind = V_STRING;
        } else if (size - p >= 4 && memcmp(s + p, "null", 4) == 0) {
            p += 4;
            kind = V_NULL;
        } else if (size - p >= 4 && memcmp(s + p, "true", 4) == 0) {
            p += 4;
            kind = V_BOOL;
        } else if (size - p >= 5 && memcmp(s + p, "false", 5) == 0) {
            p += 5;
            kind = V_BOOL;
        } else {
            p = plain_number(s, p, size, &integer);
            kind = integer ? V_INTEGER : V_NUMBER;
        }
        if (p < 0 || !(key_takes[key] & kind)) return 0;
        if (key == K_CAT) {
            *cat = s + value + 1;
            *cat_size = p - value - 2;
        } else if (key == K_PH) {
            *ph = s + value + 1;
            *ph_size = p - value - 2;
            if (*ph_size != 1 || (**ph != 's' && **ph != 'f' && **ph != 't')) return 0; /* most events: found first */
        }
        while (p < size && is_space(s[p])) p++;
        if (p < size && s[p] == ',') {
            p++;
            continue;
        }
        if (p >= size || s[p] != '}') return 0;
        *end = p + 1;
        break;
    }
    return *ph != NULL; /* its phase checked when read */
}

/* 1 where `cat` (`size` bytes) is one of `categories` (bytes). */
static int known_category(PyObject *categories, const char *cat, Py_ssize_t size) {
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(categories); k++) {
        PyObject *known = PyTuple_GET_ITEM(categories, k);
        if (PyBytes_GET_SIZE(known) == size && memcmp(PyBytes_AS_STRING(known), cat, size) == 0) return 1;
    }
    return 0;
}

/* A kind of flow left out, and how many. */
typedef struct {
    const char *cat;
    Py_ssize_t cat_size;
    char ph;
    Py_ssize_t count;
} FlowKind;
#define MAX_FLOW_KINDS 32 /* a trace has two or three (ac2g, fwdbwd): flows of more kinds are kept */

static PyObject *flow_counts(const FlowKind *kinds, int count) {
    PyObject *counts = PyDict_New();
    for (int k = 0; counts != NULL && k < count; k++) {
        PyObject *key = Py_BuildValue("(s#s#)", kinds[k].cat, kinds[k].cat_size, &kinds[k].ph, (Py_ssize_t)1);
        PyObject *value = key ? PyLong_FromSsize_t(kinds[k].count) : NULL;
        if (value == NULL || PyDict_SetItem(counts, key, value) < 0) Py_CLEAR(counts);
        Py_XDECREF(key);
        Py_XDECREF(value);
    }
    return counts;
}

/* Appends the items kept since the last flow, s[start:end] (their separators as they were), to `to`. */
static void flush_run(char *to, Py_ssize_t *written, const char *s, Py_ssize_t start, Py_ssize_t end) {
    if (start < 0) return;
    if (*written > 1) to[(*written)++] = ',';
    memcpy(to + *written, s + start, end - start);
    *written += end - start;
}

static PyObject *without_flows(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *piece, *categories, *result = NULL, *out = NULL;
    Py_buffer text;
    if (!PyArg_ParseTuple(args, "OO!", &piece, &PyTuple_Type, &categories)) return NULL;
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(categories); k++) {
        if (!PyBytes_Check(PyTuple_GET_ITEM(categories, k))) {
            PyErr_SetString(PyExc_TypeError, "without_flows: the categories come as a tuple of bytes");
            return NULL;
        }
    }
    if (PyObject_GetBuffer(piece, &text, PyBUF_SIMPLE) < 0) return NULL;
    const char *s = text.buf;
    Py_ssize_t size = text.len, p = 0, written = 0;
    Py_ssize_t run_start = -1, run_end = -1; /* the items kept since the last flow left out */
    FlowKind kinds[MAX_FLOW_KINDS];
    int kind_count = 0;
    char *to = NULL;
    while (p < size && is_space(s[p])) p++;
    if (p >= size || s[p] != '[') goto none;
    for (p++; p < size && is_space(s[p]); p++) {}
    if (p < size && s[p] == ']') {
        for (p++; p < size && is_space(s[p]); p++) {}
        if (p == size) goto keep;
        goto none;
    }
    while (p < size) {
        Py_ssize_t start = p, end = -1, cat_size = 0, ph_size = 0;
        const char *cat = NULL, *ph = NULL;
        int flow = s[p] == '{' && flow_object(s, p, size, &end, &cat, &cat_size, &ph, &ph_size);
        int kind = 0;
        if (flow) { /* a kind seen before has a known category */
            for (; kind < kind_count; kind++)
                if (kinds[kind].ph == *ph && kinds[kind].cat_size == cat_size && memcmp(kinds[kind].cat, cat, cat_size) == 0)
                    break;
            if (kind == kind_count && kind_count < MAX_FLOW_KINDS && known_category(categories, cat, cat_size))
                kinds[kind_count++] = (FlowKind){cat, cat_size, *ph, 0};
            flow = kind < kind_count;
        }
        if (!flow && (end = item_end(s, p, size)) <= start) goto none; /* no item: "[,", ",,", ",]" */
        for (p = end; p < size && is_space(s[p]); p++) {}
        if (p >= size || (s[p] != ',' && s[p] != ']')) goto none;
        if (flow) {
            kinds[kind].count++;
            if (to == NULL) { /* the first flow: the text to write is known to be shorter than this */
                if ((out = PyByteArray_FromStringAndSize(NULL, size)) == NULL) goto done;
                to = PyByteArray_AS_STRING(out);
                to[written++] = '[';
            }
            flush_run(to, &written, s, run_start, run_end);
            run_start = -1;
        } else {
            if (run_start < 0) run_start = start;
            run_end = end;
        }
        if (s[p] == ']') break;
        for (p++; p < size && is_space(s[p]); p++) {}
    }
    if (p >= size) goto none;
    for (p++; p < size && is_space(s[p]); p++) {}
    if (p != size) goto none;
    if (kind_count == 0) goto keep;
    flush_run(to, &written, s, run_start, run_end);
    to[written++] = ']';
    if (PyByteArray_Resize(out, written) < 0) goto done;
    PyObject *counts = flow_counts(kinds, kind_count);
    if (counts != NULL) result = Py_BuildValue("(ON)", out, counts);
    goto done;
keep:
    result = Py_BuildValue("(ON)", piece, PyDict_New());
    goto done;
none:
    result = Py_NewRef(Py_None);
done:
    Py_XDECREF(out);
    PyBuffer_Release(&text);
    return result;
}

static PyMethodDef methods[] = {
    {"find_array", find_array, METH_VARARGS, "The offsets of a top-level key and of its array's first item."},
    {"items_end", items_end, METH_VARARGS, "The end of an array's complete items, and whether it closed."},
    {"object_items_end", object_items_end, METH_O, "A likely boundary between objects, from the end, or -1."},
    {"without_flows", without_flows, METH_VARARGS, "A piece of the event list without its flows, and their counts."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_json_scan", NULL, -1, methods};

PyMODINIT_FUNC PyInit__json_scan(void) {
    for (const char *c = "\"{}[]"; *c; c++) structural[(unsigned char)*c] = 1;
    string_stop['"'] = string_stop['\\'] = 1;
    return PyModule_Create(&module);
}
