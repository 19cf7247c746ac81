/*
 * test_parse_split.js — the viewer's split parse (two parsers, each reading one part
 * of a trace export, joined by Parser.absorb) must give exactly the model one parser
 * reading the whole file gives, wherever the file is cut. Runs in Node on
 * viewer/js/trace_parse.js itself (no browser).
 *
 *   node test_parse_split.js [SAMPLE_TRACE.json]
 *
 * How it works: for every document of a hand-made set (flows whose start and end fall
 * on either side of the cut, numeric and string ids, t steps, flows without a start,
 * B/E pairs across the cut, thread and process names given after their first events,
 * counters on both sides, tracks out of order across the cut, escaped strings, both
 * document forms, members after the array, bad documents) and for EVERY byte offset
 * as the cut, it runs the head parser on [0, cut) and a tail parser on [cut, end),
 * joins them (or, when absorb refuses or the tail fails, lets the head read on, as the
 * loader does) and compares every column, string, track, group, counter, flow and
 * top-level member with the one-parser result (or the same error message). With a
 * sample trace (tests/viewer/make_sample.py) it also cuts that file where the loader
 * would (findEventCut from the middle) and at 40 other offsets, and checks that the
 * loader's cut is really joined (not silently read by the head alone). It also
 * checks that the comparison itself can fail (a model with one changed value differs).
 * Exit 0 when everything agrees, 1 otherwise.
 */
'use strict';
const fs = require('fs');
const path = require('path');

const parserFile = process.env.PARSER || path.join(__dirname, '..', '..', 'viewer', 'js', 'trace_parse.js');
const SS = (new Function(fs.readFileSync(parserFile, 'utf8') + '\nreturn SS;'))();
const F = SS.traceParserFactory();
const enc = new TextEncoder();
let failures = 0, checks = 0;

function fail(msg) { failures++; console.log('FAIL: ' + msg); }

/* Deep equality with key order, typed arrays element by element (Object.is). */
function diff(a, b, where) {
  if (Object.is(a, b)) return null;
  if (typeof a !== typeof b || a === null || b === null || typeof a !== 'object') return where + ': ' + String(a) + ' != ' + String(b);
  if (ArrayBuffer.isView(a) || ArrayBuffer.isView(b)) {
    if (!ArrayBuffer.isView(a) || !ArrayBuffer.isView(b) || a.constructor !== b.constructor) return where + ': array types differ';
    if (a.length !== b.length) return where + ': lengths ' + a.length + ' != ' + b.length;
    for (let i = 0; i < a.length; i++) if (!Object.is(a[i], b[i])) return where + '[' + i + ']: ' + a[i] + ' != ' + b[i];
    return null;
  }
  if (Array.isArray(a) !== Array.isArray(b)) return where + ': array vs object';
  const ka = Object.keys(a), kb = Object.keys(b);
  if (ka.join('\u0000') !== kb.join('\u0000')) return where + ': keys ' + ka + ' != ' + kb;
  for (const k of ka) {
    const d = diff(a[k], b[k], where + '.' + k);
    if (d) return d;
  }
  return null;
}

function pushChunks(p, bytes, a, b, step) {
  for (let k = a; k < b; k += step) p.push(bytes.subarray(k, Math.min(b, k + step)));
}

/* One parser over the whole document: its model, or {error}. */
function whole(bytes, step) {
  try {
    const p = new F.Parser(bytes.length);
    pushChunks(p, bytes, 0, bytes.length, step);
    return p.finish();
  } catch (e) {
    return { error: e.message };
  }
}

/* Head [0, cut) + tail [cut, end) as the loader does it; .joined says whether absorb took the tail. */
function split(bytes, cut, step) {
  let head, joined = false;
  try {
    head = new F.Parser(bytes.length);
    pushChunks(head, bytes, 0, cut, step);
  } catch (e) {
    return { error: e.message, joined: false };
  }
  let tailState = null;
  try {
    const tail = new F.Parser(bytes.length - cut, { tail: true, base: cut });
    pushChunks(tail, bytes, cut, bytes.length, step);
    tailState = tail.finishTail();
    // what crosses from the worker: a structured clone (typed arrays by transfer)
    tailState = structuredClone(tailState, { transfer: F.tailTransferList(tailState) });
  } catch (e) {
    tailState = null;
  }
  try {
    if (tailState && head.absorb(tailState) === null) joined = true;
    else pushChunks(head, bytes, cut, bytes.length, step);
    const out = head.finish();
    out.joined = joined;
    return out;
  } catch (e) {
    return { error: e.message, joined: joined };
  }
}

