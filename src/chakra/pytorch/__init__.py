"""PyTorch front end. So far: ``collect`` (record host + device traces), ``host`` and ``kineto``
(load them), ``link`` (join them); conversion to Chakra ETs is to come."""
