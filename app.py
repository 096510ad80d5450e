"""geomlab's Streamlit entry point: ``streamlit run app.py``.

This file is the frame shared by every page (``st.navigation``): it sets the page config, restores the
shared state (checkpoint, text, token cursor) from the URL, runs the chosen page and mirrors the state
back into the URL so a link reopens the same view. The pages live in ``app_pages/``; their shared helpers in
small modules there (``_state``, ``_data``, ``_warm``, ``_widgets``, ``_messages``, ``_views``, re-exported by
``_ui``). The view pages are listed from the view registry, :mod:`geomlab.teach.views`. The backend (``geomlab/``)
never imports streamlit.

Why ``app_pages/`` and not ``pages/``: Streamlit treats a folder named ``pages`` next to the entry point as
a legacy multipage app until ``st.navigation`` has run once in the process; a deep link such as
``/trajectories?ckpt=...`` as the first request after a restart (and every ``AppTest`` rerun) would then run
the page file directly, without this frame.
"""

from __future__ import annotations

import sys
from pathlib import Path

_ROOT = Path(__file__).resolve().parent
if str(_ROOT) not in sys.path:  # `app_pages._ui` and `geomlab` importable however the app is started
    sys.path.insert(0, str(_ROOT))

import streamlit as st  # noqa: E402

from app_pages import _room as room  # noqa: E402
from app_pages import _ui as ui  # noqa: E402

