/*
 * pipeline.js — the Pipeline view: the micro-batch schedule per stage, from the trace.
 *
 * How it works: for the chosen step (by step number: the trainer's `step` ranges,
 * args.step or args.payload), every rank contributes the slices named forward /
 * backward / recompute that carry a micro-batch: args.microbatch, or the JSON text in
 * args.info that the exporter writes for the trainer's ranges (their stage is
 * args.stage, else the report's pipeline_stage of the rank, else the rank). Each rank becomes one
 * row of an SVG chart, grouped by stage: forward boxes in a light shade and backward
 * boxes in a dark shade of the micro-batch's hue (a zero-bubble schedule's weight backward,
 * `backward_weight`, W3, in between), labelled F3 / B3 as in the
 * Playbook's schedule figures (interleaved schedules: F3c1 for chunk 1, each chunk of
 * a micro-batch its own label); the rank's `bubble` slices are hatched. Beside each
 * row: the measured bubble fraction of that step (from the report, or from the
 * bubble slices), the schedule's theoretical fraction, and, when the report has
 * them, the step's bubble causes (docs/metrics.md "Bubble causes") as one bar
 * coloured per cause, sized by share of the bubble, explained in the legend.
 */
'use strict';

var SS = window.SS || (window.SS = {});

SS.PHASES = { forward: 'F', backward: 'B', backward_weight: 'W', recompute: 'R' };
SS.PHASE_NAMES = { F: 'forward', B: 'backward', W: 'weight backward', R: 'recompute' };

/* Bubble causes of the report (bubble_causes), in drawing order, with their colours. */
SS.BUBBLE_CAUSES = [
  { key: 'schedule_ns', name: 'schedule fill/drain', color: '#9aa5b1' },
  { key: 'imbalance_ns', name: 'stage imbalance', color: '#e15759' },
  { key: 'p2p_transfer_ns', name: 'p2p transfer', color: '#4e79a7' },
  { key: 'late_upstream_ns', name: 'late upstream (beyond the schedule)', color: '#f28e2b' },
  { key: 'host_gaps_ns', name: 'host/launch gaps', color: '#edc948' },
  { key: 'unattributed_ns', name: 'waiting, not attributed', color: '#d4cec9' }
];

/* A box's label: F3, or F3c1 for chunk 1 of an interleaved schedule. */
SS.pipelineLabel = function (o) {
  return o.phase + o.mb + (o.chunk !== null && o.chunk !== undefined ? 'c' + o.chunk : '');
};

/* The micro-batch/stage fields of a forward/backward range's args: directly in args
 * (`{"microbatch":3,"stage":1}`), or in the JSON text the exporter puts in args.info
 * for NVTX/host ranges recorded with a JSON payload (the trainer's ranges). */
SS.pipelineArgs = function (a) {
  if (!a) return null;
  if (a.microbatch !== undefined) return a;
  if (typeof a.info === 'string' && a.info.charAt(0) === '{') {
    try {
      var inner = JSON.parse(a.info);
      if (inner && inner.microbatch !== undefined) return inner;
    } catch (e) { /* not JSON: no micro-batch */ }
  }
  return null;
};

