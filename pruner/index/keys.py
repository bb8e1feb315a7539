"""Compound keys: one zone bloom index over a tuple of columns (``--key a,b``).

A compound index is an ordinary ``bloomfilter.lance`` file whose "values" are the key's
tuples, each encoded as bytes by :func:`encode_tuples` and hashed as binary values are
(xxHash64, seed 0). The encoding is canonical and injective for the key's column types:

- per column, in key order, one tag byte: ``0x00`` for NULL (nothing follows), ``0x01`` for
  a value;
- after ``0x01``, a fixed-width value's bytes exactly as a single-column index hashes them
  (little-endian, at the column's width: :func:`pruner.hashing.hash_input_width`; a decimal
  its unscaled integer in 16 or 32 little-endian bytes, at the scale of the column's type,
  which the index records; a fixed-size binary its bytes), or a variable-width value's
  length as 8 bytes (little-endian) and then its bytes.

Read left to right, the types say how many bytes each part takes, so every byte string
decodes to at most one tuple: no two different tuples (NULLs and empty strings included)
encode alike. ``('a,b', 'c')`` and ``('a', 'b,c')`` differ in their first length.

Where it is stored: ``<table>/_pruner/<key>/bloomfilter.lance`` for a Parquet directory and
for a Lance dataset alike (Lance indexes one column, and its cleanup, compaction and index
optimisation leave the ``_pruner`` folder alone: ``tests/index/test_keys.py``). ``<key>`` is
the columns, each percent-quoted, joined by ``,``; a single column's folder is its quoted
name, so a key folder always holds a ``,`` and a column's never does.

The index binds to the table the way a Parquet index does: it records per fragment what
identifies the key columns' values (a Parquet file's identity; a Lance fragment's data files
that hold the key's fields, which Lance never rewrites in place) and a zone of a fragment
that changed since is stale, so its fragment is read whole.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, unquote

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pruner import storage
from pruner.discover import FileIdentity
from pruner.errors import InvalidParameterError
from pruner.hashing import hash_array, hash_input_width, plain_type
from pruner.index.fileformat import INDEX_FILE_NAME
from pruner.index.model import FragmentFile

__all__ = [
    "KEY_ENCODING",
    "KEY_TUPLE_LIMIT",
    "Key",
    "encode_tuples",
    "hash_tuples",
    "key_index_path",
    "key_tuples",
    "lance_fragment_file",
    "lance_key_files",
    "stored_keys",
]

KEY_ENCODING = "pruner-tuple-1"
"""The value encoding a compound index records: never probed with single values."""

KEY_TUPLE_LIMIT = 4096
"""Most tuples a conjunction's IN lists may make (their cross product) for a compound index
to be probed; past it the single-column indexes decide alone."""


def _binary(data: bytes) -> pa.Scalar:
    """``data`` as a ``large_binary`` scalar, made from buffers: ``pa.scalar`` of a Python
    value has pyarrow import pandas where it is installed (``pyarrow.pandas_compat``, 0.5-1.5
    s), which importing pruner must not cost."""
    offsets = pa.py_buffer(np.array([0, len(data)], np.int64).tobytes())
    return pa.Array.from_buffers(pa.large_binary(), 1, [None, offsets, pa.py_buffer(data)])[0]


_NULL = _binary(b"\x00")
_VALUE = _binary(b"\x01")
_NOTHING = _binary(b"")


@dataclass(frozen=True, slots=True)
class Key:
    """The columns of a compound key, in key order (two or more, all different)."""

    columns: tuple[str, ...]

    @classmethod
    def of(cls, columns: Sequence[str] | Key) -> Key:
        """A key of ``columns``.

        Raises:
            InvalidParameterError: fewer than two columns, or one named twice.
        """
        if isinstance(columns, Key):
            return columns
        names = tuple(columns)
        if len(names) < 2:
            raise InvalidParameterError(
                f"a compound key has two or more columns, not {len(names)}; index a single "
                "column with --column"
            )
        if len(set(names)) != len(names):
            raise InvalidParameterError(f"a compound key names each column once: {names}")
        return cls(names)

    @property
    def name(self) -> str:
        """The key as stored: each column percent-quoted, joined by ``,``."""
        return ",".join(quote(c, safe="") for c in self.columns)

    @property
    def shown(self) -> str:
        return "(" + ", ".join(self.columns) + ")"

    def types(self, schema: pa.Schema, where: str) -> list[pa.DataType]:
        """The key columns' plain types in ``schema``, once each is indexable.

        Raises:
            InvalidParameterError: a column is missing.
            UnsupportedTypeError: a column's type cannot be hashed.
        """
        found = []
        for column in self.columns:
            if column not in schema.names:
                raise InvalidParameterError(
                    f"column {column!r} of key {self.shown} is not in {where}; its columns "
                    f"are {', '.join(schema.names)}"
                )
            arrow_type = plain_type(schema.field(column).type)
            _width(arrow_type)  # raises UnsupportedTypeError with advice
            found.append(arrow_type)
        return found

    def describe(self, types: Sequence[pa.DataType]) -> str:
        """What a compound index records as its column: the key and the types it hashed."""
        return json.dumps({"key": list(self.columns), "types": [_canonical(t) for t in types]})

    def stale(self, recorded: str, schema: pa.Schema) -> str | None:
        """Why an index recording ``recorded`` (:meth:`describe`) cannot serve this key over
        a table of ``schema`` now, or None when it can."""
        try:
            found = json.loads(recorded)
            columns, types = list(found["key"]), [str(t) for t in found["types"]]
            if len(types) != len(columns):  # each column's type is checked below
                raise ValueError("a type for each column")
        except (ValueError, TypeError, KeyError):
            return "its record of the key is damaged; rebuild it"
        if columns != list(self.columns):
            return f"it indexes the key ({', '.join(map(str, columns))}); rebuild it"
        for column, hashed in zip(columns, types, strict=True):
            if column not in schema.names:
                return f"the table has no column {column} now"
            now = _canonical(schema.field(column).type)
            if now != hashed:
                return f"{column} is {now} now, but the index hashed it as {hashed}; rebuild it"
        return None

    def encode(self, table: pa.Table) -> pa.Array:
        """Each row's key tuple in ``table``, encoded (:func:`encode_tuples`)."""
        return encode_tuples([table.column(c) for c in self.columns])


