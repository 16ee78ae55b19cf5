/* python/remora/_remora.c — remora._remora, the Python module's C half: libremora's
 * handle as a Python object, each reading turned into plain tuples (remora/__init__.py
 * makes CPython's _remote_debugging result types of them). Built against the stable ABI
 * (Py_LIMITED_API 3.9): one .abi3.so loads into any CPython 3.9+. Reads the target only
 * through libremora.
 */
#define Py_LIMITED_API 0x03090000
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <pthread.h>
#include <unistd.h>

#include <remora/remora.h>

/* ---- the reader object -------------------------------------------------------------- */

/* read(factory)'s frames: the object factory made of each distinct frame, kept while the
 * handle lives (its strings are interned: the same frame has the same pointers), so a
 * frame unchanged from one read to the next costs a lookup, and is the same object. */
#define FC_SLOTS 8192               /* open addressing; emptied at half full */

typedef struct {
    const char *function, *file;
    int line, end_line, column, end_column, opcode, kind;
    PyObject *obj;                  /* NULL: an empty slot */
} fc_entry_t;

/* trace()'s memory of each thread's last stack: the frames (values) and the objects made
 * of them, so that the frames unchanged since (the outer part of a stack, compared from
 * the outermost) are the same objects again, with no lookup; one entry per thread of the
 * last reading (an entry not seen in a reading is let go). */
typedef struct {
    int64_t interp;
    long tid;
    uint64_t ident;
    unsigned seen;                  /* the reading that last saw it */
    PyObject *tid_obj;              /* the thread id as an int, made once */
    size_t n, cap;
    remora_frame_t *fr;             /* the last reading's frames, innermost first, */
    PyObject *objs;                 /* ... and the object made of each: a list of n, never
                                     * handed out (each result is a copy) */
} tc_entry_t;

typedef struct {
    PyObject_HEAD
    remora_t *r;
    fc_entry_t *fc;                 /* FC_SLOTS slots, allocated at the first read(factory) */
    size_t fc_used;
    /* trace(): set once by configure() */
    PyObject *factory;              /* frame tuple -> FrameInfo */
    PyObject *interp_type;          /* InterpreterInfo */
    PyObject *thread_type;          /* ThreadInfo */
    newfunc tuple_new;              /* tuple's tp_new: a result made as tuple.__new__(T, items) */
    PyObject *native_mark;          /* appended outermost to every stack, or NULL */
    unsigned status_or;             /* bits or-ed into every thread's status */
    Py_ssize_t max_frames;          /* a longer stack is left to the caller (rows) */
    tc_entry_t *tc;
    size_t ntc, cap_tc;
    unsigned round;
} reader_t;

static void fc_clear(reader_t *rd)
{
    size_t i;

    if (rd->fc == NULL)
        return;
    for (i = 0; i < FC_SLOTS; i++)
        Py_CLEAR(rd->fc[i].obj);
    rd->fc_used = 0;
}

/* Lets go of one thread's memory (its objects; the entry's arrays kept). */
static void tc_empty(tc_entry_t *e)
{
    Py_CLEAR(e->objs);
    e->n = 0;
}

static void tc_clear(reader_t *rd)
{
    size_t i;

    for (i = 0; i < rd->ntc; i++) {
        tc_empty(&rd->tc[i]);
        Py_CLEAR(rd->tc[i].tid_obj);
        PyMem_Free(rd->tc[i].fr);
    }
    PyMem_Free(rd->tc);
    rd->tc = NULL;
    rd->ntc = rd->cap_tc = 0;
}

static void trace_clear(reader_t *rd)
{
    tc_clear(rd);
    Py_CLEAR(rd->factory);
    Py_CLEAR(rd->interp_type);
    Py_CLEAR(rd->thread_type);
    Py_CLEAR(rd->native_mark);
    rd->tuple_new = NULL;
}

static int fc_same(const fc_entry_t *e, const remora_frame_t *f)
{
    return e->function == f->function && e->file == f->file && e->line == f->line &&
           e->end_line == f->end_line && e->column == f->column &&
           e->end_column == f->end_column && e->opcode == f->opcode && e->kind == f->kind;
}

static size_t fc_hash(const remora_frame_t *f)
{
    uint64_t h = (uint64_t)(uintptr_t)f->function * 0x9e3779b97f4a7c15u;

    h ^= (uint64_t)(uintptr_t)f->file + 0x632be59bd9b4e019u + (h << 6) + (h >> 2);
    h ^= (uint64_t)(unsigned)f->line * 0xff51afd7ed558ccdu;
    h ^= (uint64_t)(unsigned)(f->column + 1) << 20 ^ (uint64_t)(unsigned)(f->opcode + 1) << 40;
    h ^= h >> 29;
    return (size_t)(h & (FC_SLOTS - 1));
}

static PyObject *error_type;        /* remora._remora.Error(code, message) */

/* Raises Error(code, message). Returns NULL. */
static PyObject *fail(int code, const char *message)
{
    PyObject *args = Py_BuildValue("(is)", code, message);

    if (args != NULL) {
        PyErr_SetObject(error_type, args);
        Py_DECREF(args);
    }
    return NULL;
}

