/* fsmem.search._native: the document part of the score and a cold build's cutting of rows and words, in C
   (Python twins: fsmem.search.postings, fsmem.format.rows, fsmem.search.analyzer).

   `term_parts` decodes one term's posting rows (gaps, counts) into the live documents' positions and the
   term's BM25 part of each; `best_documents` adds a query's parts per document in the query's order and
   picks the best `limit`, ties by position. Every float is the one the Python twin computes: the same
   operations in the same order on IEEE doubles (built with -ffp-contract=off and without fast-math, so no
   multiply-add is fused), the same libm log. tests/test_postings.py holds the two equal.

   `plain_rows` cuts one section of a plain body into rows, as fsmem.format.rows.plain_rows (its twin) does
   with a regex, on ASCII text, and `plain_sections` a whole plain body into its sections (their headings,
   subject, whether superseded) and their rows, as fsmem.format.rows.plain_sections does; `stemmed_texts` cuts a file's rows' ASCII texts into words and looks their
   stems up, as fsmem.search.analyzer.stemmed_texts does with a translation and a split, remembering the
   words it found in the table by their bytes (a `WordMemo`, which an Analyzer holds beside its table) and
   counting stems by object, so that a word costs no str of its own. tests/test_native.py holds each twin equal.

   `pool_relevance` adds up each candidate row's relevance from its parts, as fsmem.search.scoring's twin does
   (tests/test_native.py holds them equal to the bit).

   `fsmem_row_score`, an FTS5 auxiliary function registered by loading this file as a SQLite extension, is the
   row part's score of one row, bm25()'s arithmetic (twin: fsmem.search.rowscores._Scores; tests/test_rowscores.py
   holds both against bm25()). Loaded with its other entry point, `sqlite3_fsmemcut_init`, it cuts a cold build's
   raw rows as they are written (fsmem.search.raw_rows; twin: the analyzer, tests/test_raw_rows.py). */

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static PyObject *array_type; /* array.array */

/* Raise fsmem.search.postings.IndexDamaged (imported when first needed: postings imports this module). */
static PyObject *
damaged(const char *why)
{
    PyObject *module = PyImport_ImportModule("fsmem.search.postings");
    if (module == NULL)
        return NULL;
    PyObject *kind = PyObject_GetAttrString(module, "IndexDamaged");
    Py_DECREF(module);
    if (kind == NULL)
        return NULL;
    PyErr_SetString(kind, why);
    Py_DECREF(kind);
    return NULL;
}

/* A new array.array of `code` holding `size` bytes copied from `data`. */
static PyObject *
new_array(const char *code, const void *data, Py_ssize_t size)
{
    PyObject *bytes = PyBytes_FromStringAndSize((const char *)data, size);
    if (bytes == NULL)
        return NULL;
    PyObject *found = PyObject_CallFunction(array_type, "sO", code, bytes);
    Py_DECREF(bytes);
    return found;
}

/* A new array.array of `count` doubles, each 0.0, and `*view` its writable buffer (the caller releases it): a
   dense term's parts are written in place, where a buffer of their own was copied twice (a bytes object, then
   the array), at 100k files 0.3 ms of a new word's 0.9. */
static PyObject *
zeroed_doubles(Py_ssize_t count, Py_buffer *view)
{
    PyObject *one = PyObject_CallFunction(array_type, "s(d)", "d", 0.0);
    if (one == NULL)
        return NULL;
    PyObject *found = PySequence_Repeat(one, count);
    Py_DECREF(one);
    if (found == NULL)
        return NULL;
    if (PyObject_GetBuffer(found, view, PyBUF_WRITABLE) < 0 || view->len != count * (Py_ssize_t)sizeof(double)) {
        if (view->obj != NULL)
            PyBuffer_Release(view);
        Py_DECREF(found);
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "an array of doubles of another size");
        return NULL;
    }
    return found;
}

/* A buffer of `count` values of one array code ('i', 'q' or 'd'), or an error. */
static int
typed_buffer(PyObject *obj, Py_buffer *view, char code, Py_ssize_t itemsize, const char *name)
{
    if (PyObject_GetBuffer(obj, view, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) < 0)
        return -1;
    const char *format = view->format == NULL ? "B" : view->format;
    if (format[0] == '@' || format[0] == '=')
        format++;
    if (format[0] != code || format[1] != '\0' || view->itemsize != itemsize) {
        PyBuffer_Release(view);
        PyErr_Format(PyExc_TypeError, "%s: an array of '%c' values was expected", name, code);
        return -1;
    }
    return 0;
}

typedef struct {
    int *positions;
    uint32_t *freqs;
    Py_ssize_t len, cap;
} Found;

