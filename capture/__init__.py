"""medallion capture layer."""
