"""The ``kafka`` source: Debezium's Kafka topics into bronze, exactly once (docs/kafka.md)."""
