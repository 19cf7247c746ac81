/*
 * loader.js — finds the runs to show and streams their files into models.
 *
 * Where runs come from, in order: (1) data inlined by `stepscope view --html`
 * (window.STEPSCOPE_INLINE names <script type="application/json"> elements), (2) the
 * `stepscope view` server's `api/runs` listing, (3) files the user picks or drops.
 * Every trace is read as a stream of byte chunks (fetch body, Blob.stream(), or
 * slices of the inlined text), gunzipped with DecompressionStream when it is .gz,
 * and fed to SS.JsonEventSplitter; progress is reported per chunk and the loop
 * yields to the browser between chunks so the page stays responsive.
 * `?chunk=N` in the page URL re-cuts every chunk to N bytes (tests use it to put
 * chunk boundaries everywhere).
 */
'use strict';

var SS = window.SS || (window.SS = {});

SS.chunkOverride = (function () {
  var m = /[?&]chunk=(\d+)/.exec(location.search);
  return m ? Math.max(1, +m[1]) : 0;
})();

function yieldToBrowser() {
  return new Promise(function (resolve) { setTimeout(resolve, 0); });
}

function concatChunks(list, total) {
  if (list.length === 1) return list[0];
  var out = new Uint8Array(total), pos = 0;
  for (var k = 0; k < list.length; k++) { out.set(list[k], pos); pos += list[k].length; }
  return out;
}

/* Streams a ReadableStream of bytes into the splitter. */
SS.pumpStream = async function (stream, total, splitter, onProgress) {
  var reader = stream.getReader(), done = 0, lastYield = performance.now();
  var pending = [], pendingBytes = 0;
  for (;;) {
    var r = await reader.read();
    if (r.done) {
      if (pendingBytes) splitter.push(concatChunks(pending, pendingBytes));
      break;
    }
    var chunk = r.value;
    done += chunk.length;
    // coalesce the browser's small chunks (often 64 KB) into ~1 MB pieces: fewer
    // JSON.parse calls and carry-over copies
    if (!SS.chunkOverride) {
      pending.push(chunk);
      pendingBytes += chunk.length;
      if (pendingBytes < (1 << 20)) continue;
      chunk = concatChunks(pending, pendingBytes);
      pending = []; pendingBytes = 0;
    }
    if (SS.chunkOverride) {
      for (var k = 0; k < chunk.length; k += SS.chunkOverride) {
        splitter.push(chunk.subarray(k, Math.min(chunk.length, k + SS.chunkOverride)));
      }
    } else {
      splitter.push(chunk);
    }
    if (performance.now() - lastYield > 60) {
      onProgress(done, total);
      await yieldToBrowser();
      lastYield = performance.now();
    }
  }
  splitter.finish();
  onProgress(done, total);
};

function isGzipName(name) { return /\.gz$/i.test(name || ''); }

/* A source: {name, kind: 'url'|'file'|'inline', url|file|elementId}. */
SS.openStream = async function (src) {
  if (src.kind === 'url') {
    var resp = await fetch(src.url);
    if (!resp.ok) throw new Error(src.url + ': HTTP ' + resp.status);
    var total = +(resp.headers.get('Content-Length') || 0);
    var body = resp.body;
    if (isGzipName(src.url)) { body = body.pipeThrough(new DecompressionStream('gzip')); total = 0; }
    return { stream: body, total: total };
  }
  if (src.kind === 'file') {
    var s = src.file.stream();
    if (isGzipName(src.file.name)) return { stream: s.pipeThrough(new DecompressionStream('gzip')), total: 0 };
    return { stream: s, total: src.file.size };
  }
  // inline: the text of a script element, handed over in slices
  var text = document.getElementById(src.elementId).textContent, pos = 0, enc = new TextEncoder();
  var sliceLen = 1 << 20;
  return {
    total: text.length,
    stream: new ReadableStream({
      pull: function (ctl) {
        if (pos >= text.length) { ctl.close(); return; }
        ctl.enqueue(enc.encode(text.slice(pos, pos + sliceLen)));
        pos += sliceLen;
      }
    })
  };
};

SS.loadTrace = async function (src, onProgress) {
  var model = new SS.TraceModel();
  var splitter = new SS.JsonEventSplitter(function (events) { model.addEvents(events); });
  var opened = await SS.openStream(src);
  await SS.pumpStream(opened.stream, opened.total, splitter, onProgress);
  model.metadata = splitter.topLevel.metadata || {};
  model.finish();
  return model;
};

/* The report is small (per rank, per step): read as a stream, parsed once. */
SS.loadReport = async function (src) {
  var opened = await SS.openStream(src);
  var reader = opened.stream.getReader(), parts = [], dec = new TextDecoder();
  for (;;) {
    var r = await reader.read();
    if (r.done) break;
    parts.push(dec.decode(r.value, { stream: true }));
  }
  parts.push(dec.decode());
  return JSON.parse(parts.join(''));
};

/* The list of runs: [{id, name, trace: src|null, report: src|null, missing: [..], notes: [..]}] */
SS.discoverRuns = async function () {
  if (window.STEPSCOPE_INLINE) {
    return window.STEPSCOPE_INLINE.runs.map(function (r) {
      return { id: r.id, name: r.name, missing: r.missing || [], notes: r.notes || [],
               trace: r.trace ? { kind: 'inline', elementId: r.trace, name: 'trace.json' } : null,
               report: r.report ? { kind: 'inline', elementId: r.report, name: 'report.json' } : null };
    });
  }
  if (location.protocol === 'http:' || location.protocol === 'https:') {
    try {
      var resp = await fetch('api/runs');
      if (resp.ok) {
        var j = await resp.json();
        return j.runs.map(function (r) {
          return { id: r.id, name: r.name, missing: r.missing || [], notes: r.notes || [],
                   trace: r.trace ? { kind: 'url', url: r.trace } : null,
                   report: r.report ? { kind: 'url', url: r.report } : null };
        });
      }
    } catch (e) { /* not served by stepscope view: fall through to the file picker */ }
  }
  return null;
};

/* Runs from picked/dropped files: trace*.json[.gz] and report*.json, by name. */
SS.runFromFiles = function (files, id) {
  var run = { id: id, name: '', trace: null, report: null, missing: [], notes: [] };
  Array.prototype.forEach.call(files, function (f) {
    if (/report.*\.json$/i.test(f.name)) run.report = { kind: 'file', file: f };
    else if (/\.json(\.gz)?$/i.test(f.name)) run.trace = { kind: 'file', file: f };
    run.name = run.name || f.name;
  });
  if (!run.trace) run.missing.push('trace.json');
  if (!run.report) run.missing.push('report.json');
  return run;
};
