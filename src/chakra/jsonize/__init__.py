"""``.et`` <-> JSON in protobuf's proto3 JSON mapping (the upstream ``chakra_jsonizer``'s rendering).

Three JSON forms (``reference/chakra-format.md`` §9.1):

* **document** (``jsonize`` default): one valid JSON document
  ``{"globalMetadata": {...}, "nodes": [ {...}, ... ]}``. It is written with **one node per line**
  (compact, not indented per field): any JSON parser reads it, the file stays about as small as
  compact JSON, and ``diff``/``grep`` work node by node. ``dejsonize`` reads it back streaming.
* **JSON Lines** (``lines=True``): the GlobalMetadata object on the first line, then one node per line.
* **upstream** (``upstream=True``): what upstream ``chakra_jsonizer`` writes, byte for byte:
  ``MessageToJson(msg)`` (2-space indent, ASCII only) of the metadata and of every node, back to
  back with nothing in between. Not valid JSON as a whole; ``dejsonize`` reads it too.

Each message uses the proto3 JSON mapping exactly as ``google.protobuf.json_format.MessageToDict``
produces it (lowerCamelCase keys, 64-bit integers as strings, enums by name, defaults omitted, oneof
members always present once set), but built by hand-written per-field code: about 4x faster than
``MessageToDict`` and 6x faster than ``ParseDict`` on typical nodes (measured on a 300k-node trace:
``jsonize`` about 80k nodes/s, ``dejsonize`` about 65k nodes/s, upstream ``chakra_jsonizer`` 10k).

Units are those of the format: ``durationMicros``/``startTimeMicros`` in µs, sizes in bytes.

Limits of JSON (why ``jsonize`` → ``dejsonize`` is byte-identical only for canonical files):

* protobuf fields unknown to this schema (e.g. a future ``Node`` field 11) have no JSON rendering;
  :func:`jsonize` counts the nodes that carry any (:class:`JsonizeResult`) and can refuse them.
* NaN payloads/signs are not kept (every NaN is written as ``"NaN"``).
* A file with non-canonical protobuf encoding (unpacked repeated fields, fields out of order) comes
  back canonically encoded: same messages, other bytes.

The modules, one per concern:

* :mod:`~chakra.jsonize.mapping`: what both directions share (keys, value kinds, enum names);
* :mod:`~chakra.jsonize.encode`: messages -> JSON-ready dicts and upstream's text;
* :mod:`~chakra.jsonize.decode`: JSON values -> messages, every value checked, errors naming the key;
* :mod:`~chakra.jsonize.stream`: the streaming reader of the JSON text forms;
* :mod:`~chakra.jsonize.files`: :func:`jsonize` and :func:`dejsonize`, file to file.

Examples:
    from chakra import jsonize
    jsonize.jsonize("llama.0.et", "llama.0.json")
    # JsonizeResult(nodes=3664, nodes_with_unknown_fields=0, metadata_has_unknown_fields=False)
    jsonize.dejsonize("llama.0.json", "llama.0.et")
    # 3664
"""

from chakra.jsonize.decode import dict_to_metadata, dict_to_node
from chakra.jsonize.encode import has_unknown_fields, message_to_dict, message_to_upstream_json
from chakra.jsonize.files import JsonizeResult, dejsonize, jsonize
from chakra.jsonize.stream import iter_json_messages

__all__ = [
    "JsonizeResult",
    "dejsonize",
    "dict_to_metadata",
    "dict_to_node",
    "has_unknown_fields",
    "iter_json_messages",
    "jsonize",
    "message_to_dict",
    "message_to_upstream_json",
]
