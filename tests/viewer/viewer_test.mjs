// ctest viewer.chromium: impulse-viewer in Debian's headless Chromium, driven by playwright-core
// (tests/viewer/package-lock.json, installed by scripts/setup with `npm ci`; it uses
// /usr/bin/chromium, never a browser of its own).
//
//   1. A real impulse-server on the demo scene (admin endpoint on) and a viewer watching it: the
//      viewer's HTTP input checks (403, 405, 409, 413 on hostile requests); the page loads, renders
//      the world (the screenshot has non-background pixels where tower_c stands and background
//      above it), reports the server's body count (as /metrics says), and a click on the tower
//      shows the body's id, kind and velocity, and its owner (none: a scene body) from the
//      server's admin endpoint through the viewer's --admin.
//      A viewer with --drive: holding w drives its car, the page draws the prediction ahead of the
//      server's pose and says by how much.
//   2. A recording of that scene, served by impulse-replay serve, and a viewer watching it: pause,
//      then seek with the timeline; the page's tick becomes the sought tick; a SIGKILL of the
//      replay server shows as "no data" within seconds.
//
// Usage: node viewer_test.mjs BIN_DIR [SCREENSHOT.png]. Exit 0 pass, 1 fail, 77 skipped (no chromium
// or no playwright-core: run scripts/setup). Every wait is a poll with a deadline.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import zlib from 'node:zlib';

// Under CI (.ci/run exports CI=true, and scripts/setup installs both) a missing browser is a
// failure, not a skip, so the check cannot silently stop running.
const SKIP = process.env.CI === 'true' ? 1 : 77;
const binDir = process.argv[2];
const screenshotOut = process.argv[3] || process.env.IMPULSE_VIEWER_SCREENSHOT || '';
const CHROMIUM = process.env.IMPULSE_CHROMIUM || '/usr/bin/chromium';
const started = Date.now();
const children = [];
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'impulse-viewer-test-'));

function log(msg) { console.log(`[${((Date.now() - started) / 1000).toFixed(1)} s] ${msg}`); }
function fail(msg) { throw new Error(msg); }
function check(cond, msg) { if (!cond) fail(msg); log(`ok: ${msg}`); }

async function poll(what, fn, timeoutMs) {
  const deadline = Date.now() + timeoutMs;
  let last;
  while (Date.now() < deadline) {
    try { last = await fn(); if (last) return last; } catch (e) { last = e.message; }
    await new Promise((r) => setTimeout(r, 100));
  }
  fail(`timed out after ${timeoutMs} ms waiting for ${what} (last: ${JSON.stringify(last)})`);
}

/// Starts a process; its output is kept and searched by waitOutput.
function start(name, args) {
  const child = spawn(args[0], args.slice(1), { stdio: ['ignore', 'pipe', 'pipe'] });
  child.output = '';
  child.name = name;
  child.stdout.on('data', (d) => { child.output += d; });
  child.stderr.on('data', (d) => { child.output += d; });
  child.exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
  children.push(child);
  return child;
}
async function waitOutput(child, regex, timeoutMs) {
  return poll(`${child.name} to print ${regex}`, () => {
    if (child.exitCode !== null) fail(`${child.name} exited: ${child.output}`);
    return child.output.match(regex);
  }, timeoutMs);
}
async function stop(child) {
  if (child.exitCode !== null || child.signalCode !== null) return;
  child.kill('SIGINT');
  const deadline = new Promise((r) => setTimeout(() => r('timeout'), 10000));
  if ((await Promise.race([child.exited, deadline])) === 'timeout') { child.kill('SIGKILL'); fail(`${child.name} did not stop on SIGINT`); }
}

function request(port, { method = 'GET', path: p = '/', headers = {}, body = null, chunked = false } = {}) {
  if (body !== null && !chunked) headers = { ...headers, 'Content-Length': Buffer.byteLength(body) };
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, method, path: p, headers, timeout: 5000 }, (res) => {
      let text = '';
      res.on('data', (d) => { text += d; });
      res.on('end', () => resolve({ status: res.statusCode, text, headers: res.headers }));
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', reject);
    if (body !== null) req.write(body);
    req.end();
  });
}

async function metric(adminPort, name) {
  const r = await request(adminPort, { path: '/metrics' });
  const m = r.text.match(new RegExp(`^${name} (\\S+)$`, 'm'));
  return m ? Number(m[1]) : null;
}