def main() -> None:
    """One run of the app: the frame, then the chosen page."""
    # a local icon: a `:material/...` page icon is fetched from a font CDN, so offline the tab had none
    # "auto": the sidebar opens on a wide window and stays folded on a phone (expanded, it covered the page a
    # shared link opened on)
    st.set_page_config(page_title="geomlab", page_icon=str(_ROOT / "assets" / "icon.png"), layout="wide",
                       initial_sidebar_state="auto")
    # Figure columns wrap under each other when the page is too narrow for them side by side (an 800-px window
    # with the sidebar open leaves ~480 px: two charts of 220 px lost their labels). Only rows holding a chart;
    # style-only st.html takes no space on the page.
    st.html("<style>"
            "div[data-testid='stHorizontalBlock']:has(> div[data-testid='stColumn'] .geomlab-plot)"
            "{flex-wrap: wrap;}"
            "div[data-testid='stHorizontalBlock'] > div[data-testid='stColumn']:has(.geomlab-plot)"
            "{min-width: min(100%, 380px);}"
            # chart first: less empty space above a page's title, a smaller title, and the column beside a
            # view's first chart (text, guesses) wraps under it when the window leaves it under 260 px
            "[data-testid='stMainBlockContainer'] {padding-top: 3.2rem;}"
            # beside the open sidebar a 1000-px window leaves the page 700 px, of which Streamlit's 5rem side
            # margins take 160 (too few for the Checkpoints table): 2.5rem from 641 to 1100 px (a phone keeps
            # Streamlit's own 1rem)
            "@media (min-width: 641px) and (max-width: 1100px) {[data-testid='stMainBlockContainer'] "
            "{padding-left: 2.5rem; padding-right: 2.5rem;}}"
            "[data-testid='stMain'] h1 {font-size: 1.75rem; padding: 0 0 0.2rem 0;}"
            # the controls row (cursor, layer, head...) wraps too, rather than cut a select's label and value
            "div[data-testid='stHorizontalBlock']:has(> div[data-testid='stColumn'] .st-key-w_pos)"
            "{flex-wrap: wrap; row-gap: 0.5rem;}"
            "div[data-testid='stHorizontalBlock']:has(> div[data-testid='stColumn'] .st-key-w_pos) > "
            "div[data-testid='stColumn'] {min-width: 150px;}"
            "div[data-testid='stHorizontalBlock'] > div[data-testid='stColumn']:has(.st-key-w_pos)"
            "{min-width: min(100%, 300px);}"
            # Compare side by side: its note that the columns wrapped shows while the page is narrower than two
            # 380-px figure columns and their 4rem gap (a container query: the sidebar may be open or folded)
            ".gl-wrap-box {container-type: inline-size;}"
            ".gl-wrap-note {display: none; margin: 0; font-size: 0.875rem; color: rgba(49, 51, 63, 0.6);}"
            "@container (max-width: 823px) {.gl-wrap-note {display: block;}}"
            # the Tour's note that a step's text wrapped under its figures (a 3:2 row of a 380-px figure column
            # and a 260-px text column)
            ".st-key-tour-head {container-type: inline-size;}"
            ".gl-tour-note {display: none; margin-left: 0.4rem; font-size: 0.9rem; font-weight: normal; "
            "color: rgba(49, 51, 63, 0.75);}"
            "@container (max-width: 660px) {.gl-tour-note {display: inline;} "
            ".st-key-tour-head h3 {font-size: 1.1rem; padding: 0;}}"
            # Train live: the curves stay beside the run's panel down to a 1,000-px window, its numbers smaller
            "div[data-testid='stColumn']:has(div.st-key-train-curves-col) {min-width: min(100%, 320px) !important;}"
            ".st-key-train-panel [data-testid='stMetricValue'] {font-size: 1.5rem;}"
            "div[data-testid='stColumn']:has(div.st-key-view-side), "
            "div[data-testid='stColumn']:has(div.st-key-tour-side) {min-width: min(100%, 260px) !important;}"
            # a formula wider than a phone scrolls sideways instead of running off the page; on a phone-wide
            # window the formulas are set at 0.8em instead of KaTeX's 1.21em (13.6 px), so the views' widest
            # (Planes, 468 px at 1.21em) fit the ~324 px a 390-px phone leaves inside "How to read this", and none
            # hides its end unseen
            ".katex-display {overflow-x: auto; overflow-y: hidden;}"
            ".st-key-view-side .katex-display > .katex {font-size: 1em;}"  # (KaTeX's 1.21em in the narrow column)
            "@media (max-width: 600px) {.katex-display > .katex {font-size: 0.8em;}}"
            # the browser-history script (mounted below) draws nothing
            "div[data-testid='stElementContainer']:has(.gl-history) {display: none;}"
            "</style>")
    ui.browser_history()  # first, before the sidebar's pages can be clicked
    ui.log_to_server()
    ui.warm_up()
    ui.init_state()

    PAGES = {
        "": [st.Page(ui.page_path("home"), title="Home", icon=":material/home:", default=True)],
        "Views": [st.Page(ui.page_path(v.slug), title=v.title, icon=v.icon, url_path=v.slug)
                  for v in ui.VIEWS.values()],
        "Work": [
            st.Page(ui.page_path("train"), title="Train live", icon=":material/model_training:",
                    url_path="train"),
            st.Page(ui.page_path("compare"), title="Compare", icon=":material/compare:", url_path="compare"),
            st.Page(ui.page_path("checkpoints"), title="Checkpoints", icon=":material/inventory_2:",
                    url_path="checkpoints"),
        ],
        "Learn": [
            st.Page(ui.page_path("tour"), title="Tour", icon=":material/school:", url_path="tour"),
            st.Page(ui.page_path("glossary"), title="Glossary", icon=":material/menu_book:", url_path="glossary"),
        ],
    }

    page = st.navigation(PAGES)
    ui.check_page_path({p.url_path for group in PAGES.values() for p in group})
    st.session_state[room.K_PAGE] = page.url_path
    room.adopt_link()  # ?room=CODE joins a teacher's room as a student
    with ui.guard("The classroom panel"):
        room.panel()
    room.begin_run()  # a teacher's room view: the charts this run draws
    page.run()
    room.publish(page.url_path)  # a teacher's room shows what this run drew (only when it changed)
    room.settle(page.url_path)  # a student's view of the room, as this run drew it
    ui.remember_owner()  # a reload keeps control of this session's runs and uploads (a cookie, never the URL)
    room.sync_url(page)  # the URL carries only what this page uses, and a student's room


with room.turn():  # a class's students run one after another when their teacher changes the page
    main()
