"""Parquet files written with the format's own bloom filters, and pruner indexes made
from such files' filters."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from pruner import sbbf, storage
from pruner.discover import arrow_schema
from pruner.hashing import plain_type
from pruner.index.model import ZoneIndex
from pruner.index.native.filters import native_index


def write_parquet(
    table: pa.Table,
    path: storage.PathLike,
    columns: list[str],
    *,
    items: int = 8192,
    probability: float = 0.00057,
    **options: Any,
) -> None:
    """Write ``table`` as one Parquet file with the format's own bloom filters on
    ``columns``, through pyarrow, sized like pruner's zones: row groups of ``items`` rows,
    each filter sized for ``items`` distinct values at false-positive ``probability`` (the
    defaults of ``pruner index build``). Every engine that reads Parquet bloom filters can
    use them, and pruner prunes on them without an index of its own.

    ``options`` go to ``pyarrow.parquet.write_table``.

    Raises:
        InvalidParameterError: a column is not in ``table``.
        UnsupportedTypeError: pruner cannot probe a filter of that column's type.
    """
    import pyarrow.parquet as pq

    from pruner.errors import InvalidParameterError
    from pruner.hashing import hash_input_width

    for column in columns:
        if column not in table.schema.names:
            raise InvalidParameterError(
                f"column {column!r} is not in the table; its columns are "
                f"{', '.join(table.schema.names)}"
            )
        arrow_type = plain_type(table.schema.field(column).type)
        if not (pa.types.is_decimal(arrow_type) or pa.types.is_fixed_size_binary(arrow_type)):
            hash_input_width(arrow_type)  # probed in their Parquet encoding
    if items <= 0 or not 0 < probability < 1:
        raise InvalidParameterError("items must be positive and probability between 0 and 1")
    pq.write_table(
        table,
        path,
        row_group_size=items,
        bloom_filter_options={c: {"ndv": items, "fpp": probability} for c in columns},
        **options,
    )


def index_from_filters(directory: storage.PathLike, column: str) -> ZoneIndex:
    """A pruner index of ``column`` over a Parquet directory, made from its files' own
    filters without reading any data: one zone per row group, its filter the file's bitset
    (a row group without a usable one gets a filter no probe rules out). The index records
    that its values were hashed in Parquet's plain encoding (``value_encoding``
    ``"parquet"``, and ``value_type`` where that differs in bytes from the column's own), so
    it is never probed in Lance's.

    Raises:
        InvalidParameterError: not a directory of Parquet files, or no file has a usable
            filter for ``column``.
    """
    from pruner.discover import parquet_names, read_parquet_file
    from pruner.errors import InvalidParameterError
    from pruner.hashing import hash_alike
    from pruner.index.model import FragmentFile

    root = storage.location(directory)
    names = parquet_names(root) if storage.is_dir(root) else []
    if not names:
        raise InvalidParameterError(f"no *.parquet files under {root}")
    files = {fid: read_parquet_file(root / name, name) for fid, name in enumerate(names)}
    schema = arrow_schema(files[0].metadata)
    if column not in schema.names:
        raise InvalidParameterError(
            f"column {column!r} is not in {files[0].path}; its columns are "
            f"{', '.join(schema.names)}"
        )
    found = native_index(files, schema, column)
    if found is None:
        raise InvalidParameterError(
            f"no file under {root} has a Parquet bloom filter on {column!r} that pruner can "
            "probe; build the index from the data instead (without --from-parquet-filters)"
        )
    (fragment_id, zone_start, zone_length, has_null, filters), value_type = found
    data = filters.whole_filters()
    column_type = schema.field(column).type
    probability = max(
        sbbf.fpp_at(float(rows), float(len(bitset)))
        for rows, bitset in zip(zone_length.tolist(), data, strict=True)
    )
    return ZoneIndex(
        column=column,
        items=int(zone_length.max()),
        probability=min(probability, 0.999999),
        fragment_id=fragment_id,
        zone_start=zone_start,
        zone_length=zone_length,
        has_null=has_null,
        filter_data=data,
        files=[
            FragmentFile(fid, file.relative, file.identity, file.rows)
            for fid, file in sorted(files.items())
        ],
        value_type=None if hash_alike(column_type, value_type) else value_type,
        value_encoding="parquet",
    )
