/*
 * compare.js — the Compare view: two runs aligned per step, with the numbers.
 *
 * How it works: steps are aligned by step number (step 5 of run A beside step 5 of
 * run B; a step only one run profiled stands alone). For every metric of the closed accounting, the median
 * over steps (mean over ranks per step) of A and B, the absolute and relative
 * change, and a verdict: a change smaller than the step-to-step spread (the larger
 * interquartile range of A and B) is marked as noise, as `stepscope diff` does.
 * When `stepscope view --compare` could run `stepscope diff A B --json` (both runs have
 * their rank traces), its findings are shown first and its verdicts (noise, and the
 * direction of a change beyond noise) replace this view's own in the table, so the
 * page and the CLI say the same thing, and so is its decomposition of the step time's
 * change into parts that add up (step_time_parts: compute, exposed communication and
 * copies, idle by cause). Bubble rows appear only when a run has a
 * pipeline. Below: per-step stacked bars A vs B, and both runs' lanes of one rank for one
 * step number (every packed row of every track) drawn on the same time scale from
 * the step start, so the shapes line up.
 */
'use strict';

var SS = window.SS || (window.SS = {});

SS.COMPARE_METRICS = ['span_ns', 'compute_ns', 'comm_ns', 'overlap_ns', 'exposed_comm_ns', 'exposed_mem_ns',
                      'idle_ns', 'bubble_ns', 'overlap_ratio', 'bubble_ratio'];

/* Per step number (in order): mean over ranks of each metric. */
SS.stepMeans = function (report) {
  var byStep = new Map();
  ((report && report.ranks) || []).forEach(function (r) {
    (r.steps || []).forEach(function (s, k) {
      var key = s.step !== undefined && s.step !== null ? s.step : k;
      var o = byStep.get(key);
      if (!o) { o = { step: key, n: {}, sum: {} }; byStep.set(key, o); }
      SS.COMPARE_METRICS.forEach(function (m) {
        if (typeof s[m] === 'number') { o.sum[m] = (o.sum[m] || 0) + s[m]; o.n[m] = (o.n[m] || 0) + 1; }
      });
    });
  });
  return Array.from(byStep.values()).sort(function (a, b) { return a.step - b.step; }).map(function (o) {
    var r = { step: o.step };
    SS.COMPARE_METRICS.forEach(function (m) { r[m] = o.n[m] ? o.sum[m] / o.n[m] : null; });
    return r;
  });
};

/* The step numbers of both runs, in order: [{step, a: means|null, b: means|null}]. */
SS.alignSteps = function (sa, sb) {
  var map = new Map();
  sa.forEach(function (s) { map.set(s.step, { step: s.step, a: s, b: null }); });
  sb.forEach(function (s) { var o = map.get(s.step) || { step: s.step, a: null, b: null }; o.b = s; map.set(s.step, o); });
  return Array.from(map.values()).sort(function (x, y) { return x.step - y.step; });
};

SS.quantile = function (xs, q) {
  var v = xs.filter(function (x) { return x !== null && isFinite(x); }).sort(function (a, b) { return a - b; });
  if (!v.length) return null;
  var p = (v.length - 1) * q, lo = Math.floor(p), hi = Math.ceil(p);
  return v[lo] + (v[hi] - v[lo]) * (p - lo);
};

SS.compareRows = function (repA, repB) {
  var a = SS.stepMeans(repA), b = SS.stepMeans(repB);
  return SS.COMPARE_METRICS.map(function (m) {
    var xa = a.map(function (s) { return s[m]; }), xb = b.map(function (s) { return s[m]; });
    var ma = SS.median(xa), mb = SS.median(xb);
    var spread = Math.max((SS.quantile(xa, 0.75) - SS.quantile(xa, 0.25)) || 0, (SS.quantile(xb, 0.75) - SS.quantile(xb, 0.25)) || 0);
    var d = (ma !== null && mb !== null) ? mb - ma : null;
    var verdict = d === null ? '' : Math.abs(d) <= spread ? 'noise' : (d < 0 ? 'lower in B' : 'higher in B');
    return { metric: m, a: ma, b: mb, delta: d, rel: (d !== null && ma) ? d / ma : null, spread: spread, verdict: verdict };
  });
};

