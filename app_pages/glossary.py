"""Glossary page: every term the views use (geomlab.teach.glossary.GLOSSARY), with a text filter; ``?term=SLUG``
(e.g. ``/glossary?term=lie-algebra``) opens one term, which the view pages' explanations link to."""

import streamlit as st

from app_pages import _ui as ui
from app_pages._explain import glossary_url, linked
from app_pages._messages import md_escape
from geomlab.teach import glossary

K_FILTER = "glossary-filter"

with ui.guard("The glossary"):
    st.title("Glossary")
    st.caption("The words the views use, in one or two sentences each, with the formula and where it comes "
               "from. Every view's “How to read this” links here.")
    wanted = glossary.find_term(st.query_params.get("term"))
    if st.query_params.get("term") and wanted is None:
        st.info(f"No glossary entry is called “{md_escape(st.query_params.get('term'))}”; here is the whole "
                "list.", icon=":material/search_off:")
    query = st.text_input("Filter", key=K_FILTER, placeholder="e.g. angle, Lie, energy",
                          help="Shows the terms whose name or definition contains every word typed.")
    terms = glossary.search_glossary(query)
    if wanted is not None and not query:
        terms = [wanted] + [t for t in terms if t is not wanted]
        st.session_state[ui.K_PAGE_QP] = {"term": glossary.term_slug(wanted.name)}  # the URL keeps the term
    if not terms:
        st.info(f"No term matches “{md_escape(query)}”.", icon=":material/search_off:")
    for t in terms:
        slug = glossary.term_slug(t.name)
        with st.container(border=t is wanted and not query):
            st.subheader(t.name, anchor=slug)
            st.markdown(linked(t.text))
            if t.latex:
                st.latex(t.latex)
            see = " · ".join(f"[{s}]({glossary_url(glossary.term_slug(s))})" for s in t.see
                             if glossary.find_term(s))
            st.caption(f"Source: {md_escape(t.source)}" + (f" · See also: {see}" if see else ""))