// A PNG decoder for Chromium's screenshots (8-bit RGB or RGBA, not interlaced): node has zlib.
function decodePng(buf) {
  let pos = 8, width = 0, height = 0, channels = 0;
  const idat = [];
  while (pos < buf.length) {
    const len = buf.readUInt32BE(pos), type = buf.toString('latin1', pos + 4, pos + 8);
    const data = buf.subarray(pos + 8, pos + 8 + len);
    if (type === 'IHDR') {
      width = data.readUInt32BE(0); height = data.readUInt32BE(4);
      if (data[8] !== 8 || data[12] !== 0) fail('unexpected PNG format (bit depth or interlace)');
      channels = { 2: 3, 6: 4 }[data[9]] || fail(`unexpected PNG colour type ${data[9]}`);
    } else if (type === 'IDAT') idat.push(data);
    pos += 12 + len;
  }
  const raw = zlib.inflateSync(Buffer.concat(idat));
  const stride = width * channels, px = Buffer.alloc(height * stride);
  for (let y = 0; y < height; ++y) {
    const f = raw[y * (stride + 1)], line = raw.subarray(y * (stride + 1) + 1, (y + 1) * (stride + 1));
    for (let x = 0; x < stride; ++x) {
      const a = x >= channels ? px[y * stride + x - channels] : 0, b = y > 0 ? px[(y - 1) * stride + x] : 0;
      const c = x >= channels && y > 0 ? px[(y - 1) * stride + x - channels] : 0;
      let v = line[x];
      if (f === 1) v += a; else if (f === 2) v += b; else if (f === 3) v += (a + b) >> 1;
      else if (f === 4) { const p = a + b - c, pa = Math.abs(p - a), pb = Math.abs(p - b), pc = Math.abs(p - c); v += pa <= pb && pa <= pc ? a : pb <= pc ? b : c; }
      px[y * stride + x] = v & 255;
    }
  }
  return { width, height, at(x, y) { const i = (Math.round(y) * width + Math.round(x)) * channels; return [px[i], px[i + 1], px[i + 2]]; } };
}
/// Fraction of the 7x7 pixels around (x, y) that differ from `rgb` by more than 24 in some channel.
function differing(img, x, y, rgb) {
  let n = 0, total = 0;
  for (let dy = -3; dy <= 3; ++dy) for (let dx = -3; dx <= 3; ++dx) {
    const p = img.at(x + dx, y + dy);
    total++;
    if (p.some((v, i) => Math.abs(v - rgb[i]) > 24)) n++;
  }
  return n / total;
}

