"""The geometry: matrix Lie groups (:mod:`geomlab.geometry.groups`) and oriented 2-planes (:mod:`geomlab.geometry.planes`)."""
