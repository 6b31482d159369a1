/* Compiled versions of the partitioner's per-node loops (mobile_ep.partition, mobile_ep.capability).
 *
 * Each function here has a pure-Python twin with the same arguments and the same result (partition._py_*
 * and capability._ProposalContext.signatures); mobile_ep._accel loads this module when it was built and
 * MOBILE_EP_PURE_PYTHON is not set.  tests/test_speedups.py runs both on the same inputs and compares.
 * The extension is optional: an install without a C compiler uses the twins.
 *
 * Nodes are numbered 0..n-1 and their edges are lists of Python ints; inside, they are C arrays.
 *
 * shapes_within is the other kind: a quick "nothing to refuse" read of a serialized model's declared shapes
 * (mobile_ep.ir.check_inferred_shapes), whose every other answer sends the model to the Python inspection.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h> /* T_OBJECT, T_OBJECT_EX, READ_RESTRICTED */
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* -------------------------------------------------------------------------------------------------- */
/* helpers                                                                                              */
/* -------------------------------------------------------------------------------------------------- */

/* An int in [0, n) from a Python object, or -1 with an exception set. */
static Py_ssize_t
as_index(PyObject *item, Py_ssize_t n)
{
    Py_ssize_t v = PyLong_AsSsize_t(item);
    if (v == -1 && PyErr_Occurred())
        return -1;
    if (v < 0 || v >= n) {
        PyErr_Format(PyExc_IndexError, "node number %zd out of range [0, %zd)", v, n);
        return -1;
    }
    return v;
}

/* -------------------------------------------------------------------------------------------------- */
/* slot reads                                                                                           */
/* -------------------------------------------------------------------------------------------------- */

/* The getters mobile_ep._fields hands these functions are mostly operator.attrgetter objects on a slot of
 * onnx_ir's classes.  Calling one goes through the generic attribute lookup (a few hundred instructions);
 * the slot itself is a pointer at a fixed offset in the object.  field_get(getter, obj) reads that pointer
 * when the read would find exactly it: the getter is an attrgetter of one plain name, obj's type looks
 * attributes up the generic way, and the name resolves on that type to a member descriptor of an object
 * slot (what a __slots__ entry is), which as a data descriptor wins over anything else.  Any other getter,
 * type or attribute is called as before.  What was worked out is remembered per (getter, exact type), with
 * references to both (so neither address is reused while remembered), and holds only while the type's
 * version tag is the one it had (any change to the class or its bases changes it). */
typedef struct {
    PyObject *getter;
    PyTypeObject *type;
    unsigned int tag;
    Py_ssize_t offset; /* -1: call the getter */
    int kind;          /* T_OBJECT (None when unset) or T_OBJECT_EX (the getter raises when unset) */
} SlotRead;

#define SLOT_READS 256 /* (open addressing; the getters and types of a run pair up a few dozen ways) */
static SlotRead slot_reads[SLOT_READS];
static int slot_reads_used;
static PyObject *attrgetter_type; /* operator.attrgetter (module init) */
static PyObject *str_reduce;

/* The offset of the object slot that getter(obj) reads for objects of exactly *type*; -1 if it is not a
 * plain slot read (then the getter is called), -2 with an exception set. */
static Py_ssize_t
slot_offset(PyObject *getter, PyTypeObject *type, int *kind)
{
    if ((PyObject *)Py_TYPE(getter) != attrgetter_type || type->tp_getattro != PyObject_GenericGetAttr)
        return -1;
    PyObject *reduced = PyObject_CallMethodNoArgs(getter, str_reduce); /* (operator.attrgetter, names) */
    if (reduced == NULL)
        return -2;
    Py_ssize_t offset = -1;
    PyObject *names = PyTuple_Check(reduced) && PyTuple_GET_SIZE(reduced) == 2 ? PyTuple_GET_ITEM(reduced, 1) : NULL;
    PyObject *name = names != NULL && PyTuple_Check(names) && PyTuple_GET_SIZE(names) == 1
                         ? PyTuple_GET_ITEM(names, 0) : NULL;
    Py_ssize_t dot = name != NULL && PyUnicode_CheckExact(name)
                         ? PyUnicode_FindChar(name, '.', 0, PyUnicode_GET_LENGTH(name), 1) : 0;
    if (dot == -2) {
        Py_DECREF(reduced);
        return -2;
    }
    if (dot == -1) { /* one name, not a dotted path */
        PyObject *descr = _PyType_Lookup(type, name); /* borrowed; no exception */
        if (descr != NULL && Py_IS_TYPE(descr, &PyMemberDescr_Type)
            && PyType_IsSubtype(type, PyDescr_TYPE(descr))) {
            PyMemberDef *member = ((PyMemberDescrObject *)descr)->d_member;
            if ((member->type == T_OBJECT || member->type == T_OBJECT_EX) && !(member->flags & READ_RESTRICTED)) {
                offset = member->offset;
                *kind = member->type;
            }
        }
    }
    Py_DECREF(reduced);
    return offset;
}

/* The entry for (getter, type): the one holding them, or the empty one where they belong (NULL getter). */
static SlotRead *
slot_entry(PyObject *getter, PyTypeObject *type)
{
    uint64_t h = (uint64_t)((uintptr_t)getter >> 4) * 0x9E3779B97F4A7C15ull
                 ^ (uint64_t)((uintptr_t)type >> 4) * 0xC2B2AE3D27D4EB4Full;
    for (size_t i = (size_t)(h >> 56);; i = (i + 1) & (SLOT_READS - 1)) {
        SlotRead *entry = &slot_reads[i];
        if (entry->getter == NULL || (entry->getter == getter && entry->type == type))
            return entry;
    }
}

/* getter(obj): a new reference, or NULL with an exception set. */
static PyObject *
field_get(PyObject *getter, PyObject *obj)
{
    PyTypeObject *type = Py_TYPE(obj);
    SlotRead *entry = slot_entry(getter, type);
    if (entry->getter == NULL || (entry->offset >= 0 && (!PyType_HasFeature(type, Py_TPFLAGS_VALID_VERSION_TAG)
                                                         || type->tp_version_tag != entry->tag))) {
        int kind = T_OBJECT_EX;
        Py_ssize_t offset = slot_offset(getter, type, &kind);
        if (offset == -2)
            return NULL;
        entry = slot_entry(getter, type); /* (again: nothing above runs Python code, but the table is shared) */
        /* (the lookup gave the type a version tag if it could have one: without, nothing is remembered) */
        if (offset >= 0 && !PyType_HasFeature(type, Py_TPFLAGS_VALID_VERSION_TAG))
            return PyObject_CallOneArg(getter, obj);
        if (entry->getter == NULL) { /* a new pair */
            if (slot_reads_used >= SLOT_READS * 3 / 4) { /* (kept at most three quarters full: start afresh) */
                SlotRead old[SLOT_READS];
                memcpy(old, slot_reads, sizeof(old));
                memset(slot_reads, 0, sizeof(slot_reads));
                slot_reads_used = 0;
                for (size_t i = 0; i < SLOT_READS; i++) { /* (after the table is empty: a release may run code) */
                    Py_XDECREF(old[i].getter);
                    Py_XDECREF((PyObject *)old[i].type);
                }
                entry = slot_entry(getter, type);
            }
            if (entry->getter == NULL) { /* (unless code a release ran put the pair there meanwhile) */
                entry->getter = Py_NewRef(getter);
                entry->type = (PyTypeObject *)Py_NewRef((PyObject *)type);
                slot_reads_used++;
            }
        }
        entry->tag = type->tp_version_tag;
        entry->offset = offset;
        entry->kind = kind;
    }
    if (entry->offset < 0)
        return PyObject_CallOneArg(getter, obj);
    PyObject *value = *(PyObject **)((char *)obj + entry->offset);
    if (value != NULL)
        return Py_NewRef(value);
    if (entry->kind == T_OBJECT)
        Py_RETURN_NONE;
    return PyObject_CallOneArg(getter, obj); /* an unset slot: the getter raises its AttributeError */
}

PyDoc_STRVAR(gather_doc,
"gather(getter, objects) -> list\n\n"
"[getter(o) for o in objects]: a slot read for each where the getter reads a slot (see field_get).");

static PyObject *
speedups_gather(PyObject *self, PyObject *args)
{
    PyObject *getter, *objects;
    if (!PyArg_ParseTuple(args, "OO:gather", &getter, &objects))
        return NULL;
    PyObject *fast = PySequence_Fast(objects, "objects must be a sequence");
    if (fast == NULL)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    PyObject *result = PyList_New(n);
    if (result == NULL) {
        Py_DECREF(fast);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        /* (the getter may run Python code that changes *objects*: index the list afresh each time) */
        if (i >= PySequence_Fast_GET_SIZE(fast)) {
            PyErr_SetString(PyExc_RuntimeError, "objects changed while read");
            goto error;
        }
        PyObject *item = PySequence_Fast_GET_ITEM(fast, i);
        Py_INCREF(item);
        PyObject *value = field_get(getter, item);
        Py_DECREF(item);
        if (value == NULL)
            goto error;
        PyList_SET_ITEM(result, i, value);
    }
    Py_DECREF(fast);
    return result;
error:
    Py_DECREF(result);
    Py_DECREF(fast);
    return NULL;
}

/* Python ints 0..n-1, shared by every list a call builds (one allocation per number, not per use). */
typedef struct {
    PyObject **items;
    Py_ssize_t n;
} Numbers;

static int
numbers_init(Numbers *nums, Py_ssize_t n)
{
    nums->n = n;
    nums->items = PyMem_Calloc(n > 0 ? (size_t)n : 1, sizeof(PyObject *));
    if (nums->items == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        nums->items[i] = PyLong_FromSsize_t(i);
        if (nums->items[i] == NULL)
            return -1;
    }
    return 0;
}

static void
numbers_free(Numbers *nums)
{
    if (nums->items == NULL)
        return;
    for (Py_ssize_t i = 0; i < nums->n; i++)
        Py_XDECREF(nums->items[i]);
    PyMem_Free(nums->items);
    nums->items = NULL;
}

static PyObject *
number(Numbers *nums, Py_ssize_t i)
{
    PyObject *v = nums->items[i];
    Py_INCREF(v);
    return v;
}

/* A list of Python ints from a C array. */
static PyObject *
int_list(Numbers *nums, const Py_ssize_t *values, Py_ssize_t count)
{
    PyObject *list = PyList_New(count);
    if (list == NULL)
        return NULL;
    for (Py_ssize_t k = 0; k < count; k++)
        PyList_SET_ITEM(list, k, number(nums, values[k]));
    return list;
}

/* Adjacency lists in one block (compressed rows): the entries of row i are data[start[i]:start[i+1]]. */
typedef struct {
    Py_ssize_t *start; /* n + 1 */
    Py_ssize_t *data;
    Py_ssize_t n;
} Rows;

static void
rows_free(Rows *rows)
{
    PyMem_Free(rows->start);
    PyMem_Free(rows->data);
    rows->start = rows->data = NULL;
}

/* Rows from a sequence of sequences of ints in [0, limit). */
static int
rows_read(PyObject *seq, Py_ssize_t limit, Rows *rows, const char *what)
{
    rows->start = rows->data = NULL;
    PyObject *fast = PySequence_Fast(seq, what);
    if (fast == NULL)
        return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    PyObject **items = PySequence_Fast_ITEMS(fast);
    rows->n = n;
    rows->start = PyMem_Malloc((size_t)(n + 1) * sizeof(Py_ssize_t));
    if (rows->start == NULL)
        goto nomem;
    Py_ssize_t total = 0;
    rows->start[0] = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_ssize_t size = PyObject_Length(items[i]);
        if (size < 0)
            goto error;
        total += size;
        rows->start[i + 1] = total;
    }
    rows->data = PyMem_Malloc((size_t)(total > 0 ? total : 1) * sizeof(Py_ssize_t));
    if (rows->data == NULL)
        goto nomem;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *row = PySequence_Fast(items[i], what);
        if (row == NULL)
            goto error;
        Py_ssize_t size = PySequence_Fast_GET_SIZE(row);
        if (size != rows->start[i + 1] - rows->start[i]) {
            Py_DECREF(row);
            PyErr_Format(PyExc_ValueError, "%s changed size while read", what);
            goto error;
        }
        PyObject **entries = PySequence_Fast_ITEMS(row);
        Py_ssize_t *out = rows->data + rows->start[i];
        for (Py_ssize_t k = 0; k < size; k++) {
            out[k] = as_index(entries[k], limit);
            if (out[k] < 0) {
                Py_DECREF(row);
                goto error;
            }
        }
        Py_DECREF(row);
    }
    Py_DECREF(fast);
    return 0;
nomem:
    PyErr_NoMemory();
error:
    Py_DECREF(fast);
    rows_free(rows);
    return -1;
}

/* A sequence of ints as a C array (each in [0, limit) unless limit < 0). */
static Py_ssize_t *
ints_read(PyObject *seq, Py_ssize_t *count, Py_ssize_t limit, const char *what)
{
    PyObject *fast = PySequence_Fast(seq, what);
    if (fast == NULL)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    PyObject **items = PySequence_Fast_ITEMS(fast);
    Py_ssize_t *values = PyMem_Malloc((size_t)(n > 0 ? n : 1) * sizeof(Py_ssize_t));
    if (values == NULL) {
        Py_DECREF(fast);
        PyErr_NoMemory();
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        if (limit >= 0) {
            values[i] = as_index(items[i], limit);
            if (values[i] < 0)
                goto error;
        }
        else {
            values[i] = PyLong_AsSsize_t(items[i]);
            if (values[i] == -1 && PyErr_Occurred())
                goto error;
        }
    }
    Py_DECREF(fast);
    *count = n;
    return values;
error:
    Py_DECREF(fast);
    PyMem_Free(values);
    return NULL;
}

/* -------------------------------------------------------------------------------------------------- */
/* producers(inputs, made_by)                                                                           */
/* -------------------------------------------------------------------------------------------------- */
PyDoc_STRVAR(producers_doc,
"producers(inputs, made_by) -> list of tuples\n\n"
"For each node's inputs (a sequence of values, None for an omitted one), the distinct numbers that\n"
"made_by maps them to, in the order first read; values made_by does not hold are dropped.");

