# memstream: one image for every command (`worker`, `api`, `migrate`, `publish`, `replay`).
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /src
# The dependencies exactly as locked (versions and hashes, `make lock`), in a layer of their own
# that a change to memstream's code does not rebuild.
COPY requirements.lock ./
RUN pip install --require-hashes --no-deps -r requirements.lock
COPY . .
# The client distribution (clients/python, with the JSON Schemas) and memstream, from the source.
RUN pip install --no-deps ./clients/python . \
    && pip check \
    && python -c "from memstream_client.contract.schemas import validator; validator('message-written.v1')" \
    && useradd --create-home --uid 10001 --shell /usr/sbin/nologin memstream

USER memstream
WORKDIR /home/memstream
EXPOSE 8080 6066
ENTRYPOINT ["memstream"]
CMD ["--help"]
