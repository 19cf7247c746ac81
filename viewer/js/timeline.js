/*
 * timeline.js — the canvas timeline: one group of lanes per rank, overlays, flows,
 * counters, pan/zoom, selection and search.
 *
 * How it works: the view is a time window [t0, t1] (µs) and a vertical scroll
 * offset. layout() turns the model's groups into a list of lanes (group header,
 * one lane per packed row of each track, counter lanes) with y positions; render()
 * draws only lanes in view. Each row is drawn with level-of-detail: binary search
 * to the first visible slice, then walk; a slice narrower than a pixel is drawn as
 * one pixel column and the walk jumps (binary search again) to the first slice
 * starting in the next pixel, so a frame costs O(rows × pixels × log n) whatever
 * the number of slices. Adjacent same-coloured columns merge into one rectangle.
 * Host ranges are coloured by name, device ops by category; the all-to-all phases of
 * expert parallelism (SS.CAT 7-9) have colours of their own and a legend entry.
 * Overlays: the rank's derived slices (exposed comm, idle, bubble) are also drawn as
 * bands across the rank's lanes, merged into pixel runs (coverRuns) and painted in
 * opaque tints under the slices (cheap to rasterize without a GPU); the critical path's pieces
 * on a rank (its `critical path` track) as a red bar over the top of the rank's lanes, above
 * the slices. Flows: arrows from launch to
 * kernel for the selected slice, and for all flows in view when enabled.
 * Input: drag pans, wheel scrolls (ctrl/⌘+wheel zooms, shift+wheel pans), W/S zoom,
 * A/D pan, F zooms to the selection, shift+drag selects a time range, click selects.
 */
'use strict';

var SS = window.SS || (window.SS = {});

SS.COLORS = {
  1: '#4e79a7', 2: '#e15759', 3: '#59a14f', 4: '#8cd17d', 0: '#9d9d9d',
  7: '#b8329e', 8: '#17becf', 9: '#bcbd22',      // all-to-all, moe.dispatch, moe.combine
  exposed: '#ff7f0e', idle: '#9aa0a6', bubble: '#b07aa1', critical: '#d62728'
};
SS.OVERLAY_RGBA = { exposed: 'rgba(255,127,14,0.22)', idle: 'rgba(120,120,120,0.16)',
                    bubble: 'rgba(176,122,161,0.25)' };
/* The same colours blended over white: overlays are drawn opaque, under the slices
 * (large translucent fills are the most expensive thing to rasterize in software). */
SS.OVERLAY_BG = { idle: '#e9e9e9', exposed: '#ffe3ca', bubble: '#ebdee8' };
SS.OVERLAY_ORDER = ['idle', 'exposed', 'bubble'];
/* Legend entries of the categories drawn in a colour of their own (the toolbar shows
 * those present in the trace): expert parallelism's all-to-all phases. */
SS.PHASE_LEGEND = [
  { cat: 7, name: 'all-to-all (group ep)' },
  { cat: 8, name: 'moe.dispatch' },
  { cat: 9, name: 'moe.combine' }
];

SS.hashColor = function (s) {
  var h = 0;
  for (var k = 0; k < s.length; k++) h = (h * 31 + s.charCodeAt(k)) | 0;
  var hue = ((h % 360) + 360) % 360;
  return 'hsl(' + hue + ',45%,62%)';
};

SS.formatTime = function (us) {
  var a = Math.abs(us);
  if (a >= 1e6) return (us / 1e6).toFixed(3) + ' s';
  if (a >= 1e3) return (us / 1e3).toFixed(3) + ' ms';
  if (a >= 1) return us.toFixed(3) + ' µs';
  return (us * 1e3).toFixed(0) + ' ns';
};

SS.Timeline = function (canvas, model, hooks) {
  this.canvas = canvas;
  this.ctx = canvas.getContext('2d', { alpha: false });
  this.model = model;
  this.hooks = hooks || {};
  this.labelW = 230;
  this.axisH = 24;
  this.rowH = 18;
  this.headerH = 20;
  this.counterH = 32;
  this.scrollY = 0;
  this.t0 = model.minTs;
  this.t1 = model.maxTs;
  this.selected = -1;
  this.range = null;          // {a, b} time range selected with shift+drag
  this.overlays = { exposed: true, idle: true, bubble: true, critical: true };
  this.showFlows = false;
  this.lastFrameMs = 0;
  this.dirty = true;
  this.nameColor = new Map();
  this.prepareOverlays();
  this.layout();
  this.bind();
  this.resize();
};

