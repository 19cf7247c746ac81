/*
 * summary.js — the Summary view: the report's headline, tables and charts.
 *
 * How it works: reads report.json (SPEC §4) and builds DOM: headline cards with the
 * report's own figures (run.step_time_ns, the device latency, MFU/HFU, shares of
 * compute / exposed comm / idle, and bubble vs theory only when the run has a pipeline),
 * a stacked bar per rank and per step of the closed accounting (compute, exposed
 * comm, exposed mem, idle = span), the collective table and a bus-bandwidth chart,
 * idle causes per rank, the top kernels, clock alignment and warnings. Members it
 * does not know in detail are shown as generic tables, so report versions can grow.
 */
'use strict';

var SS = window.SS || (window.SS = {});

SS.BREAKDOWN = [
  { key: 'compute_ns', name: 'compute', color: SS.COLORS[1] },
  { key: 'exposed_comm_ns', name: 'exposed comm', color: SS.COLORS.exposed },
  { key: 'exposed_mem_ns', name: 'exposed mem', color: SS.COLORS[3] },
  { key: 'idle_ns', name: 'idle', color: SS.COLORS.idle }
];

SS.sumField = function (rows, key) {
  return rows.reduce(function (a, r) { return a + (r[key] || 0); }, 0);
};

/* Collective instances as one small chart per (op, group): a bar per instance in
 * time order, height = bus bandwidth; incomplete instances in grey. */
SS.instanceCharts = function (rows, bwKey) {
  var groups = new Map();
  rows.forEach(function (r) {
    var key = String(r.op || '') + ' ' + String(r.group || '');
    if (!groups.has(key)) groups.set(key, []);
    groups.get(key).push(r);
  });
  var box = SS.el('div', { className: 'instance-charts', id: 'collective-instance-charts' });
  groups.forEach(function (list, key) {
    var W = 520, H = 70, left = 44, max = 0;
    list.forEach(function (r) { if (r[bwKey] > max) max = r[bwKey]; });
    var svg = SS.svg('svg', { width: W, height: H + 18, class: 'chart instance-chart', 'data-op': key });
    var bw = (W - left) / list.length;
    list.forEach(function (r, k) {
      var h = max > 0 ? r[bwKey] / max * H : 0;
      var rect = SS.svg('rect', { x: left + k * bw, y: H - h, width: Math.max(0.5, bw - (bw > 3 ? 1 : 0)), height: Math.max(0.5, h),
                                  fill: r.complete === false ? '#bab0ac' : SS.COLORS[2] });
      var t = SS.svg('title');
      t.textContent = key + ' seq ' + r.seq + ': ' + (r[bwKey] || 0).toFixed(2) + ' GB/s, transfer ' + SS.formatNs(r.transfer_ns) +
        ', skew ' + SS.formatNs(r.skew_ns) + (r.complete === false ? ' (incomplete: left out of the statistics)' : '');
      rect.appendChild(t);
      svg.appendChild(rect);
    });
    var yl = SS.svg('text', { x: 2, y: 10 });
    yl.textContent = max.toFixed(1);
    svg.appendChild(yl);
    var xl = SS.svg('text', { x: left, y: H + 14 });
    xl.textContent = key + ' · ' + list.length + ' instances, GB/s (bus) in time order';
    svg.appendChild(xl);
    box.appendChild(svg);
  });
  return box;
};

/* The run's step time of the report (run.step_time_ns: the median iteration period of
 * the slowest rank); reports written before that field: the median of the steps'
 * spans. null when there are no steps. */
SS.headlineStepNs = function (report) {
  var run = (report && report.run) || {};
  if (run.step_time_ns !== undefined) return typeof run.step_time_ns === 'number' ? run.step_time_ns : null;
  var spans = [];
  ((report && report.ranks) || []).forEach(function (r) { (r.steps || []).forEach(function (s) { spans.push(s.span_ns); }); });
  return SS.median(spans);
};

