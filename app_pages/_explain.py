"""The teaching layer in the pages: beside a view's first chart, a collapsed "How to read this" block with
the quantity it shows as rendered maths and the current model's facts; under each
figure, one "look for" line; links into the glossary page.

The texts and facts come from :mod:`geomlab.teach.explain`, :mod:`geomlab.teach.facts` and
:mod:`geomlab.teach.glossary` (no streamlit there); this module only draws them.
"""

from __future__ import annotations

import re
from typing import Any

import streamlit as st

from app_pages._state import page_path
from geomlab.teach import explain
from geomlab.teach import facts
from geomlab.teach import glossary

GLOSSARY_PAGE = page_path("glossary")


def glossary_url(slug: str) -> str:
    """Relative link to one glossary entry (``glossary?term=lie-algebra``): relative, so it also works when
    the app is served under a path prefix. It opens the Glossary page scrolled to the term."""
    return f"glossary?term={slug}"


def linked(text: str) -> str:
    """``text`` with its ``[[term]]`` references as links into the glossary."""
    return glossary.link_terms(text, glossary_url)


def _task_of(entry: Any) -> Any:
    """The card's task of a catalog entry (dict or corpus string), None when unknown."""
    if entry is None:
        return None
    task = getattr(entry, "task", None)
    return task if task else getattr(entry, "corpus", None)


def view_intro(view: Any, entry: Any, tr: Any, where: Any = None) -> None:
    """Draw the introduction of view ``view`` (a :class:`geomlab.teach.views.ViewSpec`) for trace ``tr`` of
    checkpoint ``entry``: any warning fact of this trace (e.g. an energy that rose) as one visible line, and a
    collapsed expander with the page's formula (``st.latex``), how to read the view, what to look for, this
    model's facts and the glossary terms it uses (one click away, so the first chart stays in view).
    ``where``: a container to draw in (default: here)."""
    where = where or st.container()
    ex = explain.view_explanation(view.slug)
    config = getattr(entry, "model_config", None) if entry is not None else None
    said = facts.view_facts(view.slug, tr, config=config, task=_task_of(entry))
    with where:
        for f in said:
            if f.warn:
                st.caption(f":material/warning: **{f.text}**")
        with st.expander("How to read this · formula · what to look for", icon=":material/school:"):
            st.latex(stacked(explain.view_maths(view.slug, tr)))
            # the texts as one markdown block: every element here is re-rendered by the browser on each cursor move
            plain = [f for f in said if not f.warn]  # warnings are shown above, outside the expander
            terms = " · ".join(f"[{t}]({glossary_url(glossary.term_slug(t))})" for t in ex.terms
                               if glossary.find_term(t))
            st.markdown("\n\n".join(
                [f"**How to read this.** {linked(ex.read)}", f"**What to look for.** {linked(ex.look)}"]
                + (["**This model.**\n" + "\n".join(f"- {f.text}" for f in plain)] if plain else [])
                + [f":gray[Terms: {terms}. Source: {ex.source}.]"]))
            st.page_link(GLOSSARY_PAGE, label="Open the glossary", icon=":material/menu_book:")


def stacked(maths: str) -> str:
    """A display formula's comma-separated parts (``a,\\quad b`` or ``a,\\ \\ b``) one under the other
    (``gathered``): the column beside a view's first chart is 230-330 px wide, and a formula wider than it
    scrolls sideways with its end out of sight. Design choice."""
    parts = [p.strip() for p in re.split(r",\\(?:quad|\ \\ )", maths) if p.strip()]
    return maths if len(parts) < 2 else r"\begin{gathered}" + r" \\ ".join(parts) + r"\end{gathered}"


def figure_note(name: str, tr: Any = None) -> str:
    """The short "Look for" line under figure ``name`` (with this trace's facts where one applies), as
    markdown; empty for a figure without an explanation."""
    ex = explain.figure_explanation(name)
    if ex.fallback:
        return ""
    return f":material/visibility: **Look for:** {linked(explain.figure_note(name, tr))}"
