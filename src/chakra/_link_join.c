/*
 * chakra._link_join: the joins of linking, in C (see chakra/pytorch/link.py): a host trace's ops with the
 * Kineto trace's host events, and runtime calls with the host events that enclose them. A trace holds a
 * hundred thousand ops or more; reading a few fields of each and making its timing in Python was a tenth
 * of a conversion, and finding the enclosing ops with arrays a third of the Kineto view.
 *
 * join_host_ops(nodes, skip_names, index_of, events, exclusive_us, timing_type) -> (timing, host_of_event,
 * considered, joined, agree, unmatched): for each host node (`id`, `name`, `rf_id`) whose name is not in
 * `skip_names`, the Kineto event `events[index_of[rf_id]]` (`ts`, `dur`, `tid`, `name`) when its rf_id
 * is non-zero and in `index_of`. `timing` maps the node's id to timing_type(ts, dur, exclusive_us[at],
 * tid) in node order; `host_of_event` maps id() of each joined event to the id of the last node joined to
 * it; `considered` counts the nodes not skipped, `joined` those joined, `agree` those whose event has
 * the same name; `unmatched` lists the nodes considered but not joined, in node order. IndexError for
 * an index that is not one of `events` (negative ones included).
 *
 * enclosing_ops(ops, parents, calls, step_prefix) -> list[int] | None: for each call (`ts`, `tid`), the
 * index in `ops` (host events sorted by start, `parents` their nesting) of the innermost op of the call's
 * thread open at its start (one starting with it counts, one ending at it does not; one whose name starts
 * with `step_prefix` never does), -1 for none: the last op of the thread started by then, then out
 * through its parents while they are closed. `parents` None: the nesting found here, as nest_by_thread
 * finds it (a caller that needs no exclusive times makes no lists of them). None where a time is not a
 * float or is NaN, or a name is not a str (the caller's rule in Python takes those); ValueError for ops
 * not sorted by start or a parent that is not one of them.
 *
 * attach_device_work(events, calls, enclosing, ops, host_of_event, activity_type, args_type[, kept_args]) ->
 * (activities, unattached): for each device event (`name`, `cat`, `pid`, `tid`, `ts`, `dur`, `args` with
 * `correlation` and `stream`), in order, activity_type(name, cat, pid, stream, ts, dur, correlation, host_id,
 * launch's name or "", args[, launch's ts, its ts + dur, its tid]) (the three where it has a launch): its
 * correlation read as None where it is not an int (bools are not), its launch `calls[correlation]`, the
 * host op enclosing that launch `ops[enclosing[k]]` (`enclosing`: what enclosing_ops finds for the values of
 * `calls` in their order, -1 for none; k the launch's place among them), its host id `host_of_event[id(op)]`
 * (enclosing[k] + 1 where `host_of_event` is None: the ops are a profiler view's, op k host op k + 1) (None
 * where any of these is missing), its stream the args' `stream` unless None, else the event's tid (args not
 * of `args_type` are read with .get("stream", tid)). `unattached` lists (index, reason) for the events
 * without a host id: 0 for no launch, 1 for a launch outside every op (or not among `calls`' values when
 * the call began), 2 for an op without a host id. The launches of one thread share one tid object, and
 * the activities of one launch its host id object.
 *
 * With `kept_args` (a struct type whose fields `args_type` has too), an activity holds
 * kept_args(the event's args' values of those fields) in place of args of `args_type`, one shared
 * kept_args() where every value is None: what a conversion reads of a device event, for a caller that
 * lets the events go (the events' args, left in the activities, kept a block of each of the allocator's
 * pools in use, and were four times the size).
 */
#include <math.h>

#include "_slots.h"

static PyObject *s_id, *s_name, *s_rf_id, *s_ts, *s_dur, *s_tid, *s_cat, *s_pid, *s_args, *s_correlation, *s_stream, *s_get;

/* The event joined to `node` (borrowed) and its index, or NULL with `*at` -1 when there is none;
 * -1 returned with an exception. */
