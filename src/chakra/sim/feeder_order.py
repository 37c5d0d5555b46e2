"""The order in which ASTRA-sim's Chakra feeder hands out nodes freed together.

ASTRA-sim's custom collectives (:mod:`chakra.sim.custom`) issue, whenever a node finishes, every node
it freed, in the iteration order of the feeder's ``std::unordered_set`` of free nodes (FeederV3's
dependency resolver, built with GCC 12's libstdc++): not by id. The order decides which of several
identical receives takes a message first and in which order messages queue on a link, so this
module reproduces it:

* a libstdc++ unordered container of ``uint64`` keys hashes a key to itself, so a key lives in
  bucket ``key % bucket_count``; its elements form one list in which each bucket's elements are
  contiguous; a key is inserted at the front of its bucket, or, in an empty bucket, at the front of
  the whole list; iteration walks the list;
* an insert that finds as many elements as buckets first rehashes to the next bucket count
  (:data:`BUCKET_COUNTS`), re-inserting the elements in list order by the same rule;
* the resolver files every node and its dependencies (data and control, in that order, through a
  temporary set) into a map node -> parents and a map node -> children, then frees the nodes without
  parents in the first map's order; a finished node frees its children in its set of children's order.

Example:
    >>> free = HashedSet()
    >>> for key in (5, 7, 20): free.insert(key)
    >>> list(free)  # 20 % 13 == 7: it joins 7's bucket at its front
    [20, 7, 5]
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from chakra.errors import ChakraInputError

#: Bucket counts of a libstdc++ (GCC 12) unordered container of uint64 keys that grows from empty by
#: single inserts, measured: 1 when empty, then each count when the insert of one element more than
#: the previous count rehashes it.
BUCKET_COUNTS = (
    1, 13, 29, 59, 127, 257, 541, 1109, 2357, 5087, 10273, 20753, 42043, 85229, 172933, 351061, 712697,
    1447153, 2938679, 5967347,
)  # fmt: skip


class HashedSet:
    """A libstdc++ ``std::unordered_set<uint64_t>``'s iteration order under inserts and erases (the
    module docstring's rules)."""

    __slots__ = ("_buckets", "_count", "_growth", "_order")

    def __init__(self) -> None:
        self._growth = 0  # index into BUCKET_COUNTS
        self._order: list[int] = []  # non-empty buckets, in list order
        self._buckets: dict[int, list[int]] = {}  # bucket -> its keys, front first
        self._count = 0

    def insert(self, key: int) -> None:
        """``insert(key)``: nothing when present."""
        bucket = self._buckets.get(key % BUCKET_COUNTS[self._growth])
        if bucket is not None and key in bucket:
            return
        if self._growth == 0 or self._count == BUCKET_COUNTS[self._growth]:
            self._rehash()
        self._place(key)
        self._count += 1

    def erase(self, key: int) -> None:
        """``erase(key)``: nothing when absent; the others keep their order."""
        index = key % BUCKET_COUNTS[self._growth]
        bucket = self._buckets.get(index)
        if bucket is None or key not in bucket:
            return
        bucket.remove(key)
        self._count -= 1
        if not bucket:
            del self._buckets[index]
            self._order.remove(index)

    def copy(self) -> HashedSet:
        """A copy iterating in the same order with the same buckets (the copy constructor's)."""
        twin = HashedSet()
        twin._growth, twin._count, twin._order = self._growth, self._count, list(self._order)
        twin._buckets = {index: list(keys) for index, keys in self._buckets.items()}
        return twin

    def __iter__(self) -> Iterator[int]:
        for index in self._order:
            yield from self._buckets[index]

    def __len__(self) -> int:
        return self._count

    def _place(self, key: int) -> None:
        index = key % BUCKET_COUNTS[self._growth]
        bucket = self._buckets.get(index)
        if bucket is None:
            self._buckets[index] = [key]
            self._order.insert(0, index)
        else:
            bucket.insert(0, key)

    def _rehash(self) -> None:
        if self._growth + 1 == len(BUCKET_COUNTS):
            raise ChakraInputError(
                f"more than {BUCKET_COUNTS[-1]:,} nodes free at once in one custom algorithm's file",
                hint="split the algorithm: ASTRA-sim's issue order is modelled up to this size",
            )
        keys = list(self)
        self._growth += 1
        self._order, self._buckets = [], {}
        for key in keys:
            self._place(key)


class FeederOrder:
    """One ET's dependency resolver as FeederV3 builds it: the nodes free at the start (a set to copy
    for each run) and each node's children in the order a finished node frees them.

    ``ids`` are the node ids in file order, ``parents`` each node's data then control dependencies.

    >>> order = FeederOrder([0, 1, 2], [[], [0], [0]])
    >>> list(order.free_at_start), order.children[0]
    ([0], [2, 1])
    """

    def __init__(self, ids: Sequence[int], parents: Sequence[Sequence[int]]):
        parents_of: dict[int, HashedSet] = {}  # child_map_parent: its keys' order matters
        keys = HashedSet()
        children_of: dict[int, HashedSet] = {}  # parent_map_child

        def allocate(node: int) -> None:
            if node not in parents_of:
                parents_of[node], children_of[node] = HashedSet(), HashedSet()
                keys.insert(node)

        for node, deps in zip(ids, parents, strict=True):
            allocate(node)
            temporary = HashedSet()
            for parent in deps:
                temporary.insert(parent)
            for parent in temporary:
                allocate(parent)
                parents_of[node].insert(parent)
                children_of[parent].insert(node)
        self.free_at_start = HashedSet()
        for node in keys:
            if not len(parents_of[node]):
                self.free_at_start.insert(node)
        self.children = {node: list(children) for node, children in children_of.items()}
