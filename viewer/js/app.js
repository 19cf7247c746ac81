/*
 * app.js — wires the viewer together: loading, tabs, toolbar, detail panel, search.
 * The Experts tab (experts.js) is shown only when run A's report has a `moe` section, the
 * Heatmap tab (heatmap.js) when run A has a heatmap file. A run without a timeline but with a
 * heatmap (`stepscope view` of a run too large for one) opens on the heatmap, with the summary
 * when its report is there, and the timeline's tabs hidden.
 *
 * How it works: on load it discovers the runs (SS.discoverRuns), streams run A's
 * trace and report with a progress bar, builds the timeline, and then loads run B
 * (if any) in the background for the Compare view. document.body.dataset.state goes
 * loading → ready (or error) so that tests and benches know when the page is
 * interactive; window.stepscope exposes read-only introspection for them
 * (groups, overlay counts, slice positions, frame times).
 */
'use strict';

var SS = window.SS || (window.SS = {});

(function () {
  var app = { runs: [], A: null, B: null, timeline: null, matches: [], matchPos: -1 };
  var $ = function (id) { return document.getElementById(id); };

  function setStatus(text) { $('status').textContent = text; }
  function setState(s) { document.body.dataset.state = s; }
  function fail(err) {
    console.warn('stepscope viewer:', err);
    $('progress').hidden = true;
    $('error').hidden = false;
    $('error').textContent = String(err && err.message ? err.message : err);
    setState('error');
  }

  function progress(label) {
    return function (done, total) {
      var p = $('progress');
      p.hidden = false;
      if (total) { p.max = total; p.value = done; } else p.removeAttribute('value');
      setStatus(label + ' ' + SS.formatNumber(done) + 'B' + (total ? ' of ' + SS.formatNumber(total) + 'B' : ''));
    };
  }

  async function loadRun(run, label) {
    var r = { name: run.name, run: run, model: null, report: null };
    // the trace (the long part, in workers) starts first; the report is read meanwhile
    var trace = run.trace ? SS.loadTrace(run.trace, progress('reading ' + label)) : null;
    if (trace) trace.catch(function () { /* reported when awaited below */ });
    if (run.report) {
      try { r.report = await SS.loadReport(run.report); } catch (e) { run.notes.push('report.json: ' + e.message); }
    }
    if (run.heatmap) { /* `stepscope analyze --heatmap`, written by `stepscope view` */
      try { r.heatmap = await SS.loadReport(run.heatmap); } catch (e) { run.notes.push('heatmap.json: ' + e.message); }
    }
    if (run.diff) { /* `stepscope diff A B --json`, written by `stepscope view --compare` */
      try { r.diff = await SS.loadReport(run.diff); } catch (e) { run.notes.push('diff.json: ' + e.message); }
    }
    if (trace) r.model = await trace;
    return r;
  }

  function showTab(name) {
    document.querySelectorAll('.tab').forEach(function (t) { t.classList.toggle('active', t.dataset.tab === name); });
    document.querySelectorAll('.view').forEach(function (v) { v.hidden = v.id !== 'view-' + name; });
    if (name === 'timeline' && app.timeline) app.timeline.resize();
    if (name === 'heatmap' && app.heatmap) app.heatmap.resize();
    if (name === 'pipeline' && app.A && app.A.model && !app.pipelineDone) {
      SS.renderPipeline($('view-pipeline'), app.A.model, app.A.report); // on the first steady step
      app.pipelineDone = true;
    }
    if (name === 'compare') renderCompare();
    if (name === 'plan') SS.renderPlanView($('view-plan'), null);
    document.body.dataset.tab = name;
  }

  function renderCompare() {
    if (app.A) SS.renderCompare($('compare-body'), app.A, app.B, { source: app.runs[0] && app.runs[0].source, loadingB: app.loadingB });
  }

  function describeSlice(i, flows) {
    var m = app.A.model, panel = $('details');
    panel.textContent = '';
    if (i < 0) { panel.appendChild(SS.el('p', { className: 'note', text: 'Click a slice to see its details.' })); return; }
    var t = m.tracks[m.track[i]], g = m.groups.get(t.pid);
    var rows = [
      ['name', m.names[m.nameId[i]]], ['category', SS.CATEGORIES[m.cat[i]]], ['rank', g.name], ['track', t.name],
      ['start', SS.formatTime(m.ts[i] - m.minTs)], ['duration', SS.formatTime(m.dur[i])],
      ['end', SS.formatTime(m.ts[i] + m.dur[i] - m.minTs)]
    ];
    var args = m.argsOf(i) || {};
    for (var k in args) rows.push(['args.' + k, Array.isArray(args[k]) && !args[k].length ? 'none' : typeof args[k] === 'object' ? JSON.stringify(args[k]) : String(args[k])]);
    panel.appendChild(SS.el('h3', { id: 'detail-name', text: m.names[m.nameId[i]] }));
    panel.appendChild(SS.el('table', { className: 'kv', id: 'detail-table' }, rows.map(function (r) {
      return SS.el('tr', {}, [SS.el('th', { text: r[0] }), SS.el('td', { text: r[1] })]);
    })));
    flows.forEach(function (f) {
      var outgoing = f.from.track === m.track[i];
      var end = outgoing ? f.to : f.from, hit = m.sliceAt(m.tracks[end.track], end.ts, 0);
      if (!hit) return;
      var a = SS.el('a', { href: '#', className: 'flow-link', text: (outgoing ? 'launches → ' : '← launched by ') + m.names[m.nameId[hit.slice]] });
      a.addEventListener('click', function (e) { e.preventDefault(); app.timeline.select(hit.slice, hit.row); app.timeline.reveal(hit.slice); });
      panel.appendChild(SS.el('div', {}, [a]));
    });
    var z = SS.el('button', { text: 'Zoom to slice (F)' });
    z.addEventListener('click', function () { app.timeline.zoomToSelection(); });
    panel.appendChild(z);
  }

  function runSearch(dir) {
    var q = $('search').value.trim();
    if (!q || !app.timeline) return;
    if (q !== app.lastQuery) {
      app.matches = app.A.model.search(q);
      app.lastQuery = q;
      app.matchPos = -1;
    }
    if (!app.matches.length) { $('search-count').textContent = '0 matches'; return; }
    app.matchPos = (app.matchPos + dir + app.matches.length) % app.matches.length;
    var i = app.matches[app.matchPos];
    app.timeline.select(i);
    app.timeline.reveal(i);
    $('search-count').textContent = (app.matchPos + 1) + ' / ' + app.matches.length;
  }

  function buildTimeline() {
    var m = app.A.model;
    var tl = new SS.Timeline($('timeline-canvas'), m, {
      onSelect: describeSlice,
      onHover: function (i, t) {
        $('hover').textContent = (i >= 0 ? m.names[m.nameId[i]] + ' · ' + SS.formatTime(m.dur[i]) + ' · ' : '') + 't=' + SS.formatTime(t - m.minTs);
      }
    });
    app.timeline = tl;
    ['exposed', 'idle', 'bubble', 'critical'].forEach(function (k) {
      var cb = $('ov-' + k);
      cb.checked = true;
      cb.parentNode.title = tl.overlayCount[k] + ' slices';
      // bubble only where there is a pipeline, the critical path where the export has its track
      if (k === 'bubble' || k === 'critical') cb.parentNode.hidden = !tl.overlayCount[k];
      cb.addEventListener('change', function () { tl.overlays[k] = cb.checked; tl.request(); });
    });
    $('ov-flows').addEventListener('change', function () { tl.showFlows = $('ov-flows').checked; tl.request(); });
    // legend of the categories with colours of their own (expert parallelism's all-to-all phases)
    var mask = 0, legend = $('phase-legend');
    m.tracks.forEach(function (t) { mask |= t.catMask; });
    legend.textContent = '';
    SS.PHASE_LEGEND.forEach(function (e) {
      if (!(mask & (1 << e.cat))) return;
      var item = SS.el('span', { className: 'legend-item', 'data-category': SS.CATEGORIES[e.cat] }, [
        SS.el('span', { className: 'swatch', style: 'background:' + SS.COLORS[e.cat] }), e.name]);
      legend.appendChild(item);
    });
    legend.hidden = !legend.childNodes.length;
    if (!legend.hidden) legend.insertBefore(document.createTextNode('Expert parallelism:'), legend.firstChild);
    describeSlice(-1, []);
  }

  function bindUi() {
    document.querySelectorAll('.tab').forEach(function (t) { t.addEventListener('click', function () { showTab(t.dataset.tab); }); });
    $('search').addEventListener('keydown', function (e) {
      if (e.key === 'Enter') { e.preventDefault(); runSearch(e.shiftKey ? -1 : 1); }
      e.stopPropagation();
    });
    $('search-next').addEventListener('click', function () { runSearch(1); });
    $('search-prev').addEventListener('click', function () { runSearch(-1); });
    $('zoom-sel').addEventListener('click', function () { if (app.timeline) app.timeline.zoomToSelection(); });
    $('zoom-all').addEventListener('click', function () { if (app.timeline) app.timeline.setWindow(app.A.model.minTs, app.A.model.maxTs); });
    $('open-perfetto').addEventListener('click', function () { SS.openInPerfetto(app.A && app.A.run, setStatus); });
    $('open-perfetto').disabled = !navigator.onLine;
    window.addEventListener('online', function () { $('open-perfetto').disabled = false; });
    window.addEventListener('offline', function () { $('open-perfetto').disabled = true; });
    document.addEventListener('keydown', function (e) {
      if (e.target && (e.target.tagName === 'INPUT' || e.target.tagName === 'SELECT')) return;
      if (e.ctrlKey || e.metaKey || e.altKey) return;
      if (document.body.dataset.tab !== 'timeline' || !app.timeline) return;
      if (e.key === '/') { e.preventDefault(); $('search').focus(); return; }
      if (app.timeline.key(e)) e.preventDefault();
    });
    $('pick-a').addEventListener('change', function () { startFromFiles(); });
    $('pick-b').addEventListener('change', function () { startFromFiles(); });
    document.addEventListener('dragover', function (e) { e.preventDefault(); });
    document.addEventListener('drop', function (e) {
      e.preventDefault();
      if (e.dataTransfer.files.length) start([SS.runFromFiles(e.dataTransfer.files, 'a')]);
    });
  }

  function startFromFiles() {
    var runs = [];
    if ($('pick-a').files.length) runs.push(SS.runFromFiles($('pick-a').files, 'a'));
    if ($('pick-b').files.length) runs.push(SS.runFromFiles($('pick-b').files, 'b'));
    if (runs.length) start(runs);
  }

  async function start(runs) {
    try {
      app.runs = runs;
      app.pipelineDone = false;
      setState('loading');
      $('picker').hidden = true;
      $('error').hidden = true;
      var a = runs[0];
      $('run-name').textContent = a.name + (runs[1] ? '  vs  ' + runs[1].name : '');
      var notes = [];
      runs.forEach(function (r) {
        if (r.missing.length) notes.push(r.name + ': missing ' + r.missing.join(', '));
        r.notes.forEach(function (n) { notes.push(r.name + ': ' + n); });
      });
      $('notes').textContent = notes.join(' · ');
      var t0 = performance.now();
      app.A = await loadRun(a, a.name);
      $('tab-heatmap').hidden = !app.A.heatmap;
      if (app.A.heatmap) app.heatmap = SS.renderHeatmap($('view-heatmap'), app.A.heatmap, { runName: a.name, noTimeline: app.A.model ? null : (a.noTimeline || 'no trace.json') });
      if (!app.A.model && app.A.heatmap) return heatmapOnly(a, t0);
      if (!app.A.model) throw new Error(a.name + ': no trace.json to show (' + (a.missing.join(', ') || 'not found') + ')');
      SS.renderSummary($('view-summary'), app.A.report, a.name);
      // the Experts tab only for a run whose report has expert load (a `moe` section)
      var moe = SS.hasMoe(app.A.report);
      $('tab-experts').hidden = !moe;
      if (moe) SS.renderExperts($('view-experts'), app.A.report);
      else $('view-experts').textContent = '';
      if (!moe && document.body.dataset.tab === 'experts') document.body.dataset.tab = 'timeline';
      buildTimeline();
      app.timeline.render();
      app.interactiveAt = performance.now();   // navigation start -> first frame drawn
      $('progress').hidden = true;
      app.loadMs = performance.now() - t0;
      setStatus(SS.formatNumber(app.A.model.eventCount) + ' events, ' + app.A.model.groupList.length + ' ranks, loaded in ' + (app.loadMs / 1000).toFixed(2) + ' s');
      showTab(document.body.dataset.tab || 'timeline');
      if (runs[1]) {
        setState('loading-b');
        app.loadingB = true;
        if (document.body.dataset.tab === 'compare') renderCompare();
        var tb = performance.now();
        app.B = await loadRun(runs[1], runs[1].name);
        app.loadingB = false;
        $('progress').hidden = true;
        setStatus('A: ' + SS.formatNumber(app.A.model.eventCount) + ' events, ' + app.A.model.groupList.length + ' ranks, loaded in ' + (app.loadMs / 1000).toFixed(2) + ' s · B: ' +
                  (app.B.model ? SS.formatNumber(app.B.model.eventCount) + ' events, ' + app.B.model.groupList.length + ' ranks' : 'no trace') +
                  ', loaded in ' + ((performance.now() - tb) / 1000).toFixed(2) + ' s');
        if (document.body.dataset.tab === 'compare') renderCompare();
      }
      setState('ready');
    } catch (e) {
      fail(e);
    }
  }

  /* A run shown by its heatmap alone: the timeline's tabs hidden, the summary when there is a report. */
  function heatmapOnly(a, t0) {
    ['timeline', 'pipeline', 'compare'].forEach(function (t) { document.querySelector('.tab[data-tab=' + t + ']').hidden = true; });
    $('open-perfetto').hidden = true;
    document.querySelector('.tab[data-tab=summary]').hidden = !app.A.report;
    if (app.A.report) SS.renderSummary($('view-summary'), app.A.report, a.name);
    $('tab-experts').hidden = true;
    showTab('heatmap');
    app.interactiveAt = performance.now();   // navigation start -> heatmap drawn
    app.loadMs = performance.now() - t0;
    $('progress').hidden = true;
    var h = app.A.heatmap;
    setStatus('no timeline · heatmap of ' + SS.formatNumber(h.ranks.length) + ' ranks × ' + h.steps.length + ' steps, loaded in ' + (app.loadMs / 1000).toFixed(2) + ' s');
    setState('ready');
  }

  window.stepscope = {
    app: app,
    /* The heatmap's state, for tests and the bench (null without one). */
    heatmap: function () {
      var h = app.heatmap;
      if (!h) return null;
      return { ranks: h.ranks.length, steps: h.steps.length, metric: h.metric, drawMs: h.drawMs, drawn: h.drawn || 0,
               selected: Array.from(h.selected), command: h.command.value, rowsPerPx: h.rowsPerPx, row0: h.row0,
               width: h.canvas.width, height: h.canvas.height };
    },
    groups: function () {
      var m = app.A && app.A.model;
      if (!m) return [];
      return m.groupList.map(function (g) {
        return { name: g.name, rank: g.rank, tracks: g.tracks.map(function (t) { return { name: t.name, slices: t.count, rows: t.rows.length }; }),
                 counters: g.counters.map(function (c) { return c.name; }), overlays: Object.keys(g.overlayTracks || {}) };
      });
    },
    overlayCount: function () { return app.timeline ? app.timeline.overlayCount : null; },
    /* Brings the first slice whose name contains `query` into view; returns its client point. */
    locate: function (query) {
      var m = app.A.model, hits = m.search(query);
      if (!hits.length) return null;
      var i = hits[Math.floor(hits.length / 2)];
      app.timeline.selectedRow = m.rowOf(i);
      app.timeline.reveal(i);
      app.timeline.render();
      var p = app.timeline.clientPointOf(i);
      return { x: p.x, y: p.y, slice: i, name: m.names[m.nameId[i]] };
    },
    frame: function () { app.timeline.render(); return app.timeline.lastFrameMs; },
    loadMs: function () { return app.loadMs; },
    interactiveAt: function () { return app.interactiveAt; },
    /* Times n pan/zoom frames (each drawn synchronously); returns their durations in ms.
     * flush: each frame also reads one pixel back, which makes the browser rasterize
     * what the frame recorded (without it, canvas calls are only recorded here and
     * rasterized later, outside the measured time). */
    benchFrames: function (n, flush) {
      var tl = app.timeline, out = [];
      tl.setWindow(app.A.model.minTs, app.A.model.maxTs);
      for (var k = 0; k < n; k++) {
        var op = k % 4;
        if (op === 0) tl.zoom(0.7); else if (op === 1) tl.pan(0.05); else if (op === 2) tl.pan(-0.03); else if (k % 16 === 15) tl.zoom(1 / 0.7 / 0.7 / 0.7); else tl.scroll(40);
        var t = performance.now();
        tl.render();
        if (flush) tl.ctx.getImageData(0, 0, 1, 1);
        out.push(performance.now() - t);
      }
      return out;
    },
    flowCount: function () { return app.A.model.flows.n; },
    /* Slices per category name of run A (categories with none left out). */
    categoryCounts: function () {
      var m = app.A.model, n = new Array(SS.CATEGORIES.length).fill(0), out = {};
      for (var i = 0; i < m.n; i++) n[m.cat[i]]++;
      n.forEach(function (c, k) { if (c) out[SS.CATEGORIES[k]] = c; });
      return out;
    },
    /* The colour the timeline draws slice i in. */
    colorOf: function (i) { return app.timeline.colorOf(i); },
    parseMode: function () { return SS.lastParseMode; }
  };

  document.addEventListener('DOMContentLoaded', async function () {
    bindUi();
    document.body.dataset.tab = 'timeline';
    var runs = await SS.discoverRuns();
    if (!runs || !runs.length) {
      $('picker').hidden = false;
      setStatus('Open a run: pick its trace.json and report.json (or drop them here).');
      setState('idle');
      return;
    }
    start(runs);
  });
})();
