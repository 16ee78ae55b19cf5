# Real-program target (tests/functional/real_tests.py): Debian's aiohttp serving HTTP on
# 127.0.0.1 (a port the kernel picks: loopback only) under a load client in a separate
# process, which keeps CONNECTIONS keep-alive connections busy with the same cycle of
# requests (its mix still moves from one window to the next: its clock, below, is the
# truth of each). The server process is the target.
#
#   python aiohttp_server.py READY                   the server (starts its client)
#   python aiohttp_server.py --client PORT SECONDS   the load client
#
# The server: an aiohttp web application with a middleware (a header and a request
# count), GET /items/{id} (a JSON document computed per item), GET /page (an HTML page
# built with html.escape and str.join) and POST /echo (a JSON body parsed, transformed,
# returned); no access log. The client: asyncio streams, each connection sending the
# requests in turn and reading each response (Content-Length) before the next; it stops
# at MAX_REQUESTS, after SECONDS, or when the server goes. Once the server has answered
# WARMUP requests it writes READY (temp + rename): {"pid": N, "main": TID, "port": P,
# "client": PID, "aiohttp": VERSION, "extensions": whether aiohttp's C parser is in use,
# "file": this file as the target sees it, "steps": [names]}.
#
# The server times itself (time.perf_counter_ns): its event loop's selector is a subclass
# whose select() adds the time it takes (the loop waiting for the network: "select"), and
# each handler adds the time of its call ("item", "page", "echo"). A line "mark" on stdin
# appends one JSON line to marks.jsonl beside READY, {"at": perf_counter_ns, "threads":
# {TID: {step: ns}}} (the truth for those steps' shares of a window between two marks).
# It stops at EOF on stdin, or after LIFETIME seconds whatever happens, and then ends its
# client (which also ends by itself).

import asyncio
import html
import json
import os
import re
import selectors
import socket
import subprocess
import sys
import threading
import time

WARMUP = 300
LIFETIME = 600.0
CONNECTIONS = 4
MAX_REQUESTS = 5_000_000


# --- the server ------------------------------------------------------------------------

