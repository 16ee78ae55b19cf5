/* unwind/pystr.c — str and bytes objects read out of the target.
 *
 * Reads the object header and the first bytes of its data in one read; only long
 * strings need a second. Only compact strings are accepted (names, file names and
 * qualnames always are); anything else is reported as corrupt.
 */
#include <stdlib.h>
#include <string.h>

#include "remora.h"
#include "internal.h"

#define PYSTR_FIRST_READ 256
#define PYSTR_MAX_BYTES (UNW_MAX_NAME * 4)

static size_t put_utf8(uint32_t c, char *out)
{
    if (c == 0)
        c = 0xfffd;              /* interned strings never hold NUL */
    if (c < 0x80) {
        out[0] = (char)c;
        return 1;
    }
    if (c < 0x800) {
        out[0] = (char)(0xc0 | c >> 6);
        out[1] = (char)(0x80 | (c & 0x3f));
        return 2;
    }
    if (c >= 0xd800 && c <= 0xdfff)
        c = 0xfffd;              /* lone surrogates are not valid UTF-8 */
    if (c < 0x10000) {
        out[0] = (char)(0xe0 | c >> 12);
        out[1] = (char)(0x80 | ((c >> 6) & 0x3f));
        out[2] = (char)(0x80 | (c & 0x3f));
        return 3;
    }
    if (c > 0x10ffff)
        c = 0xfffd;
    if (c == 0xfffd)
        return put_utf8(c, out);
    out[0] = (char)(0xf0 | c >> 18);
    out[1] = (char)(0x80 | ((c >> 12) & 0x3f));
    out[2] = (char)(0x80 | ((c >> 6) & 0x3f));
    out[3] = (char)(0x80 | (c & 0x3f));
    return 4;
}

int pystr_read(proc_t *p, const py_layout_t *L, uint64_t addr, char *out, size_t cap, size_t *len)
{
    return pystr_read_img(p, L, addr, out, cap, len, NULL, 0, NULL);
}

/* The header of a str object as read into head[0..got): its kind (bytes per code
 * point), the code points kept and where its data starts. 0 or REMORA_ECORRUPT. */
static int str_parse(const py_layout_t *L, const unsigned char *head, size_t got, unsigned *kind,
                     uint64_t *keep, uint64_t *hdr)
{
    pyo_str_t s;

    if (pyo_str(L, head, got, &s) != REMORA_OK || s.length > (1 << 30))
        return REMORA_ECORRUPT;
    *kind = s.kind;
    *hdr = s.data;
    *keep = (uint64_t)s.length > UNW_MAX_NAME ? UNW_MAX_NAME : (uint64_t)s.length;
    return REMORA_OK;
}

/* keep code points of 'kind' bytes each at data, as UTF-8 into out (cut at cap). */
static size_t str_utf8(const unsigned char *data, unsigned kind, uint64_t keep, char *out, size_t cap)
{
    size_t o = 0, i;

    for (i = 0; i < keep; i++) {
        char enc[4];
        size_t k = put_utf8(pyo_str_cp(data, kind, i), enc);
        if (o + k + 1 > cap)
            break;
        memcpy(out + o, enc, k);
        o += k;
    }
    out[o] = '\0';
    return o;
}

int pystr_read_img(proc_t *p, const py_layout_t *L, uint64_t addr, char *out, size_t cap,
                   size_t *len, unsigned char *img, size_t imgcap, size_t *imglen)
{
    unsigned char head[PYSTR_FIRST_READ];
    unsigned char big[PYSTR_MAX_BYTES];
    const unsigned char *data;
    unsigned kind;
    uint64_t hdr, nbytes, keep;
    size_t i, got = sizeof head;
    int err;

    *len = 0;
    if (imglen != NULL)
        *imglen = 0;
    if (cap == 0)
        return REMORA_ENOMEM;
    out[0] = '\0';
    if (addr == 0 || addr % 8 != 0)
        return REMORA_ECORRUPT;
    if (L->u_length + 8 > sizeof head || L->u_state + 4 > sizeof head || L->u_compact_size > 128)
        return REMORA_ECORRUPT;
    err = proc_read(p, addr, head, sizeof head);
    if (err == REMORA_EFAULT) { /* a short string near the end of a mapping */
        got = L->u_compact_size;
        err = proc_read(p, addr, head, got);
    }
    if (err)
        return err;
    if ((err = str_parse(L, head, got, &kind, &keep, &hdr)) != REMORA_OK)
        return err;
    nbytes = keep * kind;
    if (hdr + nbytes <= got) {
        data = head + hdr;
    } else {
        err = proc_read(p, addr + hdr, big, nbytes);
        if (err)
            return err;
        data = big;
    }
    if (img != NULL) {
        /* the object from its type on, as read: header, then data (no NUL) */
        size_t end = (size_t)(hdr + nbytes) < imgcap + 8 ? (size_t)(hdr + nbytes) : imgcap + 8;
        for (i = 8; i < end; i++)
            img[i - 8] = i < got && (data != big || i < hdr) ? head[i] : data[i - hdr];
        *imglen = end > 8 ? end - 8 : 0;
    }
    *len = str_utf8(data, kind, keep, out, cap);
    return REMORA_OK;
}

int pystr_from_head(proc_t *p, const py_layout_t *L, uint64_t addr, const unsigned char *head,
                    size_t got, char *out, size_t cap, size_t *len)
{
    unsigned char big[PYSTR_MAX_BYTES];
    const unsigned char *data;
    unsigned kind;
    uint64_t hdr, nbytes, keep;
    int err;

    *len = 0;
    if (cap == 0)
        return REMORA_ENOMEM;
    out[0] = '\0';
    if ((err = str_parse(L, head, got, &kind, &keep, &hdr)) != REMORA_OK)
        return err;
    nbytes = keep * kind;
    if (hdr + nbytes <= got) {
        data = head + hdr;
    } else if (p == NULL || addr == 0) {
        return REMORA_ECORRUPT;
    } else {
        if ((err = proc_read(p, addr + hdr, big, nbytes)) != REMORA_OK)
            return err;
        data = big;
    }
    *len = str_utf8(data, kind, keep, out, cap);
    return REMORA_OK;
}

int pybytes_read(proc_t *p, const py_layout_t *L, uint64_t addr, size_t max,
                 unsigned char **out, size_t *len)
{
    int64_t size;
    unsigned char *b;
    int err;

    *out = NULL;
    *len = 0;
    if (addr == 0 || addr % 8 != 0)
        return REMORA_ECORRUPT;
    err = proc_read(p, addr + L->bytes_size, &size, sizeof size);
    if (err)
        return err;
    if (size < 0 || (uint64_t)size > max)
        return REMORA_ECORRUPT;
    b = malloc(size ? (size_t)size : 1);
    if (b == NULL)
        return REMORA_ENOMEM;
    err = proc_read(p, addr + L->bytes_sval, b, (size_t)size);
    if (err) {
        free(b);
        return err;
    }
    *out = b;
    *len = (size_t)size;
    return REMORA_OK;
}