def _part(values: pa.Array) -> pa.Array:
    """One column's part of each tuple's encoding (no nulls: a NULL is its tag alone)."""
    arrow_type = plain_type(values.type)
    if pa.types.is_dictionary(values.type):
        values = values.dictionary_decode()
    if values.type != arrow_type:
        values = values.cast(arrow_type)
    width = _width(arrow_type)
    if width:
        raw = pa.FixedSizeBinaryArray.from_buffers(
            pa.binary(width), len(values), values.buffers()[:2], offset=values.offset
        )
        payload = raw.cast(pa.large_binary())
    else:
        lengths = pc.fill_null(pc.binary_length(values), 0).to_numpy().astype("<u8")
        prefix = pa.FixedSizeBinaryArray.from_buffers(
            pa.binary(8), len(values), [None, pa.py_buffer(lengths)]
        )
        payload = pc.binary_join_element_wise(
            prefix.cast(pa.large_binary()), values.cast(pa.large_binary()), _NOTHING
        )
    tagged = pc.binary_join_element_wise(_VALUE, payload, _NOTHING)
    return pc.fill_null(tagged, _NULL)


def _width(arrow_type: pa.DataType) -> int:
    """Bytes a value of ``arrow_type`` takes in a tuple (0: variable width). A decimal is its
    unscaled integer (Arrow's little-endian 16 or 32 bytes; the scale is the type's, which
    the index records), a fixed-size binary its bytes; any other type as a single-column
    index hashes it.

    Raises:
        UnsupportedTypeError: neither a decimal, a fixed-size binary nor a type Lance hashes.
    """
    if pa.types.is_decimal(arrow_type):
        return arrow_type.bit_width // 8
    if pa.types.is_fixed_size_binary(arrow_type):
        return arrow_type.byte_width
    return hash_input_width(arrow_type)


