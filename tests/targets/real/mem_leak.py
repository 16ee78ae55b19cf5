# Memory real-program target (tests/functional/memory_real_tests.py): a service that
# leaks, its response cache growing without bound, and four other things it keeps.
#
#   python mem_leak.py READY
#
# work(n) serves n requests; each keeps fresh memory at five sites of its own: the page it
# renders in CACHE (the leak: keyed by request, never evicted; 24 KB of text), a session
# buffer (8 KB), a user record (a dict of small strings, ~1.5 KB in small objects), an
# access-log line (1 KB) and a key in an index (a short str and a tuple, ~160 bytes).
# Nothing kept is freed, so every byte allocated is fresh memory that the process grows by
# when it is written (allocation == growth, which tracemalloc and remora then both see);
# the little that is freed (the format strings) is reused at once. The window, tracemalloc
# and READY: memwindow.py, copied beside it.

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))    # -I leaves it out
import memwindow                                                  # noqa: E402

CACHE = {}
SESSIONS = []
USERS = []
ACCESS_LOG = []
INDEX = []


def render_page(key):
    CACHE[key] = ("<tr><td>row %09d</td><td>ok</td></tr>\n" % key) * 600


def open_session(key):
    SESSIONS.append(b"s" * 8192)


def remember_user(key):
    USERS.append({"id": "%d" % key, "name": "user %d" % key, "mail": "u%d@example.org" % key,
                  "home": "/home/u%d" % key, "shell": "/bin/sh", "groups": ("users", "staff"),
                  "tags": ["t%d" % (key % 7), "t%d" % (key % 11), "t%d" % (key % 13)],
                  "seen": key * 3, "quota": key * 7, "flags": {"a%d" % key, "b%d" % key},
                  "notes": "note %d" % key, "lang": "en-%d" % (key % 5)})


def log_access(key):
    ACCESS_LOG.append(("GET /item/%d HTTP/1.1 200 " % key).ljust(1000, "-"))


def index_key(key):
    INDEX.append(("k%08d" % key, key))


served = 0


def work(n):
    global served
    for _ in range(n):
        key = served
        served += 1
        render_page(key)
        open_session(key)
        remember_user(key)
        log_access(key)
        index_key(key)


if __name__ == "__main__":
    memwindow.run(sys.modules[__name__], lambda: work(200), {}, ballast=True)
