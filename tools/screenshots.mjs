#!/usr/bin/env node
// tools/screenshots.mjs — the pictures in docs/screenshots.md: remora's flamegraph,
// heatmap and `top` beside Tachyon's (python3.15 -m profiling.sampling) for one target,
// taken in headless Chromium (Debian's chromium through tests/browser's playwright-core).
// Not run by make test.
//
//   node tools/screenshots.mjs [--remora ./remora] [--root /var/cache/remora/sid] [--out docs/img]
//                              [--only pages|top]
//
// Pages (flamegraph, heatmap) are shot at 1200x800 as they open. For `top`, the target
// runs on forever (TOP_TARGET: the pipeline's worker in two threads), `remora top` and then
// Tachyon's `attach --live` each run against that one process in a tmux of 160x45; the
// screen is taken with `tmux capture-pane -e` once the table covers a second of the
// steady state (polled, never slept for), turned into an HTML page (ansiToHtml) and shot.
// The target (a pure-Python pipeline: JSON, a regex, a scoring loop, a second thread) runs
// on the chroot's python3.15 for both profilers: remora records it from outside
// (`remora record -- chroot ROOT python3.15 ...`); Tachyon runs inside the chroot, in a
// mount namespace of its own with the chroot's /proc mounted there (it reads
// /proc/PID/maps), so nothing stays mounted. Needs root, the chroot, chromium and
// `cd tests/browser && npm ci`. Pages open with every network request refused.

