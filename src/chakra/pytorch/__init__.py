"""PyTorch front end: load host execution traces (more to come: Kineto traces, linking, conversion)."""
