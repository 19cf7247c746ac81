/*
 * loader.js — finds the runs to show and streams their files into models.
 *
 * Where runs come from, in order: (1) data inlined by `stepscope view --html`
 * (window.STEPSCOPE_INLINE names <script type="application/json"> elements), (2) the
 * `stepscope view` server's `api/runs` listing, (3) files the user picks or drops.
 * A trace is read as a stream of byte chunks (fetch body, Blob.stream(), or slices of
 * the inlined text), gunzipped with DecompressionStream when it is .gz, and fed to a
 * trace_parse.js Parser. The parser runs in a Web Worker made from a Blob URL of its
 * own source text (no network, works in the single-file page too): the worker fetches
 * URLs and streams files itself; inlined text is encoded and handed over in slices.
 * It reports progress while reading and transfers the finished columns back. When no
 * worker can be started (a policy forbids it), the same parser runs on the page,
 * yielding to the browser between chunks. `?chunk=N` in the page URL re-cuts every
 * chunk to N bytes (tests use it to put chunk boundaries everywhere); `?worker=0`
 * forces parsing on the page.
 */
'use strict';

var SS = window.SS || (window.SS = {});

SS.chunkOverride = (function () {
  var m = /[?&]chunk=(\d+)/.exec(location.search);
  return m ? Math.max(1, +m[1]) : 0;
})();
SS.useWorker = !/[?&]worker=0/.test(location.search);

function yieldToBrowser() {
  return new Promise(function (resolve) { setTimeout(resolve, 0); });
}

function isGzipName(name) { return /\.gz$/i.test(name || ''); }

/* Runs in the worker (stringified): F is SS.traceParserFactory(). */
SS.traceWorkerMain = function (F) {
  var parser = null, chunk = 0, done = 0, total = 0, lastPost = 0;
  var t0 = performance.now(), firstByte = -1, parseMs = 0;   // timings, for the bench
  function progress(force) {
    var now = Date.now();
    if (force || now - lastPost > 80) { lastPost = now; self.postMessage({ type: 'progress', done: done, total: total }); }
  }
  function feed(bytes) {
    var a = performance.now();
    if (firstByte < 0) firstByte = a - t0;
    done += bytes.length;
    if (chunk) for (var k = 0; k < bytes.length; k += chunk) parser.push(bytes.subarray(k, Math.min(bytes.length, k + chunk)));
    else parser.push(bytes);
    parseMs += performance.now() - a;
    progress(false);
  }
  function finish() {
    progress(true);
    var a = performance.now(), out = parser.finish();
    out.timing = { firstByteMs: firstByte, parseMs: parseMs, buildMs: performance.now() - a, workerMs: performance.now() - t0 };
    self.postMessage({ type: 'done', result: out }, F.transferList(out));
  }
  function fail(e) { self.postMessage({ type: 'error', message: String(e && e.message ? e.message : e) }); }
  async function pump(stream) {
    var reader = stream.getReader();
    for (;;) {
      var r = await reader.read();
      if (r.done) break;
      feed(r.value);
    }
    finish();
  }
  self.onmessage = function (ev) {
    var m = ev.data;
    try {
      if (m.type === 'start') {
        chunk = m.chunk || 0;
        if (m.url) {
          fetch(m.url).then(function (resp) {
            if (!resp.ok) throw new Error(m.label + ': HTTP ' + resp.status);
            var body = resp.body;
            total = m.gzip ? 0 : +(resp.headers.get('Content-Length') || 0);
            if (m.gzip) body = body.pipeThrough(new DecompressionStream('gzip'));
            parser = new F.Parser(total);
            return pump(body);
          }).catch(fail);
        } else if (m.file) {
          total = m.gzip ? 0 : m.file.size;
          parser = new F.Parser(total);
          var s = m.file.stream();
          pump(m.gzip ? s.pipeThrough(new DecompressionStream('gzip')) : s).catch(fail);
        } else {
          total = m.total || 0;
          parser = new F.Parser(total);
        }
      } else if (m.type === 'chunk') {
        feed(m.bytes);
      } else if (m.type === 'end') {
        finish();
      }
    } catch (e) {
      fail(e);
    }
  };
};

