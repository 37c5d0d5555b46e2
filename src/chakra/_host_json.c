/*
 * chakra._host_record's reading of JSON text (see _host_record.h): the strings, integers and escapes of
 * a host trace's records, and whole values skipped, as text msgspec has checked or checked here.
 */
#include "_host_record.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

/* The first byte from p that a string's text cannot hold as it is (a quote, backslash or control byte;
 * with `ascii_only`, also one past ASCII), or `end`. Sixteen bytes at a time where SSE2 is there: the
 * texts of a host trace are a third of its bytes, and a byte at a time was a sixth of reading it. */
static inline const char *special_byte(const char *p, const char *end, int ascii_only) {
#if defined(__SSE2__) && defined(__GNUC__)
    const __m128i quote = _mm_set1_epi8('"'), backslash = _mm_set1_epi8('\\'), last_control = _mm_set1_epi8(0x1F);
    for (; end - p >= 16; p += 16) {
        __m128i v = _mm_loadu_si128((const __m128i *)p);
        __m128i hit = _mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, backslash));
        hit = _mm_or_si128(hit, _mm_cmpeq_epi8(_mm_max_epu8(v, last_control), last_control)); /* v <= 0x1F */
        int mask = _mm_movemask_epi8(hit) | (ascii_only ? _mm_movemask_epi8(v) : 0);       /* v >= 0x80 */
        if (mask) return p + __builtin_ctz((unsigned)mask);
    }
#endif
    for (; p < end; p++) {
        unsigned char c = (unsigned char)*p;
        if (c == '"' || c == '\\' || c < 0x20 || (ascii_only && c >= 0x80)) break;
    }
    return p;
}

int string_span(Scan *s, const char **start, Py_ssize_t *len) {
    if (!take(s, '"')) return 0;
    const char *from = s->p, *p = special_byte(from, s->end, 0);
    if (p >= s->end || *p != '"') return 0;
    *start = from;
    *len = p - from;
    s->p = p + 1;
    return 1;
}

PyObject *integer(Scan *s) {
    const char *p = s->p;
    int negative = p < s->end && *p == '-';
    if (negative) p++;
    const char *digits = p;
    uint64_t value = 0;
    while (p < s->end && *p >= '0' && *p <= '9') {
        unsigned d = (unsigned)(*p - '0');
        if (value > (UINT64_MAX - d) / 10) return NULL;
        value = value * 10 + d;
        p++;
    }
    size_t n = (size_t)(p - digits);
    if (n == 0 || (n > 1 && *digits == '0')) return NULL;
    if (p < s->end && (*p == '.' || *p == 'e' || *p == 'E')) return NULL; /* a float */
    s->p = p;
    if (!negative) return PyLong_FromUnsignedLongLong(value);
    if (value > (uint64_t)INT64_MAX + 1) return NULL;
    return PyLong_FromLongLong(value == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)value);
}

/* The escapes read here, each with the character it stands for (\uXXXX is left to msgspec). */
static char unescaped(char c) {
    switch (c) {
    case '"': return '"';
    case '\\': return '\\';
    case '/': return '/';
    case 'b': return '\b';
    case 'f': return '\f';
    case 'n': return '\n';
    case 'r': return '\r';
    case 't': return '\t';
    default: return 0;
    }
}

PyObject *string_value(Scan *s) {
    const char *from = ++s->p; /* after the opening quote */
    int escaped = 0;
    while (s->p < s->end && *s->p != '"') {
        unsigned char c = (unsigned char)*s->p;
        if (c < 0x20) return NULL;
        if (c == '\\') {
            if (s->p + 1 >= s->end || !unescaped(s->p[1])) return NULL;
            escaped = 1;
            s->p++;
        }
        s->p++;
    }
    if (s->p >= s->end) return NULL;
    Py_ssize_t len = s->p - from;
    s->p++;
    PyObject *str;
    if (!escaped) {
        str = PyUnicode_DecodeUTF8(from, len, NULL);
    } else {
        char *text = PyMem_Malloc((size_t)len);
        if (!text) return PyErr_NoMemory();
        Py_ssize_t n = 0;
        for (const char *p = from; p < from + len; p++) text[n++] = *p == '\\' ? unescaped(*++p) : *p;
        str = PyUnicode_DecodeUTF8(text, n, NULL);
        PyMem_Free(text);
    }
    if (!str) PyErr_Clear(); /* not UTF-8: msgspec names the error */
    return str;
}