static int joined_event(PyObject *node, PyObject *index_of, PyObject *events, Py_ssize_t *at) {
    *at = -1;
    PyObject *rf_id = field(node, s_rf_id);
    if (rf_id == NULL) return -1;
    int nonzero = PyObject_IsTrue(rf_id);
    PyObject *index = nonzero > 0 ? Py_XNewRef(PyDict_GetItemWithError(index_of, rf_id)) : NULL;
    Py_DECREF(rf_id);
    if (nonzero < 0 || (index == NULL && PyErr_Occurred())) return -1;
    if (index == NULL) return 0;
    Py_ssize_t value = PyLong_AsSsize_t(index);
    Py_DECREF(index);
    if (value == -1 && PyErr_Occurred()) return -1;
    if (value < 0 || value >= PyTuple_GET_SIZE(events)) {
        PyErr_Format(PyExc_IndexError, "index_of gives %zd for a list of %zd events", value, PyTuple_GET_SIZE(events));
        return -1;
    }
    *at = value;
    return 0;
}

/* Adds `node`'s timing from `event` (the `at`th) and counts whether their names agree: 0, or -1. */
static int join_one(PyObject *node, PyObject *node_name, PyObject *event, Py_ssize_t at, PyObject *exclusive_us,
                    PyObject *timing_type, PyObject *timing, PyObject *host_of_event, Py_ssize_t *agree) {
    PyObject *event_name = NULL, *ts = NULL, *dur = NULL, *tid = NULL, *node_id = NULL, *value = NULL, *key = NULL;
    int rc = -1;
    if ((event_name = field(event, s_name)) == NULL) goto done;
    int same = PyObject_RichCompareBool(event_name, node_name, Py_EQ);
    if (same < 0) goto done;
    *agree += same;
    if ((ts = field(event, s_ts)) == NULL || (dur = field(event, s_dur)) == NULL || (tid = field(event, s_tid)) == NULL ||
        (node_id = field(node, s_id)) == NULL)
        goto done;
    PyObject *args[4] = {ts, dur, PyTuple_GET_ITEM(exclusive_us, at), tid};
    if ((value = PyObject_Vectorcall(timing_type, args, 4, NULL)) == NULL) goto done;
    if (PyDict_SetItem(timing, node_id, value) < 0) goto done;
    if ((key = PyLong_FromVoidPtr(event)) == NULL) goto done;
    rc = PyDict_SetItem(host_of_event, key, node_id);
done:
    Py_XDECREF(event_name);
    Py_XDECREF(ts);
    Py_XDECREF(dur);
    Py_XDECREF(tid);
    Py_XDECREF(node_id);
    Py_XDECREF(value);
    Py_XDECREF(key);
    return rc;
}

static PyObject *join_host_ops(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *nodes, *skip_names, *index_of, *events, *exclusive_us, *timing_type;
    if (!PyArg_ParseTuple(args, "O!OO!O!O!O:join_host_ops", &PyList_Type, &nodes, &skip_names, &PyDict_Type, &index_of,
                          &PyList_Type, &events, &PyList_Type, &exclusive_us, &timing_type))
        return NULL;
    if (PyList_GET_SIZE(exclusive_us) != PyList_GET_SIZE(events)) {
        PyErr_SetString(PyExc_ValueError, "exclusive_us must have one value per event");
        return NULL;
    }
    /* copies: nodes, events and times stay alive and in place whatever a getattr does to the lists given */
    nodes = PyList_AsTuple(nodes);
    events = PyList_AsTuple(events);
    exclusive_us = PyList_AsTuple(exclusive_us);
    PyObject *timing = PyDict_New(), *host_of_event = PyDict_New(), *unmatched = PyList_New(0);
    Py_ssize_t considered = 0, joined = 0, agree = 0;
    if (!nodes || !events || !exclusive_us || !timing || !host_of_event || !unmatched) goto fail;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(nodes); i++) {
        PyObject *node = PyTuple_GET_ITEM(nodes, i);
        PyObject *name = field(node, s_name);
        if (name == NULL) goto fail;
        int skipped = PySequence_Contains(skip_names, name);
        if (skipped != 0) {
            Py_DECREF(name);
            if (skipped < 0) goto fail;
            continue;
        }
        considered++;
        Py_ssize_t at;
        int rc = joined_event(node, index_of, events, &at);
        if (rc == 0 && at < 0) {
            rc = PyList_Append(unmatched, node);
        } else if (rc == 0) {
            joined++;
            rc = join_one(node, name, PyTuple_GET_ITEM(events, at), at, exclusive_us, timing_type, timing, host_of_event,
                          &agree);
        }
        Py_DECREF(name);
        if (rc < 0) goto fail;
    }
    Py_DECREF(nodes);
    Py_DECREF(events);
    Py_DECREF(exclusive_us);
    return Py_BuildValue("(NNnnnN)", timing, host_of_event, considered, joined, agree, unmatched);
