/*
 * plan_view.js — the Plan view: a `stepscope plan --json` document (docs/plan.md) as a
 * sortable table of layouts and stacked memory bars per layout.
 *
 * How it works: the view works without a run. It shows a file input (and accepts a
 * dropped file) for the plan JSON, or takes one the page was opened with (a run folder's
 * plan.json found by the loader, SS.planDoc). The table starts in the planner's ranking;
 * clicking a column header sorts by it (again: the other way). The memory chart stacks
 * parameters, gradients, optimizer state, activations and the runtime baseline for the
 * first 40 rows in the table's order, against the device's memory. The ranking card and
 * section say how far the planner's order goes (docs/plan.md "How far the ranking goes"):
 * the layouts within its error of the best form one undecided group, whose rows are marked
 * "≈ best"; per choice, what the group decides, leaves open and rules out.
 */
'use strict';

var SS = window.SS || (window.SS = {});

(function () {
  var MEMORY = [
    { key: 'parameters', name: 'parameters', color: '#4e79a7' },
    { key: 'gradients', name: 'gradients', color: '#f28e2b' },
    { key: 'optimizer', name: 'optimizer', color: '#e15759' },
    { key: 'activations', name: 'activations', color: '#76b7b2' },
    { key: 'runtime_baseline', name: 'runtime baseline', color: '#bab0ac' }
  ];
  var COLUMNS = [
    { name: '#', get: function (l) { return l._rank; }, num: true },
    { name: 'layout', get: function (l) { return l.layout.name; } },
    { name: 'memory GiB', get: function (l) { return l.memory_bytes.total / 1073741824; }, num: true, digits: 2 },
    { name: 'fits', get: function (l) { return l.fits ? 'yes' : 'NO'; } },
    { name: 'step s', get: function (l) { return l.step_time_s; }, num: true, digits: 4 },
    { name: 'tokens/s', get: function (l) { return l.tokens_per_s; }, num: true, digits: 0 },
    { name: 'MFU %', get: function (l) { return l.mfu * 100; }, num: true, digits: 1 },
    { name: 'bubble s', get: function (l) { return l.breakdown_s.bubble; }, num: true, digits: 4 },
    { name: 'exposed comm s', get: function (l) { var b = l.breakdown_s; return b.tp + b.cp + b.pp + b.grad_sync; }, num: true, digits: 4 },
    { name: 'host s', get: function (l) { return l.breakdown_s.host; }, num: true, digits: 4 },
    { name: 'binding', get: function (l) { return l.binding; } },
    { name: 'order', get: function (l) { return l._group ? '≈ best' : ''; } }
  ];

  function gib(b) { return (b / 1073741824).toFixed(2) + ' GiB'; }

  var CHOICE_LABEL = { micro_batch: 'micro-batch', shard_group: 'hybrid shard group' };

  /* The ranking card's text: how far the planner's order goes (absent in older plans). */
  /* The model as the plan has it: its heads' width where heads x it is not the hidden size
   * (--head-dim), its experts (--experts, --top-k, --moe-ffn; absent in older plans), its
   * sliding window, and no dropout where it was trained without (--dropout 0: no masks). */
  function modelText(job) {
    var heads = job.heads + ' heads';
    if (job.head_dim && job.head_dim * job.heads !== job.hidden) heads += ' of ' + job.head_dim;
    var text = job.layers + ' layers × ' + job.hidden + ' (' + heads + '), seq ' + job.seq;
    if (job.experts > 0)
      text += ', ' + job.experts + ' experts, top ' + job.top_k + (job.moe_ffn ? ' of ' + job.moe_ffn + ' wide' : '');
    if (job.sliding_window)
      text += ', sliding window ' + job.sliding_window +
        (job.full_attention_every ? ' (every ' + ordinal(job.full_attention_every) + ' layer whole)' : '');
    if (job.dropout_masks === false) text += ', no dropout';
    return text;
  }

  function ordinal(n) {
    var tens = n % 100, last = n % 10;
    return n + (tens >= 11 && tens <= 13 ? 'th' : last === 1 ? 'st' : last === 2 ? 'nd' : last === 3 ? 'rd' : 'th');
  }

  /* What the plan says it cannot vouch for (JSON `assumed`, docs/plan.md "Experts under a
   * framework"), in the words of the planner's header: shown above the table so that a MoE
   * plan is not read as measured. */
  var CAVEATS = {
    balanced_expert_routing: 'Routing is taken as balanced: a dropless run\'s imbalance is not in these figures (measured: forced balance ran 4 % faster on Mixtral 8x22B, 9-24 % on Qwen3-235B at 128K-16K positions), nor its extra activation memory.',
    expert_parallel_ranking_unvalidated: 'Expert parallelism against its all-to-alls is ranked by the model alone: the one 128-expert job measured at two layouts is ordered as measured only since Megatron-Core\'s host floor is charged, so take the EP ranking as a hypothesis to measure.',
    fine_grained_expert_compute_unvalidated: 'Fine-grained experts (64 or more): published runs of such models are predicted less well than dense ones, and fp8 did not speed up the one such job measured in both precisions; under a framework charged no host floor, a MoE layer\'s work took 1.5-2.2x the time predicted without one, so these step times are likely optimistic.',
    megatron_layer_host_floor: 'Megatron-Core takes at least a few milliseconds for a layer\'s forward and backward of one micro-batch, however little its GPU work (the least its own tests on DGX H100 measured; the floor is in the job above): the gap under that floor that a layer\'s work and its collectives leave is its breakdown\'s host.',
    megatron_cudnn_attention_rate: 'Attention at cuDNN\'s measured rate alone (--attention-rate cudnn): with it, published Megatron-Core runs on H100 came out faster than measured, one MoE job by 17-19 % at every length from 16K to 128K positions and dense runs at 4K-8K by 1-27 % (median 7 %), so these step times are likely optimistic; the default (split) charges the time those steps spend beyond the kernel.',
    megatron_cudnn_attention_split: 'Attention at cuDNN\'s measured rate plus, per token, the time the device\'s share charges beyond it at 2K positions (--attention-rate split, the default here): so charged, published Megatron-Core runs on H100 came out within -1..+15 % of measured at 4K-8K (dense; the smaller the model the faster) and +0..+11 % for one MoE job at 16K-128K positions; the time beyond the kernel is fit, not named by a measurement.',
    long_context_attention_rate_unvalidated: 'Long sequences (32K positions or more): published runs on current kernels (Megatron-Core with TransformerEngine, Llama 3) ran faster than the attention share predicts, by up to 2x at 128K, so these step times are likely pessimistic; a trace of your attention kernel (--ceilings-from) measures its rate, and for Megatron-Core on Hopper with heads of 128 the default (without --attention-rate share) charges cuDNN\'s measured one.'
  };

  function caveatsSection(doc) {
    var items = (doc.assumed || []).filter(function (a) { return CAVEATS[a]; });
    if (!items.length) return null;
    return SS.section('What this plan cannot vouch for', items.map(function (a) {
      return SS.el('p', { className: 'note', text: CAVEATS[a] });
    }), 'plan-caveats');
  }

  /* The framework's conventions the prediction assumed (docs/plan.md "Frameworks"). */
  function frameworkText(job) {
    var parts = [job.framework || 'megatron'];
    if (job.tp_comm_overlap) parts.push('TP overlap');
    if (job.backward_prefetch) parts.push('backward prefetch ' + job.backward_prefetch);
    if (job.grad_reduce_bytes === 2) parts.push('16-bit gradient reduction');
    if (job.precision === 'fp8') parts.push('fp8 GEMMs'); /* at the fp8 peak, MFU against bf16's */
    if (job.ep_dispatcher === 'deepep') parts.push('DeepEP token exchange');
    if (job.ep_dispatcher === 'allgather') parts.push('allgather token exchange');
    if (job.layer_host_floor_s) /* docs/plan.md "A layer's host floor" */
      parts.push('a layer at least ' + (1e3 * job.layer_host_floor_s.dense).toFixed(1) + ' ms (' +
        (1e3 * job.layer_host_floor_s.moe).toFixed(1) + ' with experts' +
        /* the alltoall dispatcher's own floor, where this job's experts exchange tokens by it */
        (job.ep_dispatcher === 'alltoall' && job.layer_host_floor_s.moe_alltoall
          ? ', ' + (1e3 * job.layer_host_floor_s.moe_alltoall).toFixed(1) + ' exchanging tokens by all-to-all'
          : '') + ') a micro-batch');
    if (job.recompute_modules) parts.push('selective recomputes ' + job.recompute_modules.join(', '));
    if (job.overlap_slowdown) /* docs/plan.md "Frameworks: communication" */
      parts.push('compute ' + (100 * job.overlap_slowdown).toFixed(1) +
        ' % slower beside overlapped data-parallel collectives');
    return parts.join(', ');
  }

  /* The GEMM share the compute-by-shape model assumed: the device table's, or one measured in a
   * real run (--ceilings-from, docs/plan.md "A measured GEMM ceiling"). */
  function gemmText(g, dev) {
    if (!dev.gemm_efficiency) return 'none (one efficiency: ' + (100 * dev.efficiency).toFixed(0) + ' %)';
    if (!g) return (100 * dev.gemm_efficiency).toFixed(0) + ' % of peak (the device table\'s)';
    return (100 * g.ceiling).toFixed(1) + ' % of peak, measured in ' + g.source + ' (' + g.filled_gemms +
      ' of ' + g.gemms + ' ' + g.dtype + ' GEMMs on ' + g.device + ')';
  }

  /* The fused-attention rate: measured in the same run as the GEMM ceiling where it had causal
   * forward and backward attention (docs/plan.md "A measured GEMM ceiling"), else the framework
   * kernel's measured rate where there is one (Megatron-Core on Hopper: cuDNN's), else the
   * table's share. */
  /* kernel: 'cudnn' (cuDNN's rate alone), 'split' (plus the share's rest per token), or '' */
  function attentionText(a, dev, kernel) {
    if (!dev.gemm_efficiency) return 'in the one efficiency';
    if (kernel) return 'cuDNN\'s measured rate by length (TransformerEngine\'s fused attention on ' +
      'Hopper, heads of 128)' + (kernel === 'split' ? ' plus, per token, the time beyond it that ' +
        (100 * dev.attention_efficiency).toFixed(0) + ' % of peak charges at ' +
        dev.attention_length + ' positions' : '');
    var table = (100 * dev.attention_efficiency).toFixed(0) + ' % of peak (the device table\'s' +
      (dev.attention_length > 0 ? ', at ' + dev.attention_length + ' positions, scaled by the ' +
        'kernel\'s rate at the length it runs on' : '') + ')';
    if (!a) return table;
    if (a.ceiling === null) return table + '; not measured: ' + a.why;
    return (100 * a.ceiling).toFixed(1) + ' % of peak, measured (' + a.forward_ops + ' forward at ' +
      (100 * a.forward_share).toFixed(1) + ' %, ' + a.backward_ops + ' backward at ' +
      (100 * a.backward_share).toFixed(1) + ' %)';
  }

  /* The links the prediction assumed: the device table's or --nics-per-node, --nic-gbps,
   * --nvlink-gbs (docs/plan.md "Clusters"); a calibrated run's measured bandwidths win. */
  function clusterText(job, dev) {
    var node = job.gpus_per_node || 8;
    if (!dev.nics_per_node) return 'nodes of ' + node + ', ' + (dev.intra_node_bw / 1e9).toFixed(0) +
      ' / ' + (dev.inter_node_bw / 1e9).toFixed(0) + ' GB/s a device in / between nodes';
    return 'nodes of ' + node + ', ' + (dev.intra_node_bw / 1e9).toFixed(0) + ' GB/s a device inside, ' +
      dev.nics_per_node + ' NICs × ' + (dev.inter_node_bw * 8 / 1e9).toFixed(0) + ' Gb/s';
  }

  function rankingText(k) {
    if (!k) return 'not in this plan (older stepscope)';
    var band = Math.round(k.band * 100) + ' %';
    if (k.undecided === 0) return 'nothing fits';
    if (k.undecided === 1)
      return k.next_gap === null ? 'the only layout that fits'
        : 'decided: the next is ' + (k.next_gap * 100).toFixed(1) + ' % slower (beyond ' + band + ')';
    return 'undecided among #1–#' + k.undecided + ' (within ' + band + ', the planner\'s error)';
  }

  /* decided / open / ruled out, one line each, from ranking.choices */
  function rankingSection(k, layouts) {
    if (!k || k.undecided < 2) return null;
    var decided = [], open = [], ruled = [];
    var only = function (name, v) { var o = k.choices[name].open; return o.length === 1 && o[0] === v; };
    Object.keys(k.choices).forEach(function (name) {
      var c = k.choices[name], label = CHOICE_LABEL[name] || name;
      /* as the command line says it: no ep without experts, no sp where every tp is 1, no
         schedule where every pp is 1 ("schedule none" is "pp 1") */
      if (name === 'ep' && only('ep', 1) && !c.ruled_out.length) return;
      if (name === 'shard_group' && only('shard_group', 0) && !c.ruled_out.length) return;
      if ((name === 'sp' && only('tp', 1)) || (name === 'schedule' && only('pp', 1))) return;
      var words = function (v) {
        v = v.filter(function (x) { return name !== 'schedule' || x !== 'none'; })
          .map(function (x) { return name === 'sp' || (name === 'shard_group' && x === 0) ? (x ? 'on' : 'off') : x; });
        if (typeof v[0] === 'number') v.sort(function (a, b) { return a - b; });
        return v.length ? label + ' ' + v.join(', ') : '';
      };
      var w = words(c.open), x = words(c.ruled_out);
      if (w) (c.open.length === 1 ? decided : open).push(w);
      if (x) ruled.push(x);
    });
    var lines = [
      ['decided (every one of them)', decided.join('; ') || 'nothing'],
      ['open (they differ)', open.join('; ')],
      ['ruled out (only layouts more than ' + Math.round(k.band * 100) + ' % slower)', ruled.join('; ') || 'nothing']
    ];
    var least = k.least_memory_index !== null ? layouts[k.least_memory_index] : null;
    if (least)
      lines.push(['least memory among them', k.least_memory_index === 0 ? 'the best itself, ' + gib(least.memory_bytes.total)
        : '#' + (k.least_memory_index + 1) + ' ' + least.layout.name + ', ' + gib(least.memory_bytes.total)]);
    var dl = SS.el('table', { className: 'data', id: 'plan-ranking' }, [SS.el('tbody', {}, lines.map(function (l) {
      return SS.el('tr', {}, [SS.el('th', { text: l[0] }), SS.el('td', { text: l[1] })]);
    }))]);
    return SS.section('How far the ranking goes: ' + k.undecided + ' layouts within ' + Math.round(k.band * 100) +
      ' % of the best cannot be ordered by the planner', [dl], 'plan-ranking-section');
  }

  function render(root, doc, state) {
    var body = root.querySelector('#plan-body');
    body.textContent = '';
    if (!doc) {
      body.appendChild(SS.el('p', { className: 'note', text: 'Open a plan: `stepscope plan ... --json plan.json`, then pick or drop plan.json here.' }));
      return;
    }
    if (!doc.layouts || !doc.job || !doc.device) throw new Error('not a stepscope plan JSON (no layouts/job/device)');
    var group = doc.ranking ? doc.ranking.undecided : 0;
    var layouts = doc.layouts.map(function (l, i) { l._rank = i + 1; l._group = group > 1 && i < group; return l; });
    var col = COLUMNS[state.sort], dir = state.dir;
    var rows = layouts.slice().sort(function (a, b) {
      var x = col.get(a), y = col.get(b);
      return (x < y ? -1 : x > y ? 1 : a._rank - b._rank) * dir;
    });
    var job = doc.job, dev = doc.device, cal = doc.calibration;
    var fitting = layouts.filter(function (l) { return l.fits; }).length;
    body.appendChild(SS.el('div', { className: 'cards', id: 'plan-headline' }, [
      ['model', modelText(job)],
      ['job', job.gpus + ' × ' + dev.name + ', batch ' + job.global_batch],
      ['framework', frameworkText(job)],
      ['cluster', clusterText(job, dev)],
      ['GEMM ceiling', gemmText(doc.gemm_ceiling_measured, dev)],
      ['attention rate', attentionText(doc.attention_ceiling_measured, dev,
        (doc.assumed || []).indexOf('megatron_cudnn_attention_rate') >= 0 ? 'cudnn'
          : (doc.assumed || []).indexOf('megatron_cudnn_attention_split') >= 0 ? 'split' : '')],
      ['layouts', layouts.length + ' (' + fitting + ' fit)'],
      ['best', layouts.length ? layouts[0].layout.name : 'none'],
      ['ranking', rankingText(doc.ranking)],
      ['calibration', cal ? cal.source : 'none (assumed figures)']
    ].map(function (c) {
      return SS.el('div', { className: 'kpi' }, [SS.el('div', { className: 'kpi-label', text: c[0] }), SS.el('div', { className: 'kpi-value', text: c[1] })]);
    })));
    var head = SS.el('tr', {}, COLUMNS.map(function (c, k) {
      var th = SS.el('th', { text: c.name + (k === state.sort ? (dir > 0 ? ' ▲' : ' ▼') : ''), className: 'sortable' });
      th.dataset.col = String(k);
      th.addEventListener('click', function () {
        if (state.sort === k) state.dir = -state.dir;             /* the same column: flip */
        else { state.sort = k; state.dir = c.num && k !== 0 ? -1 : 1; } /* numbers: largest first */
        render(root, doc, state);
      });
      return th;
    }));
    var limit = 200, trs = rows.slice(0, limit).map(function (l) {
      var tr = SS.el('tr', { className: l.fits ? '' : 'noise' }, COLUMNS.map(function (c) {
        var v = c.get(l);
        return SS.el('td', { className: c.num ? 'num' : '', text: c.num && typeof v === 'number' ? v.toFixed(c.digits || 0) : String(v) });
      }));
      return tr;
    });
    var table = SS.el('table', { className: 'data', id: 'plan-table' }, [SS.el('thead', {}, [head]), SS.el('tbody', {}, trs)]);
    var note = rows.length > limit ? SS.el('p', { className: 'note', text: 'first ' + limit + ' of ' + rows.length + ' layouts (sort to see others; the JSON has all)' }) : null;
    var caveats = caveatsSection(doc);
    if (caveats) body.appendChild(caveats);
    var ranking = rankingSection(doc.ranking, layouts);
    if (ranking) body.appendChild(ranking);
    body.appendChild(SS.section('Layouts (click a column to sort)', [table].concat(note ? [note] : []), 'plan-layouts'));
    var bars = rows.slice(0, 40).map(function (l) {
      var m = l.memory_bytes;
      return { label: l.layout.name, values: MEMORY.map(function (s) { return m[s.key]; }) };
    });
    var chart = SS.stackedBars(bars, MEMORY, { labelW: 330, width: 980, format: gib, max: Math.max(dev.memory_bytes, 1) });
    chart.id = 'plan-memory';
    body.appendChild(SS.section('Memory per device by component (first 40 rows; the scale ends at the device\'s ' + gib(dev.memory_bytes) + ')', [chart]));
  }

  SS.renderPlanView = function (root, doc) {
    var state = root._planState || (root._planState = { sort: 0, dir: 1 });
    if (!root.querySelector('#plan-body')) {
      var input = SS.el('input', { type: 'file', id: 'pick-plan', accept: '.json' });
      var err = SS.el('div', { id: 'plan-error', className: 'missing' });
      input.addEventListener('change', function () {
        var f = input.files[0];
        if (!f) return;
        f.text().then(function (t) {
          err.textContent = '';
          var d = JSON.parse(t);
          root._planDoc = d;
          state.sort = 0; state.dir = 1;
          render(root, d, state);
        }).catch(function (e) { err.textContent = 'cannot show ' + f.name + ': ' + e.message; });
      });
      root.appendChild(SS.el('p', {}, [document.createTextNode('Plan JSON (stepscope plan --json): '), input]));
      root.appendChild(err);
      root.appendChild(SS.el('div', { id: 'plan-body' }));
    }
    if (doc) root._planDoc = doc;
    try {
      render(root, root._planDoc || null, state);
    } catch (e) {
      root.querySelector('#plan-error').textContent = e.message;
    }
  };
})();
