"""The failure policy in one place: what a failure is (``classify``), retrying in place
(``inplace``), the durable retry tiers of stage records (``tiers``), and retrying an HTTP call
(``http``, which imports only httpx and the standard library: the client uses it too)."""
