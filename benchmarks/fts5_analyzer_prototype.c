/* A prototype for benchmarks/bench_fts5_tokenizer.py, not part of fsmem: an FTS5 tokenizer that cuts a row's raw
   text as fsmem.search.analyzer does (lowercase ASCII letters and digits, `[D1:3]` markers left out) and maps each
   word through a table of word -> stem filled beforehand (`fsmem_proto_put(word, stem)`; "" drops a stop word or a
   machine token). A word not in the table is emitted as it is and counted (`fsmem_proto_misses()`): the benchmark
   fills the table from an analyzer that has seen the corpus, so the tokenizer's cost is the least an integrated
   one could have (no stemming of new words, no document counts, no Unicode words). Built by the benchmark with
   gcc as a SQLite extension (entry point `sqlite3_fsmemproto_init`). */
#include <sqlite3ext.h>
SQLITE_EXTENSION_INIT1
#include <stdint.h>
#include <string.h>

typedef struct {
    char *word; /* NULL: empty slot */
    int size;
    char *stem;
    int stem_size;
    int term; /* its stem's index in `terms` */
} Entry;

typedef struct {
    int count; /* its occurrences since the last fsmem_proto_take() */
} Term;

static Entry *entries;
static uint64_t capacity, used;
static long long misses;
/* with counting on (fsmem_proto_counting(1)): each term's count, and the terms counted, in the order they first
   occurred, since the last fsmem_proto_take() */
static Term *terms;
static int n_terms, terms_capacity, counting;
static long long calls; /* FTS5 cuts a row's columns in order: with counting, the even calls are the `text` column's */
static int *touched, n_touched, touched_capacity;
static Entry **term_entry; /* a term's first entry: its stem's bytes */

static uint64_t
hash_of(const unsigned char *at, int size)
{
    uint64_t h = 1469598103934665603ULL;
    for (int i = 0; i < size; i++)
        h = (h ^ at[i]) * 1099511628211ULL;
    return h;
}

static Entry *
slot_of(const char *word, int size)
{
    uint64_t i = hash_of((const unsigned char *)word, size) & (capacity - 1);
    while (entries[i].word != NULL && (entries[i].size != size || memcmp(entries[i].word, word, size) != 0))
        i = (i + 1) & (capacity - 1);
    return &entries[i];
}

static int
grow(void)
{
    uint64_t old = capacity;
    Entry *before = entries;
    capacity = old ? old * 2 : 1 << 16;
    entries = sqlite3_malloc64(capacity * sizeof(Entry));
    if (entries == NULL)
        return SQLITE_NOMEM;
    memset(entries, 0, capacity * sizeof(Entry));
    for (uint64_t i = 0; i < old; i++)
        if (before[i].word != NULL)
            *slot_of(before[i].word, before[i].size) = before[i];
    sqlite3_free(before);
    return SQLITE_OK;
}

static void
proto_put(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
    (void)argc;
    const char *word = (const char *)sqlite3_value_text(argv[0]);
    int size = sqlite3_value_bytes(argv[0]);
    const char *stem = (const char *)sqlite3_value_text(argv[1]);
    int stem_size = sqlite3_value_bytes(argv[1]);
    if ((used + 1) * 2 > capacity && grow() != SQLITE_OK) {
        sqlite3_result_error_nomem(ctx);
        return;
    }
    Entry *slot = slot_of(word, size);
    if (slot->word != NULL)
        return;
    /* the stem's term: a linear search would be slow, so stems are put into the table too, under "\1" + stem */
    int term = -1;
    if (stem_size) {
        char key[300];
        if (stem_size + 1 > (int)sizeof(key))
            return;
        key[0] = 1;
        memcpy(key + 1, stem, stem_size);
        Entry *own = slot_of(key, stem_size + 1);
        if (own->word == NULL) {
            if (n_terms == terms_capacity) {
                terms_capacity = terms_capacity ? terms_capacity * 2 : 1 << 16;
                terms = sqlite3_realloc64(terms, terms_capacity * sizeof(Term));
                term_entry = sqlite3_realloc64(term_entry, terms_capacity * sizeof(Entry *));
            }
            own->word = sqlite3_malloc(stem_size + 2);
            memcpy(own->word, key, stem_size + 1);
            own->size = stem_size + 1;
            own->stem = own->word + 1;
            own->stem_size = stem_size;
            own->term = n_terms;
            terms[n_terms].count = 0;
            term_entry[n_terms] = own;
            n_terms++;
            used++;
            if ((used + 1) * 2 > capacity && grow() != SQLITE_OK) {
                sqlite3_result_error_nomem(ctx);
                return;
            }
            slot = slot_of(word, size);
            own = slot_of(key, stem_size + 1);
        }
        term = own->term;
    }
    slot->word = sqlite3_malloc(size + stem_size + 2);
    memcpy(slot->word, word, size + 1);
    slot->size = size;
    slot->stem = slot->word + size + 1;
    memcpy(slot->stem, stem, stem_size + 1);
    slot->stem_size = stem_size;
    slot->term = term;
    used++;
}

