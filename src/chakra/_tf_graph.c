/*
 * chakra._tf_graph: a TensorFlow RunMetadata's graphs read from its wire bytes in C, the facts the
 * TensorFlow front end reads of every node, without a protobuf wrapper object per field (reading a
 * node's output shapes and type through protobuf's Python messages cost 15 us a node; see
 * chakra/tensorflow/graph_table.py; field numbers of schema/tensorflow/tf_subset.proto).
 *
 * function_graphs(data) -> [[(offset, length), ...], ...]: for each FunctionGraphs of the RunMetadata
 * `data`, where each of its partition graphs (GraphDef) lies in `data`.
 *
 * node_facts(data, bool_attrs, parse_input, offset=0, length=-1) -> [(name, op, inputs, shapes, dtype,
 * flags, device, (node_offset, node_length)), ...], one per NodeDef of the GraphDef at
 * data[offset:offset + length] (the rest of `data` when length is -1), in order:
 *   inputs  a tuple of (source, port, is a control edge), as chakra.tensorflow.graph.input_name reads an
 *           input ("^node", "node:port", "node"); an input whose port is not ASCII digits short enough
 *           for 64 bits is given to `parse_input` (that function), so every input reads as it does;
 *   shapes  the `_output_shapes` attribute's shapes, each a list of dimension sizes, or None for a
 *           shape of unknown rank ([] without that attribute, or when it holds no list);
 *   dtype   the `type` of the first of the attributes T, dtype, tensor_type, out_type that holds a
 *           type, or None;
 *   flags   None, or a dict of the attributes named in `bool_attrs` the node has: their `b` (False
 *           when the attribute holds another kind of value);
 *   the node's device, and where its NodeDef lies in `data` (to parse it whole where an attribute not
 *   read here is needed).
 * Scalars and oneofs read as upb reads them: the last one on the wire wins, a field of another wire type
 * is an unknown field; a map key given twice keeps its last value; strings (names, ops, inputs, devices,
 * attribute names) must be UTF-8 as upb checks it. ValueError for bytes that are not a RunMetadata or a
 * GraphDef as upb reads them, in the fields read here (the others are not read).
 *
 * table_columns(facts, dtype_bytes, ref_offset) -> (row_of, inputs, output_bytes): what
 * chakra.tensorflow.graph_table makes of node_facts' list: each name's row (a name given twice: its
 * last), each node's inputs with the source named by its row (-1: not in this graph), and the bytes of
 * each output, its elements (None for an unknown rank or a negative dimension) times the size
 * `dtype_bytes` gives its type (a reference type, past `ref_offset`, as its base type), None where
 * either is unknown.
 *
 * io_bytes(inputs, output_bytes) -> (input_sums, output_sums): of table_columns' inputs and output bytes,
 * per row the bytes of its data inputs summed (control inputs and sources outside the graph left out)
 * and of its outputs summed; None where a size summed is None or a port is past its source's outputs
 * (the caller resolves those rows through the graph: a _Recv's size is its _Send's).
 */
#include "_wire.h"
#include "_text_cache.h"

enum { GRAPH_NODE = 1 };
enum { NODE_NAME = 1, NODE_OP = 2, NODE_INPUT = 3, NODE_DEVICE = 4, NODE_ATTR = 5 };
enum { METADATA_FUNCTION_GRAPHS = 4, FUNCTION_PARTITION_GRAPHS = 1 };
enum { ENTRY_KEY = 1, ENTRY_VALUE = 2 };
enum { VALUE_LIST = 1, VALUE_B = 5, VALUE_TYPE = 6 };
enum { LIST_SHAPE = 7 };
enum { SHAPE_DIM = 2, SHAPE_UNKNOWN_RANK = 3, DIM_SIZE = 1 };

/* The type attributes in the order they are tried (chakra.tensorflow.convert reads the first). */
static const char *const TYPE_ATTRS[] = {"T", "dtype", "tensor_type", "out_type"};
#define TYPE_ATTR_COUNT 4
#define OUTPUT_SHAPES_ATTR "_output_shapes"
/* the most digits of a port read here: more are given to parse_input (a port past 64 bits) */
#define MAX_PORT_DIGITS 18

