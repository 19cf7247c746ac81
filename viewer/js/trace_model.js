/*
 * trace_model.js — the in-memory model of one Chrome-trace export.
 *
 * What it is for: the timeline, search, pipeline and compare views all read slices
 * by track and time. Millions of slices must fit in memory and be found fast.
 *
 * How it works: slices are stored column-wise in growable typed arrays (start and
 * duration in µs, name id into an interned string table, category code, track id);
 * only the args objects stay as JS objects. Tracks are (pid, tid) pairs grouped per
 * pid (one group per rank). finish() sorts each track's slices by (start, longest
 * first) when the file was not already in that order, then packs them into rows
 * greedily (a slice goes to the first row whose last slice has ended), which
 * reproduces the nesting of ranges and never lets two slices of a row overlap: each
 * row is sorted by start *and* by end, so binary search finds the visible ones.
 * B/E pairs, instants, counters (C) and flow events (s/t/f) are supported too.
 */
'use strict';

var SS = window.SS || (window.SS = {});

SS.CATEGORIES = ['other', 'compute', 'comm', 'memcpy', 'memset', 'host', 'derived'];
SS.CAT = { other: 0, compute: 1, comm: 2, memcpy: 3, memset: 4, host: 5, derived: 6 };
SS.DERIVED_KINDS = { 'exposed comm': 'exposed', 'idle': 'idle', 'bubble': 'bubble' };

SS.TraceModel = function () {
  this.cap = 1 << 16;
  this.n = 0;
  this.ts = new Float64Array(this.cap);
  this.dur = new Float64Array(this.cap);
  this.nameId = new Int32Array(this.cap);
  this.cat = new Uint8Array(this.cap);
  this.track = new Int32Array(this.cap);
  this.args = [];
  this.names = [];             // id -> string
  this.nameIndex = new Map();  // string -> id
  this.tracks = [];            // {id, pid, tid, name, sort, kind, slices, rows, hasDerived}
  this.trackIndex = new Map(); // "pid:tid" -> track
  this.groups = new Map();     // pid -> {pid, name, sort, tracks, counters, collapsed}
  this.counters = new Map();   // "pid:name:series" -> {pid, name, ts[], val[]}
  this.flowStarts = new Map(); // id -> {track, ts}
  this.flows = [];             // {from:{track,ts}, to:{track,ts}}
  this.openB = new Map();      // track id -> stack of {ts, name, cat, args}
  this.minTs = Infinity;
  this.maxTs = -Infinity;
  this.metadata = {};
  this.eventCount = 0;
  this.sortedOnInput = true;
};

SS.TraceModel.prototype.intern = function (s) {
  var id = this.nameIndex.get(s);
  if (id === undefined) {
    id = this.names.length;
    this.names.push(s);
    this.nameIndex.set(s, id);
  }
  return id;
};

SS.TraceModel.prototype.group = function (pid) {
  var g = this.groups.get(pid);
  if (!g) {
    g = { pid: pid, name: 'process ' + pid, sort: null, tracks: [], counters: [], collapsed: false,
          rank: null };
    this.groups.set(pid, g);
  }
  return g;
};

SS.TraceModel.prototype.getTrack = function (pid, tid) {
  var key = pid + ':' + tid;
  var t = this.trackIndex.get(key);
  if (!t) {
    t = { id: this.tracks.length, pid: pid, tid: tid, name: 'thread ' + tid, sort: null,
          kind: 'slices', slices: [], rows: null, lastTs: -Infinity, hasDerived: false,
          catMask: 0 };
    this.tracks.push(t);
    this.trackIndex.set(key, t);
    this.group(pid).tracks.push(t);
  }
  return t;
};

SS.TraceModel.prototype.grow = function () {
  var cap = this.cap * 2;
  function g(a, T) { var b = new T(cap); b.set(a); return b; }
  this.ts = g(this.ts, Float64Array);
  this.dur = g(this.dur, Float64Array);
  this.nameId = g(this.nameId, Int32Array);
  this.cat = g(this.cat, Uint8Array);
  this.track = g(this.track, Int32Array);
  this.cap = cap;
};

