/*
 * trace_parse.js — reads a Chrome-trace export, fed as byte chunks, straight into
 * columns of typed arrays (one entry per slice), without building an object per event.
 *
 * What it is for: a trace export can hold millions of events (hundreds of MB). Parsing
 * every event with JSON.parse makes millions of objects and args objects (hundreds of
 * MB of heap and seconds of work). This parser scans the UTF-8 bytes once and keeps
 * only what the views need: per slice the start and duration (µs, Float64), the name
 * (interned: an id into a string table), the category code, the track, and the byte
 * offset of its raw `args` JSON text in an arena. Args are parsed only when someone
 * asks for them (the detail panel, the pipeline view), one slice at a time.
 *
 * How it works: SS.traceParserFactory is a self-contained function (it uses nothing
 * from outside its body) returning {Parser}. loader.js turns its source text into a
 * Web Worker from a Blob URL, so the parse runs off the page's thread, also offline
 * and in the `--html` single file; when no worker can be made, the same Parser runs
 * on the page. Parser.push(bytes) consumes every complete unit (an event of the
 * traceEvents array, or a top-level member such as "metadata") and carries the bytes
 * of an unfinished unit to the next chunk: a unit is parsed again from its start when
 * it was cut, so chunk boundaries can fall anywhere. Both the object form
 * {"traceEvents":[...], ...} and the bare array form [...] are accepted; keys may come
 * in any order. Inside an event: numbers are read digit by digit (a mantissa below
 * 2^53 divided by an exact power of ten is correctly rounded, the same value JSON.parse
 * gives; longer numbers and exponents go through parseFloat); names are interned by a
 * hash of their bytes (decoded once per distinct name); escaped strings are decoded
 * with JSON.parse; string flow ids are given dense ids from their bytes (ByteIds), never
 * decoded; `args.category` is picked out while skipping over args (a second,
 * comma-separated category in `cat` naming an all-to-all phase, catTag, overrides
 * it: such slices get their own code); only the
 * args of metadata (M) and counter (C) events, and of B/E pairs, are parsed at load.
 * Parser.finish() groups slices by track (counting sort), sorts a track only when it
 * was out of order, and packs each track into rows greedily (a slice goes to the
 * first row whose last slice has ended): rows are stored track by track in one
 * Int32Array, each row sorted by start and by end. The result holds only typed
 * arrays, strings and small objects, so it crosses from the worker by transfer.
 */
'use strict';

var SS = (typeof window !== 'undefined') ? (window.SS || (window.SS = {})) : {};