import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import { fileURLToPath, pathToFileURL } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const opt = { remora: path.join(ROOT, 'remora'), root: '/var/cache/remora/sid', out: path.join(ROOT, 'docs', 'img'), only: 'all' };
for (let i = 2; i < process.argv.length; i += 2) {
  const k = process.argv[i].replace(/^--/, ''), v = process.argv[i + 1];
  if (!(k in opt) || v === undefined) {
    console.error('usage: node tools/screenshots.mjs [--remora PATH] [--root CHROOT] [--out DIR] [--only pages|top]');
    process.exit(1);
  }
  if (k === 'only' && v !== 'pages' && v !== 'top') {
    console.error(`screenshots: --only takes pages or top, not ${v}`);
    process.exit(1);
  }
  opt[k] = k === 'only' ? v : path.resolve(v);
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

if __name__ == "__main__":
    main()
`;

// `top`'s target: the same pipeline's worker, forever, in the main thread and in one named
// "scorer", so the GIL is contended (held by one, asked for by the other); argv[1] is
// created once both threads run.
const TOP_TARGET = `import sys, threading
from pipeline import load, worker

def forever(docs):
    while True:
        worker(docs, [])

docs = load(20000)
threading.Thread(target=forever, args=(docs[:5000],), name="scorer", daemon=True).start()
open(sys.argv[1], "w").close()
forever(docs)
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

// The terminal's palette (xterm's 16 colours, a little softened for a dark background).
const PALETTE = ['#000000', '#cd3131', '#0dbc79', '#e5e510', '#2472c8', '#bc3fbc', '#11a8cd', '#e5e5e5',
  '#666666', '#f14c4c', '#23d18b', '#f5f543', '#3b8eea', '#d670d6', '#29b8db', '#ffffff'];
const TERM_FG = '#d4d4d4', TERM_BG = '#1e1e1e';

// xterm's 256 colours: the 16 above, a 6x6x6 cube, 24 greys; undefined past 255.
function color256(n) {
  if (!(n >= 0 && n <= 255)) return undefined;
  if (n < 16) return PALETTE[n];
  if (n >= 232) { const g = 8 + 10 * (n - 232); return `rgb(${g},${g},${g})`; }
  const lv = [0, 95, 135, 175, 215, 255], c = n - 16;
  return `rgb(${lv[Math.floor(c / 36)]},${lv[Math.floor(c / 6) % 6]},${lv[c % 6]})`;
}

// Applies one SGR sequence's parameters ("1;32", "38;5;208", "" = reset) to the state st.
function applySgr(st, params) {
  const p = params === '' ? [0] : params.split(/[;:]/).map((x) => (x === '' ? 0 : Number(x)));
  for (let i = 0; i < p.length; i++) {
    const n = p[i];
    if (n === 0) Object.assign(st, { fg: null, bg: null, bold: false, dim: false, italic: false, under: false, rev: false });
    else if (n === 1) st.bold = true;
    else if (n === 2) st.dim = true;
    else if (n === 3) st.italic = true;
    else if (n === 4) st.under = true;
    else if (n === 7) st.rev = true;
    else if (n === 22) st.bold = st.dim = false;
    else if (n === 23) st.italic = false;
    else if (n === 24) st.under = false;
    else if (n === 27) st.rev = false;
    else if (n >= 30 && n <= 37) st.fg = PALETTE[n - 30];
    else if (n >= 90 && n <= 97) st.fg = PALETTE[n - 90 + 8];
    else if (n >= 40 && n <= 47) st.bg = PALETTE[n - 40];
    else if (n >= 100 && n <= 107) st.bg = PALETTE[n - 100 + 8];
    else if (n === 39) st.fg = null;
    else if (n === 49) st.bg = null;
    else if (n === 38 || n === 48) {
      // extended colour: 5;N (256 colours) or 2;R;G;B
      let c;
      if (p[i + 1] === 5) { c = color256(p[i + 2]); i += 2; }
      else if (p[i + 1] === 2) { c = `rgb(${p[i + 2] & 255},${p[i + 3] & 255},${p[i + 4] & 255})`; i += 4; }
      if (c !== undefined) st[n === 38 ? 'fg' : 'bg'] = c;
    }
  }
}

// The text of `tmux capture-pane -e -p` (SGR colours, bold, dim, italic, underline,
// reverse) as a self-contained HTML page: monospace on a dark background, one <pre>.
// Any other escape sequence (OSC hyperlinks, cursor moves) is dropped.
function ansiToHtml(text, title) {
  const escape = (s) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
  const st = { fg: null, bg: null, bold: false, dim: false, italic: false, under: false, rev: false };
  let body = '';
  const lines = text.replace(/\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)/g, '').split('\n');
  // the empty rows under the table are left out: the picture ends with its last text
  while (lines.length && lines[lines.length - 1].replace(/\x1b\[[0-9;:?]*[A-Za-z]/g, '').trim() === '') lines.pop();
  const cleaned = lines.join('\n');
  for (const part of cleaned.split(/(\x1b\[[0-9;:?]*[A-Za-z])/)) {
    const m = /^\x1b\[([0-9;:?]*)([A-Za-z])$/.exec(part);
    if (m) {
      if (m[2] === 'm' && !m[1].includes('?')) applySgr(st, m[1]);
      continue;
    }
    const t = part.replace(/\x1b[^[]?/g, '');
    if (t === '') continue;
    let fg = st.fg, bg = st.bg;
    if (st.rev) [fg, bg] = [bg || TERM_BG, fg || TERM_FG];
    const css = [];
    if (fg) css.push(`color:${fg}`);
    if (bg) css.push(`background:${bg}`);
    if (st.bold) css.push('font-weight:bold');
    if (st.dim) css.push('opacity:0.6');
    if (st.italic) css.push('font-style:italic');
    if (st.under) css.push('text-decoration:underline');
    body += css.length ? `<span style="${css.join(';')}">${escape(t)}</span>` : escape(t);
  }
  return `<!doctype html><html><head><meta charset="utf-8"><title>${escape(title)}</title><style>
html, body { margin: 0; background: ${TERM_BG}; }
pre { margin: 0; padding: 8px; display: inline-block; color: ${TERM_FG}; background: ${TERM_BG};
  font: 12px/15px "DejaVu Sans Mono", monospace; }
</style></head><body><pre id="screen">${body}</pre></body></html>`;
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// One tmux server of our own (socket NAME under tmux's directory), its window 160x45,
// remain-on-exit so a program that fails leaves its message to be read.
class Tmux {
  constructor(name, work) {
    this.name = name;
    this.conf = path.join(work, `${name}.conf`);
    fs.writeFileSync(this.conf, 'set -g remain-on-exit on\nset -g status off\n');
  }
  tmux(args, what) {
    return spawnSync('tmux', ['-L', this.name, '-f', this.conf, ...args], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  }
  start(argv) {
    const p = this.tmux(['new-session', '-d', '-x', '160', '-y', '45', '-e', 'TERM=xterm-256color', ...argv]);
    if (p.status !== 0) throw new Error(`tmux new-session failed: ${p.stderr.trim()}`);
  }
  capture(colours) {
    const p = this.tmux(['capture-pane', '-p', ...(colours ? ['-e'] : []), '-t', '0']);
    if (p.status !== 0) throw new Error(`tmux capture-pane failed: ${p.stderr.trim()}`);
    return p.stdout;
  }
  keys(...k) { this.tmux(['send-keys', '-t', '0', ...k]); }
  // Polls the screen (every 100 ms, 60 s at most) until ready(plain text) holds.
  async until(ready, what) {
    const deadline = Date.now() + 60000;
    for (;;) {
      const screen = this.capture(false);
      if (ready(screen)) return;
      if (Date.now() > deadline)
        throw new Error(`${what} not seen on the ${this.name} screen in 60 s; it shows: ` +
          screen.trim().split('\n').slice(0, 4).join(' | '));
      await sleep(100);
    }
  }
  kill() { this.tmux(['kill-server']); }
}

// remora's header says "S.S s  R rounds taken ..."; Tachyon's "Uptime: 0m05s".
const remoraSeconds = (s) => Number((/^(\d+(?:\.\d+)?) s /m.exec(s) || [0, -1])[1]);
const tachyonSeconds = (s) => { const m = /Uptime: (\d+)m(\d+)s/.exec(s); return m ? 60 * Number(m[1]) + Number(m[2]) : -1; };

// Runs TOP_TARGET in the chroot (in a mount namespace of its own, with its /proc, where
// Tachyon can attach to it), then `remora top` and Tachyon's live view against it, one
// after the other; returns [png name, html] pairs.
async function topScreens(work, inRoot) {
  const ready = path.join(work, 'top.ready');
  fs.writeFileSync(path.join(work, 'top.py'), TOP_TARGET);
  const script = 'mount -t proc proc "$1/proc" && shift && exec chroot "$@"';
  const target = spawn('unshare', ['-m', '--propagation', 'private', 'sh', '-c', script, 'sh', opt.root, opt.root,
    'python3.15', `${inRoot}/top.py`, `${inRoot}/top.ready`], { stdio: 'ignore' });
  let exited = false;
  target.on('exit', () => { exited = true; });
  const tmuxes = [];
  try {
    const deadline = Date.now() + 60000;
    while (!fs.existsSync(ready)) {
      if (exited || Date.now() > deadline) throw new Error('the top target did not start (no ready file in 60 s)');
      await sleep(100);
    }
    const pid = String(target.pid);       // unshare, sh and chroot exec: the pid is python's
    const screens = [];

    // remora top: the whole process, then one thread (`t` until the scorer thread is shown)
    const rt = new Tmux(`remora-shots-${process.pid}-top`, work);
    tmuxes.push(rt);
    rt.start([opt.remora, 'top', '-p', pid]);
    await rt.until((s) => remoraSeconds(s) >= 3 && s.includes('last second:  GIL held') && s.includes('score ('),
      'remora top\'s table after 3 s');
    screens.push(['remora-top.png', ansiToHtml(rt.capture(true), 'remora top')]);
    const viewOf = (s) => (/\[thread ([^\]]*)\]/.exec(s) || [0, 'every thread'])[1];
    for (let press = 0; press < 4 && !viewOf(rt.capture(false)).startsWith('scorer '); press++) {
      const before = viewOf(rt.capture(false));
      rt.keys('t');
      await rt.until((s) => viewOf(s) !== before, 'remora top\'s next thread view');
    }
    const t0 = remoraSeconds(rt.capture(false));
    await rt.until((s) => s.includes('[thread scorer') && remoraSeconds(s) >= t0 + 1.5, 'remora top\'s scorer thread');
    screens.push(['remora-top-thread.png', ansiToHtml(rt.capture(true), 'remora top, one thread')]);
    rt.keys('q');
    rt.kill();

    // Tachyon: joins the target's namespaces (its root is the chroot) to attach
    const tt = new Tmux(`remora-shots-${process.pid}-tachyon`, work);
    tmuxes.push(tt);
    tt.start(['nsenter', '-t', pid, '-m', '-r', 'python3.15', '-m', 'profiling.sampling', 'attach', '--live', '-a', pid]);
    await tt.until((s) => tachyonSeconds(s) >= 3 && /\bscore\s/.test(s), 'Tachyon\'s table after 3 s');
    screens.push(['tachyon-live.png', ansiToHtml(tt.capture(true), 'Tachyon --live')]);
    tt.keys('q');
    tt.kill();
    return screens;
  } finally {
    for (const t of tmuxes) t.kill();
    if (!exited) target.kill('SIGKILL');
  }
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
    const shots = [];
    if (opt.only !== 'top') {
      run([opt.remora, 'record', '-o', path.join(work, 'remora.html'), '-o', path.join(work, 'remora.heatmap.html'),
        '--', 'chroot', opt.root, 'python3.15', target], 'remora record');
      tachyon(work, ['--flamegraph', '-o', `${inRoot}/tachyon.html`, target]);
      tachyon(work, ['--heatmap', '-o', `${inRoot}/tachyon_heatmap`, target]);
      // Tachyon's heatmap opens on an index; its shaded source is the target's own page
      const tfile = fs.readdirSync(path.join(work, 'tachyon_heatmap')).filter((f) => /^file_\d+\.html$/.test(f))
        .find((f) => fs.readFileSync(path.join(work, 'tachyon_heatmap', f), 'utf8').includes('pipeline.py'));
      shots.push(
        ['remora-flamegraph.png', path.join(work, 'remora.html'), 'light'],
        ['remora-flamegraph-dark.png', path.join(work, 'remora.html'), 'dark'],
        ['remora-heatmap.png', path.join(work, 'remora.heatmap.html'), 'light'],
        ['tachyon-flamegraph.png', path.join(work, 'tachyon.html'), 'light'],
        ['tachyon-heatmap-index.png', path.join(work, 'tachyon_heatmap', 'index.html'), 'light'],
      );
      if (tfile) shots.push(['tachyon-heatmap-file.png', path.join(work, 'tachyon_heatmap', tfile), 'light']);
    }
    const screens = opt.only !== 'pages' ? await topScreens(work, inRoot) : [];
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
      for (const [name, html] of screens) {
        // the terminal's text only: no request leaves the page; the shot is the <pre>'s box
        const context = await browser.newContext({ viewport: { width: 1400, height: 900 }, deviceScaleFactor: 1 });
        await context.route(/^(?!data:|about:)/, (r) => r.abort());
        const page = await context.newPage();
        await page.setContent(html, { waitUntil: 'load' });
        await page.locator('#screen').screenshot({ path: path.join(opt.out, name) });
        console.log(`screenshots: ${path.join(opt.out, name)}`);
        await context.close();
      }
    } finally { await browser.close(); }
  } finally {
    fs.rmSync(work, { recursive: true, force: true });
  }
}

main().catch((e) => { console.error(`screenshots: ${e.message || e}`); process.exit(1); });
