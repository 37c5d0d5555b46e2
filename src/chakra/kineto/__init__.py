"""The Kineto front end: PyTorch profiler traces alone (no host execution trace) to Chakra ETs."""
