#!/usr/bin/env node
// tests/browser/run.mjs — remora's HTML flamegraph, tested in headless Chromium.
//
//   node tests/browser/run.mjs [--mkprofile build/mkprofile] [--page FILE.html]...
//                              [--screenshot OUT.png] [--keep DIR]
//   node tests/browser/run.mjs --recorded-hostile PAGE.html TRUTH.json
//   node tests/browser/run.mjs --svg FILE.svg BOXES
//
// mkprofile (tests/browser/mkprofile.c) writes the pages of four scenarios and prints
// the stacks it put in; every figure checked here is computed from those stacks, never
// from the page's own arithmetic. --page adds the basic render checks for a page made
// elsewhere (e.g. by remora record -o x.html). --recorded-hostile runs only the check of a
// page recorded from tests/targets/odd_names.py (tests/functional/hostile_tests.py writes
// TRUTH: the names remora must show). --svg runs only the check of a static SVG flamegraph
// (remora's -o x.svg; tests/functional/svg_tests.py gives the boxes it counted). Prints PASS/FAIL/SKIP per test and ends
// with "browser: N passed, N failed, N skipped"; exits 1 when a test failed. Tests that
// need Chromium or playwright-core are skipped, by name, when either is missing
// (install: make browser-deps).

import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const ROOT = path.resolve(HERE, '..', '..');
const CHROMIUM = process.env.REMORA_CHROMIUM || '/usr/bin/chromium';
const ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync'];
const VIEWPORT = { width: 1280, height: 800 };

const USAGE = `usage: node tests/browser/run.mjs [--mkprofile PATH] [--page FILE.html [--table TABLE.txt]]...
                                [--screenshot OUT.png] [--keep DIR]
       node tests/browser/run.mjs --recorded-hostile PAGE.html TRUTH.json
       node tests/browser/run.mjs --svg FILE.svg BOXES

  --mkprofile PATH   the scenario writer (default build/mkprofile; make build/mkprofile)
  --page FILE.html   also run the render checks on a flamegraph made elsewhere
  --table TABLE.txt  remora's table of the same recording as the --page before it
                     (remora convert REC -f table -o TABLE.txt): its hotspots must equal it
  --screenshot PNG   save the basic scenario's page as docs/flamegraph.png was made
  --keep DIR         keep the generated pages in DIR
Prints PASS/FAIL/SKIP per check, ends with "browser: N passed, N failed, N skipped";
exit 1 when a check failed. make browser-test runs it; make test through tests/run_all.py.`;
const opt = { mkprofile: path.join(ROOT, 'build', 'mkprofile'), pages: [], tables: new Map(), screenshot: null, keep: null, hostile: null, svg: null };
for (let i = 2; i < process.argv.length; i++) {
  const a = process.argv[i], v = process.argv[i + 1];
  if (a === '--help' || a === '-h') { console.log(USAGE); process.exit(0); }
  else if (a === '--mkprofile' && v) { opt.mkprofile = v; i++; }
  else if (a === '--page' && v) { opt.pages.push(v); i++; }
  else if (a === '--table' && v && opt.pages.length) { opt.tables.set(opt.pages[opt.pages.length - 1], v); i++; }
  else if (a === '--screenshot' && v) { opt.screenshot = v; i++; }
  else if (a === '--keep' && v) { opt.keep = v; i++; }
  else if (a === '--recorded-hostile' && v && process.argv[i + 2]) { opt.hostile = [v, process.argv[i + 2]]; i += 2; }
  else if (a === '--svg' && v && process.argv[i + 2]) { opt.svg = [v, Number(process.argv[i + 2])]; i += 2; }
  else { console.error(`${USAGE}\n(bad argument: ${a})`); process.exit(2); }
}

const counts = { passed: 0, failed: 0, skipped: 0 };
function pass(name, extra) { counts.passed++; console.log(`PASS ${name}${extra ? ' (' + extra + ')' : ''}`); }
function fail(name, why) { counts.failed++; console.log(`FAIL ${name}: ${why}`); }
function skip(name, why) { counts.skipped++; console.log(`SKIP ${name}: ${why}`); }
class Check extends Error {}
function expect(cond, why) { if (!cond) throw new Check(why); }
function eq(got, want, what) {
  const g = JSON.stringify(got), w = JSON.stringify(want);
  if (g !== w) throw new Check(`${what}: got ${g}, want ${w}`);
}

// ---- ground truth from the stacks mkprofile put in ---------------------------------

const pct = (x) => (x * 100).toFixed(2) + '%';
const fmtInt = (n) => String(Math.round(n)).replace(/\B(?=(\d{3})+(?!\d))/g, ',');
const sum = (stacks) => stacks.reduce((s, x) => s + x.count, 0);
function matches(q, fr) { q = q.toLowerCase(); return fr[0].toLowerCase().includes(q) || fr[1].toLowerCase().includes(q); }
// samples whose stack has a frame matching q (each sample once)
const searchTruth = (stacks, q) => sum(stacks.filter((s) => s.frames.some((fr) => matches(q, fr))));
// total and self of the stack path (thread, frame functions...), e.g. for a tooltip
function pathTruth(stacks, tid, fns) {
  let total = 0, self = 0;
  for (const s of stacks) {
    if (s.tid !== tid || s.frames.length < fns.length) continue;
    if (fns.every((f, i) => s.frames[i][0] === f)) { total += s.count; if (s.frames.length === fns.length) self += s.count; }
  }
  return { total, self };
}
// the path with the most samples that ends at function fn
function widestPath(stacks, fn) {
  let best = null;
  for (const s of stacks) {
    s.frames.forEach((fr, i) => {
      if (fr[0] !== fn) return;
      const fns = s.frames.slice(0, i + 1).map((x) => x[0]);
      const t = pathTruth(stacks, s.tid, fns);
      if (!best || t.total > best.total) best = { ...t, tid: s.tid, thread: s.thread, fns, frame: fr };
    });
  }
  return best;
}

// ---- the page ----------------------------------------------------------------------

async function open(browser, file, timeout = 15000, colorScheme = 'light') {
  const context = await browser.newContext({ viewport: VIEWPORT, deviceScaleFactor: 1, colorScheme });
  const page = await context.newPage();
  const problems = [];
  page.on('console', (m) => {
    // the one warning our own pixel reads (getImageData) cause is not the page's
    if ((m.type() === 'error' || m.type() === 'warning') && !/willReadFrequently/.test(m.text())) problems.push(`console ${m.type()}: ${m.text()}`);
  });
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  page.on('dialog', (d) => { problems.push(`dialog: ${d.message()}`); d.dismiss().catch(() => {}); });
  page.on('request', (r) => { if (!/^(file|data):/.test(r.url())) problems.push(`network request: ${r.url()}`); });
  const t0 = Date.now();
  await page.goto(pathToFileURL(path.resolve(file)).href, { timeout });
  try {
    await page.waitForFunction(() => window.remoraPaintedAt !== undefined, null, { timeout });
  } catch (e) {
    const dom = await page.evaluate(() => ({ pwned: window.__pwned, imgs: document.querySelectorAll('img').length,
      scripts: document.querySelectorAll('script').length })).catch(() => ({}));
    await context.close();
    throw new Check(`the page never painted within ${timeout} ms (${JSON.stringify(dom)}; ${problems.slice(0, 3).join('; ') || 'no console errors'})`);
  }
  const wall = Date.now() - t0;
  return { page, context, problems, wall };
}

