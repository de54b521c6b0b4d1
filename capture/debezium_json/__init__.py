"""Debezium JSON-lines files (Debezium Server file output, Kafka topic dumps) into bronze.

Modules: :mod:`.source` (the source), :mod:`.formats` (the line formats it reads) and
:mod:`.offsets` (per-file offsets that follow a file across renames).
"""
