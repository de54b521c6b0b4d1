"""MongoDB (not built yet): only its config model exists, in :mod:`.config`.

A ``mongodb`` source validates, then the registry refuses to start it (``NotBuiltError``);
land its Debezium output with a ``debezium_json`` source meanwhile. The agent will live here.
"""
