"""PyTorch front end. So far: loading host execution traces (``host``) and Kineto traces (``kineto``);
collection, linking and conversion are to come."""