static int
found_reserve(Found *found, Py_ssize_t more)
{
    if (found->len + more <= found->cap)
        return 0;
    Py_ssize_t cap = found->cap ? found->cap : 256;
    while (cap < found->len + more)
        cap *= 2;
    int *positions = PyMem_Realloc(found->positions, (size_t)cap * sizeof(int));
    if (positions == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    found->positions = positions;
    uint32_t *freqs = PyMem_Realloc(found->freqs, (size_t)cap * sizeof(uint32_t));
    if (freqs == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    found->freqs = freqs;
    found->cap = cap;
    return 0;
}

/* One row's documents: its ids from the gaps, each live one's position (by a forward search of the live
   ids from `*cursor`: ids only grow along a term's rows) and its count. Checks what the Python twin
   checks (fsmem.search.postings._decode and _Decoded.term), raising IndexDamaged where it does. */
static int
decode_row(PyObject *row, int shift, const int64_t *live, Py_ssize_t rows, Py_ssize_t *cursor, int64_t *last,
           Found *found)
{
    if (!PyTuple_Check(row) || PyTuple_GET_SIZE(row) != 4) {
        PyErr_SetString(PyExc_TypeError, "a posting row is (chunk, n, docs, counts)");
        return -1;
    }
    PyObject *chunk_obj = PyTuple_GET_ITEM(row, 0), *n_obj = PyTuple_GET_ITEM(row, 1);
    PyObject *docs_obj = PyTuple_GET_ITEM(row, 2), *counts_obj = PyTuple_GET_ITEM(row, 3);
    if (!PyLong_CheckExact(chunk_obj) || !PyLong_CheckExact(n_obj) || !PyBytes_CheckExact(docs_obj) ||
        !PyBytes_CheckExact(counts_obj)) {
        damaged("a posting row of the wrong types");
        return -1;
    }
    int overflow;
    long long chunk = PyLong_AsLongLongAndOverflow(chunk_obj, &overflow);
    if (chunk == -1 && PyErr_Occurred())
        return -1;
    if (overflow || chunk < 0 || chunk > (INT64_MAX >> shift)) {
        damaged("a posting row's range is out of bounds");
        return -1;
    }
    long long n = PyLong_AsLongLongAndOverflow(n_obj, &overflow);
    if (n == -1 && PyErr_Occurred())
        return -1;
    if (overflow || n < 1) {
        damaged("a posting row of no documents");
        return -1;
    }
    const unsigned char *docs = (const unsigned char *)PyBytes_AS_STRING(docs_obj);
    Py_ssize_t docs_len = PyBytes_GET_SIZE(docs_obj);
    const unsigned char *counts = (const unsigned char *)PyBytes_AS_STRING(counts_obj);
    Py_ssize_t counts_len = PyBytes_GET_SIZE(counts_obj);
    if (docs_len < n) {
        damaged("a posting row's gaps do not match its count");
        return -1;
    }
    Py_ssize_t large = docs_len - (Py_ssize_t)n;
    if (large % 4) {
        damaged("a posting row's gaps do not match its count");
        return -1;
    }
    large /= 4;
    Py_ssize_t marks = 0;
    for (Py_ssize_t i = 0; i < n; i++)
        marks += docs[i] == 0;
    if (marks != large) {
        damaged("a posting row's large gaps do not match its marks");
        return -1;
    }
    for (Py_ssize_t j = 0; j < large; j++) {
        uint32_t gap;
        memcpy(&gap, docs + n + 4 * j, 4);
        if (gap <= 0xFF) {
            damaged("a posting row's large gaps do not match its marks");
            return -1;
        }
    }
    int width = counts_len % n ? 0 : (int)(counts_len / n);
    if (width != 1 && width != 2 && width != 4) {
        damaged("a posting row does not match its count");
        return -1;
    }
    if (found_reserve(found, (Py_ssize_t)n) < 0)
        return -1;
    int64_t id = (int64_t)((chunk << shift) - 1);
    Py_ssize_t at = *cursor, next_large = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        uint32_t gap = docs[i];
        if (gap == 0) {
            memcpy(&gap, docs + n + 4 * next_large, 4);
            next_large++;
        }
        if (id > INT64_MAX - (int64_t)gap) {
            damaged("a posting row's document ids are out of bounds");
            return -1;
        }
        id += gap;
        if (i == 0 && id <= *last) {
            damaged("a term's posting rows overlap");
            return -1;
        }
        /* the first live id at `at` or after that is not below `id`: galloping, then binary */
        if (at < rows && live[at] < id) {
            Py_ssize_t step = 1, lo = at, hi = at + 1;
            while (hi < rows && live[hi] < id) {
                lo = hi;
                step *= 2;
                hi = lo + step;
            }
            if (hi > rows)
                hi = rows;
            while (lo + 1 < hi) { /* live[lo] < id; live[hi] >= id or hi == rows */
                Py_ssize_t mid = lo + (hi - lo) / 2;
                if (live[mid] < id)
                    lo = mid;
                else
                    hi = mid;
            }
            at = hi;
        }
        if (at < rows && live[at] == id) {
            uint32_t f;
            if (width == 1)
                f = counts[i];
            else if (width == 2) {
                uint16_t f2;
                memcpy(&f2, counts + 2 * i, 2);
                f = f2;
            }
            else
                memcpy(&f, counts + 4 * i, 4);
            found->positions[found->len] = (int)at;
            found->freqs[found->len] = f;
            found->len++;
        }
    }
    *cursor = at;
    *last = id;
    return 0;
}

PyDoc_STRVAR(term_parts_doc,
             "term_parts(rows, ids, norm, shift, k, dense) -> (hits, positions, parts, dense_parts)\n\n"
             "One term's posting rows (chunk, n, docs, counts), in range order, against the live documents' ids\n"
             "('q', ascending) and length normalisers ('d'): how many live documents hold the term, and its BM25\n"
             "part of each, idf * ((f * k) / (f + norm)): by position ('i', 'd') for a rare term, or one value per\n"
             "document (dense_parts, 'd') when hits * dense >= len(ids).");

static PyObject *
term_parts(PyObject *self, PyObject *args)
{
    PyObject *rows_obj, *ids_obj, *norm_obj;
    int shift;
    double k;
    long long dense_every;
    if (!PyArg_ParseTuple(args, "OOOidL", &rows_obj, &ids_obj, &norm_obj, &shift, &k, &dense_every))
        return NULL;
    if (shift < 0 || shift > 62) {
        PyErr_SetString(PyExc_ValueError, "shift out of range");
        return NULL;
    }
    Py_buffer ids_view, norm_view;
    if (typed_buffer(ids_obj, &ids_view, 'q', 8, "ids") < 0)
        return NULL;
    if (typed_buffer(norm_obj, &norm_view, 'd', 8, "norm") < 0) {
        PyBuffer_Release(&ids_view);
        return NULL;
    }
    PyObject *result = NULL, *seq = NULL;
    Found found = {NULL, NULL, 0, 0};
    double *dense = NULL;
    Py_ssize_t rows = ids_view.len / 8;
    const int64_t *live = ids_view.buf;
    const double *norm = norm_view.buf;
    if (norm_view.len / 8 != rows || rows > INT_MAX) {
        PyErr_SetString(PyExc_ValueError, "ids and norm differ in length");
        goto done;
    }
    seq = PySequence_Fast(rows_obj, "rows must be a sequence");
    if (seq == NULL)
        goto done;
    Py_ssize_t cursor = 0;
    int64_t last = INT64_MIN;
    for (Py_ssize_t r = 0; r < PySequence_Fast_GET_SIZE(seq); r++) {
        if (decode_row(PySequence_Fast_ITEMS(seq)[r], shift, live, rows, &cursor, &last, &found) < 0)
            goto done;
    }
    Py_ssize_t hits = found.len;
    double idf = log(((double)(rows - hits) + 0.5) / ((double)hits + 0.5));
    if (idf <= 0.0)
        idf = 1e-6; /* FTS5's floor, for a term in half the documents or more */
    if ((long long)hits * dense_every >= (long long)rows) {
        Py_buffer view = {NULL, NULL};
        PyObject *values = zeroed_doubles(rows, &view);
        if (values == NULL)
            goto done;
        double *parts = view.buf;
        for (Py_ssize_t i = 0; i < hits; i++) {
            double f = (double)found.freqs[i];
            int at = found.positions[i];
            parts[at] = idf * ((f * k) / (f + norm[at]));
        }
        PyBuffer_Release(&view);
        PyObject *empty_positions = new_array("i", NULL, 0), *empty_parts = new_array("d", NULL, 0);
        if (empty_positions && empty_parts)
            result = Py_BuildValue("nOOO", hits, empty_positions, empty_parts, values);
        Py_XDECREF(empty_positions);
        Py_XDECREF(empty_parts);
        Py_XDECREF(values);
    }
    else {
        dense = PyMem_Malloc(hits ? (size_t)hits * sizeof(double) : 1);
        if (dense == NULL) {
            PyErr_NoMemory();
            goto done;
        }
        for (Py_ssize_t i = 0; i < hits; i++) {
            double f = (double)found.freqs[i];
            dense[i] = idf * ((f * k) / (f + norm[found.positions[i]]));
        }
        PyObject *positions = new_array("i", found.positions, hits * (Py_ssize_t)sizeof(int));
        PyObject *parts = new_array("d", dense, hits * (Py_ssize_t)sizeof(double));
        if (positions && parts)
            result = Py_BuildValue("nOOO", hits, positions, parts, Py_None);
        Py_XDECREF(positions);
        Py_XDECREF(parts);
    }
done:
    PyMem_Free(dense);
    PyMem_Free(found.positions);
    PyMem_Free(found.freqs);
    Py_XDECREF(seq);
    PyBuffer_Release(&ids_view);
    PyBuffer_Release(&norm_view);
    return result;
}

/* `a` ranks before `b`: a higher score, or the same and an earlier position. */
static inline int
before(const double *scores, int a, int b)
{
    return scores[a] > scores[b] || (scores[a] == scores[b] && a < b);
}

/* The heap's root is its worst: the one every other ranks before. */
static void
sift_down(int *heap, Py_ssize_t size, Py_ssize_t i, const double *scores)
{
    for (;;) {
        Py_ssize_t child = 2 * i + 1, worst = i;
        if (child < size && before(scores, heap[worst], heap[child]))
            worst = child;
        if (child + 1 < size && before(scores, heap[worst], heap[child + 1]))
            worst = child + 1;
        if (worst == i)
            return;
        int swap = heap[i];
        heap[i] = heap[worst];
        heap[worst] = swap;
        i = worst;
    }
}

static void
sift_up(int *heap, Py_ssize_t i, const double *scores)
{
    while (i > 0) {
        Py_ssize_t parent = (i - 1) / 2;
        if (!before(scores, heap[parent], heap[i]))
            return;
        int swap = heap[i];
        heap[i] = heap[parent];
        heap[parent] = swap;
        i = parent;
    }
}

/* Position `at` into a heap of the best `want` positions so far (its root the worst of them). */
static void
offer(int *heap, Py_ssize_t *size, Py_ssize_t want, int at, const double *scores)
{
    if (*size < want) {
        heap[*size] = at;
        sift_up(heap, (*size)++, scores);
    }
    else if (before(scores, at, heap[0])) {
        heap[0] = at;
        sift_down(heap, *size, 0, scores);
    }
}

/* A document's score and position, as the cut's sort orders them: best_documents' order. */
typedef struct {
    double score;
    int at;
} Scored;

static int
scored_order(const void *a, const void *b)
{
    const Scored *x = a, *y = b;
    if (x->score != y->score)
        return x->score > y->score ? -1 : 1;
    return (x->at > y->at) - (x->at < y->at);
}

static inline int
scored_before(const Scored *x, const Scored *y)
{
    return x->score > y->score || (x->score == y->score && x->at < y->at);
}

/* Reorders `items` so that its first `want` are the `want` best (in no order) and the `want`-th best is at
   `want - 1`: quickselect, Hoare's partition about a pivot item (positions differ, so the order is strict). */
static void
best_ahead(Scored *items, Py_ssize_t count, Py_ssize_t want)
{
    Py_ssize_t lo = 0, hi = count - 1, nth = want - 1;
    while (lo < hi) {
        Scored pivot = items[lo + (hi - lo) / 2];
        Py_ssize_t i = lo, j = hi;
        while (i <= j) {
            while (scored_before(&items[i], &pivot))
                i++;
            while (scored_before(&pivot, &items[j]))
                j--;
            if (i <= j) {
                Scored swap = items[i];
                items[i++] = items[j];
                items[j--] = swap;
            }
        }
        if (nth <= j)
            hi = j;
        else if (nth >= i)
            lo = i;
        else
            return;
    }
}

#define SAMPLE_EVERY 16 /* fsmem.search.postings.SAMPLE_EVERY */

/* A score every one of the `want` best of `scores` (those not `zero`) reaches, where at least `want` reach
   it: a cut from every SAMPLE_EVERY-th score, low enough that some 2 * `want` reach it (best_first's, in
   fsmem.search.postings). Sets `*cutting` to whether it holds; then only the scores reaching it need the
   heap, which is most of the time of 3,000 of 100,000 documents. */
static double
sampled_cut(const double *scores, Py_ssize_t rows, Py_ssize_t want, int *cutting)
{
    *cutting = 0;
    if (want <= 0 || rows < 4 * want || rows < SAMPLE_EVERY)
        return 0.0;
    Py_ssize_t taken = (rows + SAMPLE_EVERY - 1) / SAMPLE_EVERY, nth = 2 * want / SAMPLE_EVERY;
    Scored *sample = PyMem_Malloc((size_t)taken * sizeof(Scored));
    if (sample == NULL)
        return 0.0; /* no cut: the heap takes every score */
    for (Py_ssize_t j = 0; j < taken; j++) {
        sample[j].score = scores[j * SAMPLE_EVERY];
        sample[j].at = (int)j;
    }
    if (nth >= taken)
        nth = taken - 1;
    best_ahead(sample, taken, nth + 1);
    double cut = sample[nth].score; /* the nth largest of the sample's scores, as a descending sort places it */
    PyMem_Free(sample);
    Py_ssize_t reach = 0;
    for (Py_ssize_t i = 0; i < rows; i++)
        reach += scores[i] >= cut && scores[i] != 0.0;
    *cutting = reach >= want; /* then the want-th best reaches it, and so every one before it */
    return cut;
}

PyDoc_STRVAR(best_documents_doc,
             "best_documents(terms, rows, limit, sparse) -> (positions, scores)\n\n"
             "`terms`: per phrase in the query's order (positions 'i', parts 'd', dense 'd' or None), as term_parts\n"
             "gives them. Each document's score is its parts added in that order from 0.0; the `limit` best\n"
             "documents, by score descending then position: among the documents some rare term's position names\n"
             "when `sparse` (dense terms then add nothing), else among those scoring more than 0.0.");

static PyObject *
best_documents(PyObject *self, PyObject *args)
{
    PyObject *terms_obj;
    Py_ssize_t rows, limit;
    int sparse;
    if (!PyArg_ParseTuple(args, "Onnp", &terms_obj, &rows, &limit, &sparse))
        return NULL;
    if (rows < 0 || rows > INT_MAX) {
        PyErr_SetString(PyExc_ValueError, "rows out of range");
        return NULL;
    }
    PyObject *seq = PySequence_Fast(terms_obj, "terms must be a sequence");
    if (seq == NULL)
        return NULL;
    PyObject *result = NULL;
    double *scores = PyMem_Calloc(rows ? (size_t)rows : 1, sizeof(double));
    unsigned char *touched = sparse ? PyMem_Calloc(rows ? (size_t)rows : 1, 1) : NULL;
    int *heap = NULL;
    if (scores == NULL || (sparse && touched == NULL)) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t t = 0; t < PySequence_Fast_GET_SIZE(seq); t++) {
        PyObject *term = PySequence_Fast_ITEMS(seq)[t];
        if (!PyTuple_Check(term) || PyTuple_GET_SIZE(term) != 3) {
            PyErr_SetString(PyExc_TypeError, "a term is (positions, parts, dense)");
            goto done;
        }
        PyObject *dense_obj = PyTuple_GET_ITEM(term, 2);
        Py_buffer a, b;
        if (dense_obj != Py_None) {
            if (sparse)
                continue; /* the twin adds a dense term's (empty) positions only */
            if (typed_buffer(dense_obj, &a, 'd', 8, "dense") < 0)
                goto done;
            if (a.len / 8 != rows) {
                PyBuffer_Release(&a);
                PyErr_SetString(PyExc_ValueError, "a dense term of another length");
                goto done;
            }
            const double *values = a.buf;
            for (Py_ssize_t i = 0; i < rows; i++)
                scores[i] = scores[i] + values[i];
            PyBuffer_Release(&a);
            continue;
        }
        if (typed_buffer(PyTuple_GET_ITEM(term, 0), &a, 'i', sizeof(int), "positions") < 0)
            goto done;
        if (typed_buffer(PyTuple_GET_ITEM(term, 1), &b, 'd', 8, "parts") < 0) {
            PyBuffer_Release(&a);
            goto done;
        }
        Py_ssize_t count = a.len / (Py_ssize_t)sizeof(int);
        const int *positions = a.buf;
        const double *parts = b.buf;
        int bad = b.len / 8 != count;
        for (Py_ssize_t i = 0; i < count && !bad; i++) {
            int at = positions[i];
            if (at < 0 || at >= rows) {
                bad = 1;
                break;
            }
            if (sparse)
                touched[at] = 1;
            scores[at] = scores[at] + parts[i];
        }
        PyBuffer_Release(&a);
        PyBuffer_Release(&b);
        if (bad) {
            PyErr_SetString(PyExc_ValueError, "a term's positions and parts do not match the documents");
            goto done;
        }
    }
    Py_ssize_t want = limit < 0 ? 0 : limit < rows ? limit : rows, size = 0;
    heap = PyMem_Malloc(want ? (size_t)want * sizeof(int) : 1);
    if (heap == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    int cutting = 0;
    double cut = sparse ? 0.0 : sampled_cut(scores, rows, want, &cutting);
    if (cutting) { /* the scores reaching the cut, a few times `want`, sorted whole: most of the heap's work spared */
        Scored *reach = PyMem_Malloc((size_t)rows * sizeof(Scored));
        if (reach == NULL) {
            PyErr_NoMemory();
            goto done;
        }
        Py_ssize_t count = 0;
        for (Py_ssize_t i = 0; i < rows; i++)
            if (scores[i] != 0.0 && scores[i] >= cut) {
                reach[count].score = scores[i];
                reach[count++].at = (int)i;
            }
        if (want < count)
            best_ahead(reach, count, want);
        qsort(reach, (size_t)(want < count ? want : count), sizeof(Scored), scored_order);
        for (size = 0; size < want && size < count; size++)
            heap[size] = reach[size].at;
        PyMem_Free(reach);
    }
    else {
        for (Py_ssize_t i = 0; i < rows && want; i++) {
            if (sparse ? !touched[i] : scores[i] == 0.0)
                continue;
            offer(heap, &size, want, (int)i, scores);
        }
        for (Py_ssize_t end = size; end > 1; end--) { /* the worst left goes last: the heap best first */
            int at = heap[0];
            heap[0] = heap[end - 1];
            sift_down(heap, end - 1, 0, scores);
            heap[end - 1] = at;
        }
    }
    PyObject *positions = PyList_New(size), *values = PyList_New(size);
    if (positions == NULL || values == NULL) {
        Py_XDECREF(positions);
        Py_XDECREF(values);
        goto done;
    }
    for (Py_ssize_t n = 0; n < size; n++) {
        PyObject *p = PyLong_FromLong(heap[n]), *v = PyFloat_FromDouble(scores[heap[n]]);
        if (p == NULL || v == NULL) {
            Py_XDECREF(p);
            Py_XDECREF(v);
            Py_DECREF(positions);
            Py_DECREF(values);
            goto done;
        }
        PyList_SET_ITEM(positions, n, p);
        PyList_SET_ITEM(values, n, v);
    }
    result = PyTuple_Pack(2, positions, values);
    Py_DECREF(positions);
    Py_DECREF(values);
done:
    PyMem_Free(heap);
    PyMem_Free(touched);
    PyMem_Free(scores);
    Py_DECREF(seq);
    return result;
}


PyDoc_STRVAR(best_rows_doc,
             "best_rows(found, packed, flag, shift, limit) -> list\n\n"
             "`found`: the row part's (row id, score) of each matching row, a list of tuples in ascending row id\n"
             "order. Without the rows whose packed value has `flag` (`packed`: file id, row id >> shift, -> its rows'\n"
             "packed values, an array of 'H' or 'I' by ordinal; None: every row kept), the `limit` best of them, by\n"
             "score descending then row id: the very tuples, best first.");

/* The packed value of the row at `ordinal` of one file's rows (`bytes` bytes of native values of `itemsize`
   bytes, 2 or 4: an array of 'H' or 'I'), or -1 past its end (or for another item size). */
static long long
packed_value(const void *rows, Py_ssize_t bytes, int itemsize, long long ordinal)
{
    if ((itemsize != 2 && itemsize != 4) || ordinal < 0 || ordinal >= bytes / itemsize)
        return -1;
    if (itemsize == 2) {
        uint16_t value;
        memcpy(&value, (const unsigned char *)rows + ordinal * 2, 2);
        return value;
    }
    uint32_t value;
    memcpy(&value, (const unsigned char *)rows + ordinal * 4, 4);
    return value;
}

static PyObject *
best_rows(PyObject *self, PyObject *args)
{
    PyObject *found, *packed;
    long long flag;
    int shift;
    Py_ssize_t limit;
    if (!PyArg_ParseTuple(args, "O!OLin", &PyList_Type, &found, &packed, &flag, &shift, &limit))
        return NULL;
    if (packed != Py_None && !PyDict_Check(packed)) {
        PyErr_SetString(PyExc_TypeError, "packed: a dict or None");
        return NULL;
    }
    if (shift < 1 || shift > 62 || limit < 0) {
        PyErr_SetString(PyExc_ValueError, "shift or limit out of range");
        return NULL;
    }
    Py_ssize_t n = PyList_GET_SIZE(found), kept = 0, size = 0;
    if (n > INT_MAX) {
        PyErr_SetString(PyExc_ValueError, "too many rows");
        return NULL;
    }
    PyObject *result = NULL;
    int *heap = NULL, *index = PyMem_Malloc(n ? (size_t)n * sizeof(int) : 1);
    double *scores = PyMem_Malloc(n ? (size_t)n * sizeof(double) : 1);
    Py_buffer rows = {0};
    long long file = -1;
    if (index == NULL || scores == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    long long previous = LLONG_MIN, mask = (1LL << shift) - 1;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PyList_GET_ITEM(found, i);
        if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 2 || !PyLong_Check(PyTuple_GET_ITEM(item, 0)) ||
            !PyFloat_Check(PyTuple_GET_ITEM(item, 1))) {
            PyErr_SetString(PyExc_TypeError, "a row is (row id, score)");
            goto done;
        }
        long long rid = PyLong_AsLongLong(PyTuple_GET_ITEM(item, 0));
        if (rid == -1 && PyErr_Occurred())
            goto done;
        if (rid <= previous || rid < 0) {
            PyErr_SetString(PyExc_ValueError, "rows out of row id order");
            goto done;
        }
        previous = rid;
        if (packed != Py_None) {
            if (rid >> shift != file) {
                if (rows.obj != NULL)
                    PyBuffer_Release(&rows);
                file = rid >> shift;
                PyObject *key = PyLong_FromLongLong(file);
                if (key == NULL)
                    goto done;
                PyObject *array = PyDict_GetItemWithError(packed, key);
                Py_DECREF(key);
                if (array == NULL) {
                    if (!PyErr_Occurred())
                        PyErr_SetString(PyExc_KeyError, "a row of a file without packed rows");
                    goto done;
                }
                if (PyObject_GetBuffer(array, &rows, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) < 0)
                    goto done;
                const char *format = rows.format == NULL ? "B" : rows.format;
                if (!((format[0] == 'H' && rows.itemsize == 2) || (format[0] == 'I' && rows.itemsize == 4)) ||
                    format[1] != '\0') {
                    PyErr_SetString(PyExc_TypeError, "packed rows: an array of 'H' or 'I' values");
                    goto done;
                }
            }
            long long value = packed_value(rows.buf, rows.len, (int)rows.itemsize, rid & mask);
            if (value < 0) {
                PyErr_SetString(PyExc_IndexError, "a row past its file's packed rows");
                goto done;
            }
            if (value & flag)
                continue;
        }
        index[kept] = (int)i;
        scores[kept++] = PyFloat_AS_DOUBLE(PyTuple_GET_ITEM(item, 1));
    }
    Py_ssize_t want = limit < kept ? limit : kept;
    heap = PyMem_Malloc(want ? (size_t)want * sizeof(int) : 1);
    if (heap == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < kept && want; i++) /* positions in row id order: a tie goes to the earlier */
        offer(heap, &size, want, (int)i, scores);
    result = PyList_New(size);
    if (result == NULL)
        goto done;
    for (Py_ssize_t end = size; end > 0; end--) { /* the worst left goes last */
        int at = heap[0];
        heap[0] = heap[end - 1];
        sift_down(heap, end - 1, 0, scores);
        PyObject *item = PyList_GET_ITEM(found, index[at]);
        Py_INCREF(item);
        PyList_SET_ITEM(result, end - 1, item);
    }
done:
    if (rows.obj != NULL)
        PyBuffer_Release(&rows);
    PyMem_Free(heap);
    PyMem_Free(index);
    PyMem_Free(scores);
    return result;
}

/* The characters of `text`, an ASCII str (one byte each), or NULL with a ValueError. */
static const unsigned char *
ascii_of(PyObject *text, const char *name)
{
    if (!PyUnicode_IS_ASCII(text)) {
        PyErr_Format(PyExc_ValueError, "%s: ASCII text was expected", name);
        return NULL;
    }
    return PyUnicode_1BYTE_DATA(text);
}

/* stemmed_texts: Analyzer.texts' ASCII path (fsmem.search.analyzer._stemmed_texts is its twin). */

PyDoc_STRVAR(stemmed_texts_doc,
"stemmed_texts(joined, table, missing, counts, memo=None, /) -> list[str]\n\n"
"The terms of each NUL-separated part of `joined` (ASCII): its words (runs of ASCII letters and digits,\n"
"lowercased) mapped through `table` (word -> stem, \"\" for a word left out), a word not in it passed to\n"
"`missing`, which returns its stem; each part's non-empty stems joined by spaces. With `counts` (a dict),\n"
"each stem's occurrences are added to it, in the order they first occur. With `memo` (a WordMemo, given\n"
"with this table only), the words found in the table are remembered by their bytes: a word's stem in\n"
"`table` must then never change (the table only grows).");

static int
is_word_byte(unsigned char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

/* WordMemo: the words stemmed_texts found in one table, by their bytes: a memo of its lookups, which spares
   making and hashing a str for each word of a cold build (10k files: some 9 million words, a few thousand
   distinct). An Analyzer holds one beside its table. */
#define KNOWN_WORD_BYTES 48  /* a longer word is looked up in the table each time */
#define KNOWN_MOST (1 << 20) /* and no more words than this are remembered */

typedef struct {
    uint64_t hash; /* the word's (`stem_of`); 0: an empty slot */
    PyObject *word, *stem;
} Known;

typedef struct {
    PyObject_HEAD
    Known *slots;
    Py_ssize_t mask, used; /* mask: -1 while empty */
} WordMemo;

static PyObject *
word_memo_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    if (PyTuple_GET_SIZE(args) || (kwargs != NULL && PyDict_GET_SIZE(kwargs))) {
        PyErr_SetString(PyExc_TypeError, "WordMemo() takes no arguments");
        return NULL;
    }
    WordMemo *memo = (WordMemo *)type->tp_alloc(type, 0);
    if (memo != NULL)
        memo->mask = -1;
    return (PyObject *)memo;
}

