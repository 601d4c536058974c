# syntax=docker/dockerfile:1
# The controller image: `rebalancer run` as a non-root user on a read-only root filesystem.
# Build: docker build -t topology-rebalancer:0.1.0 .

FROM python:3.11-slim-bookworm AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
RUN python -m venv /opt/rebalancer
# Dependencies first, pinned with hashes, so a code change does not reinstall them.
COPY requirements.lock .
RUN /opt/rebalancer/bin/pip install --require-hashes --no-deps -r requirements.lock
COPY pyproject.toml README.md ./
COPY rebalancer rebalancer
RUN /opt/rebalancer/bin/pip install --no-deps . \
    && /opt/rebalancer/bin/python -m compileall -q /opt/rebalancer

FROM python:3.11-slim-bookworm
# The version is pyproject.toml's; a test keeps the two equal.
LABEL org.opencontainers.image.title="topology-rebalancer" \
      org.opencontainers.image.description="Moves pods that talk across zones or racks closer together, within PodDisruptionBudgets" \
      org.opencontainers.image.version="0.1.0" \
      org.opencontainers.image.licenses="Apache-2.0"
# Bytecode was compiled at build time; nothing is written under the read-only root at run time.
ENV PATH=/opt/rebalancer/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HOME=/tmp \
    MPLCONFIGDIR=/tmp
COPY --from=build /opt/rebalancer /opt/rebalancer
RUN groupadd --system --gid 65532 rebalancer \
    && useradd --system --uid 65532 --gid 65532 --no-create-home --shell /usr/sbin/nologin rebalancer
USER 65532:65532
EXPOSE 8080 8443
ENTRYPOINT ["rebalancer", "run"]
