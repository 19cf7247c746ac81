/*
 * bench_parse_node.js — times the viewer's trace parser (viewer/js/trace_parse.js)
 * alone, in Node, on a Chrome-trace export: no browser, no server, no drawing, so
 * the parser's own cost can be profiled (`node --cpu-prof`) and compared between
 * two versions of the file (PARSER=path/to/other/trace_parse.js).
 *
 *   node bench/viewer/bench_parse_node.js TRACE.json [CHUNK_KB]     (REPS=3 by default)
 *   SPLIT=0.5 node bench/viewer/bench_parse_node.js TRACE.json      (the two-worker parse)
 *
 * Prints per repetition: events, slices and flows read, the time of push() over
 * all chunks, of finish() (grouping and row packing), the process CPU time and
 * the rate in MB of JSON per second of wall time. With SPLIT=F the file is cut as
 * the viewer's loader cuts it (findEventCut from fraction F): the head [0, cut) is
 * parsed on the main thread while a worker thread parses the tail [cut, end), then
 * the head absorbs the tail and builds; it prints the head's and the tail's parse
 * times, the wait for the tail, absorb, build and the whole wall time, and checks
 * that the model equals the one-parser model (every column; exit 1 if not).
 */
'use strict';
const fs = require('fs');
const path = require('path');
const { Worker, isMainThread, parentPort, workerData } = require('worker_threads');

const parserFile = process.env.PARSER || path.join(__dirname, '..', '..', 'viewer', 'js', 'trace_parse.js');
const SS = (new Function(fs.readFileSync(parserFile, 'utf8') + '\nreturn SS;'))();

function feed(p, data, a, b, chunk) {
  for (let off = a; off < b; off += chunk) p.push(new Uint8Array(data.buffer, data.byteOffset + off, Math.min(chunk, b - off)));
}

if (!isMainThread) {
  // the tail worker: parses [cut, end) of the file and posts its state
  const { file, cut, chunk } = workerData, F = SS.traceParserFactory();
  const data = fs.readFileSync(file), t0 = process.hrtime.bigint();
  const p = new F.Parser(data.length - cut, { tail: true, base: cut });
  feed(p, data, cut, data.length, chunk);
  const state = p.finishTail();
  state.parseMs = Number(process.hrtime.bigint() - t0) / 1e6;
  parentPort.postMessage(state, F.tailTransferList(state));
  return;
}

if (process.argv.length < 3) {
  console.error('usage: node bench_parse_node.js TRACE.json [CHUNK_KB]');
  process.exit(2);
}
const file = process.argv[2];
const data = fs.readFileSync(file);
const chunk = (+process.argv[3] || 1024) * 1024;
const split = +process.env.SPLIT || 0;
const ms = (a, b) => (Number(b - a) / 1e6).toFixed(0);
console.log(`parser ${parserFile}, ${data.length} bytes, chunks of ${chunk} bytes, node ${process.version}` +
            (split ? `, split at ${split}` : ''));

function same(a, b) {
  const keys = ['ts', 'dur', 'nameId', 'cat', 'track', 'rowIdx', 'argOff', 'argLen', 'arena', 'order'];
  for (const k of keys) if (Buffer.compare(Buffer.from(a[k].buffer, a[k].byteOffset, a[k].byteLength), Buffer.from(b[k].buffer, b[k].byteOffset, b[k].byteLength))) return k;
  for (const k of ['fromTrack', 'fromTs', 'toTrack', 'toTs']) {
    const x = a.flows[k], y = b.flows[k];
    if (Buffer.compare(Buffer.from(x.buffer, x.byteOffset, x.byteLength), Buffer.from(y.buffer, y.byteOffset, y.byteLength))) return 'flows.' + k;
  }
  const rest = (m) => JSON.stringify([m.n, m.names, m.tracks, m.groups, m.counters.map((c) => [c.pid, c.name, Array.from(c.ts), Array.from(c.val), c.max]),
                                     m.minTs, m.maxTs, m.eventCount, m.metadata, m.topLevelKeys]);
  return rest(a) === rest(b) ? null : 'tables';
}

async function main() {
  let reference = null;
  for (let rep = 0; rep < (+process.env.REPS || 3); rep++) {
    const F = SS.traceParserFactory();
    const c0 = process.cpuUsage(), t0 = process.hrtime.bigint();
    if (!split) {
      const p = new F.Parser(data.length);
      feed(p, data, 0, data.length, chunk);
      const t1 = process.hrtime.bigint();
      const out = p.finish();
      const t2 = process.hrtime.bigint(), c1 = process.cpuUsage(c0);
      console.log(`events ${out.eventCount} slices ${out.n} flows ${out.flows.n}: push ${ms(t0, t1)} ms, ` +
                  `finish ${ms(t1, t2)} ms, cpu ${((c1.user + c1.system) / 1e3).toFixed(0)} ms, ` +
                  `${(data.length / 1e6 / (Number(t2 - t0) / 1e9)).toFixed(0)} MB/s`);
      continue;
    }
    if (!reference) {
      const p = new F.Parser(data.length);
      feed(p, data, 0, data.length, chunk);
      reference = p.finish();
    }
    const at = Math.floor(data.length * split);
    const cut = F.findEventCut(data.subarray(at, at + 65536), at);
    if (cut < 0) { console.log('no cut found'); process.exit(1); }
    const c0b = process.cpuUsage(), s0 = process.hrtime.bigint();
    const tailDone = new Promise((resolve, reject) => {
      const w = new Worker(__filename, { workerData: { file, cut, chunk } });
      w.once('message', resolve); w.once('error', reject);
    });
    const head = new F.Parser(data.length);
    feed(head, data, 0, cut, chunk);
    const s1 = process.hrtime.bigint();
    const tail = await tailDone;
    const s2 = process.hrtime.bigint();
    const why = head.absorb(tail);
    if (why) { console.log('absorb refused: ' + why); process.exit(1); }
    const s3 = process.hrtime.bigint();
    const out = head.finish();
    const s4 = process.hrtime.bigint(), c1 = process.cpuUsage(c0b);
    const diff = same(out, reference);
    console.log(`events ${out.eventCount} slices ${out.n} flows ${out.flows.n}, cut at ${cut}: head parse ${ms(s0, s1)} ms, ` +
                `tail parse ${tail.parseMs.toFixed(0)} ms (worker thread, incl. its file read), wait ${ms(s1, s2)} ms, absorb ${ms(s2, s3)} ms, ` +
                `build ${ms(s3, s4)} ms, wall ${ms(s0, s4)} ms, process cpu ${((c1.user + c1.system) / 1e3).toFixed(0)} ms, ` +
                (diff ? 'DIFFERS from the one-parser model in ' + diff : 'same model as one parser'));
    if (diff) process.exit(1);
  }
}
main();
