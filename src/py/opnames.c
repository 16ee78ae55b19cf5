/* py/opnames.c — each version's opcode names (--opcodes).
 *
 * The tables are generated from each version's own dis and opcode modules
 * (tools/gen_opnames.py -> opnames_generated.h); which one a target uses is a version
 * fact, so it is chosen here, with the layout's other version facts.
 */
#include "py.h"
#include "opnames_generated.h"

const char *const *py_opnames(const py_layout_t *L)
{
    if (L->major != 3)
        return NULL;
    switch (L->minor) {
    case 9: return opnames_39;
    case 10: return opnames_310;
    case 11: return opnames_311;
    case 12: return opnames_312;
    case 13: return opnames_313;
    case 14: return opnames_314;
    case 15: return opnames_315;
    default: return NULL;
    }
}
