/*
 * charts.js — small SVG charts and tables for the summary, pipeline and compare views.
 *
 * How it works: plain DOM building (document.createElementNS for SVG). Charts are
 * stacked horizontal bars (one bar per label, one segment per series) and simple
 * vertical bar charts; tables are built from arrays of objects, taking every column
 * whose values are scalars, and formatting by name: `*_ns` as durations, `*ratio`
 * and `share` as percentages, bandwidths with two decimals. Unknown fields are
 * shown as they are, so newer report versions still display.
 */
'use strict';

var SS = window.SS || (window.SS = {});
SS.SVGNS = 'http://www.w3.org/2000/svg';

SS.el = function (tag, attrs, children) {
  var e = document.createElement(tag);
  for (var k in (attrs || {})) {
    if (k === 'text') e.textContent = attrs[k];
    else if (k === 'className') e.className = attrs[k];
    else e.setAttribute(k, attrs[k]);
  }
  (children || []).forEach(function (c) { if (c) e.appendChild(typeof c === 'string' ? document.createTextNode(c) : c); });
  return e;
};

SS.svg = function (tag, attrs) {
  var e = document.createElementNS(SS.SVGNS, tag);
  for (var k in (attrs || {})) e.setAttribute(k, attrs[k]);
  return e;
};

SS.formatNs = function (ns) {
  if (ns === null || ns === undefined || !isFinite(ns)) return '—';
  return SS.formatTime(ns / 1000);
};

SS.formatField = function (key, v) {
  if (v === null || v === undefined) return '—';
  if (typeof v === 'boolean') return v ? 'yes' : 'no';
  if (Array.isArray(v)) {
    if (!v.length) return 'none';
    if (v.every(function (x) { return x === null || typeof x !== 'object'; })) return v.join(', ');
  }
  if (typeof v !== 'number') return typeof v === 'object' ? JSON.stringify(v) : String(v);
  if (/_ns$/.test(key)) return SS.formatNs(v);
  if (/ratio|share|^mfu$|^hfu$|fraction/.test(key)) return (v * 100).toFixed(1) + ' %';
  if (/bw|gbps/i.test(key)) return v.toFixed(2);
  if (/bytes/.test(key)) return SS.formatNumber(v) + 'B';
  if (Number.isInteger(v)) return String(v);
  return v.toPrecision(4);
};

/* A table from an array of objects; columns: the given ones or every scalar field. */
/* Text cells longer than this (C++ kernel names run to hundreds of characters and
 * wrapped over ~10 lines) are cut to one line with an ellipsis, whole in their tooltip. */
SS.LONG_CELL = 60;

SS.table = function (rows, columns, limit) {
  rows = rows || [];
  if (!columns) {
    var seen = new Set();
    columns = [];
    rows.forEach(function (r) {
      for (var k in r) {
        var v = r[k];
        if (!seen.has(k) && (v === null || typeof v !== 'object' || (Array.isArray(v) && v.length <= 4 && typeof v[0] !== 'object'))) {
          seen.add(k); columns.push(k);
        }
      }
    });
  }
  var thead = SS.el('tr', {}, columns.map(function (c) { return SS.el('th', { text: c.replace(/_ns$/, '') }); }));
  var body = rows.slice(0, limit || 500).map(function (r) {
    return SS.el('tr', {}, columns.map(function (c) {
      var text = String(SS.formatField(c, r[c]));
      var td = SS.el('td', { text: text });
      if (typeof r[c] === 'number') td.className = 'num';
      else if (text.length > SS.LONG_CELL) { // a C++ kernel name: one line, whole in the tooltip
        td.className = 'long';
        td.title = text;
      }
      return td;
    }));
  });
  return SS.el('table', { className: 'data' }, [SS.el('thead', {}, [thead]), SS.el('tbody', {}, body)]);
};

