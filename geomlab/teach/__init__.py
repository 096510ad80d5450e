"""The teaching layer: the view registry, the explanations of each figure, the guided lessons."""
