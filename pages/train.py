"""Train live (placeholder while being written)."""
import streamlit as st
st.title("Train live")
