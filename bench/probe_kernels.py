"""Probe kernels: the direct SBBF check against the bit-sliced layout, on a big index.

It builds in memory (nothing is cached on disk) an index of ``--zones`` filters of ``--bytes``
bytes (default 12,000 x 32 KiB, Lance's default size) by inserting ``--items`` random uint64
hashes per zone with ``sbbf.insert`` (default 8,192: the density Lance's defaults give), then:

* times building ``sbbf.SlicedFilters`` (the first build separately: it also pays for the
  first touch of fresh memory, which on a VM can cost more than the build itself), and the
  obvious way (unpackbits, transpose, packbits) on the first ``--baseline-zones`` zones;
* for each K of ``--values``, probes K values (half of them members of random zones, half
  random) against every zone, warm (each kernel's runs back to back), best of ``--repeat``:

  - ``direct``: ``sbbf.check(filters, hashes)`` -> (K, zones) bool;
  - ``sliced``: ``SlicedFilters.might_contain(hashes)`` -> the same array;
  - ``any``: which zones may hold any of the K values, ``check(...).any(0)`` against
    ``SlicedFilters.may_contain_any``;
  - ``loop`` (reference): the per-value loop ``sbbf.check`` was before the batch version;

  and prints ms, ns per (value, zone) pair and the ratios direct / sliced (> 1.0: sliced is
  faster), and how many direct pairs the build costs (the ski-rental price ZoneIndex uses);
* checks (untimed) that every kernel returned exactly the same answer.

Run it (from the project root)::

    .venv/bin/python bench/probe_kernels.py
    .venv/bin/python bench/probe_kernels.py --zones 1000 --bytes 4096 --items 1000 --repeat 3
"""

from __future__ import annotations

import functools
import sys

import common
import numpy as np
from common import Report, measure, timed

from pruner import sbbf
from pruner.index import ZoneIndex

ZONES_PER_INSERT = 500