SS.TraceModel.prototype.addSlice = function (t, ts, dur, name, catName, args) {
  if (this.n === this.cap) this.grow();
  var i = this.n++;
  var c = SS.CAT[catName];
  if (c === undefined) c = 0;
  this.ts[i] = ts;
  this.dur[i] = dur > 0 ? dur : 0;
  this.nameId[i] = this.intern(name);
  this.cat[i] = c;
  this.track[i] = t.id;
  this.args[i] = args;
  t.slices.push(i);
  t.catMask |= 1 << c;
  if (c === SS.CAT.derived) t.hasDerived = true;
  if (ts < t.lastTs) this.sortedOnInput = false;
  t.lastTs = ts;
  if (ts < this.minTs) this.minTs = ts;
  if (ts + dur > this.maxTs) this.maxTs = ts + dur;
};

function categoryOf(ev) {
  var a = ev.args;
  if (a && typeof a.category === 'string') return a.category;
  if (typeof ev.cat === 'string' && SS.CAT[ev.cat] !== undefined) return ev.cat;
  return 'other';
}

/* Adds a batch of parsed events (any order, any phase). */
SS.TraceModel.prototype.addEvents = function (events) {
  for (var k = 0; k < events.length; k++) {
    var ev = events[k];
    if (ev === null || typeof ev !== 'object') continue;
    this.eventCount++;
    var ph = ev.ph, pid = ev.pid === undefined ? 0 : ev.pid, tid = ev.tid === undefined ? 0 : ev.tid;
    var ts = +ev.ts;
    var name = ev.name === undefined ? '' : String(ev.name);
    if (ph === 'X') {
      if (!isFinite(ts)) continue;
      var dur = +ev.dur;
      this.addSlice(this.getTrack(pid, tid), ts, isFinite(dur) ? dur : 0, name, categoryOf(ev), ev.args || null);
    } else if (ph === 'B' || ph === 'E') {
      if (!isFinite(ts)) continue;
      var tr = this.getTrack(pid, tid);
      var st = this.openB.get(tr.id);
      if (!st) { st = []; this.openB.set(tr.id, st); }
      if (ph === 'B') st.push({ ts: ts, name: name, cat: categoryOf(ev), args: ev.args || null });
      else if (st.length) {
        var b = st.pop();
        var args = b.args;
        if (ev.args) { args = Object.assign({}, b.args || {}, ev.args); }
        this.addSlice(tr, b.ts, ts - b.ts, b.name, b.cat, args);
      }
    } else if (ph === 'i' || ph === 'I' || ph === 'R' || ph === 'n') {
      if (!isFinite(ts)) continue;
      this.addSlice(this.getTrack(pid, tid), ts, 0, name, categoryOf(ev), ev.args || null);
    } else if (ph === 'M') {
      var a = ev.args || {};
      if (name === 'process_name') this.group(pid).name = String(a.name);
      else if (name === 'process_sort_index') this.group(pid).sort = +a.sort_index;
      else if (name === 'thread_name') this.getTrack(pid, tid).name = String(a.name);
      else if (name === 'thread_sort_index') this.getTrack(pid, tid).sort = +a.sort_index;
    } else if (ph === 'C') {
      if (!isFinite(ts) || !ev.args) continue;
      for (var key in ev.args) {
        var v = +ev.args[key];
        if (!isFinite(v)) continue;
        var ck = pid + ':' + name + ':' + key;
        var c = this.counters.get(ck);
        if (!c) {
          c = { pid: pid, name: name + (key === 'value' ? '' : ' · ' + key), ts: [], val: [], max: 0 };
          this.counters.set(ck, c);
          this.group(pid).counters.push(c);
        }
        c.ts.push(ts); c.val.push(v);
        if (v > c.max) c.max = v;
        if (ts < this.minTs) this.minTs = ts;
      }
    } else if (ph === 's' || ph === 't' || ph === 'f') {
      if (!isFinite(ts) || ev.id === undefined) continue;
      var fid = (ev.cat || '') + '#' + ev.id;
      var end = { track: this.getTrack(pid, tid).id, ts: ts, enclosing: ph !== 'f' || ev.bp === 'e' };
      if (ph === 's') this.flowStarts.set(fid, end);
      else {
        var s = this.flowStarts.get(fid);
        if (s) {
          this.flows.push({ from: s, to: end });
          if (ph === 'f') this.flowStarts.delete(fid); else this.flowStarts.set(fid, end);
        }
      }
    }
  }
};

