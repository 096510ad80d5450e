// One Plotly figure drawn in place: the first run draws it (Plotly.newPlot), every later run with new data
// updates the same <div> (Plotly.react), and a click on a point is sent back to Python as the trigger
// "click". plotly.js is loaded once per browser page, from the URL Python passes in `data.plotly`.
// The figure comes in two JSON strings, its traces (`data.figure.data`) and the rest (`data.figure.layout`):
// traces that did not change are neither parsed again nor diffed (Plotly.react gets the same objects), so a
// cursor moved within a figure's window redraws only its layout (the cursor's mark). Where only the marks
// changed (shapes, annotations, the title), Plotly.relayout moves them: a fifth of Plotly.react's time, which
// recomputes every trace's defaults. Python leaves out traces it sent this chart before (`data.figure.data`
// null, `data.figure.digest` naming them): the page keeps each chart's last traces, by chart key, and asks for
// them (the trigger "missing") when it does not hold them.
// Each chart's title and subplot titles are wrapped to the width the chart has, the title short of its
// toolbar, and token ticks thinned where their labels would turn sideways (fitLayout).

const BUNDLES = "__geomlabPlotly";  // script URL -> Promise of the Plotly it defines (serve.py may start one)

// plotly.js from `src`, loaded once per page. Both bundles (cartesian, full) define window.Plotly; each load's
// own object is kept, so a chart keeps drawing with the bundle that drew it.
function loadPlotly(src) {
  const all = (window[BUNDLES] = window[BUNDLES] || {});
  if (!all[src]) {
    all[src] = new Promise((resolve, reject) => {
      const tag = document.createElement("script");
      tag.src = src;
      tag.async = true;
      tag.onload = () => resolve(window.Plotly);
      tag.onerror = () => { delete all[src]; reject(new Error("plotly.js did not load from " + src)); };
      document.head.appendChild(tag);
    });
  }
  return all[src];
}

// Streamlit's Plotly theme, as st.plotly_chart applies it: the "streamlit" template carries placeholder
// colours (#000001...#000040) that are replaced with the page theme's colours, and the template's layout
// gets the theme's fonts, background and axis colours. Colours come from the --st-* properties Streamlit
// sets on a component; the greys, which it does not expose, from its palette (light or dark background).
const GREYS_LIGHT = { text: "#808495", grid: "#e6eaf1", legend: "#262730", green: "#29b09d", red: "#ff2b2b",
                      blue: "#0068c9" };
const GREYS_DARK = { text: "#e6eaf1", grid: "#31333F", legend: "#fafafa", green: "#7defa1", red: "#ffabab",
                     blue: "#83c9ff" };

const LUMINANCE = new Map();  // background colour -> its luminance, measured once

function luminance(color) {
  if (LUMINANCE.has(color)) return LUMINANCE.get(color);
  const probe = document.createElement("span");
  probe.style.color = color;
  document.body.appendChild(probe);
  const rgb = getComputedStyle(probe).color.match(/\d+(\.\d+)?/g) || ["255", "255", "255"];
  probe.remove();
  LUMINANCE.set(color, (0.299 * rgb[0] + 0.587 * rgb[1] + 0.114 * rgb[2]) / 255);
  return LUMINANCE.get(color);
}

function themeOf(host) {
  const css = getComputedStyle(host);
  const get = (name, fallback) => css.getPropertyValue(name).trim() || fallback;
  const list = (name) => get(name, "").split(",").map((c) => c.trim()).filter(Boolean);
  const bg = get("--st-background-color", "#ffffff");
  const greys = luminance(bg) > 0.5 ? GREYS_LIGHT : GREYS_DARK;
  return { bg, greys, font: get("--st-font", "sans-serif"), headingFont: get("--st-heading-font", "sans-serif"),
           heading: get("--st-heading-color", "#31333F"), body: get("--st-text-color", "#31333F"),
           border: get("--st-border-color", "#d5dae5"), categorical: list("--st-chart-categorical-colors"),
           sequential: list("--st-chart-sequential-colors"), diverging: list("--st-chart-diverging-colors") };
}

