# Types of the C module src/chakra/_kahn.c (Kahn's topological order over arrays; see chakra/graph.py).
from typing import Any

def kahn_order(child_ptr: Any, child_pos: Any, indegree: Any, key: Any) -> bytes: ...