def make_filters(
    zones: int, num_bytes: int, items: int, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """(zones, num_bytes) filters, and a sample of inserted hashes (the first of each zone)."""
    rng = np.random.default_rng(seed)
    filters = np.empty((zones, num_bytes), dtype=np.uint8)
    members = np.empty(zones, dtype=np.uint64)
    for first in range(0, zones, ZONES_PER_INSERT):
        count = min(ZONES_PER_INSERT, zones - first)
        hashes = rng.integers(0, 2**64 - 1, count * items, dtype=np.uint64, endpoint=True)
        bounds = np.arange(count + 1, dtype=np.int64) * items
        filters[first : first + count] = sbbf.insert(hashes, bounds, num_bytes)
        members[first : first + count] = hashes[bounds[:-1]] if items else 0
    return filters, members


def probe_hashes(count: int, members: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """``count`` hashes: half members of random zones, half random (almost surely absent)."""
    present = rng.choice(members, size=count // 2) if len(members) else members[:0]
    absent = rng.integers(0, 2**64 - 1, count - len(present), dtype=np.uint64, endpoint=True)
    return np.concatenate([present, absent])


def unpack_transpose_pack(filters: np.ndarray) -> np.ndarray:
    """The sliced layout the obvious way: one byte per bit, transpose, pack (the baseline)."""
    zones = filters.shape[0]
    padded = np.zeros((-(-zones // 64) * 64, filters.shape[1]), dtype=np.uint8)
    padded[:zones] = filters
    bits = np.unpackbits(padded, axis=1, bitorder="little")
    return np.ascontiguousarray(np.packbits(bits.T, axis=1, bitorder="little")).view("<u8")


def check_per_value(filters: np.ndarray, hashes: np.ndarray) -> np.ndarray:
    """``sbbf.check`` as it was before the batch version: a strided gather per value."""
    num_zones, num_bytes = filters.shape
    num_blocks = num_bytes // sbbf.BLOCK_BYTES
    result = np.empty((len(hashes), num_zones), dtype=bool)
    words = np.ascontiguousarray(filters).view("<u4").reshape(num_zones, num_blocks, 8)
    blocks = sbbf.block_of(hashes, num_blocks)
    masks = sbbf.masks(hashes)
    for k in range(len(hashes)):
        missing = np.bitwise_and(~words[:, blocks[k], :], masks[k])
        result[k] = ~missing.any(axis=1)
    return result


def main() -> None:
    made = common.parser(__doc__, repeat=5)
    made.add_argument("--zones", type=int, default=12_000, help="zones (default 12,000)")
    made.add_argument("--bytes", type=int, default=32_768, help="bytes per filter (32 KiB)")
    made.add_argument("--items", type=int, default=8192, help="hashes inserted per zone")
    made.add_argument("--values", default="1,10,100,1000", help="comma-separated K")
    made.add_argument("--threads", type=int, default=None, help="build threads (default: auto)")
    made.add_argument("--no-loop", action="store_true", help="skip the per-value reference")
    made.add_argument("--baseline-zones", type=int, default=1000, help="zones for unpackbits")
    made.add_argument("--seed", type=int, default=7)
    args = common.parse(made, np)
    values = [int(v) for v in args.values.split(",")]
    if args.zones < 1 or args.items < 0 or min(values) < 0:
        made.error("need zones >= 1, items >= 0, values >= 0")
    if args.bytes <= 0 or args.bytes % sbbf.BLOCK_BYTES:
        made.error("bytes must be a positive multiple of 32")
    zones, num_bytes = args.zones, args.bytes
    seconds, (filters, members) = timed(
        lambda: make_filters(zones, num_bytes, args.items, args.seed)
    )
    print(
        f"index: {zones:,} zones x {num_bytes:,} B = {filters.nbytes / 2**20:,.0f} MiB, "
        f"{args.items:,} hashes inserted per zone (made in {seconds:.1f} s)"
    )

    def sliced_of(part: np.ndarray) -> sbbf.SlicedFilters:
        return sbbf.SlicedFilters(part, threads=args.threads)

    first_build, sliced = timed(lambda: sliced_of(filters))
    del sliced  # one layout in memory at a time
    builds = measure({"build": lambda _: sliced_of(filters)}, repeat=args.repeat, warmup=0)
    sliced = builds["build"].answer
    build = builds["build"].best() / 1000
    print(
        f"sliced layout: {sliced.nbytes / 2**20:,.0f} MiB; build best of {args.repeat} "
        f"{build:.3f} s ({build / filters.nbytes * 1e9:.2f} ns per filter byte), first build "
        f"{first_build:.3f} s, all {', '.join(f'{b:.3f}' for b in builds['build'].seconds)}"
    )

    if args.baseline_zones:
        part = filters[: args.baseline_zones]
        seconds, baseline = timed(lambda: unpack_transpose_pack(part))
        part_seconds, part_sliced = timed(lambda: sliced_of(part))
        same = np.array_equal(baseline, part_sliced.bits)
        print(
            f"baseline unpackbits/transpose/packbits on the first {len(part):,} zones: "
            f"{seconds:.3f} s ({seconds / part.nbytes * 1e9:.1f} ns per filter byte) vs "
            f"SlicedFilters {part_seconds:.3f} s, ratio {seconds / part_seconds:.0f}; "
            f"same bits: {same}"
        )
        if not same:
            sys.exit(1)
        del baseline, part_sliced

    rng = np.random.default_rng(args.seed + 1)
    identical = True
    lines = []
    for count in values:
        hashes = probe_hashes(count, members, rng)
        pairs = max(count * zones, 1)
        kernels = {
            "direct": functools.partial(sbbf.check, filters),
            "sliced": sliced.might_contain,
            "any direct": lambda h: sbbf.check(filters, h).any(axis=0),
            "any sliced": sliced.may_contain_any,
        }
        # Each kernel alone, back to back, warm (as it runs when probing): taking turns, a
        # kernel would run after the others had pushed its data out of the CPU's caches.
        got = {name: measure({name: k}, [hashes], args.repeat)[name] for name, k in kernels.items()}
        ms = {name: case.best() for name, case in got.items()}
        identical &= np.array_equal(got["direct"].answer, got["sliced"].answer)
        identical &= np.array_equal(got["any direct"].answer, got["any sliced"].answer)
        loop = ["-", "-"]
        if not args.no_loop:
            reference = {"loop": functools.partial(check_per_value, filters)}
            old = measure(reference, [hashes], min(args.repeat, 2))["loop"]
            identical &= np.array_equal(got["direct"].answer, old.answer)
            loop = [f"{old.best():.3f}", f"{old.best() / 1e3 / pairs * 1e9:.1f}"]
        direct = ms["direct"] / 1e3
        lines.append(
            [
                str(count),
                f"{ms['direct']:.3f}",
                f"{direct / pairs * 1e9:.1f}",
                f"{ms['sliced']:.3f}",
                f"{ms['sliced'] / 1e3 / pairs * 1e9:.2f}",
                f"{ms['direct'] / ms['sliced']:.1f}",
                f"{ms['any direct']:.3f}",
                f"{ms['any sliced']:.3f}",
                f"{ms['any direct'] / ms['any sliced']:.1f}",
                *loop,
                f"{build / (direct / pairs):,.0f}",
            ]
        )
    Report().table(
        f"Best of {args.repeat}, warm; ratio = direct / sliced (> 1.0: sliced is faster)",
        [
            "K",
            "direct ms",
            "ns/pair",
            "sliced ms",
            "ns/pair",
            "ratio",
            "any: direct",
            "sliced ms",
            "ratio",
            "loop ms",
            "ns/pair",
            "build = pairs",
        ],
        lines,
    )
    print(
        "(build = pairs: direct (value, zone) pairs probed in the time of one build, at that "
        "K's direct speed; per filter byte: divide by the index's bytes)"
    )

    # The same through ZoneIndex: its policy, then prepare_probes().
    index = ZoneIndex(
        column="bench",
        items=args.items,
        probability=0.00057,
        fragment_id=np.zeros(zones, dtype=np.uint64),
        zone_start=np.arange(zones, dtype=np.uint64) * args.items,
        zone_length=np.full(zones, args.items, dtype=np.uint64),
        has_null=np.zeros(zones, dtype=bool),
        filter_data=filters,
    )
    hashes = probe_hashes(max(values), members, rng)
    before = index.zone_mask(hashes)
    prepare, _ = timed(index.prepare_probes)
    warm = measure({"mask": index.zone_mask}, [hashes], args.repeat)["mask"]
    identical &= np.array_equal(before, warm.answer)
    print(
        f"\nZoneIndex.zone_mask, K={len(hashes)}: prepare_probes() {prepare:.3f} s, "
        f"then {warm.best():.3f} ms; same mask as before it: {np.array_equal(before, warm.answer)}"
    )
    print(f"identical results (direct, sliced, any, loop, ZoneIndex): {identical}")
    if not identical:
        sys.exit(1)


if __name__ == "__main__":
    main()