static PyObject *text(const char *s)
{
    if (s == NULL)
        Py_RETURN_NONE;
    /* the library's strings are UTF-8 (invalid sequences already replaced) */
    return PyUnicode_DecodeUTF8(s, (Py_ssize_t)strlen(s), "replace");
}

static int reader_init(PyObject *self, PyObject *args, PyObject *kw)
{
    static char *names[] = { "pid", "flags", "tries", NULL };
    reader_t *rd = (reader_t *)self;
    long pid;
    unsigned int flags = 0, tries = 64;
    char why[512] = "";
    int err;

    if (!PyArg_ParseTupleAndKeywords(args, kw, "l|II", names, &pid, &flags, &tries))
        return -1;
    if (rd->r != NULL) {
        /* the frames kept are the old handle's (its strings' addresses) */
        fc_clear(rd);
        tc_clear(rd);
        remora_close(rd->r);
        rd->r = NULL;
    }
    if (pid <= 0 || pid > 0x7fffffffL) {
        fail(REMORA_EUSAGE, "pid must be a positive process id");
        return -1;
    }
    Py_BEGIN_ALLOW_THREADS
    err = remora_open((pid_t)pid, flags, &rd->r, why, sizeof why);
    Py_END_ALLOW_THREADS
    if (err != REMORA_OK) {
        fail(err, why);
        return -1;
    }
    remora_set_tries(rd->r, tries);
    return 0;
}

static void reader_dealloc(PyObject *self)
{
    reader_t *rd = (reader_t *)self;
    PyTypeObject *tp = Py_TYPE(self);
    freefunc tp_free = (freefunc)PyType_GetSlot(tp, Py_tp_free);

    fc_clear(rd);
    PyMem_Free(rd->fc);
    rd->fc = NULL;
    trace_clear(rd);
    remora_close(rd->r);
    rd->r = NULL;
    tp_free(self);
    Py_DECREF(tp);
}

static int ready(reader_t *rd)
{
    if (rd->r == NULL) {
        fail(REMORA_EUSAGE, "the reader is closed");
        return 0;
    }
    return 1;
}

/* A frame: (file, function, line, end_line, column, end_column, opcode or None, kind). */
static PyObject *frame_tuple(const remora_frame_t *f)
{
    PyObject *file = text(f->file), *func = text(f->function), *t = NULL;

    if (file != NULL && func != NULL) {
        if (f->opcode >= 0)
            t = Py_BuildValue("(OOiiiiii)", file, func, f->line, f->end_line, f->column,
                              f->end_column, f->opcode, f->kind);
        else
            t = Py_BuildValue("(OOiiiiOi)", file, func, f->line, f->end_line, f->column,
                              f->end_column, Py_None, f->kind);
    }
    Py_XDECREF(file);
    Py_XDECREF(func);
    return t;
}

/* The object factory makes of frame f (called with its tuple), kept in rd's table: a new
 * reference, or NULL with an exception set. */
static PyObject *frame_object(reader_t *rd, PyObject *factory, const remora_frame_t *f)
{
    size_t i = fc_hash(f), probes;
    PyObject *t, *obj;

    if (rd->fc == NULL) {
        if ((rd->fc = PyMem_Calloc(FC_SLOTS, sizeof *rd->fc)) == NULL)
            return PyErr_NoMemory();
    }
    for (probes = 0; probes < FC_SLOTS && rd->fc[i].obj != NULL; probes++) {
        if (fc_same(&rd->fc[i], f)) {
            Py_INCREF(rd->fc[i].obj);
            return rd->fc[i].obj;
        }
        i = (i + 1) & (FC_SLOTS - 1);
    }
    if ((t = frame_tuple(f)) == NULL)
        return NULL;
    obj = PyObject_CallFunctionObjArgs(factory, t, NULL);
    Py_DECREF(t);
    if (obj == NULL)
        return NULL;
    if (rd->fc_used >= FC_SLOTS / 2) {
        fc_clear(rd);                   /* a bound on what is kept; rebuilt as needed */
        i = fc_hash(f);
    }
    while (rd->fc[i].obj != NULL)
        i = (i + 1) & (FC_SLOTS - 1);
    rd->fc[i].function = f->function;
    rd->fc[i].file = f->file;
    rd->fc[i].line = f->line;
    rd->fc[i].end_line = f->end_line;
    rd->fc[i].column = f->column;
    rd->fc[i].end_column = f->end_column;
    rd->fc[i].opcode = f->opcode;
    rd->fc[i].kind = f->kind;
    Py_INCREF(obj);
    rd->fc[i].obj = obj;
    rd->fc_used++;
    return obj;
}

static PyObject *frames_list(reader_t *rd, PyObject *factory, const remora_frame_t *fr, size_t n)
{
    PyObject *list = PyList_New((Py_ssize_t)n);
    size_t k;

    if (list == NULL)
        return NULL;
    for (k = 0; k < n; k++) {
        PyObject *f = factory != NULL ? frame_object(rd, factory, &fr[k]) : frame_tuple(&fr[k]);
        if (f == NULL) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SetItem(list, (Py_ssize_t)k, f);
    }
    return list;
}