fail:
    Py_XDECREF(nodes);
    Py_XDECREF(events);
    Py_XDECREF(exclusive_us);
    Py_XDECREF(timing);
    Py_XDECREF(host_of_event);
    Py_XDECREF(unmatched);
    return NULL;
}

/* A field that is a float and not NaN into `*out`: 1; 0 where it is another value; -1 with an exception. */
static int plain_time(PyObject *obj, PyObject *name, double *out) {
    int plain = float_field(obj, name, 0, out);
    return plain > 0 && isnan(*out) ? 0 : plain;
}

/* The number of the thread `tid` in `threads` (numbered as first seen when `add`), -1 for one not seen;
 * -2 with an exception. */
static Py_ssize_t thread_number(PyObject *threads, PyObject *obj, int add) {
    PyObject *tid = field(obj, s_tid);
    if (tid == NULL) return -2;
    PyObject *known = PyDict_GetItemWithError(threads, tid); /* borrowed */
    Py_ssize_t number = -1;
    if (known != NULL) {
        number = PyLong_AsSsize_t(known);
    } else if (!PyErr_Occurred() && add) {
        PyObject *value = PyLong_FromSsize_t(PyDict_GET_SIZE(threads));
        if (value != NULL && PyDict_SetItem(threads, tid, value) == 0) number = PyDict_GET_SIZE(threads) - 1;
        Py_XDECREF(value);
    }
    Py_DECREF(tid);
    return PyErr_Occurred() ? -2 : number;
}

/* The ops' starts, ends, step marks, parents and threads, read once (the parents nested here where `parents`
 * is None, `tops` the last op of each thread, -1 at first); 1, 0 where a value is not plain (see
 * enclosing_ops), -1 with an exception. */
static int read_ops(PyObject *ops, PyObject *parents, PyObject *prefix, PyObject *threads, double *start, double *end,
                    char *step, Py_ssize_t *parent, Py_ssize_t *thread, Py_ssize_t *tops) {
    Py_ssize_t size = PyTuple_GET_SIZE(ops);
    for (Py_ssize_t i = 0; i < size; i++) {
        PyObject *op = PyTuple_GET_ITEM(ops, i);
        double dur;
        int plain = plain_time(op, s_ts, &start[i]);
        if (plain > 0) plain = plain_time(op, s_dur, &dur);
        if (plain <= 0) return plain;
        if (i > 0 && start[i] < start[i - 1]) {
            PyErr_SetString(PyExc_ValueError, "enclosing_ops takes the ops sorted by start, as nest_events does");
            return -1;
        }
        end[i] = start[i] + dur;
        PyObject *name = field(op, s_name);
        if (name == NULL) return -1;
        Py_ssize_t marks = PyUnicode_Check(name) ? PyUnicode_Tailmatch(name, prefix, 0, PY_SSIZE_T_MAX, -1) : 0;
        int text = PyUnicode_Check(name);
        Py_DECREF(name);
        if (marks < 0) return -1;
        if (!text) return 0;
        step[i] = (char)marks;
        if ((thread[i] = thread_number(threads, op, 1)) < 0) return -1;
        if (parents == Py_None) { /* the thread's open ops are the last one's chain of parents: those closed go */
            Py_ssize_t top = tops[thread[i]];
            while (top >= 0 && start[i] >= end[top]) top = parent[top];
            parent[i] = top;
            tops[thread[i]] = i;
            continue;
        }
        parent[i] = PyLong_AsSsize_t(PyList_GET_ITEM(parents, i));
        if (parent[i] == -1 && PyErr_Occurred()) return -1;
        if (parent[i] < -1 || parent[i] >= size) {
            PyErr_Format(PyExc_ValueError, "op %zd has parent %zd, not one of the %zd ops", i, parent[i], size);
            return -1;
        }
    }
    return 1;
}

