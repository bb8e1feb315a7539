"""Probe kernels: the direct SBBF check against the bit-sliced layout, on a big index.

It builds in memory (nothing is cached on disk) an index of ``--zones`` filters of ``--bytes``
bytes (default 12,000 x 32 KiB, Lance's default size) by inserting ``--items`` random uint64
hashes per zone with ``sbbf.insert`` (default 8,192: the density Lance's defaults give), then:

* times building ``sbbf.SlicedFilters`` (the first build separately: it also pays for the
  first touch of fresh memory, which on a VM can cost more than the build itself), and the
  obvious way (unpackbits, transpose, packbits) on the first ``--baseline-zones`` zones;
* for each K of ``--values``, probes K values (half of them members of random zones, half
  random) against every zone, warm, best of ``--repeat`` runs:

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

import argparse
import os
import sys
import time
from collections.abc import Callable

import numpy as np

# Run as a script from a checkout whether or not pruner is installed into the venv.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from common import print_header  # bench/ is sys.path[0] when run as a script

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


def best_of(
    repeat: int, run: Callable[[np.ndarray], np.ndarray], hashes: np.ndarray
) -> tuple[float, np.ndarray]:
    """(best seconds of ``repeat`` runs of ``run(hashes)`` after a warm-up run, its result)."""
    result = run(hashes)
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = run(hashes)
        best = min(best, time.perf_counter() - t0)
    return best, result


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--zones", type=int, default=12_000, help="zones (default 12,000)")
    parser.add_argument("--bytes", type=int, default=32_768, help="bytes per filter (32 KiB)")
    parser.add_argument("--items", type=int, default=8192, help="hashes inserted per zone")
    parser.add_argument(
        "--values", default="1,10,100,1000", help="comma-separated K (default 1,10,100,1000)"
    )
    parser.add_argument("--repeat", type=int, default=5, help="runs per kernel, best kept")
    parser.add_argument("--threads", type=int, default=None, help="build threads (default: auto)")
    parser.add_argument("--no-loop", action="store_true", help="skip the per-value reference")
    parser.add_argument(
        "--baseline-zones", type=int, default=1000, help="zones for the unpackbits baseline"
    )
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    args.values = [int(v) for v in args.values.split(",")]
    if args.zones < 1 or args.repeat < 1 or args.items < 0 or min(args.values) < 0:
        parser.error("need zones >= 1, repeat >= 1, items >= 0, values >= 0")
    if args.bytes <= 0 or args.bytes % sbbf.BLOCK_BYTES:
        parser.error("bytes must be a positive multiple of 32")
    return args


def main() -> None:
    args = parse_args()
    print_header(np)
    zones, num_bytes = args.zones, args.bytes
    t0 = time.perf_counter()
    filters, members = make_filters(zones, num_bytes, args.items, args.seed)
    print(
        f"index: {zones:,} zones x {num_bytes:,} B = {filters.nbytes / 2**20:,.0f} MiB, "
        f"{args.items:,} hashes inserted per zone (made in {time.perf_counter() - t0:.1f} s)"
    )

    t0 = time.perf_counter()
    sliced = sbbf.SlicedFilters(filters, threads=args.threads)
    first_build = time.perf_counter() - t0
    builds = []
    for _ in range(args.repeat):
        del sliced
        t0 = time.perf_counter()
        sliced = sbbf.SlicedFilters(filters, threads=args.threads)
        builds.append(time.perf_counter() - t0)
    build = min(builds)
    print(
        f"sliced layout: {sliced.nbytes / 2**20:,.0f} MiB; build best of {args.repeat} "
        f"{build:.3f} s ({build / filters.nbytes * 1e9:.2f} ns per filter byte), "
        f"first build {first_build:.3f} s, all {', '.join(f'{b:.3f}' for b in builds)}"
    )

    if args.baseline_zones:
        part = filters[: args.baseline_zones]
        t0 = time.perf_counter()
        baseline = unpack_transpose_pack(part)
        seconds = time.perf_counter() - t0
        t0 = time.perf_counter()
        part_sliced = sbbf.SlicedFilters(part, threads=args.threads)
        part_seconds = time.perf_counter() - t0
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
    header = (
        f"{'K':>5} {'direct ms':>10} {'ns/pair':>7} {'sliced ms':>10} {'ns/pair':>7} "
        f"{'ratio':>6} {'any: direct':>11} {'sliced ms':>10} {'ratio':>6} {'loop ms':>9} "
        f"{'ns/pair':>7} {'build = pairs':>13}"
    )
    print()
    print(f"best of {args.repeat}, warm; ratio = direct / sliced (> 1.0: sliced is faster)")
    print(header)
    print("-" * len(header))
    identical = True
    for count in args.values:
        hashes = probe_hashes(count, members, rng)
        pairs = max(count * zones, 1)
        direct, expected = best_of(args.repeat, lambda h: sbbf.check(filters, h), hashes)
        fast, got = best_of(args.repeat, sliced.might_contain, hashes)
        direct_any, expected_any = best_of(
            args.repeat, lambda h: sbbf.check(filters, h).any(axis=0), hashes
        )
        fast_any, got_any = best_of(args.repeat, sliced.may_contain_any, hashes)
        identical &= np.array_equal(expected, got) and np.array_equal(expected_any, got_any)
        if args.no_loop:
            loop_text = f"{'-':>9} {'-':>7}"
        else:
            loop, old = best_of(min(args.repeat, 2), lambda h: check_per_value(filters, h), hashes)
            identical &= np.array_equal(expected, old)
            loop_text = f"{loop * 1e3:>9.3f} {loop / pairs * 1e9:>7.1f}"
        print(
            f"{count:>5} {direct * 1e3:>10.3f} {direct / pairs * 1e9:>7.1f} "
            f"{fast * 1e3:>10.3f} {fast / pairs * 1e9:>7.2f} {direct / fast:>6.1f} "
            f"{direct_any * 1e3:>11.3f} {fast_any * 1e3:>10.3f} {direct_any / fast_any:>6.1f} "
            f"{loop_text} {build / (direct / pairs):>13,.0f}",
            flush=True,
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
    hashes = probe_hashes(max(args.values), members, rng)
    before = index.zone_mask(hashes)
    t0 = time.perf_counter()
    index.prepare_probes()
    prepare = time.perf_counter() - t0
    warm, after = best_of(args.repeat, index.zone_mask, hashes)
    identical &= np.array_equal(before, after)
    print()
    print(
        f"ZoneIndex.zone_mask, K={len(hashes)}: prepare_probes() {prepare:.3f} s, "
        f"then {warm * 1e3:.3f} ms; same mask as before it: {np.array_equal(before, after)}"
    )
    print(f"identical results (direct, sliced, any, loop, ZoneIndex): {identical}")
    if not identical:
        sys.exit(1)


if __name__ == "__main__":
    main()