static void
word_memo_dealloc(WordMemo *memo)
{
    for (Py_ssize_t i = 0; i <= memo->mask; i++) {
        Py_XDECREF(memo->slots[i].word);
        Py_XDECREF(memo->slots[i].stem);
    }
    PyMem_Free(memo->slots);
    Py_TYPE(memo)->tp_free((PyObject *)memo);
}

static PyTypeObject WordMemoType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "fsmem.search._native.WordMemo",
    .tp_basicsize = sizeof(WordMemo),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "The words stemmed_texts found in one table, remembered by their bytes (an Analyzer holds one).",
    .tp_new = word_memo_new,
    .tp_dealloc = (destructor)word_memo_dealloc,
};

/* The stem remembered for `word` (borrowed), or NULL. */
static PyObject *
known_stem(const WordMemo *memo, const unsigned char *word, Py_ssize_t size, uint64_t hash)
{
    for (Py_ssize_t at = (Py_ssize_t)hash & memo->mask; memo->mask >= 0; at = (at + 1) & memo->mask) {
        const Known *slot = &memo->slots[at];
        if (slot->hash == 0)
            return NULL;
        if (slot->hash == hash && PyUnicode_GET_LENGTH(slot->word) == size &&
            memcmp(PyUnicode_1BYTE_DATA(slot->word), word, (size_t)size) == 0)
            return slot->stem;
    }
    return NULL;
}