SS.workerSource = function () {
  return "'use strict';\nvar F = (" + SS.traceParserFactory.toString() + ')();\n(' + SS.traceWorkerMain.toString() + ')(F);\n';
};

/* A parser worker, or null when workers cannot be made here. */
SS.makeParserWorker = function () {
  if (!SS.useWorker || typeof Worker === 'undefined' || typeof Blob === 'undefined') return null;
  try {
    var url = URL.createObjectURL(new Blob([SS.workerSource()], { type: 'text/javascript' }));
    var w = new Worker(url);
    w.blobUrl = url;
    return w;
  } catch (e) {
    return null;
  }
};

/* The inlined text of a --html page, as encoded byte slices. */
function inlineSlices(src, onSlice) {
  var text = document.getElementById(src.elementId).textContent, enc = new TextEncoder(), step = 1 << 22;
  for (var pos = 0; pos < text.length; pos += step) onSlice(enc.encode(text.slice(pos, pos + step)), pos + step >= text.length);
  return text.length;
}

/* Parses src in worker w; rejects with .workerFailed when the worker could not run. */
SS.parseInWorker = function (w, src, onProgress) {
  return new Promise(function (resolve, reject) {
    var settled = false;
    function end() { settled = true; w.terminate(); URL.revokeObjectURL(w.blobUrl); }
    w.onmessage = function (ev) {
      var m = ev.data;
      if (m.type === 'progress') onProgress(m.done, m.total);
      else if (m.type === 'done') { end(); resolve(m.result); }
      else if (m.type === 'error') { end(); reject(new Error(m.message)); }
    };
    w.onerror = function (ev) {
      if (settled) return;
      if (ev && ev.preventDefault) ev.preventDefault();
      end();
      var e = new Error('parser worker failed: ' + (ev && ev.message));
      e.workerFailed = true;
      reject(e);
    };
    var start = { type: 'start', chunk: SS.chunkOverride, label: src.url || src.name || 'trace' };
    if (src.kind === 'url') {
      start.url = new URL(src.url, location.href).href;
      start.gzip = isGzipName(src.url);
      w.postMessage(start);
    } else if (src.kind === 'file') {
      start.file = src.file;
      start.gzip = isGzipName(src.file.name);
      w.postMessage(start);
    } else {
      w.postMessage(start);
      inlineSlices(src, function (bytes) { w.postMessage({ type: 'chunk', bytes: bytes }, [bytes.buffer]); });
      w.postMessage({ type: 'end' });
    }
  });
};

/* A ReadableStream of the source's bytes (for parsing on the page). */
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

/* Parses src on the page's thread, yielding between chunks. */
SS.parseOnPage = async function (src, onProgress) {
  var opened = await SS.openStream(src);
  var parser = new (SS.traceParser().Parser)(opened.total);
  var reader = opened.stream.getReader(), done = 0, lastYield = performance.now();
  for (;;) {
    var r = await reader.read();
    if (r.done) break;
    var chunk = r.value;
    done += chunk.length;
    if (SS.chunkOverride) {
      for (var k = 0; k < chunk.length; k += SS.chunkOverride) {
        parser.push(chunk.subarray(k, Math.min(chunk.length, k + SS.chunkOverride)));
      }
    } else {
      parser.push(chunk);
    }
    if (performance.now() - lastYield > 60) {
      onProgress(done, opened.total);
      await yieldToBrowser();
      lastYield = performance.now();
    }
  }
  onProgress(done, opened.total);
  return parser.finish();
};

SS.traceParser = function () {
  if (!SS.parserModule) SS.parserModule = SS.traceParserFactory();
  return SS.parserModule;
};

SS.loadTrace = async function (src, onProgress) {
  var parsed = null, w = SS.makeParserWorker();
  SS.lastParseMode = 'page';
  if (w) {
    try {
      parsed = await SS.parseInWorker(w, src, onProgress);
      SS.lastParseMode = 'worker';
    } catch (e) {
      if (!e.workerFailed) throw e;
      console.info('stepscope viewer: ' + e.message + '; parsing on the page');
    }
  }
  if (!parsed) parsed = await SS.parseOnPage(src, onProgress);
  return new SS.TraceModel(parsed);
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