/* Whether a report has a pipeline: a schedule of more than one stage, or a pipeline rank
 * (only those carry bubble_causes). */
SS.hasPipeline = function (report) {
  if (!report) return false;
  if (report.run && report.run.schedule && report.run.schedule.stages > 1) return true;
  return (report.ranks || []).some(function (r) { return r.totals && r.totals.bubble_causes !== undefined; });
};

/* What changed the step time, as `stepscope diff` decomposed it (docs/diff.md): the parts of
 * the mean step of the rank that set each step, largest change first, with their shares. */
SS.compareParts = function (root, parts) {
  var pct = function (v) { return v === null || v === undefined ? '—' : (v * 100).toFixed(1) + ' %'; };
  var rows = parts.parts.map(function (p) {
    return SS.el('tr', { 'data-part': p.part }, [
      SS.el('td', { text: p.name }), SS.el('td', { className: 'num', text: SS.formatNs(p.a_ns) }),
      SS.el('td', { className: 'num', text: SS.formatNs(p.b_ns) }),
      SS.el('td', { className: 'num', text: SS.formatNs(p.change_ns) }),
      SS.el('td', { className: 'num', text: pct(p.share) })]);
  });
  rows.push(SS.el('tr', { className: 'total' }, [
    SS.el('td', { text: 'mean step time' }), SS.el('td', { className: 'num', text: SS.formatNs(parts.mean_a_ns) }),
    SS.el('td', { className: 'num', text: SS.formatNs(parts.mean_b_ns) }),
    SS.el('td', { className: 'num', text: SS.formatNs(parts.change_ns) }), SS.el('td', { className: 'num', text: '100 %' })]));
  var table = SS.el('table', { className: 'data', id: 'compare-parts' }, [
    SS.el('thead', {}, [SS.el('tr', {}, ['part', 'A', 'B', 'B − A', 'share of the change'].map(function (h) { return SS.el('th', { text: h }); }))]),
    SS.el('tbody', {}, rows)]);
  root.appendChild(SS.section('What changed the step time (stepscope diff A B: mean over ' + parts.steps_a + ' and ' +
    parts.steps_b + ' steps of the rank that set each step; the parts add up)', [table], 'compare-parts-section'));
};

/* The table's metrics as `stepscope diff` names them in its headline. */
SS.DIFF_METRIC = { compute_ns: 'compute', comm_ns: 'comm', exposed_comm_ns: 'exposed_comm', exposed_mem_ns: 'exposed_mem',
                   idle_ns: 'idle', overlap_ratio: 'overlap_ratio', bubble_ratio: 'bubble_ratio' };