/* Stacked horizontal bars. bars: [{label, values: [..]}], series: [{name, color}] */
SS.stackedBars = function (bars, series, opts) {
  opts = opts || {};
  var labelW = opts.labelW || 110, barH = opts.barH || 18, gap = 6, width = opts.width || 640;
  var max = opts.max || 0;
  bars.forEach(function (b) { var s = b.values.reduce(function (a, v) { return a + (v || 0); }, 0); if (s > max) max = s; });
  if (max <= 0) max = 1;
  var h = bars.length * (barH + gap) + 26;
  var svg = SS.svg('svg', { width: width, height: h, class: 'chart', viewBox: '0 0 ' + width + ' ' + h });
  var plotW = width - labelW - 70;
  bars.forEach(function (b, k) {
    var y = k * (barH + gap);
    var t = SS.svg('text', { x: labelW - 6, y: y + barH / 2 + 4, 'text-anchor': 'end' });
    t.textContent = b.label;
    svg.appendChild(t);
    var x = labelW, total = 0;
    b.values.forEach(function (v, si) {
      v = v || 0; total += v;
      var wv = v / max * plotW;
      var r = SS.svg('rect', { x: x, y: y, width: Math.max(0, wv), height: barH, fill: series[si].color,
                               'data-series': series[si].name });
      var title = SS.svg('title');
      title.textContent = b.label + ' · ' + series[si].name + ': ' + (opts.format || SS.formatNs)(v);
      r.appendChild(title);
      svg.appendChild(r);
      x += wv;
    });
    var tt = SS.svg('text', { x: x + 4, y: y + barH / 2 + 4 });
    tt.textContent = (opts.format || SS.formatNs)(total);
    svg.appendChild(tt);
  });
  var lx = labelW, ly = bars.length * (barH + gap) + 12;
  series.forEach(function (s) {
    svg.appendChild(SS.svg('rect', { x: lx, y: ly - 8, width: 10, height: 10, fill: s.color }));
    var t = SS.svg('text', { x: lx + 14, y: ly + 1 });
    t.textContent = s.name;
    svg.appendChild(t);
    lx += 16 + s.name.length * 7 + 14;
  });
  return svg;
};

SS.section = function (title, children, id) {
  var s = SS.el('section', { className: 'card' }, [SS.el('h3', { text: title })].concat(children));
  if (id) s.id = id;
  return s;
};

SS.median = function (xs) {
  var v = xs.filter(function (x) { return x !== null && x !== undefined && isFinite(x); }).sort(function (a, b) { return a - b; });
  if (!v.length) return null;
  var m = v.length >> 1;
  return v.length % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
};

/* Arrays of objects found in a report member (the member itself, or its fields). */
SS.arraysIn = function (value, title) {
  var out = [];
  if (Array.isArray(value)) {
    if (value.length && typeof value[0] === 'object') out.push({ title: title, rows: value });
  } else if (value && typeof value === 'object') {
    var scalars = {}, anyScalar = false;
    for (var k in value) {
      var v = value[k];
      if (Array.isArray(v) && v.length && typeof v[0] === 'object' && v[0] !== null) out.push({ title: title + ' · ' + k, rows: v });
      else if (v && typeof v === 'object' && !Array.isArray(v)) out = out.concat(SS.arraysIn(v, title + ' · ' + k));
      else { scalars[k] = v; anyScalar = true; }
    }
    if (anyScalar) out.unshift({ title: title, rows: [scalars] });
  }
  return out;
};

/* The roofline of a PyTorch trace's ops (the report's mfu_from_op_flops: its ceilings and
 * its longest ops, docs/ops.md): log-log, arithmetic intensity (FLOP/byte) across, achieved
 * TFLOP/s up; one roof per dtype of the ops, min(peak, intensity x bandwidth); one point per
 * op and shapes, its area by its time. null when the report has no such ops. */
