/*
 * op_views.js — the Summary's sections of a PyTorch run from `stepscope ops`: the nn.Module
 * tree (`ops --by module --json`, modules.json) and memory over time (`ops --memory --json`,
 * memory.json, with the trace's "memory allocated/reserved (DEVICE)" counter tracks that
 * `stepscope export --memory` writes).
 *
 * How it works: `stepscope view` generates both files for a run of PyTorch profiler traces
 * (view_run.c) and the page reads them with the report. The module tree is a table, one row
 * per module path (a module before its children, as the JSON lists them), indented by depth,
 * with a toggle on each module that has children: collapsing hides every row under it. Its
 * figures are the file's (calls, time, self time, FLOPs); the page only divides: the share of
 * the op table's time (the file's time_total_ns), the share of the analysed steps' time, and
 * TFLOP/s = FLOPs / time. The rows under no module and the total close the table, as in
 * `stepscope ops --by module`. The memory section draws, per rank and device, the allocated
 * (and reserved) bytes over time from the counter track, marks the peak the file names, and
 * lists each step's peak and the largest allocations live at the peak with their op.
 */
'use strict';

var SS = window.SS || (window.SS = {});

/* The module tree's table (rows of modules.json): a row per module, collapsible. */
SS.moduleTree = function (doc, report) {
  var total = doc.time_total_ns || 0, steps = ((report || {}).run || {}).steps || [];
  var ranks = ((report || {}).run || {}).ranks_loaded || 1;
  var stepNs = steps.reduce(function (a, s) { return a + (s.time_ns || 0); }, 0) * ranks;
  function pct(v, of) { return of ? (v / of * 100).toFixed(1) + ' %' : '—'; }
  function tflops(flops, ns) { return flops > 0 && ns > 0 ? (flops / (ns * 1e-9) / 1e12).toPrecision(3) : '—'; }
  function gflop(flops) { return flops > 0 ? (flops / 1e9).toPrecision(4) : '—'; }
  function num(text) { return SS.el('td', { className: 'num', text: text }); }
  var head = ['module', 'calls', 'time', 'self', '% of op time', '% of step time', 'GFLOP', 'TFLOP/s'];
  var table = SS.el('table', { className: 'data module-tree', id: 'module-tree' }, [
    SS.el('thead', {}, [SS.el('tr', {}, head.map(function (h) { return SS.el('th', { text: h }); }))])]);
  var body = SS.el('tbody');
  table.appendChild(body);
  var rows = doc.rows || [], trs = [], expanded = new Set();
  var hasChildren = new Set();
  rows.forEach(function (r) {
    var cut = r.module.lastIndexOf('/');
    if (cut > 0) hasChildren.add(r.module.slice(0, cut));
  });
  function visible(path) { // every module above it expanded
    for (var cut = path.lastIndexOf('/'); cut > 0; cut = path.lastIndexOf('/', cut - 1))
      if (!expanded.has(path.slice(0, cut))) return false;
    return true;
  }
  function refresh() {
    trs.forEach(function (tr) {
      var path = tr.dataset.module;
      tr.hidden = !visible(path);
      var t = tr.querySelector('.tree-toggle');
      if (t) t.textContent = expanded.has(path) ? '▾' : '▸';
    });
  }
  rows.forEach(function (r) {
    if (r.depth < 1 && hasChildren.has(r.module)) expanded.add(r.module); // the top level open
    var leaf = r.module.slice(r.module.lastIndexOf('/') + 1);
    var name = SS.el('td', { className: 'tree-name', title: r.module }, [
      hasChildren.has(r.module) ? SS.el('button', { className: 'tree-toggle', type: 'button', 'aria-label': 'expand or collapse ' + r.module })
                                : SS.el('span', { className: 'tree-leaf', text: '·' }),
      ' ' + leaf]);
    name.style.paddingLeft = (4 + 16 * r.depth) + 'px';
    var tr = SS.el('tr', { 'data-module': r.module, 'data-depth': r.depth, 'data-time-ns': r.time_ns, 'data-self-ns': r.self_ns,
                           'data-flops': r.flops === null ? '' : r.flops }, [
      name, num(String(r.calls)), num(SS.formatNs(r.time_ns)), num(SS.formatNs(r.self_ns)),
      num(pct(r.time_ns, total)), num(pct(r.time_ns, stepNs)), num(gflop(r.flops)), num(tflops(r.flops, r.time_ns))]);
    var toggle = tr.querySelector('.tree-toggle');
    if (toggle) toggle.addEventListener('click', function () {
      if (expanded.has(r.module)) expanded.delete(r.module); else expanded.add(r.module);
      refresh();
    });
    trs.push(tr);
    body.appendChild(tr);
  });
  refresh();
  function closing(cls, label, ns, flops) {
    return SS.el('tr', { className: cls, 'data-time-ns': ns }, [
      SS.el('td', { text: label }), num(''), num(SS.formatNs(ns)), num(''), num(pct(ns, total)), num(pct(ns, stepNs)),
      num(gflop(flops)), num(tflops(flops, ns))]);
  }
  var foot = SS.el('tfoot', {}, [
    closing('module-none', '(no module: backward, optimizer, loss…)', doc.no_module_ns || 0, doc.no_module_flops),
    closing('module-total', 'total (the op table’s)', total, doc.flops_total)]);
  table.appendChild(foot);
  return table;
};

