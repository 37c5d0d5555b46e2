/*
 * A table from spans of text to the objects made of them, looked up without making an object of the span:
 * a host trace repeats the same shapes, types, schemas and attribute lists tens of thousands of times,
 * and making a bytes or str of each only to find the equal one in a dict was a third of reading it.
 * The text is copied in; the table holds a reference to each value. Equal text gives the value made of
 * it the first time, so only text whose reading depends on nothing else belongs here.
 */
#ifndef CHAKRA_TEXT_CACHE_H
#define CHAKRA_TEXT_CACHE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* Entries kept at most: bounds a trace of ever new texts (a model's step repeats a few hundred). */
#define TEXT_CACHE_MAX_ENTRIES (1 << 16)

typedef struct {
    uint64_t hash;
    Py_ssize_t len;
    char *text;      /* NULL: an empty slot */
    PyObject *value; /* owned */
} TextSlot;

typedef struct {
    TextSlot *slots;
    size_t mask; /* slot count - 1, a power of two minus one; 0 before the first put */
    size_t used;
    size_t limit; /* entries kept at most: 0 for TEXT_CACHE_MAX_ENTRIES (a table that must hold every text
                     it is given sets its own) */
} TextCache;

static inline uint64_t text_hash(const char *p, Py_ssize_t n) {
    uint64_t h = 0x9E3779B97F4A7C15ull ^ (uint64_t)n;
    for (; n >= 8; p += 8, n -= 8) {
        uint64_t word;
        memcpy(&word, p, 8);
        h = (h ^ word) * 0xbf58476d1ce4e5b9ull;
        h ^= h >> 31;
    }
    uint64_t tail = 0;
    memcpy(&tail, p, (size_t)n);
    h = (h ^ tail) * 0x94d049bb133111ebull;
    return h ^ (h >> 29);
}

/* The value kept for the text (borrowed), NULL when there is none. */
static inline PyObject *text_cache_get(const TextCache *c, const char *p, Py_ssize_t n, uint64_t hash) {
    if (!c->slots) return NULL;
    for (size_t at = hash & c->mask; c->slots[at].text; at = (at + 1) & c->mask) {
        const TextSlot *slot = &c->slots[at];
        if (slot->hash == hash && slot->len == n && memcmp(slot->text, p, (size_t)n) == 0) return slot->value;
    }
    return NULL;
}

static inline void text_cache_clear(TextCache *c) {
    for (size_t at = 0; c->slots && at <= c->mask; at++) {
        PyMem_Free(c->slots[at].text);
        Py_XDECREF(c->slots[at].value);
    }
    PyMem_Free(c->slots);
    size_t limit = c->limit;
    memset(c, 0, sizeof *c);
    c->limit = limit;
}

/* Keeps `value` for the text (absent from the table): 0, or -1 when memory ran out (set). A full table
 * (see `limit`) keeps nothing more, which only costs speed. */
static inline int text_cache_put(TextCache *c, const char *p, Py_ssize_t n, uint64_t hash, PyObject *value) {
    if (c->used >= (c->limit ? c->limit : TEXT_CACHE_MAX_ENTRIES)) return 0;
    if (2 * (c->used + 1) > c->mask + 1 || !c->slots) { /* at most half full */
        size_t size = c->slots ? 2 * (c->mask + 1) : 64;
        TextSlot *slots = PyMem_Calloc(size, sizeof *slots);
        if (!slots) {
            PyErr_NoMemory();
            return -1;
        }
        for (size_t at = 0; c->slots && at <= c->mask; at++) {
            if (!c->slots[at].text) continue;
            size_t to = c->slots[at].hash & (size - 1);
            while (slots[to].text) to = (to + 1) & (size - 1);
            slots[to] = c->slots[at];
        }
        PyMem_Free(c->slots);
        c->slots = slots;
        c->mask = size - 1;
    }
    char *copy = PyMem_Malloc(n ? (size_t)n : 1);
    if (!copy) {
        PyErr_NoMemory();
        return -1;
    }
    memcpy(copy, p, (size_t)n);
    size_t at = hash & c->mask;
    while (c->slots[at].text) at = (at + 1) & c->mask;
    c->slots[at] = (TextSlot){hash, n, copy, Py_NewRef(value)};
    c->used++;
    return 0;
}

#endif
