// A classroom student's page: one long poll of the room's follow channel (geomlab/rooms/watch.py), so the
// page learns of the teacher's change within a tenth of a second and without a run of its own session.
// - The teacher moved the cursor alone, and this page shows the teacher's charts: each chart is redrawn
//   from the charts the teacher published with that change (js/live_chart.js's redraw). The session reruns
//   later, once the room has been quiet for `data.catch_up_s` to twice that (its cursor slider, captions and
//   links catch up), spread so that a class's reruns do not come at once.
// - Any other change (page, step, text, controls, a reveal), a chart the teacher does not publish, or an
//   ended room: the session reruns now (the trigger "changed"), and that run applies the room's state.
// - The channel is missing (an app started as `streamlit run app.py`): the trigger "nochannel", after which
//   the session polls its room from a timed fragment.
// - The rooms store cannot be reached (503): the session reruns once, and its Classroom box says so; the
//   poll goes on every 5 s and the next change after the store is back reruns the session again.
// The request also counts the student present ("follow", or "explore" when on their own or away).

const RETRY_MS = 5000;      // after a failed request
const LOOPS = (window.__geomlabRoomLoops = window.__geomlabRoomLoops || new Map());

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// A value as JSON with every object's keys sorted (two equal states give the same string).
function canon(v) {
  if (Array.isArray(v)) return "[" + v.map(canon).join(",") + "]";
  if (v && typeof v === "object") {
    return "{" + Object.keys(v).sort().map((k) => JSON.stringify(k) + ":" + canon(v[k])).join(",") + "}";
  }
  return JSON.stringify(v);
}

// Whether two room states differ in the cursor alone.
function cursorOnly(a, b) {
  if (!a || !b) return false;
  const strip = (s) => canon({ ...s, cursor: 0, version: 0 });
  return a.cursor !== b.cursor && strip(a) === strip(b);
}

// Redraw every chart of this page from the charts the teacher published at `version`; false when they are
// not that version's or lack a chart this page shows (the session's run then draws the page).
async function redraw(url, version) {
  const charts = [...(window.__geomlabCharts || new Map()).entries()].filter(([, c]) => c.plot.isConnected);
  if (!charts.length) return false;
  const r = await fetch(url + "/charts", { cache: "no-store" });
  if (!r.ok) return false;
  const got = await r.json();
  const view = got.charts;
  if (got.version !== version || !view || !view.charts || !view.traces) return false;
  const figures = [];
  for (const [key, chart] of charts) {
    const fig = view.charts[key];
    if (!fig) return false;
    const held = chart.digest() === fig.digest;
    figures.push([chart, { layout: fig.layout, digest: fig.digest, bundle: fig.bundle,
                           data: held ? null : view.traces[fig.digest] }]);
    if (!held && figures[figures.length - 1][1].data == null) return false;
  }
  await Promise.all(figures.map(([chart, figure]) => chart.redraw(figure)));
  return true;
}

export default function (component) {
  const { data, setTriggerValue } = component;
  const id = data.url + "|" + data.me;
  const previous = LOOPS.get(id);
  if (previous) previous.stop();  // each run's data replaces the loop (its version, mode, state)
  const ctl = { stopped: false, abort: new AbortController(), timer: null };
  ctl.stop = () => { ctl.stopped = true; ctl.abort.abort(); clearTimeout(ctl.timer); };
  LOOPS.set(id, ctl);
  // a rerun of the session: its run mounts this listener again with the version it applied, which replaces
  // this loop; until then (or if that run changes nothing here) this loop goes on from `value`
  const send = (event, value, stop) => {
    if (ctl.stopped) return;
    if (stop) ctl.stop();
    setTriggerValue(event, value);
  };
  (async () => {
    let since = data.since, shown = data.state;
    const mode = data.mode === "follow" && !data.away ? "follow" : "explore";
    while (!ctl.stopped) {
      let r, got = null;
      try {
        const q = new URLSearchParams({ since: String(since), me: data.me, mode });
        r = await fetch(`${data.url}/wait?${q}`, { cache: "no-store", signal: ctl.abort.signal });
        got = await r.json().catch(() => null);
      } catch (err) {
        if (ctl.stopped) return;
        await sleep(RETRY_MS);
        continue;
      }
      if (ctl.stopped) return;
      if ((r.ok || r.status === 404) && got === null) return send("nochannel", true, true);  // no such route
      if (r.status === 404) return send("changed", -2, true);  // the room ended: the session's run says so
      if (!r.ok || got === null) {  // the store is unreachable (503): the session's run says so, once
        if (r.status === 503 && !ctl.down) { ctl.down = true; send("changed", -3); }
        await sleep(RETRY_MS);
        continue;
      }
      ctl.down = false;
      if (got.version === since) continue;  // the poll's time ran out
      if (data.mode !== "follow") { since = got.version; continue; }  // exploring: presence only
      if (!data.away && cursorOnly(shown, got.state) && got.charts === got.version) {
        let ok = false;
        try { ok = await redraw(data.url, got.version); } catch (err) { ok = false; }
        if (ctl.stopped) return;
        if (ok) {
          since = got.version;
          shown = got.state;
          clearTimeout(ctl.timer);
          ctl.timer = setTimeout(() => send("changed", since), 1000 * data.catch_up_s * (1 + Math.random()));
          continue;
        }
      }
      clearTimeout(ctl.timer);
      since = got.version;
      shown = got.state;
      send("changed", since);
    }
  })();
  return () => ctl.stop();
}