static int key_is(const uint8_t *key, size_t len, const char *name) {
    return strlen(name) == len && memcmp(key, name, len) == 0;
}

/* A str of UTF-8 bytes checked already (check_string). */
static PyObject *text_of(const uint8_t *s, size_t n) { return PyUnicode_DecodeUTF8((const char *)s, (Py_ssize_t)n, NULL); }

/* A TensorShapeProto as a list of sizes, or None for an unknown rank; NULL on error (c->error or Python). */
static PyObject *read_shape(Cursor *outer, const uint8_t *data, size_t len) {
    Cursor c = {data, data + len, NULL};
    PyObject *dims = PyList_New(0);
    int unknown_rank = 0;
    Field f;
    while (dims != NULL && c.p < c.end) {
        if (next_field(&c, &f) < 0) {
            within(outer, &c, -1);
            Py_CLEAR(dims);
            break;
        }
        if (f.number == SHAPE_UNKNOWN_RANK && f.wire_type == WT_VARINT) {
            unknown_rank = f.varint != 0;
        } else if (f.number == SHAPE_DIM && f.wire_type == WT_LEN) {
            Cursor d = {f.data, f.data + f.len, NULL};
            Field g;
            int64_t size = 0;
            while (d.p < d.end) {
                if (next_field(&d, &g) < 0) break;
                if (g.number == DIM_SIZE && g.wire_type == WT_VARINT) size = (int64_t)g.varint;
            }
            if (d.error != NULL) {
                within(outer, &d, -1);
                Py_CLEAR(dims);
                break;
            }
            PyObject *value = PyLong_FromLongLong(size);
            if (value == NULL || PyList_Append(dims, value) < 0) Py_CLEAR(dims);
            Py_XDECREF(value);
        }
    }
    if (dims != NULL && unknown_rank) {
        Py_DECREF(dims);
        return Py_NewRef(Py_None);
    }
    return dims;
}

/* What one AttrValue holds that is read here: its oneof member, and its value for b, type and list. */
typedef struct {
    uint32_t member;  /* the last oneof member on the wire, 0 for none */
    uint64_t varint;  /* b or type */
    Buf list_spans;   /* a Span of every `list` since the member last became list: they merge */
} AttrValue;

/* The wire type of each member of AttrValue's oneof (tf_subset.proto), by field number. */
static const int MEMBER_WIRE_TYPE[] = {-1, WT_LEN, WT_LEN, WT_VARINT, WT_I32, WT_VARINT, WT_VARINT, WT_LEN, WT_LEN, WT_LEN};
#define MEMBERS 9

/* Merges one AttrValue message into `out`; 0, or -1 (outer->error, or a Python error). */
static int read_attr_value(Cursor *outer, const uint8_t *data, size_t len, AttrValue *out) {
    Cursor c = {data, data + len, NULL};
    Field f;
    while (c.p < c.end) {
        if (next_field(&c, &f) < 0) return within(outer, &c, -1);
        if (f.number > MEMBERS || f.wire_type != MEMBER_WIRE_TYPE[f.number]) continue; /* an unknown field */
        if (f.number == VALUE_LIST) {
            if (out->member != VALUE_LIST) out->list_spans.len = 0;
            Span *span = buf_push(&out->list_spans, sizeof(Span));
            if (span == NULL) {
                PyErr_NoMemory();
                return -1;
            }
            *span = (Span){f.data, f.len};
        }
        out->member = f.number;
        out->varint = f.varint;
    }
    return 0;
}

/* The shapes of the merged `list` values; NULL on error. */
static PyObject *list_shapes(Cursor *outer, const AttrValue *value) {
    PyObject *shapes = PyList_New(0);
    if (shapes == NULL || value->member != VALUE_LIST) return shapes;
    const Span *spans = (const Span *)value->list_spans.data;
    for (size_t k = 0; k < value->list_spans.len / sizeof(Span); k++) {
        Cursor c = {spans[k].p, spans[k].p + spans[k].n, NULL};
        Field f;
        while (c.p < c.end) {
            if (next_field(&c, &f) < 0) {
                within(outer, &c, -1);
                Py_DECREF(shapes);
                return NULL;
            }
            if (f.number != LIST_SHAPE || f.wire_type != WT_LEN) continue;
            PyObject *shape = read_shape(outer, f.data, f.len);
            if (shape == NULL || PyList_Append(shapes, shape) < 0) {
                Py_XDECREF(shape);
                Py_DECREF(shapes);
                return NULL;
            }
            Py_DECREF(shape);
        }
    }
    return shapes;
}

