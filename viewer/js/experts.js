/*
 * experts.js — the Experts view: the expert load of a mixture-of-experts run, from the
 * report's `moe` section (docs/report-schema.md; analyzer/src/metrics/moe_load.c).
 *
 * What it shows: headline cards (experts, EP degree, the run's mean imbalances); a
 * steps x experts map, one cell per step and expert coloured by the tokens routed to the
 * expert in the step (all MoE layers and EP groups), with the step's imbalance beside it
 * (max/mean of the worst MoE layer and EP group, the busiest expert and its load against
 * the mean there) and the run's total per expert below; the same per EP rank (expert e
 * lives on EP rank e / (E/ep)) with the EP-rank imbalance and the busiest rank; and per
 * step the waits in the all-to-alls of group `ep`, the rank whose late arrivals caused
 * most of them, and whether that rank is the busiest one (then the imbalance made the
 * others wait). Every figure is the report's: the view only lays them out. Cells and
 * values carry data-* attributes with the raw numbers, for tests.
 *
 * SS.hasMoe(report) says whether the view has anything to show: the app shows the tab
 * only then.
 */
'use strict';

var SS = window.SS || (window.SS = {});

(function () {
  SS.hasMoe = function (report) {
    var moe = report && report.moe;
    return !!(moe && Array.isArray(moe.steps) && moe.steps.length);
  };

  /* White to dark teal by v / max (0..1): the map's colour scale. */
  function heat(v, max) {
    var f = max > 0 ? Math.max(0, Math.min(1, v / max)) : 0;
    var from = [247, 251, 255], to = [8, 81, 156];
    var c = from.map(function (a, k) { return Math.round(a + (to[k] - a) * f); });
    return { bg: 'rgb(' + c.join(',') + ')', fg: f > 0.55 ? '#fff' : '#1d2b3a' };
  }

  function fixed(v, digits) { return typeof v === 'number' && isFinite(v) ? v.toFixed(digits) : '—'; }

  function cell(text, attrs) {
    var td = SS.el('td', Object.assign({ text: text }, attrs || {}));
    return td;
  }

  /* A steps x columns map: rows [{label, step, values, extra: [td...]}], a header, a total row. */
  function loadMap(id, colName, ncols, rows, extraHead, total) {
    var max = 0;
    rows.forEach(function (r) { (r.values || []).forEach(function (v) { if (v > max) max = v; }); });
    var head = [SS.el('th', { text: 'step' })];
    for (var k = 0; k < ncols; k++) head.push(SS.el('th', { text: colName + ' ' + k }));
    extraHead.forEach(function (h) { head.push(SS.el('th', { text: h })); });
    var body = rows.map(function (r) {
      var tds = [SS.el('th', { text: String(r.step) })];
      for (var k = 0; k < ncols; k++) {
        var v = r.values ? r.values[k] : undefined;
        var td = cell(v === undefined ? '—' : String(v), { className: 'cell' });
        if (v !== undefined) {
          var h = heat(v, max);
          td.style.background = h.bg;
          td.style.color = h.fg;
          td.dataset.value = String(v);
        }
        td.dataset.step = String(r.step);
        td.dataset.col = String(k);
        td.title = colName + ' ' + k + ', step ' + r.step + ': ' + (v === undefined ? 'not in the report' : v + ' tokens');
        tds.push(td);
      }
      return SS.el('tr', { 'data-step': String(r.step) }, tds.concat(r.extra));
    });
    if (total) {
      var tds = [SS.el('th', { text: 'all steps' })];
      for (var c = 0; c < ncols; c++) tds.push(cell(String(total[c]), { className: 'num total', 'data-col': String(c), 'data-value': String(total[c]) }));
      body.push(SS.el('tr', { className: 'total-row' }, tds));
    }
    return SS.el('table', { className: 'data heat', id: id }, [SS.el('thead', {}, [SS.el('tr', {}, head)]), SS.el('tbody', {}, body)]);
  }

  SS.renderExperts = function (root, report) {
    root.textContent = '';
    if (!SS.hasMoe(report)) {
      root.appendChild(SS.el('p', { className: 'note', text: 'This run has no mixture-of-experts load in its report.' }));
      return;
    }
    var moe = report.moe, steps = moe.steps, E = moe.experts, ep = moe.ep || 1;
    var cards = [
      ['experts', String(E), E, 'moe-experts'],
      ['expert parallelism (EP)', String(ep), ep, 'moe-ep'],
      ['expert imbalance, mean (max/mean)', fixed(moe.expert_imbalance_mean, 2), moe.expert_imbalance_mean, 'moe-expert-imbalance-mean'],
      ['EP-rank imbalance, mean (max/mean)', fixed(moe.ep_rank_imbalance_mean, 2), moe.ep_rank_imbalance_mean, 'moe-rank-imbalance-mean']
    ];
    root.appendChild(SS.el('div', { className: 'cards', id: 'moe-headline' }, cards.map(function (c) {
      var card = SS.el('div', { className: 'kpi', id: c[3] }, [SS.el('div', { className: 'kpi-label', text: c[0] }), SS.el('div', { className: 'kpi-value', text: c[1] })]);
      if (typeof c[2] === 'number') card.dataset.value = String(c[2]);
      return card;
    })));

    // steps x experts
    var perStep = steps.some(function (s) { return Array.isArray(s.tokens_per_expert); });
    var expertRows = steps.map(function (s) {
      var where = s.layer >= 0 ? 'layer ' + s.layer + ', EP group ' + s.edp_rank : '';
      return {
        step: s.step, values: s.tokens_per_expert,
        extra: [
          cell(String(s.tokens), { className: 'num', 'data-field': 'tokens', 'data-value': String(s.tokens) }),
          cell(fixed(s.expert_imbalance, 2), { className: 'num', 'data-field': 'expert_imbalance', 'data-value': String(s.expert_imbalance) }),
          cell(s.busiest_expert >= 0 ? 'expert ' + s.busiest_expert + ': ' + s.busiest_expert_tokens + ' vs ' + fixed(s.mean_expert_tokens, 1) : '—',
               { 'data-field': 'busiest_expert', 'data-value': String(s.busiest_expert), 'data-tokens': String(s.busiest_expert_tokens),
                 'data-mean': String(s.mean_expert_tokens) }),
          cell(where, { 'data-field': 'where' })
        ]
      };
    });
    var expertChildren = [
      SS.el('p', { className: 'note', text: 'Tokens routed to each expert per step (assignments, before capacity drops; all MoE layers and EP groups), ' +
        'darker = more. Max/mean is the report\'s: the worst MoE layer and EP group of the step (1.00 = balanced), its busiest expert and that expert\'s load against the mean there.' }),
      loadMap('moe-expert-map', 'expert', E, expertRows, ['tokens', 'max/mean', 'busiest expert: tokens vs mean', 'where'], moe.tokens_per_expert)
    ];
    if (!perStep) expertChildren.push(SS.el('p', { className: 'missing', text: 'This report has no per-step load per expert (written by an older stepscope): only the totals are shown.' }));
    root.appendChild(SS.section('Load per expert and step', expertChildren, 'moe-experts-section'));

    // steps x EP ranks
    var rankRows = steps.map(function (s) {
      return {
        step: s.step, values: s.tokens_per_ep_rank,
        extra: [
          cell(fixed(s.ep_rank_imbalance, 2), { className: 'num', 'data-field': 'ep_rank_imbalance', 'data-value': String(s.ep_rank_imbalance) }),
          cell(s.busiest_ep_rank >= 0 ? 'EP rank ' + s.busiest_ep_rank + (s.busiest_rank >= 0 ? ' (rank ' + s.busiest_rank + ')' : '') : '—',
               { 'data-field': 'busiest_rank', 'data-value': String(s.busiest_rank), 'data-ep-rank': String(s.busiest_ep_rank) })
        ]
      };
    });
    var rankTotal = null;
    if (Array.isArray(moe.tokens_per_expert) && E % ep === 0) {
      rankTotal = [];
      for (var q = 0; q < ep; q++) {
        var t = 0;
        for (var e = q * E / ep; e < (q + 1) * E / ep; e++) t += moe.tokens_per_expert[e];
        rankTotal.push(t);
      }
    }
    root.appendChild(SS.section('Load per EP rank and step', [
      SS.el('p', { className: 'note', text: 'Tokens the experts of each EP rank received (expert e lives on EP rank e / (E/ep) = e / ' + (E / ep) + '), all MoE layers and EP groups. ' +
        'Max/mean and the busiest rank are the report\'s: the worst MoE layer and EP group of the step; the rank in brackets is the global rank.' }),
      loadMap('moe-rank-map', 'EP rank', ep, rankRows, ['max/mean', 'busiest'], rankTotal)
    ], 'moe-ranks-section'));

    // the waits in the all-to-alls
    var waitRows = steps.map(function (s) {
      var who = s.a2a_wait_caused_by_rank;
      var same = who >= 0 && s.busiest_rank >= 0 ? (who === s.busiest_rank ? 'yes' : 'no') : '—';
      return SS.el('tr', { 'data-step': String(s.step) }, [
        SS.el('th', { text: String(s.step) }),
        cell(SS.formatNs(s.a2a_wait_ns), { className: 'num', 'data-field': 'a2a_wait_ns', 'data-value': String(s.a2a_wait_ns) }),
        cell(who >= 0 ? 'rank ' + who : 'none', { 'data-field': 'a2a_wait_caused_by_rank', 'data-value': String(who) }),
        cell(who >= 0 ? SS.formatNs(s.a2a_wait_caused_ns) : '—', { className: 'num', 'data-field': 'a2a_wait_caused_ns', 'data-value': String(s.a2a_wait_caused_ns) }),
        cell(s.busiest_rank >= 0 ? 'rank ' + s.busiest_rank : '—', { 'data-field': 'busiest_rank', 'data-value': String(s.busiest_rank) }),
        cell(same, { 'data-field': 'same' })
      ]);
    });
    root.appendChild(SS.section('Waits in the all-to-alls (group ep)', [
      SS.el('p', { className: 'note', text: 'Per step: the time members waited in the step\'s token all-to-alls (all members), the rank whose late arrivals caused the most of it ' +
        '(beyond the schedule) and how much, beside the busiest EP rank: when they are the same rank, the load imbalance is what made the others wait. ' +
        '(On the CPU backend the forward dispatch also waits on the host for the counts.)' }),
      SS.el('table', { className: 'data', id: 'moe-waits' }, [
        SS.el('thead', {}, [SS.el('tr', {}, ['step', 'a2a wait', 'caused by', 'caused wait', 'busiest rank', 'same rank'].map(function (h) { return SS.el('th', { text: h }); }))]),
        SS.el('tbody', {}, waitRows)])
    ], 'moe-waits-section'));
  };
})();
