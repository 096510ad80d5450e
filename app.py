"""geomlab's Streamlit entry point: ``streamlit run app.py``."""

import streamlit as st

st.set_page_config(page_title="geomlab", layout="wide")
st.title("geomlab")
st.write("An interactive geometry lab for sequence models. The pages are being built.")
