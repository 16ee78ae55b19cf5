/* tests/unit/unit_pyobj.c — unit tests of unwind/pyobj.c's readers (dict, set, tuple and
 * list) and the typed accessors over crafted hostile memory. */
#include <stdint.h>
#include <string.h>

#include "remora.h"
#include "unwind/internal.h"
#include "unit.h"

/* ---- unwind/pyobj.c's readers (dict, set, tuple and list) over crafted hostile memory:
 * a flat buffer at an address of the test's choosing, read through a pyo_rd_t ---- */

typedef struct flat {
    uint64_t base;
    unsigned char *mem;
    size_t len;
    unsigned reads;
} flat_t;

static int flat_read(void *ctx, uint64_t addr, void *buf, size_t len)
{
    flat_t *f = ctx;

    f->reads++;
    if (addr < f->base || addr - f->base > f->len || len > f->len - (addr - f->base))
        return REMORA_EFAULT;
    memcpy(buf, f->mem + (addr - f->base), len);
    return REMORA_OK;
}

static void flat_put(flat_t *f, uint64_t addr, uint64_t v)
{
    memcpy(f->mem + (addr - f->base), &v, 8);
}

/* A 3.11+ keys object at 'at' (8 slots, 8 index bytes): kind, nentries; its entries at
 * at + 40. */
static void flat_keys311(flat_t *f, const py_layout_t *L, uint64_t at, unsigned kind, int64_t nent)
{
    memset(f->mem + (at - f->base), 0, 40);
    f->mem[at - f->base + 8] = 3;           /* dk_log2_size */
    f->mem[at - f->base + 9] = 3;           /* dk_log2_index_bytes */
    f->mem[at - f->base + 10] = (unsigned char)kind;
    flat_put(f, at + L->dk_nentries, (uint64_t)nent);
}

