"""Compare (placeholder while being written)."""
import streamlit as st
st.title("Compare")