/* Remember `word` (an ASCII str) -> `stem`; 0, or -1 on a failed allocation. */
static int
known_add(WordMemo *memo, PyObject *word, PyObject *stem, uint64_t hash)
{
    if (memo->used >= KNOWN_MOST)
        return 0;
    if ((memo->used + 1) * 2 > memo->mask + 1) { /* at most half full */
        Py_ssize_t size = memo->mask < 0 ? 1024 : (memo->mask + 1) * 2;
        Known *grown = PyMem_Calloc((size_t)size, sizeof(Known));
        if (grown == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        for (Py_ssize_t i = 0; i <= memo->mask; i++) {
            if (memo->slots[i].hash == 0)
                continue;
            Py_ssize_t at = (Py_ssize_t)memo->slots[i].hash & (size - 1);
            while (grown[at].hash != 0)
                at = (at + 1) & (size - 1);
            grown[at] = memo->slots[i];
        }
        PyMem_Free(memo->slots);
        memo->slots = grown;
        memo->mask = size - 1;
    }
    Py_ssize_t at = (Py_ssize_t)hash & memo->mask;
    while (memo->slots[at].hash != 0)
        at = (at + 1) & memo->mask;
    memo->slots[at].hash = hash;
    memo->slots[at].word = Py_NewRef(word);
    memo->slots[at].stem = Py_NewRef(stem);
    memo->used++;
    return 0;
}

/* One call's stems counted by object (a stem's objects are few: the table's strings), to be added to
   `counts` at the end in the order they first occurred; an open-addressed set of their indices. */
typedef struct {
    PyObject **stems; /* strong refs, in the order first seen */
    Py_ssize_t *many, size, room;
    Py_ssize_t *slots, mask; /* -1: empty; else an index into stems */
} Tally;

static void
tally_free(Tally *tally)
{
    for (Py_ssize_t i = 0; i < tally->size; i++)
        Py_DECREF(tally->stems[i]);
    PyMem_Free(tally->stems);
    PyMem_Free(tally->many);
    PyMem_Free(tally->slots);
}

static Py_ssize_t
pointer_slot(const Tally *tally, PyObject *stem)
{
    uintptr_t key = (uintptr_t)stem;
    return (Py_ssize_t)((key >> 4) ^ (key >> 13)) & tally->mask;
}

static int
tally_add(Tally *tally, PyObject *stem)
{
    if (tally->slots != NULL) {
        for (Py_ssize_t at = pointer_slot(tally, stem);; at = (at + 1) & tally->mask) {
            Py_ssize_t index = tally->slots[at];
            if (index < 0)
                break;
            if (tally->stems[index] == stem) {
                tally->many[index]++;
                return 0;
            }
        }
    }
    if (tally->size == tally->room) {
        Py_ssize_t room = tally->room ? tally->room * 2 : 256;
        PyObject **stems = PyMem_Realloc(tally->stems, (size_t)room * sizeof(PyObject *));
        if (stems != NULL)
            tally->stems = stems;
        Py_ssize_t *many = stems ? PyMem_Realloc(tally->many, (size_t)room * sizeof(Py_ssize_t)) : NULL;
        if (many != NULL)
            tally->many = many;
        Py_ssize_t *slots = many ? PyMem_Malloc((size_t)room * 2 * sizeof(Py_ssize_t)) : NULL;
        if (slots == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        PyMem_Free(tally->slots);
        tally->slots = slots;
        tally->room = room;
        tally->mask = room * 2 - 1;
        memset(slots, 0xff, (size_t)room * 2 * sizeof(Py_ssize_t));
        for (Py_ssize_t i = 0; i < tally->size; i++) {
            Py_ssize_t at = pointer_slot(tally, tally->stems[i]);
            while (slots[at] >= 0)
                at = (at + 1) & tally->mask;
            slots[at] = i;
        }
    }
    Py_ssize_t at = pointer_slot(tally, stem);
    while (tally->slots[at] >= 0)
        at = (at + 1) & tally->mask;
    tally->slots[at] = tally->size;
    tally->stems[tally->size] = Py_NewRef(stem);
    tally->many[tally->size++] = 1;
    return 0;
}

/* Add each tallied stem's count to counts[stem], in the order the stems were first seen. */
static int
tally_into(const Tally *tally, PyObject *counts)
{
    for (Py_ssize_t i = 0; i < tally->size; i++) {
        PyObject *stem = tally->stems[i], *more = PyLong_FromSsize_t(tally->many[i]);
        if (more == NULL)
            return -1;
        PyObject *had = PyDict_GetItemWithError(counts, stem), *now;
        if (had == NULL)
            now = PyErr_Occurred() ? NULL : Py_NewRef(more);
        else
            now = PyNumber_Add(had, more);
        Py_DECREF(more);
        if (now == NULL)
            return -1;
        int failed = PyDict_SetItem(counts, stem, now);
        Py_DECREF(now);
        if (failed < 0)
            return -1;
    }
    return 0;
}

/* One part's stems (strong refs), until its text is made. */
typedef struct {
    PyObject **stems;
    Py_ssize_t size, room, chars; /* chars: their lengths added up */
    int ascii;                    /* every stem ASCII: the text is their bytes copied */
} Part;

static int
part_add(Part *part, PyObject *stem)
{
    if (part->size == part->room) {
        Py_ssize_t room = part->room ? part->room * 2 : 64;
        PyObject **stems = PyMem_Realloc(part->stems, (size_t)room * sizeof(PyObject *));
        if (stems == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        part->stems = stems;
        part->room = room;
    }
    part->stems[part->size++] = Py_NewRef(stem);
    part->chars += PyUnicode_GET_LENGTH(stem);
    part->ascii = part->ascii && PyUnicode_IS_ASCII(stem);
    return 0;
}

static void
part_clear(Part *part)
{
    for (Py_ssize_t i = 0; i < part->size; i++)
        Py_DECREF(part->stems[i]);
    part->size = part->chars = 0;
    part->ascii = 1;
}

/* The text of one part, its stems joined by single spaces, appended to `parts`; the part emptied after. */
static int
end_part(PyObject *parts, Part *part, PyObject *space)
{
    PyObject *text;
    if (part->ascii) {
        text = PyUnicode_New(part->chars + (part->size ? part->size - 1 : 0), 127);
        if (text != NULL) {
            Py_UCS1 *to = PyUnicode_1BYTE_DATA(text);
            for (Py_ssize_t i = 0; i < part->size; i++) {
                Py_ssize_t length = PyUnicode_GET_LENGTH(part->stems[i]);
                if (i > 0)
                    *to++ = ' ';
                memcpy(to, PyUnicode_1BYTE_DATA(part->stems[i]), (size_t)length);
                to += length;
            }
        }
    }
    else {
        PyObject *stems = PyList_New(part->size);
        if (stems == NULL)
            return -1;
        for (Py_ssize_t i = 0; i < part->size; i++)
            PyList_SET_ITEM(stems, i, Py_NewRef(part->stems[i]));
        text = PyUnicode_Join(space, stems);
        Py_DECREF(stems);
    }
    part_clear(part);
    if (text == NULL)
        return -1;
    int failed = PyList_Append(parts, text);
    Py_DECREF(text);
    return failed;
}

/* The stem of the lowercased word `letters` (a new reference), from `memo`, the table or `missing`; `hash`
   is the word's FNV-1a hash with its lowest bit set (never 0), 0 for a word too long to remember. */
static PyObject *
stem_of(const unsigned char *letters, Py_ssize_t size, uint64_t hash, PyObject *table, PyObject *missing,
        WordMemo *memo)
{
    if (hash != 0 && memo != NULL) {
        PyObject *stem = known_stem(memo, letters, size, hash);
        if (stem != NULL)
            return Py_NewRef(stem);
    }
    PyObject *word = PyUnicode_New(size, 127);
    if (word == NULL)
        return NULL;
    memcpy(PyUnicode_1BYTE_DATA(word), letters, (size_t)size);
    PyObject *stem = PyDict_GetItemWithError(table, word);
    if (stem != NULL) {
        Py_INCREF(stem);
        if (hash != 0 && memo != NULL && PyUnicode_Check(stem) && known_add(memo, word, stem, hash) < 0)
            Py_CLEAR(stem);
    }
    else if (!PyErr_Occurred())
        stem = PyObject_CallOneArg(missing, word);
    Py_DECREF(word);
    return stem;
}

/* A byte of a word lowercased (ASCII letters and digits), 0 for any other byte. */
static unsigned char word_lower[256];

static PyObject *
stemmed_texts(PyObject *self, PyObject *args)
{
    PyObject *joined, *table, *missing, *counts, *memo_arg = Py_None;
    if (!PyArg_ParseTuple(args, "UO!OO|O:stemmed_texts", &joined, &PyDict_Type, &table, &missing, &counts,
                          &memo_arg))
        return NULL;
    if (counts != Py_None && !PyDict_Check(counts)) {
        PyErr_SetString(PyExc_TypeError, "counts: a dict or None");
        return NULL;
    }
    if (memo_arg != Py_None && !PyObject_TypeCheck(memo_arg, &WordMemoType)) {
        PyErr_SetString(PyExc_TypeError, "memo: a WordMemo or None");
        return NULL;
    }
    WordMemo *memo = memo_arg == Py_None ? NULL : (WordMemo *)memo_arg;
    if (word_lower['a'] == 0)
        for (int c = 0; c < 256; c++)
            word_lower[c] = is_word_byte((unsigned char)c) ? (unsigned char)(c >= 'A' && c <= 'Z' ? c + 32 : c) : 0;
    const unsigned char *data = ascii_of(joined, "joined");
    if (data == NULL)
        return NULL;
    Py_ssize_t size = PyUnicode_GET_LENGTH(joined);
    unsigned char letters[KNOWN_WORD_BYTES];
    Tally tally = {0};
    Part part = {.ascii = 1};
    PyObject *parts = PyList_New(0), *space = PyUnicode_FromString(" ");
    if (parts == NULL || space == NULL)
        goto failed;
    for (Py_ssize_t at = 0; at <= size; at++) {
        if (at == size || data[at] == 0) {
            if (end_part(parts, &part, space) < 0)
                goto failed;
            continue;
        }
        if (word_lower[data[at]] == 0)
            continue;
        Py_ssize_t start = at;
        uint64_t hash = 14695981039346656037ULL; /* FNV-1a, as the letters are copied */
        for (unsigned char c; at < size && (c = word_lower[data[at]]) != 0; at++) {
            if (at - start < KNOWN_WORD_BYTES)
                letters[at - start] = c;
            hash = (hash ^ c) * 1099511628211ULL;
        }
        PyObject *stem;
        if (at - start <= KNOWN_WORD_BYTES)
            stem = stem_of(letters, at - start, hash | 1, table, missing, memo);
        else {
            unsigned char *long_word = PyMem_Malloc((size_t)(at - start));
            if (long_word == NULL) {
                PyErr_NoMemory();
                goto failed;
            }
            for (Py_ssize_t i = start; i < at; i++)
                long_word[i - start] = word_lower[data[i]];
            stem = stem_of(long_word, at - start, 0, table, missing, memo);
            PyMem_Free(long_word);
        }
        at--; /* the loop's at++ reaches the byte after the word */
        if (stem == NULL)
            goto failed;
        int keep = PyUnicode_CheckExact(stem) ? PyUnicode_GET_LENGTH(stem) > 0 : PyObject_IsTrue(stem);
        if (keep > 0 && !PyUnicode_Check(stem)) {
            PyErr_SetString(PyExc_TypeError, "a stem is a str");
            keep = -1;
        }
        if (keep > 0 && (part_add(&part, stem) < 0 || (counts != Py_None && tally_add(&tally, stem) < 0)))
            keep = -1;
        Py_DECREF(stem);
        if (keep < 0)
            goto failed;
    }
    if (counts != Py_None && tally_into(&tally, counts) < 0)
        goto failed;
    tally_free(&tally);
    part_clear(&part);
    PyMem_Free(part.stems);
    Py_DECREF(space);
    return parts;
failed:
    tally_free(&tally);
    part_clear(&part);
    PyMem_Free(part.stems);
    Py_XDECREF(parts);
    Py_XDECREF(space);
    return NULL;
}

/* plain_rows: the rows of one section of a plain body (fsmem.format.rows.plain_rows is its twin). */

PyDoc_STRVAR(plain_rows_doc,
"plain_rows(text, begin, stop, number, /) -> tuple[list[int], list[str], list[bool]]\n\n"
"The rows fsmem.format.rows._PLAIN_ROW finds in ASCII text[begin:stop], each from a line break: a bullet\n"
"line, or a run of lines that start with no space and no bullet, after any blank lines. Per row: its\n"
"first line's number (`number` is the line ending at `begin`), its text stripped, whether it is a bullet.");

/* Python's str.isspace() and re's \s, on an ASCII character. */
static int
is_space(unsigned char c)
{
    return c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f);
}

/* Whether a bullet starts at `at` (`_BULLET_START`: "-", "*", "+", or 1-3 digits and "." or ")"; then spaces or
   tabs, then a character that is no space), looking no further than `stop`. */
static int
bullet_at(const unsigned char *s, Py_ssize_t at, Py_ssize_t stop)
{
    Py_ssize_t q = at;
    if (q >= stop)
        return 0;
    if (s[q] == '-' || s[q] == '*' || s[q] == '+')
        q++;
    else if (s[q] >= '0' && s[q] <= '9') {
        while (q < stop && s[q] >= '0' && s[q] <= '9')
            q++;
        if (q - at > 3 || q >= stop || (s[q] != '.' && s[q] != ')'))
            return 0;
        q++;
    }
    else
        return 0;
    if (q >= stop || (s[q] != ' ' && s[q] != '\t'))
        return 0;
    while (q < stop && (s[q] == ' ' || s[q] == '\t'))
        q++;
    return q < stop && !is_space(s[q]);
}

/* Where the line at `at` ends: its line break, or `stop`. */
static Py_ssize_t
line_end(const unsigned char *s, Py_ssize_t at, Py_ssize_t stop)
{
    const unsigned char *found = at < stop ? memchr(s + at, '\n', (size_t)(stop - at)) : NULL;
    return found ? found - s : stop;
}

/* Append to `lines`, `texts` and `bullets` the rows of s[begin:stop] (`plain_rows`); 0, or -1 with an error. */
static int
cut_rows(const unsigned char *s, Py_ssize_t begin, Py_ssize_t stop, Py_ssize_t number, PyObject *lines,
         PyObject *texts, PyObject *bullets)
{
    Py_ssize_t p = begin;
    while (p < stop) {
        if (s[p] != '\n') { /* a match starts with a line break */
            p = line_end(s, p, stop);
            continue;
        }
        Py_ssize_t r = p + 1, blank = 0;
        for (;;) { /* every whole blank line */
            Py_ssize_t t = r;
            while (t < stop && s[t] != '\n' && is_space(s[t]))
                t++;
            if (t >= stop || s[t] != '\n')
                break;
            r = t + 1;
            blank++;
        }
        if (r >= stop || is_space(s[r])) { /* no row here: the next position */
            p++;
            continue;
        }
        int bullet = bullet_at(s, r, stop);
        Py_ssize_t end = line_end(s, r, stop), breaks = 0;
        if (!bullet)
            while (end + 1 < stop && !is_space(s[end + 1]) && !bullet_at(s, end + 1, stop)) {
                end = line_end(s, end + 1, stop);
                breaks++;
            }
        number += 1 + blank;
        Py_ssize_t last = end;
        while (last > r && is_space(s[last - 1]))
            last--;
        PyObject *line = PyLong_FromSsize_t(number);
        PyObject *row = PyUnicode_New(last - r, 127);
        if (row != NULL)
            memcpy(PyUnicode_1BYTE_DATA(row), s + r, (size_t)(last - r));
        int failed = line == NULL || row == NULL || PyList_Append(lines, line) < 0 || PyList_Append(texts, row) < 0
                     || PyList_Append(bullets, bullet ? Py_True : Py_False) < 0;
        Py_XDECREF(line);
        Py_XDECREF(row);
        if (failed)
            return -1;
        number += breaks;
        p = end;
    }
    return 0;
}

static PyObject *
plain_rows(PyObject *self, PyObject *args)
{
    PyObject *text;
    Py_ssize_t begin, stop, number;
    if (!PyArg_ParseTuple(args, "Unnn:plain_rows", &text, &begin, &stop, &number))
        return NULL;
    const unsigned char *s = ascii_of(text, "text");
    if (s == NULL)
        return NULL;
    Py_ssize_t size = PyUnicode_GET_LENGTH(text);
    begin = begin < 0 ? 0 : begin; /* as re's pos and endpos */
    stop = stop > size ? size : stop;
    PyObject *lines = PyList_New(0), *texts = PyList_New(0), *bullets = PyList_New(0), *found = NULL;
    if (lines != NULL && texts != NULL && bullets != NULL && cut_rows(s, begin, stop, number, lines, texts, bullets) == 0)
        found = PyTuple_Pack(3, lines, texts, bullets);
    Py_XDECREF(lines);
    Py_XDECREF(texts);
    Py_XDECREF(bullets);
    return found;
}

/* plain_sections: a plain body's sections and their rows (fsmem.format.rows._plain_sections is its twin). */

PyDoc_STRVAR(plain_sections_doc,
"plain_sections(text, number, title, subject, /) -> tuple[object, list[tuple]]\n\n"
"fsmem.format.rows._plain_sections of ASCII `text` (a line break, then the body), whose first line is line\n"
"`number` + 1: the title (`title`, else the first level-1 heading's) and per run of rows between two headings\n"
"(fmt.HEADING's lines) a section, (headings, subject, superseded, lines, texts, bullets), its rows cut as\n"
"`plain_rows` cuts them; `subject` is the file's, which a heading such as `people/Adam Smith` replaces.");

/* One heading line of the body: where its line break before and its end are, its line number and level, its
   title (a new reference). */
typedef struct {
    Py_ssize_t start, end, number;
    int level;
    PyObject *title;
} Heading;

/* The heading fmt.HEADING finds in s[at:end] (one line, no line break): its level, 0 for none, and where its
   title (before str.strip) begins and ends. */
static int
heading_at(const unsigned char *s, Py_ssize_t at, Py_ssize_t end, Py_ssize_t *from, Py_ssize_t *to)
{
    Py_ssize_t q = at;
    while (q < end && s[q] == '#')
        q++;
    int level = (int)(q - at);
    if (level < 1 || level > 6 || q >= end || (s[q] != ' ' && s[q] != '\t'))
        return 0;
    Py_ssize_t spaces = q;
    while (q < end && (s[q] == ' ' || s[q] == '\t'))
        q++;
    if (q == end) { /* nothing but spaces: `.+?` takes the last of them, if `[ \t]+` keeps one */
        if (end - spaces < 2)
            return 0;
        q = end - 1;
    }
    Py_ssize_t tail = end; /* the shortest title after which `[ \t]*#*[ \t]*$` is left */
    while (tail > q && (s[tail - 1] == ' ' || s[tail - 1] == '\t'))
        tail--;
    while (tail > q && s[tail - 1] == '#')
        tail--;
    while (tail > q && (s[tail - 1] == ' ' || s[tail - 1] == '\t'))
        tail--;
    *from = q;
    *to = tail > q ? tail : q + 1;
    return level;
}

/* s[from:to] as str.strip() gives it. */
static PyObject *
stripped(const unsigned char *s, Py_ssize_t from, Py_ssize_t to)
{
    while (from < to && is_space(s[from]))
        from++;
    while (to > from && is_space(s[to - 1]))
        to--;
    PyObject *text = PyUnicode_New(to - from, 127);
    if (text != NULL)
        memcpy(PyUnicode_1BYTE_DATA(text), s + from, (size_t)(to - from));
    return text;
}

/* fsmem.format.rows.subject_of of an ASCII heading's title: 1 when it is a subject (`kind/name`), else 0. */
static int
is_subject(PyObject *title)
{
    const unsigned char *s = PyUnicode_1BYTE_DATA(title);
    Py_ssize_t size = PyUnicode_GET_LENGTH(title);
    const unsigned char *slash = memchr(s, '/', (size_t)size);
    if (slash == NULL)
        return 0;
    Py_ssize_t cut = slash - s, from = 0, to = cut;
    while (from < to && is_space(s[from]))
        from++;
    while (to > from && is_space(s[to - 1]))
        to--;
    if (from == to || memchr(s + from, ' ', (size_t)(to - from)) != NULL)
        return 0;
    for (Py_ssize_t i = cut + 1; i < size; i++)
        if (!is_space(s[i]))
            return 1;
    return 0;
}

/* Whether an ASCII title, lowercased, is "superseded" (fsmem.format.markdown.SUPERSEDED_HEADING). */
static int
is_superseded(PyObject *title)
{
    static const char word[] = "superseded";
    if (PyUnicode_GET_LENGTH(title) != (Py_ssize_t)sizeof(word) - 1)
        return 0;
    const unsigned char *s = PyUnicode_1BYTE_DATA(title);
    for (size_t i = 0; i < sizeof(word) - 1; i++)
        if ((s[i] >= 'A' && s[i] <= 'Z' ? s[i] + 32 : s[i]) != word[i])
            return 0;
    return 1;
}

static PyObject *
plain_sections(PyObject *self, PyObject *args)
{
    PyObject *text, *title, *file_subject;
    Py_ssize_t number;
    if (!PyArg_ParseTuple(args, "UnOO:plain_sections", &text, &number, &title, &file_subject))
        return NULL;
    const unsigned char *s = ascii_of(text, "text");
    if (s == NULL)
        return NULL;
    Py_ssize_t size = PyUnicode_GET_LENGTH(text);
    Heading *found = NULL;
    Py_ssize_t headings = 0, room = 0, depth = 0;
    Py_ssize_t *stack = NULL; /* indices into `found` of the open headings */
    PyObject *sections = NULL, *result = NULL;
    Py_ssize_t seek = 0, counted = 0, at_line = number;
    for (;;) { /* every heading line, as the twin's loop of text.find("\n#") and _HEADING_LINE finds them */
        Py_ssize_t start = -1;
        for (Py_ssize_t from = seek; start < 0 && from + 1 < size;) {
            const unsigned char *next = memchr(s + from, '\n', (size_t)(size - 1 - from));
            if (next == NULL)
                break;
            if (next[1] == '#')
                start = next - s;
            from = next - s + 1;
        }
        if (start < 0)
            break;
        Py_ssize_t end = line_end(s, start + 1, size), from, to;
        int level = heading_at(s, start + 1, end, &from, &to);
        if (level) {
            for (Py_ssize_t i = counted; i < start + 1; i++)
                at_line += s[i] == '\n';
            counted = start + 1;
            if (headings == room) {
                room = room ? room * 2 : 16;
                Heading *grown = PyMem_Realloc(found, (size_t)room * sizeof(Heading));
                if (grown == NULL) {
                    PyErr_NoMemory();
                    goto failed;
                }
                found = grown;
            }
            PyObject *name = stripped(s, from, to);
            if (name == NULL)
                goto failed;
            found[headings++] = (Heading){start, end, at_line, level, name};
        }
        seek = end;
    }
    if (title == Py_None)
        for (Py_ssize_t i = 0; i < headings; i++)
            if (found[i].level == 1) {
                title = found[i].title;
                break;
            }
    stack = PyMem_Malloc((size_t)(headings ? headings : 1) * sizeof(Py_ssize_t));
    sections = PyList_New(0);
    if (stack == NULL || sections == NULL) {
        if (stack == NULL)
            PyErr_NoMemory();
        goto failed;
    }
    PyObject *subject = file_subject;
    int superseded = 0;
    Py_ssize_t begin = 0, line = number;
    for (Py_ssize_t n = 0; n <= headings; n++) {
        PyObject *heads = NULL;
        if (n) { /* after a heading: the stack and what its rows share */
            Heading *heading = &found[n - 1];
            begin = heading->end;
            line = heading->number;
            while (depth && found[stack[depth - 1]].level >= heading->level)
                depth--;
            stack[depth++] = n - 1;
            subject = file_subject;
            superseded = 0;
            for (Py_ssize_t i = 0; i < depth; i++) {
                if (is_subject(found[stack[i]].title))
                    subject = found[stack[i]].title;
                superseded = superseded || (found[stack[i]].level == 2 && is_superseded(found[stack[i]].title));
            }
        }
        Py_ssize_t stop = n < headings ? found[n].start : size;
        while (stop > begin && is_space(s[stop - 1]))
            stop--;
        PyObject *lines = PyList_New(0), *texts = PyList_New(0), *bullets = PyList_New(0), *section = NULL;
        int failed = lines == NULL || texts == NULL || bullets == NULL
                     || cut_rows(s, begin, stop, line, lines, texts, bullets) < 0;
        if (!failed && PyList_GET_SIZE(lines)) {
            heads = PyList_New(0);
            for (Py_ssize_t i = 0; heads != NULL && i < depth; i++) {
                Heading *open = &found[stack[i]];
                int is_title = 0;
                if (open->level == 1 && title != Py_None)
                    is_title = PyObject_RichCompareBool(open->title, title, Py_EQ);
                if (is_title < 0 || (!is_title && PyList_Append(heads, open->title) < 0))
                    Py_CLEAR(heads);
            }
            section = heads ? PyTuple_Pack(6, heads, subject, superseded ? Py_True : Py_False, lines, texts,
                                           bullets)
                            : NULL;
            failed = section == NULL || PyList_Append(sections, section) < 0;
        }
        Py_XDECREF(heads);
        Py_XDECREF(section);
        Py_XDECREF(lines);
        Py_XDECREF(texts);
        Py_XDECREF(bullets);
        if (failed)
            goto failed;
    }
    result = PyTuple_Pack(2, title, sections);
failed:
    for (Py_ssize_t i = 0; i < headings; i++)
        Py_DECREF(found[i].title);
    PyMem_Free(found);
    PyMem_Free(stack);
    Py_XDECREF(sections);
    return result;
}

/* row_columns: a plain body's rows that cite nothing, as the index stores them (twin:
   fsmem.search.parsing.row_columns). */

PyDoc_STRVAR(row_columns_doc,
"row_columns(terms, when, sections, /) -> tuple[list[str], list[str], bytes, list[int]]\n\n"
"A plain body's rows that cite nothing, in the index's columns (fsmem.search.parsing.row_columns is its twin):\n"
"each row's terms with `when` (its date's terms, \"\" for none) after them, each row's context, the rows\n"
"packed as fsmem.search.packed_rows.pack_rows packs them (line << 2 | flags, 2 or 4 bytes a row) and the\n"
"ordinals of the superseded rows. `sections`, in `terms`' order: per section a tuple (its rows' lines, its\n"
"context, whether superseded, whether its first row continues the run of the section before's last).");

#define ROW_SUPERSEDED 1u /* fsmem.search.parsing.SUPERSEDED, LINKED */
#define ROW_LINKED 2u
#define ROW_MOST_LINE 0x3FFFFFFFLL /* a larger line is packed as this (pack_rows) */

_Static_assert(sizeof(unsigned int) == 4, "array('I') holds 4 bytes a value");

/* The lines of one section (a list of ints) packed into values[at...] with `flag`, each row but the last
   linked; its superseded ordinals appended to `flagged`. 0, or -1 with an exception. */
static int
pack_section(PyObject *lines, Py_ssize_t many, unsigned int flag, unsigned int *values, Py_ssize_t at,
             PyObject *flagged)
{
    for (Py_ssize_t i = 0; i < many; i++) {
        PyObject *line = PyList_GET_ITEM(lines, i);
        if (!PyLong_Check(line)) {
            PyErr_SetString(PyExc_TypeError, "row_columns: a line is an int");
            return -1;
        }
        int overflow = 0;
        long long value = PyLong_AsLongLongAndOverflow(line, &overflow);
        if (value == -1 && PyErr_Occurred())
            return -1;
        if (overflow > 0 || value > ROW_MOST_LINE) /* (with an overflow, `value` is -1) */
            value = ROW_MOST_LINE;
        else if (overflow < 0 || value < 0) {
            PyErr_SetString(PyExc_ValueError, "row_columns: a line is not negative");
            return -1;
        }
        values[at + i] = (unsigned int)value << 2 | flag | (i + 1 < many ? ROW_LINKED : 0u);
        if (flag & ROW_SUPERSEDED) {
            PyObject *ordinal = PyLong_FromSsize_t(at + i);
            int failed = ordinal == NULL ? -1 : PyList_Append(flagged, ordinal);
            Py_XDECREF(ordinal);
            if (failed < 0)
                return -1;
        }
    }
    return 0;
}

/* `n` values in 2 bytes each where all fit, else 4 (fsmem.search.packed_rows._narrow's "HI"). */
static PyObject *
packed_values(const unsigned int *values, Py_ssize_t n)
{
    unsigned int top = 0;
    for (Py_ssize_t i = 0; i < n; i++)
        top = values[i] > top ? values[i] : top;
    if (top >> 16 != 0)
        return PyBytes_FromStringAndSize((const char *)values, n * (Py_ssize_t)sizeof(unsigned int));
    PyObject *packed = PyBytes_FromStringAndSize(NULL, n * (Py_ssize_t)sizeof(uint16_t));
    if (packed == NULL)
        return NULL;
    uint16_t *to = (uint16_t *)PyBytes_AS_STRING(packed);
    for (Py_ssize_t i = 0; i < n; i++)
        to[i] = (uint16_t)values[i];
    return packed;
}

static PyObject *
row_columns(PyObject *self, PyObject *args)
{
    PyObject *terms, *when, *sections;
    if (!PyArg_ParseTuple(args, "O!UO!:row_columns", &PyList_Type, &terms, &when, &PyList_Type, &sections))
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(terms), at = 0;
    unsigned int *values = PyMem_Malloc((size_t)(n > 0 ? n : 1) * sizeof(unsigned int));
    if (values == NULL)
        return PyErr_NoMemory();
    PyObject *texts = PyList_New(n), *contexts = PyList_New(n), *flagged = PyList_New(0);
    PyObject *suffix = NULL, *packed = NULL, *result = NULL;
    if (texts == NULL || contexts == NULL || flagged == NULL)
        goto done;
    for (Py_ssize_t s = 0; s < PyList_GET_SIZE(sections); s++) {
        PyObject *section = Py_NewRef(PyList_GET_ITEM(sections, s)); /* held: a truth test runs Python */
        PyObject *lines, *context;
        int superseded, linked, failed = 0;
        if (!PyTuple_Check(section)) {
            PyErr_SetString(PyExc_TypeError, "row_columns: a section is a tuple");
            failed = 1;
        }
        else if (!PyArg_ParseTuple(section, "O!Upp:row_columns", &PyList_Type, &lines, &context, &superseded,
                                   &linked))
            failed = 1;
        else if (PyList_GET_SIZE(lines) > n - at) {
            PyErr_SetString(PyExc_ValueError, "row_columns: more lines than terms");
            failed = 1;
        }
        else if (PyList_GET_SIZE(lines) > 0) {
            Py_ssize_t many = PyList_GET_SIZE(lines);
            if (linked && at > 0)
                values[at - 1] |= ROW_LINKED;
            failed = pack_section(lines, many, superseded ? ROW_SUPERSEDED : 0u, values, at, flagged) < 0;
            for (Py_ssize_t i = 0; !failed && i < many; i++)
                PyList_SET_ITEM(contexts, at + i, Py_NewRef(context));
            at += failed ? 0 : many;
        }
        Py_DECREF(section);
        if (failed)
            goto done;
    }
    if (at != n || PyList_GET_SIZE(terms) != n) {
        PyErr_SetString(PyExc_ValueError, "row_columns: fewer lines than terms");
        goto done;
    }
    if (PyUnicode_GET_LENGTH(when) > 0 && (suffix = PyUnicode_FromFormat(" %U", when)) == NULL)
        goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *text = PyList_GET_ITEM(terms, i), *item;
        if (!PyUnicode_Check(text)) {
            PyErr_SetString(PyExc_TypeError, "row_columns: a row's terms are a str");
            goto done;
        }
        if (suffix == NULL)
            item = Py_NewRef(text);
        else if (PyUnicode_GET_LENGTH(text) == 0)
            item = Py_NewRef(when);
        else
            item = PyUnicode_Concat(text, suffix);
        if (item == NULL)
            goto done;
        PyList_SET_ITEM(texts, i, item);
    }
    packed = packed_values(values, n);
    if (packed != NULL)
        result = PyTuple_Pack(4, texts, contexts, packed, flagged);
done:
    PyMem_Free(values);
    Py_XDECREF(texts);
    Py_XDECREF(contexts);
    Py_XDECREF(flagged);
    Py_XDECREF(suffix);
    Py_XDECREF(packed);
    return result;
}

/* add_postings: one document's postings added to a batch's (twin: fsmem.search.postings.add_postings). */

PyDoc_STRVAR(add_postings_doc,
"add_postings(rows, doc, terms, counts, /) -> None\n\n"
"One document's postings added to `rows` (term -> (ids, counts), two lists), as\n"
"fsmem.search.postings.add_postings (its twin) adds them: `terms` its distinct terms separated by single\n"
"spaces (\"\" for none), `counts` their counts, 4 native bytes each (array('I')). A ValueError where there are\n"
"not as many counts as terms, checked before `rows` is changed.");

static int
posting_add(PyObject *rows, PyObject *term, PyObject *doc, unsigned int many)
{
    PyObject *count = PyLong_FromUnsignedLong(many);
    if (count == NULL)
        return -1;
    int failed = -1;
    PyObject *found = PyDict_GetItemWithError(rows, term); /* borrowed */
    if (found == NULL) {
        if (!PyErr_Occurred()) {
            PyObject *ids = PyList_New(1), *counts = PyList_New(1), *pair = NULL;
            if (ids != NULL && counts != NULL) {
                PyList_SET_ITEM(ids, 0, Py_NewRef(doc));
                PyList_SET_ITEM(counts, 0, Py_NewRef(count));
                pair = PyTuple_Pack(2, ids, counts);
            }
            if (pair != NULL)
                failed = PyDict_SetItem(rows, term, pair);
            Py_XDECREF(ids);
            Py_XDECREF(counts);
            Py_XDECREF(pair);
        }
    }
    else if (!PyTuple_Check(found) || PyTuple_GET_SIZE(found) != 2 || !PyList_Check(PyTuple_GET_ITEM(found, 0)) ||
             !PyList_Check(PyTuple_GET_ITEM(found, 1)))
        PyErr_SetString(PyExc_TypeError, "add_postings: a term's postings are a tuple of two lists");
    else {
        Py_INCREF(found); /* held while its lists grow */
        failed = PyList_Append(PyTuple_GET_ITEM(found, 0), doc) < 0 ||
                         PyList_Append(PyTuple_GET_ITEM(found, 1), count) < 0
                     ? -1
                     : 0;
        Py_DECREF(found);
    }
    Py_DECREF(count);
    return failed;
}

static PyObject *
add_postings(PyObject *self, PyObject *args)
{
    PyObject *rows, *doc, *terms;
    Py_buffer counts;
    if (!PyArg_ParseTuple(args, "O!O!Uy*:add_postings", &PyDict_Type, &rows, &PyLong_Type, &doc, &terms, &counts))
        return NULL;
    Py_ssize_t size = PyUnicode_GET_LENGTH(terms), many = size > 0 ? 1 : 0;
    int kind = PyUnicode_KIND(terms);
    const void *data = PyUnicode_DATA(terms);
    for (Py_ssize_t at = 0; at < size; at++)
        many += PyUnicode_READ(kind, data, at) == ' ';
    if (counts.len % (Py_ssize_t)sizeof(unsigned int) != 0 ||
        counts.len / (Py_ssize_t)sizeof(unsigned int) != many) {
        PyBuffer_Release(&counts);
        PyErr_SetString(PyExc_ValueError, "add_postings: not as many counts as terms");
        return NULL;
    }
    const unsigned char *bytes = counts.buf;
    Py_ssize_t start = 0, n = 0;
    for (Py_ssize_t at = 0; many > 0 && at <= size; at++) {
        if (at < size && PyUnicode_READ(kind, data, at) != ' ')
            continue;
        unsigned int value;
        memcpy(&value, bytes + n * (Py_ssize_t)sizeof(unsigned int), sizeof(unsigned int));
        PyObject *term = PyUnicode_Substring(terms, start, at);
        int failed = term == NULL ? -1 : posting_add(rows, term, doc, value);
        Py_XDECREF(term);
        if (failed < 0) {
            PyBuffer_Release(&counts);
            return NULL;
        }
        start = at + 1;
        n++;
    }
    PyBuffer_Release(&counts);
    Py_RETURN_NONE;
}

/* encode_postings: a posting row's columns (twin: fsmem.search.postings.encode_postings). */

PyDoc_STRVAR(encode_postings_doc,
"encode_postings(before, ids, counts, /) -> (n, gaps, counts)\n\n"
"A posting row's columns as fsmem.search.postings.encode_postings (its twin) makes them: `ids` (a list of\n"
"ints, each above the one before it, the first above `before`) as their gaps, one byte each, a gap of 256\n"
"or more as 0 there and in 4 native bytes after them all; `counts` (a list of ints as long) in the\n"
"narrowest of 1, 2 or 4 native bytes a count that holds them all. A ValueError where a gap is negative, or\n"
"there are no ids or not as many counts; an OverflowError where a gap or a count does not fit 4 bytes.");

static PyObject *
encode_postings(PyObject *self, PyObject *args)
{
    long long before;
    PyObject *ids, *counts;
    if (!PyArg_ParseTuple(args, "LO!O!:encode_postings", &before, &PyList_Type, &ids, &PyList_Type, &counts))
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(ids);
    if (n == 0 || PyList_GET_SIZE(counts) != n) {
        PyErr_SetString(PyExc_ValueError, "encode_postings: no ids, or not as many counts as ids");
        return NULL;
    }
    unsigned char *gaps = PyMem_Malloc((size_t)n * 5);
    uint32_t *wide = PyMem_Malloc((size_t)n * sizeof(uint32_t));
    PyObject *result = NULL, *gap_bytes = NULL, *count_bytes = NULL;
    if (gaps == NULL || wide == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    Py_ssize_t large = 0;
    long long previous = before;
    for (Py_ssize_t at = 0; at < n; at++) {
        long long id = PyLong_AsLongLong(PyList_GET_ITEM(ids, at));
        if (id == -1 && PyErr_Occurred())
            goto done;
        if (id < previous) {
            PyErr_SetString(PyExc_ValueError, "encode_postings: the ids do not grow");
            goto done;
        }
        unsigned long long gap = (unsigned long long)id - (unsigned long long)previous;
        previous = id;
        if (gap <= 0xFF)
            gaps[at] = (unsigned char)gap;
        else if (gap > UINT32_MAX) {
            PyErr_SetString(PyExc_OverflowError, "encode_postings: a gap past 4 bytes");
            goto done;
        }
        else {
            gaps[at] = 0;
            uint32_t value = (uint32_t)gap;
            memcpy(gaps + n + large * 4, &value, 4);
            large++;
        }
    }
    unsigned long top = 0;
    for (Py_ssize_t at = 0; at < n; at++) {
        unsigned long value = PyLong_AsUnsignedLong(PyList_GET_ITEM(counts, at));
        if (value == (unsigned long)-1 && PyErr_Occurred())
            goto done;
        if (value > UINT32_MAX) {
            PyErr_SetString(PyExc_OverflowError, "encode_postings: a count past 4 bytes");
            goto done;
        }
        wide[at] = (uint32_t)value;
        if (value > top)
            top = value;
    }
    int width = top < (1UL << 8) ? 1 : top < (1UL << 16) ? 2 : 4;
    gap_bytes = PyBytes_FromStringAndSize((const char *)gaps, n + large * 4);
    count_bytes = PyBytes_FromStringAndSize(NULL, n * width);
    if (gap_bytes == NULL || count_bytes == NULL)
        goto done;
    char *out = PyBytes_AS_STRING(count_bytes);
    for (Py_ssize_t at = 0; at < n; at++) {
        if (width == 1)
            out[at] = (char)wide[at];
        else if (width == 2) {
            uint16_t value = (uint16_t)wide[at];
            memcpy(out + at * 2, &value, 2);
        }
        else
            memcpy(out + at * 4, wide + at, 4);
    }
    result = Py_BuildValue("(nOO)", n, gap_bytes, count_bytes);
done:
    PyMem_Free(gaps);
    PyMem_Free(wide);
    Py_XDECREF(gap_bytes);
    Py_XDECREF(count_bytes);
    return result;
}

/* The row part's score of one row, as an FTS5 auxiliary function (the Python twin:
   fsmem.search.rowscores._Scores), registered on a connection by loading this file as a SQLite extension
   (`sqlite3_fsmemrows_init`; apsw's SQLite exports no symbols, so its functions come through the
   extension's table of them). Compiled where SQLite's extension header is found; elsewhere the twin scores. */
#if defined(__has_include)
#if __has_include(<sqlite3ext.h>)
#define FSMEM_ROW_SCORE 1
#endif
#endif

#ifdef FSMEM_ROW_SCORE
#include <sqlite3ext.h>
SQLITE_EXTENSION_INIT1

#define ROW_SCORE_K1 1.2 /* FTS5's bm25() constants */
#define ROW_SCORE_B 0.75

/* What one statement's rows share: the table's average row size and each phrase's IDF, bm25()'s own. */
typedef struct {
    int phrases;
    double avgdl;
    double *idf;
    double *freq;
} RowTotals;

static void
row_totals_free(void *data)
{
    sqlite3_free(data);
}

/* The row's size in tokens from its `sz` in the table's docsize table (a varint per column, as FTS5 writes
   them: fts5StorageDecodeSizeArray), summed over the columns as xColumnSize(-1) sums them; -1 where `sz` is
   not such a value (then FTS5's own lookup answers, and reports what it finds). */
static sqlite3_int64
row_size(sqlite3_value *sz, int columns)
{
    if (sqlite3_value_type(sz) != SQLITE_BLOB)
        return -1;
    const unsigned char *at = sqlite3_value_blob(sz);
    int left = sqlite3_value_bytes(sz);
    sqlite3_int64 total = 0;
    for (int column = 0; column < columns; column++) {
        sqlite3_uint64 value = 0;
        int length = 0;
        while (length < left && length < 9) { /* SQLite's varint: 7 bits a byte, the ninth byte's 8 */
            unsigned char byte = at[length++];
            if (length == 9) {
                value = (value << 8) | byte;
                break;
            }
            value = (value << 7) | (byte & 0x7f);
            if (!(byte & 0x80))
                break;
        }
        if (length == 0 || (length < 9 && at[length - 1] & 0x80))
            return -1; /* the blob ends inside a value */
        at += length;
        left -= length;
        total += (int)(unsigned int)value; /* FTS5 keeps each column's size in an int */
    }
    return left ? -1 : total; /* FTS5 finds a value of more bytes damaged */
}

/* fsmem_row_score(table, sz, w_text, w_headings, df_0, df_1, ...): -bm25(table, w_text, w_headings) of the
   row, with phrase i's IDF from df_i (the rows holding it, as fts5vocab counts them: the count bm25() makes by
   walking every row holding it), and the row's size from `sz`, its docsize table's value (joined in the same
   statement: FTS5's xColumnSize runs a statement of its own for each row, a fifth of the row part's CPU at
   100k files on a question of dates), or NULL for xColumnSize's. The arithmetic is fts5Bm25Function's,
   operation for operation. */
static int
score_row(const Fts5ExtensionApi *api, Fts5Context *fts, sqlite3_context *ctx, int argc, sqlite3_value **argv,
          double *found)
{
    RowTotals *totals = (RowTotals *)api->xGetAuxdata(fts, 0);
    int rc = SQLITE_OK;
    if (totals == NULL) {
        int phrases = api->xPhraseCount(fts);
        if (argc != 3 + phrases) {
            sqlite3_result_error(ctx, "fsmem_row_score: the row's sizes, two weights and one row count per phrase", -1);
            return 0;
        }
        sqlite3_int64 rows = 0, tokens = 0;
        totals = sqlite3_malloc64(sizeof(RowTotals) + 2 * sizeof(double) * (size_t)(phrases ? phrases : 1));
        if (totals == NULL) {
            sqlite3_result_error_nomem(ctx);
            return 0;
        }
        totals->phrases = phrases;
        totals->idf = (double *)&totals[1];
        totals->freq = &totals->idf[phrases];
        rc = api->xRowCount(fts, &rows);
        if (rows <= 0)
            rows = 1;
        if (rc == SQLITE_OK)
            rc = api->xColumnTotalSize(fts, -1, &tokens);
        totals->avgdl = (double)tokens / (double)rows;
        for (int i = 0; i < phrases; i++) {
            sqlite3_int64 hit = sqlite3_value_int64(argv[3 + i]);
            double idf = log((rows - hit + 0.5) / (hit + 0.5));
            totals->idf[i] = idf <= 0.0 ? 1e-6 : idf;
        }
        if (rc == SQLITE_OK)
            rc = api->xSetAuxdata(fts, totals, row_totals_free);
        else
            sqlite3_free(totals);
        if (rc != SQLITE_OK) {
            sqlite3_result_error_code(ctx, rc);
            return 0;
        }
    }
    double *freq = totals->freq;
    for (int i = 0; i < totals->phrases; i++)
        freq[i] = 0.0;
    int hits = 0, tokens = 0;
    rc = api->xInstCount(fts, &hits);
    for (int i = 0; rc == SQLITE_OK && i < hits; i++) {
        int phrase, column, offset;
        rc = api->xInst(fts, i, &phrase, &column, &offset);
        if (rc == SQLITE_OK)
            freq[phrase] += column < 2 ? sqlite3_value_double(argv[1 + column]) : 1.0;
    }
    sqlite3_int64 size = rc == SQLITE_OK ? row_size(argv[0], api->xColumnCount(fts)) : -1;
    if (size >= 0)
        tokens = (int)size; /* xColumnSize's int */
    else if (rc == SQLITE_OK)
        rc = api->xColumnSize(fts, -1, &tokens);
    if (rc != SQLITE_OK) {
        sqlite3_result_error_code(ctx, rc);
        return 0;
    }
    double D = (double)tokens, score = 0.0, k1 = ROW_SCORE_K1, b = ROW_SCORE_B;
    for (int i = 0; i < totals->phrases; i++)
        score += totals->idf[i] * ((freq[i] * (k1 + 1.0)) / (freq[i] + k1 * (1 - b + b * D / totals->avgdl)));
    *found = score;
    return 1;
}

static void
row_score(const Fts5ExtensionApi *api, Fts5Context *fts, sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
    double score;
    if (score_row(api, fts, ctx, argc, argv, &score))
        sqlite3_result_double(ctx, score);
}

/* One question's best rows so far, across its statements: a heap of at most `want` (ranking's row id, score),
   its root the worst (best_rows' order: a higher score, or the same and a lower row id, ranks before). */
typedef struct {
    sqlite3_int64 want, size;
    sqlite3_int64 *rid;
    double *score;
} RowPool;

static inline int
pool_before(const RowPool *pool, sqlite3_int64 a, sqlite3_int64 b)
{
    return pool->score[a] > pool->score[b] || (pool->score[a] == pool->score[b] && pool->rid[a] < pool->rid[b]);
}

static void
pool_swap(RowPool *pool, sqlite3_int64 a, sqlite3_int64 b)
{
    sqlite3_int64 rid = pool->rid[a];
    double score = pool->score[a];
    pool->rid[a] = pool->rid[b];
    pool->score[a] = pool->score[b];
    pool->rid[b] = rid;
    pool->score[b] = score;
}

static void
pool_sift_down(RowPool *pool, sqlite3_int64 size, sqlite3_int64 i)
{
    for (;;) {
        sqlite3_int64 child = 2 * i + 1, worst = i;
        if (child < size && pool_before(pool, worst, child))
            worst = child;
        if (child + 1 < size && pool_before(pool, worst, child + 1))
            worst = child + 1;
        if (worst == i)
            return;
        pool_swap(pool, i, worst);
        i = worst;
    }
}

/* The row into the pool when it ranks before the worst kept: a row that does not cannot be among the best
   `want` whatever comes later. */
static void
pool_offer(RowPool *pool, sqlite3_int64 rid, double score)
{
    sqlite3_int64 at;
    if (pool->size < pool->want) {
        at = pool->size++;
        pool->rid[at] = rid;
        pool->score[at] = score;
        while (at > 0 && pool_before(pool, (at - 1) / 2, at)) { /* the worse goes up */
            pool_swap(pool, at, (at - 1) / 2);
            at = (at - 1) / 2;
        }
        return;
    }
    if (pool->want == 0 || score < pool->score[0] || (score == pool->score[0] && rid > pool->rid[0]))
        return;
    pool->rid[0] = rid;
    pool->score[0] = score;
    pool_sift_down(pool, pool->size, 0);
}

static void
pool_free(void *data)
{
    RowPool *pool = data;
    if (pool != NULL) {
        sqlite3_free(pool->rid);
        sqlite3_free(pool->score);
        sqlite3_free(pool);
    }
}

/* fsmem_row_offer(table, packed, itemsize, flag, moved, first, sz, w_text, w_headings, df_0, ...): offers the row,
   fsmem_row_score's score and its ranking row id (its row id + `moved`), to the connection's pool, unless its
   value in `packed` (the file's packed rows, native values of `itemsize` bytes, 2 or 4, by the row's ordinal, row id - `first`;
   NULL: every row offered) has `flag` (a superseded row is dropped before the best are picked, so it holds no
   place among them); returns NULL, so that no row is handed over. */
static void
row_offer(const Fts5ExtensionApi *api, Fts5Context *fts, sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
    RowPool *pool = api->xUserData(fts);
    if (argc < 6) {
        sqlite3_result_error(ctx, "fsmem_row_offer: packed rows, item size, flag, moved, first, then fsmem_row_score's", -1);
        return;
    }
    sqlite3_int64 rowid = api->xRowid(fts);
    if (sqlite3_value_type(argv[0]) != SQLITE_NULL) {
        const void *rows = sqlite3_value_blob(argv[0]);
        long long value = packed_value(rows, sqlite3_value_bytes(argv[0]), sqlite3_value_int(argv[1]),
                                       rowid - sqlite3_value_int64(argv[4]));
        if (value < 0) {
            sqlite3_result_error(ctx, "fsmem_row_offer: a row past its file's packed rows", -1);
            return;
        }
        if (value & sqlite3_value_int64(argv[2]))
            return;
    }
    double score;
    if (score_row(api, fts, ctx, argc - 5, argv + 5, &score))
        pool_offer(pool, rowid + sqlite3_value_int64(argv[3]), score);
}

/* fsmem_row_pool(want): the pool's rows, best first, as a blob of native (int64 row id, double score) pairs;
   then an empty pool that keeps at most `want` (a question's offers start with it). */
static void
row_pool(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
    RowPool *pool = sqlite3_user_data(ctx);
    sqlite3_int64 want = argc == 1 ? sqlite3_value_int64(argv[0]) : 0, size = pool->size;
    unsigned char *out = sqlite3_malloc64(size ? (sqlite3_uint64)size * 16 : 1);
    if (out == NULL) {
        sqlite3_result_error_nomem(ctx);
        return;
    }
    for (sqlite3_int64 end = size; end > 0; end--) { /* the worst left goes last */
        memcpy(out + (end - 1) * 16, &pool->rid[0], 8);
        memcpy(out + (end - 1) * 16 + 8, &pool->score[0], 8);
        pool_swap(pool, 0, end - 1);
        pool_sift_down(pool, end - 1, 0);
    }
    sqlite3_result_blob64(ctx, out, (sqlite3_uint64)size * 16, sqlite3_free);
    pool->size = 0;
    if (want < 0)
        want = 0;
    if (want != pool->want) {
        sqlite3_int64 *rid = sqlite3_realloc64(pool->rid, (sqlite3_uint64)(want ? want : 1) * 8);
        if (rid != NULL)
            pool->rid = rid;
        double *score = sqlite3_realloc64(pool->score, (sqlite3_uint64)(want ? want : 1) * 8);
        if (score != NULL)
            pool->score = score;
        if (rid == NULL || score == NULL) {
            pool->want = 0;
            sqlite3_result_error_nomem(ctx);
            return;
        }
        pool->want = want;
    }
}

/* The connection's FTS5 API (SELECT fts5(?1), the pointer bound as `fts5_api_ptr`), in `*fts`. */
static int
fts5_api_of(sqlite3 *db, fts5_api **fts)
{
    sqlite3_stmt *stmt = NULL;
    *fts = NULL;
    int rc = sqlite3_prepare_v2(db, "SELECT fts5(?1)", -1, &stmt, NULL);
    if (rc != SQLITE_OK)
        return rc;
    sqlite3_bind_pointer(stmt, 1, (void *)fts, "fts5_api_ptr", NULL);
    sqlite3_step(stmt);
    rc = sqlite3_finalize(stmt);
    if (rc != SQLITE_OK)
        return rc;
    return *fts == NULL || (*fts)->iVersion < 2 ? SQLITE_ERROR : SQLITE_OK;
}

/* The extension's entry point: registers fsmem_row_score on the connection loading it. */
#ifdef _WIN32
__declspec(dllexport)
#endif
int
sqlite3_fsmemrows_init(sqlite3 *db, char **error, const sqlite3_api_routines *routines)
{
    SQLITE_EXTENSION_INIT2(routines);
    (void)error;
    fts5_api *fts = NULL;
    int rc = fts5_api_of(db, &fts);
    if (rc != SQLITE_OK)
        return rc;
    rc = fts->xCreateFunction(fts, "fsmem_row_score", NULL, row_score, NULL);
    if (rc != SQLITE_OK)
        return rc;
    RowPool *pool = sqlite3_malloc64(sizeof(RowPool));
    if (pool == NULL)
        return SQLITE_NOMEM;
    memset(pool, 0, sizeof(RowPool));
    rc = sqlite3_create_function_v2(db, "fsmem_row_pool", 1, SQLITE_UTF8, pool, row_pool, NULL, NULL, NULL);
    if (rc != SQLITE_OK) {
        pool_free(pool);
        return rc;
    }
    /* the pool is freed with the FTS5 function, when the connection closes */
    return fts->xCreateFunction(fts, "fsmem_row_offer", pool, row_offer, pool_free);
}
#define ROW_SCORE_ENTRY "sqlite3_fsmemrows_init"

/* The rows of a cold build cut by SQLite as it writes them (fsmem.search.raw_rows; the Python twin is the
   analyzer itself: tests/test_raw_rows.py holds the terms equal). Loading this file with `sqlite3_fsmemcut_init`
   puts a tokenizer before FTS5's `ascii` on that connection, under its name, so the tables keep their schema
   and every byte they store: a text that begins with RAW_MARK (a row's ASCII text as the file has it, which a
   worker sends rather than its stems) is cut as fsmem.search.analyzer cuts it (lowercased runs of letters and
   digits, `[D1:3]` markers left out, stop words and machine tokens dropped, Snowball stems), the terms counted
   for its file's document; any other text goes to FTS5's own `ascii`, as before. The stems come from
   PyStemmer's Snowball library, whose functions `cut_setup` finds in its module (loaded already), so the cut
   takes no GIL; each word is stemmed once per connection, then looked up. */

#include <dlfcn.h>

#define RAW_MARK 1
#define CUT_MACHINE_CHARS 20 /* fsmem.search.analyzer.TOKEN_CHARS */

struct sb_stemmer;
static struct sb_stemmer *(*sb_new)(const char *, const char *);
static void (*sb_delete)(struct sb_stemmer *);
static const unsigned char *(*sb_stem)(struct sb_stemmer *, const unsigned char *, int);
static int (*sb_length)(struct sb_stemmer *);
static char *cut_stop_words; /* the stop words, each followed by a NUL, then a NUL */

PyDoc_STRVAR(cut_setup_doc,
             "cut_setup(stemmer_library, stop_words, /) -> bool\n\n"
             "Find Snowball's functions in PyStemmer's module (its file, loaded already) and keep the stop words,\n"
             "for the tokenizer that `cut_entry` registers; False where the functions are not found.");

static PyObject *
cut_setup(PyObject *self, PyObject *args)
{
    (void)self;
    const char *library;
    PyObject *words;
    if (!PyArg_ParseTuple(args, "sO!:cut_setup", &library, &PyTuple_Type, &words))
        return NULL;
    Py_ssize_t size = 1;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(words); i++) {
        Py_ssize_t n;
        if (!PyUnicode_Check(PyTuple_GET_ITEM(words, i)) || PyUnicode_AsUTF8AndSize(PyTuple_GET_ITEM(words, i), &n) == NULL)
            return PyErr_Occurred() ? NULL : (PyErr_SetString(PyExc_TypeError, "cut_setup: stop words are str"), NULL);
        size += n + 1;
    }
    char *kept = PyMem_RawMalloc(size), *at = kept;
    if (kept == NULL)
        return PyErr_NoMemory();
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(words); i++) {
        Py_ssize_t n;
        const char *word = PyUnicode_AsUTF8AndSize(PyTuple_GET_ITEM(words, i), &n);
        memcpy(at, word, n + 1);
        at += n + 1;
    }
    *at = 0;
    void *handle = dlopen(library, RTLD_NOW | RTLD_NOLOAD);
    if (handle == NULL) {
        PyMem_RawFree(kept);
        Py_RETURN_FALSE;
    }
    sb_new = (struct sb_stemmer * (*)(const char *, const char *)) dlsym(handle, "sb_stemmer_new");
    sb_delete = (void (*)(struct sb_stemmer *))dlsym(handle, "sb_stemmer_delete");
    sb_stem = (const unsigned char *(*)(struct sb_stemmer *, const unsigned char *, int))dlsym(handle, "sb_stemmer_stem");
    sb_length = (int (*)(struct sb_stemmer *))dlsym(handle, "sb_stemmer_length");
    /* the module stays loaded (Python never unloads one): the handle's reference is kept with the pointers */
    if (cut_stop_words == NULL)
        cut_stop_words = kept;
    else
        PyMem_RawFree(kept);
    if (sb_new == NULL || sb_delete == NULL || sb_stem == NULL || sb_length == NULL) {
        sb_new = NULL;
        Py_RETURN_FALSE;
    }
    Py_RETURN_TRUE;
}