SS.Timeline.prototype.prepareOverlays = function () {
  var m = this.model;
  this.overlayCount = { exposed: 0, idle: 0, bubble: 0, critical: 0 };
  for (var gi = 0; gi < m.groupList.length; gi++) {
    var g = m.groupList[gi];
    g.overlayTracks = {};
    for (var k = 0; k < g.tracks.length; k++) {
      var t = g.tracks[k];
      if (!t.hasDerived || !t.rows.length) continue;
      var first = t.rows[0][0];
      var kind = t.name === 'critical path' ? 'critical' : SS.DERIVED_KINDS[m.names[m.nameId[first]]];
      if (kind) {
        g.overlayTracks[kind] = t;
        this.overlayCount[kind] += t.count;
      }
    }
  }
};

SS.Timeline.prototype.layout = function () {
  var lanes = [], y = 0, m = this.model;
  for (var gi = 0; gi < m.groupList.length; gi++) {
    var g = m.groupList[gi];
    var header = { kind: 'group', group: g, y: y, h: this.headerH };
    lanes.push(header);
    y += this.headerH;
    g.deviceY0 = y;
    if (!g.collapsed) {
      for (var k = 0; k < g.tracks.length; k++) {
        var t = g.tracks[k];
        t.y = y;
        for (var r = 0; r < t.rows.length; r++) {
          lanes.push({ kind: 'row', group: g, track: t, row: r, y: y, h: this.rowH });
          y += this.rowH;
        }
      }
      for (k = 0; k < g.counters.length; k++) {
        lanes.push({ kind: 'counter', group: g, counter: g.counters[k], y: y, h: this.counterH });
        y += this.counterH;
      }
    }
    g.y1 = y;
    y += 4;
  }
  this.lanes = lanes;
  this.contentH = y;
  this.dirty = true;
};

SS.Timeline.prototype.resize = function () {
  var dpr = window.devicePixelRatio || 1, c = this.canvas, rect = c.parentNode.getBoundingClientRect();
  this.w = Math.max(300, Math.floor(rect.width));
  this.h = Math.max(200, Math.floor(rect.height));
  c.width = this.w * dpr; c.height = this.h * dpr;
  c.style.width = this.w + 'px'; c.style.height = this.h + 'px';
  this.dpr = dpr;
  this.request();
};

SS.Timeline.prototype.request = function () {
  var self = this;
  this.dirty = true;
  if (this.pending) return;
  this.pending = true;
  requestAnimationFrame(function () { self.pending = false; if (self.dirty) self.render(); });
};

SS.Timeline.prototype.xOf = function (t) {
  return this.labelW + (t - this.t0) / (this.t1 - this.t0) * (this.w - this.labelW);
};
SS.Timeline.prototype.tOf = function (x) {
  return this.t0 + (x - this.labelW) / (this.w - this.labelW) * (this.t1 - this.t0);
};

SS.Timeline.prototype.colorOf = function (i) {
  var m = this.model, c = m.cat[i];
  if (c === SS.CAT.host || c === SS.CAT.other) {
    var id = m.nameId[i], col = this.nameColor.get(id);
    if (!col) { col = SS.hashColor(m.names[id]); this.nameColor.set(id, col); }
    return col;
  }
  if (c === SS.CAT.derived) return SS.COLORS[SS.DERIVED_KINDS[m.names[m.nameId[i]]]] || SS.COLORS[0];
  return SS.COLORS[c];
};