/* The str of UTF-8 text (checked already) met before in one graph, from `texts`, else made and kept there
 * (a new reference; NULL on error): ops and devices are named by every node, and a node's name by every
 * input it feeds, so each is decoded and allocated once, and hashed once for every lookup of it by name
 * (chakra.tensorflow.graph_table maps inputs to rows by their names). */
static PyObject *shared_text(TextCache *texts, const uint8_t *s, size_t n) {
    uint64_t hash = text_hash((const char *)s, (Py_ssize_t)n);
    PyObject *known = text_cache_get(texts, (const char *)s, (Py_ssize_t)n, hash);
    if (known != NULL) return Py_NewRef(known);
    PyObject *text = text_of(s, n);
    if (text != NULL && text_cache_put(texts, (const char *)s, (Py_ssize_t)n, hash, text) < 0) Py_CLEAR(text);
    return text;
}

/* (start, length) of a message in its buffer. */
static PyObject *span_of(Py_ssize_t start, Py_ssize_t length) {
    PyObject *first = PyLong_FromSsize_t(start), *count = PyLong_FromSsize_t(length);
    PyObject *span = first && count ? PyTuple_Pack(2, first, count) : NULL;
    Py_XDECREF(first);
    Py_XDECREF(count);
    return span;
}

/* (source, port, control), taking the reference to `source`: a graph has an input or more per node, and
 * Py_BuildValue parsed its format at each. */
static PyObject *input_of(PyObject *source, long long port, int control) {
    if (source == NULL) return NULL;
    PyObject *number = PyLong_FromLongLong(port);
    PyObject *input = number == NULL ? NULL : PyTuple_Pack(3, source, number, control ? Py_True : Py_False);
    Py_DECREF(source);
    Py_XDECREF(number);
    return input;
}

/* An input as (source, port, control); NULL on error (outer->error for bytes that are not UTF-8). */
static PyObject *read_input(Cursor *outer, const uint8_t *s, size_t n, PyObject *parse_input, TextCache *texts) {
    if (check_string(outer, s, n) < 0) return NULL;
    if (n > 0 && s[0] == '^') {
        return input_of(shared_text(texts, s + 1, n - 1), 0, 1);
    }
    size_t colon = n;
    while (colon > 0 && s[colon - 1] != ':') colon--;
    if (colon == 0) { /* no colon: the whole text names the node */
        return input_of(shared_text(texts, s, n), 0, 0);
    }
    size_t digits = n - colon;
    int ascii_digits = digits > 0 && digits <= MAX_PORT_DIGITS, plain = 1;
    long long port = 0;
    for (size_t k = colon; k < n; k++) {
        if (s[k] >= 0x80) plain = 0; /* other scripts' digits count as digits to Python */
        if (s[k] < '0' || s[k] > '9') ascii_digits = 0;
        else port = port * 10 + (s[k] - '0');
    }
    if (ascii_digits && colon > 1) {
        return input_of(shared_text(texts, s, colon - 1), port, 0);
    }
    if (plain && digits <= MAX_PORT_DIGITS) /* not a port: the whole text names the node */
        return input_of(shared_text(texts, s, n), 0, 0);
    PyObject *text = text_of(s, n);
    if (text == NULL) return NULL;
    PyObject *out = PyObject_CallOneArg(parse_input, text);
    Py_DECREF(text);
    return out;
}

/* the most boolean attributes asked for */
#define MAX_FLAGS 16

typedef struct {
    PyObject *bool_attrs; /* a tuple of str */
    const char *flag_names[MAX_FLAGS]; /* their UTF-8, held by the str objects */
    Py_ssize_t flag_lens[MAX_FLAGS];
    PyObject *parse_input;
} Wanted;

