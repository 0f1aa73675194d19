"""Durable storage: the SQL schema and the message store (MySQL/MariaDB or SQLite)."""
