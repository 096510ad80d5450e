"""Home: what geomlab is, the three model families with a picture each, and links into every view."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
import streamlit as st

from app_pages import _ui as ui
from geomlab.models import kinds_of
from geomlab.models.family import FAMILIES, Family
from geomlab.teach.kinds import geometric_kinds
from geomlab.teach.views import views_for_kind

BLUE, ORANGE, GREEN, GREY = "#0072B2", "#E69F00", "#009E73", "#999999"  # Okabe-Ito (colour-blind safe)


def _mini_layout(fig: go.Figure, title: str, equal: bool = False) -> go.Figure:
    # two-line titles (``<br>``) and a top margin for them: one line was cut in the picture's ~200 px column
    # at a 1,000 px window
    fig.update_layout(title=dict(text=title, font=dict(size=13), x=0.5, xanchor="center"), height=250,
                      margin=dict(l=10, r=10, t=55, b=10),
                      showlegend=False, plot_bgcolor="white")
    if equal:
        fig.update_xaxes(visible=False, range=[-1.25, 1.25])
        fig.update_yaxes(visible=False, range=[-1.25, 1.25], scaleanchor="x", scaleratio=1)
    return fig


@st.cache_data(show_spinner=False)
def osm_picture() -> go.Figure:
    """Eigenvalue phases of H_t = exp(t A) on the unit circle (A skew with three frequencies): each
    eigenvalue exp(±i w t) at t = 0..8, joined by the arc of the circle it turns along (a straight chord
    would cut inside the circle, as if the state left the group)."""
    circle = np.linspace(0, 2 * np.pi, 200)
    fig = go.Figure(go.Scatter(x=np.cos(circle), y=np.sin(circle), mode="lines",
                               line=dict(color=GREY, width=1), hoverinfo="skip"))
    freqs = np.array([0.21, 0.47, 0.83])  # three rotation planes: eigenvalue pairs exp(±i w t)
    t = np.arange(9)
    along = np.linspace(0, t[-1], 200)  # the path between the steps, along the circle
    colors = ["#0072B2", "#E69F00", "#009E73"]
    for k, w in enumerate(freqs):
        for sign in (1, -1):
            fig.add_trace(go.Scatter(x=np.cos(sign * w * along), y=np.sin(sign * w * along), mode="lines",
                                     line=dict(color=colors[k], width=1), hoverinfo="skip"))
            ang = sign * w * t
            fig.add_trace(go.Scatter(
                x=np.cos(ang), y=np.sin(ang), mode="markers",
                marker=dict(size=4 + 1.2 * t, color=colors[k], opacity=0.35 + 0.65 * t / t[-1]), text=t,
                hovertemplate="t=%{text}<extra>eigenvalue pair " + str(k + 1) + "</extra>"))
    return _mini_layout(fig, "State eigenvalues<br>turn on the circle", equal=True)


@st.cache_data(show_spinner=False)
def cem_picture() -> go.Figure:
    """Energy per recursion step for a handful of tokens: mean line and a band (made-up numbers)."""
    rng = np.random.default_rng(1)
    steps = np.arange(6)
    e0 = rng.uniform(2.0, 3.0, size=12)
    einf = e0 - rng.uniform(0.8, 1.4, size=12)
    E = einf[:, None] + (e0 - einf)[:, None] * np.exp(-0.8 * steps)[None, :]
    lo, hi, mean = E.min(0), E.max(0), E.mean(0)
    fig = go.Figure([
        go.Scatter(x=steps, y=hi, mode="lines", line=dict(width=0), hoverinfo="skip"),
        go.Scatter(x=steps, y=lo, mode="lines", line=dict(width=0), fill="tonexty",
                   fillcolor="rgba(230,159,0,0.25)", hoverinfo="skip"),
        go.Scatter(x=steps, y=mean, mode="lines+markers", line=dict(color=ORANGE, width=3),
                   hovertemplate="step %{x}: energy %{y:.2f}<extra></extra>"),
    ])
    fig.update_xaxes(title="recursion step t", dtick=1, showgrid=False)
    fig.update_yaxes(title="energy", showgrid=True, gridcolor="#eee")
    return _mini_layout(fig, "Each step lowers<br>the energy")


@st.cache_data(show_spinner=False)
def grassmann_picture() -> go.Figure:
    """Planes through the origin of R^3 (points of Gr(2, 3)) drawn as great circles on the sphere."""
    circle = np.linspace(0, 2 * np.pi, 200)
    fig = go.Figure(go.Scatter(x=np.cos(circle), y=np.sin(circle), mode="lines",
                               line=dict(color=GREY, width=1), hoverinfo="skip"))
    view = np.array([0.35, 0.25, 1.0]) / np.linalg.norm([0.35, 0.25, 1.0])  # camera direction
    e1 = np.cross(view, [0, 1, 0]); e1 /= np.linalg.norm(e1)
    e2 = np.cross(view, e1)
    rng = np.random.default_rng(3)
    colors = [GREEN, BLUE, ORANGE, "#CC79A7"]
    for k in range(4):
        U, _ = np.linalg.qr(rng.normal(size=(3, 2)))
        pts = U @ np.stack([np.cos(circle), np.sin(circle)])  # (3, 200) on the great circle
        x, y, depth = e1 @ pts, e2 @ pts, view @ pts
        front = np.where(depth >= 0, y, np.nan)
        back = np.where(depth < 0, y, np.nan)
        fig.add_trace(go.Scatter(x=x, y=front, mode="lines", line=dict(color=colors[k], width=2.5),
                                 hovertemplate=f"plane {k + 1}<extra></extra>"))
        fig.add_trace(go.Scatter(x=x, y=back, mode="lines", line=dict(color=colors[k], width=1, dash="dot"),
                                 hoverinfo="skip"))
    return _mini_layout(fig, "Token pairs<br>span planes", equal=True)


#: The picture of each family's card, by family name; the card's title, text, views and kinds come from the
#: family records (:mod:`geomlab.models.family`): each family with a summary has a card, in their order.
PICTURES = {"osm": osm_picture, "cem": cem_picture, "grassmann": grassmann_picture}


def card_views(fam: Family) -> tuple[str, ...]:
    """The views a family's card links to: its own (``Family.views``), then the other views that show one
    of its geometric kinds (the OSMFormer's attention), in page order. Reads the model registry."""
    own = set(geometric_kinds(fam))
    return tuple(fam.views) + tuple(v.slug for v in ui.VIEWS.values()
                                    if v.slug not in fam.views and own & set(v.kinds))


def view_link(slug: str, where=st, family: tuple[str, ...] = ()) -> None:
    """Link to view ``slug`` with a fitting checkpoint loaded; inside a family's card, one of that family
    (e.g. the OSM card's Attention similarity opens an OSMFormer, whose similarity panel exists only for
    OSM states), else any kind the view shows."""
    view = ui.VIEWS[slug]
    kinds = tuple(k for k in view.kinds if k in family)
    ref = (ui.default_ref(kinds) if kinds else None) or ui.default_ref(view.kinds)
    if ref is None:
        where.page_link(ui.page_path(slug), label=f"{view.title} (no checkpoint yet)", icon=view.icon)
        return
    where.page_link(ui.page_path(slug), label=view.title, icon=view.icon, query_params={"ckpt": ref},
                    help=f"Opens {view.title} with {ref}")


def compare_pair() -> tuple[str, str] | None:
    """Two checkpoints worth comparing that share a view: two of one geometric kind with different groups
    (e.g. OSMFormer O(d) vs torus), else two of one kind, else None. Kinds shown on more views come first (a
    pair of OSMFormers compares on three), the families' order on a tie. Design choice."""
    kinds = [k for fam in FAMILIES for k in geometric_kinds(fam)]
    for kind in sorted(kinds, key=lambda k: -len(views_for_kind(k))):
        first = ui.default_ref((kind,))
        if first is None:
            continue
        a = ui.entry_for(first)
        same = [e for e in ui.entries() if e.kind == kind and e.ref != first]
        other = [e for e in same if e.group != a.group] or same
        if other:
            return first, other[0].ref
    return None


def main() -> None:
    ui.show_notice()
    st.title("geomlab")
    st.markdown(
        "An interactive geometry lab for sequence models whose hidden states live on **groups**, descend "
        "**energies** or span **planes**. Pick a checkpoint and a text, and see what happens inside, token "
        "by token; or train a tiny model live and watch it learn.")
    if not ui.entries():
        ui.no_checkpoint_message()
    # one family per row, its picture beside its text: three cards side by side were ~160 px wide at a
    # 1,000 px window (headings broke mid-word, figure titles and link labels were cut)
    for i, fam in enumerate(f for f in FAMILIES if f.summary):
        with st.container(border=True):
            st.subheader(fam.title)
            left, right = st.columns([2, 3], gap="medium")
            with left:
                ui.chart(PICTURES[fam.name](), key=f"home-{i}",
                         filename=f"geomlab-{fam.title.lower().replace(' ', '-')}")
            with right:
                st.markdown(fam.summary)
                for slug in card_views(fam):
                    view_link(slug, family=tuple(kinds_of(fam)))
    st.divider()
    # one audience per row (in three columns the links were cut at 1,000 px)
    st.markdown("**Researchers** — upload your own checkpoint (its folder's files, or a `.zip` of it) on "
                "*Checkpoints*, then open any view; download every figure (camera icon) and trace "
                "(npz/JSON).")
    st.page_link(ui.page_path("checkpoints"), label="Checkpoints", icon=":material/inventory_2:")
    st.markdown("**Teachers** — every view keeps its checkpoint, text and token cursor in the address "
                "bar: copy the URL and your students open exactly the same view.")
    st.page_link(ui.page_path("tour"), label="Tour: guided lessons", icon=":material/school:")
    pair = compare_pair()
    if pair:
        st.page_link(ui.page_path("compare"), label="Compare two models", icon=":material/compare:",
                     query_params={"ckpt": pair[0], "b": pair[1]}, help=f"Opens Compare with {pair[0]} "
                     f"and {pair[1]} on a view both can show")
    else:
        st.page_link(ui.page_path("compare"), label="Compare two models", icon=":material/compare:")
    st.markdown("**Newcomers** — train a tiny model on a toy task in about a minute and watch its loss "
                "fall; then look inside it.")
    st.page_link(ui.page_path("train"), label="Train live", icon=":material/model_training:")


with ui.guard("The home page"):
    main()
