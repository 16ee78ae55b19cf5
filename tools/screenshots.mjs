#!/usr/bin/env node
// tools/screenshots.mjs — the pictures in docs/screenshots.md: remora's flamegraph and
// heatmap beside Tachyon's (python3.15 -m profiling.sampling) for one target, taken in
// headless Chromium (Debian's chromium through tests/browser's playwright-core) at
// 1200x800. Not run by make test.
//
//   node tools/screenshots.mjs [--remora ./remora] [--root /var/cache/remora/sid] [--out docs/img]
//
// The target (a pure-Python pipeline: JSON, a regex, a scoring loop, a second thread) runs
// on the chroot's python3.15 for both profilers: remora records it from outside
// (`remora record -- chroot ROOT python3.15 ...`); Tachyon runs inside the chroot, in a
// mount namespace of its own with the chroot's /proc mounted there (it reads
// /proc/PID/maps), so nothing stays mounted. Needs root, the chroot, chromium and
// `cd tests/browser && npm ci`. Pages open with every network request refused.

import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import { fileURLToPath, pathToFileURL } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const opt = { remora: path.join(ROOT, 'remora'), root: '/var/cache/remora/sid', out: path.join(ROOT, 'docs', 'img') };
for (let i = 2; i < process.argv.length; i += 2) {
  const k = process.argv[i].replace(/^--/, ''), v = process.argv[i + 1];
  if (!(k in opt) || v === undefined) {
    console.error('usage: node tools/screenshots.mjs [--remora PATH] [--root CHROOT] [--out DIR]');
    process.exit(1);
  }
  opt[k] = path.resolve(v);
}
const CHROMIUM = process.env.REMORA_CHROMIUM || '/usr/bin/chromium';
const SIZE = { width: 1200, height: 800 };

const TARGET = `import json, re, threading

WORDS = re.compile(r"[a-z]+")

def load(n):
    return [json.dumps({"id": i, "text": "alpha beta gamma delta %d" % i}) for i in range(n)]

def tokenize(doc):
    return WORDS.findall(json.loads(doc)["text"])

def score(words):
    total = 0
    for w in words:
        for ch in w:
            total = (total * 31 + ord(ch)) % 1000003
    return total

def worker(docs, out):
    out.append(sum(score(tokenize(d)) for d in docs))

def main():
    docs = load(20000)
    for _ in range(12):
        out = []
        t = threading.Thread(target=worker, args=(docs[:5000], out), name="scorer")
        t.start()
        worker(docs, out)
        t.join()

main()
`;

function run(argv, what) {
  const p = spawnSync(argv[0], argv.slice(1), { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  if (p.status !== 0) {
    console.error(`screenshots: ${what} failed (exit ${p.status}): ${(p.stderr || p.stdout || '').trim().split('\n').slice(-3).join(' | ')}`);
    process.exit(1);
  }
  return p;
}

function tachyon(work, args) {
  // a private mount namespace: the chroot's /proc is mounted there only
  const script = 'mount -t proc proc "$1/proc" && shift && exec chroot "$@"';
  return run(['unshare', '-m', '--propagation', 'private', 'sh', '-c', script, 'sh', opt.root, opt.root,
    'python3.15', '-m', 'profiling.sampling', 'run', '-a', ...args], `Tachyon ${args[0]}`);
}

async function main() {
  if (!fs.existsSync(path.join(opt.root, 'usr/lib/python3.15/profiling/sampling'))) {
    console.error(`screenshots: no python3.15 with profiling.sampling under ${opt.root}`);
    process.exit(1);
  }
  const require = createRequire(path.join(ROOT, 'tests', 'browser', 'package.json'));
  const pw = require('playwright-core');
  const work = fs.mkdtempSync(path.join(opt.root, 'tmp', 'remora-shots-'));
  const inRoot = '/' + path.relative(opt.root, work);
  fs.chmodSync(work, 0o755);
  fs.writeFileSync(path.join(work, 'pipeline.py'), TARGET);
  const target = `${inRoot}/pipeline.py`;
  try {
    run([opt.remora, 'record', '-o', path.join(work, 'remora.html'), '-o', path.join(work, 'remora.heatmap.html'),
      '--', 'chroot', opt.root, 'python3.15', target], 'remora record');
    tachyon(work, ['--flamegraph', '-o', `${inRoot}/tachyon.html`, target]);
    tachyon(work, ['--heatmap', '-o', `${inRoot}/tachyon_heatmap`, target]);
    // Tachyon's heatmap opens on an index; its shaded source is the target's own page
    const tfile = fs.readdirSync(path.join(work, 'tachyon_heatmap')).filter((f) => /^file_\d+\.html$/.test(f))
      .find((f) => fs.readFileSync(path.join(work, 'tachyon_heatmap', f), 'utf8').includes('pipeline.py'));
    const shots = [
      ['remora-flamegraph.png', path.join(work, 'remora.html'), 'light'],
      ['remora-flamegraph-dark.png', path.join(work, 'remora.html'), 'dark'],
      ['remora-heatmap.png', path.join(work, 'remora.heatmap.html'), 'light'],
      ['tachyon-flamegraph.png', path.join(work, 'tachyon.html'), 'light'],
      ['tachyon-heatmap-index.png', path.join(work, 'tachyon_heatmap', 'index.html'), 'light'],
    ];
    if (tfile) shots.push(['tachyon-heatmap-file.png', path.join(work, 'tachyon_heatmap', tfile), 'light']);
    fs.mkdirSync(opt.out, { recursive: true });
    const browser = await pw.chromium.launch({ executablePath: CHROMIUM, headless: true, chromiumSandbox: false,
      args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking'] });
    try {
      for (const [name, file, scheme] of shots) {
        const context = await browser.newContext({ viewport: SIZE, deviceScaleFactor: 1, colorScheme: scheme });
        await context.route(/^(?!file:|data:)/, (r) => r.abort());
        const page = await context.newPage();
        await page.goto(pathToFileURL(file).href, { waitUntil: 'load' });
        if (name.startsWith('remora-flamegraph'))
          await page.waitForFunction(() => window.remoraPaintedAt !== undefined);
        await page.waitForTimeout(500);     // the pages' own drawing after load (Tachyon's d3)
        await page.screenshot({ path: path.join(opt.out, name), clip: { x: 0, y: 0, ...SIZE } });
        console.log(`screenshots: ${path.join(opt.out, name)}`);
        await context.close();
      }
    } finally { await browser.close(); }
  } finally {
    fs.rmSync(work, { recursive: true, force: true });
  }
}

main().catch((e) => { console.error(`screenshots: ${e.stack || e}`); process.exit(1); });
