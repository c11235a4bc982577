"""Active learning for measuring few programs: the RDU sampler (Representativeness, Diversity,
Uncertainty) and its baselines. The distance kernels run in C++ (`kernels`), with a plain numpy
twin in `reference` that the tests compare them with."""