def encode_tuples(columns: Sequence[pa.Array | pa.ChunkedArray]) -> pa.Array:
    """Row ``i`` of ``columns`` (arrays of one length, a key's columns in key order) as the
    bytes a compound index hashes: see the module's doc for the layout."""
    parts = [_part(_whole(values)) for values in columns]
    joined = pc.binary_join_element_wise(*parts, _NOTHING)
    assert joined.null_count == 0
    return joined


def _whole(values: pa.Array | pa.ChunkedArray) -> pa.Array:
    if isinstance(values, pa.ChunkedArray):
        return values.combine_chunks() if values.num_chunks != 1 else values.chunk(0)
    return values


def hash_tuples(columns: Sequence[pa.Array]) -> np.ndarray:
    """The hashes a compound index holds for the tuples of ``columns``."""
    hashes, _ = hash_array(encode_tuples(columns))
    return hashes


def key_index_path(table: storage.PathLike, key: Key) -> storage.Location:
    """Where the compound index of ``key`` of the table at ``table`` lives."""
    return storage.location(table) / "_pruner" / key.name / INDEX_FILE_NAME


def stored_keys(table: storage.PathLike) -> list[Key]:
    """The keys of the compound indexes stored with the table, in name order."""
    folder = storage.location(table) / "_pruner"
    if not storage.is_dir(folder):
        return []
    found = []
    for entry in sorted(storage.list_dir(folder)):
        if "," in entry and storage.is_file(folder / entry / INDEX_FILE_NAME):
            found.append(Key(tuple(unquote(part) for part in entry.split(","))))
    return found


def lance_fragment_file(fragment: Any, schema: Any, key: Key) -> tuple[str, FileIdentity]:
    """What identifies the key columns' values in a Lance fragment: the data files holding
    their fields (never rewritten in place; an update writes new ones), as the path and
    identity a compound index records for it."""
    fields = {_field_id(schema, c) for c in key.columns}
    files = sorted(
        (f.path, f.file_size_bytes or 0) for f in fragment.metadata.files if fields & set(f.fields)
    )
    overlays = getattr(fragment.metadata, "overlays", None)
    path = "|".join(p for p, _ in files) + (f"|overlays={overlays!r}" if overlays else "")
    return path, FileIdentity(sum(size for _, size in files), 0)


def _canonical(arrow_type: pa.DataType) -> str:
    """One name for the types whose values encode alike (:func:`pruner.hashing.hash_alike`)."""
    plain = plain_type(arrow_type)
    return str({pa.large_string(): pa.string(), pa.large_binary(): pa.binary()}.get(plain, plain))


def _field_id(schema: Any, column: str) -> int:
    field = schema.field(column)
    return int(field.id()) if callable(getattr(field, "id", None)) else int(field.id)


def key_tuples(values: Sequence[Sequence[Any]], types: Sequence[pa.DataType]) -> list[pa.Array]:
    """The cross product of each key column's ``values`` (at the columns' ``types``), as
    one array per column: what a conjunction fixing every column can match."""
    shape = [len(v) for v in values]
    picks = np.indices(shape).reshape(len(shape), -1)
    return [
        pa.array(list(v), plain_type(t)).take(pa.array(pick))
        for v, t, pick in zip(values, types, picks, strict=True)
    ]


def lance_key_files(ds: Any, fragments: list[Any], key: Key) -> list[FragmentFile]:
    """What binds a compound index to each of ``fragments``: the data files holding the
    key's fields (:func:`lance_fragment_file`)."""
    schema = ds.lance_schema
    return [
        FragmentFile(f.fragment_id, *lance_fragment_file(f, schema, key), f.metadata.physical_rows)
        for f in fragments
    ]
