"""The Oracle connector: for now only its config model and source positions.

Modules: :mod:`.config` (its Debezium properties) and :mod:`.position` (its bronze position
layout). Debezium JSON files of this connector are read by :mod:`capture.debezium_json`; a
capture agent for it will live in this package. Importing it imports no driver.
"""
