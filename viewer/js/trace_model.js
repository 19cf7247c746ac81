/*
 * trace_model.js — the in-memory model of one Chrome-trace export.
 *
 * What it is for: the timeline, search, pipeline and compare views all read slices
 * by track and time. Millions of slices must fit in memory and be found fast.
 *
 * How it works: it wraps what trace_parse.js built (usually in a worker): slices are
 * columns of typed arrays (start and duration in µs, name id into an interned string
 * table, category code, track id, packed row, and the offset and length of the raw
 * args JSON in a byte arena). Tracks are (pid, tid) pairs grouped per pid (one group
 * per rank); each track's rows are Int32Array views into one index array, each row
 * sorted by start *and* by end (the packing guarantees it), so binary search finds
 * the visible slices. argsOf(i) parses one slice's args when asked (the detail panel,
 * the pipeline view), keeping the last few parsed. Flows (launch → kernel) are four
 * columns sorted by their start time.
 */
'use strict';

var SS = window.SS || (window.SS = {});

/* Codes 7-9 are the phases of expert parallelism's token exchange, told by the export's
 * second category (chrome_export.c): the all-to-all collectives (comm) and the trainer's
 * moe.dispatch / moe.combine ranges (host). */
SS.CATEGORIES = ['other', 'compute', 'comm', 'memcpy', 'memset', 'host', 'derived', 'all_to_all', 'moe_dispatch', 'moe_combine'];
SS.CAT = { other: 0, compute: 1, comm: 2, memcpy: 3, memset: 4, host: 5, derived: 6, all_to_all: 7, moe_dispatch: 8, moe_combine: 9 };
SS.DERIVED_KINDS = { 'exposed comm': 'exposed', 'idle': 'idle', 'bubble': 'bubble' };

/* p: the object returned by a trace_parse.js Parser's finish(). */
SS.TraceModel = function (p) {
  this.n = p.n;
  this.ts = p.ts; this.dur = p.dur; this.nameId = p.nameId; this.cat = p.cat; this.track = p.track;
  this.rowIdx = p.rowIdx; this.argOff = p.argOff; this.argLen = p.argLen; this.arena = p.arena;
  this.names = p.names;
  this.nameIndex = new Map();
  for (var k = 0; k < this.names.length; k++) this.nameIndex.set(this.names[k], k);
  this.minTs = p.minTs; this.maxTs = p.maxTs;
  this.metadata = p.metadata || {};
  this.eventCount = p.eventCount;
  this.flows = p.flows;                 // {n, fromTrack, fromTs, toTrack, toTs}, by fromTs
  this.timing = p.timing || null;
  this.argsCache = new Map();
  this.decoder = new TextDecoder('utf-8');
  var order = p.order, self = this;
  this.order = order;             // slice indices, track by track, row by row
  this.tracks = p.tracks.map(function (t) {
    var rows = [];
    for (var r = 0; r + 1 < t.rowStart.length; r++) rows.push(order.subarray(t.rowStart[r], t.rowStart[r + 1]));
    return { id: t.id, pid: t.pid, tid: t.tid, name: t.name, sort: t.sort, kind: 'slices', rows: rows,
             count: t.count, hasDerived: t.hasDerived, catMask: t.catMask };
  });
  this.groups = new Map();
  p.groups.forEach(function (g) {
    self.groups.set(g.pid, { pid: g.pid, name: g.name, sort: g.sort, tracks: [], counters: [], collapsed: false, rank: null });
  });
  this.tracks.forEach(function (t) { self.groups.get(t.pid).tracks.push(t); });
  p.counters.forEach(function (c) { self.groups.get(c.pid).counters.push(c); });
  // groups: by sort index then pid; tracks: by sort index, derived last, then name
  var groups = Array.from(this.groups.values());
  groups.forEach(function (g) {
    var m = /^rank (\d+)/.exec(g.name);
    g.rank = m ? +m[1] : null;
    g.tracks.sort(function (x, y) {
      var sx = x.sort === null ? 1e9 : x.sort, sy = y.sort === null ? 1e9 : y.sort;
      return (x.hasDerived - y.hasDerived) || (sx - sy) || (x.name < y.name ? -1 : x.name > y.name ? 1 : 0);
    });
    g.tracks = g.tracks.filter(function (t) { return t.count > 0; });
  });
  groups.sort(function (x, y) {
    var sx = x.sort === null ? x.pid : x.sort, sy = y.sort === null ? y.pid : y.sort;
    return sx - sy || (x.pid < y.pid ? -1 : x.pid > y.pid ? 1 : 0);
  });
  this.groupList = groups.filter(function (g) { return g.tracks.length || g.counters.length; });
};

/* Bytes held by the model's columns, rows, args arena and flows (typed arrays only). */
SS.TraceModel.prototype.columnBytes = function () {
  var f = this.flows, total = 0;
  [this.ts, this.dur, this.nameId, this.cat, this.track, this.rowIdx, this.argOff, this.argLen, this.arena,
   this.order, f.fromTrack, f.fromTs, f.toTrack, f.toTs].forEach(function (a) {
    if (a) total += a.byteLength;
  });
  return total;
};

