#!/usr/bin/env node
// tools/memshot.mjs — the README's picture of `record --mode memory`: a program whose
// response cache grows without bound (LEAK below), launched and recorded by remora in
// memory mode to its HTML flamegraph, the page shot in headless Chromium (Debian's
// chromium through tests/browser's playwright-core) as tools/screenshots.mjs shoots its
// pages: 1200x800, as it opens, every network request refused. Not run by make test.
//
//   node tools/memshot.mjs [--remora ./remora] [--python python3] [--out docs/memory-leak.png]
//
// Needs root (the kernel engine), chromium and `cd tests/browser && npm ci`.

import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createRequire } from 'node:module';
import { fileURLToPath, pathToFileURL } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const opt = { remora: path.join(ROOT, 'remora'), python: 'python3', out: path.join(ROOT, 'docs', 'memory-leak.png') };
for (let i = 2; i < process.argv.length; i += 2) {
  const k = process.argv[i].replace(/^--/, ''), v = process.argv[i + 1];
  if (!(k in opt) || v === undefined) {
    console.error('usage: node tools/memshot.mjs [--remora PATH] [--python PYTHON] [--out FILE.png]');
    process.exit(1);
  }
  opt[k] = k === 'python' ? v : path.resolve(v);
}
const CHROMIUM = process.env.REMORA_CHROMIUM || '/usr/bin/chromium';
const SIZE = { width: 1200, height: 800 };

// A small service: each request renders a page and caches it under a key no later request
// asks for (the leak: the cache is never evicted), logs a line (kept too), and parses a
// JSON body it then drops (temporaries reused: no growth).
const LEAK = `import json

CACHE = {}
ACCESS_LOG = []

def render(item):
    return ("<li>%s</li>\\n" % json.dumps(item)) * 40

def cached_page(i):
    key = ("/item", i)
    page = CACHE.get(key)
    if page is None:
        page = CACHE[key] = render({"id": i, "name": "item %d" % i, "tags": ["a", "b"]})
    return page

def parse_body(i):
    return json.loads('{"id": %d, "fields": [1, 2, 3, 4]}' % i)

def log_request(i, size):
    ACCESS_LOG.append("GET /item/%d 200 %d" % (i, size))

def handle(i):
    parse_body(i)
    log_request(i, len(cached_page(i)))

def serve(n):
    for i in range(n):
        handle(i)

if __name__ == "__main__":
    serve(40000)
`;

function run(argv, what) {
  const p = spawnSync(argv[0], argv.slice(1), { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  if (p.status !== 0) {
    console.error(`memshot: ${what} failed (exit ${p.status}): ${(p.stderr || p.stdout || '').trim().split('\n').slice(-3).join(' | ')}`);
    process.exit(1);
  }
  return p;
}

async function main() {
  const require = createRequire(path.join(ROOT, 'tests', 'browser', 'package.json'));
  const pw = require('playwright-core');
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'remora-memshot-'));
  try {
    const script = path.join(work, 'leaky_service.py');
    const page = path.join(work, 'leak.html');
    fs.writeFileSync(script, LEAK);
    const rec = run([opt.remora, 'record', '--mode', 'memory', '-o', page, '--', opt.python, script], 'remora record');
    console.log(rec.stderr.trim().split('\n').slice(-1)[0]);
    const browser = await pw.chromium.launch({ executablePath: CHROMIUM, headless: true, chromiumSandbox: false,
      args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking'] });
    try {
      const context = await browser.newContext({ viewport: SIZE, deviceScaleFactor: 1, colorScheme: 'light' });
      await context.route(/^(?!file:|data:)/, (r) => r.abort());
      const tab = await context.newPage();
      await tab.goto(pathToFileURL(page).href, { waitUntil: 'load' });
      await tab.waitForFunction(() => window.remoraPaintedAt !== undefined);
      fs.mkdirSync(path.dirname(opt.out), { recursive: true });
      await tab.screenshot({ path: opt.out, clip: { x: 0, y: 0, ...SIZE } });
      console.log(`memshot: ${opt.out}`);
      await context.close();
    } finally { await browser.close(); }
  } finally {
    fs.rmSync(work, { recursive: true, force: true });
  }
}

main().catch((e) => { console.error(`memshot: ${e.message || e}`); process.exit(1); });
