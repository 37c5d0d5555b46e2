"""The MSCCL front end: collective algorithms as MSCCLang compiles them (MSCCL's XML programs) ->
the per-rank Chakra ETs custom collectives run (:mod:`~chakra.msccl.convert`).

Example:
    conversion = convert_msccl("allreduce_ring.xml", "out/ring", size_bytes=1 << 20)
"""

from __future__ import annotations

from chakra.msccl.convert import MscclConversion, convert_msccl

__all__ = ["MscclConversion", "convert_msccl"]