static PyObject *
speedups_producers(PyObject *self, PyObject *args)
{
    PyObject *inputs, *made_by;
    if (!PyArg_ParseTuple(args, "OO!:producers", &inputs, &PyDict_Type, &made_by))
        return NULL;
    PyObject *fast = PySequence_Fast(inputs, "inputs must be a sequence");
    if (fast == NULL)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    PyObject **rows = PySequence_Fast_ITEMS(fast);
    PyObject *result = PyList_New(n);
    PyObject **found = NULL;
    Py_ssize_t capacity = 0;
    if (result == NULL)
        goto error;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *row = PySequence_Fast(rows[i], "each node's inputs must be a sequence");
        if (row == NULL)
            goto error;
        Py_ssize_t size = PySequence_Fast_GET_SIZE(row);
        PyObject **values = PySequence_Fast_ITEMS(row);
        if (size > capacity) {
            PyObject **grown = PyMem_Realloc(found, (size_t)size * sizeof(PyObject *));
            if (grown == NULL) {
                Py_DECREF(row);
                PyErr_NoMemory();
                goto error;
            }
            found = grown;
            capacity = size;
        }
        Py_ssize_t count = 0;
        for (Py_ssize_t k = 0; k < size; k++) {
            if (values[k] == Py_None)
                continue;
            PyObject *source = PyDict_GetItemWithError(made_by, values[k]); /* borrowed */
            if (source == NULL) {
                if (PyErr_Occurred()) {
                    Py_DECREF(row);
                    goto error;
                }
                continue;
            }
            if (source == Py_None)
                continue;
            int seen = 0;
            for (Py_ssize_t m = 0; m < count && !seen; m++) {
                int same = PyObject_RichCompareBool(found[m], source, Py_EQ);
                if (same < 0) {
                    Py_DECREF(row);
                    goto error;
                }
                seen = same;
            }
            if (!seen)
                found[count++] = source;
        }
        PyObject *tuple = PyTuple_New(count);
        if (tuple == NULL) {
            Py_DECREF(row);
            goto error;
        }
        for (Py_ssize_t m = 0; m < count; m++) {
            Py_INCREF(found[m]);
            PyTuple_SET_ITEM(tuple, m, found[m]);
        }
        Py_DECREF(row);
        PyList_SET_ITEM(result, i, tuple);
    }
    PyMem_Free(found);
    Py_DECREF(fast);
    return result;
error:
    PyMem_Free(found);
    Py_XDECREF(result);
    Py_DECREF(fast);
    return NULL;
}

/* -------------------------------------------------------------------------------------------------- */
/* in_degrees(producers)                                                                                */
/* -------------------------------------------------------------------------------------------------- */
PyDoc_STRVAR(in_degrees_doc,
"in_degrees(producers) -> (in_degree, users)\n\n"
"Each node's count of producers, and each node's users in node order.");

static PyObject *
speedups_in_degrees(PyObject *self, PyObject *producers)
{
    Py_ssize_t n = PyObject_Length(producers);
    if (n < 0)
        return NULL;
    Rows rows;
    if (rows_read(producers, n, &rows, "producers must be a sequence of sequences of ints") < 0)
        return NULL;
    PyObject *result = NULL, *degrees = NULL, *users = NULL;
    Py_ssize_t *count = PyMem_Calloc((size_t)(n > 0 ? n : 1), sizeof(Py_ssize_t));
    Py_ssize_t *fill = PyMem_Calloc((size_t)(n > 0 ? n : 1), sizeof(Py_ssize_t));
    Py_ssize_t *flat = PyMem_Malloc((size_t)(rows.start[n] > 0 ? rows.start[n] : 1) * sizeof(Py_ssize_t));
    Py_ssize_t *offset = PyMem_Malloc((size_t)(n + 1) * sizeof(Py_ssize_t));
    Numbers nums = {NULL, 0};
    if (count == NULL || fill == NULL || flat == NULL || offset == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    if (numbers_init(&nums, n) < 0)
        goto done;
    for (Py_ssize_t e = 0; e < rows.start[n]; e++)
        count[rows.data[e]]++;
    offset[0] = 0;
    for (Py_ssize_t j = 0; j < n; j++)
        offset[j + 1] = offset[j] + count[j];
    for (Py_ssize_t i = 0; i < n; i++)  /* users of j in increasing i: node order */
        for (Py_ssize_t e = rows.start[i]; e < rows.start[i + 1]; e++) {
            Py_ssize_t j = rows.data[e];
            flat[offset[j] + fill[j]++] = i;
        }
    degrees = PyList_New(n);
    users = PyList_New(n);
    if (degrees == NULL || users == NULL)
        goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *degree = PyLong_FromSsize_t(rows.start[i + 1] - rows.start[i]);
        if (degree == NULL)
            goto done;
        PyList_SET_ITEM(degrees, i, degree);
        PyObject *row = int_list(&nums, flat + offset[i], count[i]);
        if (row == NULL)
            goto done;
        PyList_SET_ITEM(users, i, row);
    }
    result = PyTuple_Pack(2, degrees, users);
done:
    Py_XDECREF(degrees);
    Py_XDECREF(users);
    numbers_free(&nums);
    PyMem_Free(count);
    PyMem_Free(fill);
    PyMem_Free(flat);
    PyMem_Free(offset);
    rows_free(&rows);
    return result;
}

/* -------------------------------------------------------------------------------------------------- */
/* drain(in_degree, users)                                                                              */
/* -------------------------------------------------------------------------------------------------- */
PyDoc_STRVAR(drain_doc,
"drain(in_degree, users) -> (placed, pending)\n\n"
"Kahn's algorithm, depth first among ready nodes and graph order first: the nodes placed in order,\n"
"and each node's count of producers never placed.");

static PyObject *
speedups_drain(PyObject *self, PyObject *args)
{
    PyObject *degree_seq, *users_seq;
    if (!PyArg_ParseTuple(args, "OO:drain", &degree_seq, &users_seq))
        return NULL;
    Py_ssize_t n;
    Py_ssize_t *pending = ints_read(degree_seq, &n, -1, "in_degree must be a sequence of ints");
    if (pending == NULL)
        return NULL;
    Rows users;
    PyObject *result = NULL, *placed_list = NULL, *pending_list = NULL;
    Py_ssize_t *ready = NULL, *placed = NULL;
    Numbers nums = {NULL, 0};
    if (rows_read(users_seq, n, &users, "users must be a sequence of sequences of ints") < 0) {
        PyMem_Free(pending);
        return NULL;
    }
    if (users.n != n) {
        PyErr_SetString(PyExc_ValueError, "in_degree and users differ in length");
        goto done;
    }
    /* each node is made ready at most once (its count reaches zero once): n slots suffice */
    ready = PyMem_Malloc((size_t)(n > 0 ? n : 1) * sizeof(Py_ssize_t));
    placed = PyMem_Malloc((size_t)(n > 0 ? n : 1) * sizeof(Py_ssize_t));
    if (ready == NULL || placed == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    if (numbers_init(&nums, n) < 0)
        goto done;
    Py_ssize_t top = 0, count = 0;
    for (Py_ssize_t i = n - 1; i >= 0; i--)
        if (pending[i] == 0)
            ready[top++] = i;
    while (top > 0) {
        Py_ssize_t i = ready[--top];
        placed[count++] = i;
        for (Py_ssize_t e = users.start[i + 1] - 1; e >= users.start[i]; e--) {
            Py_ssize_t user = users.data[e];
            pending[user]--;
            if (pending[user] == 0) {
                if (top >= n) {
                    PyErr_SetString(PyExc_ValueError, "users lists a node more often than in_degree counts it");
                    goto done;
                }
                ready[top++] = user;
            }
        }
    }
    placed_list = int_list(&nums, placed, count);
    if (placed_list == NULL)
        goto done;
    pending_list = PyList_New(n);
    if (pending_list == NULL)
        goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *v = PyLong_FromSsize_t(pending[i]);
        if (v == NULL)
            goto done;
        PyList_SET_ITEM(pending_list, i, v);
    }
    result = PyTuple_Pack(2, placed_list, pending_list);
done:
    Py_XDECREF(placed_list);
    Py_XDECREF(pending_list);
    numbers_free(&nums);
    PyMem_Free(ready);
    PyMem_Free(placed);
    PyMem_Free(pending);
    rows_free(&users);
    return result;
}

/* -------------------------------------------------------------------------------------------------- */
/* ordered_consumers(order, users)                                                                      */
/* -------------------------------------------------------------------------------------------------- */
PyDoc_STRVAR(ordered_consumers_doc,
"ordered_consumers(order, users) -> (position, consumers)\n\n"
"Each node's position in order (a permutation of 0..n-1), and each node's users sorted by position.");

static const Py_ssize_t *sort_keys; /* (qsort has no context argument; only used with the GIL held) */

static int
by_position(const void *a, const void *b)
{
    Py_ssize_t x = sort_keys[*(const Py_ssize_t *)a], y = sort_keys[*(const Py_ssize_t *)b];
    return (x > y) - (x < y);
}

static PyObject *
speedups_ordered_consumers(PyObject *self, PyObject *args)
{
    PyObject *order_seq, *users_seq;
    if (!PyArg_ParseTuple(args, "OO:ordered_consumers", &order_seq, &users_seq))
        return NULL;
    Py_ssize_t n = PyObject_Length(users_seq);
    if (n < 0)
        return NULL;
    Py_ssize_t count;
    Py_ssize_t *order = ints_read(order_seq, &count, n, "order must be a sequence of node numbers");
    if (order == NULL)
        return NULL;
    Rows users;
    PyObject *result = NULL, *position_list = NULL, *consumers = NULL;
    Py_ssize_t *position = NULL;
    Numbers nums = {NULL, 0};
    if (rows_read(users_seq, n, &users, "users must be a sequence of sequences of ints") < 0) {
        PyMem_Free(order);
        return NULL;
    }
    if (count != n) {
        PyErr_SetString(PyExc_ValueError, "order must hold every node once");
        goto done;
    }
    position = PyMem_Malloc((size_t)(n > 0 ? n : 1) * sizeof(Py_ssize_t));
    if (position == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++)
        position[i] = -1;
    for (Py_ssize_t k = 0; k < n; k++) {
        if (position[order[k]] >= 0) {
            PyErr_SetString(PyExc_ValueError, "order must hold every node once");
            goto done;
        }
        position[order[k]] = k;
    }
    if (numbers_init(&nums, n) < 0)
        goto done;
    position_list = int_list(&nums, position, n);
    consumers = PyList_New(n);
    if (position_list == NULL || consumers == NULL)
        goto done;
    sort_keys = position;
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_ssize_t *row = users.data + users.start[i];
        Py_ssize_t size = users.start[i + 1] - users.start[i];
        if (size > 1)
            qsort(row, (size_t)size, sizeof(Py_ssize_t), by_position); /* (positions are distinct) */
        PyObject *list = int_list(&nums, row, size);
        if (list == NULL)
            goto done;
        PyList_SET_ITEM(consumers, i, list);
    }
    result = PyTuple_Pack(2, position_list, consumers);
done:
    Py_XDECREF(position_list);
    Py_XDECREF(consumers);
    numbers_free(&nums);
    PyMem_Free(position);
    PyMem_Free(order);
    rows_free(&users);
    return result;
}

/* -------------------------------------------------------------------------------------------------- */
/* waves(order, consumers, in_degree, is_supported, fast=None)                                          */
/* -------------------------------------------------------------------------------------------------- */
PyDoc_STRVAR(waves_doc,
"waves(order, consumers, in_degree, is_supported, fast=None) -> list of lists\n\n"
"ONNX Runtime's wave algorithm over units 0..n-1 (see mobile_ep.partition._waves).  fast, when given,\n"
"is (signatures, answers, keys, memo, yes): a unit u whose signatures[u] is not None, whose keys[u] is\n"
"not in memo, and for which answers.get(signatures[u]) is yes, is supported without calling\n"
"is_supported; memo[keys[u]] is set to yes.");

typedef struct {
    Py_ssize_t *items;
    Py_ssize_t size, capacity;
} Vec;

