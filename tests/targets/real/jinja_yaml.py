# Real-program target (tests/functional/real_tests.py): Debian's Jinja2 and PyYAML making a
# report per request, the way a small service renders a page from a configuration it is
# sent: code made while the program runs.
#
#   python jinja_yaml.py READY
#
# Each iteration is one request: a YAML document (a site's settings and a list of items,
# the request's number in it) parsed by PyYAML's pure-Python SafeLoader (load), a Jinja2
# template compiled from source into a new Python code object of its own (compile: a new
# Environment with no cache, and a template whose text carries the request's number, so
# nothing is reused: each request's template functions are new code objects, made and
# freed while the profiler samples), and the page rendered from the document (render).
# The loop, the clock, the marks and READY ({"jinja2": VERSION, "yaml": VERSION} among its
# fields): stepclock.py, copied beside it.

import os
import sys

import jinja2
import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))    # -I leaves it out
import stepclock                                                  # noqa: E402
from stepclock import timed                                       # noqa: E402

WARMUP = 20
LIFETIME = 600.0

DOCUMENT = """\
site:
  title: Widget catalogue
  request: {n}
  owner: {{name: Ann Writer, email: ann@example.invalid}}
  tags: [widgets, parts, frames, panels]
items:
""" + "".join("""\
  - id: {i}
    name: Widget {i}
    price: {p}.{c:02d}
    stock: {s}
    parts:
      - {{{{kind: plain, weight: {w}}}}}
      - {{{{kind: framed, weight: {w2}}}}}
    notes: >
      A widget assembled from parts, checked in order and sorted by weight.
""".format(i=i, p=3 + i % 17, c=i * 7 % 100, s=i * 13 % 40, w=i % 5 + 1, w2=i % 3 + 2)
  for i in range(24))

TEMPLATE = """\
<html><head><title>{{{{ site.title }}}} #{n}</title></head><body>
<h1>{{{{ site.title | upper }}}}</h1>
<p>Request {n} for {{{{ site.owner.name }}}} &lt;{{{{ site.owner.email }}}}&gt;</p>
{{% macro part_row(p) %}}<li>{{{{ p.kind }}}} ({{{{ p.weight }}}})</li>{{% endmacro %}}
<table>
{{% for item in items if item.stock > 0 %}}
  <tr class="{{{{ loop.cycle('odd', 'even') }}}}">
    <td>{{{{ item.id }}}}</td><td>{{{{ item.name | e }}}}</td>
    <td>{{{{ '%.2f' | format(item.price) }}}}</td><td>{{{{ item.stock }}}}</td>
    <td><ul>{{% for p in item.parts | sort(attribute='weight') %}}{{{{ part_row(p) }}}}{{% endfor %}}</ul></td>
    <td>{{{{ item.notes | truncate(40) }}}}</td>
  </tr>
{{% else %}}
  <tr><td>none in stock</td></tr>
{{% endfor %}}
</table>
<p>{{{{ items | sum(attribute='stock') }}}} in stock; tags: {{{{ site.tags | join(', ') }}}}</p>
</body></html>
"""


def load(n):
    return yaml.load(DOCUMENT.format(n=n), Loader=yaml.SafeLoader)


def compile_page(n):
    env = jinja2.Environment(autoescape=True, cache_size=0)
    return env.from_string(TEMPLATE.format(n=n))


def render(template, doc):
    return template.render(site=doc["site"], items=doc["items"])


def iteration(i):
    doc = timed(load, i)
    template = timed(compile_page, i)
    return len(timed(render, template, doc))


if __name__ == "__main__":
    stepclock.run(iteration, (load, compile_page, render), WARMUP, LIFETIME,
                  {"jinja2": jinja2.__version__, "yaml": yaml.__version__})