/* One word seen by a connection's cutter: its bytes, and its term (-1: none, a stop word or a machine token). */
typedef struct {
    char *word; /* NULL: an empty slot */
    int size;
    int term;
} CutWord;

/* A term: its bytes, and how often the raw texts cut since the last `fsmem_cut_take()` held it. */
typedef struct {
    char *stem;
    int size;
    unsigned int count;
} CutTerm;

typedef struct {
    struct sb_stemmer *stemmer;
    fts5_tokenizer ascii; /* FTS5's own, found before this one took its name */
    void *ascii_context;
    CutWord *words; /* open addressing, a power of two slots, at most half full; stems are keyed as 0x01 + stem */
    uint64_t slots, used;
    CutTerm *terms;
    int n_terms, terms_room;
    int *counted, n_counted, counted_room; /* the terms counted since the last take, in the order they came */
    uint64_t length;                       /* the terms counted since the last take, with repeats */
    unsigned int values;                   /* raw texts cut since the last take */
    char *buffer;                          /* a word lowercased */
    int buffer_room;
} Cutter;

typedef struct {
    Cutter *cutter;
    Fts5Tokenizer *ascii;
} CutInstance;

static uint64_t
cut_hash(const unsigned char *at, int size)
{
    uint64_t h = 1469598103934665603ULL;
    for (int i = 0; i < size; i++)
        h = (h ^ at[i]) * 1099511628211ULL;
    return h;
}

