/*
 * What the parts of chakra._host_record share (_host_record.c: a node's attrs and IO lists, and the nodes
 * of msgspec's records; _host_json.c: strings, integers and whole values read from JSON text;
 * _host_scan.c: the nodes read straight from a trace's text): the scanner of JSON text, the values it
 * reads, and the making of a node from a record's parts.
 */
#ifndef CHAKRA_HOST_RECORD_H
#define CHAKRA_HOST_RECORD_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "_text_cache.h"

#define MAX_CORE 16
/* Deepest nesting of arrays and objects read or skipped here (msgspec reads deeper text, and names
 * what it holds). */
#define MAX_NESTING 256

typedef struct {
    const char *p;
    const char *end;
} Scan;

/* A span of JSON text. */
typedef struct {
    const char *p;
    Py_ssize_t len;
} Text;

/* Inlined: the scans call these for every byte of structure (a third of the time otherwise). */
static inline __attribute__((always_inline)) void skip_space(Scan *s) {
    while (s->p < s->end && (*s->p == ' ' || *s->p == '\n' || *s->p == '\r' || *s->p == '\t')) s->p++;
}

static inline __attribute__((always_inline)) int take(Scan *s, char c) {
    skip_space(s);
    if (s->p < s->end && *s->p == c) {
        s->p++;
        return 1;
    }
    return 0;
}

static inline int key_is(const char *text, Py_ssize_t len, const char *key) {
    return (size_t)len == strlen(key) && memcmp(text, key, (size_t)len) == 0;
}

/* Whether [from, from + len) is ASCII: text that is not is left to msgspec, which reads what it holds. */
static inline int ascii_only(const char *from, Py_ssize_t len) {
    for (Py_ssize_t i = 0; i < len; i++)
        if ((unsigned char)from[i] >= 0x80) return 0;
    return 1;
}

typedef struct {
    const char *utf8[MAX_CORE];
    Py_ssize_t len[MAX_CORE];
    PyObject *value[MAX_CORE]; /* the borrowed default, or the value read (owned: marked in `set`) */
    Py_ssize_t count;
} Core;

/* The values already made, by their text: IO lists' shapes, types and strides (`io_texts`), names and
 * string attributes (`names`), the dicts of the other attributes (`extras_by_text`, by the text of
 * those attributes, each followed by a NUL). Kept from one call to the next of a trace read a block at
 * a time (text_tables() gives them as a capsule), with the same dicts that share the values. */
typedef struct {
    TextCache io_texts, names, extras_by_text;
} TextTables;

/* What making nodes needs: the core attributes and their defaults, the dicts that share equal values,
 * the node and IO list types, and the node's keywords; the tables of values by their text (`tables`:
 * the caller's, or `own`); and the text of a node's other attributes, gathered in `key` while its
 * attrs are read. */
typedef struct {
    Core core;
    PyObject *fallback[MAX_CORE]; /* what a missing core attribute means, borrowed from the defaults */
    PyObject *defaults, *extras, *texts, *strings, *node_type, *io_type, *kwnames;
    TextTables own, *tables;
    char *key;
    size_t key_len, key_cap;
} Records;

/* Fills `r` for the arguments (defaults, extras, texts, strings, node_type, io_type) already in it: 0,
 * or -1 (set). records_close releases what it made, also after a failure. */
int records_open(Records *r);
void records_close(Records *r);

/* _host_json.c. A string without escapes or control characters (names, keys): its UTF-8 span. 0 when it
 * is not one. */
int string_span(Scan *s, const char **start, Py_ssize_t *len);
/* An integer of at most 64 bits (JSON: no leading zeros), as a new int; NULL otherwise (an error set
 * only when memory ran out). */
PyObject *integer(Scan *s);
/* A string value as a new str: escapes other than \uXXXX undone; NULL otherwise (an error set only when
 * memory ran out). */
PyObject *string_value(Scan *s);
/* string_value, the str given from r->strings (one object for equal strings) and found by its text in
 * r->names where it was read before. */
PyObject *shared_string_value(Records *r, Scan *s);
/* Past one JSON value: 0 at its end, -1 where the text is not one. Without `strict` the text is one
 * msgspec has checked; with it, it is checked here, and strings holding \u escapes or bytes past ASCII
 * are refused too (msgspec settles those). */
int skip_value(Scan *s, int depth, int strict);

/* A node made from its record's parts as they are read: parts_begin, then parts_attrs (the attrs list) and
 * parts_io (`inputs` as 0, `outputs` as 1) at most once each, each reading the value at s->p and moving
 * past it (1 read, 0 a form left to Python, -1 an error set), then parts_node (new reference, NULL on
 * error; a part not read is missing); parts_end always. With `strict`, the IO lists' text is checked
 * as skip_value checks it. */
typedef struct {
    Records *r;
    int set[MAX_CORE]; /* the core values read (owned by r->core.value) */
    PyObject *others;  /* the other attributes' (name, value) pairs */
    PyObject *extras;  /* their dict, when found by their text */
    uint64_t key_hash; /* of r->key, when they were read from it (their dict is kept for it) */
    int keyed;
    PyObject *io[2];
} NodeParts;
int parts_begin(NodeParts *n, Records *r);
int parts_attrs(NodeParts *n, Scan *s);
int parts_io(NodeParts *n, int which, Scan *s, int strict);
PyObject *parts_node(NodeParts *n, PyObject *id, PyObject *name, PyObject *parent);
void parts_end(NodeParts *n);

/* _host_scan.c */
PyObject *grouped_nodes(PyObject *self, PyObject *args);
PyObject *text_tables(PyObject *self, PyObject *unused);
/* The tables a text_tables() capsule holds (NULL, set, for another object); Py_None: NULL, none set. */
TextTables *tables_of(PyObject *capsule);

#endif
