"""What the worker makes of records: dead letters and the summary stage's check records (the
public events' models and JSON Schemas are in ``memstream_client.contract``)."""