/* One NodeDef (at data, within the buffer from base) as its facts tuple; NULL on error. */
static PyObject *read_node(Cursor *outer, const uint8_t *base, const uint8_t *data, size_t len, const Wanted *wanted,
                           TextCache *texts) {
    Cursor c = {data, data + len, NULL};
    const uint8_t *name = NULL, *op = NULL, *device = NULL;
    size_t name_len = 0, op_len = 0, device_len = 0;
    PyObject *inputs = PyList_New(0), *shapes = NULL, *flags = NULL, *out = NULL;
    Py_ssize_t bool_count = PyTuple_GET_SIZE(wanted->bool_attrs);
    AttrValue shape_value = {0, 0, {NULL, 0, 0}};
    int has_shapes = 0;
    AttrValue type_values[TYPE_ATTR_COUNT];
    int has_type[TYPE_ATTR_COUNT] = {0};
    memset(type_values, 0, sizeof type_values);
    Field f;
    if (inputs == NULL) return NULL;
    while (c.p < c.end) {
        if (next_field(&c, &f) < 0) {
            within(outer, &c, -1);
            goto fail;
        }
        if (f.wire_type != WT_LEN) continue;
        if (f.number == NODE_NAME) {
            name = f.data;
            name_len = f.len;
        } else if (f.number == NODE_OP) {
            op = f.data;
            op_len = f.len;
        } else if (f.number == NODE_DEVICE) {
            device = f.data;
            device_len = f.len;
        } else if (f.number == NODE_INPUT) {
            PyObject *input = read_input(outer, f.data, f.len, wanted->parse_input, texts);
            if (input == NULL || PyList_Append(inputs, input) < 0) {
                Py_XDECREF(input);
                goto fail;
            }
            Py_DECREF(input);
        } else if (f.number == NODE_ATTR) {
            Cursor entry = {f.data, f.data + f.len, NULL};
            Field g;
            const uint8_t *key = (const uint8_t *)"";
            size_t key_len = 0;
            while (entry.p < entry.end) {
                if (next_field(&entry, &g) < 0) {
                    within(outer, &entry, -1);
                    goto fail;
                }
                if (g.number == ENTRY_KEY && g.wire_type == WT_LEN) {
                    key = g.data;
                    key_len = g.len;
                }
            }
            if (check_string(outer, key, key_len) < 0) goto fail;
            AttrValue *target = NULL;
            if (key_is(key, key_len, OUTPUT_SHAPES_ATTR)) {
                target = &shape_value;
                has_shapes = 1;
            }
            for (int k = 0; k < TYPE_ATTR_COUNT && target == NULL; k++) {
                if (key_is(key, key_len, TYPE_ATTRS[k])) {
                    target = &type_values[k];
                    has_type[k] = 1;
                }
            }
            Py_ssize_t flag = -1;
            for (Py_ssize_t k = 0; k < bool_count && target == NULL && flag < 0; k++)
                if ((size_t)wanted->flag_lens[k] == key_len && memcmp(wanted->flag_names[k], key, key_len) == 0) flag = k;
            if (target == NULL && flag < 0) continue;
            AttrValue read = {0, 0, {NULL, 0, 0}};
            if (target == NULL) target = &read;
            /* an entry replaces an earlier one of its key; its value messages merge */
            target->member = 0;
            target->list_spans.len = 0;
            entry = (Cursor){f.data, f.data + f.len, NULL};
            while (entry.p < entry.end) {
                if (next_field(&entry, &g) < 0) goto fail; /* read once already */
                if (g.number == ENTRY_VALUE && g.wire_type == WT_LEN && read_attr_value(outer, g.data, g.len, target) < 0) {
                    PyMem_Free(read.list_spans.data);
                    goto fail;
                }
            }
            PyMem_Free(read.list_spans.data);
            if (flag >= 0) {
                if (flags == NULL && (flags = PyDict_New()) == NULL) goto fail;
                PyObject *b = PyBool_FromLong(read.member == VALUE_B && read.varint != 0);
                int status = PyDict_SetItem(flags, PyTuple_GET_ITEM(wanted->bool_attrs, flag), b);
                Py_DECREF(b);
                if (status < 0) goto fail;
            }
        }
    }
    shapes = has_shapes ? list_shapes(outer, &shape_value) : PyList_New(0);
    if (shapes == NULL) goto fail;
    PyObject *dtype = NULL;
    for (int k = 0; k < TYPE_ATTR_COUNT && dtype == NULL; k++)
        if (has_type[k] && type_values[k].member == VALUE_TYPE) dtype = PyLong_FromLong((int32_t)type_values[k].varint);
    if (dtype == NULL && PyErr_Occurred()) goto fail;
    if (!name) name = (const uint8_t *)"";
    if (!op) op = (const uint8_t *)"";
    if (!device) device = (const uint8_t *)"";
    if (check_string(outer, name, name_len) < 0 || check_string(outer, op, op_len) < 0 ||
        check_string(outer, device, device_len) < 0) {
        Py_XDECREF(dtype);
        goto fail;
    }
    PyObject *node_name = shared_text(texts, name, name_len), *op_text = shared_text(texts, op, op_len);
    PyObject *device_text = shared_text(texts, device, device_len), *input_tuple = PyList_AsTuple(inputs);
    PyObject *span = span_of((Py_ssize_t)(data - base), (Py_ssize_t)len);
    if (node_name && op_text && device_text && input_tuple && span)
        out = PyTuple_Pack(8, node_name, op_text, input_tuple, shapes, dtype ? dtype : Py_None, flags ? flags : Py_None,
                           device_text, span);
    Py_XDECREF(node_name);
    Py_XDECREF(op_text);
    Py_XDECREF(device_text);
    Py_XDECREF(input_tuple);
    Py_XDECREF(span);
    Py_XDECREF(dtype);
fail:
    Py_DECREF(inputs);
    Py_XDECREF(shapes);
    Py_XDECREF(flags);
    PyMem_Free(shape_value.list_spans.data);
    for (int k = 0; k < TYPE_ATTR_COUNT; k++) PyMem_Free(type_values[k].list_spans.data);
    return out;
}