/* The innermost op open at `at` on the thread whose ops, in start order, are `members[0:count]`, starting
 * at `starts[0:count]`. */
static Py_ssize_t open_at(double at, const Py_ssize_t *members, const double *starts, Py_ssize_t count,
                          const double *end, const char *step, const Py_ssize_t *parent) {
    Py_ssize_t lo = 0, hi = count; /* the first member starting after `at` */
    while (lo < hi) {
        Py_ssize_t mid = lo + (hi - lo) / 2;
        if (starts[mid] <= at)
            lo = mid + 1;
        else
            hi = mid;
    }
    Py_ssize_t op = lo > 0 ? members[lo - 1] : -1;
    while (op >= 0 && (step[op] || end[op] <= at)) op = parent[op];
    return op;
}

static PyObject *enclosing_ops(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *ops, *parents, *calls, *prefix;
    if (!PyArg_ParseTuple(args, "O!OO!U:enclosing_ops", &PyList_Type, &ops, &parents, &PyList_Type, &calls, &prefix))
        return NULL;
    if (parents != Py_None && (!PyList_Check(parents) || PyList_GET_SIZE(parents) != PyList_GET_SIZE(ops))) {
        PyErr_SetString(PyExc_ValueError, "parents must be None or a list of one value per op");
        return NULL;
    }
    /* copies: the ops and calls stay alive and in place whatever a getattr does to the lists given */
    ops = PyList_AsTuple(ops);
    calls = PyList_AsTuple(calls);
    parents = parents == Py_None ? Py_NewRef(parents) : PyList_GetSlice(parents, 0, PyList_GET_SIZE(parents));
    Py_ssize_t size = ops ? PyTuple_GET_SIZE(ops) : 0, slots = size + 1;
    double *start = PyMem_Malloc(slots * sizeof(double)), *end = PyMem_Malloc(slots * sizeof(double));
    char *step = PyMem_Malloc(slots);
    Py_ssize_t *parent = PyMem_Malloc(slots * sizeof(Py_ssize_t)), *thread = PyMem_Malloc(slots * sizeof(Py_ssize_t));
    Py_ssize_t *members = PyMem_Malloc(slots * sizeof(Py_ssize_t)), *bounds = NULL;
    Py_ssize_t *tops = PyMem_Malloc(slots * sizeof(Py_ssize_t));
    double *member_start = PyMem_Malloc(slots * sizeof(double));
    PyObject *threads = PyDict_New(), *out = NULL;
    if (!ops || !calls || !parents || !start || !end || !step || !parent || !thread || !members || !tops || !member_start ||
        !threads) {
        if (!PyErr_Occurred()) PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t t = 0; t < slots; t++) tops[t] = -1;
    int plain = read_ops(ops, parents, prefix, threads, start, end, step, parent, thread, tops);
    if (plain <= 0) {
        if (plain == 0) out = Py_NewRef(Py_None);
        goto done;
    }
    /* each thread's ops in start order, one run per thread: a counting sort keeps the order */
    Py_ssize_t thread_count = PyDict_GET_SIZE(threads);
    if ((bounds = PyMem_Calloc(thread_count + 2, sizeof(Py_ssize_t))) == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < size; i++) bounds[thread[i] + 2]++;
    for (Py_ssize_t t = 2; t < thread_count + 2; t++) bounds[t] += bounds[t - 1];
    for (Py_ssize_t i = 0; i < size; i++) members[bounds[thread[i] + 1]++] = i;
    /* now bounds[t] is where thread t's run starts and bounds[t + 1] where it ends; the starts in the same
     * order, so that a search reads one array */
    for (Py_ssize_t j = 0; j < size; j++) member_start[j] = start[members[j]];
    if ((out = PyList_New(PyTuple_GET_SIZE(calls))) == NULL) goto done;
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(calls); k++) {
        PyObject *call = PyTuple_GET_ITEM(calls, k);
        double at;
        int timed = plain_time(call, s_ts, &at);
        Py_ssize_t number = timed > 0 ? thread_number(threads, call, 0) : -2;
        if (timed <= 0 || number == -2) {
            Py_CLEAR(out);
            if (timed == 0) out = Py_NewRef(Py_None);
            goto done;
        }
        Py_ssize_t first = number < 0 ? 0 : bounds[number];
        Py_ssize_t op = number < 0 ? -1
                                   : open_at(at, members + first, member_start + first, bounds[number + 1] - first, end,
                                             step, parent);
        PyObject *value = PyLong_FromSsize_t(op);
        if (value == NULL) {
            Py_CLEAR(out);
            goto done;
        }
        PyList_SET_ITEM(out, k, value);
    }