/* The rows of a reading: [(interpreter_id, native_id, status, gc, name, error, partial,
 * task_id, ident, frames)], frames each a tuple or what factory made of it. */
static PyObject *rows_of(reader_t *rd, PyObject *factory, const remora_thread_t *th, size_t n)
{
    PyObject *list;
    size_t i;

    if ((list = PyList_New((Py_ssize_t)n)) == NULL)
        return NULL;
    for (i = 0; i < n; i++) {
        PyObject *frames = frames_list(rd, factory, th[i].frames, th[i].nframes), *name, *t;
        if (frames == NULL || (name = text(th[i].name)) == NULL) {
            Py_XDECREF(frames);
            Py_DECREF(list);
            return NULL;
        }
        t = Py_BuildValue("(LlIiOiiKKO)", (long long)th[i].interpreter_id,
                          (long)th[i].native_id, th[i].status, th[i].gc, name, th[i].error,
                          th[i].partial, (unsigned long long)th[i].task_id,
                          (unsigned long long)th[i].ident, frames);
        Py_DECREF(frames);
        Py_DECREF(name);
        if (t == NULL) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SetItem(list, (Py_ssize_t)i, t);
    }
    return list;
}

/* read(factory=None) -> [(interpreter_id, native_id, status, gc, name, error, partial,
 *                          task_id, ident, frames)]; frames: each a tuple, or with a
 * factory what factory(tuple) made of it (made once for each distinct frame) */
static PyObject *reader_read(PyObject *self, PyObject *args)
{
    reader_t *rd = (reader_t *)self;
    const remora_thread_t *th;
    PyObject *factory = Py_None;
    size_t n;
    int err;

    if (!PyArg_ParseTuple(args, "|O", &factory))
        return NULL;
    if (factory == Py_None)
        factory = NULL;
    if (!ready(rd))
        return NULL;
    /* the GIL kept: it is what makes the handle used by one thread at a time */
    err = remora_read(rd->r, &th, &n);
    if (err != REMORA_OK)
        return fail(err, remora_last_error(rd->r));
    return rows_of(rd, factory, th, n);
}

/* ---- trace(): get_stack_trace()'s result, made here ----------------------------------- */

static pid_t own_pid;               /* getpid(), kept (and renewed in a forked child) */

static void own_pid_renew(void)
{
    own_pid = getpid();
}

/* configure(factory, InterpreterInfo, ThreadInfo, plain, status_or, native_mark,
 * max_frames): what trace() makes its result of; plain is a subclass of tuple with
 * tuple's own __new__ (whose tp_new makes the result types as tuple.__new__ does). */
static PyObject *reader_configure(PyObject *self, PyObject *args)
{
    reader_t *rd = (reader_t *)self;
    PyObject *factory, *itype, *ttype, *plain, *mark;
    unsigned int status_or;
    Py_ssize_t max_frames;
    newfunc tn;

    if (!PyArg_ParseTuple(args, "OO!O!O!IOn", &factory, &PyType_Type, &itype, &PyType_Type,
                          &ttype, &PyType_Type, &plain, &status_or, &mark, &max_frames))
        return NULL;
    if (!PyCallable_Check(factory) || !PyType_IsSubtype((PyTypeObject *)itype, &PyTuple_Type) ||
        !PyType_IsSubtype((PyTypeObject *)ttype, &PyTuple_Type) ||
        !PyType_IsSubtype((PyTypeObject *)plain, &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError, "configure: a callable and three tuple types");
        return NULL;
    }
    /* a heap type's slot (PyType_GetSlot reads only heap types before 3.10) */
    if ((tn = (newfunc)PyType_GetSlot((PyTypeObject *)plain, Py_tp_new)) == NULL) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "configure: no tp_new");
        return NULL;
    }
    trace_clear(rd);
    Py_INCREF(factory);
    rd->factory = factory;
    Py_INCREF(itype);
    rd->interp_type = itype;
    Py_INCREF(ttype);
    rd->thread_type = ttype;
    rd->tuple_new = tn;
    if (mark != Py_None) {
        Py_INCREF(mark);
        rd->native_mark = mark;
    }
    rd->status_or = status_or;
    rd->max_frames = max_frames;
    Py_RETURN_NONE;
}

/* type(items) as tuple.__new__(type, items) makes it: a new reference, or NULL. Steals
 * items (a tuple). */
static PyObject *make_result(reader_t *rd, PyObject *type, PyObject *items)
{
    PyObject *args, *obj;

    if (items == NULL)
        return NULL;
    args = PyTuple_New(1);
    if (args == NULL) {
        Py_DECREF(items);
        return NULL;
    }
    PyTuple_SetItem(args, 0, items);
    obj = rd->tuple_new((PyTypeObject *)type, args, NULL);
    Py_DECREF(args);
    return obj;
}

