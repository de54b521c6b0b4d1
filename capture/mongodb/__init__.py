"""The MongoDB connector: a change-stream capture agent with a consistent snapshot (pymongo).

Modules: :mod:`.config` (its Debezium properties), :mod:`.position` (its bronze position
layout), :mod:`.settings` (what the agent reads off the config), :mod:`.records` (Debezium's
MongoDB records), and the agent: :mod:`.source` composed of :mod:`.agent`, :mod:`.snapshot` and
:mod:`.stream` (see docs/capture-mongodb.md). Only the agent's modules import pymongo; importing
this package, the config or the position imports no driver.
"""