static int
vec_push(Vec *v, Py_ssize_t x)
{
    if (v->size == v->capacity) {
        Py_ssize_t capacity = v->capacity ? 2 * v->capacity : 64;
        Py_ssize_t *grown = PyMem_Realloc(v->items, (size_t)capacity * sizeof(Py_ssize_t));
        if (grown == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        v->items = grown;
        v->capacity = capacity;
    }
    v->items[v->size++] = x;
    return 0;
}

/* 1 if the fast path says unit u is supported, 0 if is_supported must be asked, -1 on error. */
static int
fast_answer(PyObject *fast_signatures, PyObject *answers, PyObject *keys, PyObject *memo, PyObject *yes,
            Py_ssize_t u)
{
    PyObject *signature = PyList_GET_ITEM(fast_signatures, u);
    if (signature == Py_None)
        return 0;
    PyObject *key = PyList_GET_ITEM(keys, u);
    int known = PyDict_Contains(memo, key);
    if (known != 0)
        return known < 0 ? -1 : 0;
    PyObject *answer = PyDict_GetItemWithError(answers, signature); /* borrowed */
    if (answer == NULL)
        return PyErr_Occurred() ? -1 : 0;
    if (answer != yes)
        return 0;
    if (PyDict_SetItem(memo, key, yes) < 0)
        return -1;
    return 1;
}

static PyObject *
speedups_waves(PyObject *self, PyObject *args)
{
    PyObject *order_seq, *consumers_seq, *degree_seq, *is_supported, *fast = Py_None;
    PyObject *fast_signatures = NULL, *answers = NULL, *keys = NULL, *memo = NULL, *yes = NULL;
    if (!PyArg_ParseTuple(args, "OOOO|O:waves", &order_seq, &consumers_seq, &degree_seq, &is_supported, &fast))
        return NULL;
    if (!PyCallable_Check(is_supported)) {
        PyErr_SetString(PyExc_TypeError, "is_supported must be callable");
        return NULL;
    }
    Py_ssize_t n;
    Py_ssize_t *remaining = ints_read(degree_seq, &n, -1, "in_degree must be a sequence of ints");
    if (remaining == NULL)
        return NULL;
    if (fast != Py_None) {
        if (!PyArg_ParseTuple(fast, "O!O!O!O!O:waves fast path", &PyList_Type, &fast_signatures, &PyDict_Type,
                              &answers, &PyList_Type, &keys, &PyDict_Type, &memo, &yes)) {
            PyMem_Free(remaining);
            return NULL;
        }
        if (PyList_GET_SIZE(fast_signatures) != n || PyList_GET_SIZE(keys) != n) {
            PyMem_Free(remaining);
            PyErr_SetString(PyExc_ValueError, "the fast path's signatures and keys must have one entry per unit");
            return NULL;
        }
    }
    Rows consumers;
    Py_ssize_t count;
    Py_ssize_t *order = NULL;
    signed char *supported = NULL; /* -1 not asked yet, 0 no, 1 yes */
    Py_ssize_t *border = NULL;     /* the wave in which a unit was last put in the border, or -1 */
    Vec queue = {NULL, 0, 0}, deferred = {NULL, 0, 0}, group = {NULL, 0, 0};
    PyObject *groups = NULL;
    Numbers nums = {NULL, 0};
    if (rows_read(consumers_seq, n, &consumers, "consumers must be a sequence of sequences of ints") < 0) {
        PyMem_Free(remaining);
        return NULL;
    }
    if (consumers.n != n) {
        PyErr_SetString(PyExc_ValueError, "consumers and in_degree differ in length");
        goto error;
    }
    order = ints_read(order_seq, &count, n, "order must be a sequence of unit numbers");
    if (order == NULL)
        goto error;
    supported = PyMem_Malloc((size_t)(n > 0 ? n : 1));
    border = PyMem_Malloc((size_t)(n > 0 ? n : 1) * sizeof(Py_ssize_t));
    if (supported == NULL || border == NULL) {
        PyErr_NoMemory();
        goto error;
    }
    memset(supported, -1, (size_t)n);
    for (Py_ssize_t i = 0; i < n; i++)
        border[i] = -1;
    if (numbers_init(&nums, n) < 0)
        goto error;
    groups = PyList_New(0);
    if (groups == NULL)
        goto error;
    for (Py_ssize_t k = 0; k < count; k++)
        if (remaining[order[k]] == 0 && vec_push(&queue, order[k]) < 0)
            goto error;
    Py_ssize_t wave = 0;
    while (queue.size > 0) {
        Py_ssize_t head = 0;
        group.size = 0;
        deferred.size = 0;
        while (head < queue.size) {
            Py_ssize_t unit = queue.items[head++];
            if (supported[unit] < 0) {
                int answer = 0;
                if (fast_signatures != NULL) {
                    answer = fast_answer(fast_signatures, answers, keys, memo, yes, unit);
                    if (answer < 0)
                        goto error;
                }
                if (!answer) {
                    PyObject *result = PyObject_CallOneArg(is_supported, nums.items[unit]);
                    if (result == NULL)
                        goto error;
                    answer = PyObject_IsTrue(result);
                    Py_DECREF(result);
                    if (answer < 0)
                        goto error;
                }
                supported[unit] = (signed char)answer;
            }
            Py_ssize_t first = consumers.start[unit], end = consumers.start[unit + 1];
            if (supported[unit]) {
                if (vec_push(&group, unit) < 0)
                    goto error;
                for (Py_ssize_t e = first; e < end; e++)
                    border[consumers.data[e]] = wave;
            }
            else if (border[unit] == wave) {
                if (vec_push(&deferred, unit) < 0) /* behind the group: wait for the next wave */
                    goto error;
                continue;
            }
            for (Py_ssize_t e = first; e < end; e++) {
                Py_ssize_t consumer = consumers.data[e];
                if (--remaining[consumer] == 0 && vec_push(&queue, consumer) < 0)
                    goto error;
            }
        }
        if (group.size > 0) {
            PyObject *list = int_list(&nums, group.items, group.size);
            if (list == NULL)
                goto error;
            int failed = PyList_Append(groups, list);
            Py_DECREF(list);
            if (failed < 0)
                goto error;
        }
        /* the next wave starts with the deferred units */
        Vec swap = queue;
        queue = deferred;
        deferred = swap;
        wave++;
    }
    goto done;
error:
    Py_CLEAR(groups);
done:
    numbers_free(&nums);
    PyMem_Free(queue.items);
    PyMem_Free(deferred.items);
    PyMem_Free(group.items);
    PyMem_Free(supported);
    PyMem_Free(border);
    PyMem_Free(order);
    PyMem_Free(remaining);
    rows_free(&consumers);
    return groups;
}

/* -------------------------------------------------------------------------------------------------- */
/* signatures(nodes, fields, plain, facts, fact)                                                        */
/* -------------------------------------------------------------------------------------------------- */
PyDoc_STRVAR(signatures_doc,
"signatures(nodes, fields, plain, facts, fact, mask=None, fact_fields=None) -> list\n\n"
"Each node's signature (see mobile_ep.capability._ProposalContext.signature), or None where an\n"
"attribute is not a plain value.  fields: the getters (attribute_data, attr_value, attr_type, op_type,\n"
"domain, inputs, outputs); plain: the attribute types a signature holds; facts: the values' facts\n"
"worked out so far (new ones are added); fact: called for a value not in facts that fact_fields (see\n"
"compiled_fact) cannot work out; mask: None where it is false.");

/* A value type's dtype: through getters[type(t)] where the class has one (a slot read), else t.dtype. */
static PyObject *
type_dtype(PyObject *type, PyObject *getters)
{
    if (getters != NULL && getters != Py_None) {
        PyObject *getter = PyDict_GetItemWithError(getters, (PyObject *)Py_TYPE(type)); /* borrowed */
        if (getter != NULL)
            return field_get(getter, type);
        if (PyErr_Occurred())
            return NULL;
    }
    return PyObject_GetAttrString(type, "dtype");
}

/* A value's fact (see _ProposalContext._fact) worked out here: a new tuple, Py_None (new reference) when the
 * value needs the Python method (no shape, no element type, constants pending), or NULL on error.
 * fields: (value_shape, shape_dims, value_type, value_producer, op_type, domain, is_initializer, const_value,
 * is_graph_input, overridable, pending, dtype_getters) where overridable tells whether an initializer that is
 * also a graph input may be overridden (IR version 4 and later); shape_dims may return a list (it is made a
 * tuple here, as Shape.dims does) and dtype_getters is a dict for type_dtype. */
static PyObject *
compiled_fact(PyObject *value, PyObject *fields)
{
    PyObject *value_shape = PyTuple_GET_ITEM(fields, 0), *shape_dims = PyTuple_GET_ITEM(fields, 1);
    PyObject *value_type = PyTuple_GET_ITEM(fields, 2), *value_producer = PyTuple_GET_ITEM(fields, 3);
    PyObject *op_type = PyTuple_GET_ITEM(fields, 4), *domain = PyTuple_GET_ITEM(fields, 5);
    PyObject *is_initializer = PyTuple_GET_ITEM(fields, 6), *const_value = PyTuple_GET_ITEM(fields, 7);
    PyObject *is_graph_input = PyTuple_GET_ITEM(fields, 8), *overridable = PyTuple_GET_ITEM(fields, 9);
    PyObject *pending = PyTuple_GET_ITEM(fields, 10), *dtype_getters = PyTuple_GET_ITEM(fields, 11);
    PyObject *shape = NULL, *dims = NULL, *type = NULL, *dtype = NULL, *producer = NULL, *initializer = NULL;
    PyObject *tensor = NULL, *graph_input = NULL, *result = NULL;
    int from_constant = 0, constant = 0, initializer_constant = 0;
    int has_pending = PyObject_IsTrue(pending);
    if (has_pending < 0)
        return NULL;
    if (has_pending) /* (constants a rewrite is about to add: the Python method) */
        goto slow;
    if ((shape = field_get(value_shape, value)) == NULL)
        goto done;
    if (shape == Py_None)
        goto slow;
    if ((dims = field_get(shape_dims, shape)) == NULL)
        goto done;
    if (!PyTuple_CheckExact(dims)) {
        PyObject *tuple = PySequence_Tuple(dims);
        Py_SETREF(dims, tuple);
        if (dims == NULL)
            goto done;
    }
    if ((type = field_get(value_type, value)) == NULL)
        goto done;
    if (type == Py_None)
        goto slow;
    if ((dtype = type_dtype(type, dtype_getters)) == NULL)
        goto done;
    if (dtype == Py_None)
        goto slow;
    if ((producer = field_get(value_producer, value)) == NULL)
        goto done;
    if (producer != Py_None) {
        PyObject *op = field_get(op_type, producer);
        if (op == NULL)
            goto done;
        int is_constant_op = PyUnicode_Check(op) && PyUnicode_CompareWithASCIIString(op, "Constant") == 0;
        Py_DECREF(op);
        if (is_constant_op) {
            PyObject *name = field_get(domain, producer);
            if (name == NULL)
                goto done;
            from_constant = PyUnicode_Check(name) && (PyUnicode_GET_LENGTH(name) == 0
                                                      || PyUnicode_CompareWithASCIIString(name, "ai.onnx") == 0);
            Py_DECREF(name);
        }
    }
    if ((initializer = field_get(is_initializer, value)) == NULL)
        goto done;
    if (initializer != Py_True && initializer != Py_False)
        goto slow;
    if (initializer == Py_True) {
        if ((tensor = field_get(const_value, value)) == NULL)
            goto done;
        if (tensor != Py_None) {
            initializer_constant = 1;
            if ((graph_input = field_get(is_graph_input, value)) == NULL)
                goto done;
            int input = PyObject_IsTrue(graph_input), late = PyObject_IsTrue(overridable);
            if (input < 0 || late < 0)
                goto done;
            constant = !(input && late);
        }
    }
    result = PyTuple_Pack(5, dtype, dims, constant ? Py_True : Py_False, initializer_constant ? Py_True : Py_False,
                          from_constant ? Py_True : Py_False);
    goto done;
slow:
    Py_INCREF(Py_None);
    result = Py_None;
done:
    Py_XDECREF(shape);
    Py_XDECREF(dims);
    Py_XDECREF(type);
    Py_XDECREF(dtype);
    Py_XDECREF(producer);
    Py_XDECREF(initializer);
    Py_XDECREF(tensor);
    Py_XDECREF(graph_input);
    return result;
}

static PyObject *
value_facts(PyObject *values, PyObject *facts, PyObject *fact, PyObject *fact_fields)
{
    PyObject *fast = PySequence_Fast(values, "a node's inputs and outputs must be sequences");
    if (fast == NULL)
        return NULL;
    Py_ssize_t size = PySequence_Fast_GET_SIZE(fast);
    PyObject **items = PySequence_Fast_ITEMS(fast);
    PyObject *tuple = PyTuple_New(size);
    if (tuple == NULL) {
        Py_DECREF(fast);
        return NULL;
    }
    for (Py_ssize_t k = 0; k < size; k++) {
        PyObject *known = PyDict_GetItemWithError(facts, items[k]); /* borrowed */
        if (known != NULL)
            Py_INCREF(known);
        else if (PyErr_Occurred())
            goto error;
        else {
            known = fact_fields != Py_None ? compiled_fact(items[k], fact_fields) : (Py_INCREF(Py_None), Py_None);
            if (known == NULL)
                goto error;
            if (known == Py_None) {
                Py_DECREF(known);
                if ((known = PyObject_CallOneArg(fact, items[k])) == NULL)
                    goto error;
            }
            else if (PyDict_SetItem(facts, items[k], known) < 0) {
                Py_DECREF(known);
                goto error;
            }
        }
        PyTuple_SET_ITEM(tuple, k, known);
    }
    Py_DECREF(fast);
    return tuple;
error:
    Py_DECREF(tuple);
    Py_DECREF(fast);
    return NULL;
}

/* The attributes' part of a signature: a new tuple, Py_None (new reference) when one is not plain, or NULL. */
static PyObject *
attribute_items(PyObject *data, PyObject *attr_value, PyObject *attr_type, PyObject *plain)
{
    if (!PyDict_Check(data)) {
        PyErr_SetString(PyExc_TypeError, "a node's attribute data must be a dict");
        return NULL;
    }
    Py_ssize_t size = PyDict_GET_SIZE(data);
    PyObject *items = PyTuple_New(size);
    if (items == NULL)
        return NULL;
    Py_ssize_t pos = 0, k = 0;
    PyObject *name, *attribute;
    while (PyDict_Next(data, &pos, &name, &attribute)) {
        if (k >= size) {
            PyErr_SetString(PyExc_RuntimeError, "attributes changed while read");
            goto error;
        }
        PyObject *value = field_get(attr_value, attribute);
        if (value == NULL)
            goto error;
        if (value == Py_None) {
            Py_DECREF(items);
            return value; /* (None for a reference to a function's attribute) */
        }
        PyObject *type = field_get(attr_type, attribute);
        if (type == NULL) {
            Py_DECREF(value);
            goto error;
        }
        int ok = PySet_Contains(plain, type);
        Py_DECREF(type);
        if (ok <= 0) {
            Py_DECREF(value);
            if (ok < 0)
                goto error;
            Py_DECREF(items);
            Py_RETURN_NONE;
        }
        if (PyList_CheckExact(value)) {
            PyObject *tuple = PyList_AsTuple(value);
            Py_DECREF(value);
            if (tuple == NULL)
                goto error;
            value = tuple;
        }
        PyObject *pair = PyTuple_Pack(2, name, value);
        Py_DECREF(value);
        if (pair == NULL)
            goto error;
        PyTuple_SET_ITEM(items, k++, pair);
    }
    if (k != size) {
        PyErr_SetString(PyExc_RuntimeError, "attributes changed while read");
        goto error;
    }
    return items;
error:
    Py_DECREF(items);
    return NULL;
}

static PyObject *
speedups_signatures(PyObject *self, PyObject *args)
{
    PyObject *nodes, *fields, *plain, *facts, *fact, *mask = Py_None, *fact_fields = Py_None;
    PyObject *attribute_data, *attr_value, *attr_type, *op_type, *domain, *inputs, *outputs;
    if (!PyArg_ParseTuple(args, "OO!O!O!O|OO:signatures", &nodes, &PyTuple_Type, &fields, &PyFrozenSet_Type, &plain,
                          &PyDict_Type, &facts, &fact, &mask, &fact_fields))
        return NULL;
    if (fact_fields != Py_None && (!PyTuple_Check(fact_fields) || PyTuple_GET_SIZE(fact_fields) != 12)) {
        PyErr_SetString(PyExc_TypeError, "fact_fields must be None or a tuple of 12 items");
        return NULL;
    }
    if (!PyArg_ParseTuple(fields, "OOOOOOO:signature fields", &attribute_data, &attr_value, &attr_type, &op_type,
                          &domain, &inputs, &outputs))
        return NULL;
    PyObject *fast = PySequence_Fast(nodes, "nodes must be a sequence");
    if (fast == NULL)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    PyObject **items = PySequence_Fast_ITEMS(fast);
    PyObject *wanted = NULL;
    PyObject *result = PyList_New(n);
    if (result == NULL)
        goto error;
    if (mask != Py_None) {
        wanted = PySequence_Fast(mask, "mask must be a sequence");
        if (wanted == NULL)
            goto error;
        if (PySequence_Fast_GET_SIZE(wanted) != n) {
            PyErr_SetString(PyExc_ValueError, "mask and nodes differ in length");
            goto error;
        }
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *node = items[i];
        if (wanted != NULL) {
            int on = PyObject_IsTrue(PySequence_Fast_GET_ITEM(wanted, i));
            if (on < 0)
                goto error;
            if (!on) {
                Py_INCREF(Py_None);
                PyList_SET_ITEM(result, i, Py_None);
                continue;
            }
        }
        PyObject *data = field_get(attribute_data, node);
        if (data == NULL)
            goto error;
        PyObject *attributes;
        int any = PyObject_IsTrue(data);
        if (any < 0) {
            Py_DECREF(data);
            goto error;
        }
        attributes = any ? attribute_items(data, attr_value, attr_type, plain) : PyTuple_New(0);
        Py_DECREF(data);
        if (attributes == NULL)
            goto error;
        if (attributes == Py_None) {
            PyList_SET_ITEM(result, i, attributes);
            continue;
        }
        PyObject *parts[5] = {NULL, NULL, attributes, NULL, NULL};
        PyObject *values;
        if ((parts[0] = field_get(op_type, node)) == NULL
            || (parts[1] = field_get(domain, node)) == NULL)
            goto part_error;
        if ((values = field_get(inputs, node)) == NULL)
            goto part_error;
        parts[3] = value_facts(values, facts, fact, fact_fields);
        Py_DECREF(values);
        if (parts[3] == NULL || (values = field_get(outputs, node)) == NULL)
            goto part_error;
        parts[4] = value_facts(values, facts, fact, fact_fields);
        Py_DECREF(values);
        if (parts[4] == NULL)
            goto part_error;
        PyObject *signature = PyTuple_New(5);
        if (signature == NULL)
            goto part_error;
        for (int k = 0; k < 5; k++)
            PyTuple_SET_ITEM(signature, k, parts[k]);
        PyList_SET_ITEM(result, i, signature);
        continue;
    part_error:
        for (int k = 0; k < 5; k++)
            Py_XDECREF(parts[k]);
        goto error;
    }
    Py_XDECREF(wanted);
    Py_DECREF(fast);
    return result;
error:
    Py_XDECREF(wanted);
    Py_XDECREF(result);
    Py_DECREF(fast);
    return NULL;
}

/* -------------------------------------------------------------------------------------------------- */
/* element counts: the cost model's common case                                                        */
/* -------------------------------------------------------------------------------------------------- */

/* A value's dims when its shape is known and every dim is an exact int that fits (at most 16 of them):
 * 1 (dims in out[0..*count)), 0 when the caller must take the slow path, -1 on error. */
static int
exact_dims(PyObject *value, PyObject *value_shape, PyObject *shape_dims, long long *out, Py_ssize_t *count)
{
    if (value == Py_None)
        return 0;
    PyObject *shape = field_get(value_shape, value);
    if (shape == NULL)
        return -1;
    if (shape == Py_None) {
        Py_DECREF(shape);
        return 0;
    }
    PyObject *dims = field_get(shape_dims, shape);
    Py_DECREF(shape);
    if (dims == NULL)
        return -1;
    PyObject *fast = PySequence_Fast(dims, "dims must be a sequence");
    Py_DECREF(dims);
    if (fast == NULL)
        return -1;
    Py_ssize_t size = PySequence_Fast_GET_SIZE(fast);
    int ok = size <= 16;
    for (Py_ssize_t k = 0; k < size && ok; k++) {
        PyObject *item = PySequence_Fast_GET_ITEM(fast, k);
        int overflow = 0;
        if (!PyLong_CheckExact(item)) {
            ok = 0;
            break;
        }
        out[k] = PyLong_AsLongLongAndOverflow(item, &overflow);
        if (out[k] == -1 && PyErr_Occurred()) {
            Py_DECREF(fast);
            return -1;
        }
        if (overflow)
            ok = 0;
    }
    Py_DECREF(fast);
    *count = size;
    return ok;
}

/* The value's element count from its static shape, as exact_dims tells: 1 with *numel set, 0 for the slow
 * path (also when the product overflows), -1 on error. */
static int
value_numel(PyObject *value, PyObject *value_shape, PyObject *shape_dims, long long *numel)
{
    long long dims[16], product = 1;
    Py_ssize_t count = 0;
    int ok = exact_dims(value, value_shape, shape_dims, dims, &count);
    if (ok != 1)
        return ok;
    for (Py_ssize_t k = 0; k < count; k++)
        if (__builtin_mul_overflow(product, dims[k], &product))
            return 0;
    *numel = product;
    return 1;
}

/* node_flops' Conv and MatMul estimates from the output's element count (see cost._special_flops): 1 with
 * *estimate set, 0 for the slow path, -1 on error. */
static int
special_flops(PyObject *node, int conv, long long numel, PyObject *node_inputs, PyObject *value_shape,
              PyObject *shape_dims, double *estimate)
{
    PyObject *values = field_get(node_inputs, node);
    if (values == NULL)
        return -1;
    PyObject *fast = PySequence_Fast(values, "a node's inputs must be a sequence");
    Py_DECREF(values);
    if (fast == NULL)
        return -1;
    Py_ssize_t which = conv ? 1 : 0, count = 0;
    long long dims[16];
    int ok = 0;
    if (PySequence_Fast_GET_SIZE(fast) > which)
        ok = exact_dims(PySequence_Fast_GET_ITEM(fast, which), value_shape, shape_dims, dims, &count);
    Py_DECREF(fast);
    if (ok != 1)
        return ok;
    if (conv) { /* weight [Cout, Cin/group, k...]: each output element is Cin/group * prod(k) multiply-adds */
        if (count < 1)
            return 0;
        long long per_output = 1;
        for (Py_ssize_t k = 1; k < count; k++)
            if (__builtin_mul_overflow(per_output, dims[k], &per_output))
                return 0;
        *estimate = 2.0 * (double)numel * (double)per_output;
        return 1;
    }
    if (count < 1) /* (a scalar A: float(out), which the Python code says best) */
        return 0;
    long long k = dims[count - 1];
    *estimate = 2.0 * (double)numel * (double)(k ? k : 1);
    return 1;
}

PyDoc_STRVAR(flops_doc,
"flops(nodes, fields, factors, special, slow, special_fast=False) -> list of floats\n\n"
"Each node's estimate as mobile_ep.cost.node_flops makes it: factors.get(op, 1.0) times its first output's\n"
"element count, for an op not in special whose first output has a shape of ints; with special_fast, also\n"
"Conv's and MatMul's estimate where the shapes they read are ints; slow(node) otherwise.  fields: the\n"
"getters (op_type, outputs, value_shape, shape_dims, inputs).");

static PyObject *
speedups_flops(PyObject *self, PyObject *args)
{
    PyObject *nodes, *fields, *factors, *special, *slow;
    PyObject *op_type, *outputs, *value_shape, *shape_dims, *node_inputs;
    int special_fast = 0;
    if (!PyArg_ParseTuple(args, "OO!O!O!O|p:flops", &nodes, &PyTuple_Type, &fields, &PyDict_Type, &factors,
                          &PyFrozenSet_Type, &special, &slow, &special_fast))
        return NULL;
    if (!PyArg_ParseTuple(fields, "OOOOO:flops fields", &op_type, &outputs, &value_shape, &shape_dims, &node_inputs))
        return NULL;
    PyObject *fast = PySequence_Fast(nodes, "nodes must be a sequence");
    if (fast == NULL)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    PyObject **items = PySequence_Fast_ITEMS(fast);
    PyObject *result = PyList_New(n);
    if (result == NULL)
        goto error;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *node = items[i], *estimate = NULL;
        PyObject *op = field_get(op_type, node);
        if (op == NULL)
            goto error;
        int is_special = PySet_Contains(special, op);
        int conv = 0, ok = 0;
        long long numel = 0;
        if (is_special == 1 && special_fast && PyUnicode_Check(op)) {
            conv = PyUnicode_CompareWithASCIIString(op, "Conv") == 0;
            if (!conv && PyUnicode_CompareWithASCIIString(op, "MatMul") != 0)
                is_special = 2; /* (the other special ops: the slow path) */
        }
        else if (is_special == 1)
            is_special = 2;
        if (is_special == 0 || is_special == 1) {
            PyObject *values = field_get(outputs, node);
            if (values == NULL) {
                Py_DECREF(op);
                goto error;
            }
            Py_ssize_t count = PyObject_Length(values);
            if (count == 0)
                ok = is_special == 0; /* (no output: nothing to count) */
            else if (count > 0) {
                PyObject *first = PySequence_GetItem(values, 0);
                ok = first == NULL ? -1 : value_numel(first, value_shape, shape_dims, &numel);
                Py_XDECREF(first);
            }
            else
                ok = -1;
            Py_DECREF(values);
        }
        else if (is_special < 0)
            ok = -1;
        if (ok == 1 && is_special == 1) {
            double value = 0.0;
            ok = special_flops(node, conv, numel, node_inputs, value_shape, shape_dims, &value);
            if (ok == 1 && (estimate = PyFloat_FromDouble(value)) == NULL)
                ok = -1;
        }
        else if (ok == 1) {
            double factor = 1.0;
            PyObject *given = PyDict_GetItemWithError(factors, op); /* borrowed */
            if (given != NULL)
                factor = PyFloat_AsDouble(given);
            if ((given == NULL || factor == -1.0) && PyErr_Occurred())
                ok = -1;
            else
                estimate = PyFloat_FromDouble(factor * (double)numel);
        }
        Py_DECREF(op);
        if (ok < 0)
            goto error;
        if (ok == 0)
            estimate = PyObject_CallOneArg(slow, node);
        if (estimate == NULL)
            goto error;
        PyList_SET_ITEM(result, i, estimate);
    }
    Py_DECREF(fast);
    return result;
error:
    Py_XDECREF(result);
    Py_DECREF(fast);
    return NULL;
}

