/*
 * heatmap.js — the Heatmap view: one cell per rank and step of a run of any number of ranks,
 * coloured by a chosen metric, from the heatmap file of `stepscope analyze --heatmap`
 * (docs/report-schema.md, "Heatmap file"): per rank and step the step time (the rank's step
 * span), exposed communication, idle and bubble, and who made the others wait. It is what
 * `stepscope view` shows of a run too large for a timeline (thousands of ranks), and a tab
 * beside the timeline otherwise.
 *
 * How it works: the cells are drawn into one canvas as an ImageData (never one DOM node per
 * cell: 16,384 ranks x steps draw in milliseconds). Rows are ranks, top to bottom in the file's
 * order; when there are more ranks than pixel rows, a pixel row shows the mean of the ranks it
 * covers (or, chosen in a menu, the highest: then a straggler is never averaged away), and
 * hovering names the rank with the highest value there. The colour scale runs from the lowest to
 * the highest value drawn (a legend gives both), so zoomed out it shows how groups of ranks
 * differ, zoomed in how ranks do. It opens on
 * the metric that varies most across the run (relative to its highest value: in a synchronous
 * run every rank's step takes the iteration period, and the exposed comm or idle tells them
 * apart); the menu picks another. The wheel
 * zooms the rows around the pointer, dragging pans them. A gutter at the left
 * marks the culprit verdict's rank and the culprit rows (red) and the top stragglers (orange);
 * the side panel lists them with the verdict. Clicking a cell selects its rank (again:
 * unselects), shift+drag selects a range of ranks; the panel then gives the command that opens
 * their timeline (`stepscope view RUN --ranks 12,40-43`), with a copy button.
 * window.stepscope.heatmap (app.js) exposes the view's state for tests and the bench.
 */
'use strict';

var SS = window.SS || (window.SS = {});

