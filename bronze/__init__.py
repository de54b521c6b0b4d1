"""medallion bronze layer."""