function compare(bytes, cut, step, label, want) {
  const got = split(bytes, cut, step), joined = got.joined;
  delete got.joined;
  checks++;
  const d = diff(got, want, 'model');
  if (d) fail(label + ' cut ' + cut + ' chunk ' + step + ': ' + d);
  return joined;
}

/* Every cut of a document, at two chunk sizes; returns how many cuts were joined. */
function everyCut(text, label) {
  const bytes = enc.encode(text);
  let joined = 0;
  for (const step of [1 << 30, 5]) {
    const want = whole(bytes, step);
    for (let cut = 0; cut <= bytes.length; cut++) if (compare(bytes, cut, step, label, want)) joined++;
  }
  return joined;
}

const ev = (o) => JSON.stringify(o);
const DOCS = {
  // flows across the cut: string ids, numeric ids, t steps, a flow with no start, a start never ended
  flows: '{"traceEvents":[\n' + [
    ev({ ph: 'M', pid: 1, tid: 0, name: 'process_name', args: { name: 'rank 0' } }),
    ev({ ph: 'X', pid: 1, tid: 2, name: 'launch', ts: 1, dur: 2, args: { category: 'host' } }),
    ev({ ph: 's', pid: 1, tid: 2, name: 'l', cat: 'launch', id: '0:1', ts: 1.5 }),
    ev({ ph: 's', pid: 1, tid: 2, name: 'l', cat: 'launch', id: 7, ts: 1.6 }),
    ev({ ph: 's', pid: 1, tid: 2, name: 'l', cat: 'other', id: 7, ts: 1.7 }),
    ev({ ph: 'X', pid: 1, tid: 3, name: 'gemm', ts: 4, dur: 3, args: { category: 'compute', n: [1, { a: '},\n{' }] } }),
    ev({ ph: 't', pid: 1, tid: 3, name: 'l', cat: 'launch', id: 7, ts: 4.1 }),
    ev({ ph: 'f', bp: 'e', pid: 1, tid: 3, name: 'l', cat: 'launch', id: '0:1', ts: 4 }),
    ev({ ph: 'f', bp: 'e', pid: 1, tid: 4, name: 'l', cat: 'launch', id: 7, ts: 5 }),
    ev({ ph: 'f', pid: 1, tid: 4, name: 'l', cat: 'launch', id: 'nostart', ts: 5 }),
    ev({ ph: 't', pid: 1, tid: 4, name: 'l', cat: 'launch', id: 'nostart2', ts: 5.5 }),
    ev({ ph: 'f', pid: 1, tid: 4, name: 'l', cat: 'launch', id: 'nostart2', ts: 5.6 }),
    ev({ ph: 'f', pid: 1, tid: 4, name: 'l', cat: 'other', id: 7, ts: 6 }),
    ev({ ph: 's', pid: 1, tid: 4, name: 'l', cat: 'launch', id: 7, ts: 6.5 }),
    ev({ ph: 'f', pid: 1, tid: 2, name: 'l', cat: 'launch', id: 7, ts: 6.7 }),
    ev({ ph: 's', pid: 1, tid: 4, name: 'l', id: 'x\\y', ts: 7 }),
    ev({ ph: 'f', pid: 1, tid: 4, name: 'l', id: 'x\\y', ts: 8 })
  ].join(',\n') + '\n],\n"displayTimeUnit":"ns",\n"metadata":{"stepscope":{"k":1}}}\n',
  // names, sort indices and counters given on both sides; a track out of order across the cut
  names: '{"before":[1,{"x":2}],"traceEvents":[' + [
    ev({ ph: 'X', pid: 2, tid: 1, name: 'a', ts: 10, dur: 1 }),
    ev({ ph: 'C', pid: 2, name: 'mem', ts: 10, args: { value: 5, other: 1 } }),
    ev({ ph: 'M', pid: 2, tid: 1, name: 'thread_name', args: { name: 'first' } }),
    ev({ ph: 'X', pid: 2, tid: 1, name: 'b\u00e9\n', ts: 12, dur: 1, args: { category: 'comm' } }),
    ev({ ph: 'X', pid: '3', tid: 'w', name: 'a', ts: 3, dur: 5, cat: 'memcpy' }),
    ev({ ph: 'X', pid: 2, tid: 1, name: 'c', ts: 11, dur: 0.5 }),
    ev({ ph: 'M', pid: 2, tid: 1, name: 'thread_name', args: { name: 'second' } }),
    ev({ ph: 'M', pid: 4, tid: 1, name: 'thread_sort_index', args: { sort_index: 3 } }),
    ev({ ph: 'C', pid: 2, name: 'mem', ts: 13, args: { value: 9 } }),
    ev({ ph: 'M', pid: 2, name: 'process_sort_index', args: { sort_index: 7 } }),
    ev({ ph: 'i', pid: 5, tid: 1, name: 'mark', ts: 1 }),
    ev({ ph: 'X', pid: 2, tid: 1, name: 'a', ts: 12, dur: 3, args: { category: 'derived' } }),
    ev({ ph: 'X', pid: 2, tid: 9, name: 'z\\"q', ts: 2, dur: 1 })
  ].join(',') + '],"after":{"y":[3]}}',
  // B/E pairs: closed on either side, one across the cut (absorb must refuse), an E with no B
  begin_end: '[' + [
    ev({ ph: 'B', pid: 1, tid: 1, name: 'outer', ts: 1, args: { a: 1 } }),
    ev({ ph: 'B', pid: 1, tid: 1, name: 'inner', ts: 2 }),
    ev({ ph: 'E', pid: 1, tid: 1, ts: 3, args: { b: 2 } }),
    ev({ ph: 'E', pid: 1, tid: 2, ts: 3 }),
    ev({ ph: 'X', pid: 1, tid: 2, name: 'x', ts: 3, dur: 1 }),
    ev({ ph: 'B', pid: 1, tid: 2, name: 'late', ts: 4 }),
    ev({ ph: 'E', pid: 1, tid: 2, ts: 5 }),
    ev({ ph: 'E', pid: 1, tid: 1, ts: 6 })
  ].join(',\n') + ']',
  // the array form with nothing after it; whitespace around everything
  array: ' [ ' + [ev({ ph: 'X', pid: 1, tid: 1, name: 'a', ts: 1, dur: 1 }), ev({ ph: 'X', pid: 1, tid: 1, name: 'a', ts: 0.5, dur: 2 }),
                  ev({ ph: 'X', pid: 1, tid: 2, name: 'b', ts: 1e3, dur: 1.25e1 })].join(' , \n ') + ' ] \n'
};
const BAD = {
  trailing_comma: '{"traceEvents":[' + ev({ ph: 'X', pid: 1, tid: 1, name: 'a', ts: 1, dur: 1 }) + '],}x',
  array_then_member: '[' + ev({ ph: 'X', pid: 1, tid: 1, name: 'a', ts: 1, dur: 1 }) + '],"x":1}',
  truncated: '{"traceEvents":[' + ev({ ph: 'X', pid: 1, tid: 1, name: 'a', ts: 1, dur: 1 }) + ',\n' + ev({ ph: 'X', pid: 1, tid: 1, name: 'b', ts: 2, dur: 1 }),
  bad_event: '{"traceEvents":[' + ev({ ph: 'X', pid: 1, tid: 1, name: 'a', ts: 1, dur: 1 }) + ',\n' + ev({ ph: 'X', pid: 1, tid: 1, name: 'b', ts: 2, dur: 1 }) + ',\n7]}'
};