async function pixels(page) {
  return page.evaluate(() => {
    const c = document.getElementById('fg'), d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
    let drawn = 0;
    const colours = new Set();
    for (let i = 0; i < d.length; i += 4) {
      if (d[i + 3] === 0) continue;
      drawn++;
      if (colours.size < 500) colours.add((d[i] << 16) | (d[i + 1] << 8) | d[i + 2]);
    }
    return { drawn, area: d.length / 4, colours: colours.size, w: c.width, h: c.height };
  });
}

// the colour of the canvas at a client point (a box's fill: its top-left corner is text-free)
async function pixelAt(page, x, y) {
  return page.evaluate(([cx, cy]) => {
    const c = document.getElementById('fg'), r = c.getBoundingClientRect(), k = c.width / r.width;
    const d = c.getContext('2d').getImageData(Math.floor((cx - r.left) * k), Math.floor((cy - r.top) * k), 1, 1).data;
    return [d[0], d[1], d[2], d[3]];
  }, [x, y]);
}

async function rectOf(page, label) {
  const r = await page.evaluate((l) => window.remora.rectOf(l), label);
  expect(r, `no box drawn for ${JSON.stringify(label)}`);
  return r;
}

async function tooltipOf(page, label) {
  const r = await rectOf(page, label);
  await page.mouse.move(r.x + Math.min(r.w / 2, 40), r.y + r.h / 2);
  await page.waitForFunction((l) => document.getElementById('tip').style.display === 'block' &&
    document.querySelector('#tip .name')?.textContent === l, label, { timeout: 5000 });
  return page.evaluate(() => {
    const t = document.getElementById('tip');
    return { name: t.querySelector('.name')?.textContent, where: t.querySelector('.where')?.textContent,
      rows: Array.from(t.querySelectorAll('.row')).map((e) => e.textContent) };
  });
}

function noProblems(o) { expect(o.problems.length === 0, o.problems.slice(0, 3).join('; ')); }

async function renderChecks(o) {
  noProblems(o);
  const px = await pixels(o.page);
  expect(px.drawn > px.area * 0.05 && px.colours >= 4, `canvas looks blank: ${px.drawn} of ${px.area} pixels drawn, ${px.colours} colours`);
  return px;
}

// ---- tests ---------------------------------------------------------------------------

async function testBasicRender(browser, files, truth) {
  const o = await open(browser, files.basic);
  try {
    const px = await renderChecks(o);
    const st = await o.page.evaluate(() => window.remora.state());
    eq(st.viewTotal, sum(truth.basic.stacks), 'samples in view');
    const head = await o.page.evaluate(() => ({ cmd: document.getElementById('cmd').textContent, facts: document.getElementById('facts').textContent, title: document.title }));
    eq(head.cmd, 'python3 app.py --port 8080 --workers 1', 'header command');
    for (const want of ['Python 3.12.1', 'samples 1,000', 'stacks 1,400', 'rate 1,000 Hz asked', 'errors 3 (0.21% of stack reads)', 'duration 1.00 s',
      'engine user', 'mode wall', 'partial 0 (0.00% of stacks)'])
      expect(head.facts.includes(want), `header lacks "${want}": ${head.facts}`);
    const total = await o.page.evaluate(() => document.getElementById('view-total').textContent);
    eq(total, '1,400 samples in view', 'view total');
    // every frame a stack holds is drawn (all are wider than the cut-off at this size)
    const labels = await o.page.evaluate(() => window.remora.labels());
    const fns = new Set(truth.basic.stacks.flatMap((s) => s.frames.map((f) => f[0])));
    for (const f of fns) expect(labels.includes(f), `frame ${f} missing from the page's data`);
    return `${px.drawn} of ${px.area} pixels drawn, ${px.colours}+ colours`;
  } finally { await o.context.close(); }
}

async function testBasicZoom(browser, files, truth) {
  const o = await open(browser, files.basic);
  try {
    const p = o.page, S = truth.basic.stacks;
    const r = await rectOf(p, 'Handler.do_GET');
    await p.mouse.click(r.x + r.w / 2, r.y + r.h / 2);
    let st = await p.evaluate(() => window.remora.state());
    const want = widestPath(S, 'Handler.do_GET');
    eq(st.zoomLabel, 'Handler.do_GET', 'zoomed frame');
    eq(st.crumbs, ['all threads', `thread ${want.thread} (${want.tid})`, ...want.fns], 'zoom path');
    eq(st.zoomTotal, want.total, 'samples of the zoomed frame');
    const crumbs = await p.evaluate(() => Array.from(document.querySelectorAll('#crumbs button')).map((b) => [b.textContent, b.hasAttribute('aria-current')]));
    eq(crumbs[crumbs.length - 1], ['Handler.do_GET', true], 'last breadcrumb');
    eq(crumbs.length, st.crumbs.length, 'breadcrumb count');
    const z = await rectOf(p, 'Handler.do_GET');
    const cw = await p.evaluate(() => document.getElementById('fg').getBoundingClientRect().width);
    expect(Math.abs(z.w - cw) < 1, `zoomed frame is ${z.w}px wide, the canvas ${cw}px`);
    // a child keeps its share of the zoomed frame
    const child = await rectOf(p, 'render_catalog');
    const wantChild = pathTruth(S, want.tid, [...want.fns, 'render_catalog']).total;
    expect(Math.abs(child.w - cw * wantChild / want.total) < 1.5, `render_catalog is ${child.w}px, want ${cw * wantChild / want.total}`);
    // breadcrumb zooms out
    await p.locator('#crumbs button', { hasText: /^main$/ }).click();
    st = await p.evaluate(() => window.remora.state());
    eq(st.zoomLabel, 'main', 'zoom after the breadcrumb "main"');
    eq(st.zoomTotal, pathTruth(S, want.tid, want.fns.slice(0, 2)).total, 'samples of main');
    await p.keyboard.press('Escape');
    st = await p.evaluate(() => window.remora.state());
    eq(st.crumbs, ['all threads'], 'zoom after Escape');
    noProblems(o);
  } finally { await o.context.close(); }
}

async function testBasicSearch(browser, files, truth) {
  const o = await open(browser, files.basic);
  try {
    const p = o.page, S = truth.basic.stacks, T = sum(S);
    for (const q of ['compute_prices', 'ROUND', 'json/']) {
      await p.fill('#search', q);
      const st = await p.evaluate(() => window.remora.state());
      const want = searchTruth(S, q);
      eq(st.query, q, 'query');
      eq(st.matched, want, `samples matching "${q}"`);
      const status = await p.evaluate(() => document.getElementById('search-status').textContent);
      expect(status.startsWith(`${fmtInt(want)} of ${fmtInt(T)} samples (${pct(want / T)})`), `status for "${q}": ${status}`);
      const wantFns = [...new Set(S.flatMap((s) => s.frames.filter((f) => matches(q, f)).map((f) => f[0])))].sort();
      eq(await p.evaluate(() => window.remora.highlighted()), wantFns, `highlighted frames for "${q}"`);
    }
    // the highlight is drawn: a match in magenta, a non-match faded
    await p.fill('#search', 'compute_prices');
    const m = await rectOf(p, 'compute_prices');
    const c = await pixelAt(p, m.x + 2, m.y + 2);
    expect(Math.abs(c[0] - 0xc0) < 8 && Math.abs(c[1] - 0x26) < 8 && Math.abs(c[2] - 0xd3) < 8, `match colour ${c}`);
    // regular expressions
    await p.fill('#search', '/^round_/');
    eq((await p.evaluate(() => window.remora.state())).matched, sum(S.filter((s) => s.frames.some((f) => /^round_/.test(f[0])))), 'regex match');
    await p.fill('#search', '');
    eq((await p.evaluate(() => window.remora.state())).matched, 0, 'cleared search');
    noProblems(o);
    return `"compute_prices": ${searchTruth(S, 'compute_prices')}/${T} = ${pct(searchTruth(S, 'compute_prices') / T)}`;
  } finally { await o.context.close(); }
}

