# Memory real-program target (tests/functional/memory_real_tests.py): Debian's Django, its
# ORM on an in-memory sqlite database (set up as django_orm.py does: settings.configure,
# models made in code, 400 products), a view that keeps what it fetched.
#
#   python mem_django.py READY
#
# work(n) runs n requests; each keeps, at five sites of its own, what the ORM fetched: the
# products with their categories (select_related: model instances, in small objects),
# their values() rows (dicts), the (id, stock) pairs of a filter, the first 100 names
# (values_list) and a per-category count (an annotated aggregate). Only reads: the
# database (sqlite's own memory, which tracemalloc does not see) does not grow. What is
# kept is fresh memory written at once (allocation == growth); the queries' temporaries
# are freed and reused from request to request, growth of neither. No template is
# rendered in the window: a render's burst of temporaries takes a fresh pymalloc arena
# that empties, goes back to the system and is faulted in again at the next render,
# growth every time (remora counts it) that is no allocation kept (tracemalloc's
# compare_to has none), so the two would rightly disagree there. The window, tracemalloc
# and READY: memwindow.py, copied beside it.

import datetime
import decimal
import os
import sys

import django
from django.conf import settings

settings.configure(
    DEBUG=False,
    USE_TZ=False,
    INSTALLED_APPS=[],
    DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}},
)
django.setup()

from django.db import connection, models                          # noqa: E402
from django.db.models import Count                                # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))    # -I leaves it out
import memwindow                                                  # noqa: E402


class Category(models.Model):
    name = models.CharField(max_length=40)

    class Meta:
        app_label = "shop"


class Product(models.Model):
    name = models.CharField(max_length=80)
    category = models.ForeignKey(Category, on_delete=models.CASCADE)
    price = models.DecimalField(max_digits=8, decimal_places=2)
    stock = models.IntegerField(default=0)
    added = models.DateField()

    class Meta:
        app_label = "shop"


WORDS = ("red green blue small large classic modern steel oak linen wool paper "
         "lamp chair table shelf mug kettle clock rug vase bowl").split()
KEPT = []


def populate():
    with connection.schema_editor() as editor:
        editor.create_model(Category)
        editor.create_model(Product)
    cats = [Category.objects.create(name=n) for n in
            ("kitchen", "living room", "office", "garden", "bedroom", "hall")]
    day = datetime.date(2024, 1, 1)
    Product.objects.bulk_create([
        Product(name=" ".join(WORDS[(i * k) % len(WORDS)] for k in (1, 3, 7)),
                category=cats[i % len(cats)], price=decimal.Decimal(i % 97) + decimal.Decimal("0.99"),
                stock=i % 23, added=day + datetime.timedelta(days=i % 365))
        for i in range(400)])


def keep_products():
    products = list(Product.objects.select_related("category").order_by("id"))
    KEPT.append(products)
    return products


def keep_rows():
    KEPT.append(list(Product.objects.values("name", "price", "stock").order_by("id")))


def keep_ids():
    KEPT.append(list(Product.objects.filter(stock__gt=3).values_list("id", "stock").order_by("id")))


def keep_names():
    KEPT.append(list(Product.objects.values_list("name", flat=True).order_by("id")[:100]))


def keep_counts():
    KEPT.append(list(Product.objects.values("category__name").annotate(n=Count("id"))
                     .order_by("category__name")))


def work(n):
    for _ in range(n):
        keep_products()
        keep_rows()
        keep_ids()
        keep_names()
        keep_counts()


if __name__ == "__main__":
    populate()
    memwindow.run(sys.modules[__name__], lambda: work(2), {"django": django.get_version()},
                  ballast=True)
