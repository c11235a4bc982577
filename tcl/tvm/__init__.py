"""TVM integration: the only part of tcl that imports tvm (networks, collection, tuning)."""
