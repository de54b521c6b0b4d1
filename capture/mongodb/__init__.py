"""The MongoDB connector: for now only its source positions (:mod:`.position`).

Debezium JSON files of this connector are read by :mod:`capture.debezium_json`; a capture agent
for it will live in this package. Importing it imports no driver.
"""