static CutWord *
cut_slot(Cutter *cutter, const char *word, int size)
{
    uint64_t i = cut_hash((const unsigned char *)word, size) & (cutter->slots - 1);
    while (cutter->words[i].word != NULL &&
           (cutter->words[i].size != size || memcmp(cutter->words[i].word, word, size) != 0))
        i = (i + 1) & (cutter->slots - 1);
    return &cutter->words[i];
}

/* Room for one more word in the table; SQLITE_NOMEM where there is none. */
static int
cut_room(Cutter *cutter)
{
    if ((cutter->used + 1) * 2 <= cutter->slots)
        return SQLITE_OK;
    uint64_t old = cutter->slots;
    CutWord *before = cutter->words;
    uint64_t slots = old ? old * 2 : 1 << 14;
    CutWord *words = sqlite3_malloc64(slots * sizeof(CutWord));
    if (words == NULL)
        return SQLITE_NOMEM;
    memset(words, 0, slots * sizeof(CutWord));
    cutter->words = words;
    cutter->slots = slots;
    for (uint64_t i = 0; i < old; i++)
        if (before[i].word != NULL)
            *cut_slot(cutter, before[i].word, before[i].size) = before[i];
    sqlite3_free(before);
    return SQLITE_OK;
}

/* A new entry in the table for `key` (not there), with its term; NULL where memory ran out. */
static CutWord *
cut_add(Cutter *cutter, const char *key, int size, int term)
{
    if (cut_room(cutter) != SQLITE_OK)
        return NULL;
    CutWord *slot = cut_slot(cutter, key, size);
    slot->word = sqlite3_malloc(size > 0 ? size : 1);
    if (slot->word == NULL)
        return NULL;
    memcpy(slot->word, key, size);
    slot->size = size;
    slot->term = term;
    cutter->used++;
    return slot;
}

static int
cut_stop_word(const char *word, int size)
{
    for (const char *at = cut_stop_words; at != NULL && *at; at += strlen(at) + 1)
        if ((int)strlen(at) == size && memcmp(at, word, size) == 0)
            return 1;
    return 0;
}

/* fsmem.search.analyzer._machine_token of an ASCII word: 20 characters or more, digits and not only digits. */
static int
cut_machine_token(const char *word, int size)
{
    if (size < CUT_MACHINE_CHARS)
        return 0;
    int digits = 0;
    for (int i = 0; i < size; i++)
        digits += word[i] >= '0' && word[i] <= '9';
    return digits > 0 && digits < size;
}

/* The term of a word not seen yet (-1 for none), as Analyzer._stem_new gives it, kept in the table; -2 where
   memory ran out. */
