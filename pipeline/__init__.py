"""medallion pipeline layer."""