PyDoc_STRVAR(numbytes_doc,
"numbytes(values, fields, itemsizes, slow) -> int\n\n"
"The bytes of values together, as mobile_ep.cost._bytes counts each: element count times the item\n"
"size of its element type (itemsizes[dtype]) for a value with a type, an element type in itemsizes and a\n"
"shape of ints; slow(value) otherwise.  fields: the getters (value_shape, shape_dims, value_type) and\n"
"optionally a dict of dtype getters by type class (see type_dtype).");

static PyObject *
speedups_numbytes(PyObject *self, PyObject *args)
{
    PyObject *values, *fields, *itemsizes, *slow;
    PyObject *value_shape, *shape_dims, *value_type, *dtype_getters = Py_None;
    if (!PyArg_ParseTuple(args, "OO!O!O:numbytes", &values, &PyTuple_Type, &fields, &PyDict_Type, &itemsizes,
                          &slow))
        return NULL;
    if (!PyArg_ParseTuple(fields, "OOO|O:numbytes fields", &value_shape, &shape_dims, &value_type, &dtype_getters))
        return NULL;
    PyObject *fast = PySequence_Fast(values, "values must be a sequence");
    if (fast == NULL)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    PyObject **items = PySequence_Fast_ITEMS(fast);
    PyObject *total = PyLong_FromLong(0);
    long long sum = 0; /* added to total when it would overflow, and at the end */
    if (total == NULL)
        goto error;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *value = items[i];
        long long numel = 0, size_bytes = 0;
        int ok = 0;
        PyObject *type = field_get(value_type, value);
        if (type == NULL)
            goto error;
        if (type != Py_None) {
            PyObject *dtype = type_dtype(type, dtype_getters);
            if (dtype == NULL) {
                Py_DECREF(type);
                goto error;
            }
            PyObject *itemsize = PyDict_GetItemWithError(itemsizes, dtype); /* borrowed */
            Py_DECREF(dtype);
            if (itemsize == NULL && PyErr_Occurred()) {
                Py_DECREF(type);
                goto error;
            }
            if (itemsize != NULL) {
                double size = PyFloat_AsDouble(itemsize);
                if (size == -1.0 && PyErr_Occurred()) {
                    Py_DECREF(type);
                    goto error;
                }
                ok = value_numel(value, value_shape, shape_dims, &numel);
                if (ok == 1) {
                    double product = (double)numel * size;  /* (Python: int(numel * itemsize)) */
                    if (product >= -4e18 && product <= 4e18)
                        size_bytes = (long long)product;
                    else
                        ok = 0;
                }
            }
        }
        Py_DECREF(type);
        if (ok < 0)
            goto error;
        if (ok == 1 && !__builtin_add_overflow(sum, size_bytes, &sum))
            continue;
        PyObject *part = ok == 1 ? PyLong_FromLongLong(size_bytes) : PyObject_CallOneArg(slow, value);
        if (part == NULL)
            goto error;
        PyObject *grown = PyNumber_Add(total, part);
        Py_DECREF(part);
        if (grown == NULL)
            goto error;
        Py_SETREF(total, grown);
    }
    PyObject *rest = PyLong_FromLongLong(sum);
    if (rest == NULL)
        goto error;
    PyObject *grown = PyNumber_Add(total, rest);
    Py_DECREF(rest);
    Py_DECREF(total);
    Py_DECREF(fast);
    return grown;
error:
    Py_XDECREF(total);
    Py_DECREF(fast);
    return NULL;
}

/* -------------------------------------------------------------------------------------------------- */
/* io_many(groups, nodes, made_by, where, graph_outputs, outer_reads, fields)                           */
/* -------------------------------------------------------------------------------------------------- */
PyDoc_STRVAR(io_many_doc,
"io_many(groups, nodes, made_by, where, graph_outputs, outer_reads, fields) -> list of (inputs, outputs)\n\n"
"mobile_ep.partition._GraphIndex.io for each group of node numbers.  where: node -> number; fields: the\n"
"getters (inputs, outputs) of a node and, optionally, a getter of a value's uses (their node attributes are\n"
"read; value.uses() without it).");

static PyObject *str_node, *str_uses; /* interned attribute names (module init) */

/* 1 if value is a key of dict, 0 if not, -1 on error. */
static int
has_key(PyObject *dict, PyObject *value)
{
    return PyDict_Contains(dict, value);
}

/* Whether the number obj maps to (through mapping) is a member of the current group. */
static int
inside(PyObject *mapping, PyObject *obj, const Py_ssize_t *stamp, Py_ssize_t n, Py_ssize_t group)
{
    PyObject *number = PyDict_GetItemWithError(mapping, obj); /* borrowed */
    if (number == NULL)
        return PyErr_Occurred() ? -1 : 0;
    if (!PyLong_CheckExact(number))
        return 0;
    Py_ssize_t j = PyLong_AsSsize_t(number);
    if (j == -1 && PyErr_Occurred())
        return -1;
    return j >= 0 && j < n && stamp[j] == group;
}

