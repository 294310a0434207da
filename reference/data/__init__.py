"""Datasets and their sources: the split, its hash, CSV files, and the registry of sources."""

from .dataset import (
    DataError,
    Dataset,
    LoadContext,
    csv_text,
    format_float,
    load_csv_pair,
    read_csv_table,
    split_label,
    write_csvs,
)
from .sources import SOURCES
from .wdbc import load_wdbc

__all__ = [
    "SOURCES",
    "DataError",
    "Dataset",
    "LoadContext",
    "csv_text",
    "format_float",
    "load_csv_pair",
    "load_wdbc",
    "read_csv_table",
    "split_label",
    "write_csvs",
]
