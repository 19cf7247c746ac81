/*
 * compare_parsers.js — checks that two versions of the viewer's parser
 * (viewer/js/trace_parse.js) build the same model from the same files: every
 * column, row, string, track, group, counter, flow and top-level member. For
 * changes meant to be faster, not different (run it before claiming a speed-up).
 *
 *   node bench/viewer/compare_parsers.js OLD_trace_parse.js NEW_trace_parse.js TRACE.json...
 *
 * (e.g. OLD from `git show HEAD~1:viewer/js/trace_parse.js > /tmp/old.js`). Prints one
 * line per file, the first difference if any; exit 1 when any file differs.
 */
'use strict';
const fs = require('fs');

function load(file) {
  return (new Function(fs.readFileSync(file, 'utf8') + '\nreturn SS;'))().traceParserFactory();
}

function parse(F, data) {
  const p = new F.Parser(data.length);
  for (let off = 0; off < data.length; off += 1 << 20) p.push(data.subarray(off, Math.min(data.length, off + (1 << 20))));
  const out = p.finish();
  delete out.timing;
  return out;
}

function diff(a, b, where) {
  if (Object.is(a, b)) return null;
  if (typeof a !== typeof b || a === null || b === null || typeof a !== 'object') return where + ': ' + String(a) + ' != ' + String(b);
  if (ArrayBuffer.isView(a) || ArrayBuffer.isView(b)) {
    if (!ArrayBuffer.isView(a) || !ArrayBuffer.isView(b) || a.constructor !== b.constructor) return where + ': array types differ';
    if (a.length !== b.length) return where + ': lengths ' + a.length + ' != ' + b.length;
    const x = Buffer.from(a.buffer, a.byteOffset, a.byteLength), y = Buffer.from(b.buffer, b.byteOffset, b.byteLength);
    if (x.equals(y)) return null;
    for (let i = 0; i < a.length; i++) if (!Object.is(a[i], b[i])) return where + '[' + i + ']: ' + a[i] + ' != ' + b[i];
    return null;
  }
  const ka = Object.keys(a), kb = Object.keys(b);
  if (ka.join('\u0000') !== kb.join('\u0000')) return where + ': keys ' + ka + ' != ' + kb;
  for (const k of ka) {
    const d = diff(a[k], b[k], where + '.' + k);
    if (d) return d;
  }
  return null;
}

if (process.argv.length < 5) {
  console.error('usage: node compare_parsers.js OLD.js NEW.js TRACE.json...');
  process.exit(2);
}
const oldF = load(process.argv[2]), newF = load(process.argv[3]);
let bad = 0;
for (const file of process.argv.slice(4)) {
  const data = new Uint8Array(fs.readFileSync(file));
  const d = diff(parse(oldF, data), parse(newF, data), 'model');
  console.log((d ? 'DIFFERENT ' : 'same      ') + file + (d ? ': ' + d : ''));
  if (d) bad++;
}
process.exit(bad ? 1 : 0);