/* The module tree's section, or null when the run has no modules file. */
SS.moduleSection = function (doc, report) {
  if (!doc) return null;
  var what = doc.time === 'device' ? 'device time of the kernels its ops launched'
                                   : 'its ops’ own CPU time (no device activity in the trace)';
  var kids = [SS.el('p', { className: 'note', text: 'Times: ' + what + '; a module’s includes its children’s. ' +
    'The top-level modules and the time under no module add up to the op table’s total (`stepscope ops`); ' +
    '% of step time: of the analysed steps’ time on every rank. `stepscope ops RUN --by module` prints the same.' })];
  if (!doc.module_events)
    kids.push(SS.el('p', { className: 'none', text: 'No module events in the trace: profile with with_modules=True (and with_stack=True).' }));
  else
    kids.push(SS.moduleTree(doc, report));
  return SS.section('Modules (' + (doc.rows || []).length + ')', kids, 'summary-modules');
};

/* The counter series of the model for a rank's device ("memory allocated (cpu)"), or null. */
SS.memoryCounter = function (model, rank, device, what) {
  if (!model) return null;
  var name = 'memory ' + what + ' (' + device + ')', found = null, only = null, n = 0;
  model.groupList.forEach(function (g) {
    g.counters.forEach(function (c) {
      if (c.name !== name) return;
      n++;
      only = c;
      if (g.rank === rank) found = c;
    });
  });
  return found || (n === 1 ? only : null);
};