static int
cut_new_word(Cutter *cutter, const char *word, int size)
{
    int term = -1;
    if (!cut_stop_word(word, size) && !cut_machine_token(word, size)) {
        const unsigned char *stem = sb_stem(cutter->stemmer, (const unsigned char *)word, size);
        if (stem == NULL)
            return -2;
        int stem_size = sb_length(cutter->stemmer);
        if (stem_size > 0) {
            char *key = sqlite3_malloc(stem_size + 1);
            if (key == NULL)
                return -2;
            key[0] = 1;
            memcpy(key + 1, stem, stem_size);
            CutWord *own = cut_slot(cutter, key, stem_size + 1);
            if (own->word == NULL) {
                if (cutter->n_terms == cutter->terms_room) {
                    int room = cutter->terms_room ? cutter->terms_room * 2 : 4096;
                    CutTerm *terms = sqlite3_realloc64(cutter->terms, room * sizeof(CutTerm));
                    if (terms == NULL) {
                        sqlite3_free(key);
                        return -2;
                    }
                    cutter->terms = terms;
                    cutter->terms_room = room;
                }
                own = cut_add(cutter, key, stem_size + 1, cutter->n_terms);
                if (own == NULL) {
                    sqlite3_free(key);
                    return -2;
                }
                cutter->terms[cutter->n_terms] = (CutTerm){own->word + 1, stem_size, 0};
                cutter->n_terms++;
            }
            term = own->term;
            sqlite3_free(key);
        }
    }
    return cut_add(cutter, word, size, term) == NULL ? -2 : term;
}

/* the length of a marker `[` letters* digits+ `:` digits+ `]` (fsmem.search.analyzer._MARKER) at `at`, else 0 */
static int
cut_marker(const unsigned char *at, int left)
{
    int i = 1;
    while (i < left && ((at[i] >= 'a' && at[i] <= 'z') || (at[i] >= 'A' && at[i] <= 'Z')))
        i++;
    int digits = i;
    while (i < left && at[i] >= '0' && at[i] <= '9')
        i++;
    if (i == digits || i >= left || at[i] != ':')
        return 0;
    digits = ++i;
    while (i < left && at[i] >= '0' && at[i] <= '9')
        i++;
    if (i == digits || i >= left || at[i] != ']')
        return 0;
    return i + 1;
}

static int
cut_letter_or_digit(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

/* Cut a raw ASCII text (after its mark, at byte `offset` of the value) into terms: each handed to FTS5 and
   counted. Bytes past ASCII are not word characters here: a worker marks a row raw only when it is ASCII. */
static int
cut_raw(Cutter *cutter, void *ctx, const unsigned char *at, int size, int offset,
        int (*token)(void *, int, const char *, int, int, int))
{
    cutter->values++;
    int i = 0;
    while (i < size) {
        if (at[i] == '[') {
            int skip = cut_marker(at + i, size - i);
            if (skip) {
                i += skip;
                continue;
            }
        }
        if (!cut_letter_or_digit(at[i])) {
            i++;
            continue;
        }
        int start = i;
        while (i < size && cut_letter_or_digit(at[i]))
            i++;
        int n = i - start;
        if (n > cutter->buffer_room) {
            char *buffer = sqlite3_realloc(cutter->buffer, n);
            if (buffer == NULL)
                return SQLITE_NOMEM;
            cutter->buffer = buffer;
            cutter->buffer_room = n;
        }
        for (int k = 0; k < n; k++) {
            unsigned char c = at[start + k];
            cutter->buffer[k] = (char)(c >= 'A' && c <= 'Z' ? c + 32 : c);
        }
        CutWord *slot = cut_slot(cutter, cutter->buffer, n);
        int term = slot->word != NULL ? slot->term : cut_new_word(cutter, cutter->buffer, n);
        if (term == -2)
            return SQLITE_NOMEM;
        if (term < 0)
            continue;
        CutTerm *found = &cutter->terms[term];
        if (found->count++ == 0) {
            if (cutter->n_counted == cutter->counted_room) {
                int room = cutter->counted_room ? cutter->counted_room * 2 : 1024;
                int *counted = sqlite3_realloc64(cutter->counted, room * sizeof(int));
                if (counted == NULL)
                    return SQLITE_NOMEM;
                cutter->counted = counted;
                cutter->counted_room = room;
            }
            cutter->counted[cutter->n_counted++] = term;
        }
        cutter->length++;
        int rc = token(ctx, 0, found->stem, found->size, offset + start, offset + i);
        if (rc != SQLITE_OK)
            return rc;
    }
    return SQLITE_OK;
}

static int
cut_create(void *context, const char **args, int n, Fts5Tokenizer **out)
{
    Cutter *cutter = context;
    CutInstance *instance = sqlite3_malloc(sizeof(CutInstance));
    if (instance == NULL)
        return SQLITE_NOMEM;
    instance->cutter = cutter;
    int rc = cutter->ascii.xCreate(cutter->ascii_context, args, n, &instance->ascii);
    if (rc != SQLITE_OK) {
        sqlite3_free(instance);
        return rc;
    }
    *out = (Fts5Tokenizer *)instance;
    return SQLITE_OK;
}

static void
cut_delete(Fts5Tokenizer *tokenizer)
{
    CutInstance *instance = (CutInstance *)tokenizer;
    instance->cutter->ascii.xDelete(instance->ascii);
    sqlite3_free(instance);
}

static int
cut_tokenize(Fts5Tokenizer *tokenizer, void *ctx, int flags, const char *text, int size,
             int (*token)(void *, int, const char *, int, int, int))
{
    CutInstance *instance = (CutInstance *)tokenizer;
    if ((flags & FTS5_TOKENIZE_DOCUMENT) && size > 0 && text[0] == RAW_MARK)
        return cut_raw(instance->cutter, ctx, (const unsigned char *)text + 1, size - 1, 1, token);
    return instance->cutter->ascii.xTokenize(instance->ascii, ctx, flags, text, size, token);
}

static void
cutter_free(void *data)
{
    Cutter *cutter = data;
    for (uint64_t i = 0; i < cutter->slots; i++)
        sqlite3_free(cutter->words[i].word);
    sqlite3_free(cutter->words);
    sqlite3_free(cutter->terms);
    sqlite3_free(cutter->counted);
    sqlite3_free(cutter->buffer);
    if (cutter->stemmer != NULL)
        sb_delete(cutter->stemmer);
    sqlite3_free(cutter);
}

/* fsmem_cut_take(): what the raw texts cut since the last call held, as a blob: the texts cut, the distinct
   terms and all the terms (4 bytes each, native order), each distinct term's count (4 bytes), then the distinct
   terms, space separated, in the order they first came (fsmem.search.raw_rows.take reads it). */
static void
cut_take(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
    (void)argc;
    (void)argv;
    Cutter *cutter = sqlite3_user_data(ctx);
    sqlite3_int64 size = 12 + 4 * (sqlite3_int64)cutter->n_counted;
    for (int i = 0; i < cutter->n_counted; i++)
        size += cutter->terms[cutter->counted[i]].size + 1;
    unsigned char *out = sqlite3_malloc64(size), *at = out;
    if (out == NULL) {
        sqlite3_result_error_nomem(ctx);
        return;
    }
    unsigned int head[3] = {cutter->values, (unsigned int)cutter->n_counted, (unsigned int)cutter->length};
    memcpy(at, head, 12);
    at += 12;
    for (int i = 0; i < cutter->n_counted; i++) {
        CutTerm *term = &cutter->terms[cutter->counted[i]];
        memcpy(at, &term->count, 4);
        at += 4;
        term->count = 0;
    }
    for (int i = 0; i < cutter->n_counted; i++) {
        CutTerm *term = &cutter->terms[cutter->counted[i]];
        if (i)
            *at++ = ' ';
        memcpy(at, term->stem, term->size);
        at += term->size;
    }
    cutter->n_counted = 0;
    cutter->length = 0;
    cutter->values = 0;
    sqlite3_result_blob64(ctx, out, at - out, sqlite3_free);
}

/* The cutting entry point: puts the tokenizer before FTS5's `ascii` on the connection loading it, and
   registers `fsmem_cut_take()`. SQLITE_ERROR where `cut_setup` found no stemmer. */
#ifdef _WIN32
__declspec(dllexport)
#endif
int
sqlite3_fsmemcut_init(sqlite3 *db, char **error, const sqlite3_api_routines *routines)
{
    SQLITE_EXTENSION_INIT2(routines);
    (void)error;
    if (sb_new == NULL)
        return SQLITE_ERROR;
    fts5_api *fts = NULL;
    int rc = fts5_api_of(db, &fts);
    if (rc != SQLITE_OK)
        return rc;
    Cutter *cutter = sqlite3_malloc(sizeof(Cutter));
    if (cutter == NULL)
        return SQLITE_NOMEM;
    memset(cutter, 0, sizeof(Cutter));
    rc = fts->xFindTokenizer(fts, "ascii", &cutter->ascii_context, &cutter->ascii);
    if (rc == SQLITE_OK && cut_room(cutter) != SQLITE_OK)
        rc = SQLITE_NOMEM;
    if (rc == SQLITE_OK && (cutter->stemmer = sb_new("english", "UTF_8")) == NULL)
        rc = SQLITE_ERROR;
    if (rc != SQLITE_OK) {
        cutter_free(cutter);
        return rc;
    }
    rc = sqlite3_create_function_v2(db, "fsmem_cut_take", 0, SQLITE_UTF8, cutter, cut_take, NULL, NULL, NULL);
    if (rc != SQLITE_OK) {
        cutter_free(cutter);
        return rc;
    }
    static fts5_tokenizer cut = {cut_create, cut_delete, cut_tokenize};
    /* the cutter is freed with the tokenizer, when the connection closes (fsmem_cut_take goes with it) */
    return fts->xCreateTokenizer(fts, "ascii", cutter, &cut, cutter_free);
}
#define CUT_ENTRY "sqlite3_fsmemcut_init"
#endif

/* pool_relevance: the relevance of each candidate row (fsmem.search.scoring._pool_relevance is its twin). */

PyDoc_STRVAR(pool_relevance_doc,
             "pool_relevance(pool, files, raw, groups, w_row, w_neighbours, w_document, row_den, parts, shift,\n"
             "               linked) -> (dict, dict, dict)\n\n"
             "For each row id of `pool` (a list), in its order: its relevance, its file's path and its line, as\n"
             "three dicts by row id. `files`: file id (row id >> shift) -> (path, packed rows: an array of 'H' or\n"
             "'I', cited-note numbers: an array of 'B' or 'H' or None, the notes cited: a tuple, subject part: a\n"
             "float). `raw`: row id -> its row part; `groups`: a note, or a file's own document (file id << shift),\n"
             "-> its document part. The same floats as the twin: the same operations in the same order.");

typedef struct {
    long long fid;
    PyObject *path, *sources, *own; /* borrowed, borrowed, owned (made when first needed) */
    Py_buffer rows, cited;          /* cited.obj: NULL where no row cites a note */
    double subject;
} PoolFile;

static int
pool_file_order(const void *a, const void *b)
{
    long long x = ((const PoolFile *)a)->fid, y = ((const PoolFile *)b)->fid;
    return (x > y) - (x < y);
}

/* The value at `at` of an array of unsigned values of `itemsize` bytes (1, 2 or 4), or -1 past its end. */
static long long
unsigned_at(const Py_buffer *values, long long at)
{
    Py_ssize_t size = values->itemsize;
    if (at < 0 || at >= values->len / size)
        return -1;
    const unsigned char *p = (const unsigned char *)values->buf + at * size;
    if (size == 1)
        return p[0];
    if (size == 2) {
        uint16_t value;
        memcpy(&value, p, 2);
        return value;
    }
    uint32_t value;
    memcpy(&value, p, 4);
    return value;
}

/* `raw`'s value for row id `rid` (`key`: its int, or NULL to make one), 0.0 when it has none; -1.0 with an
   error set on failure (`*failed`). */
static double
raw_of(PyObject *raw, PyObject *key, long long rid, int *failed)
{
    PyObject *made = NULL;
    if (key == NULL) {
        key = made = PyLong_FromLongLong(rid);
        if (made == NULL) {
            *failed = 1;
            return -1.0;
        }
    }
    PyObject *value = PyDict_GetItemWithError(raw, key);
    Py_XDECREF(made);
    if (value == NULL) {
        if (PyErr_Occurred())
            *failed = 1;
        return 0.0;
    }
    double found = PyFloat_AsDouble(value);
    if (found == -1.0 && PyErr_Occurred())
        *failed = 1;
    return found;
}

static int
packed_format(const Py_buffer *view, const char *codes)
{
    const char *format = view->format == NULL ? "B" : view->format;
    if (format[1] != '\0' || strchr(codes, format[0]) == NULL)
        return 0;
    return view->itemsize == (format[0] == 'B' ? 1 : format[0] == 'H' ? 2 : 4);
}

/* A dict made to hold `n` items without growing (each growth moves every item already in it): the candidates'
   dicts of a new question hold 2,000-3,000 items. Private in CPython; PyDict_New past the versions that export it. */
static PyObject *
dict_for(Py_ssize_t n)
{
#if PY_VERSION_HEX < 0x030D0000
    return _PyDict_NewPresized(n);
#else
    (void)n;
    return PyDict_New();
#endif
}

static PyObject *
pool_relevance(PyObject *self, PyObject *args)
{
    PyObject *pool, *files, *raw, *groups;
    double w_row, w_neighbours, w_document, row_den, parts;
    int shift;
    long long linked;
    if (!PyArg_ParseTuple(args, "O!O!O!O!dddddiL", &PyList_Type, &pool, &PyDict_Type, &files, &PyDict_Type, &raw,
                          &PyDict_Type, &groups, &w_row, &w_neighbours, &w_document, &row_den, &parts, &shift,
                          &linked))
        return NULL;
    if (shift < 1 || shift > 62) {
        PyErr_SetString(PyExc_ValueError, "shift out of range");
        return NULL;
    }
    if (PyList_GET_SIZE(pool) && (row_den == 0.0 || parts == 0.0)) {
        PyErr_SetString(PyExc_ZeroDivisionError, "float division by zero");
        return NULL;
    }
    Py_ssize_t n_files = PyDict_GET_SIZE(files), filled = 0, pos = 0;
    PoolFile *by_fid = PyMem_Calloc(n_files ? (size_t)n_files : 1, sizeof(PoolFile));
    Py_ssize_t n_pool = PyList_GET_SIZE(pool);
    PyObject *relevance = dict_for(n_pool), *paths = dict_for(n_pool), *lines = dict_for(n_pool), *result = NULL;
    if (by_fid == NULL || relevance == NULL || paths == NULL || lines == NULL) {
        if (by_fid == NULL)
            PyErr_NoMemory();
        goto done;
    }
    PyObject *key, *value;
    while (PyDict_Next(files, &pos, &key, &value)) {
        PoolFile *file = &by_fid[filled];
        if (!PyLong_Check(key) || !PyTuple_Check(value) || PyTuple_GET_SIZE(value) != 5 ||
            !PyTuple_Check(PyTuple_GET_ITEM(value, 3))) {
            PyErr_SetString(PyExc_TypeError, "files: file id -> (path, rows, cited, sources, subject)");
            goto done;
        }
        file->fid = PyLong_AsLongLong(key);
        if (file->fid == -1 && PyErr_Occurred())
            goto done;
        file->path = PyTuple_GET_ITEM(value, 0);
        file->sources = PyTuple_GET_ITEM(value, 3);
        file->subject = PyFloat_AsDouble(PyTuple_GET_ITEM(value, 4));
        if (file->subject == -1.0 && PyErr_Occurred())
            goto done;
        if (PyObject_GetBuffer(PyTuple_GET_ITEM(value, 1), &file->rows, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) < 0)
            goto done;
        filled++;
        if (!packed_format(&file->rows, "HI")) {
            PyErr_SetString(PyExc_TypeError, "packed rows: an array of 'H' or 'I' values");
            goto done;
        }
        PyObject *cited = PyTuple_GET_ITEM(value, 2);
        if (cited != Py_None) {
            if (PyObject_GetBuffer(cited, &file->cited, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) < 0)
                goto done;
            if (!packed_format(&file->cited, "BH")) {
                PyErr_SetString(PyExc_TypeError, "cited notes: an array of 'B' or 'H' values");
                goto done;
            }
        }
    }
    qsort(by_fid, (size_t)filled, sizeof(PoolFile), pool_file_order);
    long long mask = (1LL << shift) - 1;
    PoolFile *file = NULL;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(pool); i++) {
        PyObject *item = PyList_GET_ITEM(pool, i);
        long long rid = PyLong_AsLongLong(item);
        if (rid == -1 && PyErr_Occurred())
            goto done;
        if (rid < 0) {
            PyErr_SetString(PyExc_ValueError, "a negative row id");
            goto done;
        }
        long long fid = rid >> shift, ordinal = rid & mask;
        if (file == NULL || file->fid != fid) {
            Py_ssize_t low = 0, high = filled;
            while (low < high) {
                Py_ssize_t middle = low + (high - low) / 2;
                if (by_fid[middle].fid < fid)
                    low = middle + 1;
                else
                    high = middle;
            }
            if (low == filled || by_fid[low].fid != fid) {
                PyErr_SetString(PyExc_KeyError, "a row of a file not in files");
                goto done;
            }
            file = &by_fid[low];
        }
        long long packed = unsigned_at(&file->rows, ordinal);
        if (packed < 0) {
            PyErr_SetString(PyExc_IndexError, "a row past its file's packed rows");
            goto done;
        }
        int failed = 0;
        double neighbours = 0.0;
        if (ordinal && unsigned_at(&file->rows, ordinal - 1) & linked)
            neighbours += raw_of(raw, NULL, rid - 1, &failed);
        if (packed & linked && ordinal + 1 < file->rows.len / file->rows.itemsize)
            neighbours += raw_of(raw, NULL, rid + 1, &failed);
        double own_raw = raw_of(raw, item, rid, &failed);
        if (failed)
            goto done;
        double score = (w_row * own_raw + w_neighbours * neighbours) / row_den;
        if (w_document != 0.0) {
            long long number = file->cited.obj != NULL ? unsigned_at(&file->cited, ordinal) : 0;
            PyObject *group;
            if (number < 0 || number > PyTuple_GET_SIZE(file->sources)) {
                PyErr_SetString(PyExc_IndexError, "a row's cited note out of range");
                goto done;
            }
            if (number) {
                group = PyTuple_GET_ITEM(file->sources, number - 1);
            } else {
                if (file->own == NULL && (file->own = PyLong_FromLongLong(fid << shift)) == NULL)
                    goto done;
                group = file->own;
            }
            PyObject *part = PyDict_GetItemWithError(groups, group);
            double document = 0.0;
            if (part == NULL && PyErr_Occurred())
                goto done;
            if (part != NULL) {
                document = PyFloat_AsDouble(part);
                if (document == -1.0 && PyErr_Occurred())
                    goto done;
            }
            score += w_document * document;
        }
        score += file->subject;
        PyObject *relevant = PyFloat_FromDouble(score / parts);
        if (relevant == NULL)
            goto done;
        int stored = PyDict_SetItem(relevance, item, relevant);
        Py_DECREF(relevant);
        if (stored < 0 || PyDict_SetItem(paths, item, file->path) < 0)
            goto done;
        PyObject *line = PyLong_FromLongLong(packed >> 2);
        if (line == NULL)
            goto done;
        stored = PyDict_SetItem(lines, item, line);
        Py_DECREF(line);
        if (stored < 0)
            goto done;
    }
    result = PyTuple_Pack(3, relevance, paths, lines);
done:
    for (Py_ssize_t at = 0; at < filled; at++) {
        PyBuffer_Release(&by_fid[at].rows);
        if (by_fid[at].cited.obj != NULL)
            PyBuffer_Release(&by_fid[at].cited);
        Py_XDECREF(by_fid[at].own);
    }
    PyMem_Free(by_fid);
    Py_XDECREF(relevance);
    Py_XDECREF(paths);
    Py_XDECREF(lines);
    return result;
}

