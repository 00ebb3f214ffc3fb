//! The timeline page: one HTML file, its style, script and data inline, so it opens from disk
//! with no network. The script draws each panel as SVG and marks it `data-ok="1"` once drawn
//! (`"0"` and `data-error` if drawing threw), which the browser test reads back.

use super::Timeline;

const STYLE: &str = include_str!("page.css");
const SCRIPT: &str = include_str!("page.js");

/// Text safe inside HTML elements and attributes.
fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The page for `t`, whose JSON is `json` (embedded as is, with `<` escaped so no string in
/// it can end the script element).
pub fn page(t: &Timeline, json: &str) -> String {
    let title = escape(&t.title);
    let data = json.replace('<', "\\u003c");
    let fabric = if t.kind == "fabric" {
        r#"
<section class="panel" id="flows" data-ok="pending"><h2>Flow rates</h2>
<p class="note">Payload each flow's receiver got per bucket (solid), its sender's DCQCN rate (dotted), and Jain's fairness index over the flows delivering in each bucket (1 = equal shares).</p><div class="body"></div></section>
<section class="panel" id="heat" data-ok="pending"><h2>Pause time per link</h2>
<p class="note">Each link direction whose sender was paused: the share of each bucket it spent paused (summed over priorities).</p><div class="body"></div></section>"#
    } else {
        ""
    };
    format!(
        r#"<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>rocesw {kind} timeline: {title}</title>
<style>{STYLE}</style></head>
<body data-rendered="pending">
<header><h1>rocesw {kind}: {title}</h1><p id="summary"></p>
<form id="zoom" class="note">Time range: from <input id="zoom-from" size="10" inputmode="decimal"> to <input id="zoom-to" size="10" inputmode="decimal"> µs <button type="submit">Zoom</button> <button type="button" id="zoom-all">Whole run</button> (or drag across any chart)</form>
<ol id="changes" class="note" title="Config changes the schedule applied: the dashed lines in every chart"></ol></header>
<section class="panel" id="queues" data-ok="pending"><h2>Queue depth and CE marks</h2>
<p class="note">Each egress queue that built up: the deepest it got in each bucket, the depth it held coming into the bucket included (area, bytes, left scale), and the frames CE-marked leaving it (red bars, frames per bucket, right scale). Dashed lines: config changes.</p><div class="body"></div></section>
<section class="panel" id="pgs" data-ok="pending"><h2>Ingress PGs and headroom</h2>
<p class="note">Each ingress PG that built up or used headroom: what it held in each bucket, all regions (blue) and in headroom (orange), bytes.</p><div class="body"></div></section>
<section class="panel" id="drops" data-ok="pending"><h2>Drops</h2>
<p class="note">Per port and reason (as summary.json names it), with the total: frames dropped in each bucket (bars scaled to the row's busiest bucket).</p><div class="body"></div></section>
<section class="panel" id="pfc" data-ok="pending"><h2>PFC</h2>
<p class="note">Per port and priority: when the port's PG was in XOFF (it sent XOFF, until its XON; blue) and when its egress was paused by PFC it received (orange). PFC watchdog: storm ▼ (red), restore ▲ (green).</p><div class="body"></div></section>{fabric}
<footer>Written by rocesw; the data is in the JSON file beside this page.</footer>
<script id="timeline-data" type="application/json">{data}</script>
<script>{SCRIPT}</script>
</body></html>
"#,
        kind = t.kind,
    )
}