done:
    Py_XDECREF(ops);
    Py_XDECREF(calls);
    Py_XDECREF(parents);
    Py_XDECREF(threads);
    PyMem_Free(start);
    PyMem_Free(end);
    PyMem_Free(step);
    PyMem_Free(parent);
    PyMem_Free(thread);
    PyMem_Free(members);
    PyMem_Free(tops);
    PyMem_Free(member_start);
    PyMem_Free(bounds);
    return out;
}

/* The event's correlation id where it is an int (not a bool), else None: a new reference, NULL with an
 * exception. */
static PyObject *correlation_of(PyObject *args) {
    PyObject *value = field(args, s_correlation);
    if (value == NULL || (PyLong_Check(value) && !PyBool_Check(value))) return value;
    Py_DECREF(value);
    return Py_NewRef(Py_None);
}

/* The activity's stream: the args' `stream` unless None, else the event's tid. */
static PyObject *stream_of(PyObject *args, PyObject *args_type, PyObject *tid) {
    int struct_args = PyObject_IsInstance(args, args_type);
    if (struct_args < 0) return NULL;
    if (!struct_args) return PyObject_CallMethodObjArgs(args, s_get, s_stream, tid, NULL);
    PyObject *stream = field(args, s_stream);
    if (stream != Py_None) return stream;
    Py_DECREF(stream);
    return Py_NewRef(tid);
}

/* `mapping[key]` (a new reference), NULL where it is missing or None (an error set where one occurred). */
static PyObject *value_of(PyObject *mapping, PyObject *key) {
    PyObject *value = PyDict_GetItemWithError(mapping, key);
    return value == Py_None ? NULL : Py_XNewRef(value);
}

/* Where each launch is among the values of `calls` (see attach_device_work), and the host op found for
 * it: an open-addressed table keyed by the launch's address, the enclosing op's index at each place and
 * the host id made for it (once, shared by its activities). */
typedef struct {
    PyObject **keys;      /* the launches (borrowed: `values` holds them) */
    Py_ssize_t *places;   /* of each key */
    Py_ssize_t mask;      /* the table's size less one (a power of two) */
    PyObject *values;     /* the values of `calls` when the call began */
    PyObject *enclosing;  /* a list: the op index of each place */
    PyObject *ops, *host_of_event;
    PyObject **host_ids;  /* made for each place as first asked, NULL before */
} Launches;

static size_t pointer_hash(const void *p) { return (size_t)(((uintptr_t)p >> 4) * 0x9E3779B97F4A7C15ull); }

/* Fills `launches` from `calls` and `enclosing`: 0, or -1 with an exception. */
static int index_launches(Launches *launches, PyObject *calls, PyObject *enclosing, PyObject *ops, PyObject *host_of_event) {
    *launches = (Launches){.enclosing = enclosing, .ops = ops, .host_of_event = host_of_event};
    if ((launches->values = PyDict_Values(calls)) == NULL) return -1;
    Py_ssize_t count = PyList_GET_SIZE(launches->values), size = 8;
    if (PyList_GET_SIZE(enclosing) != count) {
        PyErr_SetString(PyExc_ValueError, "attach_device_work: enclosing needs a value per call");
        return -1;
    }
    while (size < 2 * count) size *= 2;
    launches->mask = size - 1;
    launches->keys = PyMem_Calloc((size_t)size, sizeof(PyObject *));
    launches->places = PyMem_Malloc((size_t)size * sizeof(Py_ssize_t));
    launches->host_ids = PyMem_Calloc((size_t)(count ? count : 1), sizeof(PyObject *));
    if (launches->keys == NULL || launches->places == NULL || launches->host_ids == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t k = 0; k < count; k++) {
        PyObject *launch = PyList_GET_ITEM(launches->values, k);
        size_t at = pointer_hash(launch) & (size_t)launches->mask;
        while (launches->keys[at] != NULL && launches->keys[at] != launch) at = (at + 1) & (size_t)launches->mask;
        if (launches->keys[at] == NULL) { /* a launch under two correlations keeps its first place */
            launches->keys[at] = launch;
            launches->places[at] = k;
        }
    }
    return 0;
}

