/* cli/dump_locals.c — `remora dump --locals`: each Python frame's arguments and local
 * variables under it (text) or in it (JSON). Reading is unwind/locals.c's; this file
 * only prints. Names are escaped (out_text_str, out_json_str); values are repr() text,
 * which holds no control character, written through the same escaping. See
 * docs/locals.md for what is shown.
 */
#include <stdio.h>
#include <string.h>

#include "remora.h"
#include "cli.h"
#include "../formats/out.h"
#include "../unwind/unwind.h"

/* Why a frame's locals could not be read, in a few words. */
static const char *locals_why(int err)
{
    switch (err) {
    case REMORA_ECORRUPT:
        return "moving";            /* the frame runs other code than when walked */
    case REMORA_EVERSION:
        return "not known for this Python build";
    case REMORA_EFAULT:
        return "unreadable";
    default:
        return remora_strerror(err);
    }
}

/* A value: repr() text has no control characters, but a value is the target's data:
 * anything below 0x20 or 0x7f still goes out escaped, one line kept one line. */
static void text_value(const char *v)
{
    for (; *v; v++) {
        unsigned char c = (unsigned char)*v;
        if (c < 0x20 || c == 0x7f)
            printf("\\x%02x", c);
        else
            fputc(c, stdout);
    }
}

void dump_locals_text(unw_locals_t *lr, const unw_frame_t *f)
{
    const unw_local_t *v;
    size_t n, more, i;
    int err;

    if (lr == NULL || f->native || f->addr == 0)
        return;
    err = unw_locals_read(lr, f, &v, &n, &more);
    if (err) {
        printf("        <locals %s>\n", locals_why(err));
        return;
    }
    for (i = 0; i < n; i++) {
        const char *tag = (v[i].kind & UNW_LOCAL_ARG) ?
                          ((v[i].kind & UNW_LOCAL_CELL) ? "[arg,cell] " : "[arg] ") :
                          (v[i].kind & UNW_LOCAL_CELL) ? "[cell] " :
                          (v[i].kind & UNW_LOCAL_FREE) ? "[free] " : "";
        printf("        %s", tag);
        out_text_str(stdout, v[i].name, 0);
        if (v[i].has_value) {
            fputs(" = ", stdout);
            text_value(v[i].value);
            fputc('\n', stdout);
        } else {
            fputs(" <unbound>\n", stdout);
        }
    }
    if (more)
        printf("        ... %zu more\n", more);
}

/* A JSON array of the names of v[0..n) whose kind has 'bit' (and a value, if bound). */
static void json_names(const char *key, const unw_local_t *v, size_t n, unsigned bit, int unbound)
{
    size_t i, k = 0;

    printf(",\"%s\":[", key);
    for (i = 0; i < n; i++) {
        if (unbound ? v[i].has_value : !(v[i].kind & bit))
            continue;
        if (k++)
            fputc(',', stdout);
        out_json_str(stdout, v[i].name);
    }
    fputc(']', stdout);
}

void dump_locals_json(unw_locals_t *lr, const unw_frame_t *f)
{
    const unw_local_t *v;
    size_t n, more, i, k = 0;
    int err;

    if (lr == NULL || f->native || f->addr == 0)
        return;
    err = unw_locals_read(lr, f, &v, &n, &more);
    if (err) {
        fputs(",\"locals_error\":", stdout);
        out_json_str(stdout, locals_why(err));
        return;
    }
    fputs(",\"locals\":{", stdout);
    for (i = 0; i < n; i++) {
        if (!v[i].has_value)
            continue;
        if (k++)
            fputc(',', stdout);
        out_json_str(stdout, v[i].name);
        fputc(':', stdout);
        out_json_str(stdout, v[i].value);
    }
    fputc('}', stdout);
    json_names("arguments", v, n, UNW_LOCAL_ARG, 0);
    json_names("cells", v, n, UNW_LOCAL_CELL, 0);
    json_names("free", v, n, UNW_LOCAL_FREE, 0);
    json_names("unbound", v, n, 0, 1);
    if (more)
        printf(",\"locals_more\":%zu", more);
}
