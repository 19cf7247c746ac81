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
 * It reports progress while reading and transfers the finished columns back. A big
 * uncompressed trace served with byte ranges (or a picked file) is split over two
 * workers, each parsing about half of the bytes at the same time; the first joins
 * the second's columns into exactly the model one worker would have built (see
 * Parser.absorb) or, when it cannot guarantee that, reads the rest itself. When no
 * worker can be started (a policy forbids it), the same parser runs on the page,
 * yielding to the browser between chunks. `?chunk=N` in the page URL re-cuts every
 * chunk to N bytes (tests use it to put chunk boundaries everywhere); `?worker=0`
 * forces parsing on the page; `?split=0` keeps to one worker (planSplit).
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

/*
 * Runs in the worker (stringified): F is SS.traceParserFactory(). The 'start' message
 * names the source (url, or file: a File/Blob; else the page posts 'chunk's and
 * 'end') and the worker's role:
 *   whole  reads everything and posts 'done' with the model;
 *   head   reads [0, cut), then posts 'head-ready' (it stopped between two events)
 *          and waits for 'tail' (the other worker's finishTail() state: absorbed, then
 *          'done') or 'continue'; when it did not stop between two events, or absorb
 *          refuses, it posts 'head-alone' and reads [cut, end) itself ('done');
 *   tail   reads [cut, end) as a tail parser and posts 'tail' with its state
 *          (transferred), or 'tail-failed'.
 * Byte ranges are HTTP Range requests (a 206 for exactly that range, else the worker
 * fails with rangeFailed) or Blob slices.
 */
