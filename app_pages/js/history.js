// The browser history of the view pages: one entry per What-if state (app_pages/_state.py, browser_history).
// Streamlit adds a history entry (history.pushState) each time a run changes the query string; on a view
// page that would be every cursor move. Installed once per browser page, this wrapper turns such a push into
// a replacement of the current entry when the address stays on the same view page and either keeps the
// What-if keys (rule.keys) as they are or had no query string yet (the bare address Streamlit's own page
// switch pushes, before the page's run writes its state); a push that changes a What-if key, or the page,
// stays a new entry. Back and Forward then step through What-if states, and Streamlit reruns the app with
// the entry's query string (its own popstate listener), which the app reads as the page's What-if state.
// A page switch from a page that keeps no shared state in its address (Home, Checkpoints, the Tour, ...)
// can reach the browser out of order while it is busy drawing: the new page's run writes its address
// (shared keys, rule.shared) before Streamlit pushes the new page's path, so that address would be pushed
// onto the old page's path, an entry that shows the old page again on Back. Such a push is dropped: the
// path push that follows carries the same query string.
// A classic script, not a module, run once per page after the line that sets window.__geomlabHistory =
// {keys: What-if URL keys, paths: the view pages' and Compare's paths, shared: the URL keys only those pages
// write} (app_pages/_state.py, history_script): in the page's head (serve.py), and again from the start of
// every run (app.py), where it finds itself installed. Nothing in it may look like a tag (a less-than sign
// before a letter or a slash): the sanitizer of Streamlit's st.html drops such a script unrun.
(function () {
  if (window.__geomlabHistoryPush) return;

  // Whether URLs `a` and `b` give the same values to every key of `keys`.
  const sameKeys = (a, b, keys) => {
    const pa = new URLSearchParams(a.search), pb = new URLSearchParams(b.search);
    return keys.every((k) => JSON.stringify(pa.getAll(k)) === JSON.stringify(pb.getAll(k)));
  };
  const path = (u) => u.pathname.replace(/\/+$/, "");

  const push = (window.__geomlabHistoryPush = window.history.pushState.bind(window.history));
  const replace = window.history.replaceState.bind(window.history);
  window.history.pushState = function (state, title, url) {
    const rule = window.__geomlabHistory;
    if (url != null && rule) {
      const here = new URL(window.location.href), to = new URL(String(url), here);
      const view = rule.paths.includes(path(here));
      if (path(to) === path(here) && view && (!here.search || sameKeys(here, to, rule.keys))) {
        return replace(state, title, url);
      }
      if (path(to) === path(here) && !view && rule.shared.some((k) => to.searchParams.has(k))) {
        return undefined;  // another page's address on this page's path: its own push follows
      }
    }
    return push(state, title, url);
  };
})();
