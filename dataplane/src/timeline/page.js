"use strict";
// Draws the timeline's panels from the JSON above as inline SVG. Each panel ends with
// data-ok="1" once drawn, or "0" with data-error; <body data-rendered> says the script ran.
(function () {
  var NS = "http://www.w3.org/2000/svg";
  var D = JSON.parse(document.getElementById("timeline-data").textContent);
  var W = D.bucket_ns;
  var N = D.buckets;
  var END = Math.max(D.end_ns, W * N) || 1;
  var PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
    "#7f7f7f", "#bcbd22", "#17becf"];

  function el(name, attrs, parent) {
    var e = document.createElementNS(NS, name);
    for (var k in attrs) e.setAttribute(k, attrs[k]);
    if (parent) parent.appendChild(e);
    return e;
  }
  function text(parent, x, y, s, anchor) {
    var t = el("text", { x: x, y: y, "text-anchor": anchor || "start" }, parent);
    t.textContent = s;
    return t;
  }
  function fmtT(ns) {
    if (ns >= 1e9) return +(ns / 1e9).toPrecision(3) + " s";
    if (ns >= 1e6) return +(ns / 1e6).toPrecision(3) + " ms";
    if (ns >= 1e3) return +(ns / 1e3).toPrecision(3) + " µs";
    return Math.round(ns) + " ns";
  }
  function fmtBytes(b) {
    if (b >= 1048576) return +(b / 1048576).toPrecision(3) + " MiB";
    if (b >= 1024) return +(b / 1024).toPrecision(3) + " KiB";
    return Math.round(b) + " B";
  }
  function fmtRate(b) {
    if (b >= 1e9) return +(b / 1e9).toPrecision(3) + " Gb/s";
    if (b >= 1e6) return +(b / 1e6).toPrecision(3) + " Mb/s";
    return Math.round(b) + " b/s";
  }
  function title(node, s) {
    var t = el("title", {}, node);
    t.textContent = s;
  }
  function note(body, s) {
    var p = document.createElement("p");
    p.className = "empty";
    p.textContent = s;
    body.appendChild(p);
  }
  // A chart frame: time on x (0..END), y from 0 to ymax; returns the SVG and scales.
  function frame(parent, w, h, ymax, yfmt) {
    var m = { l: 58, r: 10, t: 6, b: 18 };
    var svg = el("svg", { width: w, height: h, viewBox: "0 0 " + w + " " + h }, null);
    parent.appendChild(svg);
    var pw = w - m.l - m.r, ph = h - m.t - m.b;
    var x = function (t) { return m.l + (t / END) * pw; };
    var y = function (v) { return m.t + ph - (ymax > 0 ? (v / ymax) * ph : 0); };
    for (var i = 0; i <= 2; i++) {
      var v = (ymax * i) / 2;
      el("line", { x1: m.l, x2: m.l + pw, y1: y(v), y2: y(v), class: "grid-line" }, svg);
      text(svg, m.l - 4, y(v) + 3, yfmt(v), "end");
    }
    el("line", { x1: m.l, x2: m.l + pw, y1: m.t + ph, y2: m.t + ph, class: "axis" }, svg);
    for (var j = 0; j <= 4; j++) {
      var t = (END * j) / 4;
      text(svg, x(t), h - 4, fmtT(t), j === 0 ? "start" : j === 4 ? "end" : "middle");
    }
    return { svg: svg, x: x, y: y, m: m, pw: pw, ph: ph };
  }

  var panels = {
    queues: function (body) {
      var qs = D.queues;
      if (D.queues_not_built_up)
        note(body, D.queues_not_built_up + " more queues held something but never " + fmtBytes(D.built_up_bytes) +
          " (two of the largest frame): not drawn.");
      if (!qs.length) return note(body, "No queue built up (held " + fmtBytes(D.built_up_bytes) + " or more).");
      var shown = qs.slice(0, 12);
      if (qs.length > shown.length)
        note(body, "The " + shown.length + " deepest of " + qs.length + " queues (all are in the JSON).");
      var grid = document.createElement("div");
      grid.className = shown.length < 3 ? "" : "grid";
      body.appendChild(grid);
      shown.forEach(function (q) {
        var box = document.createElement("div");
        var h = document.createElement("div");
        h.className = "chart-title";
        h.textContent = q.label + ": peak " + fmtBytes(q.peak_bytes) + ", " + q.ce_total + " CE-marked";
        box.appendChild(h);
        grid.appendChild(box);
        var f = frame(box, shown.length < 3 ? 1100 : 380, shown.length < 3 ? 180 : 130, q.peak_bytes, fmtBytes);
        var cemax = Math.max.apply(null, q.ce_marks.concat([1]));
        q.ce_marks.forEach(function (c, i) {
          if (!c) return;
          var bh = (c / cemax) * f.ph * 0.35;
          var r = el("rect", { x: f.x(i * W), y: f.m.t + f.ph - bh, width: Math.max(1, f.x((i + 1) * W) - f.x(i * W)), height: bh, class: "ce" }, f.svg);
          title(r, fmtT(i * W) + ": " + c + " CE-marked");
        });
        var pts = [f.x(0) + "," + f.y(0)];
        q.depth_bytes.forEach(function (d, i) {
          pts.push(f.x(i * W) + "," + f.y(d), f.x((i + 1) * W) + "," + f.y(d));
        });
        pts.push(f.x(N * W) + "," + f.y(0));
        el("polygon", { points: pts.join(" "), class: "depth" }, f.svg);
      });
    },
    pfc: function (body) {
      var rows = D.pfc.slice();
      var lanes = {};
      var order = [];
      function lane(label) {
        if (!(label in lanes)) { lanes[label] = { bars: [], cls: "", marks: [], merged: 0 }; order.push(label); }
        return lanes[label];
      }
      rows.forEach(function (r) {
        var l = lane(r.label);
        l.bars = r.bars; l.cls = r.kind; l.merged = r.merged_below_ns;
      });
      D.marks.forEach(function (m) { lane(m.label + " paused").marks.push(m); });
      if (!order.length) return note(body, "No PFC: no port sent XOFF or was paused, and the watchdog never fired.");
      var MAXL = 48;
      if (order.length > MAXL)
        note(body, "The first " + MAXL + " of " + order.length + " rows (all are in the JSON).");
      if (D.marks_left_off) note(body, D.marks_left_off + " watchdog events beyond the first " + D.marks.length + " are not drawn.");
      order = order.slice(0, MAXL);
      var lh = 16, labelw = 230, w = 1100;
      var svg = el("svg", { width: w, height: order.length * lh + 22 }, null);
      body.appendChild(svg);
      var x = function (t) { return labelw + (t / END) * (w - labelw - 10); };
      order.forEach(function (label, i) {
        var l = lanes[label], y = i * lh;
        text(svg, labelw - 6, y + 11, label + (l.merged ? " *" : ""), "end");
        el("line", { x1: labelw, x2: w - 10, y1: y + lh - 1, y2: y + lh - 1, class: "grid-line" }, svg);
        l.bars.forEach(function (b) {
          var r = el("rect", { x: x(b[0]), y: y + 3, width: Math.max(1, x(b[1]) - x(b[0])), height: lh - 6, class: l.cls }, svg);
          title(r, label + ": " + fmtT(b[0]) + " – " + fmtT(b[1]) + " (" + fmtT(b[1] - b[0]) + ")");
        });
        l.marks.forEach(function (m) {
          var cx = x(m.t_ns), pts = m.kind === "storm"
            ? [cx - 5, y + 2, cx + 5, y + 2, cx, y + lh - 2] : [cx - 5, y + lh - 2, cx + 5, y + lh - 2, cx, y + 2];
          var p = el("polygon", { points: pts.join(" "), class: m.kind }, svg);
          title(p, "watchdog " + m.kind + " at " + fmtT(m.t_ns));
        });
      });
      var yb = order.length * lh + 14;
      for (var j = 0; j <= 4; j++) text(svg, x((END * j) / 4), yb, fmtT((END * j) / 4), j === 0 ? "start" : j === 4 ? "end" : "middle");
      if (order.some(function (l) { return lanes[l].merged; }))
        note(body, "* bars closer than the gap the JSON gives (merged_below_ns) were joined to keep the row small.");
    },
    flows: function (body) {
      var fs = D.flows;
      if (!fs.length) return note(body, "No flows.");
      var MAXF = 24, shown = fs.slice(0, MAXF);
      if (fs.length > MAXF) note(body, "The first " + MAXF + " of " + fs.length + " flows are drawn; the fairness index counts them all.");
      var ymax = 1;
      fs.forEach(function (f) {
        f.rate_bps.forEach(function (v) { ymax = Math.max(ymax, v); });
        f.dcqcn_bps.forEach(function (v) { if (v !== null) ymax = Math.max(ymax, v); });
      });
      var fr = frame(body, 1100, 260, ymax, fmtRate);
      shown.forEach(function (f, k) {
        var c = PALETTE[k % PALETTE.length];
        var pts = f.rate_bps.map(function (v, i) { return fr.x((i + 0.5) * W) + "," + fr.y(v); });
        var pl = el("polyline", { points: pts.join(" "), fill: "none", stroke: c, "stroke-width": 1.3 }, fr.svg);
        title(pl, f.label + " (delivered)");
        var dp = [];
        f.dcqcn_bps.forEach(function (v, i) { if (v !== null) dp.push(fr.x((i + 1) * W) + "," + fr.y(v)); });
        if (dp.length) {
          var d = el("polyline", { points: dp.join(" "), fill: "none", stroke: c, "stroke-width": 1, "stroke-dasharray": "2,3" }, fr.svg);
          title(d, f.label + " (DCQCN rate)");
        }
      });
      var legend = document.createElement("p");
      legend.className = "note";
      legend.innerHTML = shown.map(function (f, k) {
        return '<span style="color:' + PALETTE[k % PALETTE.length] + '">■</span> ' + f.label.replace(/&/g, "&amp;").replace(/</g, "&lt;");
      }).join(" &nbsp; ");
      body.appendChild(legend);
      var jain = [];
      for (var i = 0; i < N; i++) {
        var s = 0, s2 = 0, n = 0;
        fs.forEach(function (f) { var v = f.rate_bps[i]; if (v > 0) { s += v; s2 += v * v; n++; } });
        jain.push(n > 1 ? (s * s) / (n * s2) : null);
      }
      var h = document.createElement("div");
      h.className = "chart-title";
      h.textContent = "Jain's fairness index (flows delivering in the bucket; blank where fewer than two)";
      body.appendChild(h);
      var fj = frame(body, 1100, 110, 1, function (v) { return v.toFixed(1); });
      var pts = [];
      jain.forEach(function (v, i) { if (v !== null) pts.push(fj.x((i + 0.5) * W) + "," + fj.y(v)); });
      if (pts.length) el("polyline", { points: pts.join(" "), class: "fair" }, fj.svg);
    },
    heat: function (body) {
      var ls = D.links.map(function (l) {
        return { label: l.label, v: l.paused_fraction, total: l.paused_fraction.reduce(function (a, b) { return a + b; }, 0) };
      }).filter(function (l) { return l.total > 0; });
      ls.sort(function (a, b) { return b.total - a.total; });
      if (D.links_never_paused) note(body, D.links_never_paused + " link directions were never paused: not drawn.");
      if (!ls.length) return note(body, "No link was paused.");
      var MAXR = 60;
      if (ls.length > MAXR) note(body, "The " + MAXR + " most paused of " + ls.length + " link directions.");
      ls = ls.slice(0, MAXR);
      var lh = 14, labelw = 230, w = 1100;
      var svg = el("svg", { width: w, height: ls.length * lh + 22 }, null);
      body.appendChild(svg);
      var cw = (w - labelw - 10) / N;
      ls.forEach(function (l, r) {
        text(svg, labelw - 6, r * lh + 10, l.label, "end");
        l.v.forEach(function (v, i) {
          if (!v) return;
          var a = Math.min(1, v);
          var c = el("rect", { x: labelw + i * cw, y: r * lh, width: Math.max(cw, 0.5), height: lh - 1,
            fill: "rgb(" + Math.round(255 - 40 * a) + "," + Math.round(235 - 200 * a) + "," + Math.round(200 - 180 * a) + ")" }, svg);
          title(c, l.label + " " + fmtT(i * W) + ": paused " + Math.round(v * 100) + "% of the bucket");
        });
      });
      var yb = ls.length * lh + 14;
      for (var j = 0; j <= 4; j++) text(svg, labelw + ((w - labelw - 10) * j) / 4, yb, fmtT((N * W * j) / 4), j === 0 ? "start" : j === 4 ? "end" : "middle");
    }
  };

  document.getElementById("summary").textContent = "Ran " + fmtT(D.end_ns) + " of virtual time; " + N +
    " buckets of " + fmtT(W) + ". Queues that built up: " + D.queues.length + "; PFC rows: " + D.pfc.length +
    "; watchdog events: " + (D.marks.length + D.marks_left_off) + ".";
  Array.prototype.forEach.call(document.querySelectorAll("section.panel"), function (sec) {
    var body = sec.querySelector(".body");
    try {
      panels[sec.id](body);
      sec.setAttribute("data-ok", "1");
    } catch (e) {
      sec.setAttribute("data-ok", "0");
      sec.setAttribute("data-error", String(e && e.stack || e));
      if (window.console) console.error("timeline panel " + sec.id + ": " + e);
    }
  });
  document.body.setAttribute("data-rendered", "1");
})();
