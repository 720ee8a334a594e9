// worldmesh dashboard: WebSocket client, protocol decoder (crates/dashboard/src/wire.rs
// documents the format), world map, node table, assignment panel, event log and charts.
// Hand-written, no framework, no build step; everything is drawn on canvases.
'use strict';
(() => {
  // 20 distinguishable colours (Kelly's list without white and black); node k gets k mod 20.
  const PALETTE = [
    '#0067A5', '#F38400', '#008856', '#BE0032', '#875692', '#A1CAF1', '#8DB600', '#E68FAC',
    '#F3C300', '#604E97', '#882D17', '#F99379', '#2B3D26', '#B3446C', '#C2B280', '#E25822',
    '#654522', '#DCD300', '#848482', '#F6A600',
  ];
  const colour = (node) => PALETTE[node % PALETTE.length];
  const CLASS_COLOURS = ['#0067A5', '#F38400', '#008856', '#875692', '#BE0032', '#848482'];
  const KIND_SCALE = [1, 0.5, 0.75, 0.75]; // size by kind: players, missiles, items, other
  const FLASH_MS = 1600;
  const JUMP_UNITS = 1500; // moves longer than this are drawn as jumps, not slides

  const $ = (id) => document.getElementById(id);
  const el = {
    title: $('title'), time: $('sim-time'), count: $('object-count'), nodes: $('node-count'),
    migrations: $('migration-count'), adoptions: $('adoption-count'), fps: $('fps'),
    dropped: $('dropped'), status: $('status'), map: $('map'), legend: $('legend'),
    tooltip: $('tooltip'), tbody: document.querySelector('#node-table tbody'),
    nodeUpdated: $('node-updated'), assignment: $('assignment'), log: $('event-log'),
    bw: $('chart-bw'), missing: $('chart-missing'), objectsChart: $('chart-objects'),
  };

  // Everything the page knows. `wm` is also read by the browser test.
  const wm = {
    world: null, quantum: 1, tickMs: 100, classes: [], kinds: [],
    seq: null, time: 0, finished: false,
    // The current objects, sorted by id (parallel arrays).
    n: 0, ids: [], qx: new Uint16Array(0), qy: new Uint16Array(0),
    kind: new Uint8Array(0), owner: new Uint32Array(0),
    fromX: new Float32Array(0), fromY: new Float32Array(0),
    toX: new Float32Array(0), toY: new Float32Array(0),
    arrived: 0, index: new Map(),
    nodes: [], nodeUpdates: 0, moves: [0, 0], dropped: 0, frames: 0,
    series: [], flashes: new Map(), focus: null, focusId: null, hoverIdx: -1,
    selectedNode: null, errors: [],
    perf: { fps: 0, drawMsMean: 0, drawMsMax: 0, history: [] },
  };
  window.wm = wm;

  // ---------------------------------------------------------------- protocol
  class Reader {
    constructor(buf) { this.dv = new DataView(buf); this.p = 0; }
    u8() { return this.dv.getUint8(this.p++); }
    u16() { const v = this.dv.getUint16(this.p, true); this.p += 2; return v; }
    u32() { const v = this.dv.getUint32(this.p, true); this.p += 4; return v; }
    f32() { const v = this.dv.getFloat32(this.p, true); this.p += 4; return v; }
    f64() { const v = this.dv.getFloat64(this.p, true); this.p += 8; return v; }
    i8() { return this.dv.getInt8(this.p++); }
    varint() {
      let v = 0, mul = 1, b;
      do {
        b = this.dv.getUint8(this.p++);
        v += (b & 0x7f) * mul;
        mul *= 128;
      } while (b & 0x80);
      return v;
    }
  }

  const idText = (id) => 'n' + Math.floor(id / 4294967296) + '.' + (id % 4294967296);

  function readRecords(r, out) {
    const n = r.varint();
    let id = 0;
    for (let k = 0; k < n; k++) {
      id += r.varint();
      out.push([id, r.u16(), r.u16(), r.u8(), r.varint()]);
    }
  }

  // Applies a frame; returns its events and node section.
  function applyFrame(buf) {
    const r = new Reader(buf);
    if (r.u8() !== 1) throw new Error('not a frame');
    const flags = r.u8(), seq = r.u32(), time = r.f64();
    let rows;
    if (flags & 1) {
      rows = [];
      readRecords(r, rows);
    } else {
      if (wm.seq === null || ((wm.seq + 1) >>> 0) !== seq) {
        throw new Error('delta ' + seq + ' does not follow frame ' + wm.seq);
      }
      const prevN = wm.n;
      const gone = new Uint8Array(prevN);
      const nr = r.varint();
      let next = 0;
      for (let k = 0; k < nr; k++) {
        const idx = next + r.varint();
        if (idx >= prevN) throw new Error('removed index out of range');
        gone[idx] = 1;
        next = idx + 1;
      }
      const kept = prevN - nr;
      const codesAt = r.p;
      r.p += Math.ceil(kept / 4);
      rows = [];
      let k = 0;
      for (let i = 0; i < prevN; i++) {
        if (gone[i]) continue;
        const code = (r.dv.getUint8(codesAt + (k >> 2)) >> ((k & 3) * 2)) & 3;
        k++;
        let x = wm.qx[i], y = wm.qy[i], kind = wm.kind[i], owner = wm.owner[i];
        if (code === 1) { x += r.i8(); y += r.i8(); }
        else if (code === 2) { x = r.u16(); y = r.u16(); }
        else if (code === 3) { x = r.u16(); y = r.u16(); kind = r.u8(); owner = r.varint(); }
        rows.push([wm.ids[i], x, y, kind, owner]);
      }
      const added = [];
      readRecords(r, added);
      if (added.length) {
        const merged = [];
        let i = 0, j = 0;
        while (i < rows.length || j < added.length) {
          if (j >= added.length || (i < rows.length && rows[i][0] < added[j][0])) merged.push(rows[i++]);
          else merged.push(added[j++]);
        }
        rows = merged;
      }
    }
    const events = [];
    const ne = r.varint();
    for (let k = 0; k < ne; k++) events.push({ id: r.varint(), from: r.varint(), to: r.varint(), cause: r.u8() });
    let nodes = null;
    if (flags & 2) {
      const missing = r.varint() - 1;
      const moves = r.varint();
      const bytes = wm.classes.map(() => r.varint());
      const count = r.varint();
      const list = [];
      for (let k = 0; k < count; k++) {
        const id = r.varint(), bits = r.u8();
        const row = { id, up: !!(bits & 1), players: r.varint(), primaries: r.varint(), replicas: r.varint() };
        row.missing = bits & 2 ? r.varint() : null;
        row.frameUs = bits & 4 ? r.varint() : null;
        row.bytes = wm.classes.map(() => r.varint());
        list.push(row);
      }
      nodes = { missing: missing < 0 ? null : missing, moves, bytes, list };
    }
    if (r.p !== buf.byteLength) throw new Error((buf.byteLength - r.p) + ' bytes after the frame');
    if (wm.seq !== null && ((wm.seq + 1) >>> 0) !== seq) wm.dropped += (seq - wm.seq - 1 + 4294967296) % 4294967296;
    setObjects(rows);
    wm.seq = seq;
    wm.time = time;
    wm.frames++;
    if (flags & 4) wm.finished = true;
    return { events, nodes };
  }

  // Installs the new object list; positions slide from where they were.
  function setObjects(rows) {
    const n = rows.length, q = wm.quantum, b = wm.world.bounds;
    const now = performance.now();
    const ids = new Array(n), qx = new Uint16Array(n), qy = new Uint16Array(n);
    const kind = new Uint8Array(n), owner = new Uint32Array(n);
    const fromX = new Float32Array(n), fromY = new Float32Array(n), toX = new Float32Array(n), toY = new Float32Array(n);
    // Where each old object is drawn now (mid-slide), to continue smoothly.
    const t = Math.min(1, (now - wm.arrived) / wm.tickMs);
    let j = 0;
    const index = new Map();
    for (let i = 0; i < n; i++) {
      const row = rows[i];
      ids[i] = row[0]; qx[i] = row[1]; qy[i] = row[2]; kind[i] = row[3]; owner[i] = row[4];
      toX[i] = b.min_x + row[1] * q; toY[i] = b.min_y + row[2] * q;
      index.set(row[0], i);
      while (j < wm.n && wm.ids[j] < row[0]) j++;
      if (j < wm.n && wm.ids[j] === row[0]) {
        const cx = wm.fromX[j] + (wm.toX[j] - wm.fromX[j]) * t;
        const cy = wm.fromY[j] + (wm.toY[j] - wm.fromY[j]) * t;
        const jump = Math.abs(toX[i] - cx) + Math.abs(toY[i] - cy) > JUMP_UNITS;
        fromX[i] = jump ? toX[i] : cx; fromY[i] = jump ? toY[i] : cy;
        if (wm.owner[j] !== row[4]) {
          if (wm.flashes.size > 20000) wm.flashes.clear();
          wm.flashes.set(row[0], { t0: now, from: wm.owner[j], x: cx, y: cy });
        }
      } else {
        fromX[i] = toX[i]; fromY[i] = toY[i];
      }
    }
    Object.assign(wm, { n, ids, qx, qy, kind, owner, fromX, fromY, toX, toY, index, arrived: now });
  }

  function applyFocus(buf) {
    const r = new Reader(buf);
    r.u8();
    const seq = r.u32(), id = r.varint(), bits = r.u8();
    if (id !== wm.focusId) return;
    if (!(bits & 1)) { wm.focus = { id, gone: true }; return; }
    const f = { id, seq, kind: r.u8(), owner: r.varint(), x: r.f32(), y: r.f32(), aoi: null };
    if (bits & 2) f.aoi = { min_x: r.f32(), min_y: r.f32(), max_x: r.f32(), max_y: r.f32() };
    wm.focus = f;
  }

  // ---------------------------------------------------------------- connection
  let socket = null, retry = 500;
  function connect() {
    const ws = new WebSocket((location.protocol === 'https:' ? 'wss://' : 'ws://') + location.host + '/ws');
    ws.binaryType = 'arraybuffer';
    socket = ws;
    setStatus('connecting', '');
    ws.onmessage = (ev) => {
      try {
        if (typeof ev.data === 'string') onText(JSON.parse(ev.data));
        else if (new Uint8Array(ev.data, 0, 1)[0] === 2) applyFocus(ev.data);
        else onFrame(ev.data);
      } catch (e) {
        wm.errors.push(String(e));
        console.error('dashboard: cannot apply a message:', e);
        ws.close();
      }
    };
    ws.onopen = () => { retry = 500; };
    ws.onclose = () => {
      if (socket !== ws) return;
      setStatus(wm.finished ? 'finished (server gone)' : 'disconnected, retrying', 'down');
      wm.seq = null;
      setTimeout(connect, retry);
      retry = Math.min(retry * 2, 10000);
    };
  }

  function setStatus(text, cls) {
    el.status.textContent = text;
    el.status.className = 'status ' + cls;
  }

  function onText(msg) {
    if (msg.type === 'error') {
      console.warn('dashboard: the server refused a message:', msg.error);
      return;
    }
    if (msg.type !== 'hello') return;
    if (msg.wire !== 1) throw new Error('unsupported wire version ' + msg.wire);
    const first = wm.world === null || JSON.stringify(wm.world) !== JSON.stringify(msg.world);
    wm.world = msg.world;
    wm.quantum = msg.quantum;
    wm.tickMs = 1000 / (msg.tick_hz || 10);
    wm.classes = msg.world.classes;
    wm.kinds = msg.world.kinds;
    wm.finished = msg.finished;
    wm.seq = null;
    wm.n = 0;
    wm.series = msg.series.slice();
    wm.moves = msg.moves.slice();
    el.title.textContent = msg.world.title;
    el.log.textContent = '';
    logEvents(msg.events.map((e) => ({ t: e.t, id: e.id, from: e.from, to: e.to, cause: e.cause })));
    if (first) layoutDirty = true;
    drawCharts();
  }

  function onFrame(buf) {
    const { events, nodes } = applyFrame(buf);
    if (events.length) {
      for (const e of events) wm.moves[e.cause === 1 ? 1 : 0]++;
      logEvents(events.map((e) => ({
        t: wm.time, id: idText(e.id), from: e.from, to: e.to, cause: e.cause === 1 ? 'adoption' : 'migration',
      })));
    }
    if (nodes) {
      wm.nodes = nodes.list;
      wm.nodeUpdates++;
      wm.series.push({ t: wm.time, bytes: nodes.bytes, missing: nodes.missing, objects: wm.n, moves: nodes.moves });
      if (wm.series.length > 600) wm.series.shift();
      renderNodes();
      drawAssignment();
      drawCharts();
    }
    el.time.textContent = wm.time.toFixed(1);
    el.count.textContent = String(wm.n);
    el.count.dataset.count = String(wm.n);
    el.migrations.textContent = String(wm.moves[0]);
    el.migrations.dataset.count = String(wm.moves[0]);
    el.adoptions.textContent = String(wm.moves[1]);
    el.dropped.textContent = String(wm.dropped);
    setStatus(wm.finished ? 'finished' : 'live', wm.finished ? 'finished' : 'live');
  }

  // Groups a burst of changes (a region moving) into one line.
  function logEvents(list) {
    const groups = new Map();
    for (const e of list) {
      const key = e.t.toFixed(1) + '|' + e.from + '|' + e.to + '|' + e.cause;
      const g = groups.get(key);
      if (g) g.ids.push(e.id); else groups.set(key, { ...e, ids: [e.id] });
    }
    for (const g of groups.values()) {
      const li = document.createElement('li');
      li.className = g.cause;
      li.dataset.from = g.from;
      li.dataset.to = g.to;
      const what = g.ids.length === 1 ? g.ids[0] : g.ids.length + ' objects (' + g.ids.slice(0, 3).join(', ') + (g.ids.length > 3 ? ', …' : '') + ')';
      li.textContent = g.t.toFixed(1) + ' s  ' + g.cause + ': ' + what + ' node ' + g.from + ' → node ' + g.to;
      el.log.prepend(li);
    }
    while (el.log.children.length > 200) el.log.lastChild.remove();
  }

  // ---------------------------------------------------------------- node table
  let sortKey = 'id', sortDesc = false;
  const rowPool = [];
  document.querySelectorAll('#node-table th').forEach((th) => {
    th.addEventListener('click', () => {
      const k = th.dataset.key;
      if (sortKey === k) sortDesc = !sortDesc; else { sortKey = k; sortDesc = k !== 'id'; }
      renderNodes();
    });
  });
  const kb = (b) => (b / 1000).toFixed(1);
  function nodeValue(n, k) {
    switch (k) {
      case 'out': return n.bytes.reduce((a, b) => a + b, 0);
      case 'loc': return (n.bytes[1] || 0) + (n.bytes[2] || 0) + (n.bytes[3] || 0);
      case 'c0': return n.bytes[0] || 0;
      case 'c4': return n.bytes[4] || 0;
      case 'frame': return n.frameUs === null ? -1 : n.frameUs;
      case 'missing': return n.missing === null ? -1 : n.missing;
      default: return n[k];
    }
  }
  function renderNodes() {
    const list = wm.nodes.slice().sort((a, b) => {
      const d = nodeValue(a, sortKey) - nodeValue(b, sortKey);
      return (sortDesc ? -d : d) || a.id - b.id;
    });
    while (rowPool.length < list.length) {
      const tr = document.createElement('tr');
      for (let c = 0; c < 10; c++) tr.appendChild(document.createElement('td'));
      tr.addEventListener('click', () => selectNode(Number(tr.dataset.id)));
      rowPool.push(tr);
    }
    const tbody = el.tbody;
    while (tbody.children.length > list.length) tbody.lastChild.remove();
    list.forEach((n, i) => {
      const tr = rowPool[i];
      if (tbody.children[i] !== tr) tbody.insertBefore(tr, tbody.children[i] || null);
      tr.dataset.id = n.id;
      tr.className = (n.up ? '' : 'down ') + (wm.selectedNode === n.id ? 'sel' : '');
      const cells = [
        null, n.players, n.primaries, n.replicas, n.missing === null ? '–' : n.missing,
        n.frameUs === null ? '–' : (n.frameUs / 1000).toFixed(2), kb(nodeValue(n, 'out')),
        kb(nodeValue(n, 'c0')), kb(nodeValue(n, 'loc')), kb(nodeValue(n, 'c4')),
      ];
      const first = tr.children[0];
      if (first.dataset.id !== String(n.id)) {
        first.dataset.id = String(n.id);
        first.innerHTML = '';
        const sw = document.createElement('span');
        sw.className = 'sw';
        sw.style.background = colour(n.id);
        first.append(sw, String(n.id));
      }
      for (let c = 1; c < 10; c++) {
        const s = String(cells[c]);
        if (tr.children[c].textContent !== s) tr.children[c].textContent = s;
      }
    });
    el.nodes.textContent = String(wm.nodes.length);
    el.nodeUpdated.textContent = 'at ' + wm.time.toFixed(1) + ' s';
    el.nodeUpdated.dataset.updates = String(wm.nodeUpdates);
    renderLegend();
  }

  function selectNode(id) {
    wm.selectedNode = wm.selectedNode === id ? null : id;
    renderNodes();
  }

  let legendFor = -1;
  function renderLegend() {
    if (legendFor === wm.nodes.length) return;
    legendFor = wm.nodes.length;
    el.legend.textContent = '';
    const add = (label, c, id) => {
      const s = document.createElement('span');
      s.className = 'item';
      const sw = document.createElement('span');
      sw.className = 'sw';
      sw.style.background = c;
      s.append(sw, label);
      if (id !== undefined) s.addEventListener('click', () => selectNode(id));
      el.legend.append(s);
    };
    const ids = wm.nodes.map((n) => n.id).sort((a, b) => a - b);
    if (ids.length <= PALETTE.length * 2) {
      for (const id of ids) add('node ' + id, colour(id), id);
    } else {
      for (let k = 0; k < PALETTE.length; k++) add('nodes ≡ ' + k + ' mod ' + PALETTE.length, PALETTE[k]);
    }
    const note = document.createElement('span');
    note.className = 'muted';
    note.textContent = '■ player  ▪ item  · missile — hover an object for its area of interest; click a node to highlight it';
    el.legend.append(note);
  }

  // ---------------------------------------------------------------- map
  let layoutDirty = true;
  const lay = { rows: 1, seg: 1, scale: 1, ox: 0, oy: 0, pitch: 0, w: 0, h: 0, dpr: 1 };
  const bg = document.createElement('canvas');

  // A long map is folded into rows (like lines of text) so it fills the canvas.
  function layout() {
    const c = el.map, dpr = window.devicePixelRatio || 1;
    const w = c.clientWidth, h = c.clientHeight;
    if (!w || !h || !wm.world) return false;
    c.width = Math.round(w * dpr); c.height = Math.round(h * dpr);
    const b = wm.world.bounds, W = Math.max(1, b.max_x - b.min_x), H = Math.max(1, b.max_y - b.min_y);
    const pad = 8, gap = 10;
    let best = { rows: 1, scale: 0 };
    for (let rows = 1; rows <= 64; rows++) {
      const scale = Math.min((w - 2 * pad) / (W / rows), (h - 2 * pad - gap * (rows - 1)) / (H * rows));
      if (scale > best.scale) best = { rows, scale };
    }
    Object.assign(lay, {
      rows: best.rows, seg: W / best.rows, scale: best.scale, w, h, dpr,
      ox: pad, oy: pad, pitch: H * best.scale + gap,
    });
    bg.width = c.width; bg.height = c.height;
    const g = bg.getContext('2d');
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    g.fillStyle = '#fff';
    g.fillRect(0, 0, w, h);
    for (let r = 0; r < lay.rows; r++) {
      g.fillStyle = '#f1f1ec';
      g.fillRect(lay.ox, lay.oy + r * lay.pitch, lay.seg * lay.scale, H * lay.scale);
    }
    g.fillStyle = '#c4c4bb';
    for (const o of wm.world.obstacles) fillWorldRect(g, o);
    if (lay.rows > 1) {
      g.fillStyle = '#999';
      g.font = '10px sans-serif';
      for (let r = 0; r < lay.rows; r++) {
        g.fillText('x ' + Math.round(b.min_x + r * lay.seg), lay.ox + 2, lay.oy + r * lay.pitch + H * lay.scale + 9);
      }
    }
    layoutDirty = false;
    return true;
  }

  // Calls f(sx, sy, sw, sh) for each row-piece of a world rectangle.
  function eachPiece(o, f) {
    const b = wm.world.bounds;
    const x0 = Math.max(o.min_x, b.min_x) - b.min_x, x1 = Math.min(o.max_x, b.max_x) - b.min_x;
    const y0 = Math.max(o.min_y, b.min_y) - b.min_y, y1 = Math.min(o.max_y, b.max_y) - b.min_y;
    if (x1 < x0 || y1 < y0) return;
    const r0 = Math.min(lay.rows - 1, Math.floor(x0 / lay.seg)), r1 = Math.min(lay.rows - 1, Math.floor(x1 / lay.seg));
    for (let r = r0; r <= r1; r++) {
      const a = Math.max(x0, r * lay.seg) - r * lay.seg, z = Math.min(x1, (r + 1) * lay.seg) - r * lay.seg;
      f(lay.ox + a * lay.scale, lay.oy + r * lay.pitch + y0 * lay.scale, Math.max(1, (z - a) * lay.scale), Math.max(1, (y1 - y0) * lay.scale));
    }
  }
  function fillWorldRect(g, o) { eachPiece(o, (x, y, w, h) => g.fillRect(x, y, w, h)); }

  function toScreen(x, y, out) {
    const b = wm.world.bounds;
    let dx = x - b.min_x;
    let r = Math.floor(dx / lay.seg);
    if (r >= lay.rows) r = lay.rows - 1;
    if (r < 0) r = 0;
    out[0] = lay.ox + (dx - r * lay.seg) * lay.scale;
    out[1] = lay.oy + r * lay.pitch + (y - b.min_y) * lay.scale;
  }

  function toWorld(sx, sy) {
    const b = wm.world.bounds;
    const r = Math.max(0, Math.min(lay.rows - 1, Math.floor((sy - lay.oy) / lay.pitch)));
    return [b.min_x + r * lay.seg + (sx - lay.ox) / lay.scale, b.min_y + (sy - lay.oy - r * lay.pitch) / lay.scale];
  }

  let sx = new Float32Array(0), sy = new Float32Array(0), order = new Uint32Array(0);
  const pt = [0, 0];
  const NB = PALETTE.length * 4;
  const counts = new Uint32Array(NB + 1);

  function drawMap(now) {
    if (!wm.world) return;
    if (layoutDirty && !layout()) return;
    const c = el.map, g = c.getContext('2d');
    g.setTransform(1, 0, 0, 1, 0, 0);
    g.drawImage(bg, 0, 0);
    g.setTransform(lay.dpr, 0, 0, lay.dpr, 0, 0);
    const n = wm.n;
    if (sx.length < n) { sx = new Float32Array(n * 2); sy = new Float32Array(n * 2); order = new Uint32Array(n * 2); }
    const t = Math.min(1, (now - wm.arrived) / wm.tickMs);
    // Screen positions, and a counting sort by (kind, colour) so each colour is set once.
    counts.fill(0);
    for (let i = 0; i < n; i++) {
      toScreen(wm.fromX[i] + (wm.toX[i] - wm.fromX[i]) * t, wm.fromY[i] + (wm.toY[i] - wm.fromY[i]) * t, pt);
      sx[i] = pt[0]; sy[i] = pt[1];
      counts[bucket(i) + 1]++;
    }
    for (let k = 0; k < NB; k++) counts[k + 1] += counts[k];
    for (let i = 0; i < n; i++) order[counts[bucket(i)]++] = i;
    // Draw in kind order: items, missiles, players on top.
    const sel = wm.selectedNode;
    let start = 0;
    const ranges = [];
    for (let k = 0; k < NB; k++) { ranges.push([start, counts[k]]); start = counts[k]; }
    // Players about their real size (32 units) when the map is large enough, 4-9 px.
    const player = Math.max(4, Math.min(9, 48 * lay.scale));
    for (const kind of [2, 3, 1, 0]) {
      const px = Math.max(2, Math.round(player * KIND_SCALE[kind])), h = px / 2;
      const alpha = kind === 2 ? 0.75 : 1;
      for (let ci = 0; ci < PALETTE.length; ci++) {
        const [a, z] = ranges[kind * PALETTE.length + ci];
        if (a === z) continue;
        g.fillStyle = PALETTE[ci];
        g.globalAlpha = alpha;
        for (let k = a; k < z; k++) {
          const i = order[k];
          if (sel !== null) g.globalAlpha = wm.owner[i] === sel ? alpha : 0.12;
          g.fillRect(sx[i] - h, sy[i] - h, px, px);
        }
      }
    }
    g.globalAlpha = 1;
    // Ownership changes: a shrinking ring in the new owner's colour.
    if (wm.flashes.size) {
      g.lineWidth = 2;
      for (const [id, f] of wm.flashes) {
        const age = now - f.t0;
        const i = wm.index.get(id);
        if (age > FLASH_MS || i === undefined) { wm.flashes.delete(id); continue; }
        const k = 1 - age / FLASH_MS;
        g.globalAlpha = k;
        g.strokeStyle = '#000';
        g.beginPath(); g.arc(sx[i], sy[i], 4 + 14 * k, 0, 6.2832); g.stroke();
        g.strokeStyle = colour(wm.owner[i]);
        g.beginPath(); g.arc(sx[i], sy[i], 2 + 14 * k, 0, 6.2832); g.stroke();
      }
      g.globalAlpha = 1;
    }
    // The hovered object and its area of interest.
    const f = wm.focus;
    if (wm.focusId !== null && f && f.id === wm.focusId && !f.gone) {
      const i = wm.index.get(f.id);
      if (f.aoi) {
        g.setLineDash([5, 3]);
        g.lineWidth = 1.5;
        g.strokeStyle = colour(f.owner);
        g.fillStyle = 'rgba(0,0,0,0.05)';
        eachPiece(f.aoi, (x, y, w, h) => { g.fillRect(x, y, w, h); g.strokeRect(x, y, w, h); });
        g.setLineDash([]);
      }
      if (i !== undefined) {
        g.lineWidth = 2;
        g.strokeStyle = '#000';
        g.beginPath(); g.arc(sx[i], sy[i], 6, 0, 6.2832); g.stroke();
      }
    }
  }
  function bucket(i) {
    const kind = Math.min(wm.kind[i], 3);
    return kind * PALETTE.length + (wm.owner[i] % PALETTE.length);
  }

  // Hover: the nearest object within 8 px.
  let mouse = null;
  el.map.addEventListener('mousemove', (e) => {
    const r = el.map.getBoundingClientRect();
    mouse = [e.clientX - r.left, e.clientY - r.top];
  });
  el.map.addEventListener('mouseleave', () => { mouse = null; });
  function updateHover() {
    let best = -1, bestD = 64;
    if (mouse && wm.n) {
      for (let i = 0; i < wm.n; i++) {
        const dx = sx[i] - mouse[0], dy = sy[i] - mouse[1], d = dx * dx + dy * dy;
        if (d < bestD) { bestD = d; best = i; }
      }
    }
    const id = best < 0 ? null : wm.ids[best];
    if (id !== wm.focusId) {
      wm.focusId = id;
      wm.focus = null;
      if (socket && socket.readyState === 1) socket.send(JSON.stringify({ hover: id === null ? null : idText(id) }));
    }
    if (best < 0) { el.tooltip.hidden = true; return; }
    const kindName = (wm.kinds[wm.kind[best]] || { name: 'object' }).name;
    const [wx, wy] = [wm.toX[best], wm.toY[best]];
    const f = wm.focus && wm.focus.id === id ? wm.focus : null;
    el.tooltip.textContent = kindName + ' ' + idText(id) + ' on node ' + wm.owner[best] + ' at (' + Math.round(wx) + ', ' + Math.round(wy) + ')' +
      (f && f.aoi ? ' — interest ' + Math.round(f.aoi.max_x - f.aoi.min_x) + ' × ' + Math.round(f.aoi.max_y - f.aoi.min_y) : '');
    el.tooltip.hidden = false;
    el.tooltip.style.left = Math.min(mouse[0] + 14, el.map.clientWidth - el.tooltip.offsetWidth) + 'px';
    el.tooltip.style.top = (mouse[1] + 16) + 'px';
  }
  window.addEventListener('resize', () => { layoutDirty = true; drawAssignment(); drawCharts(); });

  // ---------------------------------------------------------------- assignment panel
  function drawAssignment() {
    const c = el.assignment, dpr = window.devicePixelRatio || 1, w = c.clientWidth, h = c.clientHeight;
    if (!w) return;
    c.width = w * dpr; c.height = h * dpr;
    const g = c.getContext('2d');
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    g.clearRect(0, 0, w, h);
    const nodes = wm.nodes.slice().sort((a, b) => a.id - b.id);
    if (!nodes.length) return;
    const max = Math.max(1, ...nodes.map((n) => n.primaries));
    const left = 28, bw = (w - left - 4) / nodes.length, top = 6, ph = h - top - 14;
    g.fillStyle = '#666'; g.font = '10px sans-serif';
    g.fillText(String(max), 2, top + 8); g.fillText('0', 2, top + ph);
    for (let k = 0; k < nodes.length; k++) {
      const n = nodes[k], x = left + k * bw, hp = (n.primaries / max) * ph, hl = (n.players / max) * ph;
      g.fillStyle = colour(n.id);
      g.globalAlpha = 0.45;
      g.fillRect(x, top + ph - hp, Math.max(1, bw - (bw > 3 ? 1 : 0)), hp);
      g.globalAlpha = 1;
      g.fillRect(x, top + ph - hl, Math.max(1, bw - (bw > 3 ? 1 : 0)), hl);
    }
    const p = nodes.map((n) => n.players);
    g.fillStyle = '#333';
    g.fillText('players per node: min ' + Math.min(...p) + ', mean ' + (p.reduce((a, b) => a + b, 0) / p.length).toFixed(1) + ', max ' + Math.max(...p) + ' — capacity: not reported', left, h - 2);
  }

  // ---------------------------------------------------------------- charts
  function chart(canvas, series, opts) {
    const dpr = window.devicePixelRatio || 1, w = canvas.clientWidth, h = canvas.clientHeight;
    if (!w || !h) return;
    canvas.width = w * dpr; canvas.height = h * dpr;
    const g = canvas.getContext('2d');
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    g.clearRect(0, 0, w, h);
    const L = 46, R = 8, T = 16, B = 18, pw = w - L - R, ph = h - T - B;
    const pts = wm.series;
    g.font = '10px sans-serif';
    if (pts.length < 2 || series.every((s) => pts.every((p) => s.get(p) === null))) {
      g.fillStyle = '#999';
      g.fillText(pts.length < 2 ? 'waiting for data…' : opts.none, L, T + ph / 2);
      return;
    }
    const t0 = pts[0].t, t1 = Math.max(pts[pts.length - 1].t, t0 + 1e-9);
    let ymax = 0;
    for (const s of series) for (const p of pts) { const v = s.get(p); if (v !== null && v > ymax) ymax = v; }
    ymax = niceCeil(ymax || 1);
    g.strokeStyle = '#e6e6e6'; g.fillStyle = '#666'; g.lineWidth = 1;
    for (let k = 0; k <= 4; k++) {
      const y = T + ph - (k / 4) * ph;
      g.beginPath(); g.moveTo(L, y); g.lineTo(L + pw, y); g.stroke();
      g.fillText(fmt(ymax * k / 4), 2, y + 3);
    }
    g.fillText(t0.toFixed(0) + ' s', L, h - 4);
    const end = t1.toFixed(0) + ' s';
    g.fillText(end, L + pw - g.measureText(end).width, h - 4);
    const X = (t) => L + ((t - t0) / (t1 - t0)) * pw, Y = (v) => T + ph - (v / ymax) * ph;
    let lx = L + 2;
    for (const s of series) {
      g.strokeStyle = g.fillStyle = s.colour;
      if (s.bars) {
        for (const p of pts) { const v = s.get(p); if (v) g.fillRect(X(p.t) - 1, Y(v), 2, T + ph - Y(v)); }
      } else {
        g.lineWidth = 1.5;
        g.beginPath();
        let on = false;
        for (const p of pts) {
          const v = s.get(p);
          if (v === null) { on = false; continue; }
          if (on) g.lineTo(X(p.t), Y(v)); else { g.moveTo(X(p.t), Y(v)); on = true; }
        }
        g.stroke();
      }
      g.fillRect(lx, 4, 8, 8);
      g.fillStyle = '#333';
      g.fillText(s.name, lx + 10, 12);
      lx += 16 + g.measureText(s.name).width;
    }
  }
  function niceCeil(v) {
    const e = Math.pow(10, Math.floor(Math.log10(v)));
    for (const m of [1, 2, 2.5, 5, 10]) if (m * e >= v) return m * e;
    return 10 * e;
  }
  function fmt(v) { return v >= 1e6 ? (v / 1e6).toFixed(1) + 'M' : v >= 1e3 ? (v / 1e3).toFixed(1) + 'k' : String(Math.round(v * 10) / 10); }

  function drawCharts() {
    const classes = wm.classes;
    const short = { object_update: 'updates', locator_routing: 'routing', match_delivery: 'match', overlay_maintenance: 'overlay', migration: 'migration', control: 'control' };
    chart(el.bw, classes.map((c, k) => ({
      name: short[c] || c, colour: CLASS_COLOURS[k % CLASS_COLOURS.length], get: (p) => (p.bytes[k] || 0) / 1000,
    })), { none: '' });
    chart(el.missing, [{ name: 'missing', colour: '#BE0032', get: (p) => p.missing }],
      { none: 'not reported by this producer (needs a global view)' });
    chart(el.objectsChart, [
      { name: 'objects', colour: '#0067A5', get: (p) => p.objects },
      { name: 'ownership changes', colour: '#F38400', get: (p) => p.moves, bars: true },
    ], { none: '' });
  }

  // ---------------------------------------------------------------- animation loop
  let fpsCount = 0, fpsStart = performance.now(), drawSum = 0, drawMax = 0;
  function tick(now) {
    const t0 = performance.now();
    try {
      drawMap(now);
      updateHover();
    } catch (e) {
      wm.errors.push(String(e));
      console.error('dashboard: drawing failed:', e);
    }
    const dt = performance.now() - t0;
    drawSum += dt; drawMax = Math.max(drawMax, dt);
    fpsCount++;
    if (now - fpsStart >= 1000) {
      const fps = (fpsCount * 1000) / (now - fpsStart);
      wm.perf = {
        fps, drawMsMean: drawSum / fpsCount, drawMsMax: drawMax,
        history: wm.perf.history.concat([{ fps, drawMsMean: drawSum / fpsCount, drawMsMax: drawMax, objects: wm.n }]).slice(-120),
      };
      el.fps.textContent = fps.toFixed(0);
      fpsCount = 0; fpsStart = now; drawSum = 0; drawMax = 0;
    }
    requestAnimationFrame(tick);
  }
  requestAnimationFrame(tick);
  connect();
})();