SS.renderCompare = function (root, A, B, opts) {
  root.textContent = '';
  opts = opts || {};
  if (!B) {
    var how = opts.loadingB ? 'Run B is still loading…'
      : opts.source === 'inline' ? 'This page holds one run. To compare, write it with `stepscope view RUN_A --compare RUN_B --html FILE`.'
      : opts.source === 'files' ? 'No second run: open run B\'s files with the picker (Run B), or start the viewer with `stepscope view RUN_A --compare RUN_B`.'
      : 'No second run. Start the viewer with `stepscope view RUN_A --compare RUN_B`.';
    root.appendChild(SS.el('p', { className: 'missing', id: 'compare-missing', text: how }));
    return;
  }
  root.appendChild(SS.el('p', { id: 'compare-runs', text: 'A: ' + A.name + '    B: ' + B.name }));
  var diff = B.diff && B.diff.kind === 'stepscope.diff' ? B.diff : null;
  if (diff && diff.findings && diff.findings.length) {
    root.appendChild(SS.section('Findings (stepscope diff A B)', [SS.el('ul', { id: 'compare-findings' }, diff.findings.map(function (f) {
      return SS.el('li', { text: f });
    }))], 'compare-diff'));
  }
  if (diff && diff.step_time_parts) SS.compareParts(root, diff.step_time_parts);
  if (!A.report || !B.report) {
    root.appendChild(SS.el('p', { className: 'missing', text: 'Both runs need report.json for the numbers (missing: ' +
      (!A.report ? 'A ' : '') + (!B.report ? 'B' : '') + ').' }));
  } else {
    var pipeline = SS.hasPipeline(A.report) || SS.hasPipeline(B.report);
    var rows = SS.compareRows(A.report, B.report).filter(function (r) { return pipeline || !/^bubble/.test(r.metric); });
    rows.forEach(function (r) {
      var h = diff && diff.headline && diff.headline[SS.DIFF_METRIC[r.metric]];
      if (!h) return;
      if (typeof h.verdict === 'string') {
        /* the diff's noise test: unknown (too few steps), same, noise, better, worse */
        r.verdict = h.verdict === 'better' || h.verdict === 'worse'
          ? (h.abs_change < 0 ? 'lower in B' : 'higher in B') + ' (' + h.verdict + ')' : h.verdict;
        r.fromDiff = true;
        return;
      }
      if (h.noise === null || h.noise === undefined) return;
      r.verdict = h.noise ? 'noise' : h.abs_change < 0 ? 'lower in B' : 'higher in B';
      r.fromDiff = true;
    });
    var table = SS.el('table', { className: 'data', id: 'compare-table' }, [
      SS.el('thead', {}, [SS.el('tr', {}, ['metric (median over steps)', 'A', 'B', 'B − A', 'change', 'spread', ''].map(function (h) { return SS.el('th', { text: h }); }))]),
      SS.el('tbody', {}, rows.map(function (r) {
        var f = function (v) { return SS.formatField(r.metric, v); };
        return SS.el('tr', { className: r.verdict === 'noise' ? 'noise' : '' }, [
          SS.el('td', { text: r.metric.replace(/_ns$/, '') }), SS.el('td', { className: 'num', text: f(r.a) }),
          SS.el('td', { className: 'num', text: f(r.b) }), SS.el('td', { className: 'num', text: f(r.delta) }),
          SS.el('td', { className: 'num', text: r.rel === null ? '—' : (r.rel * 100).toFixed(1) + ' %' }),
          SS.el('td', { className: 'num', text: f(r.spread) }),
          SS.el('td', { text: r.verdict, title: r.fromDiff ? 'verdict of stepscope diff (its noise test over the same steps)' : 'this view\'s own verdict (change vs step-to-step spread)',
                        'data-source': r.fromDiff ? 'diff' : 'viewer' })]);
      }))
    ]);
    root.appendChild(SS.section('Per-step medians, A vs B', [table]));
    var bars = [];
    SS.alignSteps(SS.stepMeans(A.report), SS.stepMeans(B.report)).forEach(function (al) {
      [['A', al.a], ['B', al.b]].forEach(function (x) {
        if (x[1]) bars.push({ label: x[0] + ' step ' + al.step, values: SS.BREAKDOWN.map(function (b) { return x[1][b.key]; }) });
      });
    });
    root.appendChild(SS.section('Steps aligned (mean over ranks)', [SS.stackedBars(bars, SS.BREAKDOWN.map(function (b) { return { name: b.name, color: b.color }; }), { labelW: 110 })], 'compare-steps'));
  }
  if (A.model && B.model) SS.renderCompareLanes(root, A, B, opts);
};