static void
proto_counting(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
    (void)argc;
    counting = sqlite3_value_int(argv[0]);
    sqlite3_result_null(ctx);
}

/* the terms counted since the last call, space separated, a NUL, and their counts (4 bytes each) */
static void
proto_take(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
    (void)argc;
    (void)argv;
    sqlite3_int64 size = 1 + 4 * (sqlite3_int64)n_touched;
    for (int i = 0; i < n_touched; i++)
        size += term_entry[touched[i]]->stem_size + 1;
    unsigned char *out = sqlite3_malloc64(size), *at = out;
    for (int i = 0; i < n_touched; i++) {
        Entry *own = term_entry[touched[i]];
        if (i)
            *at++ = ' ';
        memcpy(at, own->stem, own->stem_size);
        at += own->stem_size;
    }
    *at++ = 0;
    for (int i = 0; i < n_touched; i++) {
        memcpy(at, &terms[touched[i]].count, 4);
        at += 4;
        terms[touched[i]].count = 0;
    }
    n_touched = 0;
    calls = 0;
    sqlite3_result_blob64(ctx, out, at - out, sqlite3_free);
}

static void
proto_misses(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
    (void)argc;
    (void)argv;
    sqlite3_result_int64(ctx, misses);
}

static int
proto_create(void *context, const char **args, int n, Fts5Tokenizer **out)
{
    (void)context;
    (void)args;
    (void)n;
    *out = (Fts5Tokenizer *)&entries; /* no state of its own */
    return SQLITE_OK;
}

static void
proto_delete(Fts5Tokenizer *tokenizer)
{
    (void)tokenizer;
}

static int
is_word(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c >= 0x80;
}

/* the length of a marker `[` letters* digits+ `:` digits+ `]` at `at`, else 0 */
static int
marker_at(const unsigned char *at, int left)
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
proto_tokenize(Fts5Tokenizer *tokenizer, void *ctx, int flags, const char *text, int size,
               int (*token)(void *, int, const char *, int, int, int))
{
    (void)tokenizer;
    (void)flags;
    int count = counting && calls++ % 2 == 0;
    const unsigned char *at = (const unsigned char *)text;
    char word[256];
    int i = 0;
    while (i < size) {
        if (at[i] == '[') {
            int skip = marker_at(at + i, size - i);
            if (skip) {
                i += skip;
                continue;
            }
        }
        if (!is_word(at[i])) {
            i++;
            continue;
        }
        int start = i, n = 0;
        while (i < size && is_word(at[i])) {
            if (n < (int)sizeof(word))
                word[n++] = (at[i] >= 'A' && at[i] <= 'Z') ? (char)(at[i] + 32) : (char)at[i];
            i++;
        }
        const char *stem = word;
        int stem_size = n;
        if (capacity) {
            Entry *slot = slot_of(word, n);
            if (slot->word != NULL) {
                stem = slot->stem;
                stem_size = slot->stem_size;
                if (count && slot->term >= 0) {
                    Term *counted = &terms[slot->term];
                    if (counted->count++ == 0) {
                        if (n_touched == touched_capacity) {
                            touched_capacity = touched_capacity ? touched_capacity * 2 : 4096;
                            touched = sqlite3_realloc64(touched, touched_capacity * sizeof(int));
                        }
                        touched[n_touched++] = slot->term;
                    }
                }
            } else
                misses++;
        }
        if (stem_size) {
            int rc = token(ctx, 0, stem, stem_size, start, i);
            if (rc != SQLITE_OK)
                return rc;
        }
    }
    return SQLITE_OK;
}

#ifdef _WIN32
__declspec(dllexport)
#endif
int
sqlite3_fsmemproto_init(sqlite3 *db, char **error, const sqlite3_api_routines *routines)
{
    SQLITE_EXTENSION_INIT2(routines);
    (void)error;
    fts5_api *fts = NULL;
    sqlite3_stmt *stmt = NULL;
    int rc = sqlite3_prepare_v2(db, "SELECT fts5(?1)", -1, &stmt, NULL);
    if (rc != SQLITE_OK)
        return rc;
    sqlite3_bind_pointer(stmt, 1, (void *)&fts, "fts5_api_ptr", NULL);
    sqlite3_step(stmt);
    rc = sqlite3_finalize(stmt);
    if (rc != SQLITE_OK || fts == NULL)
        return rc ? rc : SQLITE_ERROR;
    static fts5_tokenizer tokenizer = {proto_create, proto_delete, proto_tokenize};
    rc = fts->xCreateTokenizer(fts, "fsmemproto", NULL, &tokenizer, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_create_function_v2(db, "fsmem_proto_put", 2, SQLITE_UTF8, NULL, proto_put, NULL, NULL, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_create_function_v2(db, "fsmem_proto_misses", 0, SQLITE_UTF8, NULL, proto_misses, NULL, NULL,
                                        NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_create_function_v2(db, "fsmem_proto_counting", 1, SQLITE_UTF8, NULL, proto_counting, NULL, NULL,
                                        NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_create_function_v2(db, "fsmem_proto_take", 0, SQLITE_UTF8, NULL, proto_take, NULL, NULL, NULL);
    return rc;
}