PyDoc_STRVAR(scaled_documents_doc,
             "scaled_documents(positions, scores, ids, denominator) -> dict\n\n"
             "{ids[at]: score / denominator} for each position `at` of `positions` (ints) and its score of `scores`\n"
             "(floats), in their order; `ids` an array of 'q' values: a new question's document part as\n"
             "fsmem.search.documents.scaled makes it (its twin).");

static PyObject *
scaled_documents(PyObject *self, PyObject *args)
{
    PyObject *positions, *scores, *ids_obj;
    double denominator;
    if (!PyArg_ParseTuple(args, "O!O!Od", &PyList_Type, &positions, &PyList_Type, &scores, &ids_obj, &denominator))
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(positions);
    if (PyList_GET_SIZE(scores) != n) {
        PyErr_SetString(PyExc_ValueError, "positions and scores of different lengths");
        return NULL;
    }
    if (n && denominator == 0.0) {
        PyErr_SetString(PyExc_ZeroDivisionError, "float division by zero");
        return NULL;
    }
    Py_buffer view;
    if (typed_buffer(ids_obj, &view, 'q', 8, "ids") < 0)
        return NULL;
    const long long *ids = (const long long *)view.buf;
    Py_ssize_t count = view.len / 8;
    PyObject *out = dict_for(n);
    if (out == NULL)
        goto failed;
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_ssize_t at = PyLong_AsSsize_t(PyList_GET_ITEM(positions, i));
        if (at == -1 && PyErr_Occurred())
            goto failed;
        if (at < 0 || at >= count) {
            PyErr_SetString(PyExc_IndexError, "array index out of range");
            goto failed;
        }
        double score = PyFloat_AsDouble(PyList_GET_ITEM(scores, i));
        if (score == -1.0 && PyErr_Occurred())
            goto failed;
        PyObject *key = PyLong_FromLongLong(ids[at]);
        PyObject *value = key == NULL ? NULL : PyFloat_FromDouble(score / denominator);
        if (value == NULL || PyDict_SetItem(out, key, value) < 0) {
            Py_XDECREF(key);
            Py_XDECREF(value);
            goto failed;
        }
        Py_DECREF(key);
        Py_DECREF(value);
    }
    PyBuffer_Release(&view);
    return out;
failed:
    Py_XDECREF(out);
    PyBuffer_Release(&view);
    return NULL;
}

PyDoc_STRVAR(salience_scores_doc,
             "salience_scores(pool, base, relevance, paths, lines, by_path, w_usage, most, shift) -> dict | None\n\n"
             "{rid: relevance[rid] * factor} for each row id of `pool`, in its order: the factor its file's\n"
             "`base[rid >> shift]`, plus w_usage * log1p(used) / most where the retrieval log returned the row\n"
             "(`by_path[paths[rid]][lines[rid]]`, None: no usage): what fsmem.search.scoring.salience_scores's\n"
             "twin gives, to the bit; None where a value is not of the types it takes (a float, an int of 64 bits\n"
             "at least 0, a dict), for the twin to score or to raise.");

/* An int (exactly) of 0 to 2**63 - 1 as a long long, else -1 (an error set where one was raised). */
static long long
natural_of(PyObject *value)
{
    if (!PyLong_CheckExact(value))
        return -1;
    int overflow = 0;
    long long found = PyLong_AsLongLongAndOverflow(value, &overflow);
    return overflow || found < 0 ? -1 : found;
}

static PyObject *
salience_scores(PyObject *self, PyObject *args)
{
    PyObject *pool, *base, *relevance, *paths, *lines, *by_path;
    double w_usage, most;
    int shift;
    if (!PyArg_ParseTuple(args, "O!O!O!O!O!Oddi", &PyList_Type, &pool, &PyDict_Type, &base, &PyDict_Type,
                          &relevance, &PyDict_Type, &paths, &PyDict_Type, &lines, &by_path, &w_usage, &most, &shift))
        return NULL;
    if (shift < 1 || shift > 62) {
        PyErr_SetString(PyExc_ValueError, "shift out of range");
        return NULL;
    }
    if (by_path != Py_None && !PyDict_Check(by_path))
        Py_RETURN_NONE;
    PyObject *scores = dict_for(PyList_GET_SIZE(pool));
    if (scores == NULL)
        return NULL;
    long long last_fid = -1;
    double file_factor = 0.0;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(pool); i++) {
        PyObject *rid = PyList_GET_ITEM(pool, i);
        long long id = natural_of(rid);
        if (id < 0)
            goto out;
        long long fid = id >> shift;
        if (fid != last_fid) {
            PyObject *key = PyLong_FromLongLong(fid);
            if (key == NULL)
                goto out;
            PyObject *found = PyDict_GetItemWithError(base, key);
            Py_DECREF(key);
            if (found == NULL || !PyFloat_CheckExact(found))
                goto out; /* a missing key: its KeyError is the twin's to raise */
            file_factor = PyFloat_AS_DOUBLE(found);
            last_fid = fid;
        }
        double factor = file_factor;
        if (by_path != Py_None) {
            PyObject *path = PyDict_GetItemWithError(paths, rid);
            if (path == NULL)
                goto out;
            PyObject *counts = PyDict_GetItemWithError(by_path, path);
            if (counts == NULL && PyErr_Occurred())
                goto out;
            if (counts != NULL && counts != Py_None) {
                if (!PyDict_Check(counts))
                    goto out;
                if (PyDict_GET_SIZE(counts)) {
                    PyObject *line = PyDict_GetItemWithError(lines, rid);
                    if (line == NULL)
                        goto out;
                    PyObject *used = PyDict_GetItemWithError(counts, line);
                    if (used == NULL && PyErr_Occurred())
                        goto out;
                    if (used != NULL) {
                        long long times = natural_of(used);
                        if (times < 0)
                            goto out;
                        if (times) /* a row never returned adds nothing */
                            factor += w_usage * log1p((double)times) / most;
                    }
                }
            }
        }
        PyObject *own = PyDict_GetItemWithError(relevance, rid);
        if (own == NULL || !PyFloat_CheckExact(own))
            goto out;
        PyObject *value = PyFloat_FromDouble(PyFloat_AS_DOUBLE(own) * factor);
        if (value == NULL)
            goto out;
        int stored = PyDict_SetItem(scores, rid, value);
        Py_DECREF(value);
        if (stored < 0)
            goto out;
    }
    return scores;
out: /* an error raised, else a missing key or a value of another type: the twin's to score or to raise */
    Py_DECREF(scores);
    if (PyErr_Occurred())
        return NULL;
    Py_RETURN_NONE;
}

/* A candidate row as best_first_rows orders them: its score, path and line, and where it was in the pool. */
typedef struct {
    double score;
    PyObject *path; /* borrowed: the paths dict holds it */
    long long line;
    Py_ssize_t at;
} RankedRow;

static int
ranked_row_order(const void *a, const void *b)
{
    const RankedRow *x = (const RankedRow *)a, *y = (const RankedRow *)b;
    if (x->score != y->score)
        return x->score > y->score ? -1 : 1;
    if (x->path != y->path) {
        int by_path = PyUnicode_Compare(x->path, y->path); /* both str: it cannot fail */
        if (by_path)
            return by_path;
    }
    if (x->line != y->line)
        return x->line < y->line ? -1 : 1;
    return x->at < y->at ? -1 : x->at > y->at;
}

PyDoc_STRVAR(best_first_rows_doc,
             "best_first_rows(pool, scores, paths, lines) -> list\n\n"
             "The row ids of `pool` by score descending (floats of `scores`), then path (str of `paths`), then line\n"
             "(int of `lines`), rows equal in all three in the pool's order: what\n"
             "fsmem.search.scoring._best_first's three stable sorts give (its twin); None where a value is not of\n"
             "those types or a score is NaN, for the twin to sort.");

static PyObject *
best_first_rows(PyObject *self, PyObject *args)
{
    PyObject *pool, *scores, *paths, *lines;
    if (!PyArg_ParseTuple(args, "O!O!O!O!", &PyList_Type, &pool, &PyDict_Type, &scores, &PyDict_Type, &paths,
                          &PyDict_Type, &lines))
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(pool);
    RankedRow *rows = PyMem_Malloc((n ? n : 1) * sizeof(RankedRow));
    if (rows == NULL)
        return PyErr_NoMemory();
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *rid = PyList_GET_ITEM(pool, i);
        PyObject *score = PyDict_GetItemWithError(scores, rid);
        PyObject *path = score == NULL ? NULL : PyDict_GetItemWithError(paths, rid);
        PyObject *line = path == NULL ? NULL : PyDict_GetItemWithError(lines, rid);
        if (line == NULL) {
            if (!PyErr_Occurred())
                PyErr_SetObject(PyExc_KeyError, rid);
            PyMem_Free(rows);
            return NULL;
        }
        int overflow = 0;
        rows[i].line = PyLong_CheckExact(line) ? PyLong_AsLongLongAndOverflow(line, &overflow) : 0;
        rows[i].score = PyFloat_CheckExact(score) ? PyFloat_AS_DOUBLE(score) : 0.0;
        rows[i].path = path;
        rows[i].at = i;
        if (!PyFloat_CheckExact(score) || rows[i].score != rows[i].score || !PyUnicode_CheckExact(path) ||
            !PyLong_CheckExact(line) || overflow) {
            PyMem_Free(rows); /* not a float, a NaN, not a str, not an int or a huge one: left to the twin */
            Py_RETURN_NONE;
        }
    }
    qsort(rows, (size_t)n, sizeof(RankedRow), ranked_row_order);
    PyObject *out = PyList_New(n);
    if (out != NULL) {
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *rid = PyList_GET_ITEM(pool, rows[i].at);
            Py_INCREF(rid);
            PyList_SET_ITEM(out, i, rid);
        }
    }
    PyMem_Free(rows);
    return out;
}

static PyMethodDef methods[] = {
    {"term_parts", term_parts, METH_VARARGS, term_parts_doc},
    {"best_documents", best_documents, METH_VARARGS, best_documents_doc},
    {"best_rows", best_rows, METH_VARARGS, best_rows_doc},
    {"pool_relevance", pool_relevance, METH_VARARGS, pool_relevance_doc},
    {"salience_scores", salience_scores, METH_VARARGS, salience_scores_doc},
    {"scaled_documents", scaled_documents, METH_VARARGS, scaled_documents_doc},
    {"best_first_rows", best_first_rows, METH_VARARGS, best_first_rows_doc},
    {"stemmed_texts", stemmed_texts, METH_VARARGS, stemmed_texts_doc},
    {"plain_rows", plain_rows, METH_VARARGS, plain_rows_doc},
    {"plain_sections", plain_sections, METH_VARARGS, plain_sections_doc},
    {"row_columns", row_columns, METH_VARARGS, row_columns_doc},
    {"add_postings", add_postings, METH_VARARGS, add_postings_doc},
    {"encode_postings", encode_postings, METH_VARARGS, encode_postings_doc},
#ifdef CUT_ENTRY
    {"cut_setup", cut_setup, METH_VARARGS, cut_setup_doc},
#endif
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    "fsmem.search._native",
    "The document part of fsmem's search score, and a cold build's cutting of rows and words, in C (their "
    "Python twins: fsmem.search.postings, fsmem.format.rows, fsmem.search.analyzer).",
    -1,
    methods,
};

PyMODINIT_FUNC
PyInit__native(void)
{
    PyObject *array_module = PyImport_ImportModule("array");
    if (array_module == NULL)
        return NULL;
    array_type = PyObject_GetAttrString(array_module, "array");
    Py_DECREF(array_module);
    if (array_type == NULL)
        return NULL;
    if (PyType_Ready(&WordMemoType) < 0)
        return NULL;
    PyObject *found = PyModule_Create(&module);
    if (found == NULL)
        return NULL;
    if (PyModule_AddObjectRef(found, "WordMemo", (PyObject *)&WordMemoType) < 0) {
        Py_DECREF(found);
        return NULL;
    }
#ifdef ROW_SCORE_ENTRY
    if (PyModule_AddStringConstant(found, "row_score_entry", ROW_SCORE_ENTRY) < 0) {
#else
    if (PyModule_AddObjectRef(found, "row_score_entry", Py_None) < 0) {
#endif
        Py_DECREF(found);
        return NULL;
    }
#ifdef CUT_ENTRY
    if (PyModule_AddStringConstant(found, "cut_entry", CUT_ENTRY) < 0) {
#else
    if (PyModule_AddObjectRef(found, "cut_entry", Py_None) < 0) {
#endif
        Py_DECREF(found);
        return NULL;
    }
    return found;
}