/* The args object of slice i (parsed on demand), or null. */
SS.TraceModel.prototype.argsOf = function (i) {
  var len = this.argLen[i];
  if (!len) return null;
  var a = this.argsCache.get(i);
  if (a !== undefined) return a;
  var off = this.argOff[i];
  try {
    a = JSON.parse(this.decoder.decode(this.arena.subarray(off, off + len)));
  } catch (e) {
    a = null;
  }
  if (this.argsCache.size > 4096) this.argsCache.clear();
  this.argsCache.set(i, a);
  return a;
};

/* Flow k as {from: {track, ts}, to: {track, ts}}. */
SS.TraceModel.prototype.flow = function (k) {
  var f = this.flows;
  return { from: { track: f.fromTrack[k], ts: f.fromTs[k] }, to: { track: f.toTrack[k], ts: f.toTs[k] } };
};

/* First index in row whose end >= t (rows are sorted by start and by end). */
SS.TraceModel.prototype.firstEndingAfter = function (row, t) {
  var lo = 0, hi = row.length, ts = this.ts, dur = this.dur;
  while (lo < hi) {
    var mid = (lo + hi) >> 1, i = row[mid];
    if (ts[i] + dur[i] < t) lo = mid + 1; else hi = mid;
  }
  return lo;
};

/* First index in row whose start >= t. */
SS.TraceModel.prototype.firstStartingAt = function (row, t) {
  var lo = 0, hi = row.length, ts = this.ts;
  while (lo < hi) {
    var mid = (lo + hi) >> 1;
    if (ts[row[mid]] < t) lo = mid + 1; else hi = mid;
  }
  return lo;
};

/* The deepest slice of track t that contains time x (or null), and its row. */
SS.TraceModel.prototype.sliceAt = function (t, x, slack) {
  slack = slack || 0;
  for (var r = t.rows.length - 1; r >= 0; r--) {
    var row = t.rows[r];
    var k = this.firstEndingAfter(row, x - slack);
    if (k < row.length) {
      var i = row[k];
      if (this.ts[i] <= x + slack) return { slice: i, row: r };
    }
  }
  return null;
};

SS.TraceModel.prototype.sliceInRow = function (t, r, x, slack) {
  var row = t.rows[r];
  if (!row) return -1;
  var k = this.firstEndingAfter(row, x - slack);
  if (k < row.length && this.ts[row[k]] <= x + slack) return row[k];
  return -1;
};

SS.TraceModel.prototype.rowOf = function (i) { return this.rowIdx[i]; };

/* All slice indices whose name contains the query (case-insensitive), by start. */
SS.TraceModel.prototype.search = function (query) {
  var q = query.toLowerCase(), ids = new Uint8Array(this.names.length), any = false;
  for (var k = 0; k < this.names.length; k++) {
    if (this.names[k].toLowerCase().indexOf(q) >= 0) { ids[k] = 1; any = true; }
  }
  var out = [];
  if (!any) return out;
  for (var i = 0; i < this.n; i++) if (ids[this.nameId[i]]) out.push(i);
  var ts = this.ts;
  out.sort(function (a, b) { return ts[a] - ts[b]; });
  return out;
};

/* Slices of a group for which predicate(i) holds, track by track, row by row. */
SS.TraceModel.prototype.slicesOfGroup = function (g, predicate) {
  var out = [];
  for (var k = 0; k < g.tracks.length; k++) {
    var rows = g.tracks[k].rows;
    for (var r = 0; r < rows.length; r++) {
      var row = rows[r];
      for (var j = 0; j < row.length; j++) if (predicate(row[j])) out.push(row[j]);
    }
  }
  return out;
};

/* Slices of a group whose name is one of `names`. */
SS.TraceModel.prototype.namedSlicesOfGroup = function (g, names) {
  var ids = new Set(), self = this;
  names.forEach(function (s) { var id = self.nameIndex.get(s); if (id !== undefined) ids.add(id); });
  if (!ids.size) return [];
  var nameId = this.nameId;
  return this.slicesOfGroup(g, function (i) { return ids.has(nameId[i]); });
};

/*
 * Step windows [{step, start, end}] in µs of a group, by start: the trainer's `step`
 * ranges (step number in args.step, or args.payload as the exporter writes it), or
 * else the analyzer's derived `step N` slices. step is null when unknown.
 */
SS.TraceModel.prototype.stepWindows = function (g) {
  var self = this, out = [];
  this.namedSlicesOfGroup(g, ['step']).forEach(function (i) {
    var a = self.argsOf(i) || {};
    var s = a.step !== undefined ? a.step : a.payload !== undefined ? a.payload : null;
    out.push({ step: s === null ? null : +s, start: self.ts[i], end: self.ts[i] + self.dur[i] });
  });
  if (!out.length) {
    this.slicesOfGroup(g, function (i) {
      return self.cat[i] === SS.CAT.derived && /^step \d+$/.test(self.names[self.nameId[i]]);
    }).forEach(function (i) {
      var a = self.argsOf(i) || {};
      var s = a.step !== undefined ? +a.step : +self.names[self.nameId[i]].slice(5);
      out.push({ step: s, start: self.ts[i], end: self.ts[i] + self.dur[i] });
    });
  }
  return out.sort(function (a, b) { return a.start - b.start; });
};
