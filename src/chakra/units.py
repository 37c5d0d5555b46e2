"""Unit conversions, defined once: every module that converts time, bytes or FLOPs reads them here.

All are exact integers (a product or quotient with them stays exact where the value is an integer).

>>> 1_500 / NS_PER_US, 3 * BYTES_PER_GIB // BYTES_PER_GB
(1.5, 3)
"""

from __future__ import annotations

PS_PER_NS = 1_000
NS_PER_US = 1_000
NS_PER_MS = 1_000_000
NS_PER_S = 1_000_000_000
US_PER_MS = 1_000
US_PER_S = 1_000_000
#: Decimal gigabytes (bandwidths in GB/s, as ASTRA-sim's configurations give them).
BYTES_PER_GB = 1_000_000_000
#: Binary gibibytes (sizes in GiB).
BYTES_PER_GIB = 1 << 30
FLOPS_PER_TFLOPS = 1_000_000_000_000
#: A multiply-accumulate counts as two floating-point operations (the convention of FLOP counts).
FLOPS_PER_MAC = 2
