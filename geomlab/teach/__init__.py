"""The teaching layer: the view pages, the explanations of each view and figure, the model's facts, the
glossary, the guided lessons."""
