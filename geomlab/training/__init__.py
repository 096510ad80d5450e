"""Training one model and what to train: the recipe, the loop, its logs, data parallelism, sampling, run specs, the zoo, sweeps."""
