"""The settings of whole-network tuning (no TVM import: `tcl tune --help` states them without apache-tvm)."""

DEFAULT_MINUTES = 6.0  # tuning budget of `tcl tune` when neither --minutes nor --trials is given
TRIALS_PER_ITER = 16  # programs measured per batch: small batches let the scheduler move between tasks often
# EvolutionarySearch settings: searching is most of a batch's wall time, and a smaller search than
# TVM's default (population 512, 4 generations) buys more measured programs per minute, which
# outweighs its poorer picks. TCL's pretrained ranking gets by with half the population of TVM's cost
# models, which learn from nothing (docs/results.md#search_size).
SEARCH = {"population_size": 256, "genetic_num_iters": 2}
TCL_SEARCH = {"population_size": 128, "genetic_num_iters": 2}
# 2-D convolutions are tuned and compiled in this data layout (OHWI weights for NHWC, OIHW for NCHW):
# a program vectorises its innermost loop, which in NHWC runs over contiguous channels, in NCHW over
# the output width, strided for a strided convolution (docs/results.md#network_tuning).
CONV_LAYOUT = "NHWC"
CONV_LAYOUTS = {"NHWC": "OHWI", "NCHW": "OIHW"}  # data layout -> the weights' layout that goes with it
# Weights are constants: tuned programs may read them in a blocked layout of their own, converted once
# at compile time (docs/results.md#network_tuning).
PREPACK_WEIGHTS = True
# Every timed call of a measured program starts with its inputs and weights flushed from the caches,
# FLUSHED_REPEATS calls per program: inside the network the other layers have evicted them, and a
# search that ranks by warm-cache latencies picks programs that are slower there
# (docs/results.md#network_tuning). Off: TVM's default, repeated calls on warm caches.
CACHE_FLUSH = True
FLUSHED_REPEATS = 5
# A candidate whose build takes longer is dropped as a failed program. Builds normally take well under
# a second; a batch with a few that take a minute or more (e.g. some layouts of the 3-channel 7x7 stem
# convolution) would hold the whole session (docs/results.md#search_size).
BUILD_TIMEOUT_SEC = 10.0


def default_search(cost_model: str) -> dict:
    """The EvolutionarySearch settings a cost model tunes with unless told otherwise."""
    return TCL_SEARCH if cost_model == "tcl" else SEARCH