def server_main(ready_path):
    import aiohttp
    from aiohttp import web

    served = [0]
    totals = {}                                 # {step: ns}
    marks = open(os.path.join(os.path.dirname(ready_path), "marks.jsonl"), "w")

    def add(step, t0):
        totals[step] = totals.get(step, 0) + time.perf_counter_ns() - t0

    class TimedSelector(selectors.DefaultSelector):
        def select(self, timeout=None):
            t0 = time.perf_counter_ns()
            try:
                return super().select(timeout)
            finally:
                add("select", t0)

    @web.middleware
    async def count(request, handler):
        response = await handler(request)
        response.headers["X-Served"] = str(served[0])
        served[0] += 1
        if served[0] == WARMUP:
            ready()
        return response

    async def item(request):
        t0 = time.perf_counter_ns()
        n = int(request.match_info["id"])
        doc = {"id": n, "name": "item-%d" % n, "price": round(n * 1.07, 2),
               "tags": sorted({"t%d" % (n * k % 17) for k in range(1, 9)}),
               "related": [{"id": n + k, "score": (n * k) % 97 / 97.0} for k in range(12)]}
        response = web.json_response(doc)
        add("item", t0)
        return response

    async def page(request):
        t0 = time.perf_counter_ns()
        q = request.query.get("q", "")
        rows = "".join("<tr><td>%d</td><td>%s</td><td>%.2f</td></tr>" % (
            i, html.escape("name <%d> & %s" % (i, q)), i * 0.37) for i in range(60))
        body = "<html><head><title>%s</title></head><body><table>%s</table></body></html>" % (
            html.escape(q), rows)
        response = web.Response(text=body, content_type="text/html")
        add("page", t0)
        return response

    def echo(body):
        t0 = time.perf_counter_ns()
        data = json.loads(body)
        data["items"] = [dict(x, total=x["n"] * x["price"]) for x in data["items"]]
        data["count"] = len(data["items"])
        response = web.json_response(data)
        add("echo", t0)
        return response

    # the body read outside the step's frame: it may wait for the network (not the step's
    # time) or not (then its work would be on a timed frame's stack but not in its time)
    async def post_echo(request):
        return echo(await request.read())

    app = web.Application(middlewares=[count])
    app.add_routes([web.get("/items/{id}", item), web.get("/page", page), web.post("/echo", post_echo)])

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    port = sock.getsockname()[1]
    client = []

    def ready():
        from aiohttp import http_parser
        with open(ready_path + ".tmp", "w") as f:
            json.dump({"pid": os.getpid(), "main": threading.get_native_id(), "port": port,
                       "client": client[0].pid, "aiohttp": aiohttp.__version__,
                       "extensions": http_parser.HttpRequestParser.__module__ != "aiohttp.http_parser",
                       "file": os.path.abspath(__file__), "steps": ["select", "item", "page", "echo"]}, f)
        os.rename(ready_path + ".tmp", ready_path)

    async def serve():
        loop = asyncio.get_running_loop()
        stop = loop.create_future()

        def on_stdin():
            data = os.read(0, 4096)
            if not data and not stop.done():
                stop.set_result("eof")
            for _ in range(data.count(b"mark\n")):
                marks.write(json.dumps({"at": time.perf_counter_ns(),
                                        "threads": {str(threading.get_native_id()): dict(totals)}}) + "\n")
                marks.flush()

        loop.add_reader(0, on_stdin)
        loop.call_later(LIFETIME, lambda: stop.done() or stop.set_result("lifetime"))
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.SockSite(runner, sock)
        await site.start()
        client.append(subprocess.Popen([sys.executable, "-I", os.path.abspath(__file__), "--client",
                                        str(port), str(LIFETIME)], stdin=subprocess.DEVNULL))
        try:
            await stop
        finally:
            loop.remove_reader(0)
            client[0].terminate()
            await runner.cleanup()
            client[0].wait()

    loop = asyncio.SelectorEventLoop(TimedSelector())
    try:
        loop.run_until_complete(serve())
    finally:
        loop.close()


# --- the load client ---------------------------------------------------------------------

ECHO = json.dumps({"order": 7, "items": [{"sku": "s%d" % i, "n": i % 4 + 1, "price": i * 0.5}
                                         for i in range(20)]}).encode()
REQUESTS = [b"GET /items/%d HTTP/1.1\r\nHost: localhost\r\n\r\n" % i for i in (3, 17, 42)] + [
    b"GET /page?q=widgets HTTP/1.1\r\nHost: localhost\r\n\r\n",
    b"POST /echo HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
    b"Content-Length: %d\r\n\r\n%s" % (len(ECHO), ECHO)]
LENGTH = re.compile(rb"\r\ncontent-length: *(\d+)", re.I)


def client_main(port, seconds):
    sent = [0]

    async def connection(i):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        k = i
        try:
            while sent[0] < MAX_REQUESTS:
                writer.write(REQUESTS[k % len(REQUESTS)])
                k += 1
                sent[0] += 1
                head = await reader.readuntil(b"\r\n\r\n")
                await reader.readexactly(int(LENGTH.search(head).group(1)))
        finally:
            writer.close()

    async def run():
        tasks = [asyncio.ensure_future(connection(i)) for i in range(CONNECTIONS)]
        try:
            await asyncio.wait_for(asyncio.gather(*tasks), seconds)
        except (OSError, EOFError, asyncio.IncompleteReadError, asyncio.TimeoutError):
            pass
        finally:
            for t in tasks:
                t.cancel()

    asyncio.run(run())


if __name__ == "__main__":
    if sys.argv[1] == "--client":
        client_main(int(sys.argv[2]), float(sys.argv[3]))
    else:
        server_main(sys.argv[1])