/* Both runs' lanes of one rank and one step number, on one time scale from the step start. */
SS.renderCompareLanes = function (root, A, B, opts) {
  var ga = A.model.groupList, gb = B.model.groupList;
  var rankIdx = Math.min(opts.rank || 0, Math.min(ga.length, gb.length) - 1);
  if (rankIdx < 0) return;
  var wa = A.model.stepWindows(ga[rankIdx]), wb = B.model.stepWindows(gb[rankIdx]);
  var numbered = function (ws) { var m = new Map(); ws.forEach(function (w, k) { m.set(w.step !== null ? w.step : k, w); }); return m; };
  var na = numbered(wa), nb = numbered(wb);
  var common = Array.from(na.keys()).filter(function (k) { return nb.has(k); }).sort(function (x, y) { return x - y; });
  var step = opts.step !== undefined && common.indexOf(opts.step) >= 0 ? opts.step : (common.length ? common[0] : null);
  var winA = step !== null ? na.get(step) : { start: A.model.minTs, end: A.model.maxTs };
  var winB = step !== null ? nb.get(step) : { start: B.model.minTs, end: B.model.maxTs };
  var span = Math.max(winA.end - winA.start, winB.end - winB.start) || 1;
  var rankSel = SS.el('select', { id: 'compare-rank' }), stepSel = SS.el('select', { id: 'compare-step' });
  for (var r = 0; r < Math.min(ga.length, gb.length); r++) {
    var o = SS.el('option', { value: r, text: ga[r].name }); if (r === rankIdx) o.selected = true; rankSel.appendChild(o);
  }
  common.forEach(function (s) {
    var so = SS.el('option', { value: s, text: 'step ' + s }); if (s === step) so.selected = true; stepSel.appendChild(so);
  });
  var canvas = SS.el('canvas', { id: 'compare-canvas' });
  function rerender() { SS.renderCompare(root, A, B, { rank: +rankSel.value, step: stepSel.value === '' ? undefined : +stepSel.value }); }
  rankSel.addEventListener('change', rerender);
  stepSel.addEventListener('change', rerender);
  root.appendChild(SS.section('One step, same scale (A above B)', [SS.el('div', { className: 'toolbar-row' }, [rankSel, stepSel,
    SS.el('span', { className: 'note', text: (common.length ? '' : '  no step number in both runs: whole runs shown;') +
      '  A step ' + SS.formatTime(winA.end - winA.start) + ', B step ' + SS.formatTime(winB.end - winB.start) })]), canvas], 'compare-lanes'));
  var lanes = [];
  [[A, ga[rankIdx], winA, 'A'], [B, gb[rankIdx], winB, 'B']].forEach(function (x) {
    x[1].tracks.forEach(function (t) {
      for (var row = 0; row < t.rows.length; row++) {
        var nm = t.name.length > 22 ? t.name.slice(0, 21) + '…' : t.name;
        lanes.push({ run: x[0], label: x[3] + ' · ' + nm + (t.rows.length > 1 ? ' [' + row + ']' : ''), track: t, row: row, win: x[2] });
      }
    });
  });
  var labelW = 200, rowH = 16, width = Math.max(900, root.clientWidth - 40), dpr = window.devicePixelRatio || 1;
  canvas.width = width * dpr; canvas.height = (lanes.length * rowH + 10) * dpr;
  canvas.style.width = width + 'px'; canvas.style.height = (lanes.length * rowH + 10) + 'px';
  canvas.dataset.lanes = lanes.length;
  canvas.dataset.step = step === null ? '' : step;
  var ctx = canvas.getContext('2d');
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  ctx.font = '11px system-ui, sans-serif'; ctx.textBaseline = 'middle';
  var plotW = width - labelW, nameColor = new Map();
  lanes.forEach(function (L, k) {
    var y = k * rowH, m = L.run.model;
    ctx.fillStyle = L.label[0] === 'A' ? '#eef3fa' : '#faf0ee';
    ctx.fillRect(0, y, width, rowH - 1);
    ctx.fillStyle = '#333';
    ctx.fillText(L.label, 4, y + rowH / 2);
    var row = L.track.rows[L.row], i0 = m.firstEndingAfter(row, L.win.start), lastPx = -1;
    for (var j = i0; j < row.length; j++) {
      var i = row[j];
      if (m.ts[i] > L.win.end) break;
      var xa = labelW + (m.ts[i] - L.win.start) / span * plotW, xb = labelW + (m.ts[i] + m.dur[i] - L.win.start) / span * plotW;
      if (xb - xa < 1 && Math.floor(xa) === lastPx) continue;
      lastPx = Math.floor(xa);
      var c = m.cat[i], col;
      if (c === SS.CAT.derived) col = SS.COLORS[SS.DERIVED_KINDS[m.names[m.nameId[i]]]] || '#999';
      else if (c === SS.CAT.host || c === SS.CAT.other) {
        var key = m.names[m.nameId[i]];
        col = nameColor.get(key);
        if (!col) { col = SS.hashColor(key); nameColor.set(key, col); }
      } else col = SS.COLORS[c] || '#999';
      ctx.fillStyle = col;
      ctx.fillRect(Math.max(labelW, xa), y + 1, Math.max(1, xb - Math.max(labelW, xa)), rowH - 3);
    }
  });
};