static PyObject *
group_io(PyObject *members, PyObject **nodes, Py_ssize_t n, PyObject *made_by, PyObject *where,
         PyObject *graph_outputs, PyObject *outer_reads, PyObject *node_inputs, PyObject *node_outputs,
         PyObject *value_uses, Py_ssize_t *stamp, Py_ssize_t group)
{
    PyObject *fast = PySequence_Fast(members, "a group must be a sequence of node numbers");
    if (fast == NULL)
        return NULL;
    Py_ssize_t size = PySequence_Fast_GET_SIZE(fast);
    PyObject **items = PySequence_Fast_ITEMS(fast);
    PyObject *inputs = PyDict_New(), *outputs = PyDict_New(), *result = NULL;
    Py_ssize_t *numbers = PyMem_Malloc((size_t)(size > 0 ? size : 1) * sizeof(Py_ssize_t));
    if (inputs == NULL || outputs == NULL || numbers == NULL) {
        if (numbers == NULL)
            PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t k = 0; k < size; k++) {
        if ((numbers[k] = as_index(items[k], n)) < 0)
            goto done;
        stamp[numbers[k]] = group;
    }
    int has_outer = PyDict_GET_SIZE(outer_reads) > 0;
    for (Py_ssize_t k = 0; k < size; k++) {
        PyObject *node = nodes[numbers[k]], *values = NULL;
        if (has_outer) {
            values = PyDict_GetItemWithError(outer_reads, items[k]);
            if (values != NULL)
                Py_INCREF(values);
            else if (PyErr_Occurred())
                goto done;
        }
        if (values == NULL && (values = field_get(node_inputs, node)) == NULL)
            goto done;
        PyObject *row = PySequence_Fast(values, "a node's inputs must be a sequence");
        Py_DECREF(values);
        if (row == NULL)
            goto done;
        for (Py_ssize_t m = 0; m < PySequence_Fast_GET_SIZE(row); m++) {
            PyObject *value = PySequence_Fast_GET_ITEM(row, m);
            if (value == Py_None)
                continue;
            int seen = has_key(inputs, value);
            int member = seen ? 0 : inside(made_by, value, stamp, n, group);
            if (seen < 0 || member < 0 || (!seen && !member && PyDict_SetItem(inputs, value, Py_None) < 0)) {
                Py_DECREF(row);
                goto done;
            }
        }
        Py_DECREF(row);
        if ((values = field_get(node_outputs, node)) == NULL)
            goto done;
        row = PySequence_Fast(values, "a node's outputs must be a sequence");
        Py_DECREF(values);
        if (row == NULL)
            goto done;
        for (Py_ssize_t m = 0; m < PySequence_Fast_GET_SIZE(row); m++) {
            PyObject *value = PySequence_Fast_GET_ITEM(row, m);
            int seen = has_key(outputs, value);
            if (seen != 0) {
                if (seen < 0)
                    goto row_error;
                continue;
            }
            int wanted = PySet_Contains(graph_outputs, value);
            if (wanted < 0)
                goto row_error;
            if (!wanted) { /* read outside the group? */
                PyObject *uses = value_uses != Py_None ? field_get(value_uses, value)
                                                       : PyObject_CallMethodNoArgs(value, str_uses);
                if (uses == NULL)
                    goto row_error;
                PyObject *iterator = PyObject_GetIter(uses);
                Py_DECREF(uses);
                if (iterator == NULL)
                    goto row_error;
                PyObject *use;
                while (!wanted && (use = PyIter_Next(iterator)) != NULL) {
                    PyObject *user = PyObject_GetAttr(use, str_node);
                    Py_DECREF(use);
                    int member = user == NULL ? -1 : inside(where, user, stamp, n, group);
                    Py_XDECREF(user);
                    if (member < 0) {
                        Py_DECREF(iterator);
                        goto row_error;
                    }
                    wanted = !member;
                }
                Py_DECREF(iterator);
                if (PyErr_Occurred())
                    goto row_error;
            }
            if (wanted && PyDict_SetItem(outputs, value, Py_None) < 0)
                goto row_error;
        }
        Py_DECREF(row);
        continue;
    row_error:
        Py_DECREF(row);
        goto done;
    }
    PyObject *in = PySequence_Tuple(inputs), *out = in == NULL ? NULL : PySequence_Tuple(outputs);
    if (out != NULL)
        result = PyTuple_Pack(2, in, out);
    Py_XDECREF(in);
    Py_XDECREF(out);
done:
    Py_XDECREF(inputs);
    Py_XDECREF(outputs);
    PyMem_Free(numbers);
    Py_DECREF(fast);
    return result;
}

static PyObject *
speedups_io_many(PyObject *self, PyObject *args)
{
    PyObject *groups, *nodes_seq, *made_by, *where, *graph_outputs, *outer_reads, *fields;
    PyObject *node_inputs, *node_outputs, *value_uses = Py_None;
    if (!PyArg_ParseTuple(args, "OOO!O!O!O!O!:io_many", &groups, &nodes_seq, &PyDict_Type, &made_by, &PyDict_Type,
                          &where, &PyFrozenSet_Type, &graph_outputs, &PyDict_Type, &outer_reads, &PyTuple_Type,
                          &fields))
        return NULL;
    if (!PyArg_ParseTuple(fields, "OO|O:io_many fields", &node_inputs, &node_outputs, &value_uses))
        return NULL;
    PyObject *nodes = PySequence_Fast(nodes_seq, "nodes must be a sequence");
    if (nodes == NULL)
        return NULL;
    PyObject *fast = PySequence_Fast(groups, "groups must be a sequence");
    if (fast == NULL) {
        Py_DECREF(nodes);
        return NULL;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(nodes), count = PySequence_Fast_GET_SIZE(fast);
    Py_ssize_t *stamp = PyMem_Malloc((size_t)(n > 0 ? n : 1) * sizeof(Py_ssize_t));
    PyObject *result = PyList_New(count);
    if (stamp == NULL || result == NULL) {
        if (stamp == NULL)
            PyErr_NoMemory();
        goto error;
    }
    for (Py_ssize_t i = 0; i < n; i++)
        stamp[i] = -1;
    for (Py_ssize_t g = 0; g < count; g++) {
        PyObject *io = group_io(PySequence_Fast_GET_ITEM(fast, g), PySequence_Fast_ITEMS(nodes), n, made_by, where,
                                graph_outputs, outer_reads, node_inputs, node_outputs, value_uses, stamp, g);
        if (io == NULL)
            goto error;
        PyList_SET_ITEM(result, g, io);
    }
    PyMem_Free(stamp);
    Py_DECREF(fast);
    Py_DECREF(nodes);
    return result;
error:
    PyMem_Free(stamp);
    Py_XDECREF(result);
    Py_DECREF(fast);
    Py_DECREF(nodes);
    return NULL;
}

/* -------------------------------------------------------------------------------------------------- */
/* instances(cls, names, columns, optional)                                                             */
/* -------------------------------------------------------------------------------------------------- */
PyDoc_STRVAR(instances_doc,
"instances(cls, names, columns, optional) -> list\n\n"
"One object of cls per row of columns (equal-length sequences), made with object.__new__(cls) and its\n"
"fields set with object.__setattr__; a field whose optional entry is true is set only where its value\n"
"is truthy (it keeps the class default otherwise), as partition._single_units and _placements do.");

static PyObject *
speedups_instances(PyObject *self, PyObject *args)
{
    PyObject *cls, *names, *columns, *optional;
    if (!PyArg_ParseTuple(args, "O!O!O!O!:instances", &PyType_Type, &cls, &PyTuple_Type, &names, &PyTuple_Type,
                          &columns, &PyTuple_Type, &optional))
        return NULL;
    Py_ssize_t fields = PyTuple_GET_SIZE(names);
    if (PyTuple_GET_SIZE(columns) != fields || PyTuple_GET_SIZE(optional) != fields || fields > 8) {
        PyErr_SetString(PyExc_ValueError, "names, columns and optional must have the same length (at most 8)");
        return NULL;
    }
    PyTypeObject *type = (PyTypeObject *)cls;
    if (type->tp_new != PyBaseObject_Type.tp_new) {
        PyErr_SetString(PyExc_TypeError, "instances() makes objects of classes created with object.__new__ only");
        return NULL;
    }
    PyObject *fast[8] = {NULL};
    int skip_falsy[8] = {0};
    PyObject *result = NULL, *empty = PyTuple_New(0);
    Py_ssize_t n = -1;
    if (empty == NULL)
        return NULL;
    for (Py_ssize_t f = 0; f < fields; f++) {
        if ((fast[f] = PySequence_Fast(PyTuple_GET_ITEM(columns, f), "columns must be sequences")) == NULL)
            goto done;
        if (n >= 0 && PySequence_Fast_GET_SIZE(fast[f]) != n) {
            PyErr_SetString(PyExc_ValueError, "columns differ in length");
            goto done;
        }
        n = PySequence_Fast_GET_SIZE(fast[f]);
        if ((skip_falsy[f] = PyObject_IsTrue(PyTuple_GET_ITEM(optional, f))) < 0)
            goto done;
    }
    if (n < 0)
        n = 0;
    if ((result = PyList_New(n)) == NULL)
        goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *obj = PyBaseObject_Type.tp_new(type, empty, NULL);
        if (obj == NULL)
            goto error;
        PyList_SET_ITEM(result, i, obj);
        for (Py_ssize_t f = 0; f < fields; f++) {
            PyObject *value = PySequence_Fast_GET_ITEM(fast[f], i);
            if (skip_falsy[f]) {
                int truth = PyObject_IsTrue(value);
                if (truth < 0)
                    goto error;
                if (!truth)
                    continue;
            }
            if (PyObject_GenericSetAttr(obj, PyTuple_GET_ITEM(names, f), value) < 0)
                goto error;
        }
    }
    goto done;
error:
    Py_CLEAR(result);
done:
    for (Py_ssize_t f = 0; f < fields; f++)
        Py_XDECREF(fast[f]);
    Py_DECREF(empty);
    return result;
}

/* -------------------------------------------------------------------------------------------------- */
/* shapes_within: the declared shapes of a serialized ModelProto, read off the wire                      */
/* -------------------------------------------------------------------------------------------------- */

/* The protobuf wire format, as onnx.proto's messages use it: each field is a varint key (number << 3 | wire
 * type) and then a varint (0), 8 bytes (1), a varint length and that many bytes (2) or 4 bytes (5).  Every
 * reader below answers 1 ("within") or 0 ("look closer": anything it does not expect, malformed bytes
 * included); 0 is always a safe answer, since the caller then parses the model and inspects it in Python. */

typedef struct {
    const long long *limits; /* the most elements a value of each element type may have; -1: look closer */
    Py_ssize_t n_limits;
} wire_limits;

/* One field as read off the wire: its number and wire type, its varint (wire type 0) or its bytes [body, end)
 * (wire types 1, 2 and 5). */
typedef struct {
    uint64_t number;
    int wire_type;
    uint64_t varint;
    const unsigned char *body, *end;
} wire_item;

static int
wire_varint(const unsigned char **p, const unsigned char *end, uint64_t *out)
{
    uint64_t v = 0;
    for (int shift = 0; shift < 64 && *p < end; shift += 7) {
        unsigned char b = *(*p)++;
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *out = v;
            return 1;
        }
    }
    return 0;
}

/* The next field of [*p, end) into *item (other wire types than 0 and 2 are skipped); 0 at a malformed field. */
static int
wire_next(const unsigned char **p, const unsigned char *end, wire_item *item)
{
    uint64_t key, length;
    if (!wire_varint(p, end, &key))
        return 0;
    item->number = key >> 3;
    item->wire_type = (int)(key & 7);
    switch (item->wire_type) {
    case 0:
        return wire_varint(p, end, &item->varint);
    case 1:
        if (end - *p < 8)
            return 0;
        item->body = *p;
        item->end = *p + 8;
        *p += 8;
        return 1;
    case 2:
        if (!wire_varint(p, end, &length) || length > (uint64_t)(end - *p))
            return 0;
        item->body = *p;
        item->end = *p + length;
        *p += length;
        return 1;
    case 5:
        if (end - *p < 4)
            return 0;
        item->body = *p;
        item->end = *p + 4;
        *p += 4;
        return 1;
    default: /* groups: not in onnx.proto */
        return 0;
    }
}

/* TypeProto.Tensor and what it nests: the element types seen (the least limit of them goes) and the product of
 * the dims above 1.  Any occurrence counts: a message field repeated on the wire is merged when parsed, so the
 * shape that results has all the dims seen here. */
static int
wire_tensor_type(const unsigned char *p, const unsigned char *end, const wire_limits *limits, long long *limit,
                 long long *elements)
{
    wire_item field, dim, part;
    while (p < end) {
        if (!wire_next(&p, end, &field))
            return 0;
        if (field.number == 1) { /* elem_type */
            if (field.wire_type != 0 || field.varint >= (uint64_t)limits->n_limits || limits->limits[field.varint] < 0)
                return 0;
            if (limits->limits[field.varint] < *limit)
                *limit = limits->limits[field.varint];
        }
        else if (field.number == 2) { /* shape */
            if (field.wire_type != 2)
                return 0;
            while (field.body < field.end) { /* TensorShapeProto */
                if (!wire_next(&field.body, field.end, &dim))
                    return 0;
                if (dim.number != 1)
                    continue;
                if (dim.wire_type != 2)
                    return 0;
                while (dim.body < dim.end) { /* TensorShapeProto.Dimension */
                    if (!wire_next(&dim.body, dim.end, &part))
                        return 0;
                    if (part.number != 1) /* dim_param, denotation */
                        continue;
                    if (part.wire_type != 0 || (long long)part.varint < 0)
                        return 0;
                    if (part.varint > 1) {
                        if (*elements > LLONG_MAX / (long long)part.varint)
                            return 0;
                        *elements *= (long long)part.varint;
                    }
                }
            }
        }
    }
    return 1;
}

/* ValueInfoProto: within when its type is a tensor type (or none) of a known element type, no dim negative and
 * the dims' product (0 counted as 1, unknown dims left out) at most the element type's limit. */
static int
wire_value_info(const unsigned char *p, const unsigned char *end, const wire_limits *limits)
{
    long long limit = LLONG_MAX, elements = 1;
    wire_item field, kind;
    while (p < end) {
        if (!wire_next(&p, end, &field))
            return 0;
        if (field.number != 2) /* name, doc_string, metadata_props */
            continue;
        if (field.wire_type != 2)
            return 0;
        while (field.body < field.end) { /* TypeProto */
            if (!wire_next(&field.body, field.end, &kind))
                return 0;
            if (kind.number == 6) /* denotation */
                continue;
            if (kind.number != 1 || kind.wire_type != 2) /* sequences, maps, optionals, sparse and opaque types */
                return 0;
            if (!wire_tensor_type(kind.body, kind.end, limits, &limit, &elements))
                return 0;
        }
    }
    if (limit == LLONG_MAX) /* no element type: the element count alone is bounded */
        limit = limits->limits[0];
    return elements <= limit;
}

static int wire_graph(const unsigned char *p, const unsigned char *end, const wire_limits *limits, int depth);

/* NodeProto: the graphs of its attributes (AttributeProto.g and .graphs). */
static int
wire_node(const unsigned char *p, const unsigned char *end, const wire_limits *limits, int depth)
{
    wire_item field, attribute;
    while (p < end) {
        if (!wire_next(&p, end, &field))
            return 0;
        if (field.number != 5) /* attribute */
            continue;
        if (field.wire_type != 2)
            return 0;
        while (field.body < field.end) {
            if (!wire_next(&field.body, field.end, &attribute))
                return 0;
            if (attribute.number != 6 && attribute.number != 11)
                continue;
            if (attribute.wire_type != 2 || !wire_graph(attribute.body, attribute.end, limits, depth + 1))
                return 0;
        }
    }
    return 1;
}

/* GraphProto: its outputs and value infos, and the graphs of its nodes' attributes. */
static int
wire_graph(const unsigned char *p, const unsigned char *end, const wire_limits *limits, int depth)
{
    wire_item field;
    if (depth > 64)
        return 0;
    while (p < end) {
        if (!wire_next(&p, end, &field))
            return 0;
        if (field.number != 1 && field.number != 12 && field.number != 13) /* node, output, value_info */
            continue;
        if (field.wire_type != 2)
            return 0;
        if (field.number == 1 ? !wire_node(field.body, field.end, limits, depth)
                              : !wire_value_info(field.body, field.end, limits))
            return 0;
    }
    return 1;
}

/* ModelProto: its graph. */
static int
wire_model(const unsigned char *p, const unsigned char *end, const wire_limits *limits)
{
    wire_item field;
    while (p < end) {
        if (!wire_next(&p, end, &field))
            return 0;
        if (field.number != 7)
            continue;
        if (field.wire_type != 2 || !wire_graph(field.body, field.end, limits, 0))
            return 0;
    }
    return 1;
}