async function startViewer(name, serverPort, extra = []) {
  const viewer = start(name, [path.join(binDir, 'impulse-viewer'), '--server', `127.0.0.1:${serverPort}`, '--http-port', '0', ...extra]);
  const m = await waitOutput(viewer, /open http:\/\/127\.0\.0\.1:(\d+)\//, 10000);
  return { viewer, port: Number(m[1]) };
}

async function main() {
  if (!binDir) { console.error('usage: node viewer_test.mjs BIN_DIR [SCREENSHOT.png]'); return 2; }
  let chromium;
  try { ({ chromium } = await import('playwright-core')); } catch {
    console.log('SKIP: playwright-core is not installed in tests/viewer/node_modules: run scripts/setup (npm ci)');
    return SKIP;
  }
  if (!fs.existsSync(CHROMIUM)) { console.log(`SKIP: no ${CHROMIUM}: run scripts/setup (apt-get install chromium)`); return SKIP; }

  // ------------------------------------------------------------------ 1. a live server
  const recording = path.join(tmp, 'demo.irec');
  const server = start('impulse-server', [path.join(binDir, 'impulse-server'), '--bind', '127.0.0.1', '--port', '0',
    '--scene', 'demo', '--admin-port', '-1', '--record', recording, '--keyframe-seconds', '1', '--stats-interval', '3600']);
  const udpPort = Number((await waitOutput(server, /listening on UDP 127\.0\.0\.1:(\d+)/, 10000))[1]);
  const adminPort = Number((await waitOutput(server, /admin HTTP on [\d.]+:(\d+)/, 10000))[1]);
  await poll('/readyz 200', async () => (await request(adminPort, { path: '/readyz' })).status === 200, 10000);
  const { viewer, port } = await startViewer('impulse-viewer (live)', udpPort, ['--admin', `127.0.0.1:${adminPort}`]);
  log(`server on UDP ${udpPort}, admin ${adminPort}, viewer on http ${port}`);

  // Hostile HTTP input is refused with a 4xx before it reaches the server.
  const form = { 'Content-Type': 'application/x-www-form-urlencoded' };
  check((await request(port, { method: 'POST', path: '/control', headers: form, body: 'action=pause' })).status === 403,
    'a POST without the X-Impulse-Viewer header (a cross-site form) is refused 403');
  check((await request(port, { method: 'PUT', path: '/' })).status === 405, 'PUT is refused 405');
  check((await request(port, { path: '/', headers: { Host: 'attacker.example:80' } })).status === 403,
    'a non-loopback Host (DNS rebinding) is refused 403');
  check((await request(port, { method: 'POST', path: '/control', headers: { ...form, 'X-Impulse-Viewer': '1' }, body: 'x='.padEnd(4096, 'a') })).status === 413,
    'a 4 KiB control body is refused 413');
  check((await request(port, { method: 'POST', path: '/control', headers: { ...form, 'X-Impulse-Viewer': '1' }, body: 'action=pause', chunked: true })).status === 411,
    'a chunked control body (unbounded by cpp-httplib) is refused 411');
  check((await request(port, { method: 'POST', path: '/control', headers: { ...form, 'X-Impulse-Viewer': '1' }, body: 'action=seek&tick=1e9' })).status === 409,
    'a control against a live server is refused 409 (no timeline)');
  check((await request(port, { path: '/owner?id=1:2:3' })).status === 400, 'a malformed owner id is refused 400');
  check((await request(port, { method: 'POST', path: '/drive', headers: { ...form, 'X-Impulse-Viewer': '1' }, body: 'throttle=1&steer=0' })).status === 409,
    'POST /drive to a viewer without --drive is refused 409');
  const noSuch = await request(port, { path: '/owner?id=4000000000:1' });
  check(noSuch.status === 404, `an unknown body's owner is 404, passed on from the server's /objects (HTTP ${noSuch.status})`);

  const browser = await chromium.launch({
    executablePath: CHROMIUM, headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync'],
  });
  try {
    const page = await browser.newPage({ viewport: { width: 1280, height: 720 } });
    page.on('pageerror', (e) => log(`page error: ${e.message}`));
    await page.goto(`http://127.0.0.1:${port}/`);
    await page.waitForFunction(() => window.impulseViewer && impulseViewer.frames > 10 && impulseViewer.rendered > 10 &&
      impulseViewer.latest.status === 'connected' && impulseViewer.latest.bodies > 0, null, { timeout: 15000 });
    // The page's count must equal the server's (the scene alone: the viewer creates nothing).
    const bodies = await poll('the page and /metrics to agree on the body count', async () => {
      const served = await metric(adminPort, 'impulse_bodies');
      const shown = Number(await page.textContent('#stat-bodies'));
      return served > 0 && shown === served ? served : null;
    }, 10000);
    check(bodies > 40, `the page reports the server's ${bodies} bodies (impulse_bodies on /metrics)`);
    const shownTick = Number(await page.textContent('#stat-tick'));
    check(shownTick > 0, `the page reports tick ${shownTick}`);
    const joints = await poll('the page to hear of the demo\'s joints', async () => {
      const n = await page.evaluate(() => (impulseViewer.latest.joints || []).length);
      return n >= 52 ? n : null;
    }, 10000);
    check(joints === 52, `the page draws the demo's ${joints} joints as lines between their anchors`);
    // The demo's level geometry (3 rock hulls, the building's mesh, the valley's heightfield)
    // comes from the server's admin endpoint through GET /asset and is drawn as triangles.
    const assets = await poll('the page to draw the demo\'s 5 assets', async () => {
      const a = await page.evaluate(() => impulseViewer.assets);
      return a.length >= 5 && a.every(([, n]) => n > 0) ? a : null;
    }, 15000);
    check(assets.length === 5, `the page draws ${assets.length} assets from /asset: ${assets.map(([id, n]) => `${id}: ${n} triangles`).join(', ')}`);
    check((await request(port, { path: '/asset?id=x' })).status === 400, 'a malformed asset id is refused 400');
    check((await request(port, { path: '/asset?id=999' })).status === 404, 'an unknown asset id is 404, passed on from the server');

    // tower_c (x = -2, z = -6, 7 unit boxes) does not fall in the demo: its top box against the sky.
    const top = await page.evaluate(() => impulseViewer.project(-2, 6.5, -6));
    const sky = await page.evaluate(() => impulseViewer.project(-2, 11, -6));
    const png = await page.screenshot({ type: 'png' });
    if (screenshotOut) { fs.writeFileSync(screenshotOut, png); log(`screenshot written to ${screenshotOut}`); }
    const img = decodePng(png);
    const bg = [0x1b, 0x1f, 0x27];
    const onTower = differing(img, top.x, top.y, bg), onSky = differing(img, sky.x, sky.y, bg);
    check(onTower > 0.9, `the canvas is drawn where tower_c's top box stands (${(onTower * 100).toFixed(0)}% of pixels at (${top.x.toFixed(0)}, ${top.y.toFixed(0)}) are not background)`);
    check(onSky < 0.1, `and is background above it (${(onSky * 100).toFixed(0)}% differ at (${sky.x.toFixed(0)}, ${sky.y.toFixed(0)}))`);

    await page.mouse.click(top.x, top.y);
    const info = await page.textContent('#body-info');
    check(/id\s+\d+:\d+/.test(info) && /kind\s+dynamic/.test(info) && /velocity/.test(info) && /owner/.test(info),
      `a click on the tower shows the body: ${info.split('\n').slice(0, 2).join(' | ')}`);
    // Its owner comes from the server's admin endpoint (--admin): a scene body has none.
    await page.waitForFunction(() => /owner\s+none \(scene\)/.test(document.getElementById('body-info').textContent), null, { timeout: 10000 });
    check(true, 'and its owner, asked from the server\'s admin endpoint: none (scene)');
    await page.close();
  } finally {
    await stop(viewer);
  }

  // A viewer with --drive: its car answers the page's keys, drawn where the prediction has it
  // with the server's pose beside it.
  const { viewer: driver, port: drivePort } = await startViewer('impulse-viewer (drive)', udpPort, ['--drive']);
  try {
    const driveForm = { ...form, 'X-Impulse-Viewer': '1' };
    for (const body of ['throttle=2&steer=0', 'throttle=1', 'throttle=nan&steer=0', 'throttle=1&steer=-1.5']) {
      check((await request(drivePort, { method: 'POST', path: '/drive', headers: driveForm, body })).status === 400,
        `POST /drive "${body}" is refused 400`);
    }
    const page = await browser.newPage({ viewport: { width: 1280, height: 720 } });
    page.on('pageerror', (e) => log(`page error: ${e.message}`));
    await page.goto(`http://127.0.0.1:${drivePort}/`);
    await page.waitForFunction(() => window.impulseViewer && impulseViewer.latest && impulseViewer.latest.car &&
      impulseViewer.latest.car.predicted, null, { timeout: 15000 });
    const start = await page.evaluate(() => impulseViewer.latest.car);
    check(await page.isVisible('#car'), `the page shows the car ${start.id} at (${start.server[0].toFixed(2)}, ${start.server[2].toFixed(2)})`);
    await page.keyboard.down('w');
    const moving = await poll('the car to be driven ahead', async () => {
      const c = await page.evaluate(() => impulseViewer.latest.car);
      return c.speed > 4 ? c : null;
    }, 10000);
    await page.keyboard.up('w');
    const travelled = Math.hypot(moving.predicted[0] - start.predicted[0], moving.predicted[2] - start.predicted[2]);
    const gap = Math.hypot(moving.predicted[0] - moving.server[0], moving.predicted[2] - moving.server[2]);
    check(travelled > 0.5 && moving.throttle === 1, `holding w drove it: ${moving.speed.toFixed(1)} m/s, ${travelled.toFixed(1)} m, throttle ${moving.throttle}`);
    check(gap > 0 && gap < 3, `the prediction runs ahead of the server's pose by ${gap.toFixed(2)} m while it accelerates`);
    check(/predicted vs server: \d+\.\d+ m/.test(await page.textContent('#car')), 'and the panel says by how much');
    await poll('the released car to slow down', async () => {
      const c = await page.evaluate(() => impulseViewer.latest.car);
      return c.throttle === 0 && c.commanded < moving.commanded ? c : null;
    }, 10000);
    check(true, 'releasing w releases the throttle');
    await page.close();
  } finally {
    await stop(driver);
  }
  // The recording for part 2: a few seconds of the demo (the wrecking ball topples tower_a).
  await poll('180 ticks recorded', async () => (await metric(adminPort, 'impulse_ticks_total')) >= 180, 15000);
  await stop(server);
  check(server.exitCode === 0 && fs.statSync(recording).size > 0, `the server stopped and left a recording of ${fs.statSync(recording).size} bytes`);

  // ------------------------------------------------------------------ 2. a replay
  const replay = start('impulse-replay serve', [path.join(binDir, 'impulse-replay'), 'serve', recording, '--bind', '127.0.0.1', '--port', '0',
    '--anyone-controls', '--admin-port', '-1']);
  const replayPort = Number((await waitOutput(replay, /listening on UDP 127\.0\.0\.1:(\d+)/, 10000))[1]);
  const replayAdmin = Number((await waitOutput(replay, /admin HTTP on [\d.]+:(\d+)/, 10000))[1]);
  const played = await poll('the replay server\'s /metrics to count played ticks', async () => {
    const n = await metric(replayAdmin, 'impulse_ticks_total');
    return n > 0 ? n : null;
  }, 10000);
  const build = (await request(replayAdmin, { path: '/metrics' })).text.match(/^impulse_build_info\{[^}]*\} 1$/m);
  check(build !== null, `impulse-replay serve --admin-port serves /metrics: ${played} ticks played, ${build && build[0]}`);
  const { viewer: replayViewer, port: replayHttp } = await startViewer('impulse-viewer (replay)', replayPort);
  try {
    const page = await browser.newPage({ viewport: { width: 1280, height: 720 } });
    await page.goto(`http://127.0.0.1:${replayHttp}/`);
    await page.waitForFunction(() => window.impulseViewer && impulseViewer.latest && impulseViewer.latest.replay &&
      impulseViewer.latest.bodies > 0, null, { timeout: 15000 });
    const range = await page.evaluate(() => impulseViewer.latest.replay);
    const unknownOwner = await request(replayHttp, { path: '/owner?id=0:1' });
    check(unknownOwner.status === 501, `without --admin a body's owner is unknown (HTTP ${unknownOwner.status})`);
    check(range.last > range.first + 100, `the page shows a replay of ticks [${range.first}, ${range.last}]`);
    await page.click('#play');  // pause
    await page.waitForFunction(() => /pause: Ok/.test(document.getElementById('control').textContent), null, { timeout: 10000 });
    const before = Number(await page.textContent('#stat-tick'));
    // Seek with the timeline, as a user dragging it: far from where it is paused.
    const target = before < (range.first + range.last) / 2 ? range.last - 20 : range.first + 20;
    await page.evaluate((t) => {
      const tl = document.getElementById('timeline');
      tl.value = String(t);
      tl.dispatchEvent(new Event('input'));
      tl.dispatchEvent(new Event('change'));
    }, target);
    await page.waitForFunction((t) => Number(document.getElementById('stat-tick').textContent) === t, target, { timeout: 10000 });
    check(true, `paused at tick ${before}, the timeline's seek moved the page's tick to ${target}`);
    // Paused, it stays there.
    await page.waitForFunction((t) => impulseViewer.frames > t, (await page.evaluate(() => impulseViewer.frames)) + 10, { timeout: 10000 });
    check(Number(await page.textContent('#stat-tick')) === target, 'and stays there while paused');
    // A server killed without a word (SIGKILL): the page says the data stopped, long before the
    // session would time out.
    await page.click('#play');  // resume
    await page.waitForFunction(() => /resume: Ok/.test(document.getElementById('control').textContent), null, { timeout: 10000 });
    replay.kill('SIGKILL');
    await page.waitForFunction(() => /no data from/.test(document.getElementById('status').textContent), null, { timeout: 10000 });
    check(true, `after a SIGKILL of the server the page says: "${await page.textContent('#status')}"`);
    await page.close();
  } finally {
    await stop(replayViewer);
    await stop(replay);
    await browser.close();
  }
  return 0;
}

let code = 1;
try {
  code = await main();
  if (code === 0) log('viewer.chromium: 1 passed, 0 failed');
} catch (e) {
  console.error(`FAIL: ${e.message}`);
  for (const c of children) console.error(`--- ${c.name} output:\n${c.output.slice(-3000)}`);
} finally {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  fs.rmSync(tmp, { recursive: true, force: true });
}
process.exit(code);
