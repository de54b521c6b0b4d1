"""medallion gold layer."""
