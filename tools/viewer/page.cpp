// The viewer's page, embedded so the binary needs no data files besides three.js. Classic scripts:
// Debian's three.js r111 ships build/three.min.js and examples/js/controls/OrbitControls.js as
// UMD files that fill the global THREE.
#include "viewer/http.h"

namespace impulse::viewer {

const char* const kPageHtml = R"PAGE(<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<link rel="icon" href="data:,">
<title>Impulse viewer</title>
<style>
  html, body { margin: 0; height: 100%; overflow: hidden; background: #1b1f27; color: #e6e9ef;
               font: 13px/1.4 system-ui, sans-serif; }
  #view { display: block; width: 100vw; height: 100vh; }
  .panel { position: absolute; background: rgba(16, 19, 25, 0.82); border-radius: 6px; padding: 8px 10px; }
  #stats { top: 10px; left: 10px; min-width: 190px; }
  #stats b { display: inline-block; min-width: 64px; text-align: right; font-variant-numeric: tabular-nums; }
  #status { color: #f0c674; }
  #status.ok { color: #8fd18f; }
  #status.stale { color: #ff9f43; }
  #body-info { top: 10px; right: 10px; min-width: 220px; display: none; white-space: pre; font-family: monospace; }
  #replay { left: 10px; right: 10px; bottom: 10px; display: none; align-items: center; gap: 10px; }
  #timeline { flex: 1; }
  #replay-tick { min-width: 150px; font-variant-numeric: tabular-nums; }
  #hint { bottom: 10px; right: 10px; color: #9aa3b2; font-size: 12px; }
  #car { top: 10px; left: 50%; transform: translateX(-50%); display: none; text-align: center; }
  #car .predicted { color: #7ee07e; } #car .server { color: #ff7a7a; }
  button, select { background: #2c3340; color: #e6e9ef; border: 1px solid #465066; border-radius: 4px; padding: 3px 8px; }
</style>
</head>
<body>
<canvas id="view"></canvas>
<div id="stats" class="panel">
  <div id="status">connecting</div>
  <div>tick <b id="stat-tick">-</b></div>
  <div>bodies <b id="stat-bodies">-</b></div>
  <div>awake <b id="stat-awake">-</b></div>
  <div>kbit/s <b id="stat-kbps">-</b></div>
  <div>rtt ms <b id="stat-rtt">-</b></div>
  <div>delay ms <b id="stat-delay">-</b></div>
  <div id="stat-server"></div>
</div>
<pre id="body-info" class="panel"></pre>
<div id="car" class="panel">
  <div>car <b id="car-id">-</b> · <span id="car-speed">-</span></div>
  <div><span class="predicted">predicted</span> vs <span class="server">server</span>: <b id="car-gap">-</b></div>
  <div id="car-keys">w/s or arrows: throttle · a/d: steer · click the page first</div>
</div>
<div id="replay" class="panel">
  <button id="play">pause</button>
  <select id="speed">
    <option value="0.25">0.25x</option><option value="0.5">0.5x</option><option value="1" selected>1x</option>
    <option value="2">2x</option><option value="4">4x</option><option value="8">8x</option>
  </select>
  <input id="timeline" type="range" min="0" max="0" step="1" value="0">
  <span id="replay-tick">-</span>
  <span id="control"></span>
</div>
<div id="hint" class="panel">drag: orbit · wheel: zoom · right-drag: pan · click a body for its state</div>
<script src="/three.min.js"></script>
<script src="/OrbitControls.js" onerror="void 0"></script>
<script>
'use strict';
const $ = (id) => document.getElementById(id);
const KIND = ['dynamic', 'static', 'kinematic'];
const SHAPE = ['sphere', 'box', 'capsule', 'plane', 'hull', 'mesh', 'heightfield', 'cylinder'];
const KIND_COLOR = [0xe0803a, 0x8d939c, 0x3fa66b];  // dynamic, static, kinematic
const SENSOR_COLOR = 0x42b8d8;
const PLANE_COLOR = 0x39414f;
const SLEEP_TINT = new THREE.Color(0x5b6b8f);  // sleeping bodies are blended towards it
const BACKGROUND = 0x1b1f27;
const FLASH_MS = 350;

const renderer = new THREE.WebGLRenderer({ canvas: $('view'), antialias: true });
renderer.setPixelRatio(window.devicePixelRatio || 1);
const scene = new THREE.Scene();
scene.background = new THREE.Color(BACKGROUND);
scene.fog = new THREE.Fog(BACKGROUND, 45, 180);  // the ground's grid fades into the background
const camera = new THREE.PerspectiveCamera(50, 1, 0.1, 2000);
camera.position.set(0, 7, 18);
const target = new THREE.Vector3(-1, 2.5, -3);
camera.lookAt(target);
let controls = null;
if (THREE.OrbitControls) {
  controls = new THREE.OrbitControls(camera, renderer.domElement);
  controls.target.copy(target);
  controls.maxPolarAngle = Math.PI / 2 - 0.03;  // the camera stays above the ground plane
  controls.update();
} else {
  $('hint').textContent = 'OrbitControls.js is not installed: fixed camera · click a body for its state';
}
scene.add(new THREE.HemisphereLight(0xdfe8ff, 0x3a3a44, 0.65));
const sun = new THREE.DirectionalLight(0xffffff, 0.75);
sun.position.set(8, 20, 12);
scene.add(sun);
const jointLines = new THREE.LineSegments(new THREE.BufferGeometry(),
                                          new THREE.LineBasicMaterial({ color: 0xffcc33 }));
jointLines.frustumCulled = false;
scene.add(jointLines);

function resize() {
  const w = window.innerWidth, h = window.innerHeight;
  renderer.setSize(w, h, false);
  camera.aspect = w / Math.max(h, 1);
  camera.updateProjectionMatrix();
}
window.addEventListener('resize', resize);
resize();

// ------------------------------------------------------------------ bodies
const bodies = new Map();  // "index:generation" -> { mesh, geoKey, state, flashUntil }
const geometries = new Map();  // shared by bodies of the same shape and size

function capsuleGeometry(r, h) {
  // A lathe of the capsule's outline around local Y (its core segment's axis); r111 has no
  // CapsuleGeometry.
  const pts = [];
  const n = 8;
  for (let i = 0; i <= n; ++i) {
    const a = -Math.PI / 2 + (i / n) * (Math.PI / 2);
    pts.push(new THREE.Vector2(r * Math.cos(a), -h + r * Math.sin(a)));
  }
  for (let i = 0; i <= n; ++i) {
    const a = (i / n) * (Math.PI / 2);
    pts.push(new THREE.Vector2(r * Math.cos(a), h + r * Math.sin(a)));
  }
  return new THREE.LatheBufferGeometry(pts, 24);
}

// Assets (hulls, meshes, heightfields): their geometry comes from the server's admin endpoint
// through GET /asset (impulse-viewer --admin). Until it arrives, or without --admin, a hull is
// drawn as its bounding box and level geometry not at all.
const assetGeometries = new Map();  // asset id -> THREE.BufferGeometry
const assetRequests = new Set();

function indexed(positions, indices) {
  const g = new THREE.BufferGeometry();
  g.setAttribute('position', new THREE.BufferAttribute(positions, 3));
  const big = positions.length / 3 > 65535;
  g.setIndex(new THREE.BufferAttribute(big ? new Uint32Array(indices) : new Uint16Array(indices), 1));
  g.computeVertexNormals();
  return g;
}

// The geometry of a GET /assets/<id> document (docs/PROTOCOL.md, "Assets"), or null.
function assetGeometry(doc) {
  if (doc.kind === 'hull' && Array.isArray(doc.vertices) && Array.isArray(doc.faces)) {
    const positions = new Float32Array(doc.vertices.flat());
    const indices = [];
    for (const f of doc.faces) for (let i = 1; i + 1 < f.length; ++i) indices.push(f[0], f[i], f[i + 1]);
    return indexed(positions, indices);
  }
  if (doc.kind === 'mesh' && Array.isArray(doc.vertices) && Array.isArray(doc.triangles)) {
    return indexed(new Float32Array(doc.vertices), doc.triangles);
  }
  if (doc.kind === 'heightfield' && Array.isArray(doc.heights)) {
    const [nx, nz] = doc.samples, [sx, sz] = doc.spacing, HOLE = 65535;
    const positions = new Float32Array(nx * nz * 3);
    for (let j = 0; j < nz; ++j) {
      for (let i = 0; i < nx; ++i) {
        const k = j * nx + i, h = doc.heights[k];
        positions.set([i * sx, h === HOLE ? 0 : doc.offset + doc.scale * h, j * sz], 3 * k);
      }
    }
    // Two triangles per cell, split along (i, j)-(i+1, j+1); a hole sample cuts its cells out.
    const indices = [];
    for (let j = 0; j + 1 < nz; ++j) {
      for (let i = 0; i + 1 < nx; ++i) {
        const a = j * nx + i, b = a + nx, c = b + 1, d = a + 1;
        if ([a, b, c, d].some((k) => doc.heights[k] === HOLE)) continue;
        indices.push(a, b, c, a, c, d);
      }
    }
    return indexed(positions, indices);
  }
  return null;
}

function requestAsset(id) {
  if (assetRequests.has(id)) return;
  assetRequests.add(id);
  fetch('/asset?id=' + id)
    .then((r) => {
      // 503: the viewer's lookups are busy (two at a time): ask again in a second.
      if (r.status === 503) setTimeout(() => { assetRequests.delete(id); requestAsset(id); }, 1000);
      return r.ok ? r.json() : null;
    })
    .then((doc) => {
      const g = doc && assetGeometry(doc);
      if (!g) return;
      assetGeometries.set(id, g);
      for (const b of bodies.values()) if (b.geoKey === 'asset:' + id) b.mesh.geometry = g;
    })
    .catch(() => {});
}

function geometryFor(shape, d, key, asset) {
  if (shape === 4 || shape === 5 || shape === 6) {
    const drawn = assetGeometries.get(asset);
    if (drawn) return drawn;
    requestAsset(asset);
  }
  let g = geometries.get(key);
  if (g) return g;
  if (shape === 0) g = new THREE.SphereBufferGeometry(d[0], 24, 16);
  else if (shape === 1 || shape === 4) g = new THREE.BoxBufferGeometry(2 * d[0], 2 * d[1], 2 * d[2]);  // a hull: its bounding box
  else if (shape === 2) g = capsuleGeometry(d[0], d[1]);
  else if (shape === 7) g = new THREE.CylinderBufferGeometry(d[0], d[0], 2 * d[1], 24);  // axis along local Y
  else if (shape === 5 || shape === 6) g = new THREE.BufferGeometry();  // level geometry: until it arrives
  else g = new THREE.PlaneBufferGeometry(400, 400).rotateX(-Math.PI / 2);  // normal along local +Y
  geometries.set(key, g);
  return g;
}

const EDGE_MATERIAL = new THREE.LineBasicMaterial({ color: 0x1d2129, transparent: true, opacity: 0.55 });
const edges = new Map();
function edgesFor(geometry, key) {
  let e = edges.get(key);
  if (!e) { e = new THREE.EdgesGeometry(geometry); edges.set(key, e); }
  return e;
}

function createBody(o, key, geoKey) {
  const shape = o[3], sensor = (o[4] & 2) !== 0;
  const material = new THREE.MeshLambertMaterial({
    color: shape === 3 ? PLANE_COLOR : sensor ? SENSOR_COLOR : (KIND_COLOR[o[2]] || 0xffffff),
    transparent: sensor, opacity: sensor ? 0.35 : 1,
    side: shape === 5 || shape === 6 ? THREE.DoubleSide : THREE.FrontSide,  // one-sided surfaces, seen from below too
  });
  const mesh = new THREE.Mesh(geometryFor(shape, [o[5], o[6], o[7]], geoKey, o[18]), material);
  if (shape === 3) {
    const grid = new THREE.GridHelper(400, 400, 0x4c5566, 0x444c5b);
    grid.position.y = 0.005;
    mesh.add(grid);
  } else if (shape === 1) {
    mesh.add(new THREE.LineSegments(edgesFor(mesh.geometry, geoKey), EDGE_MATERIAL));  // stacked boxes stay apart
  }
  mesh.userData.key = key;
  scene.add(mesh);
  const b = { mesh, geoKey, state: o, flashUntil: 0, base: material.color.clone() };
  bodies.set(key, b);
  return b;
}

function removeBody(key, b) {
  scene.remove(b.mesh);
  b.mesh.material.dispose();
  bodies.delete(key);
}

// ------------------------------------------------------------------ contact flashes
const markers = [];
const markerGeometry = new THREE.SphereBufferGeometry(0.12, 10, 8);
function flashContact(c, now) {
  for (const key of [c[1] + ':' + c[2], c[3] + ':' + c[4]]) {
    const b = bodies.get(key);
    if (b && b.state[2] !== 1) b.flashUntil = now + FLASH_MS;  // not the ground: it touches everything
  }
  let m = markers.find((x) => x.until < now);
  if (!m) {
    if (markers.length >= 32) return;
    m = { mesh: new THREE.Mesh(markerGeometry, new THREE.MeshBasicMaterial({ color: 0xffe066, transparent: true })), until: 0 };
    scene.add(m.mesh);
    markers.push(m);
  }
  m.mesh.position.set(c[5], c[6], c[7]);
  m.until = now + FLASH_MS;
}

// ------------------------------------------------------------------ the viewer's car (--drive)
// The prediction is drawn solid, the server's newest pose as a red wire box; the car's ordinary
// (interpolated) body is hidden while a prediction is drawn, so one car is seen, where the player
// sees it, with the server's word beside it.
const carPredicted = new THREE.Mesh(new THREE.BoxBufferGeometry(1, 1, 1),
                                    new THREE.MeshLambertMaterial({ color: 0x58c858 }));
const carServer = new THREE.LineSegments(new THREE.EdgesGeometry(new THREE.BoxBufferGeometry(1, 1, 1)),
                                         new THREE.LineBasicMaterial({ color: 0xff5050 }));
carPredicted.visible = carServer.visible = false;
scene.add(carPredicted);
scene.add(carServer);
let carKey = null;
const followed = new THREE.Vector3();
let following = false;

function placeCar(obj, pose, half) {
  obj.position.set(pose[0], pose[1], pose[2]);
  obj.quaternion.set(pose[3], pose[4], pose[5], pose[6]);
  obj.scale.set(2 * half[0], 2 * half[1], 2 * half[2]);
  obj.visible = true;
}

function applyCar(car) {
  $('car').style.display = car ? 'block' : 'none';
  carPredicted.visible = carServer.visible = false;
  carKey = car ? car.id : null;
  if (!car) { following = false; return; }
  placeCar(carServer, car.server, car.half);
  if (car.predicted) placeCar(carPredicted, car.predicted, car.half);
  const b = bodies.get(car.id);
  if (b) b.mesh.visible = !car.predicted;
  const drawn = car.predicted || car.server;
  const gap = car.predicted ? Math.hypot(car.predicted[0] - car.server[0], car.predicted[1] - car.server[1],
                                         car.predicted[2] - car.server[2]) : 0;
  $('car-id').textContent = car.id;
  $('car-speed').textContent = fmt(car.speed, 1) + ' m/s (commanded ' + fmt(car.commanded, 1) + ')';
  $('car-gap').textContent = car.predicted ? fmt(gap, 2) + ' m' : 'prediction off';
  // The camera follows the car, keeping its offset.
  const at = new THREE.Vector3(drawn[0], drawn[1], drawn[2]);
  if (following && controls) {
    const delta = at.clone().sub(followed);
    camera.position.add(delta);
    controls.target.add(delta);
  }
  followed.copy(at);
  following = true;
}

const keys = { up: false, down: false, left: false, right: false };
const KEY_NAMES = { w: 'up', arrowup: 'up', s: 'down', arrowdown: 'down', a: 'left', arrowleft: 'left',
                    d: 'right', arrowright: 'right' };
let sentControls = '';
let sentAt = 0;
function sendDrive(force) {
  if (!carKey) return;
  const throttle = (keys.up ? 1 : 0) - (keys.down ? 1 : 0);
  const steer = (keys.left ? 1 : 0) - (keys.right ? 1 : 0);
  const body = 'throttle=' + throttle + '&steer=' + steer;
  const now = performance.now();
  // On a change at once, and at least every 250 ms: the viewer releases controls 600 ms old.
  if (!force && body === sentControls && now - sentAt < 250) return;
  sentControls = body;
  sentAt = now;
  fetch('/drive', {
    method: 'POST',
    headers: { 'X-Impulse-Viewer': '1', 'Content-Type': 'application/x-www-form-urlencoded' },
    body,
  }).catch(() => {});
}
function onKey(e, down) {
  const name = KEY_NAMES[e.key.toLowerCase()];
  if (!name || !carKey) return;
  e.preventDefault();
  keys[name] = down;
  sendDrive(false);
}
window.addEventListener('keydown', (e) => onKey(e, true));
window.addEventListener('keyup', (e) => onKey(e, false));
window.addEventListener('blur', () => { for (const k in keys) keys[k] = false; sendDrive(true); });
setInterval(() => sendDrive(false), 100);

// ------------------------------------------------------------------ frames from the viewer
let owner = { key: null, text: '' };  // the selected body's owner, as the viewer answered
let latest = null, dirty = false, frames = 0, lastTick = -1, flashedTick = -1, selected = null;
const flashedKeys = new Set();

function fmt(v, d) { return Number(v).toFixed(d); }

function apply(f) {
  const now = performance.now();
  const ok = f.status === 'connected';
  // A server that died without a Disconnect still looks connected until the session times out:
  // say so once no snapshot came for a second (a paused replay sends none on purpose).
  const stale = ok && f.data_age_s > 1.0 && !(f.replay && f.replay.paused);
  const stopping = ok && f.stop_in_s !== null && f.stop_in_s !== undefined;
  $('status').textContent = !ok ? f.status
    : stale ? 'no data from ' + f.server + ' for ' + fmt(f.data_age_s, 1) + ' s'
    : stopping ? f.server + ' is shutting down: ' + fmt(f.stop_in_s, 0) + ' s left' : 'connected to ' + f.server;
  $('status').className = ok ? (stale || stopping ? 'stale' : 'ok') : '';
  $('stat-tick').textContent = ok ? String(f.tick) : '-';
  $('stat-bodies').textContent = ok ? String(f.bodies) : '-';
  $('stat-awake').textContent = ok ? String(f.awake) : '-';
  $('stat-kbps').textContent = ok ? fmt(f.kbit_s, 1) : '-';
  $('stat-rtt').textContent = ok && f.rtt_ms >= 0 ? fmt(f.rtt_ms, 2) : '-';
  $('stat-delay').textContent = ok ? fmt(f.delay_ms, 0) : '-';
  $('stat-server').textContent = ok ? f.tick_hz + ' Hz physics, ' + f.snapshot_hz + ' Hz snapshots' + (f.replay ? ', replay' : '') : '';

  const seen = new Set();
  for (const o of f.objs) {
    const key = o[0] + ':' + o[1];
    seen.add(key);
    const asset = o[3] === 4 || o[3] === 5 || o[3] === 6;
    const geoKey = asset ? 'asset:' + o[18] : o[3] + ',' + o[5] + ',' + o[6] + ',' + o[7];
    let b = bodies.get(key);
    if (b && b.geoKey !== geoKey) { removeBody(key, b); b = null; }
    if (!b) b = createBody(o, key, geoKey);
    b.mesh.position.set(o[8], o[9], o[10]);
    b.mesh.quaternion.set(o[11], o[12], o[13], o[14]);
    b.state = o;
    const sleeping = (o[4] & 1) !== 0;
    b.mesh.material.color.copy(b.base);
    if (sleeping && o[2] !== 1) b.mesh.material.color.lerp(SLEEP_TINT, 0.6);  // statics always sleep
  }
  for (const [key, b] of bodies) if (!seen.has(key)) removeBody(key, b);
  if (selected && !bodies.has(selected)) selected = null;
  applyCar(f.car);

  // Joints: one line each between its anchors; a removed (broken) joint is simply gone.
  const ends = new Float32Array((f.joints || []).length * 6);
  (f.joints || []).forEach((j, i) => ends.set(j, i * 6));
  jointLines.geometry.setAttribute('position', new THREE.BufferAttribute(ends, 3));
  jointLines.geometry.computeBoundingSphere();

  // Begins are repeated for half a second of ticks: flash each once. A seek back starts afresh.
  if (f.tick < lastTick) { flashedTick = -1; flashedKeys.clear(); }
  lastTick = f.tick;
  let newest = flashedTick;
  for (const c of f.begins) {
    const id = c.slice(0, 5).join(',');
    if (c[0] < flashedTick || flashedKeys.has(id)) continue;
    flashedKeys.add(id);
    flashContact(c, now);
    newest = Math.max(newest, c[0]);
  }
  if (newest > flashedTick) {
    flashedTick = newest;
    for (const id of flashedKeys) if (Number(id.split(',')[0]) < flashedTick) flashedKeys.delete(id);
  }

  const replay = $('replay');
  if (ok && f.replay) {
    replay.style.display = 'flex';
    $('hint').style.bottom = (replay.offsetHeight + 20) + 'px';  // above the timeline, not over its tick
    const tl = $('timeline');
    tl.min = f.replay.first;
    tl.max = f.replay.last;
    if (!dragging) tl.value = f.tick;
    $('replay-tick').textContent = 'tick ' + (dragging ? tl.value : f.tick) + ' / ' + f.replay.last;
    $('play').textContent = f.replay.paused ? 'play' : 'pause';
    $('control').textContent = f.control;
  } else {
    replay.style.display = 'none';
    $('hint').style.bottom = '10px';
  }
  showSelected();
}

function showSelected() {
  const panel = $('body-info');
  const b = selected && bodies.get(selected);
  if (!b) { panel.style.display = 'none'; return; }
  const o = b.state;
  const speed = Math.hypot(o[15], o[16], o[17]);
  panel.style.display = 'block';
  panel.textContent =
    'id        ' + o[0] + ':' + o[1] + '\n' +
    'kind      ' + (KIND[o[2]] || '?') + ((o[4] & 2) ? ' sensor' : '') + '\n' +
    'shape     ' + (SHAPE[o[3]] || '?') + ' ' + [o[5], o[6], o[7]].map((v) => fmt(v, 2)).join(' ') + '\n' +
    'position  ' + [o[8], o[9], o[10]].map((v) => fmt(v, 2)).join(' ') + '\n' +
    'velocity  ' + [o[15], o[16], o[17]].map((v) => fmt(v, 2)).join(' ') + '  |v| ' + fmt(speed, 2) + ' m/s\n' +
    'sleeping  ' + ((o[4] & 1) ? 'yes' : 'no') + '\n' +
    'owner     ' + (owner.key === selected ? owner.text : 'asking the server...');
}

// The owner is not in snapshots: the viewer asks the server's admin endpoint (--admin) at each click.
function ownerText(status, a) {
  if (status === 200 && a) {
    if (a.owner === null) return 'none (scene)';
    const who = 'client ' + a.owner + (a.owner_connected ? (a.owner_name ? ' "' + a.owner_name + '"' : '') : ' (disconnected)');
    return who + (a.shared ? ', shared' : '');
  }
  return 'unknown: ' + ((a && a.error) || ('HTTP ' + status));
}
function askOwner(key) {
  owner = { key, text: 'asking the server...' };
  fetch('/owner?id=' + encodeURIComponent(key))
    .then((r) => r.json().catch(() => null).then((a) => ownerText(r.status, a)))
    .catch(() => 'unknown: the viewer did not answer')
    .then((text) => { if (owner.key === key) { owner.text = text; showSelected(); } });
}

const events = new EventSource('/events');
events.onmessage = (e) => {
  try { latest = JSON.parse(e.data); dirty = true; } catch (err) { /* a torn frame: wait for the next */ }
};
events.onerror = () => {
  $('status').textContent = 'viewer unreachable: retrying';
  $('status').className = '';
};

// ------------------------------------------------------------------ replay controls
let dragging = false;
function control(params) {
  return fetch('/control', {
    method: 'POST',
    headers: { 'X-Impulse-Viewer': '1', 'Content-Type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams(params).toString(),
  }).then((r) => (r.ok ? '' : r.text())).then((t) => { if (t) $('control').textContent = t.trim(); })
    .catch(() => { $('control').textContent = 'the viewer did not answer'; });
}
$('play').addEventListener('click', () => {
  control({ action: latest && latest.replay && latest.replay.paused ? 'resume' : 'pause' });
});
$('speed').addEventListener('change', (e) => control({ action: 'speed', speed: e.target.value }));
$('timeline').addEventListener('input', () => { dragging = true; });
$('timeline').addEventListener('change', (e) => {
  dragging = false;
  control({ action: 'seek', tick: e.target.value });
});

// ------------------------------------------------------------------ picking
const raycaster = new THREE.Raycaster();
let downAt = null;
renderer.domElement.addEventListener('pointerdown', (e) => { downAt = [e.clientX, e.clientY]; });
renderer.domElement.addEventListener('pointerup', (e) => {
  if (!downAt || Math.hypot(e.clientX - downAt[0], e.clientY - downAt[1]) > 5) return;  // a drag, not a click
  pick(e.clientX, e.clientY);
});
function pick(x, y) {
  const rect = renderer.domElement.getBoundingClientRect();
  const ndc = new THREE.Vector2(((x - rect.left) / rect.width) * 2 - 1, -((y - rect.top) / rect.height) * 2 + 1);
  raycaster.setFromCamera(ndc, camera);
  const meshes = [];
  for (const b of bodies.values()) meshes.push(b.mesh);
  const hit = raycaster.intersectObjects(meshes, false)[0];
  selected = hit ? hit.object.userData.key : null;
  if (selected) askOwner(selected);
  showSelected();
  return selected;
}

// ------------------------------------------------------------------ drawing
const SELECT_EMISSIVE = new THREE.Color(0x2a4dff);
const FLASH_EMISSIVE = new THREE.Color(0xfff2a8);
let rendered = 0;
function loop() {
  requestAnimationFrame(loop);
  if (dirty) { dirty = false; apply(latest); frames++; }
  const now = performance.now();
  for (const [key, b] of bodies) {
    const flash = Math.max(0, (b.flashUntil - now) / FLASH_MS);
    const e = b.mesh.material.emissive;
    if (key === selected) e.copy(SELECT_EMISSIVE).multiplyScalar(0.6);
    else e.setRGB(0, 0, 0);
    if (flash > 0) e.lerp(FLASH_EMISSIVE, flash);
  }
  for (const m of markers) {
    const left = Math.max(0, (m.until - now) / FLASH_MS);
    m.mesh.visible = left > 0;
    m.mesh.material.opacity = left;
  }
  if (controls) controls.update();
  renderer.render(scene, camera);
  rendered++;
}
requestAnimationFrame(loop);

// For tests and the console: where a world point lands on the page (CSS pixels), and the state.
window.impulseViewer = {
  project(x, y, z) {
    const v = new THREE.Vector3(x, y, z).project(camera);
    const rect = renderer.domElement.getBoundingClientRect();
    return { x: rect.left + (v.x + 1) / 2 * rect.width, y: rect.top + (1 - v.y) / 2 * rect.height };
  },
  pick,
  get frames() { return frames; },
  get rendered() { return rendered; },
  get latest() { return latest; },
  get keys() { return keys; },
  // [asset id, triangles] of each asset geometry fetched and drawn
  get assets() { return [...assetGeometries.entries()].map(([id, g]) => [id, g.index ? g.index.count / 3 : 0]); },
  background: BACKGROUND,
};
</script>
</body>
</html>
)PAGE";

}  // namespace impulse::viewer
