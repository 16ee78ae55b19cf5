/* py/layouts.c — built-in py_layout_t tables for CPython 3.9–3.12.
 *
 * The tables themselves are in layouts_generated.h, produced by
 * tools/gen_offsets.sh from each version's installed headers. 3.13+ layouts
 * are read from the target's _Py_DebugOffsets instead (debug_offsets.c).
 */
#include "py.h"
#include "layouts_generated.h"

#include <stddef.h>

const py_layout_t *py_layout_for_minor(int minor)
{
    switch (minor) {
    case 9:
        return &py_layout_3_9;
    case 10:
        return &py_layout_3_10;
    case 11:
        return &py_layout_3_11;
    case 12:
        return &py_layout_3_12;
    default:
        return NULL;
    }
}
