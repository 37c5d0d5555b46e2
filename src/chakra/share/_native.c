/*
 * chakra.share._native: the anonymizer's rewriter and the leakage check's search, in C (see
 * _native.h for the parts and _fingerprints.c, _rewrite.c for what each does).
 */
#include "_native.h"

static PyMethodDef methods[] = {
    {"first_start", first_start, METH_VARARGS,
     "first_start(buf, pos, end) -> (stop, count, error, start): the smallest non-zero start of the records"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_native", "The anonymizer's hot paths.", -1, methods};

PyMODINIT_FUNC PyInit__native(void) {
    if (PyType_Ready(&FingerprintsType) < 0 || PyType_Ready(&RewriterType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    Py_INCREF(&FingerprintsType);
    Py_INCREF(&RewriterType);
    if (PyModule_AddObject(m, "Fingerprints", (PyObject *)&FingerprintsType) < 0 ||
        PyModule_AddObject(m, "Rewriter", (PyObject *)&RewriterType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
