"""The query API's routes, one module per resource, each an ``APIRouter`` named ``router``."""
