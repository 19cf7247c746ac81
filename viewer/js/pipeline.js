/*
 * pipeline.js — the Pipeline view: the micro-batch schedule per stage, from the trace.
 *
 * How it works: for the chosen step, every rank contributes the slices named
 * forward / backward / recompute that carry args.microbatch (their stage is
 * args.stage, else the report's rank stage, else the rank). Each rank becomes one
 * row of an SVG chart, grouped by stage: forward boxes in a light shade and backward
 * boxes in a dark shade of the micro-batch's hue, labelled F3 / B3 as in the
 * Playbook's schedule figures; the rank's `bubble` slices are hatched. Beside each
 * row: the measured bubble fraction of that step (from the report, or from the
 * bubble slices) and the schedule's theoretical fraction.
 */
'use strict';

var SS = window.SS || (window.SS = {});

SS.PHASES = { forward: 'F', backward: 'B', recompute: 'R' };

SS.pipelineData = function (model, report) {
  var ids = {};
  model.names.forEach(function (n, id) { var p = SS.PHASES[n.toLowerCase()]; if (p) ids[id] = p; });
  var bubbleId = model.nameIndex.get('bubble');
  var repRanks = {};
  ((report && report.ranks) || []).forEach(function (r) { repRanks[r.rank] = r; });
  var rows = [];
  model.groupList.forEach(function (g) {
    var ops = [], bubbles = [], stage = null;
    var rank = g.rank !== null ? g.rank : g.pid;
    model.slicesOfGroup(g, function (i) {
      var p = ids[model.nameId[i]];
      if (p) {
        var a = model.argsOf(i) || {};
        if (a.microbatch === undefined) return false;
        if (a.stage !== undefined && stage === null) stage = +a.stage;
        ops.push({ phase: p, mb: +a.microbatch, ts: model.ts[i], end: model.ts[i] + model.dur[i], slice: i });
      } else if (model.nameId[i] === bubbleId && model.cat[i] === SS.CAT.derived) {
        bubbles.push({ ts: model.ts[i], end: model.ts[i] + model.dur[i] });
      }
      return false;
    });
    if (!ops.length) return;
    if (stage === null && repRanks[rank] && repRanks[rank].stage !== undefined) stage = repRanks[rank].stage;
    if (stage === null) stage = rank;
    rows.push({ group: g, rank: rank, stage: stage, ops: ops, bubbles: bubbles, steps: model.stepWindows(g),
                report: repRanks[rank] || null });
  });
  rows.sort(function (a, b) { return a.stage - b.stage || a.rank - b.rank; });
  return rows;
};