/* Bytes a checked string's text holds as they are: not a quote, backslash, control byte or past ASCII. */
static const char *plain_end(const char *p, const char *end) { return special_byte(p, end, 1); }

static inline int is_digit(const char *p, const char *end) { return p < end && *p >= '0' && *p <= '9'; }

/* Past a number as JSON writes it at p: where it ends, NULL if it is not one. */
static const char *checked_number(const char *p, const char *end) {
    if (p < end && *p == '-') p++;
    if (!is_digit(p, end)) return NULL;
    if (*p++ != '0')
        while (is_digit(p, end)) p++;
    if (p < end && *p == '.') {
        if (!is_digit(++p, end)) return NULL;
        while (is_digit(p, end)) p++;
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        p++;
        if (p < end && (*p == '+' || *p == '-')) p++;
        if (!is_digit(p, end)) return NULL;
        while (is_digit(p, end)) p++;
    }
    return p;
}

/* Past a string at p (its opening quote) whose text is checked here: where it ends, NULL if refused. */
static const char *checked_string(const char *p, const char *end) {
    for (p++;;) {
        p = plain_end(p, end);
        if (p >= end) return NULL;
        if (*p == '"') return p + 1;
        if (*p != '\\' || p + 1 >= end || !unescaped(p[1])) return NULL;
        p += 2;
    }
}

static inline const char *past_space(const char *p, const char *end) {
    while (p < end && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t')) p++;
    return p;
}

/* skip_value's `strict` form, a loop over the text with a stack of the arrays and objects open. */
static int skip_checked(Scan *s) {
    char open[MAX_NESTING];
    int depth = 0;
    const char *p = s->p, *end = s->end;
value:
    p = past_space(p, end);
    if (p >= end) return -1;
    switch (*p) {
    case '"':
        if (!(p = checked_string(p, end))) return -1;
        break;
    case '[':
    case '{': {
        char kind = *p;
        p = past_space(p + 1, end);
        if (p < end && *p == (kind == '[' ? ']' : '}')) {
            p++;
            break;
        }
        if (depth == MAX_NESTING) return -1;
        open[depth++] = kind;
        if (kind == '[') goto value;
        goto key;
    }
    case 't':
    case 'f':
    case 'n': {
        const char *word = *p == 't' ? "true" : *p == 'f' ? "false" : "null";
        size_t n = strlen(word);
        if ((size_t)(end - p) < n || memcmp(p, word, n) != 0) return -1;
        p += n;
        break;
    }
    default:
        if (!(p = checked_number(p, end))) return -1;
    }
next:
    if (depth == 0) {
        s->p = p;
        return 0;
    }
    p = past_space(p, end);
    if (p < end && *p == ',') {
        p++;
        if (open[depth - 1] == '[') goto value;
        goto key;
    }
    if (p < end && *p == (open[depth - 1] == '[' ? ']' : '}')) {
        p++;
        depth--;
        goto next;
    }
    return -1;
key:
    p = past_space(p, end);
    if (p >= end || *p != '"' || !(p = checked_string(p, end))) return -1;
    p = past_space(p, end);
    if (p >= end || *p != ':') return -1;
    p++;
    goto value;
}

int skip_value(Scan *s, int depth, int strict) {
    if (strict) return skip_checked(s);
    skip_space(s);
    if (s->p >= s->end || depth > MAX_NESTING) return -1;
    char c = *s->p;
    if (c == '"') {
        for (const char *p = s->p + 1;; p++) { /* to the first quote after an even run of backslashes */
            const char *close = memchr(p, '"', (size_t)(s->end - p));
            if (close == NULL) return -1;
            const char *q = close;
            while (q > p && q[-1] == '\\') q--;
            p = close;
            if ((close - q) % 2 == 0) {
                s->p = close + 1;
                return 0;
            }
        }
    }
    if (c == '[' || c == '{') {
        char close = c == '[' ? ']' : '}';
        s->p++;
        if (take(s, close)) return 0;
        do {
            if (c == '{' && (skip_value(s, depth + 1, 0) < 0 || !take(s, ':'))) return -1;
            if (skip_value(s, depth + 1, 0) < 0) return -1;
        } while (take(s, ','));
        return take(s, close) ? 0 : -1;
    }
    const char *start = s->p; /* a number, true, false or null: up to the next delimiter */
    while (s->p < s->end && *s->p != ',' && *s->p != ']' && *s->p != '}' && *s->p != ' ' && *s->p != '\n' &&
           *s->p != '\r' && *s->p != '\t')
        s->p++;
    return s->p > start ? 0 : -1;
}