/* A tuple of two or three objects, each a new reference (NULL: fails, all let go). */
static PyObject *tuple_of(PyObject *a, PyObject *b, PyObject *c)
{
    PyObject *t = (a != NULL && b != NULL) ? PyTuple_New(c != NULL ? 3 : 2) : NULL;

    if (t == NULL) {
        Py_XDECREF(a);
        Py_XDECREF(b);
        Py_XDECREF(c);
        return NULL;
    }
    PyTuple_SetItem(t, 0, a);
    PyTuple_SetItem(t, 1, b);
    if (c != NULL)
        PyTuple_SetItem(t, 2, c);
    return t;
}

static int frame_same(const remora_frame_t *a, const remora_frame_t *b)
{
    return a->function == b->function && a->file == b->file && a->line == b->line &&
           a->end_line == b->end_line && a->column == b->column &&
           a->end_column == b->end_column && a->opcode == b->opcode && a->kind == b->kind;
}

/* The memory of thread t (made empty for a thread not seen before), or NULL (no memory). */
static tc_entry_t *tc_find(reader_t *rd, size_t hint, const remora_thread_t *t)
{
    tc_entry_t *e;
    size_t i;

    if (hint < rd->ntc && rd->tc[hint].tid == (long)t->native_id &&
        rd->tc[hint].interp == t->interpreter_id && rd->tc[hint].ident == t->ident)
        return &rd->tc[hint];
    for (i = 0; i < rd->ntc; i++)
        if (rd->tc[i].tid == (long)t->native_id && rd->tc[i].interp == t->interpreter_id &&
            rd->tc[i].ident == t->ident)
            return &rd->tc[i];
    if (rd->ntc == rd->cap_tc) {
        size_t cap = rd->cap_tc ? 2 * rd->cap_tc : 8;
        tc_entry_t *nt = PyMem_Realloc(rd->tc, cap * sizeof *nt);
        if (nt == NULL)
            return NULL;
        rd->tc = nt;
        rd->cap_tc = cap;
    }
    e = &rd->tc[rd->ntc++];
    memset(e, 0, sizeof *e);
    e->interp = t->interpreter_id;
    e->tid = (long)t->native_id;
    e->ident = t->ident;
    return e;
}

/* Thread t's frames as a new list: the frames equal to the last reading's, counted from
 * the outermost, are its objects again; the rest made (frame_object). A new reference,
 * or NULL. The list is the caller's: nothing here keeps or changes it. */
static PyObject *trace_frames(reader_t *rd, tc_entry_t *e, const remora_thread_t *t)
{
    size_t n = t->nframes, pn = e->objs != NULL ? e->n : 0, same = 0, k, fresh;
    int mark = rd->native_mark != NULL && n > 0 && t->frames[n - 1].kind != REMORA_FRAME_GC;
    PyObject *list, *made = NULL;

    while (same < n && same < pn && frame_same(&e->fr[pn - 1 - same], &t->frames[n - 1 - same]))
        same++;
    fresh = n - same;
    if (n > e->cap) {
        remora_frame_t *nf = PyMem_Realloc(e->fr, n * sizeof *nf);
        if (nf == NULL)
            goto error;
        e->fr = nf;
        e->cap = n;
    }
    if (e->objs == NULL && (e->objs = PyList_New(0)) == NULL)
        goto error;
    if (fresh == pn - same) {
        /* the same length: the moved frames' objects replaced in place */
        for (k = 0; k < fresh; k++) {
            PyObject *f = frame_object(rd, rd->factory, &t->frames[k]);
            if (f == NULL || PyList_SetItem(e->objs, (Py_ssize_t)k, f) < 0)
                goto error;
        }
    } else {
        if ((made = PyList_New((Py_ssize_t)fresh)) == NULL)
            goto error;
        for (k = 0; k < fresh; k++) {
            PyObject *f = frame_object(rd, rd->factory, &t->frames[k]);
            if (f == NULL)
                goto error;
            PyList_SetItem(made, (Py_ssize_t)k, f);
        }
        if (PyList_SetSlice(e->objs, 0, (Py_ssize_t)(pn - same), made) < 0)
            goto error;
        Py_CLEAR(made);
        if (same > 0)
            memmove(e->fr + fresh, e->fr + (pn - same), same * sizeof *e->fr);
    }
    if (fresh > 0)
        memcpy(e->fr, t->frames, fresh * sizeof *e->fr);
    e->n = n;
    if ((list = PyList_GetSlice(e->objs, 0, (Py_ssize_t)n)) == NULL)
        return NULL;
    if (mark && PyList_Append(list, rd->native_mark) < 0) {
        Py_DECREF(list);
        return NULL;
    }
    return list;
error:
    Py_XDECREF(made);
    tc_empty(e);
    if (!PyErr_Occurred())
        PyErr_NoMemory();
    return NULL;
}

/* Lets go of the threads the reading did not have. */
static void tc_sweep(reader_t *rd)
{
    size_t i = 0;

    while (i < rd->ntc) {
        tc_entry_t *e = &rd->tc[i];
        if (e->seen == rd->round) {
            i++;
            continue;
        }
        tc_empty(e);
        Py_CLEAR(e->tid_obj);
        PyMem_Free(e->fr);
        rd->tc[i] = rd->tc[--rd->ntc];
    }
}

