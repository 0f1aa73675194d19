"""Taking memories out and bringing them back: the JSON Lines both sides share
(``lines.py``), reading them out page by page from every provider (``export.py``), and writing
them through an agent's provider, idempotently (``load.py``)."""