SS.Timeline.prototype.render = function () {
  var started = performance.now();
  var ctx = this.ctx, m = this.model, w = this.w, h = this.h;
  ctx.setTransform(this.dpr, 0, 0, this.dpr, 0, 0);
  ctx.fillStyle = '#ffffff';
  ctx.fillRect(0, 0, w, h);
  ctx.font = '11px system-ui, sans-serif';
  ctx.textBaseline = 'middle';
  var top = this.axisH, yOff = top - this.scrollY;
  ctx.save();
  ctx.beginPath(); ctx.rect(0, top, w, h - top); ctx.clip();
  var drawn = 0, k, L, y;
  // backgrounds, then the overlay bands, then the slices on top of them
  for (k = 0; k < this.lanes.length; k++) {
    L = this.lanes[k]; y = L.y + yOff;
    if (y + L.h < top || y > h) continue;
    if (L.kind === 'group') this.drawGroupHeader(L, y);
    else if (L.kind === 'row') this.drawRowBackground(L, y);
  }
  this.drawOverlays(yOff, top);
  for (k = 0; k < this.lanes.length; k++) {
    L = this.lanes[k]; y = L.y + yOff;
    if (y + L.h < top || y > h) continue;
    if (L.kind === 'row') drawn += this.drawRow(L, y);
    else if (L.kind === 'counter') this.drawCounter(L, y);
  }
  this.drawCriticalPath(yOff, top);
  // arrows stay in the plot: never over the label column (the next rank's name and lanes)
  ctx.save();
  ctx.beginPath(); ctx.rect(this.labelW, top, w - this.labelW, h - top); ctx.clip();
  this.drawFlows(yOff);
  ctx.restore();
  this.drawSelection(yOff, top);
  ctx.restore();
  this.drawAxis();
  this.dirty = false;
  this.lastFrameMs = performance.now() - started;
  this.lastDrawn = drawn;
  if (this.hooks.onRender) this.hooks.onRender(this);
};

SS.Timeline.prototype.drawGroupHeader = function (L, y) {
  var ctx = this.ctx;
  ctx.fillStyle = '#e8eef7';
  ctx.fillRect(0, y, this.w, L.h);
  ctx.fillStyle = '#1d2b3a';
  ctx.font = 'bold 12px system-ui, sans-serif';
  ctx.fillText((L.group.collapsed ? '▸ ' : '▾ ') + L.group.name, 6, y + L.h / 2);
  ctx.font = '11px system-ui, sans-serif';
};

SS.Timeline.prototype.drawRowBackground = function (L, y) {
  var ctx = this.ctx, t = L.track;
  if (L.row === 0) {
    ctx.fillStyle = '#f7f7f7';
    ctx.fillRect(0, y, this.labelW - 2, this.rowH * t.rows.length);
    ctx.fillStyle = '#333';
    var label = t.name;
    if (label.length > 34) label = label.slice(0, 33) + '…';
    ctx.fillText(label, 14, y + this.rowH / 2);
  }
  if (L.row % 2) {
    ctx.fillStyle = '#fbfbfb';
    ctx.fillRect(this.labelW, y, this.w - this.labelW, this.rowH);
  }
};

SS.Timeline.prototype.drawRow = function (L, y) {
  var ctx = this.ctx, m = this.model, t = L.track, row = t.rows[L.row];
  var ts = m.ts, dur = m.dur;
  var x0 = this.labelW, wpx = this.w - this.labelW, t0 = this.t0, scale = wpx / (this.t1 - this.t0);
  var k = m.firstEndingAfter(row, t0), n = row.length, count = 0;
  var runX0 = -1, runX1 = -1, runColor = null, hgt = this.rowH - 2;
  var flush = function () {
    if (runColor !== null) { ctx.fillStyle = runColor; ctx.fillRect(runX0, y + 1, runX1 - runX0, hgt); }
    runColor = null;
  };
  while (k < n) {
    var i = row[k], s = ts[i];
    if (s > this.t1) break;
    var xa = x0 + (s - t0) * scale, xb = xa + dur[i] * scale;
    if (xa < x0) xa = x0;
    var col = this.colorOf(i);
    count++;
    if (xb - xa < 1) {
      var px = Math.floor(xa);
      if (runColor === col && px <= runX1) { if (px + 1 > runX1) runX1 = px + 1; }
      else { flush(); runColor = col; runX0 = px; runX1 = px + 1; }
      // jump over the slices that start in this pixel column; slices of a row never
      // overlap, so all of them but the last end inside it too: the last one may be
      // wide (a long collective right after a burst of tiny kernels) and is drawn
      var next = m.firstStartingAt(row, t0 + (px + 1 - x0) / scale);
      k = next > k + 1 ? next - 1 : k + 1;
      continue;
    }
    flush();
    if (xb > x0 + wpx) xb = x0 + wpx;
    ctx.fillStyle = col;
    ctx.fillRect(xa, y + 1, Math.max(1, xb - xa - (xb - xa > 3 ? 0.5 : 0)), hgt);
    if (xb - xa > 28) {
      var nm = m.names[m.nameId[i]], maxc = Math.floor((xb - xa - 6) / 6);
      if (maxc > 2) {
        ctx.fillStyle = '#fff';
        ctx.fillText(nm.length > maxc ? nm.slice(0, maxc - 1) + '…' : nm, xa + 3, y + this.rowH / 2);
      }
    }
    k++;
  }
  flush();
  return count;
};

