"""Faust tables. The history stage keeps no table state: MySQL is the record and Redis is
derived from it, so nothing here needs a changelog to survive a rebalance."""