static PyObject *node_facts(PyObject *self, PyObject *args) {
    Py_buffer view;
    Wanted wanted;
    Py_ssize_t offset = 0, length = -1;
    if (!PyArg_ParseTuple(args, "y*O!O|nn", &view, &PyTuple_Type, &wanted.bool_attrs, &wanted.parse_input, &offset,
                          &length))
        return NULL;
    if (length < 0) length = view.len - offset;
    int bad = PyTuple_GET_SIZE(wanted.bool_attrs) > MAX_FLAGS;
    if (offset < 0 || offset > view.len || length > view.len - offset) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "node_facts: the span is out of range");
        return NULL;
    }
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(wanted.bool_attrs) && !bad; k++) {
        PyObject *name = PyTuple_GET_ITEM(wanted.bool_attrs, k);
        bad = !PyUnicode_Check(name) ||
              (wanted.flag_names[k] = PyUnicode_AsUTF8AndSize(name, &wanted.flag_lens[k])) == NULL;
    }
    if (bad) {
        PyBuffer_Release(&view);
        if (!PyErr_Occurred())
            PyErr_Format(PyExc_TypeError, "node_facts: bool_attrs must be a tuple of at most %d str", MAX_FLAGS);
        return NULL;
    }
    const uint8_t *base = view.buf;
    Cursor graph = {base + offset, base + offset + length, NULL};
    PyObject *nodes = PyList_New(0);
    TextCache texts = {NULL, 0, 0, 0};
    Field f;
    while (nodes != NULL && graph.p < graph.end) {
        if (next_field(&graph, &f) < 0) {
            Py_CLEAR(nodes);
            break;
        }
        if (f.number != GRAPH_NODE || f.wire_type != WT_LEN) continue;
        PyObject *node = read_node(&graph, base, f.data, f.len, &wanted, &texts);
        if (node == NULL || PyList_Append(nodes, node) < 0) Py_CLEAR(nodes);
        Py_XDECREF(node);
    }
    text_cache_clear(&texts);
    if (nodes == NULL && !PyErr_Occurred())
        PyErr_SetString(PyExc_ValueError, graph.error ? graph.error : "not a GraphDef");
    PyBuffer_Release(&view);
    return nodes;
}