/* trace() -> [InterpreterInfo(id, [ThreadInfo(thread_id, status, [FrameInfo...])])], in
 * the order the reading has them; or, when a thread needs what only the caller does (its
 * stack could not be read or moved, is over max_frames, or is this process's own), the
 * rows of the reading as read(factory) gives them, as a tuple. */
static PyObject *reader_trace(PyObject *self, PyObject *unused)
{
    reader_t *rd = (reader_t *)self;
    const remora_thread_t *th;
    /* each interpreter's id and its list of threads, in the order first seen */
    int64_t ids_small[8], *ids = ids_small;
    PyObject *lists_small[8], **lists = lists_small, *out = NULL;
    size_t n, i, g, ng = 0;
    int err;

    (void)unused;
    if (!ready(rd))
        return NULL;
    if (rd->factory == NULL) {
        PyErr_SetString(PyExc_TypeError, "trace() before configure()");
        return NULL;
    }
    /* the GIL kept: it is what makes the handle used by one thread at a time */
    err = remora_read(rd->r, &th, &n);
    if (err != REMORA_OK)
        return fail(err, remora_last_error(rd->r));
    for (i = 0; i < n; i++)
        if (th[i].error || th[i].partial || th[i].nframes > (size_t)rd->max_frames ||
            remora_pid(rd->r) == own_pid) {
            PyObject *rows = rows_of(rd, rd->factory, th, n), *t;
            if (rows == NULL)
                return NULL;
            t = PyList_AsTuple(rows);
            Py_DECREF(rows);
            return t;
        }
    if (n > sizeof ids_small / sizeof ids_small[0]) {
        ids = PyMem_Malloc(n * sizeof *ids);
        lists = PyMem_Malloc(n * sizeof *lists);
        if (ids == NULL || lists == NULL) {
            PyErr_NoMemory();
            goto error;
        }
    }
    rd->round++;
    for (i = 0; i < n; i++) {
        const remora_thread_t *t = &th[i];
        tc_entry_t *e = tc_find(rd, i, t);
        PyObject *frames, *status, *info;
        if (e == NULL) {
            PyErr_NoMemory();
            goto error;
        }
        e->seen = rd->round;
        if (e->tid_obj == NULL && (e->tid_obj = PyLong_FromLong((long)t->native_id)) == NULL)
            goto error;
        if ((frames = trace_frames(rd, e, t)) == NULL)
            goto error;
        status = PyLong_FromUnsignedLong(t->status | rd->status_or);
        Py_INCREF(e->tid_obj);
        info = make_result(rd, rd->thread_type, tuple_of(e->tid_obj, status, frames));
        if (info == NULL)
            goto error;
        for (g = 0; g < ng && ids[g] != t->interpreter_id; g++)
            ;
        if (g == ng) {
            if ((lists[g] = PyList_New(0)) == NULL) {
                Py_DECREF(info);
                goto error;
            }
            ids[g] = t->interpreter_id;
            ng++;
        }
        err = PyList_Append(lists[g], info);
        Py_DECREF(info);
        if (err < 0)
            goto error;
    }
    tc_sweep(rd);
    if ((out = PyList_New((Py_ssize_t)ng)) == NULL)
        goto error;
    for (g = 0; g < ng; g++) {
        PyObject *info = make_result(rd, rd->interp_type,
                                     tuple_of(PyLong_FromLongLong((long long)ids[g]), lists[g],
                                              NULL));
        lists[g] = NULL;            /* tuple_of took it */
        if (info == NULL)
            goto error;
        PyList_SetItem(out, (Py_ssize_t)g, info);
    }
    if (ids != ids_small) {
        PyMem_Free(ids);
        PyMem_Free(lists);
    }
    return out;
error:
    for (g = 0; g < ng; g++)
        Py_XDECREF(lists[g]);
    if (ids != ids_small) {
        PyMem_Free(ids);
        PyMem_Free(lists);
    }
    Py_XDECREF(out);
    return NULL;
}

/* tasks() -> [(id, name, thread, running, frames, (awaiter ids...))] */
static PyObject *reader_tasks(PyObject *self, PyObject *unused)
{
    reader_t *rd = (reader_t *)self;
    const remora_task_t *tk;
    PyObject *list;
    size_t n, i, k;
    int err;

    (void)unused;
    if (!ready(rd))
        return NULL;
    /* the GIL kept: it is what makes the handle used by one thread at a time */
    err = remora_tasks(rd->r, &tk, &n);
    if (err != REMORA_OK)
        return fail(err, remora_last_error(rd->r));
    if ((list = PyList_New((Py_ssize_t)n)) == NULL)
        return NULL;
    for (i = 0; i < n; i++) {
        PyObject *frames = frames_list(rd, NULL, tk[i].frames, tk[i].nframes);
        PyObject *by = PyTuple_New((Py_ssize_t)tk[i].nawaited_by), *name = text(tk[i].name);
        PyObject *t = NULL;
        if (frames != NULL && by != NULL && name != NULL) {
            for (k = 0; k < tk[i].nawaited_by; k++)
                PyTuple_SetItem(by, (Py_ssize_t)k,
                                PyLong_FromUnsignedLongLong(tk[i].awaited_by[k]));
            t = Py_BuildValue("(KOliOO)", (unsigned long long)tk[i].id, name,
                              (long)tk[i].thread, tk[i].running, frames, by);
        }
        Py_XDECREF(frames);
        Py_XDECREF(by);
        Py_XDECREF(name);
        if (t == NULL) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SetItem(list, (Py_ssize_t)i, t);
    }
    return list;
}