/* A pipeline rank: the report gives bubble causes (possibly null) only for those;
 * reports written before bubble causes: a rank with a stage of a schedule of more
 * than one stage. */
SS.isPipelineRank = function (r, report) {
  if (!r || !r.totals) return false;
  if (r.totals.bubble_causes !== undefined) return true;
  var ranks = (report && report.ranks) || [], sched = report && report.run && report.run.schedule;
  if (ranks.some(function (x) { return x.totals && x.totals.bubble_causes !== undefined; })) return false;
  return !!(sched && sched.stages > 1 && r.pipeline_stage !== null && r.pipeline_stage !== undefined);
};

/* A row of a rank's window without the bubble fields when the rank has no pipeline:
 * the bubble of a rank without stages is only its idle time under another name. */
SS.withoutBubble = function (rank, row, report) {
  if (SS.isPipelineRank(rank, report)) return row;
  var out = {};
  for (var k in row) if (!/^bubble|^pipeline_comm_only/.test(k)) out[k] = row[k];
  return out;
};

SS.renderSummary = function (root, report, runName) {
  root.textContent = '';
  if (!report) {
    root.appendChild(SS.el('p', { className: 'missing', text: 'No report.json for this run: run `stepscope analyze RUN --json RUN/report.json` to get the summary.' }));
    return;
  }
  var ranks = report.ranks || [];
  var tot = { span_ns: 0 };
  ['span_ns', 'compute_ns', 'exposed_comm_ns', 'exposed_mem_ns', 'idle_ns', 'comm_ns', 'overlap_ns'].forEach(function (k) {
    tot[k] = SS.sumField(ranks.map(function (r) { return r.totals || {}; }), k);
  });
  var mfu = report.mfu || {};
  var run = report.run || {};
  function pct(a, of) { of = of === undefined ? tot.span_ns : of; return of ? (a / of * 100).toFixed(1) + ' %' : '—'; }
  // the headline is the report's (report_text.c "headline"): the run's step time as
  // analyze computed it (median iteration period of the slowest rank), never recomputed here
  var stepNs = SS.headlineStepNs(report);
  var cards = [
    ['run', runName || run.name || '', null],
    ['ranks', String(ranks.length), null],
    ['step time (median)', stepNs !== null ? SS.formatNs(stepNs) : 'no steps', stepNs, 'kpi-step-time'],
    ['MFU', mfu.mfu !== undefined && mfu.mfu !== null ? (mfu.mfu * 100).toFixed(1) + ' %' : '—', null],
    ['HFU', mfu.hfu !== undefined && mfu.hfu !== null ? (mfu.hfu * 100).toFixed(1) + ' %' : '—', null],
    // the time split: compute + exposed comm + exposed copies + idle = 100 % of the time
    ['compute', pct(tot.compute_ns), tot.compute_ns, 'kpi-compute'],
    ['exposed comm', pct(tot.exposed_comm_ns), tot.exposed_comm_ns, 'kpi-exposed-comm'],
    ['exposed copies', pct(tot.exposed_mem_ns), tot.exposed_mem_ns, 'kpi-exposed-copies'],
    ['idle', pct(tot.idle_ns), tot.idle_ns, 'kpi-idle'],
    ['overlap ratio', tot.comm_ns ? (tot.overlap_ns / tot.comm_ns * 100).toFixed(1) + ' %' : 'no communication', null]
  ];
  if (run.device_latency_ns !== undefined && run.device_latency_ns !== null)
    cards.splice(3, 0, ['device latency of a step', SS.formatNs(run.device_latency_ns), run.device_latency_ns, 'kpi-device-latency']);
  // bubble only where there is a pipeline: over the pipeline ranks, as the text report
  var pipeRanks = ranks.filter(function (r) { return SS.isPipelineRank(r, report); });
  if (SS.hasPipeline(report) && pipeRanks.length) {
    var pb = SS.sumField(pipeRanks.map(function (r) { return r.totals || {}; }), 'bubble_ns');
    var ps = SS.sumField(pipeRanks.map(function (r) { return r.totals || {}; }), 'span_ns');
    var theory = run.schedule && run.schedule.bubble_theory_ratio !== undefined ? run.schedule.bubble_theory_ratio : null;
    if (theory === null) pipeRanks.forEach(function (r) { if (typeof r.totals.bubble_theory_ratio === 'number') theory = r.totals.bubble_theory_ratio; });
    cards.push(['bubble / theory', pct(pb, ps) + ' / ' + (theory !== null ? (theory * 100).toFixed(1) + ' %' : '—'), null, 'kpi-bubble']);
  }
  root.appendChild(SS.el('div', { className: 'cards', id: 'headline' }, cards.map(function (c) {
    var card = SS.el('div', { className: 'kpi' }, [SS.el('div', { className: 'kpi-label', text: c[0] }), SS.el('div', { className: 'kpi-value', text: c[1] })]);
    if (c[3]) card.id = c[3];
    if (typeof c[2] === 'number') card.dataset.value = String(c[2]);
    return card;
  })));

  var series = SS.BREAKDOWN.map(function (b) { return { name: b.name, color: b.color }; });
  root.appendChild(SS.section('Time per rank (all profiled steps): compute + exposed comm + exposed mem + idle = span', [
    SS.stackedBars(ranks.map(function (r) {
      var t = r.totals || {};
      return { label: 'rank ' + r.rank, values: SS.BREAKDOWN.map(function (b) { return t[b.key]; }) };
    }), series),
    SS.table(ranks.map(function (r) { return SS.withoutBubble(r, Object.assign({ rank: r.rank }, r.totals || {}), report); }))
  ], 'summary-ranks'));

  // per step: one chart per rank, bars per step
  var stepCharts = ranks.map(function (r) {
    return SS.el('div', { className: 'step-chart' }, [
      SS.el('h4', { text: 'rank ' + r.rank }),
      SS.stackedBars((r.steps || []).map(function (s) {
        return { label: 'step ' + s.step, values: SS.BREAKDOWN.map(function (b) { return s[b.key]; }) };
      }), series, { width: 520, labelW: 70, barH: 12 })
    ]);
  });
  root.appendChild(SS.section('Time per step', [SS.el('div', { className: 'step-charts' }, stepCharts)], 'summary-steps'));

  // collectives
  var coll = SS.arraysIn(report.collectives, 'collectives');
  var collChildren = [];
  var rc = report.collectives || {};
  if (Array.isArray(rc.instances) && !rc.instances.length) {
    // nothing to tabulate: say in words what is missing, not a table of zeros and "none"
    collChildren.push(SS.el('p', { className: 'note', id: 'collectives-none', text:
      'No collective instances in these traces: they hold no per-collective records (NCCL\'s, which give each ' +
      'all-reduce, broadcast or send/recv its size, group and members). PyTorch profiler traces of gloo or ' +
      'other CPU backends, and GPU traces without NCCL\'s metadata, have none. So there are no per-instance ' +
      'timings, bandwidths, skews or straggler rankings here; communication time is still counted, from the ' +
      'communication ops (headline and per rank).' }));
    coll = coll.filter(function (c) { return c.title !== 'collectives'; });
  } else if (rc.incomplete !== undefined)
    collChildren.push(SS.el('p', { className: 'note', id: 'collectives-incomplete', text:
      rc.incomplete + ' incomplete instance' + (rc.incomplete === 1 ? '' : 's') + '. An instance is incomplete when a member is missing from the loaded traces ' +
      '(a trace cut short, a rank not loaded); a p2p send/recv is complete with its two ranks. Incomplete instances are listed (complete: no) ' +
      'but left out of the counts, bandwidths and straggler rankings.' }));
  coll.forEach(function (c) {
    var bwKey = null;
    if (c.rows.length) for (var k in c.rows[0]) if (/busbw/i.test(k)) bwKey = k;
    if (bwKey && /instances$/.test(c.title)) {
      // one labelled chart per op (and group): bus bandwidth of each instance in time order
      collChildren.push(SS.el('h4', { text: c.title + ': bus bandwidth per instance, one chart per op' }));
      collChildren.push(SS.instanceCharts(c.rows, bwKey));
    } else if (bwKey) {
      collChildren.push(SS.el('h4', { text: c.title + ': bus bandwidth (' + bwKey + ')' }));
      collChildren.push(SS.stackedBars(c.rows.map(function (r) {
        return { label: String(r.op || r.name || '') + ' ' + (r.comm || r.group || '') + ' ' + (r.bytes !== undefined ? SS.formatNumber(r.bytes) + 'B' : ''),
                 values: [r[bwKey]] };
      }), [{ name: bwKey, color: SS.COLORS[2] }], { labelW: 210, format: function (v) { return v.toFixed(1); } }));
    }
    collChildren.push(SS.el('h4', { text: c.title }));
    collChildren.push(SS.table(c.rows, null, 200));
  });
  if (!collChildren.length) collChildren.push(SS.el('p', { text: 'no collectives in the report' }));
  root.appendChild(SS.section('Collectives', collChildren, 'summary-collectives'));

  // idle causes
  var idle = SS.arraysIn(report.idle_breakdown, 'idle breakdown');
  var idleChildren = [];
  idle.forEach(function (c) {
    var causes = [];
    if (c.rows.length) for (var k in c.rows[0]) if (/_ns$/.test(k) && typeof c.rows[0][k] === 'number' && !/^(span|total)/.test(k)) causes.push(k);
    if (causes.length && c.rows.length > 1) {
      var palette = ['#4e79a7', '#f28e2b', '#e15759', '#76b7b2', '#59a14f', '#edc948'];
      idleChildren.push(SS.stackedBars(c.rows.map(function (r) {
        return { label: (r.rank !== undefined ? 'rank ' + r.rank : '') + (r.stream ? ' ' + r.stream : ''), values: causes.map(function (k) { return r[k]; }) };
      }), causes.map(function (k, i) { return { name: k.replace(/_ns$/, ''), color: palette[i % palette.length] }; }), { labelW: 200 }));
    }
    idleChildren.push(SS.table(c.rows, null, 200));
  });
  root.appendChild(SS.section('Idle causes', idleChildren.length ? idleChildren : [SS.el('p', { text: 'none reported' })], 'summary-idle'));

  var kern = SS.arraysIn(report.kernels, 'kernels');
  root.appendChild(SS.section('Kernels', kern.length ? kern.map(function (c) { return SS.table(c.rows, null, 50); }) : [SS.el('p', { className: 'none', text: 'none' })], 'summary-kernels'));

  // PyTorch traces with shapes: the ops on the device's roofline (stepscope ops lists them)
  var roof = SS.roofline(report.mfu_from_op_flops);
  if (roof) {
    var om = report.mfu_from_op_flops;
    root.appendChild(SS.section('Roofline of the ops (' + (om.mfu !== null && om.mfu !== undefined ? 'MFU from op FLOPs ' +
      (om.mfu * 100).toFixed(1) + ' %; ' : '') + 'datasheet ceilings; `stepscope ops` lists every op)', [roof], 'summary-roofline'));
  }
  var extra = [];
  ['mfu', 'alignment', 'run'].forEach(function (k) {
    if (report[k]) SS.arraysIn(report[k], k).forEach(function (c) { extra.push(SS.el('h4', { text: c.title }), SS.table(c.rows, null, 64)); });
  });
  root.appendChild(SS.section('Run, MFU and clock alignment', extra, 'summary-run'));
  var warns = report.warnings || [];
  root.appendChild(SS.section('Warnings (' + warns.length + ')', [warns.length ? SS.el('ul', {}, warns.map(function (w) {
    return SS.el('li', { text: typeof w === 'string' ? w : JSON.stringify(w) });
  })) : SS.el('p', { className: 'none', text: 'none' })], 'summary-warnings'));
};
