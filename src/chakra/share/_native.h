/*
 * chakra.share._native: the anonymizer's hot paths in C, shared between its two files.
 *
 *   _fingerprints.c  Fingerprints: a set of strings kept as 64-bit hashes (not the strings), and the
 *                    search for every one of them in a buffer at once (the leakage check);
 *   _rewrite.c       Rewriter: Node records rewritten field by field by the rules of a Python plan
 *                    (chakra.share.rules), the strings of the input added to a Fingerprints as they go;
 *                    its attributes in _rewrite_attrs.c, their shared parts in _rewrite.h.
 */
#ifndef CHAKRA_SHARE_NATIVE_H
#define CHAKRA_SHARE_NATIVE_H

#include "../_wire.h"

/* One distinct string: its hash and length (len 0: an empty slot). `mark` is the search that last
 * reported it, so that a search reports each string once. */
typedef struct {
    uint64_t hash;
    uint32_t len;
    uint32_t mark;
} StringSlot;

/* The first `klen` bytes of some strings (all of a string shorter than 8 bytes), and the lengths of
 * the strings that start with them (a chain of Links). klen 0: an empty slot. */
typedef struct {
    uint64_t key;
    uint32_t klen;
    int32_t head;
} KeySlot;

typedef struct {
    uint32_t len;
    int32_t next;
} Link;

/* A string added for later: its bytes (readable until the set is flushed) and hash. */
typedef struct {
    const uint8_t *s;
    size_t n;
    uint64_t hash;
} Pending;

/* Strings held back before they are put in the tables, so that the memory their slots are in is
 * fetched meanwhile (the tables of a large input do not fit a cache: an insertion waits for memory). */
#define PENDING_STRINGS 16

typedef struct {
    PyObject_HEAD
    int exact;           /* every string added as it is (generated strings), no key index */
    StringSlot *strings; /* open addressing, a power of two of slots */
    size_t strings_cap, count;
    KeySlot *keys;
    size_t keys_cap, keys_count;
    Link *links;
    size_t links_len, links_cap;
    uint64_t *prefilter; /* a bit per hash of a string's first four bytes */
    uint32_t klens;      /* bit k: some key is k bytes long */
    size_t max_len;
    Pending pending[PENDING_STRINGS];
    int pending_count;
} Fingerprints;

extern PyTypeObject FingerprintsType;
extern PyTypeObject RewriterType;

/* The hash the set keys strings by (the same for adding and for searching). */
uint64_t fp_hash(const uint8_t *s, size_t n);
/* Add one string of the input: skipped when 3 bytes or shorter or only the characters of numbers
 * (unless the set is exact). 0, or -1 with MemoryError set. */
int fp_add(Fingerprints *fp, const uint8_t *s, size_t n);
/* fp_add, later: the bytes must stay readable until fp_flush, which every reader of the set calls. */
int fp_add_soon(Fingerprints *fp, const uint8_t *s, size_t n);
/* Put every string added for later in the tables. 0, or -1 with MemoryError set. */
int fp_flush(Fingerprints *fp);
/* Whether the set holds exactly these bytes. */
int fp_contains(const Fingerprints *fp, const uint8_t *s, size_t n);
/* The module function first_start (see _rewrite.c). */
PyObject *first_start(PyObject *self, PyObject *args);

#endif /* CHAKRA_SHARE_NATIVE_H */