/* Allocated (and reserved) bytes over time, as steps; the peak marked. */
SS.memoryChart = function (d, allocated, reserved) {
  var W = 900, H = 180, left = 70, top = 10, bottom = 22;
  var series = [allocated, reserved].filter(function (c) { return c && c.ts.length; });
  var t0 = Infinity, t1 = -Infinity, max = 0;
  series.forEach(function (c) {
    t0 = Math.min(t0, c.ts[0]);
    t1 = Math.max(t1, c.ts[c.ts.length - 1]);
    max = Math.max(max, c.max);
  });
  if (!(t1 > t0)) t1 = t0 + 1;
  if (!(max > 0)) max = 1;
  function x(ts) { return left + (ts - t0) / (t1 - t0) * (W - left - 10); }
  function y(v) { return top + (1 - v / max) * (H - top - bottom); }
  var svg = SS.svg('svg', { width: W, height: H, 'class': 'chart memory-chart', viewBox: '0 0 ' + W + ' ' + H,
                            'data-rank': d.rank, 'data-device': d.device });
  [[allocated, SS.COLORS[1], 'allocated'], [reserved, SS.COLORS[3], 'reserved']].forEach(function (s, k) {
    var c = s[0];
    if (!c || !c.ts.length) return;
    var key = SS.svg('text', { x: W - 160 + 80 * k, y: top + 10, fill: s[1] });
    key.textContent = '— ' + s[2];
    svg.appendChild(key);
    var pts = [];
    for (var i = 0; i < c.ts.length; i++) {
      if (i) pts.push(x(c.ts[i]) + ',' + y(c.val[i - 1]));
      pts.push(x(c.ts[i]) + ',' + y(c.val[i]));
    }
    svg.appendChild(SS.svg('polyline', { points: pts.join(' '), fill: 'none', stroke: s[1], 'stroke-width': 1.5,
                                         'class': 'memory-line', 'data-what': s[2], 'data-points': c.ts.length }));
  });
  var px = x(d.peak_time_ns / 1000), py = y(d.peak_allocated_bytes);
  var peak = SS.svg('circle', { cx: px, cy: py, r: 5, fill: 'none', stroke: '#e15759', 'stroke-width': 2, 'class': 'memory-peak',
                                'data-bytes': d.peak_allocated_bytes, 'data-time-ns': d.peak_time_ns });
  var tip = SS.svg('title');
  tip.textContent = 'peak: ' + SS.formatNumber(d.peak_allocated_bytes) + 'B allocated at ' + SS.formatNs(d.peak_time_ns);
  peak.appendChild(tip);
  svg.appendChild(peak);
  [[max, SS.formatNumber(max) + 'B'], [0, '0']].forEach(function (l) {
    var t = SS.svg('text', { x: 2, y: y(l[0]) + (l[0] ? 10 : 0) });
    t.textContent = l[1];
    svg.appendChild(t);
  });
  var xl = SS.svg('text', { x: left, y: H - 4 });
  xl.textContent = SS.formatNs(t0 * 1000) + ' … ' + SS.formatNs(t1 * 1000) + ' (the circle: the peak)';
  svg.appendChild(xl);
  return svg;
};

/* The memory section, or null when the run has no memory file. */
SS.memorySection = function (doc, model) {
  if (!doc) return null;
  var devices = doc.devices || [], kids = [];
  if (!devices.length)
    kids.push(SS.el('p', { className: 'none', text: 'No memory events in the trace: profile with profile_memory=True.' }));
  devices.forEach(function (d) {
    var live = d.live_at_peak || {};
    kids.push(SS.el('h4', { text: 'rank ' + d.rank + ', ' + d.device + ': peak ' + SS.formatNumber(d.peak_allocated_bytes) +
      'B allocated at ' + SS.formatNs(d.peak_time_ns) + (d.peak_reserved_bytes ? ', reserved peak ' + SS.formatNumber(d.peak_reserved_bytes) + 'B' : '') +
      ' (' + d.events + ' events)' }));
    var allocated = SS.memoryCounter(model, d.rank, d.device, 'allocated');
    if (allocated) kids.push(SS.memoryChart(d, allocated, SS.memoryCounter(model, d.rank, d.device, 'reserved')));
    else kids.push(SS.el('p', { className: 'note', text: 'The trace has no memory counter track (an export made without --memory).' }));
    kids.push(SS.el('p', { text: 'Live at the peak: ' + live.count + ' allocations made in the trace, ' + SS.formatNumber(live.bytes || 0) +
      'B, and ' + SS.formatNumber(live.bytes_before_trace || 0) + 'B allocated before it began; the largest:' }));
    var largest = SS.table(live.largest || [], ['bytes', 'op', 'time_ns'], 50);
    largest.classList.add('memory-live');
    kids.push(largest);
    var steps = SS.table(d.steps || [], ['step', 'peak_allocated_bytes'], 200);
    steps.classList.add('memory-steps');
    kids.push(SS.el('h4', { text: 'Peak of each step (the bytes held when it began count)' }), steps);
  });
  return SS.section('Memory over time (`stepscope ops --memory`)', kids, 'summary-memory');
};

/* Puts the run's module and memory sections (those it has) into the Summary, after the
 * kernels and the roofline (before the run's details and the warnings). */
SS.renderOpSections = function (root, run) {
  var before = root.querySelector('#summary-run');
  [SS.moduleSection(run.modules, run.report), SS.memorySection(run.memory, run.model)].forEach(function (s) {
    if (s) root.insertBefore(s, before);
  });
};
