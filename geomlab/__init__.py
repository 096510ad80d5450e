"""geomlab: an interactive geometry lab for sequence models.

The backend package. Data flows one way:
``data -> models -> train/checkpoint -> trace -> figures`` and the Streamlit app (``app.py``, ``pages/``)
is a thin layer on top. Nothing in this package imports streamlit.
"""

__version__ = "0.1.0"
