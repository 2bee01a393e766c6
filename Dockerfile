# obsctl-exporter (and the obsctl CLI) in a slim image. NVML comes from the host driver
# through the NVIDIA container toolkit; without it the exporter serves without GPU series.
FROM python:3.11-slim
WORKDIR /src
COPY requirements/runtime.txt ./requirements/
# Every dependency at its locked version and sha256 (scripts/lock.sh), the build tools included,
# so obsctl itself is built without fetching anything.
RUN pip install --no-cache-dir --require-hashes -r requirements/runtime.txt
COPY pyproject.toml README.md ./
COPY obsctl ./obsctl
COPY exporters ./exporters
COPY rules ./rules
COPY dashboards ./dashboards
COPY baselining ./baselining
# .[kubernetes]: grpcio for GPU -> pod attribution from the kubelet's pod-resources socket.
# A fixed numeric uid, so Kubernetes' runAsNonRoot can verify it (deploy/kubernetes runs the loop's Jobs as it).
RUN pip install --no-cache-dir --no-deps --no-build-isolation '.[kubernetes]' && useradd --system --uid 65532 --user-group obsctl
USER 65532:65532
EXPOSE 9847
ENTRYPOINT ["obsctl-exporter"]
