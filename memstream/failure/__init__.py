"""The failure policy in one place: what a failure is (``classify``), retrying in place
(``inplace``), the durable retry tiers of stage records (``tiers``), and describing an HTTP
server's answer (``http``; retrying an HTTP call is ``memstream_client.retry``, which the API
client uses too)."""