static PyObject *function_graphs(PyObject *self, PyObject *args) {
    Py_buffer view;
    if (!PyArg_ParseTuple(args, "y*", &view)) return NULL;
    const uint8_t *base = view.buf;
    Cursor metadata = {base, base + view.len, NULL};
    PyObject *functions = PyList_New(0);
    Field f;
    while (functions != NULL && metadata.p < metadata.end) {
        if (next_field(&metadata, &f) < 0) {
            Py_CLEAR(functions);
            break;
        }
        if (f.number != METADATA_FUNCTION_GRAPHS || f.wire_type != WT_LEN) continue;
        Cursor function = {f.data, f.data + f.len, NULL};
        PyObject *graphs = PyList_New(0);
        Field g;
        while (graphs != NULL && function.p < function.end) {
            if (next_field(&function, &g) < 0) {
                within(&metadata, &function, -1);
                Py_CLEAR(graphs);
                break;
            }
            if (g.number != FUNCTION_PARTITION_GRAPHS || g.wire_type != WT_LEN) continue;
            PyObject *span = span_of((Py_ssize_t)(g.data - base), (Py_ssize_t)g.len);
            if (span == NULL || PyList_Append(graphs, span) < 0) Py_CLEAR(graphs);
            Py_XDECREF(span);
        }
        if (graphs == NULL || PyList_Append(functions, graphs) < 0) Py_CLEAR(functions);
        Py_XDECREF(graphs);
    }
    if (functions == NULL && !PyErr_Occurred())
        PyErr_SetString(PyExc_ValueError, metadata.error ? metadata.error : "not a RunMetadata");
    PyBuffer_Release(&view);
    return functions;
}

/* The elements of a shape (a list of sizes, or None) times `size` as a new int; Py_None (new) when the
 * rank or a dimension is unknown; NULL on error. Past 64 bits the product is made with Python ints. */
static PyObject *shape_bytes(PyObject *shape, PyObject *size) {
    if (shape == Py_None || !PyList_Check(shape)) return Py_NewRef(Py_None);
    long long product = PyLong_AsLongLong(size);
    if (product == -1 && PyErr_Occurred()) return NULL;
    int overflow = 0;
    for (Py_ssize_t k = 0; k < PyList_GET_SIZE(shape); k++) {
        long long dim = PyLong_AsLongLong(PyList_GET_ITEM(shape, k));
        if (dim == -1 && PyErr_Occurred()) return NULL;
        if (dim < 0) return Py_NewRef(Py_None);
        overflow = overflow || __builtin_mul_overflow(product, dim, &product);
    }
    if (!overflow) return PyLong_FromLongLong(product);
    PyObject *total = Py_NewRef(size);
    for (Py_ssize_t k = 0; total != NULL && k < PyList_GET_SIZE(shape); k++)
        Py_SETREF(total, PyNumber_Multiply(total, PyList_GET_ITEM(shape, k)));
    return total;
}

/* The bytes of each output of one fact's shapes, of elements of its type. */
static PyObject *output_bytes_of(PyObject *shapes, PyObject *dtype, PyObject *dtype_bytes, long ref_offset) {
    PyObject *size = NULL;
    if (dtype != Py_None) {
        long type = PyLong_AsLong(dtype);
        if (type == -1 && PyErr_Occurred()) return NULL;
        PyObject *key = PyLong_FromLong(type > ref_offset ? type - ref_offset : type);
        size = key == NULL ? NULL : PyDict_GetItemWithError(dtype_bytes, key); /* borrowed */
        Py_XDECREF(key);
        if (size == NULL && PyErr_Occurred()) return NULL;
    }
    Py_ssize_t n = PyList_GET_SIZE(shapes);
    PyObject *out = PyList_New(n);
    for (Py_ssize_t k = 0; out != NULL && k < n; k++) {
        PyObject *bytes = size == NULL || size == Py_None ? Py_NewRef(Py_None) : shape_bytes(PyList_GET_ITEM(shapes, k), size);
        if (bytes == NULL) Py_CLEAR(out);
        else PyList_SET_ITEM(out, k, bytes);
    }
    return out;
}