SS.Timeline.prototype.drawCounter = function (L, y) {
  var ctx = this.ctx, c = L.counter;
  ctx.fillStyle = '#f7f7f7';
  ctx.fillRect(0, y, this.labelW - 2, L.h);
  ctx.fillStyle = '#333';
  ctx.fillText(c.name + ' (max ' + SS.formatNumber(c.max) + ')', 14, y + L.h / 2);
  var n = c.ts.length;
  if (!n) return;
  var lo = 0, hi = n;
  while (lo < hi) { var mid = (lo + hi) >> 1; if (c.ts[mid] < this.t0) lo = mid + 1; else hi = mid; }
  if (lo > 0) lo--;
  ctx.fillStyle = 'rgba(78,121,167,0.55)';
  var base = y + L.h - 2, sc = c.max > 0 ? (L.h - 4) / c.max : 0;
  for (var k = lo; k < n; k++) {
    var xa = Math.max(this.labelW, this.xOf(c.ts[k]));
    var xb = k + 1 < n ? this.xOf(c.ts[k + 1]) : this.w;
    if (xa > this.w) break;
    xb = Math.min(xb, this.w);
    if (xb - xa < 0.5) continue;
    var hh = c.val[k] * sc;
    ctx.fillRect(xa, base - hh, xb - xa, hh);
  }
};

/*
 * The pixel runs [x0, x1, x0, x1, ...] covered by the slices of one row in view:
 * touching or overlapping slices merge, and slices narrower than a pixel mark their
 * pixel column and the walk jumps to the next column (binary search), so the cost
 * is bounded by the canvas width, not by the number of slices.
 */
SS.Timeline.prototype.coverRuns = function (row) {
  var m = this.model, ts = m.ts, dur = m.dur, out = this.runBuf || (this.runBuf = []);
  out.length = 0;
  var x0 = this.labelW, wpx = this.w - this.labelW, t0 = this.t0, t1 = this.t1, scale = wpx / (t1 - t0);
  var k = m.firstEndingAfter(row, t0), n = row.length, ra = -1, rb = -1;
  while (k < n) {
    var i = row[k], s = ts[i];
    if (s > t1) break;
    var xa = x0 + (s - t0) * scale, xb = xa + dur[i] * scale;
    if (xa < x0) xa = x0;
    if (xb > x0 + wpx) xb = x0 + wpx;
    xa = Math.floor(xa); xb = Math.max(xa + 1, Math.round(xb));
    if (xb - xa <= 1) {
      var next = m.firstStartingAt(row, t0 + (xb - x0) / scale);
      k = next > k + 1 ? next - 1 : k + 1; /* the column's last slice may be wide: see drawRow */
    } else {
      k++;
    }
    if (ra >= 0 && xa <= rb) { if (xb > rb) rb = xb; }
    else { if (ra >= 0) out.push(ra, rb); ra = xa; rb = xb; }
  }
  if (ra >= 0) out.push(ra, rb);
  return out;
};