static void release_launches(Launches *launches) {
    if (launches->host_ids != NULL && launches->values != NULL)
        for (Py_ssize_t k = 0; k < PyList_GET_SIZE(launches->values); k++) Py_XDECREF(launches->host_ids[k]);
    Py_XDECREF(launches->values);
    PyMem_Free(launches->keys);
    PyMem_Free(launches->places);
    PyMem_Free(launches->host_ids);
}

/* The host id of the op enclosing `launch` (a new reference), NULL with `*reason` 1 (no op) or 2 (an op
 * without a host id), or -2 with an exception. */
static PyObject *host_id_of(Launches *launches, PyObject *launch, int *reason) {
    size_t at = pointer_hash(launch) & (size_t)launches->mask;
    while (launches->keys[at] != NULL && launches->keys[at] != launch) at = (at + 1) & (size_t)launches->mask;
    *reason = 1;
    if (launches->keys[at] == NULL) return NULL; /* not a value of calls when the call began */
    Py_ssize_t place = launches->places[at];
    if (launches->host_ids[place] != NULL) {
        *reason = -1;
        return Py_NewRef(launches->host_ids[place]);
    }
    PyObject *found = PyList_GetItem(launches->enclosing, place);
    Py_ssize_t op = found == NULL ? -1 : PyLong_AsSsize_t(found);
    if (op == -1 && PyErr_Occurred()) {
        *reason = -2;
        return NULL;
    }
    if (op < 0) return NULL;
    if (op >= PyList_GET_SIZE(launches->ops)) {
        PyErr_Format(PyExc_IndexError, "attach_device_work: enclosing op %zd is not one of the %zd ops", op,
                     PyList_GET_SIZE(launches->ops));
        *reason = -2;
        return NULL;
    }
    PyObject *host_id;
    if (launches->host_of_event == Py_None) {
        host_id = PyLong_FromSsize_t(op + 1);
    } else {
        PyObject *event = PyList_GetItem(launches->ops, op); /* borrowed */
        PyObject *key = event == NULL ? NULL : PyLong_FromVoidPtr(event);
        if (key == NULL) {
            *reason = -2;
            return NULL;
        }
        host_id = value_of(launches->host_of_event, key);
        Py_DECREF(key);
        if (host_id == NULL) {
            *reason = PyErr_Occurred() ? -2 : 2;
            return NULL;
        }
    }
    if (host_id == NULL) {
        *reason = -2;
        return NULL;
    }
    launches->host_ids[place] = Py_NewRef(host_id);
    *reason = -1;
    return host_id;
}

/* What a device event joins: its launch, and the launch's host id (new references, NULL where missing), and
 * the reason it has none (-1 when it has one); -2 with an exception. A value None is missing, as .get()
 * giving None was. */
static int joined_launch(PyObject *correlation, PyObject *calls, Launches *launches, PyObject **launch,
                         PyObject **host_id) {
    *launch = *host_id = NULL;
    if (correlation == Py_None) return 0;
    if ((*launch = value_of(calls, correlation)) == NULL) return PyErr_Occurred() ? -2 : 0;
    int reason;
    *host_id = host_id_of(launches, *launch, &reason);
    return reason;
}

/* What an activity keeps of its event's args (see the header): the type, its field names (interned) and the
 * instance shared where every value is None. */
typedef struct {
    PyObject *type, *names, *empty;
} Kept;

/* `args` (of args_type) as kept->type keeps them: a new reference, NULL with an exception. */
static PyObject *kept_args(const Kept *kept, PyObject *args) {
    Py_ssize_t n = PyTuple_GET_SIZE(kept->names);
    PyObject *values[16];
    int any = 0;
    Py_ssize_t read = 0;
    PyObject *out = NULL;
    for (; read < n; read++) {
        if ((values[read] = field(args, PyTuple_GET_ITEM(kept->names, read))) == NULL) goto done;
        any |= values[read] != Py_None;
    }
    out = any ? PyObject_Vectorcall(kept->type, values, n, NULL) : Py_NewRef(kept->empty);
done:
    for (Py_ssize_t k = 0; k < read; k++) Py_DECREF(values[k]);
    return out;
}

