/*
 * json_stream.js — an incremental JSON event splitter for Chrome-trace files.
 *
 * What it is for: a trace export can be gigabytes; it must never become one JS
 * string handed to one JSON.parse. This splitter is fed the file as byte chunks
 * (from fetch(), File.stream() or a slice of an inlined string) and hands the
 * events of the "traceEvents" array back in batches, as parsed objects, while the
 * rest of the document (the small "metadata" and other top-level members) is
 * collected and parsed separately.
 *
 * How it works: a byte-level scanner keeps the JSON nesting depth and whether it
 * is inside a string across chunks. All structural characters are ASCII, so
 * scanning UTF-8 bytes is safe. Inside strings it jumps from quote to quote with
 * the native indexOf and counts preceding backslashes to tell escaped quotes.
 * When an element of the event array closes, its end offset is recorded; once the
 * chunk is scanned, the bytes from the first complete element to the last are
 * decoded and parsed with one JSON.parse("[" + text + "]") — one parse per chunk
 * of a few hundred kilobytes at most. Bytes of an unfinished element (or key, or
 * top-level value) are carried over to the next chunk. Both the object form
 * {"traceEvents":[...], ...} and the bare array form [...] are accepted.
 */
'use strict';

var SS = window.SS || (window.SS = {});

SS.JsonEventSplitter = function (onEvents, options) {
  this.onEvents = onEvents;              // function(array of event objects)
  this.topLevel = {};                    // other top-level members, parsed
  this.decoder = new TextDecoder('utf-8');
  this.buf = new Uint8Array(0);          // carried bytes + current chunk
  this.scanPos = 0;                      // next byte of buf to scan
  this.base = 0;                         // file offset of buf[0], for messages
  this.depth = 0;
  this.inString = false;
  this.form = null;                      // 'object' | 'array'
  this.eventDepth = -1;                  // depth of the open event array
  this.elemStart = -1;                   // start of the current unfinished element
  this.keyStart = -1;                    // start of a top-level key string
  this.currentKey = null;
  this.expectKey = false;
  this.valueStart = -1;                  // start of a captured top-level value
  this.eventCount = 0;
  this.fastFailures = 0;
  this.finishing = false;                 // misses of the one-event-per-line fast path
  this.maxBatchBytes = (options && options.maxBatchBytes) || (4 << 20);
};

SS.JsonEventSplitter.prototype.error = function (msg, pos) {
  return new Error('trace JSON: ' + msg + ' near byte ' + (this.base + pos));
};

/* Feeds one chunk of bytes (Uint8Array). Throws an Error on malformed input. */
SS.JsonEventSplitter.prototype.push = function (chunk) {
  var buf;
  if (this.buf.length === 0) buf = chunk;
  else {
    buf = new Uint8Array(this.buf.length + chunk.length);
    buf.set(this.buf, 0);
    buf.set(chunk, this.buf.length);
  }
  this.buf = buf;
  this.scan();
};

