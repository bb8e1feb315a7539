"""Engine adapters (DuckDB, DataFusion, Spark), installed as ``pruner.adapters``.

Each adapter imports its engine inside the functions that need it, so that the core imports
with no engine installed.
"""