SS.roofline = function (m) {
  var ops = ((m && m.ops) || []).filter(function (o) { return o.time_ns > 0 && o.bytes > 0 && o.flops > 0; });
  if (!ops.length) return null;
  var W = 640, H = 320, L = 56, R = 16, T = 12, B = 36, ceil = m.ceilings || {};
  var pts = ops.map(function (o) {
    return { o: o, x: o.flops / o.bytes, y: o.flops / (o.time_ns * 1e-9) / 1e12 };
  });
  var dtypes = [];
  pts.forEach(function (p) { if (dtypes.indexOf(p.o.dtype) < 0) dtypes.push(p.o.dtype); });
  var bw = ceil.bytes_per_s, peaks = dtypes.map(function (d) { return ceil[d] ? ceil[d] / 1e12 : null; });
  function decade(v, up) { return Math.pow(10, up ? Math.ceil(Math.log10(v)) : Math.floor(Math.log10(v))); }
  var xs = pts.map(function (p) { return p.x; }), ys = pts.map(function (p) { return p.y; });
  peaks.forEach(function (p) { if (p) ys.push(p); });
  var x0 = decade(Math.min.apply(null, xs) / 2, false), x1 = decade(Math.max.apply(null, xs) * 2, true);
  var y0 = decade(Math.min.apply(null, ys) / 2, false), y1 = decade(Math.max.apply(null, ys) * 2, true);
  function px(x) { return L + (Math.log10(x) - Math.log10(x0)) / (Math.log10(x1) - Math.log10(x0)) * (W - L - R); }
  function py(y) { return H - B - (Math.log10(y) - Math.log10(y0)) / (Math.log10(y1) - Math.log10(y0)) * (H - T - B); }
  var svg = SS.svg('svg', { width: W, height: H, 'class': 'chart roofline', viewBox: '0 0 ' + W + ' ' + H });
  for (var d = x0; d <= x1 * 1.001; d *= 10) {
    svg.appendChild(SS.svg('line', { x1: px(d), x2: px(d), y1: T, y2: H - B, stroke: '#eee' }));
    var tx = SS.svg('text', { x: px(d), y: H - B + 14, 'text-anchor': 'middle' }); tx.textContent = String(d); svg.appendChild(tx);
  }
  for (d = y0; d <= y1 * 1.001; d *= 10) {
    svg.appendChild(SS.svg('line', { x1: L, x2: W - R, y1: py(d), y2: py(d), stroke: '#eee' }));
    var ty = SS.svg('text', { x: L - 4, y: py(d) + 4, 'text-anchor': 'end' }); ty.textContent = String(d); svg.appendChild(ty);
  }
  var xl = SS.svg('text', { x: (L + W - R) / 2, y: H - 4, 'text-anchor': 'middle' }); xl.textContent = 'FLOP per byte'; svg.appendChild(xl);
  var yl = SS.svg('text', { x: 12, y: (T + H - B) / 2, transform: 'rotate(-90 12 ' + (T + H - B) / 2 + ')', 'text-anchor': 'middle' });
  yl.textContent = 'TFLOP/s'; svg.appendChild(yl);
  var colors = ['#1f77b4', '#d62728', '#2ca02c', '#9467bd', '#ff7f0e'];
  dtypes.forEach(function (dt, k) {
    if (!peaks[k] || !bw) return;
    var ridge = peaks[k] * 1e12 / bw, path = [];
    [x0, Math.max(x0, Math.min(ridge, x1)), x1].forEach(function (x) { path.push(px(x) + ',' + py(Math.min(peaks[k], x * bw / 1e12))); });
    var roof = SS.svg('polyline', { points: path.join(' '), fill: 'none', stroke: colors[k % colors.length], 'stroke-width': 1.5, 'class': 'roof', 'data-dtype': dt });
    svg.appendChild(roof);
    var lab = SS.svg('text', { x: W - R - 2, y: py(peaks[k]) - 4, 'text-anchor': 'end' });
    lab.textContent = dt + ' ' + peaks[k].toFixed(1) + ' TFLOP/s'; svg.appendChild(lab);
  });
  var tmax = Math.max.apply(null, ops.map(function (o) { return o.time_ns; }));
  pts.forEach(function (p) {
    var c = SS.svg('circle', { cx: px(p.x), cy: py(p.y), r: 3 + 9 * Math.sqrt(p.o.time_ns / tmax), 'class': 'roof-point',
                               fill: colors[dtypes.indexOf(p.o.dtype) % colors.length], 'fill-opacity': 0.5,
                               'data-op': p.o.op, 'data-tflops': String(p.y), 'data-intensity': String(p.x) });
    var tip = SS.svg('title');
    tip.textContent = p.o.op + ' ' + p.o.shapes + ': ' + p.y.toFixed(3) + ' TFLOP/s, ' + p.x.toFixed(2) + ' FLOP/B, ' + SS.formatNs(p.o.time_ns);
    c.appendChild(tip);
    svg.appendChild(c);
  });
  return svg;
};
