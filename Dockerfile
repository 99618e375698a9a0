# The operator image the Helm chart runs (deploy/helm/aiplane, image.repository/tag): `aiplane run`.
# Not built in this repository's CI (no container engine there); every step is one that
# tests/integration/test_wheel.py proves: build the wheel, install it alone into a clean virtualenv.
#   docker build -t <registry>/aiplane:0.1.0 .

FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md LICENSE ./
COPY src ./src
COPY examples ./examples
RUN python -m pip install --no-cache-dir "build>=1.2" \
 && python -m build --wheel --outdir /dist .

FROM python:3.11-slim
COPY --from=build /dist/ /tmp/dist/
RUN python -m venv /opt/aiplane \
 && /opt/aiplane/bin/pip install --no-cache-dir /tmp/dist/aiplane-*.whl \
 && rm -rf /tmp/dist
# Non-root, the uid the chart's securityContext runs as; no home, no shell.
USER 65532:65532
ENV PATH=/opt/aiplane/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
# /metrics and /healthz, /readyz (aiplane run's defaults).
EXPOSE 8080 8081
ENTRYPOINT ["aiplane", "run"]
