# Real-program target (tests/functional/real_tests.py): Debian's docutils turning
# reStructuredText into HTML, the same document every iteration.
#
#   python docutils_html.py READY
#
# The document is made here, once, from a template of what a project's documentation
# holds: nested sections, paragraphs with inline markup (emphasis, literals, links,
# substitutions, footnote and citation references), bullet, enumerated, definition and
# field lists, option lists, literal and doctest blocks, grid and simple tables,
# admonitions, a topic with a table of contents, line blocks and block quotes; one
# iteration is what docutils.core.publish_string(..., writer_name="html") does, in the
# four steps it times: the publisher set up (components), the document read (parse),
# its transforms (transform) and the HTML written (render). The loop, the clock, the
# marks and READY ({"docutils": VERSION} among its fields): stepclock.py, copied beside it.

import os
import sys

import docutils
import docutils.core
import docutils.io

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))    # -I leaves it out
import stepclock                                                  # noqa: E402
from stepclock import timed                                       # noqa: E402

WARMUP = 3
LIFETIME = 600.0

HEAD = """\
=====================
 The Widget Handbook
=====================

:Author: Ann Writer
:Version: 2.4
:Date: 2025-03-01

.. contents:: Contents
   :depth: 2

.. |project| replace:: *Widget*
.. |br| unicode:: U+00A0

Introduction
============

|project| is a library for *assembling* widgets from **parts**. Its entry point is
``widget.build()``; see `the reference`_ and the FAQ [#faq]_ for details. Widgets
were first described in [WID2001]_.

.. _the reference: https://example.invalid/reference

.. note:: This handbook covers version 2.4. Older versions differ in the way
   ``assemble`` orders its parts.

"""

CHAPTER = """\
Chapter {n}: {title}
====================================

Each part of chapter {n} has a *name*, a ``kind`` and a **weight**; |project| checks
them in order [#f{n}]_. Parts are compared with ``part.key()`` and sorted by
:title-reference:`weight`, then by name. See also `Section {n}.1`_.

Section {n}.1
-------------

1. Collect the parts.
2. Check each part:

   - its ``name`` is unique,
   - its ``weight`` is positive,
   - its ``kind`` is one of ``plain``, ``framed`` or ``nested``.

3. Assemble them.

term {n}
    A definition of the term, with *emphasis* and a `link <https://example.invalid/{n}>`__.
another term : classifier
    Another definition; it spans
    two lines.

:Parameters: - **parts** -- the parts to assemble
             - **strict** -- fail on the first bad part
:Returns: a ``Widget``
:Raises: ``ValueError`` if a part is bad

-a            all parts, not only the visible ones
-v, --verbose  say what is done
--depth=N     how deep to nest

Section {n}.2
-------------

An example::

    import widget
    w = widget.build(parts=[widget.Part("a", weight={n})], strict=True)
    for part in w:
        print(part.name, part.weight)

>>> import widget
>>> widget.Part("b", weight={n}).weight
{n}

+------------+------------+-----------+
| Part       | Weight     | Kind      |
+============+============+===========+
| frame      | {n:<10} | framed    |
+------------+------------+-----------+
| panel      | {m:<10} | plain     |
+------------+------------+-----------+
| hinge      | {k:<10} | nested    |
+------------+------------+-----------+

=====  =====  ======
  A      B    A or B
=====  =====  ======
False  False  False
True   False  True
False  True   True
True   True   True
=====  =====  ======

.. warning:: A part of weight zero is dropped without a word.

.. tip::
   Keep parts small: chapter {n} shows why.

| Line one of a verse,
|    indented line two,
| line three.

    A block quote, about widgets in chapter {n}, with *inline* markup.

    -- Someone

.. [#f{n}] A footnote of chapter {n}.

"""

TAIL = """\
Frequently asked
================

.. [#faq] The answers to questions people ask.

.. [WID2001] Wim Idget, *On Widgets*, 2001.
"""

TITLES = ("Parts", "Frames", "Panels")
DOCUMENT = HEAD + "".join(CHAPTER.format(n=i + 1, m=20 + i, k=30 + i, title=t)
                          for i, t in enumerate(TITLES)) + TAIL
SETTINGS = {"report_level": 5, "halt_level": 5, "warning_stream": False, "output_encoding": "unicode"}


def components():
    pub = docutils.core.Publisher(source_class=docutils.io.StringInput,
                                  destination_class=docutils.io.StringOutput)
    pub.set_components("standalone", "restructuredtext", "html")
    pub.process_programmatic_settings(None, SETTINGS, None)
    pub.set_source(DOCUMENT, None)
    pub.set_destination(None, None)
    return pub


def parse(pub):
    pub.document = pub.reader.read(pub.source, pub.parser, pub.settings)


def transform(pub):
    pub.apply_transforms()


def render(pub):
    return pub.writer.write(pub.document, pub.destination)


def iteration(i):
    del i
    pub = timed(components)
    timed(parse, pub)
    timed(transform, pub)
    return len(timed(render, pub))


if __name__ == "__main__":
    stepclock.run(iteration, (components, parse, transform, render), WARMUP, LIFETIME,
                  {"docutils": docutils.__version__})