/* One fact's inputs with each source named by its row in `row_of` (-1 when not there). */
static PyObject *inputs_by_row(PyObject *inputs, PyObject *row_of, PyObject *outside) {
    Py_ssize_t n = PyTuple_GET_SIZE(inputs);
    PyObject *out = PyTuple_New(n);
    for (Py_ssize_t k = 0; out != NULL && k < n; k++) {
        PyObject *input = PyTuple_GET_ITEM(inputs, k);
        if (!PyTuple_Check(input) || PyTuple_GET_SIZE(input) != 3) {
            PyErr_SetString(PyExc_ValueError, "table_columns: an input is not (source, port, control)");
            Py_CLEAR(out);
            break;
        }
        PyObject *row = PyDict_GetItemWithError(row_of, PyTuple_GET_ITEM(input, 0));
        if (row == NULL && PyErr_Occurred()) {
            Py_CLEAR(out);
            break;
        }
        PyObject *resolved = PyTuple_Pack(3, row != NULL ? row : outside, PyTuple_GET_ITEM(input, 1), PyTuple_GET_ITEM(input, 2));
        if (resolved == NULL) Py_CLEAR(out);
        else PyTuple_SET_ITEM(out, k, resolved);
    }
    return out;
}

static PyObject *table_columns(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *facts, *dtype_bytes, *row_of = NULL, *inputs = NULL, *sizes = NULL, *outside = NULL;
    long ref_offset;
    if (!PyArg_ParseTuple(args, "O!O!l", &PyList_Type, &facts, &PyDict_Type, &dtype_bytes, &ref_offset)) return NULL;
    Py_ssize_t n = PyList_GET_SIZE(facts);
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *fact = PyList_GET_ITEM(facts, k);
        if (!PyTuple_Check(fact) || PyTuple_GET_SIZE(fact) < 5 || !PyTuple_Check(PyTuple_GET_ITEM(fact, 2)) ||
            !PyList_Check(PyTuple_GET_ITEM(fact, 3))) {
            PyErr_SetString(PyExc_ValueError, "table_columns: not a list of node_facts");
            return NULL;
        }
    }
    row_of = PyDict_New();
    inputs = PyList_New(n);
    sizes = PyList_New(n);
    outside = PyLong_FromLong(-1);
    int failed = row_of == NULL || inputs == NULL || sizes == NULL || outside == NULL;
    for (Py_ssize_t k = 0; !failed && k < n; k++) {
        PyObject *row = PyLong_FromSsize_t(k);
        failed = row == NULL || PyDict_SetItem(row_of, PyTuple_GET_ITEM(PyList_GET_ITEM(facts, k), 0), row) < 0;
        Py_XDECREF(row);
    }
    for (Py_ssize_t k = 0; !failed && k < n; k++) {
        PyObject *fact = PyList_GET_ITEM(facts, k);
        PyObject *resolved = inputs_by_row(PyTuple_GET_ITEM(fact, 2), row_of, outside);
        PyObject *bytes = resolved == NULL ? NULL
                                           : output_bytes_of(PyTuple_GET_ITEM(fact, 3), PyTuple_GET_ITEM(fact, 4),
                                                             dtype_bytes, ref_offset);
        failed = resolved == NULL || bytes == NULL;
        if (resolved != NULL) PyList_SET_ITEM(inputs, k, resolved);
        if (bytes != NULL) PyList_SET_ITEM(sizes, k, bytes);
    }
    PyObject *result = failed ? NULL : Py_BuildValue("(OOO)", row_of, inputs, sizes);
    Py_XDECREF(row_of);
    Py_XDECREF(inputs);
    Py_XDECREF(sizes);
    Py_XDECREF(outside);
    return result;
}

