"""Names of the built-in networks, which of them are held out for testing, and the operator sweep.

Plain constants, importable without torch or TVM, so that `tcl collect --help` lists them fast;
tcl.tvm.networks builds each network under these names.
"""

NETWORK_NAMES = ("resnet18", "resnet50", "mobilenet_v2", "vgg11", "vit_tiny", "bert_tiny", "bert_base", "dcgan",
                 "resnext50", "convnext_tiny", "gpt2", "wav2vec_features")
# Test networks (as TenSet/TLP); any task that also occurs in one of them is held out too.
HELD_OUT = ("resnet50", "mobilenet_v2", "bert_base", "bert_tiny")
SWEEP = "sweep"
# The layouts of 2-D convolutions in which a dataset's network tasks are collected: as PyTorch gives
# them (the layout the datasets began with) and as `tcl tune` compiles them
# (network_tuning_config.CONV_LAYOUT). A task in another layout is another task: another structural
# hash, another task directory.
DATASET_CONV_LAYOUTS = ("NCHW", "NHWC")
