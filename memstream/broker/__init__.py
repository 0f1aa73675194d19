"""Everything memstream does with the broker outside the stream stages' own reads: building
clients from one set of client settings (``clients``), topics (``topics``), offsets and replay
(``offsets``), and consumer groups, their members and lag (``groups``)."""