PyDoc_STRVAR(shapes_within_doc,
"shapes_within(data, limits) -> bool\n\n"
"True when every output and value info of every graph (subgraphs included) of the serialized ModelProto\n"
"data is a tensor of an element type t with limits[t] >= 0 whose declared dims are none negative and\n"
"multiply (0 counted as 1, unknown dims left out) to at most limits[t] (limits[0]: no element type); False\n"
"when any is not, or is of another type, or the bytes are not what it expects.  False only means: parse\n"
"the model and look closer (mobile_ep.ir.check_inferred_shapes does); True is never said of a model in\n"
"which that inspection would refuse a value.");

static PyObject *
speedups_shapes_within(PyObject *self, PyObject *args)
{
    Py_buffer data;
    PyObject *limits_tuple;
    if (!PyArg_ParseTuple(args, "y*O!:shapes_within", &data, &PyTuple_Type, &limits_tuple))
        return NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(limits_tuple);
    long long *values = n ? PyMem_Malloc(sizeof(long long) * (size_t)n) : NULL;
    if (n && values == NULL) {
        PyBuffer_Release(&data);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        values[i] = PyLong_AsLongLong(PyTuple_GET_ITEM(limits_tuple, i));
        if (values[i] == -1 && PyErr_Occurred()) {
            PyMem_Free(values);
            PyBuffer_Release(&data);
            return NULL;
        }
    }
    int within = 0;
    if (n > 0 && values[0] >= 0) {
        wire_limits limits = {values, n};
        const unsigned char *start = data.buf;
        Py_BEGIN_ALLOW_THREADS
        within = wire_model(start, start + data.len, &limits);
        Py_END_ALLOW_THREADS
    }
    PyMem_Free(values);
    PyBuffer_Release(&data);
    return PyBool_FromLong(within);
}

/* -------------------------------------------------------------------------------------------------- */
/* value_types: the types of the main graph's value infos and outputs, read off the wire                 */
/* -------------------------------------------------------------------------------------------------- */

/* Each reader below answers 1 (read), 0 (not plain: the caller parses the model and reads it in Python) or -1 (a
 * Python error is set).  Plain means: a tensor type (or none) without denotations, a name and a type only, every
 * field once and in its wire type, UTF-8 strings; anything else, malformed bytes included, is left to Python. */

/* A string field as a str; 0 when the bytes are not UTF-8. */
static int
wire_str(const wire_item *item, PyObject **out)
{
    *out = PyUnicode_DecodeUTF8((const char *)item->body, item->end - item->body, "strict");
    if (*out != NULL)
        return 1;
    if (!PyErr_ExceptionMatches(PyExc_UnicodeDecodeError))
        return -1;
    PyErr_Clear();
    return 0;
}

/* Whether [p, end) is UTF-8: wire_str's answer, the string dropped. */
static int
wire_utf8(const unsigned char *p, const unsigned char *end)
{
    wire_item item = {.body = p, .end = end};
    PyObject *text;
    int status = wire_str(&item, &text);
    if (status == 1)
        Py_DECREF(text);
    return status;
}

/* TensorShapeProto: a tuple of its dims, each an int (dim_value), a str (dim_param) or None (neither). */
static int
wire_dims(const unsigned char *p, const unsigned char *end, PyObject **out)
{
    wire_item field, part;
    PyObject *dims = PyList_New(0), *dim = NULL;
    int status = 0;
    if (dims == NULL)
        return -1;
    while (p < end) {
        if (!wire_next(&p, end, &field) || field.number != 1 || field.wire_type != 2)
            goto done;
        while (field.body < field.end) { /* TensorShapeProto.Dimension: one of dim_value and dim_param, at most */
            if (!wire_next(&field.body, field.end, &part) || dim != NULL)
                goto done;
            if (part.number == 1 && part.wire_type == 0) {
                if ((dim = PyLong_FromLongLong((long long)part.varint)) == NULL) {
                    status = -1;
                    goto done;
                }
            }
            else if (part.number == 2 && part.wire_type == 2) {
                if ((status = wire_str(&part, &dim)) != 1)
                    goto done;
                status = 0;
            }
            else /* a denotation, or a field onnx.proto does not have */
                goto done;
        }
        status = PyList_Append(dims, dim != NULL ? dim : Py_None) < 0 ? -1 : 0;
        Py_CLEAR(dim);
        if (status < 0)
            goto done;
    }
    *out = PyList_AsTuple(dims);
    status = *out == NULL ? -1 : 1;
done:
    Py_XDECREF(dim);
    Py_DECREF(dims);
    return status;
}

/* ValueInfoProto: its name and (element type or None, dims or None). */
static int
wire_typed_value(const unsigned char *p, const unsigned char *end, PyObject **name, PyObject **entry)
{
    wire_item field, kind, part;
    PyObject *elem = NULL, *dims = NULL;
    int status = 0, typed = 0;
    *name = NULL;
    while (p < end) {
        if (!wire_next(&p, end, &field) || field.wire_type != 2)
            goto done;
        if (field.number == 1) { /* name */
            if (*name != NULL || (status = wire_str(&field, name)) != 1)
                goto done;
            status = 0;
            continue;
        }
        if (field.number != 2 || typed) /* doc_string, metadata_props: left to Python */
            goto done;
        typed = 1;
        int tensor = 0;
        while (field.body < field.end) { /* TypeProto: a tensor type, once, or nothing */
            if (!wire_next(&field.body, field.end, &kind) || kind.number != 1 || kind.wire_type != 2 || tensor)
                goto done;
            tensor = 1;
            while (kind.body < kind.end) { /* TypeProto.Tensor */
                if (!wire_next(&kind.body, kind.end, &part))
                    goto done;
                if (part.number == 1 && part.wire_type == 0 && elem == NULL) {
                    if ((elem = PyLong_FromLong((long)(int32_t)part.varint)) == NULL) {
                        status = -1;
                        goto done;
                    }
                }
                else if (part.number == 2 && part.wire_type == 2 && dims == NULL) {
                    if ((status = wire_dims(part.body, part.end, &dims)) != 1)
                        goto done;
                    status = 0;
                }
                else
                    goto done;
            }
        }
    }
    if (*name == NULL && (*name = PyUnicode_FromStringAndSize("", 0)) == NULL) {
        status = -1;
        goto done;
    }
    *entry = PyTuple_Pack(2, elem != NULL ? elem : Py_None, dims != NULL ? dims : Py_None);
    status = *entry == NULL ? -1 : 1;
done:
    Py_XDECREF(elem);
    Py_XDECREF(dims);
    if (status != 1)
        Py_CLEAR(*name);
    return status;
}

PyDoc_STRVAR(value_types_doc,
"value_types(data) -> (value_infos, outputs) or None\n\n"
"The types of the main graph's value infos and outputs in the serialized ModelProto data:\n"
"value_infos is {name: (elem_type, dims)} (a later entry of a name replaces an earlier one) and outputs a\n"
"list of (name, (elem_type, dims)); elem_type is an int, or None when not set; dims a tuple of ints\n"
"(dim_value), strs (dim_param) and None (neither), or None when the type has no shape; a value without a\n"
"type or with an empty one is (None, None).  None when any of them is not read here: a type other than a\n"
"tensor type, a denotation, a doc string or metadata, a field twice or of another wire type, a string that\n"
"is not UTF-8, malformed bytes.  Then parse the model (mobile_ep.ir._plain_type reads it in Python).");

static PyObject *
speedups_value_types(PyObject *self, PyObject *args)
{
    Py_buffer data;
    if (!PyArg_ParseTuple(args, "y*:value_types", &data))
        return NULL;
    const unsigned char *p = data.buf, *end = p + data.len;
    PyObject *infos = PyDict_New(), *outputs = PyList_New(0), *result = NULL, *name = NULL, *entry = NULL;
    int status = 0, graphs = 0;
    wire_item field, item;
    if (infos == NULL || outputs == NULL) {
        status = -1;
        goto done;
    }
    while (p < end) {
        if (!wire_next(&p, end, &field))
            goto done;
        if (field.number != 7) /* ModelProto.graph */
            continue;
        if (field.wire_type != 2 || graphs++) /* twice: merged when parsed */
            goto done;
        while (field.body < field.end) {
            if (!wire_next(&field.body, field.end, &item))
                goto done;
            if (item.number != 12 && item.number != 13) /* output, value_info */
                continue;
            if (item.wire_type != 2 || (status = wire_typed_value(item.body, item.end, &name, &entry)) != 1)
                goto done;
            if (item.number == 13)
                status = PyDict_SetItem(infos, name, entry) < 0 ? -1 : 0;
            else {
                PyObject *pair = PyTuple_Pack(2, name, entry);
                status = pair == NULL || PyList_Append(outputs, pair) < 0 ? -1 : 0;
                Py_XDECREF(pair);
            }
            Py_CLEAR(name);
            Py_CLEAR(entry);
            if (status < 0)
                goto done;
        }
    }
    result = PyTuple_Pack(2, infos, outputs);
    status = result == NULL ? -1 : 1;
done:
    Py_XDECREF(name);
    Py_XDECREF(entry);
    Py_XDECREF(infos);
    Py_XDECREF(outputs);
    PyBuffer_Release(&data);
    if (status < 0)
        return NULL;
    if (status == 0)
        Py_RETURN_NONE;
    return result;
}

/* The main graph of the serialized ModelProto [p, end): 1 with [*body, *body_end) its bytes (both NULL when
 * there is none) and *training set when a training_info field is there (when training is not NULL); 0 for
 * malformed bytes or a graph field given twice (the parser merges the two) or of another wire type. */
static int
wire_main_graph(const unsigned char *p, const unsigned char *end, const unsigned char **body,
                const unsigned char **body_end, int *training)
{
    wire_item field;
    int graphs = 0;
    *body = *body_end = NULL;
    while (p < end) {
        if (!wire_next(&p, end, &field))
            return 0;
        if (field.number == 20 && field.wire_type == 2 && training != NULL) /* training_info */
            *training = 1;
        if (field.number != 7) /* ModelProto.graph */
            continue;
        if (field.wire_type != 2 || graphs++)
            return 0;
        *body = field.body;
        *body_end = field.end;
    }
    return 1;
}

/* Reads one message of a repeated field into *out: 1 read, 0 not read here, -1 a Python error. */
typedef int (*wire_reader)(const unsigned char *p, const unsigned char *end, PyObject **out);

/* [reader's reading of each field *number* of the main graph of data, or None where it does not read it], or
 * None (malformed bytes, a graph given twice, such a field of another wire type); NULL with an error set. */
static PyObject *
wire_graph_list(Py_buffer *data, uint64_t number, wire_reader reader)
{
    const unsigned char *p, *end;
    PyObject *items = NULL, *item = NULL;
    wire_item field;
    int status = 0;
    if (!wire_main_graph(data->buf, (const unsigned char *)data->buf + data->len, &p, &end, NULL))
        goto done;
    if ((items = PyList_New(0)) == NULL) {
        status = -1;
        goto done;
    }
    while (p != NULL && p < end) {
        if (!wire_next(&p, end, &field))
            goto done;
        if (field.number != number)
            continue;
        if (field.wire_type != 2)
            goto done;
        int read = reader(field.body, field.end, &item);
        if (read < 0) {
            status = -1;
            goto done;
        }
        status = PyList_Append(items, read == 1 ? item : Py_None) < 0 ? -1 : 0;
        Py_CLEAR(item);
        if (status < 0)
            goto done;
    }
    status = 1;
done:
    Py_XDECREF(item);
    PyBuffer_Release(data);
    if (status == 1)
        return items;
    Py_XDECREF(items);
    if (status < 0)
        return NULL;
    Py_RETURN_NONE;
}

/* An input (ValueInfoProto) as input_types gives it: (name, (element type, dims)). */
static int
wire_input_type(const unsigned char *p, const unsigned char *end, PyObject **out)
{
    PyObject *name = NULL, *entry = NULL;
    int read = wire_typed_value(p, end, &name, &entry);
    if (read == 1) {
        *out = PyTuple_Pack(2, name, entry);
        read = *out == NULL ? -1 : 1;
    }
    Py_XDECREF(name);
    Py_XDECREF(entry);
    return read;
}

PyDoc_STRVAR(input_types_doc,
"input_types(data) -> [(name, (elem_type, dims)) or None, ...] or None\n\n"
"The types of the main graph's inputs in the serialized ModelProto data, in order, read as value_types\n"
"reads a value info: one entry per input, None for an input it does not read (a doc string, metadata, a\n"
"denotation, another type than a tensor type, a string that is not UTF-8: mobile_ep.ir._plain_type reads\n"
"that one from the parsed model).  None for malformed bytes or a graph field given twice.");

static PyObject *
speedups_input_types(PyObject *self, PyObject *args)
{
    Py_buffer data;
    if (!PyArg_ParseTuple(args, "y*:input_types", &data))
        return NULL;
    return wire_graph_list(&data, 11, wire_input_type); /* GraphProto.input */
}

/* -------------------------------------------------------------------------------------------------- */
/* inference_input: the model mobile_ep.ir._inference_input builds, written from the bytes              */
/* -------------------------------------------------------------------------------------------------- */

typedef struct {
    unsigned char *data;
    size_t len, cap;
} wire_buffer;

static int
buffer_put(wire_buffer *b, const void *bytes, size_t n)
{
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n)
            cap *= 2;
        unsigned char *data = PyMem_Realloc(b->data, cap);
        if (data == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        b->data = data;
        b->cap = cap;
    }
    memcpy(b->data + b->len, bytes, n);
    b->len += n;
    return 0;
}

/* v as a varint into out (room for 10 bytes); its length. */
static size_t
varint_bytes(uint64_t v, unsigned char *out)
{
    size_t n = 0;
    do {
        out[n] = (unsigned char)(v & 0x7f);
        v >>= 7;
        if (v)
            out[n] |= 0x80;
        n++;
    } while (v);
    return n;
}

static int
buffer_varint(wire_buffer *b, uint64_t v)
{
    unsigned char out[10];
    return buffer_put(b, out, varint_bytes(v, out));
}

/* A length-delimited field: its key, the length of [body, body + n) and those bytes. */
static int
buffer_field(wire_buffer *b, uint64_t number, const void *body, size_t n)
{
    if (buffer_varint(b, number << 3 | 2) < 0 || buffer_varint(b, n) < 0)
        return -1;
    return buffer_put(b, body, n);
}

/* What inference_input reads of an initializer (TensorProto). */
typedef struct {
    const unsigned char *name, *name_end;
    uint64_t data_type;
    int external;
    uint64_t string_bytes;
    wire_buffer dims; /* the dims, each a varint as on the wire */
    int rank;
    long long elements; /* -1: a dim below zero, or too many elements to count */
} wire_initializer;

