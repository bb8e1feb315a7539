"""Which casts of an indexed column a term may still be probed through.

``CAST(c AS T) = 5`` is probed as ``c = 5`` only when the cast is one-to-one on every value
of c's type and never fails or wraps: then the rows it keeps are exactly those with c = 5.
Any other cast (narrower, signed to unsigned, int64 to DOUBLE) must leave the term unused,
or a row the engine keeps (a wrapped or rounded value equal to 5) would be pruned away.
The expectations are written from that rule, type by type, not read from the code
(mutation testing of conditions.py found them unguarded; docs/mutation.md).
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from pruner.analyzer import analyze

SIGNED = {"TINYINT": 8, "SMALLINT": 16, "INTEGER": 32, "BIGINT": 64, "HUGEINT": 128}
UNSIGNED = {"UTINYINT": 8, "USMALLINT": 16, "UINTEGER": 32, "UBIGINT": 64, "UHUGEINT": 128}
TYPES = [
    pa.int8(),
    pa.int16(),
    pa.int32(),
    pa.int64(),
    pa.uint8(),
    pa.uint16(),
    pa.uint32(),
    pa.uint64(),
    pa.float32(),
    pa.float64(),
    pa.string(),
    pa.date32(),
]
CASTS = [*SIGNED, *UNSIGNED, "DOUBLE", "VARCHAR", "DATE"]


def _lossless(arrow_type: pa.DataType, cast: str) -> bool:
    if pa.types.is_integer(arrow_type):
        width = arrow_type.bit_width
        signed = pa.types.is_signed_integer(arrow_type)
        if cast in SIGNED:  # every value fits when the target is wider (or as wide, signed)
            return SIGNED[cast] > width or (SIGNED[cast] == width and signed)
        if cast in UNSIGNED:  # negative values do not fit an unsigned type
            return not signed and UNSIGNED[cast] >= width
        if cast == "DOUBLE":  # a double holds every integer of up to 53 bits exactly
            return width <= 32
        return False
    if cast == "DOUBLE":
        return arrow_type == pa.float32()
    if cast == "VARCHAR":
        return pa.types.is_string(arrow_type)
    if cast == "DATE":
        return pa.types.is_date32(arrow_type)
    return False


@pytest.mark.parametrize("arrow_type", TYPES, ids=str)
def test_a_term_is_probed_through_a_cast_only_when_it_is_lossless(arrow_type: pa.DataType) -> None:
    schemas = {"t": pa.schema([("c", arrow_type)])}
    for cast in CASTS:
        analysis = analyze(f"SELECT * FROM t WHERE CAST(c AS {cast}) = 5", schemas, "duckdb")
        predicate = str(analysis.scans[0].predicate)
        used = predicate == "c = 5"
        assert used == _lossless(arrow_type, cast), (str(arrow_type), cast, predicate)
        if not used:
            assert predicate.startswith("UNKNOWN("), (str(arrow_type), cast, predicate)