SS.Timeline.prototype.drawOverlays = function (yOff, top) {
  var ctx = this.ctx, m = this.model, groups = m.groupList;
  for (var gi = 0; gi < groups.length; gi++) {
    var g = groups[gi];
    if (g.collapsed) continue;
    var ya = Math.max(top, g.deviceY0 + yOff), yb = Math.min(this.h, g.y1 + yOff);
    if (yb <= ya) continue;
    for (var o = 0; o < SS.OVERLAY_ORDER.length; o++) {
      var kind = SS.OVERLAY_ORDER[o];
      if (!this.overlays[kind] || !g.overlayTracks[kind]) continue;
      var t = g.overlayTracks[kind], runs = this.coverRuns(t.rows[0]);
      ctx.fillStyle = SS.OVERLAY_BG[kind];
      for (var k = 0; k < runs.length; k += 2) ctx.fillRect(runs[k], ya, runs[k + 1] - runs[k], yb - ya);
    }
  }
};

/* Where each step's critical path runs on a rank: a bar over the top of its lanes. */
SS.Timeline.prototype.drawCriticalPath = function (yOff, top) {
  var ctx = this.ctx, groups = this.model.groupList;
  if (!this.overlays.critical) return;
  ctx.fillStyle = SS.COLORS.critical;
  for (var gi = 0; gi < groups.length; gi++) {
    var g = groups[gi], t = g.overlayTracks.critical;
    if (g.collapsed || !t) continue;
    var ya = g.deviceY0 + yOff;
    if (ya < top || ya > this.h) continue;
    var runs = this.coverRuns(t.rows[0]);
    for (var k = 0; k < runs.length; k += 2) ctx.fillRect(runs[k], ya, runs[k + 1] - runs[k], 3);
  }
};

SS.Timeline.prototype.flowPoint = function (end, yOff) {
  var t = this.model.tracks[end.track];
  if (t.y === undefined || this.model.groups.get(t.pid).collapsed) return null;
  var hit = this.model.sliceAt(t, end.ts, 0);
  var row = hit ? hit.row : 0;
  return { x: this.xOf(end.ts), y: t.y + yOff + row * this.rowH + this.rowH / 2 };
};

SS.Timeline.prototype.drawArrow = function (a, b) {
  var ctx = this.ctx;
  ctx.beginPath();
  ctx.moveTo(a.x, a.y);
  var mx = (a.x + b.x) / 2;
  ctx.bezierCurveTo(mx, a.y, mx, b.y, b.x, b.y);
  ctx.stroke();
  ctx.beginPath();
  ctx.moveTo(b.x, b.y); ctx.lineTo(b.x - 5, b.y - 3); ctx.lineTo(b.x - 5, b.y + 3); ctx.closePath();
  ctx.fill();
};

SS.Timeline.prototype.flowsOf = function (i) {
  var m = this.model, out = [], f = m.flows;
  if (i < 0) return out;
  var t = m.track[i], a = m.ts[i], b = a + m.dur[i];
  for (var k = 0; k < f.n; k++) {
    if ((f.fromTrack[k] === t && f.fromTs[k] >= a && f.fromTs[k] <= b) ||
        (f.toTrack[k] === t && f.toTs[k] >= a && f.toTs[k] <= b)) out.push(m.flow(k));
  }
  return out;
};

SS.Timeline.prototype.drawFlows = function (yOff) {
  var ctx = this.ctx, m = this.model, f = m.flows, list = [], k;
  if (this.showFlows && f.n) {
    var lo = 0, hi = f.n, margin = (this.t1 - this.t0) * 0.05;
    while (lo < hi) { var mid = (lo + hi) >> 1; if (f.fromTs[mid] < this.t0 - margin) lo = mid + 1; else hi = mid; }
    for (k = lo; k < f.n && f.fromTs[k] <= this.t1; k++) {
      list.push(k);
      if (list.length > 3000) break;
    }
  }
  ctx.strokeStyle = 'rgba(40,40,40,0.55)'; ctx.fillStyle = 'rgba(40,40,40,0.7)'; ctx.lineWidth = 1;
  if (list.length <= 3000) {
    for (k = 0; k < list.length; k++) {
      var fl = m.flow(list[k]), a = this.flowPoint(fl.from, yOff), b = this.flowPoint(fl.to, yOff);
      if (a && b) this.drawArrow(a, b);
    }
  }
  var sel = this.selectedFlows || [];
  ctx.strokeStyle = '#d62728'; ctx.fillStyle = '#d62728'; ctx.lineWidth = 2;
  for (k = 0; k < sel.length; k++) {
    var p = this.flowPoint(sel[k].from, yOff), q = this.flowPoint(sel[k].to, yOff);
    if (p && q) this.drawArrow(p, q);
  }
  ctx.lineWidth = 1;
};

