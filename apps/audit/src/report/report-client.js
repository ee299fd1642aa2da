/*
 * The audit report's own script (src/html-report.ts inlines it into the page, allowed by its
 * hash in the page's Content-Security-Policy). From the JSON in #audit-data it draws, per topic,
 * two Chart.js charts: the counts of every tier per window (#chart-<i>), and each tier's
 * difference from the tier it is compared with (#chart-diff-<i>: bars below zero are messages
 * missing, above zero duplicates), so that losing 20 of 2,000 shows. Once every chart is drawn it
 * sets `data-charts-ready="<number of charts>"` on <body>. A plain script (no modules, no build step).
 */
/* global Chart, document */
(function () {
  'use strict';
  var data = JSON.parse(document.getElementById('audit-data').textContent);
  var band = { short: 'rgba(198, 40, 40, 0.13)', over: 'rgba(230, 150, 0, 0.18)', incomplete: 'rgba(109, 40, 217, 0.07)', open: 'rgba(107, 114, 128, 0.12)' };
  var hatch = { incomplete: 'rgba(109, 40, 217, 0.28)' };
  var mark = { short: '#c62828', over: '#e69600', incomplete: '#6d28d9' };
  var drawn = 0;
  function compared(t) { return t.series.filter(function (s) { return s.delta.some(function (d) { return d !== null; }); }); }
  // Charts to draw: one of counts per topic, one of differences per topic with a compared tier.
  var charts = data.topics.reduce(function (n, t) { return n + 1 + (compared(t).length > 0 ? 1 : 0); }, 0);
  function fmt(n) { return n === null || n === undefined ? 'none' : n.toLocaleString('en-US'); }
  function byDataset(a, b) { return a.datasetIndex - b.datasetIndex; }
  function signed(n) { return n === 0 ? '\u00b10' : n > 0 ? '+' + fmt(n) : '\u2212' + fmt(-n); }
  // Shades the windows that are short, over, incomplete (hatched) or open behind the lines.
  var bands = {
    id: 'auditBands',
    beforeDatasetsDraw: function (chart) {
      var t = data.topics[chart.options.plugins.auditBands.topic];
      var x = chart.scales.x, area = chart.chartArea, ctx = chart.ctx;
      var step = t.labels.length > 1 ? Math.abs(x.getPixelForValue(1) - x.getPixelForValue(0)) : area.right - area.left;
      ctx.save();
      for (var i = 0; i < t.statuses.length; i++) {
        var fill = band[t.statuses[i]];
        if (!fill) continue;
        var left = Math.max(area.left, x.getPixelForValue(i) - step / 2);
        var right = Math.min(area.right, x.getPixelForValue(i) + step / 2);
        ctx.fillStyle = fill;
        ctx.fillRect(left, area.top, right - left, area.bottom - area.top);
        var lines = hatch[t.statuses[i]];
        if (!lines) continue;
        var height = area.bottom - area.top;
        ctx.save();
        ctx.beginPath();
        ctx.rect(left, area.top, right - left, height);
        ctx.clip();
        ctx.strokeStyle = lines;
        ctx.lineWidth = 1;
        ctx.beginPath();
        for (var s = left - height; s < right; s += 8) { ctx.moveTo(s, area.bottom); ctx.lineTo(s + height, area.top); }
        ctx.stroke();
        ctx.restore();
      }
      ctx.restore();
    }
  };
  var ready = {
    id: 'auditReady',
    afterRender: function (chart) {
      var canvas = chart.canvas;
      if (canvas.dataset.rendered) return;
      canvas.dataset.rendered = 'true';
      drawn++;
      if (drawn === charts) document.body.dataset.chartsReady = String(drawn);
    }
  };
  if (data.topics.length === 0) { document.body.dataset.chartsReady = '0'; return; }
  data.topics.forEach(function (t, index) {
    var canvas = document.getElementById('chart-' + index);
    var n = t.series.length;
    // Tiers that agree draw on top of one another: earlier tiers get wider lines, drawn below
    // the later ones (a higher order is drawn first), so equal counts show as one striped
    // line and a tier that differs leaves it.
    var datasets = t.series.map(function (s, i) {
      var width = Math.min(14, 2 + 3 * (n - 1 - i));
      return {
        label: s.label,
        data: s.counts,
        borderColor: s.color,
        backgroundColor: s.color,
        borderWidth: width,
        pointStyle: 'circle',
        pointRadius: width / 2 + 1.5,
        pointHoverRadius: width / 2 + 3,
        pointBorderWidth: 0,
        tension: 0,
        spanGaps: false,
        order: 1 + (n - 1 - i)
      };
    });
    // Discrepancies of judged windows, and counts known to be partial, as markers above every
    // line, one series per kind.
    var labels = { short: 'short: fewer than compared with', over: 'over: more than compared with', incomplete: 'partial count: not judged' };
    var styles = { short: 'triangle', over: 'rectRot', incomplete: 'crossRot' };
    ['short', 'over', 'incomplete'].forEach(function (kind) {
      var points = [];
      t.series.forEach(function (s) {
        s.counts.forEach(function (c, i) {
          var d = s.diffs[i];
          var hit = kind === 'incomplete' ? s.partial[i] && c !== null : d !== null && (d < 0) === (kind === 'short');
          if (hit) points.push({ x: t.labels[i], y: c, tier: s.tier, diff: d });
        });
      });
      if (points.length === 0) return;
      datasets.push({
        label: labels[kind],
        data: points,
        marker: true,
        showLine: false,
        borderColor: kind === 'incomplete' ? mark[kind] : '#ffffff',
        backgroundColor: mark[kind],
        pointStyle: styles[kind],
        pointRadius: 9,
        pointHoverRadius: 11,
        pointBorderWidth: kind === 'incomplete' ? 3 : 1.5,
        order: 0
      });
    });
    draw(canvas, 'line', t, index, datasets, {
      interaction: { mode: 'index', intersect: false },
      scales: {
        x: { offset: true, title: { display: true, text: 'window start (UTC)' }, ticks: { maxRotation: 0, autoSkip: true } },
        y: { beginAtZero: true, title: { display: true, text: 'messages' }, ticks: { precision: 0 } }
      },
      legend: { position: 'top', labels: { usePointStyle: true, boxHeight: 8, sort: byDataset } },
      tooltip: { filter: function (item) { return !item.dataset.marker; }, itemSort: byDataset },
      label: function (item) {
        var s = t.series[item.datasetIndex], d = s.diffs[item.dataIndex];
        return s.tier + ': ' + fmt(s.counts[item.dataIndex]) + (d === null || d === undefined ? '' : ' (' + signed(d) + ')') + (s.partial[item.dataIndex] ? ' (partial)' : '');
      }
    });
    drawDifferences(t, index);
  });

  // The second panel: per window, each compared tier's count minus what it was compared with.
  function drawDifferences(t, index) {
    var canvas = document.getElementById('chart-diff-' + index);
    var tiers = compared(t);
    if (!canvas || tiers.length === 0) return;
    var datasets = tiers.map(function (s) {
      return {
        label: s.label,
        data: s.delta,
        borderColor: s.color,
        borderWidth: 1,
        backgroundColor: s.delta.map(function (d, i) {
          var judged = t.statuses[i] === 'short' || t.statuses[i] === 'over' || t.statuses[i] === 'complete';
          return d === null || d === 0 || !judged ? s.color : d < 0 ? mark.short : mark.over;
        })
      };
    });
    draw(canvas, 'bar', t, index, datasets, {
      scales: {
        x: { title: { display: true, text: 'window start (UTC)' }, ticks: { maxRotation: 0, autoSkip: true } },
        y: { suggestedMin: -1, suggestedMax: 1, title: { display: true, text: 'difference from compared tier' }, ticks: { precision: 0 } }
      },
      legend: { position: 'top' },
      tooltip: {},
      label: function (item) { var d = item.raw; return item.dataset.label + ': ' + (d === null ? 'none' : signed(d)); }
    });
  }

  // One chart of topic t: what both kinds share (no animation, the window bands, the ready
  // hook, a tooltip titled with the window and its status), then the kind's scales, legend,
  // tooltip options and label.
  function draw(canvas, type, t, index, datasets, kind) {
    var tooltip = Object.assign({}, kind.tooltip, {
      callbacks: {
        title: function (items) { return items.length ? t.windows[items[0].dataIndex] + ' (' + t.statuses[items[0].dataIndex] + ')' : ''; },
        label: kind.label
      }
    });
    var options = {
      animation: false,
      responsive: true,
      maintainAspectRatio: false,
      scales: kind.scales,
      plugins: { auditBands: { topic: index }, legend: kind.legend, tooltip: tooltip }
    };
    if (kind.interaction) options.interaction = kind.interaction;
    new Chart(canvas, { type: type, data: { labels: t.labels, datasets: datasets }, plugins: [bands, ready], options: options });
  }
})();