/* Sorts, packs rows, orders groups and tracks. Call once after the last batch. */
SS.TraceModel.prototype.finish = function () {
  var self = this, ts = this.ts, dur = this.dur;
  this.args.length = this.n;
  if (!isFinite(this.minTs)) { this.minTs = 0; this.maxTs = 1; }
  if (this.maxTs <= this.minTs) this.maxTs = this.minTs + 1;
  for (var ti = 0; ti < this.tracks.length; ti++) {
    var t = this.tracks[ti];
    var sl = t.slices;
    var needSort = false;
    for (var k = 1; k < sl.length; k++) {
      var a = sl[k - 1], b = sl[k];
      if (ts[b] < ts[a] || (ts[b] === ts[a] && dur[b] > dur[a])) { needSort = true; break; }
    }
    if (needSort) sl.sort(function (x, y) { return ts[x] - ts[y] || dur[y] - dur[x]; });
    var rows = [], rowEnd = [];
    for (k = 0; k < sl.length; k++) {
      var i = sl[k], s = ts[i], r = 0;
      while (r < rowEnd.length && rowEnd[r] > s + 1e-6) r++;
      if (r === rows.length) { rows.push([]); rowEnd.push(-Infinity); }
      rows[r].push(i);
      rowEnd[r] = s + dur[i];
    }
    t.rows = rows.map(function (x) { return Int32Array.from(x); });
    t.count = sl.length;
    t.slices = null;
  }
  // flows: sorted by start time for range queries
  this.flows.sort(function (x, y) { return x.from.ts - y.from.ts; });
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
    g.counters.forEach(function (c) {
      c.ts = Float64Array.from(c.ts);
      c.val = Float64Array.from(c.val);
    });
  });
  groups.sort(function (x, y) {
    var sx = x.sort === null ? x.pid : x.sort, sy = y.sort === null ? y.pid : y.sort;
    return sx - sy || x.pid - y.pid;
  });
  this.groupList = groups.filter(function (g) { return g.tracks.length || g.counters.length; });
  this.openB = null;
  this.flowStarts = null;
  void self;
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

/* The deepest slice of track t that contains time x (or -1), and its row. */
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

SS.TraceModel.prototype.rowOf = function (i) {
  var t = this.tracks[this.track[i]];
  for (var r = 0; r < t.rows.length; r++) {
    var row = t.rows[r], k = this.firstStartingAt(row, this.ts[i]);
    for (; k < row.length && this.ts[row[k]] === this.ts[i]; k++) if (row[k] === i) return r;
  }
  return 0;
};

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

/* Slices of one name set (e.g. derived kinds) of a group, for overlays and views. */
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

/* Step windows [{step, start, end}] in µs, from `step` ranges of a group. */
SS.TraceModel.prototype.stepWindows = function (g) {
  var self = this, id = this.nameIndex.get('step');
  if (id === undefined) return [];
  return this.slicesOfGroup(g, function (i) { return self.nameId[i] === id; }).map(function (i) {
    var a = self.args[i] || {};
    return { step: a.step !== undefined ? a.step : null, start: self.ts[i], end: self.ts[i] + self.dur[i] };
  }).sort(function (a, b) { return a.start - b.start; });
};