(function () {
  SS.HEATMAP_METRICS = [
    { key: 'step_time_ns', label: 'step time' },
    { key: 'exposed_comm_ns', label: 'exposed comm' },
    { key: 'idle_ns', label: 'idle' },
    { key: 'bubble_ns', label: 'bubble' }
  ];
  var GUTTER = 14, TOP = 16, MAX_ROW_PX = 24, STRAGGLERS_MARKED = 16;
  // viridis, five stops: low values dark purple, high values yellow
  var STOPS = [[68, 1, 84], [59, 82, 139], [33, 145, 140], [94, 201, 98], [253, 231, 37]];

  function rampColor(t) {
    t = Math.max(0, Math.min(1, t)) * (STOPS.length - 1);
    var i = Math.min(STOPS.length - 2, Math.floor(t)), f = t - i, a = STOPS[i], b = STOPS[i + 1];
    return [a[0] + (b[0] - a[0]) * f, a[1] + (b[1] - a[1]) * f, a[2] + (b[2] - a[2]) * f];
  }

  /* "0-3,7,9-10" for a set of rank numbers. */
  SS.ranksSpec = function (ranks) {
    var v = Array.from(new Set(ranks)).sort(function (a, b) { return a - b; }), out = [];
    for (var i = 0; i < v.length;) {
      var j = i;
      while (j + 1 < v.length && v[j + 1] === v[j] + 1) j++;
      out.push(j > i ? v[i] + '-' + v[j] : String(v[i]));
      i = j + 1;
    }
    return out.join(',');
  };

  /* Typed columns of the heatmap file: per metric a Float64Array, NaN where a rank lacks a step. */
  function columns(heat) {
    var out = {};
    SS.HEATMAP_METRICS.forEach(function (m) {
      var src = (heat.cells && heat.cells[m.key]) || [], a = new Float64Array(src.length);
      var lo = Infinity, hi = -Infinity;
      for (var i = 0; i < src.length; i++) {
        var v = src[i] === null || src[i] === undefined ? NaN : +src[i];
        a[i] = v;
        if (v === v) { if (v < lo) lo = v; if (v > hi) hi = v; }
      }
      out[m.key] = { values: a, lo: lo, hi: hi };
    });
    return out;
  }

  /* The marked ranks: rank -> 'culprit' or 'straggler' (with the reason, for the hover). */
  function marks(heat) {
    var m = new Map();
    (heat.stragglers || []).slice(0, STRAGGLERS_MARKED).forEach(function (s, i) {
      m.set(s.rank, { kind: 'straggler', why: 'straggler #' + (i + 1) + ': others waited ' + SS.formatNs(s.caused_wait_ns) });
    });
    (heat.culprits || []).forEach(function (c) {
      m.set(c.rank, { kind: 'culprit', why: 'culprit: late in ' + c.phase + ', others waited ' + SS.formatNs(c.caused_wait_ns) });
    });
    var v = heat.culprit_verdict;
    if (v && v.candidate && v.status === 'culprit') {
      m.set(v.candidate.rank, { kind: 'culprit', why: 'the culprit verdict: late in ' + (v.candidate.phase || '?') +
        ' in ' + v.candidate.steps_late + ' step(s), effect ' + SS.formatNs(v.candidate.effect_median_ns) + ' a step (median)' });
    }
    return m;
  }

  /* The metric whose values spread most, relative to its highest: (hi - lo) / hi. */
  function mostVaried(cols) {
    var best = SS.HEATMAP_METRICS[0].key, bs = -1;
    SS.HEATMAP_METRICS.forEach(function (m) {
      var c = cols[m.key], s = c.hi > 0 ? (c.hi - c.lo) / c.hi : -1;
      if (s > bs + 1e-9) { bs = s; best = m.key; }
    });
    return best;
  }

  function Heatmap(root, heat, opts) {
    var self = this;
    this.heat = heat;
    this.opts = opts || {};
    this.ranks = heat.ranks || [];
    this.steps = heat.steps || [];
    this.cols = columns(heat);
    this.marks = marks(heat);
    this.metric = mostVaried(this.cols);
    this.aggregate = 'mean';  // a zoomed-out pixel row: the mean of its ranks ('max': the highest)
    this.selected = new Set();
    this.row0 = 0;            // first row shown (fractional)
    this.rowsPerPx = 1;       // rows per pixel row (< 1: each rank gets several pixels)
    this.drawMs = 0;
    this.build(root);
    this.fit();
    window.addEventListener('resize', function () { if (!root.hidden) self.resize(); });
  }

  Heatmap.prototype.build = function (root) {
    var self = this, heat = this.heat;
    root.textContent = '';
    var select = SS.el('select', { id: 'heatmap-metric', title: 'the metric the cells are coloured by' },
      SS.HEATMAP_METRICS.map(function (m) { return SS.el('option', { value: m.key, text: m.label }); }));
    select.value = this.metric;
    select.addEventListener('change', function () { self.setMetric(select.value); });
    var aggSel = SS.el('select', { id: 'heatmap-aggregate', title: 'when a pixel row covers several ranks (zoomed out), its colour is' }, [
      SS.el('option', { value: 'mean', text: 'mean of the ranks in a row' }), SS.el('option', { value: 'max', text: 'highest of the ranks in a row' })]);
    aggSel.addEventListener('change', function () { self.aggregate = aggSel.value; self.render(); });
    var reset = SS.el('button', { id: 'heatmap-fit', text: 'All ranks', title: 'zoom out to every rank' });
    reset.addEventListener('click', function () { self.fit(); });
    this.legend = SS.el('span', { id: 'heatmap-legend', className: 'heatmap-legend' });
    var bar = SS.el('div', { className: 'toolbar' }, [
      'Colour by ', select, aggSel, reset, this.legend,
      SS.el('span', { id: 'heatmap-size', text: SS.formatNumber(this.ranks.length) + ' ranks × ' + this.steps.length + ' steps' }),
      SS.el('span', { className: 'help', text: 'wheel: zoom ranks · drag: pan · click: select a rank · shift+drag: select ranks' })]);
    root.appendChild(bar);
    if (this.opts.noTimeline) {
      root.appendChild(SS.el('div', { id: 'heatmap-no-timeline', className: 'heatmap-note' }, [
        SS.el('b', { text: 'No timeline: ' }),
        'this run is too large for one (or its export failed), so the page shows its ranks × steps heatmap and analysis. ',
        'Select a few ranks below and run the command it gives to open their timeline. ',
        SS.el('span', { className: 'note', text: '(' + this.opts.noTimeline + ')' })]));
    }
    this.canvas = SS.el('canvas', { id: 'heatmap-canvas' });
    this.wrap = SS.el('div', { id: 'heatmap-wrap' }, [this.canvas]);
    this.side = SS.el('aside', { id: 'heatmap-side' });
    root.appendChild(SS.el('div', { className: 'heatmap-split' }, [this.wrap, this.side]));
    this.hover = SS.el('div', { id: 'heatmap-hover' });
    root.appendChild(this.hover);
    this.ctx = this.canvas.getContext('2d');
    this.buildSide();
    this.bindMouse();
  };

  Heatmap.prototype.buildSide = function () {
    var self = this, heat = this.heat, side = this.side, run = heat.run || {};
    side.textContent = '';
    side.appendChild(SS.el('h3', { text: 'Analysis' }));
    var rows = [['ranks', SS.formatNumber(this.ranks.length) + (run.world ? ' of world ' + run.world : '')],
                ['steps', String(this.steps.length)],
                ['step time (median)', run.step_time_ns === null || run.step_time_ns === undefined ? 'none' : SS.formatNs(run.step_time_ns)]];
    if (run.schedule) rows.push(['pipeline', run.schedule.name + ', ' + run.schedule.stages + ' stages, ' + run.schedule.microbatches + ' micro-batches']);
    var v = heat.culprit_verdict;
    if (v) {
      var tied = (v.also || []).filter(function (x) { return x.tied; }).map(function (x) { return x.rank; });
      rows.push(['verdict', v.status + (v.candidate && v.status === 'culprit' ? ': rank ' + v.candidate.rank +
        (tied.length ? ', tied with ' + tied.join(', ') : '') +
        (v.also_beyond_noise > tied.length ? ' (' + (v.also_beyond_noise - tied.length) + ' more beyond noise)' : '') : '')]);
    }
    side.appendChild(SS.el('table', { className: 'kv', id: 'heatmap-analysis' }, rows.map(function (r) {
      return SS.el('tr', {}, [SS.el('th', { text: r[0] }), SS.el('td', { text: r[1] })]);
    })));
    function rankList(title, id, items) {
      side.appendChild(SS.el('h4', { text: title }));
      if (!items.length) { side.appendChild(SS.el('p', { className: 'note', id: id, text: 'none' })); return; }
      var ul = SS.el('ul', { id: id, className: 'heatmap-ranks' });
      items.forEach(function (it) {
        var a = SS.el('a', { href: '#', text: 'rank ' + it.rank, 'data-rank': String(it.rank), title: 'select this rank' });
        a.addEventListener('click', function (e) { e.preventDefault(); self.toggle(it.rank); self.reveal(it.rank); });
        ul.appendChild(SS.el('li', {}, [a, ' ' + it.text]));
      });
      side.appendChild(ul);
    }
    rankList('Culprits (beyond noise)', 'heatmap-culprits', (heat.culprits || []).map(function (c) {
      return { rank: c.rank, text: 'late in ' + c.phase + ', others waited ' + SS.formatNs(c.caused_wait_ns) + ' in ' + c.steps + ' step(s)' };
    }));
    rankList('Stragglers (top ' + STRAGGLERS_MARKED + ')', 'heatmap-stragglers', (heat.stragglers || []).slice(0, STRAGGLERS_MARKED).map(function (s) {
      return { rank: s.rank, text: 'others waited ' + SS.formatNs(s.caused_wait_ns) + ', last to arrive ' + s.arrived_last + '×' };
    }));
    side.appendChild(SS.el('h4', { text: 'Selected ranks' }));
    this.selText = SS.el('p', { id: 'heatmap-selection', className: 'note' });
    this.command = SS.el('input', { id: 'heatmap-command', type: 'text', readonly: 'readonly', size: '40' });
    var copy = SS.el('button', { id: 'heatmap-copy', text: 'Copy' });
    copy.addEventListener('click', function () { self.copyCommand(); });
    var clear = SS.el('button', { id: 'heatmap-clear', text: 'Clear' });
    clear.addEventListener('click', function () { self.selected.clear(); self.selectionChanged(); });
    side.appendChild(this.selText);
    side.appendChild(SS.el('div', { className: 'heatmap-command' }, [this.command, copy, clear]));
    side.appendChild(SS.el('p', { className: 'note', text: 'RUN is the run directory (' + (this.opts.runName || 'this run') +
      '). The command writes the export of those ranks only and opens their timeline.' }));
    this.selectionChanged();
  };

  Heatmap.prototype.selectionChanged = function () {
    var spec = SS.ranksSpec(Array.from(this.selected));
    this.selText.textContent = spec ? this.selected.size + ' rank(s): ' + spec : 'none: click a cell, or shift+drag over ranks';
    this.command.value = spec ? 'stepscope view ' + (this.opts.runName || 'RUN') + ' --ranks ' + spec : '';
    this.render();
  };

  Heatmap.prototype.copyCommand = function () {
    var text = this.command.value;
    if (!text) return;
    this.command.select();
    if (navigator.clipboard && window.isSecureContext) navigator.clipboard.writeText(text).catch(function () {});
    else if (document.execCommand) document.execCommand('copy');
  };

  Heatmap.prototype.toggle = function (rank) {
    if (this.selected.has(rank)) this.selected.delete(rank); else this.selected.add(rank);
    this.selectionChanged();
  };

  /* Plot geometry in CSS pixels. */
  Heatmap.prototype.plot = function () {
    return { x: GUTTER, y: TOP, w: Math.max(10, this.cssW - GUTTER), h: Math.max(10, this.cssH - TOP) };
  };

  Heatmap.prototype.resize = function () {
    var w = Math.max(200, this.wrap.clientWidth), h = Math.max(240, this.wrap.clientHeight);
    var dpr = window.devicePixelRatio || 1;
    this.cssW = w; this.cssH = h; this.dpr = dpr;
    this.canvas.style.width = w + 'px';
    this.canvas.style.height = h + 'px';
    this.canvas.width = Math.round(w * dpr);
    this.canvas.height = Math.round(h * dpr);
    this.clamp();
    this.render();
  };

  Heatmap.prototype.fit = function () {
    if (!this.cssW) { this.cssW = 1; this.resize(); }
    var p = this.plot();
    this.rowsPerPx = Math.max(this.ranks.length / p.h, 1 / MAX_ROW_PX);
    this.row0 = 0;
    this.render();
  };

  Heatmap.prototype.clamp = function () {
    var p = this.plot(), n = this.ranks.length;
    this.rowsPerPx = Math.min(Math.max(this.rowsPerPx, 1 / MAX_ROW_PX), Math.max(n / p.h, 1 / MAX_ROW_PX));
    this.row0 = Math.max(0, Math.min(this.row0, n - this.rowsPerPx * p.h));
  };

  /* The rows a pixel row y (CSS, in the plot) covers: [a, b). */
  Heatmap.prototype.rowsAt = function (y) {
    var a = Math.floor(this.row0 + y * this.rowsPerPx), b = Math.floor(this.row0 + (y + 1) * this.rowsPerPx);
    return [a, Math.min(this.ranks.length, Math.max(b, a + 1))];
  };

  /* The row of [a, b) with the highest value of the metric in column c (-1: none has one). */
  Heatmap.prototype.peakRow = function (a, b, c) {
    var vals = this.cols[this.metric].values, S = this.steps.length, best = -1, bv = -Infinity;
    for (var r = a; r < b; r++) {
      var v = vals[r * S + c];
      if (v === v && v > bv) { bv = v; best = r; }
    }
    return best;
  };

  Heatmap.prototype.setMetric = function (key) {
    this.metric = key;
    var sel = document.getElementById('heatmap-metric');
    if (sel && sel.value !== key) sel.value = key;
    this.render();
  };

  Heatmap.prototype.render = function () {
    if (!this.cssW || !this.ctx) return;
    var t0 = performance.now(), ctx = this.ctx, dpr = this.dpr, p = this.plot();
    var S = this.steps.length, n = this.ranks.length, col = this.cols[this.metric];
    var W = Math.max(1, Math.round(p.w * dpr)), H = Math.max(1, Math.round(p.h * dpr));
    ctx.setTransform(1, 0, 0, 1, 0, 0);
    ctx.fillStyle = '#fff';
    ctx.fillRect(0, 0, this.canvas.width, this.canvas.height);
    // each pixel row's value per column: the mean or the highest of the ranks it covers
    var agg = new Float64Array(H * S), lo = Infinity, hi = -Infinity, highest = this.aggregate === 'max';
    for (var y = 0; y < H; y++) {
      var rows = this.rowsAt(y / dpr);
      for (var c = 0; c < S; c++) {
        var sum = 0, cnt = 0, top = NaN;
        for (var r = rows[0]; r < rows[1] && r < n; r++) {
          var v = col.values[r * S + c];
          if (v !== v) continue;
          sum += v; cnt++;
          if (!(v <= top)) top = v;
        }
        var a = cnt ? (highest ? top : sum / cnt) : NaN;
        agg[y * S + c] = a;
        if (a === a) { if (a < lo) lo = a; if (a > hi) hi = a; }
      }
    }
    var img = ctx.createImageData(W, H), data = img.data, span = hi - lo;
    var colOf = new Int32Array(W);
    for (var x = 0; x < W; x++) colOf[x] = Math.min(S - 1, Math.floor(x / W * S));
    var rowColor = new Uint8ClampedArray(S * 4);
    for (y = 0; y < H; y++) {
      if (this.rowsAt(y / dpr)[0] >= n) break;
      for (c = 0; c < S; c++) {
        var av = agg[y * S + c], rgb;
        if (av !== av) rgb = [225, 228, 232];
        else rgb = rampColor(span > 0 ? (av - lo) / span : 0.5);
        rowColor[c * 4] = rgb[0]; rowColor[c * 4 + 1] = rgb[1]; rowColor[c * 4 + 2] = rgb[2];
      }
      var o = y * W * 4;
      for (x = 0; x < W; x++, o += 4) {
        var k = colOf[x] * 4;
        data[o] = rowColor[k]; data[o + 1] = rowColor[k + 1]; data[o + 2] = rowColor[k + 2]; data[o + 3] = 255;
      }
    }
    ctx.putImageData(img, Math.round(p.x * dpr), Math.round(p.y * dpr));
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    // column separators and step labels where there is room
    var cw = p.w / S;
    ctx.font = '10px system-ui, sans-serif';
    ctx.fillStyle = '#333';
    ctx.textBaseline = 'top';
    var every = Math.max(1, Math.ceil(40 / cw));
    for (c = 0; c < S; c += every) ctx.fillText('step ' + this.steps[c], p.x + c * cw + 2, 2);
    if (cw >= 6) {
      ctx.strokeStyle = 'rgba(255,255,255,0.6)';
      ctx.beginPath();
      for (c = 1; c < S; c++) { ctx.moveTo(p.x + c * cw + 0.5, p.y); ctx.lineTo(p.x + c * cw + 0.5, p.y + p.h); }
      ctx.stroke();
    }
    // the marks in the gutter and the selection at the right edge
    var self = this, index = this.rankIndex();
    function yOf(row) { return p.y + (row - self.row0) / self.rowsPerPx; }
    var hpx = Math.max(2, 1 / this.rowsPerPx);
    this.marks.forEach(function (m, rank) {
      var row = index.get(rank);
      if (row === undefined) return;
      var y = yOf(row);
      if (y + hpx < p.y || y > p.y + p.h) return;
      ctx.fillStyle = m.kind === 'culprit' ? '#d62728' : '#ff7f0e';
      ctx.beginPath();
      ctx.moveTo(1, y + hpx / 2 - 5); ctx.lineTo(GUTTER - 2, y + hpx / 2); ctx.lineTo(1, y + hpx / 2 + 5);
      ctx.fill();
    });
    ctx.fillStyle = 'rgba(31,119,180,0.9)';
    this.selected.forEach(function (rank) {
      var row = index.get(rank);
      if (row === undefined) return;
      var y = yOf(row);
      if (y + hpx < p.y || y > p.y + p.h) return;
      ctx.fillRect(p.x + p.w - 5, y, 5, hpx);
      ctx.strokeStyle = 'rgba(31,119,180,0.9)';
      if (hpx >= 4) ctx.strokeRect(p.x + 0.5, y + 0.5, p.w - 1, hpx - 1);
    });
    this.legend.textContent = '';
    if (hi >= lo) {
      var grad = SS.el('span', { className: 'heatmap-ramp' });
      grad.style.background = 'linear-gradient(to right,' + STOPS.map(function (s) { return 'rgb(' + s.join(',') + ')'; }).join(',') + ')';
      this.legend.appendChild(SS.el('span', { text: SS.formatNs(lo) + ' ' }));
      this.legend.appendChild(grad);
      this.legend.appendChild(SS.el('span', { text: ' ' + SS.formatNs(hi) }));
      this.legend.dataset.lo = String(lo);
      this.legend.dataset.hi = String(hi);
    } else {
      this.legend.textContent = 'no values';
    }
    this.drawMs = performance.now() - t0;
    this.drawn = (this.drawn || 0) + 1;
  };

  /* rank number -> row index (built once). */
  Heatmap.prototype.rankIndex = function () {
    if (!this.index) {
      this.index = new Map();
      for (var i = 0; i < this.ranks.length; i++) this.index.set(this.ranks[i], i);
    }
    return this.index;
  };

  /* Zooms so that the rank's row is in view (a few pixels high at least). */
  Heatmap.prototype.reveal = function (rank) {
    var row = this.rankIndex().get(rank), p = this.plot();
    if (row === undefined) return;
    if (this.rowsPerPx > 1 / 4) this.rowsPerPx = 1 / 4;
    this.row0 = row - this.rowsPerPx * p.h / 2;
    this.clamp();
    this.render();
  };

  /* What is under a CSS point of the canvas: {row, rows: [a, b), col} or null. */
  Heatmap.prototype.hit = function (cx, cy) {
    var p = this.plot();
    if (cx < p.x || cy < p.y || cx >= p.x + p.w || cy >= p.y + p.h) return null;
    var rows = this.rowsAt(cy - p.y), c = Math.min(this.steps.length - 1, Math.floor((cx - p.x) / p.w * this.steps.length));
    if (rows[0] >= this.ranks.length || c < 0) return null;
    var r = this.peakRow(rows[0], rows[1], c);
    return { row: r >= 0 ? r : rows[0], rows: rows, col: c };
  };

  /* The hover line of a hit: the rank (the peak of the rows it covers), the step, the four metrics. */
  Heatmap.prototype.describe = function (h) {
    var S = this.steps.length, self = this, rank = this.ranks[h.row];
    var parts = ['rank ' + rank + (h.rows[1] - h.rows[0] > 1 ? ' (highest ' + this.label() + ' of ranks ' + this.ranks[h.rows[0]] + '–' + this.ranks[h.rows[1] - 1] + ')' : ''),
                 'step ' + this.steps[h.col]];
    SS.HEATMAP_METRICS.forEach(function (m) {
      var v = self.cols[m.key].values[h.row * S + h.col];
      parts.push(m.label + ' ' + (v === v ? SS.formatNs(v) : 'none'));
    });
    var st = this.heat.pipeline_stage && this.heat.pipeline_stage[h.row];
    if (st !== null && st !== undefined) parts.push('stage ' + st);
    var mark = this.marks.get(rank);
    if (mark) parts.push(mark.why);
    return parts.join(' · ');
  };

  Heatmap.prototype.label = function () {
    var self = this;
    return SS.HEATMAP_METRICS.filter(function (m) { return m.key === self.metric; })[0].label;
  };

  /* The client point of the middle of (row, col) — for tests. */
  Heatmap.prototype.clientPointOf = function (row, col) {
    var p = this.plot(), rect = this.canvas.getBoundingClientRect();
    var y = p.y + (row + 0.5 - this.row0) / this.rowsPerPx, x = p.x + (col + 0.5) * p.w / this.steps.length;
    return { x: rect.left + x, y: rect.top + y };
  };

  Heatmap.prototype.bindMouse = function () {
    var self = this, c = this.canvas, drag = null;
    function local(e) { var r = c.getBoundingClientRect(); return { x: e.clientX - r.left, y: e.clientY - r.top }; }
    c.addEventListener('mousemove', function (e) {
      var pt = local(e);
      if (drag && !drag.shift) {
        self.row0 = drag.row0 - (pt.y - drag.y) * self.rowsPerPx;
        drag.moved = drag.moved || Math.abs(pt.y - drag.y) > 3;
        self.clamp();
        self.render();
        return;
      }
      var h = self.hit(pt.x, pt.y);
      self.hover.textContent = h ? self.describe(h) : '';
    });
    c.addEventListener('mousedown', function (e) {
      var pt = local(e);
      drag = { x: pt.x, y: pt.y, row0: self.row0, shift: e.shiftKey, hit: self.hit(pt.x, pt.y), moved: false };
    });
    window.addEventListener('mouseup', function (e) {
      if (!drag) return;
      var d = drag, pt = local(e);
      drag = null;
      if (d.shift) {
        var h = self.hit(pt.x, Math.max(self.plot().y, Math.min(pt.y, self.plot().y + self.plot().h - 1)));
        if (!d.hit || !h) return;
        var a = Math.min(d.hit.rows[0], h.rows[0]), b = Math.max(d.hit.rows[1], h.rows[1]);
        for (var r = a; r < b; r++) self.selected.add(self.ranks[r]);
        self.selectionChanged();
      } else if (!d.moved && d.hit) {
        self.toggle(self.ranks[d.hit.row]);
      }
    });
    c.addEventListener('wheel', function (e) {
      e.preventDefault();
      var pt = local(e), p = self.plot(), at = self.row0 + (pt.y - p.y) * self.rowsPerPx;
      self.rowsPerPx *= e.deltaY > 0 ? 1.25 : 0.8;
      self.clamp();
      self.row0 = at - (pt.y - p.y) * self.rowsPerPx;
      self.clamp();
      self.render();
    }, { passive: false });
  };

  SS.Heatmap = Heatmap;

  /* Builds the view in root from a heatmap file's object; returns the Heatmap. */
  SS.renderHeatmap = function (root, heat, opts) {
    return new Heatmap(root, heat, opts);
  };
})();
