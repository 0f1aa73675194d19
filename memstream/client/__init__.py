"""memstream's client at its first import path: the implementation is the ``memstream-client``
distribution (``memstream_client``, which memstream depends on); this re-exports its names."""

from memstream_client import *  # noqa: F403
