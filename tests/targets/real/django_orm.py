# Real-program target (tests/functional/real_tests.py): Debian's Django, an ORM on an
# in-memory sqlite database and the template engine, in a loop that does the same work
# every iteration (its mix by its own clock still moves by 1-3 points from one 5-s
# window to the next).
#
#   python django_orm.py READY
#
# Models are made in code (settings.configure, no project); one iteration runs a few
# queries (select_related, an annotated aggregate, a filter over a join, an update, a row
# created and deleted, so the database keeps its size) and renders two templates (a base
# and a child extending it, with a loop, filters and an include) with their results, in
# four steps it times (fetch, change, render, cleanup). The loop, the clock, the marks
# and READY ({"django": VERSION} among its fields): stepclock.py, copied beside it.

import datetime
import decimal
import os
import sys

import django
from django.conf import settings

WARMUP = 20
LIFETIME = 600.0

settings.configure(
    DEBUG=False,
    USE_TZ=False,
    INSTALLED_APPS=[],
    DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}},
    TEMPLATES=[{
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "OPTIONS": {"loaders": [("django.template.loaders.locmem.Loader", {
            "base.html": """<!doctype html>
<html><head><title>{% block title %}Shop{% endblock %}</title></head>
<body>
<nav>{% for c in categories %}<a href="/c/{{ c.slug }}">{{ c.name|title }}</a> {% endfor %}</nav>
{% block content %}{% endblock %}
<footer>{{ now|date:"Y-m-d" }} &middot; {{ total|floatformat:2 }}</footer>
</body></html>
""",
            "row.html": """<tr class="{% cycle 'odd' 'even' %}"><td>{{ p.name|truncatechars:24 }}</td>
<td>{{ p.category.name }}</td><td>{{ p.price|floatformat:2 }}</td>
<td>{% if p.stock > 10 %}in stock{% elif p.stock %}{{ p.stock }} left{% else %}sold out{% endif %}</td>
<td>{{ p.tags|join:", "|upper }}</td></tr>
""",
            "list.html": """{% extends "base.html" %}
{% block title %}{{ title|capfirst }} &mdash; {{ block.super }}{% endblock %}
{% block content %}
<h1>{{ title }}</h1>
<table>{% for p in products %}{% include "row.html" %}{% empty %}<tr><td>none</td></tr>{% endfor %}</table>
<ul>{% for c in counts %}<li>{{ c.cname }}: {{ c.n }} product{{ c.n|pluralize }}, {{ c.avg|floatformat:1 }}</li>{% endfor %}</ul>
{% with top=products|first %}{% if top %}<p>First: {{ top.name|lower|slugify }}</p>{% endif %}{% endwith %}
{% endblock %}
""",
        })]},
    }],
)
django.setup()

from django.db import connection, models                          # noqa: E402
from django.db.models import Avg, Count, F, Q                     # noqa: E402
from django.template.loader import render_to_string               # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))    # -I leaves it out
import stepclock                                                  # noqa: E402
from stepclock import timed                                       # noqa: E402


class Category(models.Model):
    name = models.CharField(max_length=40)
    slug = models.SlugField(max_length=40)

    class Meta:
        app_label = "shop"


class Product(models.Model):
    name = models.CharField(max_length=80)
    category = models.ForeignKey(Category, on_delete=models.CASCADE, related_name="products")
    price = models.DecimalField(max_digits=8, decimal_places=2)
    stock = models.IntegerField(default=0)
    added = models.DateField()
    hits = models.IntegerField(default=0)

    class Meta:
        app_label = "shop"

    @property
    def tags(self):
        return [w for w in self.name.split() if len(w) > 3][:3]


WORDS = ("red green blue small large classic modern steel oak linen wool paper "
         "lamp chair table shelf mug kettle clock rug vase bowl").split()


def populate():
    with connection.schema_editor() as editor:
        editor.create_model(Category)
        editor.create_model(Product)
    cats = [Category.objects.create(name=n, slug=n.lower()) for n in
            ("kitchen", "living room", "office", "garden", "bedroom", "hall")]
    day = datetime.date(2024, 1, 1)
    Product.objects.bulk_create([
        Product(name=" ".join(WORDS[(i * k) % len(WORDS)] for k in (1, 3, 7)).title(),
                category=cats[i % len(cats)], price=decimal.Decimal(i % 97) + decimal.Decimal("0.99"),
                stock=i % 23, added=day + datetime.timedelta(days=i % 365))
        for i in range(400)])


def fetch(i):
    cats = list(Category.objects.order_by("name"))
    cat = cats[i % len(cats)]
    products = list(Product.objects.select_related("category")
                    .filter(category=cat, stock__gt=0).order_by("-price", "id")[:25])
    cheap = list(Product.objects.select_related("category")
                 .filter(Q(price__lt=20) | Q(name__icontains="lamp"), category__slug__in=["office", "hall"])
                 .order_by("added")[:15])
    counts = list(Product.objects.values(cname=F("category__name")).annotate(n=Count("id"), avg=Avg("price"))
                  .order_by("cname"))
    return cats, cat, products, cheap, counts


def change(i, cat, products):
    Product.objects.filter(id__in=[p.id for p in products[:5]]).update(hits=F("hits") + 1)
    return Product.objects.create(name="Temporary Item %d" % (i % 10), category=cat,
                                  price=decimal.Decimal("9.99"), stock=1, added=datetime.date(2024, 6, 1))


def render(cats, cat, products, cheap, counts):
    total = sum(p.price for p in products)
    html = render_to_string("list.html", {
        "title": "products in %s" % cat.name, "products": products, "categories": cats,
        "counts": counts, "now": datetime.date(2025, 3, 1), "total": total})
    html += render_to_string("list.html", {
        "title": "bargains", "products": cheap, "categories": cats, "counts": counts[:2],
        "now": datetime.date(2025, 3, 1), "total": sum(p.price for p in cheap)})
    return html


def cleanup(extra):
    extra.delete()


def iteration(i):
    cats, cat, products, cheap, counts = timed(fetch, i)
    extra = timed(change, i, cat, products)
    html = timed(render, cats, cat, products, cheap, counts)
    timed(cleanup, extra)
    return len(html)


if __name__ == "__main__":
    populate()
    stepclock.run(iteration, (fetch, change, render, cleanup), WARMUP, LIFETIME, {"django": django.get_version()})