function swapper(t) {
  const swap = { "#000032": t.greys.green, "#000033": t.greys.red, "#000034": t.greys.blue,
                 "#000035": t.greys.grid, "#000036": t.greys.text, "#000037": t.greys.legend, "#000038": t.bg,
                 "#000039": "rgba(128,132,149,0.05)", "#000040": "transparent" };
  [t.categorical, t.sequential, t.diverging].forEach((colors, k) => colors.forEach((c, i) => {
    swap["#0000" + String(10 * k + i + 1).padStart(2, "0")] = c;
  }));
  return (json) => JSON.parse(json.replace(/#0000[0-4]\d/g, (m) => swap[m] || m));
}

// Streamlit's theme, plus ticklabeloverflow "allow": plotly's default ("hide past domain") measures every tick
// label's box after each draw to hide those past the axis ends, a third of a chart's redraw time; the
// figures' labels stay inside their plots.
function themedLayout(layout, t) {
  const template = (layout.template = layout.template || {});
  const g = t.greys;
  const axisTitle = { font: { color: g.text, size: 14 } };
  const ticks = { color: g.text, size: 12 };
  merge((template.layout = template.layout || {}), {
    font: { color: g.text, family: t.font, size: 12 },
    title: { font: { family: t.headingFont, size: 16, color: t.heading }, pad: { l: 4 }, xanchor: "left", x: 0 },
    legend: { title: { font: { size: 12, color: g.text }, side: "top" }, valign: "top",
              bordercolor: "rgba(0,0,0,0)", borderwidth: 0, font: { size: 12, color: g.legend } },
    paper_bgcolor: t.bg, plot_bgcolor: t.bg,
    yaxis: { ticklabelposition: "outside", ticklabeloverflow: "allow", zerolinecolor: g.grid, title: { ...axisTitle, standoff: 24 },
             tickcolor: g.grid, tickfont: ticks, gridcolor: g.grid, minor: { gridcolor: g.grid }, automargin: true },
    xaxis: { ticklabeloverflow: "allow", zerolinecolor: g.grid, gridcolor: g.grid, showgrid: false, tickfont: ticks, tickcolor: g.grid,
             title: { ...axisTitle, standoff: 20 }, minor: { gridcolor: g.grid }, zeroline: false, automargin: true,
             rangeselector: { bgcolor: t.bg, bordercolor: g.grid, borderwidth: 1, x: 0 } },
    margin: { pad: 8, r: 0, l: 0 },
    hoverlabel: { bgcolor: t.bg, bordercolor: t.border, font: { color: g.text, family: t.font, size: 12 } },
    coloraxis: { colorbar: { thickness: 16, xpad: 24, ticklabelposition: "outside", outlinecolor: "rgba(0,0,0,0)",
                             outlinewidth: 8, len: 0.75, y: 0.5745, title: { font: { color: g.text, size: 14 } },
                             tickfont: { color: g.text, size: 12 } } },
  });
  if (layout.title && typeof layout.title === "object" && typeof layout.title.text === "string") {
    layout.title = { ...layout.title, text: "<b>" + layout.title.text + "</b>" };
  }
  return layout;
}

// Top-level layout keys that Plotly.relayout redraws on their own, without recomputing the traces.
const MARKS = new Set(["shapes", "annotations", "title"]);

function layoutParts(layout) {
  const parts = {};
  for (const [k, v] of Object.entries(layout)) parts[k] = JSON.stringify(v);
  return parts;
}

// The {key: value} update that turns the layout drawn (its parts `before`) into `layout` (parts `after`),
// or null when a key other than the marks changed (then the figure needs Plotly.react).
function marksUpdate(before, after, layout) {
  const update = {};
  for (const k of new Set([...Object.keys(before), ...Object.keys(after)])) {
    if (before[k] === after[k]) continue;
    if (!MARKS.has(k)) return null;
    update[k] = k in layout ? layout[k] : (k === "title" ? { text: "" } : []);
  }
  return update;
}

function merge(into, from) {
  for (const [k, v] of Object.entries(from)) {
    if (v && typeof v === "object" && !Array.isArray(v) && into[k] && typeof into[k] === "object") merge(into[k], v);
    else into[k] = v;
  }
  return into;
}

// What a click on one point reports: its coordinates (z for heatmaps and 3-D), the trace and point index
// (a heatmap's point index is [row, column]) and the point's customdata.
// a typed array (plotly's decoded binary data) as a plain array, so it reaches Python as a list
function plain(v) {
  if (v === undefined || v === null) return null;
  return ArrayBuffer.isView(v) ? Array.from(v) : v;
}

function clicked(ev) {
  const p = ev.points && ev.points[0];
  if (!p) return null;
  const out = { x: p.x ?? null, y: p.y ?? null, curve: p.curveNumber,
                point: p.pointNumber ?? p.pointIndex ?? null, customdata: plain(p.customdata) };
  if (p.z !== undefined) out.z = p.z;
  return JSON.parse(JSON.stringify(out));
}

// A cursor ring (a layout circle of a fixed size in pixels, named "cursor ...") answers a hover with its name:
// the points of the traces it marks lie under it, and the closest of them would answer instead. The ring under
// the pointer event `ev`, or null.
function ringUnder(plot, ev) {
  const fl = plot._fullLayout;
  if (!fl || !fl._paper || !ev || ev.clientX === undefined) return null;
  const box = fl._paper.node().getBoundingClientRect();
  const px = ev.clientX - box.left, py = ev.clientY - box.top;
  for (const s of fl.shapes || []) {
    if (s.type !== "circle" || s.xsizemode !== "pixel" || !String(s.name || "").startsWith("cursor ")) continue;
    const xa = fl[s.xref.replace("x", "xaxis")], ya = fl[s.yref.replace("y", "yaxis")];
    if (!xa || !ya || !xa.l2p || !ya.l2p) continue;
    const cx = xa._offset + xa.l2p(s.xanchor), cy = ya._offset + ya.l2p(s.yanchor);
    const r = Math.max(Math.abs(s.x1 - s.x0), Math.abs(s.y1 - s.y0)) / 2 + 1;
    if (Math.hypot(px - cx, py - cy) <= r) return { name: s.name, x: cx, y: cy, r, color: s.fillcolor };
  }
  return null;
}

// A click inside a cursor ring: the ring holds the hover back, so Plotly reports no point. The clicked point is
// the traces' point nearest the pointer, within 6 px, as Plotly's click event would give it; null on the ring's
// centre (the cursor is there already) or with no point near.
function pointUnder(plot, ev, ring) {
  const fl = plot._fullLayout;
  const box = fl._paper.node().getBoundingClientRect();
  const px = ev.clientX - box.left, py = ev.clientY - box.top;
  if (Math.hypot(px - ring.x, py - ring.y) <= 3) return null;
  let best = null, near = 6;
  (plot._fullData || []).forEach((t, curve) => {
    if (t.visible !== true || t.hoverinfo === "skip" || !t.x || !t.y) return;
    const xa = fl[(t.xaxis || "x").replace("x", "xaxis")], ya = fl[(t.yaxis || "y").replace("y", "yaxis")];
    if (!xa || !ya || !xa.l2p || !ya.l2p) return;
    for (let i = 0; i < t.x.length; i++) {
      if (t.x[i] == null || t.y[i] == null) continue;
      const d = Math.hypot(px - xa._offset - xa.l2p(t.x[i]), py - ya._offset - ya.l2p(t.y[i]));
      if (d < near) {
        near = d;
        best = { x: t.x[i], y: t.y[i], curveNumber: curve, pointNumber: i,
                 customdata: t.customdata ? t.customdata[i] : undefined };
      }
    }
  });
  return best && { points: [best] };
}

function showRingHover(Plotly, plot, ring) {
  const fl = plot._fullLayout;
  const text = ring.name.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
  Plotly.Fx.loneHover({ x0: ring.x - ring.r, x1: ring.x + ring.r, y: ring.y, text, color: ring.color,
                        idealAlign: "right" },
                      { container: fl._hoverlayer.node(), outerContainer: fl._paper.node(), gd: plot });
}

function hideRingHover(state, plot) {
  if (!state.ringShown) return;
  state.ringShown = false;
  if (plot._fullLayout && plot._fullLayout._hoverlayer) state.Plotly.Fx.loneUnhover(plot._fullLayout._hoverlayer);
}

// Titles fitted to the width a chart has. A title line may not run under the toolbar (Plotly's modebar, shown
// at the chart's top right while the pointer is over it): a line beside the toolbar's band ends short of it,
// a line below the band may run the chart's width. A title that does not fit so wraps at spaces (never inside
// a tag; its own <br>s kept), pinned to the top, and the top margin grows by a line per added line (the plot
// gives up the height). Charts of one row (`layout.meta.row`, Compare's A and B side by side) take the
// largest top margin of the row, so their plots start at one height. Design choice.
const TITLE_GAP = 8;  // px between a title line and the toolbar, or the chart's right edge
const TOOLBAR = { width: 220, bottom: 28 };  // a 2-D chart's toolbar (px) until one is measured
const TOOLBARS = new Map();  // config and 2-D/3-D -> the toolbar's {width, bottom} measured on a drawn chart
const BR = /<br\s*\/?>/i;
const ROWS = (window.__geomlabRows = window.__geomlabRows || new Map());  // row -> Map(plot -> top it needs)
let CANVAS = null;

function toolbarKey(config, layout) {
  return config + (Object.keys(layout).some((k) => k.startsWith("scene")) ? " 3d" : " 2d");
}

// The toolbar's width from the chart's right edge and its bottom from the chart's top (px): measured on
// `plot` when drawn (and remembered for its key), else as last measured for that key, else TOOLBAR.
function toolbarOf(plot, key, config) {
  if (config && config.displayModeBar === false) return { width: 0, bottom: 0 };
  const bar = plot.querySelector(".modebar");
  if (bar && bar.getBoundingClientRect().width > 0) {
    const b = bar.getBoundingClientRect(), p = plot.getBoundingClientRect();
    TOOLBARS.set(key, { width: p.right - b.left, bottom: b.bottom - p.top });
  }
  return TOOLBARS.get(key) || TOOLBAR;
}

// Width in px of Plotly markup as drawn in CSS font `font`: its text without tags and with its entities read.
function textWidth(markup, font) {
  const ctx = (CANVAS = CANVAS || document.createElement("canvas").getContext("2d"));
  ctx.font = font;
  const text = markup.replace(/<[^>]*>/g, "").replace(/&lt;/g, "<").replace(/&gt;/g, ">")
    .replace(/&quot;/g, '"').replace(/&#39;/g, "'").replace(/&amp;/g, "&");
  return ctx.measureText(text).width;
}

// `text` (Plotly markup) cut at spaces into lines, line k at most limit(k) px wide as `width` measures it (a
// word wider keeps a line of its own); a tag, spaces inside it included, is part of its word.
function wrapLines(text, limit, width) {
  const lines = [];
  for (const part of text.split(BR)) {
    let line = null;
    for (const word of part.match(/(?:<[^>]*>|[^\s<]|<(?![^>]*>))+/g) || []) {
      const longer = line === null ? word : line + " " + word;
      if (line !== null && width(longer) > limit(lines.length)) {
        lines.push(line);
        line = word;
      } else {
        line = longer;
      }
    }
    lines.push(line ?? "");
  }
  return lines;
}

// The lines `wrap(most)` gives (`wrap`: a text's lines at most `most` px wide) evened out: wrapped at the
// narrowest width that keeps their count (within 4 px).
function evened(wrap, most) {
  const count = wrap(most).length;
  let lo = 0, hi = most;
  while (hi - lo > 4) {
    const mid = (lo + hi) / 2;
    if (wrap(mid).length > count) lo = mid;
    else hi = mid;
  }
  return wrap(hi);
}

// The top margin the charts of `row` take: the largest that one needs (`need`, this chart's). A chart whose
// need changed has the row's other charts fitted again.
function rowTop(row, plot, need) {
  const members = ROWS.get(row) || new Map();
  ROWS.set(row, members);
  const before = members.get(plot);
  members.set(plot, need);
  for (const p of [...members.keys()]) {
    if (p === plot) continue;
    if (!p.isConnected) members.delete(p);
    else if (before !== need && p.__geomlab) refit(p, p.__geomlab);
  }
  return Math.max(...members.values());
}

// How far above a title's anchor plotly draws the top of its first line (px) when the title is pinned with
// yanchor "top": a title of one line, `lines` = 1, stands lower than one of several (measured in chromium).
const capShift = (lines, size) => (lines > 1 ? 0.875 : 0.1875) * size;

// `layout` (themed) with its title fitted to `plot`'s width beside toolbar `tb` and the top margin that
// takes (see TITLE_GAP), `extra` px more for subplot titles grown upward (fitNotes): a shallow copy, or
// `layout` itself where nothing changes. Only a title at the left of the chart (Plotly's container
// coordinates) is fitted.
function fitTitle(plot, layout, tb, extra = 0) {
  const title = layout.title, text = title && title.text;
  const tl = ((layout.template || {}).layout || {}).title || {};
  const top = layout.margin && layout.margin.t != null ? layout.margin.t : 100;  // plotly's default
  const row = layout.meta && layout.meta.row;
  const W = plot.clientWidth, H = layout.height || 450;
  const given = typeof text === "string" ? text.split(BR).length : 1;
  const pinned = title && title.yref === "container" && title.yanchor === "top" && typeof title.y === "number";
  let lines = null, line = 21, size = 16, first = top / 2 - 14;
  if (typeof text === "string" && text && W > 0 && (title.xref ?? "container") === "container"
      && (title.xanchor ?? tl.xanchor) === "left") {
    const font = { ...tl.font, ...title.font }, pad = { ...tl.pad, ...title.pad };
    size = font.size || 16;
    line = 1.3 * size;  // plotly's line height
    // the first line's top: where the figure pins it, else where plotly puts a one-line title (its baseline
    // halfway down the top margin)
    first = pinned ? (1 - title.y) * H + (pad.t || 0) - capShift(given, size) : top / 2 - 0.875 * size;
    const left = (title.x ?? tl.x ?? 0) * W + (pad.l || 0);
    const beside = W - tb.width - TITLE_GAP - left, whole = W - TITLE_GAP - left;
    const font_ = cssFont({ ...font, size }, true);
    const wrap = (most) => wrapLines(text, (k) => (first + k * line >= tb.bottom ? Math.min(most, whole) : beside),
                                     (s) => textWidth(s, font_));
    lines = wrap(whole);
    // every line fits as it is, or the lines below the toolbar evened out
    lines = lines.length === given ? null : evened(wrap, whole);
  }
  const need = Math.round(top + extra + (lines ? (lines.length - given) * line : 0));
  const t = row ? rowTop(row, plot, need) : need;
  if (t === top) return layout;
  if (!title) return { ...layout, margin: { ...layout.margin, t } };
  // pinned where its first line stood: plotly places a title that is not pinned by the top margin
  const n = lines ? lines.length : given;
  const pin = { yref: "container", yanchor: "top", y: 1 - (first + capShift(n, size)) / H, pad: { ...title.pad, t: 0 } };
  return { ...layout, margin: { ...layout.margin, t },
           title: { ...title, ...pin, ...(lines ? { text: lines.join("<br>") } : {}) } };
}

// The plot area's left edge and width in px: as plotly drew it (margins pushed by tick labels and colour
// bars), else as `layout`'s margins (plotly's default 80 px) put it in a chart `W` px wide.
function plotBox(plot, layout, W) {
  const size = plot._fullLayout && plot._fullLayout._size;
  if (size && size.w > 0) return { l: size.l, w: size.w };
  const m = { ...((layout.template || {}).layout || {}).margin, ...layout.margin };
  const l = m.l ?? 80, r = m.r ?? 80;
  return { l, w: Math.max(W - l - r, 0) };
}

// A CSS font for text in plotly font `font` (a merge of the layout's font and the element's own).
const cssFont = (font, bold = false) => `${bold ? "bold " : ""}${font.size || 12}px ${font.family || "sans-serif"}`;

// `layout`'s subplot titles (annotations in paper coordinates centred over a panel, no arrow, standing on
// its top) wrapped as titles are (wrapLines, evened) to the width they have: twice the distance from their centre to
// the nearer edge of the chart, less TITLE_GAP on either side. A title over the top panel grows into the
// top margin: `top`, the px the margin must grow by (plotly's line height, 1.3 times the font size, per
// added line). Returns {annotations, top}; `annotations` null where none changes. Design choice: unwrapped,
// a long centred title ("offset slot 0: planes of pairs (t, t−Δ), ...") is cut at both edges of a phone's chart.
function fitNotes(plot, layout) {
  const anns = layout.annotations, W = plot.clientWidth;
  if (!Array.isArray(anns) || !anns.length || W <= 0) return { annotations: null, top: 0 };
  const base = { ...((layout.template || {}).layout || {}).font, ...layout.font };
  const box = plotBox(plot, layout, W);
  const tops = Object.keys(layout).filter((k) => /^yaxis\d*$/.test(k))
    .map((k) => ((layout[k] || {}).domain || [0, 1])[1]);
  const highest = tops.length ? Math.max(...tops) : 1;
  let changed = false, top = 0;
  const out = anns.map((a) => {
    if (!a || typeof a.text !== "string" || a.showarrow !== false || (a.xanchor ?? "auto") !== "center"
        || a.yanchor !== "bottom" || (a.xref ?? "paper") !== "paper" || (a.yref ?? "paper") !== "paper"
        || typeof a.x !== "number") return a;
    const font = { ...base, ...a.font };
    const cx = box.l + a.x * box.w;
    const most = 2 * (Math.min(cx, W - cx) - TITLE_GAP);
    const given = a.text.split(BR).length;
    const wrap = (w) => wrapLines(a.text, () => w, (s) => textWidth(s, cssFont(font)));
    if (wrap(most).length === given) return a;
    const lines = evened(wrap, most);
    changed = true;
    if ((a.y ?? 0.5) >= highest - 1e-6) top = Math.max(top, (lines.length - given) * 1.3 * (font.size || 12));
    return { ...a, text: lines.join("<br>") };
  });
  return { annotations: changed ? out : null, top };
}

// `layout`'s x axes of array ticks (token labels) thinned to every k-th tick, the smallest k that sets the
// widest label apart from the next one (plotly turns the labels sideways when two of them touch): a shallow
// copy of each axis changed. Measured on the axes as plotly last drew them (their px per unit); {} before
// the first draw and for an axis whose tick angle the figure sets. Design choice: unthinned, a phone chart's
// token labels ("0 'R'") turn 45° and take the space under the plot.
const TICK_GAP = 8;  // px at least between two tick labels
function thinTicks(plot, layout) {
  const fl = plot._fullLayout, out = {};
  if (!fl) return out;
  const base = { ...((layout.template || {}).layout || {}).font, ...layout.font };
  const tmpl = ((layout.template || {}).layout || {}).xaxis || {};
  for (const [k, ax] of Object.entries(layout)) {
    if (!/^xaxis\d*$/.test(k) || !ax || (ax.tickmode ?? "array") !== "array"
        || (ax.tickangle ?? "auto") !== "auto") continue;
    const vals = ax.tickvals, text = ax.ticktext, xa = fl[k];
    if (!Array.isArray(vals) || !Array.isArray(text) || vals.length < 3 || text.length !== vals.length
        || !xa || !xa.d2p) continue;
    const px = vals.map((v) => xa.d2p(v));
    if (px.some((p) => !Number.isFinite(p))) continue;
    let step = Infinity;
    for (let i = 1; i < px.length; i++) step = Math.min(step, Math.abs(px[i] - px[i - 1]));
    const font = cssFont({ ...base, ...tmpl.tickfont, ...ax.tickfont });
    const widest = Math.max(...text.map((t) => textWidth(String(t), font)));
    const every = Math.ceil((widest + TICK_GAP) / Math.max(step, 1));
    if (every < 2) continue;
    const keep = (_, i) => i % every === 0;
    out[k] = { ...ax, tickvals: vals.filter(keep), ticktext: text.filter(keep) };
  }
  return out;
}

// `layout` fitted to `plot` (toolbar `tb`): its subplot titles (fitNotes), its ticks (thinTicks), its title
// and top margin (fitTitle); a shallow copy, or `layout` itself where nothing changes.
function fitLayout(plot, layout, tb) {
  const notes = fitNotes(plot, layout);
  const fitted = { ...layout, ...thinTicks(plot, layout),
                   ...(notes.annotations ? { annotations: notes.annotations } : {}) };
  return fitTitle(plot, fitted, tb, Math.round(notes.top));
}

// Fit `plot` again (its width or its toolbar changed, or its row's margin; fitLayout): Plotly.relayout of the
// title, margin, subplot titles and x ticks where they changed. Queued after the chart's draws.
function refit(plot, state) {
  state.queue = state.queue.then(async () => {
    if (!state.drawn || !plot.isConnected || !state.base) return;
    const layout = fitLayout(plot, state.base, toolbarOf(plot, state.toolbar, state.configObj));
    const update = {};
    const topOf = (json) => ((json ? JSON.parse(json) : null) || {}).t || 0;
    const before = topOf(state.parts.margin);
    const axes = Object.keys(layout).filter((k) => /^xaxis\d*$/.test(k));
    for (const k of ["title", "margin", "annotations", ...axes]) {
      const json = JSON.stringify(layout[k]);
      if (json === state.parts[k]) continue;
      if (axes.includes(k)) {  // its ticks thinned, or whole again
        update[k + ".tickvals"] = layout[k].tickvals;
        update[k + ".ticktext"] = layout[k].ticktext;
      } else {
        update[k] = layout[k] ?? (k === "title" ? { text: "" } : k === "annotations" ? [] : {});
      }
      state.parts[k] = json;
    }
    if (update.margin && state.tall) {  // a height that follows its map keeps the map's room under the new top
      state.tall.height += topOf(state.parts.margin) - before;
      plot.style.height = state.tall.height + "px";
    }
    if (Object.keys(update).length) await state.Plotly.relayout(plot, update);
  }).catch((err) => console.error("geomlab live chart:", err));
  return state.queue;
}

// A square map (one panel whose y axis is scaled to its x axis, the x axis constrained to its domain from the
// left: the attention maps) as high as the plot leaves the plot's width past it blank, between the map and its
// colour bar, which Plotly places by the plot's width; one held by the width leaves the blank under it. The
// chart's width (the <div>'s max-width) follows the map, at most Python's width for it (`state.maxWidth`) or
// its container's; where it can grow no wider, its height follows the map instead (the <div>'s height, which
// Plotly's resize takes; `state.tall` keeps the width it was fitted at, and a new width starts again from the
// figure's own height). At most 3 steps per draw (a title that wraps anew changes the plot's height).
function hug(plot, state) {
  const fl = plot._fullLayout;
  const xa = fl && fl.xaxis, ya = fl && fl.yaxis;
  if (!xa || !ya || ya.scaleanchor !== "x" || fl.xaxis2 || xa.constrain !== "domain"
      || xa.constraintoward !== "left") return;
  const right = (1 - xa.domain[1]) * fl._size.w;
  const below = ya.constrain === "domain" && ya.constraintoward === "top" ? ya.domain[0] * fl._size.h : 0;
  const width = plot.clientWidth;
  if (state.tall) {  // its height follows the map: again where the plot moved (plotly's margins for the ticks)
    const blank = Math.round(below - right);  // under the map, or (negative) beside it
    if (Math.abs(blank) < 2 || (state.tallSteps = (state.tallSteps || 0) + 1) > 3) return;
    state.tall.height = Math.min(state.base.height || 450, state.tall.height - blank);
    plot.style.height = state.tall.height + "px";
    return;
  }
  let want = Math.round(width - right + below);
  if (state.maxWidth) want = Math.min(want, state.maxWidth);
  if (below >= 2 && Math.min(want, plot.parentElement.clientWidth) <= width + 1) {
    // no wider: as high as the map instead
    state.tall = { width, height: Math.round(fl.height - below) };
    state.tallSteps = 0;
    plot.style.height = state.tall.height + "px";  // the resize observer redraws it
    return;
  }
  if (Math.abs(want - width) < 2 || (want > width && plot.parentElement.clientWidth <= width + 1)) return;
  if ((state.hugs = (state.hugs || 0) + 1) > 3) return;
  state.hugTo = want;
  plot.style.maxWidth = want + "px";  // the resize observer redraws it
}

// After a chart was drawn or resized: fitted to its width and toolbar as drawn, a square map's width to it.
function settle(plot, state) {
  return refit(plot, state).then(() => { if (plot.isConnected) hug(plot, state); });
}

const TURNS = "__geomlabFirstDraws";  // charts waiting for their first draw, and whether one is being drawn

// Resolves when `plot` may be drawn for the first time. First draws take turns, one per frame, the highest
// chart on the page first: a page's first chart is painted before the charts below it are drawn, instead of
// all of them in one long task (on /trajectories four charts take 0.4 s).
function firstDrawTurn(plot) {
  const turns = (window[TURNS] = window[TURNS] || { waiting: [], busy: false });
  const next = () => {
    if (!turns.waiting.length) { turns.busy = false; return; }
    const top = (w) => (w.plot.isConnected ? w.plot.getBoundingClientRect().top : Infinity);
    turns.waiting.sort((a, b) => top(a) - top(b));
    turns.waiting.shift().resolve();
    // The next one after this one is painted: after the next animation frame, or 100 ms in a hidden tab,
    // which has no frames.
    let done = false;
    const go = () => { if (!done) { done = true; setTimeout(next, 0); } };
    requestAnimationFrame(go);
    setTimeout(go, 100);
  };
  return new Promise((resolve) => {
    turns.waiting.push({ plot, resolve });
    if (!turns.busy) { turns.busy = true; setTimeout(next, 0); }
  });
}

const HELD = "__geomlabTraces";  // chart key -> {digest, json}: the traces each chart last received
const HELD_MAX = 64;  // charts whose traces the page keeps (the least recently received go first)

// The traces JSON of `data`'s figure: sent with it, or held from an earlier run; null when neither.
function tracesOf(data) {
  const held = (window[HELD] = window[HELD] || new Map());
  const fig = data.figure;
  if (fig.data == null) {
    const h = held.get(data.key);
    return h && h.digest === fig.digest ? h.json : null;
  }
  held.delete(data.key);  // re-inserted last: the most recent
  held.set(data.key, { digest: fig.digest, json: fig.data });
  if (held.size > HELD_MAX) held.delete(held.keys().next().value);
  return fig.data;
}

// Charts of this page by key, for a classroom's follow channel (js/room_listener.js): `redraw(figure)` draws
// the chart anew from a figure the teacher published (traces included), through the chart's own queue.
const CHARTS = (window.__geomlabCharts = window.__geomlabCharts || new Map());

export default function (component) {
  const { data, parentElement, setTriggerValue } = component;
  const traces = tracesOf(data);
  if (traces === null) {  // Python thinks this page holds them: ask for them whole (one more run)
    setTriggerValue("missing", data.figure.digest);
    return () => {};
  }
  let plot = parentElement.querySelector(":scope > .geomlab-plot");
  if (!plot) {
    plot = document.createElement("div");
    plot.className = "geomlab-plot";
    parentElement.appendChild(plot);
  }
  const state = (plot.__geomlab = plot.__geomlab || { drawn: false, queue: Promise.resolve() });
  state.send = setTriggerValue;  // the click handler always answers through the latest run's setter
  draw(plot, parentElement, state, data, traces);
  CHARTS.set(data.key, { plot, digest: () => window[HELD]?.get(data.key)?.digest,
                         redraw: (figure) => draw(plot, parentElement, state, { ...state.latest, figure },
                                                  tracesOf({ key: data.key, figure })) });
  return () => {
    if (state.resize) state.resize.disconnect();
    if (state.Plotly && state.drawn && !plot.isConnected) state.Plotly.purge(plot);
    if (!plot.isConnected && CHARTS.get(data.key)?.plot === plot) CHARTS.delete(data.key);
  };
}

// Draw `data` (a run's chart data, or one made of a published figure) into `plot`, after the draws queued
// before it; a newer call supersedes it before it starts. Resolves when drawn.
function draw(plot, parentElement, state, data, traces) {
  state.latest = data;
  state.queue = state.queue.then(async () => {
    if (state.latest !== data) return;  // a newer run superseded this one before it was drawn
    const Plotly = await loadPlotly(data.plotly);
    if (state.drawn && state.Plotly !== Plotly) {  // the figure needs the other bundle now: draw it anew
      state.Plotly.purge(plot);
      state.drawn = false;
    }
    const t = themeOf(parentElement);
    const theme = JSON.stringify(t);
    const config = JSON.stringify(data.config);
    const same = state.drawn && state.theme === theme && state.config === config && state.maxWidth === data.max_width;
    if (same && state.dataJson === traces && state.layoutJson === data.figure.layout) return;
    const parse = swapper(t);
    const sameTraces = same && state.dataJson === traces;
    if (!sameTraces) {
      state.traces = parse(traces);  // new objects only when the traces changed
      state.dataJson = traces;
    }
    if (state.maxWidth !== data.max_width || !state.drawn) {  // a fixed width, at most the container's
      plot.style.maxWidth = data.max_width ? data.max_width + "px" : "";
      state.maxWidth = data.max_width;
    }
    state.configObj = data.config;
    const base = themedLayout(parse(data.figure.layout).layout || {}, t);
    if (!state.tall || state.base.height !== base.height) {
      state.tall = null;
      plot.style.height = (base.height || 450) + "px";
    }
    if (document.fonts) await document.fonts.ready;  // the title is measured in its own font
    state.toolbar = toolbarKey(config, base);
    const layout = fitLayout(plot, base, toolbarOf(plot, state.toolbar, data.config));
    state.base = base;
    state.layoutJson = data.figure.layout;
    const parts = layoutParts(layout);
    const marks = sameTraces ? marksUpdate(state.parts, parts, layout) : null;
    state.parts = parts;
    hideRingHover(state, plot);  // the ring may move
    if (marks) {
      await Plotly.relayout(plot, marks);
      return;
    }
    const drawn = { ...layout, autosize: true };  // plotly keeps (and changes) the object it draws
    delete drawn.width;  // the width is the <div>'s, followed on resize
    state.hugs = 0;
    if (state.tall) {  // drawn anew: from the figure's own height, fitted again once drawn
      state.tall = null;
      plot.style.height = (base.height || 450) + "px";
    }
    if (!state.drawn) {
      await firstDrawTurn(plot);
      await Plotly.newPlot(plot, state.traces, drawn, data.config);
      state.drawn = true;
      state.Plotly = Plotly;
      plot.on("plotly_click", (ev) => {
        if (ev.event && ringUnder(plot, ev.event)) return;  // answered by the click listener below
        const c = clicked(ev);
        if (c) state.send("click", c);
      });
      plot.addEventListener("click", (ev) => {  // a point under a cursor ring, which held its hover back
        const ring = ringUnder(plot, ev);
        const c = ring && pointUnder(plot, ev, ring);
        if (c) state.send("click", clicked(c));
      });
      plot.on("plotly_beforehover", (ev) => {
        const ring = ringUnder(plot, ev);
        hideRingHover(state, plot);
        if (!ring) return true;
        state.Plotly.Fx.unhover(plot);
        showRingHover(state.Plotly, plot, ring);
        state.ringShown = true;
        return false;  // no hover of the points under the ring
      });
      plot.addEventListener("mouseleave", () => hideRingHover(state, plot));
      if (!state.resize) {
        state.resize = new ResizeObserver(() => {
          if (!plot.isConnected) return;
          if (plot.clientWidth !== state.hugTo) state.hugs = 0;  // resized by its container, not by hug
          if (state.tall && plot.clientWidth !== state.tall.width) {  // another width: the figure's own height
            state.tall = null;
            plot.style.height = (state.base.height || 450) + "px";
          }
          state.Plotly.Plots.resize(plot).then(() => settle(plot, state)).catch(() => {});
        });
        state.resize.observe(plot);
      }
    } else {
      await Plotly.react(plot, state.traces, drawn, data.config);
    }
    Object.assign(state, { theme, config });
    settle(plot, state);  // queued: runs after this draw
  }).catch((err) => console.error("geomlab live chart:", err));
  return state.queue;
}
