"""The pages' one import: ``from app_pages import _ui as ui`` gives the names of the app's small modules.

Not a page itself (``st.navigation`` in ``app.py`` lists the pages; files starting with ``_`` are never
pages). Each concept lives in its own module; this file only re-exports them:

* ``_state.py``: the session keys the app owns, their mirror in the URL, links;
* ``_data.py``: caches (catalog, checkpoints, traces and figures in the shared byte-budget cache), texts;
* ``_warm.py``: the warm-up thread (imports, then the first views into the cache);
* ``_widgets.py``: pickers, sliders, the registry's controls, charts, downloads;
* ``_relayout.py``: a figure relaid for a phone or a half-width Compare column;
* ``_messages.py``: errors as one line, notices, empty/wrong-kind messages, metric formatting;
* ``_views.py``: the renderer shared by the five view pages and Compare.

The views themselves (titles, kinds, figures, controls) are defined once, in :mod:`geomlab.teach.views`.
"""

from __future__ import annotations

from app_pages._data import (  # noqa: F401
    DEFAULT_TEXT, TEXT_HINT, TEXT_HINT_B, cache, cache_caption, check_text, debug_enabled, default_ref,
    default_text_for, entries, entry_for, log, max_chars, trace_for, trace_json, unknown_tokens, vocab_of,
)
from app_pages._messages import (  # noqa: F401
    METRIC_LABEL, accuracy_by_length_line, fmt_metric, fmt_seconds, guard, is_ci, metric_facts,
    no_checkpoint_message, show_notice, summary_rows, table_columns, wrong_kind_message,
)
from app_pages._state import (  # noqa: F401
    K_BLOCK, K_CKPT, K_CKPT_B, K_CKPT_EXPLICIT, K_HEAD, K_LAYER, K_NOTICE, K_PAGE_QP, K_POS, K_SLOT, K_STEPS,
    K_STEPS_B, K_SUBSTEP, K_TEXT, URL_KEYS, browser_history, check_page_path, copy, init_state, page_path,
    remember_owner, seed, set_checkpoint, share_link, state_query, sync_query_params,
)
from app_pages._warm import log_to_server, wait_warm, warm_up  # noqa: F401
from app_pages._widgets import (  # noqa: F401
    PLOTLY_CONFIG, chart, checkpoint_picker, cursor_control, int_control, is_phone, short_labels, steps_control,
    text_box, token_label, too_long, trace_downloads, view_controls,
)
from geomlab.teach.views import VIEWS, ViewSpec  # noqa: F401