async function testBasicThreads(browser, files, truth) {
  const o = await open(browser, files.basic);
  try {
    const p = o.page, S = truth.basic.stacks;
    const options = await p.evaluate(() => Array.from(document.querySelectorAll('#thread option')).map((x) => [x.value, x.textContent]));
    eq(options.length, 3, 'thread options');
    const worker = S.filter((s) => s.thread === 'pricing-worker');
    await p.fill('#search', 'compute_prices');
    await p.selectOption('#thread', options.find((x) => x[1].startsWith('pricing-worker'))[0]);
    let st = await p.evaluate(() => window.remora.state());
    eq(st.viewTotal, sum(worker), 'samples of pricing-worker');
    eq(st.crumbs, ['thread pricing-worker (4250)'], 'view root');
    eq(await p.evaluate(() => document.getElementById('view-total').textContent), `${fmtInt(sum(worker))} samples in view`, 'total shown');
    eq(st.matched, searchTruth(worker, 'compute_prices'), 'search in the thread');
    const status = await p.evaluate(() => document.getElementById('search-status').textContent);
    expect(status.includes(pct(searchTruth(worker, 'compute_prices') / sum(worker))), `status ${status}`);
    expect(await p.evaluate(() => window.remora.rectOf('main')) === null, 'MainThread frames drawn in the worker view');
    await p.selectOption('#thread', '-1');
    st = await p.evaluate(() => window.remora.state());
    eq(st.viewTotal, sum(S), 'samples of all threads');
    noProblems(o);
    return `all ${sum(S)}, pricing-worker ${sum(worker)}`;
  } finally { await o.context.close(); }
}

async function testBasicTooltip(browser, files, truth) {
  const o = await open(browser, files.basic);
  try {
    const S = truth.basic.stacks, T = sum(S), w = widestPath(S, 'round_money');
    const tip = await tooltipOf(o.page, 'round_money');
    eq(tip.name, 'round_money', 'tooltip name');
    eq(tip.where, `${w.frame[1]}:${w.frame[2]}`, 'tooltip file:line');
    eq(tip.rows[0], `Total: ${fmtInt(w.total)} samples, ${pct(w.total / T)}`, 'tooltip total');
    eq(tip.rows[1], `Self: ${fmtInt(w.self)} samples, ${pct(w.self / T)}`, 'tooltip self');
    const w2 = widestPath(S, 'Handler.do_GET');
    const tip2 = await tooltipOf(o.page, 'Handler.do_GET');
    eq(tip2.rows[0], `Total: ${fmtInt(w2.total)} samples, ${pct(w2.total / T)}`, 'tooltip total of Handler.do_GET');
    eq(tip2.rows[1], `Self: ${fmtInt(w2.self)} samples, ${pct(w2.self / T)}`, 'tooltip self of Handler.do_GET');
    noProblems(o);
  } finally { await o.context.close(); }
}

async function testBasicOrientation(browser, files) {
  const o = await open(browser, files.basic);
  try {
    const p = o.page;
    // icicle is the default: the root on the canvas's first row, callers above callees
    eq((await p.evaluate(() => window.remora.state())).orient, 'icicle', 'orientation at the start');
    eq(await p.evaluate(() => document.getElementById('icicle').getAttribute('aria-pressed')), 'true', 'icicle button pressed');
    const top = await p.evaluate(() => document.getElementById('fg').getBoundingClientRect().top);
    eq((await rectOf(p, 'all threads')).y, top, 'icicle: the root at the top of the canvas');
    let a = await rectOf(p, '<module>'), b = await rectOf(p, 'main');
    expect(a.y < b.y, 'icicle: the caller should be above its callee');
    await p.click('#flame');
    eq((await p.evaluate(() => window.remora.state())).orient, 'flame', 'orientation');
    a = await rectOf(p, '<module>'); b = await rectOf(p, 'main');
    expect(a.y > b.y, 'flame: the caller should be below its callee');
    await p.click('#icicle');
    a = await rectOf(p, '<module>'); b = await rectOf(p, 'main');
    expect(a.y < b.y, 'icicle again');
    noProblems(o);
  } finally { await o.context.close(); }
}

// remora's table (mkprofile's TABLE.txt, out_table_write): [fn, file, line, self, total]
function parseTable(text) {
  const rows = [];
  for (const l of text.split('\n').slice(1)) {
    const m = /^\s*(\d+)\s+[\d.]+%\s+(\d+)\s+[\d.]+%  (.*)$/.exec(l);
    if (!m) continue;
    const fr = /^(.*) \((.*):(-?\d+)\)$/.exec(m[3]);
    rows.push(fr ? [fr[1], fr[2], Number(fr[3]), Number(m[1]), Number(m[2])] : [m[3], '', 0, Number(m[1]), Number(m[2])]);
  }
  return rows;
}

// The hotspots panel lists what remora's table lists for the same stacks: the same
// functions in the same order with the same self and total samples and hot line, and the
// panel's rows show those functions with their shares.
async function testHotspots(browser, files, truth) {
  const out = [];
  for (const s of ['basic', 'imports']) {
    const table = parseTable(fs.readFileSync(files[`${s}-table`], 'utf8'));
    expect(table.length >= 5, `${s}: the table has ${table.length} rows`);
    const o = await open(browser, files[s]);
    try {
      const p = o.page, T = truth[s].total;
      const hot = (await p.evaluate(() => window.remora.hotspots())).slice(0, table.length)
        .map((r) => [r.fn, r.file, r.file ? r.line : 0, r.self, r.total]);
      eq(hot, table, `${s}: hotspots against the table`);
      const shown = await p.evaluate(() => window.remora.hotspotsShown());
      eq(shown.map((r) => r.fn), table.slice(0, shown.length).map((r) => r[0]), `${s}: hotspot rows shown`);
      eq(shown[0].pc, `${pct(table[0][3] / T)} / ${pct(table[0][4] / T)}`, `${s}: first hotspot's shares`);
      const side = await p.evaluate(() => document.getElementById('side').getBoundingClientRect());
      expect(side.width > 200 && side.height > 200 && side.left < 1280, `${s}: hotspots panel not on screen: ${JSON.stringify(side)}`);
      noProblems(o);
      out.push(`${s}: ${table.length} rows equal, first ${table[0][0]} ${table[0][3]}`);
    } finally { await o.context.close(); }
  }
  return out.join('; ');
}

