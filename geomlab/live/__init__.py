"""The app's background training runs and the geometry drawn while they train."""