// the comparison can fail: a changed value, a changed name, a changed flow are differences
(function selfCheck() {
  const bytes = enc.encode(DOCS.flows), a = whole(bytes, 1 << 30), b = whole(bytes, 1 << 30), c = whole(bytes, 1 << 30);
  b.ts[1] += 1e-9;
  c.names = c.names.slice(); c.names[c.names.length - 1] += 'x';
  const e = whole(bytes, 1 << 30);
  e.flows.toTs[0] += 1;
  if (!diff(a, b, 'm') || !diff(a, c, 'm') || !diff(a, e, 'm') || diff(a, whole(bytes, 7), 'm')) fail('the comparison does not tell models apart');
  if (a.flows.n < 4) fail('the flows document has only ' + a.flows.n + ' flows');
})();

for (const [name, text] of Object.entries(DOCS)) {
  const joined = everyCut(text, name), n = enc.encode(text).length + 1;
  // most cuts of a good document fall inside an event (refused): some must have been joined
  if (joined < 4) fail(name + ': only ' + joined + ' cuts were joined');
  console.log('ok: ' + name + ': every one of ' + n + ' cuts (x2 chunk sizes) gives the one-parser model; ' + joined + ' joined');
}
for (const [name, text] of Object.entries(BAD)) {
  const bytes = enc.encode(text), want = whole(bytes, 1 << 30);
  if (!want.error) fail(name + ': the one-parser parse accepted a bad document');
  for (let cut = 0; cut <= bytes.length; cut++) compare(bytes, cut, 1 << 30, name, want);
  console.log('ok: bad document ' + name + ': every cut gives the same error (' + want.error + ')');
}
// a B in the head closed by an E of the tail: the loader's join must have been refused
(function refusal() {
  const text = DOCS.begin_end, bytes = enc.encode(text);
  const cut = text.indexOf('{"ph":"E","pid":1,"tid":1,"ts":3');
  const head = new F.Parser(0), tail = new F.Parser(0, { tail: true, base: cut });
  head.push(bytes.subarray(0, cut)); tail.push(bytes.subarray(cut));
  const why = head.absorb(tail.finishTail());
  if (!why) fail('absorb joined a tail whose E closes a B of the head');
  else console.log('ok: absorb refuses a tail whose E closes a head B (' + why + ')');
})();