SS.traceParserFactory = function () {
  'use strict';
  var CAT_NAMES = ['other', 'compute', 'comm', 'memcpy', 'memset', 'host', 'derived',
                   'all_to_all', 'moe_dispatch', 'moe_combine'];
  var FIRST_TAG = 7;    // codes from here on come from a second category in `cat` (catTag)
  var POW10 = [];
  for (var e = 0; e <= 22; e++) POW10.push(Math.pow(10, e));
  var decoder = new TextDecoder('utf-8');
  var encoder = new TextEncoder();
  var INCOMPLETE = -1;
  var pos = 0;          // where the last read*/skip* call stopped (INCOMPLETE: out of bytes)
  var num = 0;          // the number read by readNumber

  function ParseError(msg) { this.message = msg; }

  function isWs(c) { return c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09; }

  /* p at an opening quote: returns the index after the closing quote, or INCOMPLETE. */
  function skipString(buf, p, n) {
    p++;
    for (;;) {
      while (p < n && buf[p] !== 0x22 && buf[p] !== 0x5c) p++;
      if (p >= n) return INCOMPLETE;
      if (buf[p] === 0x22) return p + 1;
      p += 2;                                  // a backslash and the byte it escapes
    }
  }

  /* p inside an object, after its '{' or a member: skips white space and commas; returns
   * where the next member's name (its quote) or the closing brace is, or INCOMPLETE. */
  function nextMember(buf, p, n, where) {
    for (;;) {
      while (p < n && isWs(buf[p])) p++;
      if (p >= n) return INCOMPLETE;
      var c = buf[p];
      if (c === 0x22 || c === 0x7d) return p;
      if (c !== 0x2c) { pos = p; throw new ParseError('expected a member name' + where); }
      p++;
    }
  }

  /* p just after a member's name: returns where its value starts (past the ':' and white
   * space), or INCOMPLETE. */
  function memberValue(buf, p, n, where) {
    while (p < n && isWs(buf[p])) p++;
    if (p >= n) return INCOMPLETE;
    if (buf[p] !== 0x3a) { pos = p; throw new ParseError('expected ":"' + where); }
    p++;
    while (p < n && isWs(buf[p])) p++;
    return p < n ? p : INCOMPLETE;
  }

  /* Skips any JSON value starting at p (after whitespace); INCOMPLETE when cut. */
  function skipValue(buf, p, n) {
    var c = buf[p];
    if (c === 0x22) return skipString(buf, p, n);
    if (c === 0x7b || c === 0x5b) {
      var depth = 0;
      while (p < n) {
        c = buf[p];
        if (c === 0x22) { p = skipString(buf, p, n); if (p < 0) return INCOMPLETE; continue; }
        if (c === 0x7b || c === 0x5b) depth++;
        else if (c === 0x7d || c === 0x5d) { depth--; if (depth === 0) return p + 1; }
        p++;
      }
      return INCOMPLETE;
    }
    var s = p;
    while (p < n) {
      c = buf[p];
      if (c === 0x2c || c === 0x7d || c === 0x5d || isWs(c)) break;
      p++;
    }
    if (p >= n) return INCOMPLETE;
    if (p === s) throw new ParseError('unexpected character');
    return p;
  }

  /* Reads a number at p into `num`; returns the end or INCOMPLETE. NaN for non-numbers. */
  function readNumber(buf, p, n) {
    var s = p, neg = false, mant = 0, digits = 0, scale = 0, c = 0;
    if (buf[p] === 0x2d) { neg = true; p++; }
    while (p < n) { c = buf[p]; if (c < 0x30 || c > 0x39) break; mant = mant * 10 + (c - 0x30); digits++; p++; }
    if (p < n && c === 0x2e) {
      p++;
      while (p < n) { c = buf[p]; if (c < 0x30 || c > 0x39) break; mant = mant * 10 + (c - 0x30); digits++; scale++; p++; }
    }
    if (p >= n) return INCOMPLETE;
    if (c === 0x65 || c === 0x45 || digits > 15 || digits === 0) {
      var end = skipValue(buf, s, n);
      if (end < 0) return INCOMPLETE;
      var text = decoder.decode(buf.subarray(s, end));
      num = text === 'null' ? NaN : +text;
      if (text === 'true' || text === 'false') num = NaN;
      if (!(num === num) && text[0] !== 'n' && text[0] !== 't' && text[0] !== 'f') throw new ParseError('bad number ' + text.slice(0, 20));
      return end;
    }
    num = scale ? mant / POW10[scale] : mant;
    if (neg) num = -num;
    return p;
  }

  /* The string at buf[a..b) (with its quotes) as a JS string. */
  function decodeString(buf, a, b) {
    for (var k = a + 1; k < b - 1; k++) {
      if (buf[k] === 0x5c) return JSON.parse(decoder.decode(buf.subarray(a, b)));
    }
    return decoder.decode(buf.subarray(a + 1, b - 1));
  }

  /* A scalar/string value of an id-like field (pid, tid, id): number or string. */
  function readIdValue(buf, p, n) {
    if (buf[p] === 0x22) {
      var e = skipString(buf, p, n);
      if (e < 0) return INCOMPLETE;
      num = decodeString(buf, p, e);
      return e;
    }
    return readNumber(buf, p, n);
  }

  /* Category code of the string bytes buf[a..b) (without quotes). */
  function catCode(buf, a, b) {
    var len = b - a, c = buf[a];
    if (len === 7 && c === 0x63 && buf[a + 3] === 0x70) return 1;                 // compute
    if (len === 4 && c === 0x63 && buf[a + 3] === 0x6d) return 2;                 // comm
    if (len === 6 && c === 0x6d && buf[a + 4] === 0x70) return 3;                 // memcpy
    if (len === 6 && c === 0x6d && buf[a + 4] === 0x65) return 4;                 // memset
    if (len === 4 && c === 0x68 && buf[a + 3] === 0x74) return 5;                 // host
    if (len === 7 && c === 0x64 && buf[a + 3] === 0x69) return 6;                 // derived
    return 0;
  }
  var CAT_BYTES = CAT_NAMES.map(function (s) { return encoder.encode(s); });
  function catCodeChecked(buf, a, b) {
    var code = catCode(buf, a, b);
    if (!code) return 0;
    var name = CAT_BYTES[code];
    for (var k = 1; k < name.length; k++) if (buf[a + k] !== name[k]) return 0;
    return code;
  }

  /* The code of a second, comma-separated category in the `cat` bytes buf[a..b)
   * (without quotes) that names a phase of expert parallelism ("comm,all_to_all",
   * "host,moe_dispatch", "host,moe_combine", as chrome_export.c writes them), or 0. */
  function catTag(buf, a, b) {
    var c = b - 1;
    while (c > a && buf[c] !== 0x2c) c--;
    if (c <= a) return 0;
    for (var code = FIRST_TAG; code < CAT_NAMES.length; code++) {
      var name = CAT_BYTES[code], k = 0;
      if (name.length !== b - c - 1) continue;
      while (k < name.length && buf[c + 1 + k] === name[k]) k++;
      if (k === name.length) return code;
    }
    return 0;
  }

  function grow(arr, need) {
    if (need <= arr.length) return arr;
    var cap = arr.length * 2;
    while (cap < need) cap *= 2;
    var out = new arr.constructor(cap);
    out.set(arr);
    return out;
  }

  /* ByteIds gives dense ids (0, 1, 2...) to byte strings without decoding them:
   * flow ids such as "3:1042" are only ever compared, so turning each into a JS
   * string (a TextDecoder call) and a string-keyed Map lookup would cost more
   * than the rest of the flow event. Open addressing on an FNV-1a hash; the
   * bytes are kept to tell hash collisions apart. */
  function ByteIds() {
    this.slots = new Int32Array(1 << 12);        // id + 1 per slot, 0 empty
    this.bytes = new Uint8Array(1 << 16);
    this.used = 0;
    this.off = new Int32Array(1 << 10);
    this.len = new Int32Array(1 << 10);
    this.hash = new Int32Array(1 << 10);
    this.count = 0;
  }

  ByteIds.prototype.id = function (buf, a, b) {
    var h = 0x811c9dc5, len = b - a, k;
    for (k = a; k < b; k++) h = Math.imul(h ^ buf[k], 0x01000193);
    var slots = this.slots, mask = slots.length - 1, s = (h ^ (h >>> 15)) & mask;
    for (;;) {
      var v = slots[s];
      if (v === 0) break;
      var id = v - 1;
      if (this.hash[id] === h && this.len[id] === len) {
        var off = this.off[id], nb = this.bytes, j = 0;
        while (j < len && nb[off + j] === buf[a + j]) j++;
        if (j === len) return id;
      }
      s = (s + 1) & mask;
    }
    var nid = this.count;
    if (nid === this.off.length) {
      this.off = grow(this.off, nid + 1); this.len = grow(this.len, nid + 1); this.hash = grow(this.hash, nid + 1);
    }
    this.bytes = grow(this.bytes, this.used + len);
    for (k = 0; k < len; k++) this.bytes[this.used + k] = buf[a + k];
    this.off[nid] = this.used; this.len[nid] = len; this.hash[nid] = h;
    this.used += len;
    this.count = nid + 1;
    slots[s] = nid + 1;
    if (this.count * 2 > slots.length) this.rehash();
    return nid;
  };

  ByteIds.prototype.rehash = function () {
    var slots = new Int32Array(this.slots.length * 2), mask = slots.length - 1;
    for (var id = 0; id < this.count; id++) {
      var h = this.hash[id], s = (h ^ (h >>> 15)) & mask;
      while (slots[s] !== 0) s = (s + 1) & mask;
      slots[s] = id + 1;
    }
    this.slots = slots;
  };

  /* The key that names one flow across the parts of a split file: its category's
   * name (null: none) and its id, numeric, or as the bytes kept by a ByteIds. */
  function flowKey(catName, byteIds, fid, numId) {
    var k = catName === null ? '\u0001' : 'c' + catName;
    if (!byteIds) return k + '\u0000n' + numId;
    var off = byteIds.off[fid], len = byteIds.len[fid], bytes = byteIds.bytes, parts = [];
    for (var j = 0; j < len; j += 4096) {
      parts.push(String.fromCharCode.apply(null, bytes.subarray(off + j, off + Math.min(len, j + 4096))));
    }
    return k + '\u0000s' + parts.join('');
  }

  /* sizeHint: the expected number of bytes (0 when unknown), to size the columns.
   * opts.tail: this parser reads the second part of a split file, starting at an
   * event of the traceEvents array at file offset opts.base (see finishTail). */
  function Parser(sizeHint, opts) {
    this.cap = 1 << 16;
    while (sizeHint && this.cap * 160 < sizeHint && this.cap < (1 << 26)) this.cap *= 2;
    this.n = 0;
    this.ts = new Float64Array(this.cap);
    this.dur = new Float64Array(this.cap);
    this.nameId = new Int32Array(this.cap);
    this.cat = new Uint8Array(this.cap);
    this.track = new Int32Array(this.cap);
    this.argOff = new Float64Array(this.cap);   // start of the slice's args in the arena
    this.argLen = new Int32Array(this.cap);     // 0: no args
    this.arena = new Uint8Array(Math.max(1 << 20, Math.min(sizeHint / 4, 1 << 30) | 0));
    this.arenaLen = 0;
    this.names = [];
    this.nameIndex = new Map();                  // string -> id
    this.hashSlots = new Int32Array(1 << 12);    // id + 1 per slot, 0 empty
    this.nameBytes = new Uint8Array(1 << 14);    // each name's bytes, for hash hits
    this.nameBytesLen = 0;
    this.nameOff = [];
    this.nameLen = [];
    this.tracks = [];                            // {pid, tid, name, sort, count, hasDerived, catMask}
    this.trackByNum = new Map();
    this.trackByStr = new Map();
    this.lastPid = NaN; this.lastTid = NaN; this.lastTrack = -1;
    this.groups = new Map();                     // pid -> {pid, name, sort}
    this.groupOrder = [];
    this.counters = new Map();
    this.counterList = [];
    this.flowStarts = new Map();                 // flow category id -> {num: Map, str: Int32Array}
    this.flowIds = new ByteIds();                // string flow ids -> dense ids
    this.pendTrack = []; this.pendTs = [];
    this.flowCap = 1 << 12; this.flowN = 0;
    this.flowFromTrack = new Int32Array(this.flowCap); this.flowFromTs = new Float64Array(this.flowCap);
    this.flowToTrack = new Int32Array(this.flowCap); this.flowToTs = new Float64Array(this.flowCap);
    this.openB = new Map();
    this.minTs = Infinity; this.maxTs = -Infinity;
    this.eventCount = 0;
    this.topLevel = {};
    // reading state
    this.carry = null;
    this.base = 0;                               // file offset of the carried bytes
    this.mode = 0;                               // 0 start, 1 object members, 2 event array, 3 done,
                                                 // 4 after the array, form not yet known (tail)
    this.form = null;
    // a tail parser: what it cannot decide alone, because it depends on the part before it
    this.tail = !!(opts && opts.tail);
    if (this.tail) {
      this.mode = 2;
      this.base = opts.base || 0;
      this.pendCond = [];                        // per pending flow start: its condition, or -1
      this.conds = [];                           // flow keys first met as t/f (no start here)
      this.condFlows = [];                       // flow index, condition: flows that hold only if it holds
      this.orphanE = [];                         // tracks where an E found no B of this part
    }
  }

  Parser.prototype.error = function (msg, p) {
    return new Error('trace JSON: ' + msg + ' near byte ' + (this.base + p));
  };

  Parser.prototype.internBytes = function (buf, a, b) {
    // a..b: the string's bytes without quotes, known to hold no backslash
    var h = 0x811c9dc5, len = b - a;
    for (var k = a; k < b; k++) h = Math.imul(h ^ buf[k], 0x01000193);
    var slots = this.hashSlots, mask = slots.length - 1, s = (h ^ (h >>> 15)) & mask;
    for (;;) {
      var v = slots[s];
      if (v === 0) break;
      var id = v - 1;
      if (this.nameLen[id] === len) {
        var off = this.nameOff[id], nb = this.nameBytes, j = 0;
        while (j < len && nb[off + j] === buf[a + j]) j++;
        if (j === len) return id;
      }
      s = (s + 1) & mask;
    }
    var str = decoder.decode(buf.subarray(a, b));
    var sid = this.internString(str);
    // remember these bytes for this id (only the first spelling goes into the table)
    this.nameBytes = grow(this.nameBytes, this.nameBytesLen + len);
    this.nameBytes.set(buf.subarray(a, b), this.nameBytesLen);
    if (this.nameOff[sid] === undefined || this.nameOff[sid] < 0) {
      this.nameOff[sid] = this.nameBytesLen; this.nameLen[sid] = len;
      slots[s] = sid + 1;
      this.nameBytesLen += len;
      if (this.names.length * 2 > slots.length) this.rehash();
    }
    return sid;
  };

  Parser.prototype.rehash = function () {
    var slots = new Int32Array(this.hashSlots.length * 2), mask = slots.length - 1, nb = this.nameBytes;
    for (var id = 0; id < this.names.length; id++) {
      if (this.nameOff[id] < 0) continue;
      var h = 0x811c9dc5, a = this.nameOff[id], b = a + this.nameLen[id];
      for (var k = a; k < b; k++) h = Math.imul(h ^ nb[k], 0x01000193);
      var s = (h ^ (h >>> 15)) & mask;
      while (slots[s] !== 0) s = (s + 1) & mask;
      slots[s] = id + 1;
    }
    this.hashSlots = slots;
  };

  Parser.prototype.internString = function (str) {
    var id = this.nameIndex.get(str);
    if (id === undefined) {
      id = this.names.length;
      this.names.push(str);
      this.nameIndex.set(str, id);
      this.nameOff.push(-1); this.nameLen.push(-1);
    }
    return id;
  };

  Parser.prototype.group = function (pid) {
    var g = this.groups.get(pid);
    if (!g) {
      g = { pid: pid, name: 'process ' + pid, sort: null, nameSet: false, sortSet: false };
      this.groups.set(pid, g);
      this.groupOrder.push(g);
    }
    return g;
  };

  Parser.prototype.getTrack = function (pid, tid) {
    if (pid === this.lastPid && tid === this.lastTid) return this.lastTrack;
    var t;
    if (typeof pid === 'number' && typeof tid === 'number' && pid >= 0 && tid >= 0 &&
        pid < 67108864 && tid < 67108864 && (pid | 0) === pid && (tid | 0) === tid) {
      var key = pid * 67108864 + tid;
      t = this.trackByNum.get(key);
      if (t === undefined) { t = this.newTrack(pid, tid); this.trackByNum.set(key, t); }
    } else {
      var skey = typeof pid + ':' + pid + ':' + typeof tid + ':' + tid;
      t = this.trackByStr.get(skey);
      if (t === undefined) { t = this.newTrack(pid, tid); this.trackByStr.set(skey, t); }
    }
    this.lastPid = pid; this.lastTid = tid; this.lastTrack = t;
    return t;
  };

  Parser.prototype.newTrack = function (pid, tid) {
    var id = this.tracks.length;
    this.tracks.push({ id: id, pid: pid, tid: tid, name: 'thread ' + tid, sort: null, count: 0,
                       hasDerived: false, catMask: 0, lastTs: -Infinity, sorted: true, nameSet: false, sortSet: false });
    this.group(pid);
    return id;
  };

  Parser.prototype.addSlice = function (t, ts, dur, nameId, cat, buf, argA, argB) {
    var i = this.n;
    if (i === this.cap) this.growSlices();
    this.ts[i] = ts;
    this.dur[i] = dur > 0 ? dur : 0;
    this.nameId[i] = nameId;
    this.cat[i] = cat;
    this.track[i] = t;
    if (argB > argA) {
      var len = argB - argA, at = this.arenaLen;
      if (at + len > this.arena.length) this.arena = grow(this.arena, at + len);
      var arena = this.arena;
      for (var k = 0; k < len; k++) arena[at + k] = buf[argA + k];
      this.argOff[i] = at;
      this.argLen[i] = len;
      this.arenaLen = at + len;
    } else {
      this.argOff[i] = 0;
      this.argLen[i] = 0;
    }
    this.n = i + 1;
    var tr = this.tracks[t];
    tr.count++;
    tr.catMask |= 1 << cat;
    if (cat === 6) tr.hasDerived = true;
    if (ts < tr.lastTs) tr.sorted = false;
    tr.lastTs = ts;
    if (ts < this.minTs) this.minTs = ts;
    if (ts + dur > this.maxTs) this.maxTs = ts + dur;
  };

  Parser.prototype.growSlices = function () {
    var cap = this.cap * 2;
    this.ts = grow(this.ts, cap); this.dur = grow(this.dur, cap); this.nameId = grow(this.nameId, cap);
    this.cat = grow(this.cat, cap); this.track = grow(this.track, cap); this.argOff = grow(this.argOff, cap);
    this.argLen = grow(this.argLen, cap);
    this.cap = cap;
  };

  Parser.prototype.addFlow = function (fromTrack, fromTs, toTrack, toTs) {
    var k = this.flowN;
    if (k === this.flowCap) {
      var cap = this.flowCap * 2;
      this.flowFromTrack = grow(this.flowFromTrack, cap); this.flowFromTs = grow(this.flowFromTs, cap);
      this.flowToTrack = grow(this.flowToTrack, cap); this.flowToTs = grow(this.flowToTs, cap);
      this.flowCap = cap;
    }
    this.flowFromTrack[k] = fromTrack; this.flowFromTs[k] = fromTs;
    this.flowToTrack[k] = toTrack; this.flowToTs[k] = toTs;
    this.flowN = k + 1;
  };

  /* Feeds one chunk of bytes (Uint8Array). Throws an Error on malformed input. */
  Parser.prototype.push = function (chunk) {
    var buf = chunk;
    if (this.carry && this.carry.length) {
      buf = new Uint8Array(this.carry.length + chunk.length);
      buf.set(this.carry, 0);
      buf.set(chunk, this.carry.length);
    }
    var used;
    try {
      used = this.consume(buf, false);
    } catch (e) {
      if (e instanceof ParseError) throw this.error(e.message, pos);
      throw e;
    }
    this.carry = used < buf.length ? buf.slice(used) : null;
    this.base += used;
  };

  /* Consumes every complete unit of buf; returns how many bytes were used. */
  Parser.prototype.consume = function (buf, last) {
    var n = buf.length, p = 0, unit = 0;
    for (;;) {
      while (p < n && isWs(buf[p])) p++;
      unit = p;
      if (p >= n) return p;
      var c = buf[p];
      if (this.mode === 2) {                        // inside the event array
        if (c === 0x2c) { p++; continue; }
        if (c === 0x5d) { p++; this.mode = this.form === 'object' ? 1 : this.form === null ? 4 : 3; continue; }
        if (c !== 0x7b) { pos = p; throw new ParseError('an event is not an object'); }
        var e = this.parseEvent(buf, p, n);
        if (e < 0) return unit;
        p = e;
        continue;
      }
      if (this.mode === 0) {
        if (c === 0x7b) { this.form = 'object'; this.mode = 1; p++; continue; }
        if (c === 0x5b) { this.form = 'array'; this.mode = 2; p++; continue; }
        pos = p; throw new ParseError('not a JSON object or array');
      }
      if (this.mode === 3) { pos = p; throw new ParseError('unexpected data after the document'); }
      if (this.mode === 4) {                        // tail: what follows the array tells the form
        if (c === 0x2c) { this.form = 'object'; this.mode = 1; p++; continue; }
        if (c === 0x7d) { this.form = 'object'; this.mode = 3; p++; continue; }
        pos = p; throw new ParseError('unexpected data after the event array');
      }
      // mode 1: members of the top-level object
      if (c === 0x2c) { p++; continue; }
      if (c === 0x7d) { p++; this.mode = 3; continue; }
      if (c !== 0x22) { pos = p; throw new ParseError('expected a member name'); }
      var ke = skipString(buf, p, n);
      if (ke < 0) return unit;
      var key = decodeString(buf, p, ke);
      var q = memberValue(buf, ke, n, '');
      if (q < 0) return unit;
      if (key === 'traceEvents' && buf[q] === 0x5b) { this.mode = 2; p = q + 1; continue; }
      var ve = skipValue(buf, q, n);
      if (ve < 0) {
        if (!last) return unit;
        ve = n;
      }
      try {
        this.topLevel[key] = JSON.parse(decoder.decode(buf.subarray(q, ve)));
      } catch (err) {
        pos = q; throw new ParseError('bad value of "' + key + '" (' + err.message + ')');
      }
      p = ve;
    }
  };

  /* Parses the event object at p; returns its end, or INCOMPLETE when it was cut. */
  Parser.prototype.parseEvent = function (buf, p, n) {
    var ph = 0, bp = 0, pid = 0, tid = 0, ts = NaN, dur = NaN, id;
    var nameA = -1, nameB = -1, catA = -1, catB = -1, argA = -1, argB = -1, argCat = -1;
    var hasId = false, idA = -1, idB = -1, c, ke, k0, klen;
    p++;
    for (;;) {
      p = nextMember(buf, p, n, ' in an event');
      if (p < 0) return INCOMPLETE;
      if (buf[p] === 0x7d) { p++; break; }
      k0 = p + 1;
      ke = skipString(buf, p, n);
      if (ke < 0) return INCOMPLETE;
      klen = ke - 1 - k0;
      p = memberValue(buf, ke, n, ' in an event');
      if (p < 0) return INCOMPLETE;
      var k1 = buf[k0], k2 = buf[k0 + 1], key = 0;
      // 1 ph, 2 ts, 3 dur, 4 pid, 5 tid, 6 name, 7 cat, 8 args, 9 id, 10 bp
      if (klen === 2) {
        if (k1 === 0x70 && k2 === 0x68) key = 1;
        else if (k1 === 0x74 && k2 === 0x73) key = 2;
        else if (k1 === 0x69 && k2 === 0x64) key = 9;
        else if (k1 === 0x62 && k2 === 0x70) key = 10;
      } else if (klen === 3) {
        var k3 = buf[k0 + 2];
        if (k1 === 0x64 && k2 === 0x75 && k3 === 0x72) key = 3;
        else if (k1 === 0x70 && k2 === 0x69 && k3 === 0x64) key = 4;
        else if (k1 === 0x74 && k2 === 0x69 && k3 === 0x64) key = 5;
        else if (k1 === 0x63 && k2 === 0x61 && k3 === 0x74) key = 7;
      } else if (klen === 4) {
        if (k1 === 0x6e && k2 === 0x61 && buf[k0 + 2] === 0x6d && buf[k0 + 3] === 0x65) key = 6;
        else if (k1 === 0x61 && k2 === 0x72 && buf[k0 + 2] === 0x67 && buf[k0 + 3] === 0x73) key = 8;
      }
      c = buf[p];
      switch (key) {
        case 1: case 10: {
          var se = skipValue(buf, p, n);
          if (se < 0) return INCOMPLETE;
          var v = (c === 0x22 && se - p === 3) ? buf[p + 1] : (c === 0x22 ? -2 : 0);
          if (key === 1) ph = v; else bp = v;
          p = se;
          break;
        }
        case 2: case 3:
          if (c === 0x22) {                         // a number written as a string
            var sse = skipString(buf, p, n);
            if (sse < 0) return INCOMPLETE;
            num = +decodeString(buf, p, sse);
            p = sse;
          } else if (c === 0x7b || c === 0x5b) {
            p = skipValue(buf, p, n); if (p < 0) return INCOMPLETE; num = NaN;
          } else {
            p = readNumber(buf, p, n); if (p < 0) return INCOMPLETE;
          }
          if (key === 2) ts = num; else dur = num;
          break;
        case 4: case 5: case 9:
          if (key === 9 && c === 0x22) {            // a string id: kept as bytes (see ByteIds)
            var ie = skipString(buf, p, n);
            if (ie < 0) return INCOMPLETE;
            idA = p; idB = ie; hasId = true; id = undefined;
            p = ie;
            break;
          }
          if (c === 0x7b || c === 0x5b) { p = skipValue(buf, p, n); if (p < 0) return INCOMPLETE; num = undefined; }
          else { p = readIdValue(buf, p, n); if (p < 0) return INCOMPLETE; }
          if (num !== num) num = undefined;        // null
          if (key === 4) pid = num === undefined ? 0 : num;
          else if (key === 5) tid = num === undefined ? 0 : num;
          else { id = num; hasId = num !== undefined; }
          break;
        case 6: case 7: {
          var e2 = skipValue(buf, p, n);
          if (e2 < 0) return INCOMPLETE;
          if (key === 6) { nameA = p; nameB = e2; } else if (c === 0x22) { catA = p; catB = e2; }
          p = e2;
          break;
        }
        case 8:
          if (c !== 0x7b) {
            p = skipValue(buf, p, n); if (p < 0) return INCOMPLETE;
            break;
          }
          argA = p;
          // members of args: pick out "category", skip the rest
          p++;
          for (;;) {
            p = nextMember(buf, p, n, ' in args');
            if (p < 0) return INCOMPLETE;
            if (buf[p] === 0x7d) { p++; break; }
            var ak = p + 1, ake = skipString(buf, p, n);
            if (ake < 0) return INCOMPLETE;
            var isCat = ake - 1 - ak === 8 && buf[ak] === 0x63 && buf[ak + 1] === 0x61 && buf[ak + 2] === 0x74 &&
                        buf[ak + 3] === 0x65 && buf[ak + 4] === 0x67 && buf[ak + 5] === 0x6f && buf[ak + 6] === 0x72 && buf[ak + 7] === 0x79;
            p = memberValue(buf, ake, n, ' in args');
            if (p < 0) return INCOMPLETE;
            var ave = skipValue(buf, p, n);
            if (ave < 0) return INCOMPLETE;
            if (isCat && buf[p] === 0x22) {
              var hasEsc = false;
              for (var q = p + 1; q < ave - 1; q++) if (buf[q] === 0x5c) { hasEsc = true; break; }
              argCat = hasEsc ? Math.max(0, CAT_NAMES.indexOf(decodeString(buf, p, ave))) : catCodeChecked(buf, p + 1, ave - 1);
            }
            p = ave;
          }
          argB = p;
          break;
        default:
          p = skipValue(buf, p, n);
          if (p < 0) return INCOMPLETE;
      }
    }
    this.eventCount++;
    this.handleEvent(buf, ph, bp, pid, tid, ts, dur, nameA, nameB, catA, catB, argA, argB, argCat, hasId, id, idA, idB);
    return p;
  };

  Parser.prototype.nameOf = function (buf, a, b) {
    if (a < 0) return this.internString('');
    if (buf[a] !== 0x22) return this.internString(decoder.decode(buf.subarray(a, b)));
    for (var k = a + 1; k < b - 1; k++) if (buf[k] === 0x5c) return this.internString(decodeString(buf, a, b));
    return this.internBytes(buf, a + 1, b - 1);
  };

  Parser.prototype.handleEvent = function (buf, ph, bp, pid, tid, ts, dur, nameA, nameB, catA, catB, argA, argB,
                                           argCat, hasId, id, idA, idB) {
    var cat = argCat >= 0 ? argCat : (catA >= 0 ? catCodeChecked(buf, catA + 1, catB - 1) : 0);
    if (catA >= 0) { var tag = catTag(buf, catA + 1, catB - 1); if (tag) cat = tag; }
    if (ph === 0x58) {                             // X
      if (!isFinite(ts)) return;
      this.addSlice(this.getTrack(pid, tid), ts, isFinite(dur) ? dur : 0, this.nameOf(buf, nameA, nameB), cat, buf, argA, argB);
    } else if (ph === 0x42 || ph === 0x45) {       // B, E
      if (!isFinite(ts)) return;
      var t = this.getTrack(pid, tid), st = this.openB.get(t);
      if (!st) { st = []; this.openB.set(t, st); }
      if (ph === 0x42) {
        st.push({ ts: ts, nameId: this.nameOf(buf, nameA, nameB), cat: cat, args: argA >= 0 ? buf.slice(argA, argB) : null });
      } else if (st.length) {
        var b = st.pop(), args = b.args;
        if (argA >= 0) {
          var merged = Object.assign({}, args ? JSON.parse(decoder.decode(args)) : {}, JSON.parse(decoder.decode(buf.subarray(argA, argB))));
          args = encoder.encode(JSON.stringify(merged));
        }
        this.addSlice(t, b.ts, ts - b.ts, b.nameId, b.cat, args || buf, args ? 0 : 0, args ? args.length : 0);
      } else if (this.tail) {
        this.orphanE.push(t);                      // it may close a B of the part before
      }
    } else if (ph === 0x69 || ph === 0x49 || ph === 0x52 || ph === 0x6e) {   // i I R n
      if (!isFinite(ts)) return;
      this.addSlice(this.getTrack(pid, tid), ts, 0, this.nameOf(buf, nameA, nameB), cat, buf, argA, argB);
    } else if (ph === 0x4d) {                      // M
      var a = argA >= 0 ? JSON.parse(decoder.decode(buf.subarray(argA, argB))) : {};
      var name = nameA >= 0 ? this.names[this.nameOf(buf, nameA, nameB)] : '';
      // (nameSet/sortSet: a tail's values replace the head's when its parts are joined)
      var named;
      if (name === 'process_name') { named = this.group(pid); named.name = String(a.name); named.nameSet = true; }
      else if (name === 'process_sort_index') { named = this.group(pid); named.sort = +a.sort_index; named.sortSet = true; }
      else if (name === 'thread_name') { named = this.tracks[this.getTrack(pid, tid)]; named.name = String(a.name); named.nameSet = true; }
      else if (name === 'thread_sort_index') { named = this.tracks[this.getTrack(pid, tid)]; named.sort = +a.sort_index; named.sortSet = true; }
    } else if (ph === 0x43) {                      // C
      if (!isFinite(ts) || argA < 0) return;
      var ca = JSON.parse(decoder.decode(buf.subarray(argA, argB)));
      var cname = nameA >= 0 ? this.names[this.nameOf(buf, nameA, nameB)] : '';
      for (var key in ca) {
        var v = +ca[key];
        if (!isFinite(v)) continue;
        var ck = pid + ':' + cname + ':' + key, c = this.counters.get(ck);
        if (!c) {
          c = { pid: pid, name: cname + (key === 'value' ? '' : ' · ' + key), ts: [], val: [], max: 0 };
          this.counters.set(ck, c);
          this.counterList.push(c);
          this.group(pid);
        }
        c.ts.push(ts); c.val.push(v);
        if (v > c.max) c.max = v;
        if (ts < this.minTs) this.minTs = ts;
      }
    } else if (ph === 0x73 || ph === 0x74 || ph === 0x66) {   // s t f
      if (!isFinite(ts) || !hasId) return;
      // flows are matched by (cat, id): per flow category, numeric ids in a Map and
      // string ids (as ByteIds) in a slot table
      var cid = catA >= 0 ? this.nameOf(buf, catA, catB) : -1;
      var starts = this.flowStarts.get(cid);
      if (!starts) { starts = { num: new Map(), str: new Int32Array(1024) }; this.flowStarts.set(cid, starts); }
      var tr = this.getTrack(pid, tid), fid = -1, sl, seen, tail = this.tail;
      if (idA >= 0) {
        var plain = true;
        for (var q = idA + 1; q < idB - 1; q++) if (buf[q] === 0x5c) { plain = false; break; }
        if (plain) fid = this.flowIds.id(buf, idA + 1, idB - 1);
        else { var eb = encoder.encode(decodeString(buf, idA, idB)); fid = this.flowIds.id(eb, 0, eb.length); }
        if (fid >= starts.str.length) starts.str = grow(starts.str, fid + 1);
        sl = starts.str[fid] - 1;                 // -1: never met, -2: met, no start pending
        seen = sl !== -1;
      } else {
        sl = starts.num.get(id);                  // undefined: never met, -2 (tail only): met, none pending
        seen = sl !== undefined;
        if (sl === undefined) sl = -1;
      }
      if (ph === 0x73) {
        if (sl < 0) {
          sl = this.pendTrack.length; this.pendTrack.push(tr); this.pendTs.push(ts);
          if (tail) this.pendCond.push(-1);
          if (fid >= 0) starts.str[fid] = sl + 1; else starts.num.set(id, sl);
        } else {
          this.pendTrack[sl] = tr; this.pendTs[sl] = ts;
          if (tail) this.pendCond[sl] = -1;
        }
      } else if (sl >= 0) {
        if (tail && this.pendCond[sl] >= 0) this.condFlows.push(this.flowN, this.pendCond[sl]);
        this.addFlow(this.pendTrack[sl], this.pendTs[sl], tr, ts);
        if (ph === 0x66) {
          if (fid >= 0) starts.str[fid] = -1;
          else if (tail) starts.num.set(id, -2); else starts.num.delete(id);
        } else { this.pendTrack[sl] = tr; this.pendTs[sl] = ts; }
      } else if (tail && !seen) {
        // the first event of this flow in a tail, and not its start: the start may be in
        // the part before. The flow is kept with a placeholder source (-1 - condition)
        // and resolved, or dropped, when the parts are joined (absorb).
        var cond = this.conds.length;
        this.conds.push(flowKey(cid >= 0 ? this.names[cid] : null, fid >= 0 ? this.flowIds : null, fid, id));
        this.addFlow(-1 - cond, NaN, tr, ts);
        if (ph === 0x74) {
          sl = this.pendTrack.length; this.pendTrack.push(tr); this.pendTs.push(ts); this.pendCond.push(cond);
          if (fid >= 0) starts.str[fid] = sl + 1; else starts.num.set(id, sl);
        } else if (fid >= 0) starts.str[fid] = -1;
        else starts.num.set(id, -2);
      }
    }
    void bp;
  };

  /* The track of (pid, tid), or -1; creates nothing. */
  Parser.prototype.findTrack = function (pid, tid) {
    var t;
    if (typeof pid === 'number' && typeof tid === 'number' && pid >= 0 && tid >= 0 &&
        pid < 67108864 && tid < 67108864 && (pid | 0) === pid && (tid | 0) === tid) {
      t = this.trackByNum.get(pid * 67108864 + tid);
    } else {
      t = this.trackByStr.get(typeof pid + ':' + pid + ':' + typeof tid + ':' + tid);
    }
    return t === undefined ? -1 : t;
  };

  /* Flow starts still pending at the end of what was read: flowKey -> slot. */
  Parser.prototype.pendingFlowStarts = function () {
    var out = new Map(), self = this;
    this.flowStarts.forEach(function (starts, cid) {
      var catName = cid >= 0 ? self.names[cid] : null;
      starts.num.forEach(function (sl, id) { if (sl >= 0) out.set(flowKey(catName, null, -1, id), sl); });
      for (var fid = 0; fid < starts.str.length; fid++) {
        if (starts.str[fid] > 0) out.set(flowKey(catName, self.flowIds, fid, 0), starts.str[fid] - 1);
      }
    });
    return out;
  };

  /* Ends the document: the carried bytes, then checks that it is complete. */
  Parser.prototype.endDocument = function () {
    if (this.carry && this.carry.length) {
      var buf = this.carry, used;
      try { used = this.consume(buf, true); } catch (e) {
        if (e instanceof ParseError) throw this.error(e.message, pos);
        throw e;
      }
      if (used < buf.length) {
        throw this.error('truncated document (' + this.eventCount + ' complete events read)', used);
      }
      this.carry = null;
    }
    if (this.mode === 4) { this.form = 'array'; this.mode = 3; }
    if (this.form === null) throw this.error('empty document', 0);
    if (this.mode !== 3) throw this.error('truncated document (' + this.eventCount + ' complete events read)', 0);
  };

  /*
   * Splitting a file over two parsers. A head parser reads bytes [0, cut) as usual; a
   * tail parser (opts.tail) reads [cut, end) as if an event of the traceEvents array
   * began at `cut`. finishTail() gives the tail's raw columns and what it could not
   * decide alone; head.absorb(tail) joins them into exactly the state one parser
   * reading the whole file would have reached, or refuses (returns a reason) when
   * that cannot be guaranteed: when the head did not end between two events of the
   * array (the cut was not an event boundary: then the head goes on reading the rest
   * itself), when the tail's form differs, or when an E of the tail would close a B
   * of the head. What is joined: string ids (the tail's table in its order of first
   * use, appended), groups, tracks and counters (created in the tail's order, names
   * and sort indices set by the tail win, counts and masks added, a track stays
   * "sorted" only if the tail's first slice does not start before the head's last),
   * slices (ids remapped, args appended to the arena), flows (a flow the tail met
   * first as t/f takes its source from the head's pending start with the same
   * category and id, or is dropped with the flows that followed from it, as one
   * parser would have ignored it), time bounds, event counts and top-level members.
   */

  /* Tail parsers: the end of the document, and the state absorb() needs. */
  Parser.prototype.finishTail = function () {
    this.endDocument();
    var n = this.n, counters = [];
    this.counters.forEach(function (c, key) {
      counters.push({ key: key, pid: c.pid, name: c.name, ts: Float64Array.from(c.ts), val: Float64Array.from(c.val), max: c.max });
    });
    return {
      n: n, ts: this.ts, dur: this.dur, nameId: this.nameId, cat: this.cat, track: this.track,
      argOff: this.argOff, argLen: this.argLen, arena: this.arena, arenaLen: this.arenaLen,
      names: this.names,
      tracks: this.tracks.map(function (t) {
        return { pid: t.pid, tid: t.tid, name: t.name, nameSet: t.nameSet, sort: t.sort, sortSet: t.sortSet,
                 count: t.count, catMask: t.catMask, hasDerived: t.hasDerived, lastTs: t.lastTs, sorted: t.sorted };
      }),
      groups: this.groupOrder.map(function (g) {
        return { pid: g.pid, name: g.name, nameSet: g.nameSet, sort: g.sort, sortSet: g.sortSet };
      }),
      counters: counters,
      flows: { n: this.flowN, fromTrack: this.flowFromTrack, fromTs: this.flowFromTs, toTrack: this.flowToTrack, toTs: this.flowToTs },
      conds: this.conds, condFlows: Int32Array.from(this.condFlows), orphanE: Int32Array.from(this.orphanE),
      minTs: this.minTs, maxTs: this.maxTs, eventCount: this.eventCount, topLevel: this.topLevel,
      form: this.form, mode: this.mode, base: this.base
    };
  };

  /* The buffers of a finishTail() result, for postMessage's transfer list. */
  function tailTransferList(t) {
    var list = [t.ts, t.dur, t.nameId, t.cat, t.track, t.argOff, t.argLen, t.arena,
                t.flows.fromTrack, t.flows.fromTs, t.flows.toTrack, t.flows.toTs, t.condFlows, t.orphanE];
    t.counters.forEach(function (c) { list.push(c.ts, c.val); });
    return list.map(function (a) { return a.buffer; });
  }

  /* Joins a tail (finishTail()) read from where this head stopped; returns null when
   * joined, or the reason it refused (then this parser is unchanged). */
  Parser.prototype.absorb = function (t) {
    if (this.mode !== 2 || (this.carry && this.carry.length)) return 'the cut is not between two events';
    if (t.form !== this.form) return 'the parts disagree on the form of the document';
    for (var k = 0; k < t.orphanE.length; k++) {
      var tt = t.tracks[t.orphanE[k]], mine = this.findTrack(tt.pid, tt.tid), st = mine >= 0 ? this.openB.get(mine) : null;
      if (st && st.length) return 'an E event of the tail closes a B event of the head';
    }
    var self = this, i;
    // string ids, groups, tracks (creation order of the tail), counters
    var nameMap = new Int32Array(t.names.length);
    for (k = 0; k < t.names.length; k++) nameMap[k] = this.internString(t.names[k]);
    t.groups.forEach(function (g) {
      var mg = self.group(g.pid);
      if (g.nameSet) { mg.name = g.name; mg.nameSet = true; }
      if (g.sortSet) { mg.sort = g.sort; mg.sortSet = true; }
    });
    var nt = t.tracks.length, trackMap = new Int32Array(nt), headLast = new Float64Array(nt);
    for (k = 0; k < nt; k++) {
      tt = t.tracks[k];
      var id = this.getTrack(tt.pid, tt.tid), mt = this.tracks[id];
      trackMap[k] = id;
      headLast[k] = mt.lastTs;
      if (tt.nameSet) { mt.name = tt.name; mt.nameSet = true; }
      if (tt.sortSet) { mt.sort = tt.sort; mt.sortSet = true; }
      mt.count += tt.count;
      mt.catMask |= tt.catMask;
      mt.hasDerived = mt.hasDerived || tt.hasDerived;
      if (!tt.sorted) mt.sorted = false;
      if (tt.count) mt.lastTs = tt.lastTs;
    }
    t.counters.forEach(function (c) {
      var mc = self.counters.get(c.key);
      if (!mc) {
        mc = { pid: c.pid, name: c.name, ts: [], val: [], max: 0 };
        self.counters.set(c.key, mc);
        self.counterList.push(mc);
        self.group(c.pid);
      }
      for (var j = 0; j < c.ts.length; j++) { mc.ts.push(c.ts[j]); mc.val.push(c.val[j]); }
      if (c.max > mc.max) mc.max = c.max;
    });
    // slices
    var n1 = this.n, n2 = t.n;
    while (this.cap < n1 + n2) this.growSlices();
    var at = this.arenaLen;
    if (t.arenaLen) {
      if (at + t.arenaLen > this.arena.length) {           // exactly what is needed: no doubling, no later copy
        var arena = new Uint8Array(at + t.arenaLen);
        arena.set(this.arena.subarray(0, at));
        this.arena = arena;
      }
      this.arena.set(t.arena.subarray(0, t.arenaLen), at);
      this.arenaLen = at + t.arenaLen;
    }
    this.ts.set(t.ts.subarray(0, n2), n1);
    this.dur.set(t.dur.subarray(0, n2), n1);
    this.cat.set(t.cat.subarray(0, n2), n1);
    this.argLen.set(t.argLen.subarray(0, n2), n1);
    var firstSeen = new Uint8Array(nt), nameId = this.nameId, track = this.track, argOff = this.argOff;
    var tNameId = t.nameId, tTrack = t.track, tArgOff = t.argOff, tArgLen = t.argLen, tTs = t.ts;
    for (i = 0; i < n2; i++) {
      var tk = tTrack[i];
      nameId[n1 + i] = nameMap[tNameId[i]];
      track[n1 + i] = trackMap[tk];
      argOff[n1 + i] = tArgLen[i] ? tArgOff[i] + at : 0;
      if (!firstSeen[tk]) {
        firstSeen[tk] = 1;
        if (tTs[i] < headLast[tk]) this.tracks[trackMap[tk]].sorted = false;
      }
    }
    this.n = n1 + n2;
    // flows
    var f = t.flows, resolved = null, drop = null;
    if (t.conds.length) {
      var pending = this.pendingFlowStarts();
      resolved = new Int32Array(t.conds.length);
      for (k = 0; k < t.conds.length; k++) {
        var sl = pending.get(t.conds[k]);
        resolved[k] = sl === undefined ? -1 : sl;
      }
      drop = new Uint8Array(f.n);
      for (k = 0; k < t.condFlows.length; k += 2) if (resolved[t.condFlows[k + 1]] < 0) drop[t.condFlows[k]] = 1;
    }
    for (k = 0; k < f.n; k++) {
      if (drop && drop[k]) continue;
      var from = f.fromTrack[k];
      if (from < 0) {
        var psl = resolved[-1 - from];
        if (psl < 0) continue;
        this.addFlow(this.pendTrack[psl], this.pendTs[psl], trackMap[f.toTrack[k]], f.toTs[k]);
      } else {
        this.addFlow(trackMap[from], f.fromTs[k], trackMap[f.toTrack[k]], f.toTs[k]);
      }
    }
    if (t.minTs < this.minTs) this.minTs = t.minTs;
    if (t.maxTs > this.maxTs) this.maxTs = t.maxTs;
    this.eventCount += t.eventCount;
    Object.keys(t.topLevel).forEach(function (key) { self.topLevel[key] = t.topLevel[key]; });
    this.mode = t.mode;
    this.lastPid = NaN; this.lastTid = NaN; this.lastTrack = -1;
    return null;
  };

  /* Call after the last chunk; throws when the document is incomplete. */
  Parser.prototype.finish = function () {
    this.endDocument();
    return this.build();
  };

  /*
   * Greedy row packing of one track (seg: its slice indices by start, longest first):
   * each slice goes to the first row whose last slice has ended (1e-6 µs of slack).
   * Sets rowIdx[slice]; returns the number of rows, with scratch.count[r] the slices
   * of row r. Its own function on typed arrays, so it is optimized after a few tracks
   * (a fresh worker runs build() once: a loop inside it stayed slow).
   */
  function packRows(seg, ts, dur, rowIdx, scratch) {
    var rowEnd = scratch.end, rowCount = scratch.count, rows = 0, len = seg.length;
    for (var k = 0; k < len; k++) {
      var i = seg[k], s = ts[i] + 1e-6, r = 0;
      while (r < rows && rowEnd[r] > s) r++;
      if (r === rows) {
        if (rows === rowEnd.length) {
          rowEnd = scratch.end = grow(rowEnd, rows + 1);
          rowCount = scratch.count = grow(rowCount, rows + 1);
        }
        rowCount[r] = 0;
        rows++;
      }
      rowEnd[r] = ts[i] + dur[i];
      rowCount[r]++;
      rowIdx[i] = r;
    }
    return rows;
  }

  /* Reorders seg row by row, stably (at[r]: where row r starts in seg; tmp: scratch). */
  function regroup(seg, rowIdx, at, tmp) {
    var len = seg.length;
    for (var k = 0; k < len; k++) { var i = seg[k]; tmp[at[rowIdx[i]]++] = i; }
    seg.set(tmp.subarray(0, len));
  }

  /* Groups slices by track, sorts where needed, packs rows; returns transferable data. */
  Parser.prototype.build = function () {
    var n = this.n, ts = this.ts, dur = this.dur, track = this.track, nt = this.tracks.length;
    if (!isFinite(this.minTs)) { this.minTs = 0; this.maxTs = 1; }
    if (this.maxTs <= this.minTs) this.maxTs = this.minTs + 1;
    var start = new Int32Array(nt + 1), k, i;
    for (i = 0; i < n; i++) start[track[i] + 1]++;
    for (k = 0; k < nt; k++) start[k + 1] += start[k];
    var fill = start.slice(0, nt), order = new Int32Array(n);
    for (i = 0; i < n; i++) order[fill[track[i]]++] = i;
    var rowIdx = new Int32Array(n), tmp = new Int32Array(64), scratch = { end: new Float64Array(16), count: new Int32Array(16) };
    var byStartLongest = function (x, y) { return ts[x] - ts[y] || dur[y] - dur[x]; };
    var tracksOut = [];
    for (var ti = 0; ti < nt; ti++) {
      var t = this.tracks[ti], a = start[ti], b = start[ti + 1], seg = order.subarray(a, b);
      var needSort = !t.sorted;
      if (!needSort) {
        for (k = 1; k < seg.length; k++) {
          var x = seg[k - 1], y = seg[k];
          if (ts[y] === ts[x] && dur[y] > dur[x]) { needSort = true; break; }
        }
      }
      if (needSort) seg.sort(byStartLongest);
      var rows = packRows(seg, ts, dur, rowIdx, scratch), rowCount = scratch.count;
      // regroup the segment row by row (stable: each row stays sorted by start)
      var rowStart = [a];
      for (var r2 = 0; r2 < rows; r2++) rowStart.push(rowStart[r2] + rowCount[r2]);
      if (rows > 1) {
        if (tmp.length < seg.length) tmp = new Int32Array(seg.length);
        var at = rowStart.slice(0, rows).map(function (v) { return v - a; });
        regroup(seg, rowIdx, at, tmp);
      }
      tracksOut.push({ id: t.id, pid: t.pid, tid: t.tid, name: t.name, sort: t.sort, count: t.count,
                       hasDerived: t.hasDerived, catMask: t.catMask, rowStart: rowStart });
    }
    // flows ordered by start time (checked first: usually already in order)
    var fn = this.flowN, fts = this.flowFromTs, sorted = true;
    for (k = 1; k < fn; k++) if (fts[k] < fts[k - 1]) { sorted = false; break; }
    var ff = this.flowFromTrack.slice(0, fn), fft = fts.slice(0, fn), ft = this.flowToTrack.slice(0, fn), ftt = this.flowToTs.slice(0, fn);
    if (!sorted) {
      var perm = new Int32Array(fn);
      for (k = 0; k < fn; k++) perm[k] = k;
      perm.sort(function (x, y) { return fft[x] - fft[y]; });
      var a1 = new Int32Array(fn), a2 = new Float64Array(fn), a3 = new Int32Array(fn), a4 = new Float64Array(fn);
      for (k = 0; k < fn; k++) { var pk = perm[k]; a1[k] = ff[pk]; a2[k] = fft[pk]; a3[k] = ft[pk]; a4[k] = ftt[pk]; }
      ff = a1; fft = a2; ft = a3; ftt = a4;
    }
    var counters = this.counterList.map(function (c) {
      return { pid: c.pid, name: c.name, ts: Float64Array.from(c.ts), val: Float64Array.from(c.val), max: c.max };
    });
    // argOff fits Uint32 unless the arena passed 4 GB
    var argOff = this.arenaLen < 4294967296 ? new Uint32Array(n) : this.argOff.slice(0, n);
    if (argOff.constructor === Uint32Array) argOff.set(this.argOff.subarray(0, n));        // (converted natively)
    var out = {
      n: n, ts: ts.slice(0, n), dur: dur.slice(0, n), nameId: this.nameId.slice(0, n), cat: this.cat.slice(0, n),
      track: track.slice(0, n), rowIdx: rowIdx, argOff: argOff, argLen: this.argLen.slice(0, n),
      arena: this.arena.length === this.arenaLen ? this.arena : this.arena.slice(0, this.arenaLen), order: order, names: this.names, tracks: tracksOut,
      groups: this.groupOrder.map(function (g) { return { pid: g.pid, name: g.name, sort: g.sort }; }), counters: counters,
      flows: { n: fn, fromTrack: ff, fromTs: fft, toTrack: ft, toTs: ftt },
      minTs: this.minTs, maxTs: this.maxTs, eventCount: this.eventCount, metadata: this.topLevel.metadata || {},
      topLevelKeys: Object.keys(this.topLevel)
    };
    return out;
  };

  /* The buffers of a build() result, for postMessage's transfer list. */
  function transferList(out) {
    var list = [out.ts, out.dur, out.nameId, out.cat, out.track, out.rowIdx, out.argOff, out.argLen, out.arena, out.order,
                out.flows.fromTrack, out.flows.fromTs, out.flows.toTrack, out.flows.toTs];
    out.counters.forEach(function (c) { list.push(c.ts, c.val); });
    return list.map(function (a) { return a.buffer; });
  }

  /*
   * Where a file may be cut for two parsers: in bytes (a window read at file offset
   * `at`), the first `{` that follows `}`, a comma and whitespace holding a newline
   * (how `stepscope export` separates events: "},\n{"), else the first that follows
   * `},` without a newline. Returns a file offset or -1. Only a candidate: the head
   * parser's state at the cut decides (absorb), so a cut inside a string or a nested
   * object costs time, never correctness.
   */
  function findEventCut(bytes, at) {
    var n = bytes.length, fallback = -1;
    for (var p = 0; p < n; p++) {
      if (bytes[p] !== 0x7b) continue;
      var q = p - 1, newline = false;
      while (q >= 0 && isWs(bytes[q])) { if (bytes[q] === 0x0a) newline = true; q--; }
      if (q < 0 || bytes[q] !== 0x2c) continue;
      q--;
      while (q >= 0 && isWs(bytes[q])) { if (bytes[q] === 0x0a) newline = true; q--; }
      if (q < 0 || bytes[q] !== 0x7d) continue;
      if (newline) return at + p;
      if (fallback < 0) fallback = at + p;
    }
    return fallback;
  }

  return { Parser: Parser, transferList: transferList, tailTransferList: tailTransferList,
           findEventCut: findEventCut, CAT_NAMES: CAT_NAMES };
};