SS.pipelineData = function (model, report) {
  var phaseOf = {};
  model.names.forEach(function (n, id) { var p = SS.PHASES[n.toLowerCase()]; if (p) phaseOf[id] = p; });
  var names = model.names.filter(function (n) { return SS.PHASES[n.toLowerCase()]; });
  var bubbleId = model.nameIndex.get('bubble');
  var repRanks = {};
  ((report && report.ranks) || []).forEach(function (r) { repRanks[r.rank] = r; });
  var rows = [];
  model.groupList.forEach(function (g) {
    var ops = [], bubbles = [], stage = null;
    var rank = g.rank !== null ? g.rank : g.pid;
    model.namedSlicesOfGroup(g, names).forEach(function (i) {
      var a = SS.pipelineArgs(model.argsOf(i));
      if (!a) return;
      if (a.stage !== undefined && stage === null) stage = +a.stage;
      ops.push({ phase: phaseOf[model.nameId[i]], mb: +a.microbatch, chunk: a.chunk !== undefined ? +a.chunk : null,
                 ts: model.ts[i], end: model.ts[i] + model.dur[i], slice: i });
    });
    if (!ops.length) return;
    ops.forEach(function (o) { SS.projectToDevice(model, o); });
    if (bubbleId !== undefined) {
      model.slicesOfGroup(g, function (i) { return model.nameId[i] === bubbleId && model.cat[i] === SS.CAT.derived; }).forEach(function (i) {
        bubbles.push({ ts: model.ts[i], end: model.ts[i] + model.dur[i] });
      });
    }
    var rep = repRanks[rank] || null;
    if (stage === null && rep) stage = rep.pipeline_stage !== undefined ? rep.pipeline_stage : rep.stage !== undefined ? rep.stage : null;
    if (stage === null) stage = rank;
    ops.sort(function (x, y) { return x.ts - y.ts; });
    rows.push({ group: g, rank: rank, stage: stage, ops: ops, bubbles: bubbles, steps: model.stepWindows(g), report: rep });
  });
  rows.sort(function (a, b) { return a.stage - b.stage || a.rank - b.rank; });
  return rows;
};

/*
 * Where a forward/backward range's work ran: a host range (the CPU backend, or a
 * CUDA launch loop) only enqueues; the operations it launched run later on the
 * compute/communication streams. Following the launch flows that start inside the
 * range gives their slices; the box is drawn over [first start, last end] of the
 * compute among them (the pipeline sends and receives they enqueued are not part of
 * the box) (o.ts/o.end stay the range's own, o.x0/o.x1 are what is drawn).
 */
SS.projectToDevice = function (model, o) {
  var f = model.flows, track = model.track[o.slice], a = o.ts, b = o.end;
  o.x0 = a; o.x1 = b; o.projected = false;
  var lo = 0, hi = f.n;
  while (lo < hi) { var mid = (lo + hi) >> 1; if (f.fromTs[mid] < a) lo = mid + 1; else hi = mid; }
  var first = Infinity, last = -Infinity;
  for (var k = lo; k < f.n && f.fromTs[k] <= b; k++) {
    if (f.fromTrack[k] !== track) continue;
    var hit = model.sliceAt(model.tracks[f.toTrack[k]], f.toTs[k], 0);
    if (!hit) continue;
    var i = hit.slice;
    if (model.cat[i] !== SS.CAT.compute) continue;           // sends/receives run on their own streams
    if (model.ts[i] < first) first = model.ts[i];
    if (model.ts[i] + model.dur[i] > last) last = model.ts[i] + model.dur[i];
  }
  if (first <= last) { o.x0 = first; o.x1 = last; o.projected = true; }
};

/* The step numbers present in the rows (by first appearance in time), or positions. */
SS.pipelineSteps = function (rows) {
  var seen = new Map();
  rows.forEach(function (r) {
    r.steps.forEach(function (w, k) {
      var key = w.step !== null ? w.step : k;
      if (!seen.has(key) || seen.get(key) > w.start) seen.set(key, w.start);
    });
  });
  return Array.from(seen.keys()).sort(function (a, b) { return seen.get(a) - seen.get(b); });
};

/* A row's window for step `step`: its step range with that number (or position). */
SS.pipelineWindow = function (row, step, model) {
  for (var k = 0; k < row.steps.length; k++) {
    var w = row.steps[k];
    if ((w.step !== null ? w.step : k) === step) return w;
  }
  return row.steps.length ? null : { start: model.minTs, end: model.maxTs };
};

/* The step the view opens on: the first steady one. A run's first step is its
 * warm-up (allocations, first communication set-up, autotuning), so it is never
 * chosen when there are others; after it, the first step whose time is within 25 %
 * of the run's step time (the report's median), else the second step. */