SS.Timeline.prototype.drawSelection = function (yOff, top) {
  var ctx = this.ctx, m = this.model;
  if (this.range) {
    var xa = this.xOf(Math.min(this.range.a, this.range.b)), xb = this.xOf(Math.max(this.range.a, this.range.b));
    ctx.fillStyle = 'rgba(30,110,230,0.12)';
    ctx.fillRect(xa, top, xb - xa, this.h - top);
    ctx.strokeStyle = 'rgba(30,110,230,0.8)';
    ctx.strokeRect(xa, top, xb - xa, this.h - top);
  }
  var i = this.selected;
  if (i < 0) return;
  var t = m.tracks[m.track[i]];
  if (t.y === undefined || m.groups.get(t.pid).collapsed) return;
  var r = this.selectedRow;
  var y = t.y + yOff + r * this.rowH;
  var x0 = this.xOf(m.ts[i]), x1 = Math.max(x0 + 2, this.xOf(m.ts[i] + m.dur[i]));
  ctx.strokeStyle = '#000'; ctx.lineWidth = 2;
  ctx.strokeRect(x0, y + 0.5, x1 - x0, this.rowH - 1);
  ctx.lineWidth = 1;
};

SS.Timeline.prototype.drawAxis = function () {
  var ctx = this.ctx, w = this.w;
  ctx.fillStyle = '#f2f4f7';
  ctx.fillRect(0, 0, w, this.axisH);
  ctx.fillStyle = '#333';
  var span = this.t1 - this.t0, target = span / 10, p = Math.pow(10, Math.floor(Math.log10(target)));
  var step = p * (target / p >= 5 ? 5 : target / p >= 2 ? 2 : 1);
  var wpx = w - this.labelW, minTs = this.model.minTs;
  // ticks far enough apart for their labels (long when zoomed far into a long run): the
  // next 1-2-5 step until the widest label the ticks would carry fits between two of them.
  // Every label is measured: the ends' are not the widest where the unit changes inside
  // the view ("900.000 µs" is wider than "1.100 ms"), and those overlapped
  var t0 = this.t0, t1 = this.t1;
  var widestAt = function (st) {
    var w = 0, t = Math.ceil((t0 - minTs) / st) * st + minTs;
    for (var n = 0; t <= t1 && n < 100; t += st, n++) w = Math.max(w, ctx.measureText(SS.formatTime(t - minTs)).width);
    return w;
  };
  for (var guard = 0; guard < 60 && step / span * wpx < widestAt(step) + 12; guard++) {
    var e10 = Math.pow(10, Math.floor(Math.log10(step) + 1e-9)), mant = Math.round(step / e10);
    step = mant < 2 ? 2 * e10 : mant < 5 ? 5 * e10 : 10 * e10;
  }
  ctx.strokeStyle = '#c8ccd2';
  var spanText = 'span ' + SS.formatTime(span), spanEnd = 6 + ctx.measureText(spanText).width + 8;
  var first = Math.ceil((this.t0 - minTs) / step) * step + minTs;
  this.axisTicks = []; /* drawn tick labels (x, width): for tests */
  for (var t = first; t <= this.t1; t += step) {
    var x = Math.round(this.xOf(t)) + 0.5;
    if (x < Math.max(this.labelW, spanEnd)) continue; /* the label column holds the span */
    ctx.beginPath(); ctx.moveTo(x, this.axisH - 6); ctx.lineTo(x, this.axisH); ctx.stroke();
    var tickText = SS.formatTime(t - minTs);
    ctx.fillText(tickText, x + 3, 10);
    this.axisTicks.push({ x: x + 3, w: ctx.measureText(tickText).width });
  }
  ctx.fillText(spanText, 6, 10);
};

/* ---------------------------------------------------------------- navigation */

