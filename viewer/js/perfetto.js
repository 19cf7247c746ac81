/*
 * perfetto.js — "Open in Perfetto": hands the trace to ui.perfetto.dev.
 *
 * How it works (Perfetto's documented postMessage protocol): open the UI in a new
 * window, send 'PING' every 100 ms until the UI answers 'PONG', then post
 * {perfetto: {buffer: ArrayBuffer, title, fileName}}. The trace bytes are read
 * again from their source (the server, the picked file, or the inlined text). The
 * button only works online: the viewer itself never needs the network.
 */
'use strict';

var SS = window.SS || (window.SS = {});
SS.PERFETTO_ORIGIN = 'https://ui.perfetto.dev';

SS.traceBytes = async function (src) {
  if (src.kind === 'url') return await (await fetch(src.url)).arrayBuffer();
  if (src.kind === 'file') return await src.file.arrayBuffer();
  return new TextEncoder().encode(document.getElementById(src.elementId).textContent).buffer;
};

SS.openInPerfetto = async function (run, status) {
  if (!run || !run.trace) { status('no trace to open'); return; }
  if (!navigator.onLine) { status('offline: Perfetto UI cannot be reached'); return; }
  var win = window.open(SS.PERFETTO_ORIGIN + '/#!/viewer');
  if (!win) { status('the browser blocked the Perfetto window (allow pop-ups)'); return; }
  status('reading the trace for Perfetto…');
  var buffer = await SS.traceBytes(run.trace);
  var tries = 0, timer = null;
  var onMessage = function (e) {
    if (e.origin !== SS.PERFETTO_ORIGIN || e.data !== 'PONG') return;
    window.clearInterval(timer);
    window.removeEventListener('message', onMessage);
    win.postMessage({ perfetto: { buffer: buffer, title: 'stepscope · ' + run.name, fileName: 'trace.json' } }, SS.PERFETTO_ORIGIN);
    status('trace sent to Perfetto UI');
  };
  window.addEventListener('message', onMessage);
  timer = window.setInterval(function () {
    if (++tries > 300) {
      window.clearInterval(timer);
      window.removeEventListener('message', onMessage);
      status('Perfetto UI did not answer (offline?)');
      return;
    }
    win.postMessage('PING', SS.PERFETTO_ORIGIN);
  }, 100);
};
