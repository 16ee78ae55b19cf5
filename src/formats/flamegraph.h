/* formats/flamegraph.h — internals of the HTML flamegraph writer, for flamegraph.c, the
 * template array generated at build time and the browser tests' driver.
 *
 *   flamegraph.c     out_flamegraph_write() and the JSON escaping of the embedded data
 *   flamegraph.html  the page: HTML, CSS and JS; tools/embed.c turns it into
 *                    $(BUILD)/gen/flamegraph_html.c, which defines the two arrays below
 */
#ifndef REMORA_FORMATS_FLAMEGRAPH_H
#define REMORA_FORMATS_FLAMEGRAPH_H

#include <stddef.h>
#include <stdio.h>

/* The template: out_flamegraph_html_len bytes, followed by a NUL. */
extern const unsigned char out_flamegraph_html[];
extern const size_t out_flamegraph_html_len;

/* The template's placeholder for the profile data (inside a <script type=
 * "application/json"> element). */
#define OUT_FLAMEGRAPH_MARKER "@REMORA_DATA@"

/* Writes s[0..len) as a JSON string literal that is also safe inside an HTML <script>
 * element: besides JSON's own escapes, '<', '>', '&', U+2028 and U+2029 are written
 * as \u003c, \u003e, \u0026, \u2028, \u2029, control characters and DEL as \u00XX,
 * and bytes that are not valid UTF-8 as \ufffd. NUL bytes inside the range are
 * written as \u0000. */
void out_flamegraph_json_str(FILE *f, const char *s, size_t len);

#endif