SS.Timeline.prototype.setWindow = function (a, b) {
  var minSpan = 0.001, full = this.model.maxTs - this.model.minTs;
  if (b - a < minSpan) { var c = (a + b) / 2; a = c - minSpan / 2; b = c + minSpan / 2; }
  var pad = full * 0.05;
  if (b - a > full + 2 * pad) { a = this.model.minTs - pad; b = this.model.maxTs + pad; }
  this.t0 = a; this.t1 = b;
  this.request();
  if (this.hooks.onView) this.hooks.onView(this);
};
SS.Timeline.prototype.zoom = function (factor, atX) {
  var t = this.tOf(atX === undefined ? (this.labelW + this.w) / 2 : atX);
  this.setWindow(t - (t - this.t0) * factor, t + (this.t1 - t) * factor);
};
SS.Timeline.prototype.pan = function (fraction) {
  var d = (this.t1 - this.t0) * fraction;
  this.setWindow(this.t0 + d, this.t1 + d);
};
SS.Timeline.prototype.scroll = function (dy) {
  var maxY = Math.max(0, this.contentH - (this.h - this.axisH) + 20);
  this.scrollY = Math.min(maxY, Math.max(0, this.scrollY + dy));
  this.request();
};
SS.Timeline.prototype.zoomToSelection = function () {
  if (this.range) {
    var a = Math.min(this.range.a, this.range.b), b = Math.max(this.range.a, this.range.b);
    this.range = null;
    this.setWindow(a, b);
  } else if (this.selected >= 0) {
    var m = this.model, s = m.ts[this.selected], d = Math.max(m.dur[this.selected], 0.01);
    this.setWindow(s - d * 0.15, s + d * 1.15);
  }
};
SS.Timeline.prototype.reveal = function (i) {
  var m = this.model, s = m.ts[i], e = s + m.dur[i], g = m.groups.get(m.tracks[m.track[i]].pid);
  if (g.collapsed) { g.collapsed = false; this.layout(); }
  if (s < this.t0 || e > this.t1 || (e - s) < (this.t1 - this.t0) / 2000) {
    var span = Math.max((e - s) * 8, Math.min(this.t1 - this.t0, (e - s) * 200), 1);
    this.setWindow(s + (e - s) / 2 - span / 2, s + (e - s) / 2 + span / 2);
  }
  var t = m.tracks[m.track[i]], y = t.y + this.selectedRow * this.rowH, viewH = this.h - this.axisH;
  if (y < this.scrollY || y > this.scrollY + viewH - this.rowH) this.scroll(y - this.scrollY - viewH / 3);
};

SS.Timeline.prototype.select = function (i, row) {
  this.selected = i;
  this.selectedRow = i >= 0 ? (row === undefined ? this.model.rowOf(i) : row) : 0;
  this.selectedFlows = this.flowsOf(i);
  this.request();
  if (this.hooks.onSelect) this.hooks.onSelect(i, this.selectedFlows);
};

SS.Timeline.prototype.laneAt = function (y) {
  var cy = y - this.axisH + this.scrollY;
  for (var k = 0; k < this.lanes.length; k++) {
    var L = this.lanes[k];
    if (cy >= L.y && cy < L.y + L.h) return L;
  }
  return null;
};

SS.Timeline.prototype.hit = function (x, y) {
  var L = this.laneAt(y);
  if (!L || L.kind !== 'row' || x < this.labelW) return { lane: L, slice: -1 };
  var slack = 3 * (this.t1 - this.t0) / (this.w - this.labelW);
  var t = this.tOf(x), m = this.model;
  var i = m.sliceInRow(L.track, L.row, t, 0);
  if (i < 0) i = m.sliceInRow(L.track, L.row, t, slack);
  return { lane: L, slice: i };
};

/* Canvas position (client coordinates) of a slice's middle, for tests and links. */
SS.Timeline.prototype.clientPointOf = function (i) {
  var m = this.model, t = m.tracks[m.track[i]], r = m.rowOf(i), rect = this.canvas.getBoundingClientRect();
  var xa = Math.max(this.labelW, this.xOf(m.ts[i])), xb = Math.min(this.w, this.xOf(m.ts[i] + m.dur[i]));
  return { x: rect.left + (xa + xb) / 2, y: rect.top + t.y - this.scrollY + this.axisH + r * this.rowH + this.rowH / 2 };
};