// The summary names the engine and the partial stacks (those with a <moving> frame).
async function testSummary(browser, files, truth) {
  const o = await open(browser, files.imports);
  try {
    const facts = await o.page.evaluate(() => document.getElementById('facts').textContent);
    const partial = sum(truth.imports.stacks.filter((x) => x.frames.some((f) => f[0] === '<moving>')));
    for (const want of ['engine user', 'mode wall', 'samples 1,000', 'duration 1.00 s', `partial ${partial} (${pct(partial / truth.imports.total)} of stacks)`, 'errors 0'])
      expect(facts.includes(want), `summary lacks "${want}": ${facts}`);
    noProblems(o);
    return `partial ${partial}`;
  } finally { await o.context.close(); }
}

// Dark mode: the system's choice (prefers-color-scheme) gives a dark page whose canvas
// still draws; the toggle turns it light and back.
async function testDark(browser, files) {
  const o = await open(browser, files.basic, 15000, 'dark');
  try {
    const p = o.page;
    const bg = () => p.evaluate(() => {
      const m = /rgba?\((\d+), (\d+), (\d+)/.exec(getComputedStyle(document.body).backgroundColor);
      return m ? (Number(m[1]) + Number(m[2]) + Number(m[3])) / 3 : -1;
    });
    let b = await bg();
    expect(b >= 0 && b < 60, `dark: body background brightness ${b}`);
    eq((await p.evaluate(() => window.remora.state())).dark, true, 'dark state');
    const px = await renderChecks(o);
    const fg = await p.evaluate(() => getComputedStyle(document.getElementById('cmd')).color);
    expect(/rgb\((2[0-9][0-9]), /.test(fg), `dark: the command's colour ${fg} should be light`);
    await p.click('#theme');
    b = await bg();
    expect(b > 200, `after the toggle: background brightness ${b}`);
    eq((await p.evaluate(() => window.remora.state())).dark, false, 'state after the toggle');
    await p.click('#theme');
    expect(await bg() < 60, 'the toggle back to dark');
    noProblems(o);
    return `${px.drawn} pixels drawn on a dark page`;
  } finally { await o.context.close(); }
}

// Labels: module names by default (json.encoder:258), file paths with the toggle, on the
// boxes and in the hotspots.
async function testLabels(browser, files) {
  const o = await open(browser, files.basic);
  try {
    const p = o.page;
    eq((await p.evaluate(() => window.remora.state())).labels, 'module', 'default labels');
    let t = await p.evaluate(() => window.remora.boxText('Handler.do_GET'));
    eq(t, 'Handler.do_GET  handlers:57', 'module label of Handler.do_GET');
    let hot = await p.evaluate(() => window.remora.hotspotsShown());
    const where = (fn) => hot.find((r) => r.fn === fn)?.where;
    eq(where('round_money'), 'pricing:8', 'hotspot module of round_money');
    eq(where('Template.render'), 'jinja2.environment:1301', 'hotspot module of a site-packages frame');
    eq(where('JSONEncoder.iterencode'), 'json.encoder:258', 'hotspot module of a standard library frame');
    await p.click('#lbl-path');
    t = await p.evaluate(() => window.remora.boxText('Handler.do_GET'));
    eq(t, 'Handler.do_GET  /srv/shop/handlers.py:57', 'path label of Handler.do_GET');
    hot = await p.evaluate(() => window.remora.hotspotsShown());
    eq(where('round_money'), '/srv/shop/pricing.py:8', 'hotspot path of round_money');
    await p.click('#lbl-module');
    eq(await p.evaluate(() => window.remora.boxText('Handler.do_GET')), 'Handler.do_GET  handlers:57', 'module label again');
    noProblems(o);
  } finally { await o.context.close(); }
}

// Start-up imports: each outermost <frozen importlib._bootstrap> subtree is one box by
// default (nothing inside it drawn, its width its samples); the toggle unfolds them.
async function testImportFold(browser, files, truth) {
  const o = await open(browser, files.imports);
  try {
    const p = o.page, S = truth.imports.stacks;
    const inImport = sum(S.filter((x) => x.frames[1] && x.frames[1][0] === '_find_and_load'));
    const depth = (fold) => Math.max(...S.map((x) => {
      const k = x.frames.findIndex((f) => f[1].startsWith('<frozen importlib._bootstrap'));
      return fold && k >= 0 ? k + 1 : x.frames.length;
    })) + 2;
    let st = await p.evaluate(() => window.remora.state());
    expect(st.fold && st.folding && st.foldable === 2, `folding at the start: ${JSON.stringify([st.fold, st.folding, st.foldable])}`);
    eq(st.rows, depth(true), 'rows with the imports folded');
    const r = await rectOf(p, '_find_and_load');
    eq(r.total, inImport, 'samples of the folded box');
    expect((await p.evaluate(() => window.remora.boxText('_find_and_load'))).startsWith('start-up imports (folded)'), 'the folded box says so');
    for (const inner of ['_load_unlocked', 'exec_module'])
      expect(await p.evaluate((l) => window.remora.rectOf(l), inner) === null, `${inner} drawn while folded`);
    await p.click('#fold');
    st = await p.evaluate(() => window.remora.state());
    expect(!st.fold && !st.folding, 'unfolded after the toggle');
    eq(st.rows, depth(false), 'rows with the imports unfolded');
    await rectOf(p, '_load_unlocked');
    await rectOf(p, 'exec_module');
    await p.click('#fold');
    expect(await p.evaluate(() => window.remora.rectOf('exec_module')) === null, 'folded again');
    // the basic profile has no imports: no toggle
    noProblems(o);
    return `${inImport} samples in one box, ${depth(true)} rows folded, ${depth(false)} unfolded`;
  } finally { await o.context.close(); }
}

// The heatmap's first screen (1280x800) shows the hottest file's source: the hottest
// line of that file with its text, shaded; the hottest lines list each line's text and
// function; the shading toggle switches to self shares. Truth: mkprofile's stacks and its
// made-up sources (line k of a file: "    step_k()  # BASENAME").
async function testHeatmap(browser, files, truth) {
  const S = truth.imports.stacks;
  const text = (file, line) => `step_${line}()  # ${path.basename(file)}`;
  const selfOf = new Map(), fileSelf = new Map();
  for (const x of S) {
    const f = x.frames[x.frames.length - 1];
    if (!f[1] || f[1].startsWith('<') || f[2] <= 0) continue;
    const k = `${f[1]}:${f[2]}`;
    selfOf.set(k, { file: f[1], line: f[2], fn: f[0], self: (selfOf.get(k)?.self || 0) + x.count });
    fileSelf.set(f[1], (fileSelf.get(f[1]) || 0) + x.count);
  }
  const hotFile = [...fileSelf].sort((a, b) => b[1] - a[1])[0][0];
  const lines = [...selfOf.values()].sort((a, b) => b.self - a.self);
  const hotLine = lines.find((l) => l.file === hotFile);
  const context = await browser.newContext({ viewport: VIEWPORT, deviceScaleFactor: 1 });
  const page = await context.newPage();
  const problems = [];
  page.on('console', (m) => { if (m.type() === 'error' || m.type() === 'warning') problems.push(`console ${m.type()}: ${m.text()}`); });
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  page.on('request', (r) => { if (!/^(file|data):/.test(r.url())) problems.push(`network request: ${r.url()}`); });
  try {
    await page.goto(pathToFileURL(path.resolve(files['imports-heatmap'])).href);
    const first = await page.evaluate(([want]) => {
      const sec = document.getElementById('hottest-file'), vis = (e) => { const r = e.getBoundingClientRect(); return r.height > 0 && r.bottom <= innerHeight && r.top >= 0; };
      const rows = sec ? [...sec.querySelectorAll('tr[id]')].filter(vis) : [];
      const hot = rows.find((r) => r.querySelector('td.s')?.textContent.trim() === want);
      return { file: sec?.querySelector('h2')?.textContent, rows: rows.length,
        hot: hot ? { bg: getComputedStyle(hot).backgroundColor } : null };
    }, [text(hotFile, hotLine.line)]);
    expect(first.file && first.file.includes(hotFile), `the page does not open on ${hotFile}: ${first.file}`);
    expect(first.rows >= 5, `only ${first.rows} source rows of ${hotFile} on the first screen`);
    expect(first.hot, `the hottest line ${hotFile}:${hotLine.line} (${text(hotFile, hotLine.line)}) not on the first screen`);
    expect(/rgba\(230, 40, 20/.test(first.hot.bg), `the hottest line is not shaded: ${first.hot.bg}`);
    const listed = await page.evaluate(() => [...document.querySelectorAll('tr.hot')].map((r) => ({
      fn: r.querySelector('td.fn').textContent, src: r.querySelector('td.s').textContent, at: r.querySelector('td.at').textContent })));
    eq(listed.map((r) => [r.fn, r.src, r.at]), lines.map((l) => [l.fn, text(l.file, l.line), `${l.file}:${l.line}`]), 'hottest lines (function, text, place)');
    // self shading: the toggle changes the hot line's shade to its self share's
    const bgOf = () => page.evaluate((id) => getComputedStyle(document.querySelector(id)).backgroundColor, `#hottest-file tr.h[id$="-${hotLine.line}"]`);
    const incl = await bgOf();
    await page.click('label[for=sh-self]');
    const self = await bgOf();
    expect(incl !== self, `the self toggle left the shade at ${incl}`);
    expect(problems.length === 0, problems.slice(0, 3).join('; '));
    return `opens on ${hotFile} (${first.rows} rows on screen), ${listed.length} hottest lines with text and function`;
  } finally { await context.close(); }
}

async function testBig(browser, files, truth) {
  const o = await open(browser, files.big, 60000);
  try {
    const p = o.page;
    const t = await p.evaluate(() => ({ drawn: window.remoraDrawnAt, painted: window.remoraPaintedAt, ...window.remoraTimings }));
    noProblems(o);
    const st = await p.evaluate(() => window.remora.state());
    eq(st.viewTotal, truth.big.total, 'samples');
    const frames = await p.evaluate(() => window.remora.labels().filter((l) => !l.startsWith('thread ')).length);
    eq(frames, truth.big.frames, 'distinct frames');
    // interaction latency: a search over every frame, then a zoom
    const t0 = Date.now();
    await p.fill('#search', 'method_1999');
    const search = Date.now() - t0;
    eq((await p.evaluate(() => window.remora.state())).matchedFrames, 111, 'frames matching method_1999 (method_1999, method_19990..19999, method_199900..199999)');
    const t2 = Date.now();
    await p.fill('#search', 'Class7.method_5');
    const search2 = Date.now() - t2;
    const name = await p.evaluate(() => window.remora.widestFrame());
    const r = await rectOf(p, name);
    const t1 = Date.now();
    await p.mouse.click(r.x + Math.min(r.w / 2, 20), r.y + r.h / 2);
    const zoom = Date.now() - t1;
    eq((await p.evaluate(() => window.remora.state())).zoomLabel, name, 'zoom in the big profile');
    await renderChecks(o);
    const mb = (fs.statSync(files.big).size / 1e6).toFixed(1);
    const fig = `${truth.big.frames} frames, ${truth.big.nodes} nodes, ${mb} MB: first paint ${Math.round(t.painted)} ms after navigation start ` +
      `(JSON.parse done at ${Math.round(t.parsed)} ms, model at ${Math.round(t.modelled)} ms, drawn at ${Math.round(t.drawn)} ms), ` +
      `${o.wall} ms from goto; search ${search} ms (then ${search2} ms), zoom ${zoom} ms`;
    console.log(`bench big-profile: ${fig}`);
    return fig;
  } finally { await o.context.close(); }
}

async function testHostile(browser, files, truth) {
  const o = await open(browser, files.hostile);
  try {
    const p = o.page, S = truth.hostile.stacks;
    // make sure every handler would have had its chance to run
    await p.waitForTimeout(150);
    const dom = await p.evaluate(() => ({
      pwned: window.__pwned, imgs: document.querySelectorAll('img').length, svgs: document.querySelectorAll('svg').length,
      scripts: document.querySelectorAll('script').length, cmd: document.getElementById('cmd').textContent,
      options: Array.from(document.querySelectorAll('#thread option')).map((x) => x.textContent),
    }));
    eq(dom.pwned, undefined, 'window.__pwned (set by injected script)');
    eq([dom.imgs, dom.svgs, dom.scripts], [0, 0, 2], 'img, svg and script elements');
    eq(dom.cmd, truth.hostile.command, 'command line shown as text');
    const tname = S[0].thread;
    expect(dom.options.some((x) => x.startsWith(tname + ' (7)')), `thread name not shown as text: ${JSON.stringify(dom.options)}`);
    // every name reaches the page intact, and the tooltip shows it as text
    const labels = await p.evaluate(() => window.remora.labels());
    const frames = new Map();
    for (const s of S) for (const f of s.frames) frames.set(f[0], f);
    for (const [fn, f] of frames) {
      expect(labels.includes(fn), `name ${JSON.stringify(fn)} lost on the way`);
      const tip = await tooltipOf(p, fn);
      eq([tip.name, tip.where], [fn, `${f[1]}:${f[2]}`], 'tooltip of a hostile name');
    }
    // zoom into one: the breadcrumb shows it as text
    const img = '<img src=x onerror=alert(1)>';
    const r = await rectOf(p, img);
    await p.mouse.click(r.x + 3, r.y + r.h / 2);
    const crumb = await p.evaluate(() => document.querySelector('#crumbs [aria-current]').textContent);
    eq(crumb, img, 'breadcrumb text');
    await p.fill('#search', '<img');
    eq((await p.evaluate(() => window.remora.state())).matched, searchTruth(S, '<img'), 'search for "<img"');
    await p.waitForTimeout(50);
    eq(await p.evaluate(() => [window.__pwned, document.querySelectorAll('img').length]), [undefined, 0], 'after interaction');
    noProblems(o);
    return `${frames.size} hostile names shown as text`;
  } finally { await o.context.close(); }
}

// A page recorded from a real target with hostile names: nothing injected runs, and every
// name is shown as text. truth = {functions: [[name, file]...], threads: [[tid, name]...]}
async function testRecordedHostile(browser, file, truth) {
  const o = await open(browser, file, 30000);
  try {
    const p = o.page;
    await p.waitForTimeout(150);     // every handler an injected element had would have run
    const dom = () => p.evaluate(() => ({
      pwned: window.__pwned, imgs: document.querySelectorAll('img').length, svgs: document.querySelectorAll('svg').length,
      scripts: document.querySelectorAll('script').length, iframes: document.querySelectorAll('iframe').length,
      options: Array.from(document.querySelectorAll('#thread option')).map((x) => x.textContent),
    }));
    let d = await dom();
    eq([d.pwned, d.imgs, d.svgs, d.scripts, d.iframes], [undefined, 0, 0, 2, 0], 'window.__pwned, img, svg, script and iframe elements');
    for (const [tid, name] of truth.threads)
      expect(d.options.some((x) => x.startsWith(`${name} (${tid}) — `)), `thread ${tid} ${JSON.stringify(name)} not shown as text: ${JSON.stringify(d.options)}`);
    const labels = await p.evaluate(() => window.remora.labels());
    for (const [fn, file] of truth.functions) {
      expect(labels.includes(fn), `name ${JSON.stringify(fn.slice(0, 80))} lost on the way`);
      const tip = await tooltipOf(p, fn);
      expect(tip.where.startsWith(file + ':'), `tooltip of ${JSON.stringify(fn.slice(0, 80))} shows file ${JSON.stringify(tip.where.slice(0, 80))}, want ${JSON.stringify(file.slice(0, 80))}`);
    }
    // zoom into the </script> frame and search for markup: still text, still nothing run
    const script = truth.functions.find(([fn]) => fn.includes('</script>'))[0];
    const r = await rectOf(p, script);
    await p.mouse.click(r.x + 3, r.y + r.h / 2);
    eq(await p.evaluate(() => document.querySelector('#crumbs [aria-current]').textContent), script, 'breadcrumb text');
    await p.fill('#search', '<script');
    expect((await p.evaluate(() => window.remora.state())).matched > 0, 'search for "<script" matched nothing');
    await p.waitForTimeout(50);
    d = await dom();
    eq([d.pwned, d.imgs, d.scripts], [undefined, 0, 2], 'after interaction: window.__pwned, img and script elements');
    noProblems(o);
    return `${truth.functions.length} hostile functions and ${truth.threads.length} thread names shown as text, no script ran`;
  } finally { await o.context.close(); }
}

async function testDiff(browser, files, truth) {
  const o = await open(browser, files.diff);
  try {
    const p = o.page, S = truth.diff.stacks, B = truth.diff.baseline;
    const legend = await p.evaluate(() => { const l = document.getElementById('legend'); return { hidden: l.hidden, text: l.textContent, h: l.getBoundingClientRect().height }; });
    expect(!legend.hidden && legend.h > 0 && /faster/.test(legend.text) && /slower/.test(legend.text), `legend not shown: ${JSON.stringify(legend)}`);
    // vanished: functions of the baseline that the new profile lacks, with their samples
    const inNew = new Set(S.flatMap((s) => s.frames.map((f) => f[0] + '\0' + f[1])));
    const gone = new Map();
    for (const s of B) {
      const seen = new Set();
      for (const f of s.frames) {
        const k = f[0] + '\0' + f[1];
        if (inNew.has(k) || seen.has(k)) continue;
        seen.add(k);
        gone.set(f[0], (gone.get(f[0]) || 0) + s.count);
      }
    }
    const wantGone = [...gone].sort((a, b) => b[1] - a[1]).map(([fn, samples]) => ({ fn, samples }));
    expect(wantGone.length === 2, 'the scenario should have two vanished functions');
    eq((await p.evaluate(() => window.remora.state())).vanished, wantGone, 'vanished functions');
    const items = await p.evaluate(() => Array.from(document.querySelectorAll('#vanished-list li')).map((x) => x.textContent));
    const bt = sum(B);
    eq(items.length, wantGone.length, 'vanished list length');
    wantGone.forEach((g, i) => expect(items[i].startsWith(g.fn + ' — ') && items[i].includes(`${fmtInt(g.samples)} samples, ${pct(g.samples / bt)} of the baseline`), `vanished item ${i}: ${items[i]}`));
    expect(await p.evaluate(() => !document.getElementById('vanished').hidden), 'vanished list hidden');
    // folded: its summary line on screen, its items not, until the summary is clicked
    const fold = () => p.evaluate(() => ({ open: document.getElementById('vanished').open,
      summary: document.getElementById('vanished-title').getBoundingClientRect().height,
      item: document.querySelector('#vanished-list li').checkVisibility() ? 1 : 0 }));
    let v = await fold();
    expect(!v.open && v.summary > 0 && v.item === 0, `the vanished list should start folded: ${JSON.stringify(v)}`);
    await p.click('#vanished-title');
    v = await fold();
    expect(v.open && v.item > 0, `a click on its summary should unfold the vanished list: ${JSON.stringify(v)}`);
    // colours: share grew → red, fell → blue, unchanged → grey
    const share = (stacks, fn) => sum(stacks.filter((s) => s.frames.some((f) => f[0] === fn))) / sum(stacks);
    const colour = async (fn) => { const r = await rectOf(p, fn); return pixelAt(p, r.x + 2, r.y + 2); };
    for (const fn of ['compute', 'render', 'handle', 'parse_fast']) {
      const d = share(S, fn) - share(B, fn), c = await colour(fn);
      if (d > 0.05) expect(c[0] > c[2] + 60, `${fn} grew ${pct(d)} but is not red: ${c}`);
      else if (d < -0.05) expect(c[2] > c[0] + 60, `${fn} fell ${pct(-d)} but is not blue: ${c}`);
      else expect(Math.abs(c[0] - c[2]) < 12, `${fn} unchanged but coloured ${c}`);
    }
    const tip = await tooltipOf(p, 'compute');
    const want = `Share: ${pct(share(B, 'compute'))} in the baseline → ${pct(share(S, 'compute'))} now (+${((share(S, 'compute') - share(B, 'compute')) * 100).toFixed(2)} pts)`;
    expect(tip.rows.includes(want), `tooltip ${JSON.stringify(tip.rows)} lacks ${want}`);
    noProblems(o);
    return `vanished ${wantGone.map((g) => g.fn + ' ' + g.samples).join(', ')}`;
  } finally { await o.context.close(); }
}

async function testDeep(browser, files, truth) {
  const o = await open(browser, files.deep);
  try {
    const p = o.page, D = truth.deep.depth, last = `level_${D - 1}`;
    const scroll = () => p.evaluate(() => { const s = document.getElementById('scroller'); return { h: s.scrollHeight, top: s.scrollTop, ch: s.clientHeight }; });
    let sc = await scroll();
    eq(sc.h, (D + 2) * 18, 'scroll height of all rows');
    eq(sc.top, 0, 'icicle: starts at the roots, on top');
    expect(await p.evaluate(() => window.remora.rectOf('level_0')) !== null, 'icicle: level_0 not drawn at the start');
    expect(await p.evaluate((l) => window.remora.rectOf(l), last) === null, `icicle: ${last} drawn while out of view`);
    await p.click('#flame');
    sc = await scroll();
    eq(sc.top, sc.h - sc.ch, 'flame: starts scrolled to the roots');
    expect(await p.evaluate(() => window.remora.rectOf('level_0')) !== null, 'level_0 not drawn at the start');
    expect(await p.evaluate((l) => window.remora.rectOf(l), last) === null, `${last} drawn while out of view`);
    await p.evaluate(() => { document.getElementById('scroller').scrollTop = 0; });
    await p.waitForFunction((l) => window.remora.rectOf(l) !== null, last);
    const r = await rectOf(p, last);
    eq([r.total, r.self], [D, D], `samples of ${last}`);
    eq(await p.evaluate(() => window.remora.state().viewTotal), truth.deep.total, 'samples');
    expect(await p.evaluate(() => window.remora.state().rects) < 200, 'drawn boxes should be only the visible rows');
    await p.mouse.click(r.x + 10, r.y + r.h / 2);
    const st = await p.evaluate(() => window.remora.state());
    eq([st.zoomLabel, st.crumbs.length], [last, D + 2], 'zoom to the deepest frame');
    eq(await p.evaluate(() => document.querySelectorAll('#crumbs button').length), 12, 'breadcrumb buttons (the middle folded)');
    await p.click('#icicle');
    expect(await p.evaluate(() => window.remora.rectOf('all threads')) !== null, 'icicle: starts at the root');
    noProblems(o);
    return `${D} levels, ${sc.h} px of rows on a ${sc.ch} px canvas`;
  } finally { await o.context.close(); }
}

async function testEmpty(browser, files) {
  const o = await open(browser, files.empty);
  try {
    noProblems(o);
    const st = await o.page.evaluate(() => window.remora.state());
    eq(st.viewTotal, 0, 'samples');
    const head = await o.page.evaluate(() => [document.getElementById('cmd').textContent, document.getElementById('facts').textContent]);
    eq(head, ['(command line not recorded)', 'stacks 0'], 'header of a profile without meta');
    const px = await pixels(o.page);
    expect(px.drawn > 0, 'the "no samples" message is not drawn');
  } finally { await o.context.close(); }
}

async function testPage(browser, file, tableFile) {
  const o = await open(browser, file, 60000);
  try {
    const px = await renderChecks(o);
    let tableNote = '';
    if (tableFile) {
      // the hotspots of a real recording equal remora's table of it
      const table = parseTable(fs.readFileSync(tableFile, 'utf8'));
      expect(table.length > 0, `${tableFile}: no rows`);
      const hot = (await o.page.evaluate(() => window.remora.hotspots())).slice(0, table.length)
        .map((r) => [r.fn, r.file, r.file ? r.line : 0, r.self, r.total]);
      eq(hot, table, 'hotspots against remora\'s table of the same recording');
      tableNote = `, hotspots equal the table's ${table.length} rows`;
    }
    const name = await o.page.evaluate(() => window.remora.widestFrame());
    expect(name !== null, 'no frame drawn');
    const r = await rectOf(o.page, name);
    await o.page.mouse.click(r.x + Math.min(r.w / 2, 20), r.y + r.h / 2);
    const st = await o.page.evaluate(() => window.remora.state());
    eq(st.zoomLabel, name, 'zoom on click');
    // a page made with a baseline (remora record/convert --diff) shows the diff legend
    const diff = await o.page.evaluate(() => {
      const d = JSON.parse(document.getElementById('remora-data').textContent);
      const l = document.getElementById('legend');
      return { base: d.baseline !== null, shown: !!l && !l.hidden && l.getBoundingClientRect().height > 0 };
    });
    expect(diff.base === diff.shown, `legend ${diff.shown ? 'shown' : 'hidden'} on a page ${diff.base ? 'with' : 'without'} a baseline`);
    noProblems(o);
    return `${o.wall} ms to paint, ${px.drawn} pixels drawn, zoomed into ${name}${diff.base ? ', diff legend shown' : ''}${tableNote}`;
  } finally { await o.context.close(); }
}

async function screenshot(browser, files, out) {
  const o = await open(browser, files.basic);
  try {
    await o.page.setViewportSize({ width: 1280, height: 430 });
    await o.page.evaluate(() => new Promise((r) => requestAnimationFrame(r)));
    const r = await rectOf(o.page, 'compute_prices');
    await o.page.mouse.move(r.x + r.w / 2, r.y + r.h / 2);
    await o.page.screenshot({ path: out });
    console.log(`screenshot: ${out}`);
  } finally { await o.context.close(); }
}

// The static SVG flamegraph opened as a document of its own: it loads with no console
// error, no dialog and no request, holds only remora's script (no name became one), has
// the boxes counted by the caller, each laid out at the width its rect says; a click on
// a box zooms into it and a click on 'all' restores every box.
async function testSvg(browser, file, boxes) {
  const context = await browser.newContext({ viewport: VIEWPORT, deviceScaleFactor: 1 });
  const page = await context.newPage();
  const problems = [];
  page.on('console', (m) => { if (m.type() === 'error' || m.type() === 'warning') problems.push(`console ${m.type()}: ${m.text()}`); });
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  page.on('dialog', (d) => { problems.push(`dialog: ${d.message()}`); d.dismiss().catch(() => {}); });
  page.on('request', (r) => { if (!/^(file|data):/.test(r.url())) problems.push(`network request: ${r.url()}`); });
  try {
    const t0 = Date.now();
    await page.goto(pathToFileURL(path.resolve(file)).href, { timeout: 60000, waitUntil: 'load' });
    const wall = Date.now() - t0;
    const got = await page.evaluate(() => {
      const root = document.documentElement;
      const rects = [...document.querySelectorAll('#frames > g > rect')];
      return { root: root.localName, ns: root.namespaceURI, scripts: document.querySelectorAll('script').length,
        pwned: window.__pwned, titles: document.querySelectorAll('#frames > g > title').length,
        off: rects.map((r) => [Number(r.getAttribute('width')), r.getBoundingClientRect().width])
          .filter(([a, b]) => Math.abs(a - b) > 0.01).slice(0, 3) };
    });
    expect(got.root === 'svg' && got.ns === 'http://www.w3.org/2000/svg', `the document is <${got.root}> in ${got.ns}`);
    eq(got.titles, boxes, 'boxes with a title');
    expect(got.scripts === 1 && got.pwned === undefined, `${got.scripts} scripts (want remora's one), __pwned ${got.pwned}`);
    expect(got.off.length === 0, `boxes laid out at other widths than their rects': ${JSON.stringify(got.off)}`);
    // click to zoom: a box of 10-1170 px (not 'all') fills the width, the boxes above it in
    // its span scale with it, the others outside it are hidden; a click on 'all' restores
    const before = await page.evaluate(() => [...document.querySelectorAll('#frames > g > rect')]
      .map((r) => [Number(r.getAttribute('x')), Number(r.getAttribute('width')), Number(r.getAttribute('y'))]));
    const zi = before.findIndex(([, w, y], i) => i > 1 && w >= 10 && w <= 1170);
    let zoomed = 'no box of 10-1170 px to zoom';
    if (zi > 0) {
      const [zx, zw, zy] = before[zi];
      await page.locator('#frames > g').nth(zi).locator('rect').click({ position: { x: 2, y: 5 } });
      const after = await page.evaluate(() => [...document.querySelectorAll('#frames > g')].map((g) => {
        const r = g.querySelector('rect');
        return [g.style.display !== 'none', Number(r.getAttribute('x')), Number(r.getAttribute('width'))];
      }));
      const k = 1180 / zw, bad = [];
      before.forEach(([x, w, y], i) => {
        const [shown, ax, aw] = after[i], inSpan = x >= zx - 0.01 && x + w <= zx + zw + 0.01;
        if (y <= zy && inSpan) {
          if (!shown || Math.abs(aw - w * k) > 0.01 || Math.abs(ax - (10 + (x - zx) * k)) > 0.01) bad.push(`box ${i} above: ${JSON.stringify(after[i])}`);
        } else if (y <= zy && shown) bad.push(`box ${i} outside the span shown`);
      });
      expect(bad.length === 0, `after a click on box ${zi}: ${bad.slice(0, 3).join('; ')}`);
      await page.locator('#frames > g').nth(0).locator('rect').click({ position: { x: 2, y: 5 } });
      const back = await page.evaluate(() => [...document.querySelectorAll('#frames > g')].map((g) => {
        const r = g.querySelector('rect');
        return [g.style.display !== 'none', Number(r.getAttribute('x')), Number(r.getAttribute('width'))];
      }));
      const moved = back.filter(([shown, x, w], i) => !shown || Math.abs(x - before[i][0]) > 0.01 || Math.abs(w - before[i][1]) > 0.01);
      expect(moved.length === 0, `a click on 'all' leaves ${moved.length} boxes off their places`);
      zoomed = `zoomed into box ${zi} and back`;
    }
    expect(problems.length === 0, problems.slice(0, 3).join('; '));
    return `${boxes} boxes laid out at their widths in ${wall} ms, ${zoomed}, no console error, no request`;
  } finally { await context.close(); }
}

// ---- main ----------------------------------------------------------------------------

async function mainSvg() {
  const name = 'svg';
  const [file, boxes] = opt.svg;
  let pw = null;
  if (!fs.existsSync(CHROMIUM)) skip(name, `${CHROMIUM} not installed (apt-get install chromium)`);
  else {
    try { pw = await import('playwright-core'); } catch { skip(name, 'playwright-core not installed (cd tests/browser && npm ci)'); }
  }
  if (pw) {
    const browser = await pw.chromium.launch({ executablePath: CHROMIUM, args: ARGS, headless: true, chromiumSandbox: false });
    try { pass(name, await testSvg(browser, file, boxes)); } catch (e) { fail(name, e instanceof Check ? e.message : (e.stack || String(e)).split('\n').slice(0, 3).join(' | ')); }
    finally { await browser.close(); }
  }
  console.log(`browser: ${counts.passed} passed, ${counts.failed} failed, ${counts.skipped} skipped`);
  process.exit(counts.failed ? 1 : 0);
}

async function mainRecordedHostile() {
  const name = 'recorded-hostile';
  const [file, truthFile] = opt.hostile;
  let pw = null;
  if (!fs.existsSync(CHROMIUM)) skip(name, `${CHROMIUM} not installed (apt-get install chromium)`);
  else {
    try { pw = await import('playwright-core'); } catch { skip(name, 'playwright-core not installed (cd tests/browser && npm ci)'); }
  }
  if (pw) {
    const truth = JSON.parse(fs.readFileSync(truthFile, 'utf8'));
    const browser = await pw.chromium.launch({ executablePath: CHROMIUM, args: ARGS, headless: true, chromiumSandbox: false });
    try { pass(name, await testRecordedHostile(browser, file, truth)); } catch (e) { fail(name, e instanceof Check ? e.message : (e.stack || String(e)).split('\n').slice(0, 3).join(' | ')); }
    finally { await browser.close(); }
  }
  console.log(`browser: ${counts.passed} passed, ${counts.failed} failed, ${counts.skipped} skipped`);
  process.exit(counts.failed ? 1 : 0);
}

async function main() {
  if (opt.hostile) return mainRecordedHostile();
  if (opt.svg) return mainSvg();
  const started = Date.now();
  const scenarios = ['basic', 'big', 'hostile', 'diff', 'deep', 'empty', 'imports'];
  const browserTests = [
    ['basic-render', testBasicRender], ['basic-zoom', testBasicZoom], ['basic-search', testBasicSearch],
    ['basic-threads', testBasicThreads], ['basic-tooltip', testBasicTooltip], ['basic-orientation', testBasicOrientation],
    ['big-first-paint', testBig], ['hostile-names', testHostile], ['diff', testDiff],
    ['deep-scroll', testDeep], ['empty-profile', testEmpty],
    ['hotspots-table', testHotspots], ['summary', testSummary], ['dark-mode', testDark], ['labels-toggle', testLabels],
    ['import-fold', testImportFold], ['heatmap-first-screen', testHeatmap],
  ];
  const tmp = opt.keep || fs.mkdtempSync(path.join(os.tmpdir(), 'remora-browser-'));
  fs.mkdirSync(tmp, { recursive: true });
  const files = {}, truth = {};
  let haveProfiles = fs.existsSync(opt.mkprofile);

  // the writer's own checks (escaping, errors) and the pages of the scenarios
  if (!haveProfiles) {
    skip('writer-selftest', `${opt.mkprofile} not built (make build/mkprofile)`);
  } else {
    const r = spawnSync(opt.mkprofile, ['selftest'], { encoding: 'utf8' });
    if (r.status === 0) pass('writer-selftest'); else fail('writer-selftest', (r.stderr || r.stdout || `exit ${r.status}`).trim().split('\n').join('; '));
    for (const s of scenarios) {
      files[s] = path.join(tmp, `${s}.html`);
      // basic and imports: remora's table of the same stacks too, and imports' heatmap
      const extra = s === 'basic' || s === 'imports' ? [files[`${s}-table`] = path.join(tmp, `${s}.txt`)] : [];
      if (s === 'imports') extra.push(files['imports-heatmap'] = path.join(tmp, 'imports.heatmap.html'));
      const g = spawnSync(opt.mkprofile, [s, files[s], ...extra], { encoding: 'utf8', maxBuffer: 64 << 20 });
      if (g.status !== 0) { fail(`mkprofile-${s}`, (g.stderr || `exit ${g.status}`).trim()); haveProfiles = false; continue; }
      truth[s] = JSON.parse(g.stdout);
    }
  }

  let why = null, pw = null;
  if (!fs.existsSync(CHROMIUM)) why = `${CHROMIUM} not installed (apt-get install chromium)`;
  else {
    try { pw = await import('playwright-core'); } catch { why = 'playwright-core not installed (cd tests/browser && npm ci)'; }
  }
  const wanted = [...(haveProfiles ? browserTests : []).map(([n]) => n), ...opt.pages.map((f) => `page ${f}`)];
  if (!haveProfiles) for (const [n] of browserTests) skip(n, `no profiles to open (${opt.mkprofile} missing or failed)`);
  if (why) {
    for (const n of wanted) skip(n, why);
  } else {
    const browser = await pw.chromium.launch({ executablePath: CHROMIUM, args: ARGS, headless: true, chromiumSandbox: false });
    try {
      if (haveProfiles) {
        for (const [name, fn] of browserTests) {
          try { pass(name, await fn(browser, files, truth)); } catch (e) { fail(name, e instanceof Check ? e.message : (e.stack || String(e)).split('\n').slice(0, 3).join(' | ')); }
        }
        if (opt.screenshot) await screenshot(browser, files, opt.screenshot);
      }
      for (const f of opt.pages) {
        const name = `page ${f}`;
        if (!fs.existsSync(f)) { fail(name, 'no such file'); continue; }
        try { pass(name, await testPage(browser, f, opt.tables.get(f))); } catch (e) { fail(name, e instanceof Check ? e.message : String(e).split('\n')[0]); }
      }
    } finally { await browser.close(); }
  }
  if (!opt.keep) fs.rmSync(tmp, { recursive: true, force: true });
  console.log(`browser tests took ${((Date.now() - started) / 1000).toFixed(1)} s`);
  console.log(`browser: ${counts.passed} passed, ${counts.failed} failed, ${counts.skipped} skipped`);
  process.exit(counts.failed ? 1 : 0);
}

main().catch((e) => {
  console.log(`FAIL browser-runner: ${e.stack || e}`);
  console.log(`browser: ${counts.passed} passed, ${counts.failed + 1} failed, ${counts.skipped} skipped`);
  process.exit(1);
});
