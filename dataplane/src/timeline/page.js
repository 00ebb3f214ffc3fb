"use strict";
// Draws the timeline's panels from the JSON above as inline SVG. Each panel ends with
// data-ok="1" once drawn, or "0" with data-error; <body data-rendered> says the script ran.
// Every time chart shares one axis: the same left edge (L), the same width, the same round
// ticks (each tick's <text class="tick" data-t="ns">), so a time is at the same x in every
// panel. A time range is zoomed by dragging across any chart, by the From/To fields, or by
// the page's address (#t=FROM-TO, in ns); nothing is fetched.
(function () {
  var NS = "http://www.w3.org/2000/svg";
  var D = JSON.parse(document.getElementById("timeline-data").textContent);
  var W = D.bucket_ns;
  var N = D.buckets;
  var END = Math.max(D.end_ns, W * N) || 1;
  // One geometry for every time chart: labels and value ticks left of L, a value scale
  // right of SW - R.
  var SW = 1100, L = 230, R = 46;
  var PW = SW - L - R;
  var view = { t0: 0, t1: END };
  var clipSeq = 0;

  function el(name, attrs, parent) {
    var e = document.createElementNS(NS, name);
    for (var k in attrs) e.setAttribute(k, attrs[k]);
    if (parent) parent.appendChild(e);
    return e;
  }
  function text(parent, x, y, s, anchor, cls) {
    var t = el("text", { x: x, y: y, "text-anchor": anchor || "start" }, parent);
    if (cls) t.setAttribute("class", cls);
    t.textContent = s;
    return t;
  }
  function trim(v, step) {
    // Enough decimals for the step, no trailing noise (0.30000000000000004).
    var d = Math.max(0, Math.min(6, -Math.floor(Math.log10(step) + 1e-9)));
    return +v.toFixed(d);
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
  // A round step (1, 2 or 5 times a power of ten) giving about `n` steps over `span`.
  function niceStep(span, n) {
    var raw = span / Math.max(1, n);
    if (!(raw > 0)) return 1;
    var p = Math.pow(10, Math.floor(Math.log10(raw)));
    var f = raw / p;
    return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * p;
  }
  // Round value ticks from 0 to at least `max`, in a unit ([scale, name]) chosen for `max`.
  function valueTicks(max, units, n) {
    var u = units[0];
    units.forEach(function (c) { if (max >= c[0]) u = c; });
    var step = niceStep(max / u[0], n || 2);
    var top = Math.max(step, Math.ceil(max / u[0] / step - 1e-9) * step);
    var ticks = [];
    for (var v = 0; v <= top + step / 2; v += step)
      ticks.push({ v: v * u[0], s: trim(v, step) + (u[1] ? " " + u[1] : "") });
    return { top: top * u[0], ticks: ticks };
  }
  var BYTES = [[1, "B"], [1024, "KiB"], [1048576, "MiB"], [1073741824, "GiB"]];
  var RATE = [[1, "b/s"], [1e3, "kb/s"], [1e6, "Mb/s"], [1e9, "Gb/s"]];
  var COUNT = [[1, ""], [1e3, "k"], [1e6, "M"]];
  // Round time ticks over the view, in one unit.
  function timeTicks() {
    var span = view.t1 - view.t0;
    var step = niceStep(span, 8);
    var unit = view.t1 >= 1e9 ? [1e9, "s"] : view.t1 >= 1e6 ? [1e6, "ms"] : view.t1 >= 1e3 ? [1e3, "µs"] : [1, "ns"];
    var ticks = [];
    for (var t = Math.ceil(view.t0 / step - 1e-9) * step; t <= view.t1 + step * 1e-9; t += step)
      ticks.push({ t: Math.round(t), s: trim(t / unit[0], step / unit[0]) + " " + unit[1] });
    return ticks;
  }
  function xOf(t) { return L + ((t - view.t0) / (view.t1 - view.t0)) * PW; }
  function tOf(x) { return view.t0 + ((x - L) / PW) * (view.t1 - view.t0); }
  // Bucket indices that reach into the view.
  function bucketRange() {
    var a = Math.max(0, Math.floor(view.t0 / W)), b = Math.min(N, Math.ceil(view.t1 / W));
    return [a, b];
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
  function chartTitle(parent, s) {
    var h = document.createElement("div");
    h.className = "chart-title";
    h.textContent = s;
    parent.appendChild(h);
  }
  // A time chart of plot height `ph` (`rows` gives lanes instead, each `lh` high): the time
  // axis at the bottom, vertical grid lines at the ticks, the schedule's changes as dashed
  // lines, a clip so a zoomed view draws nothing outside it. Returns the SVG, the group to
  // draw in (clipped), and y's top and bottom.
  function timeChart(parent, ph) {
    var top = 6, h = top + ph + 18;
    var svg = el("svg", { width: SW, height: h, viewBox: "0 0 " + SW + " " + h, class: "time" }, null);
    parent.appendChild(svg);
    var id = "clip" + (++clipSeq);
    var cp = el("clipPath", { id: id }, el("defs", {}, svg));
    el("rect", { x: L, y: 0, width: PW, height: top + ph }, cp);
    timeTicks().forEach(function (k, j, all) {
      var x = xOf(k.t);
      el("line", { x1: x, x2: x, y1: top, y2: top + ph, class: "grid-line" }, svg);
      var anchor = x - L < 20 ? "start" : L + PW - x < 20 ? "end" : "middle";
      var t = text(svg, x, h - 4, k.s, anchor, "tick");
      t.setAttribute("data-t", k.t);
    });
    el("line", { x1: L, x2: L + PW, y1: top + ph, y2: top + ph, class: "axis" }, svg);
    var g = el("g", { "clip-path": "url(#" + id + ")" }, svg);
    D.changes.forEach(function (c) {
      if (c.t_ns < view.t0 || c.t_ns > view.t1) return;
      var ln = el("line", { x1: xOf(c.t_ns), x2: xOf(c.t_ns), y1: top, y2: top + ph, class: "change" }, svg);
      ln.setAttribute("data-t", c.t_ns);
      title(ln, "changed at " + fmtT(c.t_ns) + ": " + c.label);
    });
    svg.addEventListener("mousedown", startDrag);
    return { svg: svg, g: g, top: top, ph: ph };
  }
  // Value ticks on the left (or the right, `right`) of a chart, y from 0 to `top`.
  function valueAxis(c, vt, right, cls, frac) {
    var f = frac || 1;
    var y = function (v) { return c.top + c.ph - (vt.top > 0 ? (v / vt.top) * c.ph * f : 0); };
    vt.ticks.forEach(function (k) {
      if (!right) el("line", { x1: L, x2: L + PW, y1: y(k.v), y2: y(k.v), class: "grid-line" }, c.svg);
      text(c.svg, right ? L + PW + 4 : L - 4, y(k.v) + 3, k.s, right ? "start" : "end", cls || null);
    });
    return y;
  }
  // A level per bucket as a step area: each bucket at its value from its start to its end.
  function stepArea(c, y, values, cls) {
    var br = bucketRange();
    if (br[1] <= br[0]) return null;
    var pts = [xOf(br[0] * W) + "," + y(0)];
    for (var i = br[0]; i < br[1]; i++) pts.push(xOf(i * W) + "," + y(values[i]), xOf((i + 1) * W) + "," + y(values[i]));
    pts.push(xOf(br[1] * W) + "," + y(0));
    return el("polygon", { points: pts.join(" "), class: cls }, c.g);
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
      shown.forEach(function (q) {
        chartTitle(body, q.label + ": peak " + fmtBytes(q.peak_bytes) + ", " + q.ce_total + " CE-marked");
        var c = timeChart(body, shown.length < 3 ? 150 : 90);
        c.svg.setAttribute("data-queue", q.port + "/" + q.queue);
        var y = valueAxis(c, valueTicks(q.peak_bytes, BYTES));
        var br = bucketRange();
        var cemax = 0;
        for (var i = br[0]; i < br[1]; i++) cemax = Math.max(cemax, q.ce_marks[i]);
        if (cemax > 0) {
          // CE bars take the lower 35% of the chart, on their own scale at the right.
          var ct = valueTicks(cemax, COUNT, 1);
          var yc = valueAxis(c, ct, true, "ce-tick", 0.35);
          text(c.svg, L + PW + 4, c.top + c.ph * 0.65 - 6, "CE/bkt", "start", "ce-tick");
          for (var j = br[0]; j < br[1]; j++) {
            var n = q.ce_marks[j];
            if (!n) continue;
            var r = el("rect", { x: xOf(j * W), y: yc(n), width: Math.max(1, xOf((j + 1) * W) - xOf(j * W)), height: yc(0) - yc(n), class: "ce" }, c.g);
            title(r, fmtT(j * W) + ": " + n + " CE-marked");
          }
        }
        var p = stepArea(c, y, q.depth_bytes, "depth");
        if (p) title(p, q.label + ": depth (the deepest in each bucket, the depth carried in included)");
      });
    },
    pgs: function (body) {
      var gs = D.pgs;
      if (D.pgs_not_built_up)
        note(body, D.pgs_not_built_up + " more PGs held something but neither " + fmtBytes(D.built_up_bytes) + " nor any headroom: not drawn.");
      if (!gs.length) return note(body, "No ingress PG built up or used headroom.");
      var shown = gs.slice(0, 12);
      if (gs.length > shown.length)
        note(body, "The " + shown.length + " of " + gs.length + " PGs that used the most headroom (all are in the JSON).");
      shown.forEach(function (g) {
        chartTitle(body, g.label + ": peak " + fmtBytes(g.peak_bytes) + ", headroom peak " + fmtBytes(g.peak_headroom_bytes));
        var c = timeChart(body, 80);
        var y = valueAxis(c, valueTicks(g.peak_bytes, BYTES));
        var a = stepArea(c, y, g.use_bytes, "pg-use");
        if (a) title(a, g.label + ": held, all regions");
        var h = stepArea(c, y, g.headroom_bytes, "headroom");
        if (h) title(h, g.label + ": held in headroom");
      });
    },
    drops: function (body) {
      var ds = D.drops;
      if (!ds.length) return note(body, "No frame was dropped.");
      var MAXL = 32;
      if (ds.length > MAXL) note(body, "The " + MAXL + " (port, reason) rows with the most drops of " + ds.length + " (all are in the JSON).");
      ds = ds.slice(0, MAXL);
      var lh = 18;
      var c = timeChart(body, ds.length * lh);
      var br = bucketRange();
      ds.forEach(function (d, r) {
        var y0 = c.top + r * lh;
        text(c.svg, L - 6, y0 + 12, d.label + ": " + d.total, "end");
        el("line", { x1: L, x2: L + PW, y1: y0 + lh - 1, y2: y0 + lh - 1, class: "grid-line" }, c.svg);
        var max = 0;
        for (var i = br[0]; i < br[1]; i++) max = Math.max(max, d.frames[i]);
        for (var j = br[0]; j < br[1]; j++) {
          var n = d.frames[j];
          if (!n) continue;
          var bh = Math.max(2, (n / max) * (lh - 4));
          var rc = el("rect", { x: xOf(j * W), y: y0 + lh - 2 - bh, width: Math.max(1.5, xOf((j + 1) * W) - xOf(j * W)), height: bh, class: "drop" }, c.g);
          title(rc, d.label + " at " + fmtT(j * W) + ": " + n + " frames dropped");
        }
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
      var lh = 16;
      var c = timeChart(body, order.length * lh);
      order.forEach(function (label, i) {
        var l = lanes[label], y = c.top + i * lh;
        text(c.svg, L - 6, y + 11, label + (l.merged ? " *" : ""), "end");
        el("line", { x1: L, x2: L + PW, y1: y + lh - 1, y2: y + lh - 1, class: "grid-line" }, c.svg);
        l.bars.forEach(function (b) {
          if (b[1] < view.t0 || b[0] > view.t1) return;
          var r = el("rect", { x: xOf(b[0]), y: y + 3, width: Math.max(1, xOf(b[1]) - xOf(b[0])), height: lh - 6, class: l.cls }, c.g);
          title(r, label + ": " + fmtT(b[0]) + " – " + fmtT(b[1]) + " (" + fmtT(b[1] - b[0]) + ")");
        });
        l.marks.forEach(function (m) {
          if (m.t_ns < view.t0 || m.t_ns > view.t1) return;
          var cx = xOf(m.t_ns), pts = m.kind === "storm"
            ? [cx - 5, y + 2, cx + 5, y + 2, cx, y + lh - 2] : [cx - 5, y + lh - 2, cx + 5, y + lh - 2, cx, y + 2];
          var p = el("polygon", { points: pts.join(" "), class: m.kind }, c.g);
          title(p, "watchdog " + m.kind + " at " + fmtT(m.t_ns));
        });
      });
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
      var c = timeChart(body, 240);
      var y = valueAxis(c, valueTicks(ymax, RATE, 4));
      var br = bucketRange();
      // Flows delivering exactly alike draw on top of each other: the later ones dashed, each
      // with its own offset, so every colour shows along the shared line; the legend says so.
      var same = {}, first = {};
      shown.forEach(function (f, k) {
        var key = f.rate_bps.join(",");
        if (key in first) same[k] = first[key]; else first[key] = k;
      });
      var lines = [];
      shown.forEach(function (f, k) {
        var col = colour(k);
        var pts = [];
        for (var i = br[0]; i < br[1]; i++) pts.push(xOf((i + 0.5) * W) + "," + y(f.rate_bps[i]));
        var attrs = { points: pts.join(" "), fill: "none", stroke: col, "stroke-width": 1.4, class: "flow" };
        if (k in same) { attrs["stroke-dasharray"] = "5,7"; attrs["stroke-dashoffset"] = (k * 4) % 12; }
        var pl = el("polyline", attrs, c.g);
        pl.setAttribute("data-flow", k);
        title(pl, f.label + " (delivered)");
        var group = [pl];
        // The DCQCN rate, in pieces: it ends when the flow does (null after).
        var seg = [];
        var flush = function () {
          if (seg.length) {
            var d = el("polyline", { points: seg.join(" "), fill: "none", stroke: col, "stroke-width": 1, "stroke-dasharray": "2,3", class: "dcqcn" }, c.g);
            d.setAttribute("data-flow", k);
            title(d, f.label + " (DCQCN rate)");
            group.push(d);
          }
          seg = [];
        };
        for (var j = br[0]; j < br[1]; j++) {
          var v = f.dcqcn_bps[j];
          if (v === null) flush(); else seg.push(xOf((j + 1) * W) + "," + y(v));
        }
        flush();
        lines.push(group);
      });
      var legend = document.createElement("p");
      legend.className = "note legend";
      shown.forEach(function (f, k) {
        var s = document.createElement("span");
        s.className = "flow-key";
        s.setAttribute("data-flow", k);
        var sw = document.createElement("span");
        sw.style.color = colour(k);
        sw.textContent = "■ ";
        s.appendChild(sw);
        s.appendChild(document.createTextNode(f.label + (k in same ? " (same rates as " + shown[same[k]].label + ")" : "")));
        s.title = "click: show this flow alone (click again: all)";
        s.addEventListener("click", function () {
          var alone = s.classList.toggle("alone");
          Array.prototype.forEach.call(legend.querySelectorAll(".flow-key"), function (o) { if (o !== s) o.classList.remove("alone"); });
          lines.forEach(function (g, m) {
            g.forEach(function (e) { e.setAttribute("opacity", !alone || m === k ? 1 : 0.08); });
          });
        });
        legend.appendChild(s);
        legend.appendChild(document.createTextNode("  "));
      });
      body.appendChild(legend);
      var jain = [];
      for (var i = 0; i < N; i++) {
        var s = 0, s2 = 0, n = 0;
        fs.forEach(function (f) { var v = f.rate_bps[i]; if (v > 0) { s += v; s2 += v * v; n++; } });
        jain.push(n > 1 ? (s * s) / (n * s2) : null);
      }
      chartTitle(body, "Jain's fairness index (flows delivering in the bucket; blank where fewer than two)");
      var cj = timeChart(body, 90);
      var yj = valueAxis(cj, { top: 1, ticks: [{ v: 0, s: "0" }, { v: 0.5, s: "0.5" }, { v: 1, s: "1" }] });
      var pts = [];
      for (var b = br[0]; b < br[1]; b++) if (jain[b] !== null) pts.push(xOf((b + 0.5) * W) + "," + yj(jain[b]));
      if (pts.length) el("polyline", { points: pts.join(" "), class: "fair" }, cj.g);
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
      var lh = 14;
      var c = timeChart(body, ls.length * lh);
      var br = bucketRange();
      ls.forEach(function (l, r) {
        var y0 = c.top + r * lh;
        text(c.svg, L - 6, y0 + 10, l.label, "end");
        for (var i = br[0]; i < br[1]; i++) {
          var v = l.v[i];
          if (!v) continue;
          var a = Math.min(1, v);
          var cell = el("rect", { x: xOf(i * W), y: y0, width: Math.max(xOf((i + 1) * W) - xOf(i * W), 0.5), height: lh - 1,
            fill: "rgb(" + Math.round(255 - 40 * a) + "," + Math.round(235 - 200 * a) + "," + Math.round(200 - 180 * a) + ")" }, c.g);
          title(cell, l.label + " " + fmtT(i * W) + ": paused " + Math.round(v * 100) + "% of the bucket");
        }
      });
    }
  };
  // A colour per flow that does not come round again: hues a golden angle apart, lightness
  // alternating, so neighbours differ and the 11th is not the 1st.
  function colour(k) {
    return "hsl(" + ((k * 137.508) % 360).toFixed(1) + "," + (k % 2 ? 55 : 75) + "%," + (k % 3 === 2 ? 55 : 40) + "%)";
  }

  // Zoom: drag across a chart (a band follows the pointer), or the fields, or #t=FROM-TO.
  var drag = null;
  function startDrag(ev) {
    var svg = ev.currentTarget, box = svg.getBoundingClientRect();
    var x = ev.clientX - box.left;
    if (x < L || x > L + PW) return;
    ev.preventDefault();
    var band = el("rect", { x: x, y: 0, width: 0, height: box.height, class: "band" }, svg);
    drag = { svg: svg, left: box.left, x0: x, band: band };
  }
  document.addEventListener("mousemove", function (ev) {
    if (!drag) return;
    var x = Math.min(L + PW, Math.max(L, ev.clientX - drag.left));
    drag.band.setAttribute("x", Math.min(x, drag.x0));
    drag.band.setAttribute("width", Math.abs(x - drag.x0));
  });
  document.addEventListener("mouseup", function (ev) {
    if (!drag) return;
    var x = Math.min(L + PW, Math.max(L, ev.clientX - drag.left));
    var d = drag;
    drag = null;
    d.band.remove();
    if (Math.abs(x - d.x0) < 4) return;
    zoom(tOf(Math.min(x, d.x0)), tOf(Math.max(x, d.x0)));
  });
  function zoom(t0, t1) {
    t0 = Math.max(0, Math.floor(t0));
    t1 = Math.min(END, Math.ceil(t1));
    if (!(t1 > t0)) { t0 = 0; t1 = END; }
    var whole = t0 === 0 && t1 === END;
    var h = whole ? "" : "#t=" + t0 + "-" + t1;
    if (location.hash !== h) history.replaceState(null, "", h || location.pathname + location.search);
    view.t0 = t0;
    view.t1 = t1;
    render();
  }
  function fromHash() {
    var m = /^#t=(\d+)-(\d+)$/.exec(location.hash);
    if (m && +m[2] > +m[1]) { view.t0 = Math.max(0, +m[1]); view.t1 = Math.min(END, +m[2]); }
    else { view.t0 = 0; view.t1 = END; }
  }
  var from = document.getElementById("zoom-from"), to = document.getElementById("zoom-to");
  document.getElementById("zoom").addEventListener("submit", function (ev) {
    ev.preventDefault();
    zoom(parseFloat(from.value) * 1e3, parseFloat(to.value) * 1e3);
  });
  document.getElementById("zoom-all").addEventListener("click", function () { zoom(0, END); });
  window.addEventListener("hashchange", function () { fromHash(); render(); });

  function render() {
    from.value = +(view.t0 / 1e3).toFixed(3);
    to.value = +(view.t1 / 1e3).toFixed(3);
    var drops = D.drops.reduce(function (a, d) { return a + d.total; }, 0);
    document.getElementById("summary").textContent = "Ran " + fmtT(D.end_ns) + " of virtual time; " + N +
      " buckets of " + fmtT(W) + (view.t0 > 0 || view.t1 < END ? "; showing " + fmtT(view.t0) + " – " + fmtT(view.t1) : "") +
      ". Queues that built up: " + D.queues.length + "; PGs: " + D.pgs.length + "; frames dropped: " + drops +
      "; PFC rows: " + D.pfc.length + "; watchdog events: " + (D.marks.length + D.marks_left_off) +
      "; config changes: " + D.changes.length + ".";
    var ch = document.getElementById("changes");
    ch.textContent = "";
    D.changes.forEach(function (c) {
      var li = document.createElement("li");
      li.textContent = fmtT(c.t_ns) + ": " + c.label;
      ch.appendChild(li);
    });
    Array.prototype.forEach.call(document.querySelectorAll("section.panel"), function (sec) {
      var body = sec.querySelector(".body");
      body.textContent = "";
      try {
        panels[sec.id](body);
        sec.setAttribute("data-ok", "1");
      } catch (e) {
        sec.setAttribute("data-ok", "0");
        sec.setAttribute("data-error", String(e && e.stack || e));
        if (window.console) console.error("timeline panel " + sec.id + ": " + e);
      }
    });
  }
  fromHash();
  render();
  document.body.setAttribute("data-rendered", "1");
})();