void test_pyo_readers(void)
{
    static unsigned char mem[8192];
    flat_t f = { 0x200000, mem, sizeof mem, 0 };
    pyo_rd_t rd = { flat_read, &f };
    py_layout_t L12, L9;
    py_target_t T;
    pyo_dict_t d;
    pyo_item_t it, got[8];
    pyo_set_t st;
    unsigned char buf[4096];
    uint64_t keys = 0x200100, vals = 0x200400, dict = 0x200040, set = 0x200800, key, items;
    size_t n;
    int64_t sz;
    int err;

    if (py_layout_for_minor(12) == NULL || py_layout_for_minor(9) == NULL)
        return;
    L12 = *py_layout_for_minor(12);
    py_layout_derive(&L12);
    L9 = *py_layout_for_minor(9);
    py_layout_derive(&L9);
    memset(&T, 0, sizeof T);
    T.layout = L12;
    T.dict_type = 0x1020;

    /* a unicode-keys table (16-byte entries) of 3 entries, one deleted: 2 items, their
     * index and where each value lies */
    flat_keys311(&f, &L12, keys, 1, 3);
    flat_put(&f, keys + 40, 0x300000), flat_put(&f, keys + 48, 0x300100);
    flat_put(&f, keys + 56, 0), flat_put(&f, keys + 64, 0);
    flat_put(&f, keys + 72, 0x300200), flat_put(&f, keys + 80, 0x300300);
    err = pyo_keys_open(&rd, &L12, keys, 0, 64, &d);
    CHECK(err == 0 && d.n == 3 && d.k.esz == 16 && d.need == 48, "unicode keys: err %d n %zu", err, d.n);
    CHECK(pyo_dict_load(&rd, &d, buf) == 0, "unicode keys: loaded");
    for (n = 0; n < 8 && pyo_dict_next(&d, &got[n]); n++)
        ;
    CHECK(n == 2 && got[0].key == 0x300000 && got[0].value == 0x300100 && got[0].slot == keys + 48 &&
          got[1].index == 2 && got[1].value == 0x300300 && got[1].slot == keys + 80,
          "unicode keys: 2 items, the deleted one left out (%zu)", n);
    CHECK(!pyo_dict_next(&d, &it), "past the end: nothing more");

    /* the same keys split: values from ma_values (3.12: values[] at once) */
    flat_put(&f, vals, 0x400000), flat_put(&f, vals + 8, 0x400008), flat_put(&f, vals + 16, 0x400010);
    err = pyo_keys_open(&rd, &L12, keys, vals, 64, &d);
    CHECK(err == 0 && d.need == 3 * 24 && pyo_dict_load(&rd, &d, buf) == 0 && pyo_dict_next(&d, &it) &&
          it.value == 0x400000 && it.slot == vals && pyo_dict_next(&d, &it) && it.value == 0x400010 &&
          it.slot == vals + 16 && it.index == 2, "a split table: values from ma_values (err %d)", err);

    /* through the dict object: its type checked */
    flat_put(&f, dict + 8, 0x1020), flat_put(&f, dict + 32, keys), flat_put(&f, dict + 40, 0);
    err = pyo_dict_open(&rd, &T, dict, 64, &d);
    CHECK(err == 0 && d.keys == keys && d.values == 0 && d.n == 3, "a dict object: err %d", err);
    flat_put(&f, dict + 8, 0x1030);
    CHECK(pyo_dict_open(&rd, &T, dict, 64, &d) == REMORA_ECORRUPT, "not a dict's type: refused");
    CHECK(pyo_dict_open(&rd, &T, dict + 4, 64, &d) == REMORA_ECORRUPT, "an unaligned dict: refused");

    /* capped: 3 entries, 2 asked for */
    CHECK(pyo_keys_open(&rd, &L12, keys, 0, 2, &d) == 0 && d.n == 2 && d.need == 32 && d.k.nent == 3,
          "3 entries capped at 2");

    /* hostile headers: every one refused before any entry is read */
    flat_keys311(&f, &L12, keys, 1, 9);
    CHECK(pyo_keys_open(&rd, &L12, keys, 0, 64, &d) == REMORA_ECORRUPT, "9 entries in 8 slots: refused");
    flat_keys311(&f, &L12, keys, 1, -1);
    CHECK(pyo_keys_open(&rd, &L12, keys, 0, 64, &d) == REMORA_ECORRUPT, "-1 entries: refused");
    flat_keys311(&f, &L12, keys, 3, 1);
    CHECK(pyo_keys_open(&rd, &L12, keys, 0, 64, &d) == REMORA_ECORRUPT, "a kind no keys have: refused");
    flat_keys311(&f, &L12, keys, 0, 1);
    mem[keys - f.base + 8] = 40;
    CHECK(pyo_keys_open(&rd, &L12, keys, 0, 64, &d) == REMORA_ECORRUPT, "2^40 slots: refused");
    mem[keys - f.base + 8] = 3, mem[keys - f.base + 9] = 2;
    CHECK(pyo_keys_open(&rd, &L12, keys, 0, 64, &d) == REMORA_ECORRUPT, "fewer index bytes than slots: refused");
    mem[keys - f.base + 9] = 3;
    CHECK(pyo_keys_open(&rd, &L12, keys + 3, 0, 64, &d) == REMORA_ECORRUPT, "unaligned keys: refused");
    CHECK(pyo_keys_open(&rd, &L12, keys, vals + 4, 64, &d) == REMORA_ECORRUPT, "unaligned values: refused");
    CHECK(pyo_keys_open(&rd, &L12, keys, UINT64_MAX - 7, 64, &d) == REMORA_ECORRUPT,
          "values that wrap the address space: refused");

    /* truncated: the header, then the entries, past the memory's end */
    CHECK(pyo_keys_open(&rd, &L12, f.base + sizeof mem - 16, 0, 64, &d) == REMORA_EFAULT,
          "a header cut short: the read's error");
    flat_keys311(&f, &L12, f.base + sizeof mem - 48, 0, 5);
    err = pyo_keys_open(&rd, &L12, f.base + sizeof mem - 48, 0, 64, &d);
    CHECK(err == 0 && pyo_dict_load(&rd, &d, buf) == REMORA_EFAULT && !pyo_dict_next(&d, &it),
          "entries cut short: the read's error, no item (err %d)", err);

    /* a table at the top of the address space: its entries would wrap; refused unread */
    {
        flat_t top = { UINT64_MAX - 4095, mem, 4096, 0 };
        pyo_rd_t trd = { flat_read, &top };
        flat_keys311(&top, &L12, top.base + 4096 - 48, 0, 8);
        err = pyo_keys_open(&trd, &L12, top.base + 4096 - 48, 0, 64, &d);
        CHECK(err == REMORA_ECORRUPT && top.reads == 1, "entries that wrap: refused unread (err %d)", err);
    }

    /* a loop: a dict whose keys are its own object (entries read from its header):
     * bounded by the header's count, then done */
    flat_keys311(&f, &L12, dict, 0, 2);
    flat_put(&f, dict + 32, dict);
    flat_put(&f, dict + 8, 0x1020);
    err = pyo_dict_open(&rd, &T, dict, 64, &d);
    for (n = 0; err == 0 && pyo_dict_load(&rd, &d, buf) == 0 && n < 100 && pyo_dict_next(&d, &it); n++)
        ;
    CHECK(err != 0 || n <= 2, "keys pointing to their own dict: at most 2 items (%zu)", n);

    /* 3.9's sized keys: dk_size a power of 2, 8 at least */
    memset(mem + (keys - f.base), 0, 64);
    flat_put(&f, keys + 8, 8), flat_put(&f, keys + L9.dk_nentries, 1);
    flat_put(&f, keys + L9.dk_indices + 8 + 8, 0x300000), flat_put(&f, keys + L9.dk_indices + 8 + 16, 0x300100);
    err = pyo_keys_open(&rd, &L9, keys, 0, 64, &d);
    CHECK(err == 0 && d.k.esz == 24 && pyo_dict_load(&rd, &d, buf) == 0 && pyo_dict_next(&d, &it) &&
          it.key == 0x300000 && it.value == 0x300100, "3.9 keys: one item (err %d)", err);
    flat_put(&f, keys + 8, 12);
    CHECK(pyo_keys_open(&rd, &L9, keys, 0, 64, &d) == REMORA_ECORRUPT, "3.9: 12 slots refused");
    flat_put(&f, keys + 8, 4);
    CHECK(pyo_keys_open(&rd, &L9, keys, 0, 64, &d) == REMORA_ECORRUPT, "3.9: 4 slots refused");

    /* sets: 8 slots, 2 keys and the dummy a removal leaves */
    {
        uint64_t tab = 0x200a00;
        unsigned char h[48];
        memset(mem + (tab - f.base), 0, 8 * 16);
        flat_put(&f, tab + 16, 0x500000), flat_put(&f, tab + 24, 5);
        flat_put(&f, tab + 48, 0x500100), flat_put(&f, tab + 56, (uint64_t)-1);    /* dummy */
        flat_put(&f, tab + 96, 0x500200), flat_put(&f, tab + 104, 7);
        memset(h, 0, sizeof h);
        memcpy(h + L12.set_used, &(uint64_t){ 2 }, 8);
        memcpy(h + L12.set_mask, &(uint64_t){ 7 }, 8);
        memcpy(h + L12.set_table, &tab, 8);
        err = pyo_set_open(&L12, h, sizeof h, 64, &st);
        CHECK(err == 0 && st.slots == 8 && st.need == 128 && pyo_set_load(&rd, &st, buf) == 0,
              "a set of 8 slots: err %d", err);
        CHECK(pyo_set_next(&st, &key) && key == 0x500000 && pyo_set_next(&st, &key) && key == 0x500200 &&
              !pyo_set_next(&st, &key), "a set: 2 keys, the dummy left out");
        CHECK(pyo_set_open(&L12, h, sizeof h, 3, &st) == 0 && st.n == 3 && st.need == 48, "a set capped at 3");
        CHECK(pyo_set_open(&L12, h, L12.set_table, 64, &st) == REMORA_ECORRUPT, "a set header cut short");
        memcpy(h + L12.set_mask, &(uint64_t){ UINT64_MAX }, 8);
        CHECK(pyo_set_open(&L12, h, sizeof h, 64, &st) == REMORA_ECORRUPT, "a mask of 2^64 - 1 (slots 0)");
        memcpy(h + L12.set_mask, &(uint64_t){ 3 }, 8);
        CHECK(pyo_set_open(&L12, h, sizeof h, 64, &st) == REMORA_ECORRUPT, "a mask of 3 (below PySet_MINSIZE)");
        memcpy(h + L12.set_mask, &(uint64_t){ 12 }, 8);
        CHECK(pyo_set_open(&L12, h, sizeof h, 64, &st) == REMORA_ECORRUPT, "a mask of 12");
        memcpy(h + L12.set_mask, &(uint64_t){ (1ull << 40) - 1 }, 8);
        CHECK(pyo_set_open(&L12, h, sizeof h, 64, &st) == REMORA_ECORRUPT, "2^40 slots");
        memcpy(h + L12.set_mask, &(uint64_t){ 7 }, 8);
        memcpy(h + L12.set_used, &(uint64_t){ 9 }, 8);
        CHECK(pyo_set_open(&L12, h, sizeof h, 64, &st) == REMORA_ECORRUPT, "9 keys in 8 slots");
        memcpy(h + L12.set_used, &(uint64_t){ (uint64_t)-2 }, 8);
        CHECK(pyo_set_open(&L12, h, sizeof h, 64, &st) == REMORA_ECORRUPT, "-2 keys");
        memcpy(h + L12.set_used, &(uint64_t){ 2 }, 8);
        memcpy(h + L12.set_table, &(uint64_t){ tab + 4 }, 8);
        CHECK(pyo_set_open(&L12, h, sizeof h, 64, &st) == REMORA_ECORRUPT, "an unaligned table");
        memcpy(h + L12.set_table, &(uint64_t){ UINT64_MAX - 63 }, 8);
        CHECK(pyo_set_open(&L12, h, sizeof h, 64, &st) == REMORA_ECORRUPT, "a table that wraps");
        memcpy(h + L12.set_table, &(uint64_t){ f.base + sizeof mem - 64 }, 8);
        CHECK(pyo_set_open(&L12, h, sizeof h, 64, &st) == 0 && pyo_set_load(&rd, &st, buf) == REMORA_EFAULT &&
              !pyo_set_next(&st, &key), "a table cut short: the read's error, no key");
        /* a loop: the table is the set itself */
        memcpy(h + L12.set_table, &set, 8);
        memcpy(mem + (set - f.base), h, sizeof h);
        n = 0;
        if (pyo_set_open(&L12, h, sizeof h, 64, &st) == 0 && pyo_set_load(&rd, &st, buf) == 0)
            while (n < 100 && pyo_set_next(&st, &key))
                n++;
        CHECK(n <= 8, "a table that is its own set: at most 8 keys (%zu)", n);
    }

    /* tuples and lists: the size and where the items are */
    {
        unsigned char h[64];
        memset(h, 0, sizeof h);
        memcpy(h + L12.ob_size, &(int64_t){ 3 }, 8);
        CHECK(pyo_seq(&L12, 0x600000, h, sizeof h, 0, &items, &sz) == 0 && sz == 3 &&
              items == 0x600000 + L12.tuple_items, "a tuple of 3");
        memcpy(h + L12.ob_size, &(int64_t){ -1 }, 8);
        CHECK(pyo_seq(&L12, 0x600000, h, sizeof h, 0, &items, &sz) == REMORA_ECORRUPT && sz == 0,
              "a tuple of -1 items");
        memcpy(h + L12.ob_size, &(int64_t){ 2 }, 8);
        memcpy(h + L12.list_items, &(uint64_t){ 0x700004 }, 8);
        CHECK(pyo_seq(&L12, 0x600000, h, sizeof h, 1, &items, &sz) == REMORA_ECORRUPT, "a list's items unaligned");
        memcpy(h + L12.list_items, &(uint64_t){ 0x700000 }, 8);
        CHECK(pyo_seq(&L12, 0x600000, h, sizeof h, 1, &items, &sz) == 0 && items == 0x700000 && sz == 2,
              "a list of 2");
        CHECK(pyo_seq(&L12, 0x600000, h, L12.ob_size + 4, 1, &items, &sz) == REMORA_ECORRUPT,
              "a header cut short");
    }

    /* the typed accessors: unaligned, signed */
    {
        unsigned char b[16] = { 0xff, 0xfe, 0xff, 0xff, 0xff, 0x34, 0x12, 0x80 };
        CHECK(get_i8(b, 0) == -1 && get_u8(b, 1) == 0xfe && get_u16(b, 5) == 0x1234 &&
              get_i32(b, 1) == (int32_t)0xfffffffe && get_u32(b, 4) == 0x801234ffu &&
              get_i64(b, 8) == 0, "get_i8/u8/u16/i32/u32/i64 at unaligned offsets");
    }
}