static PyObject *reader_stats(PyObject *self, PyObject *unused)
{
    reader_t *rd = (reader_t *)self;
    remora_stats_t st;
    remora_cache_stats_t cs;

    (void)unused;
    if (!ready(rd))
        return NULL;
    remora_get_stats(rd->r, &st);
    remora_get_cache_stats(rd->r, &cs);
    return Py_BuildValue("{sKsKsKsKsKsKsKsKsKsKsKsKsKsKsKsKsK}",
                         "reads", (unsigned long long)st.reads,
                         "thread_samples", (unsigned long long)st.thread_samples,
                         "reused", (unsigned long long)st.reused,
                         "partial", (unsigned long long)st.partial,
                         "syscalls", (unsigned long long)st.syscalls,
                         "bytes", (unsigned long long)st.bytes,
                         "threads", (unsigned long long)cs.threads,
                         "threads_kept", (unsigned long long)cs.threads_kept,
                         "frames", (unsigned long long)cs.frames,
                         "frames_kept", (unsigned long long)cs.frames_kept,
                         "code_hits", (unsigned long long)cs.code_hits,
                         "code_misses", (unsigned long long)cs.code_misses,
                         "code_stale", (unsigned long long)cs.code_stale,
                         "vectored", (unsigned long long)cs.vectored,
                         "vectored_ok", (unsigned long long)cs.vectored_ok,
                         "segments", (unsigned long long)cs.segments,
                         "segments_done", (unsigned long long)cs.segments_done);
}

static PyObject *reader_python(PyObject *self, PyObject *unused)
{
    reader_t *rd = (reader_t *)self;

    (void)unused;
    if (!ready(rd))
        return NULL;
    return Py_BuildValue("(si)", remora_python_version(rd->r), remora_python_minor(rd->r));
}

static PyObject *reader_close(PyObject *self, PyObject *unused)
{
    reader_t *rd = (reader_t *)self;

    (void)unused;
    fc_clear(rd);
    trace_clear(rd);
    remora_close(rd->r);
    rd->r = NULL;
    Py_RETURN_NONE;
}

/* ---- sampling (remora_sample) --------------------------------------------------------- */

/* A sampled frame as the tuple read() gives: (file, function, line, end_line, column,
 * end_column, opcode or None, kind). */
static PyObject *sample_frame(const remora_frame_t *f)
{
    PyObject *file = text(f->file), *func = text(f->function), *t = NULL;

    if (file != NULL && func != NULL)
        t = Py_BuildValue("(OOiiiiOi)", file, func, f->line, f->end_line, f->column,
                          f->end_column, Py_None, f->kind);
    Py_XDECREF(file);
    Py_XDECREF(func);
    return t;
}

/* The run's state: the callback, the thread state saved while libremora samples (the
 * GIL let go between samples), and whether the callback raised. */
typedef struct {
    PyObject *cb;
    PyThreadState *ts;
    int raised;
} sample_ctx_t;

/* Each thread sample: cb(round, time_ns, native_id, status, name, partial, kernel,
 * frames) with the GIL held; a true result or an exception stops the run. */
static int on_sample(void *ctx, const remora_sample_t *s)
{
    sample_ctx_t *c = ctx;
    PyObject *frames, *res = NULL, *name;
    int stop = 1;
    size_t k;

    PyEval_RestoreThread(c->ts);
    frames = PyList_New((Py_ssize_t)s->nframes);
    name = text(s->thread_name);
    for (k = 0; frames != NULL && k < s->nframes; k++) {
        PyObject *f = sample_frame(&s->frames[k]);
        if (f == NULL) {
            Py_CLEAR(frames);
            break;
        }
        PyList_SetItem(frames, (Py_ssize_t)k, f);
    }
    if (frames != NULL && name != NULL)
        res = PyObject_CallFunction(c->cb, "KLlIOiiO", (unsigned long long)s->round,
                                    (long long)s->time_ns, (long)s->native_id, s->status, name,
                                    s->partial, s->kernel, frames);
    Py_XDECREF(frames);
    Py_XDECREF(name);
    if (res == NULL) {
        c->raised = 1;
    } else {
        stop = PyObject_IsTrue(res);
        if (stop < 0) {
            c->raised = 1;
            stop = 1;
        }
        Py_DECREF(res);
    }
    c->ts = PyEval_SaveThread();
    return stop;
}