SS.pipelineFirstSteady = function (steps, report) {
  if (steps.length < 2) return 0;
  var run = (report && report.run) || {}, median = run.step_time_ns, times = {};
  (run.steps || []).forEach(function (s) { times[s.step] = s.time_ns; });
  for (var k = 1; k < steps.length; k++) {
    var t = times[steps[k]];
    if (!median || typeof t !== 'number' || Math.abs(t - median) <= 0.25 * median) return k;
  }
  return 1;
};

/* stepIndex: the position of the step to show; undefined: the first steady step. */
SS.renderPipeline = function (root, model, report, stepIndex) {
  root.textContent = '';
  var rows = SS.pipelineData(model, report);
  if (!rows.length) {
    root.appendChild(SS.el('p', { className: 'missing', text: 'No forward/backward ranges with args.microbatch in this trace: no pipeline schedule to draw.' }));
    return;
  }
  var steps = SS.pipelineSteps(rows);
  if (stepIndex === undefined || stepIndex === null) stepIndex = SS.pipelineFirstSteady(steps, report);
  stepIndex = Math.min(stepIndex || 0, Math.max(0, steps.length - 1));
  var step = steps.length ? steps[stepIndex] : null;
  var sel = SS.el('select', { id: 'pipeline-step' });
  for (var k = 0; k < Math.max(1, steps.length); k++) {
    var o = SS.el('option', { value: k, text: 'step ' + (steps.length ? steps[k] : k) });
    if (k === stepIndex) o.selected = true;
    sel.appendChild(o);
  }
  sel.addEventListener('change', function () { SS.renderPipeline(root, model, report, +sel.value); });
  var sched = (model.metadata && model.metadata.schedule) || (report && report.run && report.run.schedule) || {};
  var stages = Array.from(new Set(rows.map(function (r) { return r.stage; })));
  var mbs = new Set();
  rows.forEach(function (r) { r.ops.forEach(function (o) { mbs.add(o.mb); }); });
  var p = sched.stages || stages.length, m = sched.microbatches || mbs.size, v = sched.virtual_stages || 1;
  /* zero bubble: a third of 1F1B's fill and drain (docs/kineto-import.md "Pipelines") */
  var zb = /zero_bubble/.test(sched.name || ''), formula = '(p−1)/(' + (zb ? '3·' : '') + (v > 1 ? 'v·' : '') + 'm+p−1)';
  var theory = sched.bubble_theory !== undefined ? sched.bubble_theory
    : sched.bubble_theory_ratio !== undefined && sched.bubble_theory_ratio !== null ? sched.bubble_theory_ratio
    : (p - 1) / ((zb ? 3 : 1) * v * m + p - 1);
  root.appendChild(SS.el('div', { className: 'toolbar-row' }, [
    SS.el('label', { text: 'Step ' }), sel,
    SS.el('span', { className: 'note', text: '  schedule ' + (sched.name || '?') + ', ' + p + ' stages, ' + m +
      ' micro-batches; theoretical bubble ' + formula + ' = ' + (theory * 100).toFixed(1) + ' %' })
  ]));

  // the window: the step on each row, common x axis from the earliest start
  // a row's ops of this step: host range centred in the row's step range; the
  // drawn window also covers the device work they launched
  var wins = rows.map(function (r) { return SS.pipelineWindow(r, step, model); });
  var known = wins.filter(function (w) { return w; });
  if (!known.length) known = [{ start: model.minTs, end: model.maxTs }];
  var t0 = Math.min.apply(null, known.map(function (w) { return w.start; }));
  var t1 = Math.max.apply(null, known.map(function (w) { return w.end; }));
  var stepOps = rows.map(function (r, k) {
    var w = wins[k];
    if (!w) return [];
    return r.ops.filter(function (o) { var c = (o.ts + o.end) / 2; return c >= w.start && c <= w.end; });
  });
  stepOps.forEach(function (list) {
    list.forEach(function (o) { if (o.x0 < t0) t0 = o.x0; if (o.x1 > t1) t1 = o.x1; });
  });
  wins = wins.map(function (w, k) {
    w = w ? { start: w.start, end: w.end } : { start: t0, end: t0 };
    stepOps[k].forEach(function (o) { if (o.x0 < w.start) w.start = o.x0; if (o.x1 > w.end) w.end = o.x1; });
    return w;
  });
  var labelW = 150, rightW = 200, rowH = 30, width = Math.max(900, root.clientWidth - 30), plotW = width - labelW - rightW;
  var height = rows.length * (rowH + 6) + 40;
  var svg = SS.svg('svg', { width: width, height: height, class: 'chart pipeline', id: 'pipeline-chart' });
  var defs = SS.svg('defs'), pat = SS.svg('pattern', { id: 'hatch', width: 6, height: 6, patternUnits: 'userSpaceOnUse', patternTransform: 'rotate(45)' });
  pat.appendChild(SS.svg('rect', { width: 6, height: 6, fill: 'rgba(176,122,161,0.18)' }));
  pat.appendChild(SS.svg('line', { x1: 0, y1: 0, x2: 0, y2: 6, stroke: '#b07aa1', 'stroke-width': 2 }));
  defs.appendChild(pat); svg.appendChild(defs);
  function X(t) { return labelW + (t - t0) / (t1 - t0) * plotW; }
  var nMb = Math.max(1, mbs.size);
  rows.forEach(function (r, k) {
    var y = k * (rowH + 6) + 4, w = wins[k];
    var lab = SS.svg('text', { x: 6, y: y + rowH / 2 + 4, class: 'stage-label', 'data-stage': r.stage });
    lab.textContent = 'stage ' + r.stage + ' · rank ' + r.rank;
    svg.appendChild(lab);
    svg.appendChild(SS.svg('rect', { x: labelW, y: y, width: plotW, height: rowH, fill: '#f6f6f6' }));
    r.bubbles.forEach(function (b) {
      if (b.end < w.start || b.ts > w.end) return;
      svg.appendChild(SS.svg('rect', { x: X(Math.max(b.ts, w.start)), y: y, width: Math.max(0.5, X(Math.min(b.end, w.end)) - X(Math.max(b.ts, w.start))),
                                       height: rowH, fill: 'url(#hatch)', class: 'bubble' }));
    });
    stepOps[k].forEach(function (o) {
      var hue = Math.round(o.mb * 360 / nMb);
      var fill = o.phase === 'F' ? 'hsl(' + hue + ',70%,72%)' : o.phase === 'B' ? 'hsl(' + hue + ',60%,42%)'
        : o.phase === 'W' ? 'hsl(' + hue + ',45%,57%)' : 'hsl(' + hue + ',30%,60%)';
      var xa = X(o.x0), xb = X(o.x1);
      var rect = SS.svg('rect', { x: xa, y: y + 1, width: Math.max(1, xb - xa - 1), height: rowH - 2, fill: fill, class: 'op op-' + o.phase, 'data-mb': o.mb,
                                  'data-rank': r.rank, 'data-start': o.x0, 'data-end': o.x1, 'data-label': SS.pipelineLabel(o) });
      if (o.chunk !== null) rect.setAttribute('data-chunk', o.chunk);
      var title = SS.svg('title');
      title.textContent = SS.PHASE_NAMES[o.phase] + ' micro-batch ' + o.mb +
        (o.chunk !== null ? ', model chunk ' + o.chunk : '') + ', ' + SS.formatTime(o.x1 - o.x0) +
        (o.projected ? ' of launched work (the range itself: ' + SS.formatTime(o.end - o.ts) + ')' : '');
      rect.appendChild(title);
      svg.appendChild(rect);
      var label = SS.pipelineLabel(o);
      if (xb - xa > 7 * label.length + 4) {
        var t = SS.svg('text', { x: (xa + xb) / 2, y: y + rowH / 2 + 4, 'text-anchor': 'middle', fill: o.phase === 'B' ? '#fff' : '#111', class: 'op-label' });
        t.textContent = label;
        svg.appendChild(t);
      }
    });
    var measured = null;
    var repStep = r.report && r.report.steps ? r.report.steps.filter(function (s) { return s.step === step; })[0] : null;
    if (repStep) measured = repStep.bubble_ratio;
    if (measured === null || measured === undefined) {
      var bsum = 0;
      r.bubbles.forEach(function (b) { bsum += Math.max(0, Math.min(b.end, w.end) - Math.max(b.ts, w.start)); });
      measured = (w.end - w.start) > 0 ? bsum / (w.end - w.start) : null;
    }
    var rt = SS.svg('text', { x: labelW + plotW + 10, y: y + rowH / 2, class: 'bubble-ratio' });
    rt.setAttribute('data-rank', r.rank);
    rt.setAttribute('data-measured', measured === null ? '' : measured);
    rt.textContent = 'bubble ' + (measured !== null ? (measured * 100).toFixed(1) + ' %' : '—') + ' vs theory ' + (theory * 100).toFixed(1) + ' %';
    svg.appendChild(rt);
    // the step's bubble causes: one bar, a segment per cause sized by its share of the bubble
    var causes = repStep && repStep.bubble_causes, bub = repStep && repStep.bubble_ns;
    if (causes && bub > 0) {
      var bx = labelW + plotW + 10, bw = rightW - 20, cx = bx;
      SS.BUBBLE_CAUSES.forEach(function (c) {
        var v = causes[c.key] || 0;
        if (v <= 0) return;
        var seg = SS.svg('rect', { x: cx, y: y + rowH - 9, width: Math.max(0.5, v / bub * bw), height: 7, fill: c.color, class: 'bubble-cause',
                                   'data-rank': r.rank, 'data-cause': c.key.replace(/_ns$/, ''), 'data-ns': v });
        var tt = SS.svg('title');
        tt.textContent = c.name + ': ' + SS.formatNs(v) + ' (' + (v / bub * 100).toFixed(1) + ' % of the bubble)' +
          (c.key === 'imbalance_ns' && repStep.imbalance_stage !== null && repStep.imbalance_stage !== undefined ? ', slowest stage ' + repStep.imbalance_stage : '');
        seg.appendChild(tt);
        svg.appendChild(seg);
        cx += v / bub * bw;
      });
    }
  });
  var ay = rows.length * (rowH + 6) + 20;
  var at = SS.svg('text', { x: labelW, y: ay });
  at.textContent = '0';
  svg.appendChild(at);
  var bt = SS.svg('text', { x: labelW + plotW, y: ay, 'text-anchor': 'end' });
  bt.textContent = SS.formatTime(t1 - t0);
  svg.appendChild(bt);
  root.appendChild(svg);
  root.appendChild(SS.el('p', { className: 'note', text: 'Light boxes: forward; dark boxes: backward; W boxes (zero bubble): the backward\'s weight-gradient half; hue: micro-batch; F3c1: micro-batch 3 of model chunk 1 (interleaved schedules); ' +
    'hatched: bubble (no compute and no non-pipeline collective; a wait inside an end-of-step collective for another stage counts as bubble). ' +
    'A box spans the compute its range launched (followed through the launch flows), or the range itself when it launched none.' }));
  var legend = SS.el('p', { className: 'note', id: 'bubble-cause-legend' }, [SS.el('span', { text: 'The bar under each bubble figure splits that step\'s bubble by cause (from the report): ' })]);
  SS.BUBBLE_CAUSES.forEach(function (c) {
    legend.appendChild(SS.el('span', { className: 'swatch', style: 'display:inline-block;width:10px;height:10px;margin:0 4px 0 10px;background:' + c.color }));
    legend.appendChild(SS.el('span', { text: c.name }));
  });
  legend.appendChild(SS.el('span', { text: '. Schedule: the idle the schedule implies with every stage as fast as the median stage; imbalance: the extra because a stage was slower (the tooltip names it); ' +
    'late upstream: waiting beyond what schedule and measured times imply.' }));
  root.appendChild(legend);
};