// a sample trace: the loader's cut and 40 others
if (process.argv[2]) {
  const bytes = new Uint8Array(fs.readFileSync(process.argv[2]));
  const want = whole(bytes, 1 << 20);
  if (want.error) fail('sample: ' + want.error);
  const mid = bytes.length >> 1, cut = F.findEventCut(bytes.subarray(mid, mid + 65536), mid);
  if (cut < 0) fail('sample: no cut found after the middle');
  else if (!compare(bytes, cut, 1 << 20, 'sample (loader cut)', want)) fail('sample: the loader cut ' + cut + ' was not joined');
  let joined = 0, flowsAcross = 0;
  for (let k = 1; k <= 40; k++) {
    const at = Math.floor(bytes.length * k / 41), c = F.findEventCut(bytes.subarray(at, at + 65536), at);
    if (compare(bytes, c < 0 ? at : c, 1 << 16, 'sample', want)) joined++;
    if (compare(bytes, at, 1 << 16, 'sample (raw offset)', want)) joined++;
    // how many flows of the part before end after this cut (the tail meets them first by their end)
    const tail = new F.Parser(0, { tail: true, base: c });
    tail.push(bytes.subarray(c));
    flowsAcross += tail.finishTail().conds.length;
  }
  if (joined < 40) fail('sample: only ' + joined + ' of 80 cuts were joined');
  if (!flowsAcross) fail('sample: no flow crossed any of the cuts');
  console.log('ok: sample ' + bytes.length + ' bytes, ' + want.n + ' slices, ' + want.flows.n + ' flows: the loader cut and 80 others ' +
              'give the one-parser model (' + joined + ' joined; ' + flowsAcross + ' flows crossed the 40 event-boundary cuts)');
}

console.log(checks + ' comparisons, ' + failures + ' failures');
process.exit(failures ? 1 : 0);
