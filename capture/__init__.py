"""Capture sources: one package per connector, listed in :mod:`capture.registry`.

A source reads change records, classifies them (:func:`bronze.envelope.classify`), gives each an
order-preserving position (:class:`bronze.positions.PositionResolver`) and hands batches to the
landing agent, which commits them to bronze and only then calls :meth:`acknowledge`.

Adding a source
---------------
Subclass :class:`capture.base.CaptureSource`, set its class flags, implement ``open`` and
``read_batch``, give it a config model (``capture/<connector>/config.py``) and add one
``Connector(model, loader)`` line to ``CONNECTORS`` in :mod:`capture.registry`, whose loader
imports your module (and its driver) lazily. A connector of its own also declares, in its package
``capture/<connector>/``: its bronze position layout (``position.py``, a
:class:`bronze.position_base.Position` registered in :data:`bronze.positions.POSITION_TYPES`,
whose ``SOURCE_BLOCK`` describes its Debezium ``source`` fields) and, for reconciliation, the
:class:`capture.current_state.CurrentStateReader` methods on its agent. A skeleton that reads
from a list of Debezium values:

>>> from bronze.batch import BatchBuilder
>>> from bronze.envelope import ConnectRecord, classify
>>> from bronze.positions import PositionResolver
>>> from capture.base import CaptureSource, SourceBatch
>>> class ListSource(CaptureSource):
...     KIND = "list"
...     REPLAYABLE = True          # re-reading from an offset gives the same records
...     def __init__(self, name, values):
...         super().__init__(name)
...         self.values, self.next = values, 0
...     def open(self, offset):
...         self.next = 0 if offset is None else offset["next"]
...         self.resolver = PositionResolver("postgresql")
...     def read_batch(self, *, max_events, max_transaction_events, until=None):
...         batch = BatchBuilder(self.name)
...         for value in self.values[self.next:self.next + max_events]:
...             event = classify(ConnectRecord(key={"id": value["after"]["id"]}, value=value))
...             batch.add_event(event, self.resolver.for_data(value["source"]),
...                             key_json=None, value_json=None, key_schema_id=None,
...                             value_schema_id=None, origin=f"list:{self.next}",
...                             capture_ts=None, tx_id=None, source_partition=None)
...             self.next += 1
...         return SourceBatch(batch, {"next": self.next}, self.next >= len(self.values))
>>> source = {"connector": "postgresql", "name": "demo", "lsn": 100, "txId": 7,
...           "sequence": '["90", "100"]'}
>>> values = [{"op": "c", "before": None, "after": {"id": 1}, "source": source}]
>>> src = ListSource("demo", values)
>>> src.open(None)
>>> batch = src.read_batch(max_events=10, max_transaction_events=10)
>>> (len(batch.builder), batch.offset, batch.exhausted)
(1, {'next': 1}, True)
"""
