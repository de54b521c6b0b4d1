"""medallion silver layer."""