SS.renderPipeline = function (root, model, report, stepIndex) {
  root.textContent = '';
  var rows = SS.pipelineData(model, report);
  if (!rows.length) {
    root.appendChild(SS.el('p', { className: 'missing', text: 'No forward/backward ranges with args.microbatch in this trace: no pipeline schedule to draw.' }));
    return;
  }
  var nSteps = Math.max.apply(null, rows.map(function (r) { return r.steps.length; }));
  stepIndex = Math.min(stepIndex || 0, Math.max(0, nSteps - 1));
  var sel = SS.el('select', { id: 'pipeline-step' });
  for (var k = 0; k < Math.max(1, nSteps); k++) {
    var o = SS.el('option', { value: k, text: 'step ' + (rows[0].steps[k] && rows[0].steps[k].step !== null ? rows[0].steps[k].step : k) });
    if (k === stepIndex) o.selected = true;
    sel.appendChild(o);
  }
  sel.addEventListener('change', function () { SS.renderPipeline(root, model, report, +sel.value); });
  var sched = (model.metadata && model.metadata.schedule) || (report && report.run && report.run.schedule) || {};
  var stages = Array.from(new Set(rows.map(function (r) { return r.stage; })));
  var mbs = new Set();
  rows.forEach(function (r) { r.ops.forEach(function (o) { mbs.add(o.mb); }); });
  var p = sched.stages || stages.length, m = sched.microbatches || mbs.size, v = sched.virtual_stages || 1;
  var theory = sched.bubble_theory !== undefined ? sched.bubble_theory : (p - 1) / (v * m + p - 1);
  root.appendChild(SS.el('div', { className: 'toolbar-row' }, [
    SS.el('label', { text: 'Step ' }), sel,
    SS.el('span', { className: 'note', text: '  schedule ' + (sched.name || '?') + ', ' + p + ' stages, ' + m +
      ' micro-batches; theoretical bubble (p−1)/(' + (v > 1 ? 'v·' : '') + 'm+p−1) = ' + (theory * 100).toFixed(1) + ' %' })
  ]));

  // the window: the step on each row, common x axis from the earliest start
  var wins = rows.map(function (r) { return r.steps[stepIndex] || { start: model.minTs, end: model.maxTs }; });
  var t0 = Math.min.apply(null, wins.map(function (w) { return w.start; }));
  var t1 = Math.max.apply(null, wins.map(function (w) { return w.end; }));
  var labelW = 150, rightW = 190, rowH = 26, width = Math.max(900, root.clientWidth - 30), plotW = width - labelW - rightW;
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
    r.ops.forEach(function (o) {
      if (o.end < w.start || o.ts > w.end) return;
      var hue = Math.round(o.mb * 360 / nMb);
      var fill = o.phase === 'F' ? 'hsl(' + hue + ',70%,72%)' : o.phase === 'B' ? 'hsl(' + hue + ',60%,42%)' : 'hsl(' + hue + ',30%,60%)';
      var xa = X(o.ts), xb = X(o.end);
      var rect = SS.svg('rect', { x: xa, y: y + 1, width: Math.max(1, xb - xa - 1), height: rowH - 2, fill: fill, class: 'op op-' + o.phase, 'data-mb': o.mb });
      var title = SS.svg('title');
      title.textContent = (o.phase === 'F' ? 'forward' : o.phase === 'B' ? 'backward' : 'recompute') + ' micro-batch ' + o.mb + ', ' + SS.formatTime(o.end - o.ts);
      rect.appendChild(title);
      svg.appendChild(rect);
      if (xb - xa > 18) {
        var t = SS.svg('text', { x: (xa + xb) / 2, y: y + rowH / 2 + 4, 'text-anchor': 'middle', fill: o.phase === 'B' ? '#fff' : '#111' });
        t.textContent = o.phase + o.mb;
        svg.appendChild(t);
      }
    });
    var measured = null;
    if (r.report && r.report.steps && r.report.steps[stepIndex]) measured = r.report.steps[stepIndex].bubble_ratio;
    if (measured === null || measured === undefined) {
      var bsum = 0;
      r.bubbles.forEach(function (b) { bsum += Math.max(0, Math.min(b.end, w.end) - Math.max(b.ts, w.start)); });
      measured = (w.end - w.start) > 0 ? bsum / (w.end - w.start) : null;
    }
    var rt = SS.svg('text', { x: labelW + plotW + 10, y: y + rowH / 2 + 4, class: 'bubble-ratio' });
    rt.textContent = 'bubble ' + (measured !== null ? (measured * 100).toFixed(1) + ' %' : '—') + ' vs theory ' + (theory * 100).toFixed(1) + ' %';
    svg.appendChild(rt);
  });
  var ay = rows.length * (rowH + 6) + 20;
  var at = SS.svg('text', { x: labelW, y: ay });
  at.textContent = '0';
  svg.appendChild(at);
  var bt = SS.svg('text', { x: labelW + plotW, y: ay, 'text-anchor': 'end' });
  bt.textContent = SS.formatTime(t1 - t0);
  svg.appendChild(bt);
  root.appendChild(svg);
  root.appendChild(SS.el('p', { className: 'note', text: 'Light boxes: forward; dark boxes: backward; hue: micro-batch; hatched: bubble (no compute and no non-pipeline collective).' }));
};
