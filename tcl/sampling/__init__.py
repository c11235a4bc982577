"""Active learning for measuring few programs: the RDU sampler (Representativeness, Diversity,
Uncertainty) and its baselines, one class each in the `methods` registry; `sampler` runs the rounds
of pick, measure, retrain. The distance kernels run in C++ (`kernels`), with a plain numpy twin in
`reference` that the tests compare them with."""