/* sample(callback, rate=100.0, duration=0.0, max_rounds=0, mode=0, engine=0, idle=False,
 *        gc=True, opcodes=False, asyncio=False, blocking=False) -> (engine, why_not) */
static PyObject *reader_sample(PyObject *self, PyObject *args, PyObject *kw)
{
    static char *names[] = { "callback", "rate", "duration", "max_rounds", "mode", "engine",
                             "idle", "gc", "opcodes", "asyncio", "blocking", NULL };
    reader_t *rd = (reader_t *)self;
    remora_sample_opts_t o;
    sample_ctx_t c;
    unsigned long long max_rounds = 0;
    const char *engine, *why_not;
    int err;

    if (!ready(rd))
        return NULL;
    remora_sample_opts_init(&o);
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|ddKiippppp", names, &c.cb, &o.rate_hz,
                                     &o.duration_s, &max_rounds, &o.mode, &o.engine, &o.idle,
                                     &o.gc, &o.opcodes, &o.async, &o.blocking))
        return NULL;
    if (!PyCallable_Check(c.cb)) {
        PyErr_SetString(PyExc_TypeError, "callback must be callable");
        return NULL;
    }
    o.max_rounds = max_rounds;
    c.raised = 0;
    Py_INCREF(c.cb);
    c.ts = PyEval_SaveThread();
    err = remora_sample(rd->r, &o, on_sample, &c);
    PyEval_RestoreThread(c.ts);
    Py_DECREF(c.cb);
    if (c.raised)
        return NULL;
    if (err != REMORA_OK)
        return fail(err, remora_last_error(rd->r));
    engine = remora_engine(rd->r, &why_not);
    return Py_BuildValue("(ss)", engine != NULL ? engine : "", why_not);
}

/* sample_stop(): ends the sample() under way (from another thread). */
static PyObject *reader_sample_stop(PyObject *self, PyObject *unused)
{
    reader_t *rd = (reader_t *)self;

    (void)unused;
    if (rd->r != NULL)
        remora_sample_stop(rd->r);
    Py_RETURN_NONE;
}

/* sample_stats() -> dict of the last sample()'s counts and its engine. */
static PyObject *reader_sample_stats(PyObject *self, PyObject *unused)
{
    reader_t *rd = (reader_t *)self;
    remora_sample_stats_t st;
    const char *engine, *why_not;

    (void)unused;
    if (!ready(rd))
        return NULL;
    remora_get_sample_stats(rd->r, &st);
    engine = remora_engine(rd->r, &why_not);
    return Py_BuildValue("{sKsKsKsKsKsLszss}", "rounds", (unsigned long long)st.rounds,
                         "samples", (unsigned long long)st.samples,
                         "late", (unsigned long long)st.late,
                         "errors", (unsigned long long)st.errors,
                         "kernel", (unsigned long long)st.kernel,
                         "duration_ns", (long long)st.duration_ns, "engine", engine,
                         "why_not", why_not);
}

static PyMethodDef reader_methods[] = {
    { "read", reader_read, METH_VARARGS,
      "read(factory=None): every selected thread's stack; each frame a tuple, or what\n"
      "factory(tuple) made of it (once for each distinct frame)." },
    { "configure", reader_configure, METH_VARARGS,
      "configure(factory, InterpreterInfo, ThreadInfo, plain, status_or, native_mark,\n"
      "max_frames): what trace() makes its result of." },
    { "trace", reader_trace, METH_NOARGS,
      "trace(): get_stack_trace()'s result, the unchanged outer frames of each thread the\n"
      "last call's objects; or the reading's rows (a tuple) when the caller must look." },
    { "tasks", reader_tasks, METH_NOARGS, "Every asyncio task, as tuples." },
    { "stats", reader_stats, METH_NOARGS, "The handle's statistics, a dict." },
    { "python", reader_python, METH_NOARGS, "(version, minor) of the target." },
    { "close", reader_close, METH_NOARGS, "Let go of the target." },
    { "sample", (PyCFunction)(void (*)(void))reader_sample, METH_VARARGS | METH_KEYWORDS,
      "sample(callback, rate=100.0, duration=0.0, max_rounds=0, mode=0, engine=0, idle=False,\n"
      "gc=True, opcodes=False, asyncio=False, blocking=False): libremora's sampling loop;\n"
      "callback(round, time_ns, native_id, status, name, partial, kernel, frames) for each\n"
      "thread sample (a true result stops it). Returns (engine, why_not)." },
    { "sample_stop", reader_sample_stop, METH_NOARGS, "End the sample() under way." },
    { "sample_stats", reader_sample_stats, METH_NOARGS, "The last sample()'s counts, a dict." },
    { NULL, NULL, 0, NULL }
};

static PyType_Slot reader_slots[] = {
    { Py_tp_init, (void *)reader_init },
    { Py_tp_dealloc, (void *)reader_dealloc },
    { Py_tp_methods, reader_methods },
    { Py_tp_new, (void *)PyType_GenericNew },
    { Py_tp_doc, (void *)"Reader(pid, flags=0, tries=64): libremora's handle on a process." },
    { 0, NULL }
};