/* The activity of one device event (see attach_device_work): a new reference, NULL with an exception;
 * `*reason` as joined_launch gives it. */
static PyObject *device_activity(PyObject *event, PyObject *calls, Launches *launches, PyObject *activity_type,
                                 PyObject *args_type, const Kept *kept, PyObject *tids, int *reason) {
    PyObject *name = NULL, *cat = NULL, *pid = NULL, *tid = NULL, *ts = NULL, *dur = NULL, *args = NULL;
    PyObject *correlation = NULL, *stream = NULL, *launch_name = NULL, *launch_ts = NULL, *launch_dur = NULL;
    PyObject *launch_end = NULL, *launch_tid = NULL, *activity = NULL, *launch = NULL, *host_id = NULL;
    if ((name = field(event, s_name)) == NULL || (cat = field(event, s_cat)) == NULL ||
        (pid = field(event, s_pid)) == NULL || (tid = field(event, s_tid)) == NULL || (ts = field(event, s_ts)) == NULL ||
        (dur = field(event, s_dur)) == NULL || (args = field(event, s_args)) == NULL ||
        (correlation = correlation_of(args)) == NULL ||
        (*reason = joined_launch(correlation, calls, launches, &launch, &host_id)) == -2 ||
        (stream = stream_of(args, args_type, tid)) == NULL)
        goto done;
    if (kept->type != NULL) {
        int struct_args = PyObject_IsInstance(args, args_type);
        PyObject *slim = struct_args > 0 ? kept_args(kept, args) : NULL;
        if (struct_args < 0 || (struct_args > 0 && slim == NULL)) goto done;
        if (slim != NULL) Py_SETREF(args, slim);
    }
    PyObject *fields[13] = {name, cat, pid, stream, ts, dur, correlation, host_id ? host_id : Py_None, NULL, args};
    Py_ssize_t count = 10;
    if (launch == NULL) {
        fields[8] = PyUnicode_New(0, 0); /* the empty string, shared */
        activity = fields[8] == NULL ? NULL : PyObject_Vectorcall(activity_type, fields, count, NULL);
        Py_XDECREF(fields[8]);
        goto done;
    }
    if ((launch_name = field(launch, s_name)) == NULL || (launch_ts = field(launch, s_ts)) == NULL ||
        (launch_dur = field(launch, s_dur)) == NULL || (launch_end = PyNumber_Add(launch_ts, launch_dur)) == NULL ||
        (launch_tid = field(launch, s_tid)) == NULL)
        goto done;
    PyObject *thread_tid = PyDict_SetDefault(tids, launch_tid, launch_tid); /* borrowed: the thread's first */
    if (thread_tid == NULL) goto done;
    fields[8] = launch_name;
    fields[10] = launch_ts;
    fields[11] = launch_end;
    fields[12] = thread_tid;
    count = 13;
    activity = PyObject_Vectorcall(activity_type, fields, count, NULL);
done:
    Py_XDECREF(name);
    Py_XDECREF(cat);
    Py_XDECREF(pid);
    Py_XDECREF(tid);
    Py_XDECREF(ts);
    Py_XDECREF(dur);
    Py_XDECREF(args);
    Py_XDECREF(correlation);
    Py_XDECREF(stream);
    Py_XDECREF(launch_name);
    Py_XDECREF(launch_ts);
    Py_XDECREF(launch_dur);
    Py_XDECREF(launch_end);
    Py_XDECREF(launch_tid);
    Py_XDECREF(launch);
    Py_XDECREF(host_id);
    return activity;
}

/* The kept args' type, its fields' names (interned: the slot cache compares them by identity) and its
 * shared instance into `kept`: 0, or -1 with an exception. */