SS.JsonEventSplitter.prototype.scan = function () {
  if (!this.finishing && this.fastFailures < 2 && !this.inString && this.eventDepth > 0 &&
      this.depth === this.eventDepth && this.elemStart < 0 && this.fastPath()) return;
  var buf = this.buf, n = buf.length, i = this.scanPos;
  var depth = this.depth, inString = this.inString, evDepth = this.eventDepth;
  var firstElem = this.elemStart, lastEnd = -1;   // complete elements: [firstElem, lastEnd)
  while (i < n) {
    if (inString) {
      var q = buf.indexOf(0x22, i);
      if (q < 0) { i = n; break; }
      var bs = 0, k = q - 1;
      while (k >= 0 && buf[k] === 0x5c) { bs++; k--; }
      i = q + 1;
      if (bs & 1) continue;            // escaped quote
      inString = false;
      if (this.keyStart >= 0 && depth === 1) {
        this.currentKey = JSON.parse(this.decoder.decode(buf.subarray(this.keyStart, i)));
        this.keyStart = -1;
      }
      continue;
    }
    var c = buf[i];
    switch (c) {
      case 0x22: // "
        inString = true;
        if (depth === 1 && this.form === 'object') {
          if (this.expectKey) {
            this.keyStart = i;
            this.expectKey = false;
          } else if (this.valueStart < 0 && this.currentKey !== null) {
            this.valueStart = i;
          }
        }
        break;
      case 0x7b: // {
      case 0x5b: // [
        if (depth === 0) {
          this.form = c === 0x7b ? 'object' : 'array';
          if (c === 0x5b) evDepth = 1;
          else this.expectKey = true;
        } else if (depth === 1 && this.form === 'object') {
          if (this.currentKey === 'traceEvents' && c === 0x5b) evDepth = 2;
          else if (this.valueStart < 0) this.valueStart = i;
        } else if (depth === evDepth) {
          if (c !== 0x7b) throw this.error('an event is not an object', i);
          this.elemStart = i;
          if (firstElem < 0) firstElem = i;
        }
        depth++;
        break;
      case 0x7d: // }
      case 0x5d: // ]
        depth--;
        if (depth < 0) throw this.error('unbalanced brackets', i);
        if (depth === evDepth) {
          lastEnd = i + 1;
          this.elemStart = -1;
          this.eventCount++;
          if (lastEnd - firstElem > this.maxBatchBytes) {
            this.emit(buf, firstElem, lastEnd);
            firstElem = -1;
          }
        } else if (depth === evDepth - 1 && evDepth > 0) {
          evDepth = -1;                  // the event array closed
          if (this.form === 'object') this.currentKey = null;
        } else if (depth === 1 && this.form === 'object' && this.valueStart >= 0) {
          this.finishValue(buf, i + 1);
        } else if (depth === 0 && this.form === 'object' && this.valueStart >= 0) {
          this.finishValue(buf, i);      // a scalar was the last member
        }
        break;
      case 0x2c: // ,
        if (depth === 1 && this.form === 'object') {
          if (this.valueStart >= 0) this.finishValue(buf, i);
          this.expectKey = true;
          this.currentKey = null;
        }
        break;
      case 0x3a: // :
        break;
      case 0x20: case 0x0a: case 0x0d: case 0x09:
        break;
      default:
        // a scalar: only top-level members have scalars outside events
        if (depth === 1 && this.form === 'object' && this.valueStart < 0 && this.currentKey !== null &&
            this.currentKey !== 'traceEvents') this.valueStart = i;
        else if (depth === 0) throw this.error('not a JSON object or array', i);
        else if (depth === evDepth) throw this.error('an event is not an object', i);
    }
    i++;
  }
  this.depth = depth; this.inString = inString; this.eventDepth = evDepth;
  if (firstElem >= 0 && lastEnd > firstElem) this.emit(buf, firstElem, lastEnd);
  // keep the bytes something still needs
  var keep = n;
  if (this.elemStart >= 0) keep = Math.min(keep, this.elemStart);
  if (this.keyStart >= 0) keep = Math.min(keep, this.keyStart);
  if (this.valueStart >= 0) keep = Math.min(keep, this.valueStart);
  // an unfinished string outside any kept region: keep from its quote so escapes count right
  if (inString && keep === n) keep = Math.max(0, n - 64);
  var rest = buf.slice(keep);
  if (this.elemStart >= 0) this.elemStart -= keep;
  if (this.keyStart >= 0) this.keyStart -= keep;
  if (this.valueStart >= 0) this.valueStart -= keep;
  this.buf = rest;
  this.base += keep;
  this.scanPos = n - keep;
};

/*
 * The fast path for exports written one event per line. A raw newline byte can
 * never occur inside a JSON string, so the text from an element boundary to the
 * last newline of the buffer is outside any string; if it parses as a list of
 * objects it is balanced, so the cut was at an element boundary too. When it does
 * not parse (pretty-printed files, the end of the array) nothing is consumed and
 * the byte scanner does the work; after two misses the fast path is turned off.
 */
SS.JsonEventSplitter.prototype.fastPath = function () {
  var buf = this.buf, from = this.scanPos, nl = buf.lastIndexOf(0x0a);
  if (nl <= from) return false;
  var a = from, b = nl;
  while (a < b && (buf[a] === 0x2c || buf[a] <= 0x20)) a++;
  while (b > a && (buf[b - 1] === 0x2c || buf[b - 1] <= 0x20)) b--;
  if (a >= b) return false;
  if (buf[a] !== 0x7b || buf[b - 1] !== 0x7d) { this.fastFailures++; return false; }
  var events;
  try {
    events = JSON.parse('[' + this.decoder.decode(buf.subarray(a, b)) + ']');
  } catch (e) {
    this.fastFailures++;
    return false;
  }
  for (var k = 0; k < events.length; k++) {
    if (events[k] === null || typeof events[k] !== 'object' || Array.isArray(events[k])) {
      this.fastFailures++;
      return false;
    }
  }
  this.eventCount += events.length;
  this.onEvents(events);
  this.buf = buf.slice(nl + 1);
  this.base += nl + 1;
  this.scanPos = 0;                      // the rest is scanned with the next chunk
  return true;
};

SS.JsonEventSplitter.prototype.emit = function (buf, start, end) {
  var text = this.decoder.decode(buf.subarray(start, end));
  var events;
  try {
    events = JSON.parse('[' + text + ']');
  } catch (e) {
    throw this.error('bad event JSON (' + e.message + ')', start);
  }
  this.onEvents(events);
};

SS.JsonEventSplitter.prototype.finishValue = function (buf, end) {
  var text = this.decoder.decode(buf.subarray(this.valueStart, end)).trim();
  this.valueStart = -1;
  if (this.currentKey !== null) {
    try {
      this.topLevel[this.currentKey] = JSON.parse(text);
    } catch (e) {
      throw this.error('bad value of "' + this.currentKey + '" (' + e.message + ')', end);
    }
  }
  this.currentKey = null;
};

/* Call after the last chunk; throws when the document is incomplete. */
SS.JsonEventSplitter.prototype.finish = function () {
  this.finishing = true;
  if (this.scanPos < this.buf.length) this.scan();
  if (this.form === null) throw this.error('empty document', 0);
  if (this.depth !== 0 || this.inString) {
    throw this.error('truncated document (' + this.eventCount + ' complete events read)', this.scanPos);
  }
};
