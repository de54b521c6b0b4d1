"""A model of a MongoDB collection and of Debezium's MongoDB connector, for silver's tests.

No MongoDB server runs on the test machines. The model keeps the ground-truth documents of one
collection under MongoDB's documented write semantics (``collection``), describes every change
in each encoding MongoDB uses for it (oplog update, change-stream update description), and
writes the records Debezium's code would write for it (``debezium``, with ``jsonwriter``
standing in for the Java driver's ``JsonWriter``). ``history`` strings random writes together;
``bson`` holds the typed values and reads silver's canonical Extended JSON back independently.
``replset`` puts collections in a replica set (cluster time, an oplog with both images,
transactions, change events, snapshot reads, a truncated history) and ``wire`` serves it over
the MongoDB wire protocol, so the capture agent runs with the real pymongo against it.
"""