/* 1 read, 0 not plain (the caller leaves the model to Python), -1 a Python error. */
static int
wire_read_initializer(const unsigned char *p, const unsigned char *end, wire_initializer *t)
{
    wire_item field;
    memset(t, 0, sizeof *t);
    t->elements = 1;
    while (p < end) {
        if (!wire_next(&p, end, &field))
            return 0;
        if (field.number == 1) { /* dims: packed or one by one */
            const unsigned char *q = field.body, *q_end = field.end;
            uint64_t dim;
            int packed = field.wire_type == 2;
            if (!packed && field.wire_type != 0)
                return 0;
            do {
                if (packed) {
                    if (q >= q_end)
                        break;
                    if (!wire_varint(&q, q_end, &dim))
                        return 0;
                }
                else
                    dim = field.varint;
                if (buffer_varint(&t->dims, dim) < 0)
                    return -1;
                t->rank++;
                long long d = (long long)dim;
                if (d < 0 || t->elements < 0 || (d > 0 && t->elements > LLONG_MAX / 64 / d))
                    t->elements = -1;
                else
                    t->elements *= d;
            } while (packed);
        }
        else if (field.number == 2 && field.wire_type == 0)
            t->data_type = field.varint;
        else if (field.number == 6 && field.wire_type == 2)
            t->string_bytes += (uint64_t)(field.end - field.body);
        else if (field.number == 8 && field.wire_type == 2) {
            t->name = field.body;
            t->name_end = field.end;
        }
        else if (field.number == 14 && field.wire_type == 0)
            t->external = field.varint == 1;
        else if (field.number == 1 || field.number == 2 || field.number == 6 || field.number == 8 || field.number == 14)
            return 0; /* a known field in another wire type */
    }
    return 1;
}

/* The input inference_input adds for an initializer: a ValueInfoProto of its name, element type and dims. */
static int
buffer_initializer_input(wire_buffer *graph, const wire_initializer *t)
{
    wire_buffer shape = {0}, tensor = {0}, type = {0}, info = {0};
    const unsigned char *q = t->dims.data, *q_end = t->dims.data + t->dims.len;
    int status = -1;
    while (q < q_end) { /* TensorShapeProto.dim: a Dimension with dim_value */
        uint64_t dim;
        unsigned char part[11] = {1 << 3 | 0};
        wire_varint(&q, q_end, &dim); /* (written by wire_read_initializer: well formed) */
        if (buffer_field(&shape, 1, part, 1 + varint_bytes(dim, part + 1)) < 0)
            goto done;
    }
    if (buffer_varint(&tensor, 1 << 3 | 0) < 0 || buffer_varint(&tensor, t->data_type) < 0
        || buffer_field(&tensor, 2, shape.data, shape.len) < 0 || buffer_field(&type, 1, tensor.data, tensor.len) < 0
        || buffer_field(&info, 1, t->name, (size_t)(t->name_end - t->name)) < 0
        || buffer_field(&info, 2, type.data, type.len) < 0 || buffer_field(graph, 11, info.data, info.len) < 0)
        goto done;
    status = 0;
done:
    PyMem_Free(shape.data);
    PyMem_Free(tensor.data);
    PyMem_Free(type.data);
    PyMem_Free(info.data);
    return status;
}

PyDoc_STRVAR(inference_input_doc,
"inference_input(data, bits, max_bytes) -> bytes or None\n\n"
"The serialized model mobile_ep.ir._inference_input builds from the serialized ModelProto data: its IR\n"
"version, opsets, functions, and a graph of its name, nodes, inputs, outputs and value infos, every\n"
"initializer not already an input added as one (its element type and dims), and the initializers of at\n"
"most max_bytes bytes kept (external ones never).  bits[data_type] is the bits an element of that type\n"
"takes (-1: unknown; 8 is the string type, whose size is its strings' bytes).  None where the model is\n"
"left to Python: malformed bytes, a graph given twice, training information, sparse initializers, an\n"
"initializer without a name or with a dim below zero, a graph, input or initializer name that is not UTF-8.");

static PyObject *
speedups_inference_input(PyObject *self, PyObject *args)
{
    Py_buffer data;
    PyObject *bits;
    long long max_bytes;
    if (!PyArg_ParseTuple(args, "y*O!L:inference_input", &data, &PyTuple_Type, &bits, &max_bytes))
        return NULL;
    const unsigned char *p = data.buf, *end = p + data.len;
    wire_buffer model = {0}, graph = {0}, kept = {0}, added = {0};
    wire_initializer t = {0};
    PyObject *listed = PySet_New(NULL), *result = NULL;
    uint64_t ir_version = 0;
    const unsigned char *graph_body = NULL, *graph_end = NULL, *name = NULL, *name_end = NULL;
    int status = 0, graphs = 0;
    wire_item field, item;
    if (listed == NULL) {
        status = -1;
        goto done;
    }
    while (p < end) { /* ModelProto */
        const unsigned char *start = p;
        if (!wire_next(&p, end, &field))
            goto done;
        if (field.number == 1 && field.wire_type == 0)
            ir_version = field.varint;
        else if (field.number == 7) {
            if (field.wire_type != 2 || graphs++)
                goto done;
            graph_body = field.body;
            graph_end = field.end;
        }
        else if (field.number == 8 || field.number == 25) { /* opset_import, functions */
            if (field.wire_type != 2 || buffer_put(&model, start, (size_t)(p - start)) < 0)
                goto done_error_if_set;
        }
        else if (field.number == 20 || field.number == 1) /* training_info; ir_version in another wire type */
            goto done;
    }
    p = graph_body;
    while (p != NULL && p < graph_end) { /* GraphProto: the inputs first (what is already an input) */
        const unsigned char *start = p;
        if (!wire_next(&p, graph_end, &item))
            goto done;
        if (item.number == 15) /* sparse_initializer */
            goto done;
        if (item.number == 2) {
            if (item.wire_type != 2)
                goto done;
            name = item.body;
            name_end = item.end;
        }
        else if (item.number == 1 || item.number == 11 || item.number == 12 || item.number == 13) {
            if (item.wire_type != 2 || buffer_put(&graph, start, (size_t)(p - start)) < 0)
                goto done_error_if_set;
            if (item.number == 11) { /* ValueInfoProto.name: the last one given */
                const unsigned char *q = item.body, *input_name = (const unsigned char *)"", *input_end = input_name;
                wire_item part;
                while (q < item.end) {
                    if (!wire_next(&q, item.end, &part))
                        goto done;
                    if (part.number == 1 && part.wire_type == 2) {
                        input_name = part.body;
                        input_end = part.end;
                    }
                }
                int utf8 = wire_utf8(input_name, input_end);
                if (utf8 != 1) { /* a name that is not UTF-8: Python's copy refuses it */
                    status = utf8;
                    goto done;
                }
                PyObject *key = PyBytes_FromStringAndSize((const char *)input_name, input_end - input_name);
                if (key == NULL || PySet_Add(listed, key) < 0) {
                    Py_XDECREF(key);
                    status = -1;
                    goto done;
                }
                Py_DECREF(key);
            }
        }
    }
    p = graph_body;
    while (p != NULL && p < graph_end) { /* the initializers */
        const unsigned char *start = p;
        if (!wire_next(&p, graph_end, &item))
            goto done;
        if (item.number != 5)
            continue;
        if (item.wire_type != 2)
            goto done;
        PyMem_Free(t.dims.data);
        int read = wire_read_initializer(item.body, item.end, &t);
        if (read <= 0) {
            status = read;
            goto done;
        }
        if (t.name == NULL || t.name == t.name_end || t.elements < 0)
            goto done;
        int utf8 = wire_utf8(t.name, t.name_end);
        if (utf8 != 1) { /* a name that is not UTF-8: Python's copy refuses it */
            status = utf8;
            goto done;
        }
        if (!t.external) {
            long long size = -1;
            if (t.data_type == 8) /* STRING */
                size = (long long)t.string_bytes;
            else if (t.data_type < (uint64_t)PyTuple_GET_SIZE(bits)) {
                long b = PyLong_AsLong(PyTuple_GET_ITEM(bits, (Py_ssize_t)t.data_type));
                if (b == -1 && PyErr_Occurred()) {
                    status = -1;
                    goto done;
                }
                if (b > 0)
                    size = (t.elements * b + 7) / 8;
            }
            if (size >= 0 && size <= max_bytes && buffer_put(&kept, start, (size_t)(p - start)) < 0)
                goto done_error_if_set;
        }
        PyObject *key = PyBytes_FromStringAndSize((const char *)t.name, t.name_end - t.name);
        if (key == NULL) {
            status = -1;
            goto done;
        }
        int seen = PySet_Contains(listed, key);
        if (seen == 0 && PySet_Add(listed, key) < 0)
            seen = -1;
        Py_DECREF(key);
        if (seen < 0) {
            status = -1;
            goto done;
        }
        if (!seen && buffer_initializer_input(&added, &t) < 0)
            goto done_error_if_set;
    }
    if (name == NULL)
        name = name_end = (const unsigned char *)"";
    int utf8 = wire_utf8(name, name_end);
    if (utf8 != 1) { /* not UTF-8: Python's copy refuses it */
        status = utf8;
        goto done;
    }
    if (buffer_field(&graph, 2, name, (size_t)(name_end - name)) < 0 || buffer_put(&graph, kept.data, kept.len) < 0
        || buffer_put(&graph, added.data, added.len) < 0)
        goto done_error_if_set;
    wire_buffer head = {0};
    if (buffer_varint(&head, 1 << 3 | 0) < 0 || buffer_varint(&head, ir_version) < 0
        || buffer_put(&head, model.data, model.len) < 0 || buffer_field(&head, 7, graph.data, graph.len) < 0) {
        PyMem_Free(head.data);
        goto done_error_if_set;
    }
    result = PyBytes_FromStringAndSize((const char *)head.data, (Py_ssize_t)head.len);
    PyMem_Free(head.data);
    status = result == NULL ? -1 : 1;
    goto done;
done_error_if_set:
    status = PyErr_Occurred() ? -1 : 0;
done:
    PyMem_Free(model.data);
    PyMem_Free(graph.data);
    PyMem_Free(kept.data);
    PyMem_Free(added.data);
    PyMem_Free(t.dims.data);
    Py_XDECREF(listed);
    PyBuffer_Release(&data);
    if (status == 1)
        return result;
    if (status < 0)
        return NULL;
    Py_RETURN_NONE;
}

PyDoc_STRVAR(needs_skeleton_doc,
"needs_skeleton(data, bits, limit) -> bool or None\n\n"
"Whether mobile_ep.ir._skeleton would copy the serialized ModelProto data rather than take it as it is: it\n"
"has sparse initializers, training information, or an initializer stored as external data or of more than\n"
"limit bytes (bits as inference_input takes it; a type of no fixed size counts no bytes).  None where that\n"
"is left to Python: malformed bytes, a graph given twice, a dim below zero or too many elements to count.");

static PyObject *
speedups_needs_skeleton(PyObject *self, PyObject *args)
{
    Py_buffer data;
    PyObject *bits;
    long long limit;
    if (!PyArg_ParseTuple(args, "y*O!L:needs_skeleton", &data, &PyTuple_Type, &bits, &limit))
        return NULL;
    const unsigned char *p, *graph_end;
    wire_initializer t = {0};
    wire_item item;
    int status = 0, needs = 0;
    if (!wire_main_graph(data.buf, (const unsigned char *)data.buf + data.len, &p, &graph_end, &needs))
        goto done;
    while (!needs && p != NULL && p < graph_end) {
        if (!wire_next(&p, graph_end, &item))
            goto done;
        if (item.number == 15 && item.wire_type == 2) /* sparse_initializer */
            needs = 1;
        if (item.number != 5)
            continue;
        if (item.wire_type != 2)
            goto done;
        PyMem_Free(t.dims.data);
        int read = wire_read_initializer(item.body, item.end, &t);
        if (read <= 0) {
            status = read;
            goto done;
        }
        if (t.elements < 0)
            goto done;
        long b = -1;
        if (t.data_type < (uint64_t)PyTuple_GET_SIZE(bits)) {
            b = PyLong_AsLong(PyTuple_GET_ITEM(bits, (Py_ssize_t)t.data_type));
            if (b == -1 && PyErr_Occurred()) {
                status = -1;
                goto done;
            }
        }
        needs = t.external || (b > 0 && (t.elements * b + 7) / 8 > limit);
    }
    status = 1;
done:
    PyMem_Free(t.dims.data);
    PyBuffer_Release(&data);
    if (status < 0)
        return NULL;
    if (status == 0)
        Py_RETURN_NONE;
    return PyBool_FromLong(needs);
}

/* -------------------------------------------------------------------------------------------------- */
/* node_fields: what mobile_ep.ir._plain_model reads of each node of the main graph, read off the wire    */
/* -------------------------------------------------------------------------------------------------- */

/* A float as onnx.proto stores it (fixed32, little-endian), as a Python float. */
static PyObject *
wire_float(const unsigned char *b)
{
    uint32_t bits = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
    float f;
    memcpy(&f, &bits, sizeof f);
    return PyFloat_FromDouble((double)f);
}

/* Append to list the floats of a repeated float field as read (one fixed32, or a packed run); 0 when malformed. */
static int
wire_floats(const wire_item *field, PyObject *list)
{
    const unsigned char *q = field->body;
    if (field->wire_type == 2 && (field->end - field->body) % 4 != 0)
        return 0;
    if (field->wire_type != 2 && field->wire_type != 5)
        return 0;
    for (; q < field->end; q += 4) {
        PyObject *v = wire_float(q);
        if (v == NULL || PyList_Append(list, v) < 0) {
            Py_XDECREF(v);
            return -1;
        }
        Py_DECREF(v);
    }
    return 1;
}

/* Append to list the ints of a repeated int64 field as read (one varint, or a packed run); 0 when malformed. */
static int
wire_ints(const wire_item *field, PyObject *list)
{
    uint64_t v = field->varint;
    const unsigned char *q = field->body;
    if (field->wire_type != 0 && field->wire_type != 2)
        return 0;
    for (;;) {
        if (field->wire_type == 2) {
            if (q >= field->end)
                return 1;
            if (!wire_varint(&q, field->end, &v))
                return 0;
        }
        PyObject *item = PyLong_FromLongLong((long long)(int64_t)v);
        if (item == NULL || PyList_Append(list, item) < 0) {
            Py_XDECREF(item);
            return -1;
        }
        Py_DECREF(item);
        if (field->wire_type == 0)
            return 1;
    }
}

/* Replace *slot with the string of item (a length-delimited field); the wire_str answers. */
static int
wire_set_str(const wire_item *item, PyObject **slot)
{
    PyObject *text;
    if (item->wire_type != 2)
        return 0;
    int status = wire_str(item, &text);
    if (status == 1)
        Py_XSETREF(*slot, text);
    return status;
}

enum { ATTR_FLOAT = 1, ATTR_INT = 2, ATTR_STRING = 3, ATTR_FLOATS = 6, ATTR_INTS = 7, ATTR_STRINGS = 8 };

/* AttributeProto of a plain type (int, float, string and their lists): (name, type, value, doc_string or None).
 * 0 for anything else (another type or none, a reference, a string that is not UTF-8, malformed bytes). */
