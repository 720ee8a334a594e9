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
    join: $('join'), playStatus: $('play-status'),
  };

  // Everything the page knows. `wm` is also read by the browser test.
  const wm = {
    world: null, quantum: 1, tickMs: 100, classes: [], kinds: [],
    seq: null, time: 0, finished: false,
    // The current objects, sorted by id (parallel arrays).
    n: 0, ids: new Float64Array(0), qx: new Uint16Array(0), qy: new Uint16Array(0),
    kind: new Uint8Array(0), owner: new Uint32Array(0),
    fromX: new Float32Array(0), fromY: new Float32Array(0),
    toX: new Float32Array(0), toY: new Float32Array(0),
    arrived: 0,
    nodes: [], nodeUpdates: 0, moves: [0, 0], dropped: 0, frames: 0,
    series: [], flashes: new Map(), focus: null, lastFocus: null, focusId: null,
    selectedNode: null, errors: [],
    perf: { fps: 0, drawMsMean: 0, drawMsMax: 0, history: [] },
    // The Join button's session (null when not playing): state, avatar key, node, position.
    play: null, playAbout: null,
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

  // An object list in parallel typed arrays (no per-object allocation: 10 lists a second).
  function objectList(n) {
    return { n, ids: new Float64Array(n), qx: new Uint16Array(n), qy: new Uint16Array(n), kind: new Uint8Array(n), owner: new Uint32Array(n) };
  }
  function readRecords(r) {
    const n = r.varint();
    if (n * 7 > r.dv.byteLength - r.p) throw new Error('object count ' + n + ' exceeds the message');
    const o = objectList(n);
    let id = 0;
    for (let k = 0; k < n; k++) {
      id += r.varint();
      o.ids[k] = id; o.qx[k] = r.u16(); o.qy[k] = r.u16(); o.kind[k] = r.u8(); o.owner[k] = r.varint();
    }
    return o;
  }

  // Applies a frame; returns its events and node section.
  function applyFrame(buf) {
    const r = new Reader(buf);
    if (r.u8() !== 1) throw new Error('not a frame');
    const flags = r.u8(), seq = r.u32(), time = r.f64();
    let cur;
    if (flags & 1) {
      cur = readRecords(r);
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
      const kept = objectList(prevN - nr);
      const codesAt = r.p;
      r.p += Math.ceil(kept.n / 4);
      let k = 0;
      for (let i = 0; i < prevN; i++) {
        if (gone[i]) continue;
        const code = (r.dv.getUint8(codesAt + (k >> 2)) >> ((k & 3) * 2)) & 3;
        let x = wm.qx[i], y = wm.qy[i], kind = wm.kind[i], owner = wm.owner[i];
        if (code === 1) { x += r.i8(); y += r.i8(); }
        else if (code === 2) { x = r.u16(); y = r.u16(); }
        else if (code === 3) { x = r.u16(); y = r.u16(); kind = r.u8(); owner = r.varint(); }
        kept.ids[k] = wm.ids[i]; kept.qx[k] = x; kept.qy[k] = y; kept.kind[k] = kind; kept.owner[k] = owner;
        k++;
      }
      const added = readRecords(r);
      if (added.n === 0) {
        cur = kept;
      } else {
        cur = objectList(kept.n + added.n);
        let i = 0, j = 0;
        for (let m = 0; m < cur.n; m++) {
          const a = j >= added.n || (i < kept.n && kept.ids[i] < added.ids[j]);
          const src = a ? kept : added, s = a ? i++ : j++;
          cur.ids[m] = src.ids[s]; cur.qx[m] = src.qx[s]; cur.qy[m] = src.qy[s]; cur.kind[m] = src.kind[s]; cur.owner[m] = src.owner[s];
        }
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
        row.sessions = bits & 8 ? r.varint() : null;
        row.capacity = bits & 16 ? r.varint() : null;
        row.health = bits & 32 ? r.varint() : null;
        row.bytes = wm.classes.map(() => r.varint());
        list.push(row);
      }
      nodes = { missing: missing < 0 ? null : missing, moves, bytes, list };
    }
    if (r.p !== buf.byteLength) throw new Error((buf.byteLength - r.p) + ' bytes after the frame');
    if (wm.seq !== null && ((wm.seq + 1) >>> 0) !== seq) wm.dropped += (seq - wm.seq - 1 + 4294967296) % 4294967296;
    setObjects(cur);
    wm.seq = seq;
    wm.time = time;
    wm.frames++;
    if (flags & 4) wm.finished = true;
    return { events, nodes };
  }

  // Installs the new object list; positions slide from where they were drawn.
  function setObjects(o) {
    const n = o.n, q = wm.quantum, b = wm.world.bounds;
    const now = performance.now();
    const fromX = new Float32Array(n), fromY = new Float32Array(n), toX = new Float32Array(n), toY = new Float32Array(n);
    const t = Math.min(1, (now - wm.arrived) / wm.tickMs);
    let j = 0;
    for (let i = 0; i < n; i++) {
      const id = o.ids[i];
      toX[i] = b.min_x + o.qx[i] * q; toY[i] = b.min_y + o.qy[i] * q;
      while (j < wm.n && wm.ids[j] < id) j++;
      if (j < wm.n && wm.ids[j] === id) {
        const cx = wm.fromX[j] + (wm.toX[j] - wm.fromX[j]) * t;
        const cy = wm.fromY[j] + (wm.toY[j] - wm.fromY[j]) * t;
        const jump = Math.abs(toX[i] - cx) + Math.abs(toY[i] - cy) > JUMP_UNITS;
        fromX[i] = jump ? toX[i] : cx; fromY[i] = jump ? toY[i] : cy;
        if (wm.owner[j] !== o.owner[i]) {
          if (wm.flashes.size > 20000) wm.flashes.clear();
          wm.flashes.set(id, now);
        }
      } else {
        fromX[i] = toX[i]; fromY[i] = toY[i];
      }
    }
    Object.assign(wm, { n, ids: o.ids, qx: o.qx, qy: o.qy, kind: o.kind, owner: o.owner, fromX, fromY, toX, toY, arrived: now });
  }

  // Index of object `id` in the current list, or -1 (binary search: ids are sorted).
  function indexOf(id) {
    let lo = 0, hi = wm.n - 1;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1, v = wm.ids[mid];
      if (v === id) return mid;
      if (v < id) lo = mid + 1; else hi = mid - 1;
    }
    return -1;
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
    wm.lastFocus = f;
  }

  // ---------------------------------------------------------------- connection
  let socket = null, retry = 500;
  function connect() {
    const ws = new WebSocket((location.protocol === 'https:' ? 'wss://' : 'ws://') + location.host + '/ws');
    ws.binaryType = 'arraybuffer';
    socket = ws;
    setStatus('connecting', '');
    ws.onmessage = (ev) => {
      const t0 = performance.now();
      try {
        if (typeof ev.data === 'string') onText(JSON.parse(ev.data));
        else if (new Uint8Array(ev.data, 0, 1)[0] === 2) applyFocus(ev.data);
        else onFrame(ev.data);
      } catch (e) {
        wm.errors.push(String(e));
        console.error('dashboard: cannot apply a message:', e);
        ws.close();
      }
      msgSum += performance.now() - t0;
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

  // DOM writes only when something changed (each write costs style and layout work).
  function setText(e, s) {
    if (e.textContent !== s) e.textContent = s;
  }
  function setStatus(text, cls) {
    setText(el.status, text);
    if (el.status.className !== 'status ' + cls) el.status.className = 'status ' + cls;
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
      const t0 = performance.now();
      wm.nodes = nodes.list;
      wm.nodeUpdates++;
      wm.series.push({ t: wm.time, bytes: nodes.bytes, missing: nodes.missing, objects: wm.n, moves: nodes.moves });
      if (wm.series.length > 600) wm.series.shift();
      renderNodes();
      drawAssignment();
      drawCharts();
      panelSum += performance.now() - t0;
    }
    setText(el.time, wm.time.toFixed(1));
    setText(el.count, String(wm.n));
    el.count.dataset.count = String(wm.n);
    setText(el.migrations, String(wm.moves[0]));
    el.migrations.dataset.count = String(wm.moves[0]);
    setText(el.adoptions, String(wm.moves[1]));
    setText(el.dropped, String(wm.dropped));
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
      case 'health': return n.health === null ? -1 : n.health;
      default: return n[k];
    }
  }
  // The table shows only the rows in view (spacers stand in for the others): a 512-node
  // table rewritten twice a second would cost more layout and paint than the whole map.
  const ROW_H = 18;
  const COLUMNS = 11;
  const wrap = document.querySelector('.table-wrap');
  const spacerTop = document.createElement('tr'), spacerBottom = document.createElement('tr');
  for (const sp of [spacerTop, spacerBottom]) {
    sp.className = 'spacer';
    const td = document.createElement('td');
    td.colSpan = COLUMNS;
    sp.appendChild(td);
  }
  el.tbody.append(spacerTop, spacerBottom);
  let sorted = [], scrollPending = false;
  wrap.addEventListener('scroll', () => {
    if (scrollPending) return;
    scrollPending = true;
    requestAnimationFrame(() => { scrollPending = false; paintRows(); });
  }, { passive: true });

  function renderNodes() {
    sorted = wm.nodes.slice().sort((a, b) => {
      const d = nodeValue(a, sortKey) - nodeValue(b, sortKey);
      return (sortDesc ? -d : d) || a.id - b.id;
    });
    paintRows();
    setText(el.nodes, String(wm.nodes.length));
    setText(el.nodeUpdated, 'at ' + wm.time.toFixed(1) + ' s');
    el.nodeUpdated.dataset.updates = String(wm.nodeUpdates);
    renderLegend();
  }

  function paintRows() {
    const first = Math.max(0, Math.floor(wrap.scrollTop / ROW_H) - 2);
    const last = Math.min(sorted.length, first + Math.ceil(wrap.clientHeight / ROW_H) + 4);
    spacerTop.firstChild.style.height = first * ROW_H + 'px';
    spacerBottom.firstChild.style.height = (sorted.length - last) * ROW_H + 'px';
    while (rowPool.length < last - first) {
      const tr = document.createElement('tr');
      tr.className = 'node';
      for (let c = 0; c < COLUMNS; c++) tr.appendChild(document.createElement('td'));
      tr.addEventListener('click', () => selectNode(Number(tr.dataset.id)));
      rowPool.push(tr);
    }
    const tbody = el.tbody;
    for (let k = 0; k < rowPool.length; k++) {
      const tr = rowPool[k];
      if (k >= last - first) {
        if (tr.parentNode) tr.remove();
        continue;
      }
      const want = k === 0 ? spacerTop.nextSibling : rowPool[k - 1].nextSibling;
      if (tr !== want) tbody.insertBefore(tr, want);
      const n = sorted[first + k];
      tr.dataset.id = n.id;
      const cls = 'node' + (n.up ? '' : ' down') + (wm.selectedNode === n.id ? ' sel' : '');
      if (tr.className !== cls) tr.className = cls;
      const cells = [
        null, n.players, n.primaries, n.replicas, n.missing === null ? '–' : n.missing,
        n.frameUs === null ? '–' : (n.frameUs / 1000).toFixed(2), n.health === null ? '–' : n.health,
        kb(nodeValue(n, 'out')),
        kb(nodeValue(n, 'c0')), kb(nodeValue(n, 'loc')), kb(nodeValue(n, 'c4')),
      ];
      const cell0 = tr.children[0];
      if (cell0.dataset.id !== String(n.id)) {
        cell0.dataset.id = String(n.id);
        cell0.textContent = '';
        const sw = document.createElement('span');
        sw.className = 'sw';
        sw.style.background = colour(n.id);
        cell0.append(sw, String(n.id));
      }
      for (let c = 1; c < COLUMNS; c++) setText(tr.children[c], String(cells[c]));
    }
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
    // The rows are centred: a map whose fold leaves room over (a wide canvas for few
    // rows, or a tall one for a long map) sits in the middle, not in a corner.
    const usedW = (W / best.rows) * best.scale, usedH = best.rows * H * best.scale + gap * (best.rows - 1);
    Object.assign(lay, {
      rows: best.rows, seg: W / best.rows, scale: best.scale, w, h, dpr,
      ox: Math.max(pad, (w - usedW) / 2), oy: Math.max(pad, (h - usedH) / 2), pitch: H * best.scale + gap,
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
    bg32 = new Uint32Array(g.getImageData(0, 0, bg.width, bg.height).data.buffer);
    img = c.getContext('2d').createImageData(bg.width, bg.height);
    img32 = new Uint32Array(img.data.buffer);
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

  // Where world point (x, y) is drawn, in canvas (CSS) pixels, into out; false, and NaN in
  // out, for a point past the map's far edges (a missile flies on past the edge until its
  // lifetime ends): it has no place in any row, and drawing it beside one would put it
  // over another part of the map or the margin. Half a grid step of slack keeps a point
  // inside the map that the server's quantizer rounded past the edge. (Past the near
  // edges the quantizer has already clamped a point onto the edge, and on maps longer
  // than 65,535 grid steps of 0.25 past the far end of the long side too: such a point is
  // drawn on the edge, inside its row.)
  function toScreen(x, y, out) {
    const b = wm.world.bounds, slack = wm.quantum / 2;
    if (!(x >= b.min_x - slack && x <= b.max_x + slack && y >= b.min_y - slack && y <= b.max_y + slack)) {
      out[0] = NaN; out[1] = NaN;
      return false;
    }
    x = Math.min(Math.max(x, b.min_x), b.max_x);
    y = Math.min(Math.max(y, b.min_y), b.max_y);
    let dx = x - b.min_x;
    let r = Math.floor(dx / lay.seg);
    if (r >= lay.rows) r = lay.rows - 1;
    if (r < 0) r = 0;
    out[0] = lay.ox + (dx - r * lay.seg) * lay.scale;
    out[1] = lay.oy + r * lay.pitch + (y - b.min_y) * lay.scale;
    return true;
  }

  function toWorld(sx, sy) {
    const b = wm.world.bounds;
    const r = Math.max(0, Math.min(lay.rows - 1, Math.floor((sy - lay.oy) / lay.pitch)));
    return [b.min_x + r * lay.seg + (sx - lay.ox) / lay.scale, b.min_y + (sy - lay.oy - r * lay.pitch) / lay.scale];
  }

  let sx = new Float32Array(0), sy = new Float32Array(0);
  let img = null, img32 = new Uint32Array(0), bg32 = new Uint32Array(0);
  const pt = [0, 0];
  // Palette colours as pixels (RGBA bytes, little-endian), solid, items (75 % over the
  // map's ground) and faded (12 %, for objects of nodes not highlighted).
  const GROUND = [0xf1, 0xf1, 0xec];
  const pixel = (hex, a) => {
    const c = [1, 3, 5].map((k) => parseInt(hex.slice(k, k + 2), 16));
    const m = c.map((v, k) => Math.round(v * a + GROUND[k] * (1 - a)));
    return (255 << 24 | m[2] << 16 | m[1] << 8 | m[0]) >>> 0;
  };
  const SOLID_U32 = Uint32Array.from(PALETTE, (h) => pixel(h, 1));
  const ITEM_U32 = Uint32Array.from(PALETTE, (h) => pixel(h, 0.75));
  const FADED_U32 = Uint32Array.from(PALETTE, (h) => pixel(h, 0.12));

  function drawMap(now) {
    if (!wm.world) return;
    if (layoutDirty && !layout()) return;
    const c = el.map, g = c.getContext('2d');
    const n = wm.n;
    if (sx.length < n) { sx = new Float32Array(n * 2); sy = new Float32Array(n * 2); }
    const t = Math.min(1, (now - wm.arrived) / wm.tickMs);
    for (let i = 0; i < n; i++) {
      toScreen(wm.fromX[i] + (wm.toX[i] - wm.fromX[i]) * t, wm.fromY[i] + (wm.toY[i] - wm.fromY[i]) * t, pt);
      sx[i] = pt[0]; sy[i] = pt[1];
    }
    // Objects are written straight into a pixel buffer over the background, then put on
    // the canvas in one call: thousands of fillRect calls cost far more to rasterize.
    img32.set(bg32);
    const W = img.width, H = img.height, dpr = lay.dpr, sel = wm.selectedNode;
    // Players about their real size (32 units) when the map is large enough, 4-9 px.
    const player = Math.max(4, Math.min(9, 48 * lay.scale));
    for (const kind of [2, 3, 1, 0]) {
      const px = Math.max(2, Math.round(player * KIND_SCALE[kind] * dpr));
      const half = px / 2;
      const solid = kind === 2 ? ITEM_U32 : SOLID_U32;
      for (let i = 0; i < n; i++) {
        // Off the map (NaN): not drawn, and never the nearest to the pointer.
        if (Math.min(wm.kind[i], 3) !== kind || Number.isNaN(sx[i])) continue;
        const ci = wm.owner[i] % PALETTE.length;
        const v = sel === null || wm.owner[i] === sel ? solid[ci] : FADED_U32[ci];
        let x0 = Math.round(sx[i] * dpr - half), y0 = Math.round(sy[i] * dpr - half);
        let x1 = x0 + px, y1 = y0 + px;
        if (x0 < 0) x0 = 0;
        if (y0 < 0) y0 = 0;
        if (x1 > W) x1 = W;
        if (y1 > H) y1 = H;
        for (let y = y0; y < y1; y++) img32.fill(v, y * W + x0, y * W + x1);
      }
    }
    g.putImageData(img, 0, 0);
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    g.globalAlpha = 1;
    // Ownership changes: a shrinking ring in the new owner's colour.
    if (wm.flashes.size) {
      g.lineWidth = 2;
      for (const [id, t0] of wm.flashes) {
        const age = now - t0;
        const i = indexOf(id);
        if (age > FLASH_MS || i < 0) { wm.flashes.delete(id); continue; }
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
      const i = indexOf(f.id);
      if (f.aoi) {
        g.setLineDash([5, 3]);
        g.lineWidth = 1.5;
        g.strokeStyle = colour(f.owner);
        g.fillStyle = 'rgba(0,0,0,0.05)';
        eachPiece(f.aoi, (x, y, w, h) => { g.fillRect(x, y, w, h); g.strokeRect(x, y, w, h); });
        g.setLineDash([]);
      }
      if (i >= 0) {
        g.lineWidth = 2;
        g.strokeStyle = '#000';
        g.beginPath(); g.arc(sx[i], sy[i], 6, 0, 6.2832); g.stroke();
      }
    }
    drawMe(g);
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
    if (best < 0) {
      if (!el.tooltip.hidden) el.tooltip.hidden = true;
      return;
    }
    const kindName = (wm.kinds[wm.kind[best]] || { name: 'object' }).name;
    const [wx, wy] = [wm.toX[best], wm.toY[best]];
    const f = wm.focus && wm.focus.id === id ? wm.focus : null;
    el.tooltip.textContent = kindName + ' ' + idText(id) + ' on node ' + wm.owner[best] + ' at (' + Math.round(wx) + ', ' + Math.round(wy) + ')' +
      (f && f.aoi ? ' — interest ' + Math.round(f.aoi.max_x - f.aoi.min_x) + ' × ' + Math.round(f.aoi.max_y - f.aoi.min_y) : '');
    el.tooltip.hidden = false;
    el.tooltip.style.left = Math.min(mouse[0] + 14, el.map.clientWidth - el.tooltip.offsetWidth) + 'px';
    el.tooltip.style.top = (mouse[1] + 16) + 'px';
  }
  // ---------------------------------------------------------------- playing (Join)
  // The dashboard runs a real client session for this page (crates/dashboard/src/play.rs);
  // the page sends the direction held and highlights its avatar on the map.
  let playSocket = null, held = { dx: 0, dy: 0 };
  const pressed = new Set();
  const KEYS = {
    ArrowLeft: [-1, 0], ArrowRight: [1, 0], ArrowUp: [0, -1], ArrowDown: [0, 1],
    a: [-1, 0], d: [1, 0], w: [0, -1], s: [0, 1],
  };
  function sendKeys() {
    let dx = 0, dy = 0;
    for (const k of pressed) { dx += KEYS[k][0]; dy += KEYS[k][1]; }
    dx = Math.max(-1, Math.min(1, dx)); dy = Math.max(-1, Math.min(1, dy));
    if (dx === held.dx && dy === held.dy) return;
    held = { dx, dy };
    if (playSocket && playSocket.readyState === 1) playSocket.send(JSON.stringify({ type: 'keys', dx, dy }));
  }
  window.addEventListener('keydown', (e) => {
    if (!playSocket || !(e.key in KEYS)) return;
    e.preventDefault();
    pressed.add(e.key);
    sendKeys();
  });
  window.addEventListener('keyup', (e) => {
    if (!(e.key in KEYS)) return;
    pressed.delete(e.key);
    sendKeys();
  });
  window.addEventListener('blur', () => { pressed.clear(); sendKeys(); });
  function playText() {
    const p = wm.play;
    if (!p) return '';
    if (p.state === 'connecting') return 'joining…';
    if (p.state === 'ended') return 'left: ' + p.reason;
    return 'you: node ' + p.node + (p.x === null ? '' : ' at (' + Math.round(p.x) + ', ' + Math.round(p.y) + ')') +
      (p.handoffs.length ? ', ' + p.handoffs.length + ' hand-off' + (p.handoffs.length > 1 ? 's' : '') : '') + ' — arrow keys to move';
  }
  function onPlay(m) {
    const p = wm.play;
    if (!p) return;
    if (m.type === 'joined') Object.assign(p, { state: 'playing', node: m.node, player: m.player, avatar: m.avatar, key: Number(m.key) });
    else if (m.type === 'at') Object.assign(p, { node: m.node, x: m.x, y: m.y, seen: m.seen, updates: p.updates + 1 });
    else if (m.type === 'handoff') { p.handoffs.push({ from: m.from, to: m.to }); p.node = m.to; }
    else if (m.type === 'ended') Object.assign(p, { state: 'ended', reason: m.reason });
    else if (m.type === 'error') p.errors.push(m.error);
    setText(el.playStatus, playText());
  }
  function join() {
    if (playSocket) { leave(); return; }
    const ws = new WebSocket((location.protocol === 'https:' ? 'wss://' : 'ws://') + location.host + '/play');
    playSocket = ws;
    wm.play = { state: 'connecting', node: null, key: null, x: null, y: null, seen: 0, updates: 0, handoffs: [], errors: [], reason: null };
    held = { dx: 0, dy: 0 };
    el.join.textContent = 'Leave';
    setText(el.playStatus, playText());
    ws.onmessage = (ev) => {
      try { onPlay(JSON.parse(ev.data)); } catch (e) { wm.errors.push(String(e)); console.error('dashboard: bad play message:', e); }
    };
    ws.onclose = () => {
      if (playSocket !== ws) return;
      playSocket = null;
      if (wm.play && wm.play.state !== 'ended') Object.assign(wm.play, { state: 'ended', reason: 'connection closed' });
      el.join.textContent = 'Join';
      setText(el.playStatus, playText());
    };
  }
  function leave() {
    if (playSocket && playSocket.readyState === 1) playSocket.send(JSON.stringify({ type: 'leave' }));
    if (playSocket) playSocket.close();
  }
  el.join.addEventListener('click', () => { join(); el.join.blur(); });
  fetch('/api/play').then((r) => r.json()).then((a) => {
    wm.playAbout = a;
    el.join.disabled = !a.available;
    el.join.title = a.about;
  }).catch((e) => { el.join.title = 'cannot ask the server: ' + e; });

  // Draws the page's own avatar: a ring in its owner's colour and a label.
  function drawMe(g) {
    const p = wm.play;
    if (!p || p.key === null || p.state !== 'playing') return;
    const i = indexOf(p.key);
    if (i < 0) return;
    const c = colour(wm.owner[i]);
    g.lineWidth = 3;
    g.strokeStyle = '#000';
    g.beginPath(); g.arc(sx[i], sy[i], 11, 0, 6.2832); g.stroke();
    g.strokeStyle = c;
    g.beginPath(); g.arc(sx[i], sy[i], 8, 0, 6.2832); g.stroke();
    g.font = 'bold 12px "DejaVu Sans", sans-serif';
    g.fillStyle = '#000';
    g.fillText('you (node ' + wm.owner[i] + ')', sx[i] + 13, sy[i] - 9);
  }

  // Where object i is drawn, in viewport coordinates (for tests and tools; NaN for an
  // object past the map's edge, which is not drawn).
  wm.viewportOf = (i) => {
    const r = el.map.getBoundingClientRect();
    return [r.left + sx[i], r.top + sy[i]];
  };
  // Where world point (x, y) is drawn on the map canvas, in CSS pixels, with the row it
  // falls in; null off the map (for tests and tools).
  wm.screenOf = (x, y) => {
    if ((layoutDirty && !layout()) || !toScreen(x, y, pt)) return null;
    return { x: pt[0], y: pt[1], row: Math.floor((pt[1] - lay.oy) / lay.pitch), rows: lay.rows, ox: lay.ox, oy: lay.oy, pitch: lay.pitch, w: lay.seg * lay.scale, h: (wm.world.bounds.max_y - wm.world.bounds.min_y) * lay.scale };
  };
  window.addEventListener('resize', () => { layoutDirty = true; drawAssignment(); drawCharts(); });

  // A canvas's 2-D context, its backing store resized only when its box changed (resizing
  // reallocates it), scaled to CSS pixels.
  function sized(c) {
    const dpr = window.devicePixelRatio || 1;
    const W = Math.round(c.clientWidth * dpr), H = Math.round(c.clientHeight * dpr);
    if (c.width !== W || c.height !== H) { c.width = W; c.height = H; }
    const g = c.getContext('2d');
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    return g;
  }

  // ---------------------------------------------------------------- assignment panel
  function drawAssignment() {
    const c = el.assignment, w = c.clientWidth, h = c.clientHeight;
    if (!w) return;
    const g = sized(c);
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
    // Capacity (real nodes with a player port): a black tick at the players' connected
    // share of the node's capacity, on a scale of its own (the bar's full height).
    const withCap = nodes.filter((n) => n.capacity !== null && n.capacity > 0);
    for (let k = 0; k < nodes.length; k++) {
      const n = nodes[k];
      if (n.capacity === null || !(n.capacity > 0)) continue;
      const x = left + k * bw, y = top + ph - Math.min(1, n.sessions / n.capacity) * ph;
      g.fillStyle = '#000';
      g.fillRect(x, y - 1, Math.max(1, bw - (bw > 3 ? 1 : 0)), 2);
    }
    const p = nodes.map((n) => n.players);
    let cap = ' — capacity: not reported';
    if (withCap.length) {
      const s = withCap.reduce((a, n) => a + n.sessions, 0), c = withCap.reduce((a, n) => a + n.capacity, 0);
      cap = ' — sessions ' + s + '/' + c + ' of capacity';
    }
    wm.capacityText = cap;
    g.fillStyle = '#333';
    g.fillText('players per node: min ' + Math.min(...p) + ', mean ' + (p.reduce((a, b) => a + b, 0) / p.length).toFixed(1) + ', max ' + Math.max(...p) + cap, left, h - 2);
  }

  // ---------------------------------------------------------------- charts
  function chart(canvas, series, opts) {
    const w = canvas.clientWidth, h = canvas.clientHeight;
    if (!w || !h) return;
    const g = sized(canvas);
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
    // Series with their own scale (counts beside large totals) get a right-hand axis.
    const maxOf = (s) => { let m = 0; for (const p of pts) { const v = s.get(p); if (v !== null && v > m) m = v; } return niceCeil(m || 1); };
    let ymax = 0;
    for (const s of series) if (!s.own) ymax = Math.max(ymax, maxOf(s));
    ymax = ymax || 1;
    g.strokeStyle = '#e6e6e6'; g.fillStyle = '#666'; g.lineWidth = 1;
    for (let k = 0; k <= 4; k++) {
      const y = T + ph - (k / 4) * ph;
      g.beginPath(); g.moveTo(L, y); g.lineTo(L + pw, y); g.stroke();
      g.fillText(fmt(ymax * k / 4), 2, y + 3);
    }
    g.fillText(t0.toFixed(0) + ' s', L, h - 4);
    const end = t1.toFixed(0) + ' s';
    g.fillText(end, L + pw - g.measureText(end).width, h - 4);
    const X = (t) => L + ((t - t0) / (t1 - t0)) * pw;
    let lx = L + 2;
    for (const s of series) {
      const top = s.own ? maxOf(s) : ymax;
      const Y = (v) => T + ph - (v / top) * ph;
      g.strokeStyle = g.fillStyle = s.colour;
      if (s.own) {
        const label = fmt(top);
        g.fillText(label, L + pw - g.measureText(label).width - 2, T + 9);
      }
      if (s.bars) {
        for (const p of pts) { const v = s.get(p); if (v) g.fillRect(X(p.t) - 1.5, Y(v), 3, T + ph - Y(v)); }
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
      { name: 'ownership changes (right scale)', colour: '#F38400', get: (p) => p.moves, bars: true, own: true },
    ], { none: '' });
  }

  // ---------------------------------------------------------------- animation loop
  let fpsCount = 0, fpsStart = performance.now(), drawSum = 0, drawMax = 0;
  let msgSum = 0, panelSum = 0;
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
      // Per second: frames, map drawing time per frame, and the time spent applying
      // messages and updating the panels (tables, charts) in that second.
      const p = {
        fps, drawMsMean: drawSum / fpsCount, drawMsMax: drawMax, objects: wm.n,
        msgMsPerS: msgSum, panelMsPerS: panelSum,
      };
      wm.perf = { ...p, history: wm.perf.history.concat([p]).slice(-120) };
      msgSum = 0; panelSum = 0;
      el.fps.textContent = fps.toFixed(0);
      fpsCount = 0; fpsStart = now; drawSum = 0; drawMax = 0;
    }
    requestAnimationFrame(tick);
  }
  requestAnimationFrame(tick);
  connect();
})();