/* The sum of the sizes of `row`'s data inputs as a new int, Py_None (new) when one is unknown. */
static PyObject *input_sum(PyObject *row_inputs, PyObject *output_bytes) {
    PyObject *total = PyLong_FromLong(0);
    Py_ssize_t rows = PyList_GET_SIZE(output_bytes);
    for (Py_ssize_t k = 0; total != NULL && k < PyTuple_GET_SIZE(row_inputs); k++) {
        PyObject *input = PyTuple_GET_ITEM(row_inputs, k);
        if (!PyTuple_Check(input) || PyTuple_GET_SIZE(input) != 3) {
            PyErr_SetString(PyExc_ValueError, "io_bytes: an input is not (source, port, control)");
            Py_CLEAR(total);
            break;
        }
        int control = PyObject_IsTrue(PyTuple_GET_ITEM(input, 2));
        Py_ssize_t source = PyLong_AsSsize_t(PyTuple_GET_ITEM(input, 0));
        Py_ssize_t port = PyLong_AsSsize_t(PyTuple_GET_ITEM(input, 1));
        if (control < 0 || PyErr_Occurred()) {
            Py_CLEAR(total);
            break;
        }
        if (control || source < 0) continue;
        PyObject *sizes = source < rows ? PyList_GET_ITEM(output_bytes, source) : NULL;
        if (sizes == NULL || !PyList_Check(sizes)) {
            PyErr_SetString(PyExc_ValueError, "io_bytes: an input's source is not a row of the output bytes");
            Py_CLEAR(total);
            break;
        }
        PyObject *size = port >= 0 && port < PyList_GET_SIZE(sizes) ? PyList_GET_ITEM(sizes, port) : Py_None;
        if (size == Py_None) {
            Py_SETREF(total, Py_NewRef(Py_None));
            break;
        }
        Py_SETREF(total, PyNumber_Add(total, size));
    }
    return total;
}

/* The sum of one row's output sizes as a new int, Py_None (new) when one is unknown. */
static PyObject *output_sum(PyObject *sizes) {
    PyObject *total = PyLong_FromLong(0);
    for (Py_ssize_t k = 0; total != NULL && k < PyList_GET_SIZE(sizes); k++) {
        PyObject *size = PyList_GET_ITEM(sizes, k);
        if (size == Py_None) {
            Py_SETREF(total, Py_NewRef(Py_None));
            break;
        }
        Py_SETREF(total, PyNumber_Add(total, size));
    }
    return total;
}

static PyObject *io_bytes(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *inputs, *output_bytes;
    if (!PyArg_ParseTuple(args, "O!O!", &PyList_Type, &inputs, &PyList_Type, &output_bytes)) return NULL;
    Py_ssize_t n = PyList_GET_SIZE(inputs);
    if (PyList_GET_SIZE(output_bytes) != n) {
        PyErr_SetString(PyExc_ValueError, "io_bytes: inputs and output bytes of different lengths");
        return NULL;
    }
    PyObject *input_sums = PyList_New(n), *output_sums = PyList_New(n);
    int failed = input_sums == NULL || output_sums == NULL;
    for (Py_ssize_t k = 0; !failed && k < n; k++) {
        PyObject *row_inputs = PyList_GET_ITEM(inputs, k), *sizes = PyList_GET_ITEM(output_bytes, k);
        if (!PyTuple_Check(row_inputs) || !PyList_Check(sizes)) {
            PyErr_SetString(PyExc_ValueError, "io_bytes: a row's inputs are not a tuple or its sizes not a list");
            failed = 1;
            break;
        }
        PyObject *in = input_sum(row_inputs, output_bytes);
        PyObject *out = in == NULL ? NULL : output_sum(sizes);
        failed = in == NULL || out == NULL;
        if (in != NULL) PyList_SET_ITEM(input_sums, k, in);
        if (out != NULL) PyList_SET_ITEM(output_sums, k, out);
    }
    PyObject *result = failed ? NULL : PyTuple_Pack(2, input_sums, output_sums);
    Py_XDECREF(input_sums);
    Py_XDECREF(output_sums);
    return result;
}

static PyMethodDef methods[] = {
    {"node_facts", node_facts, METH_VARARGS, "Every node's name, op, inputs, output shapes, type, flags, device and span."},
    {"function_graphs", function_graphs, METH_VARARGS, "The spans of each function graph's partition graphs."},
    {"table_columns", table_columns, METH_VARARGS, "Each name's row, the inputs by row, each output's bytes."},
    {"io_bytes", io_bytes, METH_VARARGS, "Each row's data input bytes and output bytes summed (None: one unknown)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_tf_graph", NULL, -1, methods};

PyMODINIT_FUNC PyInit__tf_graph(void) { return PyModule_Create(&module); }
