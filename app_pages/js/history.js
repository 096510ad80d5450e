// The browser history of the view pages: one entry per What-if state (app_pages/_state.py, browser_history).
// Streamlit adds a history entry (history.pushState) each time a run changes the query string; on a view
// page that would be every cursor move. Installed once per browser page, this wrapper turns such a push into
// a replacement of the current entry when the address stays on the same view page and either keeps the
// What-if keys (data.keys) as they are or had no query string yet (the bare address Streamlit's own page
// switch pushes, before the page's run writes its state); a push that changes a What-if key, or the page,
// stays a new entry. Back and Forward then step through What-if states, and Streamlit reruns the app with
// the entry's query string (its own popstate listener), which the app reads as the page's What-if state.

// Whether URLs `a` and `b` give the same values to every key of `keys`.
function sameKeys(a, b, keys) {
  const pa = new URLSearchParams(a.search), pb = new URLSearchParams(b.search);
  return keys.every((k) => JSON.stringify(pa.getAll(k)) === JSON.stringify(pb.getAll(k)));
}

const path = (u) => u.pathname.replace(/\/+$/, "");

export default function (component) {
  window.__geomlabHistory = component.data;  // {keys: What-if URL keys, paths: the view pages' paths}
  if (window.__geomlabHistoryPush) return;
  const push = (window.__geomlabHistoryPush = window.history.pushState.bind(window.history));
  const replace = window.history.replaceState.bind(window.history);
  window.history.pushState = function (state, title, url) {
    const rule = window.__geomlabHistory;
    if (url != null && rule) {
      const here = new URL(window.location.href), to = new URL(String(url), here);
      if (path(to) === path(here) && rule.paths.includes(path(here))
          && (!here.search || sameKeys(here, to, rule.keys))) {
        return replace(state, title, url);
      }
    }
    return push(state, title, url);
  };
}
