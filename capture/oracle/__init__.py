"""The Oracle connector: for now only its config model (:mod:`.config`) and source positions
(:mod:`.position`).

A ``oracle`` source validates, then the registry refuses to start it
(``NotBuiltError``); Debezium JSON files of this connector are read by
:mod:`capture.debezium_json`. A capture agent for it will live in this package. Importing it
imports no driver.
"""