static int kept_fields(PyObject *type, Kept *kept) {
    PyObject *fields = PyObject_GetAttrString(type, "__struct_fields__");
    kept->names = fields == NULL ? NULL : interned_names(fields, 16, "attach_device_work: kept_args");
    Py_XDECREF(fields);
    if (kept->names == NULL || (kept->empty = PyObject_CallNoArgs(type)) == NULL) {
        Py_CLEAR(kept->names);
        return -1;
    }
    kept->type = Py_NewRef(type);
    return 0;
}

static PyObject *attach_device_work(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *events, *calls, *enclosing, *ops, *host_of_event, *activity_type, *args_type;
    Kept kept = {NULL, NULL, NULL};
    Launches launches = {0};
    PyObject *kept_type = Py_None;
    if (!PyArg_ParseTuple(args, "O!O!O!O!OOO|O:attach_device_work", &PyList_Type, &events, &PyDict_Type, &calls,
                          &PyList_Type, &enclosing, &PyList_Type, &ops, &host_of_event, &activity_type, &args_type,
                          &kept_type))
        return NULL;
    if (host_of_event != Py_None && !PyDict_Check(host_of_event)) {
        PyErr_SetString(PyExc_TypeError, "attach_device_work: host_of_event must be a dict or None");
        return NULL;
    }
    if (kept_type != Py_None && kept_fields(kept_type, &kept) < 0) return NULL;
    /* copies: the events, places and ops stay alive and in place whatever a getattr or a .get does */
    events = PyList_AsTuple(events);
    enclosing = PyList_GetSlice(enclosing, 0, PyList_GET_SIZE(enclosing));
    ops = PyList_GetSlice(ops, 0, PyList_GET_SIZE(ops));
    PyObject *activities = events == NULL ? NULL : PyList_New(PyTuple_GET_SIZE(events));
    PyObject *unattached = PyList_New(0), *tids = PyDict_New(), *out = NULL;
    if (activities == NULL || unattached == NULL || tids == NULL || enclosing == NULL || ops == NULL ||
        index_launches(&launches, calls, enclosing, ops, host_of_event) < 0)
        goto done;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(events); i++) {
        int reason = -1;
        PyObject *activity =
            device_activity(PyTuple_GET_ITEM(events, i), calls, &launches, activity_type, args_type, &kept, tids, &reason);
        if (activity == NULL) goto done;
        PyList_SET_ITEM(activities, i, activity);
        if (reason >= 0) {
            PyObject *pair = Py_BuildValue("(ni)", i, reason);
            int rc = pair == NULL ? -1 : PyList_Append(unattached, pair);
            Py_XDECREF(pair);
            if (rc < 0) goto done;
        }
    }
    out = PyTuple_Pack(2, activities, unattached);
done:
    release_launches(&launches);
    Py_XDECREF(events);
    Py_XDECREF(enclosing);
    Py_XDECREF(ops);
    Py_XDECREF(activities);
    Py_XDECREF(unattached);
    Py_XDECREF(tids);
    Py_XDECREF(kept.type);
    Py_XDECREF(kept.names);
    Py_XDECREF(kept.empty);
    return out;
}

static PyMethodDef methods[] = {
    {"join_host_ops", join_host_ops, METH_VARARGS,
     "join_host_ops(nodes, skip_names, index_of, events, exclusive_us, timing_type) -> (timing, host_of_event, "
     "considered, joined, agree, unmatched)"},
    {"enclosing_ops", enclosing_ops, METH_VARARGS, "enclosing_ops(ops, parents, calls, step_prefix) -> list[int] | None"},
    {"attach_device_work", attach_device_work, METH_VARARGS,
     "attach_device_work(events, calls, enclosing, ops, host_of_event, activity_type, args_type[, kept_args]) -> "
     "(activities, unattached)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_link_join", NULL, -1, methods};

PyMODINIT_FUNC PyInit__link_join(void) {
    static const Interned names[] = {
        {&s_id, "id"},     {&s_name, "name"}, {&s_rf_id, "rf_id"}, {&s_ts, "ts"},
        {&s_dur, "dur"},   {&s_tid, "tid"},   {&s_cat, "cat"},     {&s_pid, "pid"},
        {&s_args, "args"}, {&s_correlation, "correlation"},        {&s_stream, "stream"}, {&s_get, "get"},
    };
    if (intern_all(names, sizeof names / sizeof names[0]) < 0) return NULL;
    return PyModule_Create(&module);
}
