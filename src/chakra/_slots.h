/*
 * Attributes read and written through the slots of the objects that have them (msgspec structs, slotted
 * classes), for the C passes over a trace's events or a conversion's items: a million getattr calls
 * look the name up in the type's dictionaries a million times; the slot's offset is found once per type.
 * Names must be interned strings (the cache compares them by identity). Each module including this has
 * its own cache.
 */
#ifndef CHAKRA_SLOTS_H
#define CHAKRA_SLOTS_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

/* Where a type keeps an attribute: the offset of its slot where it is a plain object member (a msgspec
 * struct's fields are), else -1 (read through getattr). Reading the slot is what getattr does for such
 * a member, without the lookup of the name in the type's dictionaries at each of a million reads. */
typedef struct {
    PyTypeObject *type;
    PyObject *name;
    Py_ssize_t offset;
} Slot;

/* An open-addressed table keyed by (type, name): a pass reads a dozen attributes of a few types for every
 * one of a million objects, and a linear scan of the cache was a twentieth of a conversion. */
#define SLOT_TABLE 256 /* a power of two; types are kept for the life of the module: a few dozen entries */
static Slot slots[SLOT_TABLE];
static int slot_count;

static inline size_t slot_hash(PyTypeObject *type, PyObject *name) {
    return (((uintptr_t)type >> 4) * 31u ^ ((uintptr_t)name >> 4)) & (SLOT_TABLE - 1);
}

/* The offset of the slot of `type` named `name`, -1 where it has none (looked up, not cached). */
static inline Py_ssize_t type_slot_offset(PyTypeObject *type, PyObject *name) {
    PyObject *descr = _PyType_Lookup(type, name); /* borrowed */
    if (descr != NULL && Py_IS_TYPE(descr, &PyMemberDescr_Type)) {
        PyMemberDef *member = ((PyMemberDescrObject *)descr)->d_member;
        if (member->type == T_OBJECT_EX) return member->offset;
    }
    return -1;
}

static inline Py_ssize_t slot_offset(PyObject *obj, PyObject *name) {
    PyTypeObject *type = Py_TYPE(obj);
    size_t at = slot_hash(type, name);
    for (; slots[at].type != NULL; at = (at + 1) & (SLOT_TABLE - 1))
        if (slots[at].type == type && slots[at].name == name) return slots[at].offset;
    Py_ssize_t offset = type_slot_offset(type, name);
    if (slot_count < SLOT_TABLE / 2) { /* half full at most: every probe ends at an empty entry */
        Py_INCREF(type);
        Py_INCREF(name);
        slots[at] = (Slot){type, name, offset};
        slot_count++;
    }
    return offset;
}

/* A new reference to the attribute `name` (an interned string) of `obj`; NULL with an exception. */
static inline PyObject *field(PyObject *obj, PyObject *name) {
    Py_ssize_t offset = slot_offset(obj, name);
    if (offset >= 0) {
        PyObject *value = *(PyObject **)((char *)obj + offset);
        if (value != NULL) return Py_NewRef(value);
    }
    return PyObject_GetAttr(obj, name); /* also the error of an unset slot */
}

/* The attribute `name` of `obj` into `*out` where it is a float, or None read as 0.0 where `none_is_zero`:
 * 1; 0 where it is another value; -1 with an exception. */
static inline int float_field(PyObject *obj, PyObject *name, int none_is_zero, double *out) {
    PyObject *value = field(obj, name);
    if (value == NULL) return -1;
    int status = 1;
    if (PyFloat_CheckExact(value)) *out = PyFloat_AS_DOUBLE(value);
    else if (value == Py_None && none_is_zero) *out = 0.0;
    else status = 0;
    Py_DECREF(value);
    return status;
}

/* Sets the attribute `name` of `obj` to `value`; 0, or -1 with an exception. A slot is written without
 * the type's setattr: not for the fields of a frozen struct. */
static inline int set_field(PyObject *obj, PyObject *name, PyObject *value) {
    Py_ssize_t offset = slot_offset(obj, name);
    if (offset < 0) return PyObject_SetAttr(obj, name, value);
    PyObject **slot = (PyObject **)((char *)obj + offset);
    PyObject *old = *slot;
    *slot = Py_NewRef(value);
    Py_XDECREF(old);
    return 0;
}

/* Sets the tuple attribute `name` of `obj` to that tuple with `value` added at its end, as
 * `obj.name += (value,)` does (an item's dependencies: tuples, a third the size of lists of one); 0, or -1
 * with an exception (TypeError where the attribute is not a tuple). */
static inline int append_to_field(PyObject *obj, PyObject *name, PyObject *value) {
    PyObject *old = field(obj, name);
    if (old == NULL) return -1;
    if (!PyTuple_Check(old)) {
        PyErr_Format(PyExc_TypeError, "%U must be a tuple", name);
        Py_DECREF(old);
        return -1;
    }
    Py_ssize_t size = PyTuple_GET_SIZE(old);
    PyObject *grown = PyTuple_New(size + 1);
    if (grown != NULL) {
        for (Py_ssize_t k = 0; k < size; k++) PyTuple_SET_ITEM(grown, k, Py_NewRef(PyTuple_GET_ITEM(old, k)));
        PyTuple_SET_ITEM(grown, size, Py_NewRef(value));
    }
    Py_DECREF(old);
    if (grown == NULL) return -1;
    int rc = set_field(obj, name, grown);
    Py_DECREF(grown);
    return rc;
}

/* A new tuple of `names` (a tuple of at most `limit` str: a struct type's `__struct_fields__`, a dict's
 * keys) interned, as the slot cache compares names by identity; NULL with a TypeError naming `who`. */
static inline PyObject *interned_names(PyObject *names, Py_ssize_t limit, const char *who) {
    if (!PyTuple_Check(names) || PyTuple_GET_SIZE(names) > limit) {
        PyErr_Format(PyExc_TypeError, "%s: field names come as a tuple of at most %zd", who, limit);
        return NULL;
    }
    PyObject *out = PyTuple_New(PyTuple_GET_SIZE(names));
    for (Py_ssize_t k = 0; out != NULL && k < PyTuple_GET_SIZE(names); k++) {
        PyObject *name = PyTuple_GET_ITEM(names, k);
        if (!PyUnicode_Check(name)) {
            PyErr_Format(PyExc_TypeError, "%s: a field name is not a str", who);
            Py_CLEAR(out);
            break;
        }
        Py_INCREF(name);
        PyUnicode_InternInPlace(&name);
        PyTuple_SET_ITEM(out, k, name);
    }
    return out;
}

/* The attribute names a module reads, interned once at its import. */
typedef struct {
    PyObject **name;
    const char *text;
} Interned;

static inline int intern_all(const Interned *names, size_t count) {
    for (size_t i = 0; i < count; i++)
        if ((*names[i].name = PyUnicode_InternFromString(names[i].text)) == NULL) return -1;
    return 0;
}

#endif /* CHAKRA_SLOTS_H */
