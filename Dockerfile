# obsctl-exporter (and the obsctl CLI) in a slim image. NVML comes from the host driver
# through the NVIDIA container toolkit; without it the exporter serves without GPU series.
FROM python:3.11-slim
WORKDIR /src
COPY pyproject.toml README.md ./
COPY obsctl ./obsctl
COPY exporters ./exporters
COPY rules ./rules
COPY dashboards ./dashboards
COPY baselining ./baselining
RUN pip install --no-cache-dir . && useradd --system obsctl
USER obsctl
EXPOSE 9835
ENTRYPOINT ["obsctl-exporter"]