static int
wire_attribute(const unsigned char *p, const unsigned char *end, PyObject **out)
{
    wire_item field;
    PyObject *name = NULL, *doc = NULL, *s = NULL, *value = NULL;
    PyObject *ints = PyList_New(0), *floats = PyList_New(0), *strings = PyList_New(0);
    const unsigned char *f_bits = NULL;
    uint64_t type = 0, i_value = 0;
    int status = -1, ref = 0;
    if (ints == NULL || floats == NULL || strings == NULL)
        goto done;
    status = 0;
    while (p < end) {
        int read = 1;
        if (!wire_next(&p, end, &field))
            goto done;
        switch (field.number) {
        case 1: /* name */
            read = wire_set_str(&field, &name);
            break;
        case 2: /* f */
            if (field.wire_type != 5)
                goto done;
            f_bits = field.body;
            break;
        case 3: /* i */
            if (field.wire_type != 0)
                goto done;
            i_value = field.varint;
            break;
        case 4: /* s: decoded below, when the type is a string */
            if (field.wire_type != 2)
                goto done;
            Py_XSETREF(s, PyBytes_FromStringAndSize((const char *)field.body, field.end - field.body));
            if (s == NULL)
                read = -1;
            break;
        case 7: /* floats */
            read = wire_floats(&field, floats);
            break;
        case 8: /* ints */
            read = wire_ints(&field, ints);
            break;
        case 9: { /* strings */
            PyObject *text = NULL;
            read = field.wire_type == 2 ? wire_str(&field, &text) : 0;
            if (read == 1 && PyList_Append(strings, text) < 0)
                read = -1;
            Py_XDECREF(text);
            break;
        }
        case 13: /* doc_string */
            read = wire_set_str(&field, &doc);
            break;
        case 20: /* type */
            if (field.wire_type != 0)
                goto done;
            type = field.varint;
            break;
        case 21: /* ref_attr_name: a reference when not empty */
            if (field.wire_type != 2)
                goto done;
            ref = field.end > field.body;
            break;
        default: /* tensors, graphs, type protos: read only for types left to Python */
            break;
        }
        if (read != 1) {
            status = read;
            goto done;
        }
    }
    if (ref)
        goto done;
    switch (type) {
    case ATTR_INT:
        value = PyLong_FromLongLong((long long)(int64_t)i_value);
        break;
    case ATTR_FLOAT:
        value = f_bits != NULL ? wire_float(f_bits) : PyFloat_FromDouble(0.0);
        break;
    case ATTR_STRING:
        if (s == NULL)
            value = PyUnicode_FromStringAndSize("", 0);
        else {
            value = PyUnicode_DecodeUTF8(PyBytes_AS_STRING(s), PyBytes_GET_SIZE(s), "strict");
            if (value == NULL && PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
                PyErr_Clear();
                goto done; /* (status 0: Python says what is wrong) */
            }
        }
        break;
    case ATTR_INTS:
        value = PyList_AsTuple(ints);
        break;
    case ATTR_FLOATS:
        value = PyList_AsTuple(floats);
        break;
    case ATTR_STRINGS:
        value = PyList_AsTuple(strings);
        break;
    default:
        goto done;
    }
    if (value == NULL) {
        status = -1;
        goto done;
    }
    if (name == NULL && (name = PyUnicode_FromStringAndSize("", 0)) == NULL) {
        status = -1;
        goto done;
    }
    *out = Py_BuildValue("(OkOO)", name, (unsigned long)type, value, doc != NULL ? doc : Py_None);
    status = *out == NULL ? -1 : 1;
done:
    Py_XDECREF(name);
    Py_XDECREF(doc);
    Py_XDECREF(s);
    Py_XDECREF(value);
    Py_XDECREF(ints);
    Py_XDECREF(floats);
    Py_XDECREF(strings);
    return status;
}

/* NodeProto: (inputs, outputs, name, op_type, domain, overload, doc_string or None, attributes), each attribute
 * as wire_attribute reads it; 0 for a node with metadata, device configurations or an attribute not read here. */
static int
wire_node_fields(const unsigned char *p, const unsigned char *end, PyObject **out)
{
    wire_item field;
    PyObject *inputs = PyList_New(0), *outputs = PyList_New(0), *attributes = PyList_New(0);
    PyObject *name = NULL, *op_type = NULL, *domain = NULL, *overload = NULL, *doc = NULL, *empty = NULL;
    int status = -1;
    if (inputs == NULL || outputs == NULL || attributes == NULL || (empty = PyUnicode_FromStringAndSize("", 0)) == NULL)
        goto done;
    status = 0;
    while (p < end) {
        int read = 1;
        PyObject *item = NULL;
        if (!wire_next(&p, end, &field))
            goto done;
        switch (field.number) {
        case 1: /* input */
        case 2: /* output */
            read = field.wire_type == 2 ? wire_str(&field, &item) : 0;
            if (read == 1 && PyList_Append(field.number == 1 ? inputs : outputs, item) < 0)
                read = -1;
            break;
        case 3:
            read = wire_set_str(&field, &name);
            break;
        case 4:
            read = wire_set_str(&field, &op_type);
            break;
        case 5: /* attribute */
            read = field.wire_type == 2 ? wire_attribute(field.body, field.end, &item) : 0;
            if (read == 1 && PyList_Append(attributes, item) < 0)
                read = -1;
            break;
        case 6:
            read = wire_set_str(&field, &doc);
            break;
        case 7:
            read = wire_set_str(&field, &domain);
            break;
        case 8:
            read = wire_set_str(&field, &overload);
            break;
        case 9:  /* metadata_props */
        case 10: /* device_configurations */
            read = 0;
            break;
        default:
            break;
        }
        Py_XDECREF(item);
        if (read != 1) {
            status = read;
            goto done;
        }
    }
    *out = Py_BuildValue("(OOOOOOOO)", inputs, outputs, name ? name : empty, op_type ? op_type : empty,
                         domain ? domain : empty, overload ? overload : empty, doc ? doc : Py_None, attributes);
    status = *out == NULL ? -1 : 1;
done:
    Py_XDECREF(inputs);
    Py_XDECREF(outputs);
    Py_XDECREF(attributes);
    Py_XDECREF(name);
    Py_XDECREF(op_type);
    Py_XDECREF(domain);
    Py_XDECREF(overload);
    Py_XDECREF(doc);
    Py_XDECREF(empty);
    return status;
}

PyDoc_STRVAR(node_fields_doc,
"node_fields(data) -> [node or None, ...] or None\n\n"
"What mobile_ep.ir._plain_model reads of each node of the main graph of the serialized ModelProto data, in\n"
"order: (inputs, outputs, name, op_type, domain, overload, doc_string or None, attributes), each attribute\n"
"(name, type number, value, doc_string or None) with the value as onnx_ir's Attr is given it (an int, a\n"
"float, a str, or a tuple of them).  None for a node not read here (metadata, device configurations, an\n"
"attribute of another type or a reference, a string that is not UTF-8); None altogether for malformed\n"
"bytes or a graph field given twice.");

static PyObject *
speedups_node_fields(PyObject *self, PyObject *args)
{
    Py_buffer data;
    if (!PyArg_ParseTuple(args, "y*:node_fields", &data))
        return NULL;
    return wire_graph_list(&data, 1, wire_node_fields); /* GraphProto.node */
}

/* -------------------------------------------------------------------------------------------------- */
/* plain_initializers: the initializers of onnxruntime's output, checked off the wire                    */
/* -------------------------------------------------------------------------------------------------- */

/* 1 when the TensorProto [p, end) is plain as plain_initializers means it, 0 when not (or malformed), -1 error. */
static int
wire_plain_initializer(const unsigned char *p, const unsigned char *end, PyObject *bits, const char *location,
                       Py_ssize_t location_len)
{
    wire_item field, part;
    wire_initializer t;
    int status = wire_read_initializer(p, end, &t);
    PyMem_Free(t.dims.data);
    if (status <= 0)
        return status;
    if (t.elements < 0 || t.data_type >= (uint64_t)PyTuple_GET_SIZE(bits))
        return 0;
    long b = PyLong_AsLong(PyTuple_GET_ITEM(bits, (Py_ssize_t)t.data_type));
    if (b == -1 && PyErr_Occurred())
        return -1;
    if (b <= 0)
        return 0;
    long long nbytes = (t.elements * b + 7) / 8;
    int raw = 0, external_entries = 0, seen_location = 0, seen_offset = 0, seen_length = 0;
    long long raw_size = -1, length = -1;
    while (p < end) {
        if (!wire_next(&p, end, &field))
            return 0;
        switch (field.number) {
        case 1: case 2: case 8: case 12: case 14: case 16: /* dims, data_type, name, doc_string, data_location, metadata */
            break;
        case 9: /* raw_data */
            if (field.wire_type != 2 || raw++)
                return 0;
            raw_size = (long long)(field.end - field.body);
            break;
        case 13: { /* external_data: location (which must be *location*), offset, length; each once */
            const unsigned char *key = NULL, *key_end = NULL, *value = NULL, *value_end = NULL;
            if (field.wire_type != 2)
                return 0;
            external_entries++;
            while (field.body < field.end) {
                if (!wire_next(&field.body, field.end, &part) || part.wire_type != 2)
                    return 0;
                if (part.number == 1) {
                    key = part.body;
                    key_end = part.end;
                }
                else if (part.number == 2) {
                    value = part.body;
                    value_end = part.end;
                }
                else
                    return 0;
            }
            if (key == NULL || value == NULL)
                return 0;
            size_t key_len = (size_t)(key_end - key), value_len = (size_t)(value_end - value);
            if (key_len == 8 && memcmp(key, "location", 8) == 0) {
                if (seen_location++ || value_len != (size_t)location_len || memcmp(value, location, value_len) != 0)
                    return 0;
            }
            else if ((key_len == 6 && memcmp(key, "offset", 6) == 0) || (key_len == 6 && memcmp(key, "length", 6) == 0)) {
                int is_length = key[0] == 'l';
                if (is_length ? seen_length++ : seen_offset++)
                    return 0;
                if (value_len == 0 || value_len > 18)
                    return 0;
                long long number = 0;
                for (size_t k = 0; k < value_len; k++) {
                    if (value[k] < '0' || value[k] > '9')
                        return 0;
                    number = number * 10 + (value[k] - '0');
                }
                if (is_length)
                    length = number;
            }
            else
                return 0;
            break;
        }
        default: /* segment, typed data fields, anything else: left to Python */
            return 0;
        }
    }
    if (t.external || external_entries) /* external: at the expected place, of the expected length if given */
        return t.external && !raw && seen_location && (length < 0 || length == nbytes);
    if (raw)
        return raw_size == nbytes;
    return t.elements == 0;
}

PyDoc_STRVAR(plain_initializers_doc,
"plain_initializers(data, bits, location) -> bool or None\n\n"
"Whether every initializer of the main graph of the serialized ModelProto data is one that\n"
"mobile_ep.ir._Inspector.tensor accepts without a word, in one of the plain forms onnxruntime writes: of a\n"
"type of fixed size (bits as inference_input takes it) and dims of zero or more, with its data either in\n"
"raw_data, of the size its shape needs, or in the external file location (location, offset and length\n"
"given at most once each, offset and length decimal, the length the size its shape needs), or with no\n"
"elements and no data.  False when any is not (the caller inspects them in Python); None for malformed\n"
"bytes or a graph field given twice.");

static PyObject *
speedups_plain_initializers(PyObject *self, PyObject *args)
{
    Py_buffer data;
    PyObject *bits;
    const char *location;
    Py_ssize_t location_len;
    if (!PyArg_ParseTuple(args, "y*O!s#:plain_initializers", &data, &PyTuple_Type, &bits, &location, &location_len))
        return NULL;
    const unsigned char *p, *graph_end;
    wire_item item;
    int status = 0, plain = 1;
    if (!wire_main_graph(data.buf, (const unsigned char *)data.buf + data.len, &p, &graph_end, NULL))
        goto done;
    while (plain && p != NULL && p < graph_end) {
        if (!wire_next(&p, graph_end, &item))
            goto done;
        if (item.number != 5)
            continue;
        if (item.wire_type != 2)
            goto done;
        int read = wire_plain_initializer(item.body, item.end, bits, location, location_len);
        if (read < 0) {
            status = -1;
            goto done;
        }
        plain = read;
    }
    status = 1;
done:
    PyBuffer_Release(&data);
    if (status < 0)
        return NULL;
    if (status == 0)
        Py_RETURN_NONE;
    return PyBool_FromLong(plain);
}

/* -------------------------------------------------------------------------------------------------- */
static PyMethodDef speedups_methods[] = {
    {"producers", speedups_producers, METH_VARARGS, producers_doc},
    {"in_degrees", speedups_in_degrees, METH_O, in_degrees_doc},
    {"drain", speedups_drain, METH_VARARGS, drain_doc},
    {"ordered_consumers", speedups_ordered_consumers, METH_VARARGS, ordered_consumers_doc},
    {"waves", speedups_waves, METH_VARARGS, waves_doc},
    {"signatures", speedups_signatures, METH_VARARGS, signatures_doc},
    {"flops", speedups_flops, METH_VARARGS, flops_doc},
    {"io_many", speedups_io_many, METH_VARARGS, io_many_doc},
    {"instances", speedups_instances, METH_VARARGS, instances_doc},
    {"numbytes", speedups_numbytes, METH_VARARGS, numbytes_doc},
    {"gather", speedups_gather, METH_VARARGS, gather_doc},
    {"shapes_within", speedups_shapes_within, METH_VARARGS, shapes_within_doc},
    {"value_types", speedups_value_types, METH_VARARGS, value_types_doc},
    {"input_types", speedups_input_types, METH_VARARGS, input_types_doc},
    {"inference_input", speedups_inference_input, METH_VARARGS, inference_input_doc},
    {"needs_skeleton", speedups_needs_skeleton, METH_VARARGS, needs_skeleton_doc},
    {"node_fields", speedups_node_fields, METH_VARARGS, node_fields_doc},
    {"plain_initializers", speedups_plain_initializers, METH_VARARGS, plain_initializers_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef speedups_module = {
    PyModuleDef_HEAD_INIT, "mobile_ep._speedups",
    "Compiled twins of the partitioner's per-node loops.", -1, speedups_methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit__speedups(void)
{
    if (str_node == NULL && (str_node = PyUnicode_InternFromString("node")) == NULL)
        return NULL;
    if (str_uses == NULL && (str_uses = PyUnicode_InternFromString("uses")) == NULL)
        return NULL;
    if (str_reduce == NULL && (str_reduce = PyUnicode_InternFromString("__reduce__")) == NULL)
        return NULL;
    if (attrgetter_type == NULL) {
        PyObject *operator_module = PyImport_ImportModule("operator");
        if (operator_module == NULL)
            return NULL;
        attrgetter_type = PyObject_GetAttrString(operator_module, "attrgetter");
        Py_DECREF(operator_module);
        if (attrgetter_type == NULL)
            return NULL;
    }
    return PyModule_Create(&speedups_module);
}