SS.traceWorkerMain = function (F) {
  var parser = null, chunk = 0, done = 0, total = 0, lastPost = 0, src = null, cut = 0, role = 'whole';
  var t0 = performance.now(), firstByte = -1, parseMs = 0, waitFrom = 0, extra = {};   // timings, for the bench
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
    for (var k in extra) out.timing[k] = extra[k];
    self.postMessage({ type: 'done', result: out }, F.transferList(out));
  }
  function fail(e) {
    self.postMessage({ type: 'error', message: String(e && e.message ? e.message : e), rangeFailed: !!(e && e.rangeFailed) });
  }
  async function pump(stream) {
    var reader = stream.getReader();
    for (;;) {
      var r = await reader.read();
      if (r.done) break;
      feed(r.value);
    }
  }
  /* The bytes [a, b) of the source as a stream (b = null: to the end, the whole source when a = 0). */
  async function open(a, b) {
    if (src.file) {
      var blob = (a || b !== null) ? src.file.slice(a, b === null ? src.file.size : b) : src.file;
      var s = blob.stream();
      return src.gzip ? s.pipeThrough(new DecompressionStream('gzip')) : s;
    }
    var ranged = a > 0 || b !== null;
    var resp = await fetch(src.url, ranged ? { headers: { Range: 'bytes=' + a + '-' + (b === null ? '' : b - 1) } } : undefined);
    if (!resp.ok) throw new Error(src.label + ': HTTP ' + resp.status);
    if (ranged) {
      var cr = resp.headers.get('Content-Range') || '';
      if (resp.status !== 206 || cr.indexOf('bytes ' + a + '-') !== 0) {
        if (resp.body) resp.body.cancel();
        var e = new Error(src.label + ': the server did not answer the byte range ' + a + '-' + (b === null ? '' : b - 1));
        e.rangeFailed = true;
        throw e;
      }
    }
    if (!total && !src.gzip) total = +(resp.headers.get('Content-Length') || 0);
    var body = resp.body;
    return src.gzip ? body.pipeThrough(new DecompressionStream('gzip')) : body;
  }
  async function readAlone(from) {
    var stream = await open(from, null);
    if (!parser) parser = new F.Parser(total);        // (sized once the response gives the length)
    await pump(stream);
    finish();
  }
  async function runHead() {
    await pump(await open(0, cut));
    extra.headMs = performance.now() - t0;
    if (parser.mode === 2 && !(parser.carry && parser.carry.length)) {
      waitFrom = performance.now();
      self.postMessage({ type: 'head-ready' });
    } else {
      extra.splitRefused = 1;
      self.postMessage({ type: 'head-alone', why: 'the cut is not between two events' });
      await readAlone(cut);
    }
  }
  async function runTail() {
    await pump(await open(cut, null));
    var a = performance.now(), state = parser.finishTail();
    state.timing = { tailParseMs: parseMs, tailFirstByteMs: firstByte, tailFinishMs: performance.now() - a, tailWorkerMs: performance.now() - t0,
                     tailCrossFlows: state.conds.length };   // flows the tail met first by their end
    self.postMessage({ type: 'tail', state: state }, F.tailTransferList(state));
  }
  self.onmessage = function (ev) {
    var m = ev.data;
    try {
      if (m.type === 'start') {
        chunk = m.chunk || 0;
        role = m.role || 'whole';
        cut = m.cut || 0;
        src = { url: m.url, file: m.file, gzip: !!m.gzip, label: m.label };
        total = m.total || (m.file && !m.gzip ? m.file.size : 0);
        if (role === 'head') {
          parser = new F.Parser(total);
          runHead().catch(fail);
        } else if (role === 'tail') {
          parser = new F.Parser(total - cut, { tail: true, base: cut });
          runTail().catch(function (e) { self.postMessage({ type: 'tail-failed', message: String(e && e.message ? e.message : e) }); });
        } else if (m.url || m.file) {
          readAlone(0).catch(fail);
        } else {
          parser = new F.Parser(total);
        }
      } else if (m.type === 'chunk') {
        feed(m.bytes);
      } else if (m.type === 'end') {
        finish();
      } else if (m.type === 'tail') {
        var a = performance.now();
        extra.waitForTailMs = a - waitFrom;
        for (var k in m.state.timing) extra[k] = m.state.timing[k];
        var why = parser.absorb(m.state);
        extra.absorbMs = performance.now() - a;
        if (why) {
          extra.splitRefused = 1;
          self.postMessage({ type: 'head-alone', why: why });
          readAlone(cut).catch(fail);
        } else {
          extra.split = 1;
          finish();
        }
      } else if (m.type === 'continue') {
        extra.splitRefused = 1;
        readAlone(cut).catch(fail);
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

/* The inlined text of a --html page. An element whose file had bytes (data-bytes, written by
 * view --html) but reads as empty was too large for the browser to hold as one string
 * (Chromium: ~512 MiB): said so, instead of "empty document". */
function inlineText(src) {
  var el = document.getElementById(src.elementId), text = el.textContent;
  var bytes = +(el.getAttribute('data-bytes') || -1);
  if (!text.length && bytes > 0) {
    throw new Error(src.name + ': this page holds ' + (bytes / 1048576).toFixed(1) + ' MiB of it, ' +
      'more than the browser can read as one string (Chromium: about 512 MiB), so it reads as ' +
      'empty; make a smaller page: stepscope view RUN --ranks auto --html OUT.html ' +
      '(or --ranks 0-7,12), or serve the run (stepscope view RUN) instead of --html');
  }
  return text;
}

/* The inlined text of a --html page, as encoded byte slices. */
function inlineSlices(src, onSlice) {
  var text = inlineText(src), enc = new TextEncoder(), step = 1 << 22;
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
      try {
        inlineSlices(src, function (bytes) { w.postMessage({ type: 'chunk', bytes: bytes }, [bytes.buffer]); });
      } catch (e) { end(); reject(e); return; }
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
  var text = inlineText(src), pos = 0, enc = new TextEncoder();
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

/*
 * Whether and where to split src over two workers: {cut, total}, or null (one
 * worker). Only uncompressed URLs whose server answers byte ranges (a one-byte
 * probe gets a 206 with the size) and picked files, of at least SS.splitMinBytes;
 * the cut is the first event boundary found (findEventCut) in 64 KiB read at
 * SS.splitFraction of the file. `?split=0` turns splitting off, `?split=F` puts the
 * cut at fraction F, `?splitmin=N` splits files from N bytes on (tests).
 */
SS.splitFraction = (function () {
  var m = /[?&]split=([0-9.]+)/.exec(location.search);
  return m ? +m[1] : 0.5;
})();
SS.splitMinBytes = (function () {
  var m = /[?&]splitmin=(\d+)/.exec(location.search);
  return m ? +m[1] : 16 << 20;
})();

SS.planSplit = async function (src) {
  if (!SS.useWorker || !(SS.splitFraction > 0 && SS.splitFraction < 1)) return null;
  var total, span = 65536, bytes, at;
  if (src.kind === 'url' && !isGzipName(src.url)) {
    var probe = await fetch(src.url, { headers: { Range: 'bytes=0-0' } });
    var m = /^bytes 0-0\/(\d+)$/.exec(probe.headers.get('Content-Range') || '');
    if (probe.body) probe.body.cancel();
    if (probe.status !== 206 || !m) return null;
    total = +m[1];
    if (total < SS.splitMinBytes) return null;
    at = Math.floor(total * SS.splitFraction);
    var resp = await fetch(src.url, { headers: { Range: 'bytes=' + at + '-' + (at + span - 1) } });
    if (resp.status !== 206 || (resp.headers.get('Content-Range') || '').indexOf('bytes ' + at + '-') !== 0) {
      if (resp.body) resp.body.cancel();
      return null;
    }
    bytes = new Uint8Array(await resp.arrayBuffer());
  } else if (src.kind === 'file' && !isGzipName(src.file.name)) {
    total = src.file.size;
    if (total < SS.splitMinBytes) return null;
    at = Math.floor(total * SS.splitFraction);
    bytes = new Uint8Array(await src.file.slice(at, at + span).arrayBuffer());
  } else {
    return null;
  }
  var cut = SS.traceParser().findEventCut(bytes, at);
  return cut > 0 && cut < total ? { cut: cut, total: total } : null;
};

/*
 * Parses src in two workers (a head [0, cut) and a tail [cut, end), see
 * traceWorkerMain): the head absorbs the tail's state and builds the model, or
 * reads on alone when the split cannot give the one-worker result. Resolves with
 * the model data; rejects with .workerFailed (no workers here) or .rangeFailed (the
 * server stopped answering ranges), after which loadTrace reads with one worker.
 */
SS.parseSplit = function (src, plan, onProgress) {
  var head = SS.makeParserWorker(), tail = head && SS.makeParserWorker();
  if (!head || !tail) {
    if (head) { head.terminate(); URL.revokeObjectURL(head.blobUrl); }
    return Promise.resolve(null);
  }
  return new Promise(function (resolve, reject) {
    var doneHead = 0, doneTail = 0, headReady = false, tailState = null, tailGone = false, tailFailed = false, settled = false;
    function stop(w) { w.terminate(); URL.revokeObjectURL(w.blobUrl); }
    function dropTail() { if (!tailGone) { tailGone = true; stop(tail); } }
    function end() { settled = true; stop(head); dropTail(); }
    function progress() { onProgress(Math.min(plan.total, doneHead + doneTail), plan.total); }
    function join() {
      if (!headReady) return;
      if (tailState) {
        head.postMessage({ type: 'tail', state: tailState }, SS.traceParser().tailTransferList(tailState));
        tailState = null;
      } else if (tailFailed) {
        head.postMessage({ type: 'continue' });
      }
    }
    function failed(e, flag) {
      if (settled) return;
      end();
      var err = new Error(e);
      err[flag] = true;
      reject(err);
    }
    head.onmessage = function (ev) {
      var m = ev.data;
      if (m.type === 'progress') { doneHead = m.done; progress(); }
      else if (m.type === 'head-ready') { headReady = true; join(); }
      else if (m.type === 'head-alone') { SS.lastSplitNote = m.why; dropTail(); doneTail = 0; }
      else if (m.type === 'done') {
        end();
        SS.lastParseMode = m.result.timing && m.result.timing.split ? 'split' : 'worker';
        resolve(m.result);
      } else if (m.type === 'error') {
        if (m.rangeFailed) failed(m.message, 'rangeFailed');
        else { end(); reject(new Error(m.message)); }
      }
    };
    tail.onmessage = function (ev) {
      var m = ev.data;
      if (m.type === 'progress') { doneTail = m.done; progress(); }
      else if (m.type === 'tail') { tailState = m.state; dropTail(); join(); }
      else if (m.type === 'tail-failed') { SS.lastSplitNote = 'tail: ' + m.message; tailFailed = true; dropTail(); join(); }
    };
    head.onerror = function (ev) {
      if (ev && ev.preventDefault) ev.preventDefault();
      failed('parser worker failed: ' + (ev && ev.message), 'workerFailed');
    };
    tail.onerror = function (ev) {
      if (ev && ev.preventDefault) ev.preventDefault();
      if (settled || tailGone) return;
      SS.lastSplitNote = 'tail worker failed';
      tailFailed = true; dropTail(); join();
    };
    var start = { type: 'start', chunk: SS.chunkOverride, label: src.url || src.name || 'trace', total: plan.total, cut: plan.cut };
    if (src.kind === 'url') start.url = new URL(src.url, location.href).href;
    else start.file = src.file;
    head.postMessage(Object.assign({ role: 'head' }, start));
    tail.postMessage(Object.assign({ role: 'tail' }, start));
  });
};

SS.loadTrace = async function (src, onProgress) {
  var parsed = null, plan = null, marks = { loadStartAt: performance.now() };   // (page clock, for the bench)
  SS.lastParseMode = 'page';
  SS.lastSplitNote = '';
  try { plan = await SS.planSplit(src); } catch (e) { plan = null; }
  marks.planDoneAt = performance.now();
  if (plan) {
    try {
      parsed = await SS.parseSplit(src, plan, onProgress);
    } catch (e) {
      if (!e.workerFailed && !e.rangeFailed) throw e;
      SS.lastSplitNote = e.message;
      parsed = null;
    }
  }
  if (parsed) return SS.modelWithMarks(parsed, marks);
  var w = SS.makeParserWorker();
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
  return SS.modelWithMarks(parsed, marks);
};

/* The model of parsed; its timing gets the page-clock marks of the load (ms since navigation). */
SS.modelWithMarks = function (parsed, marks) {
  marks.parsedAt = performance.now();
  var m = new SS.TraceModel(parsed);
  marks.modelAt = performance.now();
  if (!m.timing) m.timing = {};
  for (var k in marks) m.timing[k] = marks[k];
  return m;
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

/* The list of runs: [{id, name, trace: src|null, report: src|null, diff, heatmap: src|null,
 * noTimeline: why the page has no timeline (view's export was refused) or null, missing: [..],
 * notes: [..]}] */
SS.discoverRuns = async function () {
  if (window.STEPSCOPE_INLINE) {
    return window.STEPSCOPE_INLINE.runs.map(function (r) {
      return { id: r.id, name: r.name, missing: r.missing || [], notes: r.notes || [],
               trace: r.trace ? { kind: 'inline', elementId: r.trace, name: 'trace.json' } : null,
               report: r.report ? { kind: 'inline', elementId: r.report, name: 'report.json' } : null,
               diff: r.diff ? { kind: 'inline', elementId: r.diff, name: 'diff.json' } : null,
               modules: r.modules ? { kind: 'inline', elementId: r.modules, name: 'modules.json' } : null,
               memory: r.memory ? { kind: 'inline', elementId: r.memory, name: 'memory.json' } : null,
               heatmap: r.heatmap ? { kind: 'inline', elementId: r.heatmap, name: 'heatmap.json' } : null,
               noTimeline: r.no_timeline || null, source: 'inline' };
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
                   report: r.report ? { kind: 'url', url: r.report } : null,
                   diff: r.diff ? { kind: 'url', url: r.diff } : null,
                   modules: r.modules ? { kind: 'url', url: r.modules } : null,
                   memory: r.memory ? { kind: 'url', url: r.memory } : null,
                   heatmap: r.heatmap ? { kind: 'url', url: r.heatmap } : null,
                   noTimeline: r.no_timeline || null, source: 'server' };
        });
      }
    } catch (e) { /* not served by stepscope view: fall through to the file picker */ }
  }
  return null;
};

/* Runs from picked/dropped files: trace*.json[.gz], report*.json and heatmap*.json, by name. */
SS.runFromFiles = function (files, id) {
  var run = { id: id, name: '', trace: null, report: null, diff: null, heatmap: null, missing: [], notes: [], source: 'files' };
  Array.prototype.forEach.call(files, function (f) {
    if (/report.*\.json$/i.test(f.name)) run.report = { kind: 'file', file: f };
    else if (/heatmap.*\.json$/i.test(f.name)) run.heatmap = { kind: 'file', file: f };
    else if (/\.json(\.gz)?$/i.test(f.name)) run.trace = { kind: 'file', file: f };
    run.name = run.name || f.name;
  });
  if (!run.trace && !run.heatmap) run.missing.push('trace.json');
  if (!run.report) run.missing.push('report.json');
  return run;
};