SS.Timeline.prototype.bind = function () {
  var self = this, c = this.canvas, drag = null;
  c.tabIndex = 0;
  c.addEventListener('mousedown', function (e) {
    c.focus();
    var r = c.getBoundingClientRect(), x = e.clientX - r.left, y = e.clientY - r.top;
    drag = { x: x, y: y, t0: self.t0, t1: self.t1, sy: self.scrollY, moved: false, shift: e.shiftKey };
    if (e.shiftKey && x > self.labelW) self.range = { a: self.tOf(x), b: self.tOf(x) };
  });
  window.addEventListener('mousemove', function (e) {
    if (!drag) return;
    var r = c.getBoundingClientRect(), x = e.clientX - r.left, y = e.clientY - r.top;
    if (Math.abs(x - drag.x) + Math.abs(y - drag.y) > 3) drag.moved = true;
    if (!drag.moved) return;
    if (drag.shift && self.range) { self.range.b = self.tOf(x); self.request(); return; }
    var dt = (x - drag.x) / (self.w - self.labelW) * (drag.t1 - drag.t0);
    self.t0 = drag.t0 - dt; self.t1 = drag.t1 - dt;
    self.scrollY = drag.sy; self.scroll(drag.y - y);
    if (self.hooks.onView) self.hooks.onView(self);
  });
  window.addEventListener('mouseup', function (e) {
    if (!drag) return;
    var d = drag; drag = null;
    if (d.moved) return;
    var r = c.getBoundingClientRect(), x = e.clientX - r.left, y = e.clientY - r.top;
    var h = self.hit(x, y);
    if (h.lane && h.lane.kind === 'group' && x < self.labelW + 200) {
      h.lane.group.collapsed = !h.lane.group.collapsed;
      self.layout(); self.request();
      return;
    }
    if (!d.shift) self.range = null;
    self.select(h.slice, h.lane && h.lane.kind === 'row' ? h.lane.row : 0);
  });
  c.addEventListener('dblclick', function () { self.zoomToSelection(); });
  c.addEventListener('wheel', function (e) {
    e.preventDefault();
    var r = c.getBoundingClientRect(), x = e.clientX - r.left;
    if (e.ctrlKey || e.metaKey) self.zoom(Math.pow(1.002, e.deltaY), x);
    else if (e.shiftKey || Math.abs(e.deltaX) > Math.abs(e.deltaY)) self.pan((e.deltaX || e.deltaY) / 800);
    else self.scroll(e.deltaY);
  }, { passive: false });
  c.addEventListener('mousemove', function (e) {
    if (drag) return;
    var r = c.getBoundingClientRect(), h = self.hit(e.clientX - r.left, e.clientY - r.top);
    if (self.hooks.onHover) self.hooks.onHover(h.slice, self.tOf(e.clientX - r.left));
  });
  window.addEventListener('resize', function () { self.resize(); });
};

/* Keyboard handling; called by the app for keys not typed into inputs. */
SS.Timeline.prototype.key = function (e) {
  var k = e.key.toLowerCase();
  if (k === 'w') this.zoom(0.8);
  else if (k === 's') this.zoom(1.25);
  else if (k === 'a') this.pan(-0.1);
  else if (k === 'd') this.pan(0.1);
  else if (k === 'f') this.zoomToSelection();
  else if (k === '0') this.setWindow(this.model.minTs, this.model.maxTs);
  else if (k === 'escape') { this.range = null; this.select(-1); }
  else return false;
  return true;
};

SS.formatNumber = function (v) {
  var a = Math.abs(v);
  if (a >= 1e12) return (v / 1e12).toFixed(2) + 'T';
  if (a >= 1e9) return (v / 1e9).toFixed(2) + 'G';
  if (a >= 1e6) return (v / 1e6).toFixed(2) + 'M';
  if (a >= 1e3) return (v / 1e3).toFixed(1) + 'k';
  return String(Math.round(v * 100) / 100);
};