static PyType_Spec reader_spec = {
    "remora._remora.Reader", sizeof(reader_t), 0, Py_TPFLAGS_DEFAULT, reader_slots
};

/* ---- the module ------------------------------------------------------------------------ */

static PyObject *mod_strerror(PyObject *self, PyObject *arg)
{
    long code = PyLong_AsLong(arg);

    (void)self;
    if (code == -1 && PyErr_Occurred())
        return NULL;
    return PyUnicode_FromString(remora_strerror((int)code));
}

static PyMethodDef module_methods[] = {
    { "strerror", mod_strerror, METH_O, "The name of a REMORA_E* code." },
    { NULL, NULL, 0, NULL }
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "remora._remora", "libremora for Python (remora's C half).", -1,
    module_methods, NULL, NULL, NULL, NULL
};

static int add_int(PyObject *m, const char *name, long v)
{
    PyObject *o = PyLong_FromLong(v);
    int rc;

    if (o == NULL)
        return -1;
    rc = PyModule_AddObject(m, name, o);
    if (rc < 0)
        Py_DECREF(o);
    return rc;
}

PyMODINIT_FUNC PyInit__remora(void);
PyMODINIT_FUNC PyInit__remora(void)
{
    static const struct { const char *name; long value; } ints[] = {
        { "OK", REMORA_OK }, { "EUSAGE", REMORA_EUSAGE }, { "ENOPROC", REMORA_ENOPROC },
        { "EPERM", REMORA_EPERM }, { "ENOTPY", REMORA_ENOTPY }, { "EVERSION", REMORA_EVERSION },
        { "EFAULT", REMORA_EFAULT }, { "ECORRUPT", REMORA_ECORRUPT }, { "ENOMEM", REMORA_ENOMEM },
        { "EIO", REMORA_EIO },
        { "MAIN_THREAD", REMORA_MAIN_THREAD }, { "ACTIVE", REMORA_ACTIVE },
        { "ONLY_GIL", REMORA_ONLY_GIL }, { "ONLY_CPU", REMORA_ONLY_CPU },
        { "ONLY_EXCEPTION", REMORA_ONLY_EXCEPTION }, { "STATUS", REMORA_STATUS },
        { "THREAD_NAMES", REMORA_THREAD_NAMES }, { "GC", REMORA_GC },
        { "OPCODES", REMORA_OPCODES }, { "NATIVE", REMORA_NATIVE },
        { "RUNNING_TASK", REMORA_RUNNING_TASK }, { "FRAME_ANCHOR", REMORA_FRAME_ANCHOR },
        { "FRAME_PYTHON", REMORA_FRAME_PYTHON }, { "FRAME_NATIVE", REMORA_FRAME_NATIVE },
        { "FRAME_GC", REMORA_FRAME_GC },
        { "ENTRY_MARKS", REMORA_ENTRY_MARKS }, { "FRAME_ENTRY", REMORA_FRAME_ENTRY },
        { "THREAD_HAS_GIL", REMORA_THREAD_HAS_GIL }, { "THREAD_ON_CPU", REMORA_THREAD_ON_CPU },
        { "THREAD_UNKNOWN", REMORA_THREAD_UNKNOWN },
        { "THREAD_GIL_REQUESTED", REMORA_THREAD_GIL_REQUESTED },
        { "THREAD_HAS_EXCEPTION", REMORA_THREAD_HAS_EXCEPTION },
        { "THREAD_MAIN", REMORA_THREAD_MAIN },
        { "MODE_WALL", REMORA_MODE_WALL }, { "MODE_CPU", REMORA_MODE_CPU },
        { "MODE_GIL", REMORA_MODE_GIL }, { "MODE_EXCEPTION", REMORA_MODE_EXCEPTION },
        { "ENGINE_AUTO", REMORA_ENGINE_AUTO }, { "ENGINE_KERNEL", REMORA_ENGINE_KERNEL },
        { "ENGINE_USER", REMORA_ENGINE_USER },
    };
    PyObject *m = PyModule_Create(&module_def), *reader;
    size_t i;

    if (m == NULL)
        return NULL;
    if (own_pid == 0) {
        own_pid_renew();
        pthread_atfork(NULL, NULL, own_pid_renew);
    }
    for (i = 0; i < sizeof ints / sizeof ints[0]; i++)
        if (add_int(m, ints[i].name, ints[i].value) < 0)
            goto error;
    if (PyModule_AddStringConstant(m, "version", remora_version()) < 0)
        goto error;
    error_type = PyErr_NewException("remora._remora.Error", PyExc_Exception, NULL);
    if (error_type == NULL)
        goto error;
    Py_INCREF(error_type);
    if (PyModule_AddObject(m, "Error", error_type) < 0) {
        Py_DECREF(error_type);
        goto error;
    }
    if ((reader = PyType_FromSpec(&reader_spec)) == NULL)
        goto error;
    if (PyModule_AddObject(m, "Reader", reader) < 0) {
        Py_DECREF(reader);
        goto error;
    }
    return m;
error:
    Py_DECREF(m);
    return NULL;
}
