/*
 * bench_parse_node.js — times the viewer's trace parser (viewer/js/trace_parse.js)
 * alone, in Node, on a Chrome-trace export: no browser, no server, no drawing, so
 * the parser's own cost can be profiled (`node --cpu-prof`) and compared between
 * two versions of the file (PARSER=path/to/other/trace_parse.js).
 *
 *   node bench/viewer/bench_parse_node.js TRACE.json [CHUNK_KB]     (REPS=3 by default)
 *
 * Prints per repetition: events, slices and flows read, the time of push() over
 * all chunks, of finish() (grouping and row packing), the process CPU time and
 * the rate in MB of JSON per second of wall time.
 */
'use strict';
const fs = require('fs');
const path = require('path');

const parserFile = process.env.PARSER || path.join(__dirname, '..', '..', 'viewer', 'js', 'trace_parse.js');
const SS = (new Function(fs.readFileSync(parserFile, 'utf8') + '\nreturn SS;'))();
if (process.argv.length < 3) {
  console.error('usage: node bench_parse_node.js TRACE.json [CHUNK_KB]');
  process.exit(2);
}
const data = fs.readFileSync(process.argv[2]);
const chunk = (+process.argv[3] || 1024) * 1024;
console.log(`parser ${parserFile}, ${data.length} bytes, chunks of ${chunk} bytes, node ${process.version}`);
for (let rep = 0; rep < (+process.env.REPS || 3); rep++) {
  const { Parser } = SS.traceParserFactory();
  const c0 = process.cpuUsage(), t0 = process.hrtime.bigint();
  const p = new Parser(data.length);
  for (let off = 0; off < data.length; off += chunk)
    p.push(new Uint8Array(data.buffer, data.byteOffset + off, Math.min(chunk, data.length - off)));
  const t1 = process.hrtime.bigint();
  const out = p.finish();
  const t2 = process.hrtime.bigint(), c1 = process.cpuUsage(c0);
  const ms = (a, b) => (Number(b - a) / 1e6).toFixed(0);
  console.log(`events ${out.eventCount} slices ${out.n} flows ${out.flows.n}: push ${ms(t0, t1)} ms, ` +
              `finish ${ms(t1, t2)} ms, cpu ${((c1.user + c1.system) / 1e3).toFixed(0)} ms, ` +
              `${(data.length / 1e6 / (Number(t2 - t0) / 1e9)).toFixed(0)} MB/s`);
}
