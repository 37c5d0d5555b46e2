/* Python's str() of JSON text, for chakra._encode (see _json_repr.h). */
#include "_json_repr.h"

#include <stdio.h>
#include <string.h>

#define REPR_MAX_INT_DIGITS 18

typedef struct {
    const char *p;
    const char *end;
} Json;

/* 1: written; 0: a form left to Python; -1: an error (set). */
static int repr_value(Json *j, Buf *out, int depth);

static void skip_space(Json *j) {
    while (j->p < j->end && (*j->p == ' ' || *j->p == '\n' || *j->p == '\r' || *j->p == '\t')) j->p++;
}

static int repr_string(Json *j, Buf *out) {
    const char *start = ++j->p; /* after the opening quote */
    while (j->p < j->end && *j->p != '"') {
        unsigned char c = (unsigned char)*j->p;
        if (c == '\\' || c == '\'' || c < 0x20 || c >= 0x7f) return 0;
        j->p++;
    }
    if (j->p >= j->end) return 0;
    size_t len = (size_t)(j->p - start);
    j->p++; /* the closing quote */
    if (buf_put_byte(out, '\'') < 0 || buf_put_bytes(out, start, len) < 0 || buf_put_byte(out, '\'') < 0) return -1;
    return 1;
}

static int repr_number(Json *j, Buf *out) {
    const char *start = j->p;
    int is_float = 0, digits = 0;
    if (j->p < j->end && *j->p == '-') j->p++;
    while (j->p < j->end) {
        char c = *j->p;
        if (c >= '0' && c <= '9') {
            digits++;
        } else if (c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-') {
            is_float = 1;
        } else {
            break;
        }
        j->p++;
    }
    size_t len = (size_t)(j->p - start);
    if (digits == 0 || len > 64) return 0;
    if (!is_float) {
        if (digits > REPR_MAX_INT_DIGITS) return 0;
        const char *first = start + (*start == '-');
        int canonical = (*first != '0' || digits == 1) && !(*start == '-' && *first == '0');
        if (canonical) return buf_put_bytes(out, start, len) < 0 ? -1 : 1; /* str(int) is the same digits */
    }
    char text[65];
    memcpy(text, start, len);
    text[len] = '\0';
    if (!is_float) {
        long long value = strtoll(text, NULL, 10);
        char printed[32];
        int n = snprintf(printed, sizeof printed, "%lld", value);
        return buf_put_bytes(out, printed, (size_t)n) < 0 ? -1 : 1;
    }
    char *after = NULL;
    double value = PyOS_string_to_double(text, &after, NULL);
    if (value == -1.0 && PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    if (after != text + len || !isfinite(value)) return 0;
    char *printed = PyOS_double_to_string(value, 'r', 0, Py_DTSF_ADD_DOT_0, NULL);
    if (!printed) return -1;
    int rc = buf_put_bytes(out, printed, strlen(printed)) < 0 ? -1 : 1;
    PyMem_Free(printed);
    return rc;
}

static int repr_word(Json *j, Buf *out, const char *word, const char *python) {
    size_t n = strlen(word);
    if ((size_t)(j->end - j->p) < n || memcmp(j->p, word, n) != 0) return 0;
    j->p += n;
    return buf_put_bytes(out, python, strlen(python)) < 0 ? -1 : 1;
}

/* The items of a list, after its opening bracket, up to and including the closing one. */
static int repr_list(Json *j, Buf *out, int depth) {
    if (buf_put_byte(out, '[') < 0) return -1;
    skip_space(j);
    if (j->p < j->end && *j->p == ']') {
        j->p++;
        return buf_put_byte(out, ']') < 0 ? -1 : 1;
    }
    for (;;) {
        int rc = repr_value(j, out, depth + 1);
        if (rc != 1) return rc;
        skip_space(j);
        if (j->p >= j->end) return 0;
        if (*j->p == ']') {
            j->p++;
            return buf_put_byte(out, ']') < 0 ? -1 : 1;
        }
        if (*j->p != ',') return 0;
        j->p++;
        if (buf_put_bytes(out, ", ", 2) < 0) return -1;
    }
}

static int repr_value(Json *j, Buf *out, int depth) {
    if (depth > MAX_DEPTH) return 0;
    skip_space(j);
    if (j->p >= j->end) return 0;
    switch (*j->p) {
    case '[': j->p++; return repr_list(j, out, depth);
    case '{': return 0; /* a dict: duplicate keys and their order are Python's to settle */
    case '"': return depth > 0 ? repr_string(j, out) : 0; /* str() of a bare string is not its repr */
    case 't': return repr_word(j, out, "true", "True");
    case 'f': return repr_word(j, out, "false", "False");
    case 'n': return repr_word(j, out, "null", "None");
    default: return repr_number(j, out);
    }
}

static inline const char *after_space(const char *p, const char *end) {
    while (p < end && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t')) p++;
    return p;
}

/* The common forms in one pass, writing into room reserved once (the text grows at most twofold: a
 * comma gains a space): lists, true/false/null, integers written as they are (at most 18 digits, no
 * leading zero, not -0) and strings of printable ASCII without quotes or escapes, inside a list. 1:
 * written; 0: another form (a float, a dict, ...), for repr_value, which writes or refuses every
 * form; -1: no memory. Whatever it writes, repr_value writes the same for the same text. */
static int repr_simple(const char *p, const char *end, Buf *out) {
    if (buf_reserve(out, 2 * (size_t)(end - p) + 2) < 0) return -1;
    char *w = (char *)out->data + out->len;
    int depth = 0;
    for (;;) {
        p = after_space(p, end); /* a value */
        if (p >= end) return 0;
        char c = *p;
        if (c == '[') {
            if (++depth > MAX_DEPTH) return 0;
            *w++ = '[';
            p = after_space(p + 1, end);
            if (p < end && *p == ']') {
                *w++ = ']';
                p++;
                depth--;
            } else {
                continue;
            }
        } else if (c == '"') {
            if (depth == 0) return 0; /* str() of a bare string is not its repr */
            const char *start = ++p;
            while (p < end && *p != '"') {
                unsigned char k = (unsigned char)*p;
                if (k == '\\' || k == '\'' || k < 0x20 || k >= 0x7f) return 0;
                p++;
            }
            if (p >= end) return 0;
            *w++ = '\'';
            memcpy(w, start, (size_t)(p - start));
            w += p - start;
            *w++ = '\'';
            p++;
        } else if (c == 't' || c == 'f' || c == 'n') {
            const char *word = c == 't' ? "true" : c == 'f' ? "false" : "null";
            const char *python = c == 't' ? "True" : c == 'f' ? "False" : "None";
            size_t n = strlen(word);
            if ((size_t)(end - p) < n || memcmp(p, word, n) != 0) return 0;
            memcpy(w, python, n);
            w += n;
            p += n;
        } else {
            const char *start = p;
            if (*p == '-') p++;
            const char *digits = p;
            while (p < end && *p >= '0' && *p <= '9') p++;
            Py_ssize_t count = p - digits;
            if (count == 0 || count > REPR_MAX_INT_DIGITS || (*digits == '0' && (count > 1 || digits != start)))
                return 0; /* not an integer written as Python writes it */
            if (p < end && (*p == '.' || *p == 'e' || *p == 'E' || *p == '+' || *p == '-')) return 0; /* a float */
            memcpy(w, start, (size_t)(p - start));
            w += p - start;
        }
        for (;;) { /* after a value: the end, or the list's next item or its end */
            p = after_space(p, end);
            if (depth == 0) {
                if (p != end) return 0;
                out->len = (size_t)(w - (char *)out->data);
                return 1;
            }
            if (p >= end) return 0;
            if (*p == ',') {
                *w++ = ',';
                *w++ = ' ';
                p++;
                break;
            }
            if (*p != ']') return 0;
            *w++ = ']';
            p++;
            depth--;
        }
    }
}

/* Python's str() of the JSON text into `out`: 1 written, 0 a form left to Python, -1 an error (set). */
int repr_json(const char *data, Py_ssize_t len, Buf *out) {
    size_t kept = out->len;
    int simple = repr_simple(data, data + len, out);
    if (simple != 0) return simple;
    out->len = kept;
    Json j = {data, data + len};
    int rc = repr_value(&j, out, 0);
    if (rc == 1) {
        skip_space(&j);
        if (j.p != j.end) rc = 0; /* text after the value: not a value Python would have parsed */
    }
    return rc;
}

